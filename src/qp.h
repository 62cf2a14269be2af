/*
 * qp.h - the queue pair's data path: initiator and receive queues (the QP
 * object's, qp.c), and the state of the iWARP transport that carries them
 * (transport.h; qp_iwarp.c): the transmit engine (DDP/RDMAP segmentation
 * into FPDUs, one gathering writev per batch) and the receive engine
 * (header first, then payload read straight into registered memory, or
 * copied there from a staging buffer that takes small FPDUs in bulk:
 * rx_stage.h).
 *
 * The iWARP engine moves bytes only through struct ndk_transport: a TCP
 * socket in production (connector.c), an in-memory pipe in the simulation
 * tests. The protocol decisions are the sans-IO codecs of wire/.
 *
 * Locks, in the order they may be taken: the engines' locks (each its
 * loop and the connection management of the connectors and listeners on
 * it; two at once in ascending engine index), the device lock (device-wide
 * state: object lifetimes, views, which connector holds a QP), the
 * device's live_lock (an engine moves an established connection's data
 * without the first two, docs/architecture.md, Threads and locks),
 * qp->rx_lock (the receive engine), qp->sq_lock (initiator queue and
 * transmit engine), qp->rq_lock (receive queue), a CQ's or SRQ's lock, the
 * memory table lock, the device's callback-queue lock. Posting threads take
 * only sq_lock or rq_lock (and what follows), never an engine's or the
 * device lock.
 */
#ifndef NDK_QP_H
#define NDK_QP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "cqsrq.h"
#include "mem.h"
#include "transport.h"
#include "rx_stage.h"
#include "stat.h"
#include "wire/ddp.h"

struct ndk_transport;
struct ndk_transport_ops {
    /* Non-blocking. Returns bytes moved, 0 for end of stream (readv), or
     * -errno (-EAGAIN: would block). */
    ssize_t (*readv)(struct ndk_transport *t, const struct iovec *iov, int n);
    ssize_t (*writev)(struct ndk_transport *t, const struct iovec *iov, int n);
    /* Ask to be called back (ndk_qp_on_writable) when writable again. */
    void (*want_write)(struct ndk_transport *t, bool on);
    /* Our FIN: nothing more will be written. */
    void (*shutdown_write)(struct ndk_transport *t);
    /* The data path found the stream unusable (Terminate sent or received,
     * protocol error, stream lost): the owner tears the connection down. */
    void (*failed)(struct ndk_transport *t, bool peer_reset);
    /* Optional: the largest ULPDU that fits the connection's MSS now (0:
     * unknown). TCP's MSS starts clamped to half the peer's first window
     * (32 KB on loopback) and grows with it, so the engine asks again every
     * MULPDU_RECHECK_OCTETS it sends and cuts its FPDUs to fit. */
    size_t (*mulpdu)(struct ndk_transport *t);
    /* Optional. paused: the receive engine waits for a posted receive, so
     * the owner stops watching for input and for the peer's FIN (errors
     * still wake it) until it is called with false. Any thread. Without
     * it, a Send that finds no receive ends the stream at once. */
    void (*pause_input)(struct ndk_transport *t, bool paused);
    /* Optional. leased: a busy poller reads this stream now, so the owner
     * stops waking its progress thread for input (errors and the peer's
     * FIN still wake it); false: it watches for input again. */
    void (*lease_input)(struct ndk_transport *t, bool leased);
    /* Optional, with pause_input. The engine paused while its staging
     * buffer (rx_stage.h) still held input the socket will not signal
     * again: the owner runs its input handler (ndk_qp_on_readable) now, as
     * if the stream were readable. Called on the first engine's thread
     * (ndk_qp_check_rx_waits), with every engine's lock held (the
     * owner's connection management is its engine's). */
    void (*input_pending)(struct ndk_transport *t);
};

struct ndk_transport {
    const struct ndk_transport_ops *ops;
    void *owner;
};

/* Kinds of initiator-queue requests. */
enum swqe_op { SWQE_SEND, SWQE_WRITE, SWQE_READ, SWQE_BIND, SWQE_FASTREG, SWQE_INVALIDATE };

