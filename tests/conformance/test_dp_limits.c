/* The data path's limits: every NDK_ADAPTER_INFO limit that bounds a QP or
 * a work request, and every QP creation value. At the limit a request
 * works; one past it fails inline, cleanly (no CQE, 4.5) and leaves the QP
 * usable. Also: unknown flag bits and known ones that do not apply to the
 * call, posting on an unconnected QP, an initiator queue of depth 0, local
 * SGE checks, and ORD enforcement (more Reads than ORD wait their turn).
 * Contract: reference 4.5, 5.5.4-5.5.5, 5.9, 6.1, 6.7, 6.9, 7.4.
 * libndk decisions relied on (NDKPI leaves the status open): SGE count over
 * the QP's limit, unknown flag bits, inline size over InlineDataSize and a
 * transfer over MaxTransferLength -> STATUS_INVALID_PARAMETER; known flag
 * bits a call does not document are ignored; a full queue, or one of depth
 * 0 -> STATUS_INSUFFICIENT_RESOURCES; an initiator request on an unconnected
 * QP -> STATUS_CONNECTION_INVALID; an SGE outside its registration or
 * without the right it needs -> STATUS_ACCESS_VIOLATION; local SGEs that
 * need more than 64 pieces -> STATUS_IMPLEMENTATION_LIMIT; NdkRead with ORD
 * 0 -> STATUS_INVALID_DEVICE_STATE. */
#include "dptest.h"

/* An unknown NDK_OP_FLAG bit: the next one after DEFER, and the top bit. */
#define UNKNOWN_FLAG_LOW 0x00000400u
#define UNKNOWN_FLAG_HIGH 0x80000000u

/*
 * NdkCreateQp (5.5.4): each of the five sizes at the adapter's limit is
 * accepted, one past it is STATUS_INVALID_PARAMETER. NdkCreateQpWithSrq
 * (5.5.5) checks its three.
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

/*
 * SGE counts on a QP created with MaxInitiatorRequestSge 3 and
 * MaxReceiveRequestSge 2: Send, SendAndInvalidate and Write with 3 SGEs
 * work and with 4 fail; Receive with 2 works and with 3 fails. A Read is
 * bounded by the adapter's MaxReadRequestSge instead (6.1: it overrides
 * MaxInitiatorRequestSge for reads). Then the same at the adapter maxima.
 * No failed post leaves a CQE, and the QP keeps working.
 */
