/* Every data-path operation end to end over IPv4 loopback, with the data
 * checked byte for byte and every completion's fields checked: Send/Receive
 * of many sizes and SGE layouts, solicited sends, SendAndInvalidate of a
 * fast-registered MR, INLINE sends and writes, Write, Read (single and
 * multi-SGE sinks, zero length), READ_FENCE, SILENT_SUCCESS, DEFER chains,
 * a post failing after DEFER posts, RDMA_READ_LOCAL_INVALIDATE, memory
 * windows, fast registration from a LAM (remote access, local SGEs across
 * pages that are not adjacent, the LAM released before it executes),
 * Invalidate, completion order, and both GetCqResults flavours.
 * Contract: reference 4.5, 5.4.3, 5.4.5, 5.9, 6.4-6.10, 8, 9, 10.3; iwarp.md 3.
 * libndk choices relied on (behaviour the reference leaves open) are marked
 * "libndk:". */
#include "dptest.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

/* Waits for one completion on c and checks it. */
#define EXPECT_ONE(c, st, type, qpctx, reqctx, bytes)                                        \
    do {                                                                                     \
        NDK_RESULT_EX e1_;                                                                   \
        if (dp_wait_ex((c), &e1_, 1, DP_WAIT_MS) != 1) {                                     \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] no completion for %s\n", __FILE__, __LINE__,         \
                    tl_current, #reqctx);                                                    \
        } else {                                                                             \
            DP_CHECK_CQE(e1_, (st), (type), (qpctx), (reqctx), (bytes));                     \
        }                                                                                    \
    } while (0)

/* Send/Receive of 0 B, 1 B, 64 B, 64 KiB and 1 MiB (the last spans many
 * FPDUs): BytesTransferred is the message size, the bytes are the sender's,
 * and the rest of a larger receive buffer is left alone. */
DP_CASE(send_receive_sizes)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    static const size_t sizes[] = {0, 1, 64, 64 * KiB, 1 * MiB};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        /* The receive buffer is 100 bytes larger than the message. */
        size_t cap = n + 100;
        dp_mr ms, mr;
        uint8_t *src = dp_buf_reg(&x.a, &ms, n ? n : 1, 0, 10 + i);
        uint8_t *dst = dp_guarded(cap, true, 0xEE);
        REQUIRE(src && dp_mr_reg(&x.p, &mr, dst, cap, NDK_MR_FLAG_ALLOW_LOCAL_WRITE));
        NDK_SGE rs = dp_sge(&mr, 0, (ULONG)cap);
        NDK_SGE ss = dp_sge(&ms, 0, (ULONG)n);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100 + i), &rs, 1), STATUS_SUCCESS);
        /* A zero-byte message is sent with no SGE (nSge 0). */
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(200 + i), &ss, n ? 1 : 0, 0), STATUS_SUCCESS);
        EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(200 + i),
                   -1);
        EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100 + i),
                   n);
        DP_CHECK_DATA(dst, n, 10 + i, 0);
        DP_CHECK_BYTES(dst + n, cap - n, 0xEE);
        dp_mr_close(&ms);
        dp_mr_close(&mr);
    }
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->cqp);
    dp_pair_close(&x);
}

/* A message gathered from 4 SGEs of two MRs lands scattered over 3 SGEs of
 * two other MRs, in SGE order. */
DP_CASE(send_receive_multi_sge)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr s1, s2, r1, r2;
    uint8_t *a1 = dp_buf_reg(&x.a, &s1, 40000, 0, 0);
    uint8_t *a2 = dp_buf_reg(&x.a, &s2, 40000, 0, 0);
    uint8_t *b1 = dp_buf_reg(&x.p, &r1, 40000, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *b2 = dp_buf_reg(&x.p, &r2, 40000, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(a1 && a2 && b1 && b2);
    memset(b1, 0xEE, 40000);
    memset(b2, 0xEE, 40000);
    /* The gather list: stream bytes [0,1000) [1000,1001) [1001,31001) [31001,35097). */
    static const ULONG glen[4] = {1000, 1, 30000, 4096};
    static const size_t goff[4] = {3, 5000, 2000, 35000};
    NDK_SGE g[4];
    size_t at = 0;
    for (int i = 0; i < 4; i++) {
        dp_mr *m = (i % 2) ? &s2 : &s1;
        dp_fill(m->addr + goff[i], glen[i], 77, at);
        g[i] = dp_sge(m, goff[i], glen[i]);
        at += glen[i];
    }
    size_t total = at;
    /* The scatter list: 7 bytes, 20000 bytes, then 20000 bytes of room. */
    NDK_SGE s[3] = {dp_sge(&r1, 11, 7), dp_sge(&r2, 100, 20000), dp_sge(&r1, 1000, 20000)};
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), s, 3), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), g, 4, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), total);
    DP_CHECK_DATA(b1 + 11, 7, 77, 0);
    DP_CHECK_DATA(b2 + 100, 20000, 77, 7);
    DP_CHECK_DATA(b1 + 1000, total - 20007, 77, 20007);
    /* Nothing outside the scatter list was written. */
    DP_CHECK_BYTES(b1, 11, 0xEE);
    DP_CHECK_BYTES(b1 + 18, 1000 - 18, 0xEE);
    DP_CHECK_BYTES(b1 + 1000 + (total - 20007), 40000 - 1000 - (total - 20007), 0xEE);
    DP_CHECK_BYTES(b2, 100, 0xEE);
    DP_CHECK_BYTES(b2 + 20100, 40000 - 20100, 0xEE);
    dp_mr_close(&s1);
    dp_mr_close(&s2);
    dp_mr_close(&r1);
    dp_mr_close(&r2);
    dp_pair_close(&x);
}

/* SEND_AND_SOLICIT_EVENT is accepted by NdkSend and NdkSendAndInvalidate's
 * flag set and delivers like any Send (its notification effect is in
 * test_dp_cq). */
DP_CASE(send_solicited)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, mr;
    uint8_t *src = dp_buf_reg(&x.a, &ms, 512, 0, 5);
    uint8_t *dst = dp_buf_reg(&x.p, &mr, 512, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(src && dst);
    NDK_SGE rs = dp_sge(&mr, 0, 512), ss = dp_sge(&ms, 0, 512);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), &ss, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 512);
    DP_CHECK_DATA(dst, 512, 5, 0);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_pair_close(&x);
}

