/*
 * Out of memory in the same-host transport's data path (src/xp_shm.c),
 * over the sim's shared-memory model (tests/testlib/simnet.h,
 * NDK_SIM_TRANSPORT=shm: real time, the transport's own engines move the
 * data). The receiving side takes the receives of a run of small Sends
 * ahead into a block it allocates only when the first such run comes
 * (struct shm_ahead; an idle connection holds none) and frees with the
 * connection. A run whose block cannot be had takes its receives one at
 * a time: every Send is placed intact, every post succeeded, every
 * receive completes once; the next run takes the block; and once the
 * connection is gone, nothing libndk allocated is left (a block never
 * freed shows here, and to LeakSanitizer).
 */
#include "simnet.h"

#include "inject.h"
#include "xp_shm.h"

#define ARENA (256u << 10)
#define CHAIN 20

/* CHAIN receives at B, then CHAIN Sends of 64 octets from A in one DEFER
 * chain: A publishes them together, so that B's pass finds the run at
 * its first Send. The chain's last post rings A's doorbell; from it on,
 * the first thing libndk allocates is B's block (fail: refused, by
 * inj_arm(1)). */
static void run_of_sends(struct sim_net *net, bool fail)
{
    for (int i = 0; i < CHAIN; i++)
        sim_recv1(net, SIM_B, 64);
    for (int i = 0; i + 1 < CHAIN; i++)
        sim_send1(net, SIM_A, 64, NDK_OP_FLAG_DEFER);
    if (fail)
        inj_arm(1);
    sim_send1(net, SIM_A, 64, 0);
    CHECK(sim_run(net));
    if (fail) {
        CHECK(inj_fired());
        inj_disarm();
    }
}

/* Two Sends of 2000 octets (single copy: no run) published together:
 * the second receive of B's pass wants the block that batches their
 * completions (fail: refused); both complete, in order, placed intact. */
static void two_large_sends(struct sim_net *net, bool fail)
{
    sim_recv1(net, SIM_B, 2000);
    sim_recv1(net, SIM_B, 2000);
    sim_send1(net, SIM_A, 2000, NDK_OP_FLAG_DEFER);
    if (fail)
        inj_arm(1);
    sim_send1(net, SIM_A, 2000, 0);
    CHECK(sim_run(net));
    if (fail) {
        CHECK(inj_fired());
        inj_disarm();
    }
}

/* A connection: idle, then a run of Sends whose first finds no memory
 * for the block (fail), then another run. */
static void connection(bool fail)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 1u << 2 | 2u << 8 | 2u << 10);
    struct sim_net *net = sim_net_new(&cfg, 17, ARENA);
    REQUIRE(net);
    REQUIRE(net->shm);
    sim_net_start(net);
    struct ndk_qp_impl *b = net->side[SIM_B].impl;
    CHECK(!ndk_shm_holds_ahead(b)); /* connected, idle: no block */

    /* Refused as a pass's second receive completes. */
    two_large_sends(net, fail);
    CHECK(ndk_shm_holds_ahead(b) == !fail);
    sim_check_posts_ok(net);
    sim_check_clean(net);

    /* Its first Send takes its receive alone; the Sends behind it are a
     * run again, whose block is had now. Every Send is placed intact, in
     * order, each receive completes once. */
    run_of_sends(net, fail);
    CHECK(ndk_shm_holds_ahead(b));
    sim_check_posts_ok(net);
    sim_check_clean(net);

    /* Kept while connected. */
    run_of_sends(net, false);
    CHECK(ndk_shm_holds_ahead(b));
    sim_check_posts_ok(net);
    sim_check_clean(net);

    for (int i = 0; i < 2; i++)
        ndk_qp_disconnect(net->side[i].impl);
    CHECK(sim_run(net));
    sim_stop(net, SIM_A);
    sim_stop(net, SIM_B);
    sim_check_clean(net);
    sim_net_free(net);
}

static void test_ahead_without_memory(void)
{
    /* A clean connection first: what libndk keeps once made (the memory
     * table's leaves, src/mem.c) is not the connection's. */
    connection(false);
    REQUIRE(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
    long base = inj_live();
    connection(true);
    CHECK(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
    /* The block went with the connection. */
    CHECK_EQ(inj_live(), base);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* The shared-memory model, whatever the environment says. Not built
     * under ThreadSanitizer (tests/inject/CMakeLists.txt). */
    setenv("NDK_SIM_TRANSPORT", "shm", 1);
    if (!sim_open_adapters())
        return 1; /* lo always exists: not opening it is a failure, not a skip */
    RUN(test_ahead_without_memory);
    sim_close_adapters();
    return tl_finish();
}
