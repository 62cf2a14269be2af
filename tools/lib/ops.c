#include "lib/ops.h"

#include "lib/log.h"

const char *tc_op_name(NDK_OPERATION_TYPE type)
{
    switch (type) {
    case NdkOperationTypeReceive: return "Receive";
    case NdkOperationTypeSend: return "Send";
    case NdkOperationTypeRead: return "RDMA Read";
    case NdkOperationTypeWrite: return "RDMA Write";
    default: return "operation";
    }
}

const char *tc_op_call(NDK_OPERATION_TYPE type)
{
    switch (type) {
    case NdkOperationTypeReceive: return "NdkReceive";
    case NdkOperationTypeSend: return "NdkSend";
    case NdkOperationTypeRead: return "NdkRead";
    case NdkOperationTypeWrite: return "NdkWrite";
    default: return "a post";
    }
}

void tc_check_post_not_pending(const char *role, NDK_OPERATION_TYPE type, NTSTATUS st)
{
    if (st == STATUS_PENDING)
        tc_library_problem(role, "%s returned STATUS_PENDING, never valid for a post", tc_op_call(type));
}

void tc_check_completion(const char *role, const char *label, NDK_OPERATION_TYPE type,
                         const NDK_RESULT_EX *r, const void *qp_context)
{
    if (r->QPContext != qp_context)
        tc_library_problem(role, "%s%s completion with QPContext %p, not %p", label, tc_op_name(type), r->QPContext,
                           qp_context);
    if (r->Status == STATUS_SUCCESS && r->Type != type)
        tc_library_problem(role, "%s%s completion of type %d, expected %d", label, tc_op_name(type), (int)r->Type,
                           (int)type);
}