/*
 * SendAndInvalidate of the receiver's fast-registered MR (5.9.9, 8.3, C2):
 * the receive completes as NdkOperationTypeReceiveAndInvalidate with the
 * token in TypeSpecificCompletionOutput, the sender's as a Send; afterwards
 * the token is dead locally (an SGE with it is refused) and remotely (a Read
 * through it fails). A second round is retrieved with NdkGetCqResults, which
 * must return such a receive too. A fresh fast registration makes the
 * same token valid again (the MR keeps its token by default:
 * test_frmr_token).
 */
DP_CASE(send_and_invalidate)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    /* Three pages with the region starting 256 bytes into the first. */
    uint8_t *area = dp_guarded(3 * pg, false, 0);
    uint8_t *tgt = area + 256;
    size_t tlen = 3 * pg - 256;
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, tgt, tlen, TRUE));
    ULONG rw = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(10), &f, tgt, rw), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(10), -1);
    UINT32 tok1 = f.tok;

    dp_mr ms, mr, sink;
    uint8_t *src = dp_buf_reg(&x.a, &ms, 4096, 0, 21);
    uint8_t *dst = dp_buf_reg(&x.p, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *snk = dp_buf_reg(&x.a, &sink, 4096, DP_SINK_FLAGS, 0);
    REQUIRE(src && dst && snk);

    /* The registration works before it is invalidated: a Write through it. */
    NDK_SGE ws = dp_sge(&ms, 0, 100);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(11), &ws, 1, tgt + 10, tok1, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(&mr, 0, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(12), &rs, 1), STATUS_SUCCESS);
    NDK_SGE ss = dp_sge(&ms, 200, 32);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(13), &ss, 1, 0, tok1),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(11), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(13), -1);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqp, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceiveAndInvalidate, dp_qpctx_p(c), DP_CTX(12),
                 32);
    CHECK_EQ(e.TypeSpecificCompletionOutput, tok1);
    DP_CHECK_DATA(dst, 32, 21, 200);
    DP_CHECK_DATA(tgt + 10, 100, 21, 0); /* the Write was placed before the Send completed */

    /* Locally dead: a receive SGE naming the invalidated registration. */
    NDK_SGE dead;
    memset(&dead, 0, sizeof dead);
    dead.VirtualAddress = tgt;
    dead.Length = 64;
    dead.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(14), &dead, 1), STATUS_ACCESS_VIOLATION);

    /* Second round, read through NdkGetCqResults (C2). */
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(15), &f, tgt, rw), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(15), -1);
    UINT32 tok2 = f.tok;
    CHECK_EQ(tok2, tok1);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(16), &rs, 1), STATUS_SUCCESS);
    NDK_SGE ss2 = dp_sge(&ms, 300, 48);
    DP_CHECK_ST(c->qa->Dispatch->NdkSendAndInvalidate(c->qa, DP_CTX(17), &ss2, 1, 0, tok2),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(17), -1);
    NDK_RESULT pr;
    REQUIRE(dp_wait_plain(c->cqp, &pr, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(pr.Status, STATUS_SUCCESS);
    CHECK_EQ(pr.BytesTransferred, 48);
    CHECK(pr.RequestContext == DP_CTX(16));
    CHECK(pr.QPContext == dp_qpctx_p(c));
    DP_CHECK_DATA(dst, 48, 21, 300);

    /* Remotely dead: a Read through the invalidated token fails, and only
     * the sink's own bytes could have been touched (none are). libndk: a
     * Read whose source is invalid completes with STATUS_ACCESS_VIOLATION. */
    memset(snk, 0x5C, 4096);
    NDK_SGE sk = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(18), &sk, 1, tgt, tok2, 0), STATUS_SUCCESS);
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(18));
    DP_CHECK_BYTES(snk, 4096, 0x5C);

    dp_mr_close(&ms);
    dp_mr_close(&mr);
    dp_mr_close(&sink);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

/*
 * INLINE (5.9.2, 6.7): the data is copied during the call, so the buffer may
 * change as soon as the post returns; the SGEs need no registration and
 * their tokens are ignored; nSge may exceed MaxInitiatorRequestSge; the total
 * is bounded by InlineDataSize. Checked for NdkSend and NdkWrite (libndk
 * accepts INLINE on writes, reference 5.9.8 [I]).
 */
