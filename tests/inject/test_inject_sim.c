/*
 * Out of memory at every allocation of a data exchange, in the sim
 * (tests/testlib/simnet.h: two QPs over an in-memory transport, every byte moved
 * by the test thread, so a run is exactly repeatable). For each N the N-th
 * allocation libndk makes fails (inject.h) along:
 *   - the set-up: PDs, CQs, QPs, the registered arenas, and ndk_qp_start
 *     (the data path's read queues) on both ends;
 *   - an exchange: Sends both ways, a fast registration (new MR, its page
 *     list, NdkBuildLAM, NdkFastRegister) written and read remotely, a memory
 *     window bound and written through, both invalidated, then disconnect.
 * The call in which the allocation failed must say
 * STATUS_INSUFFICIENT_RESOURCES (ndk_qp_start: false) and every other call
 * do its job; whatever was posted completes exactly once, every transferred
 * byte is where it belongs and nothing else changed (simnet's checks, as
 * strict as for a clean exchange: a refused post simply never happened);
 * nothing is left allocated; and the same adapters then run the exchange
 * cleanly. Then the transmit engine's burst block refused (below).
 */
#include "simnet.h"

#include "inject.h"

#define ARENA (256u << 10)

/* Configuration: random chunks and partial writes, CRC on, MULPDU 256,
 * ORD/IRD 4 both ways (sim_cfg_from_seed). */
#define CFG_SEED (SIM_RANDOM | 1u << 2 | 0u << 3 | 2u << 8 | 2u << 10)

/* A post through a simnet helper: judged by the status it recorded. */
static bool posted(struct sim_net *net, int idx, const char *what)
{
    return inj_judged(net->req[idx].post_status, what, STATUS_SUCCESS, STATUS_SUCCESS) == STATUS_SUCCESS;
}

/* B's fast registration over a fresh buffer; false when any step was
 * refused (each judged). */
static bool fast_register(struct sim_net *net, struct sim_buf *fb, uint32_t *tok, uint64_t *base)
{
    struct sim_side *B = &net->side[SIM_B];
    NDK_MR *mr = NULL;
    if (CALL("NdkCreateMr", STATUS_SUCCESS, B->pd->Dispatch->NdkCreateMr(B->pd, TRUE, NULL, NULL, &mr)) !=
        STATUS_SUCCESS)
        return false;
    B->mrs[B->nmrs++] = mr; /* sim_net_free closes it */
    if (CALL("NdkInitializeFastRegisterMr", STATUS_SUCCESS,
             mr->Dispatch->NdkInitializeFastRegisterMr(mr, 4, TRUE, NULL, NULL)) != STATUS_SUCCESS)
        return false;
    MDL mdl = {.StartVa = fb->p, .ByteCount = (ULONG)fb->len};
    ULONG size = 0, fbo = 0;
    if (CALL("NdkBuildLAM", STATUS_BUFFER_TOO_SMALL,
             B->ad->Dispatch->NdkBuildLAM(B->ad, &mdl, fb->len, NULL, NULL, NULL, &size, &fbo)) !=
        STATUS_BUFFER_TOO_SMALL)
        return false;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = calloc(1, size);
    if (!lam)
        return false;
    if (CALL("NdkBuildLAM", STATUS_SUCCESS,
             B->ad->Dispatch->NdkBuildLAM(B->ad, &mdl, fb->len, NULL, NULL, lam, &size, &fbo)) != STATUS_SUCCESS) {
        free(lam);
        return false;
    }
    B->lams[B->nlams++] = lam; /* released by sim_net_free */
    inj_call("NdkFastRegister");
    int idx = sim_fastreg(net, SIM_B, mr, lam, fbo, fb, SIM_FR_VA, NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                                                         NDK_OP_FLAG_ALLOW_REMOTE_WRITE, tok, base);
    return posted(net, idx, "NdkFastRegister");
}

/* Everything after the set-up: posts, runs, checks; nothing else fails. */
static void exchange(struct sim_net *net)
{
    struct sim_side *B = &net->side[SIM_B];
    sim_recv1(net, SIM_B, 900);
    sim_recv1(net, SIM_A, 700);
    inj_call("NdkSend");
    posted(net, sim_send1(net, SIM_A, 900, 0), "NdkSend");
    inj_call("NdkSend");
    posted(net, sim_send1(net, SIM_B, 700, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT), "NdkSend");

    struct sim_buf *fb = sim_new_buf(net, 2 * sim_page() + 300, 100);
    uint32_t frtok = 0;
    uint64_t frbase = 0;
    if (fb && fast_register(net, fb, &frtok, &frbase)) {
        sim_run(net);
        inj_call("NdkWrite");
        posted(net, sim_write1(net, SIM_A, 600, 0, fb, 50, frtok, frbase + 50), "NdkWrite");
        inj_call("NdkRead");
        posted(net, sim_read1(net, SIM_A, 500, 0, fb, sim_page() + 10, frtok, frbase + sim_page() + 10),
               "NdkRead");
        sim_run(net);
        sim_recv1(net, SIM_B, 64);
        inj_call("NdkSendAndInvalidate");
        size_t inv = 64;
        posted(net, sim_send(net, SIM_A, &inv, 1, 0, true, frtok), "NdkSendAndInvalidate");
    }

    NDK_MW *mw = NULL;
    if (CALL("NdkCreateMw", STATUS_SUCCESS, B->pd->Dispatch->NdkCreateMw(B->pd, NULL, NULL, &mw)) == STATUS_SUCCESS) {
        B->mws[B->nmws++] = mw;
        size_t woff = sim_alloc(net, SIM_B, 1000);
        uint32_t wtok = 0;
        inj_call("NdkBind");
        int b = sim_bind(net, SIM_B, B->mr_main, mw, B->arena->p + woff, 1000,
                         NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE, &wtok);
        if (posted(net, b, "NdkBind")) {
            sim_run(net);
            inj_call("NdkWrite");
            posted(net, sim_write1(net, SIM_A, 400, 0, B->arena, woff + 20, wtok, sim_addr(B->arena, woff + 20)),
                   "NdkWrite");
            sim_run(net);
            inj_call("NdkInvalidate");
            posted(net, sim_inv(net, SIM_B, &mw->Header, 0), "NdkInvalidate");
        }
    }
    CHECK(sim_run(net));
    for (int i = 0; i < 2; i++)
        ndk_qp_disconnect(net->side[i].impl);
    CHECK(sim_run(net));
    sim_stop(net, SIM_A);
    sim_stop(net, SIM_B);
    sim_check_clean(net);
}

