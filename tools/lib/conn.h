/*
 * conn.h - one connection as the tools make it: its objects (CQs, PD, QP,
 * connector, registered buffers), the steps of NDKPI's connection model
 * (connect, complete, accept, reject, disconnect) each finished the
 * documented way, the wake-ups of a thread waiting on it, and closing it
 * all, successors first, with the callback rules checked at the end.
 */
#ifndef TC_CONN_H
#define TC_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "lib/adapter.h"
#include "lib/addr.h"
#include "lib/calls.h"
#include "lib/cqwait.h"
#include "lib/mr.h"

#define TC_CONN_MRS 6

struct tc_qp_shape {
    ULONG cq_depth;      /* the CQ; with recv_cq_depth, the initiator queue's */
    ULONG recv_cq_depth; /* a receive CQ of its own; 0: one CQ for both */
    ULONG rq_depth, sq_depth;
    ULONG rq_sge, sq_sge; /* 0 means 1 */
    ULONG inline_size;
};

/* What the callbacks use; owned by the calls, so it outlives a late one. */
struct tc_conn_events {
    struct tc_waker waker;      /* CQ notifications and the disconnect event */
    struct tc_completion *gone; /* the peer's disconnect event */
};

struct tc_conn {
    struct tc_adapter *adapter;
    const char *role;
    unsigned num; /* shown as "[num] " in messages when not 0 */
    struct tc_calls calls;
    struct tc_conn_events *ev;
    NDK_CQ *cq, *rcq; /* rcq: the receive CQ when it has its own */
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_CONNECTOR *cn;
    struct tc_mr *mrs[TC_CONN_MRS]; /* closed after the QP, before the PD */
    unsigned n_mrs;
    /* The connection step in progress (NdkConnect, NdkAccept or
     * NdkDisconnect), begun and not yet ended. */
    struct tc_completion *step;
    NTSTATUS step_returned;
    uint64_t step_t0, step_t_ret;
    unsigned step_ms;
    bool disconnecting; /* the step is our NdkDisconnect */
    bool connected;
    uint64_t leg_us;         /* how long the last connection step took */
    char peer[TC_ADDR_BUF];  /* the peer's address, for messages */
};

/* False without memory (said). */
bool tc_conn_init(struct tc_conn *c, struct tc_adapter *a, unsigned num);
/* CQ(s), PD and QP; the QP's context (in every result) is qp_context. */
bool tc_conn_create(struct tc_conn *c, const struct tc_qp_shape *s, PVOID qp_context);
/* The active side's connector. */
bool tc_conn_create_connector(struct tc_conn *c);
/* A buffer registered on the connection's PD, closed with it. */
bool tc_conn_add_mr(struct tc_conn *c, struct tc_mr *m, const char *what, size_t len, ULONG flags);

/* NdkConnect from src to dst with the private data; its final status
 * (STATUS_CONNECTION_REFUSED: rejected or nothing listens). In two halves
 * for several connections at once: begun (false if the call could not be
 * made), then its completion waited for. */
NTSTATUS tc_conn_connect(struct tc_conn *c, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, ULONG ird,
                         ULONG ord, const void *pdata, ULONG len);
bool tc_conn_connect_begin(struct tc_conn *c, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, ULONG ird,
                           ULONG ord, const void *pdata, ULONG len);
NTSTATUS tc_conn_connect_end(struct tc_conn *c);
/* "connect to ADDR:PORT failed: STATUS" and what to check. */
void tc_conn_explain_connect(struct tc_conn *c, NTSTATUS st);
/* NdkGetConnectionData the documented way: a size probe, then the read.
 * *data is malloc'ed (NULL when there is none). */
NTSTATUS tc_conn_data(struct tc_conn *c, ULONG *ird, ULONG *ord, uint8_t **data, ULONG *len);
/* NdkCompleteConnect, with the disconnect event. */
bool tc_conn_complete(struct tc_conn *c);
/* The passive side: the peer's address (c->peer), then NdkAccept. */
void tc_conn_name_peer(struct tc_conn *c);
bool tc_conn_accept(struct tc_conn *c, ULONG ird, ULONG ord, const void *pdata, ULONG len);
/* In two halves, for several connections at once (an accept completes
 * only when the initiator's RTR or first FPDU arrives). */
bool tc_conn_accept_begin(struct tc_conn *c, ULONG ird, ULONG ord, const void *pdata, ULONG len);
bool tc_conn_accept_end(struct tc_conn *c);
bool tc_conn_reject(struct tc_conn *c, const void *pdata, ULONG len);

/* NdkDisconnect started (a no-op when it was, or when not connected),
 * then its completion waited for: its final status. */
bool tc_conn_disconnect_begin(struct tc_conn *c);
NTSTATUS tc_conn_disconnect_end(struct tc_conn *c);
/* Both halves: NdkDisconnect and its final status. */
NTSTATUS tc_conn_disconnect(struct tc_conn *c);
/* Has the peer disconnected? Waits at most ms for it (0: just looks). */
bool tc_conn_peer_left(struct tc_conn *c, unsigned ms);

/* A CQ waiter for this connection: its CQs, its waker, its disconnect. */
void tc_conn_waiter(struct tc_conn *c, struct tc_cq_wait *w, enum tc_wait_mode mode, long (*take)(void *),
                    void *arg);

/* Closes everything (connector, QP, buffers, PD, CQs), checks the callback
 * rules and frees what no callback can use any more; false if a close
 * misbehaved or a rule was broken. */
bool tc_conn_teardown(struct tc_conn *c);

#endif
