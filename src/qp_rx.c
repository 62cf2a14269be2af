/*
 * The receive engine: reads each FPDU's header first, decides where its
 * payload belongs (a registered region for tagged messages, the posted
 * receive for Sends, the read sink for Read Responses) and reads the payload
 * straight there, then the pad and CRC (RFC 5044 framing). Every check of
 * docs/rules.md (R1-R24) happens before a byte is placed, with one exception: a Send's
 * payload may be read together with its MO (read_send_ahead), into the
 * posted receive it must go to; a wrong MO then fails the FPDU just the
 * same. A failed check sends the Terminate it names and ends the stream.
 *
 * While the FPDUs are small, the octets come through the staging buffer
 * (rx_stage.h): one system call takes what the socket holds, and the steps
 * above copy from it, in the same order and with the same checks. A
 * payload above the buffer's threshold is read from the socket straight
 * into place once the buffer is empty.
 */
#include <errno.h>
#include <string.h>

#include "mem.h"
#include "objects.h"
#include "verify/verify.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"
#include "wire/term.h"

#define RX_BUDGET_FPDUS 256

/* How a read may use the socket (rx_stage.h). `small`: what is read next
 * is no larger than the threshold (a body) or follows an FPDU whose
 * payload was not (a header: the FPDUs of a stream tend to be alike).
 * Once the budget is spent only staged octets are taken: the socket's
 * readiness brings the engine back for the rest, the buffer's would not. */
static enum rx_stage_how rx_how(bool spent, bool small)
{
    if (spent)
        return RX_STAGE_ONLY;
    return small ? RX_STAGE_FILL : RX_STAGE_DIRECT;
}

/* The payload as a whole, not what is left of it: the last octets of a
 * large payload refilling the buffer would take the next FPDUs' large
 * payloads with them, each then copied out of the buffer instead of read
 * into place (bench/datapath/README.md, Staging). */
static bool rx_body_small(const struct ndk_qp_dp *dp)
{
    return dp->rx_payload <= dp->rx_stage.threshold;
}

/* A check failed on the FPDU whose header is in rx_hdr: the connection
 * ends with t. Returns false, what the step that checked returns. */
static bool rx_fail(struct ndk_qp_impl *qp, struct ddp_term *t)
{
    struct ndk_qp_dp *dp = &qp->dp;
    qp_fatal(qp, t, dp->rx_hdr, dp->rx_have, true);
    return false;
}

static bool rx_fail_code(struct ndk_qp_impl *qp, uint8_t layer, uint8_t etype, uint8_t code)
{
    struct ddp_term t;
    ddp_term_set(&t, layer, etype, code, false);
    return rx_fail(qp, &t);
}

/* ---- receiver not ready ---- */

void qp_rx_pause(struct ndk_qp_impl *qp, bool on)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ndk_device *dev = qp->obj.ad->dev;
    bool was = __atomic_exchange_n(&dp->rx_waiting, on, __ATOMIC_SEQ_CST);
    /* Paused again even if it was: a poster may have resumed the input. */
    if (dp->tr && dp->tr->ops->pause_input && (on || was))
        dp->tr->ops->pause_input(dp->tr, on);
    if (on && !was && __atomic_fetch_add(&dev->rx_waits, 1, __ATOMIC_RELAXED) == 0)
        loop_wake(&ndk_dev_engine0(dev)->loop); /* it may sleep with no timeout: deadlines need looking at */
    else if (!on && was)
        __atomic_fetch_sub(&dev->rx_waits, 1, __ATOMIC_RELAXED);
}

/* The wait for a receive ends: one came, or (terminated) the grace
 * period passed. The NDK verifier reports the Send either way (rule W10:
 * an iWARP device has no grace). */
static void rx_wait_end(struct ndk_qp_impl *qp, bool terminated)
{
    if (qp->obj.verify) {
        uint64_t until = __atomic_load_n(&qp->dp.rx_wait_until, __ATOMIC_RELAXED);
        uint64_t began = until - qp->obj.ad->opt.ReceiveGraceMs, now = loop_now_ms();
        ndk_verify_send_without_receive(qp, until && now > began ? now - began : 0, terminated);
    }
    __atomic_store_n(&qp->dp.rx_wait_until, 0, __ATOMIC_RELAXED);
    qp_rx_pause(qp, false);
}

/*
 * A Send found no posted receive. RFC 5040 section 7.3 makes that an
 * untagged buffer error, fatal to the stream; but a consumer may be about
 * to post one (from its accept completion, say). So the engine first stops
 * reading the connection (TCP holds the rest back and flow-controls the
 * peer) until a receive is posted or ReceiveGraceMs passed, and only then
 * sends the Terminate (docs/behaviour.md, "Receiver not ready"). The
 * header stays in rx_hdr and is decoded again when the input resumes.
 * Returns true with the receive taken; false while waiting (rx_waiting) or
 * once the Terminate is on its way.
 */
