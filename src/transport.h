/*
 * transport.h - the interface between the QP object and the transport that
 * carries its operations to the peer.
 *
 * The QP object (qp.c) owns what NDKPI defines: the initiator queue of
 * posted requests (Send, Write, Read, Bind, FastRegister, Invalidate), the
 * receive queue (or the SRQ it draws from), the completion rules (one CQE
 * per accepted request, in posting order, STATUS_CANCELLED when flushed) and
 * the QP's state. A transport owns how operations reach the peer and how the
 * peer's operations land here. It is attached to a QP once a connection is
 * established (ndk_qp_attach) and detached when the connection goes
 * (ndk_qp_stop); in between the QP object calls it through struct
 * ndk_xp_ops, and it calls back through the ndk_xp_* functions below.
 *
 * Three transports exist:
 *   - iWARP over TCP (qp_iwarp.c, qp_tx.c, qp_rx.c): operations become FPDUs
 *     on a byte stream (RFC 5040, 5041, 5044); attached by the connector
 *     after the MPA negotiation (ndk_qp_start, qp.h).
 *   - in-memory loopback (xp_loopback.c): two QPs of this process joined
 *     directly; each operation executes against the peer's memory table at
 *     once. Used by tests.
 *   - shared memory (xp_shm.c, docs/shm.md): a QP of this process and one
 *     of another process on the same host, joined through rings in shared
 *     memory (ndk_shm_connect); the target checks and places.
 *
 * What a transport does with posted work:
 *   - The requests [sq_tx, sq_tail) of the QP's initiator ring (struct
 *     ndk_qp_dp in qp.h; free-running indexes, slot qp_sq_idx) are
 *     posted and not yet handed to the transport. The transport takes them
 *     in order: ndk_xp_sq_next returns the oldest, ndk_xp_sq_taken advances
 *     past it.
 *   - A request is finished when the transport says so: ndk_xp_sq_finish
 *     (status known now: a local operation, a failure before anything went
 *     out, a Write or Send handed over) or, for one taken earlier and
 *     finished later (a Read once its response is placed), setting
 *     w->status and w->done and calling ndk_xp_sq_complete. Completions are
 *     emitted in posting order whatever order requests finish in (RFC 5040
 *     section 5.5: a Send after an unanswered Read completes after it).
 *   - Local operations (Bind, FastRegister, Invalidate) put nothing on any
 *     wire: ndk_xp_exec_local applies their effect on the memory table when
 *     they reach the transport, in queue order.
 *   - Memory: every access goes through the memory table (mem.h) of the QP
 *     it happens on: mem_map_local for the initiator's SGEs and posted
 *     receives, mem_map_remote for a peer's tagged access (STag, offset,
 *     rights, PD, window binding), mem_invalidate_remote for Send with
 *     Invalidate. A refused check maps to a Terminate (ddp.h,
 *     ddp_term_for_write / ddp_term_for_read_source) and from there to the
 *     requester's status (ndk_status_from_term, qp.h): one mapping for every
 *     transport, so every transport fails a request the same way.
 *   - Inbound Sends take a posted receive (ndk_xp_take_receive) and complete
 *     it (ndk_xp_complete_receive). When there is none, iWARP waits for one
 *     (docs/behaviour.md, Receiver not ready): it pauses its stream's input
 *     and resumes it from after_post or from the device's 10 ms check
 *     (ndk_qp_check_rx_waits, qp.h); the loopback transport ends the
 *     connection at once (the Terminate's statuses), as iWARP does with
 *     NDK_OPEN_FLAG_NO_RECEIVE_GRACE.
 *   - A fatal error of the connection: ndk_xp_fail moves the QP to error
 *     and completes every outstanding request (the one a peer's error
 *     names gets its status, the rest STATUS_CANCELLED).
 *
 * Locks (qp.h lists the order): the QP object calls doorbell with sq_lock
 * held, flush and forget with rx_lock and sq_lock held (forget: sq_lock),
 * lease_input with the device's live_lock held, poll and after_post with
 * no lock (poll: from a CQ's busy poller, perhaps beside the engine and
 * a poller of the QP's other CQ; the QP stays attached until it returns,
 * qp_poll.c). ndk_xp_sq_* need sq_lock held; ndk_xp_take_receive takes the
 * receive queue's (or SRQ's) own lock; ndk_xp_complete_receive,
 * ndk_xp_rcv_* and ndk_xp_sq_complete only the CQ's (once per batch);
 * ndk_xp_fail takes rx_lock and sq_lock itself, so call it with neither
 * held.
 */
