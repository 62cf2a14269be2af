/*
 * The posting functions of NDK_QP_DISPATCH: each checks its arguments, the
 * QP's state and room, and the local memory it names, queues the request,
 * and hands it to the attached transport (transport.h) unless it is
 * deferred. NdkFlush and the dispatch table are here too; every entry
 * point holds the notifications its post causes until it returns.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "objects.h"

/* The flags each call documents. A known flag outside that set does not
 * apply to the call and is dropped; an unknown bit is refused
 * (docs/behaviour.md, Posting). */
#define SEND_FLAGS                                                                           \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT | \
     NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define WRITE_FLAGS                                                                          \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define READ_FLAGS                                                                           \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE | \
     NDK_OP_FLAG_DEFER)
#define BIND_FLAGS                                                                           \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |      \
     NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER)
#define FASTREG_FLAGS                                                                        \
    (BIND_FLAGS | NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK)
#define INVALIDATE_FLAGS (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER)

static struct ndk_qp_impl *qp_from(NDK_QP *q)
{
    struct ndk_obj *o = ndk_obj_from_pub(q, NdkObjectTypeQp);
    return o ? container_of(o, struct ndk_qp_impl, obj) : NULL;
}

/* ---- posting ---- */

/* Room and state for one more initiator request; sq_lock held. */
static NTSTATUS sq_admit(struct ndk_qp_impl *qp)
{
    if (qp->dp.state != QP_RTS)
        return STATUS_CONNECTION_INVALID;
    if (qp->dp.sq_count >= qp->iq_admit)
        return STATUS_INSUFFICIENT_RESOURCES;
    return STATUS_SUCCESS;
}

/* The next free slot, cleared, for a request of kind op with context ctx. */
static struct ndk_swqe *sq_slot(struct ndk_qp_impl *qp, PVOID ctx, enum swqe_op op)
{
    struct ndk_swqe *w = &qp->dp.sq[qp_sq_idx(qp, qp->dp.sq_tail)];
    uint8_t *keep_inline = w->inline_data; /* the slot's fixed inline buffer */
    /* All but the SGE array, most of the slot, which is read only up to
     * nsge (cleared here, set by the posts that fill it): clearing 400
     * octets per post was a tenth of a small Send's cost. */
    size_t sge_end = offsetof(struct ndk_swqe, sge) + sizeof w->sge;
    memset(w, 0, offsetof(struct ndk_swqe, sge));
    memset((uint8_t *)w + sge_end, 0, sizeof *w - sge_end);
    w->inline_data = keep_inline;
    w->ctx = ctx;
    w->op = (uint8_t)op;
    return w;
}

/* The end of every post that got past sq_begin: sq_lock is released, then
 * the transport may work without it (transport.h, after_post). */
static NTSTATUS sq_end(struct ndk_qp_impl *qp, NTSTATUS st)
{
    const struct ndk_xp_ops *xp = qp->dp.xp;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    if (xp && xp->after_post)
        xp->after_post(qp);
    return st;
}

/* Queues the filled slot w and ends the post (sq_end). */
static NTSTATUS sq_post(struct ndk_qp_impl *qp, struct ndk_swqe *w, ULONG flags)
{
    w->flags = flags;
    w->signalled = !(flags & NDK_OP_FLAG_SILENT_SUCCESS);
    w->status = STATUS_SUCCESS;
    qp->dp.sq_tail++;
    qp->dp.sq_count++;
    /* DEFER is a hint (docs/rules.md D2): hold the request until one without
     * it is posted, which the consumer promises will come (D5). */
    if (!(flags & NDK_OP_FLAG_DEFER))
        qp->dp.xp->doorbell(qp);
    return sq_end(qp, STATUS_SUCCESS);
}

/* D4: an inline failure first hands every deferred request to the engine. */
static NTSTATUS sq_fail(struct ndk_qp_impl *qp, NTSTATUS st);

/* The start every initiator-queue post shares: the QP, the call's own
 * argument checks (args_ok), its flags (*flags keeps those of `allowed`),
 * room and state. On success sq_lock is held and *out is the QP. Every
 * failure once the QP is known goes through sq_fail, so the requests
 * deferred before it still go out (D4). */
