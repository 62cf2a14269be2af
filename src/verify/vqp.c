/* The verifier's QP and SRQ tables: every posted request is recorded until
 * its completion is retrieved (W2, W6-W9, D5, M1), and the receive path's
 * hook for a Send that found no receive (W10). */
#include <stdlib.h>
#include <string.h>

#include "net/loop.h"
#include "verify/vcore.h"

#define QREAL(o) VREAL(o, NDK_QP_DISPATCH)

enum vkind { VK_SEND, VK_WRITE, VK_READ, VK_RECV, VK_OTHER };

static void queue_free(struct vqueue *q)
{
    while (q->head) {
        struct vreq *r = q->head;
        q->head = r->next;
        free(r);
    }
    q->tail = NULL;
    q->count = 0;
}

static void queue_remove(struct vqueue *q, struct vreq *r)
{
    struct vreq **pp = &q->head, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = r->next;
    if (q->tail == r)
        q->tail = prev;
    q->count--;
}

static void vqp_closed(struct vobj *o)
{
    queue_free(&o->u.qp.iq);
    queue_free(&o->u.qp.rq);
    struct vobj *c = o->u.qp.conn;
    if (c && c->u.conn.qp == o)
        c->u.conn.qp = NULL;
    o->u.qp.conn = NULL;
}

static void vqp_watch(struct vobj *o, uint64_t now)
{
    struct vqp *q = &o->u.qp;
    if (!q->defer_since || now - q->defer_since < o->v->defer_ms)
        return;
    vreport(o, VR_D5, "NdkSend/NdkWrite/... with NDK_OP_FLAG_DEFER",
            "end every chain of deferred requests with a post without NDK_OP_FLAG_DEFER",
            "%u request(s) posted with NDK_OP_FLAG_DEFER, the first %llu ms ago, and no post "
            "without it followed on this initiator queue: a provider may never start them",
            q->defer_count, (unsigned long long)(now - q->defer_since));
}

/* The queue a post goes to: the QP's, or its SRQ's for receives. */
static struct vqueue *queue_of(struct vobj *o, bool recv)
{
    if (o->type == NdkObjectTypeSrq)
        return &o->u.srq.q;
    return recv ? &o->u.qp.rq : &o->u.qp.iq;
}

/* Checks and records a post (the provider answers limits itself: f);
 * NULL when out of memory. The record is queued before the provider sees
 * the request, so a completion retrieved at once finds it. */
static struct vreq *post_begin(struct vobj *o, const char *call, enum vkind kind, void *ctx,
                               const NDK_SGE *sgl, ULONG nsge, ULONG flags, struct vfinding *f)
{
    struct ndk_verifier *v = o->v;
    struct vqueue *q = queue_of(o, kind == VK_RECV);
    /* NdkReceive on a QP of an SRQ: the provider refuses it. */
    bool srq_qp = o->type == NdkObjectTypeQp && o->u.qp.srq && kind == VK_RECV;
    if (__atomic_add_fetch(&q->in_call, 1, __ATOMIC_ACQ_REL) > 1)
        vreport(o, VR_W2, call, "serialise the posts to one queue (one thread, or a lock)",
                "another post to the same %s queue is running in another thread",
                kind == VK_RECV ? "receive" : "initiator");
    ULONG max_sge = kind == VK_READ && v->info.MaxReadRequestSge < q->max_sge
                        ? v->info.MaxReadRequestSge
                        : q->max_sge;
    uint64_t total = 0;
    for (ULONG i = 0; sgl && i < nsge && nsge <= NDK_MAX_SGE; i++)
        total += sgl[i].Length;
    /* Inline data is copied at post time: any number of SGEs (6.7). */
    if (sgl && nsge > max_sge && !srq_qp && !(flags & NDK_OP_FLAG_INLINE))
        vfind(f, o, VR_W7, call,
              "post at most the SGEs the queue was created for (and the adapter's limit)",
              "%lu SGEs, at most %lu allowed", (unsigned long)nsge, (unsigned long)max_sge);
    else if (total > v->info.MaxTransferLength)
        vfind(f, o, VR_W7, call, "split the transfer into requests of at most MaxTransferLength",
              "%llu bytes, the adapter's MaxTransferLength is %lu", (unsigned long long)total,
              (unsigned long)v->info.MaxTransferLength);
    struct vreq *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->ctx = ctx;
    r->call = call;
    r->silent = (flags & NDK_OP_FLAG_SILENT_SUCCESS) != 0;
    if (sgl && nsge <= NDK_MAX_SGE) {
        r->nsge = nsge;
        memcpy(r->sge, sgl, nsge * sizeof *sgl);
    }
    /* W9: what a Send or Write will transmit, unless copied at post time. */
    if ((kind == VK_SEND || kind == VK_WRITE) && !(flags & NDK_OP_FLAG_INLINE) && total &&
        total <= VREQ_SUM_MAX && !f->o)
        r->summed = vsum(sgl, nsge, &r->sum);
    pthread_mutex_lock(&v->lock);
    const char *dup = NULL;
    /* Receives often share one context (any buffer will do): initiator
     * requests only. */
    if (ctx && !r->silent && kind != VK_RECV)
        for (struct vreq *x = q->head; x && !dup; x = x->next)
            if (x->ctx == ctx && !x->silent)
                dup = x->call;
    if (q->tail)
        q->tail->next = r;
    else
        q->head = r;
    q->tail = r;
    q->count++;
    pthread_mutex_unlock(&v->lock);
    if (dup)
        vreport(o, VR_W8, call,
                "give every outstanding request its own RequestContext (its completion is "
                "matched by it)",
                "RequestContext %p is still outstanding from an earlier %s", ctx, dup);
    return r;
}

