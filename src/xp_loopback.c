/*
 * The in-memory loopback transport (xp_loopback.h, transport.h).
 *
 * Posted requests run in the posting thread once the post returned
 * (after_post), under the pair's lock, one at a time in each QP's queue
 * order: a Send is placed into the peer's oldest posted receive, a Write
 * into the peer's registered memory, a Read copies from it; Bind,
 * FastRegister and Invalidate take effect locally. Every access is checked
 * by the memory table of the QP it lands on, as the iWARP receive engine
 * checks an FPDU (docs/rules.md): a refused check ends the connection with
 * the statuses its Terminate would give (RFC 5040 section 7; the
 * requester's Sends and Writes were handed over and completed, its Read
 * gets the Terminate's status, the responder's receive the local one).
 *
 * Locks: the pair's lock, then the sq_locks of both QPs still joined, in
 * the pair's order (end[0]'s first), then the receive queue, CQ and memory
 * table locks (each a leaf). A request runs with both sq_locks held because
 * the peer's state (RTS or not) is what decides whether it places anything,
 * and that state changes under the peer's sq_lock (qp.h: NdkFlush, a close,
 * ndk_xp_fail): read under our lock alone, a peer flushed meanwhile would
 * still take a receive or memory. The fixed order keeps the two from ever
 * being taken the other way round. Errors are applied with no QP lock held
 * (ndk_xp_fail takes them).
 *
 * The pair is freed by the last of ndk_lo_disconnect and the posts running
 * it (lo_after_post): a post that found its QP joined may still be on its
 * way to the pair's lock when another thread disconnects.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "iov_copy.h"
#include "objects.h"
#include "xp_loopback.h"

/* Remote accesses are mapped and copied in pieces of at most this many
 * octets, so that one piece of a fast-registered region fits RX_IOV_MAX
 * iovecs (at most 17 pages), as one FPDU does. */
#define LO_PIECE (64u * 1024)

struct lo_end {
    struct ndk_qp_impl *qp; /* NULL once it left (ndk_qp_stop) */
    struct lo_end *peer;
    struct ndk_lo_pair *pair;
    bool rung; /* requests wait that were posted without DEFER (sq_lock) */
};

struct ndk_lo_pair {
    pthread_mutex_t lock;
    unsigned refs; /* ndk_lo_connect's, and one per lo_after_post running it (atomic) */
    struct lo_end end[2];
};

/* What a request did to the connection: nothing (ok), or a check on the
 * peer's side refused it (fatal). */
struct lo_outcome {
    bool fatal;
    bool read_pending;    /* a Read the peer will never answer: left outstanding */
    NTSTATUS read_status; /* fatal Read: the status its Terminate gives it */
};

static void lo_fatal(struct lo_outcome *o, const struct ddp_term *t)
{
    o->fatal = true;
    o->read_status = ndk_status_from_term(t->layer, t->etype, t->code);
}

/* The payload of a Send or Write, where the requester registered it. */
static NTSTATUS lo_source(struct ndk_qp_impl *qp, struct ndk_swqe *w, struct iovec *src, int *ns)
{
    *ns = 0;
    if (!w->total)
        return STATUS_SUCCESS;
    if (w->flags & NDK_OP_FLAG_INLINE) {
        src[0] = (struct iovec){w->inline_data, w->total};
        *ns = 1;
        return STATUS_SUCCESS;
    }
    return mem_map_local(qp->obj.ad->dev->mem, qp->pd, w->sge, w->nsge, 0, src, MEM_LOCAL_IOV_MAX, ns);
}

/* Copies len octets between local iovecs and (stag, to) of the peer,
 * checked by the peer's memory table for `access`: into the peer for
 * MEM_REMOTE_WRITE, out of it for MEM_REMOTE_READ. */
