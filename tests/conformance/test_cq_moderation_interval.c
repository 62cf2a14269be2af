/* Interrupt moderation by time (5.4.4, docs/behaviour.md "Completions"):
 * with a ModerationInterval in force, the notification for an arm that a
 * completion satisfied comes no sooner than the interval after the
 * completion could first have arrived, and not much later (the bound here
 * allows for a loaded machine); a count reached first releases it earlier;
 * every arm gets its own interval. Times are taken on the test's clock
 * around the calls, so a slow machine can only make the lower bound looser,
 * never fail it. */
#include "cqfx.h"

#define MAXUL 0xFFFFFFFFu
#define INTERVAL_US 60000u   /* 60 ms: far above scheduling noise */
#define LATE_MS 3000u        /* the upper bound's slack on a loaded machine */

static void moderate(dp_cq *c, ULONG interval, ULONG count)
{
    DP_CHECK_ST(c->cq->Dispatch->NdkControlCqInterruptModeration(c->cq, interval, count),
                STATUS_SUCCESS);
}

/* Arms, sends one message, and checks when the notification came. */
static void one_round(fx *f, unsigned nth)
{
    dp_cq *cq = f->c->cqp;
    uint64_t t0 = tl_now_ns();
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    fx_send(f, 0);
    bool came = tl_event_wait(&cq->notify, nth, INTERVAL_US / 1000u + LATE_MS);
    uint64_t us = (tl_now_ns() - t0) / 1000u;
    CHECK(came);
    CHECK(us >= INTERVAL_US);
    if (!came || us < INTERVAL_US)
        fprintf(stderr, "[%s] notification %u after %llu us (interval %u us)\n", tl_current, nth,
                (unsigned long long)us, INTERVAL_US);
    fx_drain_receives(f, 1);
}

DP_CASE(interval_bounds_the_delay)
{
    fx f;
    REQUIRE(fx_open(&f, NULL));
    fx_post_receives(&f, 8);
    moderate(f.c->cqp, INTERVAL_US, MAXUL);
    one_round(&f, 1);
    /* Re-armed: a fresh interval for the next completion. */
    one_round(&f, 2);
    CHECK_NOTIFIED(f.c->cqp, 2);
    fx_close(&f);
}

DP_CASE(count_first_releases_early)
{
    fx f;
    REQUIRE(fx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    fx_post_receives(&f, 8);
    /* An interval far beyond the wait: only the count can release it. */
    moderate(cq, 60u * 1000u * 1000u, 3);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    for (unsigned i = 0; i < 3; i++)
        fx_send(&f, 0);
    WAIT_NOTIFIED(cq, 1);
    fx_sync_delivered(&f);
    fx_drain_receives(&f, 3);
    CHECK_NOTIFIED(cq, 1);
    fx_close(&f);
}

DP_CASE(interval_from_an_arm_on_waiting_completions)
{
    fx f;
    REQUIRE(fx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    fx_post_receives(&f, 8);
    moderate(cq, INTERVAL_US, 8);
    fx_send(&f, 0);
    fx_sync_delivered(&f);
    /* The completion waits; the arm it satisfies is held an interval. */
    uint64_t t0 = tl_now_ns();
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&cq->notify, 1, INTERVAL_US / 1000u + LATE_MS));
    CHECK(tl_now_ns() - t0 >= (uint64_t)INTERVAL_US * 1000u);
    fx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 1);
    fx_close(&f);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(interval_bounds_the_delay);
    RUN(count_first_releases_early);
    RUN(interval_from_an_arm_on_waiting_completions);
    return tl_finish();
}
