/*
 * White-box tests of the STag table (src/mem.c, mr.c, mw.c): every mem_err
 * and its order (docs/rules.md R12-R16: invalid, not associated, access,
 * wrap, bounds), bounds at the first and last byte, key bumps and stale
 * tokens, fast-register page lists, windows bound to a QP, the privileged
 * token and LAMs, remote and local invalidation, the index allocator, the
 * MR-before-window close rule, and concurrent lookups.
 *
 * Objects are made through the public API on the "lo" adapter; the internal
 * structures are reached with container_of. QPs are never connected: the
 * mem_* functions do not care, the QP checks that.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "objects.h"
#include "testlib.h"

#include "mem_internal.h"

#define RW (MEM_REMOTE_WRITE)
#define RR (MEM_REMOTE_READ)

/* ------------------------------------------------------------------------ */
/* Fixture: one adapter, two PDs, three QPs (a1, a2 in PD A; b1 in PD B)    */
/* ------------------------------------------------------------------------ */

struct fx {
    NDK_ADAPTER *ad;
    struct mem_table *t;
    NDK_CQ *cq;
    NDK_PD *pda, *pdb;
    struct ndk_pd_impl *pa, *pb;
    NDK_QP *qa1, *qa2, *qb1;
    struct ndk_qp_impl *a1, *a2, *b1;
    uint64_t ps;
    NDK_LOGICAL_ADDRESS_MAPPING *lams[4]; /* fx_cover's, freed by fx_close */
    int nlams;
    void *pages; /* fx_pages', freed by fx_close */
};

static struct ndk_pd_impl *pd_impl(NDK_PD *pd)
{
    return container_of(ndk_obj_from_pub(pd, NdkObjectTypePd), struct ndk_pd_impl, obj);
}

static struct ndk_qp_impl *qp_impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

static NDK_QP *make_qp(struct fx *f, NDK_PD *pd)
{
    NDK_QP *qp = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateQp(pd, f->cq, f->cq, NULL, 4, 4, 2, 2, 0, NULL, NULL, &qp);
    CHECK_EQ(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS ? qp : NULL;
}

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static bool fx_setup(struct fx *f, ULONG flags)
{
    memset(f, 0, sizeof *f);
    f->ps = (uint64_t)sysconf(_SC_PAGESIZE);
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .Flags = flags};
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &f->ad);
    CHECK_EQ(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    struct ndk_adapter_impl *adi = ndk_adapter_from_pub(f->ad);
    f->t = adi->dev->mem;
    CHECK_EQ(f->ad->Dispatch->NdkCreateCq(f->ad, 64, cq_notify, NULL, NULL, NULL, NULL, &f->cq),
             STATUS_SUCCESS);
    if (!f->cq)
        return false;
    CHECK_EQ(f->ad->Dispatch->NdkCreatePd(f->ad, NULL, NULL, &f->pda), STATUS_SUCCESS);
    CHECK_EQ(f->ad->Dispatch->NdkCreatePd(f->ad, NULL, NULL, &f->pdb), STATUS_SUCCESS);
    if (!f->pda || !f->pdb)
        return false;
    f->pa = pd_impl(f->pda);
    f->pb = pd_impl(f->pdb);
    f->qa1 = make_qp(f, f->pda);
    f->qa2 = make_qp(f, f->pda);
    f->qb1 = make_qp(f, f->pdb);
    if (!f->qa1 || !f->qa2 || !f->qb1)
        return false;
    f->a1 = qp_impl(f->qa1);
    f->a2 = qp_impl(f->qa2);
    f->b1 = qp_impl(f->qb1);
    return true;
}

/* Objects left open (and LAMs) are torn down by the adapter close; the
 * pages after it. */
static void fx_close(struct fx *f)
{
    if (f->ad)
        ndk_close_adapter(f->ad);
    f->ad = NULL;
    for (int i = 0; i < f->nlams; i++)
        free(f->lams[i]);
    f->nlams = 0;
    free(f->pages);
    f->pages = NULL;
}

/* flags: NDK_OPEN_FLAG_* of the adapter (NDK_OPEN_FLAG_FRMR_NEW_TOKEN for
 * the cases that follow the key of a fast-register MR). On failure what
 * was opened is closed again. */
static bool fx_open_flags(struct fx *f, ULONG flags)
{
    if (fx_setup(f, flags))
        return true;
    fx_close(f);
    return false;
}

static bool fx_open(struct fx *f)
{
    return fx_open_flags(f, 0);
}

/* NdkBuildLAM of [buf, buf + len), asking for the size first. */
static NTSTATUS lam_build(struct fx *f, void *buf, size_t len, NDK_LOGICAL_ADDRESS_MAPPING **out,
                          ULONG *fbo)
{
    MDL m = {.Next = NULL, .StartVa = buf, .ByteOffset = 0, .ByteCount = (ULONG)len};
    ULONG size = 0;
    NTSTATUS st = f->ad->Dispatch->NdkBuildLAM(f->ad, &m, len, NULL, NULL, NULL, &size, fbo);
    if (st != STATUS_BUFFER_TOO_SMALL)
        return st;
    *out = malloc(size);
    if (!*out)
        return STATUS_INSUFFICIENT_RESOURCES;
    return f->ad->Dispatch->NdkBuildLAM(f->ad, &m, len, NULL, NULL, *out, &size, fbo);
}

/* A LAM over [buf, buf + len) that lives as long as the fixture: its pages
 * may then be fast-registered. */
