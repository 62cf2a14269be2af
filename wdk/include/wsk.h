/*
 * wsk.h (libndk WDK kit) - Winsock Kernel, as far as NDK consumers use it:
 * registering, capturing the provider NPI and WskControlClient, through
 * which the NDK extension (wskndk.h) is reached. WSK sockets and name
 * resolution are refused with STATUS_NOT_SUPPORTED: NDK consumers move
 * their data over NDK, not over WSK sockets.
 */
#ifndef NDKWDK_WSK_H
#define NDKWDK_WSK_H

#include <ntddk.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MAKE_WSK_VERSION(Mj, Mn) ((USHORT)((Mj) << 8) | (USHORT)((Mn)&0xff))
#define WSK_MAJOR_VERSION(V) ((UCHAR)((V) >> 8))
#define WSK_MINOR_VERSION(V) ((UCHAR)(V))
#define WSK_NO_WAIT 0
#define WSK_INFINITE_WAIT 0xffffffff

typedef PVOID PWSK_CLIENT;
typedef PVOID PSECURITY_DESCRIPTOR;
typedef struct addrinfoexW ADDRINFOEXW, *PADDRINFOEXW;
typedef struct _WSK_CLIENT_CONNECTION_DISPATCH WSK_CLIENT_CONNECTION_DISPATCH,
    *PWSK_CLIENT_CONNECTION_DISPATCH;

typedef NTSTATUS(WSKAPI *PFN_WSK_CLIENT_EVENT)(PVOID ClientContext, ULONG EventType,
                                               PVOID Information, SIZE_T InformationLength);
typedef struct _WSK_CLIENT_DISPATCH {
    USHORT Version;
    USHORT Reserved;
    PFN_WSK_CLIENT_EVENT WskClientEvent;
} WSK_CLIENT_DISPATCH, *PWSK_CLIENT_DISPATCH;

typedef struct _WSK_CLIENT_NPI {
    PVOID ClientContext;
    CONST WSK_CLIENT_DISPATCH *Dispatch;
} WSK_CLIENT_NPI, *PWSK_CLIENT_NPI;

typedef struct _WSK_REGISTRATION {
    ULONGLONG ReservedRegistrationState;
    PVOID ReservedRegistrationContext;
    KSPIN_LOCK ReservedRegistrationLock;
} WSK_REGISTRATION, *PWSK_REGISTRATION;

typedef NTSTATUS(WSKAPI *PFN_WSK_SOCKET)(PWSK_CLIENT Client, ADDRESS_FAMILY AddressFamily,
                                         USHORT SocketType, ULONG Protocol, ULONG Flags,
                                         PVOID SocketContext, CONST VOID *Dispatch,
                                         PEPROCESS OwningProcess, PETHREAD OwningThread,
                                         PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_SOCKET_CONNECT)(
    PWSK_CLIENT Client, USHORT SocketType, ULONG Protocol, PSOCKADDR LocalAddress,
    PSOCKADDR RemoteAddress, ULONG Flags, PVOID SocketContext,
    CONST WSK_CLIENT_CONNECTION_DISPATCH *Dispatch, PEPROCESS OwningProcess,
    PETHREAD OwningThread, PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_CONTROL_CLIENT)(PWSK_CLIENT Client, ULONG ControlCode,
                                                 SIZE_T InputSize, PVOID InputBuffer,
                                                 SIZE_T OutputSize, PVOID OutputBuffer,
                                                 SIZE_T *OutputSizeReturned, PIRP Irp);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_ADDRESS_INFO)(PWSK_CLIENT Client, PUNICODE_STRING NodeName,
                                                   PUNICODE_STRING ServiceName, ULONG NameSpace,
                                                   GUID *Provider, PADDRINFOEXW Hints,
                                                   PADDRINFOEXW *Result,
                                                   PEPROCESS OwningProcess,
                                                   PETHREAD OwningThread, PIRP Irp);
typedef VOID(WSKAPI *PFN_WSK_FREE_ADDRESS_INFO)(PWSK_CLIENT Client, PADDRINFOEXW AddrInfo);
typedef NTSTATUS(WSKAPI *PFN_WSK_GET_NAME_INFO)(PWSK_CLIENT Client, PSOCKADDR SockAddr,
                                                ULONG SockAddrLength, PUNICODE_STRING NodeName,
                                                PUNICODE_STRING ServiceName, ULONG Flags,
                                                PEPROCESS OwningProcess, PETHREAD OwningThread,
                                                PIRP Irp);

typedef struct _WSK_PROVIDER_DISPATCH {
    USHORT Version;
    USHORT Reserved;
    PFN_WSK_SOCKET WskSocket;
    PFN_WSK_SOCKET_CONNECT WskSocketConnect;
    PFN_WSK_CONTROL_CLIENT WskControlClient;
    PFN_WSK_GET_ADDRESS_INFO WskGetAddressInfo;
    PFN_WSK_FREE_ADDRESS_INFO WskFreeAddressInfo;
    PFN_WSK_GET_NAME_INFO WskGetNameInfo;
} WSK_PROVIDER_DISPATCH, *PWSK_PROVIDER_DISPATCH;

typedef struct _WSK_PROVIDER_NPI {
    PWSK_CLIENT Client;
    CONST WSK_PROVIDER_DISPATCH *Dispatch;
} WSK_PROVIDER_NPI, *PWSK_PROVIDER_NPI;

/* The kit's WSK subsystem is version 1.0. */
NTSTATUS WskRegister(PWSK_CLIENT_NPI WskClientNpi, PWSK_REGISTRATION WskRegistration);
VOID WskDeregister(PWSK_REGISTRATION WskRegistration);
NTSTATUS WskCaptureProviderNPI(PWSK_REGISTRATION WskRegistration, ULONG WaitTimeout,
                               PWSK_PROVIDER_NPI WskProviderNpi);
VOID WskReleaseProviderNPI(PWSK_REGISTRATION WskRegistration);

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_WSK_H */
