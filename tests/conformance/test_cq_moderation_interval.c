/* Interrupt moderation by time (NdkControlCqInterruptModeration,
 * docs/behaviour.md "Completions"): with a ModerationInterval in force, the
 * notification for an arm that a completion satisfied comes no sooner than the
 * interval after the completion could first have arrived, and not much later
 * (the bound here allows for a loaded machine); a count reached first releases
 * it earlier; every arm gets its own interval. Times are taken on the test's
 * clock around the calls, so a slow machine can only make the lower bound
 * looser, never fail it. */
#include "cqfx.h"

#define MAXUL 0xFFFFFFFFu
#define INTERVAL_US 60000u   /* 60 ms: far above scheduling noise */
#define LATE_MS 3000u        /* the upper bound's slack on a loaded machine */

/* Arms, sends one message, and checks when the notification came. */
static void one_round(cqfx *f, unsigned nth)
{
    dp_cq *cq = f->c->cqp;
    uint64_t t0 = tl_now_ns();
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    cqfx_send(f, 0);
    bool came = tl_event_wait(&cq->notify, nth, INTERVAL_US / 1000u + LATE_MS);
    uint64_t us = (tl_now_ns() - t0) / 1000u;
    CHECK(came);
    CHECK(us >= INTERVAL_US);
    if (!came || us < INTERVAL_US)
        fprintf(stderr, "[%s] notification %u after %llu us (interval %u us)\n", tl_current, nth,
                (unsigned long long)us, INTERVAL_US);
    cqfx_drain_receives(f, 1);
}

DP_CASE(interval_bounds_the_delay)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    cqfx_post_receives(&f, 8);
    cqfx_moderate(f.c->cqp, INTERVAL_US, MAXUL);
    one_round(&f, 1);
    /* Re-armed: a fresh interval for the next completion. */
    one_round(&f, 2);
    CHECK_NOTIFIED(f.c->cqp, 2);
    cqfx_close(&f);
}

DP_CASE(count_first_releases_early)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 8);
    /* An interval far beyond the wait: only the count can release it. */
    cqfx_moderate(cq, 60u * 1000u * 1000u, 3);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    for (unsigned i = 0; i < 3; i++)
        cqfx_send(&f, 0);
    WAIT_NOTIFIED(cq, 1);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 3);
    CHECK_NOTIFIED(cq, 1);
    cqfx_close(&f);
}

DP_CASE(interval_from_an_arm_on_waiting_completions)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 8);
    cqfx_moderate(cq, INTERVAL_US, 8);
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    /* The completion waits; the arm it satisfies is held an interval. */
    uint64_t t0 = tl_now_ns();
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&cq->notify, 1, INTERVAL_US / 1000u + LATE_MS));
    CHECK(tl_now_ns() - t0 >= (uint64_t)INTERVAL_US * 1000u);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 1);
    cqfx_close(&f);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(interval_bounds_the_delay);
    RUN(count_first_releases_early);
    RUN(interval_from_an_arm_on_waiting_completions);
    return tl_finish();
}