DP_CASE(sge_count_limits)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.isge = 3;
    cfg.rsge = 2;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    ULONG rmax = x.a.info.MaxReadRequestSge;
    REQUIRE(rmax >= 1 && rmax <= 256);
    dp_mr ms, mr, wr, src, sink;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 1);
    uint8_t *rb = dp_buf_reg(&x.p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *s = dp_buf_reg(&x.p, &src, 65536, NDK_MR_FLAG_ALLOW_REMOTE_READ, 2);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 65536, DP_SINK_FLAGS, 0);
    REQUIRE(a && rb && wb && s && k);
    NDK_SGE g[257], r[257];
    for (int i = 0; i < 257; i++) {
        g[i] = dp_sge(&ms, (size_t)i * 8, 8);
        r[i] = dp_sge(&mr, (size_t)i * 8, 8);
    }
    /* Receives: 2 SGEs is the limit. */
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), r, 3), STATUS_INVALID_PARAMETER);
    NDK_SGE big[2] = {dp_sge(&mr, 0, 2048), dp_sge(&mr, 2048, 2048)};
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), big, 2), STATUS_SUCCESS);
    /* Initiator requests: 3 SGEs is the limit. */
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(3), g, 4, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(4), g, 4, 0, 0x12345678u),
                STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(5), g, 4, wb, wr.rtok, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(6), g, 3, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(7), g, 3, wb, wr.rtok, 0), STATUS_SUCCESS);
    /* Reads: MaxReadRequestSge, whatever the QP's initiator SGE limit. */
    NDK_SGE ks[257];
    for (ULONG i = 0; i <= rmax; i++)
        ks[i] = dp_sge(&sink, (size_t)i * 64, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(8), ks, rmax + 1, s, src.rtok, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(9), ks, rmax, s, src.rtok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e[3];
    DP_WAIT(c->cqa, e, 3);
    CHECK(e[0].RequestContext == DP_CTX(6) && e[1].RequestContext == DP_CTX(7) &&
          e[2].RequestContext == DP_CTX(9));
    for (int i = 0; i < 3; i++)
        DP_CHECK_ST(e[i].Status, STATUS_SUCCESS);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(2), 24);
    DP_CHECK_DATA(rb, 24, 1, 0);
    DP_CHECK_DATA(wb, 24, 1, 0);
    DP_CHECK_DATA(k, (size_t)rmax * 64, 2, 0);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_pair_close(&x);

    /* At the adapter maxima. */
    cfg = dp_cfg_default();
    cfg.isge = x.a.info.MaxInitiatorRequestSge;
    cfg.rsge = x.a.info.MaxReceiveRequestSge;
    REQUIRE(cfg.isge <= 256 && cfg.rsge <= 256);
    REQUIRE(dp_pair_open(&x, &cfg));
    c = x.c;
    a = dp_buf_reg(&x.a, &ms, 4096, 0, 3);
    rb = dp_buf_reg(&x.p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(a && rb);
    for (int i = 0; i < 257; i++) {
        g[i] = dp_sge(&ms, (size_t)i * 8, 8);
        r[i] = dp_sge(&mr, (size_t)i * 8, 8);
    }
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), r, cfg.rsge + 1), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), r, cfg.rsge), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(3), g, cfg.isge + 1, 0), STATUS_INVALID_PARAMETER);
    ULONG n = cfg.isge < cfg.rsge ? cfg.isge : cfg.rsge;
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), g, n, 0), STATUS_SUCCESS);
    DP_WAIT(c->cqa, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(4), -1);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(2), n * 8);
    DP_CHECK_DATA(rb, n * 8, 3, 0);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_pair_close(&x);
}

/*
 * Inline size (5.9.2, 6.7): with InlineDataSize 64 an INLINE Send or Write of
 * 64 bytes works and of 65 bytes fails; on a QP created with InlineDataSize
 * 0 any INLINE request carrying data fails.
 */
DP_CASE(inline_size_limits)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.inl = 64;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    uint8_t *heap = dp_malloc(128);
    dp_fill(heap, 128, 11, 0);
    dp_mr mr, wr;
    uint8_t *rb = dp_buf_reg(&x.p, &mr, 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 256, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(rb && wb);
    NDK_SGE g65, g64;
    memset(&g65, 0, sizeof g65);
    g65.VirtualAddress = heap;
    g65.Length = 65;
    g64 = g65;
    g64.Length = 64;
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), &g65, 1, NDK_OP_FLAG_INLINE), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), &g65, 1, wb, wr.rtok, NDK_OP_FLAG_INLINE),
                STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(3), &g65, 1, NDK_OP_FLAG_INLINE,
                                                      0x12345678u),
                STATUS_INVALID_PARAMETER);
    NDK_SGE rs = dp_sge(&mr, 0, 256);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(4), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(5), &g64, 1, wb, wr.rtok, NDK_OP_FLAG_INLINE),
                STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(6), &g64, 1, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    NDK_RESULT_EX e[2];
    DP_WAIT(c->cqa, e, 2);
    CHECK(e[0].RequestContext == DP_CTX(5) && e[1].RequestContext == DP_CTX(6));
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(4), 64);
    DP_CHECK_DATA(rb, 64, 11, 0);
    DP_CHECK_DATA(wb, 64, 11, 0);
    DP_CHECK_QUIET(c->cqa);
    dp_mr_close(&mr);
    dp_mr_close(&wr);
    dp_pair_close(&x);

    /* InlineDataSize 0: no inline use. */
    cfg.inl = 0;
    REQUIRE(dp_pair_open(&x, &cfg));
    c = x.c;
    NDK_SGE g1 = g64;
    g1.Length = 1;
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(7), &g1, 1, NDK_OP_FLAG_INLINE), STATUS_INVALID_PARAMETER);
    DP_CHECK_QUIET(c->cqa);
    dp_pair_close(&x);
}

