/* NdkFastRegister from a LAM, and invalidation: remote access through the
 * registration, local SGEs across pages that are not adjacent, the LAM
 * released before the registration executes, NdkSendAndInvalidate of a
 * fast-registered MR. libndk choices relied on are marked "libndk:". */
#include "dptest.h"

/* NdkFastRegister of f at base on c's passive QP, with request context
 * DP_CTX(ctx): accepted, and its one completion a success. False when the
 * post was refused. */
static bool fast_register(dp_conn *c, dp_frmr *f, unsigned ctx, void *base, ULONG flags)
{
    NTSTATUS st = dp_frmr_post(c->qp, DP_CTX(ctx), f, base, flags);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(ctx),
               -1);
    return true;
}

/*
 * SendAndInvalidate of the receiver's fast-registered MR (NdkSendAndInvalidate,
 * C2): the receive completes as NdkOperationTypeReceiveAndInvalidate with the
 * token in TypeSpecificCompletionOutput, the sender's as a Send; afterwards the
 * token is dead locally (an SGE with it is refused) and remotely (a Read
 * through it fails). A second round is retrieved with NdkGetCqResults, which
 * must return such a receive too. A fresh fast registration makes the same
 * token valid again (the MR keeps its token by default: test_frmr_token).
 */
DP_CASE(send_and_invalidate)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    /* Three pages with the region starting 256 bytes into the first. */
    uint8_t *area = dp_guarded(3 * pg, false, 0);
    uint8_t *tgt = area + 256;
    size_t tlen = 3 * pg - 256;
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, tgt, tlen, TRUE));
    ULONG rw = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
    REQUIRE(fast_register(c, &f, 10, tgt, rw));
    UINT32 tok1 = f.tok;

    dp_mr ms, mr, sink;
    uint8_t *src = dp_buf_reg(&x.a, &ms, 4096, 0, 21);
    uint8_t *dst = dp_buf_reg(&x.p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *snk = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    REQUIRE(src && dst && snk);

    /* The registration works before it is invalidated: a Write through it. */
    NDK_SGE ws = dp_sge(&ms, 0, 100);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(11), &ws, 1, tgt + 10, tok1, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(&mr, 0, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(12), &rs, 1), STATUS_SUCCESS);
    NDK_SGE ss = dp_sge(&ms, 200, 32);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(13), &ss, 1, 0, tok1),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(11), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(13), -1);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqp, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceiveAndInvalidate, dp_qpctx_p(c), DP_CTX(12),
                 32);
    CHECK_EQ(e.TypeSpecificCompletionOutput, tok1);
    DP_CHECK_DATA(dst, 32, 21, 200);
    DP_CHECK_DATA(tgt + 10, 100, 21, 0); /* the Write was placed before the Send completed */

    /* Locally dead: a receive SGE naming the invalidated registration. */
    NDK_SGE dead;
    memset(&dead, 0, sizeof dead);
    dead.VirtualAddress = tgt;
    dead.Length = 64;
    dead.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(14), &dead, 1), STATUS_ACCESS_VIOLATION);

    /* Second round, read through NdkGetCqResults (C2). */
    REQUIRE(fast_register(c, &f, 15, tgt, rw));
    UINT32 tok2 = f.tok;
    CHECK_EQ(tok2, tok1);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(16), &rs, 1), STATUS_SUCCESS);
    NDK_SGE ss2 = dp_sge(&ms, 300, 48);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(17), &ss2, 1, 0, tok2),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(17), -1);
    NDK_RESULT pr;
    REQUIRE(dp_wait_plain(c->cqp, &pr, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(pr.Status, STATUS_SUCCESS);
    CHECK_EQ(pr.BytesTransferred, 48);
    CHECK(pr.RequestContext == DP_CTX(16));
    CHECK(pr.QPContext == dp_qpctx_p(c));
    DP_CHECK_DATA(dst, 48, 21, 300);

    /* Remotely dead: a Read through the invalidated token fails, and only
     * the sink's own bytes could have been touched (none are). libndk: a
     * Read whose source is invalid completes with STATUS_ACCESS_VIOLATION. */
    memset(snk, 0x5C, 4096);
    NDK_SGE sk = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(18), &sk, 1, tgt, tok2, 0), STATUS_SUCCESS);
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(18));
    DP_CHECK_BYTES(snk, 4096, 0x5C);

    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_mr_close(&sink);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