static bool receive_after_wait(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    uint64_t now = loop_now_ms();
    uint64_t until = __atomic_load_n(&dp->rx_wait_until, __ATOMIC_RELAXED);
    ULONG grace = qp->obj.ad->opt.ReceiveGraceMs;
    if (!until) {
        until = now + grace;
        __atomic_store_n(&dp->rx_wait_until, until, __ATOMIC_RELAXED);
    }
    bool can_wait = grace && dp->state == QP_RTS && !dp->rx_wait_off && dp->tr->ops->pause_input;
    if (can_wait && now < until) {
        qp_rx_pause(qp, true);
        /* A receive posted before rx_waiting was set resumed nothing. */
        if (!ndk_xp_take_receive(qp, &dp->rx_wqe))
            return false;
    } else {
        rx_wait_end(qp, true);
        return rx_fail_code(qp, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_NO_BUFFER);
    }
    rx_wait_end(qp, false);
    return true;
}

void ndk_qp_rx_resume(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    /* Under rx_lock: the engine, between its last look for a receive and
     * pausing the input, must not undo this. It runs again on the input
     * and takes the receive (or, past its deadline, terminates). */
    pthread_mutex_lock(&dp->rx_lock);
    bool staged = false;
    if (__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST) && dp->tr) {
        dp->tr->ops->pause_input(dp->tr, false);
        staged = rx_stage_held(&dp->rx_stage) > 0;
    }
    pthread_mutex_unlock(&dp->rx_lock);
    /* Input the engine already staged raises no socket event: the progress
     * thread hands it over (ndk_qp_check_rx_waits), at once. */
    if (staged)
        loop_wake(&ndk_dev_engine0(qp->obj.ad->dev)->loop);
}

void ndk_qp_rx_give_up(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->rx_lock);
    dp->rx_wait_off = true;
    if (__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST) && dp->tr)
        dp->tr->ops->pause_input(dp->tr, false);
    pthread_mutex_unlock(&dp->rx_lock);
}

/* Whether the QP's engine holds staged input, read under rx_lock: the
 * engine that fills and drains the stage holds it, and with several
 * engines it runs on another thread. Busy (trylock fails) means that
 * engine is in the QP's input right now and sees the stage itself. */
static bool staged_input(struct ndk_qp_dp *dp)
{
    if (pthread_mutex_trylock(&dp->rx_lock) != 0)
        return false;
    bool held = rx_stage_held(&dp->rx_stage) > 0;
    pthread_mutex_unlock(&dp->rx_lock);
    return held;
}

/* Runs on the first engine's thread, with every engine's lock held (a QP
 * with staged input may be any engine's: engine.c), every 10 ms
 * while some QP waits for a receive (and at once when a poster resumed one
 * whose engine holds staged input). */
void ndk_qp_check_rx_waits(struct ndk_device *dev)
{
    enum { KICKS_MAX = 64 };
    struct ndk_qp_impl *kick[KICKS_MAX];
    int nkick = 0;
    uint64_t now = loop_now_ms();
    pthread_mutex_lock(&dev->live_lock);
    for (struct ndk_qp_impl *qp = dev->live_qps; qp; qp = qp->dp.live_next) {
        struct ndk_qp_dp *dp = &qp->dp;
        if (!__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST))
            continue;
        /* Staged input raises no socket event: the engine looks again
         * (it takes a receive, waits on, or terminates past the deadline).
         * Outside live_lock, which a failing QP takes. */
        if (dp->tr && dp->tr->ops->input_pending && staged_input(dp)) {
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
    pthread_mutex_unlock(&dev->live_lock);
    /* The QPs stay: they are freed only after this thread left this
     * iteration (ndk_free_deferred). */
    for (int i = 0; i < nkick; i++) {
        struct ndk_qp_dp *dp = &kick[i]->dp;
        dp->tr->ops->pause_input(dp->tr, false);
        dp->tr->ops->input_pending(dp->tr);
    }
}

/* An RDMA Write segment goes where its STag and TO say (R12-R17). */
static bool place_write(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_hdr *h = &dp->rx_h;
    size_t len = dp->rx_payload;
    struct mem_table *mem = qp->obj.ad->dev->mem;
    struct ddp_term t;
    if (dp->rx_tmsg_active && !ddp_check_tagged_cont(dp->rx_tmsg_stag, dp->rx_tmsg_to, h->stag, h->to, &t))
        return rx_fail(qp, &t);
    if (len) {
        enum mem_err e = mem_map_remote(mem, qp->pd, qp, h->stag, h->to, len, MEM_REMOTE_WRITE,
                                        dp->bufs->rx_iov, RX_IOV_MAX, &dp->rx_iov_n);
        if (e != MEM_OK) {
            ddp_term_for_write(ndk_xp_stag_fault(e), &t);
            return rx_fail(qp, &t);
        }
    }
    dp->rx_tmsg_active = !h->last;
    dp->rx_tmsg_stag = h->stag;
    dp->rx_tmsg_to = h->to + len;
    return true;
}

/* A Read Response segment goes into the sink of our oldest Read (R20). */
static bool place_read_response(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_hdr *h = &dp->rx_h;
    size_t len = dp->rx_payload;
    struct mem_table *mem = qp->obj.ad->dev->mem;
    struct ddp_term t;
    pthread_mutex_lock(&dp->sq_lock);
    if (!dp->orq_count) {
        pthread_mutex_unlock(&dp->sq_lock);
        return rx_fail_code(qp, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_INVALID_STAG);
    }
    struct ndk_orq_entry *o = &dp->orq[dp->orq_head % dp->orq_cap];
    uint32_t received = o->received;
    uint32_t size = o->size;
    bool ok = ddp_check_tagged_cont(o->sink_stag, o->sink_to + received, h->stag, h->to, &t);
    NDK_SGE sge[NDK_MAX_SGE];
    ULONG nsge = 0;
    if (!o->rtr) {
        struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, o->wqe)];
        nsge = w->nsge;
        memcpy(sge, w->sge, nsge * sizeof *sge);
    }
    pthread_mutex_unlock(&dp->sq_lock);
    if (!ok)
        return rx_fail(qp, &t);
    if ((uint64_t)received + len > size || (h->last && received + len != size))
        return rx_fail_code(qp, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_BOUNDS);
    if (len) {
        struct iovec sink[MEM_LOCAL_IOV_MAX];
        int nsink;
        if (mem_map_local(mem, qp->pd, sge, nsge, MEM_LOCAL_WRITE, sink, MEM_LOCAL_IOV_MAX, &nsink) !=
                STATUS_SUCCESS ||
            (dp->rx_iov_n = ndk_iov_slice(sink, nsink, received, len, dp->bufs->rx_iov, RX_IOV_MAX)) < 0) {
            /* Our own sink went away under the Read: local failure. */
            dp->rx_iov_n = 0;
            return rx_fail_code(qp, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_CATASTROPHIC, 0xFF);
        }
    }
    return true;
}

