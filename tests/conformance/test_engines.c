/* Progress engines (docs/architecture.md, Engines): a CQ whose Affinity
 * names a CPU gets its notifications on the engine of that CPU, pinned
 * there; CQs without one go to an engine with the fewest of their view's
 * objects, the least loaded of those; a listener goes to its view's newest
 * CQ's engine; a QP whose CQs sit on two engines completes every request
 * exactly once; closing views with connections on several engines
 * delivers what was queued and nothing after. NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED is reported only with more
 * than one engine (MaxEngines).
 *
 * The program needs two CPUs in its affinity mask; with fewer it is
 * skipped. Engines stand for the CPUs of that mask in order, so engine 1
 * is the second CPU's (g_cpu[1]). */
#include <sched.h>
#include <sys/syscall.h>

#include "dptest.h"

/* How long the last view's close is watched for a late callback. */
enum { CLOSE_QUIET_MS = 100 };

static int g_cpu[2];

/* Where one CQ's notifications ran. */
typedef struct where {
    _Atomic int calls;
    _Atomic int tid;       /* the thread of the first one */
    _Atomic int moved;     /* a later one ran on another thread */
    _Atomic int cpu;       /* the one CPU the thread may run on, -1 if several */
    _Atomic int after_close; /* one ran after ndk_close_adapter returned */
} where;

static _Atomic int g_closed;

static void where_hook(dp_cq *c, NTSTATUS status)
{
    (void)status;
    where *w = c->user;
    int tid = (int)syscall(SYS_gettid);
    int none = 0;
    if (!atomic_compare_exchange_strong(&w->tid, &none, tid) && none != tid)
        atomic_store(&w->moved, 1);
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpu = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) == 1)
        for (int i = 0; i < CPU_SETSIZE && cpu < 0; i++)
            if (CPU_ISSET(i, &set))
                cpu = i;
    atomic_store(&w->cpu, cpu);
    if (atomic_load(&g_closed))
        atomic_store(&w->after_close, 1);
    atomic_fetch_add(&w->calls, 1);
}

static NDK_OPEN_OPTIONS two_engines(void)
{
    NDK_OPEN_OPTIONS o = dp_options();
    o.MaxEngines = 2;
    return o;
}

static bool open_side(dp_side *s)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = two_engines();
    return dp_side_open_as(s, "lo", &o);
}

/* A counted CQ with this Affinity (NULL: none) whose notifications are
 * recorded in *w. */
static dp_cq *cq_on(dp_side *s, const GROUP_AFFINITY *aff, where *w)
{
    dp_cq *c = dp_cq_record();
    memset(w, 0, sizeof *w);
    c->hook = where_hook;
    c->user = w;
    dp_req *r = dp_req_new("NdkCreateCq");
    NDK_CQ *cq = NULL;
    NTSTATUS st;
    GROUP_AFFINITY a;
    if (aff)
        a = *aff;
    NTSTATUS ret = s->ad->Dispatch->NdkCreateCq(s->ad, 256, dp_cq_cb, c, aff ? &a : NULL, dp_create_cb,
                                                r, &cq);
    c->cq = dp_created(r, ret, cq, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return c->cq ? c : NULL;
}

static GROUP_AFFINITY cpu_affinity(int cpu)
{
    GROUP_AFFINITY a;
    memset(&a, 0, sizeof a);
    a.Group = (USHORT)(cpu / 64);
    a.Mask = (KAFFINITY)1 << (cpu % 64);
    return a;
}

/* A connection a -> p over QPs on the given CQs (initiator, receive). */
static dp_conn *conn_on(dp_side *a, dp_side *p, dp_cq *ai, dp_cq *ar, dp_cq *pi, dp_cq *pr)
{
    if (!ai || !ar || !pi || !pr)
        return NULL;
    dp_conn *c = dp_conn_record();
    c->a = a;
    c->p = p;
    c->cfg = dp_cfg_default();
    c->cfg.p_ird = c->cfg.ird;
    c->cfg.p_ord = c->cfg.ord;
    c->cfg.split_cq = ai != ar;
    c->cqa = ai;
    c->rcqa = ar;
    c->cqp = pi;
    c->rcqp = pr;
    c->qa = dp_qp_create(a, ar, ai, NULL, dp_qpctx_a(c), &c->cfg, NULL);
    c->qp = dp_qp_create(p, pr, pi, NULL, dp_qpctx_p(c), &c->cfg, NULL);
    return c->qa && c->qp && dp_conn_establish(c) ? c : NULL;
}

/* Arms the CQs, then waits for the notification each one owes. */
static void arm_all(dp_cq **cqs, unsigned n, unsigned *before)
{
    for (unsigned i = 0; i < n; i++) {
        before[i] = dp_cq_notified(cqs[i]);
        dp_arm(cqs[i], NDK_CQ_NOTIFY_ANY);
    }
}

static void wait_notified(dp_cq **cqs, unsigned n, const unsigned *before)
{
    for (unsigned i = 0; i < n; i++)
        CHECK(tl_event_wait(&cqs[i]->notify, before[i] + 1, DP_WAIT_MS));
}

/* A Send a -> p whose two completions are notified. */
static bool notified_roundtrip(dp_conn *c, uint32_t seed)
{
    dp_cq *cqs[2] = {c->cqa, c->rcqp};
    unsigned before[2];
    arm_all(cqs, 2, before);
    bool ok = dp_roundtrip(c, 64, seed);
    wait_notified(cqs, 2, before);
    return ok;
}

/* Each notification of the CQ ran on one engine thread, pinned to cpu
 * (-1: not pinned, only one thread). */
static void check_where(const where *w, int cpu, const char *what)
{
    if (atomic_load(&w->calls) == 0 || atomic_load(&w->moved) ||
        (cpu >= 0 && atomic_load(&w->cpu) != cpu)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: %d notifications, moved %d, on CPU %d (want %d)\n", tl_current,
                what, atomic_load(&w->calls), atomic_load(&w->moved), atomic_load(&w->cpu), cpu);
    }
}

