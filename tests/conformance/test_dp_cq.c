/* Completion queues under real traffic: NdkArmCq ANY / SOLICITED / ERRORS
 * and the notification callback (exactly once per arm, never unarmed), the
 * re-arm merge table, an arm made while fresh completions are queued, error
 * completions and notifications, NdkResizeCq with entries queued, CQ
 * overflow, and callbacks that drain and re-arm from inside.
 * Contract: NdkCreateCq, NdkResizeCq, NdkArmCq, NdkGetCqResults(Ex),
 * NdkCqNotificationCallback; rules C1-C6 (docs/rules.md).
 *
 * The CQs whose notifications are counted are "poll only": the cases wait
 * for completions by polling NdkGetCqResultsEx (bounded), never by arming,
 * so every arm in these cases is one the case made on purpose. */
#include "cqfx.h"

/* NdkCreateCq: MaxCqDepth is accepted, one more is not; no
 * notification ever comes for a CQ that was never armed. */
DP_CASE(create_cq_limits)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cq *c = dp_cq_new(&s, s.info.MaxCqDepth);
    CHECK(c != NULL);
    dp_cq_close(c);
    dp_req *r = dp_req_new("NdkCreateCq");
    NDK_CQ *cq = NULL;
    NTSTATUS ret =
        s.ad->Dispatch->NdkCreateCq(s.ad, s.info.MaxCqDepth + 1, dp_cq_cb, NULL, NULL, dp_create_cb,
                                    r, &cq);
    NTSTATUS st;
    cq = dp_created(r, ret, cq, &st);
    DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
    dp_close(cq);
    dp_side_close(&s);
}

/*
 * ANY (NdkArmCq, C3): one arm, three completions, one callback
 * with STATUS_SUCCESS. A re-arm on a drained CQ waits for the next
 * completion, which then gives exactly one more callback. Without an arm,
 * completions give none.
 */
DP_CASE(arm_any_once_per_arm)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 8);
    /* Unarmed: traffic gives no callback (rule 1). */
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 0);

    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    cqfx_send(&f, 0);
    cqfx_send(&f, 0);
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    WAIT_NOTIFIED(cq, 1);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    cqfx_drain_receives(&f, 3);
    CHECK_NOTIFIED(cq, 1);

    /* Re-armed on an empty CQ: nothing until the next completion. */
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    CHECK_NOTIFIED(cq, 1);
    cqfx_send(&f, 0);
    WAIT_NOTIFIED(cq, 2);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 2);
    cqfx_close(&f);
}

/*
 * SOLICITED (NdkArmCq, NdkSend, C9): a receive matched with a plain Send
 * does not satisfy it, one matched with SEND_AND_SOLICIT_EVENT does; the
 * sender's own successful completions never do.
 */
DP_CASE(arm_solicited)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    f.c->cqa->poll_only = true;
    cqfx_post_receives(&f, 8);
    dp_arm(cq, NDK_CQ_NOTIFY_SOLICITED);
    dp_arm(f.c->cqa, NDK_CQ_NOTIFY_SOLICITED);
    cqfx_send(&f, 0);
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 2);
    CHECK_NOTIFIED(cq, 0);
    cqfx_send(&f, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    WAIT_NOTIFIED(cq, 1);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 1);
    /* Re-armed: a plain Send then a solicited one give one more callback. */
    dp_arm(cq, NDK_CQ_NOTIFY_SOLICITED);
    cqfx_send(&f, 0);
    cqfx_send(&f, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    WAIT_NOTIFIED(cq, 2);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 2);
    CHECK_NOTIFIED(cq, 2);
    /* The sender's CQ saw only successful initiator completions. */
    CHECK_NOTIFIED(f.c->cqa, 0);
    cqfx_close(&f);
}

/*
 * ERRORS (NdkArmCq, C9): only CQ errors (overrun, fatal) satisfy it,
 * not completions, successful or failed.
 */
DP_CASE(arm_errors_ignores_completions)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 8);
    dp_arm(cq, NDK_CQ_NOTIFY_ERRORS);
    cqfx_send(&f, 0);
    cqfx_send(&f, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    cqfx_sync_delivered(&f);
    cqfx_drain_receives(&f, 2);
    CHECK_NOTIFIED(cq, 0);
    /* Failed completions: NdkFlush cancels the six remaining receives. */
    f.c->qp->Dispatch->NdkFlush(f.c->qp);
    NDK_RESULT_EX e[8];
    ULONG n = dp_wait_ex(cq, e, 6, DP_WAIT_MS);
    CHECK_EQ(n, 6);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_ST(e[i].Status, STATUS_CANCELLED);
    CHECK_NOTIFIED(cq, 0);
    cqfx_close(&f);
}

