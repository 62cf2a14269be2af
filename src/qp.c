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
    if (e->status == STATUS_SUCCESS)
        NDK_STAT_ADD(qp->dp.st.cqe_success, 1);
    else if (e->status == STATUS_CANCELLED)
        NDK_STAT_ADD(qp->dp.st.cqe_cancelled, 1);
    else
        NDK_STAT_ADD(qp->dp.st.cqe_error, 1);
    /* A full CQ makes it and every QP using it unusable (reference 8.1):
     * the entry is lost and the connection is torn down. */
    if (!ndk_cq_push(cq, e) && qp->dp.state == QP_RTS) {
        qp->dp.state = QP_ERROR;
        qp_set_end_reason(qp, NDK_DISCONNECT_REASON_LOCAL_ERROR);
        if (qp->dp.tr)
            qp->dp.tr->ops->failed(qp->dp.tr, false);
    }
}

/* Emits the CQEs of finished requests from the head, in posting order
 * (RFC 5040 rule 15: a Send after an unanswered Read completes after it). */
void qp_complete_sq_in_order(struct ndk_qp_impl *qp)
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
static void flush_sq(struct ndk_qp_impl *qp, NTSTATUS read_st, ULONG perr)
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
    dp->reads_out = 0;
    dp->orq_count = 0;
    dp->irq_count = 0;
    dp->irq_framed = 0;
    dp->tx_cur = 0;
    qp_complete_sq_in_order(qp);
}

static void flush_rq(struct ndk_qp_impl *qp)
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
static void flush_rx_message(struct ndk_qp_impl *qp)
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
    flush_rx_message(qp);
    pthread_mutex_lock(&dp->sq_lock);
    flush_sq(qp, STATUS_CANCELLED, 0);
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    flush_rq(qp);
}

/* Maps a received Terminate to the status of the request it condemns. */
NTSTATUS ndk_status_from_term(uint8_t layer, uint8_t etype, uint8_t code)
{
    if ((layer == TERM_LAYER_RDMAP && etype == TERM_ETYPE_RDMAP_PROTECTION) ||
        (layer == TERM_LAYER_DDP && etype == TERM_ETYPE_DDP_TAGGED)) {
        bool bounds = (layer == TERM_LAYER_RDMAP && (code == TERM_RP_BOUNDS || code == TERM_RP_TO_WRAP)) ||
                      (layer == TERM_LAYER_DDP && (code == TERM_DT_BOUNDS || code == TERM_DT_TO_WRAP));
        return bounds ? STATUS_REMOTE_RESOURCES : STATUS_ACCESS_VIOLATION;
    }
    if (layer == TERM_LAYER_DDP && etype == TERM_ETYPE_DDP_UNTAGGED &&
        (code == TERM_DU_NO_BUFFER || code == TERM_DU_TOO_LONG))
        return STATUS_REMOTE_RESOURCES;
    if (layer == TERM_LAYER_RDMAP && etype == TERM_ETYPE_RDMAP_OPERATION && code == TERM_RO_CANT_INVALIDATE)
        return STATUS_ACCESS_VIOLATION;
    return STATUS_CONNECTION_ABORTED;
}

/* The receive engine drops what comes from now on (rx_lock held). */
static void rx_discard_start(struct ndk_qp_dp *dp, uint64_t limit)
{
    dp->rx_st = RX_DISCARD;
    dp->rx_over = false;
    dp->rx_discard_left = limit;
}

bool ndk_qp_failed(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    pthread_mutex_lock(&qp->dp.sq_lock);
    bool failed = (qp->dp.state == QP_ERROR && !qp->dp.flushed) || !qp->dp.rx_eof;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    pthread_mutex_unlock(&qp->dp.rx_lock);
    return failed;
}

bool ndk_qp_rx_over(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    bool over = qp->dp.rx_over;
    pthread_mutex_unlock(&qp->dp.rx_lock);
    return over;
}

/*
 * The stream is unusable: our own check failed (send_term: queue the
 * Terminate naming the offender), or the peer's Terminate arrived (term is
 * its content, send_term false). Every outstanding request completes now;
 * the transport is shut down once the Terminate is out. rx_lock held.
 */