/* Two connections between a and p, each on a CQ of its own at either end,
 * made without an Affinity: all of a's CQs first, or (in_turn) a's and p's
 * in turn, as two views of one process do. */
typedef struct two_conns {
    where wa[2], wp[2];
    dp_conn *c[2];
} two_conns;

static bool two_conns_open(two_conns *t, dp_side *a, dp_side *p, bool in_turn)
{
    dp_cq *ca[2], *cp[2];
    for (int i = 0; i < 2; i++) {
        ca[i] = cq_on(a, NULL, &t->wa[i]);
        if (in_turn)
            cp[i] = cq_on(p, NULL, &t->wp[i]);
    }
    for (int i = 0; !in_turn && i < 2; i++)
        cp[i] = cq_on(p, NULL, &t->wp[i]);
    for (int i = 0; i < 2; i++)
        t->c[i] = conn_on(a, p, ca[i], ca[i], cp[i], cp[i]);
    return t->c[0] && t->c[1];
}

/* At each end the two CQs are notified on different engines (threads). */
static void check_two_engines(const two_conns *t)
{
    CHECK(atomic_load(&t->wa[0].tid) != atomic_load(&t->wa[1].tid));
    CHECK(atomic_load(&t->wp[0].tid) != atomic_load(&t->wp[1].tid));
}

static void two_conns_close(two_conns *t, dp_side *a, dp_side *p)
{
    dp_conn_close(t->c[0]);
    dp_conn_close(t->c[1]);
    dp_side_close(a);
    dp_side_close(p);
}

/* A CQ with Affinity for the second CPU gets its notifications on that
 * CPU's engine, pinned there; one for the first CPU on the other engine. */
DP_CASE(affinity_names_the_engine)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    CHECK(a.info.AdapterFlags & NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED);
    GROUP_AFFINITY one = cpu_affinity(g_cpu[1]), zero = cpu_affinity(g_cpu[0]);
    static where wa, wp;
    dp_cq *ca = cq_on(&a, &one, &wa), *cp = cq_on(&p, &zero, &wp);
    dp_conn *c = conn_on(&a, &p, ca, ca, cp, cp);
    REQUIRE(c);
    for (uint32_t i = 0; i < 4; i++)
        CHECK(notified_roundtrip(c, 10 + i));
    check_where(&wa, g_cpu[1], "CQ for the second CPU");
    check_where(&wp, g_cpu[0], "CQ for the first CPU");
    CHECK(atomic_load(&wa.tid) != atomic_load(&wp.tid));
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

/* Without an Affinity, CQs spread over the engines: two created in a
 * row on a fresh device sit on different engines (threads). */
DP_CASE(least_loaded_placement)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    static two_conns t;
    REQUIRE(two_conns_open(&t, &a, &p, false));
    for (uint32_t i = 0; i < 3; i++) {
        CHECK(notified_roundtrip(t.c[0], 20 + i));
        CHECK(notified_roundtrip(t.c[1], 30 + i));
    }
    check_where(&t.wa[0], -1, "first CQ");
    check_where(&t.wa[1], -1, "second CQ");
    check_two_engines(&t);
    two_conns_close(&t, &a, &p);
}