static bool fx_cover(struct fx *f, void *buf, size_t len)
{
    NDK_LOGICAL_ADDRESS_MAPPING *lam = NULL;
    ULONG fbo;
    if (f->nlams == 4)
        return false;
    NTSTATUS st = lam_build(f, buf, len, &lam, &fbo);
    if (lam)
        f->lams[f->nlams++] = lam;
    CHECK_EQ(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

/* n zeroed pages, freed by fx_close (one buffer per fixture). */
static void *fx_pages(struct fx *f, size_t n)
{
    if (f->pages)
        return NULL;
    f->pages = aligned_alloc(f->ps, n * f->ps);
    if (f->pages)
        memset(f->pages, 0, n * f->ps);
    return f->pages;
}

/* fx_pages, covered by a LAM (fx_cover) so that they may be fast-registered. */
static void *fx_lam_pages(struct fx *f, size_t n)
{
    void *p = fx_pages(f, n);
    return p && fx_cover(f, p, n * f->ps) ? p : NULL;
}

static NDK_MR *mr_new(NDK_PD *pd, BOOLEAN fast)
{
    NDK_MR *mr = NULL;
    CHECK_EQ(pd->Dispatch->NdkCreateMr(pd, fast, NULL, NULL, &mr), STATUS_SUCCESS);
    return mr;
}

static NDK_MW *mw_new(NDK_PD *pd)
{
    NDK_MW *mw = NULL;
    CHECK_EQ(pd->Dispatch->NdkCreateMw(pd, NULL, NULL, &mw), STATUS_SUCCESS);
    return mw;
}

static NTSTATUS mr_reg(NDK_MR *mr, void *buf, size_t len, ULONG flags)
{
    MDL m = {.Next = NULL, .StartVa = buf, .ByteOffset = 0, .ByteCount = (ULONG)len};
    return mr->Dispatch->NdkRegisterMr(mr, &m, len, flags, NULL, NULL);
}

static UINT32 rtok(NDK_MR *mr)
{
    return mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
}

static UINT32 ltok(NDK_MR *mr)
{
    return mr->Dispatch->NdkGetLocalTokenFromMr(mr);
}

static NTSTATUS close_obj(void *obj, NDK_FN_CLOSE_COMPLETION cb, void *ctx)
{
    return ndk_obj_close((NDK_OBJECT_HEADER *)obj, cb, ctx);
}

static void close_cb(PVOID ctx)
{
    tl_event_signal(ctx);
}

/* mem_map_remote with room for 8 iovecs. */
static int g_niov;
static struct iovec g_iov[8];
static enum mem_err rmap(struct fx *f, const struct ndk_pd_impl *pd, const struct ndk_qp_impl *qp,
                         UINT32 stag, uint64_t to, uint64_t len, unsigned acc)
{
    g_niov = -1;
    memset(g_iov, 0, sizeof g_iov);
    return mem_map_remote(f->t, pd, qp, stag, to, len, acc, g_iov, 8, &g_niov);
}

static NTSTATUS lmap(struct fx *f, const struct ndk_pd_impl *pd, UINT32 tok, uint64_t va, ULONG len,
                     unsigned acc)
{
    NDK_SGE s = {.VirtualAddress = (PVOID)(uintptr_t)va, .Length = len, .MemoryRegionToken = tok};
    g_niov = -1;
    return mem_map_local(f->t, pd, &s, 1, acc, g_iov, 8, &g_niov);
}

/* ------------------------------------------------------------------------ */
/* Remote access: bounds, order of the checks                                */
/* ------------------------------------------------------------------------ */

static void remote_bounds(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    size_t len = 2 * f.ps;
    char *buf = fx_pages(&f, 2);
    REQUIRE(buf);
    NDK_MR *mr = mr_new(f.pda, FALSE);
    REQUIRE(mr);
    CHECK_EQ(mr_reg(mr, buf, len, NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ),
             STATUS_SUCCESS);
    UINT32 s = rtok(mr);
    CHECK(s != 0);
    CHECK_EQ(s, ltok(mr)); /* one STag for both (mem.h) */
    uint64_t base = (uint64_t)(uintptr_t)buf;

    /* The whole region, then its first and last byte. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base, len, RW), MEM_OK);
    CHECK_EQ(g_niov, 1);
    CHECK(g_iov[0].iov_base == buf && g_iov[0].iov_len == len);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base, 1, RR), MEM_OK);
    CHECK(g_iov[0].iov_base == buf && g_iov[0].iov_len == 1);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + len - 1, 1, RW), MEM_OK);
    CHECK(g_iov[0].iov_base == buf + len - 1);
    /* Exactly to the end is fine; one past is not, on either side. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + 10, len - 10, RW), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + 10, len - 9, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + len - 1, 2, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + len, 1, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base - 1, 1, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base - 1, 2, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base, len + 1, RW), MEM_BOUNDS);

    /* Zero length is never validated (RFC 5041: the STag of a zero-length
     * tagged segment is not checked). */
    CHECK_EQ(rmap(&f, f.pa, f.a1, 0xDEADBEEF, 0, 0, RW), MEM_OK);
    CHECK_EQ(g_niov, 0);
    /* Check only (no iovecs wanted), and an iov array that is too small. */
    CHECK_EQ(mem_map_remote(f.t, f.pa, f.a1, s, base, len, RR, NULL, 0, NULL), MEM_OK);
    CHECK_EQ(mem_map_remote(f.t, f.pa, f.a1, s, base + len, 1, RR, NULL, 0, NULL), MEM_BOUNDS);
    struct iovec one;
    int n = 7;
    CHECK_EQ(mem_map_remote(f.t, f.pa, f.a1, s, base, 1, RR, &one, 0, &n), MEM_BOUNDS);

    fx_close(&f);
}

static void remote_check_order(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    size_t len = f.ps;
    char *buf = fx_pages(&f, 1);
    REQUIRE(buf);
    uint64_t base = (uint64_t)(uintptr_t)buf;

    /* A token whose index was freed: closed MR. */
    NDK_MR *gone = mr_new(f.pda, FALSE);
    REQUIRE(gone);
    CHECK_EQ(mr_reg(gone, buf, len, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    UINT32 dead = rtok(gone);
    CHECK_EQ(close_obj(gone, NULL, NULL), STATUS_SUCCESS);

    /* Remote read only. */
    NDK_MR *mr = mr_new(f.pda, FALSE);
    REQUIRE(mr);
    CHECK_EQ(mr_reg(mr, buf, len, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    UINT32 s = rtok(mr);
    const uint64_t wrap_to = UINT64_MAX - 1;

    /* 1. invalid: unknown index, wrong key, privileged - before anything. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, dead, base, 1, RR), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s ^ 0x01, base, 1, RR), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s ^ 0x80, base, 1, RR), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pb, f.b1, s ^ 0x01, wrap_to, 4, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, f.pa->privileged_token, base, 1, RR), MEM_INVALID_STAG);
    /* 2. not associated: another PD, whatever else is wrong. */
    CHECK_EQ(rmap(&f, f.pb, f.b1, s, base, 1, RR), MEM_NOT_ASSOCIATED);
    CHECK_EQ(rmap(&f, f.pb, f.b1, s, wrap_to, 4, RW), MEM_NOT_ASSOCIATED);
    /* 3. access: write to a read-only region, before wrap and bounds. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base, 1, RW), MEM_ACCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, wrap_to, 4, RW), MEM_ACCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + len, 1, RW), MEM_ACCESS);
    /* 4. wrap before bounds. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, wrap_to, 4, RR), MEM_WRAP);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, UINT64_MAX, 2, RR), MEM_WRAP);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, 2, UINT64_MAX, RR), MEM_WRAP);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, 1, UINT64_MAX, RR), MEM_BOUNDS);
    /* Ending exactly at 2^64 does not wrap; it is just out of bounds. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, UINT64_MAX, 1, RR), MEM_BOUNDS);
    /* 5. bounds. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base + len, 1, RR), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, s, base, 1, RR), MEM_OK);

    /* A region without remote rights at all. */
    NDK_MR *loc = mr_new(f.pda, FALSE);
    REQUIRE(loc);
    CHECK_EQ(mr_reg(loc, buf, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(loc), base, 1, RR), MEM_ACCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(loc), base, 1, RW), MEM_ACCESS);
    /* Remote write alone (0x4) grants write and implies local write. */
    NDK_MR *w = mr_new(f.pda, FALSE);
    REQUIRE(w);
    CHECK_EQ(mr_reg(w, buf, len, 0x4), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(w), base, 1, RW), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(w), base, 1, RR), MEM_ACCESS);
    CHECK_EQ(lmap(&f, f.pa, ltok(w), base, 1, MEM_LOCAL_WRITE), STATUS_SUCCESS);

    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* Keys                                                                     */
/* ------------------------------------------------------------------------ */

static void key_bump_and_deregister(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *buf = fx_pages(&f, 1);
    REQUIRE(buf);
    uint64_t base = (uint64_t)(uintptr_t)buf;
    NDK_MR *mr = mr_new(f.pda, FALSE);
    REQUIRE(mr);
    CHECK_EQ(rtok(mr), 0); /* not registered yet */
    CHECK_EQ(ltok(mr), 0);
    ULONG fl = NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    CHECK_EQ(mr_reg(mr, buf, f.ps, fl), STATUS_SUCCESS);
    UINT32 t1 = rtok(mr);
    CHECK_EQ(rmap(&f, f.pa, f.a1, t1, base, 8, RW), MEM_OK);

    /* Deregistered: the token fails at once, remotely and locally. */
    CHECK_EQ(mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(rtok(mr), 0);
    CHECK_EQ(rmap(&f, f.pa, f.a1, t1, base, 8, RW), MEM_INVALID_STAG);
    CHECK_EQ(lmap(&f, f.pa, t1, base, 8, 0), STATUS_ACCESS_VIOLATION);

    /* Registered again: same index, another key; the old token stays dead. */
    CHECK_EQ(mr_reg(mr, buf, f.ps, fl), STATUS_SUCCESS);
    UINT32 t2 = rtok(mr);
    CHECK(t2 != t1);
    CHECK_EQ(t2 >> 8, t1 >> 8);
    CHECK_EQ(rmap(&f, f.pa, f.a1, t1, base, 8, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, t2, base, 8, RW), MEM_OK);
    CHECK_EQ(lmap(&f, f.pa, t1, base, 8, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, t2, base, 8, 0), STATUS_SUCCESS);

    /* 255 re-registrations: every earlier token of the cycle fails. */
    UINT32 seen[256];
    seen[0] = t2;
    for (int i = 1; i < 256; i++) {
        CHECK_EQ(mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL), STATUS_SUCCESS);
        CHECK_EQ(mr_reg(mr, buf, f.ps, fl), STATUS_SUCCESS);
        seen[i] = rtok(mr);
        for (int k = 0; k < i; k++)
            if (seen[k] == seen[i]) {
                CHECK(!"a token came back within 255 registrations");
                break;
            }
    }
    for (int k = 0; k < 255; k++)
        CHECK_EQ(rmap(&f, f.pa, f.a1, seen[k], base, 8, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, seen[255], base, 8, RW), MEM_OK);

    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* Fast registration                                                        */
/* ------------------------------------------------------------------------ */

static NTSTATUS fr_check(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG n, const NDK_LOGICAL_ADDRESS *pg,
                         ULONG fbo, SIZE_T len, uint64_t va, ULONG flags)
{
    return mem_check_fast_register(qp, mr, n, pg, fbo, len, (PVOID)(uintptr_t)va, flags);
}

static NTSTATUS fr_exec(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG n, const NDK_LOGICAL_ADDRESS *pg,
                        ULONG fbo, SIZE_T len, uint64_t va, ULONG flags)
{
    return mem_exec_fast_register(qp, mr, n, pg, fbo, len, (PVOID)(uintptr_t)va, flags);
}

static void frmr_page_split(void)
{
    struct fx f;
    REQUIRE(fx_open_flags(&f, NDK_OPEN_FLAG_FRMR_NEW_TOKEN));
    char *b = fx_lam_pages(&f, 6);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_MR *mr = mr_new(f.pda, TRUE);
    REQUIRE(mr);
    CHECK_EQ(rtok(mr), 0); /* not initialized */
    CHECK_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 4, TRUE, NULL, NULL), STATUS_SUCCESS);
    UINT32 tok0 = rtok(mr);
    CHECK(tok0 != 0);
    CHECK_EQ(tok0, ltok(mr));

    /* Page 0 -> b+4p; pages 1, 2 -> b+1p, b+2p (contiguous with each other,
     * not with page 0). The region starts 100 bytes into page 0 and ends 50
     * bytes before the end of page 2. Its TO is unrelated to the host. */
    NDK_LOGICAL_ADDRESS pg[3];
    pg[0].QuadPart = (LONGLONG)(B + 4 * ps);
    pg[1].QuadPart = (LONGLONG)(B + 1 * ps);
    pg[2].QuadPart = (LONGLONG)(B + 2 * ps);
    const ULONG fbo = 100;
    const uint64_t va = 0x100000000ull + fbo;
    const uint64_t len = 3 * ps - fbo - 50;
    ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;

    CHECK_EQ(fr_check(f.a1, mr, 3, pg, fbo, len, va, fl), STATUS_SUCCESS);
    /* The new token is current as soon as the post returned
     * (NdkGetRemoteTokenFromMr)... */
    UINT32 tok1 = rtok(mr);
    CHECK(tok1 != tok0);
    CHECK_EQ(tok1 >> 8, tok0 >> 8);
    /* ... but maps nothing until the request executes. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(fr_exec(f.a1, mr, 3, pg, fbo, len, va, fl), STATUS_SUCCESS);

    /* The whole region: the rest of page 0, then pages 1-2 merged. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va, len, RW), MEM_OK);
    CHECK_EQ(g_niov, 2);
    CHECK(g_iov[0].iov_base == b + 4 * ps + fbo && g_iov[0].iov_len == ps - fbo);
    CHECK(g_iov[1].iov_base == b + ps && g_iov[1].iov_len == 2 * ps - 50);
    /* Inside page 0. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va + 10, 20, RR), MEM_OK);
    CHECK_EQ(g_niov, 1);
    CHECK(g_iov[0].iov_base == b + 4 * ps + fbo + 10 && g_iov[0].iov_len == 20);
    /* Across the page 0 / page 1 boundary: two pieces. */
    uint64_t edge = va + (ps - fbo); /* TO of page 1's first byte */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, edge - 3, 6, RW), MEM_OK);
    CHECK_EQ(g_niov, 2);
    CHECK(g_iov[0].iov_base == b + 5 * ps - 3 && g_iov[0].iov_len == 3);
    CHECK(g_iov[1].iov_base == b + ps && g_iov[1].iov_len == 3);
    /* Too few iovecs for it. */
    struct iovec one;
    int n1 = -1;
    CHECK_EQ(mem_map_remote(f.t, f.pa, f.a1, tok1, edge - 3, 6, RW, &one, 1, &n1), MEM_BOUNDS);
    /* Data lands where the page list says. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, edge - 3, 6, RW), MEM_OK);
    for (int i = 0; i < g_niov; i++)
        memset(g_iov[i].iov_base, 0x5A, g_iov[i].iov_len);
    CHECK(b[5 * ps - 1] == 0x5A && b[ps + 2] == 0x5A && b[ps + 3] == 0 && b[5 * ps - 4] == 0);
    /* Last byte, and one past it. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va + len - 1, 1, RW), MEM_OK);
    CHECK(g_iov[0].iov_base == b + 3 * ps - 51);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va + len - 1, 2, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va - 1, 1, RW), MEM_BOUNDS);

    /* Local SGEs: the local token from initialization still names the MR
     * (NdkGetLocalTokenFromMr); an SGE over pages that are not adjacent in
     * memory maps to one iovec per run, in order. */
    CHECK_EQ(lmap(&f, f.pa, tok0, va + 10, 20, MEM_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + 4 * ps + fbo + 10);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), edge + 5, (ULONG)ps, 0), STATUS_SUCCESS);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + ps + 5 && g_iov[0].iov_len == ps);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), edge - 3, 6, 0), STATUS_SUCCESS);
    CHECK_EQ(g_niov, 2);
    CHECK(g_iov[0].iov_base == b + 5 * ps - 3 && g_iov[0].iov_len == 3);
    CHECK(g_iov[1].iov_base == b + ps && g_iov[1].iov_len == 3);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), va, (ULONG)len, MEM_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(g_niov, 2);
    CHECK(g_iov[1].iov_base == b + ps && g_iov[1].iov_len == 2 * ps - 50);
    /* ... as long as the caller has room for them. */
    NDK_SGE across = {
        .VirtualAddress = (PVOID)(uintptr_t)(edge - 3), .Length = 6, .MemoryRegionToken = ltok(mr)};
    CHECK_EQ(mem_map_local(f.t, f.pa, &across, 1, 0, g_iov, 1, &n1), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_EQ(mem_map_local(f.t, f.pa, &across, 1, 0, NULL, 2, &n1), STATUS_SUCCESS);
    CHECK_EQ(n1, 2);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), va + len - 1, 2, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pb, ltok(mr), va, 2, 0), STATUS_ACCESS_VIOLATION);

    /* Re-registration: the old mapping holds until the new one executes
     * (queue order), then only the new token works. */
    NDK_LOGICAL_ADDRESS pg2[1];
    pg2[0].QuadPart = (LONGLONG)B;
    CHECK_EQ(fr_check(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    UINT32 tok2 = rtok(mr);
    CHECK(tok2 != tok1);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va, 1, RW), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok2, 2 * ps, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(fr_exec(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok1, va, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok2, 2 * ps, ps, RW), MEM_OK);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b);

    /* Local invalidation (NdkInvalidate): once; a second one fails. */
    CHECK_EQ(mem_check_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok2, 2 * ps, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(lmap(&f, f.pa, tok2, 2 * ps, 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_INVALID_DEVICE_STATE);

    /* Posted in one burst: Invalidate then FastRegister. The invalidate
     * must still find the old registration valid when it executes. */
    CHECK_EQ(fr_check(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(mem_check_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(fr_check(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 1, pg2, 0, ps, 2 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(mr), 2 * ps, 1, RW), MEM_OK);

    fx_close(&f);
}

/* By default a fast-register MR keeps its token (mem.c): the one read
 * after NdkInitializeFastRegisterMr names every later registration, each
 * taking effect in queue order; while the MR is invalidated the token maps
 * nothing, remotely or locally, until the next fast registration. */
static void frmr_token_kept(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_lam_pages(&f, 4);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_LOGICAL_ADDRESS p0[1], p2[1];
    p0[0].QuadPart = (LONGLONG)B;
    p2[0].QuadPart = (LONGLONG)(B + 2 * ps);
    ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
    NDK_MR *mr = mr_new(f.pda, TRUE);
    REQUIRE(mr);
    CHECK_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 2, TRUE, NULL, NULL), STATUS_SUCCESS);
    UINT32 tok = rtok(mr);
    CHECK(tok != 0);

    CHECK_EQ(fr_check(f.a1, mr, 1, p0, 0, ps, 0x10000, fl), STATUS_SUCCESS);
    CHECK_EQ(rtok(mr), tok);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x10000, 1, RW), MEM_INVALID_STAG); /* not run yet */
    CHECK_EQ(fr_exec(f.a1, mr, 1, p0, 0, ps, 0x10000, fl), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x10000, ps, RW), MEM_OK);
    CHECK(g_iov[0].iov_base == b);

    /* A second registration: the first holds until it runs. A local SGE
     * posted meanwhile is judged when its request runs (MEM_AT_POST). */
    CHECK_EQ(fr_check(f.a1, mr, 1, p2, 0, ps, 0x20000, fl), STATUS_SUCCESS);
    CHECK_EQ(rtok(mr), tok);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x10000, 1, RW), MEM_OK);
    CHECK(g_iov[0].iov_base == b);
    CHECK_EQ(lmap(&f, f.pa, tok, 0x20000, 8, MEM_LOCAL_WRITE | MEM_AT_POST), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 1, p2, 0, ps, 0x20000, fl), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x10000, 1, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x20000, 1, RW), MEM_OK);
    CHECK(g_iov[0].iov_base == b + 2 * ps);

    /* Invalidated: the same token maps nothing, remotely or locally, and
     * a local SGE is refused at post time too (nothing is pending). */
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x20000, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(lmap(&f, f.pa, tok, 0x20000, 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, tok, 0x20000, 1, MEM_AT_POST), STATUS_ACCESS_VIOLATION);
    /* ... until the next fast registration. */
    CHECK_EQ(fr_check(f.a1, mr, 1, p0, 0, ps, 0x30000, fl), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 1, p0, 0, ps, 0x30000, fl), STATUS_SUCCESS);
    CHECK_EQ(rtok(mr), tok);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 0x30000, 1, RW), MEM_OK);
    fx_close(&f);
}

