/* Pool and lookaside lists. Every block carries a header with its tag,
 * size, kind and the code that allocated it, and sits on a list, so the
 * host reports what a driver leaves allocated by tag. IRQL and misuse are
 * reported as Driver Verifier would (DRIVER_VERIFIER_DETECTED_VIOLATION
 * parameter 1: 0x01/0x02 allocation, 0x10 foreign address or double free,
 * 0x11/0x12 free at a bad IRQL, 0x15 an active timer in the block;
 * BAD_POOL_CALLER for a wrong tag). */
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define POOL_ALIGN 64
#define MAGIC_LIVE 0x4C4F4F50u /* "POOL" */
#define MAGIC_FREED 0x45455246u

struct pool_hdr {
    uint32_t magic;
    ULONG tag;
    SIZE_T size;
    struct pool_hdr *prev, *next;
    const void *site;
    bool paged;
};
_Static_assert(sizeof(struct pool_hdr) <= POOL_ALIGN, "header fits the alignment gap");

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pool_hdr *pool_blocks;

static struct pool_hdr *hdr_of(void *p)
{
    return (struct pool_hdr *)((char *)p - sizeof(struct pool_hdr));
}

static void tag_text(ULONG tag, char out[5])
{
    /* Stored little-endian: 'loop' prints "pool", as debuggers show it. */
    for (int i = 0; i < 4; i++) {
        char c = (char)((tag >> (8 * i)) & 0xff);
        out[i] = c >= 0x20 && c < 0x7f ? c : '.';
    }
    out[4] = 0;
}

void *kit_pool_alloc(bool paged, SIZE_T size, ULONG tag, bool zero, const void *site)
{
    kit_touch();
    KIRQL irql = kit_irql();
    if (paged && irql > APC_LEVEL)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x01, irql, PagedPool, size, site,
                     "paged pool allocation (%zu bytes) at IRQL %u", (size_t)size, irql);
    if (irql > DISPATCH_LEVEL)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x02, irql, NonPagedPool, size, site,
                     "nonpaged pool allocation at IRQL %u", irql);
    if (size > ((SIZE_T)1 << 40))
        return NULL;
    void *base;
    if (posix_memalign(&base, POOL_ALIGN, POOL_ALIGN + (size ? size : 1)) != 0)
        return NULL;
    void *p = (char *)base + POOL_ALIGN;
    struct pool_hdr *h = hdr_of(p);
    h->magic = MAGIC_LIVE;
    h->tag = tag;
    h->size = size;
    h->site = site;
    h->paged = paged;
    if (zero)
        memset(p, 0, size);
    pthread_mutex_lock(&pool_lock);
    h->prev = NULL;
    h->next = pool_blocks;
    if (pool_blocks)
        pool_blocks->prev = h;
    pool_blocks = h;
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static bool block_is_live(struct pool_hdr *want)
{
    for (struct pool_hdr *h = pool_blocks; h; h = h->next)
        if (h == want)
            return true;
    return false;
}

void kit_pool_free(void *p, ULONG tag, bool check_tag, const void *site)
{
    kit_touch();
    if (!p)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x10, 0, 0, 0, site,
                     "ExFreePool of NULL");
    struct pool_hdr *h = hdr_of(p);
    pthread_mutex_lock(&pool_lock);
    bool live = block_is_live(h);
    if (live) {
        if (h->prev)
            h->prev->next = h->next;
        else
            pool_blocks = h->next;
        if (h->next)
            h->next->prev = h->prev;
    }
    pthread_mutex_unlock(&pool_lock);
    if (!live)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x10, (ULONG_PTR)p, 0, 0, site,
                     "ExFreePool of %p, which is not a live pool block (freed twice, or "
                     "never allocated)",
                     p);
    KIRQL irql = kit_irql();
    if (h->paged && irql > APC_LEVEL)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x11, irql, PagedPool, (ULONG_PTR)p,
                     site, "paged pool freed at IRQL %u", irql);
    if (irql > DISPATCH_LEVEL)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x12, irql, NonPagedPool,
                     (ULONG_PTR)p, site, "nonpaged pool freed at IRQL %u", irql);
    if (check_tag && tag != h->tag) {
        char want[5], have[5];
        tag_text(tag, want);
        tag_text(h->tag, have);
        kit_bugcheck(BC_BAD_POOL_CALLER, 0x0A, (ULONG_PTR)p, h->tag, tag, site,
                     "ExFreePoolWithTag with tag '%s' of a block allocated with tag '%s'", want,
                     have);
    }
    kit_dpc_check_free(p, h->size, site);
    h->magic = MAGIC_FREED;
    free((char *)p - POOL_ALIGN);
}

