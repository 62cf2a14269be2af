/*
 * The shared-memory transport (xp_shm.h, transport.h; the design is
 * docs/shm.md): operations into ring messages (shm_ring.h), the target's
 * checks and placement, responses and Terminates. The operating system is
 * reached only through net/shm.h.
 *
 * Who runs what, and under which lock:
 *   - the initiator side: taking posted requests into the request ring
 *     (doorbell, and the progress below when room comes back) and reading
 *     the response ring run under the QP's sq_lock;
 *   - the target side: reading the request ring, checking and placing, and
 *     writing the response ring run under rx_lock;
 *   - the progress engine of the QP (its loop watches the eventfd the peer
 *     rings, serve()), or a busy poller, runs both, on those locks alone.
 *     Errors are applied afterwards with no QP lock held (ndk_xp_fail
 *     takes them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "net/shm.h"
#include "net/sys.h"
#include "iov_copy.h"
#include "objects.h"
#include "shm_ring.h"
#include "verify/verify.h"
#include "wire/term.h"
#include "xp_shm.h"

#define SHM_MAGIC 0x4E444B53u /* "NDKS" */
#define SHM_VERSION 4u
/* A tagged access is moved with one system call when our side of it maps
 * into RX_IOV_MAX iovecs (a normal MR's range is one iovec); a
 * fast-registered region's scattered pages are moved in pieces of at most
 * this many octets, which always fit, as one FPDU's do. */
#define SHM_PIECE (64u * 1024)
/* While a Send waits for a receive posted to an SRQ, the engine looks
 * again this often. */
#define SHM_RX_WAIT_POLL_MS 10
/* Passes one wake-up may run while the peer keeps publishing; then the
 * connection rings its own doorbell and lets the engine's other
 * connections have their turn. */
#define SHM_SERVE_PASSES 16
/* A single-copy Write or Read of at least this many octets is moved by
 * both sides' CPUs: the target moves the first half and grants the rest
 * to the initiator (docs/shm.md, Bandwidth; bench/shm measured 64 KiB
 * Writes and Reads 5 to 8 times faster split than not, 256 KiB ones as
 * much). */
#define SHM_SPLIT_MIN (64u * 1024)
/* Sends, Writes and Reads of at most this many octets go through the
 * rings (in pieces of SHM_PAYLOAD); larger ones by single copy. On a
 * quiet machine the rings moved 2 to 16 KiB 2 to 6 times faster than
 * process_vm_* (whose pinning of the peer's pages is a fixed cost per
 * call), and single copy won from 32 KiB on (docs/shm.md, Bandwidth). */
#define SHM_RING_MAX (16u * 1024)
/* Taking a grant back waits at most this long for the initiator's
 * transfer in progress to end. */
#define SHM_REVOKE_WAIT_MS 1000
/* Receives taken at once for a run of small Sends a pass finds published
 * (next_receive). */
#define SHM_AHEAD 32

struct shm_side_hdr {
    _Alignas(SHM_LINE) uint32_t armed; /* asleep: ring my eventfd to wake me */
    uint32_t left;                     /* SHM_LEFT_*: this side ended the connection */
    uint64_t probe_addr;               /* a word of this side's memory... */
    uint64_t probe_value;              /* ...holding this value (the CMA probe) */
    /* This side published into its rings at least once (set before it
     * first looks at its peer's armed flag): until then the peer reads no
     * ring, whose pages are then never touched (mapped, zeroed, freed)
     * for a connection that carries nothing. */
    uint32_t published;
};
enum { SHM_LEFT_NO, SHM_LEFT_CLOSED, SHM_LEFT_ABORTED };

struct shm_hdr {
    uint32_t magic, version, unit, units;
    struct shm_side_hdr side[2];
    /* The grant of split request id of side s's peer, (id << 32) | state
     * (SPLIT_*): side s (the target) grants and takes back, the
     * initiator moves its part and says how it went. */
    _Alignas(SHM_LINE) uint64_t split[2];
};
enum { SPLIT_GRANTED = 1, SPLIT_MOVING, SPLIT_DONE, SPLIT_FAILED, SPLIT_REVOKED };
_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR_BYTES, "the header fits its page");

/* The set-up messages over the UNIX socket. */
struct shm_hello {
    uint32_t magic, version;
    uint64_t region_bytes;
    uint32_t ok; /* reply and probe result: 1 yes, 0 no */
    uint32_t pad;
};

/* What a target needs only while Sends come in bursts, 11.9 KB: the
 * receives a run of small Sends takes ahead, in order, their buffers
 * mapped (iov from first[k], nv[k] of them, -1: not yet; status st[k])
 * under one hold of the memory table's lock (next_receive, ahead_map),
 * and the batch of the receive completions of a pass (receive_done),
 * empty between passes. */
struct shm_ahead {
    struct ndk_rwqe r[SHM_AHEAD];
    struct iovec iov[MEM_LOCAL_IOV_MAX];
    int first[SHM_AHEAD], nv[SHM_AHEAD];
    NTSTATUS st[SHM_AHEAD];
    struct ndk_xp_rcv_batch rcv;
};

struct shm_conn {
    struct ndk_qp_impl *qp;
    int me;
    struct shm_hdr *hdr;
    void *map;
    struct shm_ring req_out, resp_out, req_in, resp_in;
    pid_t peer;
    int bell, peer_bell, pidfd; /* my eventfd, the peer's, the peer's pidfd */
    bool copy;                  /* payloads through the rings (no process_vm_*) */
    uint64_t probe;             /* the word the peer probes */
    /* Served by the loop of the QP's engine: the eventfd, the peer's
     * pidfd and the ticker are watches whose handlers run without the
     * loop's lock (loop.h, loop_watch_set_unlocked). */
    struct loop *loop;
    struct loop_watch bell_watch, pidfd_watch, ticker_watch;
    int ticker;                 /* a timerfd: set while a Send waits for a receive; made then
                                 * (the engine's handlers), -1 before */
    bool ticking;               /* it is set (the engine's handlers only) */
    bool stop;                  /* detach: the handlers do nothing more (atomic) */
    bool dead;                  /* the connection failed or ended (atomic) */
    bool leased;                /* a busy poller reads the rings (atomic) */
    bool flushed;               /* NdkFlush: nothing more is placed (rx_lock and sq_lock) */
    bool peer_gone;             /* the peer's process ended: its pidfd said so to the engine
                                 * (on_peer_exit) or to a transfer (peer_move) (atomic) */
    /* initiator side (sq_lock) */
    uint64_t tx_off;            /* octets of the request at sq_tx already in the ring */
    uint32_t reads_out;
    ULONG term_reason, term_perr; /* a Terminate we took: how it ends the connection */
    bool tx_stalled;            /* requests wait for ring room or an ORD slot (atomic) */
    /* target side (rx_lock) */
    bool rs_active;             /* a Send being placed into *rs */
    struct ndk_rwqe *rs;        /* its receive: rs_one, or one of ahead */
    struct ndk_rwqe rs_one;
    const struct iovec *rs_iov; /* its buffers, mapped when it was taken ahead; NULL: map them */
    int rs_niov;
    NTSTATUS rs_mapped;         /* ...and that mapping's status */
    /* Receives taken ahead (next_receive): ahead->r[ahead_next, ahead_n)
     * wait for the Sends behind the one being placed. The block is
     * allocated by the first pass that takes receives ahead or completes
     * a second receive, and kept until the connection is freed
     * (conn_free): an idle connection, or one whose Sends come one at a
     * time, never holds it. NULL: not yet, or not to be had (each Send
     * then takes its own receive, which completes at once). */
    struct shm_ahead *ahead;
    uint32_t ahead_n, ahead_next;
    bool pass_received;         /* this pass completed a receive */
    NTSTATUS rs_status;
    uint64_t rs_got;
    uint64_t rs_total;          /* the length the Send's first piece announced */
    uint64_t rd_off;            /* octets of the Read at the head already answered */
    bool split_wait;            /* the request at the head waits for the initiator's part */
    uint32_t split_id;          /* ...that request */
    bool rx_kicked;             /* a posted receive rang our doorbell since the last pass (atomic) */
    /* set-up (ndk_shm_setup_*): the UNIX socket and the step reached */
    int sock;
    int step;                   /* enum setup_step */
    bool probe_ok;              /* we could read the peer's probe word */
    bool published;             /* our side's published flag is set (sq_lock or rx_lock: set once) */
    bool peer_published;        /* the peer's is (atomic) */
    /* the owner's hook: the connection ended on its own (any thread) */
    void (*ended)(void *arg);
    void *ended_arg;
};

/* What a pass found that ends the connection; applied with no lock held. */
struct shm_fail {
    bool fail;
    ULONG reason;
    NTSTATUS read_status;
    ULONG perr;      /* ProviderErrorCode: a Terminate's control word, as on TCP */
    bool peer_ended; /* a transfer found the peer's process ended (transfer_failed) */
};

static void fail_set(struct shm_fail *f, ULONG reason, NTSTATUS read_status)
{
    if (!f->fail)
        *f = (struct shm_fail){true, reason, read_status, 0, false};
}

static struct mem_table *qp_mem(struct ndk_qp_impl *qp)
{
    return qp->obj.ad->dev->mem;
}

/* A request's local SGEs as host iovecs: the post's check again when the
 * memory table did not change since (mem_map_posted: no lock, no lookup),
 * else mapped and checked again, as always. */
static NTSTATUS map_sges(struct ndk_qp_impl *qp, uint64_t gen, const NDK_SGE *sge, ULONG n, unsigned access,
                         struct iovec *iov, int max, int *nv)
{
    NTSTATUS st;
    if (mem_map_posted(qp_mem(qp), gen, sge, n, iov, max, nv, &st))
        return st;
    return mem_map_local(qp_mem(qp), qp->pd, sge, n, access, iov, max, nv);
}

/* The same within a batch: the table's generation is read once (*now,
 * mem_generation, by the caller) rather than per request, and its lock
 * taken (once, held by the caller until the batch is mapped: *locked)
 * only for a request whose post's check cannot be reused; *now is read
 * again under it, so each request is mapped as of a moment no earlier
 * than the one before, as when each read the generation itself. */
static NTSTATUS map_sges_batch(struct ndk_qp_impl *qp, uint64_t gen, uint64_t *now, const NDK_SGE *sge, ULONG n,
                               unsigned access, struct iovec *iov, int max, int *nv, bool *locked)
{
    NTSTATUS st;
    if (mem_posted_iovs(gen, *now, sge, n, iov, max, nv, &st))
        return st;
    if (!*locked) {
        mem_lock(qp_mem(qp));
        *now = mem_generation(qp_mem(qp));
    }
    *locked = true;
    return mem_map_local_locked(qp_mem(qp), qp->pd, sge, n, access, iov, max, nv);
}

/* ---- wake-ups (docs/shm.md, Wake-ups and threads) ---- */

/* After a publish (a sequentially consistent store of head, shm_ring.h):
 * a peer that armed before it is seen armed here, one that arms after it
 * sees the message when it looks once more. */
/* Publishes n units of ring r, ours; the first time, says so in the
 * header (shm_side_hdr.published) before the peer's armed flag is looked
 * at. */
static void publish(struct shm_conn *c, struct shm_ring *r, uint32_t n)
{
    shm_ring_publish(r, n);
    if (!__atomic_load_n(&c->published, __ATOMIC_RELAXED)) {
        __atomic_store_n(&c->hdr->side[c->me].published, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&c->published, true, __ATOMIC_RELAXED);
    }
}

/* Whether the peer ever published: until then its rings are not read. A
 * side that armed and then finds it unset is rung once it publishes. */
static bool peer_published(struct shm_conn *c)
{
    if (__atomic_load_n(&c->peer_published, __ATOMIC_RELAXED))
        return true;
    if (!__atomic_load_n(&c->hdr->side[1 - c->me].published, __ATOMIC_SEQ_CST))
        return false;
    __atomic_store_n(&c->peer_published, true, __ATOMIC_RELAXED);
    return true;
}

/* The head of an incoming ring, or 0 while the peer never published. */
static uint32_t in_head(struct shm_conn *c, struct shm_ring *r)
{
    return peer_published(c) ? __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST) : 0;
}

static void wake_peer(struct shm_conn *c)
{
    uint32_t *armed = &c->hdr->side[1 - c->me].armed;
    if (__atomic_load_n(armed, __ATOMIC_SEQ_CST) && __atomic_exchange_n(armed, 0, __ATOMIC_SEQ_CST))
        shm_os_doorbell_ring(c->peer_bell);
}

