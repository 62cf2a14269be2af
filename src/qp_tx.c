/*
 * The transmit engine: turns initiator-queue requests and inbound Read
 * Requests into FPDUs. Headers and trailers are built in the QP; payloads
 * are referenced where the consumer registered them, so one gathering
 * writev carries headers, payload and CRC for as many FPDUs as are waiting
 * (RFC 5044 FPDUs, RFC 5041 segments). Messages are never interleaved; Read
 * Responses go out between requests, at message boundaries.
 */
#include <errno.h>
#include <string.h>

#include "mem.h"
#include "objects.h"
#include "wire/term.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

enum { TX_NONE = 0, TX_SQ = 1, TX_IRQ = 2 };

static void batch_reset(struct ndk_qp_dp *dp)
{
    dp->tx_iov_off = dp->tx_iov_cnt = 0;
    dp->tx_fpdus = 0;
    dp->tx_nends = 0;
    dp->tx_ends_done = 0;
}

/* Frames one FPDU: header (already written at hdr+2 with hlen octets of
 * DDP/RDMAP header), payload iovecs, pad and CRC. */
static void frame_fpdu(struct ndk_qp_dp *dp, size_t hlen, const struct iovec *pl, int npl, size_t plen)
{
    int f = dp->tx_fpdus++;
    uint8_t *hdr = dp->tx_hdr[f];
    size_t ulpdu = hlen + plen;
    ddp_wr16(hdr, (uint16_t)ulpdu);
    size_t pad = mpa_pad_len(ulpdu);
    uint8_t *trl = dp->tx_trl[f];
    memset(trl, 0, pad);
    uint32_t reg = 0;
    if (dp->crc) {
        reg = crc32c_update(crc32c_init(), hdr, 2 + hlen);
        for (int i = 0; i < npl; i++)
            reg = crc32c_update(reg, pl[i].iov_base, pl[i].iov_len);
        reg = crc32c_update(reg, trl, pad);
        mpa_crc_store(reg, trl + pad);
    } else {
        memset(trl + pad, 0, 4);
    }
    size_t wire = 2 + ulpdu + pad + 4;
    unsigned op = hdr[3] & RDMAP_CTRL_OP_MASK;
    NDK_STAT_ADD(dp->st.tx_fpdus[op & (NDK_STAT_OPS - 1)], 1);
    NDK_STAT_ADD(dp->st.tx_bytes[op & (NDK_STAT_OPS - 1)], plen);
    dp->mulpdu_recheck = dp->mulpdu_recheck > wire ? dp->mulpdu_recheck - wire : 0;
    struct iovec *iov = dp->tx_iov;
    iov[dp->tx_iov_cnt++] = (struct iovec){hdr, 2 + hlen};
    for (int i = 0; i < npl; i++)
        iov[dp->tx_iov_cnt++] = pl[i];
    iov[dp->tx_iov_cnt++] = (struct iovec){trl, pad + 4};
}

void ndk_qp_ungate(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    if (qp->dp.tx_gated) {
        qp->dp.tx_gated = false;
        qp_tx_progress(qp);
    }
    pthread_mutex_unlock(&qp->dp.sq_lock);
}

bool ndk_qp_nudge(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->sq_lock);
    /* Only between messages (a zero-length Write is a message of its own;
     * the octets of one going out do the nudge's work anyway) and only while
     * the peer has shown no sign of life. */
    bool heard = __atomic_load_n(&dp->rx_first_seen, __ATOMIC_ACQUIRE);
    bool live = dp->tr && dp->state == QP_RTS && !heard;
    if (live && dp->tx_iov_cnt == 0 && dp->tx_cur == 0 && !dp->tx_gated) {
        size_t n = mpa_build_write_rtr(dp->crc, dp->nudge_buf);
        NDK_STAT_ADD(dp->st.nudges, 1);
        dp->tx_iov[0] = (struct iovec){dp->nudge_buf, n};
        dp->tx_iov_off = 0;
        dp->tx_iov_cnt = 1;
        qp_tx_progress(qp);
    }
    pthread_mutex_unlock(&dp->sq_lock);
    return live;
}

