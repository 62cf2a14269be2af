/*
 * The transmit engine: turns initiator-queue requests and inbound Read
 * Requests into FPDUs (RFC 5044 FPDUs, RFC 5041 segments), and one
 * gathering writev carries as many FPDUs as are waiting, up to a batch's
 * bounds (TX_FPDU_MAX FPDUs, TX_IOV_MAX iovecs). A large payload is
 * referenced where the consumer registered it, between a header and a
 * trailer built in the QP; a small one is copied, with its header, pad and
 * CRC, into the staging buffer, where FPDUs lie back to back and one iovec
 * carries them all: the kernel's cost is per iovec as much as per octet.
 * A batch starts in the connection's own arrays (struct ndk_qp_bufs), which
 * hold a few FPDUs; one that outgrows them moves into a burst block (struct
 * ndk_tx_burst), which is given back once the engine has written all it
 * had: an idle connection holds no burst block, a ping-pong never takes one.
 * Messages are never interleaved; Read Responses go out between requests,
 * at message boundaries.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "objects.h"
#include "wire/term.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

enum { TX_NONE = 0, TX_SQ = 1, TX_IRQ = 2 };

/* The threshold: qp.h. The burst block's staging buffer: a batch's worth
 * of small FPDUs (TX_FPDU_MAX 64-octet Sends take 6 KiB); when it is full,
 * or the block cannot be had, the batch's further FPDUs are referenced. A
 * shallow QP takes less (qp_iwarp.c). */
#ifndef NDK_TX_STAGE_SIZE
#define NDK_TX_STAGE_SIZE 8192
#endif
const size_t ndk_tx_stage_threshold = NDK_TX_STAGE_THRESHOLD;
const size_t ndk_tx_stage_size = NDK_TX_STAGE_SIZE;

/* The batch's arrays: the connection's few, or the burst block's. */
static inline struct iovec *tx_iov(struct ndk_qp_dp *dp)
{
    return dp->tx_big ? dp->tx_burst->iov : dp->bufs->tx_iov;
}

static inline uint32_t *tx_fpdu_end(struct ndk_qp_dp *dp)
{
    return dp->tx_big ? dp->tx_burst->fpdu_end : dp->bufs->tx_fpdu_end;
}

static inline struct ndk_tx_end *tx_ends(struct ndk_qp_dp *dp)
{
    return dp->tx_big ? dp->tx_burst->ends : dp->bufs->tx_ends;
}

/* FPDU f's header and trailer stay where they were built when the batch
 * moves (iovecs point at them): the first few in bufs, the rest in the
 * burst block. */
static inline uint8_t *tx_hdr(struct ndk_qp_dp *dp, int f)
{
    return f < TX_FPDU_FEW ? dp->bufs->tx_hdr[f] : dp->tx_burst->hdr[f - TX_FPDU_FEW];
}

static inline uint8_t *tx_trl(struct ndk_qp_dp *dp, int f)
{
    return f < TX_FPDU_FEW ? dp->bufs->tx_trl[f] : dp->tx_burst->trl[f - TX_FPDU_FEW];
}

/* The connection's own staging area: none when the build stages nothing. */
static void stage_few(struct ndk_qp_dp *dp)
{
    dp->tx_stage = dp->bufs->tx_stage;
    dp->tx_stage_cap = ndk_tx_stage_size < TX_STAGE_FEW ? ndk_tx_stage_size : TX_STAGE_FEW;
    dp->tx_stage_used = 0;
}

void qp_tx_init(struct ndk_qp_dp *dp)
{
    stage_few(dp);
}

static void batch_reset(struct ndk_qp_dp *dp)
{
    dp->tx_iov_off = dp->tx_iov_cnt = 0;
    dp->tx_fpdus = 0;
    dp->tx_framed = dp->tx_written = 0;
    dp->tx_nends = 0;
    dp->tx_ends_done = 0;
    dp->tx_big = false;
    stage_few(dp);
}

