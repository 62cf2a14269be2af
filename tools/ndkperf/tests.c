/*
 * tests.c - the data paths of the six tests, client and server side.
 *
 * Roles, as in perftest: the client drives (it sends, writes or reads), the
 * server follows the parameters the client put in its private data.
 *
 *   send_lat   ping-pong of Sends; each side re-posts the receive it just
 *              consumed before it answers, so a Send always finds a
 *              receive (iWARP has no RNR retry: a Send without a posted
 *              receive kills the connection). Reported: half round trip.
 *   send_bw    the client streams Sends; the server keeps -r receives
 *              posted, re-posts each one as soon as it completes, and every
 *              -r/4 messages Sends back a credit: the cumulative count of
 *              messages it has received (and so re-posted receives for).
 *              The client never has more than -r messages beyond the last
 *              credit, so it cannot overrun the receives (perftest's iWARP
 *              credit scheme, with a Send instead of an RDMA Write, which
 *              needs no polling of memory). The time ends with the credit
 *              that counts the end marker: every message was delivered.
 *   write_lat  ping-pong of RDMA Writes: each side polls the last byte of
 *              its buffer for the iteration's value, then writes back.
 *              Valid only because the adapter places data in order
 *              (NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED): when the last
 *              byte is there, the whole message is. Half round trip.
 *   write_bw   -q RDMA Writes in flight; the time ends when the server's
 *              answer to the end message arrives: since it travels behind
 *              the writes on the same stream, all of them were delivered.
 *   read_lat   one RDMA Read at a time; the full round trip is reported,
 *              as perftest does for reads.
 *   read_bw    min(-q, the effective ORD) Reads in flight; the time ends
 *              with the last Read's completion (its data has arrived).
 *
 * Control messages, never mixed up with data:
 *   - send tests: 1-byte Sends in the data stream (data messages are at
 *     least 2 bytes): 'E' ends a size, 'A' answers it.
 *   - write and read tests: 16-byte Sends (END, ACK, ALIVE) into receives
 *     that only control messages use. ALIVE, once a second from a client
 *     whose server has nothing else to wait for, keeps the server's
 *     bounded wait from running out during long runs.
 *   - send_bw credits: 16-byte Sends into the client's receives, which only
 *     credits use.
 *
 * Completions: initiator requests are posted with SILENT_SUCCESS except
 * every signal_every-th, the last of a size and every control message
 * (perftest's cq_mod); a signaled completion tells that every earlier
 * request has completed as well.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ndkperf.h"

#define LAT_SQ_DEPTH 16
#define LAT_SIGNAL_EVERY 8
#define SERVER_SQ_DEPTH 16
#define SEND_LAT_RECVS 4
#define CTRL_RECVS 4
/* Credits in flight toward the client: at most -r / (-r/4) + 1 = 5. */
#define CREDIT_RECVS 16
#define POLLS_PER_CLOCK 64

enum ctrl_type { CTRL_END = 1, CTRL_ACK = 2, CTRL_CREDIT = 3, CTRL_ALIVE = 4 };
#define MARK_END 'E'
#define MARK_ACK 'A'

/* ------------------------------------------------------------------------ */
/* Shapes                                                                   */
/* ------------------------------------------------------------------------ */

unsigned size_list(const struct test_params *tp, uint32_t *sizes, unsigned cap)
{
    if (!tp->all_sizes) {
        sizes[0] = tp->size;
        return 1;
    }
    unsigned n = 0;
    for (uint32_t s = NDKPERF_MIN_ALL_SIZE; s <= NDKPERF_MAX_SIZE && n < cap; s <<= 1)
        sizes[n++] = s;
    return n;
}

