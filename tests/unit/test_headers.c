/* Public headers: the values the static assertions in ndkinfo.h / ndkpi.h
 * cannot cover (status codes, enum and flag values), the MDL helpers, and
 * that the NDK_FN_* typedefs accept functions written with the reference
 * signatures (a mismatch fails the build under -Werror). Includes ndk.h to
 * show it compiles on top of ndkpi.h. */
#include <ndk/ndk.h>
#include <ndk/ndkpi.h>
#include <ndk/ndkinfo.h>

#include <netinet/in.h>
#include <stddef.h>
#include <string.h>

#include "testlib.h"

static void test_scalar_types(void)
{
    /* LLP64 widths, whatever the host's `long` is. */
    CHECK_EQ(sizeof(ULONG), 4);
    CHECK_EQ(sizeof(LONG), 4);
    CHECK_EQ(sizeof(NTSTATUS), 4);
    CHECK_EQ(sizeof(USHORT), 2);
    CHECK_EQ(sizeof(UCHAR), 1);
    CHECK_EQ(sizeof(BOOLEAN), 1);
    CHECK_EQ(sizeof(UINT32), 4);
    CHECK_EQ(sizeof(UINT64), 8);
    CHECK_EQ(sizeof(LONGLONG), 8);
    CHECK_EQ(sizeof(SIZE_T), sizeof(void *));
    CHECK_EQ(sizeof(ULONG_PTR), sizeof(void *));
    CHECK_EQ(sizeof(PHYSICAL_ADDRESS), 8);
    CHECK_EQ(sizeof(GUID), 16);
    CHECK_EQ(TRUE, 1);
    CHECK_EQ(FALSE, 0);
    CHECK((ULONG)-1 > 0);
    CHECK((LONG)-1 < 0);
    CHECK((NTSTATUS)0xC0000001L < 0);
    CHECK_EQ(MAXULONG, 0xFFFFFFFFu);
    CHECK_EQ((ULONG)MAXULONG, UINT32_MAX);

    /* LARGE_INTEGER halves, reachable as in Windows code. */
    PHYSICAL_ADDRESS pa;
    pa.QuadPart = 0x0000000200000001LL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    CHECK_EQ(pa.LowPart, 1);
    CHECK_EQ(pa.HighPart, 2);
    CHECK_EQ(pa.u.LowPart, 1);
    CHECK_EQ(pa.u.HighPart, 2);
#endif
    pa.QuadPart = -1;
    CHECK_EQ(pa.HighPart, -1);

    /* SOCKADDR is the native struct sockaddr. */
    SOCKADDR sa;
    memset(&sa, 0, sizeof(sa));
    PSOCKADDR psa = &sa;
    psa->sa_family = AF_INET6;
    CHECK_EQ(sa.sa_family, AF_INET6);
    CHECK_EQ(sizeof(SOCKADDR), sizeof(struct sockaddr));
}

