/*
 * connrate.c - how fast libndk establishes and tears down NDK connections
 * over loopback, and how much heap an idle connection costs.
 *
 * One connection, as a real consumer does it (the three legs of NdkConnect,
 * NdkAccept and NdkCompleteConnect; the NetworkDirect disconnect scheme):
 *
 *   client                                   server (listener on 127.0.0.1)
 *   NdkCreateConnector, NdkCreateQp
 *   NdkConnect(src 127.0.0.1:0) ---------->  connect event:
 *                                              NdkGetConnectionData, NdkCreateQp,
 *                                              NdkAccept
 *   Connect completion  <------------------
 *   NdkCompleteConnect  ------------------>  Accept completion
 *   NdkDisconnect (active first) --------->  disconnect event: NdkDisconnect
 *   Disconnect completion <----------------
 *   close connector and QP                   close connector and QP
 *
 * A QP cannot be reused after a disconnect (rule X6, docs/rules.md), so each
 * side creates and closes one QP per connection, inside the measured time.
 * The client puts {magic, slot, generation} in the private data so that, in
 * one process, the server side can stamp the same record; the server calls
 * NdkGetConnectionData in both layouts so the work is the same.
 *
 * Layouts:
 *   default          one process, two opens of "lo": the client adapter and
 *                    the server adapter, each with its own progress thread.
 *                    The client disconnects once BOTH sides are established
 *                    (its CompleteConnect returned and the server's Accept
 *                    completed), exactly in the order above.
 *   --server/--client two processes (pin them with taskset). The client
 *                    cannot see the server's Accept completion, so it
 *                    disconnects once its own CompleteConnect returned; the
 *                    RTR is ahead of the FIN on the wire, so the server still
 *                    sees Accept completion before its disconnect event.
 *
 * A connection counts once its client side is finished: Disconnect completed
 * (which needs the server's FIN, so the server has called NdkDisconnect) and
 * the client connector and QP are closed. The server's own closes run
 * concurrently; they are checked at the end (none may be left over).
 *
 * Everything is driven from the provider's callbacks: a finished connection
 * starts the next one from the callback that finished it, as an efficient
 * consumer would, so the main thread only starts the first ones and watches
 * the clock. Every wait is bounded; any failed request ends the run with a
 * non-zero exit status (3 when the cause is local port exhaustion).
 */
#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "connrate_opts.h"

/* AddressSanitizer and ThreadSanitizer replace malloc with an allocator
 * that does not feed mallinfo2(), and both count its bytes in use. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CONNRATE_SANITIZER_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CONNRATE_SANITIZER_HEAP 1
#endif
#endif
#ifdef CONNRATE_SANITIZER_HEAP
/* The sanitizer runtime's allocator statistics (sanitizer/allocator_interface.h,
 * which GCC does not install). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define QP_DEPTH 16 /* queue depths of every QP: small, as for a control connection */
#define READ_LIMIT 16
#define PD_MAGIC 0x434E5254u /* "CNRT" */
#define EXIT_FAILED 1
#define EXIT_PORTS 3 /* local ports exhausted (TIME_WAIT): shorten the run */

/* ------------------------------------------------------------------------ */
/* Time                                                                     */
/* ------------------------------------------------------------------------ */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ------------------------------------------------------------------------ */
/* Stamps and legs                                                          */
/* ------------------------------------------------------------------------ */

/* Points in one connection's life; each is written by the thread that sees
 * it happen. */
enum stamp {
    T_START,       /* client: before NdkCreateConnector */
    T_CONNECT,     /* client: before NdkConnect */
    T_EVENT,       /* server: connect event entered (one process only) */
    T_ACCEPT,      /* server: before NdkAccept (one process only) */
    T_CONNECTED,   /* client: Connect completion entered */
    T_ACTIVE_EST,  /* client: CompleteConnect succeeded */
    T_PASSIVE_EST, /* server: Accept completion entered (one process only) */
    T_DISC,        /* client: before NdkDisconnect */
    T_DISC_EVENT,  /* server: disconnect event entered (one process only) */
    T_DISC_DONE,   /* client: Disconnect completion entered */
    T_END,         /* client: connector and QP closed */
    T_COUNT
};

static const char *const stamp_names[T_COUNT] = {
    "start", "NdkConnect called", "server connect event", "NdkAccept called",
    "Connect completion", "CompleteConnect done", "Accept completion", "NdkDisconnect called",
    "server disconnect event", "Disconnect completion", "closed",
};

/* A leg is the time between two stamps on the causal chain: each stamp is
 * caused by the one before, so the legs add up to the whole connection. */
struct leg {
    enum stamp from, to;
    const char *what;
};

/* One process: both sides are stamped in the same record. */
static const struct leg legs_one[] = {
    {T_START, T_CONNECT, "client NdkCreateConnector + NdkCreateQp"},
    {T_CONNECT, T_EVENT, "NdkConnect, TCP handshake, MPA Request -> server connect event"},
    {T_EVENT, T_ACCEPT, "server NdkGetConnectionData + NdkCreateQp"},
    {T_ACCEPT, T_CONNECTED, "NdkAccept, MPA Reply -> client Connect completion"},
    {T_CONNECTED, T_DISC, "NdkCompleteConnect, RTR -> both established"},
    {T_DISC, T_DISC_EVENT, "client NdkDisconnect, FIN -> server disconnect event"},
    {T_DISC_EVENT, T_DISC_DONE, "server NdkDisconnect, FIN -> client Disconnect completion"},
    {T_DISC_DONE, T_END, "client close connector + QP"},
};
/* Two processes: only the client's stamps are here. */
static const struct leg legs_two[] = {
    {T_START, T_CONNECT, "client NdkCreateConnector + NdkCreateQp"},
    {T_CONNECT, T_CONNECTED, "NdkConnect .. Connect completion (handshake, Request, server, Reply)"},
    {T_CONNECTED, T_ACTIVE_EST, "NdkCompleteConnect (sends the RTR)"},
    {T_ACTIVE_EST, T_DISC_DONE, "NdkDisconnect .. Disconnect completion (FIN, server, FIN)"},
    {T_DISC_DONE, T_END, "client close connector + QP"},
};
#define MAX_LEGS 8

/* Provider calls whose own duration is measured (time spent inside them,
 * on the calling thread), to tell call cost from waiting. */
enum call {
    C_CREATE_CONN,
    C_CREATE_QP_CLI,
    C_CONNECT,
    C_COMPLETE_CONNECT,
    C_DISCONNECT_CLI,
    C_CLOSE_CLI,
    C_GET_DATA,
    C_CREATE_QP_SRV,
    C_ACCEPT,
    C_DISCONNECT_SRV,
    C_CLOSE_SRV,
    C_COUNT
};
static const char *const call_names[C_COUNT] = {
    "NdkCreateConnector",   "NdkCreateQp (client)", "NdkConnect",
    "NdkCompleteConnect",   "NdkDisconnect (client)", "NdkClose connector+QP (client)",
    "NdkGetConnectionData", "NdkCreateQp (server)", "NdkAccept",
    "NdkDisconnect (server)", "NdkClose connector+QP (server)",
};

