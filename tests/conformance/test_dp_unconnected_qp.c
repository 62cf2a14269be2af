/* Posting on a QP that is not connected: every initiator request fails
 * inline with STATUS_CONNECTION_INVALID and leaves no CQE, while receives
 * may be pre-posted; once the QP is connected, the pre-posted receive takes
 * the first message. */
#include "dptest.h"

/*
 * A QP that is not connected (NdkCreateQp, the QP functions): every initiator
 * request fails with STATUS_CONNECTION_INVALID and leaves no CQE, while
 * receives may be pre-posted; once the QP is connected, the pre-posted receive
 * takes the first message.
 */
DP_CASE(unconnected_qp)
{
    dp_side a, p;
    REQUIRE(dp_side_open(&a) && dp_side_open(&p));
    dp_conn *c = dp_conn_new(&a, &p, NULL);
    REQUIRE(c);
    dp_mr ms, mr, mwbase;
    uint8_t *sa = dp_buf_reg(&a, &ms, 4096, 0, 31);
    uint8_t *rb = dp_buf_reg(&p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *mb = dp_buf_reg(&a, &mwbase, 4096, DP_SINK_FLAGS, 0);
    NDK_MW *mw = dp_mw_new(&a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(sa && rb && mb && mw && dp_frmr_init(&a, &f, fb, 4096, TRUE));
    NDK_SGE g = dp_sge(&ms, 0, 100), ks = dp_sge(&mwbase, 0, 100);
    /* Both QPs are unconnected. */
    NDK_QP *qps[2] = {c->qa, c->qp};
    for (int i = 0; i < 2; i++) {
        NDK_QP *q = qps[i];
        DP_CHECK_ST(dp_send(q, DP_CTX(1), i ? dp_nosge() : &g, i ? 0 : 1, 0),
                    STATUS_CONNECTION_INVALID);
        DP_CHECK_ST(q->Dispatch->NdkSendAndInvalidate(q, DP_CTX(2), dp_nosge(), 0, 0, 0x100),
                    STATUS_CONNECTION_INVALID);
        DP_CHECK_ST(dp_write(q, DP_CTX(3), dp_nosge(), 0, (void *)0x10000, 0x100, 0),
                    STATUS_CONNECTION_INVALID);
        DP_CHECK_ST(dp_read(q, DP_CTX(4), dp_nosge(), 0, (void *)0x10000, 0x100, 0),
                    STATUS_CONNECTION_INVALID);
    }
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(5), &ks, 1, (void *)0x10000, 0x100, 0),
                STATUS_CONNECTION_INVALID);
    DP_CHECK_ST(c->qa->Dispatch->NdkBind(c->qa, DP_CTX(6), mwbase.mr, mw, mb, 4096,
                                         NDK_OP_FLAG_ALLOW_REMOTE_READ),
                STATUS_CONNECTION_INVALID);
    DP_CHECK_ST(dp_frmr_post(c->qa, DP_CTX(7), &f, fb, NDK_OP_FLAG_ALLOW_REMOTE_READ),
                STATUS_CONNECTION_INVALID);
    DP_CHECK_ST(c->qa->Dispatch->NdkInvalidate(c->qa, DP_CTX(8), &f.mr->Header, 0),
                STATUS_CONNECTION_INVALID);
    /* A receive is accepted before the connection exists. */
    NDK_SGE rs = dp_sge(&mr, 0, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(9), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    REQUIRE(dp_conn_establish(c));
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(10), &g, 1, 0), STATUS_SUCCESS);
    dp_check_send_landed(c, 10, 9, rb, 100, 31);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_mr_close(&mwbase);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(unconnected_qp);
    return tl_finish();
}