static void mark_end(struct ndk_qp_dp *dp, int kind, uint32_t idx)
{
    dp->tx_ends[dp->tx_nends].end_iov = dp->tx_iov_cnt;
    dp->tx_ends[dp->tx_nends].kind = kind;
    dp->tx_ends[dp->tx_nends].idx = idx;
    dp->tx_nends++;
}

static bool batch_has_room(struct ndk_qp_dp *dp, int iovs)
{
    return dp->tx_fpdus < TX_FPDU_MAX && dp->tx_iov_cnt + iovs + 2 <= TX_IOV_MAX;
}

/* A request that cannot be sent (its memory went away since it was posted)
 * completes in error without touching the wire. */
static void fail_wqe(struct ndk_qp_impl *qp, NTSTATUS st)
{
    qp->dp.tx_cur = TX_NONE;
    ndk_xp_sq_finish(qp, st);
}

/* Picks the next message to frame. Returns false when nothing can go now. */
static bool pick_next(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    for (;;) {
        if (dp->irq_count > dp->irq_framed) {
            dp->tx_cur = TX_IRQ;
            dp->tx_cur_off = 0;
            return true;
        }
        if (dp->sq_tx - dp->sq_head >= dp->sq_count)
            return false;
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_tx)];
        /* READ_FENCE: wait for every earlier Read to be answered. */
        if ((w->flags & NDK_OP_FLAG_READ_FENCE) && dp->reads_out)
            return false;
        switch (w->op) {
        case SWQE_BIND:
        case SWQE_FASTREG:
        case SWQE_INVALIDATE: {
            /* Local operations take effect in queue order (NdkBind,
             * NdkFastRegister, NdkInvalidate) and put nothing on the wire. */
            fail_wqe(qp, ndk_xp_exec_local(qp, w));
            continue;
        }
        case SWQE_READ:
            /* ORD: further Reads (and everything behind them) wait. */
            if (dp->reads_out >= dp->ord || dp->orq_count >= dp->orq_cap)
                return false;
            dp->tx_cur = TX_SQ;
            dp->tx_cur_off = 0;
            return true;
        default: {
            dp->tx_src_n = 0;
            if (w->total && !(w->flags & NDK_OP_FLAG_INLINE)) {
                NTSTATUS st = mem_map_local(qp->obj.ad->dev->mem, qp->pd, w->sge, w->nsge, 0, dp->tx_src,
                                            MEM_LOCAL_IOV_MAX, &dp->tx_src_n);
                if (st != STATUS_SUCCESS) {
                    fail_wqe(qp, st);
                    continue;
                }
            } else if (w->total) {
                dp->tx_src[0] = (struct iovec){w->inline_data, w->total};
                dp->tx_src_n = 1;
            }
            dp->tx_cur = TX_SQ;
            dp->tx_cur_off = 0;
            return true;
        }
        }
    }
}

/* Frames a Read Request (one FPDU) for the request at sq_tx. */
static void frame_read_request(struct ndk_qp_impl *qp, struct ndk_swqe *w)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct rdmap_rreq rr = {
        .sink_stag = w->nsge ? w->sge[0].MemoryRegionToken : 0,
        .sink_to = w->nsge ? (uint64_t)(uintptr_t)w->sge[0].VirtualAddress : 0,
        .size = w->total,
        .src_stag = w->rtoken,
        .src_to = w->raddr,
    };
    uint8_t *hdr = dp->tx_hdr[dp->tx_fpdus];
    uint32_t msn = dp->msn_read++;
    size_t hlen = rdmap_encode_read_request(hdr + 2, TX_HDR_MAX - 2, msn, &rr);
    frame_fpdu(dp, hlen, NULL, 0, 0);
    struct ndk_orq_entry *o = &dp->orq[(dp->orq_head + dp->orq_count) % dp->orq_cap];
    o->wqe = dp->sq_tx;
    o->msn = msn;
    o->sink_stag = rr.sink_stag;
    o->sink_to = rr.sink_to;
    o->size = rr.size;
    o->received = 0;
    dp->orq_count++;
    dp->reads_out++;
    dp->sq_tx++;
    dp->tx_cur = TX_NONE;
}