/* One finished connection, as kept for percentiles. */
struct rec {
    uint32_t est;  /* NdkConnect called -> CompleteConnect done (active established), ns */
    uint32_t both; /* NdkConnect called -> both sides established (one process), ns */
    uint32_t leg[MAX_LEGS];
};

/* ------------------------------------------------------------------------ */
/* State                                                                    */
/* ------------------------------------------------------------------------ */

/* The private data the client sends. */
struct conn_pd {
    uint32_t magic, idx, gen;
};

/* One client connection in flight (reused for the next one). */
struct slot {
    unsigned idx;
    uint32_t gen;
    NDK_CONNECTOR *conn;
    NDK_QP *qp;
    _Atomic int est_left;   /* CompleteConnect done (+ Accept completion, one process) */
    _Atomic int close_left; /* client connector and QP closes outstanding */
    _Atomic uint64_t busy_since; /* 0 when idle; for the watchdog */
    _Atomic uint64_t t[T_COUNT];
};

/* Server side of one connection. Touched only by the server adapter's
 * progress thread (all server objects' callbacks run there), so the free
 * list needs no lock. */
struct srec {
    struct srec *next;
    NDK_CONNECTOR *conn;
    NDK_QP *qp;
    struct slot *slot; /* one process: the client's record of this connection */
    int close_left;
    bool live;
    uint64_t t_event, t_accept, t_est, t_disc_event;
};

static struct {
    struct connrate_opts opt;
    unsigned idle_n;
    bool check_heap; /* --check: fail unless the heap is back at its baseline */
    unsigned engines; /* --engines: MaxEngines of the opens (0: libndk's default) */

    NDK_ADAPTER *cad, *sad; /* client and server adapters */
    NDK_PD *cpd, *spd;
    NDK_CQ *ccq, *scq;
    NDK_LISTENER *lsn;
    struct sockaddr_in src, dst;

    struct slot *slots;
    unsigned nslots;
    _Atomic unsigned next_fresh; /* idle mode: next slot never used */
    unsigned fresh_end;          /* idle mode: end of the slots of this round */
    bool idle;                   /* idle mode: stop at established */
    bool precreated_qps;         /* idle mode: QPs made before the baseline */
    NDK_QP **sqps;               /* idle mode: the server's pre-created QPs */
    unsigned nsqps, sqp_next;    /* sqp_next: server thread only */

    struct srec *srecs;
    unsigned nsrecs;
    struct srec *sfree;
    _Atomic int srec_live;

    _Atomic bool stop;
    _Atomic long started, completed, established, torn_down;
    _Atomic int inflight;
    _Atomic uint64_t last_end;

    struct rec *recs;
    long rec_cap;
    _Atomic long nrec;

    _Atomic uint64_t call_ns[C_COUNT];
    _Atomic uint64_t call_n[C_COUNT];

    /* server-side legs (either layout) */
    _Atomic uint64_t srv_prep_ns, srv_rtr_ns, srv_idle_ns, srv_fin_ns, srv_n;
    _Atomic long srv_accepted, srv_closed;
    _Atomic long odd_cli_disc_events; /* client disconnect events (the client disconnects first) */

    _Atomic int failed;
    char failmsg[512];
} g;

/* ------------------------------------------------------------------------ */
/* Failure                                                                  */
/* ------------------------------------------------------------------------ */

static bool is_port_exhaustion(NTSTATUS st)
{
    /* ADDRESS_ALREADY_EXISTS: connect() found the 4-tuple taken (EADDRNOTAVAIL,
     * TIME_WAIT leftovers); TOO_MANY_ADDRESSES: no ephemeral port to bind. */
    return st == STATUS_ADDRESS_ALREADY_EXISTS || st == STATUS_TOO_MANY_ADDRESSES;
}

/* Records the first failure; the main thread reports it and exits. Callable
 * from any thread, including provider callbacks (never blocks). */
static void fail_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_code(int code, const char *fmt, ...)
{
    int zero = 0;
    if (!atomic_compare_exchange_strong(&g.failed, &zero, -1))
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.failmsg, sizeof g.failmsg, fmt, ap);
    va_end(ap);
    atomic_store(&g.stop, true);
    atomic_store(&g.failed, code);
}

#define FAIL(...) fail_code(EXIT_FAILED, __VA_ARGS__)

static void fail_status(const char *what, NTSTATUS st)
{
    fail_code(is_port_exhaustion(st) ? EXIT_PORTS : EXIT_FAILED, "%s failed: %s%s", what,
              ndk_status_name(st),
              is_port_exhaustion(st) ? " (PORT EXHAUSTION: local ports taken, e.g. by TIME_WAIT)"
                                     : "");
}

/* ------------------------------------------------------------------------ */
/* Small helpers                                                            */
/* ------------------------------------------------------------------------ */

static void stamp(struct slot *s, enum stamp k)
{
    atomic_store_explicit(&s->t[k], now_ns(), memory_order_relaxed);
}

static uint64_t st_get(struct slot *s, enum stamp k)
{
    return atomic_load_explicit(&s->t[k], memory_order_relaxed);
}

static void add_call(enum call c, uint64_t t0)
{
    atomic_fetch_add_explicit(&g.call_ns[c], now_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&g.call_n[c], 1, memory_order_relaxed);
}

static uint32_t clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/* Creates never pend in libndk; a pending one would need a wait that a
 * callback cannot do, so it counts as a failure of this benchmark. */
static void create_cb(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)obj;
    FAIL("a create request completed asynchronously (%s); this benchmark expects inline "
         "creates",
         ndk_status_name(st));
}

/* One connection's QP on pd and cq: QP_DEPTH requests each way, one SGE,
 * no inline data. Creates do not pend here (create_cb). */
static NTSTATUS create_qp(NDK_PD *pd, NDK_CQ *cq, PVOID qp_ctx, PVOID req_ctx, NDK_QP **qp)
{
    return pd->Dispatch->NdkCreateQp(pd, cq, cq, qp_ctx, QP_DEPTH, QP_DEPTH, 1, 1, 0, create_cb, req_ctx, qp);
}

/* create_qp for a connection being made, timed as call `which` (its name
 * says which side); false when it failed (the run fails). */
static bool create_conn_qp(NDK_PD *pd, NDK_CQ *cq, PVOID ctx, NDK_QP **qp, enum call which)
{
    uint64_t t0 = now_ns();
    NTSTATUS st = create_qp(pd, cq, ctx, ctx, qp);
    add_call(which, t0);
    if (st != STATUS_SUCCESS)
        fail_status(call_names[which], st);
    return st == STATUS_SUCCESS;
}

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

/* For setup and teardown on the main thread: a pending request is waited for,
 * with a bound. */
struct sync {
    _Atomic int done;
    _Atomic NTSTATUS st;
};