/* A Read Request places nothing; its source is checked whole now (R18,
 * R19) and answered by the transmit engine. */
static bool check_read_request(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_hdr *h = &dp->rx_h;
    struct mem_table *mem = qp->obj.ad->dev->mem;
    struct ddp_term t;
    if (!ddp_check_msn(dp->msn_read_expect, h->msn, &t))
        return rx_fail(qp, &t);
    pthread_mutex_lock(&dp->sq_lock);
    bool room = dp->irq_count < dp->irq_cap;
    pthread_mutex_unlock(&dp->sq_lock);
    if (!room) {
        /* More reads than the IRD we agreed to (docs/rules.md R18). */
        return rx_fail_code(qp, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_CATASTROPHIC_STREAM);
    }
    if (h->rreq.size) {
        enum mem_err e = mem_map_remote(mem, qp->pd, qp, h->rreq.src_stag, h->rreq.src_to, h->rreq.size,
                                        MEM_REMOTE_READ, NULL, 0, NULL);
        if (e != MEM_OK) {
            ddp_term_for_read_source(ndk_xp_stag_fault(e), &t);
            return rx_fail(qp, &t);
        }
    }
    return true;
}

/* A Send segment goes into the posted receive it fills (R8-R11, R22). */
static bool place_send(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_hdr *h = &dp->rx_h;
    size_t len = dp->rx_payload;
    struct mem_table *mem = qp->obj.ad->dev->mem;
    struct ddp_term t;
    /* The Send family (QN 0). */
    if (!ddp_check_msn(dp->msn_send_expect, h->msn, &t))
        return rx_fail(qp, &t);
    if (!dp->rx_msg_active) {
        if (ndk_xp_take_receive(qp, &dp->rx_wqe)) {
            if (__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST))
                rx_wait_end(qp, false);
        } else if (!receive_after_wait(qp)) {
            return false;
        }
        dp->rx_msg_active = true;
        dp->rx_msg_bytes = 0;
        NTSTATUS st = mem_map_local(mem, qp->pd, dp->rx_wqe.sge, dp->rx_wqe.nsge, MEM_LOCAL_WRITE,
                                    dp->bufs->rx_msg_iov, MEM_LOCAL_IOV_MAX, &dp->rx_msg_iov_n);
        if (st != STATUS_SUCCESS) {
            dp->rx_fail_status = st;
            return rx_fail_code(qp, TERM_LAYER_DDP, TERM_ETYPE_DDP_CATASTROPHIC, 0);
        }
    }
    if (!ddp_check_mo(h->mo, len, dp->rx_msg_bytes, dp->rx_wqe.total, &t)) {
        if (t.code == TERM_DU_TOO_LONG)
            dp->rx_fail_status = STATUS_BUFFER_TOO_SMALL;
        return rx_fail(qp, &t);
    }
    if (len && (dp->rx_iov_n = ndk_iov_slice(dp->bufs->rx_msg_iov, dp->rx_msg_iov_n, h->mo, len,
                                             dp->bufs->rx_iov, RX_IOV_MAX)) < 0) {
        dp->rx_iov_n = 0;
        return rx_fail_code(qp, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_TOO_LONG);
    }
    return true;
}

/* Decides where the payload of the FPDU just parsed goes. Returns false
 * when the stream failed, or when it waits for a receive (rx_waiting). */
static bool place(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    dp->rx_iov_n = 0;
    dp->rx_iov_off = 0;
    switch (dp->rx_h.opcode) {
    case RDMAP_OP_WRITE:
        return place_write(qp);
    case RDMAP_OP_READ_RESP:
        return place_read_response(qp);
    case RDMAP_OP_READ_REQ:
        return check_read_request(qp);
    default:
        return place_send(qp);
    }
}

