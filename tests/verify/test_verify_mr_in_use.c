/* M1: deregistering an MR that a posted (not yet completed) receive of a
 * connected QP names is reported; the deregistration goes on as without
 * the verifier. */
#include "vtest.h"

DP_CASE(deregister_under_receive)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr m;
    REQUIRE(dp_buf_reg(&x.p, &m, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    NDK_SGE sge = dp_sge(&m, 0, 64);
    DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(7), &sge, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_mr_dereg(&m), STATUS_SUCCESS);
    char detail[256];
    snprintf(detail, sizeof detail,
             "a NdkReceive (RequestContext %p) on QP %p names it and has not completed", DP_CTX(7),
             (void *)x.c->qp);
    VT_CHECK_REPORT(0, "M1 (no deregistration of memory that outstanding requests name)",
                    "NdkDeregisterMr", "MR", m.mr, x.p.ad, detail,
                    "wait for the completions of the requests that name the MR before "
                    "deregistering or closing it");
    dp_mr_close(&m);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(deregister_under_receive);
    return tl_finish();
}
