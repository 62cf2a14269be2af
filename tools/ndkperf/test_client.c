/*
 * test_client.c - the client's side of the six tests (test_run.h): it
 * drives each size and prints the table.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/polled.h"
#include "ndkperf/test_run.h"

/* One latency iteration: a message and its answer (or the Read's data). */
static bool one_round_trip(struct run *x, uint8_t *seq, uint64_t t0)
{
    struct endpoint *e = x->e;
    uint64_t want = x->data_in + 1;
    switch (x->tp->test) {
    case T_SEND_LAT:
        if (!post_send(e, OP_SEND, e->source, x->size, POST_PLAIN))
            return false;
        while (x->data_in < want)
            if (!pump(x, true, "the answer to a Send"))
                return false;
        return true;
    case T_WRITE_LAT:
        *seq = (uint8_t)(*seq % 255 + 1); /* never 0: a fresh buffer holds 0 */
        tc_polled_store(e->source + x->size - 1, *seq);
        return post_rdma(e, OP_WRITE, x->size, POST_PLAIN) && wait_byte(x, *seq, t0, "the server's RDMA Write");
    default: /* T_READ_LAT */
        return post_rdma(e, OP_READ, x->size, POST_SIGNAL) && drain_sq(x, "the RDMA Read's completion");
    }
}

/* The end of a latency size: the server's answer to the end marker. */
static bool end_lat_size(struct run *x)
{
    if (x->tp->test != T_SEND_LAT)
        return end_size_ctrl(x);
    if (!wait_room(x) || !send_mark(x->e, MARK_END))
        return false;
    while (!x->got_ack)
        if (!pump(x, true, "the server's answer to the end of the size"))
            return false;
    return drain_sq(x, "the completion of the end message");
}

/* send_lat, one step: the answer to the Send out, if it came, is
 * measured, and the next iteration's Send posted. */
enum { LAT_BEGIN, LAT_ROOM, LAT_ANSWER };
static int client_send_lat_step(struct run *x)
{
    const struct test_params *tp = x->tp;
    if (x->lat_phase == LAT_ANSWER) {
        if (x->data_in < x->lat_want)
            return STEP_MORE;
        x->lat_now = tc_now_ns();
        if (x->lat_it >= tp->warmup) {
            if (!tc_lat_add(x->lat, x->lat_now - x->lat_t0)) {
                tc_complain(x->e->role, "out of memory");
                return STEP_FAILED;
            }
            x->lat_measured++;
            run_progress(x, x->lat_now, x->lat_measured, (double)(x->lat_now - x->lat_t0) / 2000.0, "us");
        }
        x->lat_it++;
        x->lat_phase = LAT_BEGIN;
    }
    if (x->lat_phase == LAT_BEGIN) {
        if (x->lat_it == tp->warmup)
            x->t_size = x->lat_now;
        if (x->lat_it >= tp->warmup && !more_to_do(x, x->lat_measured, x->lat_now, x->t_size))
            return STEP_DONE;
        x->lat_t0 = tc_now_ns();
        x->lat_phase = LAT_ROOM;
    }
    if (!sq_room(x->e))
        return STEP_MORE;
    x->lat_want = x->data_in + 1;
    if (!post_send(x->e, OP_SEND, x->e->source, x->size, POST_PLAIN))
        return STEP_FAILED;
    x->lat_phase = LAT_ANSWER;
    return STEP_MORE;
}

/* send_lat with --wait=events: the whole loop runs in the CQ notification
 * callback, which answers at once instead of waking this thread. */
static bool client_send_lat_events(struct run *x, struct tc_lat_samples *lat)
{
    x->lat = lat;
    x->lat_it = x->lat_measured = 0;
    x->lat_now = x->t_size = tc_now_ns();
    x->lat_phase = LAT_BEGIN;
    return run_steps(x, client_send_lat_step, "the answer to a Send") && end_lat_size(x);
}

