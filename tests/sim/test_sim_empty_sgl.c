/*
 * Zero-length requests whose SGE list is empty and given as NULL
 * (nSge == 0, pSgl == NULL): NdkReceive, NdkSend, NdkSendAndInvalidate,
 * NdkWrite and NdkRead accept them (they check only "nSge && !pSgl"), and
 * each must then work like any zero-length request: one completion, a
 * zero-length message on the wire.
 *
 * Likewise an INLINE Send may carry an empty SGE whose address is NULL
 * ({NULL, 0}): nothing to copy, and nothing may be passed to memcpy.
 *
 * The provider must not hand the NULL list to memcpy even for 0 bytes:
 * that is undefined behaviour (C11 7.24.1p2), and the sanitizer build stops
 * the process on it. This file is apart from test_sim_exchange.c so that
 * such a stop does not hide the other results.
 *
 * NDK_SIM_TRANSPORT=shm (CTest's shm.sim.test_sim_empty_sgl) runs it, as
 * it is, over the shared-memory model (simnet.h).
 */
#include "simnet.h"

static void test_null_sgl_zero_length(void)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 1u << 2 | 2u << 8 | 2u << 10);
    struct sim_net *net = sim_net_new(&cfg, 1, 64u << 10);
    REQUIRE(net);
    sim_null_sgl = true;
    sim_net_start(net);
    struct sim_side *B = &net->side[SIM_B];
    sim_recv(net, SIM_B, NULL, 0);
    sim_recv(net, SIM_B, NULL, 0);
    sim_send(net, SIM_A, NULL, 0, 0, false, 0);
    sim_write(net, SIM_A, NULL, 0, 0, NULL, 0, B->tok_main, sim_addr(B->arena, 0));
    sim_read(net, SIM_A, NULL, 0, 0, NULL, 0, B->tok_main, sim_addr(B->arena, 0));
    sim_send(net, SIM_A, NULL, 0, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, false, 0);
    CHECK(sim_run(net));
    sim_drain(net);

    /* An INLINE Send of one empty SGE at address NULL, into a third
     * receive; its request is booked by hand (sim_send builds real SGEs). */
    sim_recv(net, SIM_B, NULL, 0);
    int idx = sim_new_req(net, SIM_A, SK_SEND, NDK_OP_FLAG_INLINE);
    struct sim_req *r = &net->req[idx];
    NDK_SGE empty = {.VirtualAddress = NULL, .Length = 0, .MemoryRegionToken = net->side[SIM_A].tok_main};
    NDK_QP *qp = net->side[SIM_A].qp;
    r->post_status = qp->Dispatch->NdkSend(qp, sim_ctx(idx), &empty, 1, NDK_OP_FLAG_INLINE);
    r->accepted = r->post_status == STATUS_SUCCESS;
    struct sim_side *Bs = &net->side[SIM_B];
    if (r->accepted && Bs->rq_head != Bs->rq_tail) {
        r->peer = Bs->rq[Bs->rq_head++ % SIM_RQ_FIFO];
        net->req[r->peer].peer = idx;
    }
    CHECK(sim_run(net));
    sim_check_posts_ok(net);
    sim_check_clean(net);
    sim_null_sgl = false;
    sim_net_free(net);
}

int main(void)
{
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    RUN(test_null_sgl_zero_length);
    sim_close_adapters();
    return tl_finish();
}
