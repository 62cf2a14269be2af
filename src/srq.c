/*
 * Shared receive queues: NdkCreateSrq, NdkModifySrq, NdkSrqReceive,
 * NdkCloseSrq (docs/rules.md W2).
 *
 * The ring of posted receives is guarded by srq->lock: the consumer posts
 * (one poster at a time, W2) while the data path of every QP using the SRQ
 * takes from it on other threads.
 *
 * The limit notification uses the same scheme as CQ notifications (cq.c):
 * one embedded callback item, queued with the SRQ lock held (so a concurrent
 * close either waits for it or leaves nothing armed), naming a trampoline
 * that re-checks the threshold when the consumer's callback returns and
 * queues the item again if it is met. That re-check is what delivers a
 * notification re-armed from inside the callback with the count already
 * below the threshold, which 5.8.1 says must be generated at once.
 * notify_cb.u.notify.fn marks the item in use.
 */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "objects.h"

static struct ndk_srq_impl *srq_from(NDK_SRQ *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeSrq);
    return o ? container_of(o, struct ndk_srq_impl, obj) : NULL;
}

static void srq_notify_run(void *ctx, NTSTATUS status);

/* Lock held: is the armed threshold met? Then disarm (5.8.1: one
 * notification, then disarmed until the next non-zero threshold). */
static bool srq_consume_arm_locked(struct ndk_srq_impl *srq)
{
    if (!srq->armed || srq->count >= srq->threshold)
        return false;
    srq->armed = false;
    return true;
}

static void srq_queue_locked(struct ndk_srq_impl *srq)
{
    srq->notify_cb.u.notify.fn = srq_notify_run;
    srq->notify_cb.u.notify.ctx = srq;
    srq->notify_cb.u.notify.status = STATUS_SUCCESS;
    ndk_cb_queue(srq->obj.ad, &srq->notify_cb);
}

/* Lock held: fire the limit notification if it is due. While the item is in
 * use the arm is spent and the callback owed to the trampoline. Without a
 * consumer callback the arm is spent all the same. */
static void srq_check_locked(struct ndk_srq_impl *srq)
{
    if (!srq_consume_arm_locked(srq) || !srq->notify)
        return;
    if (srq->notify_cb.u.notify.fn)
        srq->owed = true; /* the count may rise again before the trampoline looks */
    else
        srq_queue_locked(srq);
}

/* Progress thread, no provider lock held. */
static void srq_notify_run(void *ctx, NTSTATUS status)
{
    struct ndk_srq_impl *srq = ctx;
    srq->notify(srq->notify_ctx, status);
    pthread_mutex_lock(&srq->lock);
    bool again = srq->owed || srq_consume_arm_locked(srq);
    srq->owed = false;
    if (again)
        srq_queue_locked(srq);
    else
        srq->notify_cb.u.notify.fn = NULL;
    pthread_mutex_unlock(&srq->lock);
}

bool ndk_srq_take(struct ndk_srq_impl *srq, struct ndk_rwqe *out)
{
    pthread_mutex_lock(&srq->lock);
    if (srq->count == 0) {
        pthread_mutex_unlock(&srq->lock);
        return false;
    }
    const struct ndk_rwqe *w = &srq->ring[srq->head];
    ndk_rwqe_set(out, w->ctx, w->sge, w->nsge, w->total);
    srq->head = (srq->head + 1) % srq->depth;
    srq->count--;
    srq_check_locked(srq);
    pthread_mutex_unlock(&srq->lock);
    return true;
}

/*
 * The SGEs are checked against registered memory now, as NdkReceive does,
 * so a bad buffer fails the post (STATUS_ACCESS_VIOLATION), and again when
 * data is placed, because a deregistration between post and arrival must
 * still be honoured. Also refused: more SGEs than the SRQ allows, a total
 * length a 32-bit BytesTransferred could not report, and a full queue (5.8.2
 * leaves the codes open and suggests these).
 */
