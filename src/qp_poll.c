/*
 * QPs with a running data path: the device's list of them and each CQ's,
 * and busy polling (NDK_OPEN_FLAG_BUSY_POLL): a consumer polling an empty
 * CQ makes the transports of its QPs read their input, and leases that
 * input from the progress thread while it polls (docs/behaviour.md, Busy
 * polling). Without the flag a poller does the same while it runs on the
 * one CPU its QP's engine may use: the engine could only run when the
 * poller gives way, so leaving the input to it costs a thread hop (a
 * context switch) per message and gains no parallelism.
 *
 * A busy poll walks its CQ's live QPs without a lock: an empty poll took
 * the device's live_lock, a fifth of its instructions (docs/shm.md, Small
 * messages). The lists change under live_lock as before; a walker reads
 * `next` atomically, and a QP taken off a list (qp_live_remove, which
 * ndk_qp_stop calls before it detaches the transport and before the QP
 * may be freed) is not given back to its caller until every walk that
 * may have seen it has ended (walks_pass): each walk counts itself in one
 * of its CQ's two walker counts while it runs, and the remover, after the
 * unlink, waits for each count to drop to zero in turn, making it the one
 * new walks no longer use first (so that walks that keep coming cannot
 * hold it off). A walk counted in either began before the wait looked,
 * and so it is waited for; one that begins after the look read the list
 * without the QP (the unlink, the counts and the walker's loads of `next`
 * are sequentially consistent). The input lease (a flag the poller sets,
 * and the rare taking of one) stays under live_lock.
 */
#include <sched.h>

#include "net/sys.h"
#include "objects.h"

/* The lists' `next`: read by walkers without live_lock. */
static struct ndk_qp_link *link_next(const struct ndk_qp_link *l)
{
    return __atomic_load_n(&l->next, __ATOMIC_SEQ_CST);
}

/* live_lock held. l's fields are written before it is linked: a walker
 * that finds it finds them. */
static void link_in(struct ndk_qp_link *head, struct ndk_qp_link *l, struct ndk_qp_impl *qp)
{
    struct ndk_qp_link *first = head->next;
    l->qp = qp;
    l->prev = head;
    __atomic_store_n(&l->next, first, __ATOMIC_SEQ_CST);
    first->prev = l;
    __atomic_store_n(&head->next, l, __ATOMIC_SEQ_CST);
}

/* live_lock held. l keeps its `next` for a walker standing on it. */
static void link_out(struct ndk_qp_link *l)
{
    __atomic_store_n(&l->prev->next, l->next, __ATOMIC_SEQ_CST);
    l->next->prev = l->prev;
}

static unsigned walk_begin(struct ndk_cq_impl *cq)
{
    unsigned e = __atomic_load_n(&cq->walk_epoch, __ATOMIC_RELAXED) & 1;
    __atomic_fetch_add(&cq->walkers[e], 1, __ATOMIC_SEQ_CST);
    return e;
}

static void walk_end(struct ndk_cq_impl *cq, unsigned e)
{
    __atomic_fetch_sub(&cq->walkers[e], 1, __ATOMIC_SEQ_CST);
}

/* After a link of cq's list was taken out (live_lock released): returns
 * once no walk that may have seen it runs. A walk is one pass over the
 * CQ's QPs with trylocks, so each wait is as bounded as the wait for
 * live_lock it replaces; the consumer runs at most one at a time (C1). */
static void walks_pass(struct ndk_cq_impl *cq)
{
    for (int i = 0; i < 2; i++) {
        unsigned e = __atomic_fetch_add(&cq->walk_epoch, 1, __ATOMIC_SEQ_CST) & 1;
        while (__atomic_load_n(&cq->walkers[e], __ATOMIC_SEQ_CST))
            sched_yield();
    }
}

/* The one CPU the QP's engine may run on, or -1. */
static int engine_only_cpu(const struct ndk_qp_impl *qp)
{
    return __atomic_load_n(&qp->obj.engine->only_cpu, __ATOMIC_RELAXED);
}

/* A CQ whose pollers may read its QPs' input: one of a busy-polling
 * adapter, or one with a QP whose engine is confined to a CPU (whether
 * the poller runs there is looked at per poll, ndk_qp_busy_poll). */
static void cq_enable_busy_poll(struct ndk_cq_impl *cq, const struct ndk_qp_impl *qp)
{
    if (!cq->obj.ad->busy_poll && engine_only_cpu(qp) < 0)
        return;
    __atomic_store_n(&cq->arm_hook, ndk_qp_end_leases, __ATOMIC_RELEASE);
    __atomic_store_n(&cq->poll_hook, ndk_qp_busy_poll, __ATOMIC_RELEASE);
}