static void frmr_check_rules(void)
{
    struct fx f;
    REQUIRE(fx_open_flags(&f, NDK_OPEN_FLAG_FRMR_NEW_TOKEN));
    char *b = fx_lam_pages(&f, 4);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_LOGICAL_ADDRESS pg[4];
    for (int i = 0; i < 4; i++)
        pg[i].QuadPart = (LONGLONG)(B + (uint64_t)i * ps);
    const ULONG RWF = NDK_OP_FLAG_ALLOW_REMOTE_WRITE;

    NDK_MR *fr = mr_new(f.pda, TRUE);
    NDK_MR *normal = mr_new(f.pda, FALSE);
    NDK_MR *local = mr_new(f.pda, TRUE);
    REQUIRE(fr && normal && local);
    /* Not initialized yet. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 0, ps, B, 0), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 3, TRUE, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(local->Dispatch->NdkInitializeFastRegisterMr(local, 3, FALSE, NULL, NULL),
             STATUS_SUCCESS);
    CHECK_EQ(mr_reg(normal, b, ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);

    UINT32 before = rtok(fr);
    /* A normal MR is not fast-registered; a window is not an MR. */
    CHECK_EQ(fr_check(f.a1, normal, 1, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    NDK_MW *mw = mw_new(f.pda);
    CHECK_EQ(fr_check(f.a1, (NDK_MR *)mw, 1, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    /* Page count: 1..initialized. */
    CHECK_EQ(fr_check(f.a1, fr, 0, pg, 0, 0, B, 0), STATUS_INVALID_PARAMETER);
    CHECK_EQ(fr_check(f.a1, fr, 4, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    CHECK_EQ(fr_check(f.a1, fr, 1, NULL, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    /* FBO inside the first page; base VA = FBO + n * PAGE_SIZE. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, (ULONG)ps, 0, B + ps, 0), STATUS_INVALID_PARAMETER);
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 8, 8, B + 16, 0), STATUS_INVALID_PARAMETER);
    /* Base 0 only with FBO 0. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 8, 8, 0, 0), STATUS_INVALID_PARAMETER);
    /* Length <= npages * PAGE_SIZE - FBO. */
    CHECK_EQ(fr_check(f.a1, fr, 2, pg, 8, 2 * ps - 7, 3 * ps + 8, 0), STATUS_INVALID_PARAMETER);
    /* Pages must be page-aligned, non-zero. */
    NDK_LOGICAL_ADDRESS bad[2] = {pg[0], pg[1]};
    bad[1].QuadPart += 8;
    CHECK_EQ(fr_check(f.a1, fr, 2, bad, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    bad[1].QuadPart = 0;
    CHECK_EQ(fr_check(f.a1, fr, 2, bad, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    /* Unknown flag bits. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 0, ps, B, 0x400), STATUS_INVALID_PARAMETER);
    /* A QP of another PD. */
    CHECK_EQ(fr_check(f.b1, fr, 1, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    /* Remote rights need RemoteAccess at initialization. */
    CHECK_EQ(fr_check(f.a1, local, 1, pg, 0, ps, B, NDK_OP_FLAG_ALLOW_REMOTE_READ),
             STATUS_ACCESS_VIOLATION);
    CHECK_EQ(fr_check(f.a1, local, 1, pg, 0, ps, B, RWF), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(fr_check(f.a1, local, 1, pg, 0, ps, B,
                      NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK),
             STATUS_SUCCESS);
    /* None of the refused posts changed the token. */
    CHECK_EQ(rtok(fr), before);

    /* Accepted: all pages, base 0 with FBO 0, length exactly to the end. */
    CHECK_EQ(fr_check(f.a1, fr, 3, pg, 0, 3 * ps, 0, RWF), STATUS_SUCCESS);
    CHECK(rtok(fr) != before);
    CHECK_EQ(fr_check(f.a1, fr, 2, pg, 8, 2 * ps - 8, 5 * ps + 8, RWF), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, fr, 2, pg, 8, 2 * ps - 8, 5 * ps + 8, RWF), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(fr), 5 * ps + 8, 2 * ps - 8, RW), MEM_OK);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + 8);
    /* Zero-based region at TO 0. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 0, ps, 0, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, fr, 1, pg, 0, ps, 0, NDK_OP_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(fr), 0, 1, RR), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(fr), 0, 1, RW), MEM_ACCESS);
    /* Local write only when asked for. */
    CHECK_EQ(lmap(&f, f.pa, ltok(fr), 0, 1, MEM_LOCAL_WRITE), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, ltok(fr), 0, 1, 0), STATUS_SUCCESS);

    /* A re-initialization to fewer pages limits later registrations; one
     * that was posted for more fails when it executes. */
    CHECK_EQ(fr_check(f.a1, fr, 3, pg, 0, ps, B, 0), STATUS_SUCCESS);
    CHECK_EQ(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 2, TRUE, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, fr, 3, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);
    CHECK_EQ(fr_check(f.a1, fr, 3, pg, 0, ps, B, 0), STATUS_INVALID_PARAMETER);

    fx_close(&f);
}

/*
 * NdkFastRegister takes logical addresses the adapter handed out, i.e.
 * pages inside a live LAM (NdkBuildLAM): a page list that reaches outside
 * every LAM is refused when posted and again when executed, and once a LAM
 * is released a registration with a page no other live LAM covers maps
 * nothing. It can still be invalidated, or registered again.
 */
static void frmr_pages_in_lams(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_pages(&f, 4);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_MR *mr = mr_new(f.pda, TRUE);
    REQUIRE(mr);
    CHECK_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(mr, 4, TRUE, NULL, NULL), STATUS_SUCCESS);
    const ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
    NDK_LOGICAL_ADDRESS pg[3];
    pg[0].QuadPart = (LONGLONG)B;
    pg[1].QuadPart = (LONGLONG)(B + ps);
    UINT32 tok0 = rtok(mr);

    /* No LAM at all: refused, the token unchanged, nothing mapped. */
    CHECK_EQ(fr_check(f.a1, mr, 2, pg, 0, 2 * ps, B, fl), STATUS_INVALID_PARAMETER);
    CHECK_EQ(rtok(mr), tok0);
    CHECK_EQ(fr_exec(f.a1, mr, 2, pg, 0, 2 * ps, B, fl), STATUS_INVALID_PARAMETER);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok0, B, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), B, 1, 0), STATUS_ACCESS_VIOLATION);

    /* A LAM over page 0 only: a list with page 1 still reaches outside. */
    NDK_LOGICAL_ADDRESS_MAPPING *lam0 = NULL, *lam1 = NULL, *lam1b = NULL, *lam2 = NULL;
    ULONG fbo;
    CHECK_EQ(lam_build(&f, b, ps, &lam0, &fbo), STATUS_SUCCESS);
    REQUIRE(lam0);
    CHECK_EQ(fr_check(f.a1, mr, 2, pg, 0, 2 * ps, B, fl), STATUS_INVALID_PARAMETER);
    CHECK_EQ(rtok(mr), tok0);
    CHECK_EQ(fr_check(f.a1, mr, 1, pg, 0, ps, B, fl), STATUS_SUCCESS);
    /* Released between the post and the execution: the execution fails. */
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam0);
    CHECK_EQ(fr_exec(f.a1, mr, 1, pg, 0, ps, B, fl), STATUS_INVALID_PARAMETER);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(mr), B, 1, RW), MEM_INVALID_STAG);

    /* Pages from two LAMs (0-1 and 1-3) in one list, out of order. */
    CHECK_EQ(lam_build(&f, b, 2 * ps, &lam1, &fbo), STATUS_SUCCESS);
    CHECK_EQ(lam_build(&f, b + ps, 3 * ps, &lam2, &fbo), STATUS_SUCCESS);
    CHECK_EQ(lam_build(&f, b, 2 * ps, &lam1b, &fbo), STATUS_SUCCESS); /* a second LAM of pages 0-1 */
    REQUIRE(lam1 && lam2 && lam1b);
    pg[0].QuadPart = (LONGLONG)(B + 3 * ps);
    pg[1].QuadPart = (LONGLONG)B;
    pg[2].QuadPart = (LONGLONG)(B + ps);
    CHECK_EQ(fr_check(f.a1, mr, 3, pg, 0, 3 * ps, 8 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 3, pg, 0, 3 * ps, 8 * ps, fl), STATUS_SUCCESS);
    UINT32 tok = rtok(mr);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 8 * ps, 3 * ps, RW), MEM_OK);
    /* One of the two LAMs of pages 0-1 goes: the other still covers them. */
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam1);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 8 * ps, 3 * ps, RW), MEM_OK);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), 8 * ps, 1, 0), STATUS_SUCCESS);
    /* The other goes too: page 0 is in no LAM now, and the whole
     * registration fails, remotely as an invalid STag and locally. */
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam1b);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 8 * ps, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, tok, 8 * ps + 2 * ps, 1, RR), MEM_INVALID_STAG);
    CHECK_EQ(lmap(&f, f.pa, ltok(mr), 8 * ps + 2 * ps, 1, 0), STATUS_ACCESS_VIOLATION);
    /* It is still the registration in force: NdkInvalidate works, once. */
    CHECK_EQ(mem_check_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_SUCCESS);
    CHECK_EQ(mem_exec_invalidate(f.a1, &mr->Header), STATUS_INVALID_DEVICE_STATE);
    /* Registered again over a live page: mapped again. */
    CHECK_EQ(fr_check(f.a1, mr, 1, &pg[2], 0, ps, 8 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, 1, &pg[2], 0, ps, 8 * ps, fl), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(mr), 8 * ps, ps, RW), MEM_OK);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + ps);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam2);
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(mr), 8 * ps, 1, RW), MEM_INVALID_STAG);

    fx_close(&f);
    free(lam0);
    free(lam1);
    free(lam1b);
    free(lam2);
}

