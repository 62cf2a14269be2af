/* Pool (tags, zeroing, refusals, the leak report) and lookaside lists;
 * work items, DPCs and timers: where and at which IRQL they run. */
#include "kittest.h"

#define TAG 'tseT'

static void test_pool(void)
{
    unsigned before = ndkwdk_report_pool(stderr);
    UCHAR *p = ExAllocatePool2(POOL_FLAG_NON_PAGED, 100, TAG);
    REQUIRE(p != NULL);
    int zero = 1;
    for (int i = 0; i < 100; i++)
        zero &= p[i] == 0;
    CHECK(zero);
    CHECK(((ULONG_PTR)p & (MEMORY_ALLOCATION_ALIGNMENT - 1)) == 0);
    CHECK_EQ(ndkwdk_report_pool(stderr), before + 1);
    ExFreePoolWithTag(p, TAG);
    CHECK_EQ(ndkwdk_report_pool(stderr), before);
    /* Exactly one pool type; a zero tag is refused. */
    CHECK(ExAllocatePool2(POOL_FLAG_NON_PAGED | POOL_FLAG_PAGED, 8, TAG) == NULL);
    CHECK(ExAllocatePool2(0, 8, TAG) == NULL);
    CHECK(ExAllocatePool2(POOL_FLAG_PAGED, 8, 0) == NULL);
    p = ExAllocatePoolWithTag(PagedPool, 10, TAG);
    REQUIRE(p != NULL);
    ExFreePool(p);
    p = ExAllocatePoolZero(NonPagedPoolNx, 10, TAG);
    REQUIRE(p != NULL);
    CHECK_EQ(p[9], 0);
    ExFreePoolWithTag(p, TAG);
    p = ExAllocatePoolWithTagPriority(NonPagedPoolNx, 10, TAG, NormalPoolPriority);
    REQUIRE(p != NULL);
    ExFreePool(p);
    CHECK_EQ(ndkwdk_report_pool(stderr), before);
}