/* A consumer freed units (a sequentially consistent store of tail): a
 * producer that found the ring full is woken. */
static void space_freed(struct shm_conn *c, struct shm_ring *r)
{
    if (__atomic_load_n(&r->ctl->space_wanted, __ATOMIC_SEQ_CST) &&
        __atomic_exchange_n(&r->ctl->space_wanted, 0, __ATOMIC_SEQ_CST))
        shm_os_doorbell_ring(c->peer_bell);
}

/* Units of an incoming ring go back to its producer once per drained
 * batch (one store of tail, shm_ring.h), and every quarter ring within a
 * long one so that the producer can fill on behind us. */
static void give_back(struct shm_conn *c, struct shm_ring *r)
{
    if (shm_ring_release(r))
        space_freed(c, r);
}

/* The consumer is done with the message at the head of r. */
static void took(struct shm_conn *c, struct shm_ring *r, uint32_t *taken)
{
    shm_ring_take(r);
    ++*taken;
    if (r->mine - r->freed >= SHM_UNITS / 4)
        give_back(c, r);
}

/* Free units of an outgoing ring; with fewer than need, the consumer is
 * asked to wake us when it frees some (then we look once more, so units
 * freed in between are not missed). */
static uint32_t room_or_wait(struct shm_ring *r, uint32_t need)
{
    uint32_t room = shm_ring_room(r, need);
    if (room >= need)
        return room;
    __atomic_store_n(&r->ctl->space_wanted, 1, __ATOMIC_SEQ_CST);
    return shm_ring_room(r, need);
}

/* ---- single-copy transfers ---- */

/* Moves octets between our iovecs and the peer's memory (push: ours into
 * the peer's), unless the peer's process ended: -ESRCH then, and the
 * connection ends as when the engine sees its pidfd (end_with_peer).
 *
 * process_vm_readv/writev name the peer by pid, and a pid names whoever
 * holds it when the call is made: once the peer ended and was reaped
 * (waited for by its parent), the kernel may give its pid to a new
 * process, of our user even, whose memory the call would then read or
 * write. A pid is not handed out again before its process is reaped, and
 * the peer's pidfd (opened at set-up, of the very process that connected:
 * probe_peer) is readable from the moment it ends (pidfd_open(2)). So
 * the pidfd is looked at (look) right before the request's first system
 * call: it goes only to a process that had not ended a moment before.
 * What is left is that moment, and the rest of the request (the pieces of
 * a fast-registered range, tagged_move): within it the
 * peer would have to end, be reaped, and the kernel hand its pid out
 * again, which it does only after going round the whole pid space
 * (pid_max). Linux offers no closer check: these calls take no pidfd.
 * One look per request rather than per piece: a look is a poll(2) of
 * about 1 us on the shared test machine, a 64 KiB piece of scattered
 * 4 KiB pages 7 to 14 us (4.8 to 9 GB/s, docs/shm.md, Bandwidth). */
static int peer_move(struct shm_conn *c, bool push, bool look, const struct iovec *mine, int nm,
                     const struct iovec *theirs, int nt)
{
    if (look) {
        bool (*hook)(struct ndk_qp_impl *) =
            __atomic_load_n(&c->qp->obj.ad->dev->test_hooks.shm_peer_ended, __ATOMIC_ACQUIRE);
        if ((hook && hook(c->qp)) || shm_os_ended(c->pidfd)) {
            __atomic_store_n(&c->peer_gone, true, __ATOMIC_RELEASE);
            return -ESRCH;
        }
    }
    int r = push ? shm_os_push(c->peer, mine, nm, theirs, nt) : shm_os_pull(c->peer, mine, nm, theirs, nt);
    if (r == -ESRCH) /* it ended since: no process holds the pid */
        __atomic_store_n(&c->peer_gone, true, __ATOMIC_RELEASE);
    return r;
}

static void broken(struct shm_conn *c, struct shm_fail *f);

/* A transfer, or the message that names it, failed with err: the peer's
 * process ended (-ESRCH: its request stays where it is, what it published
 * before it counts, end_with_peer), or its memory could not be reached or
 * the message is malformed (broken). */
static void transfer_failed(struct shm_conn *c, int err, struct shm_fail *f)
{
    if (err != -ESRCH)
        broken(c, f);
    else if (!f->fail)
        *f = (struct shm_fail){true, NDK_DISCONNECT_REASON_ABORTED, STATUS_CANCELLED, 0, true};
}

/* ---- helpers ---- */

/* The initiator's (address, length) pairs of a single-copy message as
 * iovecs naming the peer's memory; -1 when malformed. */
static int peer_iovs(const struct shm_msg *h, const uint8_t *payload, struct iovec *out)
{
    if (h->niov > SHM_IOV_MAX || h->niov > MEM_LOCAL_IOV_MAX || h->len != h->niov * sizeof(struct shm_iov))
        return -1;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < h->niov; i++) {
        struct shm_iov p;
        memcpy(&p, payload + i * sizeof p, sizeof p);
        out[i] = (struct iovec){(void *)(uintptr_t)p.addr, (size_t)p.len};
        sum += p.len;
    }
    return sum == h->total ? (int)h->niov : -1;
}

/* ---- the target: checks and placement (rx_lock) ---- */

static bool ahead_block(struct shm_conn *c);

/* A receive of this pass completes. The receives of a pass go to the CQ
 * together (under one CQ lock: receives_flush, at the pass's end and
 * before it publishes a response) once the connection holds the block
 * that batches them, which the pass's second receive takes; without it
 * each completes at once, as the one receive of a ping-pong's pass does
 * in any case. */
static void receive_done(struct shm_conn *c, void *ctx, NTSTATUS st, ULONG bytes, bool inv, uint32_t token,
                         bool se)
{
    if (c->ahead || (c->pass_received && ahead_block(c)))
        ndk_xp_rcv_add(c->qp, &c->ahead->rcv, ctx, st, bytes, inv, token, se);
    else
        ndk_xp_complete_receive(c->qp, ctx, st, bytes, inv, token, se);
    c->pass_received = true;
}

static void receives_flush(struct shm_conn *c)
{
    if (c->ahead)
        ndk_xp_rcv_flush(c->qp, &c->ahead->rcv);
}

/* Publishes the next n filled response units. The receives this pass
 * completed so far go to the CQ first: an initiator whose Read behind
 * Sends completed finds their receives complete at the target, as on TCP,
 * where each receive completes before the next message is taken (the
 * Read's answer used to overtake the pass's batch). */
static void answer(struct shm_conn *c, uint32_t n)
{
    receives_flush(c);
    publish(c, &c->resp_out, n);
    void (*hook)(struct ndk_qp_impl *) =
        __atomic_load_n(&c->qp->obj.ad->dev->test_hooks.shm_answered, __ATOMIC_ACQUIRE);
    if (hook)
        hook(c->qp);
}

static void send_term(struct shm_conn *c, const struct shm_msg *req, const struct ddp_term *t)
{
    /* Room for this is always kept (take_requests, take_read). */
    uint32_t used = 0, need = shm_ring_cost(&c->resp_out, 0, 0);
    if (shm_ring_room(&c->resp_out, need) < need)
        return;
    struct shm_msg *m = shm_ring_put(&c->resp_out, &used, 0);
    m->type = SHM_RESP_TERM;
    m->flags = req ? SHM_F_NAMED : 0;
    m->id = req ? req->id : 0;
    m->term_layer = t->layer;
    m->term_etype = t->etype;
    m->term_code = t->code;
    answer(c, used);
}

static void respond(struct shm_conn *c, uint8_t type, uint32_t id, uint8_t flags)
{
    uint32_t used = 0;
    struct shm_msg *m = shm_ring_put(&c->resp_out, &used, 0);
    m->type = type;
    m->flags = flags;
    m->id = id;
    answer(c, used);
}

/* Our check refused the peer's request: the Terminate goes to the peer and
 * our QP fails as a receiving iWARP engine's does. */
static void refuse(struct shm_conn *c, const struct shm_msg *req, const struct ddp_term *t, struct shm_fail *f)
{
    send_term(c, req, t);
    fail_set(f, NDK_DISCONNECT_REASON_TERMINATE_SENT, STATUS_CANCELLED);
}

/* Moves len octets between (stag, to) of our memory, checked piece by
 * piece for access, and either the peer's iovecs (single copy: pulled or
 * pushed) or a buffer here (a message's payload). Returns MEM_OK or the
 * refused check; a transfer that failed sets *xfer_err (-errno). */
static enum mem_err tagged_move(struct shm_conn *c, uint32_t stag, uint64_t to, uint64_t len, unsigned access,
                                const struct iovec *peer, int npeer, uint8_t *buf, int *xfer_err)
{
    struct ndk_qp_impl *qp = c->qp;
    enum mem_err e = MEM_OK;
    bool pieces = false; /* the range needs more iovecs than RX_IOV_MAX */
    for (uint64_t off = 0, n; e == MEM_OK && off < len; off += n) {
        struct iovec mine[RX_IOV_MAX], theirs[MEM_LOCAL_IOV_MAX];
        int nm = 0;
        n = pieces && len - off > SHM_PIECE ? SHM_PIECE : len - off;
        e = mem_map_remote(qp_mem(qp), qp->pd, qp, stag, to + off, n, access, mine, RX_IOV_MAX, &nm);
        if (e == MEM_BOUNDS && n > SHM_PIECE) {
            /* Too many iovecs (or truly out of bounds: the piece's own
             * check says so again). */
            pieces = true;
            n = SHM_PIECE;
            e = mem_map_remote(qp_mem(qp), qp->pd, qp, stag, to + off, n, access, mine, RX_IOV_MAX, &nm);
        }
        if (e != MEM_OK)
            break;
        if (buf) {
            struct iovec b = {buf + off, (size_t)n};
            if (access == MEM_REMOTE_WRITE)
                ndk_iov_copy(mine, nm, &b, 1);
            else
                ndk_iov_copy(&b, 1, mine, nm);
            continue;
        }
        int nt = ndk_iov_slice(peer, npeer, off, n, theirs, MEM_LOCAL_IOV_MAX);
        int r = nt < 0 ? -EPROTO : peer_move(c, access != MEM_REMOTE_WRITE, off == 0, mine, nm, theirs, nt);
        if (r) {
            *xfer_err = r;
            break;
        }
    }
    return e;
}

/* The peer's memory could not be reached (it unmapped a registered
 * buffer, or the region is corrupt): the connection is broken. */
static void broken(struct shm_conn *c, struct shm_fail *f)
{
    struct ddp_term t;
    ddp_term_set(&t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_CATASTROPHIC, TERM_RO_CATASTROPHIC_STREAM, false);
    send_term(c, NULL, &t);
    fail_set(f, NDK_DISCONNECT_REASON_ABORTED, STATUS_CANCELLED);
}

/* The wait of a Send for a receive ends: one came, or (terminated) the
 * grace period passed. The NDK verifier reports the Send either way (rule
 * W10), as it does for the iWARP receive engine (qp_rx.c). */
static void rx_wait_ended(struct shm_conn *c, bool terminated)
{
    struct ndk_qp_impl *qp = c->qp;
    uint64_t until = __atomic_load_n(&c->qp->dp.rx_wait_until, __ATOMIC_RELAXED);
    if (qp->obj.verify) {
        uint64_t began = until - qp->obj.ad->opt.ReceiveGraceMs, now = loop_now_ms();
        ndk_verify_send_without_receive(qp, until && now > began ? now - began : 0, terminated);
    }
    /* Atomic: posting threads and the engine read it. */
    __atomic_store_n(&c->qp->dp.rx_wait_until, 0, __ATOMIC_RELAXED);
}

/* The initiator completes this Send or Write only when we acknowledge it
 * (SHM_RESP_ACK once its last piece is placed, or dropped by NdkFlush):
 * single copy (SHM_F_IOV, which is always the last piece) or carried in
 * pieces (SHM_F_ACK). */
static bool wants_ack(const struct shm_msg *h)
{
    return (h->flags & SHM_F_LAST) && (h->flags & (SHM_F_IOV | SHM_F_ACK));
}

/* A Send whose receive may be taken ahead: a whole small one in the
 * message. A Send with Invalidate ends a run (next_receive): a receive
 * behind it is mapped after its STag went, as when each is taken in turn. */
static bool small_send(const struct shm_msg *h)
{
    return h->type == SHM_REQ_SEND && (h->flags & (SHM_F_IOV | SHM_F_LAST)) == SHM_F_LAST && !h->off;
}