unsigned ndkwdk_report_pool(FILE *out)
{
    struct tag_sum {
        ULONG tag;
        unsigned blocks;
        size_t bytes;
        const void *site;
    } sums[64];
    unsigned nsums = 0, total = 0;
    pthread_mutex_lock(&pool_lock);
    for (struct pool_hdr *h = pool_blocks; h; h = h->next) {
        total++;
        unsigned i = 0;
        while (i < nsums && sums[i].tag != h->tag)
            i++;
        if (i == nsums) {
            if (nsums == 64)
                continue;
            sums[nsums++] = (struct tag_sum){h->tag, 0, 0, h->site};
        }
        sums[i].blocks++;
        sums[i].bytes += h->size;
    }
    pthread_mutex_unlock(&pool_lock);
    for (unsigned i = 0; i < nsums; i++) {
        char tag[5], where[256];
        tag_text(sums[i].tag, tag);
        ndkwdk_describe_address(sums[i].site, where, sizeof where);
        fprintf(out, "  pool tag '%s': %u block(s), %zu bytes left allocated (first allocated at %s)\n",
                tag, sums[i].blocks, sums[i].bytes, where);
    }
    return total;
}

/* ---- the pool routines ---- */
static bool type_is_paged(POOL_TYPE t)
{
    return (t & 1) != 0 && t != NonPagedPoolNx && t != NonPagedPoolNxCacheAligned &&
           t != NonPagedPoolSessionNx;
}

PVOID ExAllocatePool2(POOL_FLAGS Flags, SIZE_T NumberOfBytes, ULONG Tag)
{
    const POOL_FLAGS kinds = POOL_FLAG_NON_PAGED | POOL_FLAG_NON_PAGED_EXECUTE | POOL_FLAG_PAGED;
    POOL_FLAGS kind = Flags & kinds;
    /* Exactly one pool type; unknown required flags fail the allocation. */
    if (kind == 0 || (kind & (kind - 1)) != 0 || Tag == 0 ||
        (Flags & 0xFFFFFFFFu & ~(kinds | POOL_FLAG_UNINITIALIZED | POOL_FLAG_CACHE_ALIGNED |
                                 POOL_FLAG_USE_QUOTA | POOL_FLAG_RAISE_ON_FAILURE)))
        return NULL;
    return kit_pool_alloc(kind == POOL_FLAG_PAGED, NumberOfBytes, Tag,
                          !(Flags & POOL_FLAG_UNINITIALIZED), KIT_CALLER);
}

PVOID ExAllocatePoolWithTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, Tag, false, KIT_CALLER);
}

PVOID ExAllocatePoolWithTagPriority(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag,
                                    EX_POOL_PRIORITY Priority)
{
    (void)Priority;
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, Tag, false, KIT_CALLER);
}

PVOID ExAllocatePoolWithQuotaTag(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, Tag, false, KIT_CALLER);
}

PVOID ExAllocatePoolZero(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, Tag, true, KIT_CALLER);
}

PVOID ExAllocatePoolUninitialized(POOL_TYPE PoolType, SIZE_T NumberOfBytes, ULONG Tag)
{
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, Tag, false, KIT_CALLER);
}

PVOID ExAllocatePool(POOL_TYPE PoolType, SIZE_T NumberOfBytes)
{
    /* Untagged allocations carry 'None', as on Windows. */
    return kit_pool_alloc(type_is_paged(PoolType), NumberOfBytes, 0x656E6F4E, false,
                          KIT_CALLER);
}

VOID ExFreePool(PVOID P)
{
    kit_pool_free(P, 0, false, KIT_CALLER);
}

VOID ExFreePoolWithTag(PVOID P, ULONG Tag)
{
    kit_pool_free(P, Tag, true, KIT_CALLER);
}

/* ---- lookaside lists: no cache, every block from and to the pool ---- */
enum { LA_NPAGED = 1, LA_PAGED, LA_EX };

static void la_init(NDKWDK_LOOKASIDE *l, UCHAR kind, PVOID alloc, PVOID freefn, POOL_TYPE type,
                    ULONG flags, SIZE_T size, ULONG tag, USHORT depth)
{
    memset(l, 0, sizeof *l);
    l->Allocate = alloc;
    l->Free = freefn;
    l->Type = type;
    l->Flags = flags;
    l->Size = size < LOOKASIDE_MINIMUM_BLOCK_SIZE ? LOOKASIDE_MINIMUM_BLOCK_SIZE : size;
    l->Tag = tag;
    l->Depth = depth;
    l->Kind = kind;
    l->Initialized = 1;
}

