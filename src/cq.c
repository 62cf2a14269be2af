/* Completion queues. Connection management needs only create and close; the
 * entries and notifications arrive with the data path. */
#include <stdlib.h>

#include "objects.h"

static NTSTATUS cq_resize(NDK_CQ *pNdkCq, ULONG CqDepth, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                          PVOID RequestContext)
{
    (void)CqDepth, (void)RequestCompletion, (void)RequestContext;
    if (!ndk_obj_from_pub(pNdkCq, NdkObjectTypeCq))
        return STATUS_INVALID_PARAMETER;
    /* NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED is not set (5.4.1). */
    return STATUS_NOT_SUPPORTED;
}

static VOID cq_arm(NDK_CQ *pNdkCq, ULONG Type)
{
    (void)pNdkCq, (void)Type;
}

static ULONG cq_get_results(NDK_CQ *pNdkCq, NDK_RESULT Results[], ULONG nResults)
{
    (void)pNdkCq, (void)Results, (void)nResults;
    return 0;
}

static ULONG cq_get_results_ex(NDK_CQ *pNdkCq, NDK_RESULT_EX Results[], ULONG nResults)
{
    (void)pNdkCq, (void)Results, (void)nResults;
    return 0;
}

static NTSTATUS cq_moderation(NDK_CQ *pNdkCq, ULONG ModerationInterval, ULONG ModerationCount)
{
    (void)ModerationInterval, (void)ModerationCount;
    if (!ndk_obj_from_pub(pNdkCq, NdkObjectTypeCq))
        return STATUS_INVALID_PARAMETER;
    /* The adapter does not advertise interrupt moderation (5.4.4). */
    return STATUS_NOT_SUPPORTED;
}

static const NDK_CQ_DISPATCH cq_dispatch = {
    .NdkCloseCq = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkResizeCq = cq_resize,
    .NdkArmCq = cq_arm,
    .NdkGetCqResults = cq_get_results,
    .NdkControlCqInterruptModeration = cq_moderation,
    .NdkGetCqResultsEx = cq_get_results_ex,
};

static void cq_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct ndk_cq_impl, obj));
}

static const struct ndk_obj_ops cq_ops = {.free = cq_free};

NTSTATUS ndk_create_cq(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth,
                       NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                       GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_CQ **ppNdkCq)
{
    (void)Affinity, (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !ppNdkCq || !CqNotification)
        return STATUS_INVALID_PARAMETER;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    if (CqDepth == 0 || CqDepth > info.MaxCqDepth)
        return STATUS_INVALID_PARAMETER;
    struct ndk_cq_impl *cq = calloc(1, sizeof *cq);
    if (!cq)
        return STATUS_INSUFFICIENT_RESOURCES;
    cq->depth = CqDepth;
    cq->notify = CqNotification;
    cq->notify_ctx = CqNotificationContext;
    pthread_mutex_lock(&ad->lock);
    ndk_obj_init(&cq->obj, ad, NdkObjectTypeCq, &cq_dispatch, &cq_ops);
    pthread_mutex_unlock(&ad->lock);
    *ppNdkCq = (NDK_CQ *)&cq->obj.pub;
    return STATUS_SUCCESS;
}
