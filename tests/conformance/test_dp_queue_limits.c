/* Queue limits of the data path: every QP creation value at the adapter's
 * limit works and one past it is STATUS_INVALID_PARAMETER; a full receive or
 * initiator queue, or one of depth 0, refuses the next post inline with
 * STATUS_INSUFFICIENT_RESOURCES, without a CQE, and the QP stays usable.
 * libndk decisions relied on (NDKPI leaves the status open) are named in
 * each case. */
#include "dptest.h"

/*
 * NdkCreateQp: each of the five sizes at the adapter's limit is
 * accepted, one past it is STATUS_INVALID_PARAMETER. NdkCreateQpWithSrq
 * checks its three.
 */
DP_CASE(qp_creation_limits)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    const NDK_ADAPTER_INFO *in = &s.info;
    fprintf(stderr,
            "    limits: rq %u iq %u rsge %u isge %u readsge %u inline %u xfer %u ird %u ord %u "
            "srq %u cq %u\n",
            in->MaxReceiveQueueDepth, in->MaxInitiatorQueueDepth, in->MaxReceiveRequestSge,
            in->MaxInitiatorRequestSge, in->MaxReadRequestSge, in->MaxInlineDataSize,
            in->MaxTransferLength, in->MaxInboundReadLimit, in->MaxOutboundReadLimit,
            in->MaxSrqDepth, in->MaxCqDepth);
    dp_cq *cq = dp_cq_new(&s, 64);
    REQUIRE(cq);
    dp_cfg base = dp_cfg_default();
    for (int which = 0; which < 5; which++) {
        dp_cfg c = base;
        ULONG *f = which == 0 ? &c.rqd : which == 1 ? &c.iqd : which == 2 ? &c.rsge
                 : which == 3 ? &c.isge : &c.inl;
        ULONG lim = which == 0 ? in->MaxReceiveQueueDepth : which == 1 ? in->MaxInitiatorQueueDepth
                  : which == 2 ? in->MaxReceiveRequestSge : which == 3 ? in->MaxInitiatorRequestSge
                  : in->MaxInlineDataSize;
        *f = lim;
        NTSTATUS st;
        NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, NULL, &c, &st);
        DP_CHECK_ST(st, STATUS_SUCCESS);
        dp_close(qp);
        *f = lim + 1;
        qp = dp_qp_create(&s, cq, cq, NULL, NULL, &c, &st);
        DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
        CHECK(qp == NULL);
        dp_close(qp);
    }
    if (in->MaxSrqDepth) {
        dp_req *r = dp_req_new("NdkCreateSrq");
        NDK_SRQ *srq = NULL;
        NTSTATUS ret = s.pd->Dispatch->NdkCreateSrq(s.pd, 16, 1, 0, NULL, NULL, NULL, dp_create_cb,
                                                    r, &srq);
        NTSTATUS st;
        srq = dp_created(r, ret, srq, &st);
        DP_CHECK_ST(st, STATUS_SUCCESS);
        if (srq) {
            for (int which = 0; which < 3; which++) {
                dp_cfg c = base;
                c.iqd = which == 0 ? in->MaxInitiatorQueueDepth + 1 : 8;
                c.isge = which == 1 ? in->MaxInitiatorRequestSge + 1 : 1;
                c.inl = which == 2 ? in->MaxInlineDataSize + 1 : 0;
                NDK_QP *qp = dp_qp_create(&s, cq, cq, srq, NULL, &c, &st);
                DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
                dp_close(qp);
            }
            dp_close(srq);
        }
    }
    dp_cq_close(cq);
    dp_side_close(&s);
}

/* The receive queue holds ReceiveQueueDepth receives; one more fails with
 * STATUS_INSUFFICIENT_RESOURCES (no CQE); NdkFlush then cancels exactly the
 * ones that were accepted. On an unconnected QP: receives may be pre-posted. */