static enum mem_err lo_copy(struct ndk_qp_impl *peer, uint32_t stag, uint64_t to, uint64_t len,
                            unsigned access, const struct iovec *local, int nlocal)
{
    struct mem_table *mem = peer->obj.ad->dev->mem;
    enum mem_err e = mem_map_remote(mem, peer->pd, peer, stag, to, len, access, NULL, 0, NULL);
    for (uint64_t off = 0; e == MEM_OK && off < len; off += LO_PIECE) {
        uint64_t n = len - off < LO_PIECE ? len - off : LO_PIECE;
        struct iovec remote[RX_IOV_MAX], piece[MEM_LOCAL_IOV_MAX];
        int nr = 0;
        e = mem_map_remote(mem, peer->pd, peer, stag, to + off, n, access, remote, RX_IOV_MAX, &nr);
        int np = ndk_iov_slice(local, nlocal, off, n, piece, MEM_LOCAL_IOV_MAX);
        if (e != MEM_OK || np < 0)
            break;
        if (access == MEM_REMOTE_WRITE)
            ndk_iov_copy(remote, nr, piece, np);
        else
            ndk_iov_copy(piece, np, remote, nr);
    }
    return e;
}

/* The remote part of a Write (access MEM_REMOTE_WRITE: local is its
 * source) or a Read (MEM_REMOTE_READ: local is its sink) w: lo_copy with
 * the request's remote token, address and length. A refused check is
 * fatal, with the Terminate RFC 5040 gives the operation; false then. */
static bool lo_remote(struct lo_outcome *o, struct ndk_qp_impl *peer, const struct ndk_swqe *w,
                      unsigned access, const struct iovec *local, int nlocal)
{
    enum mem_err e = lo_copy(peer, w->rtoken, w->raddr, w->total, access, local, nlocal);
    if (e == MEM_OK)
        return true;
    struct ddp_term t;
    if (access == MEM_REMOTE_WRITE)
        ddp_term_for_write(ndk_xp_stag_fault(e), &t);
    else
        ddp_term_for_read_source(ndk_xp_stag_fault(e), &t);
    lo_fatal(o, &t);
    return false;
}

static NTSTATUS lo_write(struct ndk_qp_impl *qp, struct ndk_qp_impl *peer, struct ndk_swqe *w,
                         struct lo_outcome *o)
{
    struct iovec src[MEM_LOCAL_IOV_MAX];
    int ns;
    NTSTATUS st = lo_source(qp, w, src, &ns);
    if (st == STATUS_SUCCESS && peer)
        lo_remote(o, peer, w, MEM_REMOTE_WRITE, src, ns);
    return st;
}

static NTSTATUS lo_read(struct ndk_qp_impl *qp, struct ndk_qp_impl *peer, struct ndk_swqe *w,
                        struct lo_outcome *o)
{
    struct mem_table *mem = qp->obj.ad->dev->mem;
    struct iovec sink[MEM_LOCAL_IOV_MAX];
    int nsink = 0;
    NTSTATUS st = mem_map_local(mem, qp->pd, w->sge, w->nsge, MEM_LOCAL_WRITE, sink, MEM_LOCAL_IOV_MAX,
                                &nsink);
    if (st != STATUS_SUCCESS)
        return st;
    if (!peer) {
        o->read_pending = true;
        return STATUS_SUCCESS;
    }
    if (!lo_remote(o, peer, w, MEM_REMOTE_READ, sink, nsink))
        return STATUS_SUCCESS;
    if ((w->flags & NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE) && w->nsge)
        mem_invalidate_local_token(mem, qp->pd, w->sge[0].MemoryRegionToken);
    return STATUS_SUCCESS;
}

/* Places a Send into the peer's oldest receive. A failure there is the
 * peer's: its receive completes with the status, the connection ends. */
