/* The request flags that change how posts complete: SILENT_SUCCESS, DEFER
 * chains, and a post failing after DEFER posts. libndk choices relied on are
 * marked "libndk:". */
#include "dptest.h"

/* SILENT_SUCCESS (NDK_OP_FLAG_SILENT_SUCCESS): a Send, a Write and a Read that
 * succeed leave no CQE; the signalled Send posted after them does, and by then
 * (completions in posting order) the silent Read's data is in its sink. */
DP_CASE(silent_success)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_bufs b;
    REQUIRE(dp_bufs_reg(&x, &b, (dp_buf_sizes){4096, 100000, 100000, 8192, 4096}, 71));
    NDK_SGE r1 = dp_sge(&b.rr, 0, 4096), r2 = dp_sge(&b.rr, 4096, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &r1, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), &r2, 1), STATUS_SUCCESS);
    NDK_SGE g1 = dp_sge(&b.ms, 0, 1000), g2 = dp_sge(&b.ms, 1000, 500),
            g3 = dp_sge(&b.ms, 2000, 10);
    NDK_SGE ks = dp_sge(&b.sink, 0, 100000);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(11), &g1, 1, NDK_OP_FLAG_SILENT_SUCCESS), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(12), &g2, 1, b.wb, b.wr.rtok, NDK_OP_FLAG_SILENT_SUCCESS),
                STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(13), &ks, 1, b.s, b.src.rtok, NDK_OP_FLAG_SILENT_SUCCESS),
                STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(14), &g3, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(14), -1);
    DP_CHECK_DATA(b.k, 100000, 72, 0);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 1000);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(2), 10);
    DP_CHECK_DATA(b.rb, 1000, 71, 0);
    DP_CHECK_DATA(b.rb + 4096, 10, 71, 2000);
    DP_CHECK_DATA(b.wb, 500, 71, 1000);
    DP_CHECK_QUIET(c->cqa);
    dp_bufs_close(&b);
    dp_pair_close(&x);
}

/* DEFER chains (10.3 D1-D5): Sends, a Write and a Read posted with DEFER,
 * then a Send without it: all six complete, in posting order, and the
 * receiver gets the four messages in order. */
DP_CASE(defer_chain)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_bufs b;
    REQUIRE(dp_bufs_reg(&x, &b, (dp_buf_sizes){8192, 8192, 8192, 4 * 1024, 8192}, 81));
    for (int i = 0; i < 4; i++) {
        NDK_SGE r = dp_sge(&b.rr, (size_t)i * 1024, 1024);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100 + i), &r, 1), STATUS_SUCCESS);
    }
    NDK_SGE g[4];
    for (int i = 0; i < 4; i++)
        g[i] = dp_sge(&b.ms, (size_t)i * 1024, (ULONG)(100 + i));
    NDK_SGE wg = dp_sge(&b.ms, 5000, 3000), kg = dp_sge(&b.sink, 0, 8192);
    ULONG D = NDK_OP_FLAG_DEFER;
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), &g[0], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), &g[1], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), &wg, 1, b.wb, b.wr.rtok, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), &kg, 1, b.s, b.src.rtok, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), &g[2], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(6), &g[3], 1, 0), STATUS_SUCCESS);
    static const NDK_OPERATION_TYPE types[6] = {NdkOperationTypeSend, NdkOperationTypeSend,
                                                NdkOperationTypeWrite, NdkOperationTypeRead,
                                                NdkOperationTypeSend, NdkOperationTypeSend};
    dp_check_posted_in_order(c, types, 6);
    dp_check_sends_in_order(c, 4, 100, b.rb, 1024, 81);
    DP_CHECK_DATA(b.wb, 3000, 81, 5000);
    DP_CHECK_DATA(b.k, 8192, 82, 0);
    dp_bufs_close(&b);
    dp_pair_close(&x);
}

/*
 * A post that fails inline after DEFER posts hands the requests deferred
 * before it on first (D4, docs/rules.md), whatever made it fail: an unknown
 * flag bit, a NULL SGE array on Read, Send or Write, a NULL page array on
 * FastRegister, a NULL object on Invalidate. The Send deferred before it
 * must go out and complete with no further post.
 * The passive side speaks first: once the active side has heard its peer,
 * its post-connect nudges (zero-length Writes 20 and 200 ms after
 * NdkCompleteConnect, which also push queued requests out) do nothing, so
 * nothing but the failing post can send the deferred Send, and the 600 ms
 * wait cannot be rescued by a nudge.
 */
