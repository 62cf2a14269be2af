/*
 * mem.c - the adapter's STag table (mem.h), logical address mappings
 * (NdkBuildLAM / NdkReleaseLAM), and the checks the data path makes on local
 * SGEs, inbound tagged segments, and Bind / FastRegister / Invalidate.
 *
 * STags. An STag is (24-bit index << 8) | 8-bit key (RFC 5040).
 * Each MR or MW object owns one index from creation to destruction.
 * Indices come from a cursor that starts at a random point of the index
 * space and only moves forward (wrapping from 2^24 - 1 to 1, never 0), so a
 * freed index is not handed out again until the whole space has been cycled
 * through. Lookup is O(1) and allocation-free: a fixed directory of 4096
 * leaves, each holding 4096 entry pointers, allocated when first needed and
 * dropped when empty. Keys start random and move forward by one (like verbs'
 * ib_inc_rkey) on every registration and bind, so the tokens of the last
 * 255 registrations of an index all fail.
 *
 * Fast-register MRs keep the token NdkInitializeFastRegisterMr gave them:
 * NdkGetRemoteTokenFromMr may be called once that completed, NDKPI has no
 * call that asks for a new key, and consumers written for Windows
 * providers cache that token and hand it out for every fast registration.
 * A stale access is still refused while the MR is invalidated, up to its
 * next fast registration. With NDK_OPEN_FLAG_FRMR_NEW_TOKEN the key moves
 * on every fast registration too, so an old token fails for good.
 *
 * Posting vs. execution. NdkFastRegister and NdkBind must hand out the new
 * remote token as soon as they return (NdkGetRemoteTokenFromMr,
 * NdkGetRemoteTokenFromMw), but the
 * mapping takes effect only when the request reaches the head of the
 * initiator queue. So an entry keeps two things: `key`, the key of the newest
 * token handed out (bumped by mem_check_fast_register / mem_check_bind when
 * they succeed: the QP calls them last, right before queuing), and `stag`,
 * the STag that remote accesses must name, which mem_exec_* set to the
 * newest token when they make the mapping valid. Until then the previous
 * registration stays usable under its old token, exactly as queue order
 * says. The QP must call mem_check_* before queuing each request and
 * mem_exec_* when it executes it; a request flushed before execution leaves
 * the new token simply never valid. fr_posted / fr_applied count a fast
 * registration's posts and executions the same way, whether the key moved
 * or not.
 *
 * Local tokens. Local and remote tokens of an MR are one value (mem.h).
 * Reference 5.6.5 makes a fast-register MR's local token valid from
 * NdkInitializeFastRegisterMr on, while its key moves with every fast
 * registration; so a local SGE naming a fast-register MR is matched on the
 * index (plus PD, validity and range), not the key. Normal MRs and remote
 * accesses always match the full STag.
 *
 * Windows. A window may be bound only to a normally registered MR (a
 * fast-register MR "can only be used for fast registration", 5.5.1), whose
 * TOs are host addresses. A window records the MR's index and STag at bind:
 * once the MR is deregistered, re-registered or closed, the window maps
 * nothing. The MR of a window's latest bind is its antecedent (5.9.4, 9.4):
 * counted in the table at post time, turned into successors of the MR object
 * when the MR's close starts (the only moment the adapter lock is held:
 * posting threads never take it), released when the window is destroyed.
 * A bind that would move a window away from an MR whose close is pending is
 * refused (STATUS_INVALID_DEVICE_STATE): releasing that dependency needs the
 * adapter lock, which a posting thread must not take.
 *
 * Logical addresses. Without an IOMMU the logical addresses of a LAM are
 * the host addresses of its pages, and the table keeps the ranges of the
 * live LAMs. The privileged token and fast registrations accept nothing
 * else: a fast registration's page list is checked when it is posted and
 * again when it executes, and NdkReleaseLAM marks every fast registration
 * with a page that no live LAM covers any more as unmapped, which fails its
 * token like an invalid STag (it can still be invalidated, or registered
 * again over live pages).
 *
 * Locking. t->lock is a near-leaf lock (after the QP and CQ locks, before
 * the callback-queue lock): nothing is called under it, no allocation or
 * free happens under it, and lookups copy out host iovecs so the caller
 * places data outside it.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dlist.h"
#include "mem.h"
#include "net/sys.h"
#include "objects.h"

#include "mem_internal.h"

#define IDX_BITS 24
#define IDX_LIMIT (1u << IDX_BITS) /* indices are 1 .. IDX_LIMIT - 1 */
#define LEAF_BITS 12
#define LEAF_SIZE (1u << LEAF_BITS)
#define DIR_SIZE (IDX_LIMIT >> LEAF_BITS)

/* NDK_OP_FLAG_ALLOW_REMOTE_WRITE is 0x30 = 0x20 | ALLOW_LOCAL_WRITE: the
 * 0x20 bit is what asks for remote write. */
#define OP_FLAG_REMOTE_WRITE_BIT 0x20u

struct mem_entry {
    uint32_t idx;
    enum mem_kind kind;
    const struct ndk_pd_impl *pd;
    struct ndk_obj *owner;
    uint8_t key;     /* key of the newest token handed out */
    uint32_t stag;   /* the STag remote accesses must name */
    bool valid;      /* the registration / binding may be used */
    bool issued;     /* FRMR initialized / MW bind posted: the getters answer */
    bool closing;    /* the object's close started */
    unsigned access; /* MEM_* */
    uint64_t base;   /* TO of the first byte */
    uint64_t len;

    /* fast-register MR */
    bool remote_ok;       /* RemoteAccess of the latest initialization */
    ULONG max_pages;      /* AdapterPageCount of the latest initialization */
    ULONG page_cap;       /* capacity of pages[]: only grows */
    uint64_t *pages;      /* host addresses of the registered pages */
    ULONG npages;         /* ... how many the registration has */
    ULONG fbo;
    bool unmapped;        /* a LAM its pages lay in was released: nothing is mapped */
    uint32_t fr_posted;   /* fast registrations posted (mem_check_fast_register) */
    uint32_t fr_applied;  /* fr_posted as of the latest one executed */
    struct mem_entry *fr_prev, *fr_next; /* the table's list of fast-register MRs */

    /* window */
    const struct ndk_qp_impl *qp; /* the QP that executed the bind */
    uint64_t qp_serial;           /* ... and its serial (the pointer alone may be reused) */
    uint32_t mr_idx, mr_stag;     /* the MR it lies in, as of the bind */
    struct ndk_obj *ante;         /* MR object this window depends on (latest bind posted) */
    uint32_t ante_idx;

    /* normal MR */
    unsigned nwin; /* windows whose antecedent this MR is */
    unsigned succ; /* of those, how many were made successors when the close started */
};

struct mem_leaf {
    unsigned used;
    struct mem_entry *e[LEAF_SIZE];
};

/* One live NdkBuildLAM result: the host range its pages cover. */
struct lam_rec {
    uint64_t start, end;
};

struct mem_table {
    pthread_mutex_t lock;
    struct mem_leaf *dir[DIR_SIZE];
    struct mem_leaf *spare; /* an empty leaf kept so allocation never mallocs under the lock */
    uint32_t cursor;        /* where the next index search starts */
    uint32_t live;
    uint64_t rng;           /* xorshift64* state: initial keys */
    uint64_t page_size;
    unsigned page_shift;

