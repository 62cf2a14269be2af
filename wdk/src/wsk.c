/* WSK: registration, the provider NPI, WskControlClient and the NDK
 * extension (wskndk.h). WskOpenNdkAdapter opens the libndk adapter of the
 * Linux interface with that index; the kit keeps every adapter it opened
 * so the host can report the ones a driver leaves open. WSK sockets and
 * name resolution are refused with STATUS_NOT_SUPPORTED. */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include <wskndk.h>

#define REG_MAGIC 0x4B53574E44ull /* "NDWSK" */

struct wsk_client {
    PWSK_REGISTRATION reg;
};

struct open_adapter {
    NDK_ADAPTER *adapter;
    NET_IFINDEX ifindex;
    const void *site;
    struct open_adapter *next;
};

static pthread_mutex_t wsk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct open_adapter *adapters;
static unsigned registrations;
static unsigned objects_at_close; /* NDK objects still open when their adapter was closed */

static NTSTATUS WSKAPI refuse_socket(PWSK_CLIENT Client, ADDRESS_FAMILY AddressFamily,
                                     USHORT SocketType, ULONG Protocol, ULONG Flags,
                                     PVOID SocketContext, CONST VOID *Dispatch,
                                     PEPROCESS OwningProcess, PETHREAD OwningThread,
                                     PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp)
{
    (void)Client, (void)AddressFamily, (void)SocketType, (void)Protocol, (void)Flags,
        (void)SocketContext, (void)Dispatch, (void)OwningProcess, (void)OwningThread,
        (void)SecurityDescriptor, (void)Irp;
    return STATUS_NOT_SUPPORTED;
}

static NTSTATUS WSKAPI refuse_socket_connect(PWSK_CLIENT Client, USHORT SocketType,
                                             ULONG Protocol, PSOCKADDR LocalAddress,
                                             PSOCKADDR RemoteAddress, ULONG Flags,
                                             PVOID SocketContext,
                                             CONST WSK_CLIENT_CONNECTION_DISPATCH *Dispatch,
                                             PEPROCESS OwningProcess, PETHREAD OwningThread,
                                             PSECURITY_DESCRIPTOR SecurityDescriptor, PIRP Irp)
{
    (void)Client, (void)SocketType, (void)Protocol, (void)LocalAddress, (void)RemoteAddress,
        (void)Flags, (void)SocketContext, (void)Dispatch, (void)OwningProcess,
        (void)OwningThread, (void)SecurityDescriptor, (void)Irp;
    return STATUS_NOT_SUPPORTED;
}

static NTSTATUS WSKAPI refuse_get_address_info(PWSK_CLIENT Client, PUNICODE_STRING NodeName,
                                               PUNICODE_STRING ServiceName, ULONG NameSpace,
                                               GUID *Provider, PADDRINFOEXW Hints,
                                               PADDRINFOEXW *Result, PEPROCESS OwningProcess,
                                               PETHREAD OwningThread, PIRP Irp)
{
    (void)Client, (void)NodeName, (void)ServiceName, (void)NameSpace, (void)Provider,
        (void)Hints, (void)OwningProcess, (void)OwningThread, (void)Irp;
    if (Result)
        *Result = NULL;
    return STATUS_NOT_SUPPORTED;
}

static VOID WSKAPI free_address_info(PWSK_CLIENT Client, PADDRINFOEXW AddrInfo)
{
    (void)Client, (void)AddrInfo; /* WskGetAddressInfo never returns one */
}

static NTSTATUS WSKAPI refuse_get_name_info(PWSK_CLIENT Client, PSOCKADDR SockAddr,
                                            ULONG SockAddrLength, PUNICODE_STRING NodeName,
                                            PUNICODE_STRING ServiceName, ULONG Flags,
                                            PEPROCESS OwningProcess, PETHREAD OwningThread,
                                            PIRP Irp)
{
    (void)Client, (void)SockAddr, (void)SockAddrLength, (void)NodeName, (void)ServiceName,
        (void)Flags, (void)OwningProcess, (void)OwningThread, (void)Irp;
    return STATUS_NOT_SUPPORTED;
}

static const char *type_name(NDK_OBJECT_TYPE t)
{
    static const char *const names[] = {"?",          "adapter", "QP",       "CQ",
                                        "MR",         "MW",      "PD",       "shared endpoint",
                                        "connector",  "listener", "SRQ"};
    return t < NdkObjectTypeMax ? names[t] : "?";
}

