/*
 * ndkpi.h - the Network Direct Kernel Provider Interface (NDKPI 2.1) for
 * portable C on Linux: object headers, dispatch tables, every NDK_FN_*
 * typedef, work-request structures and flags.
 *
 * Declarations follow the order of the WDK's ndkpi.h so that
 * each type is declared before use. Names, parameter order and x64 layouts
 * are those of Windows, so consumers ported from Windows compile unchanged;
 * the static assertions at the end pin the layouts on 64-bit targets.
 */
#ifndef NDK_NDKPI_H
#define NDK_NDKPI_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndk/ndkinfo.h>
#include <ndk/ndkmdl.h>
#include <ndk/ndkstatus.h>

#ifdef __cplusplus
extern "C" {
#endif

/* NTSTATUS values and NT_SUCCESS: ndk/ndkstatus.h. */
#ifndef MAXULONG
#define MAXULONG 0xFFFFFFFFu
#endif

/* ------------------------------------------------------------------------ */
/* Object header and work-request structures                                */
/* ------------------------------------------------------------------------ */

typedef enum _NDK_OBJECT_TYPE {
    NdkObjectTypeUndefined = 0, /* never valid in a live object */
    NdkObjectTypeAdapter = 1,
    NdkObjectTypeQp = 2,
    NdkObjectTypeCq = 3,
    NdkObjectTypeMr = 4,
    NdkObjectTypeMw = 5,
    NdkObjectTypePd = 6,
    NdkObjectTypeSharedEndpoint = 7,
    NdkObjectTypeConnector = 8,
    NdkObjectTypeListener = 9,
    NdkObjectTypeSrq = 10,
    NdkObjectTypeMax = 11 /* may grow in later versions */
} NDK_OBJECT_TYPE;

/* Zeroed by the provider at creation, then left alone until close: the
 * consumer side of the platform may use it. */
typedef struct _NDK_OBJECT_HEADER_RESERVED_BLOCK {
    PVOID rf[4];
} NDK_OBJECT_HEADER_RESERVED_BLOCK;

/* First member of every object, so a header pointer is the object pointer. */
typedef struct _NDK_OBJECT_HEADER {
    NDK_VERSION Version;        /* the version negotiated at adapter open */
    NDK_OBJECT_TYPE ObjectType; /* tells MR from MW in NdkInvalidate, etc. */
    NDK_OBJECT_HEADER_RESERVED_BLOCK NdkReserved;
} NDK_OBJECT_HEADER;

/* One completion, as returned by NdkGetCqResults. */
typedef struct _NDK_RESULT {
    NTSTATUS Status;
    ULONG BytesTransferred; /* defined for receive completions only */
    PVOID QPContext;
    PVOID RequestContext;
} NDK_RESULT;

/* NDKPI 1.2. Receive | 0x8000 marks a receive matched with a remote
 * send-and-invalidate. */
typedef enum _NDK_OPERATION_TYPE {
    NdkOperationTypeReceive = 1,
    NdkOperationTypeReceiveAndInvalidate = 32769,
    NdkOperationTypeSend = 2,
    NdkOperationTypeFastRegister = 4,
    NdkOperationTypeBind = 8,
    NdkOperationTypeInvalidate = 16,
    NdkOperationTypeRead = 32,
    NdkOperationTypeWrite = 64
} NDK_OPERATION_TYPE;

/* NDKPI 1.2, as returned by NdkGetCqResultsEx. ProviderErrorCode (2.1) sits
 * in what was padding on 64-bit, so the layout did not change there. */
typedef struct _NDK_RESULT_EX {
    NTSTATUS Status;
    ULONG BytesTransferred;
    PVOID QPContext;
    PVOID RequestContext;
    NDK_OPERATION_TYPE Type;
    ULONG ProviderErrorCode;                /* 0 on success or when there is none */
    ULONG_PTR TypeSpecificCompletionOutput; /* invalidated token for ReceiveAndInvalidate */
} NDK_RESULT_EX;

/* An address in the adapter's DMA space, as produced by NdkBuildLAM. */
typedef PHYSICAL_ADDRESS NDK_LOGICAL_ADDRESS;

/* Variable length: the real size is offsetof(..., AdapterPageArray) +
 * AdapterPageCount * sizeof(NDK_LOGICAL_ADDRESS). */
typedef struct _NDK_LOGICAL_ADDRESS_MAPPING {
    PVOID AdapterContext; /* provider's; the consumer must not modify it */
    ULONG AdapterPageCount;
    NDK_LOGICAL_ADDRESS AdapterPageArray[1]; /* PAGE_SIZE-aligned pages */
} NDK_LOGICAL_ADDRESS_MAPPING;

/* One local buffer. With the PD's privileged token the union holds a
 * LogicalAddress, otherwise a VirtualAddress inside a registered MR. */
typedef struct _NDK_SGE {
    union {
        PVOID VirtualAddress;
        NDK_LOGICAL_ADDRESS LogicalAddress;
    };
    ULONG Length;
    UINT32 MemoryRegionToken;
} NDK_SGE;

/* ------------------------------------------------------------------------ */
/* Completion callbacks and the functions of every dispatch table           */
/* ------------------------------------------------------------------------ */

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_CLOSE_COMPLETION)(
    _In_opt_ PVOID Context);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_REQUEST_COMPLETION)(
    _In_opt_ PVOID Context,
    _In_ NTSTATUS Status);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_CREATE_COMPLETION)(
    _In_opt_ PVOID Context,
    _In_ NTSTATUS Status,
    _In_ NDK_OBJECT_HEADER *pNdkObject);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CLOSE_OBJECT)(
    _In_ NDK_OBJECT_HEADER *pNdkObject,
    _In_ NDK_FN_CLOSE_COMPLETION CloseCompletion,
    _In_opt_ PVOID RequestContext);