static void sync_req_cb(PVOID ctx, NTSTATUS st)
{
    struct sync *s = ctx;
    atomic_store(&s->st, st);
    atomic_store(&s->done, 1);
}

static void sync_close_cb(PVOID ctx)
{
    struct sync *s = ctx;
    atomic_store(&s->st, STATUS_SUCCESS);
    atomic_store(&s->done, 1);
}

static NTSTATUS sync_wait(NTSTATUS st, struct sync *s, const char *what)
{
    if (st != STATUS_PENDING)
        return st;
    uint64_t t0 = now_ns();
    while (!atomic_load(&s->done)) {
        if (now_ns() - t0 > 5000000000ull) {
            /* s is on the caller's stack: a late completion must not find
             * it gone, so this is the end of the run. */
            fprintf(stderr, "connrate: FAILED: %s still pending after 5 s\n", what);
            fflush(stderr);
            _exit(EXIT_FAILED);
        }
        sleep_ms(1);
    }
    return atomic_load(&s->st);
}

static void close_sync(NDK_OBJECT_HEADER *obj, NDK_FN_CLOSE_OBJECT fn, const char *what)
{
    if (!obj)
        return;
    struct sync s = {0};
    sync_wait(fn(obj, sync_close_cb, &s), &s, what);
}

/* ------------------------------------------------------------------------ */
/* Client side                                                              */
/* ------------------------------------------------------------------------ */

static void start_conn(struct slot *s);

static void record_conn(struct slot *s)
{
    uint64_t end = st_get(s, T_END);
    uint64_t prev = atomic_load(&g.last_end);
    while (end > prev && !atomic_compare_exchange_weak(&g.last_end, &prev, end))
        ;
    long i = atomic_fetch_add(&g.nrec, 1);
    if (i >= g.rec_cap)
        return;
    struct rec *r = &g.recs[i];
    uint64_t c = st_get(s, T_CONNECT);
    r->est = clamp32(st_get(s, T_ACTIVE_EST) - c);
    if (g.opt.role == ROLE_BOTH) {
        uint64_t a = st_get(s, T_ACTIVE_EST), p = st_get(s, T_PASSIVE_EST);
        r->both = clamp32((a > p ? a : p) - c);
    }
    const struct leg *L = g.opt.role == ROLE_BOTH ? legs_one : legs_two;
    size_t nl = g.opt.role == ROLE_BOTH ? sizeof legs_one / sizeof *L : sizeof legs_two / sizeof *L;
    for (size_t k = 0; k < nl; k++)
        r->leg[k] = clamp32(st_get(s, L[k].to) - st_get(s, L[k].from));
}

/* Starts the next connection on a slot, or lets the slot go idle. */
static void slot_next(struct slot *s)
{
    struct slot *n = s;
    if (g.idle) {
        unsigned k = atomic_fetch_add(&g.next_fresh, 1);
        n = k < g.fresh_end ? &g.slots[k] : NULL;
    }
    if (!n || atomic_load(&g.stop)) {
        atomic_fetch_sub(&g.inflight, 1);
        return;
    }
    if (g.opt.limit_n && atomic_load(&g.started) >= g.opt.limit_n) {
        atomic_fetch_sub(&g.inflight, 1);
        return;
    }
    start_conn(n);
}

static void cli_closed_one(struct slot *s)
{
    if (atomic_fetch_sub(&s->close_left, 1) != 1)
        return;
    stamp(s, T_END);
    atomic_store(&s->busy_since, 0);
    if (g.idle) {
        atomic_fetch_add(&g.torn_down, 1);
        return;
    }
    atomic_fetch_add(&g.completed, 1);
    record_conn(s);
    slot_next(s);
}

/* Closes one connection's connector and QP, timed as call `which`;
 * closed(ctx) runs once for each, as its close completes or at once when
 * the close did not pend. Connector first: the QP's close waits for it
 * (the connector is the QP's successor until destroyed). */
static void close_connection(NDK_CONNECTOR *c, NDK_QP *qp, NDK_FN_CLOSE_COMPLETION closed, PVOID ctx,
                             enum call which)
{
    uint64_t t0 = now_ns();
    NTSTATUS a = c->Dispatch->NdkCloseConnector(&c->Header, closed, ctx);
    NTSTATUS b = qp->Dispatch->NdkCloseQp(&qp->Header, closed, ctx);
    add_call(which, t0);
    if (a != STATUS_PENDING)
        closed(ctx);
    if (b != STATUS_PENDING)
        closed(ctx);
}

static void cli_close_cb(PVOID ctx)
{
    cli_closed_one(ctx);
}

static void cli_close_all(struct slot *s)
{
    NDK_CONNECTOR *c = s->conn;
    NDK_QP *qp = s->qp;
    s->conn = NULL;
    s->qp = NULL;
    atomic_store(&s->close_left, 2);
    close_connection(c, qp, cli_close_cb, s, C_CLOSE_CLI);
}

static void cli_disc_done(struct slot *s, NTSTATUS st)
{
    stamp(s, T_DISC_DONE);
    if (st != STATUS_SUCCESS) {
        fail_status("client NdkDisconnect", st);
        return;
    }
    cli_close_all(s);
}

static void cli_disc_cb(PVOID ctx, NTSTATUS st)
{
    cli_disc_done(ctx, st);
}

static void cli_disconnect(struct slot *s)
{
    stamp(s, T_DISC);
    uint64_t t0 = now_ns();
    NTSTATUS st = s->conn->Dispatch->NdkDisconnect(s->conn, cli_disc_cb, s);
    add_call(C_DISCONNECT_CLI, t0);
    if (st != STATUS_PENDING)
        cli_disc_done(s, st);
}

/* One of "client established" / "server established" happened; the last one
 * moves on (disconnect, or in idle mode: count it and start another). */
static void est_one(struct slot *s)
{
    if (atomic_fetch_sub(&s->est_left, 1) != 1)
        return;
    if (g.idle) {
        atomic_store(&s->busy_since, 0);
        atomic_fetch_add(&g.established, 1);
        slot_next(s);
        return;
    }
    cli_disconnect(s);
}

static void cli_disc_event(PVOID ctx)
{
    /* The client always disconnects first, and libndk suppresses the event
     * after a local NdkDisconnect (X2), so this is counted as an oddity. */
    (void)ctx;
    atomic_fetch_add(&g.odd_cli_disc_events, 1);
}

static void cli_cc_done(struct slot *s, NTSTATUS st)
{
    if (st != STATUS_SUCCESS) {
        fail_status("NdkCompleteConnect", st);
        return;
    }
    stamp(s, T_ACTIVE_EST);
    est_one(s);
}

static void cli_cc_cb(PVOID ctx, NTSTATUS st)
{
    cli_cc_done(ctx, st);
}

