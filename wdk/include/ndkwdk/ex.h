/*
 * ndkwdk/ex.h - the executive's support routines (wdm.h): pool and
 * lookaside lists, fast and guarded mutexes, push locks, rundown protection,
 * interlocked operations and interlocked lists.
 *
 * Pool: every block is tracked with its tag, so the driver host reports the
 * blocks a driver leaves allocated by tag. Paged and nonpaged pool are the
 * same memory; the IRQL rules of each are checked.
 */
#ifndef NDKWDK_EX_H
#define NDKWDK_EX_H

#include <ndkwdk/ke.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- pool ---- */
typedef enum _POOL_TYPE {
    NonPagedPool = 0,
    NonPagedPoolExecute = 0,
    PagedPool = 1,
    NonPagedPoolMustSucceed = 2,
    DontUseThisType = 3,
    NonPagedPoolCacheAligned = 4,
    PagedPoolCacheAligned = 5,
    NonPagedPoolCacheAlignedMustS = 6,
    MaxPoolType = 7,
    NonPagedPoolSession = 32,
    PagedPoolSession = 33,
    NonPagedPoolNx = 512,
    NonPagedPoolNxCacheAligned = 516,
    NonPagedPoolSessionNx = 544
} POOL_TYPE;

typedef enum _EX_POOL_PRIORITY {
    LowPoolPriority = 0,
    LowPoolPrioritySpecialPoolOverrun = 8,
    LowPoolPrioritySpecialPoolUnderrun = 9,
    NormalPoolPriority = 16,
    NormalPoolPrioritySpecialPoolOverrun = 24,
    NormalPoolPrioritySpecialPoolUnderrun = 25,
    HighPoolPriority = 32,
    HighPoolPrioritySpecialPoolOverrun = 40,
    HighPoolPrioritySpecialPoolUnderrun = 41
} EX_POOL_PRIORITY;

typedef ULONG64 POOL_FLAGS;
#define POOL_FLAG_USE_QUOTA 0x0000000000000001ULL
#define POOL_FLAG_UNINITIALIZED 0x0000000000000002ULL
#define POOL_FLAG_SESSION 0x0000000000000004ULL
#define POOL_FLAG_CACHE_ALIGNED 0x0000000000000008ULL
#define POOL_FLAG_RAISE_ON_FAILURE 0x0000000000000020ULL
#define POOL_FLAG_NON_PAGED 0x0000000000000040ULL
#define POOL_FLAG_NON_PAGED_EXECUTE 0x0000000000000080ULL
#define POOL_FLAG_PAGED 0x0000000000000100ULL
#define POOL_FLAG_REQUIRED_START 0x0000000000000001ULL
#define POOL_FLAG_REQUIRED_END 0x0000000080000000ULL
#define POOL_FLAG_OPTIONAL_START 0x0000000100000000ULL
#define POOL_FLAG_SPECIAL_POOL 0x0000000100000000ULL
#define POOL_FLAG_OPTIONAL_END 0x8000000000000000ULL

/* Blocks are at least MEMORY_ALLOCATION_ALIGNMENT-aligned (the kit: 64). */
#define MEMORY_ALLOCATION_ALIGNMENT 16

/* ExAllocatePool2 zeroes the block unless POOL_FLAG_UNINITIALIZED; exactly
 * one of the pool-type flags is required. */
PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag);
PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                    EX_POOL_PRIORITY Priority);
PVOID ExAllocatePoolWithQuotaTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
PVOID ExAllocatePool(POOL_TYPE PoolType, SIZE_T NumberOfBytes);
VOID ExFreePool(PVOID P);
VOID ExFreePoolWithTag(PVOID P, ULONG Tag);

/* ---- lookaside lists (every allocation goes to the pool, tracked) ---- */
typedef PVOID ALLOCATE_FUNCTION(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag);
typedef ALLOCATE_FUNCTION *PALLOCATE_FUNCTION;
typedef VOID FREE_FUNCTION(PVOID Buffer);
typedef FREE_FUNCTION *PFREE_FUNCTION;
struct _LOOKASIDE_LIST_EX;
typedef PVOID ALLOCATE_FUNCTION_EX(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                   struct _LOOKASIDE_LIST_EX *Lookaside);
typedef ALLOCATE_FUNCTION_EX *PALLOCATE_FUNCTION_EX;
typedef VOID FREE_FUNCTION_EX(PVOID Buffer, struct _LOOKASIDE_LIST_EX *Lookaside);
typedef FREE_FUNCTION_EX *PFREE_FUNCTION_EX;

/* The kit's lookaside state: how to allocate and free, and how many blocks
 * are out (a list deleted with blocks out is reported). */