/* The ahead receives' buffers, mapped as mem_map_local maps each, their
 * posts' checks reused where the table did not change, else under one
 * hold of the memory table's lock (one that needs more iovecs than are
 * left is mapped when its Send comes). */
static void ahead_map(struct shm_conn *c)
{
    struct ndk_qp_impl *qp = c->qp;
    struct shm_ahead *a = c->ahead;
    int used = 0;
    bool locked = false;
    uint64_t now = mem_generation(qp_mem(qp));
    for (uint32_t k = 0; k < c->ahead_n; k++) {
        const struct ndk_rwqe *r = &a->r[k];
        int nv = 0;
        NTSTATUS st = map_sges_batch(qp, r->sge_gen, &now, r->sge, r->nsge, MEM_LOCAL_WRITE, a->iov + used,
                                     (int)MEM_LOCAL_IOV_MAX - used, &nv, &locked);
        if (st == STATUS_IMPLEMENTATION_LIMIT && used)
            nv = -1;
        a->first[k] = used;
        a->nv[k] = nv;
        a->st[k] = st;
        used += nv > 0 ? nv : 0;
    }
    if (locked)
        mem_unlock(qp_mem(qp));
}

/* The block of receives taken ahead (struct shm_ahead), allocated the
 * first time a run or a pass's second receive wants it; false when there
 * is no memory for it: this Send then takes its receive alone, as a Send
 * that starts no run does, its receive completes at once, and the next
 * one tries again (nothing is refused or lost for it: the block only
 * saves lock holds; tests/inject/test_inject_shm_sim.c). */
static bool ahead_block(struct shm_conn *c)
{
    if (!c->ahead && (c->ahead = malloc(sizeof *c->ahead)))
        c->ahead->rcv.n = 0;
    return c->ahead != NULL;
}

/* The receive for the Send h begins: when h starts a run of small Sends
 * (shm_ring_run), the receives of the whole run are taken under one hold
 * of the receive queue's lock and mapped under one of the memory table's,
 * instead of a hold of each per Send. They are the run's: the run is
 * published, and a pass that takes h takes the rest (no response ring
 * room is used up by them); only the connection's end (dead, a refused
 * check) leaves some, which drop_partial_send cancels before the queue's
 * others. NULL: no receive is posted. */
static struct ndk_rwqe *next_receive(struct shm_conn *c, const struct shm_msg *h)
{
    struct ndk_qp_impl *qp = c->qp;
    c->rs_iov = NULL;
    /* More than h published (h spans cur units): a run to look at. */
    if (c->ahead_next == c->ahead_n && c->req_in.theirs - c->req_in.mine > c->req_in.cur && small_send(h)) {
        uint32_t run = shm_ring_run(&c->req_in, SHM_AHEAD, SHM_REQ_SEND, SHM_F_IOV | SHM_F_LAST, SHM_F_LAST,
                                    SHM_F_INVALIDATE);
        c->ahead_next = c->ahead_n = 0;
        if (run > 1 && ahead_block(c))
            c->ahead_n = ndk_xp_take_receives(qp, c->ahead->r, run);
        if (c->ahead_n)
            ahead_map(c);
    }
    if (c->ahead_next < c->ahead_n) {
        struct shm_ahead *a = c->ahead;
        uint32_t k = c->ahead_next++;
        if (a->nv[k] >= 0) {
            c->rs_iov = a->iov + a->first[k];
            c->rs_niov = a->nv[k];
            c->rs_mapped = a->st[k];
        }
        return &a->r[k];
    }
    return ndk_xp_take_receive(qp, &c->rs_one) ? &c->rs_one : NULL;
}

enum send_begun { SEND_BEGUN, SEND_WAITS, SEND_ENDED };

/* The first piece of a Send: it takes its receive, or waits for one
 * within the receive grace (NDK_OPEN_OPTIONS ReceiveGraceMs), or, when
 * none comes, is refused as the iWARP path refuses it (DDP untagged
 * buffer error "Invalid MSN - no buffer available", RFC 5040 7.2). */
static enum send_begun begin_send(struct shm_conn *c, const struct shm_msg *h, struct shm_fail *f)
{
    struct ndk_qp_impl *qp = c->qp;
    if (h->off != 0) {
        broken(c, f);
        return SEND_ENDED;
    }
    struct ndk_rwqe *r = next_receive(c, h);
    if (!r) {
        const NDK_OPEN_OPTIONS *o = &qp->obj.ad->opt;
        uint64_t now = loop_now_ms();
        uint64_t until = qp->dp.rx_wait_until;
        /* No wait after NdkDisconnect (ndk_qp_rx_give_up, rx_lock):
         * no receive will come, the Terminate goes now. */
        bool may_wait = !(o->Flags & NDK_OPEN_FLAG_NO_RECEIVE_GRACE) && !qp->dp.rx_wait_off;
        if (!until && may_wait) {
            /* Atomic: posting threads and the engine read it. */
            __atomic_store_n(&c->qp->dp.rx_wait_until, now + o->ReceiveGraceMs, __ATOMIC_RELAXED);
            return SEND_WAITS;
        }
        if (until && now < until && may_wait)
            return SEND_WAITS;
        rx_wait_ended(c, true);
        struct ddp_term t;
        ddp_term_set(&t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_NO_BUFFER, false);
        refuse(c, h, &t, f);
        return SEND_ENDED;
    }
    if (qp->dp.rx_wait_until)
        rx_wait_ended(c, false);
    c->rs = r;
    c->rs_active = true;
    c->rs_got = 0;
    c->rs_total = h->total;
    c->rs_status = h->total > r->total ? STATUS_BUFFER_TOO_SMALL : STATUS_SUCCESS;
    return SEND_BEGUN;
}

/* One piece of the Send into its receive (pulled from the peer's memory,
 * or copied from the ring), or only counted when the receive failed
 * already. 0, or -EPROTO: the peer's message does not fit what it
 * announced, or the pull's error (transfer_failed). */
static int place_send_piece(struct shm_conn *c, const struct shm_msg *h, const uint8_t *payload)
{
    struct ndk_qp_impl *qp = c->qp;
    struct iovec mapped[MEM_LOCAL_IOV_MAX], piece[MEM_LOCAL_IOV_MAX], src[MEM_LOCAL_IOV_MAX];
    const struct iovec *dst = mapped;
    int nd = 0;
    if (c->rs_status == STATUS_SUCCESS && c->rs_iov) {
        c->rs_status = c->rs_mapped;
        dst = c->rs_iov;
        nd = c->rs_niov;
    } else if (c->rs_status == STATUS_SUCCESS) {
        c->rs_status = map_sges(qp, c->rs->sge_gen, c->rs->sge, c->rs->nsge, MEM_LOCAL_WRITE, mapped,
                                MEM_LOCAL_IOV_MAX, &nd);
    }
    if (c->rs_status != STATUS_SUCCESS) {
        c->rs_got += (h->flags & SHM_F_IOV) ? h->total : h->len;
        return 0;
    }
    if (h->flags & SHM_F_IOV) {
        int ns = peer_iovs(h, payload, src);
        int np = ns < 0 ? -1 : ndk_iov_slice(dst, nd, 0, h->total, piece, MEM_LOCAL_IOV_MAX);
        int r = np < 0 ? -EPROTO : peer_move(c, false, true, piece, np, src, ns);
        if (r)
            return r;
        c->rs_got = h->total;
    } else if (h->off == 0 && nd && dst[0].iov_len >= h->len) {
        memcpy(dst[0].iov_base, payload, h->len); /* a small Send: its receive's first buffer holds it */
        c->rs_got += h->len;
    } else {
        int np = ndk_iov_slice(dst, nd, h->off, h->len, piece, MEM_LOCAL_IOV_MAX);
        struct iovec b = {(void *)payload, h->len};
        if (np >= 0)
            ndk_iov_copy(piece, np, &b, 1);
        c->rs_got += h->len;
    }
    return 0;
}

/* The Send's last piece is placed: the receive completes, with the
 * Terminate the iWARP path would send when it failed. */
static void end_send(struct shm_conn *c, const struct shm_msg *h, struct shm_fail *f)
{
    struct ndk_qp_impl *qp = c->qp;
    struct ddp_term t;
    bool inv = h->flags & SHM_F_INVALIDATE;
    NTSTATUS st = c->rs_status;
    /* The STag goes before the receive completes (docs/rules.md R21). */
    if (st == STATUS_SUCCESS && inv && mem_invalidate_remote(qp_mem(qp), qp->pd, qp, h->stag) != MEM_OK)
        st = STATUS_ACCESS_VIOLATION;
    c->rs_active = false;
    receive_done(c, c->rs->ctx, st, st == STATUS_SUCCESS ? (ULONG)h->total : 0, inv && st == STATUS_SUCCESS,
                 h->stag, h->flags & SHM_F_SOLICIT);
    if (st == STATUS_SUCCESS) {
        if (wants_ack(h))
            respond(c, SHM_RESP_ACK, h->id, SHM_F_LAST);
        return;
    }
    if (st == STATUS_BUFFER_TOO_SMALL)
        ddp_term_set(&t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_TOO_LONG, false);
    else if (st == STATUS_ACCESS_VIOLATION && inv)
        ddp_term_set(&t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_CANT_INVALIDATE, false);
    else
        ddp_term_set(&t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_CATASTROPHIC, TERM_RO_CATASTROPHIC_STREAM, false);
    refuse(c, h, &t, f);
}

/* A Send (or a piece of one). Returns false when it must wait for a
 * receive (it stays at the head of the ring). */
static bool take_send(struct shm_conn *c, const struct shm_msg *h, const uint8_t *payload, struct shm_fail *f)
{
    if (!c->rs_active) {
        enum send_begun b = begin_send(c, h, f);
        if (b != SEND_BEGUN)
            return b == SEND_ENDED;
    }
    /* Every piece names the length the receive was checked against: a
     * peer that grows it later would be placed past the receive's end. */
    int e = h->off != c->rs_got || h->total != c->rs_total || h->total > UINT32_MAX || h->off + h->len > h->total
                ? -EPROTO
                : place_send_piece(c, h, payload);
    if (e) {
        transfer_failed(c, e, f);
        return e != -ESRCH; /* an ended peer's Send stays, its receive is cancelled */
    }
    if (!(h->flags & SHM_F_LAST))
        return true;
    if (c->rs_got != h->total) {
        broken(c, f);
        return true;
    }
    end_send(c, h, f);
    return true;
}

static void put_iovs(struct shm_msg *m, const struct iovec *v, int n);

static uint64_t split_word(uint32_t id, uint32_t state)
{
    return (uint64_t)id << 32 | state;
}

/* A large single-copy Write or Read, its whole range checked, moved by
 * both CPUs: the octets from s on are granted to the initiator (our
 * iovecs), which moves them itself, while we move the first s between
 * our memory and the peer's iovecs. False when it cannot be split (a
 * range of scattered pages, no room for the grant): the caller moves the
 * whole. */
static bool split_start(struct shm_conn *c, const struct shm_msg *h, unsigned access, const struct iovec *peer,
                        int npeer, int *xerr)
{
    struct ndk_qp_impl *qp = c->qp;
    struct iovec mine[RX_IOV_MAX], part[RX_IOV_MAX], theirs[MEM_LOCAL_IOV_MAX];
    int nm = 0;
    uint64_t s = (h->total / 2) & ~(uint64_t)4095;
    if (mem_map_remote(qp_mem(qp), qp->pd, qp, h->stag, h->to, h->total, access, mine, RX_IOV_MAX, &nm) != MEM_OK)
        return false;
    int ng = ndk_iov_slice(mine, nm, s, h->total - s, part, (int)SHM_IOV_MAX);
    /* The grant, our answer and a Terminate's unit. */
    uint32_t need = ng < 0 ? 0 : shm_ring_cost(&c->resp_out, 0, (uint32_t)(ng * sizeof(struct shm_iov))) + 2;
    if (!s || ng < 0 || shm_ring_room(&c->resp_out, need) < need)
        return false;
    uint32_t used = 0;
    struct shm_msg *m = shm_ring_put(&c->resp_out, &used, (uint32_t)(ng * sizeof(struct shm_iov)));
    m->type = SHM_RESP_GRANT;
    m->id = h->id;
    m->off = s;
    m->total = h->total - s;
    put_iovs(m, part, ng);
    __atomic_store_n(&c->hdr->split[c->me], split_word(h->id, SPLIT_GRANTED), __ATOMIC_SEQ_CST);
    c->split_id = h->id;
    __atomic_store_n(&c->split_wait, true, __ATOMIC_RELAXED);
    answer(c, used);
    wake_peer(c);
    int nmy = ndk_iov_slice(mine, nm, 0, s, part, RX_IOV_MAX);
    int nt = ndk_iov_slice(peer, npeer, 0, s, theirs, MEM_LOCAL_IOV_MAX);
    *xerr = nmy < 0 || nt < 0 ? -EFAULT : peer_move(c, access != MEM_REMOTE_WRITE, true, part, nmy, theirs, nt);
    return true;
}