/* The batch outgrew the few: it moves into the burst block, taken now
 * unless held. False when it is there already or no memory is left: the
 * batch then ends where it is, or its small FPDUs are referenced. */
static bool batch_grow(struct ndk_qp_dp *dp)
{
    if (dp->tx_big)
        return false;
    struct ndk_tx_burst *b = dp->tx_burst;
    if (!b && !(b = malloc(sizeof *b + dp->tx_burst_stage)))
        return false;
    dp->tx_burst = b;
    memcpy(b->iov, dp->bufs->tx_iov, (size_t)dp->tx_iov_cnt * sizeof b->iov[0]);
    memcpy(b->fpdu_end, dp->bufs->tx_fpdu_end, (size_t)dp->tx_fpdus * sizeof b->fpdu_end[0]);
    memcpy(b->ends, dp->bufs->tx_ends, (size_t)dp->tx_nends * sizeof b->ends[0]);
    dp->tx_big = true;
    /* The few's staged FPDUs stay where they are; further ones go here. */
    dp->tx_stage = b->stage;
    dp->tx_stage_cap = dp->tx_burst_stage;
    dp->tx_stage_used = 0;
    return true;
}

/* The engine has nothing more in its batch: the burst block goes back. */
static void burst_release(struct ndk_qp_dp *dp)
{
    if (dp->tx_burst && !dp->tx_big) {
        free(dp->tx_burst);
        dp->tx_burst = NULL;
    }
}

/* Room for `len` octets in the staging buffer, or NULL: no staging, or
 * full until the batch is written. */
static uint8_t *stage_take(struct ndk_qp_dp *dp, size_t len)
{
    if (len > dp->tx_stage_cap - dp->tx_stage_used)
        return NULL;
    uint8_t *p = dp->tx_stage + dp->tx_stage_used;
    dp->tx_stage_used += len;
    return p;
}

/* Adds an iovec to the batch, extending the last one when it ends where
 * this one starts (FPDUs back to back in the staging buffer). */
static void batch_add(struct ndk_qp_dp *dp, void *base, size_t len)
{
    struct iovec *iov = tx_iov(dp);
    if (dp->tx_iov_cnt > dp->tx_iov_off) {
        struct iovec *last = &iov[dp->tx_iov_cnt - 1];
        if ((uint8_t *)last->iov_base + last->iov_len == base) {
            last->iov_len += len;
            return;
        }
    }
    iov[dp->tx_iov_cnt++] = (struct iovec){base, len};
}

/* An FPDU whole in the staging buffer at st: header, payload, pad, CRC. */
static void stage_fpdu(struct ndk_qp_dp *dp, uint8_t *st, const uint8_t *hdr, size_t hlen,
                       const struct iovec *pl, int npl, size_t pad)
{
    uint8_t *p = st;
    memcpy(p, hdr, 2 + hlen);
    p += 2 + hlen;
    for (int i = 0; i < npl; i++) {
        memcpy(p, pl[i].iov_base, pl[i].iov_len);
        p += pl[i].iov_len;
    }
    memset(p, 0, pad);
    p += pad;
    if (dp->crc)
        mpa_crc_store(crc32c_update(crc32c_init(), st, (size_t)(p - st)), p);
    else
        memset(p, 0, 4);
    batch_add(dp, st, (size_t)(p + 4 - st));
}

/* An FPDU as header, the payload where it lies, and trailer (pad, CRC). */
static void ref_fpdu(struct ndk_qp_dp *dp, int f, uint8_t *hdr, size_t hlen, const struct iovec *pl, int npl,
                     size_t pad)
{
    uint8_t *trl = tx_trl(dp, f);
    memset(trl, 0, pad);
    if (dp->crc) {
        uint32_t reg = crc32c_update(crc32c_init(), hdr, 2 + hlen);
        for (int i = 0; i < npl; i++)
            reg = crc32c_update(reg, pl[i].iov_base, pl[i].iov_len);
        reg = crc32c_update(reg, trl, pad);
        mpa_crc_store(reg, trl + pad);
    } else {
        memset(trl + pad, 0, 4);
    }
    struct iovec *iov = tx_iov(dp);
    iov[dp->tx_iov_cnt++] = (struct iovec){hdr, 2 + hlen};
    for (int i = 0; i < npl; i++)
        iov[dp->tx_iov_cnt++] = pl[i];
    iov[dp->tx_iov_cnt++] = (struct iovec){trl, pad + 4};
}

