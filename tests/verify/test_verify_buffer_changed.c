/* W9: the source buffer of a Send written by the consumer between the post
 * and the retrieval of its completion is reported when the completion is
 * retrieved (the checksum taken at post time no longer matches). */
#include "vtest.h"

DP_CASE(send_buffer_written_before_completion)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr rm, sm;
    REQUIRE(dp_buf_reg(&x.p, &rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    uint8_t *buf = dp_buf_reg(&x.a, &sm, 64, 0, 2);
    REQUIRE(buf);
    NDK_SGE rs = dp_sge(&rm, 0, 64), ss = dp_sge(&sm, 0, 64);
    DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(2), &ss, 1, 0), STATUS_SUCCESS);
    buf[10] ^= 0xFF; /* the bug: the request is not complete yet */
    NDK_RESULT_EX r;
    CHECK(dp_wait_ex(x.c->cqa, &r, 1, DP_WAIT_MS) == 1);
    char want[1024], detail[256];
    snprintf(detail, sizeof detail,
             "the buffers of the request with RequestContext %p (1 SGEs) changed between its "
             "post and its completion: what the peer got is undefined", DP_CTX(2));
    VT_CHECK_LINE(vt_wait("W9", 0),
                  vt_line(want, sizeof want,
                          "W9 (the buffers of a Send or Write are left alone until it completed)",
                          "NdkSend", "QP", x.c->qa, x.a.ad, detail,
                          "leave a request's buffers alone from its post until its completion is "
                          "retrieved"));
    CHECK(dp_wait_ex(x.c->cqp, &r, 1, DP_WAIT_MS) == 1);
    dp_mr_close(&rm);
    dp_mr_close(&sm);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_buffer_written_before_completion);
    return tl_finish();
}