DP_CASE(inline_send_and_write)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.isge = 2;
    cfg.inl = 64;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    /* Plain heap memory, never registered. */
    uint8_t *heap = dp_malloc(256);
    dp_mr mr, wr;
    uint8_t *dst = dp_buf_reg(&x.p, &mr, 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wdst = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(dst && wdst);
    memset(wdst, 0xEE, 4096);

    /* Five SGEs (the QP allows 2) totalling exactly InlineDataSize. */
    static const ULONG len[5] = {1, 20, 3, 24, 16};
    NDK_SGE g[5];
    size_t at = 0;
    for (int i = 0; i < 5; i++) {
        memset(&g[i], 0, sizeof g[i]);
        g[i].VirtualAddress = heap + 40 * i;
        g[i].Length = len[i];
        g[i].MemoryRegionToken = 0xDEADBEEFu ^ (UINT32)i; /* must be ignored */
        dp_fill(heap + 40 * i, len[i], 31, at);
        at += len[i];
    }
    CHECK_EQ(at, 64);
    NDK_SGE rs = dp_sge(&mr, 0, 256);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), g, 5, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    memset(heap, 0xAA, 256); /* the provider copied it already */
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 64);
    DP_CHECK_DATA(dst, 64, 31, 0);

    /* The same gather list as an inline Write at offset 100, then a
     * zero-byte Send as the notification (iwarp.md 3.8 rule 3). */
    at = 0;
    for (int i = 0; i < 5; i++) {
        dp_fill(heap + 40 * i, len[i], 32, at);
        at += len[i];
    }
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), g, 5, wdst + 100, wr.rtok, NDK_OP_FLAG_INLINE),
                STATUS_SUCCESS);
    memset(heap, 0xBB, 256);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(4), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(5), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(4), 0);
    DP_CHECK_DATA(wdst + 100, 64, 32, 0);
    DP_CHECK_BYTES(wdst, 100, 0xEE);
    DP_CHECK_BYTES(wdst + 164, 4096 - 164, 0xEE);

    /* An inline Send with no SGE at all is a zero-byte message. */
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(6), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(7), g, 0, NDK_OP_FLAG_INLINE), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(7), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(6), 0);

    dp_mr_close(&mr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

/* RDMA Write (iwarp.md 3.4, 3.8 rule 3): a 64 KiB three-SGE write and a
 * 1 MiB write land at the RemoteAddress the requester chose, nothing around
 * them changes, and a Send posted after them completes at the receiver only
 * once their data is in place. */
DP_CASE(write_then_send)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, wr, rr;
    uint8_t *src = dp_buf_reg(&x.a, &ms, 2 * MiB, 0, 0);
    size_t cap = 2 * MiB;
    uint8_t *dst = dp_guarded(cap, true, 0xEE);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(src && rb && dp_mr_reg(&x.p, &wr, dst, cap, NDK_MR_FLAG_ALLOW_REMOTE_WRITE));
    dp_fill(src, 2 * MiB, 41, 0);
    NDK_SGE g[3] = {dp_sge(&ms, 0, 10000), dp_sge(&ms, 10000, 1),
                    dp_sge(&ms, 10001, 65536 - 10001)};
    size_t off1 = 4096 + 17;
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(1), g, 3, dst + off1, wr.rtok, 0), STATUS_SUCCESS);
    /* 1 MiB from the second half of the source, ending 1 byte before the
     * end of the region. */
    size_t off2 = cap - MiB - 1;
    NDK_SGE big = dp_sge(&ms, MiB, MiB);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), &big, 1, dst + off2, wr.rtok, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(3), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(1), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(3), 0);
    DP_CHECK_DATA(dst + off1, 65536, 41, 0);
    DP_CHECK_DATA(dst + off2, MiB, 41, MiB);
    DP_CHECK_BYTES(dst, off1, 0xEE);
    DP_CHECK_BYTES(dst + off1 + 65536, off2 - off1 - 65536, 0xEE);
    DP_CHECK_BYTES(dst + cap - 1, 1, 0xEE);
    /* A Write produces nothing at the target (iwarp.md 3.4). */
    DP_CHECK_QUIET(c->cqp);
    dp_mr_close(&ms);
    dp_mr_close(&wr);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/* RDMA Read (5.9.7): a single-SGE sink, a four-SGE sink over two MRs, and a
 * zero-length read; each completes as NdkOperationTypeRead with the source's
 * bytes in the sink and nothing else written. */
DP_CASE(read_sinks)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr src, k1, k2;
    uint8_t *s = dp_buf_reg(&x.p, &src, 300000, NDK_MR_FLAG_ALLOW_REMOTE_READ, 51);
    uint8_t *d1 = dp_guarded(200000, true, 0xEE);
    uint8_t *d2 = dp_guarded(200000, false, 0xEE);
    REQUIRE(s && dp_mr_reg(&x.a, &k1, d1, 200000, DP_SINK_FLAGS) &&
            dp_mr_reg(&x.a, &k2, d2, 200000, DP_SINK_FLAGS));

    /* Single SGE: 100000 bytes from source offset 5 to the end of d1. */
    NDK_SGE one = dp_sge(&k1, 100000, 100000);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(1), &one, 1, s + 5, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(1), -1);
    DP_CHECK_DATA(d1 + 100000, 100000, 51, 5);
    DP_CHECK_BYTES(d1, 100000, 0xEE);

    /* Four SGEs over both sinks: 1 + 65536 + 3000 + 70000 bytes. */
    NDK_SGE four[4] = {dp_sge(&k2, 0, 1), dp_sge(&k1, 10, 65536), dp_sge(&k2, 50000, 3000),
                       dp_sge(&k2, 100000, 70000)};
    memset(d1, 0xEE, 200000);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(2), four, 4, s + 1000, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(2), -1);
    DP_CHECK_DATA(d2, 1, 51, 1000);
    DP_CHECK_DATA(d1 + 10, 65536, 51, 1001);
    DP_CHECK_DATA(d2 + 50000, 3000, 51, 1000 + 1 + 65536);
    DP_CHECK_DATA(d2 + 100000, 70000, 51, 1000 + 1 + 65536 + 3000);
    DP_CHECK_BYTES(d1, 10, 0xEE);
    DP_CHECK_BYTES(d1 + 10 + 65536, 200000 - 10 - 65536, 0xEE);
    DP_CHECK_BYTES(d2 + 1, 50000 - 1, 0xEE);
    DP_CHECK_BYTES(d2 + 53000, 100000 - 53000, 0xEE);
    DP_CHECK_BYTES(d2 + 170000, 30000, 0xEE);

    /* Zero length (iwarp.md 3.5 step 4): no sink, completes successfully. */
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(3), dp_nosge(), 0, s, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(3), -1);
    /* A Read produces nothing at the source. */
    DP_CHECK_QUIET(c->cqp);
    DP_CHECK_DATA(s, 300000, 51, 0);
    dp_mr_close(&src);
    dp_mr_close(&k1);
    dp_mr_close(&k2);
    dp_pair_close(&x);
}

/*
 * READ_FENCE (6.9, iwarp.md 3.8 rule 7): a Send and a Write that gather from
 * a Read's sink, posted right after a 1 MiB Read with the fence, carry the
 * read data, never the sink's old contents. They gather the sink's last
 * bytes, which the Read places last.
 */