/*
 * A completion with an error status satisfies ANY and SOLICITED arms (8.2
 * rule 6): NdkFlush of receives on an unconnected QP, once per arm type.
 */
DP_CASE(error_completion_notifies)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cq *cq = dp_cq_new(&s, 64);
    REQUIRE(cq);
    cq->poll_only = true;
    dp_cfg cfg = dp_cfg_default();
    NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, NULL, &cfg, NULL);
    dp_mr mr;
    REQUIRE(qp && dp_buf_reg(&s, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    static const ULONG types[2] = {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ANY};
    for (unsigned t = 0; t < 2; t++) {
        for (int i = 0; i < 3; i++) {
            NDK_SGE r = dp_sge(&mr, (size_t)i * 64, 64);
            DP_CHECK_ST(dp_recv(qp, DP_CTX(i + 1), &r, 1), STATUS_SUCCESS);
        }
        dp_arm(cq, types[t]);
        qp->Dispatch->NdkFlush(qp);
        WAIT_NOTIFIED(cq, t + 1);
        DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
        NDK_RESULT_EX e[4];
        ULONG n = dp_wait_ex(cq, e, 3, DP_WAIT_MS);
        CHECK_EQ(n, 3);
        for (ULONG i = 0; i < n; i++)
            DP_CHECK_ST(e[i].Status, STATUS_CANCELLED);
        CHECK_NOTIFIED(cq, t + 1);
    }
    dp_close(qp);
    dp_mr_close(&mr);
    dp_cq_close(cq);
    dp_side_close(&s);
}

/*
 * C4: an arm made while the CQ holds a completion that arrived
 * after the last callback must be satisfied at once, for ANY, and for
 * SOLICITED when that completion is a solicited receive.
 */
DP_CASE(arm_with_fresh_completions_queued)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 8);
    cqfx_send(&f, 0);
    cqfx_sync_delivered(&f); /* queued, never notified */
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    WAIT_NOTIFIED(cq, 1);
    cqfx_drain_receives(&f, 1);
    cqfx_send(&f, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    cqfx_sync_delivered(&f); /* a solicited receive arrived after callback #1 */
    dp_arm(cq, NDK_CQ_NOTIFY_SOLICITED);
    WAIT_NOTIFIED(cq, 2);
    cqfx_drain_receives(&f, 1);
    CHECK_NOTIFIED(cq, 2);
    cqfx_close(&f);
}

/*
 * Re-arming before the previous arm was satisfied merges the two (C6): the
 * broader condition wins, ANY > SOLICITED > ERRORS. Each pair is
 * probed with a plain Send (fires only if the merge is ANY) and, when it did
 * not fire, a solicited Send (fires if the merge is SOLICITED).
 */
DP_CASE(rearm_merge_table)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    cqfx_post_receives(&f, 40);
    static const struct {
        ULONG first, second, merged;
    } t[] = {
        {NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY},
        {NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ANY},
        {NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ANY},
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY},
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_SOLICITED},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ANY, NDK_CQ_NOTIFY_ANY},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_SOLICITED},
        {NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_SOLICITED, NDK_CQ_NOTIFY_SOLICITED},
        /* Last: ERRORS + ERRORS stays armed after the case's traffic. */
        {NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ERRORS, NDK_CQ_NOTIFY_ERRORS},
    };
    unsigned fired = 0;
    for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) {
        dp_arm(cq, t[i].first);
        dp_arm(cq, t[i].second);
        cqfx_send(&f, 0);
        cqfx_sync_delivered(&f);
        cqfx_drain_receives(&f, 1);
        if (t[i].merged == NDK_CQ_NOTIFY_ANY) {
            WAIT_NOTIFIED(cq, ++fired);
        } else {
            CHECK_NOTIFIED(cq, fired);
            cqfx_send(&f, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
            cqfx_sync_delivered(&f);
            cqfx_drain_receives(&f, 1);
            if (t[i].merged == NDK_CQ_NOTIFY_SOLICITED)
                WAIT_NOTIFIED(cq, ++fired);
        }
        CHECK_NOTIFIED(cq, fired);
        if (dp_cq_notified(cq) != fired) {
            fprintf(stderr, "    merge of %u then %u misbehaved\n", (unsigned)t[i].first,
                    (unsigned)t[i].second);
            break;
        }
    }
    cqfx_close(&f);
}