struct ndk_swqe {
    void *ctx;
    uint8_t op;         /* enum swqe_op */
    uint8_t rdmap_op;   /* Send variants: RDMAP_OP_SEND... */
    bool done;          /* transmitted (or executed, or its read answered) */
    bool signalled;     /* a CQE is owed even on success (no SILENT_SUCCESS) */
    ULONG flags;
    ULONG nsge;
    ULONG total;        /* payload bytes */
    uint64_t sge_gen;   /* the memory table's generation the post's SGE check gave (mem_check_posted) */
    NDK_SGE sge[NDK_MAX_SGE];
    uint8_t *inline_data; /* INLINE: copied at post time (slot in qp->inline_pool) */
    uint64_t raddr;
    uint32_t rtoken;
    uint32_t inv_stag;
    NTSTATUS status;
    ULONG perr;
    /* FastRegister / Bind / Invalidate */
    NDK_MR *mr;
    NDK_MW *mw;
    NDK_OBJECT_HEADER *target;
    NDK_LOGICAL_ADDRESS *pages; /* copied at post time */
    ULONG npages, fbo;
    SIZE_T len;
    PVOID va;
};

/* An RDMA Read we issued and whose response is expected (ORQ). */
struct ndk_orq_entry {
    /* The zero-length Read RTR of connection set-up, no request's: a flag
     * of its own, since every 32-bit value of wqe is some request's index
     * (UINT32_MAX, the sentinel once, named the Read before the wrap). */
    bool rtr;
    uint32_t wqe;       /* initiator-queue index (free-running, qp_sq_idx) */
    uint32_t msn;       /* the Read Request's MSN on QN 1 */
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t received;
};

/* An inbound RDMA Read Request to answer (IRQ). */
struct ndk_irq_entry {
    struct rdmap_rreq rr;
    uint32_t sent;
};

/* Sized for one writev of up to 64 FPDUs (4 MiB on loopback, where an FPDU
 * holds 64 KiB) and for placing one FPDU: at most 17 pages of a
 * fast-registered region or the MEM_LOCAL_IOV_MAX pieces of a receive.
 * Every connected QP carries the few of struct ndk_qp_bufs; a batch of more
 * FPDUs takes struct ndk_tx_burst while it lasts (the idle cost of a
 * connection is budgeted: bench/README.md). */
#define TX_FPDU_MAX 64   /* FPDUs framed per batch */
#define MULPDU_RECHECK_OCTETS (1u << 20)
#define TX_IOV_MAX 256   /* iovecs per writev */
#define RX_IOV_MAX 64    /* placement iovecs for one FPDU */
_Static_assert(RX_IOV_MAX >= MEM_LOCAL_IOV_MAX, "an FPDU's part of a receive always fits");
#define TX_HDR_MAX (2 + DDP_HDR_MAX)
#define RX_HDR_MAX (2 + 70 + 4) /* a whole Terminate and its CRC are read as header */

/* Transmit staging (qp_tx.c): payloads of at most this many octets are
 * copied, with header, pad and CRC, so that FPDUs lie back to back and one
 * iovec carries many. Chosen by measurement with bench/datapath (README
 * there, "Staging"); a build may set others (-DNDK_TX_STAGE_THRESHOLD=...,
 * -DNDK_TX_STAGE_SIZE=0 for no staging). */
#ifndef NDK_TX_STAGE_THRESHOLD
#define NDK_TX_STAGE_THRESHOLD 1024
#endif
/* The largest staged FPDU: header, payload, pad (at most 3) and CRC. */
#define TX_STAGE_FPDU_MAX (TX_HDR_MAX + NDK_TX_STAGE_THRESHOLD + 8)
/* What a batch holds without struct ndk_tx_burst: a few FPDUs, one of them
 * referenced with its payload in the most pieces (batch_has_room keeps
 * room for that) and a few more, and one staged FPDU of the largest size
 * (or several smaller ones): a ping-pong's message, or a short chain,
 * costs no allocation. */
#define TX_FPDU_FEW 8
#define TX_IOV_FEW (MEM_LOCAL_IOV_MAX + 2 + 14)
#define TX_STAGE_FEW TX_STAGE_FPDU_MAX

