/*
 * The receive engine's budget and its staging buffer (src/rx_stage.h): one
 * call of ndk_qp_on_readable handles at most a budget of FPDUs, and then
 * relies on the socket's readiness to be called again. Octets it already
 * moved into its staging buffer are no longer in the socket, so nothing
 * would call it again for them: it must take every staged octet before it
 * returns. Here a 64 KiB RDMA Write with a MULPDU of 128 arrives whole in
 * one delivery, hundreds of small FPDUs at once, and then nothing more
 * comes: every byte of it must still be placed.
 */
#include "simnet.h"

static void test_staged_beyond_budget(void)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 2u << 8 | 2u << 10);
    cfg.mulpdu = 128;
    REQUIRE(cfg.stage_threshold == SIZE_MAX && cfg.stage_size == SIZE_MAX); /* the provider's own */
    struct sim_net *net = sim_net_new(&cfg, 1, 256u << 10);
    REQUIRE(net);
    sim_net_start(net);
    struct sim_side *B = &net->side[SIM_B];
    size_t len = 64u << 10;
    sim_write(net, SIM_A, &len, 1, 0, B->arena, 0, B->tok_main, sim_addr(B->arena, 0));
    CHECK(sim_run(net));
    sim_check_clean(net);
    sim_net_free(net);
}

int main(void)
{
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    RUN(test_staged_beyond_budget);
    sim_close_adapters();
    return tl_finish();
}
