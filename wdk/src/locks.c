/* Spin locks (also in-stack queued), fast and guarded mutexes, push locks
 * and rundown protection. A spin lock holds its owner's token, so taking
 * a lock twice or releasing one not held is reported as Windows' bug
 * check. The blocking locks wait on the dispatcher (dispatcher.c). */
#include <sched.h>

#include "kit.h"

static __thread char owner_token;

static ULONG_PTR self_token(void)
{
    return (ULONG_PTR)&owner_token;
}

static void spin_take(PKSPIN_LOCK l, const void *site)
{
    ULONG_PTR me = self_token();
    if (__atomic_load_n(l, __ATOMIC_RELAXED) == me)
        kit_bugcheck(BC_SPIN_LOCK_ALREADY_OWNED, (ULONG_PTR)l, 0, 0, 0, site,
                     "spin lock %p acquired again by its owner", (void *)l);
    for (;;) {
        ULONG_PTR expected = 0;
        if (__atomic_compare_exchange_n(l, &expected, me, false, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return;
        sched_yield(); /* the holder may share our CPU */
    }
}

static void spin_drop(PKSPIN_LOCK l, const void *site)
{
    if (__atomic_load_n(l, __ATOMIC_RELAXED) != self_token())
        kit_bugcheck(BC_SPIN_LOCK_NOT_OWNED, (ULONG_PTR)l, 0, 0, 0, site,
                     "spin lock %p released by a thread that does not hold it", (void *)l);
    __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

static void need_dispatch(const char *routine, const void *site)
{
    KIRQL irql = kit_irql();
    if (irql < DISPATCH_LEVEL)
        kit_bugcheck(BC_IRQL_NOT_GREATER_OR_EQUAL, irql, DISPATCH_LEVEL, 0, 0, site,
                     "%s at IRQL %u: the caller must be at DISPATCH_LEVEL", routine, irql);
}

static KIRQL raise_to_dispatch(const char *routine, const void *site)
{
    KIRQL old = kit_irql();
    if (old > DISPATCH_LEVEL)
        kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, 0, old, 0, (ULONG_PTR)site, site,
                     "%s at IRQL %u", routine, old);
    kit_tls.irql = DISPATCH_LEVEL;
    return old;
}

static void lower_to(KIRQL irql, const char *routine, const void *site)
{
    if (irql > kit_irql())
        kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, kit_irql(), irql, 0, (ULONG_PTR)site, site,
                     "%s to IRQL %u from the lower IRQL %u", routine, irql, kit_irql());
    kit_tls.irql = irql;
}

/* The raising acquire and the lowering release (KeAcquireSpinLock,
 * KeReleaseSpinLock and their ForDpc and in-stack queued forms). */
static KIRQL spin_acquire(PKSPIN_LOCK l, const char *routine, const void *site)
{
    KIRQL old = raise_to_dispatch(routine, site);
    spin_take(l, site);
    return old;
}

static void spin_release(PKSPIN_LOCK l, KIRQL irql, const char *routine, const void *site)
{
    spin_drop(l, site);
    lower_to(irql, routine, site);
}

VOID KeInitializeSpinLock(PKSPIN_LOCK SpinLock)
{
    *SpinLock = 0;
}

KIRQL KeAcquireSpinLockRaiseToDpc(PKSPIN_LOCK SpinLock)
{
    kit_touch();
    return spin_acquire(SpinLock, "KeAcquireSpinLock", KIT_CALLER);
}

VOID KeReleaseSpinLock(PKSPIN_LOCK SpinLock, KIRQL NewIrql)
{
    kit_touch();
    spin_release(SpinLock, NewIrql, "KeReleaseSpinLock", KIT_CALLER);
}

VOID KeAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock)
{
    kit_touch();
    need_dispatch("KeAcquireSpinLockAtDpcLevel", KIT_CALLER);
    spin_take(SpinLock, KIT_CALLER);
}

VOID KeReleaseSpinLockFromDpcLevel(PKSPIN_LOCK SpinLock)
{
    kit_touch();
    spin_drop(SpinLock, KIT_CALLER);
}