typedef struct _NDKWDK_LOOKASIDE {
    PVOID Allocate;
    PVOID Free;
    POOL_TYPE Type;
    ULONG Tag;
    SIZE_T Size;
    ULONG Flags;
    USHORT Depth;
    UCHAR Kind;
    UCHAR Initialized;
    LONG Outstanding;
    ULONG Spare[7];
} NDKWDK_LOOKASIDE;

typedef struct _NPAGED_LOOKASIDE_LIST {
    NDKWDK_LOOKASIDE L;
} NPAGED_LOOKASIDE_LIST, *PNPAGED_LOOKASIDE_LIST;
typedef struct _PAGED_LOOKASIDE_LIST {
    NDKWDK_LOOKASIDE L;
} PAGED_LOOKASIDE_LIST, *PPAGED_LOOKASIDE_LIST;
typedef struct _LOOKASIDE_LIST_EX {
    NDKWDK_LOOKASIDE L;
} LOOKASIDE_LIST_EX, *PLOOKASIDE_LIST_EX;

#define EX_LOOKASIDE_LIST_EX_FLAGS_RAISE_ON_FAIL 0x00000001UL
#define EX_LOOKASIDE_LIST_EX_FLAGS_FAIL_NO_RAISE 0x00000002UL
#define LOOKASIDE_MINIMUM_BLOCK_SIZE 16

VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                     PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                     USHORT Depth);
VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside);
VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                    PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                    USHORT Depth);
VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside);
VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry);
NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PALLOCATE_FUNCTION_EX Allocate,
                                     PFREE_FUNCTION_EX Free, POOL_TYPE PoolType, ULONG Flags,
                                     SIZE_T Size, ULONG Tag, USHORT Depth);
VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);
VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry);
VOID ExFlushLookasideListEx(PLOOKASIDE_LIST_EX Lookaside);

/* ---- fast and guarded mutexes (IRQL <= APC_LEVEL; held at APC_LEVEL) ---- */
typedef struct _FAST_MUTEX {
    LONG_PTR Count; /* 1: free */
    PVOID Owner;
    ULONG Contention;
    KEVENT Event;
    ULONG OldIrql;
} FAST_MUTEX, *PFAST_MUTEX, KGUARDED_MUTEX, *PKGUARDED_MUTEX;

VOID ExInitializeFastMutex(PFAST_MUTEX FastMutex);
VOID ExAcquireFastMutex(PFAST_MUTEX FastMutex);
VOID ExReleaseFastMutex(PFAST_MUTEX FastMutex);
BOOLEAN ExTryToAcquireFastMutex(PFAST_MUTEX FastMutex);
VOID ExAcquireFastMutexUnsafe(PFAST_MUTEX FastMutex);
VOID ExReleaseFastMutexUnsafe(PFAST_MUTEX FastMutex);
VOID KeInitializeGuardedMutex(PKGUARDED_MUTEX Mutex);
VOID KeAcquireGuardedMutex(PKGUARDED_MUTEX Mutex);
VOID KeReleaseGuardedMutex(PKGUARDED_MUTEX Mutex);
BOOLEAN KeTryToAcquireGuardedMutex(PKGUARDED_MUTEX Mutex);

/* ---- push locks (IRQL <= APC_LEVEL) ---- */
typedef ULONG_PTR EX_PUSH_LOCK, *PEX_PUSH_LOCK;
#define EX_DEFAULT_PUSH_LOCK_FLAGS 0
VOID ExInitializePushLock(PEX_PUSH_LOCK PushLock);
VOID ExAcquirePushLockExclusiveEx(PEX_PUSH_LOCK PushLock, ULONG Flags);
VOID ExReleasePushLockExclusiveEx(PEX_PUSH_LOCK PushLock, ULONG Flags);
VOID ExAcquirePushLockSharedEx(PEX_PUSH_LOCK PushLock, ULONG Flags);
VOID ExReleasePushLockSharedEx(PEX_PUSH_LOCK PushLock, ULONG Flags);
#define ExAcquirePushLockExclusive(L) ExAcquirePushLockExclusiveEx(L, EX_DEFAULT_PUSH_LOCK_FLAGS)
#define ExReleasePushLockExclusive(L) ExReleasePushLockExclusiveEx(L, EX_DEFAULT_PUSH_LOCK_FLAGS)
#define ExAcquirePushLockShared(L) ExAcquirePushLockSharedEx(L, EX_DEFAULT_PUSH_LOCK_FLAGS)
#define ExReleasePushLockShared(L) ExReleasePushLockSharedEx(L, EX_DEFAULT_PUSH_LOCK_FLAGS)