/* The latency tests' loop: warm-up, then -n iterations or -D seconds. */
static bool client_lat(struct run *x, struct tc_lat_samples *lat)
{
    const struct test_params *tp = x->tp;
    if (tp->test == T_SEND_LAT && x->e->opt->wait == TC_WAIT_EVENTS)
        return client_send_lat_events(x, lat);
    double factor = tp->test == T_READ_LAT ? 1.0 : 0.5;
    uint8_t seq = 0;
    uint64_t now = tc_now_ns(), measured = 0;
    x->t_size = now;
    for (uint64_t it = 0;; it++) {
        bool warm = it < tp->warmup;
        if (it == tp->warmup)
            x->t_size = now;
        if (!warm && !more_to_do(x, measured, now, x->t_size))
            break;
        uint64_t t0 = tc_now_ns();
        if (!wait_room(x) || !one_round_trip(x, &seq, t0))
            return false;
        now = tc_now_ns();
        /* The warm-up too: a slow one (large Reads through small socket
         * buffers) outlasts the passive server's bounded wait. */
        if (tp->test == T_READ_LAT && !maybe_alive(x, now))
            return false;
        if (warm)
            continue;
        if (!tc_lat_add(lat, now - t0)) {
            tc_complain(x->e->role, "out of memory");
            return false;
        }
        measured++;
        run_progress(x, now, measured, (double)(now - t0) * factor / 1000.0, "us");
    }
    return end_lat_size(x);
}

/* Posts what the queue and the credits allow, at most a batch between two
 * looks at the CQ. */
static bool send_batch(struct run *x)
{
    struct endpoint *e = x->e;
    uint32_t rx = x->tp->rx_depth;
    uint64_t n = CQ_BATCH;
    n = min_u64(n, e->sq_limit - min_u64(e->sq_limit, e->sq_posted - e->sq_done));
    n = min_u64(n, rx - min_u64(rx, x->sent_total - x->acked));
    if (x->tp->iters)
        n = min_u64(n, x->tp->iters - x->data_sent);
    for (uint64_t i = 0; i < n; i++) {
        if (!post_send(e, OP_SEND, e->source, x->size, chain_how(e, i, n)))
            return false;
        x->data_sent++;
        x->sent_total++;
    }
    return true;
}

/* send_bw: the end marker needs a credit like any Send; the time ends
 * with the credit that counts it. */
static bool end_send_bw(struct run *x)
{
    uint32_t rx = x->tp->rx_depth;
    while (!sq_room(x->e) || x->sent_total - x->acked >= rx)
        if (!pump(x, true, "a credit for the end marker"))
            return false;
    if (!send_mark(x->e, MARK_END))
        return false;
    x->sent_total++;
    while (x->acked < x->sent_total)
        if (!pump(x, true, "the receiver's final credit"))
            return false;
    return drain_sq(x, "the last send completions");
}

static bool client_send_bw(struct run *x, struct tc_bw_samples *bw)
{
    struct endpoint *e = x->e;
    uint32_t rx = x->tp->rx_depth;
    x->credit_base = x->sent_total; /* everything before was credited */
    x->data_sent = 0;
    x->credit_samples = bw;
    uint64_t start = tc_now_ns(), now = start;
    x->t_size = start;
    if (!tc_bw_add(bw, 0, start)) {
        tc_complain(e->role, "out of memory");
        return false;
    }
    while (more_to_do(x, x->data_sent, now, start)) {
        if (!send_batch(x))
            return false;
        bool stuck = !sq_room(e) || x->sent_total - x->acked >= rx;
        if (!pump(x, stuck, "a send completion or a credit from the receiver"))
            return false;
        now = tc_now_ns();
        double secs = (double)(now - start) / 1e9;
        run_progress(x, now, x->data_sent, secs > 0 ? (double)x->data_sent / secs / 1e6 : 0, "Mpps");
    }
    return end_send_bw(x);
}