/* A vendor extension's function table; there are no standard extensions. */
typedef struct _NDK_EXTENSION_INTERFACE {
    CONST VOID *Dispatch;
} NDK_EXTENSION_INTERFACE;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_QUERY_EXTENSION_INTERFACE)(
    _In_ NDK_OBJECT_HEADER *pNdkObject,
    _In_ GUID *ExtensionInterfaceID,
    _In_ NDK_VERSION ExtensionInterfaceVersion,
    _Out_ NDK_EXTENSION_INTERFACE *pExtensionInterface);

/* ------------------------------------------------------------------------ */
/* Completion queue                                                         */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_CQ NDK_CQ;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_RESIZE_CQ)(
    _In_ NDK_CQ *pNdkCq,
    _In_ ULONG CqDepth,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_CQ_NOTIFICATION_CALLBACK)(
    _In_opt_ PVOID CqNotificationContext,
    _In_ NTSTATUS CqStatus);

/* NdkArmCq Type: a plain ULONG, there is no enum. */
#define NDK_CQ_NOTIFY_ERRORS 0
#define NDK_CQ_NOTIFY_ANY 1
#define NDK_CQ_NOTIFY_SOLICITED 2

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_ARM_CQ)(
    _In_ NDK_CQ *pNdkCq,
    _In_ ULONG Type);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) ULONG (*NDK_FN_GET_CQ_RESULTS)(
    _In_ NDK_CQ *pNdkCq,
    _Out_writes_to_(nResults, return) NDK_RESULT Results[],
    _In_ ULONG nResults);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION)(
    _In_ NDK_CQ *pNdkCq,
    _In_ ULONG ModerationInterval,
    _In_ ULONG ModerationCount);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) ULONG (*NDK_FN_GET_CQ_RESULTS_EX)(
    _In_ NDK_CQ *pNdkCq,
    _Out_writes_to_(nResults, return) NDK_RESULT_EX Results[],
    _In_ ULONG nResults);

typedef struct _NDK_CQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseCq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_RESIZE_CQ NdkResizeCq;
    NDK_FN_ARM_CQ NdkArmCq;
    NDK_FN_GET_CQ_RESULTS NdkGetCqResults;
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION NdkControlCqInterruptModeration;
    NDK_FN_GET_CQ_RESULTS_EX NdkGetCqResultsEx; /* NDKPI 1.2+ */
} NDK_CQ_DISPATCH;

/* The consumer may overwrite Dispatch: a provider never reads it back. */
struct _NDK_CQ {
    NDK_OBJECT_HEADER Header;
    CONST NDK_CQ_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Memory region                                                            */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_MR NDK_MR;

/* NdkRegisterMr Flags. Local read is always granted; REMOTE_WRITE includes
 * the LOCAL_WRITE bit. */
#define NDK_MR_FLAG_ALLOW_LOCAL_READ 0x00000000
#define NDK_MR_FLAG_ALLOW_LOCAL_WRITE 0x00000001
#define NDK_MR_FLAG_ALLOW_REMOTE_READ 0x00000002
#define NDK_MR_FLAG_ALLOW_REMOTE_WRITE 0x00000005
#define NDK_MR_FLAG_RDMA_READ_SINK 0x00000008

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_REGISTER_MR)(
    _In_ NDK_MR *pNdkMr,
    _In_ MDL *Mdl,
    _In_ SIZE_T Length,
    _In_ ULONG Flags,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_DEREGISTER_MR)(
    _In_ NDK_MR *pNdkMr,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_INITIALIZE_FAST_REGISTER_MR)(
    _In_ NDK_MR *pNdkMr,
    _In_ ULONG AdapterPageCount,
    _In_ BOOLEAN RemoteAccess,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MR)(
    _In_ NDK_MR *pNdkMr);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) UINT32 (*NDK_FN_GET_LOCAL_TOKEN_FROM_MR)(
    _In_ NDK_MR *pNdkMr);

