/*
 * libFuzzer target for the QP receive engine: the input is the inbound TCP
 * byte stream of an established connection, fed in chunks to a real QP
 * (made through the public dispatch tables, started with ndk_qp_start on an
 * in-memory transport, as tests/sim does).
 *
 * Input: 4 header octets, then the stream.
 *   [0] bit 0 CRC on; bit 1 repair the CRC of every whole FPDU (so a
 *       CRC-on stream is not stuck at the CRC check); bit 2 gated responder;
 *       bit 3 we sent a Read RTR (its zero-length response is due first);
 *       bit 4 we received one (the peer's Read Requests start at MSN 2);
 *       bits 5-7 MULPDU {128, 201, 256, 512, 1000, 4096, 8972, 65535}
 *   [1] seed of the chunk sizes and of the socket's room for our writes
 *   [2] bits 0-3 IRD, bits 4-7 ORD, from {0, 1, 2, 4, 8, 16, 128, ...}
 *   [3] our own requests: bit 0 a Send, bit 1 a Read into the exposed
 *       region, bit 2 a zero-length Read, bit 3 a Write, bit 4 a fenced Send;
 *       bits 5-7 the receive engine's staging (src/rx_stage.h): the
 *       provider's default, none, or a (threshold, buffer size) pair
 *
 * STags are random per adapter, so the stream names ours with
 * placeholders, rewritten before feeding: FF FF FF 01 is the exposed
 * region's STag (a fast registration with remote read and write at TO
 * 0x100000, 2 pages; it is also the sink of our Reads, at 0x101000),
 * FF FF FF 02 the STag of the local-only MR holding our receive buffers.
 *
 * Must hold for every input (else abort or a sanitizer report): no crash,
 * no leak, no hang (bounded loops); every request we posted completes
 * exactly once after ndk_qp_stop, none twice, none unknown; nothing outside
 * the exposed region and the receive buffers changes (guard pages around
 * every buffer, canaries in the slack, the source of our sends unchanged).
 *
 * Build: needs ndk_core (not just ndk_wire) built with fuzzer coverage; see
 * the libndk fuzz/CMakeLists.txt. Seeds: fuzz/corpus/fpdu_stream, written by
 * this file compiled with -DFPDU_STREAM_SEEDGEN (see the end).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ensure.h"
#include "mem.h"
#include "objects.h"
#include "quiet_adapter.h"
#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/term.h"

#define FR_VA 0x100000ull         /* TO of the exposed region's first byte */
#define SINK_VA (FR_VA + 0x1000)  /* where our Reads land */
#define PH_FR 0xFFFFFF01u         /* placeholder: the exposed region's STag */
#define PH_LOCAL 0xFFFFFF02u      /* placeholder: the local-only MR's STag */
#define NREQ 16

static const size_t mulpdus[8] = {128, 201, 256, 512, 1000, 4096, 8972, 65535};
static const uint32_t depths[16] = {0, 1, 2, 4, 8, 16, 128, 3, 1, 2, 4, 8, 16, 32, 64, 128};

/* ---- guarded buffers ---- */

/* Made once and refilled for every input: unmapping costs a TLB shootdown
 * on every CPU the process ran on, which would dominate the run time. */
struct gbuf {
    uint8_t *p; /* page-aligned, len bytes, between two PROT_NONE pages */
    size_t len;
    uint8_t fill;
};

static bool gbuf_new(struct gbuf *b, size_t pages, uint8_t fill)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    void *m = mmap(NULL, (pages + 2) * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    uint8_t *map = m;
    mprotect(map, ps, PROT_NONE);
    mprotect(map + (pages + 1) * ps, ps, PROT_NONE);
    b->p = map + ps;
    b->len = pages * ps;
    b->fill = fill;
    return true;
}

static void gbuf_refill(struct gbuf *b)
{
    memset(b->p, b->fill, b->len);
}

/* ---- the transport: the input is what the peer sent ---- */