void test_layout(const struct test_params *tp, const struct options *o, bool server, struct layout *l)
{
    memset(l, 0, sizeof *l);
    l->region = tp->all_sizes ? NDKPERF_MAX_SIZE : tp->size;
    if (server) {
        /* A server posts only answers, credits and write_lat pongs. */
        l->sq_depth = SERVER_SQ_DEPTH;
        l->signal_every = LAT_SIGNAL_EVERY;
    } else if (test_is_lat(tp->test)) {
        /* One message at a time; the depth only lets silent requests
         * accumulate between two signaled ones. */
        l->sq_depth = LAT_SQ_DEPTH;
        l->signal_every = LAT_SIGNAL_EVERY;
    } else {
        /* -q data requests, plus one slot kept for control messages. */
        l->sq_depth = o->depth + 1;
        l->signal_every = o->depth / 4 ? o->depth / 4 : 1;
    }
    switch (tp->test) {
    case T_SEND_LAT:
        l->rq_depth = SEND_LAT_RECVS;
        break;
    case T_SEND_BW:
        l->rq_depth = server ? tp->rx_depth : CREDIT_RECVS;
        l->ctrl_rx_slots = server ? 0 : CREDIT_RECVS;
        break;
    default:
        l->rq_depth = CTRL_RECVS;
        l->ctrl_rx_slots = CTRL_RECVS;
        break;
    }
    /* A slot per initiator request in flight, plus one: see send_ctrl(). */
    l->ctrl_tx_slots = l->sq_depth + 1;
    /* Every signaled request and every receive, and the flush of all of
     * them at the disconnect, with room to spare. */
    l->cq_depth = l->sq_depth + l->rq_depth + 16;
    l->inline_size = o->inline_size;
}

void test_read_limits(const struct test_params *tp, const struct options *o, ULONG *ird, ULONG *ord)
{
    /* As perftest: IRD = ORD = the outstanding reads for read tests, else 0. */
    *ird = *ord = test_uses_read(tp->test) ? o->outs : 0;
}

/* ------------------------------------------------------------------------ */
/* Posting                                                                  */
/* ------------------------------------------------------------------------ */

static bool sq_room(const struct endpoint *e)
{
    return e->sq_posted - e->sq_done < e->sq_limit;
}

/* How a request is posted: signaled even between two signal_every marks,
 * and/or with NDK_OP_FLAG_DEFER because more of its chain follows. */
enum post_how { POST_PLAIN = 0, POST_SIGNAL = 1, POST_DEFER = 2 };

/* A bandwidth loop about to post n requests in a row: how the i-th goes
 * out. Every one but the last of each chain of -l is deferred, so the
 * provider sees one doorbell per chain. */
static unsigned chain_how(const struct endpoint *e, uint64_t i, uint64_t n)
{
    bool last = i + 1 == n || (i + 1) % e->opt->post_list == 0;
    return last ? POST_PLAIN : POST_DEFER;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The context and flags of the next initiator request. */
static PVOID sq_next(struct endpoint *e, enum sq_op op, unsigned how, ULONG *flags)
{
    uint64_t seq = ++e->sq_posted;
    e->sq_op[seq % e->ctrl_tx_slots] = (uint8_t)op;
    if (how & POST_DEFER)
        *flags |= NDK_OP_FLAG_DEFER;
    if ((how & POST_SIGNAL) || e->opt->signal_all || seq % e->signal_every == 0)
        e->sq_last_signaled = seq;
    else
        *flags |= NDK_OP_FLAG_SILENT_SUCCESS;
    return WR_CTX(WR_SQ, seq);
}

static bool post_send(struct endpoint *e, enum sq_op op, void *buf, uint32_t len, unsigned how)
{
    ULONG flags = 0;
    if (len <= e->qp_inline)
        flags |= NDK_OP_FLAG_INLINE; /* copied during the call */
    NDK_SGE sge = {.VirtualAddress = buf, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_next(e, op, how, &flags);
    NTSTATUS st = e->qp->Dispatch->NdkSend(e->qp, ctx, &sge, 1, flags);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkSend", st, "%" PRIu32 " bytes, flags 0x%" PRIx32, len, flags);
        return false;
    }
    return true;
}

static bool post_write(struct endpoint *e, uint32_t len, unsigned how)
{
    ULONG flags = 0;
    if (len <= e->qp_inline)
        flags |= NDK_OP_FLAG_INLINE;
    NDK_SGE sge = {.VirtualAddress = e->source, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_next(e, OP_WRITE, how, &flags);
    NTSTATUS st = e->qp->Dispatch->NdkWrite(e->qp, ctx, &sge, 1, e->peer.va, e->peer.token, flags);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkWrite", st, "%" PRIu32 " bytes to 0x%" PRIx64 " token 0x%" PRIx32 ", flags 0x%" PRIx32,
                   len, e->peer.va, e->peer.token, flags);
        return false;
    }
    return true;
}