typedef struct _NDK_MR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMr;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_REGISTER_MR NdkRegisterMr;
    NDK_FN_DEREGISTER_MR NdkDeregisterMr;
    NDK_FN_INITIALIZE_FAST_REGISTER_MR NdkInitializeFastRegisterMr;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MR NdkGetRemoteTokenFromMr;
    NDK_FN_GET_LOCAL_TOKEN_FROM_MR NdkGetLocalTokenFromMr;
} NDK_MR_DISPATCH;

struct _NDK_MR {
    NDK_OBJECT_HEADER Header;
    CONST NDK_MR_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Memory window                                                            */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_MW NDK_MW;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MW)(
    _In_ NDK_MW *pNdkMw);

typedef struct _NDK_MW_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMw;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MW NdkGetRemoteTokenFromMw;
} NDK_MW_DISPATCH;

struct _NDK_MW {
    NDK_OBJECT_HEADER Header;
    CONST NDK_MW_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Shared receive queue                                                     */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_SRQ NDK_SRQ;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_MODIFY_SRQ)(
    _In_ NDK_SRQ *pNdkSrq,
    _In_ ULONG SrqDepth,
    _In_ ULONG NotifyThreshold,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_SRQ_NOTIFICATION_CALLBACK)(
    _In_opt_ PVOID SrqNotificationContext,
    _In_ NTSTATUS SrqStatus);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_SRQ_RECEIVE)(
    _In_ NDK_SRQ *pNdkSrq,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge);

typedef struct _NDK_SRQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSrq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_MODIFY_SRQ NdkModifySrq;
    NDK_FN_SRQ_RECEIVE NdkSrqReceive;
} NDK_SRQ_DISPATCH;

struct _NDK_SRQ {
    NDK_OBJECT_HEADER Header;
    CONST NDK_SRQ_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Queue pair                                                               */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_QP NDK_QP;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_FLUSH)(
    _In_ NDK_QP *pNdkQp);

/* Work-request Flags; each posting function accepts only a subset. */
#define NDK_OP_FLAG_SILENT_SUCCESS 0x00000001         /* no CQ entry on success */
#define NDK_OP_FLAG_READ_FENCE 0x00000002             /* wait for earlier reads */
#define NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT 0x00000004 /* solicited event at the peer */
#define NDK_OP_FLAG_ALLOW_REMOTE_READ 0x00000008
#define NDK_OP_FLAG_ALLOW_LOCAL_WRITE 0x00000010
#define NDK_OP_FLAG_ALLOW_REMOTE_WRITE 0x00000030 /* includes ALLOW_LOCAL_WRITE */
#define NDK_OP_FLAG_INLINE 0x00000040             /* data copied during the call */
#define NDK_OP_FLAG_RDMA_READ_SINK 0x00000080
/* 0x100 as in the header: the DDI page's 0x200 collides with DEFER. */
#define NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE 0x00000100 /* NDKPI 1.2+ */
#define NDK_OP_FLAG_DEFER 0x00000200                      /* NDKPI 1.2+, a hint */

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_SEND)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge,
    _In_ ULONG Flags);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_RECEIVE)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_BIND)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_ NDK_MR *pMr,
    _In_ NDK_MW *pMw,
    _In_ PVOID VirtualAddress,
    _In_ SIZE_T Length,
    _In_ ULONG Flags);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_FAST_REGISTER)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_ NDK_MR *pMr,
    _In_ ULONG AdapterPageCount,
    _In_reads_(AdapterPageCount) CONST NDK_LOGICAL_ADDRESS *AdapterPageArray,
    _In_ ULONG FBO,
    _In_ SIZE_T Length,
    _In_ PVOID BaseVirtualAddress,
    _In_ ULONG Flags);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_INVALIDATE)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_ NDK_OBJECT_HEADER *pNdkMrOrMw,
    _In_ ULONG Flags);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_READ)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge,
    _In_ UINT64 RemoteAddress,
    _In_ UINT32 RemoteToken,
    _In_ ULONG Flags);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_WRITE)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge,
    _In_ UINT64 RemoteAddress,
    _In_ UINT32 RemoteToken,
    _In_ ULONG Flags);