BOOLEAN KeTryToAcquireSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock)
{
    kit_touch();
    need_dispatch("KeTryToAcquireSpinLockAtDpcLevel", KIT_CALLER);
    ULONG_PTR expected = 0;
    return __atomic_compare_exchange_n(SpinLock, &expected, self_token(), false,
                                       __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

BOOLEAN KeTestSpinLock(PKSPIN_LOCK SpinLock)
{
    return __atomic_load_n(SpinLock, __ATOMIC_RELAXED) == 0;
}

KIRQL KeAcquireSpinLockForDpc(PKSPIN_LOCK SpinLock)
{
    kit_touch();
    return spin_acquire(SpinLock, "KeAcquireSpinLockForDpc", KIT_CALLER);
}

VOID KeReleaseSpinLockForDpc(PKSPIN_LOCK SpinLock, KIRQL OldIrql)
{
    kit_touch();
    spin_release(SpinLock, OldIrql, "KeReleaseSpinLockForDpc", KIT_CALLER);
}

/* In-stack queued spin locks: the lock itself is the same spin lock; the
 * handle records it (and the IRQL to return to). */
static void queued_record(PKSPIN_LOCK lock, PKLOCK_QUEUE_HANDLE h)
{
    h->LockQueue.Lock = lock;
    h->LockQueue.Next = NULL;
}

VOID KeAcquireInStackQueuedSpinLock(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    LockHandle->OldIrql = spin_acquire(SpinLock, "KeAcquireInStackQueuedSpinLock", KIT_CALLER);
    queued_record(SpinLock, LockHandle);
}

VOID KeReleaseInStackQueuedSpinLock(PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    spin_release(LockHandle->LockQueue.Lock, LockHandle->OldIrql, "KeReleaseInStackQueuedSpinLock",
                 KIT_CALLER);
}

VOID KeAcquireInStackQueuedSpinLockAtDpcLevel(PKSPIN_LOCK SpinLock,
                                              PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    need_dispatch("KeAcquireInStackQueuedSpinLockAtDpcLevel", KIT_CALLER);
    spin_take(SpinLock, KIT_CALLER);
    queued_record(SpinLock, LockHandle);
    LockHandle->OldIrql = DISPATCH_LEVEL;
}

VOID KeReleaseInStackQueuedSpinLockFromDpcLevel(PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    spin_drop(LockHandle->LockQueue.Lock, KIT_CALLER);
}

VOID KeAcquireInStackQueuedSpinLockForDpc(PKSPIN_LOCK SpinLock, PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    LockHandle->OldIrql =
        spin_acquire(SpinLock, "KeAcquireInStackQueuedSpinLockForDpc", KIT_CALLER);
    queued_record(SpinLock, LockHandle);
}

VOID KeReleaseInStackQueuedSpinLockForDpc(PKLOCK_QUEUE_HANDLE LockHandle)
{
    kit_touch();
    spin_release(LockHandle->LockQueue.Lock, LockHandle->OldIrql, "KeReleaseInStackQueuedSpinLockForDpc",
                 KIT_CALLER);
}

/* ---- fast and guarded mutexes ---- */
static bool mutex_free(void *arg)
{
    return ((PFAST_MUTEX)arg)->Count == 1;
}

static void mutex_take(PFAST_MUTEX m, bool raise, const char *routine, const void *site)
{
    kit_touch();
    kit_require_irql(APC_LEVEL, routine, site);
    pthread_mutex_lock(&kit_disp_lock);
    if (m->Owner == (PVOID)self_token()) {
        pthread_mutex_unlock(&kit_disp_lock);
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)m, 0, 0, site,
                     "%s on a mutex its thread already holds (a deadlock)", routine);
    }
    if (!mutex_free(m)) {
        m->Contention++;
        kit_disp_wait(mutex_free, m, NULL, site, routine);
    }
    m->Count = 0;
    m->Owner = (PVOID)self_token();
    pthread_mutex_unlock(&kit_disp_lock);
    if (raise) {
        m->OldIrql = kit_irql();
        kit_tls.irql = APC_LEVEL;
    }
}

static void mutex_drop(PFAST_MUTEX m, bool lower, const char *routine, const void *site)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    if (m->Owner != (PVOID)self_token()) {
        pthread_mutex_unlock(&kit_disp_lock);
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)m, 0, 0, site,
                     "%s on a mutex its thread does not hold", routine);
    }
    KIRQL old = (KIRQL)m->OldIrql;
    m->Owner = NULL;
    m->Count = 1;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
    if (lower)
        kit_tls.irql = old;
}

VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex)
{
    memset(FastMutex, 0, sizeof *FastMutex);
    FastMutex->Count = 1;
}

VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex)
{
    mutex_take(FastMutex, true, "ExAcquireFastMutex", KIT_CALLER);
}

VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex)
{
    mutex_drop(FastMutex, true, "ExReleaseFastMutex", KIT_CALLER);
}

BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex)
{
    kit_touch();
    kit_require_irql(APC_LEVEL, "ExTryToAcquireFastMutex", KIT_CALLER);
    pthread_mutex_lock(&kit_disp_lock);
    bool got = mutex_free(FastMutex);
    if (got) {
        FastMutex->Count = 0;
        FastMutex->Owner = (PVOID)self_token();
    }
    pthread_mutex_unlock(&kit_disp_lock);
    if (got) {
        FastMutex->OldIrql = kit_irql();
        kit_tls.irql = APC_LEVEL;
    }
    return got;
}