static NTSTATUS srq_receive(NDK_SRQ *pNdkSrq, PVOID RequestContext, CONST NDK_SGE *pSgl, ULONG nSge)
{
    struct ndk_srq_impl *srq = srq_from(pNdkSrq);
    if (!srq || (nSge && !pSgl) || nSge > srq->max_sge)
        return STATUS_INVALID_PARAMETER;
    uint64_t total;
    NTSTATUS st = mem_check_receive(srq->obj.ad->dev->mem, srq->pd, pSgl, nSge, UINT32_MAX, &total);
    if (st != STATUS_SUCCESS)
        return st;
    pthread_mutex_lock(&srq->lock);
    if (srq->count == srq->depth) {
        pthread_mutex_unlock(&srq->lock);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    ndk_rwqe_set(&srq->ring[(srq->head + srq->count) % srq->depth], RequestContext, pSgl, nSge, total);
    srq->count++;
    pthread_mutex_unlock(&srq->lock);
    return STATUS_SUCCESS;
}

/*
 * 5.8.1. Completes inline, so RequestCompletion is never called (C7). Both
 * arguments are validated before either takes effect. Depth 0 keeps the
 * depth; a new depth beyond MaxSrqDepth or below the number of queued
 * receives is refused (the latter is the reference's suggestion). Threshold 0
 * keeps the threshold and the armed state; a non-zero threshold arms, and
 * fires at once when the count is already below it.
 */
static NTSTATUS srq_modify(NDK_SRQ *pNdkSrq, ULONG SrqDepth, ULONG NotifyThreshold,
                           NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext;
    struct ndk_srq_impl *srq = srq_from(pNdkSrq);
    if (!srq)
        return STATUS_INVALID_PARAMETER;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(srq->obj.ad, &info);
    if (SrqDepth > info.MaxSrqDepth)
        return STATUS_INVALID_PARAMETER;
    struct ndk_rwqe *ring = NULL, *old = NULL;
    if (SrqDepth) {
        /* Allocated outside the lock so takers are held up only for the copy. */
        ring = calloc(SrqDepth, sizeof *ring);
        if (!ring)
            return STATUS_INSUFFICIENT_RESOURCES;
    }
    pthread_mutex_lock(&srq->lock);
    if (ring) {
        if (SrqDepth < srq->count) {
            pthread_mutex_unlock(&srq->lock);
            free(ring);
            return STATUS_INVALID_PARAMETER;
        }
        for (ULONG i = 0; i < srq->count; i++)
            ring[i] = srq->ring[(srq->head + i) % srq->depth];
        old = srq->ring;
        srq->ring = ring;
        srq->depth = SrqDepth;
        srq->head = 0;
    }
    /* closing was set before close_start took this lock: a modify ordered
     * after NdkCloseSrq arms nothing. */
    if (NotifyThreshold && !srq->obj.closing) {
        srq->threshold = NotifyThreshold;
        srq->armed = true;
        srq_check_locked(srq);
    }
    pthread_mutex_unlock(&srq->lock);
    free(old);
    return STATUS_SUCCESS;
}

static const NDK_SRQ_DISPATCH srq_dispatch = {
    .NdkCloseSrq = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkModifySrq = srq_modify,
    .NdkSrqReceive = srq_receive,
};

/* Adapter lock held: nothing can be armed or queued from now on; a queued
 * notification holds a busy count, so the close waits for it. */
static void srq_close_start(struct ndk_obj *obj)
{
    struct ndk_srq_impl *srq = container_of(obj, struct ndk_srq_impl, obj);
    pthread_mutex_lock(&srq->lock);
    srq->armed = false;
    pthread_mutex_unlock(&srq->lock);
}

/* Adapter lock held: the PD may finish its own pending close now (L8). */
static void srq_destroy(struct ndk_obj *obj)
{
    struct ndk_srq_impl *srq = container_of(obj, struct ndk_srq_impl, obj);
    ndk_obj_release_successor(&srq->pd->obj);
    ndk_engine_unplace(obj);
}

static void srq_free(struct ndk_obj *obj)
{
    struct ndk_srq_impl *srq = container_of(obj, struct ndk_srq_impl, obj);
    free(srq->ring);
    pthread_mutex_destroy(&srq->lock);
    free(srq);
}

static const struct ndk_obj_ops srq_ops = {
    .close_start = srq_close_start,
    .destroy = srq_destroy,
    .free = srq_free,
};

NTSTATUS ndk_create_srq(NDK_PD *pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge, ULONG NotifyThreshold,
                        NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification, PVOID SrqNotificationContext,
                        GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_SRQ **ppNdkSrq)
{
    /* Affinity is only a preference (5.5.3), placed as a CQ's
     * (ndk_engine_place); creation completes inline, so CreateCompletion
     * is never called (C7). */
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_obj *pdo = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    if (!pdo || !ppNdkSrq)
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = pdo->ad;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    /* 5.5.3: beyond the adapter limits is invalid; depth 0 could hold
     * nothing and is refused as well. */
    if (SrqDepth == 0 || SrqDepth > info.MaxSrqDepth ||
        MaxReceiveRequestSge > info.MaxReceiveRequestSge || MaxReceiveRequestSge > NDK_MAX_SGE)
        return STATUS_INVALID_PARAMETER;
    struct ndk_srq_impl *srq = calloc(1, sizeof *srq);
    struct ndk_rwqe *ring = calloc(SrqDepth, sizeof *ring);
    if (!srq || !ring) {
        free(srq);
        free(ring);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    pthread_mutex_init(&srq->lock, NULL);
    srq->pd = container_of(pdo, struct ndk_pd_impl, obj);
    srq->ring = ring;
    srq->depth = SrqDepth;
    srq->max_sge = MaxReceiveRequestSge;
    /* 5.5.3 [I]: a non-zero threshold arms, as with NdkModifySrq. It fires
     * when a take drops the count below it, not at creation: an SRQ is born
     * empty, and firing then would spend the arm before anything was posted. */
    srq->threshold = NotifyThreshold;
    srq->armed = NotifyThreshold > 0;
    srq->notify = SrqNotification;
    srq->notify_ctx = SrqNotificationContext;
    srq->notify_cb.kind = CB_CQ_NOTIFY;
    srq->notify_cb.obj = &srq->obj;
    pthread_mutex_lock(&ad->dev->lock);
    if (pdo->closing) {
        pthread_mutex_unlock(&ad->dev->lock);
        pthread_mutex_destroy(&srq->lock);
        free(ring);
        free(srq);
        return STATUS_INVALID_PARAMETER;
    }
    ndk_obj_add_successor(pdo);
    ndk_obj_init(&srq->obj, ad, NdkObjectTypeSrq, &srq_dispatch, &srq_ops);
    srq->obj.engine = ndk_engine_place(ad, Affinity);
    pthread_mutex_unlock(&ad->dev->lock);
    *ppNdkSrq = (NDK_SRQ *)&srq->obj.pub;
    return STATUS_SUCCESS;
}
