/* DPCs and timers. One DPC thread runs queued DPCs at DISPATCH_LEVEL, in
 * order, and expires timers: an expired timer is signalled (it is a
 * dispatcher object) and its DPC queued; a periodic one is set again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

static pthread_mutex_t dpc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t dpc_cond;   /* work for the DPC thread */
static pthread_cond_t idle_cond;  /* the DPC queue ran empty */
static PKDPC dpc_head, dpc_tail;  /* linked through DpcListEntry.Next */
static bool dpc_running;
static LIST_ENTRY timers = {&timers, &timers};
static pthread_once_t dpc_once = PTHREAD_ONCE_INIT;
static char queued_mark; /* DpcData of a queued DPC */

static void dpc_thread_start(void);

static void dpc_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&dpc_cond, &a);
    pthread_cond_init(&idle_cond, &a);
    pthread_condattr_destroy(&a);
    dpc_thread_start();
}

void ndkwdk_start(void)
{
    pthread_once(&dpc_once, dpc_init);
}

static bool dpc_enqueue_locked(PKDPC Dpc, PVOID a1, PVOID a2)
{
    if (Dpc->DpcData)
        return false;
    Dpc->SystemArgument1 = a1;
    Dpc->SystemArgument2 = a2;
    Dpc->DpcData = &queued_mark;
    Dpc->DpcListEntry.Next = NULL;
    if (dpc_tail)
        dpc_tail->DpcListEntry.Next = (PSINGLE_LIST_ENTRY)Dpc;
    else
        dpc_head = Dpc;
    dpc_tail = Dpc;
    pthread_cond_signal(&dpc_cond);
    return true;
}

VOID KeInitializeDpc(PRKDPC Dpc, PKDEFERRED_ROUTINE DeferredRoutine, PVOID DeferredContext)
{
    memset(Dpc, 0, sizeof *Dpc);
    Dpc->Type = 19; /* DpcObject */
    Dpc->Importance = MediumImportance;
    Dpc->DeferredRoutine = DeferredRoutine;
    Dpc->DeferredContext = DeferredContext;
}

VOID KeInitializeThreadedDpc(PRKDPC Dpc, PKDEFERRED_ROUTINE DeferredRoutine,
                             PVOID DeferredContext)
{
    /* Threaded DPCs may run at DISPATCH_LEVEL on Windows too; here they do. */
    KeInitializeDpc(Dpc, DeferredRoutine, DeferredContext);
    Dpc->Type = 24; /* ThreadedDpcObject */
}

BOOLEAN KeInsertQueueDpc(PRKDPC Dpc, PVOID SystemArgument1, PVOID SystemArgument2)
{
    kit_touch();
    ndkwdk_start();
    pthread_mutex_lock(&dpc_lock);
    bool queued = dpc_enqueue_locked(Dpc, SystemArgument1, SystemArgument2);
    pthread_mutex_unlock(&dpc_lock);
    return queued;
}

BOOLEAN KeRemoveQueueDpc(PRKDPC Dpc)
{
    kit_touch();
    pthread_mutex_lock(&dpc_lock);
    bool found = false;
    PKDPC prev = NULL;
    for (PKDPC d = dpc_head; d; prev = d, d = (PKDPC)d->DpcListEntry.Next)
        if (d == Dpc) {
            if (prev)
                prev->DpcListEntry.Next = d->DpcListEntry.Next;
            else
                dpc_head = (PKDPC)d->DpcListEntry.Next;
            if (dpc_tail == d)
                dpc_tail = prev;
            d->DpcData = NULL;
            found = true;
            break;
        }
    pthread_mutex_unlock(&dpc_lock);
    return found;
}

VOID KeFlushQueuedDpcs(VOID)
{
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "KeFlushQueuedDpcs", KIT_CALLER);
    pthread_mutex_lock(&dpc_lock);
    while (dpc_head || dpc_running)
        pthread_cond_wait(&idle_cond, &dpc_lock);
    pthread_mutex_unlock(&dpc_lock);
}

VOID KeSetImportanceDpc(PRKDPC Dpc, KDPC_IMPORTANCE Importance)
{
    Dpc->Importance = (UCHAR)Importance;
}

VOID KeSetTargetProcessorDpc(PRKDPC Dpc, CCHAR Number)
{
    Dpc->Number = (USHORT)Number; /* one DPC thread runs them all */
}

NTSTATUS KeSetTargetProcessorDpcEx(PKDPC Dpc, PPROCESSOR_NUMBER ProcNumber)
{
    if (!ProcNumber || ProcNumber->Group != 0)
        return STATUS_INVALID_PARAMETER;
    Dpc->Number = ProcNumber->Number;
    return STATUS_SUCCESS;
}