static bool post_read(struct endpoint *e, uint32_t len, unsigned how)
{
    ULONG flags = 0;
    NDK_SGE sge = {.VirtualAddress = e->target, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_next(e, OP_READ, how, &flags);
    NTSTATUS st = e->qp->Dispatch->NdkRead(e->qp, ctx, &sge, 1, e->peer.va, e->peer.token, flags);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkRead", st, "%" PRIu32 " bytes from 0x%" PRIx64 " token 0x%" PRIx32 ", flags 0x%" PRIx32,
                   len, e->peer.va, e->peer.token, flags);
        return false;
    }
    return true;
}

bool post_data_recv(struct endpoint *e)
{
    NDK_SGE sge = {.VirtualAddress = e->target, .Length = e->region, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->qp->Dispatch->NdkReceive(e->qp, WR_CTX(WR_RX_DATA, 0), &sge, 1);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkReceive", st, "%" PRIu32 " bytes", e->region);
        return false;
    }
    return true;
}

bool post_ctrl_recv(struct endpoint *e, uint32_t slot)
{
    NDK_SGE sge = {.VirtualAddress = e->ctrl_rx + (size_t)slot * CTRL_SLOT,
                   .Length = CTRL_MSG_LEN,
                   .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->qp->Dispatch->NdkReceive(e->qp, WR_CTX(WR_RX_CTRL, slot), &sge, 1);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkReceive", st, "control slot %" PRIu32, slot);
        return false;
    }
    return true;
}

/*
 * The slot of request n is n % (sq_limit + 1): when request n + slots is
 * posted, at most sq_limit requests are unfinished, so request n has
 * completed and its slot (which a non-inline Send reads until then) is
 * free again.
 */
static uint8_t *ctrl_slot(struct endpoint *e)
{
    return e->ctrl_tx + (size_t)((e->sq_posted + 1) % e->ctrl_tx_slots) * CTRL_SLOT;
}

static bool send_ctrl(struct endpoint *e, enum ctrl_type type, uint32_t size, uint64_t value, bool force_signal)
{
    uint8_t *p = ctrl_slot(e);
    tc_put_be32(p, type);
    tc_put_be32(p + 4, size);
    tc_put_be64(p + 8, value);
    return post_send(e, OP_CTRL, p, CTRL_MSG_LEN, force_signal ? POST_SIGNAL : POST_PLAIN);
}

static bool send_mark(struct endpoint *e, char mark)
{
    uint8_t *p = ctrl_slot(e);
    p[0] = (uint8_t)mark;
    return post_send(e, OP_CTRL, p, 1, POST_SIGNAL);
}