static void cli_connect_cb(PVOID ctx, NTSTATUS st)
{
    struct slot *s = ctx;
    stamp(s, T_CONNECTED);
    if (st != STATUS_SUCCESS) {
        fail_status("NdkConnect (completion)", st);
        return;
    }
    uint64_t t0 = now_ns();
    NTSTATUS r = s->conn->Dispatch->NdkCompleteConnect(s->conn, cli_disc_event, s, cli_cc_cb, s);
    add_call(C_COMPLETE_CONNECT, t0);
    if (r != STATUS_PENDING)
        cli_cc_done(s, r);
}

static void start_conn(struct slot *s)
{
    atomic_fetch_add(&g.started, 1);
    s->gen++;
    for (int k = 0; k < T_COUNT; k++)
        atomic_store_explicit(&s->t[k], 0, memory_order_relaxed);
    uint64_t t0 = now_ns();
    atomic_store(&s->busy_since, t0);
    atomic_store_explicit(&s->t[T_START], t0, memory_order_relaxed);
    atomic_store(&s->est_left, g.opt.role == ROLE_BOTH ? 2 : 1);

    NTSTATUS st = g.cad->Dispatch->NdkCreateConnector(g.cad, create_cb, s, &s->conn);
    add_call(C_CREATE_CONN, t0);
    if (st != STATUS_SUCCESS) {
        fail_status("NdkCreateConnector", st);
        return;
    }
    if (!g.precreated_qps && !create_conn_qp(g.cpd, g.ccq, s, &s->qp, C_CREATE_QP_CLI))
        return;
    struct conn_pd pd = {PD_MAGIC, s->idx, s->gen};
    stamp(s, T_CONNECT);
    uint64_t t2 = now_ns();
    st = s->conn->Dispatch->NdkConnect(s->conn, s->qp, (PSOCKADDR)&g.src, sizeof g.src,
                                       (PSOCKADDR)&g.dst, sizeof g.dst, READ_LIMIT, READ_LIMIT,
                                       &pd, sizeof pd, cli_connect_cb, s);
    add_call(C_CONNECT, t2);
    if (st != STATUS_PENDING) {
        /* STATUS_SUCCESS is not a valid result for a connect that needs the
         * peer; anything else failed inline. */
        fail_status("NdkConnect", st);
    }
}

/* ------------------------------------------------------------------------ */
/* Server side (all on the server adapter's progress thread)                */
/* ------------------------------------------------------------------------ */

static struct srec *srec_get(void)
{
    struct srec *r = g.sfree;
    if (!r)
        return NULL;
    g.sfree = r->next;
    r->next = NULL;
    r->live = true;
    atomic_fetch_add(&g.srec_live, 1);
    return r;
}

static void srec_put(struct srec *r)
{
    r->live = false;
    r->slot = NULL;
    r->conn = NULL;
    r->qp = NULL; /* closed with its connection: a QP is never reused */
    r->next = g.sfree;
    g.sfree = r;
    atomic_fetch_sub(&g.srec_live, 1);
}

static void srv_closed_one(struct srec *r)
{
    if (--r->close_left)
        return;
    uint64_t now = now_ns();
    atomic_fetch_add_explicit(&g.srv_prep_ns, r->t_accept - r->t_event, memory_order_relaxed);
    atomic_fetch_add_explicit(&g.srv_rtr_ns, r->t_est - r->t_accept, memory_order_relaxed);
    atomic_fetch_add_explicit(&g.srv_idle_ns, r->t_disc_event - r->t_est, memory_order_relaxed);
    atomic_fetch_add_explicit(&g.srv_fin_ns, now - r->t_disc_event, memory_order_relaxed);
    atomic_fetch_add_explicit(&g.srv_n, 1, memory_order_relaxed);
    atomic_fetch_add(&g.srv_closed, 1);
    srec_put(r);
}

static void srv_close_cb(PVOID ctx)
{
    srv_closed_one(ctx);
}

static void srv_disc_done(struct srec *r, NTSTATUS st)
{
    if (st != STATUS_SUCCESS) {
        fail_status("server NdkDisconnect", st);
        return;
    }
    r->close_left = 2;
    close_connection(r->conn, r->qp, srv_close_cb, r, C_CLOSE_SRV);
}

static void srv_disc_cb(PVOID ctx, NTSTATUS st)
{
    srv_disc_done(ctx, st);
}

static void srv_disc_event(PVOID ctx)
{
    struct srec *r = ctx;
    r->t_disc_event = now_ns();
    /* Stamped before our FIN goes out: after it the client may finish and
     * reuse its slot. */
    if (r->slot)
        stamp(r->slot, T_DISC_EVENT);
    uint64_t t0 = now_ns();
    NTSTATUS st = r->conn->Dispatch->NdkDisconnect(r->conn, srv_disc_cb, r);
    add_call(C_DISCONNECT_SRV, t0);
    if (st != STATUS_PENDING)
        srv_disc_done(r, st);
}

static void srv_accept_done(struct srec *r, NTSTATUS st)
{
    r->t_est = now_ns();
    if (st != STATUS_SUCCESS) {
        fail_status("NdkAccept (completion)", st);
        return;
    }
    if (r->slot) {
        stamp(r->slot, T_PASSIVE_EST);
        est_one(r->slot);
    }
}

static void srv_accept_cb(PVOID ctx, NTSTATUS st)
{
    srv_accept_done(ctx, st);
}

static void srv_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    uint64_t t_ev = now_ns();
    atomic_fetch_add(&g.srv_accepted, 1);
    struct srec *r = srec_get();
    if (!r) {
        FAIL("server: more than %u server-side connections at once (record pool)", g.nsrecs);
        c->Dispatch->NdkReject(c, NULL, 0);
        c->Dispatch->NdkCloseConnector(&c->Header, NULL, NULL);
        return;
    }
    r->conn = c;
    r->t_event = t_ev;

    struct conn_pd pd = {0};
    ULONG len = sizeof pd;
    uint64_t t0 = now_ns();
    NTSTATUS st = c->Dispatch->NdkGetConnectionData(c, NULL, NULL, &pd, &len);
    add_call(C_GET_DATA, t0);
    if (st != STATUS_SUCCESS || len != sizeof pd || pd.magic != PD_MAGIC) {
        FAIL("server: NdkGetConnectionData: %s, %u bytes, magic 0x%08x", ndk_status_name(st),
             (unsigned)len, pd.magic);
        return;
    }
    if (g.opt.role == ROLE_BOTH) {
        if (pd.idx >= g.nslots || g.slots[pd.idx].gen != pd.gen) {
            FAIL("server: private data names slot %u gen %u, which is not in flight", pd.idx,
                 pd.gen);
            return;
        }
        r->slot = &g.slots[pd.idx];
        atomic_store_explicit(&r->slot->t[T_EVENT], t_ev, memory_order_relaxed);
    }
    if (g.precreated_qps) {
        if (g.sqp_next >= g.nsqps) {
            FAIL("server: no pre-created QP left");
            return;
        }
        r->qp = g.sqps[g.sqp_next++];
    } else if (!create_conn_qp(g.spd, g.scq, r, &r->qp, C_CREATE_QP_SRV)) {
        return;
    }
    r->t_accept = now_ns();
    if (r->slot)
        atomic_store_explicit(&r->slot->t[T_ACCEPT], r->t_accept, memory_order_relaxed);
    uint64_t t2 = now_ns();
    st = c->Dispatch->NdkAccept(c, r->qp, READ_LIMIT, READ_LIMIT, NULL, 0, srv_disc_event, r,
                                srv_accept_cb, r);
    add_call(C_ACCEPT, t2);
    if (st != STATUS_PENDING)
        srv_accept_done(r, st);
}