DP_CASE(read_fence)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr src, sink, rr, wr;
    uint8_t *s = dp_buf_reg(&x.p, &src, MiB, NDK_MR_FLAG_ALLOW_REMOTE_READ, 61);
    uint8_t *k = dp_guarded(MiB, false, 0x11);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(s && rb && wb &&
            dp_mr_reg(&x.a, &sink, k, MiB, DP_SINK_FLAGS | NDK_MR_FLAG_ALLOW_LOCAL_WRITE));
    NDK_SGE rs = dp_sge(&rr, 0, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(5), dp_nosge(), 0), STATUS_SUCCESS);
    NDK_SGE all = dp_sge(&sink, 0, MiB);
    NDK_SGE tail = dp_sge(&sink, MiB - 4096, 4096);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(2), &all, 1, s, src.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(3), &tail, 1, NDK_OP_FLAG_READ_FENCE), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(4), &tail, 1, wb, wr.rtok, NDK_OP_FLAG_READ_FENCE),
                STATUS_SUCCESS);
    /* The Write's completion only says TCP took it; the receive of a Send
     * behind it on the same stream says it was placed. */
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(6), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(6), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 4096);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(5), 0);
    DP_CHECK_DATA(rb, 4096, 61, MiB - 4096);
    DP_CHECK_DATA(wb, 4096, 61, MiB - 4096);
    DP_CHECK_DATA(k, MiB, 61, 0);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

/* SILENT_SUCCESS (6.9, 8.1): a Send, a Write and a Read that succeed leave
 * no CQE; the signalled Send posted after them does, and by then (completions
 * in posting order) the silent Read's data is in its sink. */
DP_CASE(silent_success)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, src, sink, rr, wr;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 71);
    uint8_t *s = dp_buf_reg(&x.p, &src, 100000, NDK_MR_FLAG_ALLOW_REMOTE_READ, 72);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 100000, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 8192, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(a && s && k && rb && wb);
    NDK_SGE r1 = dp_sge(&rr, 0, 4096), r2 = dp_sge(&rr, 4096, 4096);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &r1, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), &r2, 1), STATUS_SUCCESS);
    NDK_SGE g1 = dp_sge(&ms, 0, 1000), g2 = dp_sge(&ms, 1000, 500), g3 = dp_sge(&ms, 2000, 10);
    NDK_SGE ks = dp_sge(&sink, 0, 100000);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(11), &g1, 1, NDK_OP_FLAG_SILENT_SUCCESS), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(12), &g2, 1, wb, wr.rtok, NDK_OP_FLAG_SILENT_SUCCESS),
                STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(13), &ks, 1, s, src.rtok, NDK_OP_FLAG_SILENT_SUCCESS),
                STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(14), &g3, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(14), -1);
    DP_CHECK_DATA(k, 100000, 72, 0);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 1000);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(2), 10);
    DP_CHECK_DATA(rb, 1000, 71, 0);
    DP_CHECK_DATA(rb + 4096, 10, 71, 2000);
    DP_CHECK_DATA(wb, 500, 71, 1000);
    DP_CHECK_QUIET(c->cqa);
    dp_mr_close(&ms);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

/* DEFER chains (10.3 D1-D5): Sends, a Write and a Read posted with DEFER,
 * then a Send without it: all six complete, in posting order, and the
 * receiver gets the four messages in order. */
DP_CASE(defer_chain)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, src, sink, rr, wr;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 8192, 0, 81);
    uint8_t *s = dp_buf_reg(&x.p, &src, 8192, NDK_MR_FLAG_ALLOW_REMOTE_READ, 82);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 8192, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 4 * 1024, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 8192, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(a && s && k && rb && wb);
    for (int i = 0; i < 4; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 1024, 1024);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100 + i), &r, 1), STATUS_SUCCESS);
    }
    NDK_SGE g[4];
    for (int i = 0; i < 4; i++)
        g[i] = dp_sge(&ms, (size_t)i * 1024, (ULONG)(100 + i));
    NDK_SGE wg = dp_sge(&ms, 5000, 3000), kg = dp_sge(&sink, 0, 8192);
    ULONG D = NDK_OP_FLAG_DEFER;
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(1), &g[0], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), &g[1], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), &wg, 1, wb, wr.rtok, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), &kg, 1, s, src.rtok, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), &g[2], 1, D), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(6), &g[3], 1, 0), STATUS_SUCCESS);
    static const NDK_OPERATION_TYPE types[6] = {NdkOperationTypeSend, NdkOperationTypeSend,
                                                NdkOperationTypeWrite, NdkOperationTypeRead,
                                                NdkOperationTypeSend, NdkOperationTypeSend};
    NDK_RESULT_EX r[6];
    ULONG n = dp_wait_ex(c->cqa, r, 6, DP_WAIT_MS);
    CHECK_EQ(n, 6);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, types[i], dp_qpctx_a(c), DP_CTX(i + 1), -1);
    n = dp_wait_ex(c->cqp, r, 4, DP_WAIT_MS);
    CHECK_EQ(n, 4);
    for (ULONG i = 0; i < n; i++) {
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c),
                     DP_CTX(100 + i), 100 + i);
        DP_CHECK_DATA(rb + i * 1024, 100 + i, 81, i * 1024);
    }
    DP_CHECK_DATA(wb, 3000, 81, 5000);
    DP_CHECK_DATA(k, 8192, 82, 0);
    dp_mr_close(&ms);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

/*
 * A post that fails inline after DEFER posts hands the requests deferred
 * before it on first (D4, docs/rules.md), whatever made it fail: an unknown
 * flag bit, a NULL SGE array on Read, Send or Write, a NULL page array on
 * FastRegister, a NULL object on Invalidate. The Send deferred before it
 * must go out and complete with no further post.
 * The passive side speaks first: once the active side has heard its peer,
 * its post-connect nudges (zero-length Writes 20 and 200 ms after
 * NdkCompleteConnect, which also push queued requests out) do nothing, so
 * nothing but the failing post can send the deferred Send, and the 600 ms
 * wait cannot be rescued by a nudge.
 */
#define DEFER_FLUSH_MS 600u
enum { F_SEND_FLAG, F_SENDINV_FLAG, F_WRITE_FLAG, F_READ_FLAG, F_BIND_FLAG, F_FR_FLAG, F_INV_FLAG,
       F_SEND_NULL, F_WRITE_NULL, F_READ_NULL, F_FR_NULL, F_INV_NULL, F_COUNT };

