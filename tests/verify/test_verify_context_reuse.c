/* W8: a Send posted with the RequestContext of a Send whose completion was
 * not retrieved yet is reported (the post itself goes on). */
#include "vtest.h"

DP_CASE(request_context_reused)
{
    vt_begin();
    vt_sends v;
    REQUIRE(vt_sends_open(&v, 0));
    dp_pair *x = &v.x;
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(1), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(2), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(9), &v.ss, 1, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(9), &v.ss, 1, 0), STATUS_SUCCESS);
    char detail[256];
    snprintf(detail, sizeof detail, "RequestContext %p is still outstanding from an earlier NdkSend",
             DP_CTX(9));
    VT_CHECK_REPORT(0, "W8 (a request context names one outstanding request)", "NdkSend", "QP",
                    x->c->qa, x->a.ad, detail,
                    "give every outstanding request its own RequestContext (its completion "
                    "is matched by it)");
    vt_sends_close(&v, 2, 2);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(request_context_reused);
    return tl_finish();
}
