/* N1: NdkGetConnectionData outside its window. On a connector that never
 * connected the provider refuses it; after NdkCompleteConnect it is
 * reported and keeps working, as Windows providers let it. */
#include "vtest.h"

DP_CASE(connection_data_outside_window)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    NDK_CONNECTOR *fresh = dp_connector_new(&x.a);
    REQUIRE(fresh);
    ULONG len = 0;
    DP_CHECK_ST(fresh->Dispatch->NdkGetConnectionData(fresh, NULL, NULL, NULL, &len),
                STATUS_INVALID_DEVICE_STATE);
    VT_CHECK_REPORT(0, "N1 (NdkGetConnectionData only inside its window)", "NdkGetConnectionData",
                    "connector", fresh, x.a.ad,
                    "the connector never connected; the call returned "
                    "STATUS_INVALID_DEVICE_STATE",
                    "call it after NdkConnect completed, until NdkCompleteConnect or "
                    "NdkReject");
    vt_begin();
    len = 0;
    NDK_CONNECTOR *ca = x.c->ca;
    ULONG ird = 0, ord = 0;
    NTSTATUS st = ca->Dispatch->NdkGetConnectionData(ca, &ird, &ord, NULL, &len);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    CHECK(ird == x.c->ird_a && ord == x.c->ord_a);
    char detail[256];
    snprintf(detail, sizeof detail,
             "called after NdkCompleteConnect (a provider may have freed the peer's data by "
             "then); the call returned %s", ndk_status_name(st));
    VT_CHECK_REPORT(0, "N1 (NdkGetConnectionData only inside its window)", "NdkGetConnectionData",
                    "connector", ca, x.a.ad, detail,
                    "call it after NdkConnect completed, until NdkCompleteConnect or "
                    "NdkReject");
    dp_close(fresh);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(connection_data_outside_window);
    return tl_finish();
}