struct feed {
    struct ndk_transport tr;
    const uint8_t *in;
    size_t len, delivered, consumed;
    uint32_t rng;
    size_t room;      /* bytes our next writev may take */
    bool want_write;
    bool failed;
    bool stopped;
};

static uint32_t feed_rand(struct feed *f)
{
    /* xorshift32: the input's seed octet picks one of 255 schedules. */
    uint32_t x = f->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    f->rng = x;
    return x;
}

static ssize_t feed_readv(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct feed *f = (struct feed *)(void *)t;
    ENSURE(!f->stopped);
    if (f->consumed == f->delivered)
        return f->delivered == f->len ? 0 : -EAGAIN;
    size_t got = 0;
    for (int i = 0; i < n && f->consumed < f->delivered; i++) {
        size_t take = f->delivered - f->consumed;
        if (take > iov[i].iov_len)
            take = iov[i].iov_len;
        memcpy(iov[i].iov_base, f->in + f->consumed, take);
        f->consumed += take;
        got += take;
    }
    return (ssize_t)got;
}

static ssize_t feed_writev(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct feed *f = (struct feed *)(void *)t;
    ENSURE(!f->stopped);
    if (f->failed)
        return -EPIPE;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    if (f->room == 0)
        return -EAGAIN;
    size_t put = total < f->room ? total : f->room;
    f->room -= put;
    return (ssize_t)put; /* what we send goes nowhere */
}

static void feed_want_write(struct ndk_transport *t, bool on)
{
    ((struct feed *)(void *)t)->want_write = on;
}

static void feed_shutdown_write(struct ndk_transport *t)
{
    (void)t;
}

static void feed_failed(struct ndk_transport *t, bool peer_reset)
{
    (void)peer_reset;
    ((struct feed *)(void *)t)->failed = true;
}

static const struct ndk_transport_ops feed_ops = {
    .readv = feed_readv,
    .writev = feed_writev,
    .want_write = feed_want_write,
    .shutdown_write = feed_shutdown_write,
    .failed = feed_failed,
};

/* ---- the run ---- */

static NDK_ADAPTER *g_ad;

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st; /* never armed */
}

struct reqs {
    bool posted[NREQ];
    bool signalled[NREQ];
    unsigned cqes[NREQ];
};

static bool g_trace; /* FUZZ_FPDU_TRACE=1: say what each input did (triage) */

static void drain(NDK_CQ *cq, struct reqs *r)
{
    NDK_RESULT_EX res[32];
    ULONG n;
    while ((n = cq->Dispatch->NdkGetCqResultsEx(cq, res, 32)) > 0) {
        for (ULONG i = 0; i < n; i++) {
            uintptr_t id = (uintptr_t)res[i].RequestContext;
            ENSURE(id >= 1 && id <= NREQ && r->posted[id - 1]); /* no completion from nowhere */
            r->cqes[id - 1]++;
            if (g_trace)
                fprintf(stderr, "  request %u: status 0x%08x, %u bytes\n", (unsigned)id, (unsigned)res[i].Status,
                        (unsigned)res[i].BytesTransferred);
            ENSURE(r->cqes[id - 1] == 1); /* never twice */
            if (res[i].Status == STATUS_SUCCESS)
                ENSURE(r->signalled[id - 1]);
        }
    }
}

static void note(struct reqs *r, int id, NTSTATUS st, bool signalled)
{
    r->posted[id] = st == STATUS_SUCCESS;
    r->signalled[id] = signalled;
}

/* Our own requests, posted once the fast registration took effect (a
 * gated responder executes it only when the first FPDU arrives): the Read
 * lands in the registered region, and its sink SGE is checked at post. */
struct ours {
    NDK_QP *qp;
    uint8_t h3;
    NDK_SGE src, sink;
    bool done;
};

