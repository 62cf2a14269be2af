/*
 * perftest_compat.c - ndkperf --perftest: perftest's own protocol over its
 * rdma_cm exchange (-R), so that ndkperf on libndk and perftest on any
 * verbs device (here Linux siw) run against each other, either side being
 * the server, with the results printed by both.
 *
 * perftest has no documented wire protocol; this one was recorded from
 * perftest 6.06 (Debian bookworm's perftest 4.5+0.17, siw, rdma-core 44)
 * by relaying a guest ib_*_bw/_lat -R client to a guest server through a
 * host TCP relay that decoded MPA/DDP/RDMAP in both directions. All of it
 * is ordinary Sends of small messages on a control connection, plus the
 * test traffic on a second connection:
 *
 *   control connection (rdma_cm, port -p, IRD = ORD = 0, no private data).
 *   Every exchange: the client Sends, the server receives and Sends its
 *   own (perftest's ctx_xchg_data over rdma_cm):
 *     1  version, 16 bytes: "6.06" and NULs
 *     2  cycle buffer (the page size), 4 bytes big-endian: 4096
 *     3  cache line size, 4 bytes big-endian: 64
 *     4  the MTU as an ASCII number of enum ibv_mtu and its NUL: "3" (1024)
 *     5  56 zero bytes (a pingpong_dest not filled in yet): the client then
 *        connects the test connection, which the server accepts on the
 *        same port (the client retries while the server is not listening)
 *   test connection (rdma_cm, same port; IRD = ORD = 128, the outstanding
 *   reads, for read tests, else 0; no private data)
 *     6  56 zero bytes again, once the test connection is up
 *     7  struct pingpong_dest, 56 bytes, every field big-endian:
 *          0 lid, 4 out_reads, 8 qpn, 12 psn, 16 rkey, 20 (padding, not
 *          initialised by perftest), 24 vaddr (8), 32 gid (16), 48 srqn,
 *          52 gid_index
 *        sent K times, the same each time: K = 3 for write_bw and read_bw,
 *        4 for send_bw, send_lat and write_lat, where send_lat's fourth
 *        comes right before the data phase of each size (perftest posts
 *        its receives for the size, then synchronises; with -a, before
 *        every size). rkey/vaddr name the buffer
 *        the peer writes to or reads from; for send_bw the client's is its
 *        credit counter.
 *   data phase on the test connection (below), then on the control one:
 *     write_bw, read_bw: pingpong_dest; the client's results as five
 *        8-byte big-endian fields: size, iterations, BW peak, BW average
 *        (MB/s, doubles), message rate (Mpps, double), answered field by
 *        field with the server's own (uninitialised in perftest, which
 *        then prints the client's numbers); pingpong_dest once more
 *     send_bw, send_lat: pingpong_dest
 *     write_lat: nothing
 *   then both sides disconnect.
 *
 * Data phases, as perftest runs them:
 *   write_bw  the client RDMA-Writes -s bytes to the server's vaddr, up to
 *             -t in flight; the server does nothing.
 *   read_bw   the client RDMA-Reads from the server's vaddr, up to
 *             min(-t, -o, its ORD) in flight; the server does nothing.
 *   send_bw   the client Sends; the server keeps R = -r receives posted
 *             and, because a Send without a receive kills an iWARP
 *             connection, writes its running count of receives (4 bytes,
 *             little-endian: perftest writes a host int) into the client's
 *             credit counter whenever (count % R) % (R / 3) == 0; the
 *             client keeps sent - count < R. (Recorded: -n 20: 6, 12, 18,
 *             20; -n 200: 66, 132, 198, 200. With -D, perftest's own server
 *             once wrote 1020 where the rule says 1022; our server follows
 *             the rule, which only ever credits as early or earlier.)
 *   send_lat  ping-pong of Sends, the client first.
 *   write_lat ping-pong of RDMA Writes, the server first: each side writes
 *             its iteration number into the last byte of the message and
 *             polls the last byte of its own buffer for the peer's.
 *   -a        (latency tests) every size from 2 B to 8 MiB in turn, the
 *             iteration count starting again at each.
 * After the data phase either side may close the test connection at any
 * time: perftest does so right after the closing exchange, and its FIN on
 * the test connection may overtake its last message on the control one.
 * With -n, -t and -r are capped at the iterations, as perftest does; both
 * sides must be given the same -s, -n (or -D) and -r: perftest 6.06 does
 * not exchange them.
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ndkperf.h"
#include "perftest_compat.h"

#define PT_VERSION "6.06" /* the perftest version whose protocol this is */
#define PT_VERSION_LEN 16
#define PT_DEST_LEN 56
#define PT_CYCLE_BUFFER 4096u
#define PT_CACHE_LINE 64u
#define PT_MTU "3" /* IBV_MTU_1024, what siw reports */
#define PT_REPORT_FIELDS 5

#define CTL_SLOTS 8 /* control receives posted; one message is in flight at a time */
#define LAT_RECVS 8
#define CONNECT_TRIES 50 /* 5 s: perftest's server re-listens for the test connection */
#define CONNECT_RETRY_MS 100
#define POLLS_PER_CLOCK 64
#define LINGER_MS 1000 /* the client lets perftest's server disconnect first */

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */
/* ------------------------------------------------------------------------ */

struct pt_params {
    enum test_kind test;
    bool server;
    const char *address;
    uint32_t size, iters, duration_s;
    uint32_t tx_depth, rx_depth, outs;
    bool all_sizes; /* -a: the latency tests over every size */
};

/* perftest's struct pingpong_dest, as it travels. */
struct pt_dest {
    uint32_t lid, out_reads, qpn, psn, rkey;
    uint64_t vaddr;
    uint8_t gid[16];
    uint32_t srqn, gid_index;
};

/* One queued control message. */
struct ctl_msg {
    uint32_t len;
    uint8_t data[CTRL_SLOT];
};

struct pt {
    struct options o;
    bool trace; /* NDKPERF_PERFTEST_TRACE=1: every control message on stderr */
    bool close_test_first; /* NDKPERF_PERFTEST_CLOSE=test-first, see data_phase_over() */
    struct pt_params p;
    const char *role;
    struct endpoint ctl, tst;
    bool inited;               /* both endpoints initialised: ep_close them */
    bool ctl_ready; /* connected: a disconnect ends any wait */
    bool tst_ready; /* in the data phase: a disconnect ends any wait */

    /* Control channel: messages received and not yet read (one at a time
     * in practice), and the Sends in flight. */
    struct ctl_msg inbox[CTL_SLOTS];
    unsigned in_head, in_count;
    uint64_t ctl_sent, ctl_done;

    struct pt_dest mine, peer;
    char peer_version[PT_VERSION_LEN + 1];

    /* Test connection: initiator requests by sequence number; a signaled
     * completion of n means all up to n are done. */
    uint64_t posted, done;
    uint32_t signal_every;
    uint64_t recvs; /* receives completed */
    uint64_t t_last_recv;
    struct bw_samples *samples; /* fed by completions, when set */
};

/* The pingpong_dest exchanges before the data phase (see the top); send_lat
 * has its fourth before each size (run_lat). */
static unsigned dests_before(enum test_kind t)
{
    return t == T_WRITE_LAT || t == T_SEND_BW ? 4 : 3;
}

static uint64_t dbl_bits(double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return v;
}