void qp_fatal(struct ndk_qp_impl *qp, const struct ddp_term *term, const uint8_t *offender,
              size_t offender_len, bool send_term)
{
    struct ndk_qp_dp *dp = &qp->dp;
    dp->rx_st = RX_DEAD;
    dp->rx_over = true;
    pthread_mutex_lock(&dp->sq_lock);
    bool was_rts = dp->state == QP_RTS;
    dp->state = QP_ERROR;
    if (was_rts) {
        /* A Terminate that names a Terminate as its offender (a malformed
         * one we received) is not answered: it is the peer's. */
        ULONG why = !term                          ? NDK_DISCONNECT_REASON_ABORTED
                    : send_term && !term->no_reply ? NDK_DISCONNECT_REASON_TERMINATE_SENT
                                                   : NDK_DISCONNECT_REASON_TERMINATE_RECEIVED;
        qp_set_end_reason(qp, why);
    }
    NTSTATUS head = STATUS_CANCELLED;
    ULONG perr = 0;
    if (term) {
        /* ProviderErrorCode: the Terminate's control word as on the wire
         * (the peer's, whatever it holds, even 0; else the one we send). */
        perr = !send_term ? dp->rx_term_ctrl
                          : term_ctrl_pack(term->layer, term->etype, term->code, term->ddp_hdr, term->ddp_hdr,
                                           term->rdma_hdr);
        /* A received Terminate condemns one of our requests only if it
         * names a Read Request (term->rdma_hdr, set by the receive path):
         * Writes and Sends completed when TCP took them (RFC 5040 rule 14). */
        if (!send_term && term->rdma_hdr)
            head = ndk_status_from_term(term->layer, term->etype, term->code);
    }
    if (send_term && term && was_rts && !term->no_reply && !dp->term_len) {
        uint8_t ulpdu[80];
        uint16_t seg_len = 0;
        const uint8_t *rdma = NULL;
        if (offender && offender_len >= 2) {
            seg_len = ddp_rd16(offender);
            if (offender_len >= 2 + RDMAP_READ_REQ_ULPDU_LEN)
                rdma = offender + 2 + DDP_UNTAGGED_HDR_LEN;
        }
        size_t n = term_encode(ulpdu, sizeof ulpdu, term, seg_len, offender ? offender + 2 : NULL,
                               offender_len >= 2 ? offender_len - 2 : 0, rdma);
        if (n)
            qp_tx_terminate(qp, ulpdu, n);
    }
    if (dp->term_len && !dp->tx_dead && dp->tr) {
        /* Our Terminate goes out, then our FIN; the peer closes once it
         * read it. Until then what it sent behind the offender is read and
         * dropped: left unread it fills our receive window, and its FIN
         * never arrives (bounded in octets here, in time by the owner). */
        rx_discard_start(dp, RX_DISCARD_MAX_OCTETS);
    }
    flush_sq(qp, head, perr);
    pthread_mutex_unlock(&dp->sq_lock);
    flush_rx_message(qp);
    flush_rq(qp);
    pthread_mutex_lock(&dp->sq_lock);
    /* With a Terminate the transmit engine sends it, then our FIN, and the
     * owner waits for the peer to close; without one the stream just ends. */
    if (!dp->term_len && dp->tr && was_rts)
        dp->tr->ops->failed(dp->tr, false);
    pthread_mutex_unlock(&dp->sq_lock);
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
        qp_tx_progress(qp);
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
        qp_tx_progress(qp);
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return st;
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
    NTSTATUS st = mem_map_local(qp->obj.ad->mem, qp->pd, sgl, n, MEM_AT_POST, NULL, MEM_LOCAL_IOV_MAX, NULL);
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    st = mem_map_local(qp->obj.ad->mem, qp->pd, sgl, n, MEM_LOCAL_WRITE | MEM_AT_POST, NULL,
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return STATUS_SUCCESS;
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
    NTSTATUS st = mem_map_local(qp->obj.ad->mem, qp->pd, sgl, n, MEM_LOCAL_WRITE | MEM_AT_POST, NULL,
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
        flush_rq(qp); /* a QP in error completes new receives as flushed */
    else if (__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST))
        ndk_qp_rx_resume(qp); /* a Send waits for it (qp_rx.c) */
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
     * from now on, nothing more is sent but the rest of an FPDU already
     * partly written (and our FIN, at NdkDisconnect), and what the peer
     * sends is read and dropped, never placed (an FPDU is accepted only in
     * RTS), so its FIN is seen and a disconnect can end gracefully.
     */
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    if (dp->rx_waiting) {
        /* The Send that waited for a receive is dropped with the rest. */
        __atomic_store_n(&dp->rx_wait_until, 0, __ATOMIC_RELAXED);
        qp_rx_pause(qp, false);
    }
    pthread_mutex_lock(&dp->sq_lock);
    bool was_rts = dp->state == QP_RTS;
    if (was_rts) {
        dp->state = QP_ERROR;
        dp->flushed = true;
        qp_tx_cut_batch(qp);
    }
    /* Nothing is placed any more: flush_rq below hands the receives back,
     * and the engine must not take (or read ahead into) one of them. */
    if (was_rts && dp->rx_st != RX_DEAD)
        rx_discard_start(dp, UINT64_MAX);
    else if (dp->rx_st != RX_DISCARD)
        dp->rx_st = RX_DEAD;
    flush_sq(qp, STATUS_CANCELLED, 0);
    pthread_mutex_unlock(&dp->sq_lock);
    flush_rx_message(qp);
    pthread_mutex_unlock(&dp->rx_lock);
    flush_rq(qp);
}

/* The entry points: what a post completes at once (a receive on a QP in
 * error, the flushed requests, a request TCP took whole) is notified only
 * once the call returns (ndk_post_enter, core.h). */
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

static const NDK_QP_DISPATCH qp_dispatch = {
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

static void live_add(struct ndk_qp_impl *qp)
{
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->live_lock);
    if (!qp->dp.live) {
        qp->dp.live = true;
        qp->dp.live_prev = NULL;
        qp->dp.live_next = ad->live_qps;
        if (ad->live_qps)
            ad->live_qps->dp.live_prev = qp;
        ad->live_qps = qp;
        link_in(&qp->rcq->live_qps, &qp->dp.on_rcq, qp);
        if (qp->icq != qp->rcq)
            link_in(&qp->icq->live_qps, &qp->dp.on_icq, qp);
    }
    pthread_mutex_unlock(&ad->live_lock);
}

/* Lease changes, live_lock held. */
static void lease_take(struct ndk_adapter_impl *ad, struct ndk_qp_impl *qp)
{
    struct ndk_transport *tr = qp->dp.tr;
    qp->dp.lease_polled = true;
    if (qp->dp.input_leased || !tr || !tr->ops->lease_input)
        return;
    qp->dp.input_leased = true;
    tr->ops->lease_input(tr, true);
    /* The progress thread may be asleep with no timeout: it must start
     * looking at leases now. */
    if (__atomic_fetch_add(&ad->input_leases, 1, __ATOMIC_RELAXED) == 0)
        loop_wake(&ad->loop);
}

static void lease_end(struct ndk_adapter_impl *ad, struct ndk_qp_impl *qp)
{
    if (!qp->dp.input_leased)
        return;
    qp->dp.input_leased = false;
    __atomic_fetch_sub(&ad->input_leases, 1, __ATOMIC_RELAXED);
    if (qp->dp.tr)
        qp->dp.tr->ops->lease_input(qp->dp.tr, false);
}

static void live_remove(struct ndk_qp_impl *qp)
{
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->live_lock);
    /* The connection winds down on the progress thread, which must see
     * the peer's last octets and its FIN. */
    lease_end(ad, qp);
    if (__atomic_exchange_n(&qp->dp.rx_waiting, false, __ATOMIC_SEQ_CST))
        __atomic_fetch_sub(&ad->rx_waits, 1, __ATOMIC_RELAXED);
    if (qp->dp.live) {
        qp->dp.live = false;
        if (qp->dp.live_prev)
            qp->dp.live_prev->dp.live_next = qp->dp.live_next;
        else
            ad->live_qps = qp->dp.live_next;
        if (qp->dp.live_next)
            qp->dp.live_next->dp.live_prev = qp->dp.live_prev;
        link_out(&qp->dp.on_rcq);
        if (qp->icq != qp->rcq)
            link_out(&qp->dp.on_icq);
    }
    pthread_mutex_unlock(&ad->live_lock);
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
    pthread_mutex_lock(&ad->live_lock);
    for (struct ndk_qp_link *l = cq->live_qps.next; l != &cq->live_qps; l = l->next) {
        struct ndk_qp_impl *qp = l->qp;
        ndk_qp_try_readable(qp);
        /* While we poll, waking the progress thread for the same input
         * only makes it compete with us (on one CPU, a context switch per
         * message). Not while a consumer sleeps on the QP's other CQ for
         * completions: its notification should not wait for our polling. */
        if (!sleeper_on(qp->rcq) && !sleeper_on(qp->icq))
            lease_take(ad, qp);
    }
    pthread_mutex_unlock(&ad->live_lock);
}