static void post_ours(struct ours *o, struct reqs *r)
{
    if (o->done || !r->cqes[0])
        return;
    o->done = true;
    NDK_QP *qp = o->qp;
    if (o->h3 & 1)
        note(r, 5, qp->Dispatch->NdkSend(qp, (PVOID)6, &o->src, 1, 0), true);
    if (o->h3 & 2)
        note(r, 6, qp->Dispatch->NdkRead(qp, (PVOID)7, &o->sink, 1, 0x2000, 0x1234, 0), true);
    if (o->h3 & 4)
        note(r, 7, qp->Dispatch->NdkRead(qp, (PVOID)8, &o->sink, 0, 0x3000, 0x1234, 0), true);
    if (o->h3 & 8)
        note(r, 8, qp->Dispatch->NdkWrite(qp, (PVOID)9, &o->src, 1, 0x4000, 0x1234, NDK_OP_FLAG_SILENT_SUCCESS),
             false);
    if (o->h3 & 16)
        note(r, 9, qp->Dispatch->NdkSend(qp, (PVOID)10, &o->src, 1, NDK_OP_FLAG_READ_FENCE), true);
}

/* The placeholders become the real STags; CRCs of whole FPDUs are repaired
 * on request. */
__attribute__((no_sanitize("coverage"), noinline)) /* a compare per octet would dominate the run */
static void rewrite(uint8_t *s, size_t len, uint32_t fr_tok, uint32_t local_tok, bool fix_crc)
{
    for (size_t i = 0; i + 4 <= len; i++) {
        uint32_t v = ddp_rd32(s + i);
        if (v == PH_FR)
            ddp_wr32(s + i, fr_tok);
        else if (v == PH_LOCAL)
            ddp_wr32(s + i, local_tok);
    }
    if (!fix_crc)
        return;
    size_t pos = 0;
    while (len - pos >= 2) {
        size_t ul = ddp_rd16(s + pos);
        size_t total = mpa_fpdu_len(ul);
        if (len - pos < total)
            break;
        size_t body = 2 + ul + mpa_pad_len(ul);
        mpa_crc_store(crc32c_update(crc32c_init(), s + pos, body), s + pos + body);
        pos += total;
    }
}

/* Receive buffers (local write only), the exposed region, our sources. */
static struct gbuf lbuf, fbuf, sbuf;

/* Made once per process and kept: the PD, the CQ (drained after every
 * input), the MRs of the receive buffers and of our sources, the exposed
 * region's LAM. Only the QP and the fast-registered MR, whose state an input
 * changes for good, are new per input: creating and closing the rest each
 * time cost more than the receive engine's work. */
static struct {
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_MR *lmr, *smr;
    uint32_t ltok, stok;
    union {
        NDK_LOGICAL_ADDRESS_MAPPING lam;
        uint8_t raw[sizeof(NDK_LOGICAL_ADDRESS_MAPPING) + 2 * sizeof(NDK_LOGICAL_ADDRESS)];
    } lamu;
    ULONG fbo;
} g;

static NDK_MR *mr_over(struct gbuf *b, ULONG flags, uint32_t *tok)
{
    NDK_MR *mr = NULL;
    ENSURE(g.pd->Dispatch->NdkCreateMr(g.pd, FALSE, NULL, NULL, &mr) == STATUS_SUCCESS);
    MDL mdl = {.StartVa = b->p, .ByteCount = (ULONG)b->len};
    ENSURE(mr->Dispatch->NdkRegisterMr(mr, &mdl, b->len, flags, NULL, NULL) == STATUS_SUCCESS);
    *tok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    return mr;
}