static double bits_dbl(uint64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static void dest_put(uint8_t *p, const struct pt_dest *d)
{
    memset(p, 0, PT_DEST_LEN);
    tc_put_be32(p, d->lid);
    tc_put_be32(p + 4, d->out_reads);
    tc_put_be32(p + 8, d->qpn);
    tc_put_be32(p + 12, d->psn);
    tc_put_be32(p + 16, d->rkey);
    tc_put_be64(p + 24, d->vaddr);
    memcpy(p + 32, d->gid, 16);
    tc_put_be32(p + 48, d->srqn);
    tc_put_be32(p + 52, d->gid_index);
}

static void dest_get(const uint8_t *p, struct pt_dest *d)
{
    d->lid = tc_get_be32(p);
    d->out_reads = tc_get_be32(p + 4);
    d->qpn = tc_get_be32(p + 8);
    d->psn = tc_get_be32(p + 12);
    d->rkey = tc_get_be32(p + 16);
    d->vaddr = tc_get_be64(p + 24);
    memcpy(d->gid, p + 32, 16);
    d->srqn = tc_get_be32(p + 48);
    d->gid_index = tc_get_be32(p + 52);
}

static void hexdump_msg(const char *role, const char *what, const uint8_t *p, uint32_t len)
{
    char line[3 * CTRL_SLOT + 1];
    size_t n = 0;
    for (uint32_t i = 0; i < len && i < CTRL_SLOT; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%02x", p[i]);
    line[n] = '\0';
    complain(role, "%s: %" PRIu32 " bytes: %s", what, len, line);
}

/* ------------------------------------------------------------------------ */
/* Waiting                                                                  */
/* ------------------------------------------------------------------------ */

struct clock_bound {
    uint64_t start, limit_ns;
    unsigned polls;
    bool peer_left; /* a disconnect was seen: one more poll, then fail */
};

static void bound_start(struct clock_bound *b, uint64_t ms)
{
    b->start = now_ns();
    b->limit_ns = ms * 1000000u;
    b->polls = 0;
    b->peer_left = false;
}

/*
 * The peer's disconnects, seen from a wait. Once the data phase is over
 * the test connection may end at any time (perftest closes it right after
 * the closing exchange, and its FIN may arrive before the last control
 * message): it is answered, and is no failure. A disconnect that ends the
 * wait does so only after one more poll, so that what the peer sent before
 * it left is taken first. True when the wait must end.
 */
static bool peer_gone(struct pt *t, struct clock_bound *b, const char *what)
{
    bool tst_gone = atomic_load(&t->tst.disconnected);
    if (tst_gone && !t->tst_ready)
        ep_disconnect_begin(&t->tst);
    const char *which = t->ctl_ready && atomic_load(&t->ctl.disconnected) ? "control"
                        : t->tst_ready && tst_gone                        ? "test"
                                                                           : NULL;
    if (!which)
        return false;
    if (!b->peer_left) {
        b->peer_left = true;
        return false;
    }
    complain(t->role, "the peer closed the %s connection while this side waited for %s", which, what);
    return true;
}

/* Called once per empty poll: yields, and every POLLS_PER_CLOCK polls
 * looks at the clock and the connections. */
static bool bound_ok(struct pt *t, struct clock_bound *b, const char *what)
{
    if (t->o.wait != WAIT_SPIN)
        sched_yield();
    if (++b->polls % POLLS_PER_CLOCK)
        return true;
    if (peer_gone(t, b, what))
        return false;
    if (now_ns() - b->start > b->limit_ns) {
        complain(t->role, "nothing came for %.1f s while waiting for %s", (double)b->limit_ns / 1e9, what);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Control channel                                                          */
/* ------------------------------------------------------------------------ */

static bool ctl_post_recv(struct pt *t, uint32_t slot)
{
    struct endpoint *e = &t->ctl;
    NDK_SGE sge = {.VirtualAddress = e->ctrl_rx + (size_t)slot * CTRL_SLOT,
                   .Length = CTRL_SLOT,
                   .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->qp->Dispatch->NdkReceive(e->qp, WR_CTX(WR_RX_CTRL, slot), &sge, 1);
    if (st != STATUS_SUCCESS) {
        ndk_failed(t->role, "NdkReceive", st, "control slot %" PRIu32, slot);
        return false;
    }
    return true;
}

/* Takes what the control CQ holds: Send completions are counted, received
 * messages queued (and their receives posted again at once). */
static bool ctl_poll(struct pt *t)
{
    struct endpoint *e = &t->ctl;
    NDK_RESULT r[CQ_BATCH];
    unsigned n = cq_take(e, r, CQ_BATCH);
    for (unsigned i = 0; i < n; i++) {
        if (r[i].Status != STATUS_SUCCESS) {
            complain(t->role, "a control %s completed with %s", WR_KIND(r[i].RequestContext) == WR_SQ ? "Send" : "receive",
                     ndk_status_name(r[i].Status));
            return false;
        }
        if (WR_KIND(r[i].RequestContext) == WR_SQ) {
            t->ctl_done++;
            continue;
        }
        uint32_t slot = (uint32_t)WR_VAL(r[i].RequestContext);
        if (slot >= CTL_SLOTS || t->in_count == CTL_SLOTS) {
            library_problem(t->role, "a control receive completion ndkperf cannot place (slot %" PRIu32 ")", slot);
            return false;
        }
        struct ctl_msg *m = &t->inbox[(t->in_head + t->in_count++) % CTL_SLOTS];
        m->len = r[i].BytesTransferred < CTRL_SLOT ? r[i].BytesTransferred : CTRL_SLOT;
        memcpy(m->data, e->ctrl_rx + (size_t)slot * CTRL_SLOT, m->len);
        if (t->trace)
            hexdump_msg(t->role, "trace: control message in", m->data, m->len);
        if (!ctl_post_recv(t, slot))
            return false;
    }
    return true;
}

static bool ctl_send(struct pt *t, const void *data, uint32_t len)
{
    struct endpoint *e = &t->ctl;
    /* One Send at a time: the slot is free once the last one completed. */
    struct clock_bound b;
    bound_start(&b, t->o.timeout_ms);
    while (t->ctl_done < t->ctl_sent) {
        if (!ctl_poll(t))
            return false;
        if (t->ctl_done < t->ctl_sent && !bound_ok(t, &b, "the completion of a control Send"))
            return false;
    }
    memcpy(e->ctrl_tx, data, len);
    if (t->trace)
        hexdump_msg(t->role, "trace: control message out", e->ctrl_tx, len);
    NDK_SGE sge = {.VirtualAddress = e->ctrl_tx, .Length = len, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->qp->Dispatch->NdkSend(e->qp, WR_CTX(WR_SQ, t->ctl_sent + 1), &sge, 1, 0);
    if (st != STATUS_SUCCESS) {
        ndk_failed(t->role, "NdkSend", st, "control message of %" PRIu32 " bytes", len);
        return false;
    }
    t->ctl_sent++;
    return true;
}

/* The next control message, waiting at most ms. */
static bool ctl_recv(struct pt *t, struct ctl_msg *out, uint64_t ms, const char *what)
{
    struct clock_bound b;
    bound_start(&b, ms);
    while (t->in_count == 0) {
        if (!ctl_poll(t))
            return false;
        if (t->in_count == 0 && !bound_ok(t, &b, what))
            return false;
    }
    *out = t->inbox[t->in_head];
    t->in_head = (t->in_head + 1) % CTL_SLOTS;
    t->in_count--;
    return true;
}

/*
 * One exchange: the client sends `out` and then reads the answer; the
 * server reads first and answers. With echo, the server answers with what
 * it got (the values where perftest takes either side's). The answer must
 * have `want` bytes.
 */
static bool xchg(struct pt *t, const uint8_t *out, uint32_t len, bool echo, struct ctl_msg *in, uint32_t want,
                 uint64_t ms, const char *what)
{
    char label[160];
    snprintf(label, sizeof label, "the peer's %s (perftest control message)", what);
    if (!t->p.server && !ctl_send(t, out, len))
        return false;
    if (!ctl_recv(t, in, ms, label))
        return false;
    if (in->len != want) {
        hexdump_msg(t->role, "unexpected control message", in->data, in->len);
        complain(t->role, "expected the peer's %s, %" PRIu32 " bytes: is the peer perftest %s with the same test "
                          "and options?",
                 what, want, PT_VERSION);
        return false;
    }
    if (t->p.server && !ctl_send(t, echo ? in->data : out, echo ? in->len : len))
        return false;
    return true;
}

static bool xchg_dest(struct pt *t, const char *what)
{
    uint8_t buf[PT_DEST_LEN];
    struct ctl_msg in;
    dest_put(buf, &t->mine);
    if (!xchg(t, buf, sizeof buf, false, &in, PT_DEST_LEN, t->o.timeout_ms, what))
        return false;
    dest_get(in.data, &t->peer);
    return true;
}

/* The closing exchanges come after the data phase, which perftest's
 * peer may still be in for a while (-D, or a slow link): a longer bound. */
static uint64_t after_data_ms(const struct pt *t)
{
    return (uint64_t)t->o.accept_timeout_ms + (uint64_t)t->p.duration_s * 1000u;
}

/* ------------------------------------------------------------------------ */
/* Test connection: posting and completions                                 */
/* ------------------------------------------------------------------------ */

static PVOID sq_ctx(struct pt *t, bool signal, ULONG *flags)
{
    uint64_t seq = ++t->posted;
    if (!signal && !t->o.signal_all && seq % t->signal_every != 0)
        *flags |= NDK_OP_FLAG_SILENT_SUCCESS;
    return WR_CTX(WR_SQ, seq);
}

static bool post_data(struct pt *t, enum sq_op op, uint8_t *buf, uint32_t len, uint64_t va, uint32_t token,
                      bool signal)
{
    struct endpoint *e = &t->tst;
    ULONG flags = len <= e->qp_inline ? NDK_OP_FLAG_INLINE : 0;
    NDK_SGE sge = {.VirtualAddress = buf, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_ctx(t, signal, &flags);
    NTSTATUS st;
    const char *call;
    if (op == OP_SEND) {
        call = "NdkSend";
        st = e->qp->Dispatch->NdkSend(e->qp, ctx, &sge, 1, flags);
    } else if (op == OP_WRITE) {
        call = "NdkWrite";
        st = e->qp->Dispatch->NdkWrite(e->qp, ctx, &sge, 1, va, token, flags);
    } else {
        call = "NdkRead";
        st = e->qp->Dispatch->NdkRead(e->qp, ctx, &sge, 1, va, token, flags);
    }
    if (st != STATUS_SUCCESS) {
        ndk_failed(t->role, call, st, "%" PRIu32 " bytes, remote 0x%" PRIx64 " token 0x%08" PRIx32, len, va, token);
        return false;
    }
    return true;
}

static bool post_recv(struct pt *t)
{
    struct endpoint *e = &t->tst;
    NDK_SGE sge = {.VirtualAddress = e->target, .Length = e->region, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->qp->Dispatch->NdkReceive(e->qp, WR_CTX(WR_RX_DATA, 0), &sge, 1);
    if (st != STATUS_SUCCESS) {
        ndk_failed(t->role, "NdkReceive", st, "%" PRIu32 " bytes", e->region);
        return false;
    }
    return true;
}

/* Takes the test CQ's completions: initiator requests are counted (and
 * sampled for bandwidth); receives are posted again at once and counted.
 * Returns the receives that completed, or -1 on failure. */
static long tst_poll(struct pt *t)
{
    struct endpoint *e = &t->tst;
    NDK_RESULT r[CQ_BATCH];
    unsigned n = cq_take(e, r, CQ_BATCH);
    long got = 0;
    for (unsigned i = 0; i < n; i++) {
        if (r[i].Status != STATUS_SUCCESS) {
            complain(t->role, "a %s on the test connection completed with %s%s",
                     WR_KIND(r[i].RequestContext) == WR_SQ ? "request" : "receive", ndk_status_name(r[i].Status),
                     r[i].Status == STATUS_CANCELLED ? " (flushed: the connection is gone)" : "");
            return -1;
        }
        if (WR_KIND(r[i].RequestContext) == WR_SQ) {
            uint64_t seq = WR_VAL(r[i].RequestContext);
            if (seq <= t->done || seq > t->posted) {
                library_problem(t->role, "completion #%" PRIu64 " after #%" PRIu64 " (posted up to #%" PRIu64 ")", seq,
                                t->done, t->posted);
                return -1;
            }
            t->done = seq;
            if (t->samples && !bw_add(t->samples, t->done, now_ns())) {
                complain(t->role, "out of memory");
                return -1;
            }
            continue;
        }
        if (!post_recv(t))
            return -1;
        t->recvs++;
        t->t_last_recv = now_ns();
        got++;
    }
    return got;
}

/* Waits until at most `left` initiator requests are unfinished. */
static bool sq_wait(struct pt *t, uint64_t left, const char *what)
{
    struct clock_bound b;
    bound_start(&b, t->o.timeout_ms);
    while (t->posted - t->done > left) {
        long n = tst_poll(t);
        if (n < 0)
            return false;
        if (t->posted - t->done > left && !bound_ok(t, &b, what))
            return false;
    }
    return true;
}

/* -n decides, or -D from start. */
static bool more(const struct pt *t, uint64_t count, uint64_t start, uint64_t now)
{
    if (t->p.iters)
        return count < t->p.iters;
    return now - start < (uint64_t)t->p.duration_s * 1000000000u;
}

/* ------------------------------------------------------------------------ */
/* Data phases                                                              */
/* ------------------------------------------------------------------------ */

/* Client of write_bw, read_bw, send_bw. */
static bool client_bw(struct pt *t, struct bw_samples *bw)
{
    struct endpoint *e = &t->tst;
    enum test_kind k = t->p.test;
    enum sq_op op = k == T_WRITE_BW ? OP_WRITE : k == T_READ_BW ? OP_READ : OP_SEND;
    uint64_t limit = t->p.tx_depth < e->sq_limit ? t->p.tx_depth : e->sq_limit;
    if (op == OP_READ) {
        if (e->ord < limit)
            limit = e->ord;
        if (t->peer.out_reads && t->peer.out_reads < limit)
            limit = t->peer.out_reads;
        if (limit == 0) {
            complain(t->role, "the test connection allows no outstanding RDMA Read (ORD 0)");
            return false;
        }
    }
    /* Only a signaled completion frees room: a full window must hold one,
     * or its completions never come (read_bw with -o below -t / 4). */
    if (t->signal_every > limit)
        t->signal_every = (uint32_t)limit;
    /* send_bw: the server's receives, which its credits count. */
    uint64_t window = t->p.rx_depth;
    volatile const uint8_t *credit = e->target;
    uint64_t start = now_ns(), now = start;
    t->samples = bw;
    if (!bw_add(bw, 0, start))
        goto oom;
    struct clock_bound b;
    bound_start(&b, t->o.timeout_ms);
    uint64_t last_done = 0;
    while (more(t, t->posted, start, now)) {
        bool posted_any = false;
        while (t->posted - t->done < limit && more(t, t->posted, start, now)) {
            if (op == OP_SEND) {
                uint32_t c = (uint32_t)credit[0] | (uint32_t)credit[1] << 8 | (uint32_t)credit[2] << 16 |
                             (uint32_t)credit[3] << 24;
                if (t->posted - c >= window)
                    break;
            }
            /* With -D any request may be the last, and the run must end
             * without a further one (perftest's send_bw server stops
             * crediting at its own deadline): every one is signaled. */
            bool last = !t->p.iters || t->posted + 1 == t->p.iters;
            uint8_t *local = op == OP_READ ? e->target : e->source;
            if (!post_data(t, op, local, t->p.size, t->peer.vaddr, t->peer.rkey, last))
                return false;
            posted_any = true;
        }
        if (tst_poll(t) < 0)
            return false;
        now = now_ns();
        if (posted_any || t->done != last_done) {
            last_done = t->done;
            bound_start(&b, t->o.timeout_ms);
        } else if (!bound_ok(t, &b, op == OP_SEND ? "send completions or a credit from the server"
                                                  : "completions on the test connection")) {
            return false;
        }
    }
    if (!sq_wait(t, 0, "the last completions"))
        return false;
    t->samples = NULL;
    return true;
oom:
    complain(t->role, "out of memory");
    return false;
}

/* Server of send_bw: count, post again, credit. With -D the client's
 * closing message on the control connection ends it. */
static bool server_send_bw(struct pt *t, struct bw_samples *bw)
{
    uint64_t window = t->p.rx_depth, every = window / 3 ? window / 3 : 1;
    uint8_t *slots = t->tst.ctrl_tx;
    struct clock_bound b;
    bound_start(&b, t->p.iters ? t->o.timeout_ms : after_data_ms(t));
    bool started = false;
    for (;;) {
        if (t->p.iters && t->recvs >= t->p.iters)
            break;
        if (!t->p.iters) {
            if (!ctl_poll(t))
                return false;
            if (t->in_count)
                break;
        }
        long n = tst_poll(t);
        if (n < 0)
            return false;
        if (n == 0) {
            if (!bound_ok(t, &b, "the client's next Send"))
                return false;
            continue;
        }
        if (!started) {
            /* perftest's server times from its first receive. */
            started = true;
            if (!bw_add(bw, 0, t->t_last_recv))
                goto oom;
        }
        if (!bw_add(bw, t->recvs, t->t_last_recv))
            goto oom;
        bound_start(&b, t->p.iters ? t->o.timeout_ms : after_data_ms(t));
        /* The receives are posted again (tst_poll): credit them when a
         * credit point was passed in this batch. */
        uint64_t from = t->recvs - (uint64_t)n + 1;
        bool owed = false;
        for (uint64_t c = from; c <= t->recvs; c++)
            if ((c % window) % every == 0)
                owed = true;
        if (!owed)
            continue;
        if (!sq_wait(t, t->tst.sq_limit - 1, "room for a credit Write"))
            return false;
        uint8_t *p = slots + (size_t)((t->posted + 1) % t->tst.ctrl_tx_slots) * CTRL_SLOT;
        uint32_t v = (uint32_t)t->recvs;
        p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
        /* Signaled: they are few, and the last one must show. */
        if (!post_data(t, OP_WRITE, p, 4, t->peer.vaddr, t->peer.rkey, true))
            return false;
    }
    return sq_wait(t, 0, "the last credit Write");
oom:
    complain(t->role, "out of memory");
    return false;
}

/* send_lat, both sides: the client sends first. A sample is the time from
 * one of our Sends to the peer's next one. */
static bool pingpong_send(struct pt *t, struct lat_samples *lat)
{
    struct endpoint *e = &t->tst;
    bool client = !t->p.server;
    uint64_t it = 0, t_post = 0;
    uint64_t start = now_ns();
    for (;;) {
        if (client) {
            if (!more(t, it, start, now_ns()))
                break;
            if (!sq_wait(t, e->sq_limit - 1, "room for a Send"))
                return false;
            t_post = now_ns();
            /* The last request is signaled: its completion ends the run. */
            if (!post_data(t, OP_SEND, e->source, t->p.size, 0, 0, it + 1 == t->p.iters))
                return false;
        }
        /* Wait for the peer's message. */
        struct clock_bound b;
        bound_start(&b, it == 0 && !client ? after_data_ms(t) : t->o.timeout_ms);
        uint64_t want = t->recvs + 1;
        while (t->recvs < want) {
            if (tst_poll(t) < 0)
                return false;
            if (t->recvs < want && !bound_ok(t, &b, "the peer's next Send"))
                return false;
        }
        it++;
        if (t_post && !lat_add(lat, t->t_last_recv - t_post))
            goto oom;
        if (!client) {
            if (!sq_wait(t, e->sq_limit - 1, "room for a Send"))
                return false;
            t_post = now_ns();
            if (!post_data(t, OP_SEND, e->source, t->p.size, 0, 0, it == t->p.iters))
                return false;
            if (t->p.iters && it >= t->p.iters)
                break;
        }
    }
    return sq_wait(t, 0, "the last Send's completion");
oom:
    complain(t->role, "out of memory");
    return false;
}

/* write_lat, both sides: the server writes first; each polls the last
 * byte of its buffer for the iteration number (mod 256). Valid because
 * libndk places a message in order: the last byte comes last. A sample is
 * the time from one of our Writes to the peer's next one. */
/* Spins on the last byte of our buffer until the peer's write of
 * iteration `it` is there, taking completions meanwhile. */
static bool wait_byte(struct pt *t, uint64_t it, uint64_t ms)
{
    volatile const uint8_t *in = t->tst.target + t->p.size - 1;
    struct clock_bound b;
    bound_start(&b, ms);
    while (*in != (uint8_t)it) {
        if (tst_poll(t) < 0)
            return false;
        if (*in != (uint8_t)it && !bound_ok(t, &b, "the peer's next RDMA Write")) {
            complain(t->role, "write_lat iteration %" PRIu64 ": the last byte of the buffer holds %u, not %u",
                     it, *in, (unsigned)(uint8_t)it);
            return false;
        }
    }
    return true;
}

static bool pingpong_write(struct pt *t, struct lat_samples *lat)
{
    struct endpoint *e = &t->tst;
    bool server = t->p.server;
    uint8_t *out = e->source + t->p.size - 1;
    uint64_t t_post = 0;
    for (uint64_t it = 1; it <= t->p.iters; it++) {
        if (!server) {
            if (!wait_byte(t, it, it == 1 ? after_data_ms(t) : t->o.timeout_ms))
                return false;
            if (t_post && !lat_add(lat, now_ns() - t_post))
                goto oom;
        }
        if (!sq_wait(t, e->sq_limit - 1, "room for an RDMA Write"))
            return false;
        *out = (uint8_t)it;
        t_post = now_ns();
        if (!post_data(t, OP_WRITE, e->source, t->p.size, t->peer.vaddr, t->peer.rkey, it == t->p.iters))
            return false;
        if (server) {
            if (!wait_byte(t, it, t->o.timeout_ms))
                return false;
            if (!lat_add(lat, now_ns() - t_post))
                goto oom;
        }
    }
    return sq_wait(t, 0, "the last RDMA Write's completion");
oom:
    complain(t->role, "out of memory");
    return false;
}

/* ------------------------------------------------------------------------ */
/* The sequence                                                             */
/* ------------------------------------------------------------------------ */

static void print_header(struct pt *t)
{
    const struct endpoint *e = &t->tst;
    printf("---------------------------------------------------------------------------------------\n");
    printf("                    %s Test (ndkperf --perftest)\n", test_title(t->p.test));
    printf(" Adapter         : %s, NDK %u.%u, %s\n", e->adapter_name, e->info.Version.Major, e->info.Version.Minor,
           e->info.RdmaTechnology == NdkiWarp ? "iWARP" : "not iWARP");
    printf(" Protocol        : perftest %s over rdma_cm (-R), peer version \"%s\"\n", PT_VERSION, t->peer_version);
    printf(" Role            : %s\n", t->p.server ? "server" : "client");
    if (t->p.all_sizes)
        printf(" Message sizes   : %u .. %u bytes (-a)\n", NDKPERF_MIN_ALL_SIZE, NDKPERF_MAX_SIZE);
    else
        printf(" Message size    : %" PRIu32 " bytes\n", t->p.size);
    if (t->p.iters)
        printf(" Iterations      : %" PRIu32 "\n", t->p.iters);
    else
        printf(" Duration        : %" PRIu32 " s\n", t->p.duration_s);
    printf(" TX depth        : %" PRIu32 "\n", t->p.tx_depth);
    if (test_uses_send(t->p.test))
        printf(" RX depth        : %" PRIu32 "%s\n", t->p.rx_depth,
               t->p.test == T_SEND_BW ? " (iWARP credits: RDMA Write of the receive count)" : "");
    if (t->p.test == T_READ_BW)
        printf(" Outstand reads  : %" PRIu32 " (effective IRD %" PRIu32 ", ORD %" PRIu32 ")\n", t->p.outs, e->ird,
               e->ord);
    printf("---------------------------------------------------------------------------------------\n");
    printf(" local address: QPN 0x%04" PRIx32 " PSN 0x%06" PRIx32 " RKey 0x%08" PRIx32 " VAddr 0x%016" PRIx64 "\n",
           t->mine.qpn, t->mine.psn, t->mine.rkey, t->mine.vaddr);
    printf(" remote address: QPN 0x%04" PRIx32 " PSN 0x%06" PRIx32 " RKey 0x%08" PRIx32 " VAddr 0x%016" PRIx64 "\n",
           t->peer.qpn, t->peer.psn, t->peer.rkey, t->peer.vaddr);
    printf("---------------------------------------------------------------------------------------\n");
    fflush(stdout);
}

/* The results exchange of write_bw and read_bw: the client's numbers go
 * to the server, which prints them (it has measured nothing itself). */
static bool xchg_report(struct pt *t, const struct bw_result *mine, struct bw_result *peer, uint32_t *peer_size)
{
    uint64_t f[PT_REPORT_FIELDS] = {t->p.size, mine->msgs, dbl_bits(mine->peak), dbl_bits(mine->avg),
                                    dbl_bits(mine->rate)};
    uint64_t g[PT_REPORT_FIELDS];
    static const char *const names[PT_REPORT_FIELDS] = {"report: size", "report: iterations", "report: BW peak",
                                                        "report: BW average", "report: message rate"};
    for (int i = 0; i < PT_REPORT_FIELDS; i++) {
        uint8_t buf[8];
        struct ctl_msg in;
        tc_put_be64(buf, f[i]);
        if (!xchg(t, buf, 8, false, &in, 8, t->o.timeout_ms, names[i]))
            return false;
        g[i] = tc_get_be64(in.data);
    }
    *peer_size = (uint32_t)g[0];
    peer->msgs = g[1];
    peer->peak = bits_dbl(g[2]);
    peer->avg = bits_dbl(g[3]);
    peer->rate = bits_dbl(g[4]);
    return true;
}

/* Control messages 1-5: everything before the test connection. */
static bool exchange_setup(struct pt *t)
{
    struct ctl_msg in;
    uint8_t buf[PT_DEST_LEN];

    /* 1-4: version, cycle buffer, cache line, MTU. */
    memset(buf, 0, sizeof buf);
    memcpy(buf, PT_VERSION, strlen(PT_VERSION));
    if (!xchg(t, buf, PT_VERSION_LEN, false, &in, PT_VERSION_LEN, t->o.timeout_ms, "version"))
        return false;
    memcpy(t->peer_version, in.data, PT_VERSION_LEN);
    t->peer_version[PT_VERSION_LEN] = '\0';
    if (strcmp(t->peer_version, PT_VERSION) != 0)
        complain(t->role, "warning: the peer is perftest \"%s\"; this protocol was recorded from %s",
                 t->peer_version, PT_VERSION);
    tc_put_be32(buf, PT_CYCLE_BUFFER);
    if (!xchg(t, buf, 4, true, &in, 4, t->o.timeout_ms, "cycle buffer size"))
        return false;
    tc_put_be32(buf, PT_CACHE_LINE);
    if (!xchg(t, buf, 4, true, &in, 4, t->o.timeout_ms, "cache line size"))
        return false;
    if (!xchg(t, (const uint8_t *)PT_MTU, sizeof PT_MTU, true, &in, sizeof PT_MTU, t->o.timeout_ms, "MTU"))
        return false;
    /* 5: zeros, then the test connection. */
    memset(buf, 0, sizeof buf);
    if (!xchg(t, buf, PT_DEST_LEN, false, &in, PT_DEST_LEN, t->o.timeout_ms, "first synchronisation"))
        return false;
    return true;
}

/*
 * The end of the data phase: from here on the peer may close the test
 * connection (see peer_gone). With
 * NDKPERF_PERFTEST_CLOSE=test-first this side ends the test connection as
 * soon as its data phase is over, and waits for the peer's answer before
 * the closing exchange on the control connection. perftest closes its
 * connections right after that exchange, so its FIN on the test connection
 * and its last control message reach us in either order; this makes the
 * FIN-first order certain, for the tests.
 */
static bool data_phase_over(struct pt *t)
{
    t->tst_ready = false;
    return !t->close_test_first || ep_disconnect(&t->tst, false);
}

/*
 * The latency tests, one size (-s) or every size (-a, 2 B .. 8 MiB, as
 * perftest's -a): send_lat exchanges pingpong_dest once more before each
 * size (perftest posts its receives for the size, then synchronises);
 * write_lat runs the sizes back to back. A results line per size.
 */
static bool run_lat(struct pt *t)
{
    struct test_params sizes_of = {.all_sizes = t->p.all_sizes, .size = t->p.size};
    uint32_t sizes[32];
    unsigned n = size_list(&sizes_of, sizes, 32);
    report_columns(t->p.test);
    for (unsigned i = 0; i < n; i++) {
        t->p.size = sizes[i];
        if (t->p.test == T_SEND_LAT && !xchg_dest(t, "pingpong_dest before a size"))
            return false;
        struct lat_samples lat = {0};
        bool ok = t->p.test == T_SEND_LAT ? pingpong_send(t, &lat) : pingpong_write(t, &lat);
        if (ok)
            report_lat(t->p.size, &lat, 0.5);
        lat_free(&lat);
        if (!ok)
            return false;
    }
    report_footer();
    if (!data_phase_over(t))
        return false;
    return t->p.test != T_SEND_LAT || xchg_dest(t, "closing pingpong_dest");
}

/* From message 6 on: the exchanges around the data phase, and the data
 * phase itself, with the results printed. */
static bool run_test(struct pt *t)
{
    struct ctl_msg in;
    uint8_t buf[PT_DEST_LEN];
    memset(buf, 0, sizeof buf);
    if (!xchg(t, buf, PT_DEST_LEN, false, &in, PT_DEST_LEN, t->o.timeout_ms, "second synchronisation"))
        return false;
    unsigned k = dests_before(t->p.test);
    for (unsigned i = 0; i < k; i++)
        if (!xchg_dest(t, "pingpong_dest"))
            return false;
    print_header(t);

    enum test_kind kind = t->p.test;
    bool ok = true;
    if (test_is_lat(kind))
        return run_lat(t);

    struct bw_samples bw = {0};
    struct bw_result mine = {0}, peer = {0};
    if (!t->p.server)
        ok = client_bw(t, &bw);
    else if (kind == T_SEND_BW)
        ok = server_send_bw(t, &bw);
    if (ok && (!t->p.server || kind == T_SEND_BW)) {
        report_columns(kind);
        if (bw_result_of(t->p.size, &bw, &mine))
            report_bw_result(t->p.size, &mine, NULL);
        else
            printf(" %-10" PRIu32 " %-14" PRIu64 " (run too short to time)\n", t->p.size, mine.msgs);
    }
    bw_free(&bw);
    if (!ok || !data_phase_over(t))
        return false;
    if (kind == T_SEND_BW) {
        report_footer();
        /* The server of -D ended its loop on this message: it is queued. */
        uint8_t d[PT_DEST_LEN];
        dest_put(d, &t->mine);
        if (!t->p.server && !ctl_send(t, d, sizeof d))
            return false;
        if (!ctl_recv(t, &in, after_data_ms(t), "the peer's closing pingpong_dest"))
            return false;
        if (in.len != PT_DEST_LEN) {
            hexdump_msg(t->role, "unexpected control message", in.data, in.len);
            return false;
        }
        return !t->p.server || ctl_send(t, d, sizeof d);
    }
    /* write_bw, read_bw: dest, the report, dest. */
    uint8_t d[PT_DEST_LEN];
    dest_put(d, &t->mine);
    if (!t->p.server && !ctl_send(t, d, sizeof d))
        return false;
    if (!ctl_recv(t, &in, after_data_ms(t), "the peer's pingpong_dest after the data phase"))
        return false;
    if (in.len != PT_DEST_LEN) {
        hexdump_msg(t->role, "unexpected control message", in.data, in.len);
        return false;
    }
    if (t->p.server && !ctl_send(t, d, sizeof d))
        return false;
    uint32_t peer_size = 0;
    if (!xchg_report(t, &mine, &peer, &peer_size))
        return false;
    if (t->p.server) {
        report_columns(kind);
        report_bw_result(peer_size, &peer, "(measured by the client)");
    }
    report_footer();
    return xchg_dest(t, "closing pingpong_dest");
}

/* ------------------------------------------------------------------------ */
/* Setting up                                                               */
/* ------------------------------------------------------------------------ */

static void layouts(const struct pt *t, const NDK_ADAPTER_INFO *in, struct layout *cl, struct layout *tl)
{
    memset(cl, 0, sizeof *cl);
    cl->region = 64;
    cl->ctrl_tx_slots = 1;
    cl->ctrl_rx_slots = CTL_SLOTS;
    cl->sq_depth = 4;
    cl->rq_depth = CTL_SLOTS;
    cl->cq_depth = 4 + CTL_SLOTS + 16;
    cl->signal_every = 1;

    const struct pt_params *p = &t->p;
    memset(tl, 0, sizeof *tl);
    /* The peer's small messages walk through a cycle buffer (perftest's
     * increase_rem_addr): twice the larger of it and the message covers
     * every address perftest may use. */
    uint32_t unit = p->size > PT_CYCLE_BUFFER ? p->size : PT_CYCLE_BUFFER;
    tl->region = 2 * unit;
    if (test_is_lat(p->test)) {
        tl->sq_depth = 16;
        tl->signal_every = 8;
    } else if (p->server) {
        tl->sq_depth = 16; /* credit Writes */
        tl->signal_every = 4;
    } else {
        tl->sq_depth = p->tx_depth + 1;
        tl->signal_every = p->tx_depth / 4 ? p->tx_depth / 4 : 1;
    }
    if (tl->sq_depth > in->MaxInitiatorQueueDepth)
        tl->sq_depth = in->MaxInitiatorQueueDepth;
    if (p->test == T_SEND_BW && p->server)
        tl->rq_depth = p->rx_depth;
    else if (p->test == T_SEND_LAT)
        tl->rq_depth = LAT_RECVS;
    else
        tl->rq_depth = 1; /* unused */
    tl->ctrl_tx_slots = tl->sq_depth + 1;
    tl->ctrl_rx_slots = 0;
    tl->cq_depth = tl->sq_depth + tl->rq_depth + 16;
    tl->inline_size = 0;
}

static bool pre_post(struct pt *t)
{
    if (t->o.wait != WAIT_EVENTS) {
        /* An overflow is then reported instead of a silent stall. */
        t->ctl.cq->Dispatch->NdkArmCq(t->ctl.cq, NDK_CQ_NOTIFY_ERRORS);
        t->tst.cq->Dispatch->NdkArmCq(t->tst.cq, NDK_CQ_NOTIFY_ERRORS);
    }
    for (uint32_t i = 0; i < CTL_SLOTS; i++)
        if (!ctl_post_recv(t, i))
            return false;
    bool data = (t->p.test == T_SEND_BW && t->p.server) || t->p.test == T_SEND_LAT;
    for (uint32_t i = 0; data && i < t->tst.rq_depth; i++)
        if (!post_recv(t))
            return false;
    /* A recognisable pattern, and zeros where the pings and credits go. */
    for (uint32_t i = 0; i < t->tst.region; i++)
        t->tst.source[i] = (uint8_t)(i * 7 + 1);
    memset(t->tst.target, 0, t->tst.region);
    if (t->p.test == T_WRITE_LAT)
        t->tst.source[t->p.size - 1] = 0;
    return true;
}

static void fill_mine(struct pt *t, const NDK_SOCKADDR *local)
{
    struct pt_dest *d = &t->mine;
    memset(d, 0, sizeof *d);
    d->out_reads = t->p.test == T_READ_BW ? t->p.outs : 1;
    /* No QP numbers in NDK: a distinct small number, as perftest prints it. */
    d->qpn = (uint32_t)getpid() & 0xffffff;
    srand48((long)(now_ns() ^ (uint64_t)getpid()));
    d->psn = (uint32_t)lrand48() & 0xffffff;
    d->rkey = t->tst.local.token;
    d->vaddr = t->tst.local.va;
    /* The GID of an IPv4 address, as RoCE v2 writes it (::ffff:a.b.c.d). */
    if (local->sa.sa_family == AF_INET) {
        d->gid[10] = d->gid[11] = 0xff;
        memcpy(d->gid + 12, &local->in4.sin_addr, 4);
    } else {
        memcpy(d->gid, &local->in6.sin6_addr, 16);
    }
}

static bool open_both(struct pt *t, const char *adapter)
{
    ep_init(&t->ctl, t->role, &t->o);
    ep_init(&t->tst, t->role, &t->o);
    t->inited = true;
    /* perftest tears its connections down as soon as it is done, at times
     * abortively: once the results are in, that is no failure. */
    t->ctl.peer_may_abort = t->tst.peer_may_abort = true;
    if (!ep_open(&t->ctl, adapter))
        return false;
    /* One adapter for both: the server's listener hands out both. */
    t->tst.ad = t->ctl.ad;
    t->tst.info = t->ctl.info;
    memcpy(t->tst.adapter_name, t->ctl.adapter_name, sizeof t->tst.adapter_name);
    t->tst.owner = &t->ctl;
    if (t->p.test == T_WRITE_LAT && !(t->ctl.info.AdapterFlags & NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED)) {
        complain(t->role, "adapter %s does not place data in order: write_lat cannot poll the last byte",
                 t->ctl.adapter_name);
        return false;
    }
    struct layout cl, tl;
    layouts(t, &t->ctl.info, &cl, &tl);
    if (!ep_create(&t->ctl, &cl) || !ep_create(&t->tst, &tl))
        return false;
    t->signal_every = t->tst.signal_every;
    return pre_post(t);
}

static void read_limits(const struct pt *t, ULONG *ird, ULONG *ord)
{
    /* perftest: IRD = ORD = the outstanding reads for read tests, else 0. */
    ULONG v = t->p.test == T_READ_BW ? t->p.outs : 0;
    *ird = v < t->ctl.info.MaxInboundReadLimit ? v : t->ctl.info.MaxInboundReadLimit;
    *ord = v < t->ctl.info.MaxOutboundReadLimit ? v : t->ctl.info.MaxOutboundReadLimit;
}

/* Waits at most LINGER_MS for the peer to disconnect e. */
static void linger(struct endpoint *e)
{
    ep_wait_peer_disconnect(e, LINGER_MS);
}

static int client(struct pt *t)
{
    NDK_SOCKADDR dst, src;
    char ip[INET6_ADDRSTRLEN];
    if (!resolve(t->role, t->p.address, &dst))
        return 1;
    set_port(&dst, t->o.port);
    if (!route_source(&dst, &src)) {
        complain(t->role, "no route to %s", t->p.address);
        return 1;
    }
    if (!open_both(t, t->o.adapter ? t->o.adapter : ip_text(&src, ip, sizeof ip)))
        return 1;
    uint8_t rep[64];
    uint32_t rep_len = 0;
    if (!ep_connect(&t->ctl, &src, &dst, NULL, 0, 0, 0, rep, sizeof rep, &rep_len))
        return 1;
    t->ctl_ready = true;
    fill_mine(t, &src);
    if (!exchange_setup(t))
        return 1;
    /* The server listens again for the test connection: try for a while,
     * as perftest's client does. */
    ULONG ird, ord;
    read_limits(t, &ird, &ord);
    t->tst.quiet_connect = true;
    bool up = false;
    for (int i = 0; i < CONNECT_TRIES && !up; i++) {
        up = ep_connect(&t->tst, &src, &dst, NULL, 0, ird, ord, rep, sizeof rep, &rep_len);
        if (!up) {
            ep_drop_connector(&t->tst);
            usleep(CONNECT_RETRY_MS * 1000);
        }
    }
    if (!up) {
        t->tst.quiet_connect = false;
        if (!ep_connect(&t->tst, &src, &dst, NULL, 0, ird, ord, rep, sizeof rep, &rep_len))
            return 1;
    }
    t->tst_ready = true;
    if (!run_test(t))
        return 1;
    t->tst_ready = t->ctl_ready = false;
    /* perftest's server closes when it is done, and siw may still be
     * completing its last Send then: a FIN from us at that moment makes
     * siw complete that Send with an error (IBV_WC_LOC_QP_OP_ERR, seen as
     * "Bad wc status 2" from a guest ib_send_bw server) although we have
     * received it. So the server goes first, within a bound. */
    linger(&t->tst);
    bool ok = ep_disconnect(&t->tst, false);
    linger(&t->ctl);
    ok = ep_disconnect(&t->ctl, false) && ok;
    return ok ? 0 : 1;
}

static int server(struct pt *t)
{
    NDK_SOCKADDR addr, bound;
    memset(&addr, 0, sizeof addr);
    if (t->o.bind) {
        if (!resolve(t->role, t->o.bind, &addr))
            return 1;
    } else {
        addr.in4.sin_family = AF_INET;
    }
    set_port(&addr, t->o.port);
    if (!open_both(t, t->o.adapter ? t->o.adapter : t->o.bind ? t->o.bind : "lo"))
        return 1;
    t->ctl.max_requests = 2; /* control, then test connection */
    if (!ep_listen(&t->ctl, &addr, &bound))
        return 1;
    char ip[INET6_ADDRSTRLEN];
    printf("ndkperf --perftest %s server: listening on %s port %u (adapter %s), waiting up to %u s for perftest's "
           "client (%s -R)\n",
           test_name(t->p.test), ip_text(&bound, ip, sizeof ip), get_port(&bound), t->ctl.adapter_name,
           t->o.accept_timeout_ms / 1000, test_name(t->p.test));
    fflush(stdout);
    if (!ep_wait_request(&t->ctl, t->o.accept_timeout_ms))
        return 1;
    uint8_t pd[64];
    uint32_t len = 0;
    ULONG rird = 0, rord = 0;
    if (!ep_request_data(&t->ctl, pd, sizeof pd, &len, &rird, &rord))
        return 1;
    if (!ep_accept(&t->ctl, NULL, 0, 0, 0))
        return 1;
    t->ctl_ready = true;
    NDK_SOCKADDR local = bound;
    fill_mine(t, &local);
    if (!exchange_setup(t))
        return 1;
    /* The test connection: the listener's second request, on the test QP. */
    NDK_CONNECTOR *ctl_cn = t->ctl.cn;
    bool got = ep_wait_request(&t->ctl, t->o.timeout_ms);
    t->tst.cn = got ? t->ctl.cn : NULL;
    t->ctl.cn = ctl_cn;
    if (!got)
        return 1;
    if (!ep_request_data(&t->tst, pd, sizeof pd, &len, &rird, &rord))
        return 1;
    ULONG ird, ord;
    read_limits(t, &ird, &ord);
    /* Our limits capped by the client's (reference 7.4). */
    if (!ep_accept(&t->tst, NULL, 0, ird < rird ? ird : rird, ord < rord ? ord : rord))
        return 1;
    t->tst_ready = true;
    if (!run_test(t))
        return 1;
    /* perftest's client disconnects when it is done; wait for it. */
    t->tst_ready = t->ctl_ready = false;
    bool ok = ep_disconnect(&t->tst, true);
    ok = ep_disconnect(&t->ctl, true) && ok;
    printf("ndkperf --perftest %s server: done\n", test_name(t->p.test));
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

static void pt_usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  ndkperf --perftest TEST [options]           server, for perftest's client\n"
            "  ndkperf --perftest TEST [options] SERVER    client of perftest's server\n"
            "\n"
            "Speaks perftest %s's protocol over rdma_cm (its -R mode), so that ndkperf and\n"
            "perftest run against each other: 'ib_write_bw -R -s 65536 -n 200' against\n"
            "'ndkperf --perftest write_bw -s 65536 -n 200', either side the server.\n"
            "Both sides must be given the same -s, -n or -D, and -r (perftest does not\n"
            "exchange them).\n"
            "\n"
            "TEST: write_bw, read_bw, send_bw, send_lat, write_lat (or ib_write_bw, ...).\n"
            "\n"
            "  -s, --size=BYTES        message size (default 65536; latency tests 2)\n"
            "  -a, --all               latency tests: every size 2 B .. 8 MiB, powers of two\n"
            "  -n, --iters=N           iterations (default 5000 for write_bw, else 1000)\n"
            "  -D, --duration=SECONDS  bandwidth tests: run this long instead of -n\n"
            "  -t, --tx-depth=N        requests in flight (default 128); capped at -n\n"
            "  -r, --rx-depth=N        send_bw: the server's receives (default 512); capped at -n\n"
            "  -o, --outs=N            read_bw: outstanding reads (default 128)\n"
            "  -p, --port=PORT         port of the control and test connections (default %u;\n"
            "                          a server given 0 lets the provider pick and prints it)\n"
            "  -d, --ib-dev=ADAPTER    NDK adapter: interface name or address (default: lo for\n"
            "                          the server, the route's for the client)\n"
            "  -B, --bind=ADDRESS      server: listen on this address only\n"
            "  -R, -F                  accepted for perftest's command line (rdma_cm is always\n"
            "                          used; no CPU frequency check)\n"
            "      --timeout=MS        longest wait for a completion or message (default 10000)\n"
            "      --accept-timeout=S  how long the server waits for its client (default 60)\n"
            "      --crc               ask for MPA CRC32c\n"
            "  -h, --help              this text\n",
            PT_VERSION, NDKPERF_DEFAULT_PORT);
}

static int pt_usage_error(const char *what, const char *arg)
{
    fprintf(stderr, "ndkperf --perftest: %s '%s'\nTry 'ndkperf --perftest --help'.\n", what, arg ? arg : "");
    return 2;
}

enum { PT_OPT_TIMEOUT = 0x100, PT_OPT_ACCEPT_TIMEOUT, PT_OPT_CRC };

int perftest_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"all", no_argument, NULL, 'a'},
        {"iters", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'D'},
        {"tx-depth", required_argument, NULL, 't'},
        {"rx-depth", required_argument, NULL, 'r'},
        {"outs", required_argument, NULL, 'o'},
        {"port", required_argument, NULL, 'p'},
        {"ib-dev", required_argument, NULL, 'd'},
        {"bind", required_argument, NULL, 'B'},
        {"rdma_cm", no_argument, NULL, 'R'},
        {"timeout", required_argument, NULL, PT_OPT_TIMEOUT},
        {"accept-timeout", required_argument, NULL, PT_OPT_ACCEPT_TIMEOUT},
        {"crc", no_argument, NULL, PT_OPT_CRC},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static struct pt t; /* large; and its endpoints outlive any late callback */
    memset(&t, 0, sizeof t);
    struct options *o = &t.o;
    o->cpu_server = o->cpu_client = -1;
    o->wait = WAIT_YIELD;
    o->timeout_ms = 10000;
    o->accept_timeout_ms = 60000;
    o->port = NDKPERF_DEFAULT_PORT;
    uint32_t tx = 128, rx = 512, outs = 128;
    bool size_given = false;
    uint64_t v;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "s:an:D:t:r:o:p:d:B:RFh", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a':
            t.p.all_sizes = true;
            break;
        case 's':
            if (!parse_u64(optarg, 1, NDKPERF_MAX_SIZE, true, &v))
                return pt_usage_error("invalid size (1 byte to 8 MiB)", optarg);
            t.p.size = (uint32_t)v;
            size_given = true;
            break;
        case 'n':
            if (!parse_u64(optarg, 1, UINT32_MAX, false, &v))
                return pt_usage_error("invalid iteration count", optarg);
            t.p.iters = (uint32_t)v;
            break;
        case 'D':
            if (!parse_u64(optarg, 1, 86400, false, &v))
                return pt_usage_error("invalid duration", optarg);
            t.p.duration_s = (uint32_t)v;
            break;
        case 't':
            if (!parse_u64(optarg, 1, 16383, false, &v))
                return pt_usage_error("invalid TX depth", optarg);
            tx = (uint32_t)v;
            break;
        case 'r':
            if (!parse_u64(optarg, 1, 16384, false, &v))
                return pt_usage_error("invalid RX depth", optarg);
            rx = (uint32_t)v;
            break;
        case 'o':
            if (!parse_u64(optarg, 1, 65535, false, &v))
                return pt_usage_error("invalid outstanding read count", optarg);
            outs = (uint32_t)v;
            break;
        case 'p':
            /* 0: the server lets the provider pick one (its line says which). */
            if (!parse_u64(optarg, 0, 65535, false, &v))
                return pt_usage_error("invalid port", optarg);
            o->port = (unsigned)v;
            o->port_given = true;
            break;
        case 'd':
            o->adapter = optarg;
            break;
        case 'B':
            o->bind = optarg;
            break;
        case 'R':
        case 'F':
            break;
        case PT_OPT_TIMEOUT:
            if (!parse_u64(optarg, 100, 3600000, false, &v))
                return pt_usage_error("invalid timeout (100 to 3600000 ms)", optarg);
            o->timeout_ms = (unsigned)v;
            break;
        case PT_OPT_ACCEPT_TIMEOUT:
            if (!parse_u64(optarg, 1, 86400, false, &v))
                return pt_usage_error("invalid accept timeout", optarg);
            o->accept_timeout_ms = (unsigned)v * 1000u;
            break;
        case PT_OPT_CRC:
            o->crc = true;
            break;
        case 'h':
            pt_usage(stdout);
            return 0;
        default:
            pt_usage(stderr);
            return 2;
        }
    }
    if (optind >= argc)
        return pt_usage_error("which test? (write_bw, read_bw, send_bw, send_lat, write_lat)", "");
    const char *name = argv[optind];
    if (strncmp(name, "ib_", 3) == 0)
        name += 3;
    int k;
    for (k = 0; k < T_COUNT; k++)
        if (strcmp(name, test_name((enum test_kind)k)) == 0)
            break;
    if (k == T_COUNT || k == T_READ_LAT)
        return pt_usage_error("unknown or unsupported test (read_lat is not done yet)", argv[optind]);
    t.p.test = (enum test_kind)k;
    if (optind + 2 < argc)
        return pt_usage_error("unexpected argument", argv[optind + 2]);
    t.p.address = optind + 1 < argc ? argv[optind + 1] : NULL;
    t.p.server = t.p.address == NULL;
    t.role = t.p.server ? "server" : "client";
    if (!t.p.server && o->port == 0)
        return pt_usage_error("a client needs the server's port", "-p 0");
    if (t.p.iters && t.p.duration_s)
        return pt_usage_error("-n and -D exclude each other", "-D");
    if (t.p.duration_s && test_is_lat(t.p.test))
        return pt_usage_error("-D is for the bandwidth tests here", "-D");
    if (!t.p.iters && !t.p.duration_s)
        t.p.iters = t.p.test == T_WRITE_BW ? 5000 : 1000;
    if (t.p.all_sizes && size_given)
        return pt_usage_error("-a and -s exclude each other", "-s");
    if (t.p.all_sizes && !test_is_lat(t.p.test))
        return pt_usage_error("-a is for the latency tests (send_lat, write_lat)", argv[optind]);
    if (!size_given)
        t.p.size = t.p.all_sizes ? NDKPERF_MAX_SIZE : test_is_lat(t.p.test) ? 2 : 65536;
    /* As perftest: the latency tests have one message in flight, and the
     * depths never exceed the iterations. */
    if (test_is_lat(t.p.test))
        tx = 1;
    if (t.p.iters) {
        if (tx > t.p.iters)
            tx = t.p.iters;
        if (rx > t.p.iters)
            rx = t.p.iters;
    }
    t.p.tx_depth = tx;
    t.p.rx_depth = rx;
    t.p.outs = outs;
    o->test = t.p.test;
    o->size = t.p.size;
    o->iters = t.p.iters;
    o->duration_ms = t.p.duration_s * 1000u;
    o->progress = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *tr = getenv("NDKPERF_PERFTEST_TRACE");
    t.trace = tr && *tr && strcmp(tr, "0") != 0;
    const char *order = getenv("NDKPERF_PERFTEST_CLOSE");
    t.close_test_first = order && strcmp(order, "test-first") == 0;

    int rc = t.p.server ? server(&t) : client(&t);
    /* The test endpoint uses the control one's adapter: it goes first. */
    if (t.inited) {
        ep_close(&t.tst);
        ep_close(&t.ctl);
    }
    return rc;
}