/* ------------------------------------------------------------------------ */
/* Setup and teardown                                                       */
/* ------------------------------------------------------------------------ */

static NDK_ADAPTER *open_lo(const char *who)
{
    NDK_ADAPTER *a = NULL;
    NDK_VERSION v = {.Major = NDK_PROVIDER_MAJOR_VERSION, .Minor = NDK_PROVIDER_MINOR_VERSION};
    /* --engines: the device's progress engines (the first open decides). */
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .MaxEngines = g.engines};
    NTSTATUS st = ndk_open_adapter("lo", v, &o, &a);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "connrate: ndk_open_adapter(\"lo\") for the %s: %s\n", who, ndk_status_name(st));
        exit(EXIT_FAILED);
    }
    return a;
}

static void make_pd_cq(NDK_ADAPTER *a, NDK_PD **pd, NDK_CQ **cq)
{
    NTSTATUS st = a->Dispatch->NdkCreatePd(a, create_cb, NULL, pd);
    if (st == STATUS_SUCCESS)
        st = a->Dispatch->NdkCreateCq(a, 4096, cq_notify, NULL, NULL, create_cb, NULL, cq);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "connrate: NdkCreatePd/NdkCreateCq: %s\n", ndk_status_name(st));
        exit(EXIT_FAILED);
    }
}

static void setup_server(void)
{
    g.sad = open_lo("server");
    make_pd_cq(g.sad, &g.spd, &g.scq);
    NTSTATUS st = g.sad->Dispatch->NdkCreateListener(g.sad, srv_connect_event, NULL, create_cb,
                                                     NULL, &g.lsn);
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.opt.port)};
    la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct sync s = {0};
    if (st == STATUS_SUCCESS)
        st = sync_wait(g.lsn->Dispatch->NdkListen(g.lsn, (PSOCKADDR)&la, sizeof la, sync_req_cb,
                                                  &s),
                       &s, "NdkListen");
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "connrate: listener on 127.0.0.1:%u: %s\n", g.opt.port, ndk_status_name(st));
        exit(EXIT_FAILED);
    }
    ULONG len = sizeof la;
    st = g.lsn->Dispatch->NdkGetLocalAddress(g.lsn, (PSOCKADDR)&la, &len);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "connrate: listener address: %s\n", ndk_status_name(st));
        exit(EXIT_FAILED);
    }
    g.opt.port = ntohs(la.sin_port);
}

static void setup_client(void)
{
    g.cad = open_lo("client");
    make_pd_cq(g.cad, &g.cpd, &g.ccq);
    g.src.sin_family = AF_INET;
    g.src.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g.src.sin_port = 0;
    g.dst.sin_family = AF_INET;
    g.dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g.dst.sin_port = htons((uint16_t)g.opt.port);
}

static void alloc_pools(unsigned nslots, unsigned nsrecs)
{
    g.nslots = nslots;
    g.slots = calloc(nslots ? nslots : 1, sizeof *g.slots);
    g.nsrecs = nsrecs;
    g.srecs = calloc(nsrecs ? nsrecs : 1, sizeof *g.srecs);
    if (!g.slots || !g.srecs) {
        fprintf(stderr, "connrate: out of memory\n");
        exit(EXIT_FAILED);
    }
    for (unsigned i = 0; i < nslots; i++)
        g.slots[i].idx = i;
    for (unsigned i = nsrecs; i-- > 0;) {
        g.srecs[i].next = g.sfree;
        g.sfree = &g.srecs[i];
    }
}

/* Waits (bounded) until the server side has closed everything it accepted:
 * anything left is a hang or a leak in the teardown. */
static bool wait_server_quiet(unsigned ms)
{
    uint64_t t0 = now_ns();
    while (atomic_load(&g.srec_live) > 0) {
        if (now_ns() - t0 > (uint64_t)ms * 1000000u)
            return false;
        sleep_ms(1);
    }
    return true;
}

static void teardown(void)
{
    if (g.lsn)
        close_sync(&g.lsn->Header, g.lsn->Dispatch->NdkCloseListener, "listener close");
    if (g.ccq)
        close_sync(&g.ccq->Header, g.ccq->Dispatch->NdkCloseCq, "client CQ close");
    if (g.cpd)
        close_sync(&g.cpd->Header, g.cpd->Dispatch->NdkClosePd, "client PD close");
    if (g.scq)
        close_sync(&g.scq->Header, g.scq->Dispatch->NdkCloseCq, "server CQ close");
    if (g.spd)
        close_sync(&g.spd->Header, g.spd->Dispatch->NdkClosePd, "server PD close");
    if (g.cad)
        ndk_close_adapter(g.cad);
    if (g.sad)
        ndk_close_adapter(g.sad);
}

/* ------------------------------------------------------------------------ */
/* Watching a run                                                           */
/* ------------------------------------------------------------------------ */

static void check_failed(void)
{
    int f = atomic_load(&g.failed);
    if (f <= 0)
        return;
    fprintf(stderr, "connrate: FAILED: %s\n", g.failmsg);
    if (f == EXIT_PORTS)
        fprintf(stderr, "connrate: local ports are exhausted (see `ss -s`, TIME_WAIT); run for "
                        "a shorter time or wait 60 s\n");
    fflush(stderr);
    /* Callbacks may still be running on the provider threads: leave without
     * closing anything (ndk_close_adapter could wait on a wedged connection). */
    _exit(f);
}

/* Says where a connection that takes too long is stuck, then exits. */
static void check_stuck(uint64_t now)
{
    for (unsigned i = 0; i < g.nslots; i++) {
        struct slot *s = &g.slots[i];
        uint64_t b = atomic_load(&s->busy_since);
        if (!b || now < b || now - b < (uint64_t)g.opt.timeout_ms * 1000000u)
            continue;
        int last = T_START;
        for (int k = 0; k < T_COUNT; k++)
            if (st_get(s, (enum stamp)k))
                last = k;
        fprintf(stderr,
                "connrate: FAILED: connection (slot %u gen %u) not finished after %u ms; last "
                "step reached: %s. Steps seen:",
                i, s->gen, g.opt.timeout_ms, stamp_names[last]);
        for (int k = 0; k < T_COUNT; k++)
            if (st_get(s, (enum stamp)k))
                fprintf(stderr, " %s(+%.1f ms)", stamp_names[k],
                        (double)(st_get(s, (enum stamp)k) - b) / 1e6);
        fprintf(stderr, "\n");
        _exit(EXIT_FAILED);
    }
}