static void test_status_values(void)
{
    CHECK_EQ(STATUS_SUCCESS, 0);
    CHECK_EQ(STATUS_PENDING, 0x103);
    CHECK(STATUS_BUFFER_OVERFLOW == (NTSTATUS)0x80000005);
    CHECK(STATUS_UNSUCCESSFUL == (NTSTATUS)0xC0000001);
    CHECK(STATUS_ACCESS_VIOLATION == (NTSTATUS)0xC0000005);
    CHECK(STATUS_INVALID_PARAMETER == (NTSTATUS)0xC000000D);
    CHECK(STATUS_INVALID_DEVICE_REQUEST == (NTSTATUS)0xC0000010);
    CHECK(STATUS_NO_MEMORY == (NTSTATUS)0xC0000017);
    CHECK(STATUS_BUFFER_TOO_SMALL == (NTSTATUS)0xC0000023);
    CHECK(STATUS_INVALID_PARAMETER_MIX == (NTSTATUS)0xC0000030);
    CHECK(STATUS_SHARING_VIOLATION == (NTSTATUS)0xC0000043);
    CHECK(STATUS_INSUFFICIENT_RESOURCES == (NTSTATUS)0xC000009A);
    CHECK(STATUS_IO_TIMEOUT == (NTSTATUS)0xC00000B5);
    CHECK(STATUS_NOT_SUPPORTED == (NTSTATUS)0xC00000BB);
    CHECK(STATUS_INTERNAL_ERROR == (NTSTATUS)0xC00000E5);
    CHECK(STATUS_CANCELLED == (NTSTATUS)0xC0000120);
    CHECK(STATUS_REMOTE_RESOURCES == (NTSTATUS)0xC000013D);
    CHECK(STATUS_INVALID_ADDRESS == (NTSTATUS)0xC0000141);
    CHECK(STATUS_INVALID_DEVICE_STATE == (NTSTATUS)0xC0000184);
    CHECK(STATUS_INVALID_BUFFER_SIZE == (NTSTATUS)0xC0000206);
    CHECK(STATUS_TOO_MANY_ADDRESSES == (NTSTATUS)0xC0000209);
    CHECK(STATUS_ADDRESS_ALREADY_EXISTS == (NTSTATUS)0xC000020A);
    CHECK(STATUS_CONNECTION_DISCONNECTED == (NTSTATUS)0xC000020C);
    CHECK(STATUS_CONNECTION_RESET == (NTSTATUS)0xC000020D);
    CHECK(STATUS_CONNECTION_REFUSED == (NTSTATUS)0xC0000236);
    CHECK(STATUS_CONNECTION_INVALID == (NTSTATUS)0xC000023A);
    CHECK(STATUS_NETWORK_UNREACHABLE == (NTSTATUS)0xC000023C);
    CHECK(STATUS_HOST_UNREACHABLE == (NTSTATUS)0xC000023D);
    CHECK(STATUS_REQUEST_ABORTED == (NTSTATUS)0xC0000240);
    CHECK(STATUS_CONNECTION_ABORTED == (NTSTATUS)0xC0000241);
    CHECK(STATUS_IMPLEMENTATION_LIMIT == (NTSTATUS)0xC000042B);
    CHECK_EQ(NDIS_STATUS_SUCCESS, STATUS_SUCCESS);
    CHECK_EQ(NDIS_STATUS_RESOURCES, STATUS_INSUFFICIENT_RESOURCES);
    CHECK(NDIS_STATUS_BAD_VERSION == (NTSTATUS)0xC0010004);
    CHECK(NDIS_STATUS_ADAPTER_NOT_READY == (NTSTATUS)0xC0010011);
    CHECK(STATUS_NOT_FOUND == (NTSTATUS)0xC0000225); /* from ndk.h */

    /* Errors are negative 32-bit values, not large positive ones. */
    CHECK(STATUS_CONNECTION_REFUSED < 0);
    CHECK_EQ(STATUS_CONNECTION_REFUSED, -1073741258LL);
    CHECK_EQ((uint32_t)STATUS_CONNECTION_REFUSED, 0xC0000236u);

    CHECK(NT_SUCCESS(STATUS_SUCCESS));
    CHECK(NT_SUCCESS(STATUS_PENDING));
    CHECK(!NT_SUCCESS(STATUS_BUFFER_OVERFLOW));
    CHECK(!NT_SUCCESS(STATUS_CANCELLED));
    CHECK(!NT_SUCCESS(NDIS_STATUS_BAD_VERSION));
    /* NT_SUCCESS casts, so an unsigned 32-bit status still classifies. */
    ULONG raw = 0xC0000236u;
    CHECK(!NT_SUCCESS(raw));
}

static void test_enum_values(void)
{
    CHECK_EQ(NdkObjectTypeUndefined, 0);
    CHECK_EQ(NdkObjectTypeAdapter, 1);
    CHECK_EQ(NdkObjectTypeQp, 2);
    CHECK_EQ(NdkObjectTypeCq, 3);
    CHECK_EQ(NdkObjectTypeMr, 4);
    CHECK_EQ(NdkObjectTypeMw, 5);
    CHECK_EQ(NdkObjectTypePd, 6);
    CHECK_EQ(NdkObjectTypeSharedEndpoint, 7);
    CHECK_EQ(NdkObjectTypeConnector, 8);
    CHECK_EQ(NdkObjectTypeListener, 9);
    CHECK_EQ(NdkObjectTypeSrq, 10);
    CHECK_EQ(NdkObjectTypeMax, 11);

    CHECK_EQ(NdkOperationTypeReceive, 1);
    CHECK_EQ(NdkOperationTypeReceiveAndInvalidate, 32769);
    CHECK_EQ(NdkOperationTypeReceiveAndInvalidate, NdkOperationTypeReceive | 0x8000);
    CHECK_EQ(NdkOperationTypeSend, 2);
    CHECK_EQ(NdkOperationTypeFastRegister, 4);
    CHECK_EQ(NdkOperationTypeBind, 8);
    CHECK_EQ(NdkOperationTypeInvalidate, 16);
    CHECK_EQ(NdkOperationTypeRead, 32);
    CHECK_EQ(NdkOperationTypeWrite, 64);
    /* Stored in a result, the value stays positive (no 0xffff8001). */
    NDK_RESULT_EX r;
    memset(&r, 0, sizeof(r));
    r.Type = NdkOperationTypeReceiveAndInvalidate;
    CHECK_EQ(r.Type, 0x8001);

    CHECK_EQ(NdkUndefined, 0);
    CHECK_EQ(NdkiWarp, 1);
    CHECK_EQ(NdkInfiniBand, 2);
    CHECK_EQ(NdkRoCE, 3);
    CHECK_EQ(NdkRoCEv2, 4);
    CHECK_EQ(NdkMaxTechnology, 5);
}