static NTSTATUS lo_send(struct ndk_qp_impl *qp, struct ndk_qp_impl *peer, struct ndk_swqe *w,
                        struct lo_outcome *o)
{
    struct iovec src[MEM_LOCAL_IOV_MAX], dst[MEM_LOCAL_IOV_MAX];
    int ns, nd = 0;
    NTSTATUS st = lo_source(qp, w, src, &ns);
    if (st != STATUS_SUCCESS || !peer)
        return st;
    struct ddp_term t;
    struct ndk_rwqe r;
    if (!ndk_xp_take_receive(peer, &r)) {
        ddp_term_set(&t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_NO_BUFFER, false);
        lo_fatal(o, &t);
        return STATUS_SUCCESS;
    }
    bool inv = rdmap_op(w->rdmap_op)->invalidate;
    bool se = rdmap_op(w->rdmap_op)->solicit;
    NTSTATUS rst = w->total > r.total ? STATUS_BUFFER_TOO_SMALL
                                      : mem_map_local(peer->obj.ad->dev->mem, peer->pd, r.sge, r.nsge,
                                                      MEM_LOCAL_WRITE, dst, MEM_LOCAL_IOV_MAX, &nd);
    if (rst == STATUS_SUCCESS) {
        ndk_iov_copy(dst, nd, src, ns);
        /* The STag goes before the receive completes (docs/rules.md R21). */
        if (inv && mem_invalidate_remote(peer->obj.ad->dev->mem, peer->pd, peer, w->inv_stag) != MEM_OK)
            rst = STATUS_ACCESS_VIOLATION;
    }
    ndk_xp_complete_receive(peer, r.ctx, rst, rst == STATUS_SUCCESS ? w->total : 0,
                            inv && rst == STATUS_SUCCESS, w->inv_stag, se);
    if (rst != STATUS_SUCCESS)
        o->fatal = true; /* the requester's Send was handed over: only the stream ends */
    return STATUS_SUCCESS;
}

/* Takes (on) or releases the sq_locks of the pair's QPs still joined, in
 * the pair's order. Pair lock held. */
static void lo_lock_queues(struct ndk_lo_pair *p, bool on)
{
    for (int k = 0; k < 2; k++) {
        struct ndk_qp_impl *qp = p->end[on ? k : 1 - k].qp;
        if (qp && on)
            pthread_mutex_lock(&qp->dp.sq_lock);
        else if (qp)
            pthread_mutex_unlock(&qp->dp.sq_lock);
    }
}

/* Runs the oldest waiting request of one side. Returns false when none. */
static bool lo_step(struct lo_end *end)
{
    struct ndk_qp_impl *qp = end->qp, *peer = end->peer->qp;
    if (!qp)
        return false;
    lo_lock_queues(end->pair, true);
    struct ndk_swqe *w = end->rung && qp->dp.state == QP_RTS ? ndk_xp_sq_next(qp) : NULL;
    if (!w) {
        end->rung = false;
        lo_lock_queues(end->pair, false);
        return false;
    }
    if (peer && peer->dp.state != QP_RTS)
        peer = NULL; /* flushed or failed: it places nothing any more */
    struct lo_outcome o = {.read_status = STATUS_CANCELLED};
    NTSTATUS st = w->op == SWQE_SEND    ? lo_send(qp, peer, w, &o)
                  : w->op == SWQE_WRITE ? lo_write(qp, peer, w, &o)
                  : w->op == SWQE_READ  ? lo_read(qp, peer, w, &o)
                                        : ndk_xp_exec_local(qp, w);
    if (w->op == SWQE_READ && (o.fatal || o.read_pending))
        ndk_xp_sq_taken(qp); /* completes when the connection fails */
    else
        ndk_xp_sq_finish(qp, st);
    lo_lock_queues(end->pair, false);
    if (o.fatal) {
        /* A Terminate condemns a request of ours only if it names a Read. */
        ndk_xp_fail(peer, NDK_DISCONNECT_REASON_TERMINATE_SENT, STATUS_CANCELLED, 0);
        ndk_xp_fail(qp, NDK_DISCONNECT_REASON_TERMINATE_RECEIVED,
                    w->op == SWQE_READ ? o.read_status : STATUS_CANCELLED, 0);
    }
    return true;
}

