/* NdkQueryAdapterInfo (buffer size rules and values) and the CQ and QP
 * creation limits it announces. */
#include "ndktest.h"

static const NDK_VERSION v21 = {2, 1};

NT_CASE(query_info_buffer_size)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    /* Size probe: NULL buffer -> too small, required size 0x68. */
    ULONG size = 0;
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, 0x68);
    CHECK_EQ(sizeof(NDK_ADAPTER_INFO), 0x68);
    /* NULL buffer even with a size claimed. */
    size = sizeof(NDK_ADAPTER_INFO);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, 0x68);

    /* Below the old layout's 0x60 octets: too small, nothing written. */
    unsigned char buf[0x100];
    static const ULONG small[] = {1, 0x5F};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        memset(buf, 0xA5, sizeof buf);
        size = small[i];
        CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                     STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ(size, 0x68);
        bool untouched = true;
        for (size_t k = 0; k < sizeof buf; k++)
            untouched = untouched && buf[k] == 0xA5;
        CHECK(untouched);
    }

    /* docs/behaviour.md: a consumer built against a header whose structure
     * ends at AdapterFlags (0x60 octets) is served that leading part:
     * success, size out 0x60, the octets a full query gives, nothing
     * written from 0x60 on (RdmaTechnology is not there for it). */
    NDK_ADAPTER_INFO full;
    CHECK_STATUS(nt_query_info(ad, &full), STATUS_SUCCESS);
    static const ULONG old_sizes[] = {0x60, 0x67};
    for (size_t i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; i++) {
        memset(buf, 0xA5, sizeof buf);
        size = old_sizes[i];
        CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                     STATUS_SUCCESS);
        CHECK_EQ(size, 0x60);
        CHECK(memcmp(buf, &full, 0x60) == 0);
        bool rest = true;
        for (size_t k = 0x60; k < sizeof buf; k++)
            rest = rest && buf[k] == 0xA5;
        CHECK(rest);
    }

    /* Exact and larger buffers: success, size out = bytes written (0x68),
     * nothing written past the structure. */
    size = 0x68;
    memset(buf, 0xA5, sizeof buf);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                 STATUS_SUCCESS);
    CHECK_EQ(size, 0x68);
    size = sizeof buf;
    memset(buf, 0xA5, sizeof buf);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                 STATUS_SUCCESS);
    CHECK_EQ(size, 0x68);
    bool tail = true;
    for (size_t k = 0x68; k < sizeof buf; k++)
        tail = tail && buf[k] == 0xA5;
    CHECK(tail);
    nt_close_adapter(ad);
}

NT_CASE(query_info_values)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, 2);
    CHECK_EQ(info.Version.Minor, 1);
    /* An iWARP provider (NDK_RDMA_TECHNOLOGY). */
    CHECK_EQ(info.RdmaTechnology, NdkiWarp);
    /* Seed 003: at least 16 FRMR pages. */
    CHECK(info.FRMRPageCount >= 16);
    /* docs/behaviour.md: 252 octets of private data each way. */
    CHECK_EQ(info.MaxCallerData, 252);
    CHECK_EQ(info.MaxCalleeData, 252);
    /* docs/behaviour.md: IRD / ORD maxima 128. */
    CHECK_EQ(info.MaxInboundReadLimit, 128);
    CHECK_EQ(info.MaxOutboundReadLimit, 128);
    /* Seed 003: loopback to the same local address is supported. */
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED);
    /* Undefined flag bits stay 0. */
    const ULONG known = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                        NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                        NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                        NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED |
                        NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                        NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                        NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    CHECK_EQ(info.AdapterFlags & ~known, 0);
    /* libndk's own flags (src/adapter.c says why each is set or not); the
     * conformance cases that depend on them assert them instead of
     * branching. MULTI_ENGINE follows the engine count, which follows the
     * CPUs: test_engines asserts it. */
    CHECK_EQ(info.AdapterFlags & ~(ULONG)NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED,
                                    NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                                    NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                                    NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                                    NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                                    NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                                    NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED);
    CHECK(info.MaxSrqDepth > 0);
    /* Limits a consumer sizes its objects by: all usable. */
    CHECK(info.MaxRegistrationSize > 0);
    CHECK(info.MaxInitiatorRequestSge >= 1);
    CHECK(info.MaxReceiveRequestSge >= 1);
    CHECK(info.MaxReadRequestSge >= 1);
    CHECK(info.MaxTransferLength > 0);
    CHECK(info.MaxReceiveQueueDepth >= 1);
    CHECK(info.MaxInitiatorQueueDepth >= 1);
    CHECK(info.MaxCqDepth >= 1);
    nt_close_adapter(ad);

    /* A 1.x adapter reports its own version. */
    CHECK_STATUS(nt_open("lo", (NDK_VERSION){1, 1}, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, 1);
    CHECK_EQ(info.Version.Minor, 2);
    nt_close_adapter(ad);
}

