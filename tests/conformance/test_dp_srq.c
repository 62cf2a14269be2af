/* Shared receive queues: NdkCreateSrq limits, NdkSrqReceive limits,
 * NdkCreateQpWithSrq, two connected QPs taking Sends from one SRQ (each
 * completion in the receive CQ of the QP that consumed the buffer, with that
 * QP's context, buffers consumed in posting order), NdkReceive refused on
 * such a QP, and the limit notification armed with NdkModifySrq.
 * Contract: NdkCreateSrq, NdkCreateQpWithSrq, NdkModifySrq, NdkSrqReceive,
 * NdkSrqNotificationCallback; rule W2 (docs/rules.md).
 * libndk decisions relied on: NdkReceive on a QP with an SRQ ->
 * STATUS_INVALID_DEVICE_REQUEST; SGE count over the limit ->
 * STATUS_INVALID_PARAMETER; a full queue -> STATUS_INSUFFICIENT_RESOURCES;
 * an SGE outside its registration -> STATUS_ACCESS_VIOLATION inline. */
#include "dptest.h"

/* An SRQ and the record its limit notifications land in. */
typedef struct srqn {
    tl_event ev;
    _Atomic NTSTATUS last;
} srqn;

#define MAX_SRQN 8
static srqn srqns[MAX_SRQN];
static unsigned nsrqn;

static void srq_cb(PVOID ctx, NTSTATUS st)
{
    srqn *n = ctx;
    atomic_store(&n->last, st);
    tl_event_signal(&n->ev);
}

/* The final status of NdkCreateSrq; *out the SRQ, *pn its notification record. */
static NTSTATUS srq_create(dp_side *s, ULONG depth, ULONG sge, ULONG threshold, NDK_SRQ **out,
                           srqn **pn)
{
    if (nsrqn >= MAX_SRQN)
        abort();
    srqn *n = &srqns[nsrqn++];
    memset(n, 0, sizeof *n);
    tl_event_init(&n->ev);
    if (pn)
        *pn = n;
    dp_req *r = dp_req_new("NdkCreateSrq");
    NDK_SRQ *srq = NULL;
    NTSTATUS ret = s->pd->Dispatch->NdkCreateSrq(s->pd, depth, sge, threshold, srq_cb, n, NULL,
                                                 dp_create_cb, r, &srq);
    NTSTATUS st;
    *out = dp_created(r, ret, srq, &st);
    return st;
}

static NTSTATUS srq_modify(NDK_SRQ *srq, ULONG depth, ULONG threshold)
{
    dp_req *r = dp_req_new("NdkModifySrq");
    return dp_finish(r, srq->Dispatch->NdkModifySrq(srq, depth, threshold, dp_req_cb, r),
                     DP_WAIT_MS);
}

static NTSTATUS srq_post(NDK_SRQ *srq, void *ctx, const NDK_SGE *sgl, ULONG n)
{
    return srq->Dispatch->NdkSrqReceive(srq, ctx, sgl, n);
}

static void srqn_reset(void)
{
    for (unsigned i = 0; i < nsrqn; i++)
        tl_event_destroy(&srqns[i].ev);
    nsrqn = 0;
}

/* libndk's adapters have SRQs (MaxSrqDepth 16384, src/adapter.c): one
 * without them is a failure, never a reason to pass without testing. */
static bool have_srq(const dp_side *s)
{
    if (s->info.MaxSrqDepth)
        return true;
    tl_failures++;
    fprintf(stderr, "[%s] MaxSrqDepth is 0: libndk adapters have SRQs\n", tl_current);
    return false;
}

/* The end of a case: the sides srq_case_open opened, and the notification
 * records. */
static void srq_case_close(dp_side *a, dp_side *p)
{
    if (a)
        dp_side_close(a);
    dp_side_close(p);
    srqn_reset();
}

/* The opening of a case: side a when it is not NULL, then side p; false,
 * with a failure counted and nothing left open, when a side could not be
 * opened or p has no SRQs. */