void qp_live_add(struct ndk_qp_impl *qp)
{
    cq_enable_busy_poll(qp->rcq, qp);
    cq_enable_busy_poll(qp->icq, qp);
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

/* Lease changes, live_lock held (input_leased and lease_polled are also
 * read without it, and lease_polled set: atomic). */
static void lease_take(struct ndk_device *dev, struct ndk_qp_impl *qp)
{
    const struct ndk_xp_ops *xp = qp->dp.xp;
    __atomic_store_n(&qp->dp.lease_polled, true, __ATOMIC_RELAXED);
    if (qp->dp.input_leased || !xp || !xp->lease_input || !xp->lease_input(qp, true))
        return;
    __atomic_store_n(&qp->dp.input_leased, true, __ATOMIC_RELAXED);
    /* The progress thread may be asleep with no timeout: it must start
     * looking at leases now. */
    if (__atomic_fetch_add(&dev->input_leases, 1, __ATOMIC_RELAXED) == 0)
        loop_wake(&ndk_dev_engine0(dev)->loop);
}

static void lease_end(struct ndk_device *dev, struct ndk_qp_impl *qp)
{
    if (!qp->dp.input_leased)
        return;
    __atomic_store_n(&qp->dp.input_leased, false, __ATOMIC_RELAXED);
    __atomic_fetch_sub(&dev->input_leases, 1, __ATOMIC_RELAXED);
    qp->dp.xp->lease_input(qp, false);
}

void qp_live_remove(struct ndk_qp_impl *qp)
{
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->dev->live_lock);
    /* The connection winds down on the progress thread, which must see
     * the peer's last octets and its FIN. */
    lease_end(ad->dev, qp);
    /* A QP that waited for a receive (qp_rx.c) is no longer looked at. */
    if (__atomic_exchange_n(&qp->dp.rx_waiting, false, __ATOMIC_SEQ_CST))
        __atomic_fetch_sub(&ad->dev->rx_waits, 1, __ATOMIC_RELAXED);
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
    /* No busy poll reads the QP any more once these return: its caller
     * may detach the transport and free the QP. */
    walks_pass(qp->rcq);
    if (qp->icq != qp->rcq)
        walks_pass(qp->icq);
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
    /* Without the flag, not on an engine's thread (a callback that
     * polls): its engine reads the input anyway once the callback
     * returned, and a lease taken there would only cost two epoll_ctl per
     * callback. Nor when the CPU cannot be told. */
    int cpu = ad->busy_poll || ndk_on_engine_thread() ? -1 : ndk_thread_cpu_now();
    if (!ad->busy_poll && cpu < 0)
        return;
    /* No lock: a QP leaves the list (ndk_qp_stop) before its transport
     * goes, and not before this walk ended (the head of this file). The
     * transports' polls take their QP's locks with trylock, so a poller
     * never waits behind the progress thread, nor behind a poller of the
     * QP's other CQ. */
    unsigned walk = walk_begin(cq);
    for (struct ndk_qp_link *l = link_next(&cq->live_qps); l != &cq->live_qps; l = link_next(l)) {
        struct ndk_qp_impl *qp = l->qp;
        if (!ad->busy_poll && engine_only_cpu(qp) != cpu)
            continue; /* its engine may run beside us: the input is its */
        if (qp->dp.xp->poll)
            qp->dp.xp->poll(qp);
        /* While we poll, waking the progress thread for the same input
         * only makes it compete with us (on one CPU, a context switch per
         * message). Not while a consumer sleeps on the QP's other CQ for
         * completions: its notification should not wait for our polling.
         * A lease held only needs renewing (a store, no lock); taking one
         * (live_lock) looks whether the QP is still live, since it may
         * have left while we polled. */
        if (sleeper_on(qp->rcq) || sleeper_on(qp->icq))
            continue;
        if (__atomic_load_n(&qp->dp.input_leased, __ATOMIC_RELAXED)) {
            if (!__atomic_load_n(&qp->dp.lease_polled, __ATOMIC_RELAXED))
                __atomic_store_n(&qp->dp.lease_polled, true, __ATOMIC_RELAXED);
            continue;
        }
        pthread_mutex_lock(&ad->dev->live_lock);
        if (qp->dp.live)
            lease_take(ad->dev, qp);
        pthread_mutex_unlock(&ad->dev->live_lock);
    }
    walk_end(cq, walk);
}

void ndk_qp_end_leases(struct ndk_cq_impl *cq)
{
    struct ndk_adapter_impl *ad = cq->obj.ad;
    /* Without the flag leases are rare (a poller on its engine's CPU):
     * an arm, which a consumer sleeping on events makes per message, only
     * looks at the count when there are none. A lease being taken right
     * now is the racy case sleeper_on already accepts. */
    if (!ad->busy_poll && !__atomic_load_n(&ad->dev->input_leases, __ATOMIC_RELAXED))
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
        if (__atomic_load_n(&qp->dp.lease_polled, __ATOMIC_RELAXED))
            __atomic_store_n(&qp->dp.lease_polled, false, __ATOMIC_RELAXED);
        else
            lease_end(dev, qp);
    }
    pthread_mutex_unlock(&dev->live_lock);
}
