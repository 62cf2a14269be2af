/*
 * ndkperf.h - what the files of ndkperf share.
 *
 * ndkperf is perftest (ib_send_lat, ib_write_bw, ...) for NDK: one binary,
 * the test named by its first argument. It uses only the public headers,
 * exactly as an outside consumer would, and the tools library (tools/lib).
 *
 * The files, one concern each, each calling only those below it:
 *   main.c       the roles (server, client, --loopback) and CPU placement
 *   options.c    the command line and the tests' names
 *   header.c     the header above the results table
 *   test_client.c, test_server.c  the six tests' data paths, each side
 *   test_post.c  posting work requests, control messages, completions
 *   test_shape.c queue and memory sizes of a test, its list of sizes
 *   endpoint.c   one end of the connection: adapter, objects, the
 *                connection phase, disconnect and closing
 *   pdata.c      the out-of-band exchange in the private data
 *   perftest_*.c --perftest: perftest's own protocol (perftest.h)
 */
#ifndef NDKPERF_H
#define NDKPERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "lib/adapter.h"
#include "lib/conn.h"
#include "lib/cqwait.h"
#include "lib/listener.h"
#include "lib/mr.h"
#include "lib/progress.h"
#include "lib/table.h"

#define NDKPERF_DEFAULT_PORT 18515 /* perftest's */
#define NDKPERF_MAX_SIZE (8u << 20) /* -a goes up to 8 MiB, as perftest */
#define NDKPERF_MAX_MSG (1u << 30)  /* -s goes up to 1 GiB */
#define NDKPERF_MIN_ALL_SIZE 2u     /* -a starts at 2 B, as perftest */

/* ------------------------------------------------------------------------ */
/* Options (options.c)                                                      */
/* ------------------------------------------------------------------------ */

enum test_kind { T_SEND_LAT, T_SEND_BW, T_WRITE_LAT, T_WRITE_BW, T_READ_LAT, T_READ_BW, T_COUNT };

enum role_mode { MODE_SERVER, MODE_CLIENT, MODE_LOOPBACK };

struct options {
    enum test_kind test;
    enum role_mode mode;
    bool all_sizes;         /* -a */
    uint32_t size;          /* -s */
    uint32_t iters;         /* -n (0: -D decides) */
    uint32_t duration_ms;   /* -D in ms (0: -n decides) */
    uint32_t warmup;        /* latency tests: iterations not counted */
    uint32_t depth;         /* -q: work requests in flight on the initiator queue */
    uint32_t rx_depth;      /* -r: receives the send_bw receiver keeps posted */
    uint32_t inline_size;   /* -I */
    uint32_t outs;          /* -o: outstanding RDMA reads asked for (ORD) */
    uint32_t post_list;     /* -l: requests per doorbell in bandwidth tests */
    unsigned port;          /* -p */
    bool port_given;
    const char *address;    /* -c: the server's address */
    const char *bind;       /* -B: the server's listen address */
    const char *adapter;    /* -d */
    int cpu_server, cpu_client; /* -1: not pinned */
    enum tc_wait_mode wait;
    bool busy_poll;         /* the provider's busy-poll mode */
    bool moderation;        /* --moderation given */
    uint32_t mod_interval_us, mod_count; /* NdkControlCqInterruptModeration */
    bool signal_all;        /* no NDK_OP_FLAG_SILENT_SUCCESS */
    bool crc;               /* NDK_OPEN_FLAG_REQUEST_CRC */
    uint32_t sockbuf;       /* --sockbuf: SO_SNDBUF and SO_RCVBUF (0: the system's) */
    int progress;           /* -1 auto (stderr is a terminal), 0 off, 1 on */
    unsigned timeout_ms;    /* longest wait for any completion or event */
    unsigned accept_timeout_ms; /* how long a server waits for its client */
};

/* Returns -1 to go on, else the exit status. */
int parse_options(int argc, char **argv, struct options *o);
/* Name of a test ("send_lat") and the title of its table. */
const char *test_name(enum test_kind t);
const char *test_title(enum test_kind t);
bool test_is_lat(enum test_kind t);
bool test_uses_send(enum test_kind t);
bool test_uses_read(enum test_kind t);
/* The test a name means ("send_lat" or "ib_send_lat"), or T_COUNT. */
enum test_kind test_by_name(const char *name);