/*
 * MaxTransferLength (6.1): a Send, SendAndInvalidate, Write, Read or Receive
 * whose SGEs add up to one byte more fails inline. The memory is reserved
 * address space (never touched), registered once.
 */
DP_CASE(transfer_length_limit)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    uint64_t max = x.a.info.MaxTransferLength;
    /* Two ULONG-sized SGEs in one registration reach one byte over it:
     * true of libndk's 1 GiB (src/adapter.c). */
    REQUIRE(max <= (1ull << 31) && max + 4096 <= x.a.info.MaxRegistrationSize);
    size_t span = dp_round_page((size_t)max + 1);
    int prot = PROT_READ | PROT_WRITE, fl = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uint8_t *va = mmap(NULL, span, prot, fl, -1, 0);
    REQUIRE(va != MAP_FAILED);
    dp_track(va, span, true);
    uint8_t *vp = mmap(NULL, span, prot, fl, -1, 0);
    REQUIRE(vp != MAP_FAILED);
    dp_track(vp, span, true);
    dp_mr ma, mp;
    REQUIRE(dp_mr_reg(&x.a, &ma, va, span,
                      NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK));
    REQUIRE(dp_mr_reg(&x.p, &mp, vp, span,
                      NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ));
    ULONG half = (ULONG)(max / 2);
    NDK_SGE over[2] = {dp_sge(&ma, 0, half), dp_sge(&ma, half, (ULONG)(max - half + 1))};
    NDK_SGE rover[2] = {dp_sge(&mp, 0, half), dp_sge(&mp, half, (ULONG)(max - half + 1))};
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), over, 2, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(2), over, 2, 0, 0x12345678u),
                STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), over, 2, vp, mp.rtok, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), over, 2, vp, mp.rtok, 0), STATUS_INVALID_PARAMETER);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(5), rover, 2), STATUS_INVALID_PARAMETER);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    /* The QP is still usable. */
    CHECK(dp_roundtrip(c, 100, 12));
    dp_pair_close(&x);
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
    NDK_RESULT_EX e;
    DP_WAIT(c->cqa, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(9), -1);
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(8), 64);
    DP_CHECK_DATA(rb, 64, 31, 0);
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

/*
 * Unknown flag bits (6.9, libndk: STATUS_INVALID_PARAMETER) on every posting
 * function that takes Flags: refused inline, no CQE, the QP keeps working.
 */
DP_CASE(unknown_flags)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, wr, src, sink, mwbase;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 21);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *s = dp_buf_reg(&x.p, &src, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 22);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(a && wb && s && k && mb && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));
    NDK_SGE g = dp_sge(&ms, 0, 16), ks = dp_sge(&sink, 0, 16);
    static const ULONG bad[2] = {UNKNOWN_FLAG_LOW, UNKNOWN_FLAG_HIGH};
    for (int i = 0; i < 2; i++) {
        ULONG fl = bad[i];
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), &g, 1, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(2), &g, 1, fl, 0x12345678u),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), &g, 1, wb, wr.rtok, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), &ks, 1, s, src.rtok, fl), STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkBind(c->qa, DP_CTX(5), mwbase.mr, mw, mb, 4096,
                                             NDK_OP_FLAG_ALLOW_REMOTE_READ | fl),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(dp_frmr_post(c->qa, DP_CTX(6), &f, fb, NDK_OP_FLAG_ALLOW_REMOTE_READ | fl),
                    STATUS_INVALID_PARAMETER);
        DP_CHECK_ST(c->qa->Dispatch->NdkInvalidate(c->qa, DP_CTX(7), &f.mr->Header, fl),
                    STATUS_INVALID_PARAMETER);
    }
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    /* Still usable: the same requests without the bad bit. */
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(8), &g, 1, wb, wr.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(9), &ks, 1, s, src.rtok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e[2];
    DP_WAIT(c->cqa, e, 2);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(8), -1);
    DP_CHECK_CQE(e[1], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(9), -1);
    DP_CHECK_DATA(k, 16, 22, 0);
    CHECK(dp_roundtrip(c, 64, 23));
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_pair_close(&x);
}

