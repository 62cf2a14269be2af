/* A consumer that polls its CQs (no NDK_OPEN_FLAG_BUSY_POLL) reads its
 * QPs' input itself while it runs on the one CPU their engine may use, and
 * leaves the input to the engine otherwise (docs/behaviour.md, Busy
 * polling). The qp_input test hook of the sides' device (core.h) sees
 * every entry of the engine into a QP's input; the poller's own reads do
 * not pass it. Links the provider's internals (ndk_core) for the hook. */
#include <pthread.h>
#include <sched.h>

#include "dptest.h"
#include "objects.h"

enum { MSG = 64, ROUNDS = 32 };

static int g_entered; /* engine entries into a QP's input (atomic) */

static void probe(struct ndk_qp_impl *qp, bool entering)
{
    (void)qp;
    if (entering)
        __atomic_add_fetch(&g_entered, 1, __ATOMIC_RELAXED);
}

static bool open_side(dp_side *s)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.Flags |= NDK_OPEN_FLAG_NO_SHM; /* the iWARP engine's input is the subject */
    return dp_side_open_as(s, "lo", &o);
}

/* Has a poller leased the QP's input from its engine (qp_poll.c)? */
static bool input_leased(NDK_QP *q)
{
    struct ndk_qp_impl *qp = container_of(ndk_obj_from_pub(q, NdkObjectTypeQp), struct ndk_qp_impl, obj);
    struct ndk_device *dev = qp->obj.ad->dev;
    pthread_mutex_lock(&dev->live_lock);
    bool leased = qp->dp.input_leased;
    pthread_mutex_unlock(&dev->live_lock);
    return leased;
}

/* A poll of the passive side's empty CQ leases its QP's input, looked at
 * right after the poll; true if it did. A lease nobody renews ends after
 * 1 to 2 ms, so on a loaded machine the look may come too late: a few
 * tries. */
static bool poll_leases(dp_conn *c)
{
    for (int i = 0; i < 3; i++) {
        NDK_RESULT_EX r;
        CHECK_EQ(dp_get(c->cqp, &r, 1), 0);
        if (input_leased(c->qp))
            return true;
    }
    return false;
}

/* ROUNDS ping-pongs of MSG-octet Sends, every wait a poll with
 * sched_yield between attempts; returns how often the engine entered a
 * QP's input meanwhile (-1 when the connection could not be set up), and
 * in *leased whether a poll then leased the passive side's input. */
static int ping_pong_entries(bool *leased)
{
    dp_side a, p;
    if (!open_side(&a) || !open_side(&p))
        return -1;
    dp_cfg cfg = dp_cfg_default();
    dp_conn *c = dp_conn_new(&a, &p, &cfg);
    dp_mr ma, mp;
    size_t len = 2 * ROUNDS * MSG;
    if (!c || !dp_conn_establish(c) || !dp_buf_reg(&a, &ma, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1) ||
        !dp_buf_reg(&p, &mp, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 2))
        return -1;
    c->cqa->poll_only = c->cqp->poll_only = true;
    for (unsigned i = 0; i < ROUNDS; i++) {
        NDK_SGE ra = dp_sge(&ma, i * MSG, MSG), rp = dp_sge(&mp, i * MSG, MSG);
        DP_CHECK_ST(dp_recv(c->qa, DP_CTX(0x1000 + i), &ra, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x2000 + i), &rp, 1), STATUS_SUCCESS);
    }
    /* A first poll of each side: a message already on its way may still
     * be the engine's. */
    NDK_RESULT_EX r[2];
    CHECK_EQ(dp_get(c->cqa, r, 2), 0);
    CHECK_EQ(dp_get(c->cqp, r, 2), 0);
    const struct ndk_test_hooks hooks = {.qp_input = probe};
    __atomic_store_n(&g_entered, 0, __ATOMIC_RELAXED);
    CHECK(ndk_test_hooks_set(a.ad, &hooks));
    for (unsigned i = 0; i < ROUNDS; i++) {
        NDK_SGE sa = dp_sge(&ma, (ROUNDS + i) * MSG, MSG), sp = dp_sge(&mp, (ROUNDS + i) * MSG, MSG);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x3000 + i), &sa, 1, 0), STATUS_SUCCESS);
        DP_WAIT(c->cqp, r, 1);
        DP_CHECK_CQE(r[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(0x2000 + i), MSG);
        DP_CHECK_ST(dp_send(c->qp, DP_CTX(0x4000 + i), &sp, 1, 0), STATUS_SUCCESS);
        DP_WAIT(c->cqa, r, 2); /* our Send's completion and the answer */
        CHECK_EQ(dp_count_ctx(r, 2, DP_CTX(0x1000 + i)), 1);
        DP_WAIT(c->cqp, r, 1);
        DP_CHECK_CQE(r[0], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(0x4000 + i), -1);
    }
    int entered = __atomic_load_n(&g_entered, __ATOMIC_RELAXED);
    *leased = poll_leases(c);
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
    return entered;
}

/* The calling thread's CPUs; false when they cannot be read. */
static bool own_cpus(cpu_set_t *set)
{
    CPU_ZERO(set);
    return pthread_getaffinity_np(pthread_self(), sizeof *set, set) == 0;
}

/* Opened while this thread may run on one CPU only, the device's one
 * engine is confined there with the polling thread: a poll leases the
 * input from the engine and reads it itself. The engine may still take
 * some messages: a poller preempted for longer than its lease (1 to 2 ms,
 * on a loaded machine) hands the input back until it polls again; but
 * not every one, as it does without this. */
DP_CASE(poller_on_the_engines_cpu_reads_the_input)
{
    cpu_set_t saved, one;
    REQUIRE(own_cpus(&saved));
    int cpu = sched_getcpu();
    REQUIRE(cpu >= 0);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0);
    bool leased = false;
    int entered = ping_pong_entries(&leased);
    CHECK(pthread_setaffinity_np(pthread_self(), sizeof saved, &saved) == 0);
    CHECK(entered >= 0);
    CHECK(leased);
    if (entered >= 2 * ROUNDS) {
        tl_failures++;
        fprintf(stderr, "[%s] the engine read all %d messages, the poller none\n", tl_current, entered);
    }
}

/* With two CPUs (main) the engine may run beside the poller: every message is
 * the engine's, as without polling. */
DP_CASE(poller_beside_the_engine_leaves_the_input)
{
    bool leased = true;
    int entered = ping_pong_entries(&leased);
    CHECK(entered >= 2 * ROUNDS);
    CHECK(!leased);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    cpu_set_t set;
    if (!own_cpus(&set) || CPU_COUNT(&set) < 2) {
        tl_skip_all("one CPU in the affinity mask: the engine never runs beside the poller");
        return tl_finish();
    }
    RUN_FAM(poller_on_the_engines_cpu_reads_the_input);
    RUN_FAM(poller_beside_the_engine_leaves_the_input);
    return tl_finish();
}
