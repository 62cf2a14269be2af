/*
 * every_name.c - compiled, not run: uses every routine, macro and type of the
 * WDK kit's routine table (docs/porting.md) with only the flags of
 * `pkg-config --cflags libndk-wdk` and -Wall -Wextra -Werror, including the
 * headers by the spellings Windows sources use
 * (tests/install/install_wdk_consumer.sh).
 */
#include <Ntddk.h>
#include <ntddk.h>
#include <wdm.h>
#include <Wdm.h>
#include <ntdef.h>
#include <ntstatus.h>
#include <ntifs.h>
#include <Ndis.h>
#include <ndis.h>
#include <wsk.h>
#include <Wsk.h>
#include <wskndk.h>
#include <netioapi.h>
#include <NetIoApi.h>
#include <wdmsec.h>
#include <ntstrsafe.h>
#include <Ntstrsafe.h>
#include <ip2string.h>
#include <sal.h>
#include <ndkpi.h>
#include <ndkinfo.h>
#include <ndk/ndkpi.h>

#pragma warning(push)
#pragma warning(disable : 4201)
#pragma prefast(suppress : 28175, "compiled by GCC")
#pragma code_seg("PAGE")
#pragma alloc_text(PAGE, EveryName)
#pragma warning(pop)

C_ASSERT(sizeof(KEVENT) == 0x18);
C_ASSERT(sizeof(KDPC) == 0x40);
C_ASSERT(sizeof(KTIMER) == 0x40);
C_ASSERT(sizeof(MDL) == 0x30);
C_ASSERT(FIELD_OFFSET(MDL, ByteOffset) == 0x2C);
C_ASSERT(sizeof(WCHAR) == 2 && sizeof(L"ab") == 6);
C_ASSERT(sizeof(ULONG) == 4 && sizeof(LONG64) == 8 && sizeof(ULONG_PTR) == 8);
C_ASSERT('kdnS' == 0x6B646E53);

typedef struct _ITEM {
    ULONG Value;
    LIST_ENTRY Link;
    SINGLE_LIST_ENTRY SLink;
} ITEM;

static DRIVER_UNLOAD EveryUnload;
static KDEFERRED_ROUTINE EveryDpc;
static IO_WORKITEM_ROUTINE EveryWork;
static IO_WORKITEM_ROUTINE_EX EveryWorkEx;
static KSTART_ROUTINE EveryThread;
void EveryName(void);

_Use_decl_annotations_ static VOID EveryUnload(PDRIVER_OBJECT DriverObject)
{
    UNREFERENCED_PARAMETER(DriverObject);
}

_Function_class_(KDEFERRED_ROUTINE) _IRQL_requires_(DISPATCH_LEVEL) _IRQL_requires_same_
static VOID EveryDpc(_In_ PKDPC Dpc, _In_opt_ PVOID Context, _In_opt_ PVOID A1, _In_opt_ PVOID A2)
{
    UNREFERENCED_PARAMETER(Dpc);
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(A1);
    UNREFERENCED_PARAMETER(A2);
}

static VOID EveryWork(PDEVICE_OBJECT DeviceObject, PVOID Context)
{
    UNREFERENCED_PARAMETER(DeviceObject);
    UNREFERENCED_PARAMETER(Context);
}

static VOID EveryWorkEx(PVOID IoObject, PVOID Context, PIO_WORKITEM IoWorkItem)
{
    UNREFERENCED_PARAMETER(IoObject);
    UNREFERENCED_PARAMETER(Context);
    UNREFERENCED_PARAMETER(IoWorkItem);
}

static VOID EveryThread(PVOID Context)
{
    UNREFERENCED_PARAMETER(Context);
}

static FORCEINLINE ULONG Twice(ULONG x)
{
    return 2 * x;
}

__declspec(noinline) _Must_inspect_result_ _Success_(return != 0)
static BOOLEAN Checked(_Out_writes_bytes_(Size) PVOID Buffer, _In_ SIZE_T Size)
{
    RtlZeroMemory(Buffer, Size);
    return TRUE;
}

/* Every routine of the kit, referenced; the macros and inline helpers,
 * used. */
