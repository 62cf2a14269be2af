/* Dispatcher objects (events, semaphores; timers and threads are signalled
 * by dpc.c and thread.c) and the waits on them: KeWaitForSingleObject,
 * KeWaitForMultipleObjects, KeDelayExecutionThread. One lock and one
 * condition variable serve every object: waits are not a hot path. */
#include <errno.h>

#include "kit.h"

pthread_mutex_t kit_disp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t disp_cond;
static pthread_once_t disp_once = PTHREAD_ONCE_INIT;

static void disp_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&disp_cond, &a);
    pthread_condattr_destroy(&a);
}

void kit_disp_changed(void)
{
    pthread_once(&disp_once, disp_init);
    pthread_cond_broadcast(&disp_cond);
}

bool kit_disp_wait(bool (*pred)(void *), void *arg, const struct timespec *deadline,
                   const void *site, const char *what)
{
    pthread_once(&disp_once, disp_init);
    struct kit_thread *self = kit_tls.self;
    if (self) {
        self->wait = deadline ? KIT_WAIT_TIMED : KIT_WAIT_FOREVER;
        self->wait_site = site;
        self->wait_what = what;
    }
    bool ok = true;
    while (!pred(arg)) {
        int rc = deadline ? pthread_cond_timedwait(&disp_cond, &kit_disp_lock, deadline)
                          : pthread_cond_wait(&disp_cond, &kit_disp_lock);
        if (rc == ETIMEDOUT) {
            ok = pred(arg);
            break;
        }
    }
    if (self)
        self->wait = KIT_RUNNING;
    return ok;
}

/* ---- events and semaphores ---- */
VOID KeInitializeEvent(PRKEVENT Event, EVENT_TYPE Type, BOOLEAN State)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    Event->Header.Type = Type == SynchronizationEvent ? NDKWDK_OBJ_EVENT_SYNCHRONIZATION
                                                      : NDKWDK_OBJ_EVENT_NOTIFICATION;
    Event->Header.Size = sizeof(KEVENT) / sizeof(LONG);
    Event->Header.SignalState = State ? 1 : 0;
    InitializeListHead(&Event->Header.WaitListHead);
    pthread_mutex_unlock(&kit_disp_lock);
}

LONG KeSetEvent(PRKEVENT Event, KPRIORITY Increment, BOOLEAN Wait)
{
    (void)Increment, (void)Wait;
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    LONG prev = Event->Header.SignalState;
    Event->Header.SignalState = 1;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
    return prev;
}

VOID KeClearEvent(PRKEVENT Event)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    Event->Header.SignalState = 0;
    pthread_mutex_unlock(&kit_disp_lock);
}

LONG KeResetEvent(PRKEVENT Event)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    LONG prev = Event->Header.SignalState;
    Event->Header.SignalState = 0;
    pthread_mutex_unlock(&kit_disp_lock);
    return prev;
}

/* KeReadStateEvent, KeReadStateSemaphore: the state as it is now. */
static LONG read_state(const DISPATCHER_HEADER *h)
{
    pthread_mutex_lock(&kit_disp_lock);
    LONG s = h->SignalState;
    pthread_mutex_unlock(&kit_disp_lock);
    return s;
}

LONG KeReadStateEvent(PRKEVENT Event)
{
    return read_state(&Event->Header);
}

VOID KeInitializeSemaphore(PRKSEMAPHORE Semaphore, LONG Count, LONG Limit)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    Semaphore->Header.Type = NDKWDK_OBJ_SEMAPHORE;
    Semaphore->Header.SignalState = Count;
    InitializeListHead(&Semaphore->Header.WaitListHead);
    Semaphore->Limit = Limit;
    pthread_mutex_unlock(&kit_disp_lock);
}

LONG KeReleaseSemaphore(PRKSEMAPHORE Semaphore, KPRIORITY Increment, LONG Adjustment,
                        BOOLEAN Wait)
{
    (void)Increment, (void)Wait;
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    LONG prev = Semaphore->Header.SignalState;
    if (Adjustment <= 0 || prev > Semaphore->Limit - Adjustment) {
        pthread_mutex_unlock(&kit_disp_lock);
        /* Windows raises STATUS_SEMAPHORE_LIMIT_EXCEEDED, which a driver
         * does not catch. */
        kit_bugcheck(BC_KMODE_EXCEPTION_NOT_HANDLED, 0xC0000047u, 0, 0, 0, KIT_CALLER,
                     "KeReleaseSemaphore by %d past the limit %d (count %d)", Adjustment,
                     Semaphore->Limit, prev);
    }
    Semaphore->Header.SignalState = prev + Adjustment;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
    return prev;
}

LONG KeReadStateSemaphore(PRKSEMAPHORE Semaphore)
{
    return read_state(&Semaphore->Header);
}

/* ---- waits ---- */
static bool obj_signalled(const DISPATCHER_HEADER *h)
{
    return h->SignalState > 0;
}

/* A satisfied wait consumes what it took: a synchronization event or timer
 * resets, a semaphore count drops. */
static void obj_consume(DISPATCHER_HEADER *h)
{
    switch (h->Type) {
    case NDKWDK_OBJ_EVENT_SYNCHRONIZATION:
    case NDKWDK_OBJ_TIMER_SYNCHRONIZATION:
        h->SignalState = 0;
        break;
    case NDKWDK_OBJ_SEMAPHORE:
        h->SignalState--;
        break;
    default:
        break;
    }
}

