/* W7: a receive with more SGEs than the QP was created for is reported;
 * the provider fails it with STATUS_INVALID_PARAMETER. */
#include "vtest.h"

DP_CASE(too_many_sges)
{
    vt_begin();
    dp_cfg cfg = dp_cfg_default();
    cfg.rsge = 2;
    vt_lone_qp l;
    REQUIRE(vt_lone_qp_open(&l, &cfg));
    dp_side *s = &l.s;
    NDK_QP *qp = l.qp;
    dp_mr m;
    REQUIRE(dp_buf_reg(s, &m, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    NDK_SGE sge[3] = {dp_sge(&m, 0, 16), dp_sge(&m, 16, 16), dp_sge(&m, 32, 16)};
    DP_CHECK_ST(dp_recv(qp, DP_CTX(1), sge, 3), STATUS_INVALID_PARAMETER);
    VT_CHECK_REPORT(0, "W7 (SGE count and lengths within the queue's and adapter's limits)",
                    "NdkReceive", "QP", qp, s->ad,
                    "3 SGEs, at most 2 allowed; the call returned STATUS_INVALID_PARAMETER",
                    "post at most the SGEs the queue was created for (and the adapter's "
                    "limit)");
    dp_mr_close(&m);
    vt_lone_qp_close(&l);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(too_many_sges);
    return tl_finish();
}