/* A local SGE over a fast registration maps to one iovec per run of
 * adjacent pages; a request whose SGEs need more than MEM_LOCAL_IOV_MAX is
 * refused with STATUS_IMPLEMENTATION_LIMIT, whether or not the caller
 * wants the iovecs. */
static void frmr_local_pieces(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    enum { NP = MEM_LOCAL_IOV_MAX + 1 };
    char *b = fx_lam_pages(&f, 2 * NP);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_MR *mr = mr_new(f.pda, TRUE);
    REQUIRE(mr);
    CHECK_EQ(mr->Dispatch->NdkInitializeFastRegisterMr(mr, NP, FALSE, NULL, NULL), STATUS_SUCCESS);
    /* Every other page: no two are adjacent. */
    NDK_LOGICAL_ADDRESS pg[NP];
    for (int i = 0; i < NP; i++)
        pg[i].QuadPart = (LONGLONG)(B + 2 * (uint64_t)i * ps);
    const uint64_t va = 16 * ps;
    CHECK_EQ(fr_check(f.a1, mr, NP, pg, 0, NP * ps, va, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, mr, NP, pg, 0, NP * ps, va, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    static struct iovec iov[MEM_LOCAL_IOV_MAX];
    int n = -1;
    /* MEM_LOCAL_IOV_MAX pages fit, starting 1 byte into the first. */
    NDK_SGE sg[2] = {{.VirtualAddress = (PVOID)(uintptr_t)(va + 1),
                      .Length = (ULONG)((NP - 1) * ps - 1),
                      .MemoryRegionToken = ltok(mr)}};
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 1, MEM_LOCAL_WRITE, iov, MEM_LOCAL_IOV_MAX, &n), STATUS_SUCCESS);
    CHECK_EQ(n, MEM_LOCAL_IOV_MAX);
    bool in_order = iov[0].iov_base == b + 1 && iov[0].iov_len == ps - 1;
    for (int i = 1; i < n; i++)
        in_order &= iov[i].iov_base == b + 2 * (uint64_t)i * ps && iov[i].iov_len == ps;
    CHECK(in_order);
    /* One page more, in one SGE or in a second one. */
    sg[0].Length = (ULONG)(NP * ps - 1);
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 1, 0, iov, MEM_LOCAL_IOV_MAX, &n), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 1, 0, NULL, MEM_LOCAL_IOV_MAX, NULL), STATUS_IMPLEMENTATION_LIMIT);
    sg[0].Length = (ULONG)((NP - 1) * ps - 1);
    sg[1] = (NDK_SGE){.VirtualAddress = (PVOID)(uintptr_t)(va + (NP - 1) * ps), .Length = 1,
                      .MemoryRegionToken = ltok(mr)};
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 2, 0, NULL, MEM_LOCAL_IOV_MAX, NULL), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 2, 0, NULL, MEM_LOCAL_IOV_MAX + 1, &n), STATUS_SUCCESS);
    CHECK_EQ(n, MEM_LOCAL_IOV_MAX + 1);

    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* Windows                                                                  */
