/*
 * QPs with a running data path: the device's list of them and each CQ's,
 * and busy polling (NDK_OPEN_FLAG_BUSY_POLL): a consumer polling an empty
 * CQ makes the transports of its QPs read their input, and leases that
 * input from the progress thread while it polls (docs/behaviour.md, Busy
 * polling). Without the flag a poller does the same while it runs on the
 * one CPU its QP's engine may use: the engine could only run when the
 * poller gives way, so leaving the input to it costs a thread hop (a
 * context switch) per message and gains no parallelism.
 */
#include "net/sys.h"
#include "objects.h"

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
        loop_wake(&ndk_dev_engine0(dev)->loop);
}

static void lease_end(struct ndk_device *dev, struct ndk_qp_impl *qp)
{
    if (!qp->dp.input_leased)
        return;
    qp->dp.input_leased = false;
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
    /* The live list lock is held across the reads: a QP leaves the list
     * (ndk_qp_stop) before its transport goes, so none vanishes under us.
     * trylock keeps a poller from waiting behind the progress thread. */
    pthread_mutex_lock(&ad->dev->live_lock);
    for (struct ndk_qp_link *l = cq->live_qps.next; l != &cq->live_qps; l = l->next) {
        struct ndk_qp_impl *qp = l->qp;
        if (!ad->busy_poll && engine_only_cpu(qp) != cpu)
            continue; /* its engine may run beside us: the input is its */
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
        if (qp->dp.lease_polled)
            qp->dp.lease_polled = false;
        else
            lease_end(dev, qp);
    }
    pthread_mutex_unlock(&dev->live_lock);
}