/* ---- timers: DueTime holds the expiry in interrupt time ---- */
VOID KeInitializeTimerEx(PKTIMER Timer, TIMER_TYPE Type)
{
    memset(Timer, 0, sizeof *Timer);
    Timer->Header.Type = Type == SynchronizationTimer ? NDKWDK_OBJ_TIMER_SYNCHRONIZATION
                                                      : NDKWDK_OBJ_TIMER_NOTIFICATION;
    InitializeListHead(&Timer->Header.WaitListHead);
    InitializeListHead(&Timer->TimerListEntry);
}

VOID KeInitializeTimer(PKTIMER Timer)
{
    KeInitializeTimerEx(Timer, NotificationTimer);
}

static bool timer_remove_locked(PKTIMER Timer)
{
    if (!Timer->Processor)
        return false;
    RemoveEntryList(&Timer->TimerListEntry);
    InitializeListHead(&Timer->TimerListEntry);
    Timer->Processor = 0;
    return true;
}

BOOLEAN KeSetTimerEx(PKTIMER Timer, LARGE_INTEGER DueTime, LONG Period, PKDPC Dpc)
{
    kit_touch();
    ndkwdk_start();
    uint64_t now = kit_mono_100ns(), rel;
    if (DueTime.QuadPart < 0)
        rel = (uint64_t)(-(DueTime.QuadPart + 1)) + 1;
    else {
        int64_t sys = kit_system_time();
        rel = DueTime.QuadPart > sys ? (uint64_t)(DueTime.QuadPart - sys) : 0;
    }
    pthread_mutex_lock(&dpc_lock);
    bool was_set = timer_remove_locked(Timer);
    pthread_mutex_lock(&kit_disp_lock);
    Timer->Header.SignalState = 0;
    pthread_mutex_unlock(&kit_disp_lock);
    Timer->DueTime.QuadPart = now + rel;
    Timer->Period = Period > 0 ? Period : 0;
    Timer->Dpc = Dpc;
    Timer->Processor = 1; /* set */
    InsertTailList(&timers, &Timer->TimerListEntry);
    pthread_cond_signal(&dpc_cond);
    pthread_mutex_unlock(&dpc_lock);
    return was_set;
}

BOOLEAN KeSetTimer(PKTIMER Timer, LARGE_INTEGER DueTime, PKDPC Dpc)
{
    return KeSetTimerEx(Timer, DueTime, 0, Dpc);
}

BOOLEAN KeCancelTimer(PKTIMER Timer)
{
    kit_touch();
    pthread_mutex_lock(&dpc_lock);
    bool was_set = timer_remove_locked(Timer);
    pthread_mutex_unlock(&dpc_lock);
    return was_set;
}

BOOLEAN KeReadStateTimer(PKTIMER Timer)
{
    pthread_mutex_lock(&kit_disp_lock);
    bool s = Timer->Header.SignalState > 0;
    pthread_mutex_unlock(&kit_disp_lock);
    return s;
}

/* Expires due timers; returns the next expiry (0: none). dpc_lock held. */
static uint64_t expire_timers_locked(void)
{
    uint64_t now = kit_mono_100ns(), next = 0;
    PLIST_ENTRY e = timers.Flink;
    while (e != &timers) {
        PKTIMER t = CONTAINING_RECORD(e, KTIMER, TimerListEntry);
        e = e->Flink;
        if (t->DueTime.QuadPart <= now) {
            pthread_mutex_lock(&kit_disp_lock);
            t->Header.SignalState = 1;
            kit_disp_changed();
            pthread_mutex_unlock(&kit_disp_lock);
            if (t->Dpc)
                dpc_enqueue_locked(t->Dpc, (PVOID)(uintptr_t)kit_system_time(), NULL);
            if (t->Period) {
                t->DueTime.QuadPart = now + (uint64_t)t->Period * 10000u;
            } else {
                timer_remove_locked(t);
                continue;
            }
        }
        if (!next || t->DueTime.QuadPart < next)
            next = t->DueTime.QuadPart;
    }
    return next;
}