DP_CASE(defer_chain_inline_failure)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, rr, ps, ar, wr, src, sink, mwbase;
    uint8_t *a = dp_buf_reg(&x.a, &ms, F_COUNT * 256, 0, 141);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, F_COUNT * 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *pb = dp_buf_reg(&x.p, &ps, 64, 0, 142);
    uint8_t *ab = dp_buf_reg(&x.a, &ar, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.p, &src, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 143);
    uint8_t *kb = dp_buf_reg(&x.a, &sink, 64, DP_SINK_FLAGS, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &mwbase, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.a);
    uint8_t *fb = dp_guarded(4096, false, 0);
    dp_frmr f;
    REQUIRE(a && rb && pb && ab && wb && sb && kb && mb && mw && dp_frmr_init(&x.a, &f, fb, 4096, TRUE));

    /* The passive side speaks first. */
    NDK_SGE r0 = dp_sge(&ar, 0, 64), s0 = dp_sge(&ps, 0, 64);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(900), &r0, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(901), &s0, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(900), 64);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(901), -1);

    const ULONG D = NDK_OP_FLAG_DEFER, BAD = 0x400u;
    NDK_SGE w1 = dp_sge(&ms, 0, 16), k1 = dp_sge(&sink, 0, 16);
    for (int i = 0; i < F_COUNT; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 256, 256), g = dp_sge(&ms, (size_t)i * 256, 100 + i);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(100 + i), &r, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(200 + i), &g, 1, D), STATUS_SUCCESS);
        NDK_QP *q = c->qa;
        void *ctx = DP_CTX(300 + i);
        NTSTATUS st = STATUS_SUCCESS;
        switch (i) {
        case F_SEND_FLAG: st = dp_send(q, ctx, &w1, 1, D | BAD); break;
        case F_SENDINV_FLAG: st = q->Dispatch->NdkSendAndInvalidate(q, ctx, &w1, 1, D | BAD, 0x1234); break;
        case F_WRITE_FLAG: st = dp_write(q, ctx, &w1, 1, wb, wr.rtok, D | BAD); break;
        case F_READ_FLAG: st = dp_read(q, ctx, &k1, 1, sb, src.rtok, D | BAD); break;
        case F_BIND_FLAG:
            st = q->Dispatch->NdkBind(q, ctx, mwbase.mr, mw, mb, 4096, NDK_OP_FLAG_ALLOW_REMOTE_READ | D | BAD);
            break;
        case F_FR_FLAG: st = dp_frmr_post(q, ctx, &f, fb, D | BAD); break;
        case F_INV_FLAG: st = q->Dispatch->NdkInvalidate(q, ctx, &f.mr->Header, D | BAD); break;
        case F_SEND_NULL: st = dp_send(q, ctx, NULL, 1, D); break;
        case F_WRITE_NULL: st = dp_write(q, ctx, NULL, 1, wb, wr.rtok, D); break;
        case F_READ_NULL: st = dp_read(q, ctx, NULL, 1, sb, src.rtok, D); break;
        case F_FR_NULL:
            st = q->Dispatch->NdkFastRegister(q, ctx, f.mr, 1, NULL, 0, 4096, fb, D);
            break;
        case F_INV_NULL: st = q->Dispatch->NdkInvalidate(q, ctx, NULL, D); break;
        }
        DP_CHECK_ST(st, STATUS_INVALID_PARAMETER);
        NDK_RESULT_EX e;
        if (dp_wait_ex(c->cqa, &e, 1, DEFER_FLUSH_MS) != 1) {
            tl_failures++;
            fprintf(stderr, "[%s] failing post %d: the Send deferred before it never completed\n",
                    tl_current, i);
            break; /* stranded: later cases would only repeat it */
        }
        DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(200 + i), -1);
        EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(100 + i),
                   100 + i);
        DP_CHECK_DATA(rb + (size_t)i * 256, 100 + i, 141, (size_t)i * 256);
    }
    DP_CHECK_QUIET(c->cqa);
    dp_close(mw);
    dp_frmr_close(&f);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&ps);
    dp_mr_close(&ar);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&mwbase);
    dp_pair_close(&x);
}

/*
 * RDMA_READ_LOCAL_INVALIDATE (5.9.7): with the adapter flag, a successful
 * Read invalidates its first SGE's token (a fast-registered sink), so a later
 * SGE with it is refused. libndk sets the flag (src/adapter.c).
 */
DP_CASE(read_local_invalidate)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    CHECK(x.a.info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED);
    dp_mr src;
    uint8_t *s = dp_buf_reg(&x.p, &src, 8192, NDK_MR_FLAG_ALLOW_REMOTE_READ, 91);
    uint8_t *k = dp_guarded(8192, false, 0);
    dp_frmr f;
    REQUIRE(s && dp_frmr_init(&x.a, &f, k, 8192, FALSE));
    DP_REQUIRE_ST(dp_frmr_post(c->qa, DP_CTX(1), &f, k,
                               NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK),
                  STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_a(c), DP_CTX(1), -1);
    NDK_SGE ks;
    memset(&ks, 0, sizeof ks);
    ks.VirtualAddress = k;
    ks.Length = 4096;
    ks.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(2), &ks, 1, s, src.rtok,
                        NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE),
                STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(2), -1);
    DP_CHECK_DATA(k, 4096, 91, 0);
    NDK_SGE ks2 = ks;
    ks2.VirtualAddress = k + 4096;
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(3), &ks2, 1, s + 4096, src.rtok, 0),
                STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqa);
    dp_mr_close(&src);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

/*
 * Memory windows (5.9.4, 9.4): a window bound over part of an MR that has
 * only local rights gives the peer remote read and write through the
 * window's token, limited to the window; after NdkInvalidate of the window,
 * a Read through its token fails.
 */