void ndk_qp_end_leases(struct ndk_cq_impl *cq)
{
    struct ndk_adapter_impl *ad = cq->obj.ad;
    if (!ad->busy_poll)
        return;
    pthread_mutex_lock(&ad->live_lock);
    for (struct ndk_qp_link *l = cq->live_qps.next; l != &cq->live_qps; l = l->next)
        lease_end(ad, l->qp);
    pthread_mutex_unlock(&ad->live_lock);
}

void ndk_qp_age_leases(struct ndk_adapter_impl *ad)
{
    pthread_mutex_lock(&ad->live_lock);
    for (struct ndk_qp_impl *qp = ad->live_qps; qp; qp = qp->dp.live_next) {
        if (!qp->dp.input_leased)
            continue;
        if (qp->dp.lease_polled)
            qp->dp.lease_polled = false;
        else
            lease_end(ad, qp);
    }
    pthread_mutex_unlock(&ad->live_lock);
}

void ndk_qp_rx_resume(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* Under rx_lock: the engine, between its last look for a receive and
     * pausing the input, must not undo this. It runs again on the input
     * and takes the receive (or, past its deadline, terminates). */
    pthread_mutex_lock(&dp->rx_lock);
    bool staged = false;
    if (dp->rx_waiting && dp->tr) {
        dp->tr->ops->pause_input(dp->tr, false);
        staged = rx_stage_held(&dp->rx_stage) > 0;
    }
    pthread_mutex_unlock(&dp->rx_lock);
    /* Input the engine already staged raises no socket event: the progress
     * thread hands it over (ndk_qp_check_rx_waits), at once. */
    if (staged)
        loop_wake(&qp->obj.ad->loop);
}