/* Frames one FPDU: header (already written at hdr+2 with hlen octets of
 * DDP/RDMAP header), payload iovecs, pad and CRC. */
static void frame_fpdu(struct ndk_qp_dp *dp, size_t hlen, const struct iovec *pl, int npl, size_t plen)
{
    int f = dp->tx_fpdus++;
    uint8_t *hdr = tx_hdr(dp, f);
    size_t ulpdu = hlen + plen;
    ddp_wr16(hdr, (uint16_t)ulpdu);
    size_t pad = mpa_pad_len(ulpdu);
    size_t wire = 2 + ulpdu + pad + 4;
    unsigned op = hdr[3] & RDMAP_CTRL_OP_MASK;
    NDK_STAT_ADD(dp->st.tx_fpdus[op & (NDK_STAT_OPS - 1)], 1);
    NDK_STAT_ADD(dp->st.tx_bytes[op & (NDK_STAT_OPS - 1)], plen);
    dp->mulpdu_recheck = dp->mulpdu_recheck > wire ? dp->mulpdu_recheck - wire : 0;
    uint8_t *st = NULL;
    if (plen <= ndk_tx_stage_threshold) {
        st = stage_take(dp, wire);
        /* The few's staging is full: a burst, whose small FPDUs the burst
         * block stages. */
        if (!st && dp->tx_burst_stage && batch_grow(dp))
            st = stage_take(dp, wire);
    }
    if (st)
        stage_fpdu(dp, st, hdr, hlen, pl, npl, pad);
    else
        ref_fpdu(dp, f, hdr, hlen, pl, npl, pad);
    dp->tx_framed += (uint32_t)wire;
    tx_fpdu_end(dp)[f] = dp->tx_framed;
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
        tx_iov(dp)[0] = (struct iovec){dp->nudge_buf, n};
        dp->tx_iov_off = 0;
        dp->tx_iov_cnt = 1;
        dp->tx_framed = (uint32_t)n; /* FPDUs posted meanwhile follow it */
        qp_tx_progress(qp);
    }
    pthread_mutex_unlock(&dp->sq_lock);
    return live;
}

static void mark_end(struct ndk_qp_dp *dp, int kind, uint32_t idx)
{
    tx_ends(dp)[dp->tx_nends++] = (struct ndk_tx_end){.end = dp->tx_framed, .kind = kind, .idx = idx};
}

/* Room for one more FPDU of up to `iovs` payload pieces, in the batch's
 * arrays or, once it moved there, in the burst block's. */