static void complete_receive(struct ndk_qp_impl *qp, NTSTATUS st, bool inv, uint32_t token, bool se)
{
    struct ndk_qp_dp *dp = &qp->dp;
    dp->rx_msg_active = false;
    ndk_xp_complete_receive(qp, dp->rx_wqe.ctx, st, (ULONG)dp->rx_msg_bytes, inv, token, se);
}

/* The FPDU passed its CRC: make it count. Returns false on failure. */
static bool commit(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_hdr *h = &dp->rx_h;
    size_t len = dp->rx_payload;
    struct ddp_term t;

    switch (h->opcode) {
    case RDMAP_OP_WRITE:
        return true;
    case RDMAP_OP_READ_RESP: {
        pthread_mutex_lock(&dp->sq_lock);
        struct ndk_orq_entry *o = &dp->orq[dp->orq_head % dp->orq_cap];
        o->received += (uint32_t)len;
        if (h->last && o->rtr) {
            /* The zero-length answer to our Read RTR: no request owns it. */
            dp->orq_head = (dp->orq_head + 1) % dp->orq_cap; /* kept below the cap: no wrap */
            dp->orq_count--;
            dp->reads_out--;
            qp_tx_progress(qp);
        } else if (h->last) {
            struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, o->wqe)];
            w->done = true;
            w->status = STATUS_SUCCESS;
            if ((w->flags & NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE) && w->nsge)
                mem_invalidate_local_token(qp->obj.ad->dev->mem, qp->pd, w->sge[0].MemoryRegionToken);
            dp->orq_head = (dp->orq_head + 1) % dp->orq_cap; /* kept below the cap: no wrap */
            dp->orq_count--;
            dp->reads_out--;
            ndk_xp_sq_complete(qp);
            qp_tx_progress(qp); /* an ORD slot is free */
        }
        pthread_mutex_unlock(&dp->sq_lock);
        return true;
    }
    case RDMAP_OP_READ_REQ: {
        dp->msn_read_expect = ddp_msn_next(dp->msn_read_expect);
        pthread_mutex_lock(&dp->sq_lock);
        struct ndk_irq_entry *e = &dp->irq[(dp->irq_head + dp->irq_count) % dp->irq_cap];
        e->rr = h->rreq;
        e->sent = 0;
        dp->irq_count++;
        pthread_mutex_unlock(&dp->sq_lock);
        /* Answered once this input pass ends (rx_answer), together with
         * the other Read Requests it brings. */
        dp->rx_rreq_queued = true;
        return true;
    }
    case RDMAP_OP_TERMINATE:
        return false; /* handled at the header */
    default:
        break;
    }
    dp->rx_msg_bytes += len;
    if (!h->last)
        return true;
    dp->msn_send_expect = ddp_msn_next(dp->msn_send_expect);
    bool inv = rdmap_op(h->opcode)->invalidate;
    bool se = rdmap_op(h->opcode)->solicit;
    if (inv) {
        /* The STag goes before the receive completes (docs/rules.md R21). */
        enum mem_err e = mem_invalidate_remote(qp->obj.ad->dev->mem, qp->pd, qp, h->inv_stag);
        if (e != MEM_OK) {
            ddp_term_set(&t, TERM_LAYER_RDMAP,
                         e == MEM_NOT_ASSOCIATED ? TERM_ETYPE_RDMAP_PROTECTION : TERM_ETYPE_RDMAP_OPERATION,
                         TERM_RO_CANT_INVALIDATE, false);
            dp->rx_fail_status = STATUS_ACCESS_VIOLATION;
            return rx_fail(qp, &t);
        }
    }
    complete_receive(qp, STATUS_SUCCESS, inv, h->inv_stag, se);
    return true;
}

static void on_terminate(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct term_msg m;
    term_decode(dp->rx_hdr + 2, dp->rx_ulpdu, &m);
    NDK_STAT_ADD(dp->st.rx_fpdus[RDMAP_OP_TERMINATE], 1);
    __atomic_store_n(&dp->st.term_rx, NDK_STAT_TERM(m.layer, m.etype, m.code), __ATOMIC_RELAXED);
    NDK_LOG(NDK_LL_WARN, NDK_LC_DP, &qp->obj, "Terminate received: %s",
            term_describe(m.layer, m.etype, m.code));
    struct ddp_term t;
    ddp_term_set(&t, m.layer, m.etype, m.code, false);
    dp->rx_term_ctrl = m.ctrl;
    /* Was the offender one of our Read Requests? Its copied RDMA header
     * names it exactly (sink STag/TO and size); without one, a copied
     * untagged Read Request header points at the oldest unanswered Read. */
    t.rdma_hdr = false;
    bool named = false;
    bool by_msn = m.ddp_hdr_copy && !m.ddp.tagged && m.ddp.opcode == RDMAP_OP_READ_REQ;
    if (m.rdma_hdr_copy || by_msn) {
        /* The copied header's MSN names the Read exactly; the RDMA header
         * (sink STag/TO, size) does too when there is no DDP copy. */
        pthread_mutex_lock(&dp->sq_lock);
        for (uint32_t i = 0; i < dp->orq_count; i++) {
            struct ndk_orq_entry *o = &dp->orq[(dp->orq_head + i) % dp->orq_cap];
            if (o->rtr)
                continue;
            if (by_msn ? o->msn != m.ddp.msn
                       : (o->sink_stag != m.rdma.sink_stag || o->sink_to != m.rdma.sink_to ||
                          o->size != m.rdma.size))
                continue;
            struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, o->wqe)];
            w->status = ndk_status_from_term(m.layer, m.etype, m.code);
            w->perr = m.ctrl;
            w->done = true;
            named = true;
            break;
        }
        pthread_mutex_unlock(&dp->sq_lock);
    }
    if (!named)
        t.rdma_hdr = m.rdma_hdr_copy != NULL || by_msn;
    qp_fatal(qp, &t, NULL, 0, false); /* never answered */
}

