/*
 * mem.h - memory registration and protection: the adapter's STag table
 * (MRs, fast-register MRs, memory windows), logical address mappings, and the
 * checks the data path makes on every local SGE and every remote access.
 *
 * Tokens are iWARP STags: a 24-bit index (random start, never 0) and an
 * 8-bit key that changes on every registration and bind, so a stale token
 * fails (RFC 5040); a fast-register MR keeps its token across fast
 * registrations unless NDK_OPEN_FLAG_FRMR_NEW_TOKEN is set (mem.c). Local
 * and remote tokens of an MR are the same value; remote use is refused
 * unless remote rights were granted.
 * TOs are virtual addresses: the base of a registration is its MDL's virtual
 * address (or the BaseVirtualAddress of a fast registration).
 *
 * Locking: the table has its own lock (a leaf: nothing else is taken under
 * it). Lookups return host iovecs; the caller places data outside the lock.
 */
#ifndef NDK_MEM_H
#define NDK_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <ndk/ndkpi.h>

#include "ndk_limits.h"

struct ndk_adapter_impl;
struct ndk_pd_impl;
struct ndk_qp_impl;

/* Access rights, internal encoding (independent of the NDK flag values). */
#define MEM_LOCAL_WRITE 0x1
#define MEM_REMOTE_READ 0x2
#define MEM_REMOTE_WRITE 0x4
/* mem_map_local at posting time: an SGE in a fast-register MR of the PD
 * whose latest NdkFastRegister is still queued passes (fast registrations
 * apply in queue order); it is checked again when the request is carried
 * out. Every other SGE is checked as usual. */
#define MEM_AT_POST 0x100


/* Every NDK_OP_FLAG_* bit. A posting call refuses any other bit and ignores
 * the known ones that do not apply to it (docs/behaviour.md, Posting). */
#define NDK_OP_FLAGS_KNOWN 0x3FFu

/* Why a remote access was refused; the data path turns these into the
 * Terminate of docs/rules.md R12-R21 (ndk_xp_stag_fault, transport.h). */
enum mem_err {
    MEM_OK = 0,
    MEM_INVALID_STAG, /* unknown, key mismatch, invalidated, deregistered, privileged */
    MEM_NOT_ASSOCIATED, /* another PD, or a window bound to another QP */
    MEM_ACCESS,        /* the right asked for was not granted */
    MEM_BOUNDS,        /* [to, to+len) not inside the region */
    MEM_WRAP,          /* to + len wraps 2^64 */
};

/* Per-adapter state; lives in struct ndk_adapter_impl. */
struct mem_table;
struct mem_table *mem_table_new(void);
void mem_table_free(struct mem_table *t);

/*
 * Maps a remote access (inbound RDMA Write or Read Response placement is
 * done elsewhere; this is for Write targets and Read Request sources) of len
 * bytes at (stag, to) for QP qp in protection domain pd, needing `access`
 * (MEM_REMOTE_WRITE or MEM_REMOTE_READ). On MEM_OK fills up to max_iov host
 * iovecs covering exactly len bytes (more than one only for fast-registered
 * page lists) and sets *niov. len 0 is always MEM_OK with *niov 0 (zero-length
 * tagged segments place nothing and are not validated). A too-small iov array is
 * reported as MEM_BOUNDS (callers size it for the largest FPDU). iov NULL:
 * validation only (a Read Request's whole source range), niov may be NULL.
 */
enum mem_err mem_map_remote(struct mem_table *t, const struct ndk_pd_impl *pd,
                            const struct ndk_qp_impl *qp, uint32_t stag, uint64_t to, uint64_t len,
                            unsigned access, struct iovec *iov, int max_iov, int *niov);

/*
 * Checks local SGEs against their tokens: each SGE must lie inside the
 * registration its token names, in this PD, with `access` (MEM_LOCAL_WRITE
 * for receive buffers and read sinks, 0 for gather). The PD's privileged
 * token accepts logical addresses inside a live LAM of the adapter.
 * Returns STATUS_SUCCESS and the host iovecs in SGE order (zero-length SGEs
 * dropped; one per SGE, or one per run of adjacent pages of a fast
 * registration), or STATUS_ACCESS_VIOLATION / STATUS_INVALID_PARAMETER, or
 * STATUS_IMPLEMENTATION_LIMIT when more than max_iov iovecs are needed.
 * iov NULL: the checks and the count only (niov may be NULL).
 */
NTSTATUS mem_map_local(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                       ULONG nsge, unsigned access, struct iovec *iov, int max_iov, int *niov);
/* mem_map_local with the table's lock held by the caller (mem_lock ..
 * mem_unlock), so that a transport checks and maps the SGEs of several
 * requests under one hold: every lock taken waits until the processor's
 * stores are done, which for a producer writing a ring the consumer has
 * just read means a cache-line round trip per lock (xp_shm.c). Nothing
 * else may be called while the lock is held. */
void mem_lock(struct mem_table *t);
void mem_unlock(struct mem_table *t);
NTSTATUS mem_map_local_locked(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                              ULONG nsge, unsigned access, struct iovec *iov, int max_iov, int *niov);
/* A receive's SGEs at its post (NdkReceive, NdkSrqReceive): their total
 * length, in *total, at most max_total octets (STATUS_INVALID_PARAMETER),
 * and each in writable memory of the PD (mem_map_local, MEM_LOCAL_WRITE). */
NTSTATUS mem_check_receive(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                           ULONG nsge, uint64_t max_total, uint64_t *total);
/* The same, with *gen as mem_check_posted gives it. */
NTSTATUS mem_check_receive_posted(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl,
                                  ULONG nsge, uint64_t max_total, uint64_t *total, uint64_t *gen);