/* FPDUs follow the MSS as TCP's view of it changes (see the transport's
 * mulpdu op); a message may change FPDU size midway, which DDP allows. */
static void refresh_mulpdu(struct ndk_qp_dp *dp)
{
    if (dp->mulpdu_recheck || !dp->tr->ops->mulpdu)
        return;
    dp->mulpdu_recheck = MULPDU_RECHECK_OCTETS;
    size_t m = dp->tr->ops->mulpdu(dp->tr);
    if (m)
        dp->mulpdu = m;
}

/* Frames as many FPDUs of waiting messages as fit the batch. */
static void fill_batch(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    refresh_mulpdu(dp);
    size_t mulpdu = dp->mulpdu;
    while (batch_has_room(dp, MEM_LOCAL_IOV_MAX)) {
        if (dp->tx_cur == TX_NONE && !pick_next(qp))
            return;
        if (dp->tx_cur == TX_IRQ) {
            struct ndk_irq_entry *e = &dp->irq[(dp->irq_head + dp->irq_framed) % dp->irq_cap];
            size_t room = mulpdu - DDP_TAGGED_HDR_LEN;
            uint64_t left = e->rr.size - e->sent;
            size_t seg = left < room ? (size_t)left : room;
            struct iovec src[RX_IOV_MAX];
            int nsrc = 0;
            if (seg) {
                enum mem_err me = mem_map_remote(qp->obj.ad->dev->mem, qp->pd, qp, e->rr.src_stag,
                                                 e->rr.src_to + e->sent, seg, MEM_REMOTE_READ, src,
                                                 RX_IOV_MAX, &nsrc);
                if (me != MEM_OK || !batch_has_room(dp, nsrc)) {
                    if (me == MEM_OK)
                        return; /* next batch */
                    /* Revoked since the request was checked: the source is
                     * gone, so the stream ends with the Read's Terminate. */
                    struct ddp_term t;
                    ddp_term_for_read_source(ndk_xp_stag_fault(me), &t);
                    t.ddp_hdr = t.rdma_hdr = false;
                    dp->irq_count = dp->irq_framed = 0;
                    dp->tx_cur = TX_NONE;
                    uint8_t ulpdu[80];
                    size_t n = term_encode(ulpdu, sizeof ulpdu, &t, 0, NULL, 0, NULL);
                    qp_tx_terminate(qp, ulpdu, n);
                    qp_set_end_reason(qp, NDK_DISCONNECT_REASON_TERMINATE_SENT);
                    dp->state = QP_ERROR;
                    return;
                }
            }
            bool last = e->sent + seg == e->rr.size;
            uint8_t *hdr = dp->tx_hdr[dp->tx_fpdus];
            size_t hlen = ddp_encode_tagged(hdr + 2, TX_HDR_MAX - 2, RDMAP_OP_READ_RESP, last,
                                            e->rr.sink_stag, e->rr.sink_to + e->sent);
            frame_fpdu(dp, hlen, src, nsrc, seg);
            e->sent += (uint32_t)seg;
            if (last) {
                /* The IRD slot stays taken until the batch is written
                 * (batch_written): until then we still hold the response. */
                mark_end(dp, TX_IRQ, 0);
                dp->irq_framed++;
                dp->tx_cur = TX_NONE;
            }
            continue;
        }
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_tx)];
        if (w->op == SWQE_READ) {
            frame_read_request(qp, w);
            continue;
        }
        uint8_t op = w->op == SWQE_WRITE ? RDMAP_OP_WRITE : w->rdmap_op;
        const struct rdmap_opinfo *oi = rdmap_op(op);
        bool tagged = oi->tagged;
        size_t room = mulpdu - oi->hdr_len;
        uint64_t left = w->total - dp->tx_cur_off;
        size_t seg = left < room ? (size_t)left : room;
        struct iovec pl[MEM_LOCAL_IOV_MAX];
        int npl = ndk_iov_slice(dp->tx_src, dp->tx_src_n, dp->tx_cur_off, seg, pl, MEM_LOCAL_IOV_MAX);
        bool last = dp->tx_cur_off + seg == w->total;
        uint8_t *hdr = dp->tx_hdr[dp->tx_fpdus];
        size_t hlen = tagged ? ddp_encode_tagged(hdr + 2, TX_HDR_MAX - 2, op, last, w->rtoken,
                                                 w->raddr + dp->tx_cur_off)
                             : ddp_encode_untagged(hdr + 2, TX_HDR_MAX - 2, op, last, w->inv_stag, oi->qn,
                                                   dp->msn_send, (uint32_t)dp->tx_cur_off);
        frame_fpdu(dp, hlen, pl, npl < 0 ? 0 : npl, seg);
        dp->tx_cur_off += seg;
        if (last) {
            mark_end(dp, TX_SQ, dp->sq_tx);
            if (!tagged)
                dp->msn_send++;
            dp->sq_tx++;
            dp->tx_cur = TX_NONE;
        }
    }
}