/* Note the order: Flags comes before RemoteToken here. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_SEND_AND_INVALIDATE)(
    _In_ NDK_QP *pNdkQp,
    _In_opt_ PVOID RequestContext,
    _In_reads_(nSge) CONST NDK_SGE *pSgl,
    _In_ ULONG nSge,
    _In_ ULONG Flags,
    _In_ UINT32 RemoteToken);

typedef struct _NDK_QP_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseQp;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_FLUSH NdkFlush;
    NDK_FN_SEND NdkSend;
    NDK_FN_RECEIVE NdkReceive;
    NDK_FN_BIND NdkBind;
    NDK_FN_FAST_REGISTER NdkFastRegister;
    NDK_FN_INVALIDATE NdkInvalidate;
    NDK_FN_READ NdkRead;
    NDK_FN_WRITE NdkWrite;
    NDK_FN_SEND_AND_INVALIDATE NdkSendAndInvalidate; /* NDKPI 1.2+ */
} NDK_QP_DISPATCH;

struct _NDK_QP {
    NDK_OBJECT_HEADER Header;
    CONST NDK_QP_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Protection domain                                                        */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_PD NDK_PD;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_MR)(
    _In_ NDK_PD *pNdkPd,
    _In_ BOOLEAN FastRegister,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_MR **ppNdkMr);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_MW)(
    _In_ NDK_PD *pNdkPd,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_MW **ppNdkMw);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_SRQ)(
    _In_ NDK_PD *pNdkPd,
    _In_ ULONG SrqDepth,
    _In_ ULONG MaxReceiveRequestSge,
    _In_ ULONG NotifyThreshold,
    _In_opt_ NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
    _In_opt_ PVOID SrqNotificationContext,
    _In_opt_ GROUP_AFFINITY *Affinity,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_SRQ **ppNdkSrq);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_QP)(
    _In_ NDK_PD *pNdkPd,
    _In_ NDK_CQ *pReceiveCq,
    _In_ NDK_CQ *pInitiatorCq,
    _In_opt_ PVOID QPContext,
    _In_ ULONG ReceiveQueueDepth,
    _In_ ULONG InitiatorQueueDepth,
    _In_ ULONG MaxReceiveRequestSge,
    _In_ ULONG MaxInitiatorRequestSge,
    _In_ ULONG InlineDataSize,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_QP **ppNdkQp);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_QP_WITH_SRQ)(
    _In_ NDK_PD *pNdkPd,
    _In_ NDK_CQ *pReceiveCq,
    _In_ NDK_CQ *pInitiatorCq,
    _In_ NDK_SRQ *pSrq,
    _In_opt_ PVOID QPContext,
    _In_ ULONG InitiatorQueueDepth,
    _In_ ULONG MaxInitiatorRequestSge,
    _In_ ULONG InlineDataSize,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_QP **ppNdkQp);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN)(
    _In_ NDK_PD *pNdkPd,
    _Out_ UINT32 *pToken);

typedef struct _NDK_PD_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkClosePd;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CREATE_MR NdkCreateMr;
    NDK_FN_CREATE_MW NdkCreateMw;
    NDK_FN_CREATE_SRQ NdkCreateSrq;
    NDK_FN_CREATE_QP NdkCreateQp;
    NDK_FN_CREATE_QP_WITH_SRQ NdkCreateQpWithSrq;
    NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN NdkGetPrivilegedMemoryRegionToken;
} NDK_PD_DISPATCH;

struct _NDK_PD {
    NDK_OBJECT_HEADER Header;
    CONST NDK_PD_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Shared endpoint                                                          */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_SHARED_ENDPOINT NDK_SHARED_ENDPOINT;

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS)(
    _In_ NDK_SHARED_ENDPOINT *pNdkSharedEndpoint,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) PSOCKADDR pAddress,
    _Inout_ ULONG *pAddressLength);

typedef struct _NDK_SHARED_ENDPOINT_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSharedEndpoint;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS NdkGetLocalAddress;
} NDK_SHARED_ENDPOINT_DISPATCH;

