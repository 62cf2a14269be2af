/*
 * perftest_data.c - ndkperf --perftest's test connection (perftest.h):
 * posting and completions, and the data phases of the five tests as
 * perftest runs them.
 */
#include <inttypes.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/polled.h"
#include "ndkperf/perftest.h"


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
        st = e->c.qp->Dispatch->NdkSend(e->c.qp, ctx, &sge, 1, flags);
    } else if (op == OP_WRITE) {
        call = "NdkWrite";
        st = e->c.qp->Dispatch->NdkWrite(e->c.qp, ctx, &sge, 1, va, token, flags);
    } else {
        call = "NdkRead";
        st = e->c.qp->Dispatch->NdkRead(e->c.qp, ctx, &sge, 1, va, token, flags);
    }
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(t->role, call, st, "%" PRIu32 " bytes, remote 0x%" PRIx64 " token 0x%08" PRIx32, len, va, token);
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
            tc_complain(t->role, "a %s on the test connection completed with %s%s",
                     WR_KIND(r[i].RequestContext) == WR_SQ ? "request" : "receive", ndk_status_name(r[i].Status),
                     r[i].Status == STATUS_CANCELLED ? " (flushed: the connection is gone)" : "");
            return -1;
        }
        if (WR_KIND(r[i].RequestContext) == WR_SQ) {
            uint64_t seq = WR_VAL(r[i].RequestContext);
            if (seq <= t->done || seq > t->posted) {
                tc_library_problem(t->role, "completion #%" PRIu64 " after #%" PRIu64 " (posted up to #%" PRIu64 ")", seq,
                                t->done, t->posted);
                return -1;
            }
            t->done = seq;
            if (t->samples && !tc_bw_add(t->samples, t->done, tc_now_ns())) {
                tc_complain(t->role, "out of memory");
                return -1;
            }
            continue;
        }
        if (!post_data_recv(&t->tst))
            return -1;
        t->recvs++;
        t->t_last_recv = tc_now_ns();
        got++;
    }
    return got;
}