static NTSTATUS sq_begin(NDK_QP *q, bool args_ok, ULONG *flags, ULONG allowed,
                         struct ndk_qp_impl **out)
{
    struct ndk_qp_impl *qp = qp_from(q);
    if (!qp)
        return STATUS_INVALID_PARAMETER;
    pthread_mutex_lock(&qp->dp.sq_lock);
    NTSTATUS st = !args_ok || (*flags & ~NDK_OP_FLAGS_KNOWN) ? STATUS_INVALID_PARAMETER : sq_admit(qp);
    if (st != STATUS_SUCCESS)
        return sq_fail(qp, st);
    *flags &= allowed;
    *out = qp;
    return STATUS_SUCCESS;
}

static NTSTATUS sq_fail(struct ndk_qp_impl *qp, NTSTATUS st)
{
    if (qp->dp.state == QP_RTS)
        qp->dp.xp->doorbell(qp);
    return sq_end(qp, st);
}

static NTSTATUS copy_payload_sges(struct ndk_qp_impl *qp, struct ndk_swqe *w, const NDK_SGE *sgl,
                                  ULONG n, ULONG max_sge, ULONG flags)
{
    if (n && !sgl)
        return STATUS_INVALID_PARAMETER;
    uint64_t total = 0;
    for (ULONG i = 0; i < n; i++)
        total += sgl[i].Length;
    if (total > NDK_MAX_TRANSFER)
        return STATUS_INVALID_PARAMETER; /* MaxTransferLength */
    w->total = (ULONG)total;
    if (flags & NDK_OP_FLAG_INLINE) {
        /* 6.7: the data is copied now; tokens are ignored; nSge may exceed
         * the SGE limit; the total is bounded by the QP's InlineDataSize. */
        if (total > qp->inline_size)
            return STATUS_INVALID_PARAMETER;
        size_t off = 0;
        for (ULONG i = 0; i < n; i++) {
            if (!sgl[i].Length)
                continue;
            if (!sgl[i].VirtualAddress)
                return STATUS_INVALID_PARAMETER;
            memcpy(w->inline_data + off, sgl[i].VirtualAddress, sgl[i].Length);
            off += sgl[i].Length;
        }
        w->nsge = 0;
        return STATUS_SUCCESS;
    }
    if (n > max_sge)
        return STATUS_INVALID_PARAMETER;
    /* The check's answer may be reused when the request goes out (mem.h,
     * mem_check_posted). */
    NTSTATUS st = mem_check_posted(qp->obj.ad->dev->mem, qp->pd, sgl, n, 0, &w->sge_gen);
    if (st != STATUS_SUCCESS)
        return st;
    if (n)
        memcpy(w->sge, sgl, n * sizeof *sgl);
    w->nsge = n;
    return STATUS_SUCCESS;
}

/* The start a Send and a Write share: sq_begin, then a slot of kind op
 * holding the payload sgl (copied now if inline). On success sq_lock is held
 * and *qpp, *wp are the QP and the slot. */
