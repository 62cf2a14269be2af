/*
 * wskndk.h (libndk WDK kit) - the NDK extension of WSK. A consumer asks
 * WskControlClient for WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH (no input, the
 * dispatch table as output, no IRP) and opens adapters by interface index:
 * here the Linux interface index, so IfIndex N is the Linux interface whose
 * index is N. The table has these two functions; an adapter's limits come
 * from NdkQueryAdapterInfo.
 */
#ifndef NDKWDK_WSKNDK_H
#define NDKWDK_WSKNDK_H

#include <wsk.h>
#include <ndis.h>

#ifdef __cplusplus
extern "C" {
#endif

/* IRQL PASSIVE_LEVEL. STATUS_NOT_FOUND when no interface has IfIndex;
 * otherwise what libndk's ndk_open_adapter returns for that interface. */
typedef NTSTATUS(WSKAPI *PFN_WSK_NDK_OPEN_ADAPTER)(PWSK_CLIENT Client, NDK_VERSION NdkVersion,
                                                   NET_IFINDEX IfIndex,
                                                   NDK_ADAPTER **ppNdkAdapter);
/* IRQL PASSIVE_LEVEL; blocks until the adapter's callbacks have returned. */
typedef VOID(WSKAPI *PFN_WSK_NDK_CLOSE_ADAPTER)(PWSK_CLIENT Client, NDK_ADAPTER *pNdkAdapter);

typedef struct _WSK_PROVIDER_NDK_DISPATCH {
    PFN_WSK_NDK_OPEN_ADAPTER WskOpenNdkAdapter;
    PFN_WSK_NDK_CLOSE_ADAPTER WskCloseNdkAdapter;
} WSK_PROVIDER_NDK_DISPATCH, *PWSK_PROVIDER_NDK_DISPATCH;

/* 'NDKD' as a multi-character constant. */
#define WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH ((ULONG)0x4E444B44)

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_WSKNDK_H */
