/* C8: a CQ that overflows is reported with its depth and the requests
 * outstanding on the queues that complete into it (seen by the
 * notification of an ERRORS arm). */
#include "vtest.h"

DP_CASE(cq_overflow_reported)
{
    vt_begin();
    dp_cfg cfg = dp_cfg_default();
    cfg.cqd = 2;
    cfg.split_cq = true;
    dp_pair x;
    REQUIRE(vt_pair_open(&x, &cfg));
    dp_mr rm, sm;
    REQUIRE(dp_buf_reg(&x.p, &rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    REQUIRE(dp_buf_reg(&x.a, &sm, 64, 0, 2));
    NDK_SGE rs = dp_sge(&rm, 0, 64), ss = dp_sge(&sm, 0, 64);
    for (uintptr_t i = 0; i < 4; i++)
        DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(10 + i), &rs, 1), STATUS_SUCCESS);
    dp_arm(x.c->rcqp, NDK_CQ_NOTIFY_ERRORS);
    /* The third overflows the CQ and the QPs fail: a later post may be
     * refused already. */
    for (uintptr_t i = 0; i < 4; i++)
        dp_send(x.c->qa, DP_CTX(20 + i), &ss, 1, NDK_OP_FLAG_SILENT_SUCCESS);
    VT_CHECK_REPORT(DP_WAIT_MS, "C8 (a CQ is deep enough for every completion it is owed)",
                    "NdkCqNotificationCallback", "CQ", x.c->rcqp->cq, x.p.ad,
                    "the CQ overflowed: depth 2, 4 request(s) outstanding on its queues "
                    "(signalled or not); its QPs fail with a local error",
                    "create the CQ (or NdkResizeCq it) at least as deep as the queues that "
                    "complete into it, and retrieve its completions before they pile up");
    dp_mr_close(&rm);
    dp_mr_close(&sm);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(cq_overflow_reported);
    return tl_finish();
}