/*
 * Fast registration (NdkFastRegister): pages from NdkBuildLAM of a buffer that
 * starts 300 bytes into a page, registered at a BaseVirtualAddress of the
 * consumer's choosing (FBO + n * PAGE_SIZE, not the buffer's address): the
 * peer's Write at base + off lands at buffer + off. NdkInvalidate then kills
 * the token for the peer.
 */
DP_CASE(fast_register_write)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    uint8_t *area = dp_guarded(4 * pg, false, 0xEE);
    uint8_t *buf = area + 300;
    size_t len = 3 * pg;
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, len, TRUE));
    CHECK_EQ(f.fbo, 300);
    uint8_t *base = (uint8_t *)(uintptr_t)(((uint64_t)0x100000 * pg) + f.fbo);
    REQUIRE(fast_register(c, &f, 1, base,
                          NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ));
    dp_mr ms, rr, sink;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 8192, 0, 111);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 8192, DP_SINK_FLAGS, 0);
    REQUIRE(a && rb && k);
    NDK_SGE g = dp_sge(&ms, 0, 5000);
    dp_write_placed(c, &g, base + 1000, f.tok, &rr);
    DP_CHECK_DATA(buf + 1000, 5000, 111, 0);
    DP_CHECK_BYTES(area, 1300, 0xEE);
    DP_CHECK_BYTES(buf + 6000, 4 * pg - 300 - 6000, 0xEE);

    /* A Read through the same mapping returns what was written. */
    NDK_SGE kg = dp_sge(&sink, 0, 5000);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(5), &kg, 1, base + 1000, f.tok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(5), -1);
    DP_CHECK_DATA(k, 5000, 111, 0);

    DP_CHECK_ST(c->qp->Dispatch->NdkInvalidate(c->qp, DP_CTX(6), &f.mr->Header, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_p(c), DP_CTX(6), -1);
    NDK_SGE k1 = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(7), &k1, 1, base + 1000, f.tok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(7));
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&sink);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

/*
 * libndk: the pages of a fast registration are checked again when it
 * executes (docs/behaviour.md, Memory). Posted with DEFER, then its LAM
 * released before the next post rings the doorbell: the FastRegister
 * completes with STATUS_INVALID_PARAMETER and maps nothing (a Send from
 * it fails), and the request behind it goes out as usual.
 */
DP_CASE(fast_register_lam_released_before_execution)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    uint8_t *buf = dp_guarded(4096, false, 0);
    dp_frmr f;
    dp_mr rr;
    uint8_t *rb = dp_buf_reg(&x.a, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(rb && dp_frmr_init(&x.p, &f, buf, 4096, TRUE));
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(1), &f, buf, NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_DEFER),
                  STATUS_SUCCESS);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, f.lam);
    f.lam = NULL;
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(2), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(3), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_INVALID_PARAMETER, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(2), 0);
    NDK_SGE fs;
    memset(&fs, 0, sizeof fs);
    fs.VirtualAddress = buf;
    fs.Length = 64;
    fs.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    /* Refused inline, or (the MR's newest token was handed out by a post
     * that never took effect, which the post-time check cannot tell from
     * one still queued) when the Send executes. */
    NTSTATUS st = dp_send(c->qp, DP_CTX(4), &fs, 1, 0);
    if (st == STATUS_SUCCESS)
        EXPECT_ONE(c->cqp, STATUS_ACCESS_VIOLATION, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(4), -1);
    else
        DP_CHECK_ST(st, STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqp);
    dp_frmr_close(&f);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/*
 * Local SGEs in a fast-registered MR whose pages are not adjacent in memory
 * (5.9.5: consecutive pages need not be contiguous): the region is page 2,
 * then page 0, of a three-page buffer, and every SGE crosses from one to
 * the other. A Send and a Write gather across the break, a receive and a
 * Read sink are filled across it, byte for byte, and page 1 (which follows
 * page 0 in memory, not in the region) is never touched.
 */