/*
 * Known flag bits a call does not document (6.9 leaves them open and
 * suggests ignoring them; libndk does): each posting call with every
 * NDK_OP_FLAG_* bit outside its own set is accepted and does just what it
 * does without them. RDMA_READ_LOCAL_INVALIDATE on a Send leaves the
 * Send's token valid; SEND_AND_SOLICIT_EVENT on a Write, INLINE on a Read,
 * remote rights on an Invalidate change nothing.
 */
#define OP_FLAGS_ALL 0x3FFu
#define DOC_SEND                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT | \
     NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define DOC_WRITE (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_INLINE | NDK_OP_FLAG_DEFER)
#define DOC_READ                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE | \
     NDK_OP_FLAG_DEFER)
#define DOC_BIND                                                                             \
    (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_ALLOW_REMOTE_READ |      \
     NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_DEFER)
#define DOC_FASTREG (DOC_BIND | NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK)
#define DOC_INVALIDATE (NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_READ_FENCE | NDK_OP_FLAG_DEFER)

DP_CASE(irrelevant_flags_ignored)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, rr, wr, src, sink, mwbase, mk;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 41);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 2 * 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 256, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.p, &src, 256, NDK_MR_FLAG_ALLOW_REMOTE_READ, 42);
    uint8_t *kb = dp_buf_reg(&x.a, &sink, 256, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 43);
    uint8_t *pk = dp_buf_reg(&x.p, &mk, 256, DP_SINK_FLAGS, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_fill(fb, 4096, 44, 0);
    dp_frmr f;
    REQUIRE(a && rb && wb && sb && kb && mb && pk && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));
    NDK_QP *q = c->qa;

    /* FastRegister: local write only, whatever else is set. */
    DP_CHECK_ST(dp_frmr_post(q, DP_CTX(1), &f, fb,
                             NDK_OP_FLAG_ALLOW_LOCAL_WRITE | (OP_FLAGS_ALL & ~DOC_FASTREG)),
                STATUS_SUCCESS);
    NDK_SGE fs;
    memset(&fs, 0, sizeof fs);
    fs.VirtualAddress = fb;
    fs.Length = 100;
    fs.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    /* Send from the fast registration, twice: the first one's
     * RDMA_READ_LOCAL_INVALIDATE must not have invalidated its token. */
    NDK_SGE r0 = dp_sge(&rr, 0, 256), r1 = dp_sge(&rr, 256, 256);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100), &r0, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(101), &r1, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(q, DP_CTX(2), &fs, 1, OP_FLAGS_ALL & ~DOC_SEND), STATUS_SUCCESS);
    NDK_RESULT_EX e[8];
    DP_WAIT(c->cqa, e, 2);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_a(c), DP_CTX(1), -1);
    DP_CHECK_CQE(e[1], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    DP_CHECK_ST(dp_send(q, DP_CTX(3), &fs, 1, 0), STATUS_SUCCESS);
    /* Write, Read, Bind. */
    NDK_SGE wg = dp_sge(&ms, 0, 200), kg = dp_sge(&sink, 0, 200);
    DP_CHECK_ST(dp_write(q, DP_CTX(4), &wg, 1, wb, wr.rtok, OP_FLAGS_ALL & ~DOC_WRITE), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(q, DP_CTX(5), &kg, 1, sb, src.rtok, OP_FLAGS_ALL & ~DOC_READ), STATUS_SUCCESS);
    DP_CHECK_ST(q->Dispatch->NdkBind(q, DP_CTX(6), mwbase.mr, mw, mb, 4096,
                                     NDK_OP_FLAG_ALLOW_REMOTE_READ | (OP_FLAGS_ALL & ~DOC_BIND)),
                STATUS_SUCCESS);
    DP_WAIT(c->cqa, e, 4);
    static const NDK_OPERATION_TYPE types[4] = {NdkOperationTypeSend, NdkOperationTypeWrite,
                                                NdkOperationTypeRead, NdkOperationTypeBind};
    for (int i = 0; i < 4; i++)
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, types[i], dp_qpctx_a(c), DP_CTX(3 + i), -1);
    DP_WAIT(c->cqp, e, 2);
    for (int i = 0; i < 2; i++) {
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100 + i), 100);
        DP_CHECK_DATA(rb + 256 * i, 100, 44, 0);
    }
    DP_CHECK_DATA(wb, 200, 41, 0);
    DP_CHECK_DATA(kb, 200, 42, 0);
    /* The window grants what its documented flags say: a Read through it. */
    NDK_SGE pks = dp_sge(&mk, 0, 256);
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(7), &pks, 1, mb + 100, mw->Dispatch->NdkGetRemoteTokenFromMw(mw), 0),
                STATUS_SUCCESS);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_p(c), DP_CTX(7), -1);
    DP_CHECK_DATA(pk, 256, 43, 100);
    /* Invalidate: the fast registration is gone for local use too. */
    DP_CHECK_ST(q->Dispatch->NdkInvalidate(q, DP_CTX(8), &f.mr->Header, OP_FLAGS_ALL & ~DOC_INVALIDATE),
                STATUS_SUCCESS);
    DP_WAIT(c->cqa, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_a(c), DP_CTX(8), -1);
    DP_CHECK_ST(dp_send(q, DP_CTX(9), &fs, 1, 0), STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_mr_close(&mk);
    dp_pair_close(&x);
}

