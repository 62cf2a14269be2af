/* N3: a connect event neither accepted, rejected nor closed within
 * VerifyConnectEventMs is reported on the passive connector. */
#include "vtest.h"

DP_CASE(connect_event_unanswered)
{
    vt_begin();
    dp_side a, p;
    REQUIRE(vt_side_open(&a, 100, 0) && vt_side_open(&p, 100, 0));
    dp_conn *c = dp_conn_new(&a, &p, NULL);
    REQUIRE(c && dp_conn_listen(c));
    c->ca = dp_connector_new(&a);
    REQUIRE(c->ca);
    NDK_SOCKADDR src;
    ULONG srclen = dp_loop(&src, 0);
    dp_req *rc = dp_req_new("NdkConnect");
    rc->started = true;
    rc->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa,
                                               c->laddrlen, 1, 1, NULL, 0, dp_req_cb, rc);
    DP_CHECK_ST(rc->returned, STATUS_PENDING);
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    REQUIRE(c->cp);
    char head[512];
    snprintf(head, sizeof head,
             "ndk verifier: N3 (a connect event is answered with Accept, Reject or close): "
             "NdkConnectEventCallback on connector %p (adapter lo %p): delivered ",
             (void *)c->cp, (void *)p.ad);
    VT_CHECK_AROUND(vt_wait("N3", DP_WAIT_MS), head,
                    " ms ago and neither accepted, rejected nor closed; the initiator is still "
                    "waiting and the listener's backlog entry stays taken; instead: answer every "
                    "connect event promptly: NdkAccept, NdkReject, or close the connector");
    DP_CHECK_ST(c->cp->Dispatch->NdkReject(c->cp, NULL, 0), STATUS_SUCCESS);
    CHECK(dp_finish(rc, STATUS_PENDING, DP_WAIT_MS) == STATUS_CONNECTION_REFUSED);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(connect_event_unanswered);
    return tl_finish();
}