/* ------------------------------------------------------------------------ */

static NTSTATUS bind_check(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, uint64_t va, SIZE_T len,
                           ULONG flags)
{
    return mem_check_bind(qp, mr, mw, (PVOID)(uintptr_t)va, len, flags);
}

static NTSTATUS bind_exec(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, uint64_t va, SIZE_T len,
                          ULONG flags)
{
    return mem_exec_bind(qp, mr, mw, (PVOID)(uintptr_t)va, len, flags);
}

static void window_rules(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_pages(&f, 4);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    const ULONG RWF = NDK_OP_FLAG_ALLOW_REMOTE_WRITE, RRF = NDK_OP_FLAG_ALLOW_REMOTE_READ;

    /* The MR grants no remote right itself: windows do. */
    NDK_MR *mr = mr_new(f.pda, FALSE);
    NDK_MR *ro = mr_new(f.pda, FALSE);
    NDK_MR *fr = mr_new(f.pda, TRUE);
    NDK_MR *unreg = mr_new(f.pda, FALSE);
    NDK_MW *mw = mw_new(f.pda);
    NDK_MW *mwb = mw_new(f.pdb);
    REQUIRE(mr && ro && fr && unreg && mw && mwb);
    CHECK_EQ(mr_reg(mr, b, 4 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(mr_reg(ro, b, 4 * ps, 0), STATUS_SUCCESS);
    CHECK_EQ(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 4, TRUE, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0); /* never bound */

    /* Post-time rules (NdkBind). */
    CHECK_EQ(bind_check(f.a1, mr, mw, B - 1, 8, RWF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, mr, mw, B + 4 * ps, 0, RWF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, mr, mw, B + 4 * ps - 8, 9, RWF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, ro, mw, B, 8, RWF), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(bind_check(f.a1, fr, mw, B, 8, RRF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, unreg, mw, B, 8, RRF), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(bind_check(f.a1, mr, mwb, B, 8, RRF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.b1, mr, mw, B, 8, RRF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, mr, mw, B, 8, 0x800), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, mr, (NDK_MW *)fr, B, 8, RRF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0); /* refused binds hand out nothing */
    /* Remote read over a read-only MR is fine (local read is implied). */
    CHECK_EQ(bind_check(f.a1, ro, mw, B, 8, RRF), STATUS_SUCCESS);
    UINT32 w0 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    CHECK(w0 != 0);

    /* Window over pages 1-2, read and write, executed by QP a1. */
    CHECK_EQ(bind_check(f.a1, mr, mw, B + ps, 2 * ps, RWF | RRF), STATUS_SUCCESS);
    UINT32 w1 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    CHECK(w1 != w0 && (w1 >> 8) == (w0 >> 8));
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + ps, 1, RW), MEM_INVALID_STAG); /* not executed yet */
    CHECK_EQ(bind_exec(f.a1, mr, mw, B + ps, 2 * ps, RWF | RRF), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + ps, 2 * ps, RW), MEM_OK);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + ps && g_iov[0].iov_len == 2 * ps);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + 3 * ps - 1, 1, RR), MEM_OK);
    /* Only on the QP that bound it; never in another PD. */
    CHECK_EQ(rmap(&f, f.pa, f.a2, w1, B + ps, 1, RW), MEM_NOT_ASSOCIATED);
    CHECK_EQ(rmap(&f, f.pb, f.b1, w1, B + ps, 1, RW), MEM_NOT_ASSOCIATED);
    /* Inside the MR, outside the window. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B, 1, RW), MEM_BOUNDS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + 3 * ps, 1, RW), MEM_BOUNDS);
    /* The MR's own token has no remote right. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, rtok(mr), B + ps, 1, RW), MEM_ACCESS);
    /* A window token is not a local token. */
    CHECK_EQ(lmap(&f, f.pa, w1, B + ps, 1, 0), STATUS_ACCESS_VIOLATION);

    /* Rebinding read-only, on QP a2: the old token dies once it executes. */
    CHECK_EQ(bind_check(f.a2, mr, mw, B, ps, RRF), STATUS_SUCCESS);
    UINT32 w2 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + ps, 1, RW), MEM_OK);
    CHECK_EQ(bind_exec(f.a2, mr, mw, B, ps, RRF), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w1, B + ps, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a2, w2, B, 1, RR), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a2, w2, B, 1, RW), MEM_ACCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, w2, B, 1, RR), MEM_NOT_ASSOCIATED);

    /* Deregistering the MR kills the window with it; so does a later
     * re-registration (another key). */
    CHECK_EQ(mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a2, w2, B, 1, RR), MEM_INVALID_STAG);
    CHECK_EQ(mr_reg(mr, b, 4 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a2, w2, B, 1, RR), MEM_INVALID_STAG);
    /* An MR deregistered between post and execution: the bind fails. */
    CHECK_EQ(bind_check(f.a1, mr, mw, B, ps, RRF), STATUS_SUCCESS);
    CHECK_EQ(mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(bind_exec(f.a1, mr, mw, B, ps, RRF), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(rmap(&f, f.pa, f.a1, mw->Dispatch->NdkGetRemoteTokenFromMw(mw), B, 1, RR),
             MEM_INVALID_STAG);

    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* Local SGEs, the privileged token and LAMs                                */
/* ------------------------------------------------------------------------ */

static void local_sges(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_pages(&f, 8);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_MR *rw = mr_new(f.pda, FALSE);
    NDK_MR *ro = mr_new(f.pda, FALSE);
    NDK_MR *other = mr_new(f.pdb, FALSE);
    REQUIRE(rw && ro && other);
    CHECK_EQ(mr_reg(rw, b, 2 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(mr_reg(ro, b + 2 * ps, 2 * ps, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
    CHECK_EQ(mr_reg(other, b, 2 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);

    /* Several SGEs, one empty (dropped unchecked), in order. */
    NDK_SGE sg[4] = {
        {.VirtualAddress = b + 10, .Length = 20, .MemoryRegionToken = ltok(rw)},
        {.VirtualAddress = NULL, .Length = 0, .MemoryRegionToken = 0xBAD},
        {.VirtualAddress = b + 2 * ps, .Length = (ULONG)ps, .MemoryRegionToken = ltok(ro)},
        {.VirtualAddress = b + 2 * ps - 1, .Length = 1, .MemoryRegionToken = ltok(rw)},
    };
    struct iovec iov[4];
    int n = -1;
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 4, 0, iov, 4, &n), STATUS_SUCCESS);
    CHECK_EQ(n, 3);
    CHECK(iov[0].iov_base == b + 10 && iov[0].iov_len == 20);
    CHECK(iov[1].iov_base == b + 2 * ps && iov[1].iov_len == ps);
    CHECK(iov[2].iov_base == b + 2 * ps - 1 && iov[2].iov_len == 1);
    /* The read-only MR refuses local write; the others are fine. */
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 4, MEM_LOCAL_WRITE, iov, 4, &n), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(n, 0);
    CHECK_EQ(mem_map_local(f.t, f.pa, sg, 2, MEM_LOCAL_WRITE, iov, 4, &n), STATUS_SUCCESS);
    CHECK_EQ(n, 1);
    CHECK_EQ(mem_map_local(f.t, f.pa, NULL, 0, 0, iov, 4, &n), STATUS_SUCCESS);
    CHECK_EQ(n, 0);
    CHECK_EQ(mem_map_local(f.t, f.pa, NULL, 1, 0, iov, 4, &n), STATUS_INVALID_PARAMETER);
    /* Bounds at both ends of the MR. */
    CHECK_EQ(lmap(&f, f.pa, ltok(rw), B, (ULONG)(2 * ps), 0), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, ltok(rw), B, (ULONG)(2 * ps + 1), 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, ltok(rw), B - 1, 2, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, ltok(rw), UINT64_MAX - 2, 8, 0), STATUS_INVALID_PARAMETER);
    /* Another PD's token, a stale key, an unknown token. */
    CHECK_EQ(lmap(&f, f.pa, ltok(other), B, 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, ltok(rw) ^ 1, B, 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, 0, B, 1, 0), STATUS_ACCESS_VIOLATION);

    /* The privileged token: inside a live LAM of this adapter only. */
    UINT32 priv = f.pa->privileged_token;
    CHECK_EQ(lmap(&f, f.pa, priv, B + 100, 10, MEM_LOCAL_WRITE), STATUS_ACCESS_VIOLATION);
    NDK_LOGICAL_ADDRESS_MAPPING *lam1 = NULL, *lam2 = NULL, *big = NULL, *small = NULL;
    ULONG fbo = 77;
    /* LAM 1: pages 0-1 (from byte 100); LAM 2: pages 1-3. */
    CHECK_EQ(lam_build(&f, b + 100, 2 * ps - 100, &lam1, &fbo), STATUS_SUCCESS);
    REQUIRE(lam1);
    CHECK_EQ(fbo, 100);
    CHECK_EQ(lam1->AdapterPageCount, 2);
    CHECK_EQ((uint64_t)lam1->AdapterPageArray[0].QuadPart, B);
    CHECK_EQ(lam_build(&f, b + ps, 3 * ps, &lam2, &fbo), STATUS_SUCCESS);
    REQUIRE(lam2);
    CHECK_EQ(fbo, 0);
    uint64_t la = (uint64_t)lam1->AdapterPageArray[0].QuadPart + 100;
    CHECK_EQ(lmap(&f, f.pa, priv, la, 10, MEM_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK(g_niov == 1 && g_iov[0].iov_base == b + 100 && g_iov[0].iov_len == 10);
    /* A LAM covers whole pages. */
    CHECK_EQ(lmap(&f, f.pa, priv, B, (ULONG)(2 * ps), 0), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 3 * ps, (ULONG)ps, 0), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 3 * ps, (ULONG)ps + 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, priv, B - 1, 2, 0), STATUS_ACCESS_VIOLATION);
    /* One SGE must lie in one LAM. */
    CHECK_EQ(lmap(&f, f.pa, priv, B, (ULONG)(3 * ps), 0), STATUS_ACCESS_VIOLATION);
    /* Another PD's privileged token is just an unknown token here. */
    CHECK_EQ(lmap(&f, f.pa, f.pb->privileged_token, la, 10, 0), STATUS_ACCESS_VIOLATION);
    /* Never remotely, even inside a LAM. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, priv, la, 10, RR), MEM_INVALID_STAG);
    CHECK_EQ(rmap(&f, f.pa, f.a1, priv, la, 10, RW), MEM_INVALID_STAG);
    /* Released: gone, and the other LAM still counts. */
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam2);
    CHECK(lam2->AdapterContext == NULL);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 3 * ps, 1, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, priv, B + ps, 1, 0), STATUS_SUCCESS);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam2); /* twice: ignored */
    f.ad->Dispatch->NdkReleaseLAM(f.ad, lam1);
    CHECK_EQ(lmap(&f, f.pa, priv, la, 10, 0), STATUS_ACCESS_VIOLATION);

    /* Nested LAMs: a small one inside a big one must not hide the big one. */
    CHECK_EQ(lam_build(&f, b, 8 * ps, &big, &fbo), STATUS_SUCCESS);
    CHECK_EQ(lam_build(&f, b + 2 * ps, ps, &small, &fbo), STATUS_SUCCESS);
    REQUIRE(big && small);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 5 * ps, 10, 0), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 2 * ps + 5, 10, 0), STATUS_SUCCESS);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, big);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 5 * ps, 10, 0), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 2 * ps + 5, 10, 0), STATUS_SUCCESS);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, small);
    CHECK_EQ(lmap(&f, f.pa, priv, B + 2 * ps + 5, 10, 0), STATUS_ACCESS_VIOLATION);

    /* Many LAMs, released in a scrambled order. */
    enum { NL = 200 };
    NDK_LOGICAL_ADDRESS_MAPPING *many[NL];
    for (int i = 0; i < NL; i++) {
        many[i] = NULL;
        CHECK_EQ(lam_build(&f, b + (size_t)(i % 8) * ps, ps, &many[i], &fbo), STATUS_SUCCESS);
    }
    for (int i = 0; i < NL; i++) {
        int k = (i * 37) % NL;
        if (many[k])
            f.ad->Dispatch->NdkReleaseLAM(f.ad, many[k]);
    }
    CHECK_EQ(lmap(&f, f.pa, priv, B, 1, 0), STATUS_ACCESS_VIOLATION);

    fx_close(&f);
    free(lam1);
    free(lam2);
    free(big);
    free(small);
    for (int i = 0; i < NL; i++)
        free(many[i]);
}