static bool batch_has_room(struct ndk_qp_dp *dp, int iovs)
{
    for (;;) {
        int fpdus = dp->tx_big ? TX_FPDU_MAX : TX_FPDU_FEW;
        int iov_max = dp->tx_big ? TX_IOV_MAX : TX_IOV_FEW;
        if (dp->tx_fpdus < fpdus && dp->tx_iov_cnt + iovs + 2 <= iov_max)
            return true;
        if (!batch_grow(dp))
            return false;
    }
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
                NTSTATUS st = mem_map_local(qp->obj.ad->dev->mem, qp->pd, w->sge, w->nsge, 0,
                                            dp->bufs->tx_src, MEM_LOCAL_IOV_MAX, &dp->tx_src_n);
                if (st != STATUS_SUCCESS) {
                    fail_wqe(qp, st);
                    continue;
                }
            } else if (w->total) {
                dp->bufs->tx_src[0] = (struct iovec){w->inline_data, w->total};
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
    uint8_t *hdr = tx_hdr(dp, dp->tx_fpdus);
    uint32_t msn = dp->msn_read++;
    size_t hlen = rdmap_encode_read_request(hdr + 2, TX_HDR_MAX - 2, msn, &rr);
    frame_fpdu(dp, hlen, NULL, 0, 0);
    struct ndk_orq_entry *o = &dp->orq[(dp->orq_head + dp->orq_count) % dp->orq_cap];
    o->rtr = false;
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

/* The Read Response's source went away since its request was checked: the
 * stream ends with the Read's Terminate (RFC 5040 section 7). */
static void read_source_gone(struct ndk_qp_impl *qp, enum mem_err me)
{
    struct ndk_qp_dp *dp = &qp->dp;
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
}

/* Frames the next FPDU of the Read Response at the IRQ's head. False: the
 * batch is full (or the stream ended). */
static bool frame_read_response(struct ndk_qp_impl *qp, size_t mulpdu)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_irq_entry *e = &dp->irq[(dp->irq_head + dp->irq_framed) % dp->irq_cap];
    size_t room = mulpdu - DDP_TAGGED_HDR_LEN;
    uint64_t left = e->rr.size - e->sent;
    size_t seg = left < room ? (size_t)left : room;
    struct iovec src[RX_IOV_MAX];
    int nsrc = 0;
    if (seg) {
        enum mem_err me = mem_map_remote(qp->obj.ad->dev->mem, qp->pd, qp, e->rr.src_stag, e->rr.src_to + e->sent,
                                         seg, MEM_REMOTE_READ, src, RX_IOV_MAX, &nsrc);
        if (me != MEM_OK) {
            read_source_gone(qp, me);
            return false;
        }
        if (!batch_has_room(dp, nsrc))
            return false; /* next batch */
    }
    bool last = e->sent + seg == e->rr.size;
    uint8_t *hdr = tx_hdr(dp, dp->tx_fpdus);
    size_t hlen = ddp_encode_tagged(hdr + 2, TX_HDR_MAX - 2, RDMAP_OP_READ_RESP, last, e->rr.sink_stag,
                                    e->rr.sink_to + e->sent);
    frame_fpdu(dp, hlen, src, nsrc, seg);
    e->sent += (uint32_t)seg;
    if (last) {
        /* The IRD slot stays taken until the response is written
         * (ends_written): until then we still hold it. */
        mark_end(dp, TX_IRQ, 0);
        dp->irq_framed++;
        dp->tx_cur = TX_NONE;
    }
    return true;
}

/* Frames the next FPDU of the Send or Write at sq_tx. */
static void frame_sq_segment(struct ndk_qp_impl *qp, struct ndk_swqe *w, size_t mulpdu)
{
    struct ndk_qp_dp *dp = &qp->dp;
    uint8_t op = w->op == SWQE_WRITE ? RDMAP_OP_WRITE : w->rdmap_op;
    const struct rdmap_opinfo *oi = rdmap_op(op);
    bool tagged = oi->tagged;
    size_t room = mulpdu - oi->hdr_len;
    uint64_t left = w->total - dp->tx_cur_off;
    size_t seg = left < room ? (size_t)left : room;
    struct iovec pl[MEM_LOCAL_IOV_MAX];
    int npl = ndk_iov_slice(dp->bufs->tx_src, dp->tx_src_n, dp->tx_cur_off, seg, pl, MEM_LOCAL_IOV_MAX);
    bool last = dp->tx_cur_off + seg == w->total;
    uint8_t *hdr = tx_hdr(dp, dp->tx_fpdus);
    size_t hlen = tagged ? ddp_encode_tagged(hdr + 2, TX_HDR_MAX - 2, op, last, w->rtoken, w->raddr + dp->tx_cur_off)
                         : ddp_encode_untagged(hdr + 2, TX_HDR_MAX - 2, op, last, w->inv_stag, oi->qn, dp->msn_send,
                                               (uint32_t)dp->tx_cur_off);
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

/* A message is being framed or waits (a request, or a Read to answer):
 * pick_next may find one. Asked before the batch grows for it. */
static bool tx_work_waits(const struct ndk_qp_dp *dp)
{
    return dp->tx_cur != TX_NONE || dp->irq_count > dp->irq_framed || dp->sq_tx - dp->sq_head < dp->sq_count;
}

/* Frames as many FPDUs of waiting messages as fit the batch, after what
 * the batch already holds (written or not). */
static void fill_batch(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    refresh_mulpdu(dp);
    size_t mulpdu = dp->mulpdu;
    while (tx_work_waits(dp) && batch_has_room(dp, MEM_LOCAL_IOV_MAX)) {
        if (dp->tx_cur == TX_NONE && !pick_next(qp))
            return;
        if (dp->tx_cur == TX_IRQ) {
            if (!frame_read_response(qp, mulpdu))
                return;
            continue;
        }
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_tx)];
        if (w->op == SWQE_READ)
            frame_read_request(qp, w);
        else
            frame_sq_segment(qp, w, mulpdu);
    }
}