/*
 * A QP that is not connected (5.5.4, 5.9): every initiator request fails
 * with STATUS_CONNECTION_INVALID and leaves no CQE, while receives may be
 * pre-posted; once the QP is connected, the pre-posted receive takes the
 * first message.
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
    NDK_RESULT_EX e;
    DP_WAIT(c->cqa, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(10), -1);
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(9), 100);
    DP_CHECK_DATA(rb, 100, 31, 0);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_mr_close(&mwbase);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

/*
 * Local SGE checks (libndk: STATUS_ACCESS_VIOLATION inline): an SGE that
 * starts one byte before its registration or ends one byte past it, a token
 * nobody issued, a token of an MR in another PD, a receive buffer or read
 * sink without local write. No CQE; the QP keeps working.
 */
DP_CASE(local_sge_checks)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    NDK_PD *pd2 = dp_pd_new(&x.a);
    REQUIRE(pd2);
    dp_mr ms, ro, other, src;
    uint8_t *area = dp_guarded(8192, false, 0);
    uint8_t *s = dp_buf_reg(&x.p, &src, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 41);
    uint8_t *rb = dp_guarded(4096, false, 0);
    uint8_t *ob = dp_guarded(4096, false, 0);
    REQUIRE(s && dp_mr_reg(&x.a, &ms, area + 100, 4000, 0) &&
            dp_mr_reg(&x.a, &ro, rb, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ));
    DP_REQUIRE_ST(dp_mr_reg_pd(pd2, &other, ob, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE),
                  STATUS_SUCCESS);
    NDK_SGE before = dp_sge(&ms, 0, 16);
    before.VirtualAddress = area + 99;
    NDK_SGE after = dp_sge(&ms, 4000 - 15, 16);
    NDK_SGE bogus = dp_sge(&ms, 0, 16);
    bogus.MemoryRegionToken = ms.ltok ^ 0x5A5A5A00u;
    NDK_SGE foreign = dp_sge(&other, 0, 16);
    NDK_SGE nowrite = dp_sge(&ro, 0, 16);
    const NDK_SGE *bad[4] = {&before, &after, &bogus, &foreign};
    for (int i = 0; i < 4; i++) {
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), bad[i], 1, 0), STATUS_ACCESS_VIOLATION);
        DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), bad[i], 1, s, src.rtok, 0), STATUS_ACCESS_VIOLATION);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(3), bad[i], 1, s, src.rtok, 0), STATUS_ACCESS_VIOLATION);
        DP_CHECK_ST(dp_recv(c->qa, DP_CTX(4), bad[i], 1), STATUS_ACCESS_VIOLATION);
    }
    /* Local write is needed to receive into or read into a buffer. */
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(5), &nowrite, 1), STATUS_ACCESS_VIOLATION);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(6), &nowrite, 1, s, src.rtok, 0), STATUS_ACCESS_VIOLATION);
    /* A valid SGE after the bad one in the same list does not save it. */
    NDK_SGE mixed[2] = {dp_sge(&ms, 0, 16), after};
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(7), mixed, 2, 0), STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    CHECK(dp_roundtrip(c, 64, 42));
    dp_mr_close(&ms);
    dp_mr_close(&ro);
    dp_mr_close(&other);
    dp_mr_close(&src);
    dp_close(pd2);
    dp_pair_close(&x);
}

