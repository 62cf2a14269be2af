/* Spin locks (plain and in-stack queued), fast and guarded mutexes, push
 * locks, rundown protection, interlocked operations and lists, SLISTs. */
#include "kittest.h"

#define ROUNDS 20000

static struct shared {
    KSPIN_LOCK spin;
    FAST_MUTEX mutex;
    EX_PUSH_LOCK push;
    LONG plain; /* changed only under the lock being tested */
    LONG which;
    KEVENT start;
} S;

static VOID hammer(PVOID ctx)
{
    (void)ctx;
    KeWaitForSingleObject(&S.start, Executive, KernelMode, FALSE, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        KIRQL old;
        KLOCK_QUEUE_HANDLE q;
        switch (S.which) {
        case 0:
            KeAcquireSpinLock(&S.spin, &old);
            S.plain++;
            KeReleaseSpinLock(&S.spin, old);
            break;
        case 1:
            KeAcquireInStackQueuedSpinLock(&S.spin, &q);
            S.plain++;
            KeReleaseInStackQueuedSpinLock(&q);
            break;
        case 2:
            ExAcquireFastMutex(&S.mutex);
            S.plain++;
            ExReleaseFastMutex(&S.mutex);
            break;
        default:
            ExAcquirePushLockExclusive(&S.push);
            S.plain++;
            ExReleasePushLockExclusive(&S.push);
            break;
        }
    }
    PsTerminateSystemThread(STATUS_SUCCESS);
}

/* Two system threads add ROUNDS each under the lock: no update is lost. */
static void run_two(LONG which)
{
    HANDLE h[2];
    PVOID o[2];
    LARGE_INTEGER wait = kt_ms(20000);
    S.which = which;
    S.plain = 0;
    KeInitializeEvent(&S.start, NotificationEvent, FALSE);
    for (int i = 0; i < 2; i++) {
        REQUIRE(PsCreateSystemThread(&h[i], THREAD_ALL_ACCESS, NULL, NULL, NULL, hammer, NULL) == 0);
        REQUIRE(ObReferenceObjectByHandle(h[i], SYNCHRONIZE, NULL, KernelMode, &o[i], NULL) == 0);
    }
    KeSetEvent(&S.start, 0, FALSE);
    CHECK_EQ(KeWaitForMultipleObjects(2, o, WaitAll, Executive, KernelMode, FALSE, &wait, NULL),
             STATUS_SUCCESS);
    for (int i = 0; i < 2; i++) {
        ObDereferenceObject(o[i]);
        ZwClose(h[i]);
    }
    CHECK_EQ(S.plain, 2 * ROUNDS);
}

static void test_spin_lock(void)
{
    KIRQL old;
    KeInitializeSpinLock(&S.spin);
    KeAcquireSpinLock(&S.spin, &old);
    CHECK_EQ(KeGetCurrentIrql(), DISPATCH_LEVEL);
    CHECK(!KeTestSpinLock(&S.spin));
    KeReleaseSpinLock(&S.spin, old);
    CHECK_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    CHECK(KeTestSpinLock(&S.spin));
    old = KeRaiseIrqlToDpcLevel();
    CHECK(KeTryToAcquireSpinLockAtDpcLevel(&S.spin));
    KeReleaseSpinLockFromDpcLevel(&S.spin);
    KeAcquireSpinLockAtDpcLevel(&S.spin);
    KeReleaseSpinLockFromDpcLevel(&S.spin);
    KeLowerIrql(old);
    run_two(0);
    run_two(1);
}

static void test_mutexes(void)
{
    KGUARDED_MUTEX g;
    ExInitializeFastMutex(&S.mutex);
    ExAcquireFastMutex(&S.mutex);
    CHECK_EQ(KeGetCurrentIrql(), APC_LEVEL);
    ExReleaseFastMutex(&S.mutex);
    CHECK_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    CHECK(ExTryToAcquireFastMutex(&S.mutex));
    ExReleaseFastMutex(&S.mutex);
    KeInitializeGuardedMutex(&g);
    KeAcquireGuardedMutex(&g);
    CHECK(!KeTryToAcquireGuardedMutex(&g) || (KeReleaseGuardedMutex(&g), 0));
    KeReleaseGuardedMutex(&g);
    run_two(2);
    ExInitializePushLock(&S.push);
    ExAcquirePushLockShared(&S.push);
    ExAcquirePushLockShared(&S.push);
    ExReleasePushLockShared(&S.push);
    ExReleasePushLockShared(&S.push);
    run_two(3);
}

