/* W8: a Send posted with the RequestContext of a Send whose completion was
 * not retrieved yet is reported (the post itself goes on). */
#include "vtest.h"

DP_CASE(request_context_reused)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr rm, sm;
    REQUIRE(dp_buf_reg(&x.p, &rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    REQUIRE(dp_buf_reg(&x.a, &sm, 64, 0, 2));
    NDK_SGE rs = dp_sge(&rm, 0, 64), ss = dp_sge(&sm, 0, 64);
    DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(2), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(9), &ss, 1, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(9), &ss, 1, 0), STATUS_SUCCESS);
    char want[1024], detail[256];
    snprintf(detail, sizeof detail, "RequestContext %p is still outstanding from an earlier NdkSend",
             DP_CTX(9));
    VT_CHECK_LINE(vt_wait("W8", 0),
                  vt_line(want, sizeof want, "W8 (a request context names one outstanding request)",
                          "NdkSend", "QP", x.c->qa, x.a.ad, detail,
                          "give every outstanding request its own RequestContext (its completion "
                          "is matched by it)"));
    NDK_RESULT_EX r[2];
    CHECK(dp_wait_ex(x.c->cqa, r, 2, DP_WAIT_MS) == 2);
    CHECK(dp_wait_ex(x.c->cqp, r, 2, DP_WAIT_MS) == 2);
    dp_mr_close(&rm);
    dp_mr_close(&sm);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(request_context_reused);
    return tl_finish();
}