struct _NDK_SHARED_ENDPOINT {
    NDK_OBJECT_HEADER Header;
    CONST NDK_SHARED_ENDPOINT_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Connector                                                                */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_CONNECTOR NDK_CONNECTOR;

/* CONST PSOCKADDR is `struct sockaddr *const`: the pointer, not the address,
 * is const (typedef semantics). Likewise CONST PVOID is `void *const`. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CONNECT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ NDK_QP *pNdkQp,
    _In_reads_bytes_(SrcAddressLength) CONST PSOCKADDR pSrcAddress,
    _In_ ULONG SrcAddressLength,
    _In_reads_bytes_(DestAddressLength) CONST PSOCKADDR pDestAddress,
    _In_ ULONG DestAddressLength,
    _In_ ULONG InboundReadLimit,
    _In_ ULONG OutboundReadLimit,
    _In_reads_bytes_opt_(PrivateDataLength) CONST PVOID pPrivateData,
    _In_ ULONG PrivateDataLength,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CONNECT_WITH_SHARED_ENDPOINT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ NDK_QP *pNdkQp,
    _In_ NDK_SHARED_ENDPOINT *pNdkSharedEndpoint,
    _In_reads_bytes_(DestAddressLength) CONST PSOCKADDR pDestAddress,
    _In_ ULONG DestAddressLength,
    _In_ ULONG InboundReadLimit,
    _In_ ULONG OutboundReadLimit,
    _In_reads_bytes_opt_(PrivateDataLength) CONST PVOID pPrivateData,
    _In_ ULONG PrivateDataLength,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK)(
    _In_opt_ PVOID DisconnectEventContext);

/* NDKPI 2.1: ProviderDisconnectReason is provider-defined; 0 = none given. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_DISCONNECT_EVENT_CALLBACK_EX)(
    _In_opt_ PVOID DisconnectEventContext,
    _In_ ULONG ProviderDisconnectReason);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_COMPLETE_CONNECT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
    _In_opt_ PVOID DisconnectEventContext,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_ACCEPT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ NDK_QP *pNdkQp,
    _In_ ULONG InboundReadLimit,
    _In_ ULONG OutboundReadLimit,
    _In_reads_bytes_opt_(PrivateDataLength) CONST PVOID pPrivateData,
    _In_ ULONG PrivateDataLength,
    _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
    _In_opt_ PVOID DisconnectEventContext,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

/* Synchronous. pPrivateData precedes its length (the DDI page lists them
 * the other way round). */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_REJECT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_reads_bytes_opt_(PrivateDataLength) CONST PVOID pPrivateData,
    _In_ ULONG PrivateDataLength);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_GET_CONNECTION_DATA)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _Out_opt_ ULONG *pInboundReadLimit,
    _Out_opt_ ULONG *pOutboundReadLimit,
    _Out_writes_bytes_to_opt_(*pPrivateDataLength, *pPrivateDataLength) PVOID pPrivateData,
    _Inout_ ULONG *pPrivateDataLength);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_GET_LOCAL_ADDRESS)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) PSOCKADDR pAddress,
    _Inout_ ULONG *pAddressLength);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_GET_PEER_ADDRESS)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) PSOCKADDR pAddress,
    _Inout_ ULONG *pAddressLength);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_DISCONNECT)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

/* Declared by the WDK header but undocumented and in no dispatch table. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_DISCONNECT_EX)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ BOOLEAN Abortive,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

/* NDKPI 2.1: as NdkCompleteConnect / NdkAccept, with the _EX callback. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_COMPLETE_CONNECT_EX)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
    _In_opt_ PVOID DisconnectEventContext,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_ACCEPT_EX)(
    _In_ NDK_CONNECTOR *pNdkConnector,
    _In_ NDK_QP *pNdkQp,
    _In_ ULONG InboundReadLimit,
    _In_ ULONG OutboundReadLimit,
    _In_reads_bytes_opt_(PrivateDataLength) CONST PVOID pPrivateData,
    _In_ ULONG PrivateDataLength,
    _In_opt_ NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
    _In_opt_ PVOID DisconnectEventContext,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

/* 11 members (0x58 bytes) before NDKPI 2.1; 2.1 appended the last two. */
typedef struct _NDK_CONNECTOR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseConnector;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_CONNECT NdkConnect;
    NDK_FN_CONNECT_WITH_SHARED_ENDPOINT NdkConnectWithSharedEndpoint;
    NDK_FN_COMPLETE_CONNECT NdkCompleteConnect;
    NDK_FN_ACCEPT NdkAccept;
    NDK_FN_REJECT NdkReject;
    NDK_FN_GET_CONNECTION_DATA NdkGetConnectionData;
    NDK_FN_GET_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_GET_PEER_ADDRESS NdkGetPeerAddress;
    NDK_FN_DISCONNECT NdkDisconnect;
    NDK_FN_COMPLETE_CONNECT_EX NdkCompleteConnectEx; /* NDKPI 2.1+ */
    NDK_FN_ACCEPT_EX NdkAcceptEx;                    /* NDKPI 2.1+ */
} NDK_CONNECTOR_DISPATCH;