/* A split request at the head: answered once the initiator says it moved
 * its part. Nothing behind it is taken before (a Send with Invalidate
 * behind a Read finds the source read, one behind a Write finds it
 * placed). False: not yet. */
static bool split_done(struct shm_conn *c, const struct shm_msg *h, bool write, struct shm_fail *f)
{
    uint64_t word = __atomic_load_n(&c->hdr->split[c->me], __ATOMIC_ACQUIRE);
    if (word != split_word(h->id, SPLIT_DONE) && word != split_word(h->id, SPLIT_FAILED))
        return false;
    __atomic_store_n(&c->split_wait, false, __ATOMIC_RELAXED);
    if (word == split_word(h->id, SPLIT_FAILED))
        broken(c, f);
    else if (write)
        respond(c, SHM_RESP_ACK, h->id, SHM_F_LAST);
    else
        respond(c, SHM_RESP_READ, h->id, SHM_F_LAST | SHM_F_IOV);
    return true;
}

/* The grant of a split request goes back (the connection ends, NdkFlush,
 * detach): from then on the initiator never moves an octet into or out of
 * our memory. A part it is moving now is waited for, bounded. rx_lock. */
static void split_revoke(struct shm_conn *c)
{
    if (!__atomic_load_n(&c->split_wait, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&c->split_wait, false, __ATOMIC_RELAXED);
    uint64_t *word = &c->hdr->split[c->me];
    uint64_t granted = split_word(c->split_id, SPLIT_GRANTED);
    if (__atomic_compare_exchange_n(word, &granted, split_word(c->split_id, SPLIT_REVOKED), false,
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
        return;
    if (shm_os_wait_while(word, split_word(c->split_id, SPLIT_MOVING), c->pidfd, SHM_REVOKE_WAIT_MS) == -ETIMEDOUT)
        NDK_LOG(NDK_LL_ERROR, NDK_LC_DP, &c->qp->obj,
                "shared memory: the peer did not finish moving a granted part in %d ms", SHM_REVOKE_WAIT_MS);
}

/* A Write. Returns false while a split Write waits for the initiator's
 * part (it stays at the head). */
static bool take_write(struct shm_conn *c, const struct shm_msg *h, const uint8_t *payload, struct shm_fail *f)
{
    if (c->split_wait)
        return split_done(c, h, true, f);
    struct ndk_qp_impl *qp = c->qp;
    struct iovec src[MEM_LOCAL_IOV_MAX];
    int ns = 0, xerr = 0;
    if ((h->flags & SHM_F_IOV) && (ns = peer_iovs(h, payload, src)) < 0) {
        broken(c, f);
        return true;
    }
    if (!(h->flags & SHM_F_IOV) && (h->off > h->total || h->len > h->total - h->off)) {
        broken(c, f);
        return true;
    }
    enum mem_err e = MEM_OK;
    /* The whole message's range is checked before its first octet lands,
     * as the receive engine checks a tagged FPDU. */
    if (h->off == 0)
        e = mem_map_remote(qp_mem(qp), qp->pd, qp, h->stag, h->to, h->total, MEM_REMOTE_WRITE, NULL, 0, NULL);
    if (e == MEM_OK && (h->flags & SHM_F_IOV) && h->total >= SHM_SPLIT_MIN &&
        split_start(c, h, MEM_REMOTE_WRITE, src, ns, &xerr)) {
        if (xerr) {
            transfer_failed(c, xerr, f); /* the grant goes back as the connection ends */
            return xerr != -ESRCH;
        }
        return split_done(c, h, true, f);
    }
    if (e == MEM_OK)
        e = (h->flags & SHM_F_IOV)
                ? tagged_move(c, h->stag, h->to, h->total, MEM_REMOTE_WRITE, src, ns, NULL, &xerr)
                : tagged_move(c, h->stag, h->to + h->off, h->len, MEM_REMOTE_WRITE, NULL, 0, (uint8_t *)payload,
                              &xerr);
    if (e != MEM_OK) {
        struct ddp_term t;
        ddp_term_for_write(ndk_xp_stag_fault(e), &t);
        refuse(c, h, &t, f);
    } else if (xerr) {
        transfer_failed(c, xerr, f);
        return xerr != -ESRCH; /* an ended peer's Write stays */
    } else if (wants_ack(h)) {
        respond(c, SHM_RESP_ACK, h->id, SHM_F_LAST);
    }
    return true;
}

/* A Read Request. Returns false when the response ring filled up before
 * the whole answer went (it stays at the head, c->rd_off says how far),
 * or while a split Read waits for the initiator's part. */
static bool take_read(struct shm_conn *c, const struct shm_msg *h, const uint8_t *payload, struct shm_fail *f)
{
    struct ndk_qp_impl *qp = c->qp;
    struct ddp_term t;
    if (c->split_wait)
        return split_done(c, h, false, f);
    if (c->rd_off == 0) {
        enum mem_err e =
            mem_map_remote(qp_mem(qp), qp->pd, qp, h->stag, h->to, h->total, MEM_REMOTE_READ, NULL, 0, NULL);
        if (e != MEM_OK) {
            ddp_term_for_read_source(ndk_xp_stag_fault(e), &t);
            refuse(c, h, &t, f);
            return true;
        }
    }
    if (h->flags & SHM_F_IOV) {
        struct iovec sink[MEM_LOCAL_IOV_MAX];
        int ns = peer_iovs(h, payload, sink), xerr = 0;
        if (ns >= 0 && h->total >= SHM_SPLIT_MIN && split_start(c, h, MEM_REMOTE_READ, sink, ns, &xerr)) {
            if (xerr) {
                transfer_failed(c, xerr, f); /* the grant goes back as the connection ends */
                return xerr != -ESRCH;
            }
            return split_done(c, h, false, f);
        }
        enum mem_err e = ns < 0 ? MEM_OK
                                : tagged_move(c, h->stag, h->to, h->total, MEM_REMOTE_READ, sink, ns, NULL, &xerr);
        if (ns < 0) {
            broken(c, f);
        } else if (xerr) {
            transfer_failed(c, xerr, f);
            return xerr != -ESRCH; /* an ended peer's Read stays */
        } else if (e != MEM_OK) {
            ddp_term_for_read_source(ndk_xp_stag_fault(e), &t);
            refuse(c, h, &t, f);
        } else {
            respond(c, SHM_RESP_READ, h->id, SHM_F_LAST | SHM_F_IOV);
        }
        return true;
    }
    /* Copied through the ring: one response message per piece, and a
     * unit kept for a Terminate. */
    do {
        uint32_t n = h->total - c->rd_off < SHM_PAYLOAD ? (uint32_t)(h->total - c->rd_off) : SHM_PAYLOAD;
        uint32_t need = shm_ring_cost(&c->resp_out, 0, n) + 1, used = 0;
        if (room_or_wait(&c->resp_out, need) < need)
            return false;
        struct shm_msg *m = shm_ring_put(&c->resp_out, &used, n);
        int xerr = 0;
        enum mem_err e = tagged_move(c, h->stag, h->to + c->rd_off, n, MEM_REMOTE_READ, NULL, 0,
                                     (uint8_t *)(m + 1), &xerr);
        if (e != MEM_OK) {
            c->rd_off = 0;
            ddp_term_for_read_source(ndk_xp_stag_fault(e), &t);
            refuse(c, h, &t, f);
            return true;
        }
        m->type = SHM_RESP_READ;
        m->id = h->id;
        m->off = c->rd_off;
        m->total = h->total;
        c->rd_off += n;
        m->flags = c->rd_off == h->total ? SHM_F_LAST : 0;
        answer(c, used);
        wake_peer(c);
    } while (c->rd_off < h->total);
    c->rd_off = 0;
    return true;
}

/* Reads the request ring (rx_lock held). */
static void take_requests(struct shm_conn *c, struct shm_fail *f)
{
    bool corrupt = false;
    uint32_t taken = 0, answered = c->resp_out.mine;
    struct shm_msg h; /* read once: the peer may still write the ring */
    const uint8_t *payload;
    c->pass_received = false;
    /* A receive posted from now on rings again (shm_after_receive). Read
     * first: the store is a fence, and a flag set since rang for a pass
     * that reads it after the eventfd's system calls. */
    if (__atomic_load_n(&c->rx_kicked, __ATOMIC_RELAXED))
        __atomic_store_n(&c->rx_kicked, false, __ATOMIC_SEQ_CST);
    while (!__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE) && !f->fail &&
           (payload = shm_ring_peek(&c->req_in, &h, &corrupt))) {
        bool done = true;
        if (c->flushed) {
            /* NdkFlush: what the peer sends is dropped, never placed. Its
             * single-copy and acknowledged Sends and Writes are
             * acknowledged all the same: their initiator completes them, as
             * over TCP once it took the octets (a Read stays unanswered, as
             * over iWARP). */
            if (wants_ack(&h) && (h.type == SHM_REQ_SEND || h.type == SHM_REQ_WRITE)) {
                if (room_or_wait(&c->resp_out, 1) < 1)
                    break;
                respond(c, SHM_RESP_ACK, h.id, SHM_F_LAST);
            }
        } else if (room_or_wait(&c->resp_out, 2) < 2) {
            break; /* a response and the Terminate's unit */
        } else if (h.type == SHM_REQ_SEND) {
            done = take_send(c, &h, payload, f);
        } else if (h.type == SHM_REQ_WRITE) {
            done = take_write(c, &h, payload, f);
        } else if (h.type == SHM_REQ_READ) {
            done = take_read(c, &h, payload, f);
        } else {
            corrupt = true;
            break;
        }
        if (!done)
            break;
        took(c, &c->req_in, &taken);
    }
    if (corrupt)
        broken(c, f);
    receives_flush(c);
    give_back(c, &c->req_in);
    /* The peer is woken for what we published: taking its requests alone
     * (every inline Send) gives it nothing to do, and the units it waits
     * for are space_freed's (a pass of a busy receiver woke the sender's
     * engine, which then preempted the sending thread on its CPU). */
    if (c->resp_out.mine != answered)
        wake_peer(c);
}

/* The peer closed its QP (left: CLOSED) after publishing requests we had
 * not read: what its ring carries whole, inline Sends and Writes, which
 * completed on its side once published, is placed before the connection
 * ends, as TCP delivers what came before the FIN. A request whose payload
 * stays in the peer's memory (SHM_F_IOV) or that waited for our
 * acknowledgement (SHM_F_ACK), which the peer flushed as it left, or a
 * Read (its answer has nobody to go to) ends the drain, and so does a
 * Send that waits for a receive. rx_lock held. */
static void take_before_leaving(struct shm_conn *c, struct shm_fail *f)
{
    bool corrupt = false;
    uint32_t taken = 0;
    struct shm_msg h;
    const uint8_t *payload;
    c->pass_received = false;
    while (!c->flushed && !f->fail && (payload = shm_ring_peek(&c->req_in, &h, &corrupt))) {
        if ((h.type != SHM_REQ_SEND && h.type != SHM_REQ_WRITE) || (h.flags & (SHM_F_IOV | SHM_F_ACK)) ||
            room_or_wait(&c->resp_out, 2) < 2)
            break;
        if (!(h.type == SHM_REQ_SEND ? take_send(c, &h, payload, f) : take_write(c, &h, payload, f)))
            break;
        took(c, &c->req_in, &taken);
    }
    receives_flush(c);
}

/* ---- the initiator (sq_lock) ---- */

/* The request a response names: taken, not finished. */
static struct ndk_swqe *named(struct ndk_qp_impl *qp, uint32_t id)
{
    struct ndk_qp_dp *dp = &qp->dp;
    if (id - dp->sq_head >= dp->sq_tx - dp->sq_head)
        return NULL;
    struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, id)];
    return w->done ? NULL : w;
}

