/* NdkControlCqInterruptModeration, its parameters and statuses
 * (docs/behaviour.md "Completions"): the adapter advertises the flag; the
 * call completes inline with STATUS_SUCCESS for every setting except an
 * unbounded interval with an unbounded count, which is
 * STATUS_INVALID_PARAMETER_MIX; turning moderation off again (0 / 0) makes
 * the next completion notify, where the old setting would have held it back
 * for ever. */
#include "cqfx.h"

#define MAXUL 0xFFFFFFFFu

static NTSTATUS moderate(dp_cq *c, ULONG interval, ULONG count)
{
    return c->cq->Dispatch->NdkControlCqInterruptModeration(c->cq, interval, count);
}

DP_CASE(flag_and_statuses)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    CHECK(s.info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED);
    dp_cq *c = dp_cq_new(&s, 32);
    REQUIRE(c != NULL);
    /* Off in every spelling. */
    DP_CHECK_ST(moderate(c, 0, 0), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, 0, 8), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, 100, 0), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, 100, 1), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, MAXUL, 1), STATUS_SUCCESS);
    /* Both knobs, and each alone. */
    DP_CHECK_ST(moderate(c, 100, 8), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, MAXUL, 8), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, MAXUL, 32), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, 100, MAXUL), STATUS_SUCCESS);
    DP_CHECK_ST(moderate(c, 100, 33), STATUS_SUCCESS);
    /* Neither bounded: refused, and the previous setting stays usable. */
    DP_CHECK_ST(moderate(c, MAXUL, MAXUL), STATUS_INVALID_PARAMETER_MIX);
    DP_CHECK_ST(moderate(c, MAXUL, 33), STATUS_INVALID_PARAMETER_MIX);
    DP_CHECK_ST(moderate(c, 0, 0), STATUS_SUCCESS);
    dp_cq_close(c);
    dp_side_close(&s);
}

DP_CASE(off_again_notifies_at_once)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 4);
    /* Only a count of 8: one completion alone would be held for ever. */
    DP_CHECK_ST(moderate(cq, MAXUL, 8), STATUS_SUCCESS);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    CHECK_NOTIFIED(cq, 0);
    /* Off: the held-back notification goes now. */
    DP_CHECK_ST(moderate(cq, 0, 0), STATUS_SUCCESS);
    WAIT_NOTIFIED(cq, 1);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    cqfx_drain_receives(&f, 1);
    /* And the next arm is satisfied by the next completion. */
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    cqfx_send(&f, 0);
    WAIT_NOTIFIED(cq, 2);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 2);
    cqfx_close(&f);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(flag_and_statuses);
    RUN(off_again_notifies_at_once);
    return tl_finish();
}