/* Runs until the deadline (or -n), then until every slot is idle. Besides
 * the per-connection watchdog, the drain itself is bounded: should the
 * in-flight count ever disagree with the slots, this still ends. */
static void watch_run(uint64_t deadline)
{
    uint64_t stopped_at = 0;
    for (;;) {
        sleep_ms(2);
        check_failed();
        uint64_t now = now_ns();
        if (!atomic_load(&g.stop) && !g.opt.limit_n && now >= deadline)
            atomic_store(&g.stop, true);
        if (atomic_load(&g.inflight) == 0)
            break;
        check_stuck(now);
        if (!stopped_at && (atomic_load(&g.stop) ||
                            (g.opt.limit_n && atomic_load(&g.started) >= g.opt.limit_n)))
            stopped_at = now;
        if (stopped_at && now - stopped_at > (uint64_t)g.opt.timeout_ms * 2000000u) {
            fprintf(stderr, "connrate: FAILED: %d connections still counted in flight %u ms "
                            "after the run stopped\n",
                    atomic_load(&g.inflight), 2 * g.opt.timeout_ms);
            _exit(EXIT_FAILED);
        }
    }
    check_failed();
}

/* Waits until cond() holds: watchdog on, and at most twice the
 * per-connection timeout in all (the server side has no slot to watch). */
