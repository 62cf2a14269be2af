/* Memory regions, memory windows and logical address mappings through the
 * public API: NdkCreateMr / NdkCreateMw, NdkRegisterMr and its flags and MDL
 * rules, NdkDeregisterMr, NdkInitializeFastRegisterMr, the token getters,
 * NdkBuildLAM / NdkReleaseLAM (buffer-size pattern, pages, FBO), the close
 * rules (the PD and a bound window's MR wait for their successors) and
 * NdkQueryExtension.
 * Contract: NdkBuildLAM, NdkReleaseLAM, NdkCreateMr, NdkCreateMw, the MR
 * and MW functions, NdkBind, NDK_LOGICAL_ADDRESS_MAPPING, NDK_MR_FLAG_*;
 * rules C7 and L8 (docs/rules.md). Where NDKPI leaves the choice to the
 * provider, the case says "libndk:". */
#include "ndktest.h"

#include <stddef.h>
#include <time.h>

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static void *pages_alloc(size_t n)
{
    void *p = aligned_alloc(page_size(), n * page_size());
    if (p)
        memset(p, 0, n * page_size());
    return p;
}

static MDL mdl_of(void *buf, size_t len)
{
    MDL m = {.Next = NULL, .StartVa = buf, .ByteOffset = 0, .ByteCount = (ULONG)len};
    return m;
}

/* Final status of NdkRegisterMr: inline, or its one completion. */
static NTSTATUS reg(NDK_MR *mr, MDL *m, SIZE_T len, ULONG flags)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkRegisterMr");
    nt_started(op, mr->Dispatch->NdkRegisterMr(mr, m, len, flags, nt_req_cb, op));
    return nt_finish(op, NT_WAIT_MS);
}

static NTSTATUS reg_buf(NDK_MR *mr, void *buf, size_t len, ULONG flags)
{
    MDL m = mdl_of(buf, len);
    return reg(mr, &m, len, flags);
}

static NTSTATUS dereg(NDK_MR *mr)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkDeregisterMr");
    nt_started(op, mr->Dispatch->NdkDeregisterMr(mr, nt_req_cb, op));
    return nt_finish(op, NT_WAIT_MS);
}

static NTSTATUS init_fr(NDK_MR *mr, ULONG pages, BOOLEAN remote)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkInitializeFastRegisterMr");
    nt_started(op, mr->Dispatch->NdkInitializeFastRegisterMr(mr, pages, remote, nt_req_cb, op));
    return nt_finish(op, NT_WAIT_MS);
}

/* NdkBuildLAM into a caller buffer of *size bytes. */
static NTSTATUS build_lam(NDK_ADAPTER *ad, MDL *m, SIZE_T len, NDK_LOGICAL_ADDRESS_MAPPING *lam,
                          ULONG *size, ULONG *fbo)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkBuildLAM");
    nt_started(op, ad->Dispatch->NdkBuildLAM(ad, m, len, nt_req_cb, op, lam, size, fbo));
    return nt_finish(op, NT_WAIT_MS);
}

static ULONG lam_bytes(ULONG pages)
{
    return (ULONG)(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) +
                   pages * sizeof(NDK_LOGICAL_ADDRESS));
}

/* What the one-adapter cases start from: a side and `pages` zeroed pages of
 * memory to register; NULL (and no side) when either could not be had. */
static char *case_open(nt_side *s, size_t pages)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    if (!nt_side_open(s, &o))
        return NULL;
    char *buf = pages_alloc(pages);
    if (!buf)
        nt_side_close(s);
    return buf;
}

static void case_close(nt_side *s, char *buf)
{
    nt_side_close(s);
    free(buf);
}

/* A new MR (fast-register or not) or MW on pd; NULL, and a failure
 * counted, when NdkCreateMr/NdkCreateMw did not make one. */
static NDK_MR *new_mr(NDK_PD *pd, BOOLEAN fast)
{
    NDK_MR *mr = NULL;
    CHECK_STATUS(nt_create_mr(pd, fast, &mr), STATUS_SUCCESS);
    return mr;
}