static void read_done(struct shm_conn *c, struct ndk_swqe *w)
{
    struct ndk_qp_impl *qp = c->qp;
    w->done = true;
    if (c->reads_out)
        c->reads_out--;
    if (w->status == STATUS_SUCCESS && (w->flags & NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE) && w->nsge)
        mem_invalidate_local_token(qp_mem(qp), qp->pd, w->sge[0].MemoryRegionToken);
}

/* A piece of a Read's data: into the sink the request names. */
static bool read_piece(struct shm_conn *c, struct ndk_swqe *w, const struct shm_msg *h, const uint8_t *payload)
{
    struct ndk_qp_impl *qp = c->qp;
    if (h->total != w->total || h->off > w->total || h->len > w->total - h->off)
        return false;
    if (w->status != STATUS_SUCCESS || !h->len)
        return true;
    struct iovec sink[MEM_LOCAL_IOV_MAX], piece[MEM_LOCAL_IOV_MAX];
    int ns = 0;
    w->status = map_sges(qp, w->sge_gen, w->sge, w->nsge, MEM_LOCAL_WRITE, sink, MEM_LOCAL_IOV_MAX, &ns);
    int np = w->status == STATUS_SUCCESS ? ndk_iov_slice(sink, ns, h->off, h->len, piece, MEM_LOCAL_IOV_MAX) : -1;
    if (np >= 0) {
        struct iovec b = {(void *)payload, h->len};
        ndk_iov_copy(piece, np, &b, 1);
    }
    return true;
}

static NTSTATUS source_of(struct ndk_qp_impl *qp, const struct ndk_swqe *w, struct iovec *src, int *ns);

/* The target granted us the part of a split Write or Read from h->off on
 * (h->total octets, at its iovecs): we move it between them and the
 * request's own memory, mapped again, unless the grant was taken back.
 * False: malformed. */
static bool take_grant(struct shm_conn *c, struct ndk_swqe *w, const struct shm_msg *h, const uint8_t *payload,
                       struct shm_fail *f)
{
    struct ndk_qp_impl *qp = c->qp;
    struct iovec theirs[MEM_LOCAL_IOV_MAX], v[MEM_LOCAL_IOV_MAX], piece[MEM_LOCAL_IOV_MAX];
    bool read = w->op == SWQE_READ;
    int nt = peer_iovs(h, payload, theirs), nv = 0;
    if (nt < 0 || h->off > w->total || h->total != w->total - h->off)
        return false;
    uint64_t *word = &c->hdr->split[1 - c->me];
    uint64_t granted = split_word(h->id, SPLIT_GRANTED);
    if (!__atomic_compare_exchange_n(word, &granted, split_word(h->id, SPLIT_MOVING), false, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return true; /* taken back: the connection ends */
    int r = 0;
    if (read && w->status == STATUS_SUCCESS)
        w->status = map_sges(qp, w->sge_gen, w->sge, w->nsge, MEM_LOCAL_WRITE, v, MEM_LOCAL_IOV_MAX, &nv);
    else if (!read && source_of(qp, w, v, &nv) != STATUS_SUCCESS)
        r = -EFAULT;
    if (!r && w->status == STATUS_SUCCESS) {
        int np = ndk_iov_slice(v, nv, h->off, h->total, piece, MEM_LOCAL_IOV_MAX);
        r = np < 0 ? -EFAULT : peer_move(c, !read, true, piece, np, theirs, nt);
    }
    __atomic_store_n(word, split_word(h->id, r ? SPLIT_FAILED : SPLIT_DONE), __ATOMIC_SEQ_CST);
    wake_peer(c);
    if (r == -ESRCH)
        transfer_failed(c, r, f);
    return true;
}

/* Reads the response ring (sq_lock held). */
static void take_responses(struct shm_conn *c, struct shm_fail *f)
{
    if (!peer_published(c))
        return; /* nothing came: its ring is not touched */
    struct ndk_qp_impl *qp = c->qp;
    bool corrupt = false;
    uint32_t taken = 0;
    struct shm_msg h;
    const uint8_t *payload;
    while (!__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE) && !f->fail &&
           (payload = shm_ring_peek(&c->resp_in, &h, &corrupt))) {
        struct ndk_swqe *w = named(qp, h.id);
        if (h.type == SHM_RESP_TERM) {
            if (!(h.flags & SHM_F_NAMED)) {
                fail_set(f, NDK_DISCONNECT_REASON_ABORTED, STATUS_CANCELLED);
            } else {
                ULONG perr = term_ctrl_pack(h.term_layer, h.term_etype, h.term_code, false, false, false);
                /* A Terminate condemns a request of ours only if it names a
                 * Read; a Send or Write it names was handed over. The Read
                 * gets its status here, under sq_lock: the connection may
                 * end in another thread before this one applies f (the
                 * peer's left flag or its TCP reset seen by the engine),
                 * whose flush cancels only what is not done. */
                if (w && w->op == SWQE_READ) {
                    w->status = ndk_status_from_term(h.term_layer, h.term_etype, h.term_code);
                    w->perr = perr;
                    read_done(c, w);
                } else if (w) {
                    w->done = true;
                }
                fail_set(f, NDK_DISCONNECT_REASON_TERMINATE_RECEIVED, STATUS_CANCELLED);
                f->perr = perr;
            }
            c->term_reason = f->reason;
            c->term_perr = f->perr;
        } else if (!w) {
            corrupt = true;
            break;
        } else if (h.type == SHM_RESP_ACK && w->op != SWQE_READ) {
            w->done = true;
        } else if (h.type == SHM_RESP_READ && w->op == SWQE_READ) {
            if (!(h.flags & SHM_F_IOV) && !read_piece(c, w, &h, payload)) {
                corrupt = true;
                break;
            }
            if (h.flags & SHM_F_LAST)
                read_done(c, w);
        } else if (h.type == SHM_RESP_GRANT && (w->op == SWQE_READ || w->op == SWQE_WRITE)) {
            if (!take_grant(c, w, &h, payload, f)) {
                corrupt = true;
                break;
            }
        } else {
            corrupt = true;
            break;
        }
        took(c, &c->resp_in, &taken);
    }
    if (corrupt)
        fail_set(f, NDK_DISCONNECT_REASON_ABORTED, STATUS_CANCELLED);
    give_back(c, &c->resp_in);
    if (taken)
        ndk_xp_sq_complete(qp);
}

/* The payload of a Send or Write, where the requester registered it. */
static NTSTATUS source_of(struct ndk_qp_impl *qp, const struct ndk_swqe *w, struct iovec *src, int *ns)
{
    *ns = 0;
    if (!w->total)
        return STATUS_SUCCESS;
    if (w->flags & NDK_OP_FLAG_INLINE) {
        src[0] = (struct iovec){w->inline_data, w->total};
        *ns = 1;
        return STATUS_SUCCESS;
    }
    return map_sges(qp, w->sge_gen, w->sge, w->nsge, 0, src, MEM_LOCAL_IOV_MAX, ns);
}

static void put_iovs(struct shm_msg *m, const struct iovec *v, int n)
{
    struct shm_iov *p = (struct shm_iov *)(void *)(m + 1);
    for (int i = 0; i < n; i++)
        p[i] = (struct shm_iov){(uint64_t)(uintptr_t)v[i].iov_base, v[i].iov_len};
    m->niov = (uint32_t)n;
    m->flags |= SHM_F_IOV | SHM_F_LAST;
}

/* The request w at sq_tx is finished with st; put_requests emits the
 * completions of all it finished at its end, after the ring publish, in
 * one push (ndk_xp_sq_complete). */
static void finished(struct ndk_qp_impl *qp, struct ndk_swqe *w, NTSTATUS st)
{
    w->status = st;
    w->done = true;
    ndk_xp_sq_taken(qp);
}

/* Small Sends and Writes (payloads of at most SHM_PAYLOAD octets, copied
 * into one message each) from sq_tx on, their sources mapped by their
 * posts' checks when the memory table did not change since
 * (mem_map_posted), else checked and mapped under one hold of its lock
 * (mem_map_local_locked): the lock taken per request waited each time
 * until the messages written before it were in the ring, whose units the
 * consumer had read last (a cache-line round trip), so a DEFER chain went
 * out one round trip per message. The table may change between the
 * mapping and the copy, as it may between mem_map_local and any copy. */
#define SMALL_BATCH 32
struct small_batch {
    uint32_t n, next;             /* requests mapped from sq_tx on; the next to write */
    int first[SMALL_BATCH], nv[SMALL_BATCH];
    NTSTATUS st[SMALL_BATCH];
    struct iovec iov[MEM_LOCAL_IOV_MAX];
};

static bool small_request(const struct ndk_swqe *w)
{
    return (w->op == SWQE_SEND || w->op == SWQE_WRITE) && w->total <= SHM_PAYLOAD;
}

/* Maps the small requests from sq_tx on (source_of's checks, each with
 * the iovecs left of the batch's; one that needs more waits for the next
 * batch, where it has all of them, as source_of gives). */
static void small_map(struct shm_conn *c, struct small_batch *b)
{
    struct ndk_qp_impl *qp = c->qp;
    struct ndk_qp_dp *dp = &qp->dp;
    int used = 0;
    bool locked = false;
    uint64_t now = mem_generation(qp_mem(qp));
    b->n = b->next = 0;
    for (uint32_t i = dp->sq_tx; b->n < SMALL_BATCH && used < (int)MEM_LOCAL_IOV_MAX && i - dp->sq_head < dp->sq_count;
         i++) {
        const struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, i)];
        if (!small_request(w))
            break;
        NTSTATUS st = STATUS_SUCCESS;
        int nv = 0;
        if (!w->total) {
            /* nothing to map (source_of) */
        } else if (w->flags & NDK_OP_FLAG_INLINE) {
            b->iov[used] = (struct iovec){w->inline_data, w->total};
            nv = 1;
        } else {
            st = map_sges_batch(qp, w->sge_gen, &now, w->sge, w->nsge, 0, b->iov + used,
                                (int)MEM_LOCAL_IOV_MAX - used, &nv, &locked);
            if (st == STATUS_IMPLEMENTATION_LIMIT && used)
                break;
        }
        b->first[b->n] = used;
        b->nv[b->n] = nv;
        b->st[b->n] = st;
        used += nv;
        b->n++;
    }
    if (locked)
        mem_unlock(qp_mem(qp));
}

/* The small request w at sq_tx into the ring, as put_request: its header
 * is built aside and written with its payload in a few wide stores, none
 * read back (a store to a unit the consumer holds waits in the store
 * buffer, a load of it for the line). */
static bool put_small(struct shm_conn *c, struct ndk_swqe *w, struct small_batch *b, uint32_t room, uint32_t *used,
                      uint32_t *need)
{
    struct ndk_qp_impl *qp = c->qp;
    if (b->next == b->n)
        small_map(c, b);
    uint32_t k = b->next;
    *need = 0;
    if (b->st[k] != STATUS_SUCCESS) {
        b->next++;
        finished(qp, w, b->st[k]);
        return true;
    }
    bool send = w->op == SWQE_SEND;
    struct shm_msg h = {
        .type = send ? SHM_REQ_SEND : SHM_REQ_WRITE,
        .flags = SHM_F_LAST,
        .id = qp->dp.sq_tx,
        .len = w->total,
        .stag = send ? w->inv_stag : w->rtoken,
        .to = w->raddr,
        .total = w->total,
    };
    uint32_t cost = shm_ring_cost(&c->req_out, *used, h.len);
    if (cost > room - *used) {
        *need = cost;
        return false;
    }
    if (send) {
        const struct rdmap_opinfo *oi = rdmap_op(w->rdmap_op);
        h.flags |= (oi->solicit ? SHM_F_SOLICIT : 0) | (oi->invalidate ? SHM_F_INVALIDATE : 0);
    }
    uint8_t *p = (uint8_t *)(shm_ring_put_msg(&c->req_out, used, &h) + 1);
    for (const struct iovec *v = b->iov + b->first[k], *e = v + b->nv[k]; v < e; v++) {
        memcpy(p, v->iov_base, v->iov_len);
        p += v->iov_len;
    }
    b->next++;
    finished(qp, w, STATUS_SUCCESS); /* in the ring: handed over */
    return true;
}

/* One request into the ring (room: free units, *used of them filled).
 * Returns false when it has to wait for room, *need then the units its
 * next message takes at *used, or for an ORD slot (*need 0); it is then
 * not taken. */