/*
 * NdkResizeCq, which libndk offers: growing a CQ that holds
 * entries keeps them, in order, and lets it hold more than its old depth;
 * a depth over MaxCqDepth is refused; a shrink below the queued count never
 * loses an entry.
 */
DP_CASE(resize_keeps_entries)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = true;
    cfg.cqd = 8;
    cqfx f;
    REQUIRE(cqfx_open(&f, &cfg));
    /* libndk offers NdkResizeCq (src/adapter.c). */
    REQUIRE(f.x.p.info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED);
    dp_cq *cq = f.c->rcqp;
    cqfx_post_receives(&f, 20);
    for (int i = 0; i < 6; i++)
        cqfx_send(&f, 0);
    cqfx_sync_delivered(&f);
    dp_req *r = dp_req_new("NdkResizeCq");
    NTSTATUS st = dp_finish(r, cq->cq->Dispatch->NdkResizeCq(cq->cq, 32, dp_req_cb, r), DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    r = dp_req_new("NdkResizeCq (too deep)");
    st = dp_finish(r,
                   cq->cq->Dispatch->NdkResizeCq(cq->cq, f.x.p.info.MaxCqDepth + 1, dp_req_cb, r),
                   DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
    /* Batches of 5, so the active side's 8-entry CQ never fills. */
    for (int b = 0; b < 2; b++) {
        for (int i = 0; i < 5; i++)
            cqfx_send(&f, 0);
        cqfx_sync_delivered(&f);
    }
    /* 16 entries now, twice the original depth. A shrink to 4 may fail or
     * not ([U]) but must not lose any of them. */
    r = dp_req_new("NdkResizeCq (shrink)");
    st = dp_finish(r, cq->cq->Dispatch->NdkResizeCq(cq->cq, 4, dp_req_cb, r), DP_WAIT_MS);
    fprintf(stderr, "    shrink below the queued count: %s\n", ndk_status_name(st));
    NDK_RESULT_EX e[20];
    ULONG n = dp_wait_ex(cq, e, 16, DP_WAIT_MS);
    CHECK_EQ(n, 16);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(f.c),
                     DP_CTX(1000 + i), 16);
    CHECK_EQ(dp_get(cq, e, 20), 0);
    cqfx_close(&f);
}

/*
 * Overflow (C8): the passive side's receive CQ has 4 entries and
 * 6 messages arrive. An ERRORS arm reports STATUS_BUFFER_OVERFLOW, once; no
 * more than 4 entries can ever be read; a later arm of any type reports the
 * overflow again; and the QP is unusable: its connection ends and a Send
 * posted on it afterwards is refused.
 */
DP_CASE(overflow)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = true;
    cfg.cqd = 4;
    cfg.rqd = 8;
    cfg.iqd = 8;
    cqfx f;
    REQUIRE(cqfx_open(&f, &cfg));
    dp_cq *cq = f.c->rcqp;
    cqfx_post_receives(&f, 8);
    dp_arm(cq, NDK_CQ_NOTIFY_ERRORS);
    /* Silent, so the active side's own 4-entry CQ stays empty; all but the
     * last deferred, so all six are posted before the overflow can end the
     * connection. */
    NDK_SGE g = dp_sge(&f.ms, 0, 16);
    for (int i = 0; i < 6; i++)
        DP_CHECK_ST(dp_send(f.c->qa, DP_CTX(i + 1), &g, 1,
                            NDK_OP_FLAG_SILENT_SUCCESS | (i < 5 ? NDK_OP_FLAG_DEFER : 0)),
                    STATUS_SUCCESS);
    WAIT_NOTIFIED(cq, 1);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_BUFFER_OVERFLOW);
    CHECK_NOTIFIED(cq, 1);
    NDK_RESULT_EX e[8];
    ULONG n = dp_quiet(cq, e, 8, DP_QUIET_MS);
    /* The four that fitted before the overflow stay readable
     * (docs/behaviour.md), in order. */
    CHECK_EQ(n, 4);
    for (ULONG i = 0; i < n && i < 8; i++)
        CHECK(e[i].RequestContext == DP_CTX(1000 + i));
    /* An error of the CQ satisfies any later arm (C9; docs/behaviour.md). */
    dp_arm(cq, NDK_CQ_NOTIFY_SOLICITED);
    WAIT_NOTIFIED(cq, 2);
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_BUFFER_OVERFLOW);
    /* The QP that completes into it is unusable (docs/behaviour.md: the QPs
     * using it fail): its connection ends, both sides get their disconnect
     * event, and a Send posted on it afterwards is refused inline. */
    CHECK(tl_event_wait(&f.c->disc_a, 1, DP_WAIT_MS));
    CHECK(tl_event_wait(&f.c->disc_p, 1, DP_WAIT_MS));
    dp_mr pm;
    REQUIRE(dp_buf_reg(&f.x.p, &pm, 64, 0, 7));
    NDK_SGE pg = dp_sge(&pm, 0, 16);
    DP_CHECK_ST(dp_send(f.c->qp, DP_CTX(501), &pg, 1, 0), STATUS_CONNECTION_INVALID);
    DP_CHECK_QUIET(f.c->cqp);
    dp_mr_close(&pm);
    cqfx_close(&f);
}

