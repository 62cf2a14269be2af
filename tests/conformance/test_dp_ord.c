/* The outbound read limit (ORD): more Reads than the negotiated ORD wait
 * for a free slot instead of overrunning the peer's IRD, and all complete in
 * order; with ORD 0, NdkRead fails inline (libndk's choice:
 * STATUS_INVALID_DEVICE_STATE) and the other requests still work. */
#include "dptest.h"

/*
 * ORD enforcement (docs/behaviour.md, IRD / ORD): the active side asks for
 * ORD 8, the passive side accepts with IRD 2, so the effective ORD is 2.
 * Posting ORD + 3 Reads of 1 MiB each must still work: the extra ones wait for a
 * free slot instead of overrunning the peer's IRD (which would end the
 * connection). All complete in order, with the right data, and a Send posted
 * behind them completes after them.
 */
DP_CASE(ord_enforcement)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.ird = 8;
    cfg.ord = 8;
    cfg.p_ird = 2;
    cfg.p_ord = 8;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    CHECK_EQ(c->ord_a, 2);
    CHECK_EQ(c->ird_p, 2);
    ULONG ord = c->ord_a ? c->ord_a : 1;
    ULONG nreads = ord + 3;
    dp_mr src, sink, ms, rr;
    uint8_t *s = dp_buf_reg(&x.p, &src, (size_t)nreads * MiB, NDK_MR_FLAG_ALLOW_REMOTE_READ, 51);
    uint8_t *k = dp_buf_reg(&x.a, &sink, (size_t)nreads * MiB, DP_SINK_FLAGS, 0);
    uint8_t *a = dp_buf_reg(&x.a, &ms, 64, 0, 52);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(s && k && a && rb);
    memset(k, 0, (size_t)nreads * MiB);
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100), &rs, 1), STATUS_SUCCESS);
    /* Read i fetches source MiB (nreads - 1 - i) into sink MiB i. */
    for (ULONG i = 0; i < nreads; i++) {
        NDK_SGE ks = dp_sge(&sink, (size_t)i * MiB, MiB);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(i + 1), &ks, 1, s + (size_t)(nreads - 1 - i) * MiB,
                            src.rtok, 0),
                    STATUS_SUCCESS);
    }
    NDK_SGE g = dp_sge(&ms, 0, 64);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(99), &g, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e[16];
    ULONG n = dp_wait_ex(c->cqa, e, nreads + 1, DP_WAIT_MS);
    CHECK_EQ(n, nreads + 1);
    for (ULONG i = 0; i < n && i < nreads; i++)
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(i + 1), -1);
    if (n == nreads + 1)
        DP_CHECK_CQE(e[nreads], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(99),
                     -1);
    for (ULONG i = 0; i < nreads; i++)
        DP_CHECK_DATA(k + (size_t)i * MiB, MiB, 51, (size_t)(nreads - 1 - i) * MiB);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100), 64);
    /* The connection survived: nobody saw a disconnect. */
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
    CHECK_EQ(tl_event_count(&c->disc_p), 0);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/* Negotiated ORD 0 (the peer accepted with IRD 0): NdkRead cannot be served
 * and fails inline (libndk: STATUS_INVALID_DEVICE_STATE), with no CQE; the
 * other requests still work. */
DP_CASE(read_with_ord_zero)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.p_ird = 0;
    cfg.p_ord = 0;
    cfg.ird = 0;
    cfg.ord = 0;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    CHECK_EQ(c->ord_a, 0);
    dp_mr src, sink;
    uint8_t *s = dp_buf_reg(&x.p, &src, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 61);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    REQUIRE(s && k);
    NDK_SGE ks = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(1), &ks, 1, s, src.rtok, 0), STATUS_INVALID_DEVICE_STATE);
    DP_CHECK_QUIET(c->cqa);
    CHECK(dp_roundtrip(c, 32, 62));
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(ord_enforcement);
    RUN_FAM(read_with_ord_zero);
    return tl_finish();
}
