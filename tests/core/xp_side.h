/*
 * xp_side.h - what the transport white-box tests (test_loopback_xp.c,
 * test_loopback_race.c, test_shm_xp.c) share: one end of a connection
 * made by hand through the public dispatch on the "lo" adapter, without a
 * connector (the test joins two ends with ndk_lo_connect or
 * ndk_shm_connect): a PD, one CQ for both queues, a QP whose context is
 * the side itself, and a buffer registered as one MR with its local and
 * remote tokens.
 *
 * The tests differ in what the shape says: the adapter's open options,
 * the buffer's size, the depths, the inline size and the MR's access.
 * Header-only: each test is one translation unit.
 */
#ifndef NDK_TESTS_CORE_XP_SIDE_H
#define NDK_TESTS_CORE_XP_SIDE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndktest.h"
#include "objects.h"

struct side {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    UINT32 ltok, rtok;
    uint8_t *buf;
};

struct side_shape {
    const NDK_OPEN_OPTIONS *open; /* NULL: the defaults */
    size_t buf_len;               /* the registered buffer, page aligned, zeroed */
    ULONG cq_depth;
    ULONG rq_depth, sq_depth; /* the QP's queues */
    ULONG inline_len;
    ULONG mr_flags; /* NDK_MR_FLAG_* */
    bool qp_apart;  /* side_up makes no QP: the test makes each with side_qp_up */
};

/* The QP object behind the public one, for the transport's internals. */
static inline struct ndk_qp_impl *impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

/* The tests poll their CQ: a notification has nothing to do. */
static inline void side_cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

/* Makes s's QP, four SGEs each way, on its PD and CQ. */
static inline bool side_qp_up(struct side *s, const struct side_shape *sh)
{
    return s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, s, sh->rq_depth, sh->sq_depth, 4, 4, sh->inline_len,
                                        NULL, NULL, &s->qp) == STATUS_SUCCESS;
}

/* Makes a side of shape sh; false if any step fails (side_down then
 * releases what was made). */
static inline bool side_up(struct side *s, const struct side_shape *sh)
{
    MDL mdl = {0};
    memset(s, 0, sizeof *s);
    s->buf = aligned_alloc(4096, sh->buf_len);
    if (!s->buf)
        return false;
    memset(s->buf, 0, sh->buf_len);
    mdl.StartVa = s->buf;
    mdl.ByteCount = (ULONG)sh->buf_len;
    return ndk_open_adapter("lo", (NDK_VERSION){2, 1}, sh->open, &s->ad) == STATUS_SUCCESS &&
           s->ad->Dispatch->NdkCreatePd(s->ad, NULL, NULL, &s->pd) == STATUS_SUCCESS &&
           s->ad->Dispatch->NdkCreateCq(s->ad, sh->cq_depth, side_cq_notify, NULL, NULL, NULL, NULL, &s->cq) ==
               STATUS_SUCCESS &&
           (sh->qp_apart || side_qp_up(s, sh)) &&
           s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, NULL, NULL, &s->mr) == STATUS_SUCCESS &&
           s->mr->Dispatch->NdkRegisterMr(s->mr, &mdl, sh->buf_len, sh->mr_flags, NULL, NULL) == STATUS_SUCCESS &&
           (s->ltok = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr), true) &&
           (s->rtok = s->mr->Dispatch->NdkGetRemoteTokenFromMr(s->mr), true);
}

/* Closes what side_up (and side_qp_up) made, QP first, and clears s. */
static inline void side_down(struct side *s)
{
    if (s->qp)
        nt_close(s->qp);
    if (s->mr)
        nt_close(s->mr);
    if (s->cq)
        nt_close(s->cq);
    if (s->pd)
        nt_close(s->pd);
    if (s->ad)
        ndk_close_adapter(s->ad);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

/* One SGE of s's buffer, under its local token. */
static inline NDK_SGE sge(struct side *s, uint64_t off, ULONG len)
{
    return (NDK_SGE){.VirtualAddress = s->buf + off, .Length = len, .MemoryRegionToken = s->ltok};
}

#endif