/*
 * ORD enforcement (7.4, iwarp.md 3.5): the active side asks for ORD 8, the
 * passive side accepts with IRD 2, so the effective ORD is 2. Posting
 * ORD + 3 Reads of 1 MiB each must still work: the extra ones wait for a
 * free slot instead of overrunning the peer's IRD (which would end the
 * connection). All complete in order, with the right data, and a Send posted
 * behind them completes after them.
 */
DP_CASE(ord_enforcement)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.ird = 8;
    cfg.ord = 8;
    cfg.p_ird = 2;
    cfg.p_ord = 8;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    CHECK_EQ(c->ord_a, 2);
    CHECK_EQ(c->ird_p, 2);
    ULONG ord = c->ord_a ? c->ord_a : 1;
    ULONG nreads = ord + 3;
    dp_mr src, sink, ms, rr;
    uint8_t *s = dp_buf_reg(&x.p, &src, (size_t)nreads * MiB, NDK_MR_FLAG_ALLOW_REMOTE_READ, 51);
    uint8_t *k = dp_buf_reg(&x.a, &sink, (size_t)nreads * MiB, DP_SINK_FLAGS, 0);
    uint8_t *a = dp_buf_reg(&x.a, &ms, 64, 0, 52);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(s && k && a && rb);
    memset(k, 0, (size_t)nreads * MiB);
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100), &rs, 1), STATUS_SUCCESS);
    /* Read i fetches source MiB (nreads - 1 - i) into sink MiB i. */
    for (ULONG i = 0; i < nreads; i++) {
        NDK_SGE ks = dp_sge(&sink, (size_t)i * MiB, MiB);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(i + 1), &ks, 1, s + (size_t)(nreads - 1 - i) * MiB,
                            src.rtok, 0),
                    STATUS_SUCCESS);
    }
    NDK_SGE g = dp_sge(&ms, 0, 64);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(99), &g, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e[16];
    ULONG n = dp_wait_ex(c->cqa, e, nreads + 1, DP_WAIT_MS);
    CHECK_EQ(n, nreads + 1);
    for (ULONG i = 0; i < n && i < nreads; i++)
        DP_CHECK_CQE(e[i], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(i + 1), -1);
    if (n == nreads + 1)
        DP_CHECK_CQE(e[nreads], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(99),
                     -1);
    for (ULONG i = 0; i < nreads; i++)
        DP_CHECK_DATA(k + (size_t)i * MiB, MiB, 51, (size_t)(nreads - 1 - i) * MiB);
    DP_WAIT(c->cqp, e, 1);
    DP_CHECK_CQE(e[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100), 64);
    /* The connection survived: nobody saw a disconnect. */
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
    CHECK_EQ(tl_event_count(&c->disc_p), 0);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/* Negotiated ORD 0 (the peer accepted with IRD 0): NdkRead cannot be served
 * and fails inline (libndk: STATUS_INVALID_DEVICE_STATE), with no CQE; the
 * other requests still work. */
