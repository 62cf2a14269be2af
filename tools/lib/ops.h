/*
 * ops.h - the posted operations (Receive, Send, RDMA Read, RDMA Write) as
 * the tools name them in messages, with the NDKPI call that posts each, and
 * the checks every tool makes on a post's result and on its completion.
 */
#ifndef TC_OPS_H
#define TC_OPS_H

#include <ndk/ndk.h>

/* "RDMA Write", "Send", ...; "operation" for a type no tool posts. */
const char *tc_op_name(NDK_OPERATION_TYPE type);
/* The call that posts it: "NdkWrite", "NdkSend", ... */
const char *tc_op_call(NDK_OPERATION_TYPE type);

/* A post that returned STATUS_PENDING: a library problem, since no NDKPI
 * post may pend (it queues, or fails inline). */
void tc_check_post_not_pending(const char *role, NDK_OPERATION_TYPE type, NTSTATUS st);

/* A completion of the operation `type` posted on the QP whose context is
 * qp_context: its QPContext must be that, and a successful one's Type must
 * be the operation's; each mismatch is a library problem (label prefixes
 * the messages, e.g. "[3] "). */
void tc_check_completion(const char *role, const char *label, NDK_OPERATION_TYPE type,
                         const NDK_RESULT_EX *r, const void *qp_context);

#endif
