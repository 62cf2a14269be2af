/*
 * Local SGEs in a fast-registered MR whose pages are not adjacent in
 * memory, through the whole data path. B fast-registers a region made of
 * page 2, then page 0, of a three-page buffer (page 1 lies between them in
 * memory but not in the region), and uses SGEs that cross from one page to
 * the other, alone or after an ordinary SGE, as Send and Write sources,
 * receive buffers and Read sinks. A Read sink crossing the break is also
 * the first SGE of its Read, so the Read Request names the fast
 * registration as its sink.
 *
 * After each run every request completed once with STATUS_SUCCESS, every
 * byte is where the page list puts it (the receives and sinks hold the
 * data, the remote side holds what B gathered) and no other byte of any
 * buffer changed; guard pages fault on a stray access. Each run uses small
 * FPDUs, so the break falls inside FPDUs, at their edges and (one byte at a
 * time) inside every read, under whole, byte-at-a-time and random delivery.
 *
 * Random runs print their seeds; NDK_SIM_SEED=<base seed> replays them.
 *
 * NDK_SIM_TRANSPORT=shm (CTest's shm.sim.test_sim_frmr_local) runs the
 * same script over the shared-memory model (simnet.h), single-copy (the
 * target's process_vm_* follow the page list) and in copy mode.
 */
#include "simnet.h"

/* B's fast registration: region byte k is fb byte 2 * page + k for
 * k < page, fb byte k - page after. */
struct region {
    struct sim_buf *fb;
    uint32_t ltok;
    uint64_t base; /* TO of the region's first byte */
};

/* An SGE over region bytes [o, o + n); its spans in the buffer, in order,
 * go to sp. Returns how many spans. */
static int region_sge(const struct region *r, size_t o, size_t n, NDK_SGE *sge, struct sim_span *sp)
{
    size_t ps = sim_page();
    sge->VirtualAddress = (PVOID)(uintptr_t)(r->base + o);
    sge->Length = (ULONG)n;
    sge->MemoryRegionToken = r->ltok;
    int k = 0;
    while (n) {
        size_t at = o < ps ? 2 * ps + o : o - ps;
        size_t take = (o < ps ? ps : 2 * ps) - o;
        if (take > n)
            take = n;
        sp[k++] = (struct sim_span){r->fb, at, take};
        o += take;
        n -= take;
    }
    return k;
}

/* An arena SGE of len bytes of side s, then one over region [o, o + n):
 * the SGE list and its spans (returns the span count; *nsge: the SGEs). */
static int mixed_sges(struct sim_net *net, const struct region *r, size_t arena_len, size_t o, size_t n,
                      NDK_SGE *sge, int *nsge, struct sim_span *sp)
{
    int k = 0;
    *nsge = 0;
    if (arena_len) {
        sim_sges(net, SIM_B, &arena_len, 1, sge, sp);
        k = *nsge = 1;
    }
    k += region_sge(r, o, n, &sge[*nsge], &sp[k]);
    (*nsge)++;
    return k;
}