DP_CASE(read_with_ord_zero)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.p_ird = 0;
    cfg.p_ord = 0;
    cfg.ird = 0;
    cfg.ord = 0;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    CHECK_EQ(c->ord_a, 0);
    dp_mr src, sink;
    uint8_t *s = dp_buf_reg(&x.p, &src, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 61);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    REQUIRE(s && k);
    NDK_SGE ks = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(1), &ks, 1, s, src.rtok, 0), STATUS_INVALID_DEVICE_STATE);
    DP_CHECK_QUIET(c->cqa);
    CHECK(dp_roundtrip(c, 32, 62));
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_pair_close(&x);
}

/*
 * FRMRPageCount (6.1: at least 16): a fast-register MR initialized for that
 * many pages maps a region of exactly that many pages, and the peer can
 * write its last byte and read it back. A NdkFastRegister with more pages
 * than the MR was initialized for is refused inline (5.9.5 [U]; the
 * reference suggests STATUS_INVALID_PARAMETER) and leaves no CQE.
 */
DP_CASE(frmr_page_count)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    ULONG pages = x.p.info.FRMRPageCount;
    CHECK(pages >= 16);
    REQUIRE(pages <= 65536);
    size_t pg = dp_page();
    size_t len = (size_t)pages * pg;
    uint8_t *buf = dp_guarded(len, false, 0);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, len, TRUE));
    CHECK_EQ(f.lam->AdapterPageCount, pages);
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(1), &f, buf,
                               NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ),
                  STATUS_SUCCESS);
    NDK_RESULT_EX e;
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    dp_mr ms, sink;
    REQUIRE(dp_buf_reg(&x.a, &ms, 64, 0, 71) && dp_buf_reg(&x.a, &sink, 64, DP_SINK_FLAGS, 0));
    NDK_SGE g = dp_sge(&ms, 0, 64), ks = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), &g, 1, buf + len - 64, f.tok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(3), &ks, 1, buf + len - 64, f.tok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r[2];
    DP_WAIT(c->cqa, r, 2);
    DP_CHECK_CQE(r[0], STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(2), -1);
    DP_CHECK_CQE(r[1], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(3), -1);
    DP_CHECK_DATA(buf + len - 64, 64, 71, 0);
    DP_CHECK_DATA(sink.addr, 64, 71, 0);

    /* One page more than initialized for. */
    dp_frmr small;
    uint8_t *sb = dp_guarded(5 * pg, false, 0);
    REQUIRE(dp_frmr_init(&x.p, &small, sb, 4 * pg, TRUE));
    NDK_LOGICAL_ADDRESS five[5];
    ULONG size = sizeof(NDK_LOGICAL_ADDRESS_MAPPING) + 8 * sizeof(NDK_LOGICAL_ADDRESS), fbo = 0;
    NDK_LOGICAL_ADDRESS_MAPPING *lam5 = dp_malloc(size);
    MDL m5 = {.Next = NULL, .StartVa = sb, .ByteOffset = 0, .ByteCount = (ULONG)(5 * pg)};
    dp_req *rq = dp_req_new("NdkBuildLAM");
    DP_REQUIRE_ST(dp_finish(rq, x.p.ad->Dispatch->NdkBuildLAM(x.p.ad, &m5, 5 * pg, dp_req_cb, rq,
                                                              lam5, &size, &fbo),
                            DP_WAIT_MS),
                  STATUS_SUCCESS);
    REQUIRE(lam5->AdapterPageCount == 5);
    memcpy(five, lam5->AdapterPageArray, sizeof five);
    NTSTATUS st = c->qp->Dispatch->NdkFastRegister(c->qp, DP_CTX(4), small.mr, 5, five, 0, 5 * pg,
                                                   sb, NDK_OP_FLAG_ALLOW_REMOTE_WRITE);
    fprintf(stderr, "    NdkFastRegister with 5 pages on an MR initialized for 4: %s\n",
            ndk_status_name(st));
    CHECK(st != STATUS_SUCCESS);
    DP_CHECK_QUIET(c->cqp);
    x.p.ad->Dispatch->NdkReleaseLAM(x.p.ad, lam5);
    dp_frmr_close(&small);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&sink);
    dp_pair_close(&x);
}

