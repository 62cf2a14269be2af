/* Events, semaphores and waits (KeWaitForSingleObject,
 * KeWaitForMultipleObjects with timeouts), thread objects, delays. */
#include "kittest.h"

static void test_events(void)
{
    KEVENT n, s;
    LARGE_INTEGER zero = kt_ms(0);
    KeInitializeEvent(&n, NotificationEvent, FALSE);
    KeInitializeEvent(&s, SynchronizationEvent, TRUE);
    CHECK_EQ(KeReadStateEvent(&n), 0);
    CHECK_EQ(KeWaitForSingleObject(&n, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK_EQ(KeSetEvent(&n, IO_NO_INCREMENT, FALSE), 0);
    CHECK_EQ(KeSetEvent(&n, IO_NO_INCREMENT, FALSE), 1);
    /* A notification event stays signalled for every waiter. */
    CHECK_EQ(KeWaitForSingleObject(&n, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ(KeWaitForSingleObject(&n, Executive, KernelMode, FALSE, NULL), STATUS_SUCCESS);
    CHECK_EQ(KeResetEvent(&n), 1);
    CHECK_EQ(KeReadStateEvent(&n), 0);
    /* A synchronization event releases one wait and resets. */
    CHECK_EQ(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ(KeReadStateEvent(&s), 0);
    CHECK_EQ(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    KeSetEvent(&s, IO_NO_INCREMENT, FALSE);
    KeClearEvent(&s);
    CHECK_EQ(KeReadStateEvent(&s), 0);
}

static void test_timeouts(void)
{
    KEVENT e;
    KeInitializeEvent(&e, NotificationEvent, FALSE);
    LARGE_INTEGER rel = kt_ms(30);
    ULONGLONG t0 = KeQueryInterruptTime();
    CHECK_EQ(KeWaitForSingleObject(&e, Executive, KernelMode, FALSE, &rel), STATUS_TIMEOUT);
    CHECK(KeQueryInterruptTime() - t0 >= 30 * 10000ULL);
    /* Absolute: system time now + 20 ms. */
    LARGE_INTEGER abs;
    KeQuerySystemTime(&abs);
    abs.QuadPart += 20 * 10000;
    t0 = KeQueryInterruptTime();
    CHECK_EQ(KeWaitForSingleObject(&e, Executive, KernelMode, FALSE, &abs), STATUS_TIMEOUT);
    CHECK(KeQueryInterruptTime() - t0 >= 15 * 10000ULL);
    LARGE_INTEGER d = kt_ms(10);
    t0 = KeQueryInterruptTime();
    CHECK_EQ(KeDelayExecutionThread(KernelMode, FALSE, &d), STATUS_SUCCESS);
    CHECK(KeQueryInterruptTime() - t0 >= 10 * 10000ULL);
}

static void test_multiple(void)
{
    KEVENT a, b, c;
    PVOID objs[3] = {&a, &b, &c};
    LARGE_INTEGER zero = kt_ms(0), shortwait = kt_ms(20);
    KeInitializeEvent(&a, NotificationEvent, FALSE);
    KeInitializeEvent(&b, SynchronizationEvent, FALSE);
    KeInitializeEvent(&c, NotificationEvent, FALSE);
    CHECK_EQ(KeWaitForMultipleObjects(3, objs, WaitAny, Executive, KernelMode, FALSE, &shortwait, NULL),
             STATUS_TIMEOUT);
    KeSetEvent(&b, 0, FALSE);
    CHECK_EQ(KeWaitForMultipleObjects(3, objs, WaitAny, Executive, KernelMode, FALSE, &zero, NULL),
             STATUS_WAIT_1);
    CHECK_EQ(KeReadStateEvent(&b), 0); /* consumed */
    KeSetEvent(&a, 0, FALSE);
    KeSetEvent(&c, 0, FALSE);
    CHECK_EQ(KeWaitForMultipleObjects(3, objs, WaitAll, Executive, KernelMode, FALSE, &zero, NULL),
             STATUS_TIMEOUT);
    KeSetEvent(&b, 0, FALSE);
    CHECK_EQ(KeWaitForMultipleObjects(3, objs, WaitAll, Executive, KernelMode, FALSE, &zero, NULL),
             STATUS_SUCCESS);
    CHECK_EQ(KeReadStateEvent(&b), 0);
    CHECK_EQ(KeReadStateEvent(&a), 1);
}

static void test_semaphore(void)
{
    KSEMAPHORE s;
    LARGE_INTEGER zero = kt_ms(0);
    KeInitializeSemaphore(&s, 1, 3);
    CHECK_EQ(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_SUCCESS);
    CHECK_EQ(KeWaitForSingleObject(&s, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    CHECK_EQ(KeReleaseSemaphore(&s, 0, 2, FALSE), 0);
    CHECK_EQ(KeReadStateSemaphore(&s), 2);
}

struct handoff {
    KEVENT go, done;
    LONG seen_irql;
};

static VOID worker(PVOID ctx)
{
    struct handoff *h = ctx;
    h->seen_irql = KeGetCurrentIrql();
    KeWaitForSingleObject(&h->go, Executive, KernelMode, FALSE, NULL);
    KeSetEvent(&h->done, 0, FALSE);
    PsTerminateSystemThread(STATUS_SUCCESS);
}

static void test_thread_object(void)
{
    struct handoff h;
    HANDLE th;
    PVOID obj;
    LARGE_INTEGER wait = kt_ms(5000), zero = kt_ms(0);
    KeInitializeEvent(&h.go, NotificationEvent, FALSE);
    KeInitializeEvent(&h.done, NotificationEvent, FALSE);
    h.seen_irql = -1;
    REQUIRE(PsCreateSystemThread(&th, THREAD_ALL_ACCESS, NULL, NULL, NULL, worker, &h) == STATUS_SUCCESS);
    REQUIRE(ObReferenceObjectByHandle(th, SYNCHRONIZE, *PsThreadType, KernelMode, &obj, NULL) ==
            STATUS_SUCCESS);
    CHECK_EQ(KeWaitForSingleObject(obj, Executive, KernelMode, FALSE, &zero), STATUS_TIMEOUT);
    KeSetEvent(&h.go, 0, FALSE);
    CHECK_EQ(KeWaitForSingleObject(obj, Executive, KernelMode, FALSE, &wait), STATUS_SUCCESS);
    CHECK_EQ(KeReadStateEvent(&h.done), 1);
    CHECK_EQ(h.seen_irql, PASSIVE_LEVEL);
    ObDereferenceObject(obj);
    CHECK_EQ(ZwClose(th), STATUS_SUCCESS);
    CHECK_EQ(ZwClose(th), STATUS_INVALID_HANDLE);
    CHECK_EQ(ndkwdk_report_pending(stderr), 0);
}

static void test_irql(void)
{
    KIRQL old;
    CHECK_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
    KeRaiseIrql(DISPATCH_LEVEL, &old);
    CHECK_EQ(old, PASSIVE_LEVEL);
    CHECK_EQ(KeGetCurrentIrql(), DISPATCH_LEVEL);
    KeLowerIrql(old);
    CHECK_EQ(KeRaiseIrqlToDpcLevel(), PASSIVE_LEVEL);
    KeLowerIrql(PASSIVE_LEVEL);
    CHECK_EQ(KeGetCurrentIrql(), PASSIVE_LEVEL);
}

static void test_time(void)
{
    LARGE_INTEGER st, freq, a, b;
    KeQuerySystemTime(&st);
    /* 100 ns units since 1601: now is after 2020 (132223104000000000). */
    CHECK(st.QuadPart > 132223104000000000LL);
    a = KeQueryPerformanceCounter(&freq);
    CHECK_EQ(freq.QuadPart, 10000000);
    KeStallExecutionProcessor(100);
    b = KeQueryPerformanceCounter(NULL);
    CHECK(b.QuadPart - a.QuadPart >= 1000);
    CHECK_EQ(KeQueryTimeIncrement(), 156250);
    CHECK(KeQueryActiveProcessorCount(NULL) >= 1);
}

int main(void)
{
    kt_start();
    RUN(test_events);
    RUN(test_timeouts);
    RUN(test_multiple);
    RUN(test_semaphore);
    RUN(test_thread_object);
    RUN(test_irql);
    RUN(test_time);
    return tl_finish();
}