#ifndef NDK_TRANSPORT_H
#define NDK_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "cqsrq.h"
#include "mem.h"
#include "wire/ddp.h"

struct ndk_qp_impl;
struct ndk_swqe;
struct ndk_rwqe;

struct ndk_xp_ops {
    const char *name;
    /* Requests were posted without NDK_OP_FLAG_DEFER (or an inline failure
     * releases deferred ones, D4): take what can go now. sq_lock held; may
     * return with requests left for later (a full socket, an ORD limit). */
    void (*doorbell)(struct ndk_qp_impl *qp);
    /* Optional, both. A post returned its status and no QP lock is held:
     * a transport that cannot work under sq_lock (it needs the peer QP's
     * locks, say) does its work here. after_post follows the initiator
     * queue's posts (NdkSend..NdkInvalidate), after_receive NdkReceive's
     * (a receive for a Send that waits for one: iWARP resumes its input,
     * shared memory rings its engine); a transport with nothing to do
     * after one kind leaves it NULL, and those posts take sq_lock once.
     * Still inside the entry point: notifications they cause are queued as
     * that returns. Called after every successful post of their kind,
     * DEFER or not, and on a detached QP too (the transport checks its own
     * state). No lock is held, so detach (ndk_qp_stop, another thread) may
     * free the transport's context at any moment: find and use it only
     * under sq_lock, and touch nothing of it after letting go (xp_shm.c's
     * shm_after_receive only rings its eventfd for the engine, under the
     * lock). */
    void (*after_post)(struct ndk_qp_impl *qp);
    void (*after_receive)(struct ndk_qp_impl *qp);
    /* NdkFlush, on a QP that has had this transport (it may be in error
     * already, or detached): nothing more goes out but what must, to keep
     * the stream framed; nothing more is placed; the connection stays
     * (5.9.1). rx_lock and sq_lock held; the QP's state is still what it
     * was; the QP then leaves RTS and flushes its queues. */
    void (*flush)(struct ndk_qp_impl *qp);
    /* Every outstanding initiator request is being completed (flushed or
     * failed): drop what the transport holds about them (Reads in flight,
     * the message being sent, inbound Reads to answer). sq_lock held. */
    void (*forget)(struct ndk_qp_impl *qp);
    /* Optional. A consumer polls a CQ of this QP (busy polling): make
     * progress on input now, without waiting (trylocks only). No lock held. */
    void (*poll)(struct ndk_qp_impl *qp);
    /* Optional. on: busy pollers read the input now, stop waking the
     * progress thread for it; off: wake it again. Returns false when the
     * transport has no such distinction (no lease is taken). live_lock
     * held. */
    bool (*lease_input)(struct ndk_qp_impl *qp, bool on);
    /* Optional. The QP object failed the connection (one of its CQs
     * overflowed: LOCAL_ERROR): tear it down. Any QP lock may be held. */
    void (*local_error)(struct ndk_qp_impl *qp);
    /* Optional. The QP leaves the connection (ndk_qp_stop) and is about
     * to flush its queues: complete now, cancelled, the receives taken
     * from them that the transport still holds (a Send being placed, those
     * taken ahead for the Sends behind it), and place nothing more, so
     * that they complete before the queue's others (in posting order,
     * NdkReceive). rx_lock and sq_lock held; the QP's state is still what
     * it was. Also called, perhaps more than once, when a receive is
     * posted to a QP in error (the QP is in error then), which flushes the
     * queue: after local_error, say, the transport may still hold some. */
    void (*stop)(struct ndk_qp_impl *qp);
    /* Optional. The QP left the connection (ndk_qp_stop: it is being
     * closed, or its connection ends) and every request it had completed:
     * forget it; ctx is what ndk_qp_attach was given. The QP object calls
     * nothing more of this transport for it. The device lock may be held
     * (a QP closing); no QP lock is. */
    void (*detach)(struct ndk_qp_impl *qp, void *ctx);
};

