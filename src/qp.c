/*
 * Queue pairs: creation, the posting functions of NDK_QP_DISPATCH, and the
 * completion rules (exactly one CQE per accepted request, none for an inline
 * failure or a silent success; in posting order; STATUS_CANCELLED when
 * flushed). Transmit and receive engines: qp_tx.c, qp_rx.c.
 */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "objects.h"
#include "wire/term.h"

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

int ndk_iov_slice(const struct iovec *src, int nsrc, uint64_t off, uint64_t len, struct iovec *dst,
                  int max)
{
    int n = 0;
    for (int i = 0; i < nsrc && len; i++) {
        if (off >= src[i].iov_len) {
            off -= src[i].iov_len;
            continue;
        }
        size_t take = src[i].iov_len - off;
        if (take > len)
            take = len;
        if (n == max)
            return -1;
        dst[n++] = (struct iovec){(char *)src[i].iov_base + off, take};
        len -= take;
        off = 0;
    }
    return len ? -1 : n;
}

uint32_t qp_sq_idx(const struct ndk_qp_impl *qp, uint32_t i)
{
    return i % qp->iq_depth;
}

static const NDK_OPERATION_TYPE swqe_type[] = {
    [SWQE_SEND] = NdkOperationTypeSend,
    [SWQE_WRITE] = NdkOperationTypeWrite,
    [SWQE_READ] = NdkOperationTypeRead,
    [SWQE_BIND] = NdkOperationTypeBind,
    [SWQE_FASTREG] = NdkOperationTypeFastRegister,
    [SWQE_INVALIDATE] = NdkOperationTypeInvalidate,
};

void qp_set_end_reason(struct ndk_qp_impl *qp, ULONG reason)
{
    ULONG none = 0;
    __atomic_compare_exchange_n(&qp->dp.end_reason, &none, reason, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
}

ULONG ndk_qp_end_reason(struct ndk_qp_impl *qp)
{
    return __atomic_load_n(&qp->dp.end_reason, __ATOMIC_RELAXED);
}

void qp_push_cqe(struct ndk_qp_impl *qp, struct ndk_cq_impl *cq, const struct ndk_cqe *e)
{
    /* A full CQ makes it and every QP using it unusable (reference 8.1):
     * the entry is lost and the connection is torn down. */
    if (!ndk_cq_push(cq, e) && qp->dp.state == QP_RTS) {
        qp->dp.state = QP_ERROR;
        qp_set_end_reason(qp, NDK_DISCONNECT_REASON_LOCAL_ERROR);
        if (qp->dp.xp && qp->dp.xp->local_error)
            qp->dp.xp->local_error(qp);
    }
}

/* Emits the CQEs of finished requests from the head, in posting order
 * (RFC 5040 rule 15: a Send after an unanswered Read completes after it). */
void ndk_xp_sq_complete(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    while (dp->sq_count) {
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_head)];
        if (!w->done)
            break;
        if (w->status != STATUS_SUCCESS || w->signalled) {
            struct ndk_cqe e = {
                .status = w->status,
                .qp_ctx = qp->context,
                .req_ctx = w->ctx,
                .type = swqe_type[w->op],
                .provider_error = w->status == STATUS_SUCCESS ? 0 : w->perr,
            };
            qp_push_cqe(qp, qp->icq, &e);
        }
        free(w->pages);
        w->pages = NULL;
        if (dp->sq_tx == dp->sq_head)
            dp->sq_tx++;
        dp->sq_head++;
        dp->sq_count--;
    }
}

/* Completes every outstanding initiator request with STATUS_CANCELLED,
 * except that a received Terminate naming one of our Read Requests gives the
 * oldest unanswered Read `read_st`. perr (the Terminate control word, when a
 * Terminate ended the stream) goes with every failed entry as its
 * ProviderErrorCode. sq_lock held. */
