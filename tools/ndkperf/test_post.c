/*
 * test_post.c - posting the tests' work requests and control messages, and
 * handling their completions (test_run.h).
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/polled.h"
#include "ndkperf/test_run.h"

#define POLLS_PER_CLOCK 64

bool sq_room(const struct endpoint *e)
{
    return e->sq_posted - e->sq_done < e->sq_limit;
}

/* A bandwidth loop about to post n requests in a row: how the i-th goes
 * out. Every one but the last of each chain of -l is deferred, so the
 * provider sees one doorbell per chain. */
unsigned chain_how(const struct endpoint *e, uint64_t i, uint64_t n)
{
    bool last = i + 1 == n || (i + 1) % e->opt->post_list == 0;
    return last ? POST_PLAIN : POST_DEFER;
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

bool post_send(struct endpoint *e, enum sq_op op, void *buf, uint32_t len, unsigned how)
{
    ULONG flags = 0;
    if (len <= e->qp_inline)
        flags |= NDK_OP_FLAG_INLINE; /* copied during the call */
    NDK_SGE sge = {.VirtualAddress = buf, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_next(e, op, how, &flags);
    NTSTATUS st = e->c.qp->Dispatch->NdkSend(e->c.qp, ctx, &sge, 1, flags);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, "NdkSend", st, "%" PRIu32 " bytes, flags 0x%" PRIx32, len, flags);
        return false;
    }
    return true;
}

bool post_rdma(struct endpoint *e, enum sq_op op, uint32_t len, unsigned how)
{
    bool write = op == OP_WRITE;
    ULONG flags = write && len <= e->qp_inline ? NDK_OP_FLAG_INLINE : 0;
    NDK_SGE sge = {.VirtualAddress = write ? e->source : e->target, .Length = len, .MemoryRegionToken = e->ltoken};
    PVOID ctx = sq_next(e, op, how, &flags);
    NDK_QP *qp = e->c.qp;
    NTSTATUS st = write ? qp->Dispatch->NdkWrite(qp, ctx, &sge, 1, e->peer.va, e->peer.token, flags)
                        : qp->Dispatch->NdkRead(qp, ctx, &sge, 1, e->peer.va, e->peer.token, flags);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, write ? "NdkWrite" : "NdkRead", st,
                      "%" PRIu32 " bytes at 0x%" PRIx64 " token 0x%" PRIx32 ", flags 0x%" PRIx32, len, e->peer.va,
                      e->peer.token, flags);
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

bool send_ctrl(struct endpoint *e, enum ctrl_type type, uint32_t size, uint64_t value, bool force_signal)
{
    uint8_t *p = ctrl_slot(e);
    tc_put_be32(p, type);
    tc_put_be32(p + 4, size);
    tc_put_be64(p + 8, value);
    return post_send(e, OP_CTRL, p, CTRL_MSG_LEN, force_signal ? POST_SIGNAL : POST_PLAIN);
}

bool send_mark(struct endpoint *e, char mark)
{
    uint8_t *p = ctrl_slot(e);
    p[0] = (uint8_t)mark;
    return post_send(e, OP_CTRL, p, 1, POST_SIGNAL);
}

bool test_prepost(struct endpoint *e, const struct test_params *tp, bool server)
{
    if (e->opt->wait != TC_WAIT_EVENTS) {
        /* Polling never arms the CQ; this one arm makes the provider tell
         * us about a CQ error (overflow) instead of a silent stall. */
        e->c.cq->Dispatch->NdkArmCq(e->c.cq, NDK_CQ_NOTIFY_ERRORS);
    }
    bool data = tp->test == T_SEND_LAT || (tp->test == T_SEND_BW && server);
    for (uint32_t i = 0; i < e->rq_depth; i++)
        if (!(data ? post_data_recv(e) : post_ctrl_recv(e, i, CTRL_MSG_LEN)))
            return false;
    return true;
}

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
        tc_complain(e->role, "%s #%" PRIu64 " (%" PRIu32 " bytes) completed with %s%s",
                 op_name((enum sq_op)e->sq_op[n % e->ctrl_tx_slots]), n, x->size, ndk_status_name(r->Status), hint);
    } else {
        tc_complain(e->role, "a %s receive completed with %s%s", k == WR_RX_DATA ? "data" : "control",
                 ndk_status_name(r->Status), hint);
    }
    return false;
}