/* Posts what the window allows; the last of -n is signaled. */
static bool rdma_batch(struct run *x, uint64_t limit, uint64_t *posted)
{
    struct endpoint *e = x->e;
    const struct test_params *tp = x->tp;
    bool reads = tp->test == T_READ_BW;
    uint64_t n = limit - min_u64(limit, e->sq_posted - e->sq_done);
    if (tp->iters)
        n = min_u64(n, tp->iters - *posted);
    for (uint64_t i = 0; i < n; i++) {
        unsigned how = chain_how(e, i, n);
        if (tp->iters && *posted + 1 == tp->iters)
            how |= POST_SIGNAL;
        if (!post_rdma(e, reads ? OP_READ : OP_WRITE, x->size, how))
            return false;
        (*posted)++;
    }
    return true;
}

/* The end of an RDMA size: every request complete (after -D the last one
 * may have been silent: one more, signaled), then END and its ACK. Writes
 * count when the server's answer shows they arrived; Reads when their
 * data has arrived here. */
static bool end_rdma_bw(struct run *x, struct tc_bw_samples *bw, uint64_t posted)
{
    struct endpoint *e = x->e;
    bool reads = x->tp->test == T_READ_BW;
    if (e->sq_last_signaled != e->sq_posted) {
        if (!wait_room(x) || !post_rdma(e, reads ? OP_READ : OP_WRITE, x->size, POST_SIGNAL))
            return false;
        posted++;
    }
    while (x->data_done < posted)
        if (!pump(x, true, reads ? "the last RDMA Reads" : "the last RDMA Writes"))
            return false;
    uint64_t t_reads_done = x->t_data_done;
    x->sq_samples = NULL;
    return end_size_ctrl(x) && tc_bw_add(bw, posted, reads ? t_reads_done : x->t_ack);
}

static bool client_rdma_bw(struct run *x, struct tc_bw_samples *bw)
{
    struct endpoint *e = x->e;
    bool reads = x->tp->test == T_READ_BW;
    uint64_t limit = rdma_window(e, reads);
    if (limit == 0) {
        tc_complain(e->role, "the connection allows no outstanding RDMA Read (effective ORD 0)");
        return false;
    }
    uint64_t posted = 0, start = tc_now_ns(), now = start;
    x->t_size = start;
    x->sq_samples = bw;
    x->next_alive = start + alive_interval_ns(x);
    if (!tc_bw_add(bw, 0, start)) {
        tc_complain(e->role, "out of memory");
        return false;
    }
    while (more_to_do(x, posted, now, start)) {
        if (!rdma_batch(x, limit, &posted))
            return false;
        if (x->tp->iters && posted == x->tp->iters)
            break;
        if (!pump(x, true, reads ? "RDMA Read completions" : "RDMA Write completions"))
            return false;
        now = tc_now_ns();
        double secs = (double)(now - start) / 1e9;
        run_progress(x, now, x->data_done, secs > 0 ? (double)x->data_done * x->size / secs / 1048576.0 : 0,
                     "MB/s");
        if (!maybe_alive(x, now))
            return false;
    }
    return end_rdma_bw(x, bw, posted);
}

/* One size and its line of the table. */
static bool client_size(struct run *x)
{
    const struct test_params *tp = x->tp;
    bool ok;
    if (test_is_lat(tp->test)) {
        struct tc_lat_samples lat = {0};
        ok = client_lat(x, &lat);
        tc_progress_clear(&x->progress);
        if (ok)
            tc_table_lat(x->size, &lat, tp->test == T_READ_LAT ? 1.0 : 0.5);
        tc_lat_free(&lat);
    } else {
        struct tc_bw_samples bw = {0};
        ok = tp->test == T_SEND_BW ? client_send_bw(x, &bw) : client_rdma_bw(x, &bw);
        tc_progress_clear(&x->progress);
        if (ok)
            tc_table_bw(x->size, &bw);
        tc_bw_free(&bw);
    }
    return ok;
}

bool run_client_tests(struct endpoint *e, const struct test_params *tp)
{
    uint32_t sizes[32];
    unsigned n = size_list(tp, sizes, 32);
    struct run x;
    run_begin(&x, e, tp, false, n);
    tc_table_columns(test_is_lat(tp->test));
    for (unsigned i = 0; i < n; i++) {
        x.size_index = i;
        size_begin(&x, sizes[i]);
        if (!client_size(&x))
            return false;
    }
    tc_table_rule();
    report_notifications(&x);
    return true;
}
