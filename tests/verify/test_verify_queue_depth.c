/* W6: a receive posted while the queue already holds its depth of
 * outstanding receives is reported with the counts; the provider fails it
 * with STATUS_INSUFFICIENT_RESOURCES. */
#include "vtest.h"

DP_CASE(receive_queue_overfilled)
{
    vt_begin();
    dp_cfg cfg = dp_cfg_default();
    cfg.rqd = 2;
    vt_lone_qp l;
    REQUIRE(vt_lone_qp_open(&l, &cfg));
    dp_side *s = &l.s;
    NDK_QP *qp = l.qp;
    dp_mr m;
    uint8_t *buf = dp_buf_reg(s, &m, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1);
    REQUIRE(buf);
    NDK_SGE sge = dp_sge(&m, 0, 64);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(1), &sge, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(2), &sge, 1), STATUS_SUCCESS);
    CHECK(vt_count() == 0);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(3), &sge, 1), STATUS_INSUFFICIENT_RESOURCES);
    VT_CHECK_REPORT(0, "W6 (at most queue-depth requests outstanding on a queue)", "NdkReceive",
                    "QP", qp, s->ad,
                    "2 request(s) outstanding, queue depth 2; the call failed with "
                    "STATUS_INSUFFICIENT_RESOURCES",
                    "post only while fewer than the queue's depth are outstanding "
                    "(retrieve completions first), or create a deeper queue");
    dp_mr_close(&m);
    vt_lone_qp_close(&l);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(receive_queue_overfilled);
    return tl_finish();
}
