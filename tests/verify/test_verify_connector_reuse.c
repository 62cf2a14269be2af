/* X6: NdkConnect again on a connector whose connection was disconnected is
 * reported; the provider refuses it as it does without the verifier. */
#include "vtest.h"

DP_CASE(connector_reused_after_disconnect)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    NDK_CONNECTOR *ca = x.c->ca;
    /* Both sides disconnect: a graceful close. */
    dp_req *d = dp_req_new("NdkDisconnect");
    NTSTATUS ds = ca->Dispatch->NdkDisconnect(ca, dp_req_cb, d);
    DP_CHECK_ST(dp_disconnect(x.c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(d, ds, DP_WAIT_MS), STATUS_SUCCESS);
    NDK_SOCKADDR src;
    ULONG srclen = dp_loop(&src, 0);
    dp_req *r = dp_req_new("NdkConnect (again)");
    NTSTATUS st = ca->Dispatch->NdkConnect(ca, x.c->qa, &src.sa, srclen, &x.c->laddr.sa,
                                           x.c->laddrlen, 1, 1, NULL, 0, dp_req_cb, r);
    CHECK(st != STATUS_SUCCESS && st != STATUS_PENDING);
    char detail[256];
    snprintf(detail, sizeof detail,
             "this connector's connection attempt already ended; the call returned %s",
             ndk_status_name(st));
    VT_CHECK_REPORT(0, "X6 (disconnected connectors and QPs are not reused)", "NdkConnect",
                    "connector", ca, x.a.ad, detail,
                    "close the connector and create a new one for a new connection");
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(connector_reused_after_disconnect);
    return tl_finish();
}
