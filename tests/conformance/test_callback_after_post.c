/*
 * A completion's notification callback never runs before the post that
 * produced the completion has returned to its caller (docs/behaviour.md,
 * "Completions"), even when the post completes at once: a receive posted to
 * a flushed QP, a zero-length Send that TCP takes inside the call. On
 * hardware the callback comes by DPC after the doorbell; a consumer that
 * posts with a lock held and takes it in its callback relies on this.
 *
 * Each post sets a flag once it returned. From a consumer thread, the
 * callback (on the provider's thread) waits for that flag with a bound: a
 * callback run inside the post, on the posting thread, would never see it.
 * From inside a callback, the callback the post causes must find the flag
 * already set, with no wait at all: it may only start after the callback
 * that posted returned.
 */
#include "dptest.h"

#define CHAIN 4           /* posts made from inside callbacks, one per callback */
#define RETURN_WAIT_MS 1000u /* a post returns well within this */

enum post_kind { RECV_ON_FLUSHED, ZERO_SEND };

/* Static: a callback that comes late must not write to a dead frame. */
struct probe {
    enum post_kind kind;
    NDK_QP *qp;
    _Atomic int posted;       /* posts that returned */
    _Atomic int seen_late;    /* callbacks that did not see their post return in time */
    _Atomic int seen_early;   /* chained callbacks that started before their post returned */
    _Atomic int callbacks;
    bool chain;               /* post again from inside each callback */
    bool drain;               /* the callback takes what the CQ holds */
    _Atomic ULONG drained;
};

/* Posts one request that completes at once. */
static NTSTATUS post_one(struct probe *p, unsigned i)
{
    if (p->kind == RECV_ON_FLUSHED)
        return dp_recv(p->qp, DP_CTX(0x100 + i), dp_nosge(), 0);
    return dp_send(p->qp, DP_CTX(0x100 + i), dp_nosge(), 0, 0);
}

static bool wait_posted(struct probe *p, int n, unsigned ms)
{
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    while (atomic_load(&p->posted) < n) {
        if (tl_now_ns() >= deadline)
            return false;
        sched_yield();
    }
    return true;
}

static void probe_hook(dp_cq *c, NTSTATUS status)
{
    struct probe *p = c->user;
    DP_CB_CHECK(status == STATUS_SUCCESS);
    int k = atomic_fetch_add(&p->callbacks, 1) + 1; /* this is callback k */
    if (p->chain && k > 1) {
        /* Callback k was caused by the post of callback k-1. */
        if (atomic_load(&p->posted) < k)
            atomic_fetch_add(&p->seen_early, 1);
    } else if (!wait_posted(p, k, RETURN_WAIT_MS)) {
        atomic_fetch_add(&p->seen_late, 1);
    }
    if (p->drain) {
        NDK_RESULT_EX r[64];
        atomic_fetch_add(&p->drained, c->cq->Dispatch->NdkGetCqResultsEx(c->cq, r, 64));
    }
    if (p->chain && k < CHAIN) {
        c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
        DP_CB_CHECK(post_one(p, (unsigned)k) == STATUS_SUCCESS);
        atomic_fetch_add(&p->posted, 1);
    }
}

/* A connection and the QP and CQ the posts use: the passive QP flushed for
 * receives, the active QP (connected) for zero-length Sends. */
static void run(enum post_kind kind, bool chain)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    static struct probe p;
    p = (struct probe){.kind = kind, .chain = chain};
    dp_cq *cq;
    if (kind == RECV_ON_FLUSHED) {
        p.qp = c->qp;
        cq = c->rcqp;
        c->qp->Dispatch->NdkFlush(c->qp);
    } else {
        /* Each Send finds a receive, so the connection stays up. */
        for (unsigned i = 0; i < CHAIN; i++)
            DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x300 + i), dp_nosge(), 0), STATUS_SUCCESS);
        p.qp = c->qa;
        cq = c->cqa;
    }
    DP_CHECK_QUIET(cq);
    cq->poll_only = true; /* the case arms and counts notifications itself */
    cq->user = &p;
    cq->hook = probe_hook;
    unsigned before = dp_cq_notified(cq);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    DP_CHECK_ST(post_one(&p, 0), STATUS_SUCCESS);
    atomic_fetch_add(&p.posted, 1);
    int want = chain ? CHAIN : 1;
    CHECK(tl_event_wait(&cq->notify, before + (unsigned)want, DP_WAIT_MS));
    NDK_RESULT_EX r[CHAIN];
    ULONG got = dp_wait_ex(cq, r, (ULONG)want, DP_WAIT_MS);
    CHECK_EQ(got, (ULONG)want);
    NTSTATUS st = kind == RECV_ON_FLUSHED ? STATUS_CANCELLED : STATUS_SUCCESS;
    for (ULONG i = 0; i < got; i++)
        DP_CHECK_ST(r[i].Status, st);
    CHECK_EQ(atomic_load(&p.posted), want);
    CHECK_EQ(atomic_load(&p.callbacks), want);
    CHECK_EQ(atomic_load(&p.seen_late), 0);
    CHECK_EQ(atomic_load(&p.seen_early), 0);
    cq->hook = NULL;
    dp_pair_close(&x);
}

DP_CASE(receive_on_flushed_qp_from_thread)
{
    run(RECV_ON_FLUSHED, false);
}

DP_CASE(receive_on_flushed_qp_from_callbacks)
{
    run(RECV_ON_FLUSHED, true);
}

DP_CASE(zero_length_send_from_thread)
{
    run(ZERO_SEND, false);
}

DP_CASE(zero_length_send_from_callbacks)
{
    run(ZERO_SEND, true);
}

/* NdkFlush completes every outstanding receive inside the call: their
 * notification comes after it returned, so the callback finds all of them. */
DP_CASE(flush_of_many_receives)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    static struct probe p;
    p = (struct probe){.kind = RECV_ON_FLUSHED, .qp = c->qp, .drain = true};
    dp_cq *cq = c->rcqp;
    ULONG n = c->cfg.rqd;
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x200 + i), dp_nosge(), 0), STATUS_SUCCESS);
    cq->poll_only = true;
    cq->user = &p;
    cq->hook = probe_hook;
    unsigned before = dp_cq_notified(cq);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    c->qp->Dispatch->NdkFlush(c->qp);
    atomic_fetch_add(&p.posted, 1);
    CHECK(tl_event_wait(&cq->notify, before + 1, DP_WAIT_MS));
    CHECK_EQ(atomic_load(&p.drained), n);
    CHECK_EQ(atomic_load(&p.seen_late), 0);
    cq->hook = NULL;
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(receive_on_flushed_qp_from_thread);
    RUN_FAM(receive_on_flushed_qp_from_callbacks);
    RUN_FAM(zero_length_send_from_thread);
    RUN_FAM(zero_length_send_from_callbacks);
    RUN_FAM(flush_of_many_receives);
    return tl_finish();
}