static bool open_adapter(void)
{
    if (g_ad)
        return true;
    g_trace = getenv("FUZZ_FPDU_TRACE") != NULL;
    ENSURE(gbuf_new(&lbuf, 1, 0xA5) && gbuf_new(&fbuf, 2, 0x3C) && gbuf_new(&sbuf, 1, 0x77));
    if (!quiet_adapter_open(&g_ad))
        return false;
    NDK_ADAPTER *ad = g_ad;
    ENSURE(ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &g.pd) == STATUS_SUCCESS);
    ENSURE(ad->Dispatch->NdkCreateCq(ad, 1024, cq_notify, NULL, NULL, NULL, NULL, &g.cq) == STATUS_SUCCESS);
    g.lmr = mr_over(&lbuf, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, &g.ltok);
    g.smr = mr_over(&sbuf, 0, &g.stok);
    ULONG lam_size = sizeof g.lamu;
    MDL fmdl = {.StartVa = fbuf.p, .ByteCount = (ULONG)fbuf.len};
    ENSURE(ad->Dispatch->NdkBuildLAM(ad, &fmdl, fbuf.len, NULL, NULL, &g.lamu.lam, &lam_size, &g.fbo) ==
           STATUS_SUCCESS);
    return true;
}

/* Only receive buffers and the exposed region may change: the gaps between
 * the receives' SGEs (see the NdkReceive calls) and our sources stay. */
static void check_untouched(void)
{
    ENSURE(all_octets(lbuf.p + 16, 64 - 16, 0xA5));
    ENSURE(all_octets(lbuf.p + 364, 1000 - 364, 0xA5));
    ENSURE(all_octets(lbuf.p + 1100, 1200 - 1100, 0xA5));
    ENSURE(all_octets(lbuf.p + 1300, lbuf.len - 1300, 0xA5));
    ENSURE(all_octets(sbuf.p, sbuf.len, 0x77));
}

/* The staging of header octet [3] bits 5-7: index 0 keeps the provider's
 * default; {0, 0} is none. */
static const size_t stage_thresholds[8] = {0, 0, 1, 16, 64, 200, 4096, 65535};
static const size_t stage_sizes[8] = {0, 0, 17, 1, 100, 1000, 4002, 65552};

