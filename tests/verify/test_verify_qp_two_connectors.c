/* N4: a QP given to a second connector while the first one still uses it
 * is reported; the provider refuses the second connect as it does without
 * the verifier. */
#include "vtest.h"

DP_CASE(qp_on_two_connectors)
{
    vt_begin();
    dp_side a, p;
    REQUIRE(vt_side_open(&a, 0, 0) && vt_side_open(&p, 0, 0));
    dp_conn *c = dp_conn_new(&a, &p, NULL);
    REQUIRE(c && dp_conn_listen(c));
    c->ca = dp_connector_new(&a);
    NDK_CONNECTOR *second = dp_connector_new(&a);
    REQUIRE(c->ca && second);
    NDK_SOCKADDR src;
    ULONG srclen = dp_loop(&src, 0);
    dp_req *rc = dp_req_new("NdkConnect");
    rc->started = true;
    rc->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa,
                                               c->laddrlen, 1, 1, NULL, 0, dp_req_cb, rc);
    DP_CHECK_ST(rc->returned, STATUS_PENDING);
    dp_req *r2 = dp_req_new("NdkConnect (second)");
    NTSTATUS st = second->Dispatch->NdkConnect(second, c->qa, &src.sa, srclen, &c->laddr.sa,
                                               c->laddrlen, 1, 1, NULL, 0, dp_req_cb, r2);
    CHECK(st != STATUS_SUCCESS && st != STATUS_PENDING);
    char detail[256];
    snprintf(detail, sizeof detail, "connector %p already uses this QP; the call returned %s",
             (void *)c->ca, ndk_status_name(st));
    VT_CHECK_REPORT(0, "N4 (a QP backs one connector at a time)", "NdkConnect", "QP", c->qa, a.ad,
                    detail, "give each connector its own QP");
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    REQUIRE(c->cp);
    DP_CHECK_ST(c->cp->Dispatch->NdkReject(c->cp, NULL, 0), STATUS_SUCCESS);
    CHECK(dp_finish(rc, STATUS_PENDING, DP_WAIT_MS) == STATUS_CONNECTION_REFUSED);
    dp_close(second);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(qp_on_two_connectors);
    return tl_finish();
}
