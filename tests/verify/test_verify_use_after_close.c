/* L9: a call on an object whose close was requested (the PD's close pends
 * while its QP is open, L8) is reported and fails with
 * STATUS_INVALID_DEVICE_STATE instead of reaching the provider. */
#include "vtest.h"

DP_CASE(call_after_close_requested)
{
    vt_begin();
    dp_cfg cfg = dp_cfg_default();
    vt_lone_qp l;
    REQUIRE(vt_lone_qp_open(&l, &cfg));
    dp_side *s = &l.s;
    NDK_QP *qp = l.qp;
    NDK_PD *pd = s->pd;
    dp_req *close = dp_close_start(pd);
    DP_CHECK_ST(close->returned, STATUS_PENDING);

    NDK_MR *mr = NULL;
    DP_CHECK_ST(pd->Dispatch->NdkCreateMr(pd, FALSE, dp_create_cb, NULL, &mr),
                 STATUS_INVALID_DEVICE_STATE);
    VT_CHECK_REPORT(0, "L9 (no use of an object after its close)", "NdkCreateMr", "PD", pd, s->ad,
                    "its close is pending; the call fails with STATUS_INVALID_DEVICE_STATE",
                    "make no call on an object once its close was called");
    /* Once per object and rule. */
    DP_CHECK_ST(pd->Dispatch->NdkCreateMr(pd, FALSE, dp_create_cb, NULL, &mr),
                 STATUS_INVALID_DEVICE_STATE);
    CHECK(vt_count() == 1);

    /* The QP's close lets the PD's pending close complete. */
    dp_close(qp);
    l.qp = NULL;
    CHECK(dp_close_wait(close));
    s->pd = NULL;
    vt_lone_qp_close(&l);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(call_after_close_requested);
    return tl_finish();
}