DP_CASE(bind_window)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    dp_mr base, ms, sink, rr;
    uint8_t *b = dp_buf_reg(&x.p, &base, 4 * pg, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 101);
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 102);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 2 * pg, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_MW *mw = dp_mw_new(&x.p);
    REQUIRE(b && a && k && rb && mw);
    uint8_t *win = b + pg;
    size_t wlen = 2 * pg;
    DP_REQUIRE_ST(c->qp->Dispatch->NdkBind(c->qp, DP_CTX(1), base.mr, mw, win, wlen,
                                           NDK_OP_FLAG_ALLOW_REMOTE_READ |
                                               NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
                  STATUS_SUCCESS);
    UINT32 wt = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeBind, dp_qpctx_p(c), DP_CTX(1), -1);

    /* Write 100 bytes 50 bytes into the window, then the notification. */
    NDK_SGE g = dp_sge(&ms, 0, 100);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), &g, 1, win + 50, wt, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(3), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(3), 0);
    DP_CHECK_DATA(win + 50, 100, 102, 0);
    DP_CHECK_DATA(b, pg + 50, 101, 0);
    DP_CHECK_DATA(win + 150, 3 * pg - 150, 101, pg + 150);

    /* Read the whole window back. */
    NDK_SGE kg = dp_sge(&sink, 0, (ULONG)wlen);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(5), &kg, 1, win, wt, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(5), -1);
    CHECK(memcmp(k, win, wlen) == 0);

    /* Invalidate the window; the token no longer reads. */
    DP_CHECK_ST(c->qp->Dispatch->NdkInvalidate(c->qp, DP_CTX(6), &mw->Header, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_p(c), DP_CTX(6), -1);
    memset(k, 0x5C, 2 * pg);
    NDK_SGE k1 = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(7), &k1, 1, win, wt, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(7));
    DP_CHECK_BYTES(k, 2 * pg, 0x5C);
    dp_close(mw);
    dp_mr_close(&base);
    dp_mr_close(&ms);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/*
 * Fast registration (5.9.5, 9.3): pages from NdkBuildLAM of a buffer that
 * starts 300 bytes into a page, registered at a BaseVirtualAddress of the
 * consumer's choosing (FBO + n * PAGE_SIZE, not the buffer's address): the
 * peer's Write at base + off lands at buffer + off. NdkInvalidate then kills
 * the token for the peer.
 */
DP_CASE(fast_register_write)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    uint8_t *area = dp_guarded(4 * pg, false, 0xEE);
    uint8_t *buf = area + 300;
    size_t len = 3 * pg;
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, len, TRUE));
    CHECK_EQ(f.fbo, 300);
    uint8_t *base = (uint8_t *)(uintptr_t)(((uint64_t)0x100000 * pg) + f.fbo);
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(1), &f, base,
                               NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ),
                  STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    dp_mr ms, rr, sink;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 8192, 0, 111);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 8192, DP_SINK_FLAGS, 0);
    REQUIRE(a && rb && k);
    NDK_SGE g = dp_sge(&ms, 0, 5000);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), &g, 1, base + 1000, f.tok, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(3), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(3), 0);
    DP_CHECK_DATA(buf + 1000, 5000, 111, 0);
    DP_CHECK_BYTES(area, 1300, 0xEE);
    DP_CHECK_BYTES(buf + 6000, 4 * pg - 300 - 6000, 0xEE);

    /* A Read through the same mapping returns what was written. */
    NDK_SGE kg = dp_sge(&sink, 0, 5000);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(5), &kg, 1, base + 1000, f.tok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(5), -1);
    DP_CHECK_DATA(k, 5000, 111, 0);

    DP_CHECK_ST(c->qp->Dispatch->NdkInvalidate(c->qp, DP_CTX(6), &f.mr->Header, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeInvalidate, dp_qpctx_p(c), DP_CTX(6), -1);
    NDK_SGE k1 = dp_sge(&sink, 0, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(7), &k1, 1, base + 1000, f.tok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e;
    REQUIRE(dp_wait_ex(c->cqa, &e, 1, DP_WAIT_MS) == 1);
    DP_CHECK_ST(e.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(e.Type, NdkOperationTypeRead);
    CHECK(e.RequestContext == DP_CTX(7));
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_mr_close(&sink);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

/*
 * libndk: the pages of a fast registration are checked again when it
 * executes (docs/behaviour.md, Memory). Posted with DEFER, then its LAM
 * released before the next post rings the doorbell: the FastRegister
 * completes with STATUS_INVALID_PARAMETER and maps nothing (a Send from
 * it fails), and the request behind it goes out as usual.
 */
DP_CASE(fast_register_lam_released_before_execution)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    uint8_t *buf = dp_guarded(4096, false, 0);
    dp_frmr f;
    dp_mr rr;
    uint8_t *rb = dp_buf_reg(&x.a, &rr, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(rb && dp_frmr_init(&x.p, &f, buf, 4096, TRUE));
    DP_REQUIRE_ST(dp_frmr_post(c->qp, DP_CTX(1), &f, buf, NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_DEFER),
                  STATUS_SUCCESS);
    f.ad->Dispatch->NdkReleaseLAM(f.ad, f.lam);
    f.lam = NULL;
    NDK_SGE rs = dp_sge(&rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(2), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(3), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_INVALID_PARAMETER, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(2), 0);
    NDK_SGE fs;
    memset(&fs, 0, sizeof fs);
    fs.VirtualAddress = buf;
    fs.Length = 64;
    fs.MemoryRegionToken = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    /* Refused inline, or (the MR's newest token was handed out by a post
     * that never took effect, which the post-time check cannot tell from
     * one still queued) when the Send executes. */
    NTSTATUS st = dp_send(c->qp, DP_CTX(4), &fs, 1, 0);
    if (st == STATUS_SUCCESS)
        EXPECT_ONE(c->cqp, STATUS_ACCESS_VIOLATION, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(4), -1);
    else
        DP_CHECK_ST(st, STATUS_ACCESS_VIOLATION);
    DP_CHECK_QUIET(c->cqp);
    dp_frmr_close(&f);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/*
 * Local SGEs in a fast-registered MR whose pages are not adjacent in memory
 * (5.9.5: consecutive pages need not be contiguous): the region is page 2,
 * then page 0, of a three-page buffer, and every SGE crosses from one to
 * the other. A Send and a Write gather across the break, a receive and a
 * Read sink are filled across it, byte for byte, and page 1 (which follows
 * page 0 in memory, not in the region) is never touched.
 */
#define FR_BYTE(buf, pg, k) ((k) < (pg) ? (buf) + 2 * (pg) + (k) : (buf) + (k) - (pg))

/* The region's bytes [o, o + n) are stream `seed` from `from`. */
static void check_region(const uint8_t *buf, size_t pg, size_t o, size_t n, uint32_t seed, size_t from)
{
    size_t first = pg - o; /* bytes in page 2 */
    DP_CHECK_DATA(FR_BYTE(buf, pg, o), first, seed, from);
    DP_CHECK_DATA(FR_BYTE(buf, pg, pg), n - first, seed, from + first);
}

DP_CASE(fast_register_local_across_pages)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    size_t pg = dp_page();
    uint8_t *buf = dp_guarded(3 * pg, false, 0xEE);
    dp_fill(buf, pg, 160, 0);
    dp_fill(buf + 2 * pg, pg, 160, 2 * pg);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.p, &f, buf, 3 * pg, TRUE));
    NDK_LOGICAL_ADDRESS pages[2] = {f.lam->AdapterPageArray[2], f.lam->AdapterPageArray[0]};
    uint8_t *va = (uint8_t *)(uintptr_t)((uint64_t)0x200000 * pg);
    DP_REQUIRE_ST(c->qp->Dispatch->NdkFastRegister(
                      c->qp, DP_CTX(1), f.mr, 2, pages, 0, 2 * pg, va,
                      NDK_OP_FLAG_ALLOW_LOCAL_WRITE | NDK_OP_FLAG_RDMA_READ_SINK),
                  STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, dp_qpctx_p(c), DP_CTX(1), -1);
    UINT32 lt = f.mr->Dispatch->NdkGetLocalTokenFromMr(f.mr);
    NDK_SGE across;
    memset(&across, 0, sizeof across);
    across.MemoryRegionToken = lt;
    dp_mr ar, wr, src, ms;
    uint8_t *ab = dp_buf_reg(&x.a, &ar, 8192, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.a, &wr, 8192, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    uint8_t *sb = dp_buf_reg(&x.a, &src, 8192, NDK_MR_FLAG_ALLOW_REMOTE_READ, 161);
    uint8_t *mb = dp_buf_reg(&x.a, &ms, 8192, 0, 162);
    REQUIRE(ab && wb && sb && mb);

    /* Gather: a Write of region bytes [pg - 1, pg + 2000), then a Send of
     * [pg - 1500, pg + 1500); its receive completing means the Write before
     * it was placed. */
    NDK_SGE rs = dp_sge(&ar, 0, 8192);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(2), &rs, 1), STATUS_SUCCESS);
    across.VirtualAddress = va + pg - 1;
    across.Length = 2001;
    DP_CHECK_ST(dp_write(c->qp, DP_CTX(3), &across, 1, wb + 10, wr.rtok, 0), STATUS_SUCCESS);
    across.VirtualAddress = va + pg - 1500;
    across.Length = 3000;
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(4), &across, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_p(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_p(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(2), 3000);
    DP_CHECK_DATA(ab, 1500, 160, 3 * pg - 1500);
    DP_CHECK_DATA(ab + 1500, 1500, 160, 0);
    DP_CHECK_DATA(wb + 10, 1, 160, 3 * pg - 1);
    DP_CHECK_DATA(wb + 11, 2000, 160, 0);

    /* Scatter: a Read into [pg - 2500, pg + 500), then a receive of
     * [pg - 700, pg + 3000). */
    across.VirtualAddress = va + pg - 2500;
    across.Length = 3000;
    DP_CHECK_ST(dp_read(c->qp, DP_CTX(5), &across, 1, sb, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_p(c), DP_CTX(5), -1);
    check_region(buf, pg, pg - 2500, 3000, 161, 0);
    across.VirtualAddress = va + pg - 700;
    across.Length = 3700;
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(6), &across, 1), STATUS_SUCCESS);
    NDK_SGE ss = dp_sge(&ms, 0, 3700);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(7), &ss, 1, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(7), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(6), 3700);
    check_region(buf, pg, pg - 700, 3700, 162, 0);
    /* Around them: the region's other bytes as they were, page 1 untouched. */
    DP_CHECK_DATA(buf + 2 * pg, pg - 2500, 160, 2 * pg);
    DP_CHECK_DATA(buf + 3000, pg - 3000, 160, 3000);
    DP_CHECK_BYTES(buf + pg, pg, 0xEE);

    dp_frmr_close(&f);
    dp_mr_close(&ar);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_mr_close(&ms);
    dp_pair_close(&x);
}