NT_CASE(cq_depth_limits)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    NDK_CQ *cq = NULL;
    /* 0 entries (NdkCreateCq's page implies at least one) and MaxCqDepth + 1
     * are invalid. */
    CHECK_STATUS(nt_create_cq(ad, 0, &cq), STATUS_INVALID_PARAMETER);
    nt_close(cq);
    cq = NULL;
    if (info.MaxCqDepth < MAXULONG) {
        CHECK_STATUS(nt_create_cq(ad, info.MaxCqDepth + 1, &cq), STATUS_INVALID_PARAMETER);
        nt_close(cq);
        cq = NULL;
    }
    CHECK_STATUS(nt_create_cq(ad, MAXULONG, &cq), STATUS_INVALID_PARAMETER);
    nt_close(cq);
    cq = NULL;
    /* The limits themselves work (a huge maximum is not allocated here). */
    CHECK_STATUS(nt_create_cq(ad, 1, &cq), STATUS_SUCCESS);
    nt_close(cq);
    cq = NULL;
    if (info.MaxCqDepth <= (1u << 20)) {
        CHECK_STATUS(nt_create_cq(ad, info.MaxCqDepth, &cq), STATUS_SUCCESS);
        nt_close(cq);
    }
    nt_close_adapter(ad);
}

/* One QP creation with the five sizes given; closes the QP if created. */
static NTSTATUS try_qp(nt_side *s, ULONG rq, ULONG iq, ULONG rsge, ULONG isge, ULONG inl)
{
    NDK_QP *qp = NULL;
    NTSTATUS st = nt_create_qp(s->pd, s->cq, rq, iq, rsge, isge, inl, &qp);
    nt_close(qp);
    return st;
}

NT_CASE(qp_limits)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    const NDK_ADAPTER_INFO *i = &s.info;
    /* Each of the five limits of 5.5.4 at its maximum works... */
    if (i->MaxReceiveQueueDepth <= (1u << 20))
        CHECK_STATUS(try_qp(&s, i->MaxReceiveQueueDepth, 4, 1, 1, 0), STATUS_SUCCESS);
    if (i->MaxInitiatorQueueDepth <= (1u << 20))
        CHECK_STATUS(try_qp(&s, 4, i->MaxInitiatorQueueDepth, 1, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, i->MaxReceiveRequestSge, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, 1, i->MaxInitiatorRequestSge, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, 1, 1, i->MaxInlineDataSize), STATUS_SUCCESS);
    /* ...and one more than it is STATUS_INVALID_PARAMETER. */
    if (i->MaxReceiveQueueDepth < MAXULONG)
        CHECK_STATUS(try_qp(&s, i->MaxReceiveQueueDepth + 1, 4, 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInitiatorQueueDepth < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, i->MaxInitiatorQueueDepth + 1, 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxReceiveRequestSge < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, i->MaxReceiveRequestSge + 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInitiatorRequestSge < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, 1, i->MaxInitiatorRequestSge + 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInlineDataSize < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, 1, 1, i->MaxInlineDataSize + 1), STATUS_INVALID_PARAMETER);
    nt_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(query_info_buffer_size);
    RUN(query_info_values);
    RUN(cq_depth_limits);
    RUN(qp_limits);
    return tl_finish();
}