/* The messages of the batch whose last octet went out with the first
 * `upto_iov` iovecs are done. A Read Response's IRD slot frees here, not
 * when the whole batch is out: the peer may read that response and send
 * its next Read Request while the rest of the batch waits for TCP, and a
 * slot still held then would count it as one Read too many. */
static void ends_written(struct ndk_qp_impl *qp, int upto_iov)
{
    struct ndk_qp_dp *dp = &qp->dp;
    int i = dp->tx_ends_done;
    for (; i < dp->tx_nends && dp->tx_ends[i].end_iov <= upto_iov; i++) {
        if (dp->tx_ends[i].kind == TX_SQ) {
            dp->sq[qp_sq_idx(qp, dp->tx_ends[i].idx)].done = true;
        } else {
            /* A Read Response is all in TCP's hands: its IRD slot is free. */
            dp->irq_head++;
            dp->irq_count--;
            dp->irq_framed--;
        }
    }
    dp->tx_ends_done = i;
}

/* Everything in the batch is written: the requests it ended are done. */
static void batch_written(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    ends_written(qp, dp->tx_iov_cnt);
    batch_reset(dp);
    ndk_xp_sq_complete(qp);
}

/* After the FPDU being written nothing of the batch goes out: a Terminate
 * follows at an FPDU boundary (RFC 5040 section 7), or NdkFlush stopped the
 * QP. */
void qp_tx_cut_batch(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* Messages whose every octet is out are done, whatever follows. */
    for (int i = 0; i < dp->tx_nends; i++)
        if (dp->tx_ends[i].kind == TX_SQ && dp->tx_ends[i].end_iov <= dp->tx_iov_off)
            dp->sq[qp_sq_idx(qp, dp->tx_ends[i].idx)].done = true;
    if (dp->tx_iov_off >= dp->tx_iov_cnt) {
        batch_reset(dp);
        return;
    }
    /* FPDUs are [hdr][payload...][trailer]: the trailer iovec of the
     * current FPDU is the first one at or after iov_off that points into
     * tx_trl. */
    for (int i = dp->tx_iov_off; i < dp->tx_iov_cnt; i++) {
        uint8_t *b = dp->tx_iov[i].iov_base;
        if (b >= &dp->tx_trl[0][0] && b < &dp->tx_trl[0][0] + sizeof dp->tx_trl) {
            /* Nothing of this FPDU written yet (its header iovec is still
             * whole at iov_off)? Then drop it too. */
            bool started = dp->tx_iov[dp->tx_iov_off].iov_base !=
                           (void *)dp->tx_hdr[(b - &dp->tx_trl[0][0]) / 8];
            dp->tx_iov_cnt = started ? i + 1 : dp->tx_iov_off;
            dp->tx_nends = 0;
            dp->tx_ends_done = 0;
            return;
        }
    }
}

void qp_tx_terminate(struct ndk_qp_impl *qp, const uint8_t *ulpdu, size_t len)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->term_len || !dp->tr)
        return;
    dp->term_len = mpa_fpdu_build(ulpdu, len, dp->crc, dp->term_buf, sizeof dp->term_buf);
    struct term_msg m;
    term_decode(ulpdu, len, &m);
    NDK_STAT_ADD(dp->st.tx_fpdus[RDMAP_OP_TERMINATE], 1);
    __atomic_store_n(&dp->st.term_tx, NDK_STAT_TERM(m.layer, m.etype, m.code), __ATOMIC_RELAXED);
    NDK_LOG(NDK_LL_WARN, NDK_LC_DP, &qp->obj, "Terminate sent: %s",
            term_describe(m.layer, m.etype, m.code));
    qp_tx_cut_batch(qp);
    dp->tx_gated = false; /* a Terminate may always go out */
    qp_tx_progress(qp);
}

