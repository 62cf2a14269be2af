/* Queue pairs. In this version a QP can be created, tied to one connector
 * and closed; work requests are refused until the data path exists. */
#include <stdlib.h>

#include "objects.h"

#ifndef STATUS_NOT_IMPLEMENTED
#define STATUS_NOT_IMPLEMENTED ((NTSTATUS)0xC0000002L)
#endif

static struct ndk_qp_impl *qp_from(NDK_QP *q)
{
    struct ndk_obj *o = ndk_obj_from_pub(q, NdkObjectTypeQp);
    return o ? container_of(o, struct ndk_qp_impl, obj) : NULL;
}

/* The initiator-queue answer shared by every posting call for now. */
static NTSTATUS qp_post_status(NDK_QP *q)
{
    struct ndk_qp_impl *qp = qp_from(q);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    return qp->connected ? STATUS_NOT_IMPLEMENTED : STATUS_CONNECTION_INVALID;
}

static VOID qp_flush(NDK_QP *q)
{
    (void)q;
}

static NTSTATUS qp_send(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags)
{
    (void)ctx, (void)sgl, (void)n, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_receive(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n)
{
    (void)ctx, (void)sgl, (void)n;
    return qp_from(q) ? STATUS_NOT_IMPLEMENTED : STATUS_INVALID_PARAMETER;
}

static NTSTATUS qp_bind(NDK_QP *q, PVOID ctx, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len, ULONG flags)
{
    (void)ctx, (void)mr, (void)mw, (void)va, (void)len, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_fast_register(NDK_QP *q, PVOID ctx, NDK_MR *mr, ULONG npages,
                                 CONST NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len, PVOID va,
                                 ULONG flags)
{
    (void)ctx, (void)mr, (void)npages, (void)pages, (void)fbo, (void)len, (void)va, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_invalidate(NDK_QP *q, PVOID ctx, NDK_OBJECT_HEADER *obj, ULONG flags)
{
    (void)ctx, (void)obj, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_read(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr, UINT32 rtoken,
                        ULONG flags)
{
    (void)ctx, (void)sgl, (void)n, (void)raddr, (void)rtoken, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_write(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr, UINT32 rtoken,
                         ULONG flags)
{
    (void)ctx, (void)sgl, (void)n, (void)raddr, (void)rtoken, (void)flags;
    return qp_post_status(q);
}

static NTSTATUS qp_send_inv(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags, UINT32 token)
{
    (void)ctx, (void)sgl, (void)n, (void)flags, (void)token;
    return qp_post_status(q);
}

static const NDK_QP_DISPATCH qp_dispatch = {
    .NdkCloseQp = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkFlush = qp_flush,
    .NdkSend = qp_send,
    .NdkReceive = qp_receive,
    .NdkBind = qp_bind,
    .NdkFastRegister = qp_fast_register,
    .NdkInvalidate = qp_invalidate,
    .NdkRead = qp_read,
    .NdkWrite = qp_write,
    .NdkSendAndInvalidate = qp_send_inv,
};

static void qp_destroy(struct ndk_obj *obj)
{
    struct ndk_qp_impl *qp = container_of(obj, struct ndk_qp_impl, obj);
    ndk_obj_release_successor(&qp->pd->obj);
    ndk_obj_release_successor(&qp->rcq->obj);
    ndk_obj_release_successor(&qp->icq->obj);
}

static void qp_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct ndk_qp_impl, obj));
}

static const struct ndk_obj_ops qp_ops = {.destroy = qp_destroy, .free = qp_free};

static NTSTATUS create_qp_common(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                 PVOID QPContext, ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                                 ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                                 ULONG InlineDataSize, NDK_QP **ppNdkQp)
{
    struct ndk_obj *pdo = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    struct ndk_obj *rcqo = ndk_obj_from_pub(pReceiveCq, NdkObjectTypeCq);
    struct ndk_obj *icqo = ndk_obj_from_pub(pInitiatorCq, NdkObjectTypeCq);
    if (!pdo || !rcqo || !icqo || !ppNdkQp || rcqo->ad != pdo->ad || icqo->ad != pdo->ad)
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = pdo->ad;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    /* 5.5.4: each of the five sizes beyond its adapter limit. */
    if (ReceiveQueueDepth > info.MaxReceiveQueueDepth ||
        InitiatorQueueDepth > info.MaxInitiatorQueueDepth ||
        MaxReceiveRequestSge > info.MaxReceiveRequestSge ||
        MaxInitiatorRequestSge > info.MaxInitiatorRequestSge ||
        InlineDataSize > info.MaxInlineDataSize)
        return STATUS_INVALID_PARAMETER;
    struct ndk_qp_impl *qp = calloc(1, sizeof *qp);
    if (!qp)
        return STATUS_INSUFFICIENT_RESOURCES;
    qp->pd = container_of(pdo, struct ndk_pd_impl, obj);
    qp->rcq = container_of(rcqo, struct ndk_cq_impl, obj);
    qp->icq = container_of(icqo, struct ndk_cq_impl, obj);
    qp->context = QPContext;
    qp->rq_depth = ReceiveQueueDepth;
    qp->iq_depth = InitiatorQueueDepth;
    qp->rq_sge = MaxReceiveRequestSge;
    qp->iq_sge = MaxInitiatorRequestSge;
    qp->inline_size = InlineDataSize;
    pthread_mutex_lock(&ad->lock);
    if (pdo->closing || rcqo->closing || icqo->closing) {
        pthread_mutex_unlock(&ad->lock);
        free(qp);
        return STATUS_INVALID_PARAMETER;
    }
    ndk_obj_add_successor(pdo);
    ndk_obj_add_successor(rcqo);
    ndk_obj_add_successor(icqo);
    ndk_obj_init(&qp->obj, ad, NdkObjectTypeQp, &qp_dispatch, &qp_ops);
    pthread_mutex_unlock(&ad->lock);
    *ppNdkQp = (NDK_QP *)&qp->obj.pub;
    return STATUS_SUCCESS;
}

NTSTATUS ndk_create_qp(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq, PVOID QPContext,
                       ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth, ULONG MaxReceiveRequestSge,
                       ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                       NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                       NDK_QP **ppNdkQp)
{
    (void)CreateCompletion, (void)RequestContext;
    return create_qp_common(pNdkPd, pReceiveCq, pInitiatorCq, QPContext, ReceiveQueueDepth,
                            InitiatorQueueDepth, MaxReceiveRequestSge, MaxInitiatorRequestSge,
                            InlineDataSize, ppNdkQp);
}

NTSTATUS ndk_create_qp_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                NDK_QP **ppNdkQp)
{
    (void)pNdkPd, (void)pReceiveCq, (void)pInitiatorCq, (void)pSrq, (void)QPContext;
    (void)InitiatorQueueDepth, (void)MaxInitiatorRequestSge, (void)InlineDataSize;
    (void)CreateCompletion, (void)RequestContext, (void)ppNdkQp;
    /* No SRQ can exist yet (NdkCreateSrq is not supported). */
    return STATUS_INVALID_PARAMETER;
}