/*
 * Callbacks that drain and re-arm from inside (T2, L5): the
 * consumer's loop is "callback: drain until empty, arm ANY, drain again".
 * With the main thread never touching the CQ after the first arm, all 40
 * receive completions must reach the callbacks, in order, exactly once, and
 * no two callbacks of the CQ may overlap (C5, checked by the case wrapper).
 */
typedef struct collector {
    NDK_RESULT_EX got[64];
    _Atomic unsigned n;
    _Atomic unsigned calls;
    tl_event all;
    unsigned want;
} collector;

static void drain_into(dp_cq *c, collector *k)
{
    for (;;) {
        NDK_RESULT_EX e[8];
        ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, e, 8);
        if (n == 0)
            return;
        for (ULONG i = 0; i < n; i++) {
            unsigned at = atomic_load(&k->n);
            if (at < 64)
                k->got[at] = e[i];
            atomic_store(&k->n, at + 1);
        }
    }
}

static void reentrant_hook(dp_cq *c, NTSTATUS status)
{
    collector *k = c->user;
    DP_CB_CHECK(status == STATUS_SUCCESS);
    atomic_fetch_add(&k->calls, 1);
    drain_into(c, k);
    c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
    drain_into(c, k);
    if (atomic_load(&k->n) >= k->want)
        tl_event_signal(&k->all);
}

DP_CASE(callbacks_drain_and_rearm)
{
    cqfx f;
    REQUIRE(cqfx_open(&f, NULL));
    dp_cq *cq = f.c->cqp;
    collector *k = dp_malloc(sizeof *k);
    tl_event_init(&k->all);
    k->want = 40;
    cqfx_post_receives(&f, 40);
    cq->user = k;
    cq->hook = reentrant_hook;
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    /* Messages of different sizes so each completion is recognisable. */
    for (unsigned i = 0; i < 40; i++) {
        NDK_SGE g = dp_sge(&f.ms, i, i + 1);
        DP_CHECK_ST(dp_send(f.c->qa, DP_CTX(i + 1), &g, 1, 0), STATUS_SUCCESS);
    }
    CHECK(tl_event_wait(&k->all, 1, DP_WAIT_MS));
    unsigned n = atomic_load(&k->n);
    CHECK_EQ(n, 40);
    for (unsigned i = 0; i < n && i < 64; i++)
        DP_CHECK_CQE(k->got[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(f.c),
                     DP_CTX(1000 + i), i + 1);
    fprintf(stderr, "    %u callbacks for 40 completions\n", atomic_load(&k->calls));
    CHECK(atomic_load(&k->calls) >= 1);
    /* Sender side: all 40 sends complete. */
    NDK_RESULT_EX e[40];
    DP_WAIT(f.c->cqa, e, 40);
    /* Closing the CQ (in cqfx_close) waits for a running callback; after that
     * nothing may touch the collector, which outlives the case's adapters. */
    cqfx_close(&f);
    CHECK_EQ(atomic_load(&k->n), 40);
    tl_event_destroy(&k->all);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(create_cq_limits);
    RUN_FAM(arm_any_once_per_arm);
    RUN_FAM(arm_solicited);
    RUN_FAM(arm_errors_ignores_completions);
    RUN(error_completion_notifies);
    RUN_FAM(arm_with_fresh_completions_queued);
    RUN_FAM(rearm_merge_table);
    RUN_FAM(resize_keeps_entries);
    RUN_FAM(overflow);
    RUN_FAM(callbacks_drain_and_rearm);
    return tl_finish();
}