static bool put_request(struct shm_conn *c, struct ndk_swqe *w, uint32_t room, uint32_t *used, uint32_t *need)
{
    struct ndk_qp_impl *qp = c->qp;
    struct iovec v[MEM_LOCAL_IOV_MAX];
    int nv = 0;
    bool read = w->op == SWQE_READ;
    *need = 0;
    if (read && c->reads_out >= qp->dp.ord)
        return false;
    NTSTATUS st = read ? map_sges(qp, w->sge_gen, w->sge, w->nsge, MEM_LOCAL_WRITE, v, MEM_LOCAL_IOV_MAX, &nv)
                       : source_of(qp, w, v, &nv);
    if (st != STATUS_SUCCESS) {
        finished(qp, w, st);
        return true;
    }
    bool single = !c->copy && w->total > SHM_RING_MAX && nv <= (int)SHM_IOV_MAX;
    do {
        uint32_t len = single ? (uint32_t)(nv * sizeof(struct shm_iov))
                       : read ? 0
                       : w->total - c->tx_off < SHM_PAYLOAD ? (uint32_t)(w->total - c->tx_off)
                                                            : SHM_PAYLOAD;
        uint32_t cost = shm_ring_cost(&c->req_out, *used, len);
        if (cost > room - *used) {
            *need = cost;
            return false;
        }
        struct shm_msg *m = shm_ring_put(&c->req_out, used, len);
        m->type = w->op == SWQE_SEND ? SHM_REQ_SEND : w->op == SWQE_WRITE ? SHM_REQ_WRITE : SHM_REQ_READ;
        m->id = qp->dp.sq_tx;
        m->total = w->total;
        m->stag = w->op == SWQE_SEND ? w->inv_stag : w->rtoken;
        m->to = w->raddr;
        if (w->op == SWQE_SEND) {
            const struct rdmap_opinfo *oi = rdmap_op(w->rdmap_op);
            m->flags |= (oi->solicit ? SHM_F_SOLICIT : 0) | (oi->invalidate ? SHM_F_INVALIDATE : 0);
        }
        if (single && !read) {
            put_iovs(m, v, nv);
        } else if (read) {
            if (single)
                put_iovs(m, v, nv);
            else
                m->flags |= SHM_F_LAST; /* answered with the data in response messages */
        } else {
            struct iovec piece[MEM_LOCAL_IOV_MAX];
            int np = ndk_iov_slice(v, nv, c->tx_off, len, piece, MEM_LOCAL_IOV_MAX);
            struct iovec b = {m + 1, len};
            if (np >= 0)
                ndk_iov_copy(&b, 1, piece, np);
            m->off = c->tx_off;
            m->flags |= SHM_F_ACK; /* larger than one message (put_small's are not) */
            c->tx_off += len;
            if (c->tx_off == w->total)
                m->flags |= SHM_F_LAST;
        }
    } while (!single && !read && c->tx_off < w->total);
    c->tx_off = 0;
    if (read) {
        c->reads_out++;
        ndk_xp_sq_taken(qp);
    } else {
        ndk_xp_sq_taken(qp); /* done when the target acknowledges it (pulled, or its last piece placed) */
    }
    return true;
}

/* Takes posted requests into the request ring while it has room (sq_lock). */
static void put_requests(struct shm_conn *c)
{
    struct ndk_qp_impl *qp = c->qp;
    uint32_t room = room_or_wait(&c->req_out, 1), used = 0, need;
    struct ndk_swqe *w;
    struct small_batch small;
    small.n = small.next = 0;
    while (qp->dp.state == QP_RTS && !__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE) && (w = ndk_xp_sq_next(qp))) {
        if (w->op != SWQE_SEND && w->op != SWQE_WRITE && w->op != SWQE_READ) {
            finished(qp, w, ndk_xp_exec_local(qp, w));
            continue;
        }
        /* NDK_OP_FLAG_READ_FENCE: nothing of it goes before every earlier
         * Read is answered, as on the iWARP path (qp_tx.c): a payload
         * copied into the ring now would be the sink's old contents. The
         * last Read's response brings us back (tx_stalled). */
        if ((w->flags & NDK_OP_FLAG_READ_FENCE) && c->reads_out)
            break;
        if (small_request(w) ? put_small(c, w, &small, room, &used, &need) : put_request(c, w, room, &used, &need))
            continue;
        if (!used) {
            /* Too little room for its next message: the consumer is asked
             * to wake us once it frees units (or a response brings us back
             * when the ORD is used up). */
            if (need && (room = room_or_wait(&c->req_out, need)) >= need)
                continue;
            break;
        }
        /* What is written goes now; then room is looked for again. */
        publish(c, &c->req_out, used);
        wake_peer(c);
        used = 0;
        if (!(room = room_or_wait(&c->req_out, 1)))
            break;
    }
    if (used) {
        publish(c, &c->req_out, used);
        wake_peer(c);
    }
    __atomic_store_n(&c->tx_stalled, qp->dp.state == QP_RTS && ndk_xp_sq_next(qp) != NULL, __ATOMIC_RELAXED);
    ndk_xp_sq_complete(qp);
}

/* ---- progress: the engine, busy pollers, posts ---- */

/* The receive a Send was being placed into, then those taken ahead for
 * the Sends behind it, complete (flushed) before the queue's others.
 * rx_lock held. */
static void drop_partial_send(struct shm_conn *c)
{
    if (c->rs_active) {
        c->rs_active = false;
        ndk_xp_complete_receive(c->qp, c->rs->ctx, STATUS_CANCELLED, 0, false, 0, false);
    }
    while (c->ahead_next < c->ahead_n)
        ndk_xp_complete_receive(c->qp, c->ahead->r[c->ahead_next++].ctx, STATUS_CANCELLED, 0, false, 0, false);
}

/* The connection ends here (once): every outstanding request completes. */
static void end_connection(struct shm_conn *c, const struct shm_fail *f)
{
    if (__atomic_exchange_n(&c->dead, true, __ATOMIC_ACQ_REL))
        return;
    pthread_mutex_lock(&c->qp->dp.rx_lock);
    split_revoke(c); /* before the consumer learns the end and may free its memory */
    drop_partial_send(c);
    __atomic_store_n(&c->qp->dp.rx_wait_until, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&c->qp->dp.rx_lock);
    ndk_xp_fail(c->qp, f->reason, f->read_status, f->perr);
    shm_os_doorbell_ring(c->peer_bell);
    if (c->ended)
        c->ended(c->ended_arg);
}

/* A lock for a pass: a busy poller (poller) does not wait for one. */
static bool lock_for_pass(pthread_mutex_t *m, bool poller)
{
    return (poller ? pthread_mutex_trylock(m) : pthread_mutex_lock(m)) == 0;
}

/* The peer left (left: CLOSED or ABORTED, progress) or its process ended
 * (on_peer_exit; left as it said before it ended, NO if it did not):
 * what it published before is whole in the region and still counts, as
 * TCP delivers what came before the FIN (the kernel sends one for a killed
 * process too). Unless it aborted, its inline Sends and Writes are placed
 * (take_before_leaving: it stops at a payload left in the peer's memory,
 * SHM_F_IOV); the answers to our requests are taken (a Read answered
 * completes, not cancelled: its data was in the ring, or already in our
 * memory). What f then holds ends the connection: a Terminate it sent, or
 * its leaving, or ABORTED. False: a busy poller could not take a lock
 * now, and leaves the ending to the engine (the peer rang its doorbell as
 * it left; its pidfd as it ended). */