static bool sq_completed(struct run *x, uint64_t n)
{
    struct endpoint *e = x->e;
    if (n <= e->sq_done || n > e->sq_posted) {
        tc_library_problem(e->role, "initiator completion #%" PRIu64 " arrived after #%" PRIu64 " (posted up to #%" PRIu64
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
        x->t_data_done = tc_now_ns();
        if (x->sq_samples && !tc_bw_add(x->sq_samples, x->data_done, x->t_data_done)) {
            tc_complain(e->role, "out of memory");
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
        x->data_in_total++;
        return true;
    }
    if (len == 1 && mark == MARK_END && x->server) {
        x->got_end = true;
        return true;
    }
    if (len == 1 && mark == MARK_ACK && !x->server) {
        x->got_ack = true;
        x->t_ack = tc_now_ns();
        return true;
    }
    tc_complain(e->role, "received a message of %" PRIu32 " bytes (first byte 0x%02x) while expecting %" PRIu32
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
        tc_library_problem(e->role, "a receive completion with a context ndkperf never posted");
        return false;
    }
    const uint8_t *p = e->ctrl_rx + slot * CTRL_SLOT;
    uint32_t len = r->BytesTransferred;
    uint32_t type = tc_get_be32(p), size = tc_get_be32(p + 4);
    uint64_t value = tc_get_be64(p + 8);
    if (!post_ctrl_recv(e, (uint32_t)slot, CTRL_MSG_LEN))
        return false;
    if (len != CTRL_MSG_LEN) {
        tc_complain(e->role, "received a %" PRIu32 "-byte message where only %u-byte control messages belong", len,
                 CTRL_MSG_LEN);
        return false;
    }
    if (type == CTRL_ALIVE && x->server)
        return true;
    if (type == CTRL_CREDIT && !x->server && x->tp->test == T_SEND_BW) {
        if (value > x->acked)
            x->acked = value;
        uint64_t t = tc_now_ns();
        if (x->acked >= x->sent_total)
            x->t_ack = t;
        uint64_t delivered = x->acked - x->credit_base;
        if (delivered > x->data_sent)
            delivered = x->data_sent; /* the end marker is no data */
        if (x->credit_samples && !tc_bw_add(x->credit_samples, delivered, t)) {
            tc_complain(e->role, "out of memory");
            return false;
        }
        return true;
    }
    if ((type == CTRL_END && x->server) || (type == CTRL_ACK && !x->server)) {
        if (size != x->size) {
            tc_complain(e->role, "the peer is at %" PRIu32 "-byte messages, this side at %" PRIu32, size, x->size);
            return false;
        }
        if (type == CTRL_END) {
            x->got_end = true;
        } else {
            x->got_ack = true;
            x->t_ack = tc_now_ns();
        }
        return true;
    }
    tc_complain(e->role, "unexpected control message type %" PRIu32, type);
    return false;
}

static bool handle(struct run *x, const NDK_RESULT *r)
{
    struct endpoint *e = x->e;
    if (r->QPContext != e) {
        tc_library_problem(e->role, "a completion carries QPContext %p, the QP was created with %p", r->QPContext,
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
    tc_library_problem(e->role, "a completion with a RequestContext ndkperf never posted (%p)", r->RequestContext);
    return false;
}

/* Handles what the CQ holds; with block, waits (bounded) for something. */
bool pump(struct run *x, bool block, const char *what)
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

/* Takes and handles what the CQ holds and runs the step, until the step
 * is done or the CQ, armed, has come up empty once more (the arm-then-poll
 * order of NdkArmCq: a completion after the arm notifies again). The
 * waker's cb_lock is held: nobody else touches the CQ meanwhile. */
static int cb_pump(struct run *x)
{
    NDK_CQ *cq = x->e->c.cq;
    bool armed = false;
    x->cb_runs++;
    for (;;) {
        NDK_RESULT r[CQ_BATCH];
        unsigned n = cq_take(x->e, r, CQ_BATCH);
        for (unsigned i = 0; i < n; i++)
            if (!handle(x, &r[i]))
                return STEP_FAILED;
        int rc = x->cb_step(x);
        if (rc != STEP_MORE)
            return rc;
        if (n)
            continue;
        if (armed)
            return STEP_MORE;
        cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
        armed = true;
    }
}

/* The notification callback's work (tc_waker.on_notify, cb_lock held). */
static void on_notify(void *arg)
{
    struct run *x = arg;
    int rc = cb_pump(x);
    if (rc == STEP_MORE)
        return;
    struct tc_waker *w = &x->e->c.ev->waker;
    x->cb_result = rc;
    w->on_notify = NULL;
    tc_waker_wake(w, STATUS_SUCCESS);
}

/* Sleeps until the callback is done with the step. Every wait is bounded:
 * a timeout's worth of time in which the callback never ran, the peer gone
 * or a CQ error take the step away from the callback and end the wait. */
static bool sleep_on_steps(struct run *x, const char *what)
{
    struct endpoint *e = x->e;
    struct tc_waker *w = &e->c.ev->waker;
    struct tc_cq_wait cw;
    tc_conn_waiter(&e->c, &cw, TC_WAIT_EVENTS, NULL, NULL);
    uint64_t runs_before = 0;
    bool expired = false;
    for (;;) {
        pthread_mutex_lock(&w->lock);
        unsigned seen = w->wakes;
        bool cq_error = w->cq_status != STATUS_SUCCESS;
        pthread_mutex_unlock(&w->lock);
        pthread_mutex_lock(&w->cb_lock);
        int rc = x->cb_result;
        enum tc_waited why = TC_WAITED_OK;
        if (rc == STEP_MORE && cq_error)
            why = TC_WAITED_CQ_ERROR;
        else if (rc == STEP_MORE && cw.peer_left(cw.peer))
            why = TC_WAITED_LEFT;
        else if (rc == STEP_MORE && expired && x->cb_runs == runs_before)
            why = TC_WAITED_TIMEOUT;
        if (why != TC_WAITED_OK)
            w->on_notify = NULL; /* from here on, only this thread takes */
        runs_before = x->cb_runs;
        pthread_mutex_unlock(&w->cb_lock);
        if (rc != STEP_MORE)
            return rc == STEP_DONE;
        if (why != TC_WAITED_OK) {
            tc_explain_wait(e->role, why, w, wait_limit_ms(e), what);
            return false;
        }
        struct timespec deadline;
        tc_deadline(&deadline, wait_limit_ms(e));
        expired = false;
        pthread_mutex_lock(&w->lock);
        while (w->wakes == seen && !expired)
            expired = pthread_cond_timedwait(&w->cond, &w->lock, &deadline) != 0;
        pthread_mutex_unlock(&w->lock);
    }
}

bool run_steps(struct run *x, int (*step)(struct run *x), const char *what)
{
    struct endpoint *e = x->e;
    if (e->opt->wait != TC_WAIT_EVENTS) {
        int rc;
        while ((rc = step(x)) == STEP_MORE)
            if (!pump(x, true, what))
                return false;
        return rc == STEP_DONE;
    }
    struct tc_waker *w = &e->c.ev->waker;
    x->cb_step = step;
    x->cb_result = STEP_MORE;
    x->cb_runs = 0;
    pthread_mutex_lock(&w->cb_lock);
    int rc = cb_pump(x); /* what came before, the first post, the arm */
    if (rc == STEP_MORE) {
        w->on_notify = on_notify;
        w->on_notify_arg = x;
    }
    x->cb_result = rc;
    pthread_mutex_unlock(&w->cb_lock);
    return rc == STEP_MORE ? sleep_on_steps(x, what) : rc == STEP_DONE;
}

bool wait_room(struct run *x)
{
    while (!sq_room(x->e))
        if (!pump(x, true, "room on the initiator queue (a signaled completion)"))
            return false;
    return true;
}

/* Waits until every initiator request so far has completed. */
bool drain_sq(struct run *x, const char *what)
{
    while (x->e->sq_done < x->e->sq_posted)
        if (!pump(x, true, what))
            return false;
    return true;
}

uint64_t alive_interval_ns(const struct run *x)
{
    uint64_t quarter = (uint64_t)x->e->opt->timeout_ms * 250000u;
    return quarter < 1000000000u ? quarter : 1000000000u;
}

/* Keeps a passive server's bounded wait alive during a long data phase. */
bool maybe_alive(struct run *x, uint64_t now)
{
    if (now < x->next_alive || !sq_room(x->e))
        return true;
    x->next_alive = now + alive_interval_ns(x);
    return send_ctrl(x->e, CTRL_ALIVE, x->size, 0, false);
}

/* -n decides, or -D from start. */
bool more_to_do(const struct run *x, uint64_t done, uint64_t now, uint64_t start)
{
    if (x->tp->iters)
        return done < x->tp->iters;
    return now - start < (uint64_t)x->tp->duration_ms * 1000000u;
}

/* The client's end of a size in write and read tests: END, then the
 * server's ACK, which also tells that everything before it arrived. */
bool end_size_ctrl(struct run *x)
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
bool wait_byte(struct run *x, uint8_t val, uint64_t start, const char *what)
{
    struct endpoint *e = x->e;
    const uint8_t *last = e->target + x->size - 1;
    bool yield = e->opt->wait == TC_WAIT_YIELD;
    for (unsigned polls = 1; tc_polled_byte(last) != val; polls++) {
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
void run_begin(struct run *x, struct endpoint *e, const struct test_params *tp, bool server, unsigned sizes)
{
    memset(x, 0, sizeof *x);
    x->e = e;
    x->tp = tp;
    x->server = server;
    x->sizes = sizes;
    /* The server shows nothing: the client's line tells the run. */
    tc_progress_init(&x->progress, server ? 0 : e->opt->progress);
}

void size_begin(struct run *x, uint32_t size)
{
    x->size = size;
    x->data_in = 0;
    x->got_end = x->got_ack = false;
    x->t_ack = 0;
    x->data_done = 0;
    x->t_data_done = 0;
    x->sq_samples = x->credit_samples = NULL;
}

void report_notifications(const struct run *x)
{
    const struct endpoint *e = x->e;
    if (e->opt->wait != TC_WAIT_EVENTS)
        return;
    unsigned wakes = tc_waker_notified(&e->c.ev->waker);
    tc_out_lock();
    printf(" Notifications   : %s %u for %" PRIu64 " data messages received", e->role, wakes,
           x->data_in_total);
    if (x->data_in_total)
        printf(" (%.3f per message)", (double)wakes / (double)x->data_in_total);
    printf("\n");
    fflush(stdout);
    tc_out_unlock();
}

void run_progress(struct run *x, uint64_t now, uint64_t done, double rate, const char *unit)
{
    if (!tc_progress_due(&x->progress, now))
        return;
    char where[48] = "", span[32] = "";
    if (x->sizes > 1)
        snprintf(where, sizeof where, " (size %u of %u)", x->size_index + 1, x->sizes);
    if (x->tp->duration_ms)
        snprintf(span, sizeof span, " of %.0f", x->tp->duration_ms / 1000.0);
    tc_progress_show(&x->progress, now, "%" PRIu32 " bytes%s: %" PRIu64 " %s in %.1f%s s, %.2f %s", x->size, where,
                     done, test_is_lat(x->tp->test) ? "iterations" : "messages", (double)(now - x->t_size) / 1e9,
                     span, rate, unit);
}