struct _NDK_CONNECTOR {
    NDK_OBJECT_HEADER Header;
    CONST NDK_CONNECTOR_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Listener                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_LISTENER NDK_LISTENER;

/* pNdkConnector is a new, provider-created connector now owned by the
 * consumer. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_CONNECT_EVENT_CALLBACK)(
    _In_opt_ PVOID ConnectEventContext,
    _In_ NDK_CONNECTOR *pNdkConnector);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_CONTROL_CONNECT_EVENTS)(
    _In_ NDK_LISTENER *pNdkListener,
    _In_ BOOLEAN Pause);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_LISTEN)(
    _In_ NDK_LISTENER *pNdkListener,
    _In_reads_bytes_(AddressLength) CONST PSOCKADDR pAddress,
    _In_ ULONG AddressLength,
    _In_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_GET_LISTENER_LOCAL_ADDRESS)(
    _In_ NDK_LISTENER *pNdkListener,
    _Out_writes_bytes_to_opt_(*pAddressLength, *pAddressLength) PSOCKADDR pAddress,
    _Inout_ ULONG *pAddressLength);

typedef struct _NDK_LISTENER_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseListener;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_LISTEN NdkListen;
    NDK_FN_GET_LISTENER_LOCAL_ADDRESS NdkGetLocalAddress;
    NDK_FN_CONTROL_CONNECT_EVENTS NdkControlConnectEvents;
} NDK_LISTENER_DISPATCH;

struct _NDK_LISTENER {
    NDK_OBJECT_HEADER Header;
    CONST NDK_LISTENER_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Adapter                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct _NDK_ADAPTER NDK_ADAPTER;

/* PASSIVE_LEVEL: may block; never called from a callback. */
typedef _IRQL_requires_max_(PASSIVE_LEVEL) NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _Out_writes_bytes_to_opt_(*pBufferSize, *pBufferSize) NDK_ADAPTER_INFO *pInfo,
    _Inout_ ULONG *pBufferSize);

/* Declared by the WDK header but undocumented and in no dispatch table. */
typedef _IRQL_requires_max_(PASSIVE_LEVEL) NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO_EX)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ NDK_VERSION Version,
    _Out_writes_bytes_to_opt_(*pBufferSize, *pBufferSize) NDK_ADAPTER_INFO *pInfo,
    _Inout_ ULONG *pBufferSize);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_CQ)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ ULONG CqDepth,
    _In_ NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification,
    _In_opt_ PVOID CqNotificationContext,
    _In_opt_ GROUP_AFFINITY *Affinity,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_CQ **ppNdkCq);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_PD)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_PD **ppNdkPd);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_SHARED_ENDPOINT)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_reads_bytes_(AddressLength) CONST PSOCKADDR pAddress,
    _In_ ULONG AddressLength,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_CONNECTOR)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_CONNECTOR **ppNdkConnector);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_CREATE_LISTENER)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
    _In_opt_ PVOID ConnectEventContext,
    _In_ NDK_FN_CREATE_COMPLETION CreateCompletion,
    _In_opt_ PVOID RequestContext,
    _Outptr_ NDK_LISTENER **ppNdkListener);

/* LAM = logical address mapping. Mdl must describe a virtually contiguous
 * region; *pFBO receives the offset of its first byte in the first page. */
typedef _IRQL_requires_max_(DISPATCH_LEVEL) NTSTATUS (*NDK_FN_BUILD_LAM)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ MDL *Mdl,
    _In_ SIZE_T Length,
    _In_opt_ NDK_FN_REQUEST_COMPLETION RequestCompletion,
    _In_opt_ PVOID RequestContext,
    _Out_writes_bytes_to_opt_(*pLAMSize, *pLAMSize) NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM,
    _Inout_ ULONG *pLAMSize,
    _Out_ ULONG *pFBO);

typedef _IRQL_requires_max_(DISPATCH_LEVEL) VOID (*NDK_FN_RELEASE_LAM)(
    _In_ NDK_ADAPTER *pNdkAdapter,
    _In_ NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM);

/* Unlike every other table: no close member (the platform closes adapters,
 * ndk_close_adapter in ndk.h), and NdkQueryExtension comes first. */
typedef struct _NDK_ADAPTER_DISPATCH {
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtension;
    NDK_FN_QUERY_ADAPTER_INFO NdkQueryAdapterInfo;
    NDK_FN_CREATE_CQ NdkCreateCq;
    NDK_FN_CREATE_PD NdkCreatePd;
    NDK_FN_CREATE_SHARED_ENDPOINT NdkCreateSharedEndpoint;
    NDK_FN_CREATE_CONNECTOR NdkCreateConnector;
    NDK_FN_CREATE_LISTENER NdkCreateListener;
    NDK_FN_BUILD_LAM NdkBuildLAM;
    NDK_FN_RELEASE_LAM NdkReleaseLAM;
} NDK_ADAPTER_DISPATCH;

struct _NDK_ADAPTER {
    NDK_OBJECT_HEADER Header;
    CONST NDK_ADAPTER_DISPATCH *Dispatch;
};