static NTSTATUS post_end(struct vobj *o, const char *call, enum vkind kind, struct vreq *r,
                         ULONG flags, const struct vfinding *f, NTSTATUS st)
{
    struct ndk_verifier *v = o->v;
    struct vqueue *q = queue_of(o, kind == VK_RECV);
    unsigned outstanding = 0;
    pthread_mutex_lock(&v->lock);
    if (st != STATUS_SUCCESS) {
        queue_remove(q, r);
        free(r);
        outstanding = q->count;
    }
    if (o->type == NdkObjectTypeQp && kind != VK_RECV) {
        struct vqp *p = &o->u.qp;
        if ((flags & NDK_OP_FLAG_DEFER) && st == STATUS_SUCCESS) {
            if (!p->defer_since)
                p->defer_since = loop_now_ms();
            p->defer_count++;
        } else {
            /* A post without DEFER, or an inline failure (D4), ends the chain. */
            p->defer_since = 0;
            p->defer_count = 0;
        }
    }
    pthread_mutex_unlock(&v->lock);
    __atomic_sub_fetch(&q->in_call, 1, __ATOMIC_ACQ_REL);
    vfind_emit(f, st);
    if (st == STATUS_INSUFFICIENT_RESOURCES && outstanding >= q->depth)
        vreport(o, VR_W6, call,
                "post only while fewer than the queue's depth are outstanding (retrieve "
                "completions first), or create a deeper queue",
                "%u request(s) outstanding, queue depth %u; the call failed with "
                "STATUS_INSUFFICIENT_RESOURCES", outstanding, q->depth);
    vobj_leave(o);
    return st;
}

/* A post: checked and recorded, then the provider's call (expr). Out of
 * memory for the record, the post goes on unrecorded. */
#define POST(o, call, kind, ctx, sgl, nsge, flags, expr)                                           \
    do {                                                                                           \
        if (!vobj_enter(o, call))                                                                  \
            return STATUS_INVALID_DEVICE_STATE;                                                    \
        struct vfinding f_ = {0};                                                                  \
        struct vreq *r_ = post_begin(o, call, kind, ctx, sgl, nsge, flags, &f_);                  \
        if (!r_) {                                                                                 \
            __atomic_sub_fetch(&queue_of(o, kind == VK_RECV)->in_call, 1, __ATOMIC_ACQ_REL);       \
            NTSTATUS st_ = (expr);                                                                 \
            vobj_leave(o);                                                                         \
            return st_;                                                                            \
        }                                                                                          \
        return post_end(o, call, kind, r_, flags, &f_, (expr));                                   \
    } while (0)