static void run_dpc(PKDPC d, PVOID a1, PVOID a2)
{
    char where[160];
    ndkwdk_describe_address((const void *)d->DeferredRoutine, where, sizeof where);
    kit_set_role("DPC %s", where);
    kit_tls.irql = DISPATCH_LEVEL;
    kit_tls.in_dpc = true;
    d->DeferredRoutine(d, d->DeferredContext, a1, a2);
    kit_tls.in_dpc = false;
    if (kit_irql() != DISPATCH_LEVEL)
        kit_bugcheck(BC_IRQL_UNEXPECTED_VALUE, ((ULONG_PTR)kit_irql() << 16) | (DISPATCH_LEVEL << 8),
                     (ULONG_PTR)d->DeferredRoutine, 0, 0, (const void *)d->DeferredRoutine,
                     "DPC routine returned at IRQL %u", kit_irql());
    kit_set_role("DPC thread (idle)");
}

static void *dpc_thread_main(void *arg)
{
    (void)arg;
    struct kit_thread *t = kit_thread_new("DPC thread");
    kit_adopt_thread(t, "DPC thread (idle)");
    kit_tls.irql = DISPATCH_LEVEL;
    pthread_mutex_lock(&dpc_lock);
    for (;;) {
        uint64_t next = expire_timers_locked();
        PKDPC d = dpc_head;
        if (d) {
            dpc_head = (PKDPC)d->DpcListEntry.Next;
            if (!dpc_head)
                dpc_tail = NULL;
            PVOID a1 = d->SystemArgument1, a2 = d->SystemArgument2;
            d->DpcData = NULL; /* may be queued again from its own routine */
            dpc_running = true;
            pthread_mutex_unlock(&dpc_lock);
            run_dpc(d, a1, a2);
            pthread_mutex_lock(&dpc_lock);
            dpc_running = false;
            continue;
        }
        pthread_cond_broadcast(&idle_cond);
        if (next) {
            uint64_t rel = next - kit_mono_100ns();
            struct timespec deadline;
            kit_deadline_after_ms((unsigned)(rel / 10000u) + 1, &deadline);
            pthread_cond_timedwait(&dpc_cond, &dpc_lock, &deadline);
        } else {
            pthread_cond_wait(&dpc_cond, &dpc_lock);
        }
    }
    return NULL;
}

static void dpc_thread_start(void)
{
    pthread_t tid;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&tid, &a, dpc_thread_main, NULL) != 0) {
        fprintf(stderr, "ndkwdk: cannot start the DPC thread\n");
        abort();
    }
    pthread_attr_destroy(&a);
}

void kit_dpc_check_free(const void *p, size_t size, const void *site)
{
    const char *lo = p, *hi = lo + size;
    PKTIMER hit = NULL;
    pthread_mutex_lock(&dpc_lock);
    for (PLIST_ENTRY e = timers.Flink; e != &timers && !hit; e = e->Flink) {
        PKTIMER t = CONTAINING_RECORD(e, KTIMER, TimerListEntry);
        if ((const char *)t >= lo && (const char *)t < hi)
            hit = t;
    }
    pthread_mutex_unlock(&dpc_lock);
    if (hit)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x15, (ULONG_PTR)hit, 0, (ULONG_PTR)p,
                     site, "pool freed with an active timer in it (timer %p, block %p)",
                     (void *)hit, p);
}

unsigned kit_dpcs_busy(char *why, size_t len)
{
    unsigned n = 0;
    pthread_mutex_lock(&dpc_lock);
    for (PKDPC d = dpc_head; d; d = (PKDPC)d->DpcListEntry.Next)
        n++;
    n += dpc_running;
    for (PLIST_ENTRY e = timers.Flink; e != &timers; e = e->Flink)
        n++;
    pthread_mutex_unlock(&dpc_lock);
    if (n && why && len)
        snprintf(why, len, "%u DPC(s) queued or running, or timer(s) set", n);
    return n;
}

unsigned kit_dpcs_report(FILE *out)
{
    unsigned n = 0;
    char where[160];
    pthread_mutex_lock(&dpc_lock);
    for (PKDPC d = dpc_head; d; d = (PKDPC)d->DpcListEntry.Next, n++) {
        ndkwdk_describe_address((const void *)d->DeferredRoutine, where, sizeof where);
        fprintf(out, "  DPC still queued: %s\n", where);
    }
    for (PLIST_ENTRY e = timers.Flink; e != &timers; e = e->Flink, n++) {
        PKTIMER t = CONTAINING_RECORD(e, KTIMER, TimerListEntry);
        if (t->Dpc)
            ndkwdk_describe_address((const void *)t->Dpc->DeferredRoutine, where, sizeof where);
        fprintf(out, "  timer %p still set%s%s%s\n", (void *)t, t->Period ? " (periodic)" : "",
                t->Dpc ? ", DPC " : "", t->Dpc ? where : "");
    }
    pthread_mutex_unlock(&dpc_lock);
    return n;
}