static bool srq_case_open(dp_side *a, dp_side *p)
{
    bool ok = !a || dp_side_open(a);
    CHECK(ok);
    if (ok) {
        ok = dp_side_open(p);
        CHECK(ok);
        if (!ok && a)
            dp_side_close(a);
    }
    if (ok && !have_srq(p)) {
        srq_case_close(a, p);
        return false;
    }
    if (!ok)
        srqn_reset();
    return ok;
}

/* A connection from a to p whose passive QP takes its receives from srq. */
static dp_conn *srq_conn_new(dp_side *a, dp_side *p, NDK_SRQ *srq)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.srq_p = srq;
    return dp_conn_new(a, p, &cfg);
}

/*
 * NdkCreateSrq and NdkModifySrq limits: MaxSrqDepth and
 * MaxReceiveRequestSge are accepted, one more of either is not; a modify to
 * a depth over MaxSrqDepth is refused.
 */
DP_CASE(create_srq_limits)
{
    dp_side s;
    if (!srq_case_open(NULL, &s))
        return;
    NDK_SRQ *srq = NULL;
    DP_CHECK_ST(srq_create(&s, s.info.MaxSrqDepth, s.info.MaxReceiveRequestSge, 0, &srq, NULL),
                STATUS_SUCCESS);
    if (srq)
        DP_CHECK_ST(srq_modify(srq, s.info.MaxSrqDepth + 1, 0), STATUS_INVALID_PARAMETER);
    dp_close(srq);
    NDK_SRQ *bad = NULL;
    DP_CHECK_ST(srq_create(&s, s.info.MaxSrqDepth + 1, 1, 0, &bad, NULL), STATUS_INVALID_PARAMETER);
    dp_close(bad);
    bad = NULL;
    DP_CHECK_ST(srq_create(&s, 16, s.info.MaxReceiveRequestSge + 1, 0, &bad, NULL),
                STATUS_INVALID_PARAMETER);
    dp_close(bad);
    srq_case_close(NULL, &s);
}

/*
 * NdkSrqReceive limits: nSge over the SRQ's MaxReceiveRequestSge
 * and a full SRQ are refused inline; a modify with depth 0 keeps the depth,
 * one that grows it makes room. An SGE outside its registration is refused
 * inline as NdkReceive does.
 */