static void run(enum sim_mode mode, bool crc, size_t mulpdu, uint64_t seed)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, 0);
    cfg.mode = mode;
    cfg.crc = crc;
    cfg.mulpdu = mulpdu;
    cfg.ord[0] = cfg.ord[1] = cfg.ird[0] = cfg.ird[1] = 4;
    if (sim_shm_wanted())
        printf("[frmr-local] over shared memory%s, seed 0x%016" PRIx64 "\n",
               getenv("NDK_SHM_COPY") ? " (copy mode)" : "", seed);
    else
        printf("[frmr-local] mode %s crc %d mulpdu %zu seed 0x%016" PRIx64 "\n", sim_mode_name[mode], crc, mulpdu,
               seed);
    int failures_before = tl_failures;
    struct sim_net *net = sim_net_new(&cfg, seed, 64u << 10);
    REQUIRE(net);
    sim_net_start(net);
    struct sim_side *A = &net->side[SIM_A], *B = &net->side[SIM_B];
    size_t ps = sim_page();

    struct region r = {.fb = sim_new_buf(net, 3 * ps, 0), .base = SIM_FR_VA};
    NDK_MR *mr = sim_frmr(net, SIM_B, B->pd, 2);
    ULONG fbo = 1;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = r.fb && mr ? sim_lam(net, SIM_B, r.fb, &fbo) : NULL;
    REQUIRE(lam && fbo == 0 && lam->AdapterPageCount == 3);
    NDK_LOGICAL_ADDRESS pages[2] = {lam->AdapterPageArray[2], lam->AdapterPageArray[0]};
    uint32_t rtok;
    sim_fastreg_pages(net, SIM_B, mr, pages, 2, 0, 2 * ps, r.base,
                      NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK, &rtok);
    r.ltok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    CHECK(sim_run(net));

    NDK_SGE sge[2];
    struct sim_span sp[4];
    int nsge, nsp;
    /* Gather: Sends (one SGE; an arena SGE then the region) and a Write. */
    sim_recv1(net, SIM_A, 2000);
    sim_recv1(net, SIM_A, 2000);
    nsp = mixed_sges(net, &r, 0, ps - 700, 1500, sge, &nsge, sp);
    sim_send_sges(net, SIM_B, sge, nsge, sp, nsp, 0, false, 0);
    nsp = mixed_sges(net, &r, 37, ps - 1, 2, sge, &nsge, sp);
    sim_send_sges(net, SIM_B, sge, nsge, sp, nsp, 0, false, 0);
    size_t woff = sim_alloc(net, SIM_A, 3000);
    nsp = mixed_sges(net, &r, 0, ps - 100, 2900, sge, &nsge, sp);
    sim_write_sges(net, SIM_B, sge, nsge, sp, nsp, 0, A->arena, woff, A->tok_main, sim_addr(A->arena, woff));
    CHECK(sim_run(net));

    /* Scatter: receives of A's Sends, the same two layouts. */
    nsp = mixed_sges(net, &r, 0, ps - 300, 1200, sge, &nsge, sp);
    sim_recv_sges(net, SIM_B, sge, nsge, sp, nsp);
    sim_send1(net, SIM_A, 1200, 0);
    CHECK(sim_run(net));
    nsp = mixed_sges(net, &r, 50, ps - 2, 4, sge, &nsge, sp);
    sim_recv_sges(net, SIM_B, sge, nsge, sp, nsp);
    sim_send1(net, SIM_A, 54, 0);
    CHECK(sim_run(net));

    /* Read sinks: the region alone (the Read Request's sink STag is the
     * fast registration's), then after an arena SGE. */
    size_t roff = sim_alloc(net, SIM_A, 2600);
    nsp = mixed_sges(net, &r, 0, ps - 1300, 2600, sge, &nsge, sp);
    sim_read_sges(net, SIM_B, sge, nsge, sp, nsp, 0, A->arena, roff, A->tok_main, sim_addr(A->arena, roff));
    CHECK(sim_run(net));
    roff = sim_alloc(net, SIM_A, 700);
    nsp = mixed_sges(net, &r, 100, ps - 350, 600, sge, &nsge, sp);
    sim_read_sges(net, SIM_B, sge, nsge, sp, nsp, 0, A->arena, roff, A->tok_main, sim_addr(A->arena, roff));
    CHECK(sim_run(net));

    sim_check_posts_ok(net);
    sim_check_clean(net);
    /* Page 1 is in no request's view of the region. */
    CHECK(memcmp(r.fb->p + ps, r.fb->init + ps, ps) == 0);
    if (tl_failures != failures_before)
        fprintf(stderr, "[frmr-local] failed: mode %s crc %d mulpdu %zu seed 0x%016" PRIx64 "\n",
                sim_mode_name[mode], crc, mulpdu, seed);
    sim_net_free(net);
}

static uint64_t g_base;

static void test_whole(void)
{
    static const size_t mulpdus[] = {128, 256, 1000, 4002, 65535};
    for (size_t i = 0; i < sizeof mulpdus / sizeof mulpdus[0]; i++)
        run(SIM_WHOLE, true, mulpdus[i], sim_mix(g_base, i));
}

static void test_bytewise(void)
{
    run(SIM_BYTE, false, 256, sim_mix(g_base, 100));
    run(SIM_BYTE, true, 1000, sim_mix(g_base, 101));
}

static void test_shm(void)
{
    for (int copy = 0; copy < 2; copy++) {
        sim_shm_force_copy(copy);
        run(SIM_WHOLE, true, 256, sim_mix(g_base, 300 + (uint64_t)copy));
    }
    sim_shm_force_copy(false);
}

static void test_random_chunks(void)
{
    for (unsigned i = 0; i < 20; i++)
        run(i % 4 == 3 ? SIM_STALL : SIM_RANDOM, i & 1, i % 2 ? 201 : 4002, sim_mix(g_base, 200 + i));
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!sim_open_adapters()) {
        tl_skip_all("cannot open the loopback adapter");
        return tl_finish();
    }
    if (!sim_seed_from_env(&g_base))
        g_base = sim_fresh_seed();
    printf("[frmr-local] base seed 0x%016" PRIx64 " (NDK_SIM_SEED replays it)\n", g_base);
    if (sim_shm_wanted()) {
        RUN(test_shm);
        sim_close_adapters();
        return tl_finish();
    }
    RUN(test_whole);
    RUN(test_bytewise);
    RUN(test_random_chunks);
    sim_close_adapters();
    return tl_finish();
}