void EveryName(void)
{
    (void)ConvertInterfaceAliasToLuid;
    (void)ConvertInterfaceIndexToLuid;
    (void)ConvertInterfaceLuidToAlias;
    (void)ConvertInterfaceLuidToIndex;
    (void)ConvertInterfaceLuidToNameA;
    (void)ConvertInterfaceLuidToNameW;
    (void)ConvertInterfaceNameToLuidA;
    (void)ConvertInterfaceNameToLuidW;
    (void)DbgBreakPoint;
    (void)DbgPrint;
    (void)DbgPrintEx;
    (void)ExAcquireFastMutex;
    (void)ExAcquireFastMutexUnsafe;
    (void)ExAcquirePushLockExclusiveEx;
    (void)ExAcquirePushLockSharedEx;
    (void)ExAcquireRundownProtection;
    (void)ExAcquireRundownProtectionEx;
    (void)ExAllocateFromLookasideListEx;
    (void)ExAllocateFromNPagedLookasideList;
    (void)ExAllocateFromPagedLookasideList;
    (void)ExAllocatePool;
    (void)ExAllocatePool2;
    (void)ExAllocatePoolUninitialized;
    (void)ExAllocatePoolWithQuotaTag;
    (void)ExAllocatePoolWithTag;
    (void)ExAllocatePoolWithTagPriority;
    (void)ExAllocatePoolZero;
    (void)ExDeleteLookasideListEx;
    (void)ExDeleteNPagedLookasideList;
    (void)ExDeletePagedLookasideList;
    (void)ExFlushLookasideListEx;
    (void)ExFreePool;
    (void)ExFreePoolWithTag;
    (void)ExFreeToLookasideListEx;
    (void)ExFreeToNPagedLookasideList;
    (void)ExFreeToPagedLookasideList;
    (void)ExInitializeFastMutex;
    (void)ExInitializeLookasideListEx;
    (void)ExInitializeNPagedLookasideList;
    (void)ExInitializePagedLookasideList;
    (void)ExInitializePushLock;
    (void)ExInitializeRundownProtection;
    (void)ExInterlockedFlushSList;
    (void)ExInterlockedInsertHeadList;
    (void)ExInterlockedInsertTailList;
    (void)ExInterlockedPopEntryList;
    (void)ExInterlockedPopEntrySList;
    (void)ExInterlockedPushEntryList;
    (void)ExInterlockedPushEntrySList;
    (void)ExInterlockedRemoveHeadList;
    (void)ExQueryDepthSList;
    (void)ExReInitializeRundownProtection;
    (void)ExReleaseFastMutex;
    (void)ExReleaseFastMutexUnsafe;
    (void)ExReleasePushLockExclusiveEx;
    (void)ExReleasePushLockSharedEx;
    (void)ExReleaseRundownProtection;
    (void)ExReleaseRundownProtectionEx;
    (void)ExRundownCompleted;
    (void)ExSystemTimeToLocalTime;
    (void)ExTryToAcquireFastMutex;
    (void)ExWaitForRundownProtectionRelease;
    (void)FirstEntrySList;
    (void)GetIfEntry2;
    (void)InitializeSListHead;
    (void)InterlockedFlushSList;
    (void)InterlockedPopEntrySList;
    (void)InterlockedPushEntrySList;
    (void)IoAllocateMdl;
    (void)IoAllocateWorkItem;
    (void)IoBuildPartialMdl;
    (void)IoCreateDevice;
    (void)IoCreateDeviceSecure;
    (void)IoCreateSymbolicLink;
    (void)IoDeleteDevice;
    (void)IoDeleteSymbolicLink;
    (void)IoFreeMdl;
    (void)IoFreeWorkItem;
    (void)IoInitializeWorkItem;
    (void)IoQueueWorkItem;
    (void)IoQueueWorkItemEx;
    (void)IoSizeofWorkItem;
    (void)IoUninitializeWorkItem;
    (void)KeAcquireGuardedMutex;
    (void)KeAcquireInStackQueuedSpinLock;
    (void)KeAcquireInStackQueuedSpinLockAtDpcLevel;
    (void)KeAcquireInStackQueuedSpinLockForDpc;
    (void)KeAcquireSpinLockAtDpcLevel;
    (void)KeAcquireSpinLockForDpc;
    (void)KeAcquireSpinLockRaiseToDpc;
    (void)KeAreApcsDisabled;
    (void)KeBugCheck;
    (void)KeBugCheckEx;
    (void)KeCancelTimer;
    (void)KeClearEvent;
    (void)KeDelayExecutionThread;
    (void)KeEnterCriticalRegion;
    (void)KeEnterGuardedRegion;
    (void)KeFlushQueuedDpcs;
    (void)KeGetCurrentIrql;
    (void)KeGetCurrentProcessorNumber;
    (void)KeGetCurrentProcessorNumberEx;
    (void)KeGetCurrentThread;
    (void)KeInitializeDpc;
    (void)KeInitializeEvent;
    (void)KeInitializeGuardedMutex;
    (void)KeInitializeSemaphore;
    (void)KeInitializeSpinLock;
    (void)KeInitializeThreadedDpc;
    (void)KeInitializeTimer;
    (void)KeInitializeTimerEx;
    (void)KeInsertQueueDpc;
    (void)KeLeaveCriticalRegion;
    (void)KeLeaveGuardedRegion;
    (void)KeLowerIrql;
    (void)KeQueryActiveGroupCount;
    (void)KeQueryActiveProcessorCount;
    (void)KeQueryActiveProcessorCountEx;
    (void)KeQueryInterruptTime;
    (void)KeQueryInterruptTimePrecise;
    (void)KeQueryMaximumProcessorCount;
    (void)KeQueryMaximumProcessorCountEx;
    (void)KeQueryPerformanceCounter;
    (void)KeQueryPriorityThread;
    (void)KeQuerySystemTime;
    (void)KeQuerySystemTimePrecise;
    (void)KeQueryTickCount;
    (void)KeQueryTimeIncrement;
    (void)KeQueryUnbiasedInterruptTime;
    (void)KeRaiseIrqlToDpcLevel;
    (void)KeReadStateEvent;
    (void)KeReadStateSemaphore;
    (void)KeReadStateTimer;
    (void)KeReleaseGuardedMutex;
    (void)KeReleaseInStackQueuedSpinLock;
    (void)KeReleaseInStackQueuedSpinLockForDpc;
    (void)KeReleaseInStackQueuedSpinLockFromDpcLevel;
    (void)KeReleaseSemaphore;
    (void)KeReleaseSpinLock;
    (void)KeReleaseSpinLockForDpc;
    (void)KeReleaseSpinLockFromDpcLevel;
    (void)KeRemoveQueueDpc;
    (void)KeResetEvent;
    (void)KeSetEvent;
    (void)KeSetImportanceDpc;
    (void)KeSetPriorityThread;
    (void)KeSetTargetProcessorDpc;
    (void)KeSetTargetProcessorDpcEx;
    (void)KeSetTimer;
    (void)KeSetTimerEx;
    (void)KeStallExecutionProcessor;
    (void)KeTestSpinLock;
    (void)KeTryToAcquireGuardedMutex;
    (void)KeTryToAcquireSpinLockAtDpcLevel;
    (void)KeWaitForMultipleObjects;
    (void)KeWaitForSingleObject;
    (void)KfRaiseIrql;
    (void)MmBuildMdlForNonPagedPool;
    (void)MmGetPhysicalAddress;
    (void)MmMapLockedPagesSpecifyCache;
    (void)MmProbeAndLockPages;
    (void)MmSizeOfMdl;
    (void)MmUnlockPages;
    (void)MmUnmapLockedPages;
    (void)ObReferenceObjectByHandle;
    (void)ObfDereferenceObject;
    (void)ObfReferenceObject;
    (void)PsCreateSystemThread;
    (void)PsGetCurrentProcess;
    (void)PsGetCurrentProcessId;
    (void)PsGetCurrentThread;
    (void)PsGetCurrentThreadId;
    (void)PsIsSystemThread;
    (void)PsTerminateSystemThread;
    (void)RtlAnsiStringToUnicodeString;
    (void)RtlAppendUnicodeStringToString;
    (void)RtlAppendUnicodeToString;
    (void)RtlCompareMemory;
    (void)RtlCompareUnicodeString;
    (void)RtlCopyUnicodeString;
    (void)RtlEqualUnicodeString;
    (void)RtlFreeAnsiString;
    (void)RtlFreeUnicodeString;
    (void)RtlInitAnsiString;
    (void)RtlInitString;
    (void)RtlInitUnicodeString;
    (void)RtlInitUnicodeStringEx;
    (void)RtlIntegerToUnicodeString;
    (void)RtlIpv4AddressToStringA;
    (void)RtlIpv4AddressToStringExA;
    (void)RtlIpv4AddressToStringExW;
    (void)RtlIpv4AddressToStringW;
    (void)RtlIpv4StringToAddressA;
    (void)RtlIpv4StringToAddressExA;
    (void)RtlIpv4StringToAddressExW;
    (void)RtlIpv4StringToAddressW;
    (void)RtlIpv6AddressToStringA;
    (void)RtlIpv6AddressToStringExA;
    (void)RtlIpv6AddressToStringExW;
    (void)RtlIpv6AddressToStringW;
    (void)RtlIpv6StringToAddressA;
    (void)RtlIpv6StringToAddressExA;
    (void)RtlIpv6StringToAddressExW;
    (void)RtlIpv6StringToAddressW;
    (void)RtlSecureZeroMemory;
    (void)RtlStringCbCatA;
    (void)RtlStringCbCatW;
    (void)RtlStringCbCopyA;
    (void)RtlStringCbCopyNA;
    (void)RtlStringCbCopyNW;
    (void)RtlStringCbCopyW;
    (void)RtlStringCbLengthA;
    (void)RtlStringCbLengthW;
    (void)RtlStringCbPrintfA;
    (void)RtlStringCbPrintfW;
    (void)RtlStringCbVPrintfA;
    (void)RtlStringCbVPrintfW;
    (void)RtlStringCchCatA;
    (void)RtlStringCchCatW;
    (void)RtlStringCchCopyA;
    (void)RtlStringCchCopyNA;
    (void)RtlStringCchCopyNW;
    (void)RtlStringCchCopyW;
    (void)RtlStringCchLengthA;
    (void)RtlStringCchLengthW;
    (void)RtlStringCchPrintfA;
    (void)RtlStringCchPrintfW;
    (void)RtlStringCchVPrintfA;
    (void)RtlStringCchVPrintfW;
    (void)RtlUnicodeStringToAnsiString;
    (void)RtlUnicodeStringToInteger;
    (void)WskCaptureProviderNPI;
    (void)WskDeregister;
    (void)WskRegister;
    (void)WskReleaseProviderNPI;
    (void)ZwClose;
    (void)ZwOpenKey;
    (void)ZwQueryValueKey;
    (void)vDbgPrintEx;

    (void)EveryUnload;
    (void)EveryDpc;
    (void)EveryWork;
    (void)EveryWorkEx;
    (void)EveryThread;

    KIRQL irql;
    KSPIN_LOCK lock;
    KLOCK_QUEUE_HANDLE qh;
    LIST_ENTRY head;
    SINGLE_LIST_ENTRY shead;
    ITEM item;
    LONG v = 0;
    LONG64 v64 = 0;
    PVOID ptr = NULL;
    UCHAR buffer[64];
    UNICODE_STRING name = RTL_CONSTANT_STRING(L"name");
    DECLARE_CONST_UNICODE_STRING(other, L"other");
    DECLARE_UNICODE_STRING_SIZE(sized, 16);
    OBJECT_ATTRIBUTES oa;
    MDL *mdl = NULL;
    PHYSICAL_ADDRESS pa;
    EX_PUSH_LOCK pushLock = 0;

    PAGED_CODE();
    KeRaiseIrql(DISPATCH_LEVEL, &irql);
    KeLowerIrql(irql);
    KeAcquireSpinLock(&lock, &irql);
    KeReleaseSpinLock(&lock, irql);
    KeAcquireInStackQueuedSpinLock(&lock, &qh);
    KeReleaseInStackQueuedSpinLock(&qh);
    InitializeListHead(&head);
    InsertTailList(&head, &item.Link);
    InsertHeadList(&head, &item.Link);
    (void)RemoveEntryList(&item.Link);
    if (!IsListEmpty(&head))
        (void)RemoveHeadList(&head);
    if (!IsListEmpty(&head))
        (void)RemoveTailList(&head);
    AppendTailList(&head, &item.Link);
    shead.Next = NULL;
    PushEntryList(&shead, &item.SLink);
    (void)PopEntryList(&shead);
    (void)CONTAINING_RECORD(&item.Link, ITEM, Link);
    v = InterlockedIncrement(&v) + InterlockedDecrement(&v) + InterlockedExchange(&v, 3) +
        InterlockedCompareExchange(&v, 4, 3) + InterlockedExchangeAdd(&v, 2) + InterlockedAdd(&v, 1) +
        InterlockedOr(&v, 1) + InterlockedAnd(&v, 3) + InterlockedXor(&v, 1);
    v64 = InterlockedIncrement64(&v64) + InterlockedCompareExchange64(&v64, 1, 0) +
          InterlockedExchange64(&v64, 5) + InterlockedExchangeAdd64(&v64, 1);
    ptr = InterlockedExchangePointer(&ptr, NULL);
    ptr = InterlockedCompareExchangePointer(&ptr, NULL, NULL);
    KeMemoryBarrier();
    RtlCopyMemory(buffer, buffer + 32, 16);
    RtlMoveMemory(buffer, buffer + 1, 16);
    RtlFillMemory(buffer, sizeof buffer, 0xAA);
    RtlZeroMemory(buffer, sizeof buffer);
    v += RtlEqualMemory(buffer, buffer + 32, 8);
    InitializeObjectAttributes(&oa, &name, OBJ_KERNEL_HANDLE | OBJ_CASE_INSENSITIVE, NULL, NULL);
    v += (LONG)Twice((ULONG)v) + (LONG)(other.Length + sized.MaximumLength);
    v += (LONG)FIELD_OFFSET(ITEM, Link) + (LONG)RTL_NUMBER_OF(buffer) + (LONG)ARRAYSIZE(buffer);
    v += (LONG)(BYTE_OFFSET(buffer) + ADDRESS_AND_SIZE_TO_SPAN_PAGES(buffer, 100) + ROUND_TO_PAGES(1) +
                BYTES_TO_PAGES(5000)) + (PAGE_ALIGN(buffer) != NULL);
    if (mdl) {
        PPFN_NUMBER pfn = MmGetMdlPfnArray(mdl);
        MmInitializeMdl(mdl, buffer, sizeof buffer);
        v += (LONG)(MmGetMdlByteCount(mdl) + MmGetMdlByteOffset(mdl) + pfn[0]);
        ptr = MmGetMdlVirtualAddress(mdl);
        ptr = MmGetSystemAddressForMdlSafe(mdl, NormalPagePriority | MdlMappingNoExecute);
        ptr = MmGetMdlBaseVa(mdl);
        MmPrepareMdlForReuse(mdl);
    }
    pa.QuadPart = 0;
    v += (LONG)pa.LowPart + (LONG)ALIGN_UP_BY(v, 8) + (LONG)ALIGN_DOWN_BY(v, 8);
    v += (LONG)NT_SUCCESS(v) + (LONG)NT_ERROR(v) + (LONG)RtlUlongByteSwap(v) + RtlUshortByteSwap(1);
    KdPrint(("v %d %p\n", v, ptr));
    KdPrintEx((DPFLTR_IHVDRIVER_ID, DPFLTR_INFO_LEVEL, "v %d\n", v));
    NT_ASSERT(v != 12345);
    NT_ASSERTMSG("never", v != 12345);
    (void)NT_VERIFY(v != 12345);
    ASSERT(v != 12345);
    __try {
        v += Checked(buffer, sizeof buffer);
    } __except (EXCEPTION_EXECUTE_HANDLER) {
        v = GetExceptionCode();
    }
    v += WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH == 'NDKD';
    v += MAKE_WSK_VERSION(1, 0) + (LONG)sizeof(WSK_PROVIDER_NDK_DISPATCH) + (LONG)sizeof(MIB_IF_ROW2);
    v += (LONG)sizeof(NPAGED_LOOKASIDE_LIST) + (LONG)sizeof(LOOKASIDE_LIST_EX) +
         (LONG)sizeof(FAST_MUTEX) + (LONG)sizeof(EX_PUSH_LOCK) + (LONG)sizeof(EX_RUNDOWN_REF) +
         (LONG)sizeof(SLIST_HEADER) + (LONG)sizeof(KSEMAPHORE) + (LONG)sizeof(SOCKADDR_INET) +
         (LONG)sizeof(NDK_ADAPTER_INFO) + (LONG)sizeof(NET_LUID) + (LONG)sizeof(NDIS_STATUS);
    ExAcquirePushLockExclusive(&pushLock);
    ExReleasePushLockExclusive(&pushLock);
    ExAcquirePushLockShared(&pushLock);
    ExReleasePushLockShared(&pushLock);
    ObDereferenceObject(ptr);
    ObReferenceObject(ptr);
    (void)v;
}