static void watch_until(bool (*cond)(void), const char *what)
{
    uint64_t t0 = now_ns();
    while (!cond()) {
        sleep_ms(2);
        check_failed();
        uint64_t now = now_ns();
        check_stuck(now);
        if (now - t0 > (uint64_t)g.opt.timeout_ms * 2000000u) {
            fprintf(stderr, "connrate: FAILED: %s: not done after %u ms (server side: %d "
                            "connections open)\n",
                    what, 2 * g.opt.timeout_ms, atomic_load(&g.srec_live));
            _exit(EXIT_FAILED);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of one field of the records, in microseconds. */
static double pct_field(size_t off, long n, double p, uint32_t *tmp)
{
    if (n <= 0)
        return 0;
    for (long i = 0; i < n; i++)
        memcpy(&tmp[i], (const char *)&g.recs[i] + off, sizeof(uint32_t));
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_u32);
    return connrate_percentile_us(tmp, n, p);
}

static double mean_field(size_t off, long n)
{
    if (n <= 0)
        return 0;
    double sum = 0;
    for (long i = 0; i < n; i++) {
        uint32_t v;
        memcpy(&v, (const char *)&g.recs[i] + off, sizeof v);
        sum += v;
    }
    return sum / (double)n / 1e3;
}

static const char *layout_name(void)
{
    return g.opt.role == ROLE_BOTH ? "one process, 2 adapters (client + server progress threads)"
                               : "two processes (this is the client)";
}

static void report_run(uint64_t t_begin)
{
    long done = atomic_load(&g.completed);
    uint64_t end = atomic_load(&g.last_end);
    double secs = end > t_begin ? (double)(end - t_begin) / 1e9 : 0;
    double rate = secs > 0 ? (double)done / secs : 0;
    long n = atomic_load(&g.nrec);
    if (n > g.rec_cap)
        n = g.rec_cap;
    uint32_t *tmp = malloc(sizeof(uint32_t) * (size_t)(n ? n : 1));
    if (!tmp) {
        fprintf(stderr, "connrate: out of memory\n");
        exit(EXIT_FAILED);
    }
    double e50 = pct_field(offsetof(struct rec, est), n, 0.50, tmp);
    double e99 = pct_field(offsetof(struct rec, est), n, 0.99, tmp);
    bool both = g.opt.role == ROLE_BOTH;
    double b50 = both ? pct_field(offsetof(struct rec, both), n, 0.50, tmp) : 0;
    double b99 = both ? pct_field(offsetof(struct rec, both), n, 0.99, tmp) : 0;
    const char *mode = g.opt.inflight_mode ? "inflight" : "serial";

    printf("\n## connrate (libndk): %s, q=%u, %s\n\n", mode, g.opt.q, layout_name());
    printf("| what | layout | connections | seconds | conn/s | est p50 us | est p99 us | "
           "both-est p50 us | both-est p99 us |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    char b50s[32] = "-", b99s[32] = "-";
    if (both) {
        snprintf(b50s, sizeof b50s, "%.1f", b50);
        snprintf(b99s, sizeof b99s, "%.1f", b99);
    }
    printf("| libndk %s q=%u | %s | %ld | %.2f | %.0f | %.1f | %.1f | %s | %s |\n", mode, g.opt.q,
           both ? "1 proc" : "2 procs", done, secs, rate, e50, e99, b50s, b99s);
    printf("\nest = NdkConnect called -> NdkCompleteConnect succeeded (active side established)\n");
    if (both)
        printf("both-est = NdkConnect called -> server's Accept completion (both established)\n");
    if (n < done)
        printf("(percentiles over the first %ld connections)\n", n);

    /* Where the time goes: legs of the causal chain, then time inside calls. */
    const struct leg *L = both ? legs_one : legs_two;
    size_t nl = both ? sizeof legs_one / sizeof *L : sizeof legs_two / sizeof *L;
    double total = 0, mean[MAX_LEGS];
    for (size_t k = 0; k < nl; k++) {
        mean[k] = mean_field(offsetof(struct rec, leg) + k * sizeof(uint32_t), n);
        total += mean[k];
    }
    printf("\n### legs of one connection (client's view%s)\n\n", both ? " + server stamps" : "");
    printf("| leg | mean us | p50 us | p99 us | share |\n|---|---|---|---|---|\n");
    for (size_t k = 0; k < nl; k++) {
        size_t off = offsetof(struct rec, leg) + k * sizeof(uint32_t);
        printf("| %s | %.1f | %.1f | %.1f | %.0f%% |\n", L[k].what, mean[k],
               pct_field(off, n, 0.50, tmp), pct_field(off, n, 0.99, tmp),
               total > 0 ? 100 * mean[k] / total : 0);
    }
    printf("| total (start -> client closed) | %.1f | | | 100%% |\n", total);
    free(tmp);

    printf("\n### time inside provider calls (mean per call, calling thread)\n\n");
    printf("| call | calls | mean us |\n|---|---|---|\n");
    for (int c = 0; c < C_COUNT; c++) {
        uint64_t cn = atomic_load(&g.call_n[c]);
        if (cn)
            printf("| %s | %llu | %.2f |\n", call_names[c], (unsigned long long)cn,
                   (double)atomic_load(&g.call_ns[c]) / (double)cn / 1e3);
    }
    if (atomic_load(&g.odd_cli_disc_events))
        printf("\nNOTE: %ld client disconnect events (unexpected: the client disconnects first)\n",
               atomic_load(&g.odd_cli_disc_events));
    printf("\nRESULT prog=connrate mode=%s q=%u layout=%s conns=%ld secs=%.3f rate=%.1f "
           "est_p50_us=%.1f est_p99_us=%.1f both_p50_us=%.1f both_p99_us=%.1f\n",
           mode, g.opt.q, both ? "oneproc" : "twoproc", done, secs, rate, e50, e99, b50, b99);
    fflush(stdout);
}

static void report_server(void)
{
    uint64_t n = atomic_load(&g.srv_n);
    printf("\n## connrate server side: %ld connect events, %ld closed\n\n",
           atomic_load(&g.srv_accepted), atomic_load(&g.srv_closed));
    if (n) {
        printf("| server leg | mean us |\n|---|---|\n");
        printf("| connect event -> NdkAccept called (GetConnectionData + CreateQp) | %.1f |\n",
               (double)atomic_load(&g.srv_prep_ns) / (double)n / 1e3);
        printf("| NdkAccept called -> Accept completion (Reply, client, RTR) | %.1f |\n",
               (double)atomic_load(&g.srv_rtr_ns) / (double)n / 1e3);
        printf("| Accept completion -> disconnect event | %.1f |\n",
               (double)atomic_load(&g.srv_idle_ns) / (double)n / 1e3);
        printf("| disconnect event -> connector + QP closed | %.1f |\n",
               (double)atomic_load(&g.srv_fin_ns) / (double)n / 1e3);
    }
    fflush(stdout);
}

/* ------------------------------------------------------------------------ */
/* Idle connections: heap per established connection                        */
/* ------------------------------------------------------------------------ */

/* Bytes in use on the heap, all arenas (mallinfo2 sums them): small chunks
 * (uordblks) plus chunks malloc served with mmap (hblkhd), run with glibc's
 * per-thread caches off (exec_for_heap_figures). Under AddressSanitizer,
 * whose allocator mallinfo2() does not see, the bytes it has handed out and
 * not had back. */
static size_t heap_used(size_t *small, size_t *mapped)
{
#ifdef CONNRATE_SANITIZER_HEAP
    size_t n = __sanitizer_get_current_allocated_bytes();
    if (small)
        *small = n;
    if (mapped)
        *mapped = 0;
    return n;
#endif
    struct mallinfo2 m = mallinfo2();
    if (small)
        *small = m.uordblks;
    if (mapped)
        *mapped = m.hblkhd;
    return m.uordblks + m.hblkhd;
}

#ifdef CONNRATE_SANITIZER_HEAP
#define HEAP_SOURCE "the sanitizer allocator's bytes in use (__sanitizer_get_current_allocated_bytes)"
#else
#define HEAP_SOURCE "mallinfo2() uordblks + hblkhd over all arenas, glibc's per-thread caches off"
#endif

/*
 * glibc keeps up to 7 freed chunks per size and thread in a cache that
 * mallinfo2() counts as in use, so a heap figure taken with it on moves by a
 * few KiB with whichever thread freed what last (a teardown of 4000
 * connections seemed to leave 1.5-5.5 KiB behind that ASan's exact count
 * shows is not there). The idle measurement therefore runs with the caches
 * off: connrate executes itself again with the tunable set.
 */
static void exec_for_heap_figures(char **argv)
{
#ifndef CONNRATE_SANITIZER_HEAP
    static const char tunable[] = "glibc.malloc.tcache_count=0";
    const char *t = getenv("GLIBC_TUNABLES");
    if (t && strstr(t, tunable))
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s%s%s", t ? t : "", t ? ":" : "", tunable);
    setenv("GLIBC_TUNABLES", buf, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "connrate: cannot re-execute with %s: %s\n", tunable, strerror(errno));
#else
    (void)argv;
#endif
}

/* The heap back at (or below) base, waiting at most 2 s for the progress
 * threads to free what closed objects leave for their next loop iteration.
 * Returns the last reading. */
static size_t heap_settled(size_t base)
{
    uint64_t end = now_ns() + 2000000000u;
    size_t h;
    while ((h = heap_used(NULL, NULL)) > base && now_ns() < end)
        sleep_ms(5);
    return h;
}

static long want_established, want_torn_down;

static bool all_established(void)
{
    return atomic_load(&g.established) >= want_established;
}

static bool all_torn_down(void)
{
    return atomic_load(&g.torn_down) >= want_torn_down && atomic_load(&g.srec_live) == 0;
}

/* Pre-creates the QPs of slots [from, from + n) and n server QPs. */
static void idle_make_qps(unsigned from, unsigned n)
{
    for (unsigned i = from; i < from + n; i++) {
        NTSTATUS a = create_qp(g.cpd, g.ccq, &g.slots[i], NULL, &g.slots[i].qp);
        NTSTATUS b = create_qp(g.spd, g.scq, NULL, NULL, &g.sqps[g.nsqps]);
        if (a != STATUS_SUCCESS || b != STATUS_SUCCESS) {
            fprintf(stderr, "connrate: NdkCreateQp #%u: %s / %s\n", i, ndk_status_name(a),
                    ndk_status_name(b));
            exit(EXIT_FAILED);
        }
        g.nsqps++;
    }
}

/* Establishes connections on slots [from, from + n), 64 at a time, and
 * leaves them idle. */
static void idle_establish(unsigned from, unsigned n)
{
    unsigned window = n < 64 ? n : 64;
    want_established += n;
    g.fresh_end = from + n;
    atomic_store(&g.next_fresh, from + window);
    atomic_store(&g.inflight, (int)window);
    for (unsigned i = from; i < from + window; i++)
        start_conn(&g.slots[i]);
    watch_until(all_established, "establishing idle connections");
}

/* Tears slots [from, from + n) down the normal way: the client disconnects,
 * the server follows on its disconnect event, both close. */
static void idle_teardown(unsigned from, unsigned n)
{
    want_torn_down += n;
    for (unsigned i = from; i < from + n; i++) {
        atomic_store(&g.slots[i].busy_since, now_ns());
        cli_disconnect(&g.slots[i]);
        check_failed();
    }
    watch_until(all_torn_down, "tearing idle connections down");
}

static int run_idle(void)
{
    unsigned n = g.idle_n;
    /* The warm-up round makes each thread's first-use allocations (glibc
     * creates an arena per progress thread on its first malloc, and fills
     * per-thread caches) before the baseline, so they are not charged to
     * the connections. */
    const unsigned warm = 64;
    g.idle = true;
    g.precreated_qps = true;
    alloc_pools(warm + n, warm + n);
    g.sqps = calloc(warm + n, sizeof *g.sqps);
    if (!g.sqps) {
        fprintf(stderr, "connrate: out of memory\n");
        return EXIT_FAILED;
    }
    setup_server();
    setup_client();
    idle_make_qps(0, warm);
    idle_establish(0, warm);
    idle_teardown(0, warm);

    sleep_ms(50);
    size_t base = heap_used(NULL, NULL);
    /* QPs before the second baseline, so the per-connection figure leaves
     * them out; with the data path their queues (depth QP_DEPTH) live there. */
    idle_make_qps(warm, n);
    size_t small0, mapped0;
    size_t before = heap_used(&small0, &mapped0);

    uint64_t t0 = now_ns();
    idle_establish(warm, n);
    double est_s = (double)(now_ns() - t0) / 1e9;

    /* Let both progress threads finish their loop iteration (deferred frees
     * of the listener's half-open records), then read twice to see that the
     * figure is stable. */
    sleep_ms(100);
    size_t small1, mapped1;
    size_t after = heap_used(&small1, &mapped1);
    sleep_ms(100);
    size_t after2 = heap_used(NULL, NULL);

    idle_teardown(warm, n);
    size_t final = heap_settled(base);

    if (base == 0 && before == 0 && after == 0) {
        /* A sanitizer's allocator (ASan) does not feed mallinfo2(): a zero
         * here is no measurement, and must not read as "0 bytes, met". */
        fprintf(stderr, "connrate: FAILED: mallinfo2() reports no heap in use (an allocator "
                        "that does not support it, e.g. a sanitizer's): no heap figure\n");
        teardown();
        return EXIT_FAILED;
    }
    long long pair = ((long long)after - (long long)before) / (long long)n;
    long long qp_each = ((long long)before - (long long)base) / (2LL * n);
    long long leak = (long long)final - (long long)base;
    printf("\n## connrate --idle %u (one process, 2 adapters)\n\n", n);
    printf("%u connections established in %.2f s (64 at a time) and left idle.\n\n", n, est_s);
    printf("| heap bytes per idle connection | N | per side | per pair (both sides) |\n");
    printf("|---|---|---|---|\n");
    printf("| libndk connectors + MPA state + port reservations | %u | %lld | %lld |\n", n,
           pair / 2, pair);
    printf("\nheap = %s, both progress threads included, after a warm-up round of %u "
           "connections.\n",
           HEAP_SOURCE, warm);
    printf("  before %zu (uordblks %zu, hblkhd %zu), after %zu (uordblks %zu, hblkhd %zu), "
           "after+100ms %zu\n",
           before, small0, mapped0, after, small1, mapped1, after2);
    printf("Excluded: the QPs (created before the baseline: %lld bytes each with depth %d/%d; "
           "their queues will be there once the data path exists), the two CQs and PDs, the "
           "adapters and the listener; kernel socket memory (2 TCP sockets per pair) is not "
           "heap and not counted.\n",
           qp_each, QP_DEPTH, QP_DEPTH);
    printf("After disconnecting and closing everything (QPs too): heap %+lld bytes against the "
           "baseline before the QPs%s\n",
           leak, leak > 0 ? "  <-- LEAK" : "");
    printf("\nRESULT prog=connrate mode=idle n=%u pair_bytes=%lld side_bytes=%lld qp_bytes=%lld "
           "leak_bytes=%lld\n",
           n, pair, pair / 2, qp_each, leak);
    fflush(stdout);
    teardown();
    if (g.check_heap && leak > 0) {
        fprintf(stderr, "connrate: FAILED: %lld bytes of heap still in use after the teardown\n", leak);
        return EXIT_FAILED;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: connrate [-m serial|inflight] [-q N] [-D seconds | -n count]\n"
            "                [--server | --client] [-p port] [--timeout ms] [--lifetime s]\n"
            "                [--engines N]\n"
            "       connrate --idle N [--check]\n"
            "  default: client and server in one process (two opens of \"lo\")\n"
            "  --server: only the listener (127.0.0.1:port); runs until SIGTERM/SIGINT or\n"
            "            --lifetime seconds (default 120)\n"
            "  --client: only the client, connecting to 127.0.0.1:port\n"
            "  --idle N: N connections established and left idle: heap per connection, and\n"
            "            whether the heap returns to its baseline after the teardown\n"
            "            (--check: exit 1 if it does not)\n"
            "  --engines N: progress engines of the interface (MaxEngines; default one per\n"
            "            CPU the process may use)\n");
}

static int run_server_only(void)
{
    alloc_pools(0, 8192);
    setup_server();
    printf("connrate server: listening on 127.0.0.1:%u\n", g.opt.port);
    fflush(stdout);
    uint64_t end = now_ns() + (uint64_t)g.opt.lifetime_s * 1000000000u;
    while (!g_signalled && now_ns() < end) {
        sleep_ms(10);
        check_failed();
    }
    /* The client has finished by now; whatever the server still holds must
     * drain quickly. */
    if (!wait_server_quiet(2000))
        fprintf(stderr, "connrate server: %d connections still open at exit\n",
                atomic_load(&g.srec_live));
    report_server();
    teardown();
    return atomic_load(&g.srec_live) ? EXIT_FAILED : 0;
}

static int run_client(void)
{
    long cap;
    if (g.opt.limit_n)
        cap = g.opt.limit_n;
    else
        cap = (long)(g.opt.duration_s * 200000.0);
    if (cap < 100000)
        cap = 100000;
    if (cap > 4000000)
        cap = 4000000;
    g.rec_cap = cap;
    g.recs = malloc(sizeof *g.recs * (size_t)cap);
    if (!g.recs) {
        fprintf(stderr, "connrate: out of memory\n");
        return EXIT_FAILED;
    }
    /* Touch every page now, not on the measured path. */
    memset(g.recs, 0, sizeof *g.recs * (size_t)cap);

    alloc_pools(g.opt.q, g.opt.role == ROLE_BOTH ? 4 * g.opt.q + 64 : 0);
    if (g.opt.role == ROLE_BOTH)
        setup_server();
    setup_client();

    uint64_t t_begin = now_ns();
    uint64_t deadline = t_begin + (uint64_t)(g.opt.duration_s * 1e9);
    atomic_store(&g.inflight, (int)g.opt.q);
    for (unsigned i = 0; i < g.opt.q; i++)
        start_conn(&g.slots[i]);
    watch_run(deadline);

    bool quiet = g.opt.role != ROLE_BOTH || wait_server_quiet(2000);
    report_run(t_begin);
    if (g.opt.role == ROLE_BOTH)
        report_server();
    if (!quiet) {
        fprintf(stderr, "connrate: FAILED: %d server-side connections not closed 2 s after the "
                        "last client finished\n",
                atomic_load(&g.srec_live));
        return EXIT_FAILED;
    }
    teardown();
    return 0;
}

int main(int argc, char **argv)
{
    connrate_opts_init(&g.opt);
    const struct connrate_own_opt own[] = {
        {"idle", .number = &g.idle_n},
        {"check", .flag = &g.check_heap},
        {"engines", .number = &g.engines},
    };
    int rc = connrate_parse_options(&g.opt, argc, argv, own, sizeof own / sizeof own[0], usage);
    if (rc >= 0)
        return rc;
    connrate_catch_signals();

    /* Two sockets per connection: as many descriptors as allowed. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    if (g.idle_n) {
        if (g.opt.role != ROLE_BOTH) {
            fprintf(stderr, "connrate: --idle runs both sides in one process\n");
            return 2;
        }
        exec_for_heap_figures(argv);
        return run_idle();
    }
    if (g.opt.role == ROLE_SERVER)
        return run_server_only();
    return run_client();
}