static NTSTATUS WSKAPI open_ndk_adapter(PWSK_CLIENT Client, NDK_VERSION NdkVersion,
                                        NET_IFINDEX IfIndex, NDK_ADAPTER **ppNdkAdapter)
{
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "WskOpenNdkAdapter", KIT_CALLER);
    if (!Client || !ppNdkAdapter)
        return STATUS_INVALID_PARAMETER;
    struct open_adapter *rec = malloc(sizeof *rec);
    if (!rec)
        return STATUS_INSUFFICIENT_RESOURCES;
    NTSTATUS st = kit_ndk_open(IfIndex, NdkVersion, ppNdkAdapter);
    if (!NT_SUCCESS(st)) {
        free(rec);
        return st;
    }
    rec->adapter = *ppNdkAdapter;
    rec->ifindex = IfIndex;
    rec->site = KIT_CALLER;
    pthread_mutex_lock(&wsk_lock);
    rec->next = adapters;
    adapters = rec;
    pthread_mutex_unlock(&wsk_lock);
    return STATUS_SUCCESS;
}

static VOID WSKAPI close_ndk_adapter(PWSK_CLIENT Client, NDK_ADAPTER *pNdkAdapter)
{
    (void)Client;
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "WskCloseNdkAdapter", KIT_CALLER);
    struct open_adapter *found = NULL;
    pthread_mutex_lock(&wsk_lock);
    for (struct open_adapter **pp = &adapters; *pp; pp = &(*pp)->next)
        if ((*pp)->adapter == pNdkAdapter) {
            found = *pp;
            *pp = found->next;
            break;
        }
    pthread_mutex_unlock(&wsk_lock);
    if (!found)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)pNdkAdapter, 0, 0,
                     KIT_CALLER, "WskCloseNdkAdapter of %p, which is not an open adapter",
                     (void *)pNdkAdapter);
    ULONG open = kit_ndk_objects(pNdkAdapter, NdkObjectTypeUndefined);
    if (open) {
        char where[256];
        ndkwdk_describe_address(KIT_CALLER, where, sizeof where);
        fprintf(stderr, "ndkwdk: WskCloseNdkAdapter at %s with %u NDK object(s) still open:",
                where, open);
        for (int t = NdkObjectTypeQp; t < NdkObjectTypeMax; t++) {
            ULONG c = kit_ndk_objects(pNdkAdapter, (NDK_OBJECT_TYPE)t);
            if (c)
                fprintf(stderr, " %u %s", c, type_name((NDK_OBJECT_TYPE)t));
        }
        fputc('\n', stderr);
        pthread_mutex_lock(&wsk_lock);
        objects_at_close += open;
        pthread_mutex_unlock(&wsk_lock);
    }
    kit_ndk_close(pNdkAdapter);
    free(found);
}

static const WSK_PROVIDER_NDK_DISPATCH ndk_dispatch = {open_ndk_adapter, close_ndk_adapter};

static NTSTATUS WSKAPI control_client(PWSK_CLIENT Client, ULONG ControlCode, SIZE_T InputSize,
                                      PVOID InputBuffer, SIZE_T OutputSize, PVOID OutputBuffer,
                                      SIZE_T *OutputSizeReturned, PIRP Irp)
{
    (void)InputBuffer;
    kit_touch();
    if (!Client)
        return STATUS_INVALID_PARAMETER;
    if (ControlCode != WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH || Irp != NULL)
        return STATUS_NOT_SUPPORTED; /* no other control code; no IRPs in the kit */
    if (InputSize != 0 || !OutputBuffer || OutputSize < sizeof ndk_dispatch)
        return STATUS_INVALID_PARAMETER;
    memcpy(OutputBuffer, &ndk_dispatch, sizeof ndk_dispatch);
    if (OutputSizeReturned)
        *OutputSizeReturned = sizeof ndk_dispatch;
    return STATUS_SUCCESS;
}

static const WSK_PROVIDER_DISPATCH provider_dispatch = {
    MAKE_WSK_VERSION(1, 0), 0,
    refuse_socket,           refuse_socket_connect,
    control_client,          refuse_get_address_info,
    free_address_info,       refuse_get_name_info,
};

/* The registration's reserved fields: a magic, the client, the number of
 * captures outstanding. */
