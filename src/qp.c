/*
 * Queue pairs: creation, teardown, and the end of a connection
 * (ndk_qp_stop). Posting: qp_post.c; completions and the transport's
 * services: qp_complete.c; busy polling: qp_poll.c; the iWARP transport:
 * qp_iwarp.c, qp_tx.c, qp_rx.c.
 */
#include <stdlib.h>

#include "objects.h"

void ndk_qp_stop(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    qp_live_remove(qp);
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    /* The receives the transport holds complete before the queue's others
     * (transport.h, stop). */
    if (dp->xp_ctx && dp->xp->stop)
        dp->xp->stop(qp);
    if (dp->state == QP_RTS)
        dp->state = QP_ERROR;
    void *ctx = dp->xp_ctx;
    dp->xp_ctx = NULL;
    dp->tr = NULL;
    dp->rx_st = RX_DEAD;
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    ndk_qp_flush_all(qp);
    if (ctx && dp->xp->detach)
        dp->xp->detach(qp, ctx);
}

/* ---- creation ---- */

static void qp_destroy(struct ndk_obj *obj)
{
    struct ndk_qp_impl *qp = container_of(obj, struct ndk_qp_impl, obj);
    ndk_qp_stop(qp);
    ndk_stat_qp_retire(qp);
    ndk_obj_release_successor(&qp->pd->obj);
    ndk_obj_release_successor(&qp->rcq->obj);
    ndk_obj_release_successor(&qp->icq->obj);
    if (qp->dp.srq)
        ndk_obj_release_successor(&qp->dp.srq->obj);
}

static void qp_free(struct ndk_obj *obj)
{
    struct ndk_qp_impl *qp = container_of(obj, struct ndk_qp_impl, obj);
    struct ndk_qp_dp *dp = &qp->dp;
    for (uint32_t i = 0; i < qp->iq_depth && dp->sq; i++)
        free(dp->sq[i].pages);
    free(dp->sq);
    free(dp->rq);
    free(dp->inline_pool);
    free(dp->orq);
    free(dp->irq);
    rx_stage_fini(&dp->rx_stage);
    free(dp->tx_burst);
    free(dp->bufs);
    pthread_mutex_destroy(&dp->sq_lock);
    pthread_mutex_destroy(&dp->rq_lock);
    pthread_mutex_destroy(&dp->rx_lock);
    free(qp);
}

static const struct ndk_obj_ops qp_ops = {.destroy = qp_destroy, .free = qp_free};

/* The QP's locks and rings: the send queue with its inline buffers, and the
 * receive queue unless an SRQ takes its receives. False when memory ran
 * out (qp_free undoes what was made). */
static bool qp_alloc_rings(struct ndk_qp_impl *qp, bool has_srq)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_init(&dp->sq_lock, NULL);
    pthread_mutex_init(&dp->rq_lock, NULL);
    pthread_mutex_init(&dp->rx_lock, NULL);
    dp->sq = calloc(qp->iq_depth, sizeof *dp->sq);
    dp->rq = has_srq ? NULL : calloc(qp->rq_ring, sizeof *dp->rq);
    if (qp->inline_size)
        dp->inline_pool = malloc((size_t)qp->inline_size * qp->iq_depth);
    if (!dp->sq || (!has_srq && !dp->rq) || (qp->inline_size && !dp->inline_pool))
        return false;
    for (ULONG i = 0; i < qp->iq_depth; i++)
        dp->sq[i].inline_data = qp->inline_size ? dp->inline_pool + (size_t)i * qp->inline_size : NULL;
    return true;
}