/* ---- rundown protection ---- */
typedef struct _EX_RUNDOWN_REF {
    union {
        ULONG_PTR Count;
        PVOID Ptr;
    };
} EX_RUNDOWN_REF, *PEX_RUNDOWN_REF;
VOID ExInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
VOID ExReInitializeRundownProtection(PEX_RUNDOWN_REF RunRef);
BOOLEAN ExAcquireRundownProtection(PEX_RUNDOWN_REF RunRef);
BOOLEAN ExAcquireRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
VOID ExReleaseRundownProtection(PEX_RUNDOWN_REF RunRef);
VOID ExReleaseRundownProtectionEx(PEX_RUNDOWN_REF RunRef, ULONG Count);
VOID ExWaitForRundownProtectionRelease(PEX_RUNDOWN_REF RunRef);
VOID ExRundownCompleted(PEX_RUNDOWN_REF RunRef);

/* ---- interlocked operations (full barriers, as on x64) ---- */
#define NDKWDK_SC __ATOMIC_SEQ_CST
#define InterlockedIncrement(p) __atomic_add_fetch((LONG volatile *)(p), 1, NDKWDK_SC)
#define InterlockedDecrement(p) __atomic_sub_fetch((LONG volatile *)(p), 1, NDKWDK_SC)
#define InterlockedAdd(p, v) __atomic_add_fetch((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedExchangeAdd(p, v) __atomic_fetch_add((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedExchange(p, v) __atomic_exchange_n((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedOr(p, v) __atomic_fetch_or((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedAnd(p, v) __atomic_fetch_and((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedXor(p, v) __atomic_fetch_xor((LONG volatile *)(p), (LONG)(v), NDKWDK_SC)
#define InterlockedIncrement16(p) __atomic_add_fetch((SHORT volatile *)(p), 1, NDKWDK_SC)
#define InterlockedDecrement16(p) __atomic_sub_fetch((SHORT volatile *)(p), 1, NDKWDK_SC)
#define InterlockedIncrement64(p) __atomic_add_fetch((LONG64 volatile *)(p), 1, NDKWDK_SC)
#define InterlockedDecrement64(p) __atomic_sub_fetch((LONG64 volatile *)(p), 1, NDKWDK_SC)
#define InterlockedAdd64(p, v) __atomic_add_fetch((LONG64 volatile *)(p), (LONG64)(v), NDKWDK_SC)
#define InterlockedExchangeAdd64(p, v)                                                     \
    __atomic_fetch_add((LONG64 volatile *)(p), (LONG64)(v), NDKWDK_SC)
#define InterlockedExchange64(p, v)                                                        \
    __atomic_exchange_n((LONG64 volatile *)(p), (LONG64)(v), NDKWDK_SC)
#define InterlockedOr64(p, v) __atomic_fetch_or((LONG64 volatile *)(p), (LONG64)(v), NDKWDK_SC)
#define InterlockedAnd64(p, v) __atomic_fetch_and((LONG64 volatile *)(p), (LONG64)(v), NDKWDK_SC)
#define InterlockedExchangePointer(p, v)                                                   \
    __atomic_exchange_n((PVOID volatile *)(p), (PVOID)(v), NDKWDK_SC)
#define InterlockedIncrementSizeT(p) ((SIZE_T)InterlockedIncrement64(p))
#define InterlockedDecrementSizeT(p) ((SIZE_T)InterlockedDecrement64(p))
#define InterlockedIncrementAcquire InterlockedIncrement
#define InterlockedIncrementRelease InterlockedIncrement
#define InterlockedDecrementAcquire InterlockedDecrement
#define InterlockedDecrementRelease InterlockedDecrement
#define InterlockedExchangeNoFence InterlockedExchange
static inline LONG NdkWdkCas32(LONG volatile *p, LONG x, LONG c)
{
    __atomic_compare_exchange_n(p, &c, x, 0, NDKWDK_SC, NDKWDK_SC);
    return c;
}
static inline LONG64 NdkWdkCas64(LONG64 volatile *p, LONG64 x, LONG64 c)
{
    __atomic_compare_exchange_n(p, &c, x, 0, NDKWDK_SC, NDKWDK_SC);
    return c;
}
static inline PVOID NdkWdkCasPtr(PVOID volatile *p, PVOID x, PVOID c)
{
    __atomic_compare_exchange_n(p, &c, x, 0, NDKWDK_SC, NDKWDK_SC);
    return c;
}
/* Return the initial value, as on Windows. */
#define InterlockedCompareExchange(p, x, c)                                                \
    NdkWdkCas32((LONG volatile *)(p), (LONG)(x), (LONG)(c))
#define InterlockedCompareExchange64(p, x, c)                                              \
    NdkWdkCas64((LONG64 volatile *)(p), (LONG64)(x), (LONG64)(c))
