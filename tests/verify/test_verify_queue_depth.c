/* W6: a receive posted while the queue already holds its depth of
 * outstanding receives is reported with the counts; the provider fails it
 * with STATUS_INSUFFICIENT_RESOURCES. */
#include "vtest.h"

DP_CASE(receive_queue_overfilled)
{
    vt_begin();
    dp_side s;
    REQUIRE(vt_side_open(&s, 0, 0));
    dp_cq *cq = dp_cq_new(&s, 16);
    REQUIRE(cq);
    dp_cfg cfg = dp_cfg_default();
    cfg.rqd = 2;
    NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, NULL, &cfg, NULL);
    REQUIRE(qp);
    dp_mr m;
    uint8_t *buf = dp_buf_reg(&s, &m, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1);
    REQUIRE(buf);
    NDK_SGE sge = dp_sge(&m, 0, 64);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(1), &sge, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(2), &sge, 1), STATUS_SUCCESS);
    CHECK(vt_count() == 0);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(3), &sge, 1), STATUS_INSUFFICIENT_RESOURCES);
    char want[1024];
    VT_CHECK_LINE(vt_wait("W6", 0),
                  vt_line(want, sizeof want,
                          "W6 (at most queue-depth requests outstanding on a queue)", "NdkReceive",
                          "QP", qp, s.ad,
                          "2 request(s) outstanding, queue depth 2; the call failed with "
                          "STATUS_INSUFFICIENT_RESOURCES",
                          "post only while fewer than the queue's depth are outstanding "
                          "(retrieve completions first), or create a deeper queue"));
    dp_close(qp);
    dp_mr_close(&m);
    dp_cq_close(cq);
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(receive_queue_overfilled);
    return tl_finish();
}
