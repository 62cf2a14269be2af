/* N2: NdkAccept a second time on a connector already accepted is reported;
 * the provider refuses it as it does without the verifier. */
#include "vtest.h"

DP_CASE(accept_twice)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    NDK_CONNECTOR *cp = x.c->cp;
    dp_req *r = dp_req_new("NdkAccept (again)");
    NTSTATUS st = cp->Dispatch->NdkAccept(cp, x.c->qp, 1, 1, NULL, 0, NULL, NULL, dp_req_cb, r);
    CHECK(st != STATUS_SUCCESS && st != STATUS_PENDING);
    char detail[256];
    snprintf(detail, sizeof detail,
             "the connector is answered already (Accept or CompleteConnect was called); the "
             "call returned %s", ndk_status_name(st));
    VT_CHECK_REPORT(0, "N2 (Accept, Reject and CompleteConnect once each, on the right side)",
                    "NdkAccept", "connector", cp, x.p.ad, detail,
                    "call NdkAccept once, on a connector from a connect event");
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(accept_twice);
    return tl_finish();
}