/*
 * How many pieces the local SGEs of one request may need (libndk: 64 runs
 * of pages adjacent in memory, docs/behaviour.md). A fast registration of
 * every other page of a buffer makes each page a piece of its own: an SGE
 * over 64 of them works (a Send, its data checked), one over 65 is refused
 * inline with STATUS_IMPLEMENTATION_LIMIT by every call that takes local
 * SGEs, with no CQE, and the QP keeps working.
 */
#define LOCAL_PIECES_MAX 64u

DP_CASE(local_sge_piece_limit)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    const ULONG np = LOCAL_PIECES_MAX + 1;
    uint8_t *buf = dp_guarded(2 * np * pg, false, 0);
    dp_fill(buf, 2 * np * pg, 51, 0);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, 2 * np * pg, FALSE));
    NDK_LOGICAL_ADDRESS *pages = dp_malloc(np * sizeof *pages);
    for (ULONG i = 0; i < np; i++)
        pages[i] = f.lam->AdapterPageArray[2 * i];
    uint8_t *va = (uint8_t *)(uintptr_t)((uint64_t)0x300000 * pg);
    DP_REQUIRE_ST(c->qp->Dispatch->NdkFastRegister(c->qp, DP_CTX(1), f.mr, np, pages, 0, np * pg, va,
                                                   NDK_OP_FLAG_ALLOW_LOCAL_WRITE),
                  STATUS_SUCCESS);
    NDK_RESULT_EX e;
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    NDK_SGE all;
    memset(&all, 0, sizeof all);
    all.VirtualAddress = va;
    all.Length = (ULONG)(np * pg);
    all.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    dp_mr wr, src;
    uint8_t *wb = dp_buf_reg(&x.a, &wr, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.a, &src, np * pg, NDK_MR_FLAG_ALLOW_REMOTE_READ, 52);
    REQUIRE(wb && sb);
    const NTSTATUS LIMIT = STATUS_IMPLEMENTATION_LIMIT;
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(2), &all, 1, 0), LIMIT);
    DP_CHECK_ST(dp_write(c->qp, DP_CTX(3), &all, 1, wb, wr.rtok, 0), LIMIT);
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(4), &all, 1, sb, src.rtok, 0), LIMIT);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(5), &all, 1), LIMIT);
    DP_CHECK_QUIET(c->cqp);

    /* One piece fewer: a Send of 64 pages, each from its own place. */
    dp_mr rr;
    size_t n = LOCAL_PIECES_MAX * pg;
    uint8_t *rb = dp_buf_reg(&x.a, &rr, n, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(rb);
    NDK_SGE rs = dp_sge(&rr, 0, (ULONG)n);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(6), &rs, 1), STATUS_SUCCESS);
    all.Length = (ULONG)n;
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(7), &all, 1, 0), STATUS_SUCCESS);
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(7), -1);
    DP_WAIT(c->cqa, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(6), n);
    for (size_t i = 0; i < LOCAL_PIECES_MAX; i++)
        DP_CHECK_DATA(rb + i * pg, pg, 51, 2 * i * pg);
    dp_frmr_close(&f);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(qp_creation_limits);
    RUN_FAM(sge_count_limits);
    RUN_FAM(inline_size_limits);
    RUN_FAM(transfer_length_limit);
    RUN(receive_queue_depth);
    RUN_FAM(initiator_queue_depth);
    RUN_FAM(initiator_queue_depth_zero);
    RUN_FAM(unknown_flags);
    RUN_FAM(irrelevant_flags_ignored);
    RUN_FAM(unconnected_qp);
    RUN_FAM(local_sge_checks);
    RUN_FAM(ord_enforcement);
    RUN_FAM(read_with_ord_zero);
    RUN_FAM(frmr_page_count);
    RUN_FAM(local_sge_piece_limit);
    return tl_finish();
}
