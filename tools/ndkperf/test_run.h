/*
 * test_run.h - what the data paths of the six tests share (test_post.c,
 * test_client.c, test_server.c).
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
#ifndef NDKPERF_TEST_RUN_H
#define NDKPERF_TEST_RUN_H

#include "lib/progress.h"
#include "lib/table.h"
#include "ndkperf/ndkperf.h"

enum ctrl_type { CTRL_END = 1, CTRL_ACK = 2, CTRL_CREDIT = 3, CTRL_ALIVE = 4 };
#define MARK_END 'E'
#define MARK_ACK 'A'

/* How a request is posted: signaled even between two signal_every marks,
 * and/or with NDK_OP_FLAG_DEFER because more of its chain follows. */
enum post_how { POST_PLAIN = 0, POST_SIGNAL = 1, POST_DEFER = 2 };

/* The state of one run; the cumulative counters span all sizes. */
struct run {
    struct endpoint *e;
    const struct test_params *tp;
    bool server;
    uint32_t size;
    unsigned size_index, sizes; /* this size's place in the run (-a) */
    struct tc_progress progress; /* the run's live line */
    uint64_t t_size;             /* when this size's measured part began */

    /* This size. */
    uint64_t data_in;     /* data messages received */
    bool got_end, got_ack;
    uint64_t t_ack;       /* when the answer (or final credit) arrived */
    uint64_t data_done;   /* data requests known complete */
    uint64_t t_data_done; /* when data_done last grew */
    struct tc_bw_samples *sq_samples;     /* write_bw, read_bw: completion points */
    struct tc_bw_samples *credit_samples; /* send_bw: credit points */
    uint64_t next_alive;

    /* send_bw, counted over the whole run, end markers included. */
    uint64_t sent_total, acked, credit_base, data_sent;
    uint64_t recv_total;
    uint64_t data_in_total; /* data messages received, all sizes */
    uint32_t credit_every;
    bool credit_owed;

    /* send_lat, driven by step functions (test_client.c, test_server.c)
     * that a polling loop or the CQ notification callback calls. */
    uint64_t answered;            /* server: answers posted */
    struct tc_lat_samples *lat;   /* client: where the samples go */
    uint64_t lat_it, lat_measured, lat_t0, lat_now, lat_want;
    int lat_phase;                /* client: LAT_BEGIN, LAT_ROOM or LAT_ANSWER */
    /* --wait=events: the step the notification callback runs, its verdict
     * (STEP_MORE until it is done) and how often it ran (under the waker's
     * cb_lock). */
    int (*cb_step)(struct run *x);
    int cb_result;
    uint64_t cb_runs;
};

/* What a step function says: keep going, this part is done, or it failed
 * (already reported). */
enum { STEP_FAILED = -1, STEP_MORE = 0, STEP_DONE = 1 };

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* test_shape.c: the most RDMA Writes or Reads the client keeps in flight. */
uint64_t rdma_window(const struct endpoint *e, bool reads);

/* test_post.c: posting */
bool sq_room(const struct endpoint *e);
/* A bandwidth loop about to post n requests in a row: how the i-th goes
 * out (every one but the last of each chain of -l is deferred). */
unsigned chain_how(const struct endpoint *e, uint64_t i, uint64_t n);
bool post_send(struct endpoint *e, enum sq_op op, void *buf, uint32_t len, unsigned how);
/* An RDMA Write (op OP_WRITE, from the source buffer) or Read (OP_READ,
 * into the target buffer) of len bytes at the peer's buffer. */
bool post_rdma(struct endpoint *e, enum sq_op op, uint32_t len, unsigned how);
bool send_ctrl(struct endpoint *e, enum ctrl_type type, uint32_t size, uint64_t value, bool force_signal);
bool send_mark(struct endpoint *e, char mark);

/* test_post.c: completions */
void run_begin(struct run *x, struct endpoint *e, const struct test_params *tp, bool server, unsigned sizes);
void size_begin(struct run *x, uint32_t size);
/* Handles what the CQ holds; with block, waits (bounded) for something. */
bool pump(struct run *x, bool block, const char *what);
bool wait_room(struct run *x);
/* --wait=events: runs step in the CQ notification callback, which takes
 * the completions, handles them, calls step and re-arms, until step says
 * done; this thread sleeps meanwhile (bounded: nothing for the timeout, the
 * peer's disconnect or a CQ error end it). Without --wait=events, the same
 * step in a loop with pump(). */
bool run_steps(struct run *x, int (*step)(struct run *x), const char *what);
/* Waits until every initiator request so far has completed. */
bool drain_sq(struct run *x, const char *what);
uint64_t alive_interval_ns(const struct run *x);
/* Keeps a passive server's bounded wait alive during a long data phase. */
bool maybe_alive(struct run *x, uint64_t now);
/* -n decides, or -D from start. */
bool more_to_do(const struct run *x, uint64_t done, uint64_t now, uint64_t start);
/* The client's end of a size in write and read tests: END, then the
 * server's ACK, which also tells that everything before it arrived. */
bool end_size_ctrl(struct run *x);
/* Spins on the last byte of the target buffer until it holds val. */
bool wait_byte(struct run *x, uint8_t val, uint64_t start, const char *what);
/* --wait=events: this side's notifications per data message received. */
void report_notifications(const struct run *x);
/* The live line, when due: what has been done of this size. */
void run_progress(struct run *x, uint64_t now, uint64_t done, double rate, const char *unit);

#endif