static void test_flag_values(void)
{
    CHECK_EQ(NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED, 0x1);
    CHECK_EQ(NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, 0x2);
    CHECK_EQ(NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED, 0x4);
    CHECK_EQ(NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED, 0x8);
    CHECK_EQ(NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED, 0x10);
    CHECK_EQ(NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED, 0x100);
    CHECK_EQ(NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED, 0x10000);

    CHECK_EQ(NDK_OP_FLAG_SILENT_SUCCESS, 0x1);
    CHECK_EQ(NDK_OP_FLAG_READ_FENCE, 0x2);
    CHECK_EQ(NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, 0x4);
    CHECK_EQ(NDK_OP_FLAG_ALLOW_REMOTE_READ, 0x8);
    CHECK_EQ(NDK_OP_FLAG_ALLOW_LOCAL_WRITE, 0x10);
    CHECK_EQ(NDK_OP_FLAG_ALLOW_REMOTE_WRITE, 0x30);
    CHECK_EQ(NDK_OP_FLAG_INLINE, 0x40);
    CHECK_EQ(NDK_OP_FLAG_RDMA_READ_SINK, 0x80);
    CHECK_EQ(NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE, 0x100); /* errata 11.1 */
    CHECK_EQ(NDK_OP_FLAG_DEFER, 0x200);
    CHECK(NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE != NDK_OP_FLAG_DEFER);
    CHECK_EQ(NDK_OP_FLAG_ALLOW_REMOTE_WRITE & NDK_OP_FLAG_ALLOW_LOCAL_WRITE,
             NDK_OP_FLAG_ALLOW_LOCAL_WRITE);

    CHECK_EQ(NDK_MR_FLAG_ALLOW_LOCAL_READ, 0x0);
    CHECK_EQ(NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0x1);
    CHECK_EQ(NDK_MR_FLAG_ALLOW_REMOTE_READ, 0x2);
    CHECK_EQ(NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0x5);
    CHECK_EQ(NDK_MR_FLAG_RDMA_READ_SINK, 0x8);
    CHECK_EQ(NDK_MR_FLAG_ALLOW_REMOTE_WRITE & NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
             NDK_MR_FLAG_ALLOW_LOCAL_WRITE);

    CHECK_EQ(NDK_CQ_NOTIFY_ERRORS, 0);
    CHECK_EQ(NDK_CQ_NOTIFY_ANY, 1);
    CHECK_EQ(NDK_CQ_NOTIFY_SOLICITED, 2);
}

static void test_layouts(void)
{
    /* Repeats the 64-bit static assertions at run time, so a 32-bit build
     * still reports which layouts differ from x64. */
    if (sizeof(void *) != 8)
        return;
    CHECK_EQ(sizeof(NDK_OBJECT_HEADER), 0x28);
    CHECK_EQ(offsetof(NDK_OBJECT_HEADER, ObjectType), 0x04);
    CHECK_EQ(offsetof(NDK_QP, Dispatch), 0x28);
    CHECK_EQ(sizeof(NDK_CONNECTOR), 0x30);
    CHECK_EQ(sizeof(NDK_ADAPTER_INFO), 0x68);
    CHECK_EQ(offsetof(NDK_ADAPTER_INFO, MaxRegistrationSize), 0x10);
    CHECK_EQ(offsetof(NDK_ADAPTER_INFO, RdmaTechnology), 0x60);
    CHECK_EQ(sizeof(NDK_RESULT), 0x18);
    CHECK_EQ(sizeof(NDK_RESULT_EX), 0x28);
    CHECK_EQ(offsetof(NDK_RESULT_EX, ProviderErrorCode), 0x1C);
    CHECK_EQ(sizeof(NDK_SGE), 0x10);
    CHECK_EQ(offsetof(NDK_SGE, MemoryRegionToken), 0x0C);
    CHECK_EQ(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray), 0x10);
    CHECK_EQ(sizeof(NDK_CONNECTOR_DISPATCH), 0x68);
    CHECK_EQ(sizeof(NDK_ADAPTER_DISPATCH), 0x48);
}