static NTSTATUS create_qp_common(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq, NDK_SRQ *pSrq,
                                 PVOID QPContext, ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth,
                                 ULONG MaxReceiveRequestSge, ULONG MaxInitiatorRequestSge,
                                 ULONG InlineDataSize, NDK_QP **ppNdkQp)
{
    struct ndk_obj *pdo = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    struct ndk_obj *rcqo = ndk_obj_from_pub(pReceiveCq, NdkObjectTypeCq);
    struct ndk_obj *icqo = ndk_obj_from_pub(pInitiatorCq, NdkObjectTypeCq);
    struct ndk_obj *srqo = pSrq ? ndk_obj_from_pub(pSrq, NdkObjectTypeSrq) : NULL;
    if (!pdo || !rcqo || !icqo || !ppNdkQp || (pSrq && !srqo) || rcqo->ad->dev != pdo->ad->dev ||
        icqo->ad->dev != pdo->ad->dev || (srqo && srqo->ad->dev != pdo->ad->dev))
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = pdo->ad;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    /* 5.5.4: each of the five sizes beyond its adapter limit. */
    if ((!srqo && ReceiveQueueDepth > info.MaxReceiveQueueDepth) ||
        InitiatorQueueDepth > info.MaxInitiatorQueueDepth ||
        (!srqo && MaxReceiveRequestSge > info.MaxReceiveRequestSge) ||
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
    static uint64_t next_serial;
    qp->serial = __atomic_add_fetch(&next_serial, 1, __ATOMIC_RELAXED);
    /* Depth 0 still gets one slot so the rings are never empty arrays; the
     * admission checks use the depths asked for, so a queue of depth 0
     * takes no request (STATUS_INSUFFICIENT_RESOURCES, as a full one). */
    qp->rq_depth = ReceiveQueueDepth ? ReceiveQueueDepth : 1;
    qp->rq_ring = qp_ring_slots(qp->rq_depth);
    qp->iq_depth = qp_ring_slots(InitiatorQueueDepth);
    qp->iq_admit = InitiatorQueueDepth;
    qp->rq_sge = MaxReceiveRequestSge;
    qp->iq_sge = MaxInitiatorRequestSge;
    qp->inline_size = InlineDataSize;
    if (!qp_alloc_rings(qp, srqo != NULL)) {
        qp_free(&qp->obj);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    if (!ReceiveQueueDepth && !srqo)
        qp->rq_depth = 0;
    qp->dp.state = QP_IDLE;

    pthread_mutex_lock(&ad->dev->lock);
    if (pdo->closing || rcqo->closing || icqo->closing || (srqo && srqo->closing)) {
        pthread_mutex_unlock(&ad->dev->lock);
        qp_free(&qp->obj);
        return STATUS_INVALID_PARAMETER;
    }
    ndk_obj_add_successor(pdo);
    ndk_obj_add_successor(rcqo);
    ndk_obj_add_successor(icqo);
    if (srqo) {
        ndk_obj_add_successor(srqo);
        qp->dp.srq = container_of(srqo, struct ndk_srq_impl, obj);
    }
    ndk_obj_init(&qp->obj, ad, NdkObjectTypeQp, &ndk_qp_dispatch, &qp_ops);
    /* The QP, and the connection that moves its data, run on the engine of
     * its initiator CQ (also when the receive CQ is on another one): the
     * transmit side's completions are the ones a socket event produces
     * most (docs/architecture.md, Engines). */
    qp->obj.engine = icqo->engine;
    pthread_mutex_unlock(&ad->dev->lock);
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
    return create_qp_common(pNdkPd, pReceiveCq, pInitiatorCq, NULL, QPContext, ReceiveQueueDepth,
                            InitiatorQueueDepth, MaxReceiveRequestSge, MaxInitiatorRequestSge,
                            InlineDataSize, ppNdkQp);
}

NTSTATUS ndk_create_qp_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                NDK_QP **ppNdkQp)
{
    (void)CreateCompletion, (void)RequestContext;
    if (!pSrq)
        return STATUS_INVALID_PARAMETER;
    return create_qp_common(pNdkPd, pReceiveCq, pInitiatorCq, pSrq, QPContext, 0, InitiatorQueueDepth,
                            0, MaxInitiatorRequestSge, InlineDataSize, ppNdkQp);
}