void ndk_qp_rx_give_up(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    dp->rx_wait_off = true;
    if (dp->rx_waiting && dp->tr)
        dp->tr->ops->pause_input(dp->tr, false);
    pthread_mutex_unlock(&dp->rx_lock);
}

/* Runs on the progress thread, with the adapter lock held, every 10 ms
 * while some QP waits for a receive (and at once when a poster resumed one
 * whose engine holds staged input). */
void ndk_qp_check_rx_waits(struct ndk_adapter_impl *ad)
{
    enum { KICKS_MAX = 64 };
    struct ndk_qp_impl *kick[KICKS_MAX];
    int nkick = 0;
    uint64_t now = loop_now_ms();
    pthread_mutex_lock(&ad->live_lock);
    for (struct ndk_qp_impl *qp = ad->live_qps; qp; qp = qp->dp.live_next) {
        struct ndk_qp_dp *dp = &qp->dp;
        if (!__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST))
            continue;
        /* Staged input raises no socket event: the engine looks again
         * (it takes a receive, waits on, or terminates past the deadline).
         * Outside live_lock, which a failing QP takes. */
        if (dp->tr && dp->tr->ops->input_pending && rx_stage_held(&dp->rx_stage)) {
            if (nkick < KICKS_MAX)
                kick[nkick++] = qp;
            continue;
        }
        /* An SRQ does not know its QPs: a receive posted there is found
         * here (a racy look: another QP may take it first, and the engine
         * then waits again). */
        bool srq_ready = dp->srq && __atomic_load_n(&dp->srq->count, __ATOMIC_RELAXED) > 0;
        if (srq_ready || now >= __atomic_load_n(&dp->rx_wait_until, __ATOMIC_RELAXED))
            ndk_qp_rx_resume(qp);
    }
    pthread_mutex_unlock(&ad->live_lock);
    /* The QPs stay: they are freed on this thread (ndk_free_deferred). */
    for (int i = 0; i < nkick; i++) {
        struct ndk_qp_dp *dp = &kick[i]->dp;
        dp->tr->ops->pause_input(dp->tr, false);
        dp->tr->ops->input_pending(dp->tr);
    }
}