/* Attaches a transport to a QP whose connection is established: the QP
 * goes to RTS (posting works), with ird/ord as negotiated (NdkRead needs
 * ord > 0). ctx is the transport's own per-connection state
 * (ndk_xp_ctx). Requests posted before are not possible (posting needs
 * RTS). */
void ndk_qp_attach(struct ndk_qp_impl *qp, const struct ndk_xp_ops *ops, void *ctx, uint32_t ird,
                   uint32_t ord);
void *ndk_xp_ctx(struct ndk_qp_impl *qp);

/* ---- the initiator queue (sq_lock held) ---- */
/* The oldest request not yet taken, or NULL. */
struct ndk_swqe *ndk_xp_sq_next(struct ndk_qp_impl *qp);
/* The request ndk_xp_sq_next returned is the transport's now. */
void ndk_xp_sq_taken(struct ndk_qp_impl *qp);
/* Takes the next request and finishes it with st at once. */
void ndk_xp_sq_finish(struct ndk_qp_impl *qp, NTSTATUS st);
/* Emits the completions of finished requests at the head, in order. */
void ndk_xp_sq_complete(struct ndk_qp_impl *qp);
/* Bind, FastRegister or Invalidate: applies its effect; returns its status. */
NTSTATUS ndk_xp_exec_local(struct ndk_qp_impl *qp, const struct ndk_swqe *w);

/* ---- the receive side (no QP lock needed) ---- */
/* Takes the oldest posted receive (the QP's queue or its SRQ); false: none. */
bool ndk_xp_take_receive(struct ndk_qp_impl *qp, struct ndk_rwqe *out);
/* The oldest n posted receives at most, in order, under one hold of the
 * receive queue's lock (one, from an SRQ, which other QPs share); returns
 * how many. For a transport that found n Sends waiting at once: what it
 * takes is theirs, and completes (or, flushed, is cancelled) before the
 * queue's others. */
unsigned ndk_xp_take_receives(struct ndk_qp_impl *qp, struct ndk_rwqe *out, unsigned n);
/* Completes a receive taken above. inv: a Send with Invalidate invalidated
 * `token`; se: the Send asked for a solicited event. */
void ndk_xp_complete_receive(struct ndk_qp_impl *qp, void *req_ctx, NTSTATUS st, ULONG bytes,
                             bool inv, uint32_t token, bool se);

/* Receive completions held back during one pass over the input and pushed
 * to the receive CQ together (ndk_xp_rcv_flush), so that its lock is taken
 * once per batch; they keep their order. The caller flushes before
 * anything else completes a receive of the QP (a flush, ndk_xp_fail).
 * Each is held as its CQE, built once. */
#define NDK_XP_RCV_BATCH 32
struct ndk_xp_rcv_batch {
    unsigned n;
    struct ndk_cqe e[NDK_XP_RCV_BATCH];
};
/* As ndk_xp_complete_receive, into b (a full batch is flushed first). */
void ndk_xp_rcv_add(struct ndk_qp_impl *qp, struct ndk_xp_rcv_batch *b, void *req_ctx, NTSTATUS st, ULONG bytes,
                    bool inv, uint32_t token, bool se);
void ndk_xp_rcv_flush(struct ndk_qp_impl *qp, struct ndk_xp_rcv_batch *b);

/* ---- errors ---- */
/* The fault class of a refused memory check, for ddp_term_for_write and
 * ddp_term_for_read_source (wire/ddp.h): the one mapping from the memory
 * table's verdicts to Terminate layer, type and code. */
enum ddp_stag_fault ndk_xp_stag_fault(enum mem_err e);
/* The connection failed: the QP goes to error (reason: an
 * NDK_DISCONNECT_REASON_*, kept if one was set before), the oldest
 * outstanding Read gets read_status unless that is STATUS_CANCELLED, every
 * other outstanding request STATUS_CANCELLED, with perr as
 * ProviderErrorCode. The transport is not called back. No QP lock held. */
void ndk_xp_fail(struct ndk_qp_impl *qp, ULONG reason, NTSTATUS read_status, ULONG perr);

#endif
