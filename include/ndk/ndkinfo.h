/*
 * ndkinfo.h - NDK adapter capabilities (NDK_VERSION, NDK_ADAPTER_INFO), with
 * the Windows scalar types that NDKPI is written in (ndkwintypes.h) and its
 * SAL annotations (ndksal.h), and checks that each type has its Windows x64
 * size, signedness and layout.
 */
#ifndef NDK_NDKINFO_H
#define NDK_NDKINFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndk/ndksal.h>
#include <ndk/ndkwintypes.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* NDK adapter information                                                  */
/* ------------------------------------------------------------------------ */

/* NDK interface version: 1.1, 1.2, 2.1, ... */
typedef struct _NDK_VERSION {
    USHORT Major;
    USHORT Minor;
} NDK_VERSION;

/* Transport of the adapter; the numbers are shared with the Windows INF
 * keyword *NetworkDirectTechnology and must not change. */
typedef enum _NDK_RDMA_TECHNOLOGY {
    NdkUndefined = 0,
    NdkiWarp = 1,
    NdkInfiniBand = 2,
    NdkRoCE = 3,
    NdkRoCEv2 = 4,
    NdkMaxTechnology = 5
} NDK_RDMA_TECHNOLOGY;

/* Limits and capabilities, filled by NdkQueryAdapterInfo. Older headers end
 * at AdapterFlags (0x60 bytes); RdmaTechnology makes it 0x68 on x64. */
typedef struct _NDK_ADAPTER_INFO {
    NDK_VERSION Version; /* version in effect for this adapter instance */
    UINT32 VendorId;     /* vendor OUI */
    UINT32 DeviceId;
    SIZE_T MaxRegistrationSize; /* 8-aligned: 4 bytes of padding precede it */
    SIZE_T MaxWindowSize;
    ULONG FRMRPageCount; /* at least 16 */
    ULONG MaxInitiatorRequestSge;
    ULONG MaxReceiveRequestSge;
    ULONG MaxReadRequestSge; /* overrides MaxInitiatorRequestSge for reads */
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;  /* IRD cap per QP */
    ULONG MaxOutboundReadLimit; /* ORD cap per QP */
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSrqDepth; /* 0: no SRQ support */
    ULONG MaxCqDepth;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData; /* private data with a connect request */
    ULONG MaxCalleeData; /* private data with an accept or a reject */
    ULONG AdapterFlags;  /* NDK_ADAPTER_FLAG_* */
    NDK_RDMA_TECHNOLOGY RdmaTechnology;
} NDK_ADAPTER_INFO;

/* AdapterFlags bits; all other bits are undefined and stay 0. */
#define NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED 0x00000001
#define NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED 0x00000002
#define NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED 0x00000004
#define NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED 0x00000008
#define NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED 0x00000010 /* NDKPI 1.2+ */
#define NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED 0x00000100
#define NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED 0x00010000

/* ------------------------------------------------------------------------ */
/* Layout checks against the x64 Windows layout (64-bit targets only).      */
/* ------------------------------------------------------------------------ */
#ifdef __cplusplus
#define NDK_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define NDK_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* A member's offset and a type's size, as on Windows x64. */
#define NDK_ASSERT_OFFSET_(T, member, offset)                                             \
    NDK_STATIC_ASSERT(offsetof(T, member) == (offset), #T "." #member)
#define NDK_ASSERT_SIZE_(T, size) NDK_STATIC_ASSERT(sizeof(T) == (size), #T)

/* Size and signedness of each Windows scalar type, as on Windows x64. */
#define NDK_ASSERT_SCALAR_(T, size, is_signed)                                            \
    NDK_STATIC_ASSERT(sizeof(T) == (size) && (((T)-1 > (T)0) != (is_signed)), #T)
NDK_ASSERT_SCALAR_(UCHAR, 1, 0);
/* CHAR is plain char, as on Windows, so string literals fit it; it is
 * signed wherever the compiler's char is (x86-64, as MSVC). */
#ifdef __CHAR_UNSIGNED__
NDK_ASSERT_SCALAR_(CHAR, 1, 0);
#else
NDK_ASSERT_SCALAR_(CHAR, 1, 1);
#endif
NDK_ASSERT_SCALAR_(BOOLEAN, 1, 0);
NDK_ASSERT_SCALAR_(USHORT, 2, 0);
NDK_ASSERT_SCALAR_(ULONG, 4, 0);
NDK_ASSERT_SCALAR_(LONG, 4, 1);
NDK_ASSERT_SCALAR_(NTSTATUS, 4, 1);
NDK_ASSERT_SCALAR_(UINT32, 4, 0);
NDK_ASSERT_SCALAR_(UINT64, 8, 0);
NDK_ASSERT_SCALAR_(LONGLONG, 8, 1);

#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
NDK_ASSERT_SCALAR_(SIZE_T, 8, 0);
NDK_ASSERT_SCALAR_(ULONG_PTR, 8, 0);
NDK_ASSERT_SCALAR_(KAFFINITY, 8, 0);
NDK_ASSERT_SIZE_(PVOID, 8);
NDK_ASSERT_SIZE_(LARGE_INTEGER, 8);
NDK_ASSERT_OFFSET_(LARGE_INTEGER, HighPart, 4);
NDK_ASSERT_SIZE_(PHYSICAL_ADDRESS, 8);
NDK_ASSERT_SIZE_(GUID, 16);
NDK_ASSERT_SIZE_(GROUP_AFFINITY, 16);

NDK_ASSERT_SIZE_(NDK_VERSION, 4);
NDK_ASSERT_OFFSET_(NDK_VERSION, Major, 0);
NDK_ASSERT_OFFSET_(NDK_VERSION, Minor, 2);
NDK_ASSERT_SIZE_(NDK_RDMA_TECHNOLOGY, 4);

NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, Version, 0x00);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, VendorId, 0x04);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, DeviceId, 0x08);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxRegistrationSize, 0x10);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxWindowSize, 0x18);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, FRMRPageCount, 0x20);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxInitiatorRequestSge, 0x24);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxReceiveRequestSge, 0x28);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxReadRequestSge, 0x2C);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxTransferLength, 0x30);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxInlineDataSize, 0x34);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxInboundReadLimit, 0x38);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxOutboundReadLimit, 0x3C);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxReceiveQueueDepth, 0x40);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxInitiatorQueueDepth, 0x44);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxSrqDepth, 0x48);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxCqDepth, 0x4C);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, LargeRequestThreshold, 0x50);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxCallerData, 0x54);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, MaxCalleeData, 0x58);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, AdapterFlags, 0x5C);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_INFO, RdmaTechnology, 0x60);
NDK_ASSERT_SIZE_(NDK_ADAPTER_INFO, 0x68);
#endif

#ifdef __cplusplus
}
#endif

#endif /* NDK_NDKINFO_H */