/* The messages of the batch whose last octet is among the tx_written
 * octets TCP took are done. A Read Response's IRD slot frees here, not
 * when the whole batch is out: the peer may read that response and send
 * its next Read Request while the rest of the batch waits for TCP, and a
 * slot still held then would count it as one Read too many. */
static void ends_written(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_tx_end *ends = tx_ends(dp);
    int i = dp->tx_ends_done;
    for (; i < dp->tx_nends && ends[i].end <= dp->tx_written; i++) {
        if (ends[i].kind == TX_SQ) {
            dp->sq[qp_sq_idx(qp, ends[i].idx)].done = true;
        } else {
            /* A Read Response is all in TCP's hands: its IRD slot is free. */
            dp->irq_head = (dp->irq_head + 1) % dp->irq_cap; /* kept below the cap: no wrap */
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
    ends_written(qp);
    batch_reset(dp);
    ndk_xp_sq_complete(qp);
}

/* Keeps only the first `keep` octets of what is left to write. */
static void batch_truncate(struct ndk_qp_dp *dp, size_t keep)
{
    struct iovec *iov = tx_iov(dp);
    for (int i = dp->tx_iov_off; i < dp->tx_iov_cnt; i++) {
        if (!keep) {
            dp->tx_iov_cnt = i;
            return;
        }
        if (iov[i].iov_len >= keep) {
            iov[i].iov_len = keep;
            dp->tx_iov_cnt = i + 1;
            return;
        }
        keep -= iov[i].iov_len;
    }
}

/* After the FPDU being written nothing of the batch goes out: a Terminate
 * follows at an FPDU boundary (RFC 5040 section 7), or NdkFlush stopped the
 * QP. */
void qp_tx_cut_batch(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* Messages whose every octet is out are done, whatever follows. */
    struct ndk_tx_end *ends = tx_ends(dp);
    for (int i = 0; i < dp->tx_nends; i++)
        if (ends[i].kind == TX_SQ && ends[i].end <= dp->tx_written)
            dp->sq[qp_sq_idx(qp, ends[i].idx)].done = true;
    if (dp->tx_iov_off >= dp->tx_iov_cnt) {
        batch_reset(dp);
        return;
    }
    /* The FPDU TCP has part of goes out whole; one it has none of (its end
     * beyond, its start at tx_written) is dropped with the rest. Without
     * FPDUs (a nudge) the batch stays as it is. */
    uint32_t *fpdu_end = tx_fpdu_end(dp);
    for (int f = 0; f < dp->tx_fpdus; f++) {
        if (fpdu_end[f] >= dp->tx_written) {
            uint32_t start = f ? fpdu_end[f - 1] : 0;
            uint32_t cut = start == dp->tx_written ? start : fpdu_end[f];
            batch_truncate(dp, cut - dp->tx_written);
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

static void want_writable(struct ndk_qp_dp *dp, bool want)
{
    if (dp->tx_blocked != want) {
        dp->tx_blocked = want;
        dp->tr->ops->want_write(dp->tr, want);
    }
}

/* Hands what is left of the batch to the transport. False when it took
 * nothing now (full: the socket's writability calls us again) or failed. */
static bool write_batch(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_transport *tr = dp->tr;
    struct iovec *iov = tx_iov(dp);
    int n = dp->tx_iov_cnt - dp->tx_iov_off;
    ssize_t w = tr->ops->writev(tr, iov + dp->tx_iov_off, n > 1024 ? 1024 : n);
    if (w == -EAGAIN || w == 0) {
        want_writable(dp, true);
        return false;
    }
    if (w < 0) {
        qp_set_end_reason(qp, NDK_DISCONNECT_REASON_ABORTED);
        dp->tx_dead = true;
        batch_reset(dp);
        tr->ops->failed(tr, true);
        return false;
    }
    dp->tx_written += (uint32_t)w;
    for (size_t left = (size_t)w; left;) {
        struct iovec *v = &iov[dp->tx_iov_off];
        if (left >= v->iov_len) {
            left -= v->iov_len;
            dp->tx_iov_off++;
        } else {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
            left = 0;
        }
    }
    if (dp->tx_iov_off < dp->tx_iov_cnt)
        ends_written(qp);
    else
        batch_written(qp);
    return true;
}

/* The QP failed or was flushed, and the batch is out: a Terminate waiting
 * goes next (true: written as a batch of its own), then our FIN. */
static bool tx_error_tail(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->term_len && !dp->term_sent) {
        batch_reset(dp);
        tx_iov(dp)[0] = (struct iovec){dp->term_buf, dp->term_len};
        dp->tx_iov_cnt = 1;
        dp->term_sent = true; /* counted as sent once its batch drains */
        return true;
    }
    if ((dp->term_sent || dp->tx_fin_wanted) && !dp->tx_fin_sent) {
        /* Nothing may follow a Terminate: our FIN goes next. The connection
         * ends when the peer, having read the Terminate, closes too; a
         * reset now could make its kernel drop the Terminate unread. After
         * NdkFlush, NdkDisconnect's FIN. */
        dp->tx_fin_sent = true;
        dp->tr->ops->shutdown_write(dp->tr);
    }
    return false;
}

static void tx_run(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_transport *tr = dp->tr;
    for (int rounds = 0; rounds < 64; rounds++) {
        /* The gate holds FPDUs, not our FIN: a client/server initiator that
         * never sends (siw's cmtime) must still see us disconnect. What
         * was posted joins the batch, also one TCP has taken part of. */
        if (dp->state == QP_RTS && !dp->tx_gated)
            fill_batch(qp);
        if (dp->tx_iov_off < dp->tx_iov_cnt) {
            if (!write_batch(qp))
                return;
            continue;
        }
        want_writable(dp, false);
        if (dp->state == QP_ERROR) {
            if (tx_error_tail(qp))
                continue;
            return;
        }
        if (dp->state != QP_RTS)
            return;
        if (dp->tx_fin_wanted && !dp->tx_fin_sent &&
            (dp->tx_gated || (dp->sq_tx - dp->sq_head >= dp->sq_count && !dp->irq_count))) {
            dp->tx_fin_sent = true;
            tr->ops->shutdown_write(tr);
        }
        return;
    }
    /* Out of rounds with work left (a long backlog): bound this call, and
     * let the progress thread go on when the socket says it is writable
     * (at once, if it still is), instead of waiting for the next post. */
    want_writable(dp, true);
}

void qp_tx_progress(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (!dp->tr || dp->tx_dead)
        return;
    tx_run(qp);
    /* Nothing left in a burst block: given back until the next burst. */
    burst_release(dp);
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
