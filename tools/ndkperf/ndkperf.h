/*
 * ndkperf.h - what the files of ndkperf share.
 *
 * ndkperf is perftest (ib_send_lat, ib_write_bw, ...) for NDK: one binary,
 * the test named by its first argument. It uses only the public headers,
 * exactly as an outside consumer would.
 *
 * The files, one concern each:
 *   main.c      command line, roles (server, client, --loopback), CPU pinning
 *   endpoint.c  one end of the connection: adapter, CQ, PD, MR, QP,
 *               connector/listener, the out-of-band exchange in the private
 *               data, disconnect and closing
 *   cqwait.c    completions: bounded busy polling or notification waits
 *   tests.c     the six tests' data paths, client and server side
 *   report.c    statistics, the perftest-like table, the progress line
 *   perftest_compat.c  --perftest: perftest's own protocol (rdma_cm, -R),
 *               to run against perftest itself; both roles, five tests
 *
 * Functions used by more than one file are declared here; everything else
 * is static in its file.
 */
#ifndef NDKPERF_H
#define NDKPERF_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <ndk/ndk.h>

#include "../toolcommon.h"

#define NDKPERF_DEFAULT_PORT 18515 /* perftest's */
#define NDKPERF_MAX_SIZE (8u << 20) /* -a goes up to 8 MiB, as perftest */
#define NDKPERF_MIN_ALL_SIZE 2u     /* -a starts at 2 B, as perftest */

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

enum test_kind { T_SEND_LAT, T_SEND_BW, T_WRITE_LAT, T_WRITE_BW, T_READ_LAT, T_READ_BW, T_COUNT };

enum role_mode { MODE_SERVER, MODE_CLIENT, MODE_LOOPBACK };

/* How a thread waits for completions. */
enum wait_mode {
    WAIT_YIELD,  /* poll NdkGetCqResults; sched_yield() after an empty poll (default) */
    WAIT_SPIN,   /* poll NdkGetCqResults without ever giving up the CPU */
    WAIT_EVENTS, /* NdkArmCq + the notification callback + a condition variable */
};

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
    enum wait_mode wait;
    bool busy_poll;         /* the provider's busy-poll mode */
    bool signal_all;        /* no NDK_OP_FLAG_SILENT_SUCCESS */
    bool crc;               /* NDK_OPEN_FLAG_REQUEST_CRC */
    int progress;           /* -1 auto (stderr is a terminal), 0 off, 1 on */
    unsigned timeout_ms;    /* longest wait for any completion or event */
    unsigned accept_timeout_ms; /* how long a server waits for its client */
};

/* Name of a test ("send_lat") and the title of its table. */
const char *test_name(enum test_kind t);
const char *test_title(enum test_kind t);
bool test_is_lat(enum test_kind t);
bool test_uses_send(enum test_kind t);
bool test_uses_read(enum test_kind t);

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                              */
/* ------------------------------------------------------------------------ */

/* "ndkperf: [role: ]message" on stderr (role shown with --loopback, where
 * two processes share the terminal). */
