/* NdkSend and NdkReceive end to end over loopback, the data checked byte for
 * byte and every completion's fields checked: many sizes and SGE layouts,
 * solicited sends, INLINE sends and writes, an empty SGE list passed as
 * NULL. libndk choices relied on (behaviour NDKPI leaves open) are marked
 * "libndk:". */
#include "dptest.h"

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
 * INLINE (NdkSend, NDK_SGE): the data is copied during the call, so the buffer may
 * change as soon as the post returns; the SGEs need no registration and
 * their tokens are ignored; nSge may exceed MaxInitiatorRequestSge; the total
 * is bounded by InlineDataSize. Checked for NdkSend and NdkWrite (libndk
 * accepts INLINE on writes, which NdkWrite's page leaves open).
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
     * zero-byte Send as the notification (RFC 5040 section 5.5). */
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
    RUN_FAM(inline_send_and_write);
    RUN_FAM(null_sge_list_with_zero_count);
    return tl_finish();
}