/* Bind, FastRegister, Invalidate: post_end, or without a record. */
static NTSTATUS post_other_end(struct vobj *o, const char *call, struct vreq *r, ULONG flags,
                               const struct vfinding *f, NTSTATUS st)
{
    if (r)
        return post_end(o, call, VK_OTHER, r, flags, f, st);
    __atomic_sub_fetch(&o->u.qp.iq.in_call, 1, __ATOMIC_ACQ_REL);
    vobj_leave(o);
    return st;
}

static VOID vq_flush(NDK_QP *qp)
{
    struct vobj *o = vobj_of(qp);
    VFORWARD_VOID(o, "NdkFlush", QREAL(o)->NdkFlush(qp));
}

static NTSTATUS vq_send(NDK_QP *qp, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    POST(o, "NdkSend", VK_SEND, ctx, sgl, n, flags, QREAL(o)->NdkSend(qp, ctx, sgl, n, flags));
}

static NTSTATUS vq_send_inv(NDK_QP *qp, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags,
                            UINT32 token)
{
    struct vobj *o = vobj_of(qp);
    POST(o, "NdkSendAndInvalidate", VK_SEND, ctx, sgl, n, flags,
         QREAL(o)->NdkSendAndInvalidate(qp, ctx, sgl, n, flags, token));
}

static NTSTATUS vq_receive(NDK_QP *qp, PVOID ctx, CONST NDK_SGE *sgl, ULONG n)
{
    struct vobj *o = vobj_of(qp);
    POST(o, "NdkReceive", VK_RECV, ctx, sgl, n, 0, QREAL(o)->NdkReceive(qp, ctx, sgl, n));
}

static NTSTATUS vq_read(NDK_QP *qp, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr,
                        UINT32 rtoken, ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    POST(o, "NdkRead", VK_READ, ctx, sgl, n, flags,
         QREAL(o)->NdkRead(qp, ctx, sgl, n, raddr, rtoken, flags));
}

static NTSTATUS vq_write(NDK_QP *qp, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr,
                         UINT32 rtoken, ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    POST(o, "NdkWrite", VK_WRITE, ctx, sgl, n, flags,
         QREAL(o)->NdkWrite(qp, ctx, sgl, n, raddr, rtoken, flags));
}

/* The record of a verified MR or MW of this adapter, or NULL. */
static struct vobj *peer(struct vobj *o, void *pub, NDK_OBJECT_TYPE type)
{
    struct ndk_obj *obj = pub ? ndk_obj_from_pub(pub, type) : NULL;
    struct vobj *p = obj ? obj->verify : NULL;
    return p && p->v == o->v ? p : NULL;
}

static NTSTATUS vq_bind(NDK_QP *qp, PVOID ctx, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                        ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    if (!vobj_enter(o, "NdkBind"))
        return STATUS_INVALID_DEVICE_STATE;
    struct vfinding f = {0};
    struct vreq *r = post_begin(o, "NdkBind", VK_OTHER, ctx, NULL, 0, flags, &f);
    if (r) {
        r->mr = mr;
        r->mw = mw;
    }
    NTSTATUS st = QREAL(o)->NdkBind(qp, ctx, mr, mw, va, len, flags);
    struct vobj *w = peer(o, mw, NdkObjectTypeMw);
    if (st == STATUS_SUCCESS && w) {
        pthread_mutex_lock(&o->v->lock);
        w->u.mw.bound_mr = peer(o, mr, NdkObjectTypeMr);
        pthread_mutex_unlock(&o->v->lock);
    }
    return post_other_end(o, "NdkBind", r, flags, &f, st);
}

/* M3: the live LAM holding every page, or NULL. Lock held. */
static struct vlam *lam_of_pages(struct ndk_verifier *v, ULONG n, const NDK_LOGICAL_ADDRESS *pages,
                                 ULONG *bad)
{
    struct vlam *first = NULL;
    for (ULONG i = 0; i < n; i++) {
        uintptr_t a = (uintptr_t)pages[i].QuadPart;
        struct vlam *l = v->lams;
        while (l && !(a >= l->lo && a < l->hi))
            l = l->next;
        if (!l) {
            *bad = i;
            return NULL;
        }
        if (!first)
            first = l;
    }
    return first;
}