/* ------------------------------------------------------------------------ */
/* Layout checks against the x64 Windows layout (64-bit targets only).      */
/* ------------------------------------------------------------------------ */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu

/* Enums are 4 bytes under MSVC; GCC and Clang agree for these ranges. */
NDK_ASSERT_SIZE_(NDK_OBJECT_TYPE, 4);
NDK_ASSERT_SIZE_(NDK_OPERATION_TYPE, 4);

NDK_ASSERT_SIZE_(NDK_OBJECT_HEADER_RESERVED_BLOCK, 0x20);
NDK_ASSERT_OFFSET_(NDK_OBJECT_HEADER, Version, 0x00);
NDK_ASSERT_OFFSET_(NDK_OBJECT_HEADER, ObjectType, 0x04);
NDK_ASSERT_OFFSET_(NDK_OBJECT_HEADER, NdkReserved, 0x08);
NDK_ASSERT_SIZE_(NDK_OBJECT_HEADER, 0x28);

#define NDK_ASSERT_OBJECT_(T)                                                          \
    NDK_ASSERT_OFFSET_(T, Header, 0x00);                                                 \
    NDK_ASSERT_OFFSET_(T, Dispatch, 0x28);                                               \
    NDK_ASSERT_SIZE_(T, 0x30)
NDK_ASSERT_OBJECT_(NDK_ADAPTER);
NDK_ASSERT_OBJECT_(NDK_CQ);
NDK_ASSERT_OBJECT_(NDK_PD);
NDK_ASSERT_OBJECT_(NDK_MR);
NDK_ASSERT_OBJECT_(NDK_MW);
NDK_ASSERT_OBJECT_(NDK_SRQ);
NDK_ASSERT_OBJECT_(NDK_QP);
NDK_ASSERT_OBJECT_(NDK_SHARED_ENDPOINT);
NDK_ASSERT_OBJECT_(NDK_CONNECTOR);
NDK_ASSERT_OBJECT_(NDK_LISTENER);
#undef NDK_ASSERT_OBJECT_

NDK_ASSERT_OFFSET_(NDK_RESULT, Status, 0x00);
NDK_ASSERT_OFFSET_(NDK_RESULT, BytesTransferred, 0x04);
NDK_ASSERT_OFFSET_(NDK_RESULT, QPContext, 0x08);
NDK_ASSERT_OFFSET_(NDK_RESULT, RequestContext, 0x10);
NDK_ASSERT_SIZE_(NDK_RESULT, 0x18);

NDK_ASSERT_OFFSET_(NDK_RESULT_EX, Status, 0x00);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, BytesTransferred, 0x04);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, QPContext, 0x08);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, RequestContext, 0x10);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, Type, 0x18);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, ProviderErrorCode, 0x1C);
NDK_ASSERT_OFFSET_(NDK_RESULT_EX, TypeSpecificCompletionOutput, 0x20);
NDK_ASSERT_SIZE_(NDK_RESULT_EX, 0x28);

NDK_ASSERT_SIZE_(NDK_LOGICAL_ADDRESS, 8);
NDK_ASSERT_OFFSET_(NDK_LOGICAL_ADDRESS_MAPPING, AdapterContext, 0x00);
NDK_ASSERT_OFFSET_(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageCount, 0x08);
NDK_ASSERT_OFFSET_(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray, 0x10);

NDK_ASSERT_OFFSET_(NDK_SGE, VirtualAddress, 0x00);
NDK_ASSERT_OFFSET_(NDK_SGE, LogicalAddress, 0x00);
NDK_ASSERT_OFFSET_(NDK_SGE, Length, 0x08);
NDK_ASSERT_OFFSET_(NDK_SGE, MemoryRegionToken, 0x0C);
NDK_ASSERT_SIZE_(NDK_SGE, 0x10);

NDK_ASSERT_SIZE_(NDK_EXTENSION_INTERFACE, 8);

/* The MDL members libndk reads, at their Windows x64 offsets (whichever
 * header defined MDL). */
NDK_ASSERT_OFFSET_(MDL, Next, 0x00);
NDK_ASSERT_OFFSET_(MDL, StartVa, 0x20);
NDK_ASSERT_OFFSET_(MDL, ByteCount, 0x28);
NDK_ASSERT_OFFSET_(MDL, ByteOffset, 0x2C);
NDK_ASSERT_SIZE_(MDL, 0x30);