DP_CASE(receive_queue_depth)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cq *cq = dp_cq_new(&s, 64);
    REQUIRE(cq);
    dp_cfg cfg = dp_cfg_default();
    cfg.rqd = 4;
    uint8_t ctx;
    NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, &ctx, &cfg, NULL);
    dp_mr mr;
    uint8_t *rb = dp_buf_reg(&s, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(qp && rb);
    for (int i = 0; i < 4; i++) {
        NDK_SGE r = dp_sge(&mr, (size_t)i * 64, 64);
        DP_CHECK_ST(dp_recv(qp, DP_CTX(i + 1), &r, 1), STATUS_SUCCESS);
    }
    NDK_SGE r5 = dp_sge(&mr, 1024, 64);
    DP_CHECK_ST(dp_recv(qp, DP_CTX(5), &r5, 1), STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_QUIET(cq);
    qp->Dispatch->NdkFlush(qp);
    NDK_RESULT_EX e[8];
    ULONG n = dp_wait_ex(cq, e, 4, DP_WAIT_MS);
    CHECK_EQ(n, 4);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(e[i], STATUS_CANCELLED, NdkOperationTypeReceive, &ctx, DP_CTX(i + 1), -1);
    DP_CHECK_QUIET(cq);
    dp_close(qp);
    dp_mr_close(&mr);
    dp_cq_close(cq);
    dp_side_close(&s);
}

/*
 * The initiator queue holds InitiatorQueueDepth requests. The peer is a raw
 * MPA initiator that never reads, so four 16 MiB Sends stay outstanding; a
 * fifth request of any kind then fails with STATUS_INSUFFICIENT_RESOURCES and
 * never completes. When the peer resets the connection, each of the four
 * completes exactly once, with STATUS_CANCELLED (they never were handed to
 * TCP in full).
 */
DP_CASE(initiator_queue_depth)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cfg cfg = dp_cfg_default();
    cfg.iqd = 4;
    int fd;
    dp_conn *c = dp_raw_accept(&s, &cfg, &fd);
    REQUIRE(c);
    dp_mr big, sink;
    uint8_t *b = dp_guarded(16 * MiB, false, 0x42);
    uint8_t *k = dp_buf_reg(&s, &sink, 4096, DP_SINK_FLAGS, 0);
    REQUIRE(k && dp_mr_reg(&s, &big, b, 16 * MiB, NDK_MR_FLAG_ALLOW_LOCAL_WRITE));
    NDK_SGE g = dp_sge(&big, 0, 16 * MiB);
    for (int i = 0; i < 4; i++)
        DP_CHECK_ST(dp_send(c->qp, DP_CTX(i + 1), &g, 1, 0), STATUS_SUCCESS);
    NDK_SGE one = dp_sge(&big, 0, 1), ks = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(11), &one, 1, 0), STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_ST(dp_write(c->qp, DP_CTX(12), &one, 1, (void *)0x10000, 0x100, 0),
                STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(13), &ks, 1, (void *)0x10000, 0x100, 0),
                STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_ST(c->qp->Dispatch->NdkSendAndInvalidate(c->qp, DP_CTX(14), &one, 1, 0, 0x100),
                STATUS_INSUFFICIENT_RESOURCES);
    DP_CHECK_QUIET(c->cqp);
    dp_raw_reset(fd);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    /* Closing the connector ends whatever the reset left. */
    dp_close(c->cp);
    c->cp = NULL;
    NDK_RESULT_EX e[8];
    ULONG n = dp_wait_ex(c->cqp, e, 4, DP_WAIT_MS);
    CHECK_EQ(n, 4);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(e[i], STATUS_CANCELLED, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(i + 1),
                     -1);
    DP_CHECK_QUIET(c->cqp);
    dp_conn_close(c);
    dp_mr_close(&big);
    dp_mr_close(&sink);
    dp_side_close(&s);
}

/*
 * InitiatorQueueDepth 0 (5.5.4 lets a QP have an empty initiator queue;
 * libndk: a QP that takes no initiator request). Connected, every initiator
 * post on it is refused with STATUS_INSUFFICIENT_RESOURCES, as on a full
 * queue, with no CQE; its receive queue works as usual.
 */
DP_CASE(initiator_queue_depth_zero)
{
    dp_side a, p;
    REQUIRE(dp_side_open(&a) && dp_side_open(&p));
    dp_conn *c = dp_conn_new(&a, &p, NULL);
    REQUIRE(c);
    /* The passive QP again, with depth 0. */
    dp_cfg zero = c->cfg;
    zero.iqd = 0;
    dp_close(c->qp);
    c->qp = dp_qp_create(&p, c->rcqp, c->cqp, NULL, dp_qpctx_p(c), &zero, NULL);
    REQUIRE(c->qp && dp_conn_establish(c));
    dp_mr ms, rr, pm, wr, src, sink;
    uint8_t *as = dp_buf_reg(&a, &ms, 64, 0, 31);
    uint8_t *rb = dp_buf_reg(&p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *pb = dp_buf_reg(&p, &pm, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 32);
    uint8_t *wb = dp_buf_reg(&a, &wr, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&a, &src, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 33);
    uint8_t *kb = dp_buf_reg(&p, &sink, 64, DP_SINK_FLAGS, 0);
    NDK_MW *mw = dp_mw_new(&p);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(as && rb && pb && wb && sb && kb && mw && dp_frmr_init(&p, &f, fb, 4096, TRUE));

    NDK_SGE g = dp_sge(&pm, 0, 16), ks = dp_sge(&sink, 0, 16);
    NDK_QP *q = c->qp;
    const NTSTATUS FULL = STATUS_INSUFFICIENT_RESOURCES;
    DP_CHECK_ST(dp_send(q, DP_CTX(1), &g, 1, 0), FULL);
    DP_CHECK_ST(q->Dispatch->NdkSendAndInvalidate(q, DP_CTX(2), &g, 1, 0, 0x1234), FULL);
    DP_CHECK_ST(dp_write(q, DP_CTX(3), &g, 1, wb, wr.rtok, 0), FULL);
    DP_CHECK_ST(dp_read(q, DP_CTX(4), &ks, 1, sb, src.rtok, 0), FULL);
    DP_CHECK_ST(q->Dispatch->NdkBind(q, DP_CTX(5), pm.mr, mw, pb, 4096, NDK_OP_FLAG_ALLOW_REMOTE_READ), FULL);
    DP_CHECK_ST(dp_frmr_post(q, DP_CTX(6), &f, fb, NDK_OP_FLAG_ALLOW_LOCAL_WRITE), FULL);
    DP_CHECK_ST(q->Dispatch->NdkInvalidate(q, DP_CTX(7), &f.mr->Header, 0), FULL);
    DP_CHECK_QUIET(c->cqp);

    /* The receive side works. */
    NDK_SGE rs = dp_sge(&rr, 0, 64), ss = dp_sge(&ms, 0, 64);
    DP_CHECK_ST(dp_recv(q, DP_CTX(8), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(9), &ss, 1, 0), STATUS_SUCCESS);
    dp_check_send_landed(c, 9, 8, rb, 64, 31);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&pm);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(qp_creation_limits);
    RUN(receive_queue_depth);
    RUN_FAM(initiator_queue_depth);
    RUN_FAM(initiator_queue_depth_zero);
    return tl_finish();
}
