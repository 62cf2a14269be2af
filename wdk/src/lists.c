/* Interlocked lists (a caller's spin lock around a list), sequenced
 * singly linked lists (SLIST: a lock bit in the header), and the memory
 * routines that are functions on Windows. */
#include <sched.h>

#include "kit.h"

static KIRQL list_lock(PKSPIN_LOCK Lock)
{
    return KeAcquireSpinLockRaiseToDpc(Lock);
}

PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry,
                                        PKSPIN_LOCK Lock)
{
    KIRQL old = list_lock(Lock);
    PLIST_ENTRY first = IsListEmpty(ListHead) ? NULL : ListHead->Flink;
    InsertHeadList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return first;
}

PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry,
                                        PKSPIN_LOCK Lock)
{
    KIRQL old = list_lock(Lock);
    PLIST_ENTRY last = IsListEmpty(ListHead) ? NULL : ListHead->Blink;
    InsertTailList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return last;
}

PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock)
{
    KIRQL old = list_lock(Lock);
    PLIST_ENTRY e = IsListEmpty(ListHead) ? NULL : RemoveHeadList(ListHead);
    KeReleaseSpinLock(Lock, old);
    return e;
}

PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead,
                                              PSINGLE_LIST_ENTRY ListEntry, PKSPIN_LOCK Lock)
{
    KIRQL old = list_lock(Lock);
    PSINGLE_LIST_ENTRY first = ListHead->Next;
    PushEntryList(ListHead, ListEntry);
    KeReleaseSpinLock(Lock, old);
    return first;
}

PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead, PKSPIN_LOCK Lock)
{
    KIRQL old = list_lock(Lock);
    PSINGLE_LIST_ENTRY e = PopEntryList(ListHead);
    KeReleaseSpinLock(Lock, old);
    return e;
}

/* ---- SLIST: Alignment = depth << 16 | lock bit; Region = first entry ---- */
#define SL_LOCK 1ULL
#define SL_DEPTH_ONE (1ULL << 16)

static void sl_lock(PSLIST_HEADER h)
{
    for (;;) {
        ULONGLONG v = __atomic_load_n(&h->Alignment, __ATOMIC_RELAXED);
        if (!(v & SL_LOCK) && __atomic_compare_exchange_n(&h->Alignment, &v, v | SL_LOCK, false,
                                                          __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            return;
        sched_yield();
    }
}

static void sl_unlock(PSLIST_HEADER h, ULONGLONG alignment)
{
    __atomic_store_n(&h->Alignment, alignment & ~SL_LOCK, __ATOMIC_RELEASE);
}

VOID InitializeSListHead(PSLIST_HEADER SListHead)
{
    SListHead->Alignment = 0;
    SListHead->Region = 0;
}

PSLIST_ENTRY InterlockedPushEntrySList(PSLIST_HEADER ListHead, PSLIST_ENTRY ListEntry)
{
    sl_lock(ListHead);
    PSLIST_ENTRY first = (PSLIST_ENTRY)(uintptr_t)ListHead->Region;
    ListEntry->Next = first;
    ListHead->Region = (ULONGLONG)(uintptr_t)ListEntry;
    sl_unlock(ListHead, ListHead->Alignment + SL_DEPTH_ONE);
    return first;
}

PSLIST_ENTRY InterlockedPopEntrySList(PSLIST_HEADER ListHead)
{
    sl_lock(ListHead);
    PSLIST_ENTRY first = (PSLIST_ENTRY)(uintptr_t)ListHead->Region;
    ULONGLONG a = ListHead->Alignment;
    if (first) {
        ListHead->Region = (ULONGLONG)(uintptr_t)first->Next;
        a -= SL_DEPTH_ONE;
    }
    sl_unlock(ListHead, a);
    return first;
}

PSLIST_ENTRY InterlockedFlushSList(PSLIST_HEADER ListHead)
{
    sl_lock(ListHead);
    PSLIST_ENTRY first = (PSLIST_ENTRY)(uintptr_t)ListHead->Region;
    ListHead->Region = 0;
    sl_unlock(ListHead, 0);
    return first;
}

USHORT ExQueryDepthSList(PSLIST_HEADER SListHead)
{
    return (USHORT)(__atomic_load_n(&SListHead->Alignment, __ATOMIC_ACQUIRE) >> 16);
}

PSLIST_ENTRY FirstEntrySList(PSLIST_HEADER SListHead)
{
    sl_lock(SListHead);
    PSLIST_ENTRY first = (PSLIST_ENTRY)(uintptr_t)SListHead->Region;
    sl_unlock(SListHead, SListHead->Alignment);
    return first;
}

PSLIST_ENTRY ExInterlockedPushEntrySList(PSLIST_HEADER ListHead, PSLIST_ENTRY ListEntry,
                                         PKSPIN_LOCK Lock)
{
    (void)Lock;
    return InterlockedPushEntrySList(ListHead, ListEntry);
}

PSLIST_ENTRY ExInterlockedPopEntrySList(PSLIST_HEADER ListHead, PKSPIN_LOCK Lock)
{
    (void)Lock;
    return InterlockedPopEntrySList(ListHead);
}

PSLIST_ENTRY ExInterlockedFlushSList(PSLIST_HEADER ListHead)
{
    return InterlockedFlushSList(ListHead);
}

/* ---- memory ---- */
SIZE_T RtlCompareMemory(const VOID *Source1, const VOID *Source2, SIZE_T Length)
{
    const UCHAR *a = Source1, *b = Source2;
    SIZE_T i = 0;
    while (i < Length && a[i] == b[i])
        i++;
    return i;
}

PVOID RtlSecureZeroMemory(PVOID Ptr, SIZE_T cnt)
{
    volatile UCHAR *p = Ptr;
    while (cnt--)
        *p++ = 0;
    return Ptr;
}
