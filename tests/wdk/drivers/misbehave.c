/*
 * A driver that misbehaves in the way its registry path names, so the
 * tests can check what ndkhost reports (tests/wdk/host_case.sh):
 *   ok             does its work in a work item, a DPC, a timer and a
 *                  system thread, cleans up: a clean run
 *   fail-entry     DriverEntry fails with STATUS_INSUFFICIENT_RESOURCES
 *   crash-workitem a work item writes through a NULL structure pointer
 *   never-unloads  DriverUnload waits for an event nobody sets
 *   no-unload      sets no DriverUnload
 *   leak-pool      leaves a pool block (tag 'kaeL') allocated
 *   wait-dispatch  waits with a timeout while holding a spin lock
 *   wait-dpc       waits with a timeout in a DPC routine
 *   paged-dispatch calls a pageable routine from a DPC
 *   paged-pool-dpc allocates paged pool in a DPC
 *   left-timer     unloads with a periodic timer still set
 *   free-timer     frees the pool that holds a set timer
 *   assert         fails an NT_ASSERT in DriverEntry
 *   ndk-misuse     calls NdkGetConnectionData on a connector that never
 *                  connected (rule N1, docs/rules.md), then cleans up: one
 *                  finding of libndk's NDK verifier
 */
#include <ntddk.h>
#include <wsk.h>
#include <wskndk.h>
#include <ndkpi.h>

DRIVER_INITIALIZE DriverEntry;
static DRIVER_UNLOAD Unload;
static DRIVER_UNLOAD UnloadForever;
static IO_WORKITEM_ROUTINE WorkRoutine;
static KDEFERRED_ROUTINE DpcRoutine;
static KSTART_ROUTINE ThreadRoutine;

#define TAG 'bsiM' /* shown as "Misb" */

typedef struct _STATE {
    PDEVICE_OBJECT Device;
    PIO_WORKITEM WorkItem;
    KDPC Dpc;
    KTIMER Timer;
    KEVENT Done;
    KEVENT Never;
    KSPIN_LOCK Lock;
    HANDLE Thread;
    LONG Steps;
    ULONG Case;
} STATE;

enum { C_OK, C_FAIL_ENTRY, C_CRASH_WORKITEM, C_NEVER_UNLOADS, C_NO_UNLOAD, C_LEAK_POOL,
       C_WAIT_DISPATCH, C_WAIT_DPC, C_PAGED_DISPATCH, C_PAGED_POOL_DPC, C_LEFT_TIMER, C_NTASSERT, C_FREE_TIMER,
       C_NDK_MISUSE };

static STATE *g;
static KTIMER LeftTimer; /* a driver global, so it outlives the state */

static ULONG CaseOf(PUNICODE_STRING Path)
{
    static const PCWSTR names[] = {L"ok", L"fail-entry", L"crash-workitem", L"never-unloads",
                                   L"no-unload", L"leak-pool", L"wait-dispatch", L"wait-dpc",
                                   L"paged-dispatch", L"paged-pool-dpc", L"left-timer", L"assert",
                                   L"free-timer", L"ndk-misuse"};
    for (ULONG i = 0; i < RTL_NUMBER_OF(names); i++) {
        UNICODE_STRING n;
        RtlInitUnicodeString(&n, names[i]);
        if (RtlEqualUnicodeString(&n, Path, TRUE))
            return i;
    }
    return C_OK;
}

static VOID PageableRoutine(VOID)
{
    PAGED_CODE();
}

static VOID DpcRoutine(PKDPC Dpc, PVOID Context, PVOID Arg1, PVOID Arg2)
{
    STATE *s = Context;
    LARGE_INTEGER t;
    UNREFERENCED_PARAMETER(Dpc);
    UNREFERENCED_PARAMETER(Arg1);
    UNREFERENCED_PARAMETER(Arg2);
    NT_ASSERT(KeGetCurrentIrql() == DISPATCH_LEVEL);
    switch (s->Case) {
    case C_WAIT_DPC:
        t.QuadPart = -10000; /* 1 ms */
        KeWaitForSingleObject(&s->Never, Executive, KernelMode, FALSE, &t);
        break;
    case C_PAGED_DISPATCH:
        PageableRoutine();
        break;
    case C_PAGED_POOL_DPC:
        ExFreePool(ExAllocatePool2(POOL_FLAG_PAGED, 64, TAG));
        break;
    default:
        break;
    }
    if (InterlockedIncrement(&s->Steps) == 3)
        KeSetEvent(&s->Done, IO_NO_INCREMENT, FALSE);
}

static VOID WorkRoutine(PDEVICE_OBJECT Device, PVOID Context)
{
    STATE *s = Context;
    KIRQL old;
    LARGE_INTEGER t;
    UNREFERENCED_PARAMETER(Device);
    NT_ASSERT(KeGetCurrentIrql() == PASSIVE_LEVEL);
    if (s->Case == C_CRASH_WORKITEM) {
        /* An unmapped address in the first page, as a NULL structure
         * pointer's member would be. */
        volatile ULONG_PTR nowhere = 0x10;
        *(volatile LONG *)nowhere = 1;
    }
    if (s->Case == C_WAIT_DISPATCH) {
        KeAcquireSpinLock(&s->Lock, &old);
        t.QuadPart = -10000;
        KeWaitForSingleObject(&s->Never, Executive, KernelMode, FALSE, &t);
        KeReleaseSpinLock(&s->Lock, old);
    }
    KeInsertQueueDpc(&s->Dpc, NULL, NULL);
    if (InterlockedIncrement(&s->Steps) == 3)
        KeSetEvent(&s->Done, IO_NO_INCREMENT, FALSE);
}