/* The header is complete in rx_hdr: validate it and set up the body. */
static bool on_header(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct ddp_term t;
    size_t ulpdu = dp->rx_ulpdu;
    enum ddp_result r = ddp_decode(dp->rx_hdr + 2, dp->rx_have - 2, ulpdu, &dp->rx_h, &t);
    if (r != DDP_OK) {
        if (r == DDP_TERM)
            rx_fail(qp, &t);
        else
            rx_fail_code(qp, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_UNSPECIFIED);
        return false;
    }
    if (!dp->rx_first_seen) {
        /* RFC 5044: a responder sends nothing until the first FPDU came. */
        __atomic_store_n(&dp->rx_first_seen, true, __ATOMIC_RELEASE);
        pthread_mutex_lock(&dp->sq_lock);
        if (dp->tx_gated) {
            dp->tx_gated = false;
            qp_tx_progress(qp);
        }
        pthread_mutex_unlock(&dp->sq_lock);
    }
    if (dp->rx_h.opcode == RDMAP_OP_TERMINATE) {
        /* RFC 5044 section 7.1: an FPDU that fails its CRC is not passed
         * on, so a damaged Terminate names no request and sets no status. */
        if (dp->crc) {
            size_t body = 2 + ulpdu + mpa_pad_len(ulpdu);
            uint8_t want[4];
            mpa_crc_store(crc32c_update(crc32c_init(), dp->rx_hdr, body), want);
            if (memcmp(want, dp->rx_hdr + body, 4) != 0) {
                ddp_term_set(&t, TERM_LAYER_LLP, TERM_ETYPE_LLP_MPA, TERM_LLP_CRC, false);
                qp_fatal(qp, &t, NULL, 0, true);
                return false;
            }
        }
        on_terminate(qp);
        return false;
    }
    /* A new untagged message before the last one ended fails its MSN
     * check, a new tagged one its continuation check (docs/rules.md R8,
     * R17, R22); tagged inside untagged is tolerated, as siw does. */
    size_t hlen = ddp_hdr_len(dp->rx_hdr[2], dp->rx_hdr[3]);
    dp->rx_hdr_len = hlen;
    dp->rx_payload = ulpdu - hlen;
    dp->rx_payload_done = 0;
    bool placed = place(qp);
    /* A Send waiting for its receive has its header decoded again once the
     * input resumes: it is counted then, once. */
    if (placed || !__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST)) {
        NDK_STAT_ADD(dp->st.rx_fpdus[dp->rx_h.opcode & (NDK_STAT_OPS - 1)], 1);
        NDK_STAT_ADD(dp->st.rx_bytes[dp->rx_h.opcode & (NDK_STAT_OPS - 1)], dp->rx_payload);
    }
    if (!placed)
        return false;
    dp->rx_trl_need = mpa_pad_len(ulpdu) + 4;
    dp->rx_trl_have = 0;
    if (dp->crc)
        dp->rx_crc = crc32c_update(crc32c_init(), dp->rx_hdr, dp->rx_have);
    dp->rx_st = RX_BODY;
    return true;
}

/* After the trailer: CRC, then commit. */
static bool on_trailer(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->crc) {
        size_t pad = dp->rx_trl_need - 4;
        uint32_t reg = crc32c_update(dp->rx_crc, dp->rx_trl, pad);
        uint8_t want[4];
        mpa_crc_store(reg, want);
        if (memcmp(want, dp->rx_trl + pad, 4) != 0) {
            struct ddp_term t;
            ddp_term_set(&t, TERM_LAYER_LLP, TERM_ETYPE_LLP_MPA, TERM_LLP_CRC, false);
            qp_fatal(qp, &t, NULL, 0, true);
            return false;
        }
    }
    if (!commit(qp))
        return false;
    dp->rx_small = dp->rx_payload <= dp->rx_stage.threshold;
    dp->rx_st = RX_HDR;
    memcpy(dp->rx_hdr, dp->rx_pre, dp->rx_pre_have);
    dp->rx_have = dp->rx_pre_have;
    dp->rx_pre_have = 0;
    return true;
}

/* The stream ended or broke. */
static void rx_lost(struct ndk_qp_impl *qp, bool at_boundary)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (at_boundary) {
        dp->rx_st = RX_DEAD;
        dp->rx_eof = true;
        dp->rx_over = true;
        return;
    }
    /* RFC 5040: a stream lost mid-FPDU can carry no Terminate. */
    qp_fatal(qp, NULL, NULL, 0, false);
}