/*
 * Completion order (5.9, 8.1, iwarp.md 3.8 rules 2, 6, 8): initiator
 * completions come out in posting order even when a 1 MiB Read is still
 * outstanding ahead of Sends and Writes, and receives complete in the order
 * they were posted, each holding the message sent in that position.
 */
DP_CASE(completion_order)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ms, src, sink, rr, wr;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 16384, 0, 121);
    uint8_t *s = dp_buf_reg(&x.p, &src, MiB, NDK_MR_FLAG_ALLOW_REMOTE_READ, 122);
    uint8_t *k = dp_buf_reg(&x.a, &sink, MiB + 4096, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 8 * 256, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 8192, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    REQUIRE(a && s && k && rb && wb);
    for (int i = 0; i < 8; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 256, 256);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(200 + i), &r, 1), STATUS_SUCCESS);
    }
    /* Each Send i carries 100 + i bytes of stream 121 from offset 1024 * i. */
    NDK_SGE sg[8];
    for (int i = 0; i < 8; i++)
        sg[i] = dp_sge(&ms, (size_t)i * 1024, (ULONG)(100 + i));
    NDK_SGE wg = dp_sge(&ms, 9000, 2000), big = dp_sge(&sink, 0, MiB),
            small = dp_sge(&sink, MiB, 4096);
    static const NDK_OPERATION_TYPE types[12] = {
        NdkOperationTypeSend, NdkOperationTypeWrite, NdkOperationTypeRead, NdkOperationTypeSend,
        NdkOperationTypeWrite, NdkOperationTypeSend, NdkOperationTypeRead, NdkOperationTypeSend,
        NdkOperationTypeSend, NdkOperationTypeSend, NdkOperationTypeSend, NdkOperationTypeSend};
    int si = 0;
    for (int i = 0; i < 12; i++) {
        NTSTATUS st;
        switch (types[i]) {
        case NdkOperationTypeSend: st = dp_send(c->qa, DP_CTX(i + 1), &sg[si++], 1, 0); break;
        case NdkOperationTypeWrite:
            st = dp_write(c->qa, DP_CTX(i + 1), &wg, 1, wb + i * 100, wr.rtok, 0);
            break;
        default:
            st = i == 2 ? dp_read(c->qa, DP_CTX(i + 1), &big, 1, s, src.rtok, 0)
                        : dp_read(c->qa, DP_CTX(i + 1), &small, 1, s + 4096, src.rtok, 0);
            break;
        }
        DP_CHECK_ST(st, STATUS_SUCCESS);
    }
    NDK_RESULT_EX r[12];
    ULONG n = dp_wait_ex(c->cqa, r, 12, DP_WAIT_MS);
    CHECK_EQ(n, 12);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, types[i], dp_qpctx_a(c), DP_CTX(i + 1), -1);
    n = dp_wait_ex(c->cqp, r, 8, DP_WAIT_MS);
    CHECK_EQ(n, 8);
    for (ULONG i = 0; i < n; i++) {
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c),
                     DP_CTX(200 + i), 100 + i);
        DP_CHECK_DATA(rb + i * 256, 100 + i, 121, i * 1024);
    }
    DP_CHECK_DATA(k, MiB, 122, 0);
    DP_CHECK_DATA(k + MiB, 4096, 122, 4096);
    dp_mr_close(&ms);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

