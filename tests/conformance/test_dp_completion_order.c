/* Completions: the order they arrive in, and both NdkGetCqResults and
 * NdkGetCqResultsEx over split receive and initiator CQs. */
#include "dptest.h"

/*
 * Completion order (RFC 5040 section 5.5; docs/behaviour.md, Completions):
 * initiator completions come out in posting order even when a 1 MiB Read is
 * still outstanding ahead of Sends and Writes, and receives complete in the order
 * they were posted, each holding the message sent in that position.
 */
DP_CASE(completion_order)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_bufs b;
    REQUIRE(dp_bufs_reg(&x, &b, (dp_buf_sizes){16384, MiB, MiB + 4096, 8 * 256, 8192}, 121));
    for (int i = 0; i < 8; i++) {
        NDK_SGE r = dp_sge(&b.rr, (size_t)i * 256, 256);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(200 + i), &r, 1), STATUS_SUCCESS);
    }
    /* Each Send i carries 100 + i bytes of stream 121 from offset 1024 * i. */
    NDK_SGE sg[8];
    for (int i = 0; i < 8; i++)
        sg[i] = dp_sge(&b.ms, (size_t)i * 1024, (ULONG)(100 + i));
    NDK_SGE wg = dp_sge(&b.ms, 9000, 2000), big = dp_sge(&b.sink, 0, MiB),
            small = dp_sge(&b.sink, MiB, 4096);
    static const NDK_OPERATION_TYPE types[12] = {
        NdkOperationTypeSend, NdkOperationTypeWrite, NdkOperationTypeRead, NdkOperationTypeSend,
        NdkOperationTypeWrite, NdkOperationTypeSend, NdkOperationTypeRead, NdkOperationTypeSend,
        NdkOperationTypeSend, NdkOperationTypeSend, NdkOperationTypeSend, NdkOperationTypeSend};
    int si = 0;
    for (int i = 0; i < 12; i++) {
        NTSTATUS st;
        switch (types[i]) {
        case NdkOperationTypeSend: st = dp_send(c->qa, DP_CTX(i + 1), &sg[si++], 1, 0); break;
        case NdkOperationTypeWrite:
            st = dp_write(c->qa, DP_CTX(i + 1), &wg, 1, b.wb + i * 100, b.wr.rtok, 0);
            break;
        default:
            st = i == 2 ? dp_read(c->qa, DP_CTX(i + 1), &big, 1, b.s, b.src.rtok, 0)
                        : dp_read(c->qa, DP_CTX(i + 1), &small, 1, b.s + 4096, b.src.rtok, 0);
            break;
        }
        DP_CHECK_ST(st, STATUS_SUCCESS);
    }
    dp_check_posted_in_order(c, types, 12);
    dp_check_sends_in_order(c, 8, 200, b.rb, 256, 121);
    DP_CHECK_DATA(b.k, MiB, 122, 0);
    DP_CHECK_DATA(b.k + MiB, 4096, 122, 4096);
    dp_bufs_close(&b);
    dp_pair_close(&x);
}

/*
 * NDK_RESULT through NdkGetCqResults and NDK_RESULT_EX through
 * NdkGetCqResultsEx (NDK_RESULT, NDK_RESULT_EX), with separate receive and
 * initiator CQs: receives go to the receive CQ only, initiator requests to
 * the initiator CQ only; asking for fewer results than are queued returns
 * that many and leaves the rest, in order.
 */
DP_CASE(results_both_apis_split_cqs)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = true;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    dp_mr ms, rr;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 131);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 3 * 512, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(a && rb);
    for (int i = 0; i < 3; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 512, 512);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(10 + i), &r, 1), STATUS_SUCCESS);
    }
    for (int i = 0; i < 3; i++) {
        NDK_SGE g = dp_sge(&ms, (size_t)i * 1000, (ULONG)(7 + i));
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(20 + i), &g, 1, 0), STATUS_SUCCESS);
    }
    /* Initiator completions through NdkGetCqResults, two then one. */
    NDK_RESULT pr[3];
    CHECK_EQ(dp_wait_plain(c->cqa, pr, 2, DP_WAIT_MS), 2);
    CHECK_EQ(dp_wait_plain(c->cqa, pr + 2, 1, DP_WAIT_MS), 1);
    for (int i = 0; i < 3; i++) {
        DP_CHECK_ST(pr[i].Status, STATUS_SUCCESS);
        CHECK(pr[i].QPContext == dp_qpctx_a(c));
        CHECK(pr[i].RequestContext == DP_CTX(20 + i));
    }
    /* Receive completions: the first through NdkGetCqResults, the other two
     * through NdkGetCqResultsEx. */
    CHECK_EQ(dp_wait_plain(c->rcqp, pr, 1, DP_WAIT_MS), 1);
    DP_CHECK_ST(pr[0].Status, STATUS_SUCCESS);
    CHECK_EQ(pr[0].BytesTransferred, 7);
    CHECK(pr[0].QPContext == dp_qpctx_p(c));
    CHECK(pr[0].RequestContext == DP_CTX(10));
    NDK_RESULT_EX r[2];
    CHECK_EQ(dp_wait_ex(c->rcqp, r, 2, DP_WAIT_MS), 2);
    DP_CHECK_CQE(r[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(11), 8);
    DP_CHECK_CQE(r[1], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(12), 9);
    for (int i = 0; i < 3; i++)
        DP_CHECK_DATA(rb + i * 512, (size_t)(7 + i), 131, (size_t)i * 1000);
    /* Nothing went to the other CQ of either side. */
    DP_CHECK_QUIET(c->cqp);
    DP_CHECK_QUIET(c->rcqa);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->rcqp);
    /* An empty CQ returns 0. */
    CHECK_EQ(c->cqa->cq->Dispatch->NdkGetCqResults(c->cqa->cq, pr, 3), 0);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(completion_order);
    RUN_FAM(results_both_apis_split_cqs);
    return tl_finish();
}