/* ------------------------------------------------------------------------ */
/* The out-of-band exchange (pdata.c)                                       */
/* ------------------------------------------------------------------------ */

/* Where the peer's buffer is: what RDMA Writes and Reads target. */
struct remote_buf {
    uint64_t va;
    uint32_t token;
    uint32_t size;
};

/* What the client asks for; the server follows it (as perftest's server
 * follows the client's parameters). */
struct test_params {
    enum test_kind test;
    bool all_sizes;
    uint32_t size, iters, duration_ms, warmup, rx_depth;
};

/* Private data sizes: the client's request carries the buffer, then the
 * parameters; the server's accept carries its buffer and the magic. */
#define PDATA_REQ_LEN 44
#define PDATA_REP_LEN 24

void pdata_put_request(uint8_t *p, const struct remote_buf *b, const struct test_params *tp);
bool pdata_get_request(const uint8_t *p, uint32_t len, struct remote_buf *b, struct test_params *tp,
                       const char **why);
void pdata_put_reply(uint8_t *p, const struct remote_buf *b);
bool pdata_get_reply(const uint8_t *p, uint32_t len, struct remote_buf *b, const char **why);

/* ------------------------------------------------------------------------ */
/* One end of the connection (endpoint.c)                                   */
/* ------------------------------------------------------------------------ */

/* The request context of a work request: its kind in the low bits, a
 * sequence number or slot above. */
enum wr_kind { WR_SQ = 1, WR_RX_DATA = 2, WR_RX_CTRL = 3 };
/* What an initiator request was, for counting and for error messages. */
enum sq_op { OP_SEND = 1, OP_WRITE, OP_READ, OP_CTRL };
#define WR_CTX(kind, val) ((PVOID)(uintptr_t)(((uint64_t)(val) << 2) | (kind)))
#define WR_KIND(ctx) ((enum wr_kind)((uintptr_t)(ctx)&3u))
#define WR_VAL(ctx) ((uint64_t)((uintptr_t)(ctx) >> 2))

/* Control messages (write and read tests, and acks of send_bw): 16 bytes. */
#define CTRL_MSG_LEN 16u
#define CTRL_SLOT 64u /* bytes per control slot: keeps slots on their own cache lines */
#define CQ_BATCH 64

/* Layout of the registered memory and the queues. */
struct layout {
    uint32_t region;        /* largest message */
    uint32_t ctrl_tx_slots; /* = initiator depth + 1, see test_post.c */
    uint32_t ctrl_rx_slots;
    uint32_t sq_depth, rq_depth, cq_depth;
    uint32_t signal_every;
    uint32_t inline_size;
};

struct endpoint {
    const char *role; /* "server" / "client" */
    const struct options *opt;
    struct tc_adapter *a; /* own, or the one it shares (perftest's two connections) */
    struct tc_adapter own;
    struct tc_conn c;     /* CQ, PD, QP, connector, the calls, the wake-ups */
    struct tc_mr mr;
    struct tc_listener listener;
    bool listening;

    /* One registered allocation: [target | source | ctrl tx | ctrl rx].
     * target: what the peer writes into, reads from, and where our
     * receives land; source: what we send and write. */
    uint32_t region; /* bytes of target and of source: the largest message */
    uint8_t *target, *source, *ctrl_tx, *ctrl_rx;
    uint32_t ctrl_tx_slots, ctrl_rx_slots;
    UINT32 ltoken; /* local token of the MR */
    struct remote_buf local;
    struct remote_buf peer;

    /* Initiator queue accounting (perftest's cq_mod): all but every
     * signal_every-th request are posted with SILENT_SUCCESS; a signaled
     * completion means every earlier request has completed too. */
    uint32_t sq_limit, signal_every;
    uint64_t sq_posted, sq_done, sq_last_signaled;
    uint8_t *sq_op;     /* enum sq_op of request n at [n % ctrl_tx_slots] */
    uint32_t qp_inline; /* InlineDataSize of the QP */
    uint32_t rq_depth;  /* ReceiveQueueDepth of the QP */
    ULONG ird, ord;     /* effective read limits */

    unsigned wait_ms;   /* longest wait for a completion; 0: --timeout */
    /* The perftest mode: a failed NdkConnect is not reported (the caller
     * retries while perftest's server listens again), and the peer may
     * end the connection abortively once the test is over. */
    bool quiet_connect;
    bool peer_may_abort;
};