/*
 * The checks of a post, made once (docs/shm.md, Small messages). A request's
 * local SGEs are checked when it is posted (mem_check_posted: mem_map_local
 * with MEM_AT_POST, checks only) and mapped again when a transport carries
 * it out, since the table may have changed in between (a deregistration,
 * an invalidation, a LAM released, a fast registration queued before it).
 * mem_check_posted also gives the table's generation when the answer can
 * be reused: each SGE is its own host iovec (a normal MR or the privileged
 * token; never a fast registration) and was checked in full. Every change
 * of the table moves the generation on, so while mem_map_posted finds it
 * unmoved the table is as it was at the post and mapping again would give
 * the same answer: it gives it without the lock or a lookup. It returns
 * false when the SGEs must be mapped again (gen 0, or the table changed):
 * the caller then calls mem_map_local as before, which refuses what the
 * change revoked.
 */
NTSTATUS mem_check_posted(struct mem_table *t, const struct ndk_pd_impl *pd, const NDK_SGE *sgl, ULONG nsge,
                          unsigned access, uint64_t *gen);
bool mem_map_posted(struct mem_table *t, uint64_t gen, const NDK_SGE *sgl, ULONG nsge, struct iovec *iov,
                    int max_iov, int *niov, NTSTATUS *st);
/* The table's generation now (acquire): a transport that maps a batch of
 * requests reads it once and gives it to mem_posted_iovs for each. */
uint64_t mem_generation(struct mem_table *t);
/* mem_map_posted with the generation read (now): while it equals gen
 * (never 0) the SGEs are their own iovecs, one each, zero-length ones
 * dropped, at most max_iov (else *st is STATUS_IMPLEMENTATION_LIMIT), as
 * mem_map_local gives them. */
static inline bool mem_posted_iovs(uint64_t gen, uint64_t now, const NDK_SGE *sgl, ULONG nsge, struct iovec *iov,
                                   int max_iov, int *niov, NTSTATUS *st)
{
    if (!gen || now != gen)
        return false;
    int n = 0;
    *niov = 0;
    for (ULONG i = 0; i < nsge; i++) {
        if (!sgl[i].Length)
            continue;
        if (n >= max_iov) {
            *st = STATUS_IMPLEMENTATION_LIMIT;
            return true;
        }
        iov[n++] = (struct iovec){sgl[i].VirtualAddress, sgl[i].Length};
    }
    *niov = n;
    *st = STATUS_SUCCESS;
    return true;
}

/*
 * Remote invalidation by an inbound Send with Invalidate (docs/rules.md
 * R21):
 * the STag must exist, be valid, belong to pd (a window: be bound to qp),
 * and be a fast-register MR or a window (never a normal MR: NdkSendAndInvalidate).
 * MEM_OK means it is now invalid.
 */
enum mem_err mem_invalidate_remote(struct mem_table *t, const struct ndk_pd_impl *pd,
                                   const struct ndk_qp_impl *qp, uint32_t stag);

/* ---- work requests executed in initiator-queue order by the QP ----
 * mem_check_* runs exactly once per request, last before it is queued: it
 * hands out the new token (the getters return it as soon as the post
 * returns). The QP keeps the MR/MW objects alive until mem_exec_* ran. */

/* NdkFastRegister's effect, applied when the request reaches the head of the
 * initiator queue. Returns STATUS_SUCCESS or the completion error. Every
 * page of the list must lie inside a live LAM of the adapter, when posted
 * and again when executed (STATUS_INVALID_PARAMETER otherwise). */
NTSTATUS mem_exec_fast_register(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG npages,
                                const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                PVOID base_va, ULONG flags);
NTSTATUS mem_exec_bind(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                       ULONG flags);
NTSTATUS mem_exec_invalidate(struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *mr_or_mw);

/* Inline (posting-time) checks of the same requests, so that argument errors
 * fail the post instead of completing in error (docs/behaviour.md,
 * Posting). */
NTSTATUS mem_check_fast_register(struct ndk_qp_impl *qp, NDK_MR *mr, ULONG npages,
                                 const NDK_LOGICAL_ADDRESS *pages, ULONG fbo, SIZE_T len,
                                 PVOID base_va, ULONG flags);
NTSTATUS mem_check_bind(struct ndk_qp_impl *qp, NDK_MR *mr, NDK_MW *mw, PVOID va, SIZE_T len,
                        ULONG flags);
NTSTATUS mem_check_invalidate(struct ndk_qp_impl *qp, NDK_OBJECT_HEADER *mr_or_mw);

/* NdkRead with RDMA_READ_LOCAL_INVALIDATE: invalidate the sink's token. */
NTSTATUS mem_invalidate_local_token(struct mem_table *t, const struct ndk_pd_impl *pd, uint32_t token);

/* ---- objects (mr.c, mw.c) ---- */
NTSTATUS ndk_create_mr(NDK_PD *pNdkPd, BOOLEAN FastRegister, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_MR **ppNdkMr);
NTSTATUS ndk_create_mw(NDK_PD *pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                       NDK_MW **ppNdkMw);
NTSTATUS ndk_build_lam(NDK_ADAPTER *pNdkAdapter, MDL *Mdl, SIZE_T Length,
                       NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext,
                       NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM, ULONG *pLAMSize, ULONG *pFBO);
/* A fast registration with a page no live LAM covers any more maps nothing
 * from then on: its tokens fail as invalid STags, remotely and locally. */
VOID ndk_release_lam(NDK_ADAPTER *pNdkAdapter, NDK_LOGICAL_ADDRESS_MAPPING *pNdkLAM);

#endif