/* ------------------------------------------------------------------------ */
/* Invalidation                                                             */
/* ------------------------------------------------------------------------ */

static void invalidation(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_lam_pages(&f, 2);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    NDK_LOGICAL_ADDRESS pg[1];
    pg[0].QuadPart = (LONGLONG)B;
    const ULONG RWF = NDK_OP_FLAG_ALLOW_REMOTE_WRITE;

    NDK_MR *normal = mr_new(f.pda, FALSE);
    NDK_MR *fr = mr_new(f.pda, TRUE);
    NDK_MR *fr_uninit = mr_new(f.pda, TRUE);
    NDK_MW *mw = mw_new(f.pda);
    REQUIRE(normal && fr && fr_uninit && mw);
    CHECK_EQ(mr_reg(normal, b, 2 * ps, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    CHECK_EQ(fr->Dispatch->NdkInitializeFastRegisterMr(fr, 1, TRUE, NULL, NULL), STATUS_SUCCESS);
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 0, ps, B, RWF), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, fr, 1, pg, 0, ps, B, RWF), STATUS_SUCCESS);
    CHECK_EQ(bind_check(f.a1, normal, mw, B, ps, RWF), STATUS_SUCCESS);
    CHECK_EQ(bind_exec(f.a1, normal, mw, B, ps, RWF), STATUS_SUCCESS);
    UINT32 sn = rtok(normal), sf = rtok(fr), sw = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);

    /* Send with Invalidate (rule R21, docs/rules.md): a normal MR may not be
     * invalidated remotely, and stays valid. */
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a1, sn), MEM_ACCESS);
    CHECK_EQ(rmap(&f, f.pa, f.a1, sn, B, 1, RW), MEM_OK);
    /* Order: invalid, then association, then the right to invalidate. */
    CHECK_EQ(mem_invalidate_remote(f.t, f.pb, f.b1, sn), MEM_NOT_ASSOCIATED);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pb, f.b1, sn ^ 1), MEM_INVALID_STAG);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a1, f.pa->privileged_token), MEM_INVALID_STAG);
    /* Fast-register MR: any QP of its PD. */
    CHECK_EQ(mem_invalidate_remote(f.t, f.pb, f.b1, sf), MEM_NOT_ASSOCIATED);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a1, sf ^ 1), MEM_INVALID_STAG);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a2, sf), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, sf, B, 1, RW), MEM_INVALID_STAG);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a2, sf), MEM_INVALID_STAG);
    /* Window: only the QP it is bound to. */
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a2, sw), MEM_NOT_ASSOCIATED);
    CHECK_EQ(mem_invalidate_remote(f.t, f.pa, f.a1, sw), MEM_OK);
    CHECK_EQ(rmap(&f, f.pa, f.a1, sw, B, 1, RW), MEM_INVALID_STAG);

    /* NdkInvalidate posting rules. */
    CHECK_EQ(mem_check_invalidate(f.a1, &normal->Header), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_exec_invalidate(f.a1, &normal->Header), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_check_invalidate(f.a1, &fr->Header), STATUS_SUCCESS);
    CHECK_EQ(mem_check_invalidate(f.a1, &mw->Header), STATUS_SUCCESS);
    CHECK_EQ(mem_check_invalidate(f.b1, &fr->Header), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_check_invalidate(f.a1, &fr_uninit->Header), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(mem_check_invalidate(f.a1, &f.pda->Header), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_check_invalidate(f.a1, NULL), STATUS_INVALID_PARAMETER);
    /* Already invalidated remotely: the local invalidate fails. */
    CHECK_EQ(mem_exec_invalidate(f.a1, &mw->Header), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(mem_exec_invalidate(f.a1, &fr->Header), STATUS_INVALID_DEVICE_STATE);

    /* RDMA_READ_LOCAL_INVALIDATE: the first SGE's (local) token. */
    CHECK_EQ(fr_check(f.a1, fr, 1, pg, 0, ps, B, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(fr_exec(f.a1, fr, 1, pg, 0, ps, B, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, ltok(fr), B, 8, MEM_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pb, ltok(fr)), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pa, ltok(fr)), STATUS_SUCCESS);
    CHECK_EQ(lmap(&f, f.pa, ltok(fr), B, 8, MEM_LOCAL_WRITE), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pa, ltok(fr)), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pa, ltok(normal)), STATUS_INVALID_PARAMETER);
    CHECK_EQ(lmap(&f, f.pa, ltok(normal), B, 8, 0), STATUS_SUCCESS);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pa, f.pa->privileged_token),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(mem_invalidate_local_token(f.t, f.pa, sw), STATUS_INVALID_PARAMETER);

    fx_close(&f);
}