static NTSTATUS vq_fast_register(NDK_QP *qp, PVOID ctx, NDK_MR *mr, ULONG n,
                                 CONST NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                 PVOID va, ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    if (!vobj_enter(o, "NdkFastRegister"))
        return STATUS_INVALID_DEVICE_STATE;
    struct vfinding f = {0};
    ULONG bad = 0;
    pthread_mutex_lock(&o->v->lock);
    struct vlam *l = pages && n ? lam_of_pages(o->v, n, pages, &bad) : NULL;
    pthread_mutex_unlock(&o->v->lock);
    struct vreq *r = post_begin(o, "NdkFastRegister", VK_OTHER, ctx, NULL, 0, flags, &f);
    if (r) {
        pthread_mutex_lock(&o->v->lock); /* the LAM's release reads it */
        r->mr = mr;
        r->lam = l;
        pthread_mutex_unlock(&o->v->lock);
    }
    if (pages && n && !l)
        vreport(o, VR_M3, "NdkFastRegister",
                "take the page array from a LAM of NdkBuildLAM that is not released",
                "page %lu of %lu (0x%llx) lies in no live LAM of this adapter",
                (unsigned long)bad, (unsigned long)n, (unsigned long long)pages[bad].QuadPart);
    NTSTATUS st = QREAL(o)->NdkFastRegister(qp, ctx, mr, n, pages, fbo, len, va, flags);
    struct vobj *m = peer(o, mr, NdkObjectTypeMr);
    if (st == STATUS_SUCCESS && m) {
        /* The new local token is handed out when the post returns (M1). */
        uint32_t lt = VREAL(m, NDK_MR_DISPATCH)->NdkGetLocalTokenFromMr(mr);
        pthread_mutex_lock(&o->v->lock);
        m->u.mr.ltoken = lt;
        pthread_mutex_unlock(&o->v->lock);
    }
    return post_other_end(o, "NdkFastRegister", r, flags, &f, st);
}

static NTSTATUS vq_invalidate(NDK_QP *qp, PVOID ctx, NDK_OBJECT_HEADER *h, ULONG flags)
{
    struct vobj *o = vobj_of(qp);
    if (!vobj_enter(o, "NdkInvalidate"))
        return STATUS_INVALID_DEVICE_STATE;
    struct vfinding f = {0};
    struct vreq *r = post_begin(o, "NdkInvalidate", VK_OTHER, ctx, NULL, 0, flags, &f);
    if (r)
        r->mr = h;
    NTSTATUS st = QREAL(o)->NdkInvalidate(qp, ctx, h, flags);
    if (st == STATUS_SUCCESS && h) {
        struct vobj *w = peer(o, h, NdkObjectTypeMw);
        pthread_mutex_lock(&o->v->lock);
        if (w)
            w->u.mw.bound_mr = NULL;
        pthread_mutex_unlock(&o->v->lock);
    }
    return post_other_end(o, "NdkInvalidate", r, flags, &f, st);
}

const NDK_QP_DISPATCH vqp_dispatch = {
    .NdkCloseQp = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkFlush = vq_flush,
    .NdkSend = vq_send,
    .NdkReceive = vq_receive,
    .NdkBind = vq_bind,
    .NdkFastRegister = vq_fast_register,
    .NdkInvalidate = vq_invalidate,
    .NdkRead = vq_read,
    .NdkWrite = vq_write,
    .NdkSendAndInvalidate = vq_send_inv,
};

/* ---- SRQ ---- */

#define SREAL(o) VREAL(o, NDK_SRQ_DISPATCH)