static void set_stage(unsigned i)
{
    ndk_test_rx_stage_set(g_ad, i ? stage_thresholds[i] : NDK_RX_STAGE_THRESHOLD,
                          i ? stage_sizes[i] : NDK_RX_STAGE_SIZE);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4 || !open_adapter())
        return 0;
    const uint8_t h0 = data[0], h1 = data[1], h2 = data[2], h3 = data[3];
    const bool crc = h0 & 1, fix_crc = h0 & 2, gated = h0 & 4;
    const size_t mulpdu = mulpdus[h0 >> 5];
    const uint32_t ird = depths[h2 & 15], ord = depths[h2 >> 4];
    size_t slen = size - 4;
    uint8_t *stream = malloc(slen ? slen : 1);
    ENSURE(stream);
    memcpy(stream, data + 4, slen);

    NDK_CQ *cq = g.cq;
    NDK_QP *qp = NULL;
    NDK_MR *frmr = NULL;
    ENSURE(g.pd->Dispatch->NdkCreateQp(g.pd, cq, cq, NULL, 16, 16, 4, 4, 64, NULL, NULL, &qp) == STATUS_SUCCESS);
    struct ndk_qp_impl *impl = container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);

    gbuf_refill(&lbuf);
    gbuf_refill(&fbuf);
    gbuf_refill(&sbuf);
    const uint32_t ltok = g.ltok, stok = g.stok;
    ENSURE(g.pd->Dispatch->NdkCreateMr(g.pd, TRUE, NULL, NULL, &frmr) == STATUS_SUCCESS);
    ENSURE(frmr->Dispatch->NdkInitializeFastRegisterMr(frmr, 2, TRUE, NULL, NULL) == STATUS_SUCCESS);

    struct feed f = {.tr = {.ops = &feed_ops}, .in = stream, .len = slen, .rng = 0x9E3779B9u ^ (h1 * 0x01010101u)};
    f.room = SIZE_MAX;
    if (!f.rng)
        f.rng = 1;
    set_stage(h3 >> 5);
    ndk_qp_start(impl, &f.tr, crc, ird, ord, mulpdu, gated);
    if (h0 & 8)
        ndk_qp_read_rtr_sent(impl);
    if (h0 & 16)
        ndk_qp_read_rtr_received(impl);

    struct reqs r;
    memset(&r, 0, sizeof r);
    const ULONG rw = NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_LOCAL_WRITE;
    NTSTATUS st = qp->Dispatch->NdkFastRegister(qp, (PVOID)1, frmr, g.lamu.lam.AdapterPageCount,
                                                g.lamu.lam.AdapterPageArray, g.fbo, fbuf.len, (PVOID)FR_VA, rw);
    note(&r, 0, st, true);
    uint32_t frtok = frmr->Dispatch->NdkGetRemoteTokenFromMr(frmr);
    /* Receives: small, larger, empty, two SGEs; gaps between them stay. */
    NDK_SGE rs[5] = {
        {.VirtualAddress = lbuf.p + 0, .Length = 16, .MemoryRegionToken = ltok},
        {.VirtualAddress = lbuf.p + 64, .Length = 300, .MemoryRegionToken = ltok},
        {.VirtualAddress = lbuf.p + 400, .Length = 0, .MemoryRegionToken = ltok},
        {.VirtualAddress = lbuf.p + 1000, .Length = 100, .MemoryRegionToken = ltok},
        {.VirtualAddress = lbuf.p + 1200, .Length = 100, .MemoryRegionToken = ltok},
    };
    note(&r, 1, qp->Dispatch->NdkReceive(qp, (PVOID)2, &rs[0], 1), true);
    note(&r, 2, qp->Dispatch->NdkReceive(qp, (PVOID)3, &rs[1], 1), true);
    note(&r, 3, qp->Dispatch->NdkReceive(qp, (PVOID)4, &rs[2], 1), true);
    note(&r, 4, qp->Dispatch->NdkReceive(qp, (PVOID)5, &rs[3], 2), true);
    struct ours o = {.qp = qp, .h3 = h3};
    o.src = (NDK_SGE){.VirtualAddress = sbuf.p, .Length = 50, .MemoryRegionToken = stok};
    o.sink = (NDK_SGE){.VirtualAddress = (PVOID)SINK_VA, .Length = 300, .MemoryRegionToken = frtok};
    drain(cq, &r);
    post_ours(&o, &r);

    rewrite(stream, slen, frtok, ltok, fix_crc);

    /* Feed the stream in chunks; now and then the socket is full for our
     * writes and then drains. Each round delivers at least one octet or
     * ends, so the loop is bounded by the input. */
    unsigned idle = 0;
    while (!f.failed && idle < 4) {
        size_t before = f.consumed;
        bool fed = false;
        if (f.delivered < f.len) {
            uint32_t x = feed_rand(&f);
            size_t c = (x & 3) == 0 ? 1 + (x >> 8) % 4096 : 1 + (x >> 8) % 32;
            f.delivered += c < f.len - f.delivered ? c : f.len - f.delivered;
            fed = true;
        }
        uint32_t y = feed_rand(&f);
        f.room = (y & 7) == 0 ? 0 : SIZE_MAX;
        if (f.want_write && f.room)
            ndk_qp_on_writable(impl);
        bool alive = ndk_qp_on_readable(impl);
        drain(cq, &r);
        post_ours(&o, &r);
        if (!alive)
            break;
        idle = fed || f.consumed != before ? 0 : idle + 1;
    }
    if (g_trace) {
        fprintf(stderr, "fed %zu of %zu octets, state %d, failed %d, terminate queued %zu\n", f.consumed, f.len,
                (int)impl->dp.state, f.failed, impl->dp.term_len);
        if (impl->dp.term_len) {
            struct term_msg tm;
            term_decode(impl->dp.term_buf + 2, ddp_rd16(impl->dp.term_buf), &tm);
            fprintf(stderr, "  terminate (%u,%u,0x%02x): %s\n", tm.layer, tm.etype, tm.code,
                    term_describe(tm.layer, tm.etype, tm.code));
        }
    }
    /* The connector's teardown; afterwards nothing is outstanding. */
    ndk_qp_stop(impl);
    f.stopped = true;
    drain(cq, &r);
    for (int i = 0; i < NREQ; i++)
        if (r.posted[i] && r.signalled[i])
            ENSURE(r.cqes[i] == 1);

    check_untouched();

    ENSURE(qp->Dispatch->NdkCloseQp(&qp->Header, NULL, NULL) == STATUS_SUCCESS);
    ENSURE(frmr->Dispatch->NdkCloseMr(&frmr->Header, NULL, NULL) == STATUS_SUCCESS);
    quiet_free_closed(g_ad);
    free(stream);
    return 0;
}

