/* W10: a Send that arrives while the receiver has no receive posted is
 * reported on the receiving QP with how long it waited, once the grace
 * period ended and the connection is terminated (DDP "no buffer"). */
#include "vtest.h"

DP_CASE(send_without_receive)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr m;
    REQUIRE(dp_buf_reg(&x.a, &m, 64, 0, 1));
    NDK_SGE sge = dp_sge(&m, 0, 64);
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(1), &sge, 1, 0), STATUS_SUCCESS);
    char head[512];
    snprintf(head, sizeof head,
             "ndk verifier: W10 (a receive is posted before the peer's Send arrives): a Send from "
             "the peer on QP %p (adapter lo %p): the peer's Send found no receive posted and "
             "waited ", (void *)x.c->qp, (void *)x.p.ad);
    VT_CHECK_AROUND(vt_wait("W10", DP_WAIT_MS), head,
                    " ms for one: the grace period ended and the connection is terminated (DDP: no "
                    "buffer); instead: post receives before the peer may send (before NdkAccept or "
                    "NdkCompleteConnect, and again before each Send the protocol allows)");
    NDK_RESULT_EX r; /* the Send's completion, before its MR goes */
    CHECK(dp_wait_ex(x.c->cqa, &r, 1, DP_WAIT_MS) == 1);
    dp_mr_close(&m);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_without_receive);
    return tl_finish();
}