    /* Live LAMs sorted by start; lam_max[i] is the largest end among
     * lams[0..i], so "some LAM contains [a, b)" is one binary search. */
    struct lam_rec **lams;
    uint64_t *lam_max;
    size_t nlams, lam_cap;
    /* Every fast-register MR: what NdkReleaseLAM must look at. */
    struct mem_entry *frmrs;
    /* The table's generation: moved on (under the lock, before the change)
     * by everything that changes an entry, the directory or the LAMs, so
     * that an answer of mem_check_posted stays true while it has not moved
     * (mem_map_posted reads it without the lock). Never 0, which means
     * "check again". */
    uint64_t gen;
};

/* ------------------------------------------------------------------------ */
/* Table                                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t rng_next(struct mem_table *t)
{
    uint64_t x = t->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static inline uint32_t make_stag(uint32_t idx, uint8_t key)
{
    return (idx << 8) | key;
}

static inline uint32_t next_idx(uint32_t idx)
{
    return idx + 1 >= IDX_LIMIT ? 1 : idx + 1;
}

static inline struct mem_entry *lookup(const struct mem_table *t, uint32_t idx)
{
    const struct mem_leaf *l = t->dir[(idx >> LEAF_BITS) & (DIR_SIZE - 1)];
    return l ? l->e[idx & (LEAF_SIZE - 1)] : NULL;
}

/* A new token for e: the key moves forward, skipping the one value that
 * would equal the PD's privileged token (which must never name an STag,
 * or a remote access with it would be refused as privileged). */
static void bump_key(struct mem_entry *e)
{
    do
        e->key++;
    while (make_stag(e->idx, e->key) == e->pd->privileged_token);
}

struct mem_table *mem_table_new(void)
{
    struct mem_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    long ps = sysconf(_SC_PAGESIZE);
    /* NdkBuildLAM's pages are the host's pages. */
    t->page_size = ps > 0 && (ps & (ps - 1)) == 0 ? (uint64_t)ps : 4096;
    while (((uint64_t)1 << t->page_shift) < t->page_size)
        t->page_shift++;
    t->rng = ndk_random_seed((uint64_t)(uintptr_t)t) | 1; /* xorshift state must not be 0 */
    /* A random start makes indices hard to guess across adapters and runs
     * (RFC 5042 on guessed STags); 0 is never an index. */
    t->cursor = (uint32_t)(rng_next(t) % (IDX_LIMIT - 1)) + 1;
    /* Each table's generations are its own (1 << 40 of them), so that a
     * thread's remembered MR (last_mr) of a table freed never matches
     * one made later at the same address. */
    static uint64_t tables;
    t->gen = (__atomic_add_fetch(&tables, 1, __ATOMIC_RELAXED) << 40) | 1;
    return t;
}

/* The lock, for a change of the table: the generation moves first, so a
 * transport that finds it unmoved checks nothing the change made
 * (mem_map_posted), and one that looks after the change returned (through
 * whatever ordered it after that) finds it moved. */
static void lock_to_change(struct mem_table *t)
{
    pthread_mutex_lock(&t->lock);
    __atomic_store_n(&t->gen, t->gen + 1, __ATOMIC_RELEASE);
}

