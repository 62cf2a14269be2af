/* Limits of one work request: SGE count, inline size, MaxTransferLength,
 * local SGEs outside their registration or without the right they need
 * (STATUS_ACCESS_VIOLATION), local SGEs needing more than 64 pieces
 * (STATUS_IMPLEMENTATION_LIMIT), and the page count of a fast-register MR.
 * At the limit a request works; one past it fails inline, without a CQE,
 * and leaves the QP usable. libndk decisions relied on (NDKPI leaves the
 * status open) are named in each case. */
#include "dptest.h"

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
 * Inline size (NdkSend, NDK_SGE): with InlineDataSize 64 an INLINE Send or Write of
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
 * MaxTransferLength (NDK_ADAPTER_INFO): a Send, SendAndInvalidate, Write, Read
 * or Receive whose SGEs add up to one byte more fails inline. The memory is
 * reserved address space (never touched), registered once.
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
 * FRMRPageCount (6.1: at least 16): a fast-register MR initialized for that
 * many pages maps a region of exactly that many pages, and the peer can
 * write its last byte and read it back. A NdkFastRegister with more pages
 * than the MR was initialized for is refused inline (NdkFastRegister's page does
 * not say with what; libndk: STATUS_INVALID_PARAMETER) and leaves no CQE.
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
    RUN_FAM(sge_count_limits);
    RUN_FAM(inline_size_limits);
    RUN_FAM(transfer_length_limit);
    RUN_FAM(local_sge_checks);
    RUN_FAM(frmr_page_count);
    RUN_FAM(local_sge_piece_limit);
    return tl_finish();
}
