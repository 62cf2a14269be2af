/*
 * The QP's completion rules, whatever the transport: exactly one CQE per
 * accepted request, none for an inline failure or a silent success; in
 * posting order; STATUS_CANCELLED when flushed. And the services the
 * attached transport works through (transport.h).
 */
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "objects.h"

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
    qp_push_cqes(qp, cq, e, 1);
}

void qp_push_cqes(struct ndk_qp_impl *qp, struct ndk_cq_impl *cq, const struct ndk_cqe *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (e[i].status == STATUS_SUCCESS)
            NDK_STAT_ADD(qp->dp.st.cqe_success, 1);
        else if (e[i].status == STATUS_CANCELLED)
            NDK_STAT_ADD(qp->dp.st.cqe_cancelled, 1);
        else
            NDK_STAT_ADD(qp->dp.st.cqe_error, 1);
    }
    /* A full CQ makes it and every QP using it unusable (docs/behaviour.md, Completions):
     * the entry is lost and the connection is torn down. */
    if (ndk_cq_push_n(cq, e, n) < n && qp->dp.state == QP_RTS) {
        qp->dp.state = QP_ERROR;
        qp_set_end_reason(qp, NDK_DISCONNECT_REASON_LOCAL_ERROR);
        if (qp->dp.xp && qp->dp.xp->local_error)
            qp->dp.xp->local_error(qp);
    }
}

#define SQ_CQE_BATCH 32

/* Emits the CQEs of finished requests from the head, in posting order
 * (RFC 5040 rule 15: a Send after an unanswered Read completes after it). */
void ndk_xp_sq_complete(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* Pushed in batches: the CQ's lock once per batch, not per entry. */
    struct ndk_cqe e[SQ_CQE_BATCH];
    size_t n = 0;
    while (dp->sq_count) {
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_head)];
        if (!w->done)
            break;
        if (w->status != STATUS_SUCCESS || w->signalled) {
            e[n++] = (struct ndk_cqe){
                .status = w->status,
                .qp_ctx = qp->context,
                .req_ctx = w->ctx,
                .type = swqe_type[w->op],
                .provider_error = w->status == STATUS_SUCCESS ? 0 : w->perr,
            };
            if (n == SQ_CQE_BATCH) {
                qp_push_cqes(qp, qp->icq, e, n);
                n = 0;
            }
        }
        free(w->pages);
        w->pages = NULL;
        if (dp->sq_tx == dp->sq_head)
            dp->sq_tx++;
        dp->sq_head++;
        dp->sq_count--;
    }
    if (n)
        qp_push_cqes(qp, qp->icq, e, n);
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
        struct ndk_rwqe *r = &dp->rq[qp_rq_idx(qp, dp->rq_head)];
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

/* NdkReceive on a QP in error. The receives the transport took and still
 * holds were posted before those queued, so they complete first: the QP
 * may be in error while the transport holds some (its CQ overflowed:
 * qp_push_cqes, local_error; the connection's end comes later, from
 * another thread), and the receive engine may be completing some under
 * rx_lock (a pass's batch, ndk_xp_rcv_flush; iWARP's message being
 * received, which a flush holding rx_lock completes). iWARP's message is
 * completed here only once its engine stopped (ndk_qp_stop: it may still
 * read a payload into it while the QP is in error otherwise). */
void qp_flush_receives(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    if (dp->xp_ctx && dp->xp->stop)
        dp->xp->stop(qp);
    pthread_mutex_unlock(&dp->sq_lock);
    if (dp->rx_st == RX_DEAD || dp->rx_st == RX_DISCARD)
        qp_flush_rx_message(qp);
    pthread_mutex_unlock(&dp->rx_lock);
    qp_flush_rq(qp);
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

unsigned ndk_xp_take_receives(struct ndk_qp_impl *qp, struct ndk_rwqe *out, unsigned n)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->srq)
        return n && ndk_srq_take(dp->srq, out) ? 1 : 0; /* the other QPs of the SRQ get theirs */
    unsigned k = 0;
    pthread_mutex_lock(&dp->rq_lock);
    for (; k < n && dp->rq_count; k++) {
        const struct ndk_rwqe *r = &dp->rq[qp_rq_idx(qp, dp->rq_head)];
        ndk_rwqe_set(&out[k], r->ctx, r->sge, r->nsge, r->total);
        out[k].sge_gen = r->sge_gen;
        dp->rq_head++;
        dp->rq_count--;
    }
    pthread_mutex_unlock(&dp->rq_lock);
    return k;
}

bool ndk_xp_take_receive(struct ndk_qp_impl *qp, struct ndk_rwqe *out)
{
    return ndk_xp_take_receives(qp, out, 1) == 1;
}

/* The CQE of a completed receive. */
static struct ndk_cqe receive_cqe(const struct ndk_qp_impl *qp, void *req_ctx, NTSTATUS st, ULONG bytes, bool inv,
                                  uint32_t token, bool se)
{
    return (struct ndk_cqe){
        .status = st,
        .bytes = bytes,
        .qp_ctx = qp->context,
        .req_ctx = req_ctx,
        .type = inv ? NdkOperationTypeReceiveAndInvalidate : NdkOperationTypeReceive,
        .type_specific = inv ? token : 0,
        .solicited = se,
    };
}

void ndk_xp_complete_receive(struct ndk_qp_impl *qp, void *req_ctx, NTSTATUS st, ULONG bytes,
                             bool inv, uint32_t token, bool se)
{
    struct ndk_cqe e = receive_cqe(qp, req_ctx, st, bytes, inv, token, se);
    qp_push_cqe(qp, qp->rcq, &e);
}

void ndk_xp_rcv_add(struct ndk_qp_impl *qp, struct ndk_xp_rcv_batch *b, void *req_ctx, NTSTATUS st, ULONG bytes,
                    bool inv, uint32_t token, bool se)
{
    if (b->n == NDK_XP_RCV_BATCH)
        ndk_xp_rcv_flush(qp, b);
    b->e[b->n++] = receive_cqe(qp, req_ctx, st, bytes, inv, token, se);
}

void ndk_xp_rcv_flush(struct ndk_qp_impl *qp, struct ndk_xp_rcv_batch *b)
{
    if (b->n)
        qp_push_cqes(qp, qp->rcq, b->e, b->n);
    b->n = 0;
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