enum qp_state { QP_IDLE, QP_RTS, QP_ERROR };
/* The receive engine: reading a header, reading a body (payload, pad, CRC),
 * reading and dropping whatever comes until the peer closes (after our
 * Terminate, or once the QP was flushed: nothing is placed any more, but
 * the peer's FIN must not stay stuck behind unread octets), or stopped for
 * good (the stream failed or ended). */
enum rx_state { RX_HDR, RX_BODY, RX_DISCARD, RX_DEAD };
/* After our Terminate, the octets dropped before the peer's FIN: beyond
 * this the peer is not closing, and the connection is reset. */
#define RX_DISCARD_MAX_OCTETS (64u << 20)

/* A message whose last octet is in the batch being written: done once it is. */
struct ndk_tx_end {
    uint32_t end;
    int kind;
    uint32_t idx;
};

/* The transmit and receive engines' working arrays, 6 KB that only the
 * iWARP engines use (qp_tx.c, qp_rx.c): ndk_qp_start allocates them, so
 * that a QP never connected (made ahead, or whose connection failed) is
 * smaller. The engines reach them through dp->bufs; the counts and offsets
 * into them stay in struct ndk_qp_dp, under the same locks. */
struct ndk_qp_bufs {
    /* transmit (sq_lock): a batch of the few (TX_FPDU_FEW, TX_IOV_FEW);
     * FPDUs from TX_FPDU_FEW on have their header and trailer in
     * struct ndk_tx_burst */
    struct iovec tx_iov[TX_IOV_FEW];          /* the batch being written */
    uint8_t tx_hdr[TX_FPDU_FEW][TX_HDR_MAX];  /* header, trailer of an FPDU */
    uint8_t tx_trl[TX_FPDU_FEW][8];           /* whose payload is referenced */
    uint32_t tx_fpdu_end[TX_FPDU_FEW];        /* octets of the batch up to each FPDU's end */
    struct ndk_tx_end tx_ends[TX_FPDU_FEW];   /* messages whose last octet is in the batch */
    uint8_t tx_stage[TX_STAGE_FEW];           /* small FPDUs whole, back to back */
    struct iovec tx_src[MEM_LOCAL_IOV_MAX];  /* the segmented message's payload, mapped */
    /* receive (rx_lock) */
    struct iovec rx_iov[RX_IOV_MAX];           /* where the FPDU's payload goes */
    struct iovec rx_msg_iov[MEM_LOCAL_IOV_MAX]; /* the untagged message's receive, mapped */
};

/* A batch of more FPDUs than the few (a burst: a chain of posts, a message
 * of many FPDUs, Read Responses) moves here, with a staging buffer of its
 * own for its further small FPDUs: taken as the batch outgrows struct
 * ndk_qp_bufs, given back when the transmit engine has nothing more to
 * write (qp_tx.c), so that an idle connection holds none. Without memory
 * for it the batch stays as it is and the next one carries the rest. */
struct ndk_tx_burst {
    struct iovec iov[TX_IOV_MAX];
    uint32_t fpdu_end[TX_FPDU_MAX];
    struct ndk_tx_end ends[TX_FPDU_MAX];
    uint8_t hdr[TX_FPDU_MAX - TX_FPDU_FEW][TX_HDR_MAX]; /* FPDUs TX_FPDU_FEW.. */
    uint8_t trl[TX_FPDU_MAX - TX_FPDU_FEW][8];
    uint8_t stage[]; /* tx_burst_stage octets */
};

struct ndk_qp_impl;