#ifdef FPDU_STREAM_SEEDGEN
/*
 * Writes the seed corpus: valid FPDUs of every type, built with the wire
 * codecs, one stream per file, each after a 4-octet header.
 *   cc -DFPDU_STREAM_SEEDGEN -Isrc -Iinclude fuzz/fuzz_fpdu_stream.c <ndk_core, ndk_wire> -o seedgen
 *   ./seedgen fuzz/corpus/fpdu_stream
 */
struct out {
    uint8_t b[16384];
    size_t n;
    bool crc;
};

static void put_fpdu(struct out *o, const uint8_t *ulpdu, size_t len)
{
    o->n += mpa_fpdu_build(ulpdu, len, o->crc, o->b + o->n, sizeof o->b - o->n);
}

static void put_send(struct out *o, uint8_t op, uint32_t inv, uint32_t msn, size_t len, size_t seg)
{
    size_t mo = 0;
    do {
        uint8_t u[2048];
        size_t take = len - mo < seg ? len - mo : seg;
        size_t h = ddp_encode_untagged(u, sizeof u, op, mo + take == len, inv, DDP_QN_SEND, msn, (uint32_t)mo);
        for (size_t i = 0; i < take; i++)
            u[h + i] = (uint8_t)(mo + i);
        put_fpdu(o, u, h + take);
        mo += take;
    } while (mo < len);
}

static void put_tagged(struct out *o, uint8_t op, uint32_t stag, uint64_t to, size_t len, size_t seg)
{
    size_t off = 0;
    do {
        uint8_t u[2048];
        size_t take = len - off < seg ? len - off : seg;
        size_t h = ddp_encode_tagged(u, sizeof u, op, off + take == len, stag, to + off);
        memset(u + h, 0xC3, take);
        put_fpdu(o, u, h + take);
        off += take;
    } while (off < len);
}

static void put_rreq(struct out *o, uint32_t msn, uint32_t size, uint32_t src_stag, uint64_t src_to)
{
    uint8_t u[64];
    struct rdmap_rreq rr = {.sink_stag = 0x1234, .sink_to = 0x5000, .size = size, .src_stag = src_stag,
                            .src_to = src_to};
    put_fpdu(o, u, rdmap_encode_read_request(u, sizeof u, msn, &rr));
}

static void put_term(struct out *o)
{
    uint8_t u[80], off[18];
    struct ddp_term t;
    ddp_term_set(&t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_INVALID_STAG, false);
    size_t h = ddp_encode_tagged(off, sizeof off, RDMAP_OP_WRITE, true, 0x1234, 0);
    (void)h;
    put_fpdu(o, u, term_encode(u, sizeof u, &t, 30, off, 14, NULL));
}