void qp_flush_sq(struct ndk_qp_impl *qp, NTSTATUS read_st, ULONG perr)
{
    struct ndk_qp_dp *dp = &qp->dp;
    bool blamed = read_st == STATUS_CANCELLED;
    for (uint32_t i = 0; i < dp->sq_count; i++) {
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_head + i)];
        if (w->done)
            continue; /* it did complete (a Read: its answer was placed) */
        bool sent = i < dp->sq_tx - dp->sq_head;
        if (!blamed && w->op == SWQE_READ && sent) {
            w->status = read_st;
            blamed = true;
        } else {
            w->status = STATUS_CANCELLED;
        }
        w->perr = perr;
        w->done = true;
    }
    if (dp->xp)
        dp->xp->forget(qp);
    ndk_xp_sq_complete(qp);
}

void qp_flush_rq(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rq_lock);
    while (dp->rq_count) {
        struct ndk_rwqe *r = &dp->rq[dp->rq_head % qp->rq_depth];
        struct ndk_cqe e = {
            .status = STATUS_CANCELLED,
            .qp_ctx = qp->context,
            .req_ctx = r->ctx,
            .type = NdkOperationTypeReceive,
        };
        dp->rq_head++;
        dp->rq_count--;
        qp_push_cqe(qp, qp->rcq, &e);
    }
    pthread_mutex_unlock(&dp->rq_lock);
}

/* The receive taken for a message still being received (rx_lock held). */
void qp_flush_rx_message(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (!dp->rx_msg_active)
        return;
    dp->rx_msg_active = false;
    struct ndk_cqe e = {
        .status = dp->rx_fail_status ? dp->rx_fail_status : STATUS_CANCELLED,
        .qp_ctx = qp->context,
        .req_ctx = dp->rx_wqe.ctx,
        .type = NdkOperationTypeReceive,
    };
    dp->rx_fail_status = 0;
    qp_push_cqe(qp, qp->rcq, &e);
}

void ndk_qp_flush_all(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    qp_flush_rx_message(qp);
    pthread_mutex_lock(&dp->sq_lock);
    qp_flush_sq(qp, STATUS_CANCELLED, 0);
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    qp_flush_rq(qp);
}

/* ---- services for the attached transport (transport.h) ---- */

void qp_attach_locked(struct ndk_qp_impl *qp, const struct ndk_xp_ops *ops, void *ctx, uint32_t ird,
                      uint32_t ord)
{
    qp->dp.xp = ops;
    qp->dp.xp_ctx = ctx;
    qp->dp.ird = ird;
    qp->dp.ord = ord;
    qp->dp.state = QP_RTS;
}

void ndk_qp_attach(struct ndk_qp_impl *qp, const struct ndk_xp_ops *ops, void *ctx, uint32_t ird,
                   uint32_t ord)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    pthread_mutex_lock(&qp->dp.sq_lock);
    qp_attach_locked(qp, ops, ctx, ird, ord);
    pthread_mutex_unlock(&qp->dp.sq_lock);
    pthread_mutex_unlock(&qp->dp.rx_lock);
    qp_live_add(qp);
}

void *ndk_xp_ctx(struct ndk_qp_impl *qp)
{
    return qp->dp.xp_ctx;
}

struct ndk_swqe *ndk_xp_sq_next(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->sq_tx - dp->sq_head >= dp->sq_count)
        return NULL;
    return &dp->sq[qp_sq_idx(qp, dp->sq_tx)];
}

void ndk_xp_sq_taken(struct ndk_qp_impl *qp)
{
    qp->dp.sq_tx++;
}

void ndk_xp_sq_finish(struct ndk_qp_impl *qp, NTSTATUS st)
{
    struct ndk_swqe *w = ndk_xp_sq_next(qp);
    w->status = st;
    w->done = true;
    ndk_xp_sq_taken(qp);
    ndk_xp_sq_complete(qp);
}

NTSTATUS ndk_xp_exec_local(struct ndk_qp_impl *qp, const struct ndk_swqe *w)
{
    switch (w->op) {
    case SWQE_BIND:
        return mem_exec_bind(qp, w->mr, w->mw, w->va, w->len, w->flags);
    case SWQE_FASTREG:
        return mem_exec_fast_register(qp, w->mr, w->npages, w->pages, w->fbo, w->len, w->va, w->flags);
    case SWQE_INVALIDATE:
        return mem_exec_invalidate(qp, w->target);
    default:
        return STATUS_INVALID_PARAMETER;
    }
}