/* Without an Affinity, a view's CQs spread over the engines first: two
 * views that make their CQs in turn (one for each end of a connection, as
 * a benchmark in one process does) each get one CQ on each engine, not
 * all of one view's on the engine the other view's just left. */
DP_CASE(views_spread_their_cqs)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    static two_conns t;
    REQUIRE(two_conns_open(&t, &a, &p, true));
    CHECK(notified_roundtrip(t.c[0], 60));
    CHECK(notified_roundtrip(t.c[1], 61));
    check_where(&t.wa[0], -1, "first active CQ");
    check_where(&t.wa[1], -1, "second active CQ");
    check_where(&t.wp[0], -1, "first passive CQ");
    check_where(&t.wp[1], -1, "second passive CQ");
    check_two_engines(&t);
    two_conns_close(&t, &a, &p);
}

static _Atomic int g_connect_event_tid;

static void connect_event_where(PVOID ctx, NDK_CONNECTOR *c)
{
    atomic_store(&g_connect_event_tid, (int)syscall(SYS_gettid));
    dp_connect_event(ctx, c);
}

/* A listener goes to the engine of its view's newest CQ, where the
 * connections it accepts onto that CQ then need not move: its connect
 * event runs on the thread of that CQ's notifications. The active view's
 * CQ is made first, so the least loaded engine would be the other one. */
DP_CASE(listener_on_its_views_cq_engine)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    static where wa, wp;
    dp_cq *ca = cq_on(&a, NULL, &wa), *cp = cq_on(&p, NULL, &wp);
    REQUIRE(ca && cp);
    dp_conn *c = dp_conn_record();
    c->a = &a;
    c->p = &p;
    c->cfg = dp_cfg_default();
    c->cqa = c->rcqa = ca;
    c->cqp = c->rcqp = cp;
    c->qa = dp_qp_create(&a, ca, ca, NULL, dp_qpctx_a(c), &c->cfg, NULL);
    c->qp = dp_qp_create(&p, cp, cp, NULL, dp_qpctx_p(c), &c->cfg, NULL);
    REQUIRE(c->qa && c->qp);
    dp_req *r = dp_req_new("NdkCreateListener");
    NDK_LISTENER *l = NULL;
    NTSTATUS st;
    NTSTATUS ret = p.ad->Dispatch->NdkCreateListener(p.ad, connect_event_where, c, dp_create_cb, r, &l);
    c->l = dp_created(r, ret, l, &st);
    REQUIRE(c->l);
    NDK_SOCKADDR sa;
    ULONG len = dp_side_addr(&p, &sa, 0);
    r = dp_req_new("NdkListen");
    DP_CHECK_ST(dp_finish(r, c->l->Dispatch->NdkListen(c->l, &sa.sa, len, dp_req_cb, r), DP_WAIT_MS),
                STATUS_SUCCESS);
    c->laddrlen = sizeof c->laddr;
    DP_CHECK_ST(c->l->Dispatch->NdkGetLocalAddress(c->l, &c->laddr.sa, &c->laddrlen), STATUS_SUCCESS);
    REQUIRE(dp_conn_connect(c));
    CHECK(notified_roundtrip(c, 50));
    check_where(&wa, -1, "active CQ");
    check_where(&wp, -1, "passive CQ");
    CHECK(atomic_load(&wa.tid) != atomic_load(&wp.tid));
    CHECK_EQ(atomic_load(&g_connect_event_tid), atomic_load(&wp.tid));
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

enum { SPLIT_N = 48 };

/* A QP whose initiator CQ is on one engine and receive CQ on the other:
 * Sends both ways and Writes complete exactly once each, on their CQ's
 * engine; nothing more comes. */