static void lo_run(struct ndk_lo_pair *p)
{
    pthread_mutex_lock(&p->lock);
    bool moved;
    do {
        moved = false;
        for (int i = 0; i < 2; i++)
            while (lo_step(&p->end[i]))
                moved = true;
    } while (moved);
    pthread_mutex_unlock(&p->lock);
}

/* ---- struct ndk_xp_ops ---- */

static void lo_doorbell(struct ndk_qp_impl *qp)
{
    struct lo_end *end = ndk_xp_ctx(qp);
    if (end)
        end->rung = true;
}

static void lo_put(struct ndk_lo_pair *p)
{
    if (__atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* The pair is found under sq_lock, while the QP is joined, and held by a
 * reference past it: once sq_lock is let go, ndk_lo_disconnect may stop
 * both QPs and drop its own reference (transport.h, after_post). */
static void lo_after_post(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    struct lo_end *end = ndk_xp_ctx(qp);
    struct ndk_lo_pair *p = end && end->rung ? end->pair : NULL;
    if (p)
        __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&qp->dp.sq_lock);
    if (p) {
        lo_run(p);
        lo_put(p);
    }
}

/* Requests run to completion when they run: nothing is in flight to drop
 * or to forget. */
static void lo_nothing_in_flight(struct ndk_qp_impl *qp)
{
    (void)qp;
}

static void lo_detach(struct ndk_qp_impl *qp, void *ctx)
{
    struct lo_end *end = ctx;
    (void)qp;
    pthread_mutex_lock(&end->pair->lock);
    end->qp = NULL;
    pthread_mutex_unlock(&end->pair->lock);
}

static const struct ndk_xp_ops lo_ops = {
    .name = "loopback",
    .doorbell = lo_doorbell,
    .after_post = lo_after_post, /* a Send runs its pair */
    .after_receive = lo_after_post, /* a receive lets a waiting Send on */
    .flush = lo_nothing_in_flight,
    .forget = lo_nothing_in_flight,
    .detach = lo_detach,
};

/* ---- connection ---- */

/* Marks an idle QP used (it is never connected again); false: not idle. */
static bool lo_claim(struct ndk_qp_impl *qp, bool claim)
{
    struct ndk_adapter_impl *ad = qp->obj.ad;
    pthread_mutex_lock(&ad->dev->lock);
    bool ok = !claim || (!qp->used && !qp->conn && !qp->obj.closing && qp->dp.state == QP_IDLE);
    if (ok)
        qp->used = claim;
    pthread_mutex_unlock(&ad->dev->lock);
    return ok;
}

struct ndk_lo_pair *ndk_lo_connect(struct ndk_qp_impl *a, struct ndk_qp_impl *b)
{
    struct ndk_lo_pair *p = a != b ? calloc(1, sizeof *p) : NULL;
    if (!p || !lo_claim(a, true)) {
        free(p);
        return NULL;
    }
    if (!lo_claim(b, true)) {
        lo_claim(a, false);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    p->refs = 1;
    struct ndk_qp_impl *qp[2] = {a, b};
    for (int i = 0; i < 2; i++)
        p->end[i] = (struct lo_end){.qp = qp[i], .peer = &p->end[1 - i], .pair = p};
    for (int i = 0; i < 2; i++)
        ndk_qp_attach(qp[i], &lo_ops, &p->end[i], NDK_MAX_IRD, NDK_MAX_ORD);
    return p;
}

void ndk_lo_disconnect(struct ndk_lo_pair *p)
{
    for (int i = 0; i < 2; i++) {
        pthread_mutex_lock(&p->lock);
        struct ndk_qp_impl *qp = p->end[i].qp;
        pthread_mutex_unlock(&p->lock);
        if (qp)
            ndk_qp_stop(qp); /* detaches: lo_detach */
    }
    lo_put(p);
}
