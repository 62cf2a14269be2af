/* M5: deregistering an MR while a window bound over it is still valid is
 * reported on the MR. */
#include "vtest.h"

DP_CASE(deregister_under_window)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr m;
    uint8_t *buf = dp_buf_reg(&x.a, &m, 4096,
                              NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ, 1);
    REQUIRE(buf);
    NDK_MW *mw = dp_mw_new(&x.a);
    REQUIRE(mw);
    DP_CHECK_ST(x.c->qa->Dispatch->NdkBind(x.c->qa, DP_CTX(1), m.mr, mw, buf, 4096,
                                           NDK_OP_FLAG_ALLOW_REMOTE_READ),
                STATUS_SUCCESS);
    NDK_RESULT_EX r;
    CHECK(dp_wait_ex(x.c->cqa, &r, 1, DP_WAIT_MS) == 1 && r.Status == STATUS_SUCCESS);
    DP_CHECK_ST(dp_mr_dereg(&m), STATUS_SUCCESS);
    char detail[256];
    snprintf(detail, sizeof detail,
             "MW %p is still bound over it; the window maps nothing from now on", (void *)mw);
    VT_CHECK_REPORT(0, "M5 (no deregistration of an MR under a bound window)", "NdkDeregisterMr",
                    "MR", m.mr, x.a.ad, detail,
                    "invalidate (NdkInvalidate) or close the windows bound over the MR "
                    "first");
    dp_close(mw);
    dp_mr_close(&m);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(deregister_under_window);
    return tl_finish();
}
