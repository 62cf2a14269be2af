/* W9: the source buffer of a Send written by the consumer between the post
 * and the retrieval of its completion is reported when the completion is
 * retrieved (the checksum taken at post time no longer matches). */
#include "vtest.h"

DP_CASE(send_buffer_written_before_completion)
{
    vt_begin();
    vt_sends v;
    REQUIRE(vt_sends_open(&v, 0));
    dp_pair *x = &v.x;
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(1), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(2), &v.ss, 1, 0), STATUS_SUCCESS);
    v.sbuf[10] ^= 0xFF; /* the bug: the request is not complete yet */
    NDK_RESULT_EX r;
    CHECK(dp_wait_ex(x->c->cqa, &r, 1, DP_WAIT_MS) == 1);
    char detail[256];
    snprintf(detail, sizeof detail,
             "the buffers of the request with RequestContext %p (1 SGEs) changed between its "
             "post and its completion: what the peer got is undefined", DP_CTX(2));
    VT_CHECK_REPORT(0, "W9 (the buffers of a Send or Write are left alone until it completed)",
                    "NdkSend", "QP", x->c->qa, x->a.ad, detail,
                    "leave a request's buffers alone from its post until its completion is "
                    "retrieved");
    vt_sends_close(&v, 0, 1);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_buffer_written_before_completion);
    return tl_finish();
}