DP_CASE(split_cqs_on_two_engines)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    GROUP_AFFINITY one = cpu_affinity(g_cpu[1]), zero = cpu_affinity(g_cpu[0]);
    static where wai, war, wpi, wpr;
    dp_cq *ai = cq_on(&a, &one, &wai), *ar = cq_on(&a, &zero, &war);
    dp_cq *pi = cq_on(&p, &zero, &wpi), *pr = cq_on(&p, &one, &wpr);
    dp_conn *c = conn_on(&a, &p, ai, ar, pi, pr);
    REQUIRE(c);
    /* Per side: receive buffers, then send sources; on the passive side
     * the Write targets after those. No two of them overlap. */
    dp_mr ma, mp;
    uint8_t *ba = dp_buf_reg(&a, &ma, 2 * SPLIT_N * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1);
    uint8_t *bp = dp_buf_reg(&p, &mp, 3 * SPLIT_N * 64,
                             NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 2);
    REQUIRE(ba && bp);
    UINT32 ptok = mp.rtok;
    for (unsigned i = 0; i < SPLIT_N; i++) {
        NDK_SGE sa = dp_sge(&ma, i * 64, 64), sp = dp_sge(&mp, i * 64, 64);
        DP_CHECK_ST(dp_recv(c->qa, DP_CTX(0x1000 + i), &sa, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x2000 + i), &sp, 1), STATUS_SUCCESS);
    }
    dp_cq *cqs[4] = {ai, ar, pi, pr};
    unsigned before[4];
    arm_all(cqs, 4, before);
    for (unsigned i = 0; i < SPLIT_N; i++) {
        size_t src = (SPLIT_N + i) * 64;
        NDK_SGE sa = dp_sge(&ma, src, 32), sp = dp_sge(&mp, src, 32);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x3000 + i), &sa, 1, 0), STATUS_SUCCESS);
        DP_CHECK_ST(dp_send(c->qp, DP_CTX(0x4000 + i), &sp, 1, 0), STATUS_SUCCESS);
        DP_CHECK_ST(dp_write(c->qa, DP_CTX(0x5000 + i), &sa, 1, bp + (2 * SPLIT_N + i) * 64, ptok, 0),
                    STATUS_SUCCESS);
    }
    static NDK_RESULT_EX rai[2 * SPLIT_N], rar[SPLIT_N], rpi[SPLIT_N], rpr[SPLIT_N];
    CHECK_EQ(dp_wait_ex(ai, rai, 2 * SPLIT_N, DP_WAIT_MS), 2 * SPLIT_N);
    CHECK_EQ(dp_wait_ex(ar, rar, SPLIT_N, DP_WAIT_MS), SPLIT_N);
    CHECK_EQ(dp_wait_ex(pi, rpi, SPLIT_N, DP_WAIT_MS), SPLIT_N);
    CHECK_EQ(dp_wait_ex(pr, rpr, SPLIT_N, DP_WAIT_MS), SPLIT_N);
    wait_notified(cqs, 4, before);
    for (unsigned i = 0; i < SPLIT_N; i++) {
        CHECK_EQ(dp_count_ctx(rai, 2 * SPLIT_N, DP_CTX(0x3000 + i)), 1);
        CHECK_EQ(dp_count_ctx(rai, 2 * SPLIT_N, DP_CTX(0x5000 + i)), 1);
        CHECK_EQ(dp_count_ctx(rar, SPLIT_N, DP_CTX(0x1000 + i)), 1);
        CHECK_EQ(dp_count_ctx(rpi, SPLIT_N, DP_CTX(0x4000 + i)), 1);
        CHECK_EQ(dp_count_ctx(rpr, SPLIT_N, DP_CTX(0x2000 + i)), 1);
    }
    DP_CHECK_QUIET(ai);
    DP_CHECK_QUIET(ar);
    DP_CHECK_QUIET(pi);
    DP_CHECK_QUIET(pr);
    check_where(&wai, g_cpu[1], "active initiator CQ");
    check_where(&war, g_cpu[0], "active receive CQ");
    check_where(&wpi, g_cpu[0], "passive initiator CQ");
    check_where(&wpr, g_cpu[1], "passive receive CQ");
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

enum { CLOSE_CONNS = 4, CLOSE_RECVS = 4 };

/* Drops an adapter from the case wrapper's list: the case closes it. */
static void forget_adapter(NDK_ADAPTER *ad)
{
    for (unsigned i = 0; i < DP_MAX_ADAPTERS; i++)
        if (dp_adapters[i] == ad)
            dp_adapters[i] = NULL;
}

/* Connections whose QPs sit on both engines. Closing the active view with
 * them open (the passive view stays) resets them: every passive side hears
 * one disconnect event, and its posted receives complete exactly once,
 * flushed. Then the last view closes with its connections still open:
 * no callback runs after it returned (L12). */
