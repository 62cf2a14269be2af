/* Memory windows (NdkBind): a window bound on the QP gives remote access to
 * its range only, and invalidating it takes the access away. libndk choices
 * relied on are marked "libndk:". */
#include "dptest.h"

/*
 * Memory windows (NdkBind): a window bound over part of an MR that has
 * only local rights gives the peer remote read and write through the
 * window's token, limited to the window; after NdkInvalidate of the window,
 * a Read through its token fails.
 */
DP_CASE(bind_window)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    dp_mr base, ms, sink, rr;
    uint8_t *b = dp_buf_reg(&x.p, &base, 4 * pg, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 101);
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 102);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 2 * pg, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.p);
    REQUIRE(b && a && k && rb && mw);
    uint8_t *win = b + pg;
    size_t wlen = 2 * pg;
    DP_REQUIRE_ST(c->qp->Dispatch->NdkBind(c->qp, DP_CTX(1), base.mr, mw, win, wlen,
                                           NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                               NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                  STATUS_SUCCESS);
    UINT32 wt = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeBind, dp_qpctx_p(c), DP_CTX(1), -1);

    /* Write 100 bytes 50 bytes into the window, then the notification. */
    NDK_SGE g = dp_sge(&ms, 0, 100);
    dp_write_placed(c, &g, win + 50, wt, &rr);
    DP_CHECK_DATA(win + 50, 100, 102, 0);
    DP_CHECK_DATA(b, pg + 50, 101, 0);
    DP_CHECK_DATA(win + 150, 3 * pg - 150, 101, pg + 150);

    /* Read the whole window back. */
    NDK_SGE kg = dp_sge(&sink, 0, (ULONG)wlen);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(5), &kg, 1, win, wt, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(5), -1);
    CHECK(memcmp(k, win, wlen) == 0);

    /* Invalidate the window; the token no longer reads. */
    DP_CHECK_ST(c->qp->Dispatch->NdkInvalidate(c->qp, DP_CTX(6), &mw->Header, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_p(c), DP_CTX(6), -1);
    memset(k, 0x5C, 2 * pg);
    NDK_SGE k1 = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(7), &k1, 1, win, wt, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(7));
    DP_CHECK_BYTES(k, 2 * pg, 0x5C);
    dp_close(mw);
    dp_mr_close(&base);
    dp_mr_close(&ms);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(bind_window);
    return tl_finish();
}