static void test_mdl(void)
{
    char buf[256];
    MDL second = {.Next = NULL, .StartVa = buf + 128, .ByteOffset = 0, .ByteCount = 64};
    MDL first = {.Next = &second, .StartVa = buf, .ByteOffset = 16, .ByteCount = 100};
    CHECK(MmGetMdlVirtualAddress(&first) == (PVOID)(buf + 16));
    CHECK_EQ(MmGetMdlByteCount(&first), 100);
    CHECK(first.Next == &second);
    CHECK(MmGetMdlVirtualAddress(first.Next) == (PVOID)(buf + 128));
    CHECK_EQ(MmGetMdlByteCount(first.Next), 64);
    CHECK_EQ(MmGetMdlByteOffset(&first), 16);
    /* The Windows x64 layout (wdm.h). */
    CHECK_EQ(offsetof(MDL, Size), 0x08);
    CHECK_EQ(offsetof(MDL, MdlFlags), 0x0A);
    CHECK_EQ(offsetof(MDL, Process), 0x10);
    CHECK_EQ(offsetof(MDL, MappedSystemVa), 0x18);
    CHECK_EQ(offsetof(MDL, StartVa), 0x20);
    CHECK_EQ(offsetof(MDL, ByteCount), 0x28);
    CHECK_EQ(offsetof(MDL, ByteOffset), 0x2C);
    CHECK_EQ(sizeof(MDL), 0x30);
}

static void test_ndk_h(void)
{
    /* ndk.h's own types sit on top of ndkpi.h. */
    CHECK(sizeof(NDK_SOCKADDR) >= sizeof(struct sockaddr_in6));
    CHECK(sizeof(NDK_SOCKADDR) >= sizeof(struct sockaddr_in));
    NDK_SOCKADDR a;
    memset(&a, 0, sizeof(a));
    a.in6.sin6_family = AF_INET6;
    CHECK_EQ(a.sa.sa_family, AF_INET6);

    NDK_VERSION v = {NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION};
    CHECK_EQ(v.Major, 2);
    CHECK_EQ(v.Minor, 1);

    NDK_ADAPTER_DESCRIPTION d;
    memset(&d, 0, sizeof(d));
    CHECK_EQ(sizeof(d.Addresses) / sizeof(d.Addresses[0]), NDK_MAX_ADAPTER_ADDRESSES);
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof(o));
    o.Size = sizeof(o);
    CHECK_EQ(o.Size, sizeof(NDK_OPEN_OPTIONS));
}

/* ---- mock provider functions written with the reference signatures ---- */

static struct {
    int calls;
    ULONG u1, u2;
    UINT32 token;
    const void *p;
} g_seen;

static NTSTATUS mock_listen(NDK_LISTENER *pNdkListener, struct sockaddr *const pAddress,
                            ULONG AddressLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                            PVOID RequestContext)
{
    (void)pNdkListener;
    (void)RequestCompletion;
    (void)RequestContext;
    g_seen.calls++;
    g_seen.p = pAddress;
    g_seen.u1 = AddressLength;
    return STATUS_SUCCESS;
}

static NTSTATUS mock_send_and_invalidate(NDK_QP *pNdkQp, PVOID RequestContext,
                                         const NDK_SGE *pSgl, ULONG nSge, ULONG Flags,
                                         UINT32 RemoteToken)
{
    (void)pNdkQp;
    (void)RequestContext;
    (void)pSgl;
    (void)nSge;
    g_seen.calls++;
    g_seen.u1 = Flags;
    g_seen.token = RemoteToken;
    return STATUS_SUCCESS;
}

static NTSTATUS mock_reject(NDK_CONNECTOR *pNdkConnector, void *const pPrivateData,
                            ULONG PrivateDataLength)
{
    (void)pNdkConnector;
    g_seen.calls++;
    g_seen.p = pPrivateData;
    g_seen.u1 = PrivateDataLength;
    return STATUS_CONNECTION_ABORTED;
}