#define FR_BYTE(buf, pg, k) ((k) < (pg) ? (buf) + 2 * (pg) + (k) : (buf) + (k) - (pg))

/* The region's bytes [o, o + n) are stream `seed` from `from`. */
static void check_region(const uint8_t *buf, size_t pg, size_t o, size_t n, uint32_t seed, size_t from)
{
    size_t first = pg - o; /* bytes in page 2 */
    DP_CHECK_DATA(FR_BYTE(buf, pg, o), first, seed, from);
    DP_CHECK_DATA(FR_BYTE(buf, pg, pg), n - first, seed, from + first);
}

DP_CASE(fast_register_local_across_pages)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    uint8_t *buf = dp_guarded(3 * pg, false, 0xEE);
    dp_fill(buf, pg, 160, 0);
    dp_fill(buf + 2 * pg, pg, 160, 2 * pg);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, 3 * pg, TRUE));
    NDK_LOGICAL_ADDRESS pages[2] = {f.lam->AdapterPageArray[2], f.lam->AdapterPageArray[0]};
    uint8_t *va = (uint8_t *)(uintptr_t)((uint64_t)0x200000 * pg);
    DP_REQUIRE_ST(c->qp->Dispatch->NdkFastRegister(
                      c->qp, DP_CTX(1), f.mr, 2, pages, 0, 2 * pg, va,
                      NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK),
                  STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    UINT32 lt = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    NDK_SGE across;
    memset(&across, 0, sizeof across);
    across.MemoryRegionToken = lt;
    dp_mr ar, wr, src, ms;
    uint8_t *ab = dp_buf_reg(&x.a, &ar, 8192, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.a, &wr, 8192, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.a, &src, 8192, NDK_MR_FLAG_ALLOW_REMOTE_READ, 161);
    uint8_t *mb = dp_buf_reg(&x.a, &ms, 8192, 0, 162);
    REQUIRE(ab && wb && sb && mb);

    /* Gather: a Write of region bytes [pg - 1, pg + 2000), then a Send of
     * [pg - 1500, pg + 1500); its receive completing means the Write before
     * it was placed. */
    NDK_SGE rs = dp_sge(&ar, 0, 8192);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(2), &rs, 1), STATUS_SUCCESS);
    across.VirtualAddress = va + pg - 1;
    across.Length = 2001;
    DP_CHECK_ST(dp_write(c->qp, DP_CTX(3), &across, 1, wb + 10, wr.rtok, 0), STATUS_SUCCESS);
    across.VirtualAddress = va + pg - 1500;
    across.Length = 3000;
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(4), &across, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_p(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(2), 3000);
    DP_CHECK_DATA(ab, 1500, 160, 3 * pg - 1500);
    DP_CHECK_DATA(ab + 1500, 1500, 160, 0);
    DP_CHECK_DATA(wb + 10, 1, 160, 3 * pg - 1);
    DP_CHECK_DATA(wb + 11, 2000, 160, 0);

    /* Scatter: a Read into [pg - 2500, pg + 500), then a receive of
     * [pg - 700, pg + 3000). */
    across.VirtualAddress = va + pg - 2500;
    across.Length = 3000;
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(5), &across, 1, sb, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_p(c), DP_CTX(5), -1);
    check_region(buf, pg, pg - 2500, 3000, 161, 0);
    across.VirtualAddress = va + pg - 700;
    across.Length = 3700;
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(6), &across, 1), STATUS_SUCCESS);
    NDK_SGE ss = dp_sge(&ms, 0, 3700);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(7), &ss, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(7), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(6), 3700);
    check_region(buf, pg, pg - 700, 3700, 162, 0);
    /* Around them: the region's other bytes as they were, page 1 untouched. */
    DP_CHECK_DATA(buf + 2 * pg, pg - 2500, 160, 2 * pg);
    DP_CHECK_DATA(buf + 3000, pg - 3000, 160, 3000);
    DP_CHECK_BYTES(buf + pg, pg, 0xEE);

    dp_frmr_close(&f);
    dp_mr_close(&ar);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&ms);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_and_invalidate);
    RUN_FAM(fast_register_write);
    RUN_FAM(fast_register_lam_released_before_execution);
    RUN_FAM(fast_register_local_across_pages);
    return tl_finish();
}