struct wait_set {
    ULONG count;
    PVOID *objects;
    WAIT_TYPE type;
    LONG index; /* WaitAny: the object that satisfied the wait */
};

static bool wait_ready(void *arg)
{
    struct wait_set *w = arg;
    if (w->type == WaitAny) {
        for (ULONG i = 0; i < w->count; i++)
            if (obj_signalled(w->objects[i])) {
                w->index = (LONG)i;
                return true;
            }
        return false;
    }
    for (ULONG i = 0; i < w->count; i++)
        if (!obj_signalled(w->objects[i]))
            return false;
    return true;
}

static void wait_check_irql(const LARGE_INTEGER *timeout, const char *routine, const void *site)
{
    KIRQL irql = kit_irql();
    bool blocks = !timeout || timeout->QuadPart != 0;
    if (irql < DISPATCH_LEVEL || (irql == DISPATCH_LEVEL && !blocks))
        return;
    if (kit_tls.in_dpc)
        kit_bugcheck(BC_ATTEMPTED_SWITCH_FROM_DPC, 0, 0, 0, 0, site,
                     "%s with a %s timeout in a DPC routine", routine,
                     timeout ? "non-zero" : "NULL (infinite)");
    kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, 0, irql, 0, (ULONG_PTR)site, site,
                 "%s with a %s timeout at IRQL %u (a wait at DISPATCH_LEVEL needs a zero "
                 "timeout)",
                 routine, timeout ? "non-zero" : "NULL (infinite)", irql);
}

static NTSTATUS wait_objects(struct wait_set *w, const LARGE_INTEGER *timeout, const void *site,
                             const char *routine)
{
    struct timespec deadline;
    bool timed = kit_deadline(timeout, &deadline);
    pthread_mutex_lock(&kit_disp_lock);
    bool ok = wait_ready(w);
    if (!ok && !(timeout && timeout->QuadPart == 0))
        ok = kit_disp_wait(wait_ready, w, timed ? &deadline : NULL, site, routine);
    if (ok) {
        if (w->type == WaitAny)
            obj_consume(w->objects[w->index]);
        else
            for (ULONG i = 0; i < w->count; i++)
                obj_consume(w->objects[i]);
    }
    pthread_mutex_unlock(&kit_disp_lock);
    if (!ok)
        return STATUS_TIMEOUT;
    return w->type == WaitAny ? (NTSTATUS)(STATUS_WAIT_0 + w->index) : STATUS_SUCCESS;
}

NTSTATUS KeWaitForSingleObject(PVOID Object, KWAIT_REASON WaitReason, KPROCESSOR_MODE WaitMode,
                               BOOLEAN Alertable, PLARGE_INTEGER Timeout)
{
    (void)WaitReason, (void)WaitMode, (void)Alertable;
    kit_touch();
    wait_check_irql(Timeout, "KeWaitForSingleObject", KIT_CALLER);
    struct wait_set w = {1, &Object, WaitAny, 0};
    return wait_objects(&w, Timeout, KIT_CALLER, "KeWaitForSingleObject");
}

NTSTATUS KeWaitForMultipleObjects(ULONG Count, PVOID Object[], WAIT_TYPE WaitType,
                                  KWAIT_REASON WaitReason, KPROCESSOR_MODE WaitMode,
                                  BOOLEAN Alertable, PLARGE_INTEGER Timeout,
                                  PKWAIT_BLOCK WaitBlockArray)
{
    (void)WaitReason, (void)WaitMode, (void)Alertable;
    kit_touch();
    wait_check_irql(Timeout, "KeWaitForMultipleObjects", KIT_CALLER);
    if (Count == 0 || Count > MAXIMUM_WAIT_OBJECTS ||
        (Count > THREAD_WAIT_OBJECTS && WaitBlockArray == NULL))
        kit_bugcheck(BC_MAXIMUM_WAIT_OBJECTS_EXCEEDED, Count, 0, 0, 0, KIT_CALLER,
                     "KeWaitForMultipleObjects with %u objects%s", Count,
                     WaitBlockArray ? "" : " and no wait block array");
    struct wait_set w = {Count, Object, WaitType == WaitAll ? WaitAll : WaitAny, 0};
    return wait_objects(&w, Timeout, KIT_CALLER, "KeWaitForMultipleObjects");
}

static bool never(void *arg)
{
    (void)arg;
    return false;
}

NTSTATUS KeDelayExecutionThread(KPROCESSOR_MODE WaitMode, BOOLEAN Alertable,
                                PLARGE_INTEGER Interval)
{
    (void)WaitMode, (void)Alertable;
    kit_touch();
    kit_require_irql(APC_LEVEL, "KeDelayExecutionThread", KIT_CALLER);
    struct timespec deadline;
    if (!Interval)
        return STATUS_INVALID_PARAMETER;
    kit_deadline(Interval, &deadline);
    pthread_mutex_lock(&kit_disp_lock);
    kit_disp_wait(never, NULL, &deadline, KIT_CALLER, "KeDelayExecutionThread");
    pthread_mutex_unlock(&kit_disp_lock);
    return STATUS_SUCCESS;
}