void complain(const char *role, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failed NDK call: "ndkperf: role: NdkXxx failed: STATUS_NAME (context)". */
void ndk_failed(const char *role, const char *call, NTSTATUS st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Something the provider did against the reference: reported as such. */
void library_problem(const char *role, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
extern bool show_role; /* set by main for --loopback */

uint64_t now_ns(void);

/* ------------------------------------------------------------------------ */
/* The out-of-band exchange (NDK private data)                              */
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
#define PDATA_BUF_LEN 16
#define PDATA_REQ_LEN 44
#define PDATA_REP_LEN 24

void pdata_put_request(uint8_t *p, const struct remote_buf *b, const struct test_params *tp);
bool pdata_get_request(const uint8_t *p, uint32_t len, struct remote_buf *b, struct test_params *tp,
                       const char **why);
void pdata_put_reply(uint8_t *p, const struct remote_buf *b);
bool pdata_get_reply(const uint8_t *p, uint32_t len, struct remote_buf *b, const char **why);

/* ------------------------------------------------------------------------ */
/* One end of the connection                                                */
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

struct waiter; /* one asynchronous NDK call; endpoint.c */

struct endpoint {
    const char *role; /* "server" / "client" */
    const struct options *opt;

    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    char adapter_name[IF_NAMESIZE + 48];
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_MR *mr;
    bool mr_registered;
    NDK_QP *qp;
    NDK_CONNECTOR *cn;
    NDK_LISTENER *ln;
    bool connected;
    struct tc_completion *disconnecting; /* our NdkDisconnect, once started */
    NTSTATUS disconnect_returned;        /* ... and what the call returned */
    struct waiter *waiters; /* every waiter, freed once the adapter is closed */

    /* One registered allocation: [target | source | ctrl tx | ctrl rx].
     * target: what the peer writes into, reads from, and where our
     * receives land; source: what we send and write. */
    uint8_t *mem;
    size_t mem_size;
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
    uint8_t *sq_op; /* enum sq_op of request n at [n % ctrl_tx_slots] */
    uint32_t qp_inline; /* InlineDataSize of the QP */
    uint32_t rq_depth;  /* ReceiveQueueDepth of the QP */
    ULONG ird, ord;     /* effective read limits */

    /* Longest wait for a completion; 0: --timeout. */
    unsigned wait_ms;

    /* Completion notifications and the disconnect event. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned notified;      /* CQ notification callbacks so far */
    NTSTATUS cq_status;     /* CqStatus of the last one */
    atomic_bool disconnected; /* the peer disconnected or aborted */
    NDK_CONNECTOR *incoming;  /* server: the connector of the connect event */
    unsigned requests;        /* server: connect events so far */

    /* For the perftest mode (perftest_compat.c), which needs two
     * connections (control and test) on one adapter and one listener:
     * max_requests: connect events taken, one after another (0 means 1);
     * quiet_connect: a failed NdkConnect is not reported (the caller
     * retries, as perftest's client does while the server re-listens);
     * peer_may_abort: the peer may end the connection abortively once
     * the test is over (perftest does), so NdkDisconnect's ABORTED or
     * RESET is no failure; owner: another endpoint whose adapter this
     * one uses; ep_close then leaves the adapter open and hands its
     * waiters to the owner. */
    unsigned max_requests;
    bool quiet_connect;
    bool peer_may_abort;
    struct endpoint *owner;
};

/* Layout of the registered memory. */
struct layout {
    uint32_t region;        /* largest message */
    uint32_t ctrl_tx_slots; /* = initiator depth + 1, see tests.c */
    uint32_t ctrl_rx_slots;
    uint32_t sq_depth, rq_depth, cq_depth;
    uint32_t signal_every;
    uint32_t inline_size;
};

bool ep_init(struct endpoint *e, const char *role, const struct options *o);
bool ep_open(struct endpoint *e, const char *spec);
bool ep_create(struct endpoint *e, const struct layout *l);
bool ep_listen(struct endpoint *e, const NDK_SOCKADDR *addr, NDK_SOCKADDR *bound);
bool ep_wait_request(struct endpoint *e, unsigned ms);
bool ep_request_data(struct endpoint *e, uint8_t *buf, uint32_t cap, uint32_t *len, ULONG *ird,
                     ULONG *ord);
bool ep_reject(struct endpoint *e, const char *why);
bool ep_accept(struct endpoint *e, const uint8_t *pdata, uint32_t len, ULONG ird, ULONG ord);
bool ep_connect(struct endpoint *e, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst,
                const uint8_t *pdata, uint32_t len, ULONG ird, ULONG ord, uint8_t *reply,
                uint32_t cap, uint32_t *reply_len);
bool ep_disconnect(struct endpoint *e, bool wait_for_peer_first);
/* ep_disconnect in two halves: NdkDisconnect started (a no-op when it was
 * already), then its completion waited for. */
bool ep_disconnect_begin(struct endpoint *e);
bool ep_disconnect_end(struct endpoint *e);
/* True once the peer has disconnected, waiting at most ms for it. */
bool ep_wait_peer_disconnect(struct endpoint *e, unsigned ms);
/* Closes the connector of a failed connect, so that it can be tried again. */
void ep_drop_connector(struct endpoint *e);
void ep_close(struct endpoint *e);

/* Posting (tests.c uses them; endpoint.c for the receives posted before
 * the connection). Each prints the failed call. */
bool post_data_recv(struct endpoint *e);
bool post_ctrl_recv(struct endpoint *e, uint32_t slot);

/* ------------------------------------------------------------------------ */
/* Completions (cqwait.c)                                                   */
/* ------------------------------------------------------------------------ */

#define CQ_BATCH 64

/* Takes what is there now, without waiting (0 if nothing). */
unsigned cq_take(struct endpoint *e, NDK_RESULT *r, unsigned max);
/* Waits, at most the --timeout, for at least one completion. 0 means the
 * wait failed: timeout, peer gone or CQ error; already reported, naming
 * `what` (what the caller was waiting for). */
unsigned cq_wait(struct endpoint *e, NDK_RESULT *r, unsigned max, const char *what);
/* For loops that wait on memory (write_lat): true while the wait that
 * began at `start` may go on; else reports (naming `what`) and false. */
bool wait_ok(struct endpoint *e, uint64_t start, const char *what);
/* The notification callback and the disconnect event, given to the NDK. */
VOID cq_notification(PVOID ctx, NTSTATUS status);
VOID disconnect_event(PVOID ctx);

/* ------------------------------------------------------------------------ */
/* Tests (tests.c)                                                          */
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

/* ------------------------------------------------------------------------ */
/* Report (report.c)                                                        */
/* ------------------------------------------------------------------------ */

/* Latency samples of one size, in ns. */
struct lat_samples {
    uint64_t *ns;
    size_t n, cap;
};
bool lat_add(struct lat_samples *s, uint64_t ns);
void lat_free(struct lat_samples *s);

/* Bandwidth progress points: (messages done, time). */
struct bw_samples {
    uint64_t *msgs, *t;
    size_t n, cap;
};
bool bw_add(struct bw_samples *s, uint64_t msgs, uint64_t t);
void bw_free(struct bw_samples *s);

void report_header(const struct endpoint *e, const struct test_params *tp, const char *placement);
void report_columns(enum test_kind t);
/* factor: 0.5 for round trips reported one way (send/write), 1 for reads. */
void report_lat(uint32_t size, struct lat_samples *s, double factor);
void report_bw(uint32_t size, const struct bw_samples *s);
/* What report_bw prints, as numbers (perftest's report exchange); false
 * when the run was too short to time. */
struct bw_result {
    uint64_t msgs;
    double peak, avg, rate; /* MB/s, MB/s, Mpps */
};
bool bw_result_of(uint32_t size, const struct bw_samples *s, struct bw_result *r);
void report_bw_result(uint32_t size, const struct bw_result *r, const char *note);
void report_footer(void);

/* The progress line: on stderr, updated in place, for runs over ~3 s. */
struct progress {
    bool enabled;
    bool shown;
    uint64_t start, next;
    uint32_t size;
    const char *unit;
};
void progress_start(struct progress *p, const struct options *o, uint32_t size, const char *unit,
                    uint64_t start);
void progress_update(struct progress *p, uint64_t now, uint64_t count, double extra, const char *extra_unit);
void progress_end(struct progress *p);

/* ------------------------------------------------------------------------ */
/* Shared with perftest_compat.c (main.c)                                   */
/* ------------------------------------------------------------------------ */

bool resolve(const char *role, const char *text, NDK_SOCKADDR *out);
void set_port(NDK_SOCKADDR *a, unsigned port);
unsigned get_port(const NDK_SOCKADDR *a);
const char *ip_text(const NDK_SOCKADDR *a, char *buf, size_t size);
bool route_source(const NDK_SOCKADDR *dst, NDK_SOCKADDR *src);
bool parse_u64(const char *s, uint64_t min, uint64_t max, bool suffixes, uint64_t *out);

#endif
