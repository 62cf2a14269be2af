/*
 * A connection lost at every byte offset of the scripted exchange.
 *
 * A reference run of the compact exchange (simnet.h) records how many bytes
 * each direction carries. Then, for each direction and each offset k (every
 * offset while the sweep fits its time budget, FPDU boundaries and header
 * bytes always, a stride elsewhere), the exchange is replayed with that
 * stream cut after k bytes:
 *   eof   - the reader gets end of stream (0) after k bytes;
 *   reset - the reader gets -ECONNRESET after k bytes, and the writer's
 *           writev fails with -ECONNRESET once it has written k bytes.
 * The script goes on posting (posts on a dead QP fail inline and are owed
 * nothing), both sides disconnect, and ndk_qp_stop runs on both QPs as the
 * connector would. Then:
 *   - every accepted request completed exactly once (a silent success: at
 *     most once, and only in error), in posting order, with STATUS_SUCCESS
 *     or STATUS_CANCELLED (a lost stream carries no Terminate, so nothing
 *     else may appear);
 *   - a receive or a Read that succeeded holds exactly the sent bytes;
 *   - every byte of every buffer is untouched or holds the value the
 *     exchange puts there; nothing outside a buffer changed (canaries), and
 *     a stray write beyond one hits a PROT_NONE guard page and crashes;
 *   - no leak (ASan/LSan).
 *
 * Chunk sizes and partial writes are random (odd offsets also stall the
 * socket now and then; CRC is on for half): the base seed is printed and
 * each run's seed is (base-derived bits | k << 2 | mode << 1 | direction);
 * NDK_SIM_SEED=<run seed> replays one run.
 *
 * The default run (CTest) uses one configuration chosen for small FPDUs and
 * several Reads in flight, then samples the long mode: one configuration
 * picked at random, cut at its FPDU boundaries and a stride of offsets.
 *
 * Long mode (tests/sim/long.sh runs it): --seeds N [--first S] [--full]
 * takes the seeds S .. S+N-1 (S random unless given); seed s picks the
 * configuration (sim_cfg_from_seed: MULPDU, IRD/ORD, gated responder, Read
 * RTR) and the randomness of its runs, and the exchange is cut at every
 * byte offset of both directions, both ways (eof, reset). --full runs the
 * full exchange script (payloads of many FPDUs) instead of the compact one.
 * NDK_SIM_SEED=<run seed> with the same --first S [--full] replays one run.
 *
 * NDK_SIM_TRANSPORT=shm (CTest's shm.sim.test_sim_faults) loses the
 * connection over the shared-memory model instead: before each request of
 * the compact script (run_shm_cut).
 */
#include "simnet.h"

/* Every offset up to this many per direction and mode; beyond it FPDU
 * boundaries, the header octets after them, and a stride. */
#define FULL_SWEEP 9000
#define STRIDE 7

enum cut_mode { CUT_EOF = 0, CUT_RESET = 1 };
static const char *const cut_name[2] = {"eof", "reset"};

static uint64_t g_base;
static struct sim_cfg g_cfg;
static bool g_full_script; /* the full exchange script, not the compact one */
/* Which offsets a sweep cuts at: all of them when the stream is short (else
 * FPDU boundaries, header octets and a stride); all of them whatever the
 * length (long mode); a sample (each FPDU's first, third and last octet and
 * every SAMPLE_STRIDE-th). */
static enum { PICK_AUTO, PICK_EVERY, PICK_SAMPLE } g_pick = PICK_AUTO;
#define SAMPLE_STRIDE 97
static size_t g_total[2];
static unsigned g_runs, g_bad_runs;
/* Outcomes over the sweep, to show the cuts reach every kind of state. */
static unsigned long g_ok, g_flushed, g_refused, g_silent, g_partial;

static uint64_t cut_seed(int d, int mode, size_t k)
{
    return (sim_mix(g_base, k * 4 + (uint64_t)(mode * 2 + d)) & ~(uint64_t)0x3FFFFF) | (uint64_t)k << 2 |
           (uint64_t)mode << 1 | (uint64_t)d;
}