static void test_lookaside(void)
{
    NPAGED_LOOKASIDE_LIST n;
    LOOKASIDE_LIST_EX x;
    unsigned before = ndkwdk_report_pool(stderr);
    ExInitializeNPagedLookasideList(&n, NULL, NULL, 0, 48, TAG, 0);
    PVOID a = ExAllocateFromNPagedLookasideList(&n), b = ExAllocateFromNPagedLookasideList(&n);
    CHECK(a && b && a != b);
    CHECK_EQ(ndkwdk_report_pool(stderr), before + 2);
    ExFreeToNPagedLookasideList(&n, a);
    ExFreeToNPagedLookasideList(&n, b);
    ExDeleteNPagedLookasideList(&n);
    CHECK_EQ(ExInitializeLookasideListEx(&x, NULL, NULL, NonPagedPoolNx, 0, 64, TAG, 0), STATUS_SUCCESS);
    a = ExAllocateFromLookasideListEx(&x);
    CHECK(a != NULL);
    ExFreeToLookasideListEx(&x, a);
    ExDeleteLookasideListEx(&x);
    CHECK_EQ(ExInitializeLookasideListEx(&x, NULL, NULL, NonPagedPoolNx, 0x80, 64, TAG, 0),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(ndkwdk_report_pool(stderr), before);
}

static struct {
    KEVENT done;
    LONG irql, in_dpc_args_ok, runs;
    PVOID device, item;
} R;

static VOID work(PDEVICE_OBJECT Device, PVOID Context)
{
    R.irql = KeGetCurrentIrql();
    R.device = Device;
    R.runs += Context == &R;
    KeSetEvent(&R.done, 0, FALSE);
}

static VOID work_ex(PVOID IoObject, PVOID Context, PIO_WORKITEM Item)
{
    R.irql = KeGetCurrentIrql();
    R.device = IoObject;
    R.item = Item;
    R.runs += Context == &R;
    KeSetEvent(&R.done, 0, FALSE);
}

static VOID dpc(PKDPC Dpc, PVOID Context, PVOID A1, PVOID A2)
{
    (void)Dpc;
    R.irql = KeGetCurrentIrql();
    R.in_dpc_args_ok = Context == &R && A1 == (PVOID)1 && A2 == (PVOID)2;
    InterlockedIncrement(&R.runs);
    KeSetEvent(&R.done, 0, FALSE);
}

static VOID timer_dpc(PKDPC Dpc, PVOID Context, PVOID A1, PVOID A2)
{
    (void)Dpc, (void)Context, (void)A1, (void)A2;
    R.irql = KeGetCurrentIrql();
    if (InterlockedIncrement(&R.runs) == 3)
        KeSetEvent(&R.done, 0, FALSE);
}

static void test_work_items(void)
{
    DRIVER_OBJECT drv;
    PDEVICE_OBJECT dev;
    LARGE_INTEGER wait = kt_ms(5000);
    RtlZeroMemory(&drv, sizeof drv);
    REQUIRE(IoCreateDevice(&drv, 16, NULL, FILE_DEVICE_UNKNOWN, 0, FALSE, &dev) == STATUS_SUCCESS);
    CHECK(drv.DeviceObject == dev && dev->DeviceExtension != NULL);
    PIO_WORKITEM w = IoAllocateWorkItem(dev);
    REQUIRE(w != NULL);
    KeInitializeEvent(&R.done, NotificationEvent, FALSE);
    R.runs = 0;
    R.irql = -1;
    IoQueueWorkItem(w, work, DelayedWorkQueue, &R);
    CHECK_EQ(KeWaitForSingleObject(&R.done, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK_EQ(R.irql, PASSIVE_LEVEL);
    CHECK(R.device == dev);
    KeClearEvent(&R.done);
    IoQueueWorkItemEx(w, work_ex, CriticalWorkQueue, &R);
    CHECK_EQ(KeWaitForSingleObject(&R.done, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK(R.item == w);
    CHECK_EQ(R.runs, 2);
    /* A caller-allocated work item. */
    PIO_WORKITEM own = ExAllocatePool2(POOL_FLAG_NON_PAGED, IoSizeofWorkItem(), TAG);
    REQUIRE(own != NULL);
    IoInitializeWorkItem(dev, own);
    KeClearEvent(&R.done);
    IoQueueWorkItem(own, work, DelayedWorkQueue, &R);
    CHECK_EQ(KeWaitForSingleObject(&R.done, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    /* Dequeued before its routine ran: it may be reused or freed now. */
    IoUninitializeWorkItem(own);
    ExFreePoolWithTag(own, TAG);
    IoFreeWorkItem(w);
    IoDeleteDevice(dev);
    CHECK(drv.DeviceObject == NULL);
}

static void test_dpcs_and_timers(void)
{
    KDPC d;
    KTIMER t;
    LARGE_INTEGER wait = kt_ms(5000), due = kt_ms(10), zero = kt_ms(0);
    KeInitializeEvent(&R.done, NotificationEvent, FALSE);
    R.runs = 0;
    KeInitializeDpc(&d, dpc, &R);
    CHECK(KeInsertQueueDpc(&d, (PVOID)1, (PVOID)2));
    CHECK_EQ(KeWaitForSingleObject(&R.done, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    KeFlushQueuedDpcs();
    CHECK_EQ(R.irql, DISPATCH_LEVEL);
    CHECK(R.in_dpc_args_ok);
    CHECK_EQ(R.runs, 1);
    CHECK(!KeRemoveQueueDpc(&d));

    /* A periodic timer with a DPC, waited on as a dispatcher object. */
    KeInitializeEvent(&R.done, NotificationEvent, FALSE);
    R.runs = 0;
    KeInitializeDpc(&d, timer_dpc, &R);
    KeInitializeTimerEx(&t, NotificationTimer);
    CHECK(!KeReadStateTimer(&t));
    CHECK(!KeSetTimerEx(&t, due, 5, &d));
    CHECK_EQ(KeWaitForSingleObject(&t, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK_EQ(KeWaitForSingleObject(&R.done, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK(KeCancelTimer(&t));
    CHECK(!KeCancelTimer(&t));
    KeFlushQueuedDpcs();
    CHECK(R.runs >= 3);
    CHECK_EQ(R.irql, DISPATCH_LEVEL);
    /* A one-shot synchronization timer: one wait consumes it. */
    KeInitializeTimerEx(&t, SynchronizationTimer);
    KeSetTimer(&t, due, NULL);
    CHECK_EQ(KeWaitForSingleObject(&t, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK_EQ(KeWaitForSingleObject(&t, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK(!KeCancelTimer(&t));
    CHECK_EQ(ndkwdk_busy(NULL, 0), 0);
}

int main(void)
{
    kt_start();
    RUN(test_pool);
    RUN(test_lookaside);
    RUN(test_work_items);
    RUN(test_dpcs_and_timers);
    return tl_finish();
}
