/*
 * The iWARP transport's side of the QP (transport.h): how the connector
 * starts, gates, nudges and ends the data path on an MPA stream, and the
 * operations the QP object calls (struct ndk_xp_ops). The transmit and
 * receive engines are qp_tx.c and qp_rx.c.
 */
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "wire/term.h"

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

bool ndk_qp_read_eof(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    bool eof = qp->dp.rx_eof;
    pthread_mutex_unlock(&qp->dp.rx_lock);
    return eof;
}

/* ---- the QP object's calls (struct ndk_xp_ops) ---- */

static void iw_doorbell(struct ndk_qp_impl *qp)
{
    qp_tx_progress(qp);
}

/* A Send waits for a receive (qp_rx.c, receiver not ready): this post may
 * be that receive, so the input resumes and the engine looks again. */
static void iw_after_receive(struct ndk_qp_impl *qp)
{
    if (__atomic_load_n(&qp->dp.rx_waiting, __ATOMIC_SEQ_CST))
        ndk_qp_rx_resume(qp);
}

/* NdkFlush: the rest of an FPDU already partly written still goes out (the
 * stream stays framed), nothing after it; what the peer sends is read and
 * dropped, never placed (an FPDU is accepted only in RTS), so its FIN is
 * seen and a disconnect can end gracefully. */
static void iw_flush(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (__atomic_load_n(&dp->rx_waiting, __ATOMIC_SEQ_CST)) {
        /* The Send that waited for a receive is dropped with the rest. */
        __atomic_store_n(&dp->rx_wait_until, 0, __ATOMIC_RELAXED);
        qp_rx_pause(qp, false);
    }
    bool was_rts = dp->state == QP_RTS;
    if (was_rts)
        qp_tx_cut_batch(qp);
    /* Nothing is placed any more: the QP hands the receives back, and the
     * engine must not take (or read ahead into) one of them. */
    if (was_rts && dp->rx_st != RX_DEAD)
        qp_rx_discard_start(dp, UINT64_MAX);
    else if (dp->rx_st != RX_DISCARD)
        dp->rx_st = RX_DEAD;
}

static void iw_forget(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    dp->reads_out = 0;
    dp->orq_count = 0;
    dp->irq_count = 0;
    dp->irq_framed = 0;
    dp->tx_cur = 0;
}

static void iw_poll(struct ndk_qp_impl *qp)
{
    ndk_qp_try_readable(qp);
    /* A batch waiting for room in the socket: the socket's writability
     * wakes the progress thread, which shares the CPU with this poller
     * and may wait for its time slice to end (milliseconds of a 1 MiB
     * stream lost, more or less each time). The poller looks for the room
     * itself. trylock: never wait behind a poster or the progress thread. */
    struct ndk_qp_dp *dp = &qp->dp;
    if (pthread_mutex_trylock(&dp->sq_lock) == 0) {
        if (dp->tx_blocked)
            qp_tx_progress(qp);
        pthread_mutex_unlock(&dp->sq_lock);
    }
}

static bool iw_lease_input(struct ndk_qp_impl *qp, bool on)
{
    struct ndk_transport *tr = qp->dp.tr;
    if (!tr || !tr->ops->lease_input)
        return false;
    tr->ops->lease_input(tr, on);
    return true;
}

static void iw_local_error(struct ndk_qp_impl *qp)
{
    if (qp->dp.tr)
        qp->dp.tr->ops->failed(qp->dp.tr, false);
}

static const struct ndk_xp_ops iwarp_ops = {
    .name = "iwarp",
    .doorbell = iw_doorbell,
    .after_receive = iw_after_receive,
    .flush = iw_flush,
    .forget = iw_forget,
    .poll = iw_poll,
    .lease_input = iw_lease_input,
    .local_error = iw_local_error,
};


/* The receive staging of the QP's device, as a data path starts. */
static struct rx_stage_cfg stage_cfg(const struct ndk_qp_impl *qp)
{
    const struct rx_stage_cfg *c = &qp->obj.ad->dev->rx_stage;
    return (struct rx_stage_cfg){__atomic_load_n(&c->threshold, __ATOMIC_RELAXED),
                                 __atomic_load_n(&c->size, __ATOMIC_RELAXED)};
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
    /* A burst's transmit staging (qp_tx.c, taken while one goes out): no
     * more than the QP can have waiting at once (its requests and the Reads
     * it answers, each one FPDU of the largest staged size), so that a
     * shallow QP's burst stays small. */
    size_t tx_cap = ((size_t)(qp->iq_admit ? qp->iq_admit : 1) + ird) * TX_STAGE_FPDU_MAX;
    if (tx_cap > ndk_tx_stage_size)
        tx_cap = ndk_tx_stage_size;
    /* The engines' working arrays (qp.h): a QP is started once (7.6 rule
     * 7), the arrays stay until it is freed. */
    struct ndk_qp_bufs *bufs = dp->bufs ? NULL : calloc(1, sizeof *bufs);
    if (!orq || (irq_cap && !irq) || (!dp->bufs && !bufs) || !rx_stage_init(&stage, stage_cfg(qp))) {
        free(orq);
        free(irq);
        free(bufs);
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
    if (bufs)
        dp->bufs = bufs;
    dp->tx_burst_stage = tx_cap;
    qp_tx_init(dp);
    dp->tr = tr;
    dp->crc = crc;
    dp->irq_cap = irq_cap;
    dp->mulpdu = mulpdu;
    dp->mulpdu_recheck = MULPDU_RECHECK_OCTETS;
    dp->tx_gated = tx_gated;
    dp->msn_send = dp->msn_read = 1;
    dp->msn_send_expect = dp->msn_read_expect = 1;
    dp->rx_st = RX_HDR;
    dp->rx_have = 0;
    qp_attach_locked(qp, &iwarp_ops, tr, ird, ord);
    if (!tx_gated)
        qp_tx_progress(qp);
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    qp_live_add(qp);
    return true;
}

void ndk_qp_read_rtr_sent(struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->sq_lock);
    struct ndk_orq_entry *o = &dp->orq[(dp->orq_head + dp->orq_count) % dp->orq_cap];
    memset(o, 0, sizeof *o);
    o->rtr = true;
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