DP_CASE(srq_receive_limits)
{
    dp_side s;
    if (!srq_case_open(NULL, &s))
        return;
    NDK_SRQ *srq = NULL;
    dp_mr mr;
    DP_CHECK_ST(srq_create(&s, 4, 2, 0, &srq, NULL), STATUS_SUCCESS);
    REQUIRE(srq && dp_buf_reg(&s, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    NDK_SGE g[3] = {dp_sge(&mr, 0, 64), dp_sge(&mr, 64, 64), dp_sge(&mr, 128, 64)};
    DP_CHECK_ST(srq_post(srq, DP_CTX(1), g, 3), STATUS_INVALID_PARAMETER);
    for (int i = 0; i < 4; i++)
        DP_CHECK_ST(srq_post(srq, DP_CTX(10 + i), g, 2), STATUS_SUCCESS);
    DP_CHECK_ST(srq_post(srq, DP_CTX(14), g, 1), STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_ST(srq_modify(srq, 0, 0), STATUS_SUCCESS);
    DP_CHECK_ST(srq_post(srq, DP_CTX(15), g, 1), STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_ST(srq_modify(srq, 8, 0), STATUS_SUCCESS);
    for (int i = 0; i < 4; i++)
        DP_CHECK_ST(srq_post(srq, DP_CTX(16 + i), g, 1), STATUS_SUCCESS);
    DP_CHECK_ST(srq_post(srq, DP_CTX(20), g, 1), STATUS_INSUFFICIENT_RESOURCES);
    dp_close(srq);
    /* On a fresh SRQ, so an accepted bad post cannot eat a slot above. */
    DP_CHECK_ST(srq_create(&s, 4, 2, 0, &srq, NULL), STATUS_SUCCESS);
    REQUIRE(srq);
    NDK_SGE out = dp_sge(&mr, 4096 - 8, 16);
    DP_CHECK_ST(srq_post(srq, DP_CTX(2), &out, 1), STATUS_ACCESS_VIOLATION);
    dp_close(srq);
    dp_mr_close(&mr);
    srq_case_close(NULL, &s);
}

/*
 * NdkReceive on a QP created with an SRQ (NDKPI does not say; libndk:
 * STATUS_INVALID_DEVICE_REQUEST), before and after connecting; no CQE.
 */
DP_CASE(receive_on_srq_qp_refused)
{
    dp_side a, p;
    if (!srq_case_open(&a, &p))
        return;
    NDK_SRQ *srq = NULL;
    DP_CHECK_ST(srq_create(&p, 8, 1, 0, &srq, NULL), STATUS_SUCCESS);
    dp_conn *c = srq_conn_new(&a, &p, srq);
    dp_mr mr;
    REQUIRE(srq && c && dp_buf_reg(&p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    NDK_SGE r = dp_sge(&mr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &r, 1), STATUS_INVALID_DEVICE_REQUEST);
    REQUIRE(dp_conn_establish(c));
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), &r, 1), STATUS_INVALID_DEVICE_REQUEST);
    DP_CHECK_QUIET(c->cqp);
    /* Its SRQ feeds it instead. */
    DP_CHECK_ST(srq_post(srq, DP_CTX(3), &r, 1), STATUS_SUCCESS);
    dp_mr ms;
    REQUIRE(dp_buf_reg(&a, &ms, 64, 0, 5));
    NDK_SGE g = dp_sge(&ms, 0, 32);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), &g, 1, 0), STATUS_SUCCESS);
    dp_check_send_landed(c, 4, 3, mr.addr, 32, 5);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_conn_close(c);
    dp_close(srq);
    srq_case_close(&a, &p);
}

/* A 16-byte message naming its sender and sequence number. */
static void tag_msg(uint8_t *m, unsigned conn, unsigned seq)
{
    memset(m, 0, 16);
    m[0] = (uint8_t)conn;
    m[1] = (uint8_t)seq;
    dp_fill(m + 2, 14, conn * 100 + seq, 0);
}

/*
 * Two QPs, each connected to its own peer QP, take Sends from one SRQ
 * (NdkCreateQpWithSrq, NdkSrqReceive): every completion lands in the receive CQ
 * of the QP that consumed the buffer, with that QP's QPContext; buffers are
 * consumed in the order they were posted (here one message at a time, so the
 * order is known), and each buffer holds the message its completion reports.
 * Then a burst from both peers at once: every message arrives exactly once and
 * no buffer is used twice. Receives posted before either connection existed are
 * used too.
 */