DP_CASE(close_with_connections_on_engines)
{
    dp_side a, p;
    REQUIRE(open_side(&a) && open_side(&p));
    static where wa[CLOSE_CONNS], wp[CLOSE_CONNS];
    dp_conn *c[CLOSE_CONNS];
    dp_mr mp[CLOSE_CONNS];
    for (unsigned i = 0; i < CLOSE_CONNS; i++) {
        GROUP_AFFINITY aff = cpu_affinity(g_cpu[i % 2]);
        dp_cq *ca = cq_on(&a, &aff, &wa[i]), *cp = cq_on(&p, &aff, &wp[i]);
        c[i] = conn_on(&a, &p, ca, ca, cp, cp);
        REQUIRE(c[i]);
        CHECK(dp_roundtrip(c[i], 32, 40 + i));
        REQUIRE(dp_buf_reg(&p, &mp[i], CLOSE_RECVS * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 3 + i));
        for (unsigned k = 0; k < CLOSE_RECVS; k++) {
            NDK_SGE s = dp_sge(&mp[i], k * 64, 64);
            DP_CHECK_ST(dp_recv(c[i]->qp, DP_CTX(0x100 * (i + 1) + k), &s, 1), STATUS_SUCCESS);
        }
    }

    forget_adapter(a.ad);
    ndk_close_adapter(a.ad);
    for (unsigned i = 0; i < CLOSE_CONNS; i++) {
        CHECK(tl_event_wait(&c[i]->disc_p, 1, DP_WAIT_MS));
        c[i]->qp->Dispatch->NdkFlush(c[i]->qp);
        NDK_RESULT_EX r[CLOSE_RECVS];
        CHECK_EQ(dp_wait_ex(c[i]->cqp, r, CLOSE_RECVS, DP_WAIT_MS), CLOSE_RECVS);
        for (unsigned k = 0; k < CLOSE_RECVS; k++) {
            CHECK_EQ(dp_count_ctx(r, CLOSE_RECVS, DP_CTX(0x100 * (i + 1) + k)), 1);
            DP_CHECK_ST(r[k].Status, STATUS_CANCELLED);
        }
        DP_CHECK_QUIET(c[i]->cqp);
        CHECK_EQ(tl_event_count(&c[i]->disc_p), 1);
    }
    for (unsigned i = 0; i < CLOSE_CONNS; i++) {
        /* Work queued on both engines while the last view closes. */
        dp_arm(c[i]->cqp, NDK_CQ_NOTIFY_ANY);
        c[i]->qp->Dispatch->NdkFlush(c[i]->qp);
    }
    forget_adapter(p.ad);
    ndk_close_adapter(p.ad);
    atomic_store(&g_closed, 1);
    /* A callback still on its way would land a moment after the close
     * returned: watch for one through a bounded quiet window, not just
     * once. */
    bool late = false;
    uint64_t until = tl_now_ns() + (uint64_t)CLOSE_QUIET_MS * 1000000u;
    while (!late && tl_now_ns() < until) {
        for (unsigned i = 0; i < CLOSE_CONNS; i++)
            late = late || atomic_load(&wa[i].after_close) || atomic_load(&wp[i].after_close);
        sched_yield();
    }
    CHECK(!late);
    atomic_store(&g_closed, 0);
}

/* The flag follows the engine count, which the first open of an
 * interface decides. */
DP_CASE(multi_engine_flag)
{
    dp_side s;
    memset(&s, 0, sizeof s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.MaxEngines = 1;
    REQUIRE(dp_side_open_as(&s, "lo", &o));
    CHECK(!(s.info.AdapterFlags & NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED));
    /* A later view shares the device's engines, whatever it asks. */
    dp_side t;
    REQUIRE(open_side(&t));
    CHECK(!(t.info.AdapterFlags & NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED));
    dp_side_close(&t);
    dp_side_close(&s);
    REQUIRE(open_side(&s));
    CHECK(s.info.AdapterFlags & NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED);
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    cpu_set_t set;
    CPU_ZERO(&set);
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE && n < 2; i++)
            if (CPU_ISSET(i, &set))
                g_cpu[n++] = i;
    if (n < 2 || getenv("NDK_MAX_ENGINES")) {
        tl_skip_all(n < 2 ? "one CPU in the affinity mask: a single engine"
                          : "NDK_MAX_ENGINES is set: the engine count is not the test's");
        return tl_finish();
    }
    RUN(multi_engine_flag);
    RUN_FAM(affinity_names_the_engine);
    RUN_FAM(least_loaded_placement);
    RUN_FAM(views_spread_their_cqs);
    RUN_FAM(listener_on_its_views_cq_engine);
    RUN_FAM(split_cqs_on_two_engines);
    RUN_FAM(close_with_connections_on_engines);
    return tl_finish();
}