static void save(const char *dir, const char *name, const struct out *o, uint8_t h0, uint8_t h3)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        perror(path);
        exit(1);
    }
    /* MULPDU 256 (index 2), chunk seed 7, IRD 4 / ORD 4. */
    /* With CRC, also ask for the repair: placeholders change the octets. */
    uint8_t hdr[4] = {(uint8_t)(h0 | 2u << 5 | (o->crc ? 3 : 0)), 7, 0x33, h3};
    fwrite(hdr, 1, 4, fp);
    fwrite(o->b, 1, o->n, fp);
    fclose(fp);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : ".";
    for (int crc = 0; crc < 2; crc++) {
        char name[64];
#define SEED(tag, h0, h3, body)                                                                \
    do {                                                                                       \
        struct out o = {.crc = crc};                                                           \
        body;                                                                                  \
        snprintf(name, sizeof name, "%s%s", tag, crc ? "_crc" : "");                          \
        save(dir, name, &o, (uint8_t)(h0), (uint8_t)(h3));                                    \
    } while (0)
        SEED("send", 0, 0, put_send(&o, RDMAP_OP_SEND, 0, 1, 10, 238));
        SEED("send_zero", 0, 0, put_send(&o, RDMAP_OP_SEND, 0, 1, 0, 238));
        SEED("send_multi", 0, 0, {
            put_send(&o, RDMAP_OP_SEND, 0, 1, 16, 238);  /* the first receive holds 16 */
            put_send(&o, RDMAP_OP_SEND, 0, 2, 300, 238); /* the second 300, in 2 segments */
        });
        SEED("send_se", 0, 0, put_send(&o, RDMAP_OP_SEND_SE, 0, 1, 12, 238));
        SEED("send_inv", 0, 0, put_send(&o, RDMAP_OP_SEND_INV, PH_FR, 1, 12, 238));
        SEED("send_se_inv", 0, 0, put_send(&o, RDMAP_OP_SEND_SE_INV, PH_FR, 1, 12, 238));
        SEED("write", 0, 0, put_tagged(&o, RDMAP_OP_WRITE, PH_FR, FR_VA + 16, 100, 242));
        SEED("write_multi", 0, 0, put_tagged(&o, RDMAP_OP_WRITE, PH_FR, FR_VA + 4000, 700, 242));
        SEED("write_zero", 0, 0, put_tagged(&o, RDMAP_OP_WRITE, 1, 0, 0, 242));
        SEED("write_local_only", 0, 0, put_tagged(&o, RDMAP_OP_WRITE, PH_LOCAL, 0, 8, 242));
        SEED("read_req", 0, 0, put_rreq(&o, 1, 500, PH_FR, FR_VA));
        SEED("read_req_zero", 0, 0, put_rreq(&o, 1, 0, 0, 0));
        SEED("read_req_rtr_msn2", 16, 0, put_rreq(&o, 2, 64, PH_FR, FR_VA + 8));
        SEED("read_resp", 0, 2, put_tagged(&o, RDMAP_OP_READ_RESP, PH_FR, SINK_VA, 300, 242));
        SEED("read_resp_zero", 0, 4, put_tagged(&o, RDMAP_OP_READ_RESP, 0, 0, 0, 242)); /* no sink */
        SEED("read_rtr_resp", 8, 0, put_tagged(&o, RDMAP_OP_READ_RESP, 0, 0, 0, 242));
        SEED("terminate", 0, 1, put_term(&o));
        SEED("gated", 4, 1, {
            put_send(&o, RDMAP_OP_SEND, 0, 1, 16, 238);
            put_tagged(&o, RDMAP_OP_WRITE, PH_FR, FR_VA + 8, 300, 242);
        });
        SEED("session", 0, 31, {
            put_send(&o, RDMAP_OP_SEND, 0, 1, 16, 238);
            put_tagged(&o, RDMAP_OP_WRITE, PH_FR, FR_VA, 600, 242);
            put_rreq(&o, 1, 1000, PH_FR, FR_VA + 100);
            put_tagged(&o, RDMAP_OP_READ_RESP, PH_FR, SINK_VA, 300, 242);
            put_tagged(&o, RDMAP_OP_READ_RESP, 0, 0, 0, 242); /* the zero-length Read: no sink */
            put_send(&o, RDMAP_OP_SEND_SE, 0, 2, 290, 238);
            put_send(&o, RDMAP_OP_SEND, 0, 3, 0, 238);
            put_rreq(&o, 2, 10, PH_FR, FR_VA);
            put_send(&o, RDMAP_OP_SEND_INV, PH_FR, 4, 150, 238); /* last: the region goes */
        });
#undef SEED
    }
    return 0;
}
#endif