/* Ends a body read: after the payload iovecs, the pad and CRC, then the
 * next FPDU's first 16 octets, which are header whatever it is (the
 * shortest header is 16): reading them now saves a system call per FPDU
 * without reading any payload into the wrong place. */
static int body_tail(struct ndk_qp_dp *dp, struct iovec *v, int nv)
{
    v[nv++] = (struct iovec){dp->rx_trl + dp->rx_trl_have, dp->rx_trl_need - dp->rx_trl_have};
    v[nv++] = (struct iovec){dp->rx_pre, sizeof dp->rx_pre};
    return nv;
}

/* Counts `got` octets read into v (payload iovecs, trailer, prefetch, as
 * body_tail built it) and folds the payload into the CRC. Returns true
 * once the trailer is complete. */
static bool absorb(struct ndk_qp_dp *dp, const struct iovec *v, int nv, size_t got)
{
    size_t pl_left = dp->rx_payload - dp->rx_payload_done;
    size_t to_pl = got < pl_left ? got : pl_left;
    if (dp->crc && to_pl) {
        size_t c = to_pl;
        for (int i = 0; i < nv - 2 && c; i++) {
            size_t k = v[i].iov_len < c ? v[i].iov_len : c;
            dp->rx_crc = crc32c_update(dp->rx_crc, v[i].iov_base, k);
            c -= k;
        }
    }
    dp->rx_payload_done += to_pl;
    size_t rest = got - to_pl;
    size_t trl_left = dp->rx_trl_need - dp->rx_trl_have;
    size_t to_trl = rest < trl_left ? rest : trl_left;
    dp->rx_trl_have += to_trl;
    dp->rx_pre_have = rest - to_trl;
    return dp->rx_trl_have == dp->rx_trl_need;
}

enum { AHEAD_NO, AHEAD_MOVED, AHEAD_FPDU, AHEAD_WAIT, AHEAD_DEAD };

/* A Send FPDU whose header lacks only its last 4 octets (the MO; the first
 * 16 came with the previous trailer). Instead of one read for those and
 * another for the payload, one read takes both, the payload going where an
 * in-order MO puts it: the receive this message fills (or the next posted
 * one) at the message's current length. The header is then checked whole,
 * as always, before anything counts; any other MO fails the FPDU anyway
 * (docs/rules.md R10) and the Terminate quotes the real header. The
 * octets read by then lie inside that posted receive buffer, which the
 * failure flushes. Not for an SRQ, whose next receive another QP may take,
 * nor while staging: the header's last octets then cost no system call,
 * and the payload is copied only after the header passed its checks. */
static int read_send_ahead(struct ndk_qp_impl *qp, size_t need, bool spent)
{
    struct ndk_qp_dp *dp = &qp->dp;
    const uint8_t *hb = dp->rx_hdr;
    bool staging = spent || rx_stage_held(&dp->rx_stage) || (dp->rx_stage.cap && dp->rx_small);
    if (staging || dp->srq || dp->rx_have < 16 || need != 2 + DDP_UNTAGGED_HDR_LEN || (hb[2] & DDP_CTRL_T) ||
        !rdmap_op(hb[3] & RDMAP_CTRL_OP_MASK)->send || dp->rx_ulpdu <= DDP_UNTAGGED_HDR_LEN)
        return AHEAD_NO;
    size_t len = dp->rx_ulpdu - DDP_UNTAGGED_HDR_LEN;
    struct iovec msg[MEM_LOCAL_IOV_MAX];
    const struct iovec *buf = dp->bufs->rx_msg_iov;
    int nbuf = dp->rx_msg_iov_n;
    uint64_t at = dp->rx_msg_bytes, cap = dp->rx_wqe.total;
    if (!dp->rx_msg_active) {
        NDK_SGE sge[NDK_MAX_SGE];
        ULONG nsge = 0;
        pthread_mutex_lock(&dp->rq_lock);
        if (dp->rq_count) {
            const struct ndk_rwqe *w = &dp->rq[qp_rq_idx(qp, dp->rq_head)];
            nsge = w->nsge;
            cap = w->total;
            memcpy(sge, w->sge, nsge * sizeof *sge);
        }
        pthread_mutex_unlock(&dp->rq_lock);
        if (!nsge || mem_map_local(qp->obj.ad->dev->mem, qp->pd, sge, nsge, MEM_LOCAL_WRITE, msg,
                                   MEM_LOCAL_IOV_MAX, &nbuf) != STATUS_SUCCESS)
            return AHEAD_NO;
        buf = msg;
        at = 0;
    }
    if (at > cap || len > cap - at)
        return AHEAD_NO;
    struct iovec v[1 + RX_IOV_MAX + 2];
    int npl = ndk_iov_slice(buf, nbuf, at, len, v + 1, RX_IOV_MAX);
    if (npl < 0)
        return AHEAD_NO;
    size_t hdr_left = need - dp->rx_have;
    v[0] = (struct iovec){dp->rx_hdr + dp->rx_have, hdr_left};
    /* The body tail as it will be once the header is in. */
    dp->rx_trl_need = mpa_pad_len(dp->rx_ulpdu) + 4;
    dp->rx_trl_have = 0;
    int nv = body_tail(dp, v + 1, npl) + 1;
    struct ndk_transport *tr = dp->tr;
    ssize_t n = tr->ops->readv(tr, v, nv);
    if (n == -EAGAIN)
        return AHEAD_WAIT;
    if (n <= 0) {
        rx_lost(qp, false);
        return AHEAD_DEAD;
    }
    size_t got = (size_t)n;
    if (got < hdr_left) {
        dp->rx_have += got;
        return AHEAD_MOVED;
    }
    dp->rx_have = need;
    if (!on_header(qp))
        return AHEAD_DEAD;
    /* The header passed every check, the MO included, so its placement is
     * the one read into (the same receive at the same offset). */
    if (!absorb(dp, v + 1, nv - 1, got - hdr_left))
        return AHEAD_MOVED;
    return on_trailer(qp) ? AHEAD_FPDU : AHEAD_DEAD;
}