VOID ExAcquireFastMutexUnsafe(PFAST_MUTEX FastMutex)
{
    mutex_take(FastMutex, false, "ExAcquireFastMutexUnsafe", KIT_CALLER);
}

VOID ExReleaseFastMutexUnsafe(PFAST_MUTEX FastMutex)
{
    mutex_drop(FastMutex, false, "ExReleaseFastMutexUnsafe", KIT_CALLER);
}

VOID KeInitializeGuardedMutex(PKGUARDED_MUTEX Mutex)
{
    ExInitializeFastMutex(Mutex);
}

VOID KeAcquireGuardedMutex(PKGUARDED_MUTEX Mutex)
{
    mutex_take(Mutex, true, "KeAcquireGuardedMutex", KIT_CALLER);
}

VOID KeReleaseGuardedMutex(PKGUARDED_MUTEX Mutex)
{
    mutex_drop(Mutex, true, "KeReleaseGuardedMutex", KIT_CALLER);
}

BOOLEAN KeTryToAcquireGuardedMutex(PKGUARDED_MUTEX Mutex)
{
    return ExTryToAcquireFastMutex(Mutex);
}

/* ---- push locks: bit 0 exclusive, the rest twice the shared count ---- */
static bool push_free(void *arg)
{
    return *(PEX_PUSH_LOCK)arg == 0;
}

static bool push_not_exclusive(void *arg)
{
    return (*(PEX_PUSH_LOCK)arg & 1) == 0;
}

VOID ExInitializePushLock(PEX_PUSH_LOCK PushLock)
{
    *PushLock = 0;
}

/* Waits until ready(lock) holds, then adds add: 1 for the exclusive
 * owner, 2 for each shared one. */
static void push_take(PEX_PUSH_LOCK lock, bool (*ready)(void *), EX_PUSH_LOCK add,
                      const char *routine, const void *caller)
{
    kit_touch();
    kit_require_irql(APC_LEVEL, routine, caller);
    pthread_mutex_lock(&kit_disp_lock);
    kit_disp_wait(ready, lock, NULL, caller, routine);
    *lock += add;
    pthread_mutex_unlock(&kit_disp_lock);
}

/* The exclusive owner leaves the lock free; a shared one takes its 2 off. */
static void push_drop(PEX_PUSH_LOCK lock, bool exclusive)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    *lock = exclusive ? 0 : *lock - 2;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
}

VOID ExAcquirePushLockExclusiveEx(PEX_PUSH_LOCK PushLock, ULONG Flags)
{
    (void)Flags;
    push_take(PushLock, push_free, 1, "ExAcquirePushLockExclusive", KIT_CALLER);
}

VOID ExReleasePushLockExclusiveEx(PEX_PUSH_LOCK PushLock, ULONG Flags)
{
    (void)Flags;
    push_drop(PushLock, true);
}

VOID ExAcquirePushLockSharedEx(PEX_PUSH_LOCK PushLock, ULONG Flags)
{
    (void)Flags;
    push_take(PushLock, push_not_exclusive, 2, "ExAcquirePushLockShared", KIT_CALLER);
}

VOID ExReleasePushLockSharedEx(PEX_PUSH_LOCK PushLock, ULONG Flags)
{
    (void)Flags;
    push_drop(PushLock, false);
}

/* ---- rundown protection: bit 0 run down, the rest twice the count ---- */
VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    RunRef->Count = 0;
}

VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    pthread_mutex_lock(&kit_disp_lock);
    RunRef->Count = 0;
    pthread_mutex_unlock(&kit_disp_lock);
}

BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    bool ok = (RunRef->Count & 1) == 0;
    if (ok)
        RunRef->Count += 2 * (ULONG_PTR)Count;
    pthread_mutex_unlock(&kit_disp_lock);
    return ok;
}

BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    return ExAcquireRundownProtectionEx(RunRef, 1);
}

VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count)
{
    kit_touch();
    pthread_mutex_lock(&kit_disp_lock);
    RunRef->Count -= 2 * (ULONG_PTR)Count;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
}

VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef)
{
    ExReleaseRundownProtectionEx(RunRef, 1);
}

static bool rundown_drained(void *arg)
{
    return ((PEX_RUNDOWN_REF)arg)->Count == 1;
}

VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef)
{
    kit_touch();
    kit_require_irql(APC_LEVEL, "ExWaitForRundownProtectionRelease", KIT_CALLER);
    pthread_mutex_lock(&kit_disp_lock);
    RunRef->Count |= 1;
    kit_disp_wait(rundown_drained, RunRef, NULL, KIT_CALLER, "ExWaitForRundownProtectionRelease");
    pthread_mutex_unlock(&kit_disp_lock);
}

VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef)
{
    pthread_mutex_lock(&kit_disp_lock);
    RunRef->Count = 1;
    pthread_mutex_unlock(&kit_disp_lock);
}