bool ndk_qp_start(struct ndk_qp_impl *qp, struct ndk_transport *tr, bool crc, uint32_t ird,
                  uint32_t ord, size_t mulpdu, bool tx_gated)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* The read queues are sized by what was negotiated, not by the adapter
     * maxima: an idle connection should cost little. One more ORQ slot than
     * the ORD leaves room for a Read RTR's zero-length answer. The IRQ holds
     * exactly the IRD: one Read Request more is a protocol error. */
    uint32_t irq_cap = ird;
    struct ndk_orq_entry *orq = calloc(ord + 1, sizeof *orq);
    struct ndk_irq_entry *irq = irq_cap ? calloc(irq_cap, sizeof *irq) : NULL;
    struct rx_stage stage;
    if (!orq || (irq_cap && !irq) || !rx_stage_init(&stage)) {
        free(orq);
        free(irq);
        return false;
    }
    pthread_mutex_lock(&dp->rx_lock);
    free(dp->orq);
    free(dp->irq);
    rx_stage_fini(&dp->rx_stage);
    dp->rx_stage = stage;
    dp->rx_small = true;
    dp->orq = orq;
    dp->orq_cap = ord + 1;
    dp->irq = irq;
    pthread_mutex_lock(&dp->sq_lock);
    dp->tr = tr;
    dp->crc = crc;
    dp->ird = ird;
    dp->ord = ord;
    dp->irq_cap = irq_cap;
    dp->mulpdu = mulpdu;
    dp->mulpdu_recheck = MULPDU_RECHECK_OCTETS;
    dp->tx_gated = tx_gated;
    dp->msn_send = dp->msn_read = 1;
    dp->msn_send_expect = dp->msn_read_expect = 1;
    dp->rx_st = RX_HDR;
    dp->rx_have = 0;
    dp->state = QP_RTS;
    if (!tx_gated)
        qp_tx_progress(qp);
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    live_add(qp);
    return true;
}

void ndk_qp_read_rtr_sent(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->sq_lock);
    struct ndk_orq_entry *o = &dp->orq[(dp->orq_head + dp->orq_count) % dp->orq_cap];
    memset(o, 0, sizeof *o);
    o->wqe = ORQ_RTR;
    o->msn = 1;
    dp->orq_count++;
    dp->reads_out++;
    dp->msn_read = 2;
    pthread_mutex_unlock(&dp->sq_lock);
}

void ndk_qp_read_rtr_received(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    qp->dp.msn_read_expect = 2;
    pthread_mutex_unlock(&qp->dp.rx_lock);
}

void ndk_qp_stop(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    live_remove(qp);
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    if (dp->state == QP_RTS)
        dp->state = QP_ERROR;
    dp->tr = NULL;
    dp->rx_st = RX_DEAD;
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    ndk_qp_flush_all(qp);
}

void ndk_qp_disconnect(struct ndk_qp_impl *qp)
{
    /* No receive will be posted for a Send still waiting: the Terminate
     * goes now, rather than the peer's FIN waiting behind its data. */
    ndk_qp_rx_give_up(qp);
    pthread_mutex_lock(&qp->dp.sq_lock);
    qp->dp.tx_fin_wanted = true;
    qp_tx_progress(qp);
    pthread_mutex_unlock(&qp->dp.sq_lock);
}

bool ndk_qp_sent_term(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    bool p = qp->dp.term_len != 0 && !qp->dp.tx_dead;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return p;
}

bool ndk_qp_quiescent(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    bool q = qp->dp.tx_fin_sent && qp->dp.reads_out == 0;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return q;
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
    if (!pdo || !rcqo || !icqo || !ppNdkQp || (pSrq && !srqo) || rcqo->ad != pdo->ad ||
        icqo->ad != pdo->ad || (srqo && srqo->ad != pdo->ad))
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

    pthread_mutex_lock(&ad->lock);
    if (pdo->closing || rcqo->closing || icqo->closing || (srqo && srqo->closing)) {
        pthread_mutex_unlock(&ad->lock);
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