#define RX_DISCARD_CHUNK 16384
#define RX_DISCARD_READS 64 /* per call: at most 1 MiB, then the other QPs' turn */

/* RX_DISCARD: reads and drops until the end of the stream. Returns false
 * once nothing more will be read (the end, an error, or the limit). */
static bool rx_discard(struct ndk_qp_dp *dp)
{
    uint8_t sink[RX_DISCARD_CHUNK];
    size_t staged = rx_stage_drop(&dp->rx_stage);
    if (staged > dp->rx_discard_left) {
        dp->rx_over = true;
        dp->rx_st = RX_DEAD;
        return false;
    }
    dp->rx_discard_left -= staged;
    for (int i = 0; i < RX_DISCARD_READS; i++) {
        struct iovec v = {sink, sizeof sink};
        ssize_t n = dp->tr->ops->readv(dp->tr, &v, 1);
        if (n == -EAGAIN)
            return true;
        if (n > 0 && (uint64_t)n <= dp->rx_discard_left) {
            dp->rx_discard_left -= (uint64_t)n;
            continue;
        }
        /* The end (n == 0: the peer's FIN, it closed gracefully), a broken
         * stream, or a peer that keeps sending long after our Terminate. */
        dp->rx_eof = n == 0;
        dp->rx_over = true;
        dp->rx_st = RX_DEAD;
        return false;
    }
    return true;
}

/* What one step of the receive engine leaves: go on, stop for now (the
 * input is drained, or a Send waits for its receive), or stop for good. */
enum rx_step { RX_STEP_ON, RX_STEP_PAUSE, RX_STEP_END };

/* RX_HDR: how many octets of the FPDU at the head to have before decoding
 * it; 0 for a Terminate too long to be read whole. */
static size_t rx_header_need(struct ndk_qp_dp *dp)
{
    /* Until the length and control octets are in, ask for 16: no header is
     * shorter (2 + 14), so they are never payload. */
    if (dp->rx_have < 4)
        return 2 + DDP_TAGGED_HDR_LEN;
    dp->rx_ulpdu = ddp_rd16(dp->rx_hdr);
    size_t hl = ddp_hdr_len(dp->rx_hdr[2], dp->rx_hdr[3]);
    bool term = !(dp->rx_hdr[2] & DDP_CTRL_T) && (dp->rx_hdr[3] & RDMAP_CTRL_OP_MASK) == RDMAP_OP_TERMINATE;
    if (!term)
        return 2 + (hl < dp->rx_ulpdu ? hl : dp->rx_ulpdu);
    /* A Terminate is read whole with its pad and CRC: it has no payload to
     * place, and none of it counts before the CRC does (on_header). */
    size_t need = 2 + dp->rx_ulpdu + mpa_pad_len(dp->rx_ulpdu) + 4;
    return need > RX_HDR_MAX ? 0 : need;
}

/* RX_HDR: reads towards the need octets of the header, or lets the Send
 * read ahead take a whole FPDU (read_send_ahead). */
static enum rx_step rx_read_header(struct ndk_qp_impl *qp, size_t need, bool spent, int *fpdus)
{
    struct ndk_qp_dp *dp = &qp->dp;
    int r = read_send_ahead(qp, need, spent);
    if (r == AHEAD_WAIT)
        return RX_STEP_PAUSE;
    if (r == AHEAD_DEAD)
        return RX_STEP_END;
    if (r == AHEAD_FPDU)
        (*fpdus)++;
    if (r != AHEAD_NO)
        return RX_STEP_ON;
    struct iovec v = {dp->rx_hdr + dp->rx_have, need - dp->rx_have};
    ssize_t n = rx_stage_readv(&dp->rx_stage, dp->tr, &v, 1, rx_how(spent, dp->rx_small));
    if (n == -EAGAIN)
        return RX_STEP_PAUSE;
    if (n <= 0) {
        rx_lost(qp, n == 0 && dp->rx_have == 0);
        return RX_STEP_END;
    }
    dp->rx_have += (size_t)n;
    return RX_STEP_ON;
}