/* Dispatch tables: sizes, first and last members, and 1.2 / 2.1 additions. */
NDK_ASSERT_OFFSET_(NDK_ADAPTER_DISPATCH, NdkQueryExtension, 0x00);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_DISPATCH, NdkQueryAdapterInfo, 0x08);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_DISPATCH, NdkCreateListener, 0x30);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_DISPATCH, NdkBuildLAM, 0x38);
NDK_ASSERT_OFFSET_(NDK_ADAPTER_DISPATCH, NdkReleaseLAM, 0x40);
NDK_ASSERT_SIZE_(NDK_ADAPTER_DISPATCH, 0x48);

NDK_ASSERT_OFFSET_(NDK_CQ_DISPATCH, NdkCloseCq, 0x00);
NDK_ASSERT_OFFSET_(NDK_CQ_DISPATCH, NdkArmCq, 0x18);
NDK_ASSERT_OFFSET_(NDK_CQ_DISPATCH, NdkGetCqResults, 0x20);
NDK_ASSERT_OFFSET_(NDK_CQ_DISPATCH, NdkGetCqResultsEx, 0x30);
NDK_ASSERT_SIZE_(NDK_CQ_DISPATCH, 0x38);

NDK_ASSERT_OFFSET_(NDK_PD_DISPATCH, NdkClosePd, 0x00);
NDK_ASSERT_OFFSET_(NDK_PD_DISPATCH, NdkCreateQp, 0x28);
NDK_ASSERT_OFFSET_(NDK_PD_DISPATCH, NdkGetPrivilegedMemoryRegionToken, 0x38);
NDK_ASSERT_SIZE_(NDK_PD_DISPATCH, 0x40);

NDK_ASSERT_OFFSET_(NDK_MR_DISPATCH, NdkCloseMr, 0x00);
NDK_ASSERT_OFFSET_(NDK_MR_DISPATCH, NdkRegisterMr, 0x10);
NDK_ASSERT_OFFSET_(NDK_MR_DISPATCH, NdkGetLocalTokenFromMr, 0x30);
NDK_ASSERT_SIZE_(NDK_MR_DISPATCH, 0x38);

NDK_ASSERT_OFFSET_(NDK_MW_DISPATCH, NdkCloseMw, 0x00);
NDK_ASSERT_OFFSET_(NDK_MW_DISPATCH, NdkGetRemoteTokenFromMw, 0x10);
NDK_ASSERT_SIZE_(NDK_MW_DISPATCH, 0x18);

NDK_ASSERT_OFFSET_(NDK_QP_DISPATCH, NdkCloseQp, 0x00);
NDK_ASSERT_OFFSET_(NDK_QP_DISPATCH, NdkSend, 0x18);
NDK_ASSERT_OFFSET_(NDK_QP_DISPATCH, NdkRead, 0x40);
NDK_ASSERT_OFFSET_(NDK_QP_DISPATCH, NdkWrite, 0x48);
NDK_ASSERT_OFFSET_(NDK_QP_DISPATCH, NdkSendAndInvalidate, 0x50);
NDK_ASSERT_SIZE_(NDK_QP_DISPATCH, 0x58);

NDK_ASSERT_OFFSET_(NDK_SRQ_DISPATCH, NdkCloseSrq, 0x00);
NDK_ASSERT_OFFSET_(NDK_SRQ_DISPATCH, NdkSrqReceive, 0x18);
NDK_ASSERT_SIZE_(NDK_SRQ_DISPATCH, 0x20);

NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkCloseConnector, 0x00);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkConnect, 0x10);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkAccept, 0x28);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkGetLocalAddress, 0x40);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkDisconnect, 0x50);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkCompleteConnectEx, 0x58);
NDK_ASSERT_OFFSET_(NDK_CONNECTOR_DISPATCH, NdkAcceptEx, 0x60);
NDK_ASSERT_SIZE_(NDK_CONNECTOR_DISPATCH, 0x68);

NDK_ASSERT_OFFSET_(NDK_LISTENER_DISPATCH, NdkCloseListener, 0x00);
NDK_ASSERT_OFFSET_(NDK_LISTENER_DISPATCH, NdkListen, 0x10);
NDK_ASSERT_OFFSET_(NDK_LISTENER_DISPATCH, NdkControlConnectEvents, 0x20);
NDK_ASSERT_SIZE_(NDK_LISTENER_DISPATCH, 0x28);

NDK_ASSERT_OFFSET_(NDK_SHARED_ENDPOINT_DISPATCH, NdkCloseSharedEndpoint, 0x00);
NDK_ASSERT_OFFSET_(NDK_SHARED_ENDPOINT_DISPATCH, NdkGetLocalAddress, 0x10);
NDK_ASSERT_SIZE_(NDK_SHARED_ENDPOINT_DISPATCH, 0x18);

#endif /* 64-bit */

#ifdef __cplusplus
}
#endif

#endif /* NDK_NDKPI_H */