static PVOID la_alloc(NDKWDK_LOOKASIDE *l, const void *site)
{
    PVOID p;
    if (l->Kind == LA_EX && l->Allocate)
        p = ((PALLOCATE_FUNCTION_EX)l->Allocate)(l->Type, l->Size, l->Tag,
                                                 (PLOOKASIDE_LIST_EX)(void *)l);
    else if (l->Allocate)
        p = ((PALLOCATE_FUNCTION)l->Allocate)(l->Type, l->Size, l->Tag);
    else
        p = kit_pool_alloc(l->Kind == LA_PAGED || type_is_paged(l->Type), l->Size, l->Tag, false,
                           site);
    if (p)
        __atomic_add_fetch(&l->Outstanding, 1, __ATOMIC_RELAXED);
    return p;
}

static VOID la_free(NDKWDK_LOOKASIDE *l, PVOID p, const void *site)
{
    __atomic_sub_fetch(&l->Outstanding, 1, __ATOMIC_RELAXED);
    if (l->Kind == LA_EX && l->Free)
        ((PFREE_FUNCTION_EX)l->Free)(p, (PLOOKASIDE_LIST_EX)(void *)l);
    else if (l->Free)
        ((PFREE_FUNCTION)l->Free)(p);
    else
        kit_pool_free(p, 0, false, site);
}

VOID ExInitializeNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                     PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                     USHORT Depth)
{
    la_init(&Lookaside->L, LA_NPAGED, (PVOID)Allocate, (PVOID)Free, NonPagedPool, Flags, Size, Tag,
            Depth);
}

VOID ExDeleteNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside)
{
    Lookaside->L.Initialized = 0;
}

PVOID ExAllocateFromNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside)
{
    return la_alloc(&Lookaside->L, KIT_CALLER);
}

VOID ExFreeToNPagedLookasideList(PNPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry)
{
    la_free(&Lookaside->L, Entry, KIT_CALLER);
}

VOID ExInitializePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PALLOCATE_FUNCTION Allocate,
                                    PFREE_FUNCTION Free, ULONG Flags, SIZE_T Size, ULONG Tag,
                                    USHORT Depth)
{
    kit_require_irql(APC_LEVEL, "ExInitializePagedLookasideList", KIT_CALLER);
    la_init(&Lookaside->L, LA_PAGED, (PVOID)Allocate, (PVOID)Free, PagedPool, Flags, Size, Tag,
            Depth);
}

VOID ExDeletePagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside)
{
    Lookaside->L.Initialized = 0;
}

PVOID ExAllocateFromPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside)
{
    return la_alloc(&Lookaside->L, KIT_CALLER);
}

VOID ExFreeToPagedLookasideList(PPAGED_LOOKASIDE_LIST Lookaside, PVOID Entry)
{
    la_free(&Lookaside->L, Entry, KIT_CALLER);
}

NTSTATUS ExInitializeLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PALLOCATE_FUNCTION_EX Allocate,
                                     PFREE_FUNCTION_EX Free, POOL_TYPE PoolType, ULONG Flags,
                                     SIZE_T Size, ULONG Tag, USHORT Depth)
{
    if (!Lookaside || (Flags & ~(EX_LOOKASIDE_LIST_EX_FLAGS_RAISE_ON_FAIL |
                                 EX_LOOKASIDE_LIST_EX_FLAGS_FAIL_NO_RAISE)))
        return STATUS_INVALID_PARAMETER;
    la_init(&Lookaside->L, LA_EX, (PVOID)Allocate, (PVOID)Free, PoolType, Flags, Size, Tag, Depth);
    return STATUS_SUCCESS;
}

VOID ExDeleteLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    Lookaside->L.Initialized = 0;
}

PVOID ExAllocateFromLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    return la_alloc(&Lookaside->L, KIT_CALLER);
}

VOID ExFreeToLookasideListEx(PLOOKASIDE_LIST_EX Lookaside, PVOID Entry)
{
    la_free(&Lookaside->L, Entry, KIT_CALLER);
}

VOID ExFlushLookasideListEx(PLOOKASIDE_LIST_EX Lookaside)
{
    (void)Lookaside; /* nothing is cached */
}