struct ndk_qp_dp {
    /* The engines' working arrays: NULL until ndk_qp_start, freed with the QP. */
    struct ndk_qp_bufs *bufs;
    /* Changed under sq_lock; atomic because NdkReceive reads it under
     * rq_lock alone (a receive posted to a QP in error is flushed). */
    _Atomic enum qp_state state;
    /* The transport attached while connected (transport.h); the ops stay
     * set once attached, xp_ctx is cleared when it detaches. */
    const struct ndk_xp_ops *xp;
    void *xp_ctx;
    /* iWARP: the byte stream under the FPDUs (NULL once stopped). */
    struct ndk_transport *tr;
    struct ndk_qp_impl *live_next, *live_prev; /* device's live list */
    struct ndk_qp_link on_rcq, on_icq; /* in its CQs' lists (on_icq unused when they are one) */
    bool live;
    /* Busy polling (device live_lock): input_leased while pollers read the
     * stream; lease_polled says one did since the progress thread last
     * looked, which ends the lease when it finds none (ndk_qp_age_leases). */
    bool input_leased;
    bool lease_polled;
    bool crc;
    uint32_t ird, ord;     /* effective (negotiated) */
    uint32_t irq_cap;      /* = ird: inbound Read Requests held at once */
    size_t mulpdu;
    size_t mulpdu_recheck;  /* octets to send before asking the transport again (sq_lock) */

    /* initiator queue (sq_lock) */
    pthread_mutex_t sq_lock;
    struct ndk_swqe *sq;
    uint32_t sq_head, sq_tx, sq_tail; /* oldest uncompleted, next to transmit, next free (free-running: qp_sq_idx) */
    uint32_t sq_count;
    uint8_t *inline_pool;
    uint32_t reads_out;    /* Read Requests sent and not answered */
    struct ndk_orq_entry *orq;
    uint32_t orq_head, orq_count, orq_cap; /* orq_head below orq_cap (wraps there) */
    /* Inbound Read Requests from irq_head: irq_count held, of which the
     * first irq_framed have their whole response framed in the batch being
     * written. A slot is free once its response's last octet went to TCP;
     * until then we hold it, and the IRD bounds what we hold. */
    struct ndk_irq_entry *irq;
    uint32_t irq_head, irq_count, irq_framed; /* irq_head below irq_cap (wraps there) */
    uint32_t msn_send, msn_read; /* next MSN to send on QN 0 / QN 1 */
    bool tx_gated;          /* responder: nothing goes out before the first FPDU arrives */
    bool tx_blocked;        /* the transport said EAGAIN: wait for writable */
    bool tx_fin_wanted;     /* NdkDisconnect: FIN once everything queued is out */
    bool tx_fin_sent;
    bool tx_dead;
    bool flushed;           /* NdkFlush on a connected QP: the connection stays, the QP is done */
    uint8_t term_buf[80];   /* a Terminate waiting to go out */
    uint8_t nudge_buf[20];  /* a zero-length RDMA Write (see ndk_qp_nudge) */
    size_t term_len;
    bool term_sent;
    /* the batch being written: its iovecs [tx_iov_off, tx_iov_cnt) are
     * still to go; FPDUs are appended while there is room, also to a
     * batch TCP has taken only part of. Its arrays (iovecs, FPDU ends,
     * message ends) are bufs' while tx_big is false, else tx_burst's. */
    int tx_iov_off, tx_iov_cnt;
    int tx_fpdus; /* FPDUs in the batch: their headers, trailers, ends */
    uint32_t tx_framed, tx_written;    /* octets of the batch framed, written */
    bool tx_big;
    struct ndk_tx_burst *tx_burst;     /* held while bursts go out, else NULL */
    size_t tx_burst_stage;             /* its staging buffer's size (0: none) */
    /* Small FPDUs whole (header, payload copy, pad, CRC), back to back, so
     * that one iovec carries many (qp_tx.c, ndk_tx_stage_threshold): in
     * bufs->tx_stage, then in tx_burst's once the batch moved there. */
    uint8_t *tx_stage;
    size_t tx_stage_cap, tx_stage_used;
    /* the message being segmented */
    int tx_cur;             /* 0 none, 1 SQ request sq_tx, 2 IRQ head */
    uint64_t tx_cur_off;
    int tx_src_n;           /* its payload's pieces in bufs->tx_src */
    /* messages whose last octet is in the batch (bufs->tx_ends): done
     * once it is written */
    int tx_nends;
    int tx_ends_done; /* tx_ends before this one are written and accounted */

    /* receive queue (rq_lock) */
    pthread_mutex_t rq_lock;
    struct ndk_rwqe *rq;
    uint32_t rq_head, rq_count; /* rq_head free-running: qp_rq_idx */
    struct ndk_srq_impl *srq;

