/* Engines move their QPs' socket input at once, each under its QP's own
 * locks, not in turns under the device lock (docs/architecture.md, Threads
 * and locks), and a QP closed while an engine is inside its input, or
 * about to enter it, completes everything exactly once and frees nothing
 * under it.
 *
 * The probe here, the qp_input test hook of the sides' device (core.h),
 * sees every entry to a QP's input: it can hold an engine there, bounded,
 * until a second engine enters (which the device lock would prevent) or
 * until the test has closed the connection under it (which the device
 * lock would block). Links the
 * provider's internals (ndk_core) for the hook; everything else goes
 * through NDKPI. Needs two CPUs (two engines), else skipped. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "dptest.h"
#include "qp.h"

/* How long the probe holds an engine at most. */
enum { HOLD_MS = 5000 };

enum probe_mode {
    PROBE_COUNT, /* only count */
    PROBE_PAIR,  /* the first engine in waits for a second one to come in */
    PROBE_HOLD,  /* the first engine in waits until the test releases it */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static enum probe_mode g_mode;
static int g_inside, g_max, g_entered;
static bool g_released, g_timed_out;

static bool hold_over(enum probe_mode mode)
{
    return mode == PROBE_PAIR ? g_max >= 2 : g_released;
}

static void probe(struct ndk_qp_impl *qp, bool entering)
{
    (void)qp;
    pthread_mutex_lock(&g_mu);
    if (!entering) {
        g_inside--;
        pthread_mutex_unlock(&g_mu);
        return;
    }
    if (++g_inside > g_max)
        g_max = g_inside;
    g_entered++;
    pthread_cond_broadcast(&g_cv);
    enum probe_mode mode = g_mode;
    if (mode != PROBE_COUNT && !hold_over(mode)) {
        g_mode = PROBE_COUNT; /* one engine is held, once */
        struct timespec until = tl_deadline(CLOCK_REALTIME, HOLD_MS);
        while (!hold_over(mode) && pthread_cond_timedwait(&g_cv, &g_mu, &until) != ETIMEDOUT)
            ;
        g_timed_out = !hold_over(mode);
    }
    pthread_mutex_unlock(&g_mu);
}

/* Installs the probe on both sides' adapters (two views of one device
 * here, "lo"). */
static void probe_start(enum probe_mode mode, dp_side *a, dp_side *p)
{
    pthread_mutex_lock(&g_mu);
    g_mode = mode;
    g_max = g_entered = 0;
    g_released = g_timed_out = false;
    pthread_mutex_unlock(&g_mu);
    const struct ndk_test_hooks hooks = {.qp_input = probe};
    CHECK(ndk_test_hooks_set(a->ad, &hooks) && ndk_test_hooks_set(p->ad, &hooks));
}

/* The probe stays installed until the sides close: an engine may be about
 * to call it. */
static void probe_stop(void)
{
    pthread_mutex_lock(&g_mu);
    g_mode = PROBE_COUNT;
    g_released = true;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static bool wait_entered(void)
{
    pthread_mutex_lock(&g_mu);
    struct timespec until = tl_deadline(CLOCK_REALTIME, DP_WAIT_MS);
    while (!g_entered && pthread_cond_timedwait(&g_cv, &g_mu, &until) != ETIMEDOUT)
        ;
    bool entered = g_entered > 0;
    pthread_mutex_unlock(&g_mu);
    return entered;
}

static bool open_side(dp_side *s)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.MaxEngines = 2;
    o.Flags |= NDK_OPEN_FLAG_NO_SHM; /* the iWARP engines' input is the subject */
    return dp_side_open_as(s, "lo", &o);
}

static dp_conn *conn_up(dp_side *a, dp_side *p)
{
    dp_cfg cfg = dp_cfg_default();
    dp_conn *c = dp_conn_new(a, p, &cfg);
    return c && dp_conn_establish(c) ? c : NULL;
}

enum { MSG = 64, PER_DIR = 8 };

/* Posts PER_DIR receives on `to` and as many Sends from `from`, using the
 * buffer at slot `at` of each side's MR (receives first, then sources). */
static void traffic(NDK_QP *from, dp_mr *mf, NDK_QP *to, dp_mr *mt, unsigned at, uintptr_t tag)
{
    for (unsigned i = 0; i < PER_DIR; i++) {
        NDK_SGE r = dp_sge(mt, (at + i) * MSG, MSG);
        DP_CHECK_ST(dp_recv(to, DP_CTX(tag + i), &r, 1), STATUS_SUCCESS);
    }
    for (unsigned i = 0; i < PER_DIR; i++) {
        NDK_SGE s = dp_sge(mf, (at + 2 * PER_DIR + i) * MSG, MSG);
        DP_CHECK_ST(dp_send(from, DP_CTX(tag + 0x100 + i), &s, 1, 0), STATUS_SUCCESS);
    }
}

/* Two connections, Sends both ways on each: their four QPs sit on both
 * engines (CQs spread over the engines), so the engine the probe holds in
 * one QP's input leaves input of a QP on the other engine, which must
 * come in meanwhile. Every message arrives. */
DP_CASE(engines_move_input_at_once)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    dp_conn *c1 = conn_up(&a, &p), *c2 = conn_up(&a, &p);
    REQUIRE(c1 && c2);
    dp_mr ma, mp;
    size_t len = 2 * 3 * PER_DIR * MSG;
    REQUIRE(dp_buf_reg(&a, &ma, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1) &&
            dp_buf_reg(&p, &mp, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 2));
    probe_start(PROBE_PAIR, &a, &p);
    traffic(c1->qa, &ma, c1->qp, &mp, 0, 0x1000);
    traffic(c1->qp, &mp, c1->qa, &ma, 0, 0x2000);
    traffic(c2->qa, &ma, c2->qp, &mp, 3 * PER_DIR, 0x3000);
    traffic(c2->qp, &mp, c2->qa, &ma, 3 * PER_DIR, 0x4000);
    NDK_RESULT_EX r[2 * PER_DIR];
    dp_cq *cqs[4] = {c1->cqa, c1->cqp, c2->cqa, c2->cqp};
    for (unsigned i = 0; i < 4; i++) {
        CHECK_EQ(dp_wait_ex(cqs[i], r, 2 * PER_DIR, DP_WAIT_MS), 2 * PER_DIR);
        for (unsigned k = 0; k < 2 * PER_DIR; k++)
            DP_CHECK_ST(r[k].Status, STATUS_SUCCESS);
        DP_CHECK_QUIET(cqs[i]);
    }
    probe_stop();
    pthread_mutex_lock(&g_mu);
    int max = g_max;
    bool timed_out = g_timed_out;
    pthread_mutex_unlock(&g_mu);
    if (max < 2 || timed_out) {
        tl_failures++;
        fprintf(stderr, "[%s] at most %d engine(s) inside input at once (held %d ms for a second)\n",
                tl_current, max, HOLD_MS);
    }
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_conn_close(c1);
    dp_conn_close(c2);
    dp_side_close(&a);
    dp_side_close(&p);
}