static void test_rundown(void)
{
    EX_RUNDOWN_REF r;
    ExInitializeRundownProtection(&r);
    CHECK(ExAcquireRundownProtection(&r));
    CHECK(ExAcquireRundownProtectionEx(&r, 2));
    ExReleaseRundownProtectionEx(&r, 2);
    ExReleaseRundownProtection(&r);
    ExWaitForRundownProtectionRelease(&r); /* none held: returns */
    CHECK(!ExAcquireRundownProtection(&r));
    ExReInitializeRundownProtection(&r);
    CHECK(ExAcquireRundownProtection(&r));
    ExReleaseRundownProtection(&r);
    ExRundownCompleted(&r);
    CHECK(!ExAcquireRundownProtection(&r));
}

static void test_interlocked(void)
{
    LONG v = 5;
    LONG64 w = 1;
    PVOID p = NULL;
    CHECK_EQ(InterlockedIncrement(&v), 6);
    CHECK_EQ(InterlockedDecrement(&v), 5);
    CHECK_EQ(InterlockedExchange(&v, 9), 5);
    CHECK_EQ(InterlockedCompareExchange(&v, 1, 8), 9); /* no swap */
    CHECK_EQ(InterlockedCompareExchange(&v, 1, 9), 9);
    CHECK_EQ(v, 1);
    CHECK_EQ(InterlockedExchangeAdd(&v, 4), 1);
    CHECK_EQ(InterlockedAdd(&v, 4), 9);
    CHECK_EQ(InterlockedOr(&v, 6), 9);
    CHECK_EQ(InterlockedAnd(&v, 3), 15);
    CHECK_EQ(InterlockedCompareExchange64(&w, 7, 1), 1);
    CHECK_EQ(InterlockedIncrement64(&w), 8);
    CHECK(InterlockedCompareExchangePointer(&p, &v, NULL) == NULL);
    CHECK(InterlockedExchangePointer(&p, NULL) == &v);
}

typedef struct {
    SLIST_ENTRY s;
    LIST_ENTRY l;
    int n;
} NODE;

static void test_lists(void)
{
    SLIST_HEADER h;
    NODE n[3] = {{.n = 0}, {.n = 1}, {.n = 2}};
    InitializeSListHead(&h);
    CHECK(InterlockedPopEntrySList(&h) == NULL);
    CHECK(InterlockedPushEntrySList(&h, &n[0].s) == NULL);
    CHECK(InterlockedPushEntrySList(&h, &n[1].s) == &n[0].s);
    CHECK(ExInterlockedPushEntrySList(&h, &n[2].s, NULL) == &n[1].s);
    CHECK_EQ(ExQueryDepthSList(&h), 3);
    CHECK(FirstEntrySList(&h) == &n[2].s);
    CHECK(InterlockedPopEntrySList(&h) == &n[2].s);
    CHECK_EQ(ExQueryDepthSList(&h), 2);
    CHECK(InterlockedFlushSList(&h) == &n[1].s);
    CHECK_EQ(ExQueryDepthSList(&h), 0);

    LIST_ENTRY head;
    KSPIN_LOCK lock;
    KeInitializeSpinLock(&lock);
    InitializeListHead(&head);
    CHECK(ExInterlockedInsertTailList(&head, &n[0].l, &lock) == NULL);
    CHECK(ExInterlockedInsertTailList(&head, &n[1].l, &lock) == &n[0].l);
    CHECK(ExInterlockedInsertHeadList(&head, &n[2].l, &lock) == &n[0].l);
    PLIST_ENTRY e = ExInterlockedRemoveHeadList(&head, &lock);
    CHECK_EQ(CONTAINING_RECORD(e, NODE, l)->n, 2);
    CHECK_EQ(CONTAINING_RECORD(RemoveTailList(&head), NODE, l)->n, 1);
    CHECK(RemoveEntryList(&n[0].l)); /* TRUE: the list is empty now */
    CHECK(IsListEmpty(&head));
    CHECK(ExInterlockedRemoveHeadList(&head, &lock) == NULL);
    CHECK_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

int main(void)
{
    kt_start();
    RUN(test_spin_lock);
    RUN(test_mutexes);
    RUN(test_rundown);
    RUN(test_interlocked);
    RUN(test_lists);
    return tl_finish();
}