void qp_tx_progress(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_transport *tr = dp->tr;
    if (!tr || dp->tx_dead)
        return;
    for (int rounds = 0; rounds < 64; rounds++) {
        if (dp->tx_iov_off < dp->tx_iov_cnt) {
            int n = dp->tx_iov_cnt - dp->tx_iov_off;
            ssize_t w = tr->ops->writev(tr, dp->tx_iov + dp->tx_iov_off, n > 1024 ? 1024 : n);
            if (w == -EAGAIN || w == 0) {
                if (!dp->tx_blocked) {
                    dp->tx_blocked = true;
                    tr->ops->want_write(tr, true);
                }
                return;
            }
            if (w < 0) {
                qp_set_end_reason(qp, NDK_DISCONNECT_REASON_ABORTED);
                dp->tx_dead = true;
                batch_reset(dp);
                tr->ops->failed(tr, true);
                return;
            }
            size_t left = (size_t)w;
            while (left) {
                struct iovec *v = &dp->tx_iov[dp->tx_iov_off];
                if (left >= v->iov_len) {
                    left -= v->iov_len;
                    dp->tx_iov_off++;
                } else {
                    v->iov_base = (char *)v->iov_base + left;
                    v->iov_len -= left;
                    left = 0;
                }
            }
            if (dp->tx_iov_off < dp->tx_iov_cnt) {
                ends_written(qp, dp->tx_iov_off);
                continue;
            }
            batch_written(qp);
            continue;
        }
        if (dp->tx_blocked) {
            dp->tx_blocked = false;
            tr->ops->want_write(tr, false);
        }
        if (dp->state == QP_ERROR) {
            if (dp->term_len && !dp->term_sent) {
                batch_reset(dp);
                dp->tx_iov[0] = (struct iovec){dp->term_buf, dp->term_len};
                dp->tx_iov_cnt = 1;
                dp->term_sent = true; /* counted as sent once its batch drains */
                continue;
            }
            if ((dp->term_sent || dp->tx_fin_wanted) && !dp->tx_fin_sent) {
                /* Nothing may follow a Terminate: our FIN goes next. The
                 * connection ends when the peer, having read the Terminate,
                 * closes too; a reset now could make its kernel drop the
                 * Terminate unread. After NdkFlush, NdkDisconnect's FIN. */
                dp->tx_fin_sent = true;
                tr->ops->shutdown_write(tr);
            }
            return;
        }
        if (dp->state != QP_RTS)
            return;
        /* The gate holds FPDUs, not our FIN: a client/server initiator that
         * never sends (siw's cmtime) must still see us disconnect. */
        if (!dp->tx_gated)
            fill_batch(qp);
        if (dp->tx_iov_cnt == 0) {
            if (dp->tx_fin_wanted && !dp->tx_fin_sent &&
                (dp->tx_gated || (dp->sq_tx - dp->sq_head >= dp->sq_count && !dp->irq_count))) {
                dp->tx_fin_sent = true;
                tr->ops->shutdown_write(tr);
            }
            return;
        }
    }
    /* Out of rounds with work left (a long backlog): bound this call, and
     * let the progress thread go on when the socket says it is writable
     * (at once, if it still is), instead of waiting for the next post. */
    if (!dp->tx_blocked) {
        dp->tx_blocked = true;
        tr->ops->want_write(tr, true);
    }
}

void ndk_qp_on_writable(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    if (qp->dp.tx_blocked) {
        qp->dp.tx_blocked = false;
        if (qp->dp.tr)
            qp->dp.tr->ops->want_write(qp->dp.tr, false);
    }
    qp_tx_progress(qp);
    pthread_mutex_unlock(&qp->dp.sq_lock);
}