    /* receive engine (rx_lock) */
    pthread_mutex_t rx_lock;
    enum rx_state rx_st;
    uint8_t rx_hdr[RX_HDR_MAX];
    size_t rx_have;
    uint16_t rx_ulpdu;
    size_t rx_hdr_len;
    struct ddp_hdr rx_h;
    size_t rx_payload, rx_payload_done;
    int rx_iov_n, rx_iov_off; /* bufs->rx_iov */
    uint8_t rx_trl[8];
    size_t rx_trl_need, rx_trl_have;
    uint8_t rx_pre[16];     /* the next FPDU's first octets, read with this one's trailer */
    size_t rx_pre_have;
    struct rx_stage rx_stage; /* small FPDUs come through here (rx_stage.h) */
    bool rx_small;          /* the last FPDU's payload was staged-size */
    uint32_t rx_crc;
    bool rx_first_seen;
    bool rx_eof;            /* the peer's FIN arrived at an FPDU boundary (or while dropping) */
    bool rx_over;           /* no more input will be read: end of stream, error, or discard limit */
    uint64_t rx_discard_left; /* RX_DISCARD: octets still allowed */
    uint32_t msn_send_expect, msn_read_expect;
    bool rx_rreq_queued;    /* Read Requests joined the IRQ in this input pass (qp_rx.c, rx_answer) */
    /* the untagged message being received */
    bool rx_msg_active;
    struct ndk_rwqe rx_wqe;
    bool rx_wqe_from_srq;
    uint64_t rx_msg_bytes;
    int rx_msg_iov_n;         /* bufs->rx_msg_iov */
    /* the tagged message being received */
    bool rx_tmsg_active;
    uint32_t rx_tmsg_stag;
    uint64_t rx_tmsg_to;
    NTSTATUS rx_fail_status; /* status for the receive that caused our Terminate */
    /* A Send found no receive (docs/behaviour.md, "Receiver not ready"):
     * the header stays in rx_hdr and input is paused until a receive comes
     * or rx_wait_until (loop_now_ms) passes; 0: no wait running. Changed
     * under rx_lock (and rx_waiting cleared by qp_live_remove without it,
     * while an engine may be reading: every access is atomic); posting
     * threads and the progress thread's check read them to resume the
     * input. The shared-memory transport keeps the deadline of its own
     * wait in rx_wait_until too (never rx_waiting), where NdkReceive can
     * look at it without the transport's context (xp_shm.c). */
    bool rx_waiting;
    uint64_t rx_wait_until;
    bool rx_wait_off;       /* ndk_qp_rx_give_up: no more waits (rx_lock) */
    uint32_t rx_term_ctrl;   /* control word of the Terminate the peer sent */

    /* Why the data path ended the connection: NDK_DISCONNECT_REASON_*, the
     * first one set wins; 0 while it has not (any thread, atomically). */
    ULONG end_reason;

    struct ndk_dp_stats st; /* what ndkstat shows (stat.h) */
};

/* ---- qp_iwarp.c: the iWARP transport, as the connector drives it ---- */
struct ndk_qp_impl;
/* The connection is established: attach the iWARP transport over this
 * stream (transport.h). Returns false when the read queues cannot be
 * allocated. */
bool ndk_qp_start(struct ndk_qp_impl *qp, struct ndk_transport *tr, bool crc, uint32_t ird,
                  uint32_t ord, size_t mulpdu, bool tx_gated);
/* Connection set-up used a Read RTR: as its sender, the first Read Request
 * MSN was taken and its zero-length response is due; as its receiver, the
 * next inbound Read Request has MSN 2. Call right after ndk_qp_start. */
void ndk_qp_read_rtr_sent(struct ndk_qp_impl *qp);
void ndk_qp_read_rtr_received(struct ndk_qp_impl *qp);
/* The stream failed (a Terminate either way, a protocol error, a broken
 * stream, a local failure): the owner resets the connection. Not after a
 * graceful end, nor because of NdkFlush, which leaves the connection up. */