/* ------------------------------------------------------------------------ */
/* The index allocator                                                      */
/* ------------------------------------------------------------------------ */

/* The index of a fresh entry, through a registration. */
static uint32_t entry_index(struct mem_table *t, struct mem_entry *e)
{
    static char dummy[16];
    if (mem_mr_register(t, e, (uint64_t)(uintptr_t)dummy, sizeof dummy, 0) != STATUS_SUCCESS)
        return 0;
    return mem_entry_token(t, e) >> 8;
}

static void index_allocation(void)
{
    struct ndk_pd_impl pd;
    memset(&pd, 0, sizeof pd);
    pd.privileged_token = 0xFFFFFF00u;

    /* Random start: never 0, different from table to table. */
    enum { NT = 32 };
    uint32_t first[NT];
    unsigned distinct = 0;
    for (int i = 0; i < NT; i++) {
        struct mem_table *t = mem_table_new();
        REQUIRE(t);
        struct mem_entry *e = NULL;
        CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &e), STATUS_SUCCESS);
        first[i] = e ? entry_index(t, e) : 0;
        CHECK(first[i] != 0 && first[i] < (1u << 24));
        bool seen = false;
        for (int k = 0; k < i; k++)
            seen |= first[k] == first[i];
        distinct += !seen;
        mem_table_free(t);
    }
    CHECK(distinct > NT / 2);

    /* One table: 5000 live entries, all distinct and non-zero; a freed index
     * is not handed out again at once. */
    struct mem_table *t = mem_table_new();
    REQUIRE(t);
    enum { NE = 5000 };
    struct mem_entry **es = calloc(NE, sizeof *es);
    uint32_t *ix = calloc(NE, sizeof *ix);
    REQUIRE(es && ix);
    for (int i = 0; i < NE; i++) {
        CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &es[i]), STATUS_SUCCESS);
        ix[i] = es[i] ? entry_index(t, es[i]) : 0;
        CHECK(ix[i] != 0);
    }
    int dup = 0;
    for (int i = 1; i < NE; i++)
        for (int k = i - 1; k >= 0 && k >= i - 64; k--)
            dup += ix[k] == ix[i];
    CHECK_EQ(dup, 0);
    uint32_t freed = ix[NE / 2];
    mem_entry_free(t, es[NE / 2]);
    es[NE / 2] = NULL;
    struct mem_entry *again = NULL;
    CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &again), STATUS_SUCCESS);
    CHECK(again && entry_index(t, again) != freed);
    if (again)
        mem_entry_free(t, again);
    for (int i = 0; i < NE; i++)
        if (es[i])
            mem_entry_free(t, es[i]);
    free(es);
    free(ix);

    /* Wrap: after 2^24 - 1 comes 1, never 0; busy indices are skipped. */
    struct mem_entry *e1 = NULL, *e2 = NULL, *e3 = NULL;
    mem_test_set_cursor(t, 0xFFFFFF);
    CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &e1), STATUS_SUCCESS);
    CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &e2), STATUS_SUCCESS);
    REQUIRE(e1 && e2);
    CHECK_EQ(entry_index(t, e1), 0xFFFFFF);
    CHECK_EQ(entry_index(t, e2), 1);
    mem_test_set_cursor(t, 0xFFFFFF);
    CHECK_EQ(mem_entry_new(t, MEM_KIND_MR, &pd, NULL, &e3), STATUS_SUCCESS);
    REQUIRE(e3);
    CHECK_EQ(entry_index(t, e3), 2);

    /* A key that would make the STag equal the PD's privileged token is
     * skipped (such a token is refused remotely). */
    UINT32 s1 = mem_entry_token(t, e1);
    CHECK_EQ(mem_mr_deregister(t, e1), STATUS_SUCCESS);
    pd.privileged_token = (s1 & 0xFFFFFF00u) | (uint8_t)(s1 + 1);
    CHECK_EQ(mem_mr_register(t, e1, 0x1000, 16, 0), STATUS_SUCCESS);
    UINT32 s2 = mem_entry_token(t, e1);
    CHECK(s2 != pd.privileged_token);
    CHECK_EQ((uint8_t)s2, (uint8_t)(s1 + 2));
    mem_table_free(t); /* frees the entries still in it */
}