DP_CASE(two_qps_share_srq)
{
    dp_side a, p;
    if (!srq_case_open(&a, &p))
        return;
    NDK_SRQ *srq = NULL;
    DP_CHECK_ST(srq_create(&p, 32, 2, 0, &srq, NULL), STATUS_SUCCESS);
    REQUIRE(srq);
    dp_mr rb, sb;
    uint8_t *rx = dp_buf_reg(&p, &rb, 32 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *tx = dp_buf_reg(&a, &sb, 64 * 16, 0, 0);
    REQUIRE(rx && tx);
    memset(rx, 0xEE, 32 * 64);
    /* Buffer k (context 100 + k) is 2 SGEs: 10 bytes, then 54 bytes. */
    for (unsigned k = 0; k < 32; k++) {
        NDK_SGE g[2] = {dp_sge(&rb, k * 64, 10), dp_sge(&rb, k * 64 + 10, 54)};
        DP_CHECK_ST(srq_post(srq, DP_CTX(100 + k), g, 2), STATUS_SUCCESS);
    }
    dp_conn *c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = srq_conn_new(&a, &p, srq);
        REQUIRE(c[i] && dp_conn_establish(c[i]));
    }
    /* One at a time: 1, 2, 2, 1, 1, 2. */
    static const int who[6] = {0, 1, 1, 0, 0, 1};
    unsigned next = 0, seq = 0;
    for (int m = 0; m < 6; m++) {
        int w = who[m];
        uint8_t *msg = tx + seq * 16;
        tag_msg(msg, (unsigned)w + 1, seq);
        NDK_SGE g = dp_sge(&sb, seq * 16, 16);
        DP_CHECK_ST(dp_send(c[w]->qa, DP_CTX(seq), &g, 1, 0), STATUS_SUCCESS);
        NDK_RESULT_EX e;
        DP_WAIT(c[w]->cqa, &e, 1);
        DP_WAIT(c[w]->cqp, &e, 1);
        DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c[w]),
                     DP_CTX(100 + next), 16);
        /* The message straddles the buffer's two SGEs. */
        CHECK(memcmp(rx + next * 64, msg, 16) == 0);
        DP_CHECK_BYTES(rx + next * 64 + 16, 48, 0xEE);
        next++;
        seq++;
    }
    /* A burst: 8 from each peer, posted back to back. */
    for (unsigned m = 0; m < 16; m++) {
        int w = (int)(m % 2);
        uint8_t *msg = tx + seq * 16;
        tag_msg(msg, (unsigned)w + 1, seq);
        NDK_SGE g = dp_sge(&sb, seq * 16, 16);
        DP_CHECK_ST(dp_send(c[w]->qa, DP_CTX(seq), &g, 1, 0), STATUS_SUCCESS);
        seq++;
    }
    bool used[32] = {false};
    bool seen[64] = {false};
    for (int w = 0; w < 2; w++) {
        NDK_RESULT_EX e[8];
        DP_WAIT(c[w]->cqa, e, 8);
        ULONG n = dp_wait_ex(c[w]->cqp, e, 8, DP_WAIT_MS);
        CHECK_EQ(n, 8);
        unsigned last = 0;
        for (ULONG i = 0; i < n; i++) {
            CHECK(e[i].QPContext == dp_qpctx_p(c[w]));
            DP_CHECK_ST(e[i].Status, STATUS_SUCCESS);
            CHECK_EQ(e[i].BytesTransferred, 16);
            unsigned k = (unsigned)((uintptr_t)e[i].RequestContext - 100);
            REQUIRE(k < 32 && k >= next);
            CHECK(!used[k]);
            used[k] = true;
            /* Within one QP, later messages take later buffers. */
            CHECK(k > last || i == 0);
            last = k;
            const uint8_t *b = rx + k * 64;
            CHECK_EQ(b[0], w + 1);
            unsigned s = b[1];
            REQUIRE(s < 64);
            CHECK(!seen[s]);
            seen[s] = true;
            CHECK(memcmp(b, tx + s * 16, 16) == 0);
        }
    }
    /* The 16 buffers used are exactly the next 16 posted. */
    for (unsigned k = next; k < next + 16; k++)
        CHECK(used[k]);
    for (int i = 0; i < 2; i++) {
        DP_CHECK_QUIET(c[i]->cqp);
        dp_conn_close(c[i]);
    }
    dp_mr_close(&rb);
    dp_mr_close(&sb);
    dp_close(srq);
    srq_case_close(&a, &p);
}

/*
 * The limit notification (NdkSrqNotificationCallback): armed by NdkModifySrq with a
 * non-zero threshold, it fires once when the number of queued receives
 * drops below the threshold, then stays disarmed; a threshold of 0 keeps
 * both the threshold and the disarmed state; arming when the count is
 * already below the threshold fires at once.
 */