void ep_init(struct endpoint *e, const char *role, const struct options *o);
/* Opens the adapter: -d, else the one owning `near` (the listen address,
 * the route's source). */
bool ep_open(struct endpoint *e, const NDK_SOCKADDR *near, const char *near_what);
/* Uses the adapter of another endpoint (which closes it). */
void ep_share(struct endpoint *e, const struct endpoint *owner);
bool ep_create(struct endpoint *e, const struct layout *l);
/* Listens; `requests` connect events are taken, later ones refused. */
bool ep_listen(struct endpoint *e, const NDK_SOCKADDR *addr, unsigned requests);
/* The next request of `from`'s listener becomes e's connector. */
bool ep_wait_request(struct endpoint *e, struct endpoint *from, unsigned ms);
bool ep_request_data(struct endpoint *e, uint8_t *buf, uint32_t cap, uint32_t *len, ULONG *ird, ULONG *ord);
bool ep_reject(struct endpoint *e, const char *why);
bool ep_accept(struct endpoint *e, const uint8_t *pdata, uint32_t len, ULONG ird, ULONG ord);
bool ep_connect(struct endpoint *e, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, const uint8_t *pdata,
                uint32_t len, ULONG ird, ULONG ord, uint8_t *reply, uint32_t cap, uint32_t *reply_len);
/* Graceful disconnect; wait_for_peer_first: the peer goes first. */
bool ep_disconnect(struct endpoint *e, bool wait_for_peer_first);
/* ep_disconnect in two halves: NdkDisconnect started (a no-op when it
 * was already), then its completion waited for. */
bool ep_disconnect_begin(struct endpoint *e);
bool ep_disconnect_end(struct endpoint *e);
/* True once the peer has disconnected, waiting at most ms (0: now). */
bool ep_peer_left(struct endpoint *e, unsigned ms);
/* Closes the connector of a failed connect, so that it can be tried again. */
void ep_drop_connector(struct endpoint *e);
void ep_close(struct endpoint *e);

/* Posting receives: of the largest message into the target buffer, or of
 * len bytes into control slot `slot`. */
bool post_data_recv(struct endpoint *e);
bool post_ctrl_recv(struct endpoint *e, uint32_t slot, uint32_t len);

/* Takes what the CQ holds now, without waiting (0 if nothing). */
static inline unsigned cq_take(struct endpoint *e, NDK_RESULT *r, unsigned max)
{
    return e->c.cq->Dispatch->NdkGetCqResults(e->c.cq, r, max);
}
/* Waits, at most the --timeout, for at least one completion. 0 means the
 * wait failed (timeout, peer gone, CQ error), already reported, naming
 * `what` (what the caller was waiting for). */
unsigned cq_wait(struct endpoint *e, NDK_RESULT *r, unsigned max, const char *what);
/* For loops that wait on memory (write_lat): true while the wait that
 * began at start_ns may go on; else reports (naming `what`) and false. */
bool wait_ok(struct endpoint *e, uint64_t start_ns, const char *what);
/* How long a wait may see nothing: the --timeout, or a phase's own bound. */
unsigned wait_limit_ms(const struct endpoint *e);

/* ------------------------------------------------------------------------ */
/* Tests (test_*.c)                                                         */
/* ------------------------------------------------------------------------ */

/* The sizes a run covers: -s, or 2 B .. 8 MiB with -a. */
unsigned size_list(const struct test_params *tp, uint32_t *sizes, unsigned cap);
/* Memory and queue sizes both ends use for a test. */
void test_layout(const struct test_params *tp, const struct options *o, bool server, struct layout *l);
/* Receives to post before connecting / accepting. */
bool test_prepost(struct endpoint *e, const struct test_params *tp, bool server);
/* Requested IRD / ORD. */
void test_read_limits(const struct test_params *tp, const struct options *o, ULONG *ird, ULONG *ord);
/* Once the client is connected (the effective ORD known): fits the
 * completion signalling to what may be in flight. */
void test_connected(struct endpoint *e, const struct test_params *tp);
bool run_client_tests(struct endpoint *e, const struct test_params *tp);
bool run_server_tests(struct endpoint *e, const struct test_params *tp);

/* The header above the table (header.c). */
void report_header(const struct endpoint *e, const struct test_params *tp, const char *placement);

#endif