NTSTATUS WskRegister(PWSK_CLIENT_NPI WskClientNpi, PWSK_REGISTRATION WskRegistration)
{
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "WskRegister", KIT_CALLER);
    if (!WskClientNpi || !WskClientNpi->Dispatch || !WskRegistration ||
        WSK_MAJOR_VERSION(WskClientNpi->Dispatch->Version) != 1)
        return STATUS_INVALID_PARAMETER;
    struct wsk_client *c = malloc(sizeof *c);
    if (!c)
        return STATUS_INSUFFICIENT_RESOURCES;
    c->reg = WskRegistration;
    WskRegistration->ReservedRegistrationState = REG_MAGIC;
    WskRegistration->ReservedRegistrationContext = c;
    WskRegistration->ReservedRegistrationLock = 0;
    pthread_mutex_lock(&wsk_lock);
    registrations++;
    pthread_mutex_unlock(&wsk_lock);
    return STATUS_SUCCESS;
}

static bool reg_valid(PWSK_REGISTRATION r)
{
    return r && r->ReservedRegistrationState == REG_MAGIC && r->ReservedRegistrationContext;
}

NTSTATUS WskCaptureProviderNPI(PWSK_REGISTRATION WskRegistration, ULONG WaitTimeout,
                               PWSK_PROVIDER_NPI WskProviderNpi)
{
    (void)WaitTimeout; /* the provider is always ready */
    kit_touch();
    if (WaitTimeout != WSK_NO_WAIT)
        kit_require_irql(PASSIVE_LEVEL, "WskCaptureProviderNPI", KIT_CALLER);
    if (!reg_valid(WskRegistration) || !WskProviderNpi)
        return STATUS_INVALID_PARAMETER;
    pthread_mutex_lock(&wsk_lock);
    WskRegistration->ReservedRegistrationLock++;
    pthread_mutex_unlock(&wsk_lock);
    WskProviderNpi->Client = WskRegistration->ReservedRegistrationContext;
    WskProviderNpi->Dispatch = &provider_dispatch;
    return STATUS_SUCCESS;
}

VOID WskReleaseProviderNPI(PWSK_REGISTRATION WskRegistration)
{
    kit_touch();
    if (!reg_valid(WskRegistration) || WskRegistration->ReservedRegistrationLock == 0)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)WskRegistration, 0, 0,
                     KIT_CALLER, "WskReleaseProviderNPI without a captured NPI");
    pthread_mutex_lock(&wsk_lock);
    WskRegistration->ReservedRegistrationLock--;
    pthread_mutex_unlock(&wsk_lock);
}

VOID WskDeregister(PWSK_REGISTRATION WskRegistration)
{
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "WskDeregister", KIT_CALLER);
    if (!reg_valid(WskRegistration))
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)WskRegistration, 0, 0,
                     KIT_CALLER, "WskDeregister of a registration that is not registered");
    /* Windows waits here for captures to be released; a driver that
     * deregisters with one outstanding would hang: report it instead. */
    if (WskRegistration->ReservedRegistrationLock != 0)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)WskRegistration,
                     WskRegistration->ReservedRegistrationLock, 0, KIT_CALLER,
                     "WskDeregister with %zu provider NPI capture(s) not released (it would "
                     "wait forever)",
                     (size_t)WskRegistration->ReservedRegistrationLock);
    free(WskRegistration->ReservedRegistrationContext);
    WskRegistration->ReservedRegistrationContext = NULL;
    WskRegistration->ReservedRegistrationState = 0;
    pthread_mutex_lock(&wsk_lock);
    registrations--;
    pthread_mutex_unlock(&wsk_lock);
}

unsigned ndkwdk_report_ndk(FILE *out)
{
    unsigned n = 0;
    pthread_mutex_lock(&wsk_lock);
    struct open_adapter *list = adapters;
    adapters = NULL;
    unsigned regs = registrations, at_close = objects_at_close;
    pthread_mutex_unlock(&wsk_lock);
    if (at_close) {
        fprintf(out, "  %u NDK object(s) were still open when their adapter was closed\n",
                at_close);
        n += at_close;
    }
    while (list) {
        struct open_adapter *a = list;
        list = a->next;
        char where[256];
        ndkwdk_describe_address(a->site, where, sizeof where);
        fprintf(out, "  NDK adapter of interface index %u left open (opened at %s)\n", a->ifindex,
                where);
        n++;
        for (int t = NdkObjectTypeQp; t < NdkObjectTypeMax; t++) {
            ULONG c = kit_ndk_objects(a->adapter, (NDK_OBJECT_TYPE)t);
            if (c)
                fprintf(out, "    with %u %s object(s) open\n", c, type_name((NDK_OBJECT_TYPE)t));
            n += c;
        }
        kit_ndk_close(a->adapter);
        free(a);
    }
    if (regs) {
        fprintf(out, "  %u WSK registration(s) not deregistered\n", regs);
        n += regs;
    }
    return n;
}