bool ndk_qp_failed(struct ndk_qp_impl *qp);
/* Nothing more will be read from the stream (its end, an error, or the
 * discard limit after our Terminate). */
bool ndk_qp_rx_over(struct ndk_qp_impl *qp);
/* A read of the stream met the peer's FIN: the socket holds no octet
 * more, and none can come. */
bool ndk_qp_read_eof(struct ndk_qp_impl *qp);
/* Graceful end: FIN after everything queued is out. */
void ndk_qp_disconnect(struct ndk_qp_impl *qp);
/* The QP ended the stream with its own Terminate (sent, or still queued
 * behind other FPDUs): the owner lets the peer close first. */
bool ndk_qp_sent_term(struct ndk_qp_impl *qp);
/* Nothing queued or in flight on the initiator side (X1 "DMA finished"). */
bool ndk_qp_quiescent(struct ndk_qp_impl *qp);

/* ---- qp_fail.c: failing the iWARP connection ---- */
/*
 * The stream is unusable: our own check failed (send_term: queue the
 * Terminate naming the offender), or the peer's Terminate arrived (term is
 * its content, send_term false). Every outstanding request completes now;
 * the transport is shut down once the Terminate is out. rx_lock held.
 */
void qp_fatal(struct ndk_qp_impl *qp, const struct ddp_term *term, const uint8_t *offender,
              size_t offender_len, bool send_term);
/* The status a received Terminate gives the request it names. */
NTSTATUS ndk_status_from_term(uint8_t layer, uint8_t etype, uint8_t code);
/* The receive engine drops what comes from now on, at most limit octets
 * (rx_lock held). */
void qp_rx_discard_start(struct ndk_qp_dp *dp, uint64_t limit);

/* ---- qp_tx.c ---- */
/* Moves queued messages out while the transport accepts them. sq_lock held. */
void qp_tx_progress(struct ndk_qp_impl *qp);
/* Payloads of at most ndk_tx_stage_threshold octets are copied into the
 * transmit staging: bufs->tx_stage, and in a burst a buffer of at most
 * ndk_tx_stage_size octets (0: no staging at all), fixed at build time
 * (NDK_TX_STAGE_THRESHOLD, NDK_TX_STAGE_SIZE). */
extern const size_t ndk_tx_stage_threshold;
extern const size_t ndk_tx_stage_size;
/* The transmit engine's staging as the data path starts: the batch's own
 * (dp->bufs set, sq_lock held). */
void qp_tx_init(struct ndk_qp_dp *dp);
void ndk_qp_on_writable(struct ndk_qp_impl *qp);
/* Queues a Terminate (once) and marks the QP in error. sq_lock held. */
void qp_tx_terminate(struct ndk_qp_impl *qp, const uint8_t *ulpdu, size_t len);
/* Drops the rest of the batch after the FPDU being written (the stream
 * stays framed) and marks the requests it finished. sq_lock held. */
void qp_tx_cut_batch(struct ndk_qp_impl *qp);
/* Lets a gated responder send before the initiator's first FPDU. */
void ndk_qp_ungate(struct ndk_qp_impl *qp);
/* Sends a zero-length RDMA Write while nothing has arrived from the peer.
 * Linux siw 6.1 can miss whatever arrives right after its Reply (an RTR, or
 * the first message) until more bytes arrive (the interop harness README):
 * this is those bytes, and a zero-length tagged Write is never validated or
 * placed, so every peer ignores it. Returns false once nudging is pointless
 * (the peer was heard from, or the stream is over). */
bool ndk_qp_nudge(struct ndk_qp_impl *qp);

/* ---- qp_rx.c ---- */
/* Reads and processes what the transport has (bounded per call). Returns
 * false when the stream ended or failed. */
bool ndk_qp_on_readable(struct ndk_qp_impl *qp);
/* The same for busy pollers: skips the QP if its engine is busy elsewhere. */
void ndk_qp_try_readable(struct ndk_qp_impl *qp);
/* Receiver not ready (docs/behaviour.md): a Send that found no receive
 * pauses the stream's input (struct ndk_transport_ops, pause_input). The
 * device's progress thread looks every 10 ms while some QP waits
 * (ndk_device.rx_waits) at deadlines and SRQs; a receive posted to the QP
 * resumes its input at once (the transport's after_receive).
 * ndk_qp_rx_give_up ends a wait and allows no further one (NdkDisconnect,
 * a broken socket): the engine sends its Terminate when it next runs. */