static bool take_from_ended_peer(struct shm_conn *c, uint32_t left, bool poller, struct shm_fail *f)
{
    struct ndk_qp_dp *dp = &c->qp->dp;
    if (left != SHM_LEFT_ABORTED) {
        if (!lock_for_pass(&dp->rx_lock, poller))
            return false;
        if (!__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
            take_before_leaving(c, f);
        pthread_mutex_unlock(&dp->rx_lock);
    }
    if (!lock_for_pass(&dp->sq_lock, poller))
        return false;
    if (!c->flushed)
        take_responses(c, f);
    /* Or the Terminate another thread took just before and has not
     * applied yet: its reason, not "peer left". */
    if (!f->fail && c->term_reason)
        *f = (struct shm_fail){true, c->term_reason, STATUS_CANCELLED, c->term_perr, false};
    pthread_mutex_unlock(&dp->sq_lock);
    fail_set(f, left == SHM_LEFT_CLOSED ? NDK_DISCONNECT_REASON_PEER_CLOSED : NDK_DISCONNECT_REASON_ABORTED,
             STATUS_CANCELLED);
    return true;
}

/* The peer left (left), or its process ended (peer_gone: its pidfd, seen
 * by the engine or by a transfer's look): the connection ends with what
 * take_from_ended_peer finds. A busy poller that could not take a lock
 * leaves it to the engine, which a peer that left rang and an ended
 * process's pidfd wakes; a process found ended by a transfer's look may
 * not have woken it yet, so it is rung. */
static void end_with_peer(struct shm_conn *c, uint32_t left, bool poller)
{
    struct shm_fail f = {0};
    if (take_from_ended_peer(c, left, poller, &f))
        end_connection(c, &f);
    else if (__atomic_load_n(&c->peer_gone, __ATOMIC_ACQUIRE))
        shm_os_doorbell_ring(c->bell);
}

/* One pass over both incoming rings and the initiator queue. A busy poller
 * (poller) skips what another thread is busy with. */
static void progress(struct shm_conn *c, bool poller)
{
    struct ndk_qp_dp *dp = &c->qp->dp;
    struct shm_fail f = {0};
    if (__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
        return;
    uint32_t left = __atomic_load_n(&c->hdr->side[1 - c->me].left, __ATOMIC_ACQUIRE);
    if (left || __atomic_load_n(&c->peer_gone, __ATOMIC_ACQUIRE)) {
        end_with_peer(c, left, poller);
        return;
    }
    /* The initiator side has work only when a response came or requests
     * wait for room: a busy poller looks at both without a lock. */
    bool sent = peer_published(c);
    bool initiator = (sent && shm_ring_pending(&c->resp_in)) || __atomic_load_n(&c->tx_stalled, __ATOMIC_RELAXED);
    if (initiator && lock_for_pass(&dp->sq_lock, poller)) {
        if (c->flushed) {
            bool corrupt = false;
            uint32_t taken = 0;
            struct shm_msg h;
            while (sent && shm_ring_peek(&c->resp_in, &h, &corrupt)) {
                /* Answers to flushed requests; the target of a split
                 * one waits for our part: it is told we are done. */
                uint64_t granted = split_word(h.id, SPLIT_GRANTED);
                if (h.type == SHM_RESP_GRANT)
                    __atomic_compare_exchange_n(&c->hdr->split[1 - c->me], &granted, split_word(h.id, SPLIT_DONE),
                                                false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
                took(c, &c->resp_in, &taken);
            }
            give_back(c, &c->resp_in);
        } else {
            take_responses(c, &f);
            if (!f.fail)
                put_requests(c);
        }
        pthread_mutex_unlock(&dp->sq_lock);
    }
    if (!f.fail && sent && (shm_ring_pending(&c->req_in) || __atomic_load_n(&c->qp->dp.rx_wait_until, __ATOMIC_RELAXED)) &&
        lock_for_pass(&dp->rx_lock, poller)) {
        take_requests(c, &f);
        pthread_mutex_unlock(&dp->rx_lock);
    }
    void (*hook)(struct ndk_qp_impl *) =
        __atomic_load_n(&c->qp->obj.ad->dev->test_hooks.shm_failing, __ATOMIC_ACQUIRE);
    if (f.fail && hook)
        hook(c->qp);
    if (f.fail && f.peer_ended)
        end_with_peer(c, __atomic_load_n(&c->hdr->side[1 - c->me].left, __ATOMIC_ACQUIRE), poller);
    else if (f.fail)
        end_connection(c, &f);
}

/* One wake-up on the engine: passes over the rings until a last look
 * after arming finds nothing new. */
static bool on_tick(struct loop_watch *w, uint32_t events);
static void on_locked(struct loop_watch *w, uint32_t events);

/* The ticker, made the first time a Send waits for a receive (most
 * connections never need one: two descriptors and four epoll calls less
 * per connection set up); false when it cannot be made. */
static bool make_ticker(struct shm_conn *c)
{
    if (c->ticker >= 0)
        return true;
    int fd = shm_os_ticker_new();
    if (fd < 0)
        return false;
    loop_watch_allow_unlocked(&c->ticker_watch);
    loop_watch_set_unlocked(&c->ticker_watch, on_tick);
    if (loop_watch_add(c->loop, &c->ticker_watch, fd, EPOLLIN, on_locked) < 0) {
        shm_os_close(fd);
        return false;
    }
    c->ticker = fd;
    return true;
}

/* The ticker runs while a Send waits for a receive (rx_wait_until): a
 * receive posted to an SRQ does not ring us, and the grace ends on time.
 * A ticker that cannot be made would leave the wait unbounded: the
 * connection ends instead, as when its read queues cannot be had. */
static void tick_while_waiting(struct shm_conn *c)
{
    bool wait = __atomic_load_n(&c->qp->dp.rx_wait_until, __ATOMIC_RELAXED) != 0;
    if (wait == c->ticking)
        return;
    if (wait && !make_ticker(c)) {
        end_connection(c, &(struct shm_fail){true, NDK_DISCONNECT_REASON_LOCAL_ERROR, STATUS_CANCELLED, 0, false});
        return;
    }
    shm_os_ticker_set(c->ticker, wait ? SHM_RX_WAIT_POLL_MS : 0);
    c->ticking = wait;
}

static void serve(struct shm_conn *c)
{
    uint32_t *armed = &c->hdr->side[c->me].armed;
    __atomic_store_n(armed, 0, __ATOMIC_RELAXED);
    for (int pass = 0;; pass++) {
        /* What the peer had published before this pass: the pass takes all
         * of it that can go now; what stays (a Send waiting for a receive,
         * a request waiting for response room) has its own wake-up (the
         * ticker, space_wanted), so only news is looked at again. */
        uint32_t req_seen = in_head(c, &c->req_in);
        uint32_t resp_seen = in_head(c, &c->resp_in);
        uint64_t split_seen = __atomic_load_n(&c->hdr->split[c->me], __ATOMIC_SEQ_CST);
        progress(c, false);
        void (*hook)(struct ndk_qp_impl *, int) =
            __atomic_load_n(&c->qp->obj.ad->dev->test_hooks.shm_pass, __ATOMIC_ACQUIRE);
        if (hook)
            hook(c->qp, pass);
        if (__atomic_load_n(&c->leased, __ATOMIC_ACQUIRE))
            break; /* the busy poller reads; the lease's end rings the bell */
        /* Armed, then one more look: a message published before the peer
         * saw the flag is found here, one after it rings. */
        __atomic_store_n(armed, 1, __ATOMIC_SEQ_CST);
        if (in_head(c, &c->req_in) == req_seen && in_head(c, &c->resp_in) == resp_seen &&
            __atomic_load_n(&c->hdr->split[c->me], __ATOMIC_SEQ_CST) == split_seen &&
            !__atomic_load_n(&c->hdr->side[1 - c->me].left, __ATOMIC_SEQ_CST))
            break;
        __atomic_store_n(armed, 0, __ATOMIC_RELAXED);
        if (__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
            break;
        if (pass == SHM_SERVE_PASSES) {
            shm_os_doorbell_ring(c->bell); /* the loop comes back to us */
            break;
        }
    }
    tick_while_waiting(c);
}

/* A wake-up on fd, c's doorbell or ticker: drained, then c served. The
 * engine's handlers run for an event fetched before detach deleted the
 * watch too, until loop_unlocked_barrier: c is still whole then, and stop
 * says it is over. */
static bool drain_and_serve(struct shm_conn *c, int fd)
{
    if (__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST))
        return true;
    shm_os_doorbell_drain(fd);
    serve(c);
    return true;
}

/* The doorbell: the peer published (or freed room), a receive came for a
 * waiting Send, a busy poller's lease ended. */
static bool on_bell(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_conn *c = container_of(w, struct shm_conn, bell_watch);
    return drain_and_serve(c, c->bell);
}

/* A Send waits for a receive: the engine looks again. */
static bool on_tick(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_conn *c = container_of(w, struct shm_conn, ticker_watch);
    return drain_and_serve(c, c->ticker);
}

/* The peer process ended (kill -9 included): nothing more will come, and
 * nothing it had will answer. Its event may be handled before the
 * doorbell it rang as it published its last messages: those are taken
 * first. The watch is one-shot: an ended process's pidfd stays readable. */
static bool on_peer_exit(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_conn *c = container_of(w, struct shm_conn, pidfd_watch);
    if (__atomic_load_n(&c->stop, __ATOMIC_SEQ_CST) || __atomic_load_n(&c->dead, __ATOMIC_ACQUIRE))
        return true;
    __atomic_store_n(&c->peer_gone, true, __ATOMIC_RELEASE);
    end_with_peer(c, __atomic_load_n(&c->hdr->side[1 - c->me].left, __ATOMIC_ACQUIRE), false);
    return true;
}

/* The loop's locked dispatch never sees these watches' events (their
 * handlers take them all). */
static void on_locked(struct loop_watch *w, uint32_t events)
{
    (void)w, (void)events;
}

/* The connection's descriptors onto the engine's loop, without the loop's
 * lock (loop.h: watches served only unlocked). */
static int watch(struct shm_conn *c)
{
    struct {
        struct loop_watch *w;
        int fd;
        uint32_t events;
        loop_unlocked_fn fn;
    } ws[] = {{&c->bell_watch, c->bell, EPOLLIN, on_bell},
              {&c->ticker_watch, c->ticker, EPOLLIN, on_tick},
              {&c->pidfd_watch, c->pidfd, EPOLLIN | EPOLLONESHOT, on_peer_exit}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        if (ws[i].fd < 0)
            continue;
        loop_watch_allow_unlocked(ws[i].w);
        loop_watch_set_unlocked(ws[i].w, ws[i].fn);
        int e = loop_watch_add(c->loop, ws[i].w, ws[i].fd, ws[i].events, on_locked);
        if (e)
            return e;
    }
    return 0;
}

/* Off the loop: once this returns no handler runs for c or ever will. */
static void unwatch(struct shm_conn *c)
{
    if (!c->loop)
        return;
    loop_watch_del(c->loop, &c->bell_watch);
    loop_watch_del(c->loop, &c->pidfd_watch);
    loop_unlocked_barrier(c->loop);
    /* The ticker's watch only now: a handler that ran until the barrier
     * may have been making it (make_ticker writes the watch), and none
     * makes it from now on (stop). A tick fetched meanwhile finds stop. */
    if (c->ticker_watch.added) {
        loop_watch_del(c->loop, &c->ticker_watch);
        loop_unlocked_barrier(c->loop);
    }
}

/* ---- struct ndk_xp_ops ---- */

static void shm_doorbell(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (c)
        put_requests(c);
}

/* A receive was posted: a Send waiting for one goes on now, on the
 * engine, woken while sq_lock holds the connection: once the lock
 * is released, detach (ndk_qp_stop, from the connector's thread) may free
 * it. Whether a Send waits is the QP's (dp.rx_wait_until), looked at
 * first without the lock: a receiver that reposts as it reaps took
 * sq_lock for every receive only to find nothing waiting. A wait that
 * begins just after this look is no different from one that began just
 * after the locked look: the engine starts it under rx_lock, not
 * sq_lock, and its ticker looks again (SHM_RX_WAIT_POLL_MS). */
static void shm_after_receive(struct ndk_qp_impl *qp)
{
    if (!__atomic_load_n(&qp->dp.rx_wait_until, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&qp->dp.sq_lock);
    struct shm_conn *c = ndk_xp_ctx(qp);
    /* A busy poller that holds the input lease makes the passes (the
     * lease's end rings the engine, shm_lease_input): a receiver that
     * reposts as it polls woke its engine, which took rx_lock from it. */
    bool waits = c && __atomic_load_n(&qp->dp.rx_wait_until, __ATOMIC_RELAXED) &&
                 !__atomic_load_n(&c->leased, __ATOMIC_ACQUIRE);
    /* One ring per pass is enough: the pass takes every receive posted
     * before it began (a receiver reposting as it reaps would otherwise
     * make a system call per receive while Sends wait). */
    if (waits && !__atomic_exchange_n(&c->rx_kicked, true, __ATOMIC_SEQ_CST))
        shm_os_doorbell_ring(c->bell);
    pthread_mutex_unlock(&qp->dp.sq_lock);
    void (*hook)(struct ndk_qp_impl *) =
        __atomic_load_n(&qp->obj.ad->dev->test_hooks.shm_posted, __ATOMIC_ACQUIRE);
    if (waits && hook)
        hook(qp);
}

/* NdkFlush: nothing more is placed; what the peer sends is dropped. */
static void shm_flush(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (!c)
        return;
    c->flushed = true;
    __atomic_store_n(&c->qp->dp.rx_wait_until, 0, __ATOMIC_RELAXED);
    split_revoke(c);
    drop_partial_send(c);
    /* A pass drops and acknowledges what the peer already published
     * (take_requests): nothing else may ring for it. */
    shm_os_doorbell_ring(c->bell);
}

static void shm_forget(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (!c)
        return;
    c->reads_out = 0;
    c->tx_off = 0;
}

/* Would a pass find anything? The looks progress begins with, in its
 * order, without its frame: most polls of a busy poller find nothing
 * (a dead connection has nothing either: progress returns at once). */
static bool poll_finds_work(struct shm_conn *c)
{
    return !__atomic_load_n(&c->dead, __ATOMIC_ACQUIRE) &&
           (__atomic_load_n(&c->hdr->side[1 - c->me].left, __ATOMIC_ACQUIRE) ||
            __atomic_load_n(&c->peer_gone, __ATOMIC_RELAXED) || shm_ring_pending(&c->resp_in) ||
            __atomic_load_n(&c->tx_stalled, __ATOMIC_RELAXED) || shm_ring_pending(&c->req_in) ||
            __atomic_load_n(&c->qp->dp.rx_wait_until, __ATOMIC_RELAXED));
}

static void shm_poll(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (c && poll_finds_work(c))
        progress(c, true);
}

static bool shm_lease_input(struct ndk_qp_impl *qp, bool on)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (!c)
        return false;
    __atomic_store_n(&c->leased, on, __ATOMIC_RELEASE);
    if (!on)
        shm_os_doorbell_ring(c->bell); /* the engine looks and arms */
    return true;
}

static void shm_local_error(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = ndk_xp_ctx(qp);
    if (!c)
        return;
    uint32_t no = SHM_LEFT_NO;
    __atomic_compare_exchange_n(&c->hdr->side[c->me].left, &no, SHM_LEFT_ABORTED, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    __atomic_store_n(&c->dead, true, __ATOMIC_RELEASE);
    shm_os_doorbell_ring(c->peer_bell);
    if (c->ended)
        c->ended(c->ended_arg);
}

static void conn_free(struct shm_conn *c)
{
    shm_os_region_unmap(c->map, SHM_REGION_BYTES);
    shm_os_close(c->bell);
    shm_os_close(c->peer_bell);
    shm_os_close(c->pidfd);
    shm_os_close(c->ticker);
    free(c->ahead);
    free(c);
}

static void shm_detach(struct ndk_qp_impl *qp, void *ctx)
{
    struct shm_conn *c = ctx;
    uint32_t no = SHM_LEFT_NO;
    __atomic_compare_exchange_n(&c->hdr->side[c->me].left, &no, SHM_LEFT_CLOSED, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    shm_os_doorbell_ring(c->peer_bell);
    __atomic_store_n(&c->stop, true, __ATOMIC_SEQ_CST);
    unwatch(c);
    /* Normally nothing is left: stop (shm_flush) cancelled what we held,
     * and a flushed connection takes no receive. */
    pthread_mutex_lock(&qp->dp.rx_lock);
    split_revoke(c);
    drop_partial_send(c);
    pthread_mutex_unlock(&qp->dp.rx_lock);
    conn_free(c);
}

static const struct ndk_xp_ops shm_ops = {
    .name = "shm",
    .doorbell = shm_doorbell,
    .after_receive = shm_after_receive,
    .flush = shm_flush,
    .stop = shm_flush, /* the same: nothing more placed, what it holds cancelled first */
    .forget = shm_forget,
    .poll = shm_poll,
    .lease_input = shm_lease_input,
    .local_error = shm_local_error,
    .detach = shm_detach,
};

/* ---- setting the connection up ---- */

/* Marks an idle QP used (it is never connected again); false: not idle. */
static bool claim(struct ndk_qp_impl *qp, bool on)
{
    struct ndk_device *dev = qp->obj.ad->dev;
    pthread_mutex_lock(&dev->lock);
    bool ok = !on || (!qp->used && !qp->conn && !qp->obj.closing && qp->dp.state == QP_IDLE);
    if (ok)
        qp->used = on;
    pthread_mutex_unlock(&dev->lock);
    return ok;
}

static NTSTATUS status_of(int err)
{
    return err == -ETIMEDOUT ? STATUS_IO_TIMEOUT
           : err == -ENOMEM || err == -EMFILE || err == -ENFILE ? STATUS_INSUFFICIENT_RESOURCES
                                                                 : STATUS_CONNECTION_REFUSED;
}

/* Set-up, step by step: one round trip and a last word. The creator
 * offers the region and its doorbell with its probe word in the header;
 * the other maps it, probes the creator's memory and answers with its
 * doorbell, its own probe word and what its probe found; the creator
 * probes back and tells its result (the other takes it when it needs it:
 * the rendezvous reads it when the RTR arrives). Each step takes a
 * message only when it is there. */
enum setup_step { STEP_REGION, STEP_ANSWER, STEP_PROBE, STEP_READY };

/* The creator's first message: the region and its doorbell. */
static int offer_region(struct shm_conn *c)
{
    struct shm_hello hello = {SHM_MAGIC, SHM_VERSION, SHM_REGION_BYTES, 1, 0};
    int fd = shm_os_region_create(SHM_REGION_BYTES, &c->map);
    if (fd < 0)
        return fd;
    c->hdr = c->map;
    *c->hdr = (struct shm_hdr){.magic = SHM_MAGIC, .version = SHM_VERSION, .unit = SHM_UNIT, .units = SHM_UNITS};
    /* Armed: until a side's first pass, its peer rings its doorbell. */
    c->hdr->side[0].armed = c->hdr->side[1].armed = 1;
    c->hdr->side[0].probe_addr = (uint64_t)(uintptr_t)&c->probe;
    c->hdr->side[0].probe_value = c->probe;
    int fds[2] = {fd, c->bell};
    int r = shm_os_send(c->sock, &hello, sizeof hello, fds, 2);
    shm_os_close(fd); /* the mappings keep the region */
    return r;
}

static bool copy_forced(void)
{
    const char *env = getenv("NDK_SHM_COPY");
    return env && strcmp(env, "1") == 0;
}

/* Can we reach the peer's memory? Opens the pidfd that the engine
 * watches and that every transfer looks at (peer_move), of the process
 * that connected the socket (shm_os_peer_pidfd), then reads the peer's
 * probe word (its address and value in the header) as any transfer is
 * made. The word holds a random value: on a kernel without SO_PEERPIDFD,
 * where the pidfd is opened by pid, a process that got the pid of a peer
 * that ended since would not hold it there, and copy mode (no transfer
 * ever) follows. A peer found ended: no connection. */
static int probe_peer(struct shm_conn *c)
{
    if ((c->pidfd = shm_os_peer_pidfd(c->sock, c->peer)) < 0)
        return c->pidfd;
    const struct shm_side_hdr *p = &c->hdr->side[1 - c->me];
    uint64_t word = 0;
    struct iovec l = {&word, sizeof word}, r = {(void *)(uintptr_t)p->probe_addr, sizeof word};
    int e = copy_forced() ? -EPERM : peer_move(c, false, true, &l, 1, &r, 1);
    if (e == -ESRCH)
        return e;
    c->probe_ok = !e && word == p->probe_value;
    return 0;
}

/* Both probes known: either failing selects copy mode. */
static void decide_copy(struct shm_conn *c, bool theirs_ok)
{
    c->copy = !c->probe_ok || !theirs_ok;
    static bool logged;
    if (c->copy && !__atomic_exchange_n(&logged, true, __ATOMIC_RELAXED))
        NDK_LOG(NDK_LL_INFO, NDK_LC_DP, &c->qp->obj,
                "shared memory: %s; payloads are copied through the rings (two copies)",
                copy_forced() ? "single copy turned off (NDK_SHM_COPY=1)" : "process_vm_readv is not permitted");
}

/* A set-up message from the peer with at most maxfds descriptors (*n of
 * them came), waiting at most timeout_ms. */
static int take_msg(struct shm_conn *c, struct shm_hello *got, int *fds, int maxfds, int *n, int timeout_ms)
{
    int r = shm_os_recv(c->sock, got, sizeof *got, fds, maxfds, n, timeout_ms);
    if (r)
        return r;
    if (got->magic != SHM_MAGIC || got->version != SHM_VERSION || got->region_bytes != SHM_REGION_BYTES) {
        for (int i = 0; i < *n; i++)
            shm_os_close(fds[i]);
        return -EPROTO;
    }
    return 0;
}

/* A set-up message with this side's probe result (and the descriptors
 * given): the answer to the region, and the creator's reply to it. */
static int send_probe_result(struct shm_conn *c, const int *fds, int nfds)
{
    struct shm_hello h = {SHM_MAGIC, SHM_VERSION, SHM_REGION_BYTES, c->probe_ok, 0};
    return shm_os_send(c->sock, &h, sizeof h, fds, nfds);
}

/* The other side: maps the region, probes the creator, and answers with
 * its doorbell and what it found. */
static int take_region(struct shm_conn *c, int timeout_ms)
{
    struct shm_hello got;
    int fds[2], n = 0, r;
    if ((r = take_msg(c, &got, fds, 2, &n, timeout_ms)))
        return r;
    if (n == 2)
        c->peer_bell = fds[1];
    r = n != 2 ? -EPROTO : shm_os_region_map(fds[0], SHM_REGION_BYTES, &c->map);
    if (n >= 1)
        shm_os_close(fds[0]); /* the mapping keeps the region */
    if (r)
        return r;
    c->hdr = c->map;
    if (c->hdr->magic != SHM_MAGIC || c->hdr->unit != SHM_UNIT || c->hdr->units != SHM_UNITS)
        return -EPROTO;
    c->hdr->side[1].probe_addr = (uint64_t)(uintptr_t)&c->probe;
    c->hdr->side[1].probe_value = c->probe;
    if ((r = probe_peer(c)))
        return r;
    return send_probe_result(c, &c->bell, 1);
}

/* The creator: takes the answer (the peer's doorbell and probe), probes
 * back and tells its result. */
static int take_answer(struct shm_conn *c, int timeout_ms)
{
    struct shm_hello got;
    int fd, n = 0, r;
    if ((r = take_msg(c, &got, &fd, 1, &n, timeout_ms)))
        return r;
    if (n != 1)
        return -EPROTO;
    c->peer_bell = fd;
    if ((r = probe_peer(c)))
        return r;
    decide_copy(c, got.ok);
    return send_probe_result(c, NULL, 0);
}

/* The other side: the creator's probe result. */
static int take_probe(struct shm_conn *c, int timeout_ms)
{
    struct shm_hello got;
    int fd, n = 0, r;
    if ((r = take_msg(c, &got, &fd, 0, &n, timeout_ms)))
        return r;
    decide_copy(c, got.ok);
    return 0;
}

/* The next step, waiting at most timeout_ms for the peer's message. */
static int setup_step(struct shm_conn *c, int timeout_ms)
{
    int e = 0;
    switch (c->step) {
    case STEP_REGION:
        if (!(e = take_region(c, timeout_ms)))
            c->step = STEP_PROBE;
        return e;
    case STEP_ANSWER:
        if (!(e = take_answer(c, timeout_ms)))
            c->step = STEP_READY;
        return e;
    case STEP_PROBE:
        if (!(e = take_probe(c, timeout_ms)))
            c->step = STEP_READY;
        return e;
    default:
        return 0;
    }
}

struct shm_conn *ndk_shm_setup_start(struct ndk_qp_impl *qp, int sock, bool creator, int *err)
{
    struct shm_conn *c = calloc(1, sizeof *c);
    if (!c) {
        *err = -ENOMEM;
        return NULL;
    }
    c->qp = qp;
    c->sock = sock;
    c->me = creator ? 0 : 1;
    c->step = creator ? STEP_ANSWER : STEP_REGION;
    c->bell = c->peer_bell = c->pidfd = c->ticker = -1;
    c->probe = ndk_random_seed((uint64_t)(uintptr_t)c) | 1;
    bool same_user = false;
    int e = shm_os_peer(sock, &c->peer, &same_user);
    if (!e && !same_user)
        e = -EACCES;
    if (!e && (c->bell = shm_os_doorbell_new()) < 0)
        e = c->bell;
    if (!e && creator)
        e = offer_region(c);
    if (e) {
        conn_free(c);
        *err = e;
        return NULL;
    }
    return c;
}

int ndk_shm_setup_step(struct shm_conn *c)
{
    while (c->step != STEP_READY) {
        int e = setup_step(c, 0);
        if (e)
            return e == -ETIMEDOUT ? 1 : e;
    }
    return 0;
}

bool ndk_shm_setup_said_all(const struct shm_conn *c)
{
    return c->step == STEP_PROBE || c->step == STEP_READY;
}

void ndk_shm_setup_abandon(struct shm_conn *c)
{
    if (c)
        conn_free(c);
}

NTSTATUS ndk_shm_setup_attach(struct shm_conn *c, uint32_t ird, uint32_t ord, void (*ended)(void *), void *arg,
                              bool *copy_mode)
{
    struct ndk_qp_impl *qp = c->qp;
    uint8_t *base = c->map;
    struct shm_ring *mine[2] = {&c->req_out, &c->resp_out}, *theirs[2] = {&c->req_in, &c->resp_in};
    for (int k = 0; k < 2; k++) {
        shm_ring_attach(mine[k], base + shm_ring_offset(c->me, k), false);
        shm_ring_attach(theirs[k], base + shm_ring_offset(1 - c->me, k), false);
    }
    c->sock = -1; /* the owner's */
    c->ended = ended;
    c->ended_arg = arg;
    *copy_mode = c->copy;
    c->loop = &qp->obj.engine->loop;
    ndk_qp_attach(qp, &shm_ops, c, ird, ord);
    if (watch(c)) {
        c->ended = NULL;
        ndk_qp_stop(qp); /* detaches: the connection is freed */
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    /* No first pass: both sides are armed from the region's creation, so
     * whatever the peer published or did before our watch was added rang
     * our doorbell, which the engine now finds readable. A connection with
     * nothing in it costs no wake-up and touches no ring. */
    return STATUS_SUCCESS;
}

void ndk_shm_drain(struct ndk_qp_impl *qp)
{
    struct shm_conn *c = qp->dp.xp == &shm_ops ? ndk_xp_ctx(qp) : NULL;
    if (c)
        progress(c, false);
}

void ndk_shm_abort(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    struct shm_conn *c = qp->dp.xp == &shm_ops ? ndk_xp_ctx(qp) : NULL;
    if (c) {
        uint32_t no = SHM_LEFT_NO;
        __atomic_compare_exchange_n(&c->hdr->side[c->me].left, &no, SHM_LEFT_ABORTED, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&qp->dp.sq_lock);
}

bool ndk_shm_quiescent(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    bool q = qp->dp.sq_count == 0;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return q;
}

NTSTATUS ndk_shm_connect(struct ndk_qp_impl *qp, int sock, bool creator, uint32_t ird, uint32_t ord,
                         int timeout_ms, bool *copy_mode)
{
    if (!claim(qp, true))
        return STATUS_INVALID_DEVICE_STATE;
    int e = 0;
    struct shm_conn *c = ndk_shm_setup_start(qp, sock, creator, &e);
    while (c && !e && c->step != STEP_READY)
        e = setup_step(c, timeout_ms);
    if (!c || e) {
        ndk_shm_setup_abandon(c);
        claim(qp, false);
        return status_of(e);
    }
    return ndk_shm_setup_attach(c, ird, ord, NULL, NULL, copy_mode);
}

void *ndk_shm_region(struct ndk_qp_impl *qp, int *side)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    struct shm_conn *c = qp->dp.xp && !strcmp(qp->dp.xp->name, "shm") ? ndk_xp_ctx(qp) : NULL;
    void *map = c ? c->map : NULL;
    if (c)
        *side = c->me;
    pthread_mutex_unlock(&qp->dp.sq_lock);
    return map;
}

void ndk_shm_mark_published(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.sq_lock);
    struct shm_conn *c = qp->dp.xp && !strcmp(qp->dp.xp->name, "shm") ? ndk_xp_ctx(qp) : NULL;
    if (c)
        __atomic_store_n(&c->hdr->side[c->me].published, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&qp->dp.sq_lock);
}

bool ndk_shm_holds_ahead(struct ndk_qp_impl *qp)
{
    pthread_mutex_lock(&qp->dp.rx_lock);
    struct shm_conn *c = qp->dp.xp == &shm_ops ? ndk_xp_ctx(qp) : NULL;
    bool held = c && c->ahead;
    pthread_mutex_unlock(&qp->dp.rx_lock);
    return held;
}