enum { RECVS = 8 };

/* Every receive in r completed once, with status st. */
static void check_receives(const NDK_RESULT_EX *r, ULONG got, uintptr_t tag, NTSTATUS st)
{
    CHECK_EQ(got, RECVS);
    for (unsigned k = 0; k < RECVS; k++)
        CHECK_EQ(dp_count_ctx(r, got, DP_CTX(tag + k)), 1);
    for (ULONG k = 0; k < got; k++)
        DP_CHECK_ST(r[k].Status, st);
}

/* The passive side's engine has fetched the readable event of a Send and
 * is about to read it when the consumer closes the connector and the QP:
 * the close goes through at once (no lock the engine holds), the engine
 * then finds the QP stopped and reads nothing; the receives complete
 * once, cancelled, and the peer hears of the reset. */
DP_CASE(close_while_an_engine_is_in_input)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    dp_conn *c = conn_up(&a, &p);
    REQUIRE(c);
    dp_mr ma, mp;
    REQUIRE(dp_buf_reg(&a, &ma, MSG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 3) &&
            dp_buf_reg(&p, &mp, RECVS * MSG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 4));
    for (unsigned k = 0; k < RECVS; k++) {
        NDK_SGE s = dp_sge(&mp, k * MSG, MSG);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x100 + k), &s, 1), STATUS_SUCCESS);
    }
    probe_start(PROBE_HOLD, &a, &p);
    NDK_SGE s = dp_sge(&ma, 0, MSG);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x200), &s, 1, 0), STATUS_SUCCESS);
    REQUIRE(wait_entered());
    dp_req *rc = dp_close_start(c->cp), *rq = dp_close_start(c->qp);
    c->cp = NULL;
    c->qp = NULL;
    pthread_mutex_lock(&g_mu);
    bool closed_under_it = !g_timed_out; /* the engine was still held */
    pthread_mutex_unlock(&g_mu);
    probe_stop();
    CHECK(closed_under_it);
    CHECK(dp_close_wait(rc));
    CHECK(dp_close_wait(rq));
    NDK_RESULT_EX r[RECVS + 1];
    check_receives(r, dp_wait_ex(c->cqp, r, RECVS, DP_WAIT_MS), 0x100, STATUS_CANCELLED);
    DP_CHECK_QUIET(c->cqp);
    CHECK_EQ(dp_wait_ex(c->cqa, r, 1, DP_WAIT_MS), 1);
    CHECK(tl_event_wait(&c->disc_a, 1, DP_WAIT_MS));
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