static NTSTATUS mock_accept_ex(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                               ULONG InboundReadLimit, ULONG OutboundReadLimit,
                               void *const pPrivateData, ULONG PrivateDataLength,
                               NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                               PVOID DisconnectEventContext,
                               NDK_FN_REQUEST_COMPLETION RequestCompletion,
                               PVOID RequestContext)
{
    (void)pNdkConnector;
    (void)pNdkQp;
    (void)pPrivateData;
    (void)PrivateDataLength;
    (void)RequestCompletion;
    (void)RequestContext;
    g_seen.calls++;
    g_seen.u1 = InboundReadLimit;
    g_seen.u2 = OutboundReadLimit;
    if (DisconnectEvent)
        DisconnectEvent(DisconnectEventContext, 7);
    return STATUS_PENDING;
}

static NTSTATUS mock_complete_connect_ex(NDK_CONNECTOR *pNdkConnector,
                                         NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                                         PVOID DisconnectEventContext,
                                         NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                         PVOID RequestContext)
{
    (void)pNdkConnector;
    (void)DisconnectEvent;
    (void)DisconnectEventContext;
    (void)RequestCompletion;
    (void)RequestContext;
    return STATUS_SUCCESS;
}

static ULONG mock_get_cq_results_ex(NDK_CQ *pNdkCq, NDK_RESULT_EX Results[], ULONG nResults)
{
    (void)pNdkCq;
    if (nResults == 0)
        return 0;
    memset(&Results[0], 0, sizeof(Results[0]));
    Results[0].Status = STATUS_SUCCESS;
    Results[0].Type = NdkOperationTypeReceiveAndInvalidate;
    Results[0].TypeSpecificCompletionOutput = 0x1234;
    return 1;
}

static NTSTATUS mock_build_lam(NDK_ADAPTER *pNdkAdapter, MDL *Mdl, SIZE_T Length,
                               NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                               NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM, ULONG *pLAMSize, ULONG *pFBO)
{
    (void)pNdkAdapter;
    (void)Length;
    (void)RequestCompletion;
    (void)RequestContext;
    (void)pNdkLAM;
    *pLAMSize = (ULONG)(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) +
                        sizeof(NDK_LOGICAL_ADDRESS));
    *pFBO = (ULONG)((uintptr_t)MmGetMdlVirtualAddress(Mdl) & 4095u);
    return STATUS_BUFFER_TOO_SMALL;
}

static NTSTATUS mock_query_adapter_info(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo,
                                        ULONG *pBufferSize)
{
    (void)pNdkAdapter;
    if (pInfo == NULL || *pBufferSize < sizeof(*pInfo)) {
        *pBufferSize = (ULONG)sizeof(*pInfo);
        return STATUS_BUFFER_TOO_SMALL;
    }
    memset(pInfo, 0, sizeof(*pInfo));
    pInfo->Version.Major = 2;
    pInfo->Version.Minor = 1;
    pInfo->RdmaTechnology = NdkiWarp;
    pInfo->AdapterFlags = NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    *pBufferSize = (ULONG)sizeof(*pInfo);
    return STATUS_SUCCESS;
}

static void on_disconnect_ex(PVOID DisconnectEventContext, ULONG ProviderDisconnectReason)
{
    *(ULONG *)DisconnectEventContext = ProviderDisconnectReason;
}