static NDK_MW *new_mw(NDK_PD *pd)
{
    NDK_MW *mw = NULL;
    CHECK_STATUS(nt_create_mw(pd, &mw), STATUS_SUCCESS);
    return mw;
}

/* ------------------------------------------------------------------------ */
/* NdkRegisterMr / NdkDeregisterMr / tokens                                 */
/* ------------------------------------------------------------------------ */

NT_CASE(register_tokens_deregister)
{
    nt_side s;
    char *buf = case_open(&s, 3);
    REQUIRE(buf);
    NDK_MR *mr = new_mr(s.pd, FALSE);
    REQUIRE(mr);
    /* libndk: no token before the registration (0 is never a token). */
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0);
    CHECK_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), 0);

    CHECK_STATUS(reg_buf(mr, buf + 100, 2 * page_size(),
                         NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ),
                 STATUS_SUCCESS);
    UINT32 r1 = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    UINT32 l1 = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    CHECK(r1 != 0);
    CHECK(l1 != 0);
    /* Reading a token twice gives the same value. */
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), r1);
    CHECK_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), l1);

    /* Registered already: deregister first (NdkRegisterMr; libndk: wrong state). */
    CHECK_STATUS(reg_buf(mr, buf, page_size(), 0), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), r1);

    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* "The MR must be in the registered state" (NdkDeregisterMr). */
    CHECK_STATUS(dereg(mr), STATUS_INVALID_DEVICE_STATE);
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0);

    /* Registered again: a fresh token, so stale remote accesses fail
     * (docs/behaviour.md, Memory). */
    CHECK_STATUS(reg_buf(mr, buf + 100, 2 * page_size(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_SUCCESS);
    UINT32 r2 = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    CHECK(r2 != 0 && r2 != r1);
    CHECK_EQ(mr->Dispatch->NdkGetLocalTokenFromMr(mr), r2);

    /* Two MRs never share a token. */
    NDK_MR *mr2 = new_mr(s.pd, FALSE);
    REQUIRE(mr2);
    CHECK_STATUS(reg_buf(mr2, buf + 100, 2 * page_size(), NDK_MR_FLAG_ALLOW_REMOTE_WRITE),
                 STATUS_SUCCESS);
    CHECK(mr2->Dispatch->NdkGetRemoteTokenFromMr(mr2) != r2);

    /* Closing a registered MR is allowed without deregistering. */
    nt_close(mr2);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    nt_close(mr);
    case_close(&s, buf);
}

NT_CASE(register_flags_and_lengths)
{
    nt_side s;
    char *buf = case_open(&s, 2);
    REQUIRE(buf);
    NDK_MR *mr = new_mr(s.pd, FALSE);
    REQUIRE(mr);

    /* Every documented combination of NDK_MR_FLAG_*, RDMA_READ_SINK
     * included: it must never make a registration fail (NdkRegisterMr). */
    const ULONG ok[] = {
        NDK_MR_FLAG_ALLOW_LOCAL_READ,
        NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
        NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
        NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
        NDK_MR_FLAG_RDMA_READ_SINK,
        NDK_MR_FLAG_RDMA_READ_SINK | NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
        NDK_MR_FLAG_RDMA_READ_SINK | NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        CHECK_STATUS(reg_buf(mr, buf, 100, ok[i]), STATUS_SUCCESS);
        CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    }
    /* libndk: unknown bits are refused (NDKPI defines no others). */
    const ULONG bad[] = {0x10, 0x20, 0x100, 0x80000000u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STATUS(reg_buf(mr, buf, 100, bad[i] | NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
                     STATUS_INVALID_PARAMETER);

    /* Length: 0 and above MaxRegistrationSize (NdkRegisterMr) are invalid. */
    MDL m = mdl_of(buf, 100);
    CHECK_STATUS(reg(mr, &m, 0, 0), STATUS_INVALID_PARAMETER);
    CHECK(s.info.MaxRegistrationSize > 0);
    MDL huge = mdl_of(buf, 0xFFFFFFFFu);
    CHECK_STATUS(reg(mr, &huge, s.info.MaxRegistrationSize + 1, 0), STATUS_INVALID_PARAMETER);
    /* No MDL. */
    nt_op *op = nt_op_new(NT_REQ, "NdkRegisterMr(NULL)");
    nt_started(op, mr->Dispatch->NdkRegisterMr(mr, NULL, 100, 0, nt_req_cb, op));
    CHECK_STATUS(nt_finish(op, NT_WAIT_MS), STATUS_INVALID_PARAMETER);
    /* A refused registration left the MR unregistered. */
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0);
    CHECK_STATUS(dereg(mr), STATUS_INVALID_DEVICE_STATE);

    /* Not more than the MDL describes. */
    CHECK_STATUS(reg(mr, &m, 101, 0), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(reg(mr, &m, 100, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* Fewer bytes than the MDL describes is fine. */
    CHECK_STATUS(reg(mr, &m, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);

    nt_close(mr);
    case_close(&s, buf);
}

/* The span must be virtually contiguous over Length (NdkRegisterMr): each buffer of
 * the chain starting where the previous one ends. */
NT_CASE(register_mdl_chains)
{
    nt_side s;
    char *buf = case_open(&s, 4);
    REQUIRE(buf);
    NDK_MR *mr = new_mr(s.pd, FALSE);
    REQUIRE(mr);

    /* StartVa + ByteOffset: the first byte is buf + 300. */
    MDL m2 = {.Next = NULL, .StartVa = buf + 1000, .ByteOffset = 300, .ByteCount = 3000};
    MDL m1 = {.Next = &m2, .StartVa = buf, .ByteOffset = 300, .ByteCount = 1000};
    CHECK_STATUS(reg(mr, &m1, 4000, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    CHECK_STATUS(reg(mr, &m1, 1001, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* Longer than the chain. */
    CHECK_STATUS(reg(mr, &m1, 4001, 0), STATUS_INVALID_PARAMETER);

    /* A gap between the buffers. */
    m2.ByteOffset = 301;
    CHECK_STATUS(reg(mr, &m1, 2000, 0), STATUS_INVALID_PARAMETER);
    /* ... that Length does not reach. */
    CHECK_STATUS(reg(mr, &m1, 1000, 0), STATUS_SUCCESS);
    CHECK_STATUS(dereg(mr), STATUS_SUCCESS);
    /* Overlapping buffers are not contiguous either. */
    m2.ByteOffset = 299;
    CHECK_STATUS(reg(mr, &m1, 2000, 0), STATUS_INVALID_PARAMETER);
    /* Nor is a second buffer elsewhere in memory. */
    m2.StartVa = buf + 3 * page_size();
    m2.ByteOffset = 0;
    CHECK_STATUS(reg(mr, &m1, 1500, 0), STATUS_INVALID_PARAMETER);
    CHECK_EQ(mr->Dispatch->NdkGetRemoteTokenFromMr(mr), 0);

    nt_close(mr);
    case_close(&s, buf);
}

/* ------------------------------------------------------------------------ */
/* Fast-register MRs                                                        */
/* ------------------------------------------------------------------------ */

struct init_arg {
    NDK_MR *mr;
    ULONG pages;
    NTSTATUS st;
};

static void *init_thread(void *p)
{
    struct init_arg *a = p;
    /* No completion callback: libndk completes inline; a pending one
     * would be caught as a missing completion by the checks below. */
    a->st = a->mr->Dispatch->NdkInitializeFastRegisterMr(a->mr, a->pages, TRUE, NULL, NULL);
    return NULL;
}

NT_CASE(fast_register_mr_init)
{
    nt_side s;
    char *buf = case_open(&s, 1);
    REQUIRE(buf);
    NDK_MR *fr = new_mr(s.pd, TRUE);
    NDK_MR *normal = new_mr(s.pd, FALSE);
    REQUIRE(fr && normal);
    CHECK(s.info.FRMRPageCount >= 16); /* ndkinfo: at least 16 */
    CHECK_EQ(fr->Dispatch->NdkGetRemoteTokenFromMr(fr), 0); /* libndk: none yet */

    /* libndk: 0 pages and more than 65536 are not supported
     * (NdkInitializeFastRegisterMr). */
    CHECK_STATUS(init_fr(fr, 0, TRUE), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_STATUS(init_fr(fr, 65537, TRUE), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_STATUS(init_fr(fr, 0xFFFFFFFFu, FALSE), STATUS_IMPLEMENTATION_LIMIT);
    CHECK_EQ(fr->Dispatch->NdkGetRemoteTokenFromMr(fr), 0);
    /* The suggested default, then again with other values: it may be
     * called several times (NdkInitializeFastRegisterMr). */
    CHECK_STATUS(init_fr(fr, s.info.FRMRPageCount, TRUE), STATUS_SUCCESS);
    UINT32 t = fr->Dispatch->NdkGetRemoteTokenFromMr(fr);
    CHECK(t != 0);
    CHECK_EQ(fr->Dispatch->NdkGetLocalTokenFromMr(fr), t);
    CHECK_STATUS(init_fr(fr, 1, FALSE), STATUS_SUCCESS);
    CHECK_STATUS(init_fr(fr, 65536, TRUE), STATUS_SUCCESS);
    CHECK(fr->Dispatch->NdkGetLocalTokenFromMr(fr) != 0);

    /* ... and in parallel. */
    struct init_arg a[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct init_arg){.mr = fr, .pages = 16u << i, .st = -1};
        CHECK_EQ(pthread_create(&th[i], NULL, init_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_STATUS(a[i].st, STATUS_SUCCESS);
    }

    /* Each kind of MR has its own registration function (NdkCreateMr). */
    CHECK_STATUS(reg_buf(fr, buf, 100, 0), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(dereg(fr), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(init_fr(normal, 4, TRUE), STATUS_INVALID_PARAMETER);
    CHECK_EQ(normal->Dispatch->NdkGetRemoteTokenFromMr(normal), 0);

    nt_close(fr);
    nt_close(normal);
    case_close(&s, buf);
}

/* ------------------------------------------------------------------------ */
/* NdkBuildLAM / NdkReleaseLAM                                              */
/* ------------------------------------------------------------------------ */

NT_CASE(build_lam_buffer_size_and_pages)
{
    nt_side s;
    char *buf = case_open(&s, 4);
    REQUIRE(buf);
    const size_t ps = page_size();
    /* 2 pages' worth starting 123 bytes in: 3 pages, FBO 123. */
    MDL m = mdl_of(buf + 123, 2 * ps);
    const ULONG need = lam_bytes(3);
    ULONG size = 0, fbo = 0xFFFF;

    /* Size probe: no buffer -> too small, with the size needed. */
    CHECK_STATUS(build_lam(s.ad, &m, 2 * ps, NULL, &size, &fbo), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, need);
    NDK_LOGICAL_ADDRESS_MAPPING *lam = calloc(1, need + 64);
    REQUIRE(lam);
    size = need - 1;
    CHECK_STATUS(build_lam(s.ad, &m, 2 * ps, lam, &size, &fbo), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, need);
    /* Exactly the size: success, the bytes written, the pages and FBO. */
    memset(lam, 0xEE, need + 64);
    size = need;
    CHECK_STATUS(build_lam(s.ad, &m, 2 * ps, lam, &size, &fbo), STATUS_SUCCESS);
    CHECK_EQ(size, need);
    CHECK_EQ(fbo, 123);
    CHECK_EQ(lam->AdapterPageCount, 3);
    for (ULONG i = 0; i < 3 && i < lam->AdapterPageCount; i++) {
        uint64_t p = (uint64_t)lam->AdapterPageArray[i].QuadPart;
        CHECK_EQ(p % ps, 0); /* PAGE_SIZE-aligned (NdkBuildLAM) */
        /* libndk: no IOMMU, the logical address is the page's address. */
        CHECK_EQ(p, (uint64_t)(uintptr_t)buf + i * ps);
    }
    /* Nothing written past the mapping. */
    CHECK(((unsigned char *)lam)[need] == 0xEE);
    s.ad->Dispatch->NdkReleaseLAM(s.ad, lam);

    /* Then into a buffer with room to spare: *pLAMSize says what was
     * written, and the pages and FBO follow the region. */
    MDL a = mdl_of(buf, 4 * ps);
    MDL last = mdl_of(buf + ps - 1, 1);
    MDL c2 = {.Next = NULL, .StartVa = buf + 1000, .ByteOffset = 0, .ByteCount = (ULONG)ps};
    MDL c1 = {.Next = &c2, .StartVa = buf, .ByteOffset = 0, .ByteCount = 1000};
    MDL g2 = {.Next = NULL, .StartVa = buf + 1001, .ByteOffset = 0, .ByteCount = (ULONG)ps};
    MDL g1 = {.Next = &g2, .StartVa = buf, .ByteOffset = 0, .ByteCount = 1000};
    const struct {
        const char *what;
        MDL *mdl;
        SIZE_T len;
        NTSTATUS want;
        ULONG pages, fbo; /* on success */
    } cases[] = {
        {"the same region again", &m, 2 * ps, STATUS_SUCCESS, 3, 123},
        {"page-aligned: FBO 0", &a, ps, STATUS_SUCCESS, 1, 0},
        {"one byte more takes another page", &a, ps + 1, STATUS_SUCCESS, 2, 0},
        {"the last byte of a page alone", &last, 1, STATUS_SUCCESS, 1, (ULONG)ps - 1},
        /* A contiguous chain is one region; a gap fails (NdkBuildLAM). */
        {"a contiguous MDL chain", &c1, 1000 + ps, STATUS_SUCCESS, 2, 0},
        {"an MDL chain with a gap", &g1, 1000 + ps, STATUS_INVALID_PARAMETER, 0, 0},
        {"longer than the MDL", &last, 2, STATUS_INVALID_PARAMETER, 0, 0},
        {"zero length", &last, 0, STATUS_INVALID_PARAMETER, 0, 0},
        {"no MDL", NULL, 10, STATUS_INVALID_PARAMETER, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int before = tl_failures;
        size = need + 64;
        NTSTATUS st = build_lam(s.ad, cases[i].mdl, cases[i].len, lam, &size, &fbo);
        CHECK_STATUS(st, cases[i].want);
        if (st == STATUS_SUCCESS) {
            CHECK_EQ(size, lam_bytes(cases[i].pages));
            CHECK_EQ(lam->AdapterPageCount, cases[i].pages);
            CHECK_EQ(fbo, cases[i].fbo);
            s.ad->Dispatch->NdkReleaseLAM(s.ad, lam);
        }
        if (tl_failures != before)
            fprintf(stderr, "    (NdkBuildLAM of %s)\n", cases[i].what);
    }

    /* Several live mappings of the same memory, released in any order. */
    NDK_LOGICAL_ADDRESS_MAPPING *l2 = calloc(1, need);
    REQUIRE(l2);
    size = need + 64;
    CHECK_STATUS(build_lam(s.ad, &m, 2 * ps, lam, &size, &fbo), STATUS_SUCCESS);
    size = need;
    CHECK_STATUS(build_lam(s.ad, &m, 2 * ps, l2, &size, &fbo), STATUS_SUCCESS);
    s.ad->Dispatch->NdkReleaseLAM(s.ad, lam);
    s.ad->Dispatch->NdkReleaseLAM(s.ad, l2);

    free(l2);
    free(lam);
    case_close(&s, buf);
}

/* ------------------------------------------------------------------------ */
/* Memory windows, close rules, extensions                                  */
/* ------------------------------------------------------------------------ */

NT_CASE(memory_window_create)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    NDK_MW *mw = new_mw(s.pd);
    NDK_MW *mw2 = new_mw(s.pd);
    REQUIRE(mw && mw2);
    CHECK_EQ(mw->Header.ObjectType, NdkObjectTypeMw);
    /* libndk: no token until a bind was posted (NdkGetRemoteTokenFromMw). */
    CHECK_EQ(mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0);
    nt_close(mw);
    nt_close(mw2);
    nt_side_close(&s);
}

static void ext_none(NDK_FN_QUERY_EXTENSION_INTERFACE fn, void *obj)
{
    GUID id = {0x12345678, 0x1234, 0x5678, {1, 2, 3, 4, 5, 6, 7, 8}};
    NDK_EXTENSION_INTERFACE ext;
    CHECK_STATUS(fn((NDK_OBJECT_HEADER *)obj, &id, (NDK_VERSION){1, 0}, &ext),
                 STATUS_NOT_SUPPORTED);
}

NT_CASE(query_extension_mr_mw)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    NDK_MR *mr = new_mr(s.pd, FALSE);
    NDK_MR *fr = new_mr(s.pd, TRUE);
    NDK_MW *mw = new_mw(s.pd);
    REQUIRE(mr && fr && mw);
    ext_none(mr->Dispatch->NdkQueryExtension, mr);
    ext_none(fr->Dispatch->NdkQueryExtension, fr);
    ext_none(mw->Dispatch->NdkQueryExtension, mw);
    nt_close(mw);
    nt_close(fr);
    nt_close(mr);
    nt_side_close(&s);
}

/* L8: the PD is the antecedent of its MRs and MWs; an MR alone closes at
 * once, registered or not. */
NT_CASE(close_rules_unbound)
{
    nt_side s;
    char *buf = case_open(&s, 1);
    REQUIRE(buf);
    NDK_MR *mr = new_mr(s.pd, FALSE);
    NDK_MR *fr = new_mr(s.pd, TRUE);
    NDK_MR *plain = new_mr(s.pd, FALSE);
    NDK_MW *mw = new_mw(s.pd);
    REQUIRE(mr && fr && plain && mw);
    CHECK_STATUS(reg_buf(mr, buf, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE), STATUS_SUCCESS);
    CHECK_STATUS(init_fr(fr, 4, TRUE), STATUS_SUCCESS);

    /* Unregistered, registered: nothing depends on them. */
    nt_op *c1 = nt_close_start(plain);
    CHECK_STATUS(c1->returned, STATUS_SUCCESS);

    nt_op *pdc = nt_close_start(s.pd);
    CHECK_STATUS(pdc->returned, STATUS_PENDING);
    CHECK(!tl_event_wait(&pdc->ev, 1, NT_QUIET_MS));
    nt_op *c2 = nt_close_start(mr);
    CHECK_STATUS(c2->returned, STATUS_SUCCESS);
    nt_close(fr);
    CHECK(!tl_event_wait(&pdc->ev, 1, NT_QUIET_MS));
    nt_close(mw);
    /* The last successor went: the PD's close completes. */
    CHECK(nt_close_wait(pdc, NT_WAIT_MS));
    s.pd = NULL;

    /* Creating under a closing PD is refused (libndk). */
    NDK_PD *pd2 = NULL;
    CHECK_STATUS(nt_create_pd(s.ad, &pd2), STATUS_SUCCESS);
    REQUIRE(pd2);
    NDK_MR *keep = new_mr(pd2, FALSE);
    nt_op *pc2 = nt_close_start(pd2);
    CHECK_STATUS(pc2->returned, STATUS_PENDING);
    NDK_MR *late = NULL;
    nt_op *cm = nt_op_new(NT_CREATE, "NdkCreateMr(closing PD)");
    nt_started(cm, pd2->Dispatch->NdkCreateMr(pd2, FALSE, nt_create_cb, cm, &late));
    CHECK(nt_finish(cm, NT_WAIT_MS) != STATUS_SUCCESS);
    nt_close(keep);
    CHECK(nt_close_wait(pc2, NT_WAIT_MS));

    case_close(&s, buf);
}

/* The next completion on cq within ms (polled: the fixture's CQ callback
 * does nothing); false if none came. */
static bool cq_next(NDK_CQ *cq, NDK_RESULT_EX *r, unsigned ms)
{
    uint64_t t0 = tl_now_ns();
    do {
        if (cq->Dispatch->NdkGetCqResultsEx(cq, r, 1) == 1)
            return true;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    } while (nt_ms_since(t0) < ms);
    return false;
}

/* 9.4: once a bind was posted, the MR is the window's antecedent; closing
 * the MR pends until the window is closed. Binding needs a connected QP. */
NT_CASE_FAM(close_mr_with_bound_window)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_establish(&c));

    char *buf = pages_alloc(2);
    REQUIRE(buf);
    NDK_MR *mr = new_mr(as.pd, FALSE);
    NDK_MW *mw = new_mw(as.pd);
    REQUIRE(mr && mw);
    CHECK_STATUS(reg_buf(mr, buf, 2 * page_size(), NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);

    /* A window over an MR without local write cannot grant remote write
     * (NdkBind): refused inline. */
    NDK_MR *ro = new_mr(as.pd, FALSE);
    REQUIRE(ro);
    CHECK_STATUS(reg_buf(ro, buf, page_size(), NDK_MR_FLAG_ALLOW_REMOTE_READ), STATUS_SUCCESS);

    int ctx = 0;
    NTSTATUS st = c.qa->Dispatch->NdkBind(c.qa, &ctx, mr, mw, buf + 16, 64,
                                          NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st == STATUS_SUCCESS) {
        /* The window's token is available once NdkBind returned
         * (NdkGetRemoteTokenFromMw). */
        UINT32 w1 = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
        CHECK(w1 != 0);
        /* The request names the MR and the MW until it completes: wait. */
        NDK_RESULT_EX r;
        CHECK(cq_next(as.cq, &r, NT_WAIT_MS));
        CHECK_STATUS(r.Status, STATUS_SUCCESS);
        CHECK(r.RequestContext == &ctx);
        CHECK_EQ(r.Type, NdkOperationTypeBind);
        CHECK_STATUS(c.qa->Dispatch->NdkBind(c.qa, NULL, ro, mw, buf, 64,
                                             NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                     STATUS_ACCESS_VIOLATION);
        /* VA outside the MR (NdkBind). */
        CHECK_STATUS(c.qa->Dispatch->NdkBind(c.qa, NULL, mr, mw, buf + 2 * page_size(), 1,
                                             NDK_OP_FLAG_ALLOW_REMOTE_READ),
                     STATUS_INVALID_PARAMETER);
        /* A normal MR is never invalidated with NdkInvalidate. */
        CHECK(c.qa->Dispatch->NdkInvalidate(c.qa, NULL, &mr->Header, 0) != STATUS_SUCCESS);
        CHECK_EQ(mw->Dispatch->NdkGetRemoteTokenFromMw(mw), w1);

        nt_op *mc = nt_close_start(mr);
        CHECK_STATUS(mc->returned, STATUS_PENDING);
        CHECK(!tl_event_wait(&mc->ev, 1, NT_QUIET_MS));
        nt_close(mw);
        CHECK(nt_close_wait(mc, NT_WAIT_MS));
        mr = NULL;
        mw = NULL;
    }
    nt_close(mw);
    nt_close(mr);
    nt_close(ro);
    nt_pair_conn_close(&as, &ps, L, &c);
    free(buf);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(register_tokens_deregister);
    RUN(register_flags_and_lengths);
    RUN(register_mdl_chains);
    RUN(fast_register_mr_init);
    RUN(build_lam_buffer_size_and_pages);
    RUN(memory_window_create);
    RUN(query_extension_mr_mw);
    RUN(close_rules_unbound);
    RUN_FAM(close_mr_with_bound_window);
    return tl_finish();
}