void ndk_qp_check_rx_waits(struct ndk_device *dev);
void ndk_qp_rx_resume(struct ndk_qp_impl *qp);
void ndk_qp_rx_give_up(struct ndk_qp_impl *qp);
/* rx_lock held: starts (true) or ends the pause of the input. */
void qp_rx_pause(struct ndk_qp_impl *qp, bool on);

/* ---- qp.c, qp_post.c, qp_complete.c, qp_poll.c: the QP object, whatever
 * the transport ---- */
extern const NDK_QP_DISPATCH ndk_qp_dispatch;
/* The connection is going away: detach the transport (it is not called
 * for this QP once this returns), then complete every outstanding
 * request with STATUS_CANCELLED. */
void ndk_qp_stop(struct ndk_qp_impl *qp);
/* Flushes every outstanding request with STATUS_CANCELLED. */
void ndk_qp_flush_all(struct ndk_qp_impl *qp);
/* Why the data path ended the connection (NDK_DISCONNECT_REASON_*), or 0. */
ULONG ndk_qp_end_reason(struct ndk_qp_impl *qp);
/* Busy polling: makes the transports of the QPs completing into cq read
 * their input (transport.h, poll), and takes (or renews) their input
 * leases. */
void ndk_qp_busy_poll(struct ndk_cq_impl *cq);
/* cq was armed: its consumer is about to sleep, so the progress thread
 * watches its QPs' input again. */
void ndk_qp_end_leases(struct ndk_cq_impl *cq);
/* The progress thread, at most every millisecond while leases exist: ends
 * those no poller renewed since the last look, so a consumer that stopped
 * polling (without arming) still has its inbound Reads answered and its
 * data placed. */
void ndk_qp_age_leases(struct ndk_device *dev);
/* The iovecs covering [off, off+len) of src (a sub-range of a payload or a
 * receive buffer); -1 when more than max are needed or src is too short. */
int ndk_iov_slice(const struct iovec *src, int nsrc, uint64_t off, uint64_t len, struct iovec *dst,
                  int max);
/* Appends a completion; when the CQ overflows, the QP fails (its
 * transport is told: LOCAL_ERROR). */
void qp_push_cqe(struct ndk_qp_impl *qp, struct ndk_cq_impl *cq, const struct ndk_cqe *e);
/* e[0..n) in order, with the CQ's lock taken once. */
void qp_push_cqes(struct ndk_qp_impl *qp, struct ndk_cq_impl *cq, const struct ndk_cqe *e, size_t n);
/* Records why the data path ends the connection, unless a reason is set. */
void qp_set_end_reason(struct ndk_qp_impl *qp, ULONG reason);
/* Completion and error helpers for the transports in this directory. */
void qp_flush_sq(struct ndk_qp_impl *qp, NTSTATUS read_st, ULONG perr); /* sq_lock held */
void qp_flush_rq(struct ndk_qp_impl *qp);
/* A receive was posted to a QP in error: what the transport holds, then
 * the queue (no QP lock held). */
void qp_flush_receives(struct ndk_qp_impl *qp);
void qp_flush_rx_message(struct ndk_qp_impl *qp); /* rx_lock held */
/* The QP leaves RTS (rx_lock, sq_lock held); returns whether it was in RTS,
 * and then records reason. Nothing more is read. */
bool qp_enter_error(struct ndk_qp_impl *qp, ULONG reason);
/* ndk_qp_attach in two halves, for a transport that sets up its own state
 * under the same locks: rx_lock, sq_lock held; then qp_live_add unlocked. */
void qp_attach_locked(struct ndk_qp_impl *qp, const struct ndk_xp_ops *ops, void *ctx, uint32_t ird,
                      uint32_t ord);
void qp_live_add(struct ndk_qp_impl *qp);
void qp_live_remove(struct ndk_qp_impl *qp);

#endif