/* Counts the run's outcomes per request (print_totals). */
static void tally(const struct sim_net *net)
{
    for (int i = 0; i < net->nreq; i++) {
        const struct sim_req *r = &net->req[i];
        if (!r->accepted)
            g_refused++;
        else if (!r->cqes)
            g_silent++;
        else if (r->res.Status == STATUS_SUCCESS)
            g_ok++;
        else
            g_flushed++;
        /* A flushed receive or Read whose sink got some of its bytes. */
        for (int j = 0; r->cqes && r->res.Status != STATUS_SUCCESS && j < r->ndst; j++) {
            const struct sim_span *sp = &r->dst[j];
            if (sp->len && memcmp(sp->buf->p + sp->off, sp->buf->init + sp->off, sp->len) != 0) {
                g_partial++;
                break;
            }
        }
    }
    g_runs++;
}

/* One replay with direction d cut after k bytes (k SIZE_MAX: no cut).
 * Returns the net for the caller to inspect (the reference run) or NULL. */
static struct sim_net *run_cut(uint64_t seed, int d, int mode, size_t k, bool keep)
{
    /* Delivery and CRC vary with the offset; the stream lengths do not
     * (the CRC field is always there, segmentation depends on MULPDU only). */
    struct sim_cfg cfg = g_cfg;
    cfg.mode = (k & 1) ? SIM_STALL : SIM_RANDOM;
    cfg.crc = (k >> 1) & 1;
    /* And so does the receive engine's staging (threshold, buffer size). */
    sim_cfg_stage(&cfg, (unsigned)(k >> 2), (unsigned)(k >> 5));
    /* The script's receives grow with MULPDU (up to 3 MULPDUs + 5). */
    struct sim_net *net = sim_net_new(&cfg, seed, (g_full_script ? 1u << 20 : 64u << 10) + 8 * cfg.mulpdu);
    if (!net) {
        CHECK(!"set-up");
        return NULL;
    }
    if (k != SIZE_MAX) {
        net->dir[d].cut = k;
        net->dir[d].cut_err = mode == CUT_RESET ? ECONNRESET : 0;
        if (mode == CUT_RESET)
            net->dir[d].wcut = k;
    }
    int failures_before = tl_failures;
    sim_net_start(net);
    sim_exchange_script(net, !g_full_script, false);
    CHECK(sim_run(net));
    for (int i = 0; i < 2; i++)
        if (!net->end[i].stopped)
            ndk_qp_disconnect(net->side[i].impl);
    CHECK(sim_run(net));
    sim_stop(net, 0);
    sim_stop(net, 1);
    sim_drain(net);
    bool clean = k == SIZE_MAX;
    CHECK_EQ(sim_check_requests(net, clean, false), 0);
    CHECK_EQ(sim_check_memory(net, clean), 0);
    /* A lost stream is never answered with a Terminate. */
    for (int i = 0; i < 2; i++) {
        size_t pos = 0;
        struct sim_fpdu f;
        while (sim_next_fpdu(net->dir[i].log, net->dir[i].len, &pos, &f))
            CHECK(!sim_is_terminate(&f));
    }
    tally(net);
    if (tl_failures != failures_before) {
        g_bad_runs++;
        sim_dump_terminates(net);
        fprintf(stderr, "replay: NDK_SIM_SEED=0x%016" PRIx64 " (cut %s %s after %zu bytes)\n", seed,
                d ? "B->A" : "A->B", cut_name[mode], k);
    }
    if (keep)
        return net;
    sim_net_free(net);
    return NULL;
}

/* Marks the offsets worth a run: all when the stream is short, else every
 * FPDU boundary and the header octets after it, plus a stride. */
static uint8_t *pick_offsets(const struct sim_dir *dir, size_t total)
{
    uint8_t *pick = calloc(total + 1, 1);
    if (!pick)
        return NULL;
    if (g_pick == PICK_EVERY || (g_pick == PICK_AUTO && total <= FULL_SWEEP)) {
        memset(pick, 1, total + 1);
        return pick;
    }
    size_t stride = g_pick == PICK_SAMPLE ? SAMPLE_STRIDE : STRIDE;
    for (size_t k = 0; k <= total; k += stride)
        pick[k] = 1;
    pick[total] = 1;
    size_t pos = 0;
    struct sim_fpdu f;
    while (sim_next_fpdu(dir->log, dir->len, &pos, &f)) {
        if (g_pick == PICK_SAMPLE) {
            pick[f.off] = pick[f.off + 2] = pick[f.off + f.total - 1] = 1;
            continue;
        }
        for (size_t k = f.off > 2 ? f.off - 2 : 0; k <= f.off + 22 && k <= total; k++)
            pick[k] = 1;
        for (size_t k = f.off + f.total - 6; k < f.off + f.total; k++)
            pick[k] = 1; /* inside the pad and CRC */
    }
    return pick;
}