static NTSTATUS sq_begin_payload(NDK_QP *q, PVOID ctx, const NDK_SGE *sgl, ULONG n, ULONG *flags,
                                 ULONG allowed, enum swqe_op op, struct ndk_qp_impl **qpp,
                                 struct ndk_swqe **wp)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, true, flags, allowed, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_swqe *w = sq_slot(qp, ctx, op);
    if ((st = copy_payload_sges(qp, w, sgl, n, qp->iq_sge, *flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    *qpp = qp;
    *wp = w;
    return STATUS_SUCCESS;
}

static NTSTATUS post_send(NDK_QP *q, PVOID ctx, const NDK_SGE *sgl, ULONG n, ULONG flags, bool inv,
                          UINT32 token)
{
    struct ndk_qp_impl *qp;
    struct ndk_swqe *w;
    NTSTATUS st = sq_begin_payload(q, ctx, sgl, n, &flags, SEND_FLAGS, SWQE_SEND, &qp, &w);
    if (st != STATUS_SUCCESS)
        return st;
    bool se = (flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
    w->rdmap_op = rdmap_send_opcode(inv, se);
    w->inv_stag = inv ? token : 0;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_send(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags)
{
    return post_send(q, ctx, sgl, n, flags, false, 0);
}

static NTSTATUS qp_send_inv(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags, UINT32 token)
{
    return post_send(q, ctx, sgl, n, flags, true, token);
}

static NTSTATUS qp_write(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr, UINT32 rtoken,
                         ULONG flags)
{
    struct ndk_qp_impl *qp;
    struct ndk_swqe *w;
    NTSTATUS st = sq_begin_payload(q, ctx, sgl, n, &flags, WRITE_FLAGS, SWQE_WRITE, &qp, &w);
    if (st != STATUS_SUCCESS)
        return st;
    w->raddr = raddr;
    w->rtoken = rtoken;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_read(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr, UINT32 rtoken,
                        ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, !n || sgl, &flags, READ_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if (qp->dp.ord == 0)
        return sq_fail(qp, STATUS_INVALID_DEVICE_STATE); /* no reads were negotiated */
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(qp->obj.ad, &info);
    if (n > info.MaxReadRequestSge)
        return sq_fail(qp, STATUS_INVALID_PARAMETER);
    uint64_t total = 0;
    for (ULONG i = 0; i < n; i++)
        total += sgl[i].Length;
    if (total > info.MaxTransferLength)
        return sq_fail(qp, STATUS_INVALID_PARAMETER);
    /* The sink is written locally: it needs local write (NdkRead;
     * NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED: no read-sink right). */
    uint64_t gen;
    st = mem_check_posted(qp->obj.ad->dev->mem, qp->pd, sgl, n, MEM_LOCAL_WRITE, &gen);
    if (st != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp, ctx, SWQE_READ);
    w->sge_gen = gen;
    if (n)
        memcpy(w->sge, sgl, n * sizeof *sgl);
    w->nsge = n;
    w->total = (ULONG)total;
    w->raddr = raddr;
    w->rtoken = rtoken;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_bind(NDK_QP *q, PVOID ctx, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len, ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, true, &flags, BIND_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if ((st = mem_check_bind(qp, mr, mw, va, len, flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp, ctx, SWQE_BIND);
    w->mr = mr;
    w->mw = mw;
    w->va = va;
    w->len = len;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_fast_register(NDK_QP *q, PVOID ctx, NDK_MR *mr, ULONG npages,
                                 CONST NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len, PVOID va,
                                 ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, !npages || pages, &flags, FASTREG_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if ((st = mem_check_fast_register(qp, mr, npages, pages, fbo, len, va, flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    NDK_LOGICAL_ADDRESS *copy = NULL;
    if (npages) {
        /* The page array need only be valid during the call. */
        copy = malloc(npages * sizeof *copy);
        if (!copy)
            return sq_fail(qp, STATUS_INSUFFICIENT_RESOURCES);
        memcpy(copy, pages, npages * sizeof *copy);
    }
    struct ndk_swqe *w = sq_slot(qp, ctx, SWQE_FASTREG);
    w->mr = mr;
    w->pages = copy;
    w->npages = npages;
    w->fbo = fbo;
    w->len = len;
    w->va = va;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_invalidate(NDK_QP *q, PVOID ctx, NDK_OBJECT_HEADER *obj, ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, obj != NULL, &flags, INVALIDATE_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if ((st = mem_check_invalidate(qp, obj)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp, ctx, SWQE_INVALIDATE);
    w->target = obj;
    return sq_post(qp, w, flags);
}

static NTSTATUS qp_receive(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n)
{
    struct ndk_qp_impl *qp = qp_from(q);
    if (!qp || (n && !sgl))
        return STATUS_INVALID_PARAMETER;
    if (qp->dp.srq)
        return STATUS_INVALID_DEVICE_REQUEST; /* receives come from the SRQ (5.5.5) */
    if (n > qp->rq_sge)
        return STATUS_INVALID_PARAMETER;
    uint64_t total, gen;
    NTSTATUS st = mem_check_receive_posted(qp->obj.ad->dev->mem, qp->pd, sgl, n, NDK_MAX_TRANSFER, &total, &gen);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rq_lock);
    if (dp->rq_count >= qp->rq_depth) {
        pthread_mutex_unlock(&dp->rq_lock);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    struct ndk_rwqe *r = &dp->rq[qp_rq_idx(qp, dp->rq_head + dp->rq_count)];
    ndk_rwqe_set(r, ctx, sgl, n, total);
    r->sge_gen = gen;
    dp->rq_count++;
    bool dead = dp->state == QP_ERROR;
    pthread_mutex_unlock(&dp->rq_lock);
    if (dead)
        qp_flush_receives(qp); /* a QP in error completes new receives as flushed */
    const struct ndk_xp_ops *xp = dp->xp;
    if (xp && xp->after_receive)
        xp->after_receive(qp);
    return STATUS_SUCCESS;
}

static VOID qp_flush(NDK_QP *q)
{
    struct ndk_qp_impl *qp = qp_from(q);
    if (!qp)
        return;
    /*
     * 5.9.1: every pending request completes with STATUS_CANCELLED. That is
     * all NdkFlush does: the connection ends only by NdkDisconnect, a close
     * or the peer (docs/behaviour.md). The QP is done, though: posts fail
     * from now on, and the transport sends and places nothing more
     * (transport.h, flush).
     */
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    if (dp->xp)
        dp->xp->flush(qp);
    if (dp->state == QP_RTS) {
        dp->state = QP_ERROR;
        dp->flushed = true;
    }
    qp_flush_sq(qp, STATUS_CANCELLED, 0);
    pthread_mutex_unlock(&dp->sq_lock);
    qp_flush_rx_message(qp);
    pthread_mutex_unlock(&dp->rx_lock);
    qp_flush_rq(qp);
}

/* The entry points: what a post completes at once (a receive on a QP in
 * error, the flushed requests, a request the transport finished at once,
 * the peer's receive a loopback Send filled) is notified only once the
 * call returns (ndk_post_enter, core.h). */
#define AS_POST(call)                                                                        \
    do {                                                                                     \
        ndk_post_enter();                                                                    \
        NTSTATUS st_ = (call);                                                               \
        ndk_post_leave();                                                                    \
        return st_;                                                                          \
    } while (0)

static VOID entry_flush(NDK_QP *q)
{
    ndk_post_enter();
    qp_flush(q);
    ndk_post_leave();
}
static NTSTATUS entry_send(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags)
{
    AS_POST(qp_send(q, ctx, sgl, n, flags));
}
static NTSTATUS entry_send_inv(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, ULONG flags,
                               UINT32 token)
{
    AS_POST(qp_send_inv(q, ctx, sgl, n, flags, token));
}
static NTSTATUS entry_receive(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n)
{
    AS_POST(qp_receive(q, ctx, sgl, n));
}
static NTSTATUS entry_bind(NDK_QP *q, PVOID ctx, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                           ULONG flags)
{
    AS_POST(qp_bind(q, ctx, mr, mw, va, len, flags));
}
static NTSTATUS entry_fast_register(NDK_QP *q, PVOID ctx, NDK_MR *mr, ULONG npages,
                                    CONST NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                    PVOID va, ULONG flags)
{
    AS_POST(qp_fast_register(q, ctx, mr, npages, pages, fbo, len, va, flags));
}
static NTSTATUS entry_invalidate(NDK_QP *q, PVOID ctx, NDK_OBJECT_HEADER *obj, ULONG flags)
{
    AS_POST(qp_invalidate(q, ctx, obj, flags));
}
static NTSTATUS entry_read(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr,
                           UINT32 rtoken, ULONG flags)
{
    AS_POST(qp_read(q, ctx, sgl, n, raddr, rtoken, flags));
}
static NTSTATUS entry_write(NDK_QP *q, PVOID ctx, CONST NDK_SGE *sgl, ULONG n, UINT64 raddr,
                            UINT32 rtoken, ULONG flags)
{
    AS_POST(qp_write(q, ctx, sgl, n, raddr, rtoken, flags));
}

const NDK_QP_DISPATCH ndk_qp_dispatch = {
    .NdkCloseQp = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkFlush = entry_flush,
    .NdkSend = entry_send,
    .NdkReceive = entry_receive,
    .NdkBind = entry_bind,
    .NdkFastRegister = entry_fast_register,
    .NdkInvalidate = entry_invalidate,
    .NdkRead = entry_read,
    .NdkWrite = entry_write,
    .NdkSendAndInvalidate = entry_send_inv,
};