bool ndk_xp_take_receive(struct ndk_qp_impl *qp, struct ndk_rwqe *out)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->srq)
        return ndk_srq_take(dp->srq, out);
    pthread_mutex_lock(&dp->rq_lock);
    bool ok = dp->rq_count > 0;
    if (ok) {
        *out = dp->rq[dp->rq_head % qp->rq_depth];
        dp->rq_head++;
        dp->rq_count--;
    }
    pthread_mutex_unlock(&dp->rq_lock);
    return ok;
}

void ndk_xp_complete_receive(struct ndk_qp_impl *qp, void *req_ctx, NTSTATUS st, ULONG bytes,
                             bool inv, uint32_t token, bool se)
{
    struct ndk_cqe e = {
        .status = st,
        .bytes = bytes,
        .qp_ctx = qp->context,
        .req_ctx = req_ctx,
        .type = inv ? NdkOperationTypeReceiveAndInvalidate : NdkOperationTypeReceive,
        .type_specific = inv ? token : 0,
        .solicited = se,
    };
    qp_push_cqe(qp, qp->rcq, &e);
}

enum ddp_stag_fault ndk_xp_stag_fault(enum mem_err e)
{
    switch (e) {
    case MEM_OK:
        return DDP_STAG_OK;
    case MEM_INVALID_STAG:
        return DDP_STAG_INVALID;
    case MEM_NOT_ASSOCIATED:
        return DDP_STAG_PD;
    case MEM_ACCESS:
        return DDP_STAG_ACCESS;
    case MEM_WRAP:
        return DDP_STAG_WRAP;
    default:
        return DDP_STAG_BOUNDS;
    }
}

bool qp_enter_error(struct ndk_qp_impl *qp, ULONG reason)
{
    struct ndk_qp_dp *dp = &qp->dp;
    dp->rx_st = RX_DEAD;
    dp->rx_over = true;
    bool was_rts = dp->state == QP_RTS;
    dp->state = QP_ERROR;
    if (was_rts)
        qp_set_end_reason(qp, reason);
    return was_rts;
}

void ndk_xp_fail(struct ndk_qp_impl *qp, ULONG reason, NTSTATUS read_status, ULONG perr)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    qp_enter_error(qp, reason);
    qp_flush_sq(qp, read_status, perr);
    pthread_mutex_unlock(&dp->sq_lock);
    qp_flush_rx_message(qp);
    pthread_mutex_unlock(&dp->rx_lock);
    qp_flush_rq(qp);
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

static struct ndk_swqe *sq_slot(struct ndk_qp_impl *qp)
{
    struct ndk_swqe *w = &qp->dp.sq[qp_sq_idx(qp, qp->dp.sq_tail)];
    uint8_t *keep_inline = w->inline_data; /* the slot's fixed inline buffer */
    memset(w, 0, sizeof *w);
    w->inline_data = keep_inline;
    return w;
}

static void sq_commit(struct ndk_qp_impl *qp, struct ndk_swqe *w, ULONG flags)
{
    w->flags = flags;
    w->signalled = !(flags & NDK_OP_FLAG_SILENT_SUCCESS);
    w->status = STATUS_SUCCESS;
    qp->dp.sq_tail++;
    qp->dp.sq_count++;
    /* DEFER is a hint (reference 10.3): hold the request until one without
     * it is posted, which the consumer promises will come (D5). */
    if (!(flags & NDK_OP_FLAG_DEFER))
        qp->dp.xp->doorbell(qp);
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
    if (total > (1u << 30))
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
    NTSTATUS st = mem_map_local(qp->obj.ad->dev->mem, qp->pd, sgl, n, MEM_AT_POST, NULL, MEM_LOCAL_IOV_MAX, NULL);
    if (st != STATUS_SUCCESS)
        return st;
    if (n)
        memcpy(w->sge, sgl, n * sizeof *sgl);
    w->nsge = n;
    return STATUS_SUCCESS;
}