bool test_prepost(struct endpoint *e, const struct test_params *tp, bool server)
{
    if (e->opt->wait != WAIT_EVENTS) {
        /* Polling never arms the CQ; this one arm makes the provider tell
         * us about a CQ error (overflow) instead of a silent stall. */
        e->cq->Dispatch->NdkArmCq(e->cq, NDK_CQ_NOTIFY_ERRORS);
    }
    bool data = tp->test == T_SEND_LAT || (tp->test == T_SEND_BW && server);
    for (uint32_t i = 0; i < e->rq_depth; i++)
        if (!(data ? post_data_recv(e) : post_ctrl_recv(e, i)))
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Completions                                                              */
/* ------------------------------------------------------------------------ */

/* The state of one run; the cumulative counters span all sizes. */
struct run {
    struct endpoint *e;
    const struct test_params *tp;
    bool server;
    uint32_t size;

    /* This size. */
    uint64_t data_in;     /* data messages received */
    bool got_end, got_ack;
    uint64_t t_ack;       /* when the answer (or final credit) arrived */
    uint64_t data_done;   /* data requests known complete */
    uint64_t t_data_done; /* when data_done last grew */
    struct bw_samples *sq_samples;     /* write_bw, read_bw: completion points */
    struct bw_samples *credit_samples; /* send_bw: credit points */
    uint64_t next_alive;

    /* send_bw, counted over the whole run, end markers included. */
    uint64_t sent_total, acked, credit_base, data_sent;
    uint64_t recv_total;
    uint32_t credit_every;
    bool credit_owed;
};

static const char *op_name(enum sq_op op)
{
    switch (op) {
    case OP_SEND:
        return "NdkSend";
    case OP_WRITE:
        return "NdkWrite";
    case OP_READ:
        return "NdkRead";
    case OP_CTRL:
        return "NdkSend (control message)";
    }
    return "an initiator request";
}

static bool failed_completion(struct run *x, const NDK_RESULT *r)
{
    struct endpoint *e = x->e;
    const char *hint = r->Status == STATUS_CANCELLED ? " (flushed: the connection is gone)" : "";
    enum wr_kind k = WR_KIND(r->RequestContext);
    if (k == WR_SQ) {
        uint64_t n = WR_VAL(r->RequestContext);
        complain(e->role, "%s #%" PRIu64 " (%" PRIu32 " bytes) completed with %s%s",
                 op_name((enum sq_op)e->sq_op[n % e->ctrl_tx_slots]), n, x->size, ndk_status_name(r->Status), hint);
    } else {
        complain(e->role, "a %s receive completed with %s%s", k == WR_RX_DATA ? "data" : "control",
                 ndk_status_name(r->Status), hint);
    }
    return false;
}

static bool sq_completed(struct run *x, uint64_t n)
{
    struct endpoint *e = x->e;
    if (n <= e->sq_done || n > e->sq_posted) {
        library_problem(e->role, "initiator completion #%" PRIu64 " arrived after #%" PRIu64 " (posted up to #%" PRIu64
                                 "): completions out of order or unasked for",
                        n, e->sq_done, e->sq_posted);
        return false;
    }
    uint64_t before = x->data_done;
    for (uint64_t s = e->sq_done + 1; s <= n; s++)
        if (e->sq_op[s % e->ctrl_tx_slots] != OP_CTRL)
            x->data_done++;
    e->sq_done = n;
    if (x->data_done != before) {
        x->t_data_done = now_ns();
        if (x->sq_samples && !bw_add(x->sq_samples, x->data_done, x->t_data_done)) {
            complain(e->role, "out of memory");
            return false;
        }
    }
    return true;
}

/* A receive in the data stream of a send test. */
static bool rx_data(struct run *x, const NDK_RESULT *r)
{
    struct endpoint *e = x->e;
    uint32_t len = r->BytesTransferred;
    /* Only a 1-byte message (END, ACK) carries a marker, read before the
     * re-post lets anything overwrite it. A full-size one is not read: the
     * other receives posted on the same buffer may be taking the next one. */
    uint8_t mark = len == 1 ? e->target[0] : 0;
    /* At once, before answering: the peer may send again as soon as it
     * sees our answer. */
    if (!post_data_recv(e))
        return false;
    if (x->server && x->tp->test == T_SEND_BW) {
        x->recv_total++;
        if (len == x->size && x->recv_total % x->credit_every == 0)
            x->credit_owed = true;
    }
    if (len == x->size) {
        x->data_in++;
        return true;
    }
    if (len == 1 && mark == MARK_END && x->server) {
        x->got_end = true;
        return true;
    }
    if (len == 1 && mark == MARK_ACK && !x->server) {
        x->got_ack = true;
        x->t_ack = now_ns();
        return true;
    }
    complain(e->role, "received a message of %" PRIu32 " bytes (first byte 0x%02x) while expecting %" PRIu32
                      "-byte messages",
             len, mark, x->size);
    return false;
}

/* A receive that only control messages use. */
static bool rx_ctrl(struct run *x, const NDK_RESULT *r)
{
    struct endpoint *e = x->e;
    uint64_t slot = WR_VAL(r->RequestContext);
    if (slot >= e->ctrl_rx_slots) {
        library_problem(e->role, "a receive completion with a context ndkperf never posted");
        return false;
    }
    const uint8_t *p = e->ctrl_rx + slot * CTRL_SLOT;
    uint32_t len = r->BytesTransferred;
    uint32_t type = tc_get_be32(p), size = tc_get_be32(p + 4);
    uint64_t value = tc_get_be64(p + 8);
    if (!post_ctrl_recv(e, (uint32_t)slot))
        return false;
    if (len != CTRL_MSG_LEN) {
        complain(e->role, "received a %" PRIu32 "-byte message where only %u-byte control messages belong", len,
                 CTRL_MSG_LEN);
        return false;
    }
    if (type == CTRL_ALIVE && x->server)
        return true;
    if (type == CTRL_CREDIT && !x->server && x->tp->test == T_SEND_BW) {
        if (value > x->acked)
            x->acked = value;
        uint64_t t = now_ns();
        if (x->acked >= x->sent_total)
            x->t_ack = t;
        uint64_t delivered = x->acked - x->credit_base;
        if (delivered > x->data_sent)
            delivered = x->data_sent; /* the end marker is no data */
        if (x->credit_samples && !bw_add(x->credit_samples, delivered, t)) {
            complain(e->role, "out of memory");
            return false;
        }
        return true;
    }
    if ((type == CTRL_END && x->server) || (type == CTRL_ACK && !x->server)) {
        if (size != x->size) {
            complain(e->role, "the peer is at %" PRIu32 "-byte messages, this side at %" PRIu32, size, x->size);
            return false;
        }
        if (type == CTRL_END) {
            x->got_end = true;
        } else {
            x->got_ack = true;
            x->t_ack = now_ns();
        }
        return true;
    }
    complain(e->role, "unexpected control message type %" PRIu32, type);
    return false;
}

static bool handle(struct run *x, const NDK_RESULT *r)
{
    struct endpoint *e = x->e;
    if (r->QPContext != e) {
        library_problem(e->role, "a completion carries QPContext %p, the QP was created with %p", r->QPContext,
                        (void *)e);
        return false;
    }
    if (r->Status != STATUS_SUCCESS)
        return failed_completion(x, r);
    switch (WR_KIND(r->RequestContext)) {
    case WR_SQ:
        return sq_completed(x, WR_VAL(r->RequestContext));
    case WR_RX_DATA:
        return rx_data(x, r);
    case WR_RX_CTRL:
        return rx_ctrl(x, r);
    }
    library_problem(e->role, "a completion with a RequestContext ndkperf never posted (%p)", r->RequestContext);
    return false;
}

/* Handles what the CQ holds; with block, waits (bounded) for something. */
static bool pump(struct run *x, bool block, const char *what)
{
    NDK_RESULT r[CQ_BATCH];
    unsigned n = block ? cq_wait(x->e, r, CQ_BATCH, what) : cq_take(x->e, r, CQ_BATCH);
    if (block && n == 0)
        return false;
    for (unsigned i = 0; i < n; i++)
        if (!handle(x, &r[i]))
            return false;
    return true;
}

static bool wait_room(struct run *x)
{
    while (!sq_room(x->e))
        if (!pump(x, true, "room on the initiator queue (a signaled completion)"))
            return false;
    return true;
}

/* Waits until every initiator request so far has completed. */
static bool drain_sq(struct run *x, const char *what)
{
    while (x->e->sq_done < x->e->sq_posted)
        if (!pump(x, true, what))
            return false;
    return true;
}

static uint64_t alive_interval_ns(const struct run *x)
{
    uint64_t quarter = (uint64_t)x->e->opt->timeout_ms * 250000u;
    return quarter < 1000000000u ? quarter : 1000000000u;
}

/* Keeps a passive server's bounded wait alive during a long data phase. */
static bool maybe_alive(struct run *x, uint64_t now)
{
    if (now < x->next_alive || !sq_room(x->e))
        return true;
    x->next_alive = now + alive_interval_ns(x);
    return send_ctrl(x->e, CTRL_ALIVE, x->size, 0, false);
}

/* -n decides, or -D from start. */
static bool more_to_do(const struct run *x, uint64_t done, uint64_t now, uint64_t start)
{
    if (x->tp->iters)
        return done < x->tp->iters;
    return now - start < (uint64_t)x->tp->duration_ms * 1000000u;
}

/* The client's end of a size in write and read tests: END, then the
 * server's ACK, which also tells that everything before it arrived. */
static bool end_size_ctrl(struct run *x)
{
    if (!wait_room(x) || !send_ctrl(x->e, CTRL_END, x->size, 0, true))
        return false;
    while (!x->got_ack)
        if (!pump(x, true, "the server's answer to the end of the size"))
            return false;
    return drain_sq(x, "the completion of the end message");
}

/* ------------------------------------------------------------------------ */
/* Client side                                                              */
/* ------------------------------------------------------------------------ */

/* Spins on the last byte of the target buffer until it holds val,
 * polling the CQ meanwhile (it drives the provider in busy-poll mode and
 * reports failed requests). Servers stop early when END arrives. */
static bool wait_byte(struct run *x, uint8_t val, uint64_t start, const char *what)
{
    struct endpoint *e = x->e;
    volatile const uint8_t *last = e->target + x->size - 1;
    bool yield = e->opt->wait == WAIT_YIELD;
    for (unsigned polls = 1; *last != val; polls++) {
        if (!pump(x, false, NULL))
            return false;
        if (x->got_end)
            return true;
        if (yield)
            sched_yield();
        if (polls % POLLS_PER_CLOCK == 0 && !wait_ok(e, start, what))
            return false;
    }
    return true;
}

/* The latency tests' loop: warm-up, then -n iterations or -D seconds. */
static bool client_lat(struct run *x, struct lat_samples *lat)
{
    struct endpoint *e = x->e;
    const struct test_params *tp = x->tp;
    uint8_t *out = e->source + x->size - 1;
    uint8_t seq = 0;
    struct progress pg;
    uint64_t start = now_ns(), now = start, measured = 0;
    progress_start(&pg, e->opt, x->size, "iterations", start);
    for (uint64_t it = 0;; it++) {
        bool warm = it < tp->warmup;
        if (!warm) {
            if (it == tp->warmup)
                start = now, pg.start = now;
            if (!more_to_do(x, measured, now, start))
                break;
        }
        if (!wait_room(x))
            return false;
        uint64_t t0 = now_ns(), want = x->data_in + 1;
        switch (tp->test) {
        case T_SEND_LAT:
            if (!post_send(e, OP_SEND, e->source, x->size, POST_PLAIN))
                return false;
            while (x->data_in < want)
                if (!pump(x, true, "the answer to a Send"))
                    return false;
            break;
        case T_WRITE_LAT:
            seq = (uint8_t)(seq % 255 + 1); /* never 0: a fresh buffer holds 0 */
            *out = seq;
            if (!post_write(e, x->size, POST_PLAIN) || !wait_byte(x, seq, t0, "the server's RDMA Write"))
                return false;
            break;
        default: /* T_READ_LAT */
            if (!post_read(e, x->size, POST_SIGNAL) || !drain_sq(x, "the RDMA Read's completion"))
                return false;
            break;
        }
        now = now_ns();
        if (warm)
            continue;
        if (!lat_add(lat, now - t0)) {
            complain(e->role, "out of memory");
            return false;
        }
        measured++;
        double factor = tp->test == T_READ_LAT ? 1.0 : 0.5;
        progress_update(&pg, now, measured, (double)(now - t0) * factor / 1000.0, "us");
        if (tp->test == T_READ_LAT && !maybe_alive(x, now))
            return false;
    }
    progress_end(&pg);
    if (tp->test != T_SEND_LAT)
        return end_size_ctrl(x);
    if (!wait_room(x) || !send_mark(e, MARK_END))
        return false;
    while (!x->got_ack)
        if (!pump(x, true, "the server's answer to the end of the size"))
            return false;
    return drain_sq(x, "the completion of the end message");
}

static bool client_send_bw(struct run *x, struct bw_samples *bw)
{
    struct endpoint *e = x->e;
    const struct test_params *tp = x->tp;
    uint32_t rx = tp->rx_depth;
    struct progress pg;
    x->credit_base = x->sent_total; /* everything before was credited */
    x->data_sent = 0;
    x->credit_samples = bw;
    uint64_t start = now_ns(), now = start;
    if (!bw_add(bw, 0, start))
        goto oom;
    progress_start(&pg, e->opt, x->size, "messages", start);
    while (more_to_do(x, x->data_sent, now, start)) {
        /* Send while the queue and the credits allow, at most a batch
         * between two looks at the CQ. */
        uint64_t n = CQ_BATCH;
        n = min_u64(n, e->sq_limit - min_u64(e->sq_limit, e->sq_posted - e->sq_done));
        n = min_u64(n, rx - min_u64(rx, x->sent_total - x->acked));
        if (tp->iters)
            n = min_u64(n, tp->iters - x->data_sent);
        for (uint64_t i = 0; i < n; i++) {
            if (!post_send(e, OP_SEND, e->source, x->size, chain_how(e, i, n)))
                return false;
            x->data_sent++;
            x->sent_total++;
        }
        bool stuck = !sq_room(e) || x->sent_total - x->acked >= rx;
        if (!pump(x, stuck, "a send completion or a credit from the receiver"))
            return false;
        now = now_ns();
        double secs = (double)(now - start) / 1e9;
        progress_update(&pg, now, x->data_sent, secs > 0 ? (double)x->data_sent / secs / 1e6 : 0, "Mpps");
    }
    progress_end(&pg);
    /* The end marker needs a credit like any Send. */
    while (!sq_room(e) || x->sent_total - x->acked >= rx)
        if (!pump(x, true, "a credit for the end marker"))
            return false;
    if (!send_mark(e, MARK_END))
        return false;
    x->sent_total++;
    while (x->acked < x->sent_total)
        if (!pump(x, true, "the receiver's final credit"))
            return false;
    return drain_sq(x, "the last send completions");
oom:
    complain(e->role, "out of memory");
    return false;
}

static bool client_rdma_bw(struct run *x, struct bw_samples *bw)
{
    struct endpoint *e = x->e;
    const struct test_params *tp = x->tp;
    bool reads = tp->test == T_READ_BW;
    uint64_t limit = e->sq_limit - 1; /* one slot stays free for control messages */
    if (reads && e->ord < limit)
        limit = e->ord;
    if (limit == 0) {
        complain(e->role, "the connection allows no outstanding RDMA Read (effective ORD 0)");
        return false;
    }
    struct progress pg;
    uint64_t posted = 0, start = now_ns(), now = start;
    x->sq_samples = bw;
    x->next_alive = start + alive_interval_ns(x);
    if (!bw_add(bw, 0, start)) {
        complain(e->role, "out of memory");
        return false;
    }
    progress_start(&pg, e->opt, x->size, "messages", start);
    while (more_to_do(x, posted, now, start)) {
        uint64_t n = limit - min_u64(limit, e->sq_posted - e->sq_done);
        if (tp->iters)
            n = min_u64(n, tp->iters - posted);
        for (uint64_t i = 0; i < n; i++) {
            unsigned how = chain_how(e, i, n);
            if (tp->iters && posted + 1 == tp->iters)
                how |= POST_SIGNAL;
            if (!(reads ? post_read(e, x->size, how) : post_write(e, x->size, how)))
                return false;
            posted++;
        }
        if (tp->iters && posted == tp->iters)
            break;
        if (!pump(x, true, reads ? "RDMA Read completions" : "RDMA Write completions"))
            return false;
        now = now_ns();
        double secs = (double)(now - start) / 1e9;
        progress_update(&pg, now, x->data_done,
                        secs > 0 ? (double)x->data_done * x->size / secs / 1048576.0 : 0, "MB/s");
        if (!maybe_alive(x, now))
            return false;
    }
    progress_end(&pg);
    /* After -D the last request may have been silent: one more, signaled,
     * so that its completion tells when all are done. */
    if (e->sq_last_signaled != e->sq_posted) {
        if (!wait_room(x) || !(reads ? post_read(e, x->size, POST_SIGNAL) : post_write(e, x->size, POST_SIGNAL)))
            return false;
        posted++;
    }
    while (x->data_done < posted)
        if (!pump(x, true, reads ? "the last RDMA Reads" : "the last RDMA Writes"))
            return false;
    uint64_t t_reads_done = x->t_data_done;
    x->sq_samples = NULL;
    if (!end_size_ctrl(x))
        return false;
    /* Writes count when the server's answer shows they arrived; reads
     * when their data has arrived here. */
    return bw_add(bw, posted, reads ? t_reads_done : x->t_ack);
}

static void size_begin(struct run *x, uint32_t size)
{
    x->size = size;
    x->data_in = 0;
    x->got_end = x->got_ack = false;
    x->t_ack = 0;
    x->data_done = 0;
    x->t_data_done = 0;
    x->sq_samples = x->credit_samples = NULL;
}

bool run_client_tests(struct endpoint *e, const struct test_params *tp)
{
    uint32_t sizes[32];
    unsigned n = size_list(tp, sizes, 32);
    struct run x = {.e = e, .tp = tp, .server = false};
    report_columns(tp->test);
    for (unsigned i = 0; i < n; i++) {
        size_begin(&x, sizes[i]);
        bool ok;
        if (test_is_lat(tp->test)) {
            struct lat_samples lat = {0};
            ok = client_lat(&x, &lat);
            if (ok)
                report_lat(sizes[i], &lat, tp->test == T_READ_LAT ? 1.0 : 0.5);
            lat_free(&lat);
        } else {
            struct bw_samples bw = {0};
            ok = tp->test == T_SEND_BW ? client_send_bw(&x, &bw) : client_rdma_bw(&x, &bw);
            if (ok)
                report_bw(sizes[i], &bw);
            bw_free(&bw);
        }
        if (!ok)
            return false;
    }
    report_footer();
    return true;
}

/* ------------------------------------------------------------------------ */
/* Server side                                                              */
/* ------------------------------------------------------------------------ */

static bool server_send_lat(struct run *x)
{
    struct endpoint *e = x->e;
    uint64_t answered = 0;
    for (;;) {
        if (!pump(x, true, "the client's next Send"))
            return false;
        while (answered < x->data_in) {
            if (!wait_room(x) || !post_send(e, OP_SEND, e->source, x->size, POST_PLAIN))
                return false;
            answered++;
        }
        if (x->got_end)
            break;
    }
    return wait_room(x) && send_mark(e, MARK_ACK);
}

static bool server_send_bw(struct run *x)
{
    struct endpoint *e = x->e;
    for (;;) {
        if (!pump(x, true, "the client's next Send"))
            return false;
        if (!x->credit_owed && !x->got_end)
            continue;
        if (!wait_room(x))
            return false;
        /* The count is cumulative: one credit stands for all owed. */
        bool final = x->got_end;
        x->credit_owed = false;
        if (!send_ctrl(e, CTRL_CREDIT, x->size, x->recv_total, final))
            return false;
        if (final)
            return true;
    }
}

static bool server_write_lat(struct run *x)
{
    struct endpoint *e = x->e;
    uint8_t *out = e->source + x->size - 1;
    uint8_t seq = 0;
    for (;;) {
        seq = (uint8_t)(seq % 255 + 1);
        if (!wait_byte(x, seq, now_ns(), "the client's next RDMA Write"))
            return false;
        if (x->got_end)
            break;
        *out = seq;
        if (!wait_room(x) || !post_write(e, x->size, POST_PLAIN))
            return false;
    }
    return wait_room(x) && send_ctrl(e, CTRL_ACK, x->size, 0, true);
}

/*
 * write_bw, read_bw, read_lat: the client's requests complete nothing
 * here; only its control messages do. Its keep-alive travels behind up
 * to -q messages of data in its send queue (128 MiB with 1 MiB messages),
 * so on a slow or busy machine it may take a while: the bound here is
 * three times --timeout.
 */
static bool server_passive(struct run *x)
{
    x->e->wait_ms = 3 * x->e->opt->timeout_ms;
    while (!x->got_end)
        if (!pump(x, true, "the client's end of the size (or its keep-alive)"))
            return false;
    x->e->wait_ms = 0;
    return wait_room(x) && send_ctrl(x->e, CTRL_ACK, x->size, 0, true);
}

bool run_server_tests(struct endpoint *e, const struct test_params *tp)
{
    uint32_t sizes[32];
    unsigned n = size_list(tp, sizes, 32);
    struct run x = {.e = e, .tp = tp, .server = true};
    x.credit_every = tp->rx_depth / 4 ? tp->rx_depth / 4 : 1;
    for (unsigned i = 0; i < n; i++) {
        size_begin(&x, sizes[i]);
        bool ok;
        switch (tp->test) {
        case T_SEND_LAT:
            ok = server_send_lat(&x);
            break;
        case T_SEND_BW:
            ok = server_send_bw(&x);
            break;
        case T_WRITE_LAT:
            ok = server_write_lat(&x);
            break;
        default:
            ok = server_passive(&x);
            break;
        }
        if (!ok)
            return false;
    }
    /* The last answer must be on its way before the client's disconnect. */
    return drain_sq(&x, "the completion of the last answer");
}