/*
 * NDK_RESULT through NdkGetCqResults and NDK_RESULT_EX through
 * NdkGetCqResultsEx (5.4.3, 5.4.5, 6.4, 6.5), with separate receive and
 * initiator CQs: receives go to the receive CQ only, initiator requests to
 * the initiator CQ only; asking for fewer results than are queued returns
 * that many and leaves the rest, in order.
 */
DP_CASE(results_both_apis_split_cqs)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = true;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    dp_mr ms, rr;
    uint8_t *a = dp_buf_reg(&x.a, &ms, 4096, 0, 131);
    uint8_t *rb = dp_buf_reg(&x.p, &rr, 3 * 512, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(a && rb);
    for (int i = 0; i < 3; i++) {
        NDK_SGE r = dp_sge(&rr, (size_t)i * 512, 512);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(10 + i), &r, 1), STATUS_SUCCESS);
    }
    for (int i = 0; i < 3; i++) {
        NDK_SGE g = dp_sge(&ms, (size_t)i * 1000, (ULONG)(7 + i));
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(20 + i), &g, 1, 0), STATUS_SUCCESS);
    }
    /* Initiator completions through NdkGetCqResults, two then one. */
    NDK_RESULT pr[3];
    CHECK_EQ(dp_wait_plain(c->cqa, pr, 2, DP_WAIT_MS), 2);
    CHECK_EQ(dp_wait_plain(c->cqa, pr + 2, 1, DP_WAIT_MS), 1);
    for (int i = 0; i < 3; i++) {
        DP_CHECK_ST(pr[i].Status, STATUS_SUCCESS);
        CHECK(pr[i].QPContext == dp_qpctx_a(c));
        CHECK(pr[i].RequestContext == DP_CTX(20 + i));
    }
    /* Receive completions: the first through NdkGetCqResults, the other two
     * through NdkGetCqResultsEx. */
    CHECK_EQ(dp_wait_plain(c->rcqp, pr, 1, DP_WAIT_MS), 1);
    DP_CHECK_ST(pr[0].Status, STATUS_SUCCESS);
    CHECK_EQ(pr[0].BytesTransferred, 7);
    CHECK(pr[0].QPContext == dp_qpctx_p(c));
    CHECK(pr[0].RequestContext == DP_CTX(10));
    NDK_RESULT_EX r[2];
    CHECK_EQ(dp_wait_ex(c->rcqp, r, 2, DP_WAIT_MS), 2);
    DP_CHECK_CQE(r[0], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(11), 8);
    DP_CHECK_CQE(r[1], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(12), 9);
    for (int i = 0; i < 3; i++)
        DP_CHECK_DATA(rb + i * 512, (size_t)(7 + i), 131, (size_t)i * 1000);
    /* Nothing went to the other CQ of either side. */
    DP_CHECK_QUIET(c->cqp);
    DP_CHECK_QUIET(c->rcqa);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_QUIET(c->rcqp);
    /* An empty CQ returns 0. */
    CHECK_EQ(c->cqa->cq->Dispatch->NdkGetCqResults(c->cqa->cq, pr, 3), 0);
    dp_mr_close(&ms);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/*
 * pSgl is _In_reads_(nSge): with nSge 0 there is nothing to read, so a NULL
 * list is a valid zero-length request for Send, Write, Read and Receive.
 * Runs last: a provider that dereferences or memcpy()s the NULL list trips
 * the sanitizers and ends the program.
 */
DP_CASE(null_sge_list_with_zero_count)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr wr, src;
    uint8_t *wb = dp_buf_reg(&x.p, &wr, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 141);
    uint8_t *s = dp_buf_reg(&x.p, &src, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 142);
    REQUIRE(wb && s);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), NULL, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), NULL, 0, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), NULL, 0, wb, wr.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(4), NULL, 0, s, src.rtok, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(3), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), 0);
    DP_CHECK_DATA(wb, 64, 141, 0);
    dp_mr_close(&wr);
    dp_mr_close(&src);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(send_receive_sizes);
    RUN_FAM(send_receive_multi_sge);
    RUN_FAM(send_solicited);
    RUN_FAM(send_and_invalidate);
    RUN_FAM(inline_send_and_write);
    RUN_FAM(write_then_send);
    RUN_FAM(read_sinks);
    RUN_FAM(read_fence);
    RUN_FAM(silent_success);
    RUN_FAM(defer_chain);
    RUN_FAM(defer_chain_inline_failure);
    RUN_FAM(read_local_invalidate);
    RUN_FAM(bind_window);
    RUN_FAM(fast_register_write);
    RUN_FAM(fast_register_lam_released_before_execution);
    RUN_FAM(fast_register_local_across_pages);
    RUN_FAM(completion_order);
    RUN_FAM(results_both_apis_split_cqs);
    RUN_FAM(null_sge_list_with_zero_count);
    return tl_finish();
}