enum { ROUNDS = 12, BURST = 64, BIG = 16384 };

/* Stress: the peer's Sends stream in while the consumer closes the
 * connector and the QP, on the test thread, as the QP's engine reads:
 * each round, every receive completes exactly once (placed or
 * cancelled), every Send once, and nothing more arrives. */
DP_CASE(close_racing_input)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    dp_mr ma, mp;
    REQUIRE(dp_buf_reg(&a, &ma, BIG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 5) &&
            dp_buf_reg(&p, &mp, (size_t)BURST * BIG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 6));
    int failures = tl_failures; /* a failed round ends the case */
    for (unsigned round = 0; round < ROUNDS && tl_failures == failures; round++) {
        dp_cfg cfg = dp_cfg_default();
        cfg.rqd = cfg.iqd = BURST;
        dp_conn *c = dp_conn_new(&a, &p, &cfg);
        REQUIRE(c && dp_conn_establish(c));
        for (unsigned k = 0; k < BURST; k++) {
            NDK_SGE s = dp_sge(&mp, (size_t)k * BIG, BIG);
            DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x1000 + k), &s, 1), STATUS_SUCCESS);
        }
        NDK_SGE s = dp_sge(&ma, 0, BIG);
        for (unsigned k = 0; k < BURST; k++)
            DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x2000 + k), &s, 1, 0), STATUS_SUCCESS);
        /* Later rounds close a little later: somewhere in the stream. */
        NDK_RESULT_EX early[BURST];
        ULONG placed = dp_get(c->cqp, early, round % 4);
        dp_req *rc = dp_close_start(c->cp), *rq = dp_close_start(c->qp);
        c->cp = NULL;
        c->qp = NULL;
        CHECK(dp_close_wait(rc));
        CHECK(dp_close_wait(rq));
        NDK_RESULT_EX r[BURST + 1];
        ULONG got = placed + dp_wait_ex(c->cqp, r, BURST - placed, DP_WAIT_MS);
        CHECK_EQ(got, BURST);
        memcpy(r + (got - placed), early, placed * sizeof *early);
        for (unsigned k = 0; k < BURST; k++)
            CHECK_EQ(dp_count_ctx(r, got, DP_CTX(0x1000 + k)), 1);
        for (ULONG k = 0; k < got; k++)
            CHECK(r[k].Status == STATUS_SUCCESS || r[k].Status == STATUS_CANCELLED);
        ULONG sent = dp_wait_ex(c->cqa, r, BURST, DP_WAIT_MS);
        CHECK_EQ(sent, BURST);
        for (unsigned k = 0; k < BURST; k++)
            CHECK_EQ(dp_count_ctx(r, sent, DP_CTX(0x2000 + k)), 1);
        /* Nothing more arrives: looked at in the last round only (it
         * waits DP_QUIET_MS per CQ). */
        if (round == ROUNDS - 1) {
            DP_CHECK_QUIET(c->cqp);
            DP_CHECK_QUIET(c->cqa);
        }
        dp_conn_close(c);
    }
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2 || getenv("NDK_MAX_ENGINES")) {
        tl_skip_all(CPU_COUNT(&set) < 2 ? "one CPU in the affinity mask: a single engine"
                                        : "NDK_MAX_ENGINES is set: the engine count is not the test's");
        return tl_finish();
    }
    RUN_FAM(engines_move_input_at_once);
    RUN_FAM(close_while_an_engine_is_in_input);
    RUN_FAM(close_racing_input);
    return tl_finish();
}