static void test_reference(void)
{
    struct sim_net *net = run_cut(cut_seed(0, 0, 0), 0, CUT_EOF, SIZE_MAX, true);
    REQUIRE(net);
    for (int d = 0; d < 2; d++) {
        g_total[d] = net->dir[d].len;
        printf("[faults] %s carries %zu bytes\n", d ? "B->A" : "A->B", g_total[d]);
    }
    sim_net_free(net);
    REQUIRE(g_total[0] > 0 && g_total[1] > 0);
}

/* The offsets of the reference run's streams, recomputed per direction. */
static void sweep(int d, int mode)
{
    REQUIRE(g_total[d] > 0);
    struct sim_net *ref = run_cut(cut_seed(d, mode, 0), d, mode, SIZE_MAX, true);
    REQUIRE(ref);
    uint8_t *pick = pick_offsets(&ref->dir[d], g_total[d]);
    sim_net_free(ref);
    REQUIRE(pick);
    unsigned n = 0;
    for (size_t k = 0; k <= g_total[d]; k++)
        n += pick[k];
    printf("[faults] %s %s: %u cut offsets in 0..%zu, base 0x%016" PRIx64 "\n", d ? "B->A" : "A->B", cut_name[mode],
           n, g_total[d], g_base);
    for (size_t k = 0; k <= g_total[d] && g_bad_runs < 20; k++)
        if (pick[k])
            run_cut(cut_seed(d, mode, k), d, mode, k, false);
    free(pick);
}

static void test_cut_a_to_b_eof(void)
{
    sweep(0, CUT_EOF);
}

static void test_cut_b_to_a_eof(void)
{
    sweep(1, CUT_EOF);
}

static void test_cut_a_to_b_reset(void)
{
    sweep(0, CUT_RESET);
}

static void test_cut_b_to_a_reset(void)
{
    sweep(1, CUT_RESET);
}

/*
 * Over the shared-memory model (NDK_SIM_TRANSPORT=shm, simnet.h) there are
 * no bytes to cut: the connection is lost as each request of the compact
 * script is about to be posted, by A or B leaving (its QP stopped, as when
 * its process ends), plainly or abortively. The script goes on, the rest
 * disconnects, and the same checks hold but the wire's. Real time: how far
 * the transport got with earlier requests when the cut comes varies.
 * Returns the script's number of requests (req -1: no cut).
 */
static int run_shm_cut(int req, int side, bool abort)
{
    struct sim_net *net = sim_net_new(&g_cfg, sim_mix(g_base, (uint64_t)req), (64u << 10) + 8 * g_cfg.mulpdu);
    if (!net) {
        CHECK(!"set-up");
        return 0;
    }
    int failures_before = tl_failures;
    sim_shm_cut_at(net, req, side, abort);
    sim_net_start(net);
    sim_exchange_script(net, true, false);
    CHECK(sim_run(net));
    sim_shm_close(net);
    CHECK(sim_run(net));
    sim_drain(net);
    bool clean = req < 0;
    CHECK_EQ(sim_check_requests(net, clean, false), 0);
    CHECK_EQ(sim_check_memory(net, clean), 0);
    CHECK_EQ(net->dir[SIM_A].len + net->dir[SIM_B].len, 0); /* no octet went by the byte logs */
    tally(net);
    if (tl_failures != failures_before) {
        g_bad_runs++;
        fprintf(stderr, "failed: %s %s as request %d was posted (base 0x%016" PRIx64 ")\n", side ? "B" : "A",
                abort ? "aborted" : "left", req, g_base);
    }
    int n = net->nreq;
    sim_net_free(net);
    return n;
}

static void test_shm_cuts(void)
{
    int n = run_shm_cut(-1, SIM_A, false);
    REQUIRE(n > 0);
    printf("[faults] over shared memory: %d requests, each side leaving or aborting before each\n", n);
    for (int req = 0; req < n && g_bad_runs < 20; req++)
        for (int k = 0; k < 4; k++)
            run_shm_cut(req, k & 1, k >> 1);
}

