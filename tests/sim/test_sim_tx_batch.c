/*
 * The transmit engine's batches (src/qp_tx.c, docs/architecture.md,
 * "Following one RDMA Write"): what is queued when the doorbell rings goes
 * out in one gathering writev, up to the batch's bounds. A chain of 48
 * small Sends posted with NDK_OP_FLAG_DEFER is one batch (once a batch
 * ended at 32 FPDUs: two system calls); with MPA CRCs and without, the
 * peer receives every message intact. A batch starts in the connection's
 * own arrays and staging area and moves into a burst block as it outgrows
 * them (src/qp.h, struct ndk_tx_burst): a chain that does so midway, with
 * staged and referenced FPDUs before and after the move, is still one
 * writev and arrives intact, and the block is given back once written.
 * The responder's side of the same: the Read Requests of such a chain,
 * read in one input pass, are answered in one writev (once each Read
 * Response was a writev of its own: bench/datapath/README.md, Read
 * against Write).
 */
#include "simnet.h"

enum { CHAIN = 48 };

static void chain_in_one_writev(int crc)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | (unsigned)crc << 2 | 2u << 8 | 2u << 10);
    struct sim_net *net = sim_net_new(&cfg, 7, 64u << 10);
    REQUIRE(net);
    sim_net_start(net);
    for (int i = 0; i < CHAIN; i++)
        sim_recv1(net, SIM_B, 64);
    unsigned before = net->end[SIM_A].writev_calls;
    for (int i = 0; i < CHAIN; i++)
        sim_send1(net, SIM_A, 64, i + 1 < CHAIN ? NDK_OP_FLAG_DEFER : 0);
    CHECK_EQ(net->end[SIM_A].writev_calls - before, 1u);
    CHECK(sim_run(net));
    sim_check_posts_ok(net);
    sim_check_clean(net);
    sim_net_free(net);
}

static void test_defer_chain_one_writev(void)
{
    chain_in_one_writev(0);
}

static void test_defer_chain_one_writev_crc(void)
{
    chain_in_one_writev(1);
}

/* Payloads staged (up to 1 KiB) and referenced, a message of several
 * FPDUs (MULPDU 1000), the few's staging area filled by the second FPDU
 * and its 8 FPDUs passed by the sixth message. */
static void test_burst_moves_midway(void)
{
    static const size_t lens[] = {1000, 1000, 64, 3000, 0, 700, 1, 64, 2000, 1024, 300, 64, 5000, 64, 999, 64};
    enum { N = sizeof lens / sizeof lens[0] };
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 1u << 2 | 2u << 3 | 2u << 8 | 2u << 10);
    struct sim_net *net = sim_net_new(&cfg, 11, 256u << 10);
    REQUIRE(net);
    sim_net_start(net);
    for (int i = 0; i < N; i++)
        sim_recv1(net, SIM_B, lens[i]);
    unsigned before = net->end[SIM_A].writev_calls;
    for (int i = 0; i < N; i++)
        sim_send1(net, SIM_A, lens[i], i + 1 < N ? NDK_OP_FLAG_DEFER : 0);
    CHECK_EQ(net->end[SIM_A].writev_calls - before, 1u);
    /* Written whole: the burst block went back at once. */
    CHECK(net->side[SIM_A].impl->dp.tx_burst == NULL);
    CHECK(sim_run(net));
    sim_check_posts_ok(net);
    /* And a ping-pong's message after it fits the few again. */
    sim_recv1(net, SIM_B, 1024);
    sim_send1(net, SIM_A, 1024, 0);
    CHECK(net->side[SIM_A].impl->dp.tx_burst == NULL);
    CHECK(sim_run(net));
    sim_check_posts_ok(net);
    sim_check_clean(net);
    sim_net_free(net);
}

enum { READS = 8, READ_LEN = 512 };

static void test_read_chain_answered_in_one_writev(void)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 2u << 8 | 2u << 10);
    cfg.mode = SIM_WHOLE;
    cfg.mulpdu = 1024; /* a response per FPDU: 8 of the batch's 64 */
    cfg.ord[SIM_A] = cfg.ird[SIM_B] = READS;
    struct sim_net *net = sim_net_new(&cfg, 11, 64u << 10);
    REQUIRE(net);
    sim_net_start(net);
    struct sim_side *B = &net->side[SIM_B];
    unsigned a_before = net->end[SIM_A].writev_calls;
    for (int i = 0; i < READS; i++) {
        size_t off = sim_alloc(net, SIM_B, READ_LEN);
        sim_read1(net, SIM_A, READ_LEN, i + 1 < READS ? NDK_OP_FLAG_DEFER : 0, B->arena, off, B->tok_main,
                  sim_addr(B->arena, off));
    }
    CHECK_EQ(net->end[SIM_A].writev_calls - a_before, 1u); /* the chain of Read Requests */
    unsigned before = net->end[SIM_B].writev_calls;
    CHECK(sim_run(net));
    CHECK_EQ(net->end[SIM_B].writev_calls - before, 1u);
    sim_check_posts_ok(net);
    sim_check_clean(net);
    sim_net_free(net);
}

int main(void)
{
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    RUN(test_defer_chain_one_writev);
    RUN(test_defer_chain_one_writev_crc);
    RUN(test_burst_moves_midway);
    RUN(test_read_chain_answered_in_one_writev);
    sim_close_adapters();
    return tl_finish();
}
