/* Request flag bits: an unknown NDK_OP_FLAG bit fails the post with
 * STATUS_INVALID_PARAMETER (libndk's choice); a known bit that a call does
 * not document is ignored. */
#include "dptest.h"

/* An unknown NDK_OP_FLAG bit: the next one after DEFER, and the top bit. */
#define UNKNOWN_FLAG_LOW 0x00000400u
#define UNKNOWN_FLAG_HIGH 0x80000000u

/*
 * Unknown flag bits (NDK_OP_FLAG_*; libndk: STATUS_INVALID_PARAMETER) on every
 * posting function that takes Flags: refused inline, no CQE, the QP keeps
 * working.
 */
DP_CASE(unknown_flags)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, wr, src, sink, mwbase;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 21);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *s = dp_buf_reg(&x.p, &src, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 22);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(a && wb && s && k && mb && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));
    NDK_SGE g = dp_sge(&ms, 0, 16), ks = dp_sge(&sink, 0, 16);
    static const ULONG bad[2] = {UNKNOWN_FLAG_LOW, UNKNOWN_FLAG_HIGH};
    for (int i = 0; i < 2; i++) {
        ULONG fl = bad[i];
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), &g, 1, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(2), &g, 1, fl, 0x12345678u),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), &g, 1, wb, wr.rtok, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), &ks, 1, s, src.rtok, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkBind(c->qa, DP_CTX(5), mwbase.mr, mw, mb, 4096,
                                             NDK_OP_FLAG_ALLOW_REMOTE_READ | fl),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_frmr_post(c->qa, DP_CTX(6), &f, fb, NDK_OP_FLAG_ALLOW_REMOTE_READ | fl),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkInvalidate(c->qa, DP_CTX(7), &f.mr->Header, fl),
                    STATUS_INVALID_PARAMETER);
    }
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    /* Still usable: the same requests without the bad bit. */
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(8), &g, 1, wb, wr.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(9), &ks, 1, s, src.rtok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e[2];
    DP_WAIT(c->cqa, e, 2);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(8), -1);
    DP_CHECK_CQE(e[1], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(9), -1);
    DP_CHECK_DATA(k, 16, 22, 0);
    CHECK(dp_roundtrip(c, 64, 23));
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_pair_close(&x);
}

/*
 * Known flag bits a call does not document (6.9 leaves them open and
 * suggests ignoring them; libndk does): each posting call with every
 * NDK_OP_FLAG_* bit outside its own set is accepted and does just what it
 * does without them. RDMA_READ_LOCAL_INVALIDATE on a Send leaves the
 * Send's token valid; SEND_AND_SOLICIT_EVENT on a Write, INLINE on a Read,
 * remote rights on an Invalidate change nothing.
 */
#define OP_FLAGS_ALL 0x3FFu
#define DOC_SEND                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT | \
     NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define DOC_WRITE (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define DOC_READ                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE | \
     NDK_OP_FLAG_DEFER)
#define DOC_BIND                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |      \
     NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER)
#define DOC_FASTREG (DOC_BIND | NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK)
#define DOC_INVALIDATE (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER)

DP_CASE(irrelevant_flags_ignored)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, rr, wr, src, sink, mwbase, mk;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 41);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 2 * 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 256, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.p, &src, 256, NDK_MR_FLAG_ALLOW_REMOTE_READ, 42);
    uint8_t *kb = dp_buf_reg(&x.a, &sink, 256, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 43);
    uint8_t *pk = dp_buf_reg(&x.p, &mk, 256, DP_SINK_FLAGS, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_fill(fb, 4096, 44, 0);
    dp_frmr f;
    REQUIRE(a && rb && wb && sb && kb && mb && pk && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));
    NDK_QP *q = c->qa;

    /* FastRegister: local write only, whatever else is set. */
    DP_CHECK_ST(dp_frmr_post(q, DP_CTX(1), &f, fb,
                             NDK_OP_FLAG_ALLOW_LOCAL_WRITE | (OP_FLAGS_ALL & ~DOC_FASTREG)),
                STATUS_SUCCESS);
    NDK_SGE fs;
    memset(&fs, 0, sizeof fs);
    fs.VirtualAddress = fb;
    fs.Length = 100;
    fs.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    /* Send from the fast registration, twice: the first one's
     * RDMA_READ_LOCAL_INVALIDATE must not have invalidated its token. */
    NDK_SGE r0 = dp_sge(&rr, 0, 256), r1 = dp_sge(&rr, 256, 256);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100), &r0, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(101), &r1, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(q, DP_CTX(2), &fs, 1, OP_FLAGS_ALL & ~DOC_SEND), STATUS_SUCCESS);
    NDK_RESULT_EX e[8];
    DP_WAIT(c->cqa, e, 2);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_a(c), DP_CTX(1), -1);
    DP_CHECK_CQE(e[1], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    DP_CHECK_ST(dp_send(q, DP_CTX(3), &fs, 1, 0), STATUS_SUCCESS);
    /* Write, Read, Bind. */
    NDK_SGE wg = dp_sge(&ms, 0, 200), kg = dp_sge(&sink, 0, 200);
    DP_CHECK_ST(dp_write(q, DP_CTX(4), &wg, 1, wb, wr.rtok, OP_FLAGS_ALL & ~DOC_WRITE), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(q, DP_CTX(5), &kg, 1, sb, src.rtok, OP_FLAGS_ALL & ~DOC_READ), STATUS_SUCCESS);
    DP_CHECK_ST(q->Dispatch->NdkBind(q, DP_CTX(6), mwbase.mr, mw, mb, 4096,
                                     NDK_OP_FLAG_ALLOW_REMOTE_READ | (OP_FLAGS_ALL & ~DOC_BIND)),
                STATUS_SUCCESS);
    DP_WAIT(c->cqa, e, 4);
    static const NDK_OPERATION_TYPE types[4] = {NdkOperationTypeSend, NdkOperationTypeWrite,
                                                NdkOperationTypeRead, NdkOperationTypeBind};
    for (int i = 0; i < 4; i++)
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, types[i], dp_qpctx_a(c), DP_CTX(3 + i), -1);
    DP_WAIT(c->cqp, e, 2);
    for (int i = 0; i < 2; i++) {
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100 + i), 100);
        DP_CHECK_DATA(rb + 256 * i, 100, 44, 0);
    }
    DP_CHECK_DATA(wb, 200, 41, 0);
    DP_CHECK_DATA(kb, 200, 42, 0);
    /* The window grants what its documented flags say: a Read through it. */
    NDK_SGE pks = dp_sge(&mk, 0, 256);
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(7), &pks, 1, mb + 100, mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0),
                STATUS_SUCCESS);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_p(c), DP_CTX(7), -1);
    DP_CHECK_DATA(pk, 256, 43, 100);
    /* Invalidate: the fast registration is gone for local use too. */
    DP_CHECK_ST(q->Dispatch->NdkInvalidate(q, DP_CTX(8), &f.mr->Header, OP_FLAGS_ALL & ~DOC_INVALIDATE),
                STATUS_SUCCESS);
    DP_WAIT(c->cqa, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_a(c), DP_CTX(8), -1);
    DP_CHECK_ST(dp_send(q, DP_CTX(9), &fs, 1, 0), STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_mr_close(&mk);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(unknown_flags);
    RUN_FAM(irrelevant_flags_ignored);
    return tl_finish();
}
