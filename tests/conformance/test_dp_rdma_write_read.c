/* NdkWrite and NdkRead end to end: a Write then a Send that reports it, Read
 * into single and multi-SGE sinks (zero length included), READ_FENCE, and
 * RDMA_READ_LOCAL_INVALIDATE. libndk choices relied on are marked
 * "libndk:". */
#include "dptest.h"

/* RDMA Write: a 64 KiB three-SGE write and a 1 MiB write land at the
 * RemoteAddress the requester chose, nothing around them changes, and a
 * Send posted after them completes at the receiver only once their data is
 * in place (RFC 5040 section 5.5). */
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
    /* A Write consumes no receive and completes nothing at the target. */
    DP_CHECK_QUIET(c->cqp);
    dp_mr_close(&ms);
    dp_mr_close(&wr);
    dp_mr_close(&rr);
    dp_pair_close(&x);
}

/* RDMA Read (NdkRead): a single-SGE sink, a four-SGE sink over two MRs, and a
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

    /* Zero length: no sink, completes successfully (the responder answers a
     * zero-length Read Request with a zero-length Read Response). */
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
 * NDK_OP_FLAG_READ_FENCE (without it a later Send or Write may reach the
 * peer before the Read's response, RFC 5040 section 5.5): a Send and a Write
 * that gather from a Read's sink, posted right after a 1 MiB Read with the
 * fence, carry the read data, never the sink's old contents. They gather the
 * sink's last n bytes, which the Read places last: 4096, and 64 (a size a
 * provider may copy aside at post time, as inline data is; the copy must
 * still wait for the Read).
 */
static void read_fence_of(size_t n)
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
    NDK_SGE tail = dp_sge(&sink, MiB - n, (ULONG)n);
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
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), (ULONG)n);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(5), 0);
    DP_CHECK_DATA(rb, n, 61, MiB - n);
    DP_CHECK_DATA(wb, n, 61, MiB - n);
    DP_CHECK_DATA(k, MiB, 61, 0);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&rr);
    dp_mr_close(&wr);
    dp_pair_close(&x);
}

DP_CASE(read_fence)
{
    read_fence_of(4096);
}

DP_CASE(read_fence_small)
{
    read_fence_of(64);
}

/*
 * RDMA_READ_LOCAL_INVALIDATE (NdkRead): with the adapter flag, a successful
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

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(write_then_send);
    RUN_FAM(read_sinks);
    RUN_FAM(read_fence);
    RUN_FAM(read_fence_small);
    RUN_FAM(read_local_invalidate);
    return tl_finish();
}