/* The set-up as the connector would do it, then the exchange. */
static void run(void)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, CFG_SEED);
    inj_call("the set-up's object creations (sim_net_new)");
    struct sim_net *net = sim_net_new(&cfg, 7, ARENA);
    if (!net) {
        /* Which create it was is test_inject_alloc's business; here only
         * that it was the injected failure, and (below) that nothing leaks. */
        CHECK(inj_hit_in_call());
        return;
    }
    bool started = true;
    for (int i = 0; i < 2 && started; i++) {
        inj_call("ndk_qp_start");
        started = ndk_qp_start(net->side[i].impl, &net->end[i].tr, cfg.crc, cfg.ird[i], cfg.ord[i], cfg.mulpdu,
                               false);
        if (!started && !inj_hit_in_call())
            inj_report("ndk_qp_start", STATUS_UNSUCCESSFUL, "failed with nothing failing");
        if (started && inj_hit_in_call())
            inj_report("ndk_qp_start", STATUS_SUCCESS, "its allocation failed, yet it started");
    }
    if (started)
        exchange(net);
    sim_net_free(net);
}

static void test_every_allocation(void)
{
    /* A clean run first: the memory table keeps the leaves and LAM arrays
     * it grows (src/mem.c), which must not count as a leak later. */
    run();
    REQUIRE(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
    long base = inj_live();
    struct inj_where w = {.count = 0};
    unsigned n;
    for (n = 1; n < 1000; n++) {
        int before = tl_failures;
        inj_arm(n);
        run();
        bool fired = inj_fired();
        const char *where = inj_fired_in();
        inj_disarm();
        if (fired)
            inj_where_note(&w, where);
        CHECK(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
        CHECK_EQ(inj_live(), base);
        run(); /* the same adapters, nothing failing */
        CHECK(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
        CHECK_EQ(inj_live(), base);
        if (tl_failures != before)
            fprintf(stderr, "  allocation %u failed in %s\n", n, where);
        if (!fired)
            break;
    }
    inj_where_print(&w, "sim set-up and exchange", n - 1);
    CHECK(n > 1);
}

/* A burst whose block cannot be had (struct ndk_tx_burst, src/qp_tx.c):
 * a post has no failure to report for it, so the batch goes out as the
 * connection's own arrays hold it and the next batch carries the rest;
 * every message arrives intact, the post succeeded, and once all is written
 * the block is given back. The last post rings the doorbell, and its first
 * allocation is the block's: `writevs` says how the batch went out. */
static void burst_without_memory(const size_t *lens, int n, unsigned writevs)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 1u << 2 | 2u << 3 | 2u << 8 | 2u << 10); /* MULPDU 1000 */
    long base = inj_live();
    struct sim_net *net = sim_net_new(&cfg, 13, ARENA);
    REQUIRE(net);
    sim_net_start(net);
    for (int i = 0; i < n; i++)
        sim_recv1(net, SIM_B, lens[i]);
    for (int i = 0; i + 1 < n; i++)
        sim_send1(net, SIM_A, lens[i], NDK_OP_FLAG_DEFER);
    unsigned before = net->end[SIM_A].writev_calls;
    inj_arm(1);
    inj_call("NdkSend");
    int last = sim_send1(net, SIM_A, lens[n - 1], 0);
    CHECK(inj_fired());
    inj_disarm();
    CHECK_EQ(net->req[last].post_status, STATUS_SUCCESS);
    CHECK_EQ(net->end[SIM_A].writev_calls - before, writevs);
    CHECK(net->side[SIM_A].impl->dp.tx_burst == NULL);
    CHECK(sim_run(net));
    sim_check_posts_ok(net);
    sim_check_clean(net);
    sim_net_free(net);
    CHECK(inj_settle(sim_adapters[0]) && inj_settle(sim_adapters[1]));
    CHECK_EQ(inj_live(), base);
}

static void test_burst_without_memory(void)
{
    /* Twenty small Sends: the block is wanted as the ninth FPDU comes; the
     * first batch ends at eight, the second takes the block. */
    size_t small[20];
    for (int i = 0; i < 20; i++)
        small[i] = 64;
    burst_without_memory(small, 20, 2);
    /* Three of 900 octets: the connection's staging area holds one; the
     * second is referenced where it lies, the third staged in the block
     * the next try took. One batch. */
    static const size_t mid[] = {900, 900, 900};
    burst_without_memory(mid, 3, 1);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!sim_open_adapters())
        return 1; /* lo always exists: not opening it is a failure, not a skip */
    RUN(test_every_allocation);
    RUN(test_burst_without_memory);
    sim_close_adapters();
    return tl_finish();
}