#define InterlockedCompareExchangePointer(p, x, c)                                         \
    NdkWdkCasPtr((PVOID volatile *)(p), (PVOID)(x), (PVOID)(c))
#define InterlockedCompareExchangeAcquire InterlockedCompareExchange
#define InterlockedCompareExchangeRelease InterlockedCompareExchange
#define InterlockedCompareExchangePointerAcquire InterlockedCompareExchangePointer
#define InterlockedCompareExchangePointerRelease InterlockedCompareExchangePointer

#define ReadNoFence(p) __atomic_load_n((LONG volatile *)(p), __ATOMIC_RELAXED)
#define ReadAcquire(p) __atomic_load_n((LONG volatile *)(p), __ATOMIC_ACQUIRE)
#define WriteNoFence(p, v) __atomic_store_n((LONG volatile *)(p), (LONG)(v), __ATOMIC_RELAXED)
#define WriteRelease(p, v) __atomic_store_n((LONG volatile *)(p), (LONG)(v), __ATOMIC_RELEASE)
#define ReadPointerAcquire(p) __atomic_load_n((PVOID volatile *)(p), __ATOMIC_ACQUIRE)
#define WritePointerRelease(p, v)                                                          \
    __atomic_store_n((PVOID volatile *)(p), (PVOID)(v), __ATOMIC_RELEASE)
#if defined(__SANITIZE_THREAD__)
/* GCC's ThreadSanitizer does not model a bare fence (and warns, -Wtsan): a
 * driver built with it gets a sequentially consistent read-modify-write,
 * which TSan understands and which is a full barrier on x86-64. */
static volatile LONG ndk_wdk_barrier_word __attribute__((unused));
#define KeMemoryBarrier() ((void)__atomic_fetch_add(&ndk_wdk_barrier_word, 0, __ATOMIC_SEQ_CST))
#else
#define KeMemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
#define KeMemoryBarrierWithoutFence() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define MemoryBarrier() KeMemoryBarrier()
#define _ReadWriteBarrier() __atomic_signal_fence(__ATOMIC_SEQ_CST)
#define YieldProcessor() __builtin_ia32_pause()

/* ---- interlocked lists: a spin lock guards a LIST_ENTRY ---- */
PLIST_ENTRY ExInterlockedInsertHeadList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry,
                                        PKSPIN_LOCK Lock);
PLIST_ENTRY ExInterlockedInsertTailList(PLIST_ENTRY ListHead, PLIST_ENTRY ListEntry,
                                        PKSPIN_LOCK Lock);
PLIST_ENTRY ExInterlockedRemoveHeadList(PLIST_ENTRY ListHead, PKSPIN_LOCK Lock);
PSINGLE_LIST_ENTRY ExInterlockedPushEntryList(PSINGLE_LIST_ENTRY ListHead,
                                              PSINGLE_LIST_ENTRY ListEntry, PKSPIN_LOCK Lock);
PSINGLE_LIST_ENTRY ExInterlockedPopEntryList(PSINGLE_LIST_ENTRY ListHead, PKSPIN_LOCK Lock);

/* ---- sequenced singly linked lists (16-byte aligned, as on x64) ---- */
typedef struct DECLSPEC_ALIGN(16) _SLIST_ENTRY {
    struct _SLIST_ENTRY *Next;
} SLIST_ENTRY, *PSLIST_ENTRY;
typedef union DECLSPEC_ALIGN(16) _SLIST_HEADER {
    struct {
        ULONGLONG Alignment; /* the kit: lock bit, depth and sequence */
        ULONGLONG Region;    /* the kit: first entry */
    };
} SLIST_HEADER, *PSLIST_HEADER;

VOID InitializeSListHead(PSLIST_HEADER SListHead);
#define ExInitializeSListHead InitializeSListHead
PSLIST_ENTRY InterlockedPushEntrySList(PSLIST_HEADER ListHead, PSLIST_ENTRY ListEntry);
PSLIST_ENTRY InterlockedPopEntrySList(PSLIST_HEADER ListHead);
PSLIST_ENTRY InterlockedFlushSList(PSLIST_HEADER ListHead);
USHORT ExQueryDepthSList(PSLIST_HEADER SListHead);
#define QueryDepthSList ExQueryDepthSList
PSLIST_ENTRY FirstEntrySList(PSLIST_HEADER SListHead);
PSLIST_ENTRY ExInterlockedPushEntrySList(PSLIST_HEADER ListHead, PSLIST_ENTRY ListEntry,
                                         PKSPIN_LOCK Lock);
PSLIST_ENTRY ExInterlockedPopEntrySList(PSLIST_HEADER ListHead, PKSPIN_LOCK Lock);
PSLIST_ENTRY ExInterlockedFlushSList(PSLIST_HEADER ListHead);

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_EX_H */