DP_CASE(srq_limit_notification)
{
    dp_side a, p;
    if (!srq_case_open(&a, &p))
        return;
    NDK_SRQ *srq = NULL;
    srqn *n = NULL;
    DP_CHECK_ST(srq_create(&p, 16, 1, 0, &srq, &n), STATUS_SUCCESS);
    REQUIRE(srq);
    dp_conn *c = srq_conn_new(&a, &p, srq);
    dp_mr rb, sb;
    REQUIRE(c && dp_conn_establish(c) &&
            dp_buf_reg(&p, &rb, 16 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) &&
            dp_buf_reg(&a, &sb, 64, 0, 1));
    unsigned posted = 0, consumed = 0;
#define POST(k)                                                                              \
    do {                                                                                     \
        for (unsigned i_ = 0; i_ < (k); i_++, posted++) {                                    \
            NDK_SGE r_ = dp_sge(&rb, (posted % 16) * 64, 64);                                \
            DP_CHECK_ST(srq_post(srq, DP_CTX(posted + 1), &r_, 1), STATUS_SUCCESS);         \
        }                                                                                    \
    } while (0)
#define CONSUME(k)                                                                           \
    do {                                                                                     \
        for (unsigned i_ = 0; i_ < (k); i_++, consumed++) {                                  \
            NDK_SGE g_ = dp_sge(&sb, 0, 8);                                                  \
            NDK_RESULT_EX e_;                                                                \
            DP_CHECK_ST(dp_send(c->qa, DP_CTX(1000 + consumed), &g_, 1, 0), STATUS_SUCCESS); \
            DP_WAIT(c->cqa, &e_, 1);                                                         \
            DP_WAIT(c->cqp, &e_, 1);                                                         \
            CHECK(e_.RequestContext == DP_CTX(consumed + 1));                                \
        }                                                                                    \
    } while (0)
#define NOTIFIED(k)                                                                          \
    do {                                                                                     \
        tl_event_wait(&n->ev, (k) + 1, DP_QUIET_MS);                                         \
        CHECK_EQ(tl_event_count(&n->ev), (k));                                               \
    } while (0)
    POST(4);
    /* Created with threshold 0: disarmed. */
    CONSUME(1); /* 3 queued */
    NOTIFIED(0);
    DP_CHECK_ST(srq_modify(srq, 0, 3), STATUS_SUCCESS); /* 3 is not below 3 */
    NOTIFIED(0);
    CONSUME(1); /* 2 < 3: fires */
    CHECK(tl_event_wait(&n->ev, 1, DP_WAIT_MS));
    DP_CHECK_ST(atomic_load(&n->last), STATUS_SUCCESS);
    CONSUME(1); /* 1 queued: disarmed, nothing */
    NOTIFIED(1);
    /* Threshold 0 keeps the disarmed state. */
    DP_CHECK_ST(srq_modify(srq, 0, 0), STATUS_SUCCESS);
    NOTIFIED(1);
    /* Arming below the threshold fires at once. */
    DP_CHECK_ST(srq_modify(srq, 0, 5), STATUS_SUCCESS);
    CHECK(tl_event_wait(&n->ev, 2, DP_WAIT_MS));
    /* Refill to 6; the threshold (5) is kept but disarmed: no notification
     * when the count falls to 4. */
    POST(5);
    DP_CHECK_ST(srq_modify(srq, 0, 0), STATUS_SUCCESS);
    CONSUME(2);
    NOTIFIED(2);
    /* Re-armed with the count (4) below 5: at once. */
    DP_CHECK_ST(srq_modify(srq, 0, 5), STATUS_SUCCESS);
    CHECK(tl_event_wait(&n->ev, 3, DP_WAIT_MS));
    /* Armed with 2 while 4 are queued: fires when the count drops to 1. */
    DP_CHECK_ST(srq_modify(srq, 0, 2), STATUS_SUCCESS);
    CONSUME(2);
    NOTIFIED(3);
    CONSUME(1);
    CHECK(tl_event_wait(&n->ev, 4, DP_WAIT_MS));
    NOTIFIED(4);
#undef POST
#undef CONSUME
#undef NOTIFIED
    dp_mr_close(&rb);
    dp_mr_close(&sb);
    dp_conn_close(c);
    dp_close(srq);
    srq_case_close(&a, &p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(create_srq_limits);
    RUN(srq_receive_limits);
    RUN_FAM(receive_on_srq_qp_refused);
    RUN_FAM(two_qps_share_srq);
    RUN_FAM(srq_limit_notification);
    return tl_finish();
}