static VOID ThreadRoutine(PVOID Context)
{
    STATE *s = Context;
    LARGE_INTEGER due;
    due.QuadPart = -20 * 10000LL; /* 20 ms */
    KeSetTimerEx(&s->Timer, due, s->Case == C_FREE_TIMER ? 50 : 0, NULL);
    if (s->Case == C_LEFT_TIMER) {
        KeInitializeTimer(&LeftTimer);
        KeSetTimerEx(&LeftTimer, due, 50, NULL);
    }
    KeWaitForSingleObject(&s->Timer, Executive, KernelMode, FALSE, NULL);
    IoQueueWorkItem(s->WorkItem, WorkRoutine, DelayedWorkQueue, s);
    if (InterlockedIncrement(&s->Steps) == 3)
        KeSetEvent(&s->Done, IO_NO_INCREMENT, FALSE);
    PsTerminateSystemThread(STATUS_SUCCESS);
}

static VOID Cleanup(PDRIVER_OBJECT Driver)
{
    PVOID thread;
    UNREFERENCED_PARAMETER(Driver);
    KeWaitForSingleObject(&g->Done, Executive, KernelMode, FALSE, NULL);
    if (NT_SUCCESS(ObReferenceObjectByHandle(g->Thread, SYNCHRONIZE, *PsThreadType, KernelMode,
                                             &thread, NULL))) {
        KeWaitForSingleObject(thread, Executive, KernelMode, FALSE, NULL);
        ObDereferenceObject(thread);
    }
    ZwClose(g->Thread);
    KeFlushQueuedDpcs();
    IoFreeWorkItem(g->WorkItem);
    IoDeleteDevice(g->Device);
    if (g->Case != C_LEAK_POOL)
        ExFreePoolWithTag(g, TAG);
}

static VOID Unload(PDRIVER_OBJECT Driver)
{
    Cleanup(Driver);
}

static VOID UnloadForever(PDRIVER_OBJECT Driver)
{
    KeWaitForSingleObject(&g->Never, Executive, KernelMode, FALSE, NULL);
    Cleanup(Driver);
}

/* Opens the loopback interface's NDK adapter (interface index 1) through
 * WSK, breaks rule N1 once, and closes everything again. */
static NTSTATUS NdkMisuse(VOID)
{
    static const WSK_CLIENT_DISPATCH dispatch = {MAKE_WSK_VERSION(1, 0), 0, NULL};
    WSK_CLIENT_NPI npi = {NULL, &dispatch};
    WSK_REGISTRATION reg;
    WSK_PROVIDER_NPI provider;
    WSK_PROVIDER_NDK_DISPATCH ndk;
    SIZE_T got = 0;
    NDK_ADAPTER *adapter = NULL;
    NDK_CONNECTOR *connector = NULL;
    NTSTATUS status = WskRegister(&npi, &reg);
    if (!NT_SUCCESS(status))
        return status;
    status = WskCaptureProviderNPI(&reg, WSK_INFINITE_WAIT, &provider);
    if (NT_SUCCESS(status)) {
        status = provider.Dispatch->WskControlClient(provider.Client,
                                                     WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0, NULL,
                                                     sizeof ndk, &ndk, &got, NULL);
        if (NT_SUCCESS(status))
            status = ndk.WskOpenNdkAdapter(provider.Client, (NDK_VERSION){2, 1}, 1, &adapter);
        if (NT_SUCCESS(status)) {
            status = adapter->Dispatch->NdkCreateConnector(adapter, NULL, NULL, &connector);
            if (NT_SUCCESS(status)) {
                ULONG len = 0;
                connector->Dispatch->NdkGetConnectionData(connector, NULL, NULL, NULL, &len);
                connector->Dispatch->NdkCloseConnector(&connector->Header, NULL, NULL);
            }
            ndk.WskCloseNdkAdapter(provider.Client, adapter);
        }
        WskReleaseProviderNPI(&reg);
    }
    WskDeregister(&reg);
    return status;
}

NTSTATUS DriverEntry(PDRIVER_OBJECT DriverObject, PUNICODE_STRING RegistryPath)
{
    NTSTATUS status;
    ULONG which = CaseOf(RegistryPath);
    if (which == C_FAIL_ENTRY)
        return STATUS_INSUFFICIENT_RESOURCES;
    NT_ASSERT(which != C_NTASSERT);
    if (which == C_NDK_MISUSE) {
        status = NdkMisuse();
        if (!NT_SUCCESS(status))
            return status;
    }
    g = ExAllocatePool2(POOL_FLAG_NON_PAGED, sizeof *g, TAG);
    if (!g)
        return STATUS_INSUFFICIENT_RESOURCES;
    g->Case = which;
    status = IoCreateDevice(DriverObject, 0, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &g->Device);
    if (!NT_SUCCESS(status)) {
        ExFreePoolWithTag(g, TAG);
        return status;
    }
    g->WorkItem = IoAllocateWorkItem(g->Device);
    KeInitializeDpc(&g->Dpc, DpcRoutine, g);
    KeInitializeTimerEx(&g->Timer, NotificationTimer);
    KeInitializeEvent(&g->Done, NotificationEvent, FALSE);
    KeInitializeEvent(&g->Never, NotificationEvent, FALSE);
    KeInitializeSpinLock(&g->Lock);
    status = PsCreateSystemThread(&g->Thread, THREAD_ALL_ACCESS, NULL, NULL, NULL, ThreadRoutine, g);
    if (!NT_SUCCESS(status)) {
        IoFreeWorkItem(g->WorkItem);
        IoDeleteDevice(g->Device);
        ExFreePoolWithTag(g, TAG);
        return status;
    }
    DriverObject->DriverUnload = which == C_NEVER_UNLOADS ? UnloadForever
                                 : which == C_NO_UNLOAD   ? NULL
                                                          : Unload;
    return STATUS_SUCCESS;
}