static enum rx_step rx_step_header(struct ndk_qp_impl *qp, bool spent, int *fpdus)
{
    struct ndk_qp_dp *dp = &qp->dp;
    size_t need = rx_header_need(dp);
    if (!need) {
        /* Too long to be read whole: malformed, but the peer's Terminate
         * all the same; the stream ends, unanswered. */
        qp_set_end_reason(qp, NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
        qp_fatal(qp, NULL, NULL, 0, false);
        return RX_STEP_END;
    }
    if (dp->rx_have < need)
        return rx_read_header(qp, need, spent, fpdus);
    /* Prefetched octets beyond a (malformed, too short) header belong to
     * what follows; the decode refuses it anyway. */
    dp->rx_have = need;
    if (!on_header(qp)) /* a Send that waits for its receive pauses the engine */
        return __atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST) ? RX_STEP_PAUSE : RX_STEP_END;
    return RX_STEP_ON;
}

/* RX_BODY: payload straight into its place, then pad and CRC, in one read. */
static enum rx_step rx_step_body(struct ndk_qp_impl *qp, bool spent, int *fpdus)
{
    struct ndk_qp_dp *dp = &qp->dp;
    struct iovec v[RX_IOV_MAX + 2];
    int nv = 0;
    size_t skip = dp->rx_payload_done;
    const struct iovec *place = dp->bufs->rx_iov;
    for (int i = 0; i < dp->rx_iov_n; i++) {
        if (skip >= place[i].iov_len) {
            skip -= place[i].iov_len;
            continue;
        }
        v[nv++] = (struct iovec){(char *)place[i].iov_base + skip, place[i].iov_len - skip};
        skip = 0;
    }
    nv = body_tail(dp, v, nv);
    ssize_t n = rx_stage_readv(&dp->rx_stage, dp->tr, v, nv, rx_how(spent, rx_body_small(dp)));
    if (n == -EAGAIN)
        return RX_STEP_PAUSE;
    if (n <= 0) {
        rx_lost(qp, false);
        return RX_STEP_END;
    }
    if (!absorb(dp, v, nv, (size_t)n))
        return RX_STEP_ON;
    (*fpdus)++;
    return on_trailer(qp) ? RX_STEP_ON : RX_STEP_END;
}

/* Runs the engine until the input is drained or the budget spent; false
 * once the stream is dead. */
static bool rx_run(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (dp->tr && dp->rx_st == RX_DISCARD)
        return rx_discard(dp);
    rx_stage_wake(&dp->rx_stage);
    if (!dp->tr || dp->rx_st == RX_DEAD)
        return false;
    /* Past the budget, what is already staged is still taken (rx_how). */
    for (int fpdus = 0; fpdus < RX_BUDGET_FPDUS || rx_stage_held(&dp->rx_stage);) {
        bool spent = fpdus >= RX_BUDGET_FPDUS;
        enum rx_step step = dp->rx_st == RX_HDR    ? rx_step_header(qp, spent, &fpdus)
                            : dp->rx_st == RX_BODY ? rx_step_body(qp, spent, &fpdus)
                                                   : RX_STEP_PAUSE;
        if (step != RX_STEP_ON)
            return step == RX_STEP_PAUSE;
    }
    return true;
}

/* Whether the input pass just run queued Read Requests; rx_lock held. */
static bool rx_take_rreqs(struct ndk_qp_dp *dp)
{
    bool queued = dp->rx_rreq_queued;
    dp->rx_rreq_queued = false;
    return queued;
}

/*
 * The responses to the Read Requests of an input pass go out after it, in
 * one batch: a requester's chain of Reads arrives together, and answering
 * each as it is read made one write (and, the socket full, one EAGAIN) per
 * Read where a chain of Writes makes one per batch (bench/datapath/
 * README.md, Read against Write). The input pass is bounded
 * (RX_BUDGET_FPDUS), so is the wait. While the socket is full there is
 * nothing to do: its writability, or a busy poller's retry (qp_iwarp.c),
 * runs the engine, which then frames the new responses too.
 */
static void rx_answer(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->sq_lock);
    if (!dp->tx_blocked)
        qp_tx_progress(qp);
    pthread_mutex_unlock(&dp->sq_lock);
}

/* The device's qp_input test hook (core.h) sees each call. */
bool ndk_qp_on_readable(struct ndk_qp_impl *qp)
{
    void (*probe)(struct ndk_qp_impl *, bool) =
        __atomic_load_n(&qp->obj.ad->dev->test_hooks.qp_input, __ATOMIC_ACQUIRE);
    if (probe)
        probe(qp, true);
    pthread_mutex_lock(&qp->dp.rx_lock);
    bool alive = rx_run(qp);
    bool answer = rx_take_rreqs(&qp->dp);
    pthread_mutex_unlock(&qp->dp.rx_lock);
    if (answer)
        rx_answer(qp);
    if (probe)
        probe(qp, false);
    return alive;
}

void ndk_qp_try_readable(struct ndk_qp_impl *qp)
{
    /* A busy poller never waits behind the progress thread. */
    if (pthread_mutex_trylock(&qp->dp.rx_lock) != 0)
        return;
    rx_run(qp);
    bool answer = rx_take_rreqs(&qp->dp);
    pthread_mutex_unlock(&qp->dp.rx_lock);
    if (answer)
        rx_answer(qp);
}