static NTSTATUS vs_modify(NDK_SRQ *s, ULONG depth, ULONG threshold, NDK_FN_REQUEST_COMPLETION fn,
                          PVOID ctx)
{
    struct vobj *o = vobj_of(s);
    if (!vobj_enter(o, "NdkModifySrq"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st = SREAL(o)->NdkModifySrq(s, depth, threshold, fn, ctx);
    if (st == STATUS_SUCCESS && depth) {
        pthread_mutex_lock(&o->v->lock);
        o->u.srq.q.depth = depth;
        pthread_mutex_unlock(&o->v->lock);
    }
    vobj_leave(o);
    return st;
}

static NTSTATUS vs_receive(NDK_SRQ *s, PVOID ctx, CONST NDK_SGE *sgl, ULONG n)
{
    struct vobj *o = vobj_of(s);
    POST(o, "NdkSrqReceive", VK_RECV, ctx, sgl, n, 0, SREAL(o)->NdkSrqReceive(s, ctx, sgl, n));
}

const NDK_SRQ_DISPATCH vsrq_dispatch = {
    .NdkCloseSrq = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkModifySrq = vs_modify,
    .NdkSrqReceive = vs_receive,
};

/* ---- completions ---- */

static bool is_receive(NDK_OPERATION_TYPE t)
{
    return t == NdkOperationTypeReceive || t == NdkOperationTypeReceiveAndInvalidate;
}

/* Finds and drops the record of a retrieved completion; earlier silent
 * requests of an initiator queue completed with it (they complete in
 * order). Checks W9 on a successful Send or Write. Lock held. */
static bool match(struct vobj *o, struct vqueue *q, const NDK_RESULT_EX *res, bool initiator)
{
    struct vreq *r = q->head;
    while (r && r->ctx != res->RequestContext)
        r = r->next;
    if (!r)
        return false;
    if (initiator)
        while (q->head != r && q->head->silent) {
            struct vreq *s = q->head;
            queue_remove(q, s);
            free(s);
        }
    queue_remove(q, r);
    uint32_t sum;
    if (r->summed && res->Status == STATUS_SUCCESS && vsum(r->sge, r->nsge, &sum) && sum != r->sum)
        vreport(o, VR_W9, r->call,
                "leave a request's buffers alone from its post until its completion is retrieved",
                "the buffers of the request with RequestContext %p (%lu SGEs) changed between "
                "its post and its completion: what the peer got is undefined",
                r->ctx, (unsigned long)r->nsge);
    free(r);
    return true;
}

void vqp_completed(struct vobj *cq, const NDK_RESULT_EX *res)
{
    for (struct vobj *o = cq->v->objs; o; o = o->next) {
        struct vqp *p = &o->u.qp;
        if (o->type != NdkObjectTypeQp || p->context != res->QPContext ||
            (p->icq != cq && p->rcq != cq))
            continue;
        bool recv = is_receive(res->Type);
        struct vqueue *rq = p->srq ? &p->srq->u.srq.q : &p->rq;
        if (!recv && p->icq == cq && match(o, &p->iq, res, true))
            return;
        if (recv && p->rcq == cq && match(o, rq, res, false))
            return;
    }
}

/* ---- the receive path's hook ---- */

void ndk_verify_send_without_receive(struct ndk_qp_impl *qp, uint64_t waited_ms, bool terminated)
{
    struct vobj *o = qp->obj.verify;
    const char *advice = "post receives before the peer may send (before NdkAccept or "
                         "NdkCompleteConnect, and again before each Send the protocol allows)";
    if (terminated)
        vreport(o, VR_W10, "a Send from the peer", advice,
                "the peer's Send found no receive posted%s and waited %llu ms for one: the "
                "grace period ended and the connection is terminated (DDP: no buffer)",
                qp->dp.srq ? " in the QP's SRQ" : "", (unsigned long long)waited_ms);
    else
        vreport(o, VR_W10, "a Send from the peer", advice,
                "the peer's Send found no receive posted%s and waited %llu ms until one was: "
                "an iWARP device has no such grace period and terminates the connection at once "
                "(DDP: no buffer)",
                qp->dp.srq ? " in the QP's SRQ" : "", (unsigned long long)waited_ms);
}

const struct vtype vqp_type = {NdkObjectTypeQp, &vqp_dispatch, NULL, vqp_closed, vqp_watch};
const struct vtype vsrq_type = {NdkObjectTypeSrq, &vsrq_dispatch, NULL, NULL, NULL};