static void test_typedefs_callable(void)
{
    /* Assignments below only compile if the typedefs match the reference
     * parameter lists; the calls check arguments arrive in order. */
    memset(&g_seen, 0, sizeof(g_seen));

    NDK_LISTENER_DISPATCH ld;
    memset(&ld, 0, sizeof(ld));
    ld.NdkListen = mock_listen;
    NDK_LISTENER listener;
    memset(&listener, 0, sizeof(listener));
    listener.Header.ObjectType = NdkObjectTypeListener;
    listener.Dispatch = &ld;
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    CHECK_EQ(listener.Dispatch->NdkListen(&listener, (PSOCKADDR)&sin, sizeof(sin), NULL, NULL),
             STATUS_SUCCESS);
    CHECK(g_seen.p == &sin);
    CHECK_EQ(g_seen.u1, sizeof(sin));

    NDK_QP_DISPATCH qd;
    memset(&qd, 0, sizeof(qd));
    qd.NdkSendAndInvalidate = mock_send_and_invalidate;
    NDK_QP qp = {{{1, 2}, NdkObjectTypeQp, {{NULL, NULL, NULL, NULL}}}, &qd};
    NDK_SGE sge;
    memset(&sge, 0, sizeof(sge));
    sge.VirtualAddress = &sge;
    CHECK(sge.VirtualAddress == (PVOID)&sge);
    CHECK_EQ(qp.Dispatch->NdkSendAndInvalidate(&qp, NULL, &sge, 1, NDK_OP_FLAG_INLINE, 0xABCD),
             STATUS_SUCCESS);
    CHECK_EQ(g_seen.u1, NDK_OP_FLAG_INLINE);
    CHECK_EQ(g_seen.token, 0xABCD);

    NDK_CONNECTOR_DISPATCH cd;
    memset(&cd, 0, sizeof(cd));
    cd.NdkReject = mock_reject;
    cd.NdkAcceptEx = mock_accept_ex;
    cd.NdkCompleteConnectEx = mock_complete_connect_ex;
    NDK_CONNECTOR conn;
    memset(&conn, 0, sizeof(conn));
    conn.Dispatch = &cd;
    char pd[4] = "abc";
    CHECK_EQ(conn.Dispatch->NdkReject(&conn, pd, 3), STATUS_CONNECTION_ABORTED);
    CHECK(g_seen.p == pd);
    CHECK_EQ(g_seen.u1, 3);
    ULONG reason = 0;
    CHECK_EQ(conn.Dispatch->NdkAcceptEx(&conn, &qp, 4, 5, NULL, 0, on_disconnect_ex, &reason,
                                        NULL, NULL),
             STATUS_PENDING);
    CHECK_EQ(g_seen.u1, 4);
    CHECK_EQ(g_seen.u2, 5);
    CHECK_EQ(reason, 7);
    CHECK_EQ(conn.Dispatch->NdkCompleteConnectEx(&conn, NULL, NULL, NULL, NULL), STATUS_SUCCESS);

    NDK_CQ_DISPATCH qcd;
    memset(&qcd, 0, sizeof(qcd));
    qcd.NdkGetCqResultsEx = mock_get_cq_results_ex;
    NDK_CQ cq;
    memset(&cq, 0, sizeof(cq));
    cq.Dispatch = &qcd;
    NDK_RESULT_EX res[2];
    CHECK_EQ(cq.Dispatch->NdkGetCqResultsEx(&cq, res, 2), 1);
    CHECK_EQ(res[0].Type, NdkOperationTypeReceiveAndInvalidate);
    CHECK_EQ(res[0].TypeSpecificCompletionOutput, 0x1234);

    NDK_ADAPTER_DISPATCH ad;
    memset(&ad, 0, sizeof(ad));
    ad.NdkBuildLAM = mock_build_lam;
    ad.NdkQueryAdapterInfo = mock_query_adapter_info;
    NDK_ADAPTER adapter;
    memset(&adapter, 0, sizeof(adapter));
    adapter.Dispatch = &ad;
    char buf[64];
    MDL mdl = {.Next = NULL, .StartVa = buf, .ByteOffset = 8, .ByteCount = 32};
    ULONG lamSize = 0, fbo = 0;
    CHECK_EQ(adapter.Dispatch->NdkBuildLAM(&adapter, &mdl, 32, NULL, NULL, NULL, &lamSize, &fbo),
             STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(lamSize, 0x18);
    CHECK_EQ(fbo, ((uintptr_t)buf + 8) & 4095u);

    ULONG size = 0;
    CHECK_EQ(adapter.Dispatch->NdkQueryAdapterInfo(&adapter, NULL, &size),
             STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, sizeof(NDK_ADAPTER_INFO));
    NDK_ADAPTER_INFO info;
    CHECK_EQ(adapter.Dispatch->NdkQueryAdapterInfo(&adapter, &info, &size), STATUS_SUCCESS);
    CHECK_EQ(info.RdmaTechnology, NdkiWarp);
    CHECK_EQ(info.Version.Major, 2);

    /* Header-only typedefs exist, and the header pointer is the object. */
    NDK_FN_DISCONNECT_EX dex = NULL;
    NDK_FN_QUERY_ADAPTER_INFO_EX qex = NULL;
    CHECK(dex == NULL && qex == NULL);
    CHECK((void *)&listener.Header == (void *)&listener);
}

int main(void)
{
    RUN(test_scalar_types);
    RUN(test_status_values);
    RUN(test_enum_values);
    RUN(test_flag_values);
    RUN(test_layouts);
    RUN(test_mdl);
    RUN(test_ndk_h);
    RUN(test_typedefs_callable);
    return tl_finish();
}
