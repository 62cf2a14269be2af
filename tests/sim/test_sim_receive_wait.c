/*
 * Receiver not ready, through the receive engine (qp_rx.c; docs/behaviour.md):
 * A's Sends reach B before B posted any receive. B's engine must stop
 * reading (no Terminate, nothing placed, A's stream held back) with the
 * first Send's header read, however the octets were cut (every delivery
 * mode, with and without CRC, messages of one and of several FPDUs), and
 * once the receives are posted, resume with that header and deliver every
 * message whole and in order, with nothing else in memory changed.
 *
 * ndkstat's counters see each FPDU once, the waiting one included.
 *
 * The receives are posted right after the first run settles, well within
 * the adapters' default ReceiveGraceMs (1 s); the grace running out is
 * conformance.test_receive_grace's business.
 */
#include "simnet.h"

#define NMSG 3

static void run_one(uint64_t seed)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, seed);
    struct sim_net *net = sim_net_new(&cfg, seed, 256u << 10);
    REQUIRE(net);
    for (int i = 0; i < 2; i++)
        net->end[i].tr.ops = &sim_transport_ops_pausable;
    sim_net_start(net);
    struct sim_side *B = &net->side[SIM_B];

    /* One short message, one of several FPDUs, one empty. */
    size_t lens[NMSG] = {1 + sim_below(&net->rng, 100), 3 * cfg.mulpdu + 17, 0};
    struct sim_span src[NMSG];
    int sidx[NMSG];
    for (int i = 0; i < NMSG; i++) {
        NDK_SGE sge;
        sim_sges(net, SIM_A, &lens[i], 1, &sge, &src[i]);
        sidx[i] = sim_send_sges(net, SIM_A, &sge, 1, &src[i], 1, 0, false, 0);
        CHECK_EQ(net->req[sidx[i]].post_status, STATUS_SUCCESS);
    }
    CHECK(sim_run(net));
    /* B waits: nothing failed, no Terminate, its input paused. */
    CHECK(B->impl->dp.rx_waiting);
    CHECK_EQ(B->impl->dp.term_len, 0);
    CHECK(!net->end[SIM_B].rx_done && !net->end[SIM_A].rx_done);
    CHECK_EQ(net->end[SIM_A].failed_calls + net->end[SIM_B].failed_calls, 0);

    /* The receives, each matched by hand to its Send (sim_send_sges found
     * none posted). Posting the first resumes B's input. */
    for (int i = 0; i < NMSG; i++) {
        int ridx = sim_recv1(net, SIM_B, lens[i] + 8);
        B->rq_head++; /* matched here, not by a later Send */
        struct sim_req *r = &net->req[ridx];
        r->peer = sidx[i];
        net->req[sidx[i]].peer = ridx;
        size_t len;
        uint8_t *payload = sim_gather(&src[i], 1, &len);
        r->len = len;
        sim_scatter_expect(r->dst, r->ndst, payload, len);
        free(payload);
    }
    CHECK(sim_run(net));
    sim_drain(net);
    CHECK(!B->impl->dp.rx_waiting);
    CHECK_EQ(B->impl->dp.term_len, 0);
    /* ndkstat's counters (stat.h): a Send that waited is counted once,
     * when its header is decoded again. */
    const struct ndk_dp_stats *ta = &net->side[SIM_A].impl->dp.st, *rb = &B->impl->dp.st;
    CHECK_EQ(rb->rx_fpdus[RDMAP_OP_SEND], ta->tx_fpdus[RDMAP_OP_SEND]);
    CHECK_EQ(rb->rx_bytes[RDMAP_OP_SEND], lens[0] + lens[1] + lens[2]);
    CHECK_EQ(ta->tx_bytes[RDMAP_OP_SEND], lens[0] + lens[1] + lens[2]);
    CHECK_EQ(sim_check_requests(net, true, false), 0);
    CHECK_EQ(sim_check_memory(net, true), 0);
    if (tl_failures)
        fprintf(stderr, "    seed 0x%016" PRIx64 " (NDK_SIM_SEED replays it)\n", seed);
    sim_net_free(net);
}

static void sends_wait_for_late_receives(void)
{
    uint64_t one;
    if (sim_seed_from_env(&one)) {
        run_one(one);
        return;
    }
    /* Every delivery mode and CRC setting, each with the MULPDU choices. */
    for (uint64_t s = 0; s < 64 && !tl_failures; s++)
        run_one(s | (sim_fresh_seed() & ~(uint64_t)0x3F));
}

int main(void)
{
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    RUN(sends_wait_for_late_receives);
    sim_close_adapters();
    return tl_finish();
}