void mem_table_free(struct mem_table *t)
{
    if (!t)
        return;
    for (unsigned d = 0; d < DIR_SIZE; d++) {
        struct mem_leaf *l = t->dir[d];
        if (!l)
            continue;
        for (unsigned i = 0; i < LEAF_SIZE; i++) {
            if (l->e[i]) {
                free(l->e[i]->pages);
                free(l->e[i]);
            }
        }
        free(l);
    }
    free(t->spare);
    for (size_t i = 0; i < t->nlams; i++)
        free(t->lams[i]);
    free(t->lams);
    free(t->lam_max);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

void mem_test_set_cursor(struct mem_table *t, uint32_t idx)
{
    pthread_mutex_lock(&t->lock);
    t->cursor = idx % IDX_LIMIT ? idx % IDX_LIMIT : 1;
    pthread_mutex_unlock(&t->lock);
}

NTSTATUS mem_entry_new(struct mem_table *t, enum mem_kind kind, const struct ndk_pd_impl *pd,
                       struct ndk_obj *owner, struct mem_entry **out)
{
    struct mem_entry *e = calloc(1, sizeof *e);
    if (!e)
        return STATUS_INSUFFICIENT_RESOURCES;
    e->kind = kind;
    e->pd = pd;
    e->owner = owner;
    struct mem_leaf *fresh = NULL;
    lock_to_change(t);
    for (;;) {
        if (t->live >= IDX_LIMIT - 1) {
            pthread_mutex_unlock(&t->lock);
            free(fresh);
            free(e);
            return STATUS_INSUFFICIENT_RESOURCES;
        }
        /* The first free index at or after the cursor; terminates because
         * at least one index is free. */
        uint32_t idx = t->cursor;
        while (lookup(t, idx))
            idx = next_idx(idx);
        struct mem_leaf **slot = &t->dir[idx >> LEAF_BITS];
        if (!*slot) {
            if (t->spare) {
                *slot = t->spare;
                t->spare = NULL;
            } else if (fresh) {
                *slot = fresh;
                fresh = NULL;
            } else {
                /* Allocate outside the lock, then search again: the
                 * cursor may have moved meanwhile. */
                pthread_mutex_unlock(&t->lock);
                fresh = calloc(1, sizeof *fresh);
                if (!fresh) {
                    free(e);
                    return STATUS_INSUFFICIENT_RESOURCES;
                }
                lock_to_change(t);
                continue;
            }
        }
        (*slot)->e[idx & (LEAF_SIZE - 1)] = e;
        (*slot)->used++;
        t->live++;
        t->cursor = next_idx(idx);
        e->idx = idx;
        e->key = (uint8_t)rng_next(t);
        e->stag = make_stag(idx, e->key);
        if (kind == MEM_KIND_FRMR) {
            e->fr_next = t->frmrs;
            if (t->frmrs)
                t->frmrs->fr_prev = e;
            t->frmrs = e;
        }
        break;
    }
    if (fresh && !t->spare) {
        t->spare = fresh;
        fresh = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    free(fresh);
    *out = e;
    return STATUS_SUCCESS;
}

unsigned mem_entry_close_start(struct mem_table *t, struct mem_entry *e)
{
    lock_to_change(t);
    e->closing = true;
    e->succ = e->nwin;
    unsigned n = e->nwin;
    pthread_mutex_unlock(&t->lock);
    return n;
}

struct ndk_obj *mem_entry_free(struct mem_table *t, struct mem_entry *e)
{
    struct ndk_obj *release = NULL;
    struct mem_leaf *drop = NULL;
    lock_to_change(t);
    struct mem_leaf **slot = &t->dir[e->idx >> LEAF_BITS];
    (*slot)->e[e->idx & (LEAF_SIZE - 1)] = NULL;
    if (--(*slot)->used == 0) {
        if (t->spare)
            drop = *slot;
        else
            t->spare = *slot;
        *slot = NULL;
    }
    t->live--;
    if (e->kind == MEM_KIND_FRMR)
        DLIST_UNLINK(t->frmrs, e, fr_prev, fr_next);
    if (e->ante) {
        /* Found by index and owner: during adapter teardown the MR may be
         * gone already. */
        struct mem_entry *m = lookup(t, e->ante_idx);
        if (m && m->owner == e->ante) {
            m->nwin--;
            if (m->succ) {
                m->succ--;
                release = e->ante;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    free(drop);
    free(e->pages);
    free(e);
    return release;
}

uint64_t mem_entry_registered_len(struct mem_table *t, struct mem_entry *e)
{
    pthread_mutex_lock(&t->lock);
    uint64_t len = e && e->valid && e->kind != MEM_KIND_MW ? e->len : 0;
    pthread_mutex_unlock(&t->lock);
    return len;
}

UINT32 mem_entry_token(struct mem_table *t, struct mem_entry *e)
{
    UINT32 tok = 0;
    pthread_mutex_lock(&t->lock);
    if (e->kind == MEM_KIND_MR)
        tok = e->valid ? e->stag : 0;
    else if (e->issued)
        tok = make_stag(e->idx, e->key);
    pthread_mutex_unlock(&t->lock);
    return tok;
}

/* ------------------------------------------------------------------------ */
/* Registration (mr.c)                                                      */
/* ------------------------------------------------------------------------ */

NTSTATUS mem_mdl_span(const MDL *mdl, SIZE_T len, uint64_t *va)
{
    if (!mdl || len == 0)
        return STATUS_INVALID_PARAMETER;
    uint64_t start = (uint64_t)(uintptr_t)MmGetMdlVirtualAddress(mdl);
    if (start == 0)
        return STATUS_INVALID_PARAMETER; /* zero-based addressing is not supported */
    uint64_t end = start;
    for (const MDL *m = mdl; end - start < len; m = m->Next) {
        /* The chain must describe at least Length bytes, each buffer
         * starting where the previous one ended. Empty buffers are refused:
         * they add nothing, and a cycle of them would never end. */
        if (!m || m->ByteCount == 0)
            return STATUS_INVALID_PARAMETER;
        if ((uint64_t)(uintptr_t)MmGetMdlVirtualAddress(m) != end)
            return STATUS_INVALID_PARAMETER;
        if (m->ByteCount > UINT64_MAX - end)
            return STATUS_INVALID_PARAMETER;
        end += m->ByteCount;
    }
    if (len > UINT64_MAX - start)
        return STATUS_INVALID_PARAMETER;
    *va = start;
    return STATUS_SUCCESS;
}

NTSTATUS mem_mr_register(struct mem_table *t, struct mem_entry *e, uint64_t va, uint64_t len,
                         unsigned access)
{
    NTSTATUS st = STATUS_SUCCESS;
    lock_to_change(t);
    if (e->kind != MEM_KIND_MR)
        st = STATUS_INVALID_PARAMETER; /* NdkRegisterMr is for FastRegister == FALSE (5.6.1) */
    else if (e->valid)
        st = STATUS_INVALID_DEVICE_STATE; /* registered already: deregister first */
    else {
        bump_key(e);
        e->stag = make_stag(e->idx, e->key);
        e->base = va;
        e->len = len;
        e->access = access;
        e->valid = true;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_mr_deregister(struct mem_table *t, struct mem_entry *e)
{
    NTSTATUS st = STATUS_SUCCESS;
    lock_to_change(t);
    if (e->kind != MEM_KIND_MR)
        st = STATUS_INVALID_PARAMETER;
    else if (!e->valid)
        st = STATUS_INVALID_DEVICE_STATE; /* "the MR must be in the registered state" (5.6.2) */
    else
        e->valid = false; /* windows bound to it die with it: they check the MR's STag */
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_frmr_init(struct mem_table *t, struct mem_entry *e, ULONG npages, bool remote)
{
    if (e->kind != MEM_KIND_FRMR)
        return STATUS_INVALID_PARAMETER; /* only FastRegister == TRUE MRs (5.6.3) */
    if (npages == 0 || npages > NDK_MAX_FRMR_PAGES)
        return STATUS_IMPLEMENTATION_LIMIT;
    pthread_mutex_lock(&t->lock);
    ULONG cap = e->page_cap;
    pthread_mutex_unlock(&t->lock);
    uint64_t *grown = NULL, *old = NULL;
    if (npages > cap) {
        grown = malloc((size_t)npages * sizeof *grown);
        if (!grown)
            return STATUS_INSUFFICIENT_RESOURCES;
    }
    lock_to_change(t);
    /* Initializations may run in parallel (5.6.3): the page list only ever
     * grows, so a registration made under a larger count stays intact. */
    if (grown && npages > e->page_cap) {
        if (e->pages)
            memcpy(grown, e->pages, (size_t)e->page_cap * sizeof *grown);
        old = e->pages;
        e->pages = grown;
        e->page_cap = npages;
        grown = NULL;
    }
    e->max_pages = npages;
    e->remote_ok = remote;
    e->issued = true;
    pthread_mutex_unlock(&t->lock);
    free(grown);
    free(old);
    return STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Mapping                                                                  */
/* ------------------------------------------------------------------------ */

/* Host iovecs for [to, to + len) of a valid registration (bounds checked by
 * the caller). Returns the count, or -1 when more than max are needed; iov
 * NULL only counts. */
static int map_range(const struct mem_table *t, const struct mem_entry *e, uint64_t to,
                     uint64_t len, struct iovec *iov, int max)
{
    if (e->kind != MEM_KIND_FRMR) {
        /* A normal MR's TOs are the host addresses of its MDL. */
        if (max < 1)
            return -1;
        if (iov)
            iov[0] = (struct iovec){(void *)(uintptr_t)to, (size_t)len};
        return 1;
    }
    /* Byte `to` of a fast registration is byte fbo + (to - base) of its
     * page list; consecutive pages need not be contiguous (NdkFastRegister):
     * each run of pages adjacent in memory is one iovec. */
    uint64_t off = to - e->base + e->fbo;
    uint64_t mask = t->page_size - 1;
    uint64_t next = 0; /* host address just past the last iovec */
    int n = 0;
    while (len) {
        uint64_t pi = off >> t->page_shift, po = off & mask;
        uint64_t chunk = t->page_size - po;
        if (chunk > len)
            chunk = len;
        uint64_t host = e->pages[pi] + po;
        if (n && host == next) {
            if (iov)
                iov[n - 1].iov_len += (size_t)chunk;
        } else {
            if (n >= max)
                return -1;
            if (iov)
                iov[n] = (struct iovec){(void *)(uintptr_t)host, (size_t)chunk};
            n++;
        }
        next = host + chunk;
        off += chunk;
        len -= chunk;
    }
    return n;
}

/* Is [to, to + len) inside [base, base + size)? Overflow-free. */
static inline bool inside(uint64_t base, uint64_t size, uint64_t to, uint64_t len)
{
    return to >= base && to - base <= size && len <= size - (to - base);
}

/* The checks of docs/rules.md R12-R16 / R19, in this order:
 * invalid, not associated, access, wrap, bounds. Lock held; len > 0. *region
 * is the registration whose memory is mapped (the MR, for a window). */
static enum mem_err check_remote(const struct mem_table *t, const struct mem_entry *e,
                                 const struct ndk_pd_impl *pd, const struct ndk_qp_impl *qp,
                                 uint32_t stag, uint64_t to, uint64_t len, unsigned access,
                                 const struct mem_entry **region)
{
    if (!e || e->stag != stag || !e->valid || e->unmapped)
        return MEM_INVALID_STAG;
    const struct mem_entry *m = e;
    if (e->kind == MEM_KIND_MW) {
        /* A window whose MR was deregistered, re-registered or closed maps
         * nothing: it is as invalid as a revoked STag. */
        m = lookup(t, e->mr_idx);
        if (!m || m->stag != e->mr_stag || !m->valid)
            return MEM_INVALID_STAG;
    }
    if (e->pd != pd || (e->kind == MEM_KIND_MW && (e->qp != qp || !qp || e->qp_serial != qp->serial)))
        return MEM_NOT_ASSOCIATED;
    if ((e->access & access) != access)
        return MEM_ACCESS;
    if (len - 1 > UINT64_MAX - to)
        return MEM_WRAP;
    if (!inside(e->base, e->len, to, len))
        return MEM_BOUNDS;
    *region = m;
    return MEM_OK;
}

enum mem_err mem_map_remote(struct mem_table *t, const struct ndk_pd_impl *pd,
                            const struct ndk_qp_impl *qp, uint32_t stag, uint64_t to, uint64_t len,
                            unsigned access, struct iovec *iov, int max_iov, int *niov)
{
    if (niov)
        *niov = 0;
    if (len == 0)
        return MEM_OK; /* a zero-length tagged segment places nothing: not validated */
    /* The privileged token grants local access only (5.5.6). */
    if (stag == pd->privileged_token)
        return MEM_INVALID_STAG;
    pthread_mutex_lock(&t->lock);
    const struct mem_entry *region = NULL;
    enum mem_err err =
        check_remote(t, lookup(t, stag >> 8), pd, qp, stag, to, len, access, &region);
    /* iov == NULL asks for the checks only (a Read Request is validated
     * when it arrives and mapped segment by segment as it is answered). */
    if (err == MEM_OK && iov) {
        int n = map_range(t, region, to, len, iov, max_iov);
        if (n < 0)
            err = MEM_BOUNDS;
        else if (niov)
            *niov = n;
    }
    pthread_mutex_unlock(&t->lock);
    return err;
}

/* ---- logical address mappings ---- */

/* Number of LAMs whose start is <= a. */
static size_t lam_upper(const struct mem_table *t, uint64_t a)
{
    size_t lo = 0, hi = t->nlams;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->lams[mid]->start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Does one live LAM contain [a, end)? Any LAM that does starts at or before
 * a, and among those the largest end decides. */
static bool lam_covers(const struct mem_table *t, uint64_t a, uint64_t end)
{
    size_t i = lam_upper(t, a);
    return i > 0 && t->lam_max[i - 1] >= end;
}

/* Does a live LAM cover the whole page at p (p <= UINT64_MAX - page)?
 * hint[0..1] is a span known to be covered, [p, end) of the last page found
 * (start with {0, 0}): a run of pages from one LAM costs one search. */
static bool lam_covers_page(const struct mem_table *t, uint64_t p, uint64_t hint[2])
{
    uint64_t end = p + t->page_size;
    if (p >= hint[0] && end <= hint[1])
        return true;
    size_t i = lam_upper(t, p);
    if (i == 0 || t->lam_max[i - 1] < end)
        return false;
    /* The LAM with the largest end among those starting at or before p
     * covers everything from p to that end. */
    hint[0] = p;
    hint[1] = t->lam_max[i - 1];
    return true;
}

static void lam_fix_max(struct mem_table *t, size_t from)
{
    for (size_t i = from; i < t->nlams; i++) {
        uint64_t prev = i ? t->lam_max[i - 1] : 0;
        t->lam_max[i] = t->lams[i]->end > prev ? t->lams[i]->end : prev;
    }
}

void mem_lock(struct mem_table *t)
{
    pthread_mutex_lock(&t->lock);
}

void mem_unlock(struct mem_table *t)
{
    pthread_mutex_unlock(&t->lock);
}

NTSTATUS mem_map_local(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                       ULONG nsge, unsigned access, struct iovec *iov, int max_iov, int *niov)
{
    pthread_mutex_lock(&t->lock);
    NTSTATUS st = mem_map_local_locked(t, pd, sgl, nsge, access, iov, max_iov, niov);
    pthread_mutex_unlock(&t->lock);
    return st;
}

/* mem_map_local_locked; *same (when not NULL) says whether each SGE's host
 * iovec is the SGE itself (a normal MR's or the privileged token's: their
 * TOs are host addresses) and every SGE was checked in full (none of a
 * fast registration still queued, MEM_AT_POST). */
static NTSTATUS map_local(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl, ULONG nsge,
                          unsigned access, struct iovec *iov, int max_iov, int *niov, bool *same)
{
    if (niov)
        *niov = 0;
    if (nsge && !sgl)
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = STATUS_SUCCESS;
    int n = 0;
    for (ULONG i = 0; i < nsge && st == STATUS_SUCCESS; i++) {
        const NDK_SGE *s = &sgl[i];
        uint64_t len = s->Length;
        if (len == 0)
            continue;
        uint64_t a = (uint64_t)(uintptr_t)s->VirtualAddress;
        if (len > UINT64_MAX - a) {
            st = STATUS_INVALID_PARAMETER;
            break;
        }
        if (s->MemoryRegionToken == pd->privileged_token) {
            /* Logical addresses are host addresses (identity mapping), valid
             * while a LAM of this adapter covers them; local read and write
             * are both granted (5.5.6). */
            if (!lam_covers(t, a, a + len)) {
                st = STATUS_ACCESS_VIOLATION;
                break;
            }
            if (n >= max_iov) {
                st = STATUS_IMPLEMENTATION_LIMIT;
                break;
            }
            if (iov)
                iov[n] = (struct iovec){(void *)(uintptr_t)a, (size_t)len};
            n++;
            continue;
        }
        const struct mem_entry *e = lookup(t, s->MemoryRegionToken >> 8);
        /* A fast registration posted but not yet run (the old mapping
         * still in force) decides later, in queue order. */
        if ((access & MEM_AT_POST) && e && e->kind == MEM_KIND_FRMR && e->pd == pd &&
            e->fr_posted != e->fr_applied) {
            if (same)
                *same = false;
            continue;
        }
        if (!e || e->kind == MEM_KIND_MW || e->pd != pd || !e->valid || e->unmapped ||
            (e->kind == MEM_KIND_MR && e->stag != s->MemoryRegionToken) ||
            ((access & MEM_LOCAL_WRITE) && !(e->access & MEM_LOCAL_WRITE)) ||
            !inside(e->base, e->len, a, len)) {
            st = STATUS_ACCESS_VIOLATION;
            break;
        }
        if (same && e->kind != MEM_KIND_MR)
            *same = false;
        int k = map_range(t, e, a, len, iov ? &iov[n] : NULL, max_iov - n);
        if (k < 0) {
            st = STATUS_IMPLEMENTATION_LIMIT;
            break;
        }
        n += k;
    }
    if (st == STATUS_SUCCESS && niov)
        *niov = n;
    return st;
}

NTSTATUS mem_map_local_locked(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                              ULONG nsge, unsigned access, struct iovec *iov, int max_iov, int *niov)
{
    return map_local(t, pd, sgl, nsge, access, iov, max_iov, niov, NULL);
}

/*
 * The normal MR the calling thread's last post found its SGEs in (a
 * thread's posts name the same few buffers again and again): its token,
 * PD, rights and range as they were at generation gen of table t. While
 * the generation has not moved, nothing changed the entry, so an SGE with
 * that token inside that range passes every check map_local would make
 * (a normal MR's: it exists in the PD, is valid, the token is its STag,
 * the rights, the bounds), without the table's lock or a lookup.
 */
static __thread struct last_mr {
    const struct mem_table *t;
    uint64_t gen;
    const struct ndk_pd_impl *pd;
    uint32_t stag;
    unsigned access;
    uint64_t base, len;
} last_mr;

/* Does every SGE lie in the thread's last MR, as it was at generation
 * gen? Zero-length SGEs are skipped, as map_local skips them. */
static bool in_last_mr(const struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl, ULONG nsge,
                       unsigned access, uint64_t gen)
{
    const struct last_mr *m = &last_mr;
    if (m->t != t || m->gen != gen || m->pd != pd || (access & MEM_LOCAL_WRITE & ~m->access) || !sgl)
        return false;
    for (ULONG i = 0; i < nsge; i++) {
        uint64_t a = (uint64_t)(uintptr_t)sgl[i].VirtualAddress, len = sgl[i].Length;
        if (len && (sgl[i].MemoryRegionToken != m->stag || !inside(m->base, m->len, a, len)))
            return false;
    }
    return true;
}

/* Lock held, the SGEs passed: remembers the normal MR of the first one
 * with octets, if it is one. */
static void remember_mr(const struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl, ULONG nsge)
{
    for (ULONG i = 0; i < nsge; i++) {
        if (!sgl[i].Length)
            continue;
        const struct mem_entry *e = lookup(t, sgl[i].MemoryRegionToken >> 8);
        if (sgl[i].MemoryRegionToken != pd->privileged_token && e && e->kind == MEM_KIND_MR && e->pd == pd &&
            e->valid && e->stag == sgl[i].MemoryRegionToken)
            last_mr = (struct last_mr){t, t->gen, pd, e->stag, e->access, e->base, e->len};
        return;
    }
}

/* The check under the lock, out of line: mem_check_posted's hit, most
 * posts, then saves no registers for it. */
static __attribute__((noinline)) NTSTATUS check_posted_locked(struct mem_table *t, const struct ndk_pd_impl *pd,
                                                              const NDK_SGE *sgl, ULONG nsge, unsigned access,
                                                              uint64_t *gen)
{
    bool same = true;
    pthread_mutex_lock(&t->lock);
    NTSTATUS st = map_local(t, pd, sgl, nsge, access | MEM_AT_POST, NULL, MEM_LOCAL_IOV_MAX, NULL, &same);
    *gen = st == STATUS_SUCCESS && same ? t->gen : 0;
    if (*gen)
        remember_mr(t, pd, sgl, nsge);
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_check_posted(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl, ULONG nsge,
                          unsigned access, uint64_t *gen)
{
    /* At most 16 SGEs (NDK_MAX_SGE), one iovec each: never more than
     * map_local's MEM_LOCAL_IOV_MAX. */
    _Static_assert(NDK_MAX_SGE <= MEM_LOCAL_IOV_MAX, "an MR's SGEs always fit the iovecs");
    uint64_t now = __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
    if (nsge <= NDK_MAX_SGE && in_last_mr(t, pd, sgl, nsge, access, now)) {
        *gen = now;
        return STATUS_SUCCESS;
    }
    return check_posted_locked(t, pd, sgl, nsge, access, gen);
}

uint64_t mem_generation(struct mem_table *t)
{
    return __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE);
}

bool mem_map_posted(struct mem_table *t, uint64_t gen, const NDK_SGE *sgl, ULONG nsge, struct iovec *iov,
                    int max_iov, int *niov, NTSTATUS *st)
{
    /* What map_local gives for these SGEs: one iovec each, zero-length
     * ones dropped, the same limit. */
    return mem_posted_iovs(gen, __atomic_load_n(&t->gen, __ATOMIC_ACQUIRE), sgl, nsge, iov, max_iov, niov, st);
}

NTSTATUS mem_check_receive(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                           ULONG nsge, uint64_t max_total, uint64_t *total)
{
    uint64_t gen;
    return mem_check_receive_posted(t, pd, sgl, nsge, max_total, total, &gen);
}

NTSTATUS mem_check_receive_posted(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                                  ULONG nsge, uint64_t max_total, uint64_t *total, uint64_t *gen)
{
    *total = 0;
    *gen = 0;
    for (ULONG i = 0; i < nsge; i++)
        *total += sgl[i].Length;
    if (*total > max_total)
        return STATUS_INVALID_PARAMETER;
    return mem_check_posted(t, pd, sgl, nsge, MEM_LOCAL_WRITE, gen);
}

/* ------------------------------------------------------------------------ */
/* Invalidation                                                             */
/* ------------------------------------------------------------------------ */

enum mem_err mem_invalidate_remote(struct mem_table *t, const struct ndk_pd_impl *pd,
                                   const struct ndk_qp_impl *qp, uint32_t stag)
{
    if (stag == pd->privileged_token)
        return MEM_INVALID_STAG;
    enum mem_err err = MEM_OK;
    lock_to_change(t);
    struct mem_entry *e = lookup(t, stag >> 8);
    if (!e || e->stag != stag || !e->valid)
        err = MEM_INVALID_STAG;
    else if (e->pd != pd || (e->kind == MEM_KIND_MW && (e->qp != qp || !qp || e->qp_serial != qp->serial)))
        err = MEM_NOT_ASSOCIATED;
    else if (e->kind == MEM_KIND_MR)
        /* Only NdkDeregisterMr ends a normal registration (5.6.2, 5.9.6):
         * the right to be invalidated remotely is never granted to it. */
        err = MEM_ACCESS;
    else
        e->valid = false;
    pthread_mutex_unlock(&t->lock);
    return err;
}

NTSTATUS mem_invalidate_local_token(struct mem_table *t, const struct ndk_pd_impl *pd, uint32_t token)
{
    if (token == pd->privileged_token)
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = STATUS_SUCCESS;
    lock_to_change(t);
    struct mem_entry *e = lookup(t, token >> 8);
    /* A local token: matched on the index for a fast-register MR (see the
     * head of this file). Only those can be invalidated (5.9.6). */
    if (!e || e->pd != pd || e->kind != MEM_KIND_FRMR)
        st = STATUS_INVALID_PARAMETER;
    else if (!e->valid)
        st = STATUS_INVALID_DEVICE_STATE;
    else
        e->valid = false;
    pthread_mutex_unlock(&t->lock);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Fast register, bind, invalidate: post-time checks and execution          */
/* ------------------------------------------------------------------------ */

struct mem_entry *mem_object_entry(const void *pub, NDK_OBJECT_TYPE type, struct ndk_obj **obj)
{
    struct ndk_obj *o = ndk_obj_from_pub(pub, type);
    if (!o)
        return NULL;
    if (obj)
        *obj = o;
    return container_of(o, struct mem_object, obj)->entry;
}

NTSTATUS mem_object_create(struct ndk_obj *pdo, enum mem_kind kind, NDK_OBJECT_TYPE type,
                           const void *dispatch, const struct ndk_obj_ops *ops,
                           struct mem_object **out)
{
    struct ndk_adapter_impl *ad = pdo->ad;
    struct mem_object *m = calloc(1, sizeof *m);
    if (!m)
        return STATUS_INSUFFICIENT_RESOURCES;
    m->pd = container_of(pdo, struct ndk_pd_impl, obj);
    NTSTATUS st = mem_entry_new(ad->dev->mem, kind, m->pd, &m->obj, &m->entry);
    if (st != STATUS_SUCCESS) {
        free(m);
        return st;
    }
    pthread_mutex_lock(&ad->dev->lock);
    if (pdo->closing) {
        pthread_mutex_unlock(&ad->dev->lock);
        mem_entry_free(ad->dev->mem, m->entry);
        free(m);
        return STATUS_INVALID_PARAMETER;
    }
    ndk_obj_add_successor(pdo);
    ndk_obj_init(&m->obj, ad, type, dispatch, ops);
    pthread_mutex_unlock(&ad->dev->lock);
    *out = m;
    return STATUS_SUCCESS;
}

UINT32 mem_object_token(const void *pub, NDK_OBJECT_TYPE type)
{
    struct ndk_obj *o = NULL;
    struct mem_entry *e = mem_object_entry(pub, type, &o);
    return e ? mem_entry_token(o->ad->dev->mem, e) : 0;
}

void mem_object_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct mem_object, obj));
}

/* The entry behind an MR or MW header, if it belongs to qp's adapter. */
static struct mem_entry *target_entry(const struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *h)
{
    struct ndk_obj *o = NULL;
    struct mem_entry *e = NULL;
    if (!qp || !h)
        return NULL;
    if (h->ObjectType == NdkObjectTypeMr)
        e = mem_object_entry(h, NdkObjectTypeMr, &o);
    else if (h->ObjectType == NdkObjectTypeMw)
        e = mem_object_entry(h, NdkObjectTypeMw, &o);
    return e && o->ad->dev == qp->obj.ad->dev ? e : NULL;
}

static unsigned fr_access(ULONG flags)
{
    unsigned a = 0;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ)
        a |= MEM_REMOTE_READ;
    if (flags & OP_FLAG_REMOTE_WRITE_BIT)
        a |= MEM_REMOTE_WRITE | MEM_LOCAL_WRITE;
    if (flags & NDK_OP_FLAG_ALLOW_LOCAL_WRITE)
        a |= MEM_LOCAL_WRITE;
    return a;
}

/* The argument rules of 5.9.5 and 9.3 that do not depend on the table. */
static NTSTATUS fr_static_checks(const struct mem_table *t, ULONG npages,
                                 const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                 PVOID base_va, ULONG flags)
{
    uint64_t base = (uint64_t)(uintptr_t)base_va;
    if (flags & ~NDK_OP_FLAGS_KNOWN)
        return STATUS_INVALID_PARAMETER;
    if (npages == 0 || !pages)
        return STATUS_INVALID_PARAMETER;
    /* FBO is an offset in the first page; BaseVirtualAddress = FBO + n *
     * PAGE_SIZE, which also makes 0 possible only with FBO 0. */
    if (fbo >= t->page_size || (base & (t->page_size - 1)) != fbo)
        return STATUS_INVALID_PARAMETER;
    if (len > (uint64_t)npages * t->page_size - fbo || len > UINT64_MAX - base)
        return STATUS_INVALID_PARAMETER;
    for (ULONG i = 0; i < npages; i++) {
        uint64_t p = (uint64_t)pages[i].QuadPart;
        if (p == 0 || (p & (t->page_size - 1)) || p > UINT64_MAX - t->page_size)
            return STATUS_INVALID_PARAMETER;
    }
    return STATUS_SUCCESS;
}

/* The rules that depend on the MR's state. Lock held. */
static NTSTATUS fr_entry_checks(const struct mem_entry *e, const struct ndk_qp_impl *qp,
                                ULONG npages, ULONG flags)
{
    if (e->kind != MEM_KIND_FRMR)
        return STATUS_INVALID_PARAMETER; /* a normal MR cannot be fast-registered */
    if (!e->issued)
        return STATUS_INVALID_DEVICE_STATE; /* NdkInitializeFastRegisterMr first (5.9.5) */
    if (e->pd != qp->pd)
        return STATUS_INVALID_PARAMETER;
    if (npages > e->max_pages)
        return STATUS_INVALID_PARAMETER; /* more pages than initialized for (5.9.5 [U]) */
    if ((flags & (NDK_OP_FLAG_ALLOW_REMOTE_READ | OP_FLAG_REMOTE_WRITE_BIT)) && !e->remote_ok)
        return STATUS_ACCESS_VIOLATION; /* RemoteAccess was FALSE at initialization */
    return STATUS_SUCCESS;
}

/* Every page of a fast registration must be a logical address the adapter
 * handed out, i.e. lie inside a live LAM (NdkBuildLAM): anything else could
 * name any memory of the process. Lock held. */
static NTSTATUS fr_pages_checks(const struct mem_table *t, ULONG npages,
                                const NDK_LOGICAL_ADDRESS *pages)
{
    uint64_t hint[2] = {0, 0};
    for (ULONG i = 0; i < npages; i++)
        if (!lam_covers_page(t, (uint64_t)pages[i].QuadPart, hint))
            return STATUS_INVALID_PARAMETER;
    return STATUS_SUCCESS;
}

/* The entry a fast registration targets: an MR of this QP's adapter. */
static struct mem_entry *frmr_entry(struct ndk_qp_impl *qp, NDK_MR *mr)
{
    struct mem_entry *e = target_entry(qp, (NDK_OBJECT_HEADER *)mr);
    return e && e->kind != MEM_KIND_MW ? e : NULL;
}

/* Lock held: a fast registration passed its checks at the post. */
static void fr_posted(struct mem_entry *e, NDK_MR *mr)
{
    e->fr_posted++;
    /* NdkGetRemoteTokenFromMr answers the new token from now (5.6.4). The
     * token is the MR's: the flag of the adapter instance it was created
     * through decides. */
    struct ndk_obj *mro = NULL;
    mem_object_entry(mr, NdkObjectTypeMr, &mro);
    if (mro && (mro->ad->opt.Flags & NDK_OPEN_FLAG_FRMR_NEW_TOKEN))
        bump_key(e);
}

/* Lock held: a fast registration runs. npages <= max_pages <= page_cap: at
 * most NDK_MAX_FRMR_PAGES words are copied under the lock. */
static void fr_apply(struct mem_entry *e, ULONG npages, const NDK_LOGICAL_ADDRESS *pages, ULONG fbo,
                     SIZE_T len, PVOID base_va, ULONG flags)
{
    for (ULONG i = 0; i < npages; i++)
        e->pages[i] = (uint64_t)pages[i].QuadPart;
    e->npages = npages;
    e->unmapped = false;
    e->fbo = fbo;
    e->base = (uint64_t)(uintptr_t)base_va;
    e->len = len;
    e->access = fr_access(flags);
    e->stag = make_stag(e->idx, e->key);
    e->fr_applied = e->fr_posted;
    e->valid = true;
}

/* A fast registration: checked at the post, checked again and applied
 * when it runs (execute: the MR may have been re-initialized, or a LAM of
 * its pages released, since the post). */
static NTSTATUS fast_register(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG npages,
                              const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len, PVOID base_va,
                              ULONG flags, bool execute)
{
    struct mem_entry *e = frmr_entry(qp, mr);
    if (!e)
        return STATUS_INVALID_PARAMETER;
    struct mem_table *t = qp->obj.ad->dev->mem;
    NTSTATUS st = fr_static_checks(t, npages, pages, fbo, len, base_va, flags);
    if (st != STATUS_SUCCESS)
        return st;
    lock_to_change(t);
    st = fr_entry_checks(e, qp, npages, flags);
    if (st == STATUS_SUCCESS)
        st = fr_pages_checks(t, npages, pages);
    if (st == STATUS_SUCCESS && execute)
        fr_apply(e, npages, pages, fbo, len, base_va, flags);
    else if (st == STATUS_SUCCESS)
        fr_posted(e, mr);
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_check_fast_register(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG npages,
                                 const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                 PVOID base_va, ULONG flags)
{
    return fast_register(qp, mr, npages, pages, fbo, len, base_va, flags, false);
}

NTSTATUS mem_exec_fast_register(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG npages,
                                const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                PVOID base_va, ULONG flags)
{
    return fast_register(qp, mr, npages, pages, fbo, len, base_va, flags, true);
}

static unsigned bind_access(ULONG flags)
{
    unsigned a = 0;
    if (flags & NDK_OP_FLAG_ALLOW_REMOTE_READ)
        a |= MEM_REMOTE_READ;
    if (flags & OP_FLAG_REMOTE_WRITE_BIT)
        a |= MEM_REMOTE_WRITE;
    return a;
}

/* The rules of 5.9.4 / 9.4. Lock held. at_post: also refuse objects whose
 * close started (after the post, an MR close is a plain dereference until
 * the window goes: L10). */
static NTSTATUS bind_checks(const struct mem_entry *m, const struct mem_entry *w,
                            const struct ndk_qp_impl *qp, PVOID va, SIZE_T len, ULONG flags,
                            bool at_post)
{
    uint64_t a = (uint64_t)(uintptr_t)va;
    if (flags & ~NDK_OP_FLAGS_KNOWN)
        return STATUS_INVALID_PARAMETER;
    if (m->kind != MEM_KIND_MR || w->kind != MEM_KIND_MW)
        return STATUS_INVALID_PARAMETER; /* windows go over normally registered MRs */
    if (m->pd != qp->pd || w->pd != qp->pd)
        return STATUS_INVALID_PARAMETER;
    if (at_post && (m->closing || w->closing))
        return STATUS_INVALID_PARAMETER;
    if (!m->valid)
        return STATUS_INVALID_DEVICE_STATE; /* the MR is not registered */
    if (len > NDK_MAX_REGION)
        return STATUS_INVALID_PARAMETER; /* MaxWindowSize */
    /* MR base <= VA < MR base + MR length, and the window ends inside. */
    if (a < m->base || a - m->base >= m->len || len > m->len - (a - m->base))
        return STATUS_INVALID_PARAMETER;
    if ((flags & OP_FLAG_REMOTE_WRITE_BIT) && !(m->access & MEM_LOCAL_WRITE))
        return STATUS_ACCESS_VIOLATION; /* a remote-write window needs local write on the MR */
    return STATUS_SUCCESS;
}

/* The entries of a bind: an MR and a window of this QP's adapter. */
static bool bind_entries(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, struct mem_entry **m,
                         struct mem_entry **w, struct ndk_obj **mro)
{
    struct ndk_obj *mwo = NULL;
    *mro = NULL;
    *m = mem_object_entry(mr, NdkObjectTypeMr, mro);
    *w = mem_object_entry(mw, NdkObjectTypeMw, &mwo);
    return qp && *m && *w && (*mro)->ad->dev == qp->obj.ad->dev && mwo->ad->dev == qp->obj.ad->dev;
}

/* Lock held: a bind passed its checks at the post. */
static NTSTATUS bind_posted(struct mem_table *t, struct mem_entry *m, struct mem_entry *w, struct ndk_obj *mro)
{
    if (w->ante != mro) {
        /* The window now depends on this MR instead of its previous one. */
        struct mem_entry *old = w->ante ? lookup(t, w->ante_idx) : NULL;
        if (old && old->owner != w->ante)
            old = NULL;
        if (old && old->closing) {
            /* The old MR's pending close counts this window; the release
             * needs the adapter lock, which posting threads never take. */
            return STATUS_INVALID_DEVICE_STATE;
        }
        if (old)
            old->nwin--;
        w->ante = mro;
        w->ante_idx = m->idx;
        m->nwin++;
    }
    bump_key(w); /* NdkGetRemoteTokenFromMw answers the new token from now (5.7.1) */
    w->issued = true;
    return STATUS_SUCCESS;
}

/* Lock held: a bind runs. */
static void bind_apply(struct ndk_qp_impl *qp, struct mem_entry *m, struct mem_entry *w, PVOID va,
                       SIZE_T len, ULONG flags)
{
    w->base = (uint64_t)(uintptr_t)va;
    w->len = len;
    w->access = bind_access(flags);
    w->qp = qp; /* windows are associated with the QP that bound them (R13) */
    w->qp_serial = qp->serial;
    w->mr_idx = m->idx;
    w->mr_stag = m->stag;
    w->stag = make_stag(w->idx, w->key);
    w->valid = true;
}

/* A bind: checked at the post, checked again and applied when it runs
 * (execute: the MR may have been deregistered since the post). */
static NTSTATUS bind_window(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                            ULONG flags, bool execute)
{
    struct ndk_obj *mro;
    struct mem_entry *m, *w;
    if (!bind_entries(qp, mr, mw, &m, &w, &mro))
        return STATUS_INVALID_PARAMETER;
    struct mem_table *t = qp->obj.ad->dev->mem;
    lock_to_change(t);
    NTSTATUS st = bind_checks(m, w, qp, va, len, flags, !execute);
    if (st == STATUS_SUCCESS && execute)
        bind_apply(qp, m, w, va, len, flags);
    else if (st == STATUS_SUCCESS)
        st = bind_posted(t, m, w, mro);
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_check_bind(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                        ULONG flags)
{
    return bind_window(qp, mr, mw, va, len, flags, false);
}

NTSTATUS mem_exec_bind(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                       ULONG flags)
{
    return bind_window(qp, mr, mw, va, len, flags, true);
}

/* The rules of 5.9.6 shared by the check and the execution. Lock held. */
static NTSTATUS inv_checks(const struct mem_entry *e, const struct ndk_qp_impl *qp)
{
    if (e->kind == MEM_KIND_MR)
        return STATUS_INVALID_PARAMETER; /* never a normal MR: NdkDeregisterMr (5.9.6) */
    if (e->pd != qp->pd)
        return STATUS_INVALID_PARAMETER;
    if (!e->issued)
        return STATUS_INVALID_DEVICE_STATE; /* never initialized / never bound */
    return STATUS_SUCCESS;
}

/* An invalidation: checked at the post, checked again and done when it
 * runs (execute). */
static NTSTATUS invalidate(struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *mr_or_mw, bool execute)
{
    struct mem_entry *e = target_entry(qp, mr_or_mw);
    if (!e)
        return STATUS_INVALID_PARAMETER;
    struct mem_table *t = qp->obj.ad->dev->mem;
    lock_to_change(t);
    NTSTATUS st = inv_checks(e, qp);
    /* Validity is judged at execution only: a fast register or bind queued
     * before this request may make the token valid by then. An already
     * invalid one "fails as usual" (5.9.6). */
    if (execute && st == STATUS_SUCCESS) {
        if (e->valid)
            e->valid = false;
        else
            st = STATUS_INVALID_DEVICE_STATE;
    }
    pthread_mutex_unlock(&t->lock);
    return st;
}

NTSTATUS mem_check_invalidate(struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *mr_or_mw)
{
    return invalidate(qp, mr_or_mw, false);
}

NTSTATUS mem_exec_invalidate(struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *mr_or_mw)
{
    return invalidate(qp, mr_or_mw, true);
}

/* ------------------------------------------------------------------------ */
/* NdkBuildLAM / NdkReleaseLAM                                              */
/* ------------------------------------------------------------------------ */

/* Returns with t->lock held and room for one more LAM, or false (unlocked)
 * when memory ran out. Arrays grow outside the lock. */
static bool lam_reserve(struct mem_table *t)
{
    for (;;) {
        lock_to_change(t);
        if (t->nlams < t->lam_cap)
            return true;
        size_t want = t->lam_cap ? t->lam_cap * 2 : 16;
        pthread_mutex_unlock(&t->lock);
        struct lam_rec **r = malloc(want * sizeof *r);
        uint64_t *mx = malloc(want * sizeof *mx);
        if (!r || !mx) {
            free(r);
            free(mx);
            return false;
        }
        struct lam_rec **old_r = NULL;
        uint64_t *old_mx = NULL;
        lock_to_change(t);
        if (t->lam_cap < want) {
            if (t->nlams) {
                memcpy(r, t->lams, t->nlams * sizeof *r);
                memcpy(mx, t->lam_max, t->nlams * sizeof *mx);
            }
            old_r = t->lams;
            old_mx = t->lam_max;
            t->lams = r;
            t->lam_max = mx;
            t->lam_cap = want;
            r = NULL;
            mx = NULL;
        }
        pthread_mutex_unlock(&t->lock);
        free(old_r);
        free(old_mx);
        free(r);
        free(mx);
    }
}

NTSTATUS ndk_build_lam(NDK_ADAPTER *pNdkAdapter, MDL *Mdl, SIZE_T Length,
                       NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                       NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM, ULONG *pLAMSize, ULONG *pFBO)
{
    /* Completes inline: a software adapter has nothing to wait for. */
    (void)RequestCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !pLAMSize || !pFBO || Length > NDK_MAX_REGION)
        return STATUS_INVALID_PARAMETER;
    uint64_t va;
    NTSTATUS st = mem_mdl_span(Mdl, Length, &va);
    if (st != STATUS_SUCCESS)
        return st;
    struct mem_table *t = ad->dev->mem;
    /* No IOMMU: logical addresses are the host addresses of the pages
     * (NdkBuildLAM), page-aligned, with the offset of the first byte
     * as FBO. */
    uint64_t fbo = va & (t->page_size - 1);
    uint64_t first = va - fbo;
    uint64_t count = (fbo + Length + t->page_size - 1) >> t->page_shift;
    if (count > (UINT64_MAX - first) >> t->page_shift)
        return STATUS_INVALID_PARAMETER; /* the last page would end past 2^64 */
    uint64_t need = offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) +
                    count * sizeof(NDK_LOGICAL_ADDRESS);
    if (need > ULONG_MAX)
        return STATUS_INVALID_PARAMETER; /* the size could not be reported */
    /* Buffer-size pattern (4.7). */
    if (!pNdkLAM || *pLAMSize < need) {
        *pLAMSize = (ULONG)need;
        return STATUS_BUFFER_TOO_SMALL;
    }
    struct lam_rec *rec = malloc(sizeof *rec);
    if (!rec)
        return STATUS_INSUFFICIENT_RESOURCES;
    rec->start = first;
    rec->end = first + (count << t->page_shift);
    if (!lam_reserve(t)) {
        free(rec);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    size_t pos = lam_upper(t, rec->start);
    memmove(&t->lams[pos + 1], &t->lams[pos], (t->nlams - pos) * sizeof *t->lams);
    t->lams[pos] = rec;
    t->nlams++;
    lam_fix_max(t, pos);
    pthread_mutex_unlock(&t->lock);

    /* AdapterContext is ours (6.8): it names the record to release. */
    pNdkLAM->AdapterContext = rec;
    pNdkLAM->AdapterPageCount = (ULONG)count;
    for (uint64_t i = 0; i < count; i++)
        pNdkLAM->AdapterPageArray[i].QuadPart = (LONGLONG)(first + (i << t->page_shift));
    *pLAMSize = (ULONG)need;
    *pFBO = (ULONG)fbo;
    return STATUS_SUCCESS;
}

VOID ndk_release_lam(NDK_ADAPTER *pNdkAdapter, NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !pNdkLAM || !pNdkLAM->AdapterContext)
        return;
    struct mem_table *t = ad->dev->mem;
    struct lam_rec *rec = pNdkLAM->AdapterContext;
    bool found = false;
    lock_to_change(t);
    /* Only a record found in the table is ours to free: a LAM released
     * twice or never built is ignored. Records are compared by address, so
     * the search never dereferences rec. */
    for (size_t i = 0; i < t->nlams; i++) {
        if (t->lams[i] == rec) {
            memmove(&t->lams[i], &t->lams[i + 1], (t->nlams - i - 1) * sizeof *t->lams);
            t->nlams--;
            lam_fix_max(t, i);
            found = true;
            break;
        }
    }
    if (found) {
        /* A fast registration whose pages are not all covered any more
         * must not leave a usable token (mem.h): its memory may be reused
         * for anything now. Another live LAM over the same pages keeps it. */
        for (struct mem_entry *e = t->frmrs; e; e = e->fr_next) {
            if (!e->valid || e->unmapped)
                continue;
            uint64_t hint[2] = {0, 0};
            for (ULONG i = 0; i < e->npages; i++) {
                if (!lam_covers_page(t, e->pages[i], hint)) {
                    e->unmapped = true;
                    break;
                }
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (found) {
        free(rec);
        pNdkLAM->AdapterContext = NULL;
    }
}