/* Waits until at most `left` initiator requests are unfinished. */
bool pt_sq_wait(struct pt *t, uint64_t left, const char *what)
{
    struct clock_bound b;
    pt_bound_start(&b, t->o.timeout_ms);
    while (t->posted - t->done > left) {
        long n = tst_poll(t);
        if (n < 0)
            return false;
        if (t->posted - t->done > left && !pt_bound_ok(t, &b, what))
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


/* Client of write_bw, read_bw, send_bw. */
bool pt_client_bw(struct pt *t, struct tc_bw_samples *bw)
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
            tc_complain(t->role, "the test connection allows no outstanding RDMA Read (ORD 0)");
            return false;
        }
    }
    /* Only a signaled completion frees room: a full window must hold one,
     * or its completions never come (read_bw with -o below -t / 4). */
    if (t->signal_every > limit)
        t->signal_every = (uint32_t)limit;
    /* send_bw: the server's receives, which its credits count. */
    uint64_t window = t->p.rx_depth;
    const uint8_t *credit = e->target;
    uint64_t start = tc_now_ns(), now = start;
    t->samples = bw;
    if (!tc_bw_add(bw, 0, start))
        goto oom;
    struct clock_bound b;
    pt_bound_start(&b, t->o.timeout_ms);
    uint64_t last_done = 0;
    while (more(t, t->posted, start, now)) {
        bool posted_any = false;
        while (t->posted - t->done < limit && more(t, t->posted, start, now)) {
            if (op == OP_SEND) {
                uint32_t c = tc_polled_le32(credit);
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
        now = tc_now_ns();
        if (posted_any || t->done != last_done) {
            last_done = t->done;
            pt_bound_start(&b, t->o.timeout_ms);
        } else if (!pt_bound_ok(t, &b, op == OP_SEND ? "send completions or a credit from the server"
                                                  : "completions on the test connection")) {
            return false;
        }
    }
    if (!pt_sq_wait(t, 0, "the last completions"))
        return false;
    t->samples = NULL;
    return true;
oom:
    tc_complain(t->role, "out of memory");
    return false;
}

/* Server of send_bw: count, post again, credit. With -D the client's
 * closing message on the control connection ends it. */
bool pt_server_send_bw(struct pt *t, struct tc_bw_samples *bw)
{
    uint64_t window = t->p.rx_depth, every = window / 3 ? window / 3 : 1;
    uint8_t *slots = t->tst.ctrl_tx;
    struct clock_bound b;
    pt_bound_start(&b, t->p.iters ? t->o.timeout_ms : pt_after_data_ms(t));
    bool started = false;
    for (;;) {
        if (t->p.iters && t->recvs >= t->p.iters)
            break;
        if (!t->p.iters) {
            if (!pt_ctl_poll(t))
                return false;
            if (t->in_count)
                break;
        }
        long n = tst_poll(t);
        if (n < 0)
            return false;
        if (n == 0) {
            if (!pt_bound_ok(t, &b, "the client's next Send"))
                return false;
            continue;
        }
        if (!started) {
            /* perftest's server times from its first receive. */
            started = true;
            if (!tc_bw_add(bw, 0, t->t_last_recv))
                goto oom;
        }
        if (!tc_bw_add(bw, t->recvs, t->t_last_recv))
            goto oom;
        pt_bound_start(&b, t->p.iters ? t->o.timeout_ms : pt_after_data_ms(t));
        /* The receives are posted again (tst_poll): credit them when a
         * credit point was passed in this batch. */
        uint64_t from = t->recvs - (uint64_t)n + 1;
        bool owed = false;
        for (uint64_t c = from; c <= t->recvs; c++)
            if ((c % window) % every == 0)
                owed = true;
        if (!owed)
            continue;
        if (!pt_sq_wait(t, t->tst.sq_limit - 1, "room for a credit Write"))
            return false;
        uint8_t *p = slots + (size_t)((t->posted + 1) % t->tst.ctrl_tx_slots) * CTRL_SLOT;
        uint32_t v = (uint32_t)t->recvs;
        p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
        /* Signaled: they are few, and the last one must show. */
        if (!post_data(t, OP_WRITE, p, 4, t->peer.vaddr, t->peer.rkey, true))
            return false;
    }
    return pt_sq_wait(t, 0, "the last credit Write");
oom:
    tc_complain(t->role, "out of memory");
    return false;
}

/* send_lat, both sides: the client sends first. A sample is the time from
 * one of our Sends to the peer's next one. */
bool pt_pingpong_send(struct pt *t, struct tc_lat_samples *lat)
{
    struct endpoint *e = &t->tst;
    bool client = !t->p.server;
    uint64_t it = 0, t_post = 0;
    uint64_t start = tc_now_ns();
    for (;;) {
        if (client) {
            if (!more(t, it, start, tc_now_ns()))
                break;
            if (!pt_sq_wait(t, e->sq_limit - 1, "room for a Send"))
                return false;
            t_post = tc_now_ns();
            /* The last request is signaled: its completion ends the run. */
            if (!post_data(t, OP_SEND, e->source, t->p.size, 0, 0, it + 1 == t->p.iters))
                return false;
        }
        /* Wait for the peer's message. */
        struct clock_bound b;
        pt_bound_start(&b, it == 0 && !client ? pt_after_data_ms(t) : t->o.timeout_ms);
        uint64_t want = t->recvs + 1;
        while (t->recvs < want) {
            if (tst_poll(t) < 0)
                return false;
            if (t->recvs < want && !pt_bound_ok(t, &b, "the peer's next Send"))
                return false;
        }
        it++;
        if (t_post && !tc_lat_add(lat, t->t_last_recv - t_post))
            goto oom;
        if (!client) {
            if (!pt_sq_wait(t, e->sq_limit - 1, "room for a Send"))
                return false;
            t_post = tc_now_ns();
            if (!post_data(t, OP_SEND, e->source, t->p.size, 0, 0, it == t->p.iters))
                return false;
            if (t->p.iters && it >= t->p.iters)
                break;
        }
    }
    return pt_sq_wait(t, 0, "the last Send's completion");
oom:
    tc_complain(t->role, "out of memory");
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
    const uint8_t *in = t->tst.target + t->p.size - 1;
    struct clock_bound b;
    pt_bound_start(&b, ms);
    while (tc_polled_byte(in) != (uint8_t)it) {
        if (tst_poll(t) < 0)
            return false;
        uint8_t now = tc_polled_byte(in);
        if (now != (uint8_t)it && !pt_bound_ok(t, &b, "the peer's next RDMA Write")) {
            tc_complain(t->role, "write_lat iteration %" PRIu64 ": the last byte of the buffer holds %u, not %u",
                     it, now, (unsigned)(uint8_t)it);
            return false;
        }
    }
    return true;
}

bool pt_pingpong_write(struct pt *t, struct tc_lat_samples *lat)
{
    struct endpoint *e = &t->tst;
    bool server = t->p.server;
    uint8_t *out = e->source + t->p.size - 1;
    uint64_t t_post = 0;
    for (uint64_t it = 1; it <= t->p.iters; it++) {
        if (!server) {
            if (!wait_byte(t, it, it == 1 ? pt_after_data_ms(t) : t->o.timeout_ms))
                return false;
            if (t_post && !tc_lat_add(lat, tc_now_ns() - t_post))
                goto oom;
        }
        if (!pt_sq_wait(t, e->sq_limit - 1, "room for an RDMA Write"))
            return false;
        tc_polled_store(out, (uint8_t)it);
        t_post = tc_now_ns();
        if (!post_data(t, OP_WRITE, e->source, t->p.size, t->peer.vaddr, t->peer.rkey, it == t->p.iters))
            return false;
        if (server) {
            if (!wait_byte(t, it, t->o.timeout_ms))
                return false;
            if (!tc_lat_add(lat, tc_now_ns() - t_post))
                goto oom;
        }
    }
    return pt_sq_wait(t, 0, "the last RDMA Write's completion");
oom:
    tc_complain(t->role, "out of memory");
    return false;
}

