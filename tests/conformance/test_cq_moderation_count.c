/* Interrupt moderation by count (NdkControlCqInterruptModeration,
 * docs/behaviour.md "Completions"): with only a ModerationCount of 4 in force,
 * an armed CQ calls back once, when the 4th unreported completion is in it, and
 * not before, however the arms and the completions interleave: arm first,
 * completions first, a re-arm while the notification is held back, completions
 * the consumer polled away meanwhile, and a change of settings while it is held
 * back (the newest settings apply at once). */
#include "cqfx.h"

#define MAXUL 0xFFFFFFFFu
#define COUNT 4

/* Sends n messages and waits until they are in the passive CQ. */
static void deliver(cqfx *f, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        cqfx_send(f, 0);
    cqfx_sync_delivered(f);
}

static bool open_moderated(cqfx *f)
{
    if (!cqfx_open(f, NULL))
        return false;
    cqfx_post_receives(f, 48);
    cqfx_moderate(f->c->cqp, MAXUL, COUNT);
    return true;
}

/* With an arm pending and `notified` notifications so far: `short_of`
 * more completions do not bring the next one, `rest` more do. */
static void notified_after(cqfx *f, unsigned short_of, unsigned rest, unsigned notified)
{
    deliver(f, short_of);
    CHECK_NOTIFIED(f->c->cqp, notified);
    deliver(f, rest);
    WAIT_NOTIFIED(f->c->cqp, notified + 1);
}

/* The end of a case: the consumer takes the last n completions, which
 * brings no further notification, and the fixture closes. */
static void drain_and_close(cqfx *f, unsigned n, unsigned notified)
{
    cqfx_drain_receives(f, n);
    CHECK_NOTIFIED(f->c->cqp, notified);
    cqfx_close(f);
}

DP_CASE(arm_then_completions)
{
    cqfx f;
    REQUIRE(open_moderated(&f));
    dp_cq *cq = f.c->cqp;
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    notified_after(&f, COUNT - 1, 1, 0);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    cqfx_drain_receives(&f, COUNT);
    /* The next arm counts afresh. */
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    notified_after(&f, COUNT - 1, 1, 1);
    drain_and_close(&f, COUNT, 2);
}

DP_CASE(completions_then_arm)
{
    cqfx f;
    REQUIRE(open_moderated(&f));
    dp_cq *cq = f.c->cqp;
    /* Two completions wait unarmed; the arm they satisfy is held back
     * until two more make four. */
    deliver(&f, 2);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    CHECK_NOTIFIED(cq, 0);
    notified_after(&f, 1, 1, 0);
    cqfx_drain_receives(&f, COUNT);
    /* Four already waiting: the arm is answered at once. */
    deliver(&f, COUNT);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    WAIT_NOTIFIED(cq, 2);
    drain_and_close(&f, COUNT, 2);
}

DP_CASE(rearm_while_held)
{
    cqfx f;
    REQUIRE(open_moderated(&f));
    dp_cq *cq = f.c->cqp;
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    deliver(&f, 2);
    /* Arms merge (rule C6): still one notification, still at four. */
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    dp_arm(cq, NDK_CQ_NOTIFY_SOLICITED);
    CHECK_NOTIFIED(cq, 0);
    deliver(&f, 2);
    WAIT_NOTIFIED(cq, 1);
    drain_and_close(&f, COUNT, 1);
}

DP_CASE(polled_away_while_held)
{
    cqfx f;
    REQUIRE(open_moderated(&f));
    dp_cq *cq = f.c->cqp;
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    deliver(&f, 3);
    /* The consumer took them by polling: the count is of what the CQ
     * holds, so three more are not yet enough, and the fourth in the CQ
     * is. */
    cqfx_drain_receives(&f, 3);
    notified_after(&f, 3, 1, 0);
    drain_and_close(&f, COUNT, 1);
}

DP_CASE(new_settings_apply_to_held)
{
    cqfx f;
    REQUIRE(open_moderated(&f));
    dp_cq *cq = f.c->cqp;
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    deliver(&f, 2);
    CHECK_NOTIFIED(cq, 0);
    /* A count of 2 is already met: the held notification goes now. */
    cqfx_moderate(cq, MAXUL, 2);
    WAIT_NOTIFIED(cq, 1);
    cqfx_drain_receives(&f, 2);
    /* A larger count holds the next one longer. */
    cqfx_moderate(cq, MAXUL, 6);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    notified_after(&f, 5, 1, 1);
    drain_and_close(&f, 6, 2);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(arm_then_completions);
    RUN(completions_then_arm);
    RUN(rearm_while_held);
    RUN(polled_away_while_held);
    RUN(new_settings_apply_to_held);
    return tl_finish();
}
