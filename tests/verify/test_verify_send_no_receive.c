/* W10: a Send that arrives while the receiver has no receive posted is
 * reported on the receiving QP (the connection is then terminated, DDP "no
 * buffer"). */
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
    char want[1024];
    VT_CHECK_LINE(vt_wait("W10", DP_WAIT_MS),
                  vt_line(want, sizeof want,
                          "W10 (a receive is posted before the peer's Send arrives)",
                          "a Send from the peer", "QP", x.c->qp, x.p.ad,
                          "the peer's Send waited 0 ms and found no receive posted; on iWARP the "
                          "connection is terminated (DDP: no buffer)",
                          "post receives before the peer may send (before NdkAccept or "
                          "NdkCompleteConnect, and again before each Send the protocol allows)"));
    dp_mr_close(&m);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_without_receive);
    return tl_finish();
}