static NTSTATUS post_send(NDK_QP *q, PVOID ctx, const NDK_SGE *sgl, ULONG n, ULONG flags, bool inv,
                          UINT32 token)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, true, &flags, SEND_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_swqe *w = sq_slot(qp);
    if ((st = copy_payload_sges(qp, w, sgl, n, qp->iq_sge, flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    bool se = (flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT) != 0;
    w->ctx = ctx;
    w->op = SWQE_SEND;
    w->rdmap_op = inv ? (se ? RDMAP_OP_SEND_SE_INV : RDMAP_OP_SEND_INV)
                      : (se ? RDMAP_OP_SEND_SE : RDMAP_OP_SEND);
    w->inv_stag = inv ? token : 0;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
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
    NTSTATUS st = sq_begin(q, true, &flags, WRITE_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_swqe *w = sq_slot(qp);
    if ((st = copy_payload_sges(qp, w, sgl, n, qp->iq_sge, flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    w->ctx = ctx;
    w->op = SWQE_WRITE;
    w->raddr = raddr;
    w->rtoken = rtoken;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
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
    /* The sink is written locally: it needs local write (reference 9.6;
     * no special read-sink right is required). */
    st = mem_map_local(qp->obj.ad->dev->mem, qp->pd, sgl, n, MEM_LOCAL_WRITE | MEM_AT_POST, NULL,
                       MEM_LOCAL_IOV_MAX, NULL);
    if (st != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp);
    if (n)
        memcpy(w->sge, sgl, n * sizeof *sgl);
    w->nsge = n;
    w->total = (ULONG)total;
    w->ctx = ctx;
    w->op = SWQE_READ;
    w->raddr = raddr;
    w->rtoken = rtoken;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
}

static NTSTATUS qp_bind(NDK_QP *q, PVOID ctx, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len, ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, true, &flags, BIND_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if ((st = mem_check_bind(qp, mr, mw, va, len, flags)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp);
    w->ctx = ctx;
    w->op = SWQE_BIND;
    w->mr = mr;
    w->mw = mw;
    w->va = va;
    w->len = len;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
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
    struct ndk_swqe *w = sq_slot(qp);
    w->ctx = ctx;
    w->op = SWQE_FASTREG;
    w->mr = mr;
    w->pages = copy;
    w->npages = npages;
    w->fbo = fbo;
    w->len = len;
    w->va = va;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
}

static NTSTATUS qp_invalidate(NDK_QP *q, PVOID ctx, NDK_OBJECT_HEADER *obj, ULONG flags)
{
    struct ndk_qp_impl *qp;
    NTSTATUS st = sq_begin(q, obj != NULL, &flags, INVALIDATE_FLAGS, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    if ((st = mem_check_invalidate(qp, obj)) != STATUS_SUCCESS)
        return sq_fail(qp, st);
    struct ndk_swqe *w = sq_slot(qp);
    w->ctx = ctx;
    w->op = SWQE_INVALIDATE;
    w->target = obj;
    sq_commit(qp, w, flags);
    return sq_end(qp, STATUS_SUCCESS);
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
    uint64_t total = 0;
    for (ULONG i = 0; i < n; i++)
        total += sgl[i].Length;
    if (total > (1u << 30))
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = mem_map_local(qp->obj.ad->dev->mem, qp->pd, sgl, n, MEM_LOCAL_WRITE | MEM_AT_POST, NULL,
                                MEM_LOCAL_IOV_MAX, NULL);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rq_lock);
    if (dp->rq_count >= qp->rq_depth) {
        pthread_mutex_unlock(&dp->rq_lock);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    struct ndk_rwqe *r = &dp->rq[(dp->rq_head + dp->rq_count) % qp->rq_depth];
    r->ctx = ctx;
    r->nsge = n;
    r->total = (ULONG)total;
    if (n)
        memcpy(r->sge, sgl, n * sizeof *sgl);
    dp->rq_count++;
    bool dead = dp->state == QP_ERROR;
    pthread_mutex_unlock(&dp->rq_lock);
    if (dead)
        qp_flush_rq(qp); /* a QP in error completes new receives as flushed */
    const struct ndk_xp_ops *xp = dp->xp;
    if (xp && xp->after_post)
        xp->after_post(qp);
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

/* ---- connection life ---- */

static void link_in(struct ndk_qp_link *head, struct ndk_qp_link *l, struct ndk_qp_impl *qp)
{
    l->qp = qp;
    l->prev = head;
    l->next = head->next;
    head->next->prev = l;
    head->next = l;
}

static void link_out(struct ndk_qp_link *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->next = l->prev = l;
}

/* A CQ of a busy-polling adapter reads its QPs' input when polled. */
static void cq_enable_busy_poll(struct ndk_cq_impl *cq)
{
    if (!cq->obj.ad->busy_poll)
        return;
    __atomic_store_n(&cq->arm_hook, ndk_qp_end_leases, __ATOMIC_RELEASE);
    __atomic_store_n(&cq->poll_hook, ndk_qp_busy_poll, __ATOMIC_RELEASE);
}

void qp_live_add(struct ndk_qp_impl *qp)
{
    cq_enable_busy_poll(qp->rcq);
    cq_enable_busy_poll(qp->icq);
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->dev->live_lock);
    if (!qp->dp.live) {
        qp->dp.live = true;
        qp->dp.live_prev = NULL;
        qp->dp.live_next = ad->dev->live_qps;
        if (ad->dev->live_qps)
            ad->dev->live_qps->dp.live_prev = qp;
        ad->dev->live_qps = qp;
        link_in(&qp->rcq->live_qps, &qp->dp.on_rcq, qp);
        if (qp->icq != qp->rcq)
            link_in(&qp->icq->live_qps, &qp->dp.on_icq, qp);
    }
    pthread_mutex_unlock(&ad->dev->live_lock);
}

/* Lease changes, live_lock held. */
static void lease_take(struct ndk_device *dev, struct ndk_qp_impl *qp)
{
    const struct ndk_xp_ops *xp = qp->dp.xp;
    qp->dp.lease_polled = true;
    if (qp->dp.input_leased || !xp || !xp->lease_input || !xp->lease_input(qp, true))
        return;
    qp->dp.input_leased = true;
    /* The progress thread may be asleep with no timeout: it must start
     * looking at leases now. */
    if (__atomic_fetch_add(&dev->input_leases, 1, __ATOMIC_RELAXED) == 0)
        loop_wake(&dev->loop);
}

static void lease_end(struct ndk_device *dev, struct ndk_qp_impl *qp)
{
    if (!qp->dp.input_leased)
        return;
    qp->dp.input_leased = false;
    __atomic_fetch_sub(&dev->input_leases, 1, __ATOMIC_RELAXED);
    qp->dp.xp->lease_input(qp, false);
}

static void live_remove(struct ndk_qp_impl *qp)
{
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->dev->live_lock);
    /* The connection winds down on the progress thread, which must see
     * the peer's last octets and its FIN. */
    lease_end(ad->dev, qp);
    if (qp->dp.live) {
        qp->dp.live = false;
        if (qp->dp.live_prev)
            qp->dp.live_prev->dp.live_next = qp->dp.live_next;
        else
            ad->dev->live_qps = qp->dp.live_next;
        if (qp->dp.live_next)
            qp->dp.live_next->dp.live_prev = qp->dp.live_prev;
        link_out(&qp->dp.on_rcq);
        if (qp->icq != qp->rcq)
            link_out(&qp->dp.on_icq);
    }
    pthread_mutex_unlock(&ad->dev->live_lock);
}

/* Is a consumer waiting on cq for completions (armed for more than
 * errors)? A racy look: a stale answer costs one lease more or less. */
static bool sleeper_on(const struct ndk_cq_impl *cq)
{
    int armed = __atomic_load_n(&cq->armed, __ATOMIC_RELAXED);
    return armed >= 0 && armed != NDK_CQ_NOTIFY_ERRORS;
}

void ndk_qp_busy_poll(struct ndk_cq_impl *cq)
{
    struct ndk_adapter_impl *ad = cq->obj.ad;
    if (!ad->busy_poll)
        return;
    /* The live list lock is held across the reads: a QP leaves the list
     * (ndk_qp_stop) before its transport goes, so none vanishes under us.
     * trylock keeps a poller from waiting behind the progress thread. */
    pthread_mutex_lock(&ad->dev->live_lock);
    for (struct ndk_qp_link *l = cq->live_qps.next; l != &cq->live_qps; l = l->next) {
        struct ndk_qp_impl *qp = l->qp;
        if (qp->dp.xp->poll)
            qp->dp.xp->poll(qp);
        /* While we poll, waking the progress thread for the same input
         * only makes it compete with us (on one CPU, a context switch per
         * message). Not while a consumer sleeps on the QP's other CQ for
         * completions: its notification should not wait for our polling. */
        if (!sleeper_on(qp->rcq) && !sleeper_on(qp->icq))
            lease_take(ad->dev, qp);
    }
    pthread_mutex_unlock(&ad->dev->live_lock);
}

void ndk_qp_end_leases(struct ndk_cq_impl *cq)
{
    struct ndk_adapter_impl *ad = cq->obj.ad;
    if (!ad->busy_poll)
        return;
    pthread_mutex_lock(&ad->dev->live_lock);
    for (struct ndk_qp_link *l = cq->live_qps.next; l != &cq->live_qps; l = l->next)
        lease_end(ad->dev, l->qp);
    pthread_mutex_unlock(&ad->dev->live_lock);
}

void ndk_qp_age_leases(struct ndk_device *dev)
{
    pthread_mutex_lock(&dev->live_lock);
    for (struct ndk_qp_impl *qp = dev->live_qps; qp; qp = qp->dp.live_next) {
        if (!qp->dp.input_leased)
            continue;
        if (qp->dp.lease_polled)
            qp->dp.lease_polled = false;
        else
            lease_end(dev, qp);
    }
    pthread_mutex_unlock(&dev->live_lock);
}

void ndk_qp_stop(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    live_remove(qp);
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
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
    pthread_mutex_destroy(&dp->sq_lock);
    pthread_mutex_destroy(&dp->rq_lock);
    pthread_mutex_destroy(&dp->rx_lock);
    free(qp);
}

static const struct ndk_obj_ops qp_ops = {.destroy = qp_destroy, .free = qp_free};

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
    qp->iq_depth = InitiatorQueueDepth ? InitiatorQueueDepth : 1;
    qp->iq_admit = InitiatorQueueDepth;
    qp->rq_sge = MaxReceiveRequestSge;
    qp->iq_sge = MaxInitiatorRequestSge;
    qp->inline_size = InlineDataSize;
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_init(&dp->sq_lock, NULL);
    pthread_mutex_init(&dp->rq_lock, NULL);
    pthread_mutex_init(&dp->rx_lock, NULL);
    dp->sq = calloc(qp->iq_depth, sizeof *dp->sq);
    dp->rq = srqo ? NULL : calloc(qp->rq_depth, sizeof *dp->rq);
    if (InlineDataSize)
        dp->inline_pool = malloc((size_t)InlineDataSize * qp->iq_depth);
    if (!dp->sq || (!srqo && !dp->rq) || (InlineDataSize && !dp->inline_pool)) {
        qp_free(&qp->obj);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    for (ULONG i = 0; i < qp->iq_depth; i++)
        dp->sq[i].inline_data = InlineDataSize ? dp->inline_pool + (size_t)i * InlineDataSize : NULL;
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
        dp->srq = container_of(srqo, struct ndk_srq_impl, obj);
    }
    ndk_obj_init(&qp->obj, ad, NdkObjectTypeQp, &qp_dispatch, &qp_ops);
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