/* ------------------------------------------------------------------------ */
/* Close rules: an MR with a bound window is the window's antecedent         */
/* ------------------------------------------------------------------------ */

static void mr_close_waits_for_window(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_pages(&f, 2);
    REQUIRE(b);
    uint64_t B = (uint64_t)(uintptr_t)b, ps = f.ps;
    const ULONG RWF = NDK_OP_FLAG_ALLOW_REMOTE_WRITE;
    NDK_MR *mr = mr_new(f.pda, FALSE), *mr2 = mr_new(f.pda, FALSE), *mr3 = mr_new(f.pda, FALSE);
    NDK_MW *mw = mw_new(f.pda), *mw2 = mw_new(f.pda);
    REQUIRE(mr && mr2 && mr3 && mw && mw2);
    CHECK_EQ(mr_reg(mr, b, 2 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(mr_reg(mr2, b, 2 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_EQ(mr_reg(mr3, b, 2 * ps, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);

    /* mw2 was bound to mr3, then rebound to mr2: mr3 no longer waits. */
    CHECK_EQ(bind_check(f.a1, mr3, mw2, B, ps, RWF), STATUS_SUCCESS);
    CHECK_EQ(bind_check(f.a1, mr2, mw2, B, ps, RWF), STATUS_SUCCESS);
    CHECK_EQ(close_obj(mr3, NULL, NULL), STATUS_SUCCESS);

    CHECK_EQ(bind_check(f.a1, mr, mw, B, ps, RWF), STATUS_SUCCESS);
    CHECK_EQ(bind_exec(f.a1, mr, mw, B, ps, RWF), STATUS_SUCCESS);
    UINT32 sw = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);

    tl_event ev;
    tl_event_init(&ev);
    CHECK_EQ(close_obj(mr, close_cb, &ev), STATUS_PENDING);
    /* A plain dereference until the window goes (L10): the window works. */
    CHECK_EQ(rmap(&f, f.pa, f.a1, sw, B, 1, RW), MEM_OK);
    /* No new window on a closing MR; the window cannot leave it either. */
    CHECK_EQ(bind_check(f.a1, mr, mw2, B, ps, RWF), STATUS_INVALID_PARAMETER);
    CHECK_EQ(bind_check(f.a1, mr2, mw, B, ps, RWF), STATUS_INVALID_DEVICE_STATE);
    /* Nor may it be bound again within the closed MR (L9). */
    CHECK_EQ(bind_check(f.a1, mr, mw, B + 8, 8, RWF), STATUS_INVALID_PARAMETER);
    CHECK(!tl_event_wait(&ev, 1, 100));
    CHECK_EQ(close_obj(mw, NULL, NULL), STATUS_SUCCESS);
    CHECK(tl_event_wait(&ev, 1, 5000));
    CHECK_EQ(rmap(&f, f.pa, f.a1, sw, B, 1, RW), MEM_INVALID_STAG);

    /* mr2 waits for mw2 the same way. */
    tl_event ev2;
    tl_event_init(&ev2);
    CHECK_EQ(close_obj(mr2, close_cb, &ev2), STATUS_PENDING);
    CHECK_EQ(close_obj(mw2, NULL, NULL), STATUS_SUCCESS);
    CHECK(tl_event_wait(&ev2, 1, 5000));

    fx_close(&f);
    tl_event_destroy(&ev);
    tl_event_destroy(&ev2);
}

/* ------------------------------------------------------------------------ */
/* Concurrency: lookups while other threads register and build LAMs         */
/* ------------------------------------------------------------------------ */

struct hammer {
    struct fx *f;
    UINT32 stag;
    uint64_t base;
    _Atomic int bad;
    _Atomic int stop;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;
    struct iovec iov[2];
    int n;
    while (!h->stop) {
        for (int i = 0; i < 1000; i++) {
            enum mem_err e = mem_map_remote(h->f->t, h->f->pa, h->f->a1, h->stag, h->base + 8, 64,
                                            MEM_REMOTE_WRITE, iov, 2, &n);
            if (e != MEM_OK || n != 1 || (uint64_t)(uintptr_t)iov[0].iov_base != h->base + 8)
                h->bad++;
        }
    }
    return NULL;
}

static void concurrent_lookups(void)
{
    struct fx f;
    REQUIRE(fx_open(&f));
    char *b = fx_pages(&f, 4);
    REQUIRE(b);
    NDK_MR *stable = mr_new(f.pda, FALSE);
    REQUIRE(stable);
    CHECK_EQ(mr_reg(stable, b, 4 * f.ps, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    struct hammer h = {.f = &f, .stag = rtok(stable), .base = (uint64_t)(uintptr_t)b};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, hammer_main, &h), 0);
    for (int i = 0; i < 300; i++) {
        NDK_MR *mr = mr_new(f.pda, FALSE);
        if (!mr)
            break;
        CHECK_EQ(mr_reg(mr, b, f.ps, NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);
        CHECK_EQ(rmap(&f, f.pa, f.a2, rtok(mr), (uint64_t)(uintptr_t)b, 4, RR), MEM_OK);
        CHECK_EQ(mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL), STATUS_SUCCESS);
        CHECK_EQ(close_obj(mr, NULL, NULL), STATUS_SUCCESS);
        NDK_LOGICAL_ADDRESS_MAPPING *lam = NULL;
        ULONG fbo;
        CHECK_EQ(lam_build(&f, b + 5, 2 * f.ps, &lam, &fbo), STATUS_SUCCESS);
        if (lam) {
            f.ad->Dispatch->NdkReleaseLAM(f.ad, lam);
            free(lam);
        }
    }
    h.stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(h.bad, 0);
    fx_close(&f);
}

int main(void)
{
    RUN(remote_bounds);
    RUN(remote_check_order);
    RUN(key_bump_and_deregister);
    RUN(frmr_page_split);
    RUN(frmr_token_kept);
    RUN(frmr_check_rules);
    RUN(frmr_pages_in_lams);
    RUN(frmr_local_pieces);
    RUN(window_rules);
    RUN(local_sges);
    RUN(invalidation);
    RUN(index_allocation);
    RUN(mr_close_waits_for_window);
    RUN(concurrent_lookups);
    return tl_finish();
}