#define DEFER_FLUSH_MS 600u
enum { F_SEND_FLAG, F_SENDINV_FLAG, F_WRITE_FLAG, F_READ_FLAG, F_BIND_FLAG, F_FR_FLAG, F_INV_FLAG,
       F_SEND_NULL, F_WRITE_NULL, F_READ_NULL, F_FR_NULL, F_INV_NULL, F_COUNT };

DP_CASE(defer_chain_inline_failure)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, rr, ps, ar, wr, src, sink, mwbase;
    uint8_t *a = dp_buf_reg(&x.a, &ms, F_COUNT * 256, 0, 141);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, F_COUNT * 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *pb = dp_buf_reg(&x.p, &ps, 64, 0, 142);
    uint8_t *ab = dp_buf_reg(&x.a, &ar, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.p, &src, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 143);
    uint8_t *kb = dp_buf_reg(&x.a, &sink, 64, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(a && rb && pb && ab && wb && sb && kb && mb && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));

    /* The passive side speaks first. */
    NDK_SGE r0 = dp_sge(&ar, 0, 64), s0 = dp_sge(&ps, 0, 64);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(900), &r0, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(901), &s0, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(900), 64);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(901), -1);

    const ULONG D = NDK_OP_FLAG_DEFER, BAD = 0x400u;
    NDK_SGE w1 = dp_sge(&ms, 0, 16), k1 = dp_sge(&sink, 0, 16);
    for (int i = 0; i < F_COUNT; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 256, 256), g = dp_sge(&ms, (size_t)i * 256, 100 + i);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100 + i), &r, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(200 + i), &g, 1, D), STATUS_SUCCESS);
        NDK_QP *q = c->qa;
        void *ctx = DP_CTX(300 + i);
        NTSTATUS st = STATUS_SUCCESS;
        switch (i) {
        case F_SEND_FLAG: st = dp_send(q, ctx, &w1, 1, D | BAD); break;
        case F_SENDINV_FLAG: st = q->Dispatch->NdkSendAndInvalidate(q, ctx, &w1, 1, D | BAD, 0x1234); break;
        case F_WRITE_FLAG: st = dp_write(q, ctx, &w1, 1, wb, wr.rtok, D | BAD); break;
        case F_READ_FLAG: st = dp_read(q, ctx, &k1, 1, sb, src.rtok, D | BAD); break;
        case F_BIND_FLAG:
            st = q->Dispatch->NdkBind(q, ctx, mwbase.mr, mw, mb, 4096, NDK_OP_FLAG_ALLOW_REMOTE_READ | D | BAD);
            break;
        case F_FR_FLAG: st = dp_frmr_post(q, ctx, &f, fb, D | BAD); break;
        case F_INV_FLAG: st = q->Dispatch->NdkInvalidate(q, ctx, &f.mr->Header, D | BAD); break;
        case F_SEND_NULL: st = dp_send(q, ctx, NULL, 1, D); break;
        case F_WRITE_NULL: st = dp_write(q, ctx, NULL, 1, wb, wr.rtok, D); break;
        case F_READ_NULL: st = dp_read(q, ctx, NULL, 1, sb, src.rtok, D); break;
        case F_FR_NULL:
            st = q->Dispatch->NdkFastRegister(q, ctx, f.mr, 1, NULL, 0, 4096, fb, D);
            break;
        case F_INV_NULL: st = q->Dispatch->NdkInvalidate(q, ctx, NULL, D); break;
        }
        DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
        NDK_RESULT_EX e;
        if (dp_wait_ex(c->cqa, &e, 1, DEFER_FLUSH_MS) != 1) {
            tl_failures++;
            fprintf(stderr, "[%s] failing post %d: the Send deferred before it never completed\n",
                    tl_current, i);
            break; /* stranded: later cases would only repeat it */
        }
        DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(200 + i), -1);
        EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100 + i),
                   100 + i);
        DP_CHECK_DATA(rb + (size_t)i * 256, 100 + i, 141, (size_t)i * 256);
    }
    DP_CHECK_QUIET(c->cqa);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&ps);
    dp_mr_close(&ar);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(silent_success);
    RUN_FAM(defer_chain);
    RUN_FAM(defer_chain_inline_failure);
    return tl_finish();
}
