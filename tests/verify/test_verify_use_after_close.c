/* L9: a call on an object whose close was requested (the PD's close pends
 * while its QP is open, L8) is reported and fails with
 * STATUS_INVALID_DEVICE_STATE instead of reaching the provider. */
#include "vtest.h"

DP_CASE(call_after_close_requested)
{
    vt_begin();
    dp_side s;
    REQUIRE(vt_side_open(&s, 0, 0));
    dp_cq *cq = dp_cq_new(&s, 16);
    REQUIRE(cq);
    dp_cfg cfg = dp_cfg_default();
    NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, NULL, &cfg, NULL);
    REQUIRE(qp);
    NDK_PD *pd = s.pd;
    dp_req *close = dp_close_start(pd);
    DP_CHECK_ST(close->returned, STATUS_PENDING);

    NDK_MR *mr = NULL;
    DP_CHECK_ST(pd->Dispatch->NdkCreateMr(pd, FALSE, dp_create_cb, NULL, &mr),
                 STATUS_INVALID_DEVICE_STATE);
    char want[1024];
    VT_CHECK_LINE(vt_wait("L9", 0),
                  vt_line(want, sizeof want, "L9 (no use of an object after its close)",
                          "NdkCreateMr", "PD", pd, s.ad,
                          "its close is pending; the call fails with STATUS_INVALID_DEVICE_STATE",
                          "make no call on an object once its close was called"));
    /* Once per object and rule. */
    DP_CHECK_ST(pd->Dispatch->NdkCreateMr(pd, FALSE, dp_create_cb, NULL, &mr),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK(vt_count() == 1);

    dp_close(qp);
    CHECK(dp_close_wait(close));
    s.pd = NULL;
    dp_cq_close(cq);
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(call_after_close_requested);
    return tl_finish();
}