/* One seed of the long mode: its configuration and base. */
static void use_seed(uint64_t s)
{
    sim_cfg_from_seed(&g_cfg, s << 3); /* bits 0-2 (delivery, CRC) vary per offset */
    g_base = sim_mix(s, 0xFA17);
}

static void sweep_all(void)
{
    RUN(test_reference);
    RUN(test_cut_a_to_b_eof);
    RUN(test_cut_b_to_a_eof);
    RUN(test_cut_a_to_b_reset);
    RUN(test_cut_b_to_a_reset);
}

static void print_totals(void)
{
    printf("[faults] %u runs, %u failed; requests: %lu succeeded, %lu flushed (%lu of them with part "
           "of their data placed), %lu silent, %lu refused inline\n",
           g_runs, g_bad_runs, g_ok, g_flushed, g_partial, g_silent, g_refused);
}

static uint64_t g_replay;

static void test_replay(void)
{
    int d = (int)(g_replay & 1), mode = (int)((g_replay >> 1) & 1);
    size_t k = (size_t)((g_replay >> 2) & 0xFFFFF);
    printf("[faults] replay: cut %s %s after %zu bytes\n", d ? "B->A" : "A->B", cut_name[mode], k);
    run_cut(g_replay, d, mode, k, false);
}

/* Long mode: every offset of seeds first .. first+n-1. */
static void long_mode(uint64_t first, uint64_t n)
{
    g_pick = PICK_EVERY;
    for (uint64_t i = 0; i < n && g_bad_runs < 20; i++) {
        use_seed(first + i);
        unsigned runs = g_runs, bad = g_bad_runs;
        uint64_t t0 = tl_now_ns();
        sim_cfg_print("[faults] long mode", first + i, &g_cfg);
        sweep_all();
        printf("[faults] seed %" PRIu64 ": %zu + %zu bytes, %u runs, %u failed, %.1f s\n", first + i, g_total[0],
               g_total[1], g_runs - runs, g_bad_runs - bad, (double)(tl_now_ns() - t0) / 1e9);
        if (g_bad_runs != bad)
            printf("[faults] replay a failed run: NDK_SIM_SEED=<its seed> %s --seeds 1 --first %" PRIu64 "%s\n",
                   "sim_test_sim_faults", first + i, g_full_script ? " --full" : "");
    }
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t seeds = 0, first = 0;
    bool have_first = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
            seeds = strtoull(argv[++i], NULL, 0);
        } else if (strcmp(argv[i], "--first") == 0 && i + 1 < argc) {
            first = strtoull(argv[++i], NULL, 0);
            have_first = true;
        } else if (strcmp(argv[i], "--full") == 0) {
            g_full_script = true;
        } else {
            fprintf(stderr, "usage: %s [--seeds N [--first S] [--full]]\n", argv[0]);
            return 2;
        }
    }
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    /* Small FPDUs and several reads in flight, so the cut lands in every
     * kind of state; run_cut varies delivery and CRC. */
    sim_cfg_from_seed(&g_cfg, SIM_RANDOM | 1u << 2 | 0u << 3 | 2u << 8 | 2u << 10);
    if (have_first)
        use_seed(first);
    if (sim_shm_wanted()) {
        g_base = sim_fresh_seed();
        RUN(test_shm_cuts);
        print_totals();
    } else if (sim_seed_from_env(&g_replay)) {
        RUN(test_replay);
    } else if (seeds) {
        if (!have_first)
            first = sim_fresh_seed() >> 16;
        long_mode(first, seeds);
        print_totals();
    } else {
        g_base = sim_fresh_seed();
        printf("[faults] base seed 0x%016" PRIx64 "\n", g_base);
        sweep_all();
        /* A sample of the long mode: a configuration of its own, with FPDUs
         * of at most 1000 octets so that the compact script stays short. */
        uint64_t s = g_base >> 16;
        for (use_seed(s); g_cfg.mulpdu > 1000; use_seed(++s))
            ;
        g_pick = PICK_SAMPLE;
        sim_cfg_print("[faults] sample of the long mode (--seeds 1 --first <seed> replays it whole)", s, &g_cfg);
        sweep_all();
        print_totals();
    }
    sim_close_adapters();
    return tl_finish();
}
