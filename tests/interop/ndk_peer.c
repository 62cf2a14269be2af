/*
 * ndk_peer - the libndk side of the siw interop tests (tests/interop).
 *
 * A plain NDK consumer: it uses only <ndk/ndk.h> and the NDKPI dispatch
 * tables, as any program linked against libndk would, and prints one
 * machine-readable line per connection step so that a test driver can
 * compare what libndk saw with what the Linux siw peer in the QEMU guest saw.
 *
 *   ndk_peer listen PORT [--pd TEXT] [--ird N] [--ord N] [--count N]
 *                        [--reject] [--crc] [--timeout S]
 *     Listens on 127.0.0.1:PORT of adapter "lo" (PORT 0: any free port) and
 *     prints "LISTENING port=P" once requests can arrive. For each of the
 *     COUNT requests (several may be in flight at once):
 *       PEER-REQUEST rds=<n> pd=<hex> ird=<n> ord=<n> conn=<i>
 *         (NdkGetConnectionData before NdkAccept/NdkReject)
 *       ACCEPTED status=<name> conn=<i>      (NdkAccept with the --pd text,
 *                                             and --ird/--ord or else the
 *                                             values PEER-REQUEST showed)
 *       DISCONNECTED status=<name> conn=<i>  (NdkDisconnect, called on the
 *                                             peer's disconnect event)
 *     or, with --reject, REJECTED status=<name> conn=<i> (NdkReject with the
 *     --pd text).
 *
 *   ndk_peer connect HOST:PORT [--pd TEXT] [--ird N] [--ord N] [--count N]
 *                    [--parallel] [--no-p2p] [--crc] [--expect-refused]
 *                    [--hold] [--timeout S]
 *     COUNT connections from 127.0.0.1 port 0, one after the other, or with
 *     --parallel all at once, disconnected only when all are connected (the
 *     pattern of rdma-core's cmtime):
 *       PEER-REPLY status=<name> rds=<n> pd=<hex> ird=<n> ord=<n> conn=<i>
 *         (the NdkConnect result, then NdkGetConnectionData; "-" for values
 *         that cannot be read)
 *       CONNECTED status=<name> conn=<i>     (NdkCompleteConnect)
 *       DISCONNECTED status=<name> peer_first=<0|1> conn=<i>  (NdkDisconnect;
 *         peer_first=1 when the peer's disconnect event came first)
 *     --expect-refused: the connect must fail with STATUS_CONNECTION_REFUSED
 *     (a peer's reject), whose private data PEER-REPLY shows.
 *     --hold: after CONNECTED print "HOLDING conn=<i>" and keep the
 *     connection until the i-th line (or EOF) on stdin, or until the peer
 *     disconnects ("PEER-DISCONNECTED conn=<i>"), so that a driver can check
 *     the peer's side of an established connection first.
 *
 * Every wait is bounded: --timeout S (default 60) is how long nothing may
 * happen. Exit status 0 only when every step ended as expected, 1
 * otherwise, 2 for a usage error. Diagnostics go to stderr.
 *
 * Threading: libndk calls back on its progress thread. The callbacks only
 * queue an event for the main thread, which makes every decision and every
 * NDK call, so the lines come out in the order the steps happened.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <ndk/ndk.h>

#include "peer_util.h"

/* MPA caps PD_Length at 512 octets, so no peer can send more than this. */
#define PD_BUF_MAX 512

struct options {
    bool listen;
    struct sockaddr_in addr; /* listen: local address; connect: destination */
    const char *pd;          /* our private data (accept, reject or connect) */
    bool have_ird, have_ord;
    ULONG ird, ord;
    unsigned count;
    bool reject;         /* listen: reject instead of accepting */
    bool parallel;       /* connect: all connections at once */
    bool no_p2p;         /* connect: client/server Request (A=0), as siw sends */
    bool crc;            /* ask for MPA CRC */
    bool expect_refused; /* connect: the peer is expected to reject */
    bool hold;           /* connect: wait for stdin before disconnecting */
    unsigned timeout_s;
};

const char peer_name[] = "ndk_peer";
static struct options opt;

/* ------------------------------------------------------------------------ */
/* Creating and closing objects                                             */
/* ------------------------------------------------------------------------ */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv; /* on CLOCK_MONOTONIC, set up in main */

static void deadline_in(struct timespec *ts, unsigned seconds)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += seconds;
}

/* A create or close request, waited for on the spot: they complete without
 * the network, so nothing else needs to move meanwhile. */
struct token {
    bool done;
    NTSTATUS status;
    NDK_OBJECT_HEADER *obj; /* create completions only */
};

static void token_complete(struct token *t, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    pthread_mutex_lock(&mu);
    t->status = status;
    t->obj = obj;
    t->done = true;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

static void on_close_done(PVOID ctx)
{
    token_complete(ctx, STATUS_SUCCESS, NULL);
}

static void on_create_done(PVOID ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    token_complete(ctx, status, obj);
}

/* NDKPI calls a completion only when the function returned STATUS_PENDING.
 * A completion that does not come in time ends the program: the token is
 * still referenced by libndk. */
static NTSTATUS token_finish(NTSTATUS returned, struct token *t)
{
    if (returned != STATUS_PENDING)
        return returned;
    struct timespec dl;
    deadline_in(&dl, opt.timeout_s);
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (!t->done && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cv, &mu, &dl);
    bool done = t->done;
    pthread_mutex_unlock(&mu);
    if (!done) {
        diag("no create/close completion within %u s", opt.timeout_s);
        exit(1);
    }
    return t->status;
}

static bool close_object(NDK_OBJECT_HEADER *obj, NDK_FN_CLOSE_OBJECT close_fn, const char *what)
{
    struct token t = {0};
    NTSTATUS st = token_finish(close_fn(obj, on_close_done, &t), &t);
    if (st != STATUS_SUCCESS) {
        diag("closing the %s: %s", what, ndk_status_name(st));
        return false;
    }
    return true;
}

/* Creates an object through a dispatch function that either stores the
 * object at once or reports it through its CreateCompletion. */
#define CREATE(call, pobj, what)                                                 \
    do {                                                                         \
        struct token t_ = {0};                                                   \
        NTSTATUS st_ = (call);                                                   \
        if (st_ == STATUS_PENDING) {                                             \
            st_ = token_finish(st_, &t_);                                        \
            if (st_ == STATUS_SUCCESS)                                           \
                *(pobj) = (void *)t_.obj;                                        \
        }                                                                        \
        if (st_ != STATUS_SUCCESS) {                                             \
            diag("creating the %s: %s", what, ndk_status_name(st_));              \
            return false;                                                        \
        }                                                                        \
    } while (0)

static NDK_ADAPTER *adapter;
static NDK_CQ *cq;
static NDK_PD *pd;
static NDK_LISTENER *listener;

/* The CQ is never armed: only connection setup is exercised, but
 * NdkCreateQp needs a CQ and NdkCreateCq a notification callback. */
static void on_cq_notify(PVOID ctx, NTSTATUS status)
{
    (void)ctx, (void)status;
}

static bool open_shared(void)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o};
    if (opt.no_p2p)
        o.Flags |= NDK_OPEN_FLAG_NO_P2P;
    if (opt.crc)
        o.Flags |= NDK_OPEN_FLAG_REQUEST_CRC;
    NDK_VERSION v = {.Major = NDK_PROVIDER_MAJOR_VERSION, .Minor = NDK_PROVIDER_MINOR_VERSION};
    NTSTATUS st = ndk_open_adapter("lo", v, &o, &adapter);
    if (st != STATUS_SUCCESS) {
        diag("ndk_open_adapter(lo): %s", ndk_status_name(st));
        adapter = NULL;
        return false;
    }
    CREATE(adapter->Dispatch->NdkCreateCq(adapter, 64, on_cq_notify, NULL, NULL, on_create_done,
                                          &t_, &cq),
           &cq, "CQ");
    CREATE(adapter->Dispatch->NdkCreatePd(adapter, on_create_done, &t_, &pd), &pd, "PD");
    return true;
}

static bool create_qp(NDK_QP **qp)
{
    CREATE(pd->Dispatch->NdkCreateQp(pd, cq, cq, NULL, 4, 4, 1, 1, 0, on_create_done, &t_, qp),
           qp, "QP");
    return true;
}

static bool create_connector(NDK_CONNECTOR **c)
{
    CREATE(adapter->Dispatch->NdkCreateConnector(adapter, on_create_done, &t_, c), c,
           "connector");
    return true;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

enum step { STEP_CONNECT, STEP_COMPLETE, STEP_ACCEPT, STEP_DISCONNECT, STEP_MAX };

struct conn;

/* The context of one request's completion callback. */
struct op {
    struct conn *c;
    enum step step;
};

enum cstate {
    C_FREE,          /* not started */
    C_CONNECTING,    /* NdkConnect pending */
    C_COMPLETING,    /* NdkCompleteConnect pending */
    C_ACCEPTING,     /* NdkAccept pending */
    C_ESTABLISHED,   /* connected; waiting for a reason to disconnect */
    C_HOLDING,       /* --hold: waiting for stdin or the peer */
    C_DISCONNECTING, /* NdkDisconnect pending */
    C_DONE,          /* closed */
};

struct conn {
    unsigned id;
    NDK_CONNECTOR *connector;
    NDK_QP *qp;
    enum cstate state;
    bool ok;        /* every step went as expected */
    bool peer_disc; /* the peer's disconnect event arrived */
    struct op ops[STEP_MAX];
};

enum ev_kind {
    EV_REQUEST,         /* listener connect event */
    EV_DONE,            /* a request completed */
    EV_PEER_DISCONNECT, /* a connector's disconnect event */
    EV_RELEASE,         /* --hold: a line (or EOF) on stdin */
};

struct ev {
    enum ev_kind kind;
    NDK_CONNECTOR *connector; /* EV_REQUEST */
    struct conn *c;           /* EV_DONE, EV_PEER_DISCONNECT */
    enum step step;           /* EV_DONE */
    NTSTATUS status;          /* EV_DONE */
    bool eof;                 /* EV_RELEASE */
    struct ev *next;
};

static struct ev *ev_head, *ev_tail;

static void post(struct ev tmpl)
{
    struct ev *e = malloc(sizeof *e);
    if (!e) {
        diag("out of memory in a callback");
        abort();
    }
    *e = tmpl;
    e->next = NULL;
    pthread_mutex_lock(&mu);
    if (ev_tail)
        ev_tail->next = e;
    else
        ev_head = e;
    ev_tail = e;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

/* The next event, or NULL when nothing happened for `seconds`. */
static struct ev *next_event(unsigned seconds)
{
    struct timespec dl;
    deadline_in(&dl, seconds);
    pthread_mutex_lock(&mu);
    int rc = 0;
    while (!ev_head && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&cv, &mu, &dl);
    struct ev *e = ev_head;
    if (e) {
        ev_head = e->next;
        if (!ev_head)
            ev_tail = NULL;
    }
    pthread_mutex_unlock(&mu);
    return e;
}

static void on_request_done(PVOID ctx, NTSTATUS status)
{
    struct op *op = ctx;
    post((struct ev){.kind = EV_DONE, .c = op->c, .step = op->step, .status = status});
}

static void on_connect_event(PVOID ctx, NDK_CONNECTOR *connector)
{
    (void)ctx;
    post((struct ev){.kind = EV_REQUEST, .connector = connector});
}

static void on_disconnect_event(PVOID ctx)
{
    post((struct ev){.kind = EV_PEER_DISCONNECT, .c = ctx});
}

/* --hold: one release per line; EOF releases everything (the driver is
 * gone, nobody will look at the peer any more). */
static void *stdin_reader(void *arg)
{
    (void)arg;
    char line[256];
    while (fgets(line, sizeof line, stdin))
        post((struct ev){.kind = EV_RELEASE});
    post((struct ev){.kind = EV_RELEASE, .eof = true});
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Connections                                                              */
/* ------------------------------------------------------------------------ */

static struct conn *conns;
static unsigned started, finished, releases;
static bool extra_failure; /* something went wrong outside any connection */

static void step_result(struct conn *c, enum step s, NTSTATUS st);

/* Handles a request's result at once when it did not pend; otherwise its
 * completion arrives later as EV_DONE. */
static void issue(struct conn *c, enum step s, NTSTATUS returned)
{
    if (returned != STATUS_PENDING)
        step_result(c, s, returned);
}

static void conn_finish(struct conn *c, bool ok)
{
    if (c->connector && !close_object(&c->connector->Header,
                                      c->connector->Dispatch->NdkCloseConnector, "connector"))
        ok = false;
    if (c->qp && !close_object(&c->qp->Header, c->qp->Dispatch->NdkCloseQp, "QP"))
        ok = false;
    c->connector = NULL;
    c->qp = NULL;
    c->ok = ok;
    c->state = C_DONE;
    finished++;
}

struct conn_data {
    NTSTATUS status; /* of NdkGetConnectionData */
    ULONG rds, ird, ord;
    char pd_hex[2 * PD_BUF_MAX + 1];
};

/* Reads the peer's private data the way a consumer is meant to: the size
 * (RDS) with an empty buffer first, then the data into a buffer that size. */
static void get_connection_data(NDK_CONNECTOR *c, struct conn_data *d)
{
    memset(d, 0, sizeof *d);
    ULONG len = 0;
    d->status = c->Dispatch->NdkGetConnectionData(c, &d->ird, &d->ord, NULL, &len);
    if (d->status != STATUS_SUCCESS && d->status != STATUS_BUFFER_TOO_SMALL) {
        diag("NdkGetConnectionData (size): %s", ndk_status_name(d->status));
        return;
    }
    d->rds = len;
    if (len > PD_BUF_MAX) {
        diag("NdkGetConnectionData reports %u octets, more than MPA allows", (unsigned)len);
        d->status = STATUS_BUFFER_OVERFLOW;
        return;
    }
    uint8_t buf[PD_BUF_MAX];
    ULONG got = len;
    d->status = c->Dispatch->NdkGetConnectionData(c, &d->ird, &d->ord, len ? buf : NULL, &got);
    if (d->status != STATUS_SUCCESS) {
        diag("NdkGetConnectionData: %s", ndk_status_name(d->status));
        return;
    }
    if (got != len) {
        diag("NdkGetConnectionData: %u octets, the size probe said %u", (unsigned)got,
             (unsigned)len);
        d->status = STATUS_INTERNAL_ERROR;
        return;
    }
    hex(d->pd_hex, buf, len);
}

static ULONG pd_len(void)
{
    return opt.pd ? (ULONG)strlen(opt.pd) : 0;
}

static void start_disconnect(struct conn *c)
{
    c->state = C_DISCONNECTING;
    issue(c, STEP_DISCONNECT,
          c->connector->Dispatch->NdkDisconnect(c->connector, on_request_done,
                                                &c->ops[STEP_DISCONNECT]));
}

/* Connect mode: what an established connection waits for before
 * NdkDisconnect (a release with --hold, the others with --parallel). */
static void connected_next(struct conn *c)
{
    if (opt.hold && releases < c->id && !c->peer_disc) {
        out("HOLDING conn=%u\n", c->id);
        c->state = C_HOLDING;
        return;
    }
    if (opt.parallel && !c->peer_disc) {
        /* The last one to connect (or to fail) releases them all. */
        c->state = C_ESTABLISHED;
        for (unsigned i = 0; i < opt.count; i++)
            if (conns[i].state != C_ESTABLISHED && conns[i].state != C_DONE)
                return;
        for (unsigned i = 0; i < opt.count; i++)
            if (conns[i].state == C_ESTABLISHED)
                start_disconnect(&conns[i]);
        return;
    }
    start_disconnect(c);
}

static void start_connect(struct conn *c);

/* Connect mode: starts what may start now. All at once with --parallel,
 * otherwise the next one when the previous has finished. A connection can
 * finish inside start_connect (a step that failed at once), hence the loop. */
static void start_more(void)
{
    while (started < opt.count && (opt.parallel || finished == started))
        start_connect(&conns[started++]);
}

static void start_connect(struct conn *c)
{
    if (!create_qp(&c->qp) || !create_connector(&c->connector)) {
        conn_finish(c, false);
        return;
    }
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ULONG ird = opt.have_ird ? opt.ird : 1, ord = opt.have_ord ? opt.ord : 1;
    c->state = C_CONNECTING;
    issue(c, STEP_CONNECT,
          c->connector->Dispatch->NdkConnect(c->connector, c->qp, (PSOCKADDR)&src, sizeof src,
                                             (PSOCKADDR)&opt.addr, sizeof opt.addr, ird, ord,
                                             (PVOID)opt.pd, pd_len(), on_request_done,
                                             &c->ops[STEP_CONNECT]));
}

static void connect_done(struct conn *c, NTSTATUS st)
{
    struct conn_data d = {.status = STATUS_INVALID_DEVICE_STATE};
    /* The Reply's (or the reject's) private data and the effective IRD/ORD
     * can be read after a successful connect and after a peer's reject. */
    if (st == STATUS_SUCCESS || st == STATUS_CONNECTION_REFUSED)
        get_connection_data(c->connector, &d);
    if (d.status == STATUS_SUCCESS)
        out("PEER-REPLY status=%s rds=%u pd=%s ird=%u ord=%u conn=%u\n", ndk_status_name(st),
            (unsigned)d.rds, d.pd_hex, (unsigned)d.ird, (unsigned)d.ord, c->id);
    else
        out("PEER-REPLY status=%s rds=- pd=- ird=- ord=- conn=%u\n", ndk_status_name(st), c->id);
    if (opt.expect_refused) {
        conn_finish(c, st == STATUS_CONNECTION_REFUSED && d.status == STATUS_SUCCESS);
        return;
    }
    if (st != STATUS_SUCCESS || d.status != STATUS_SUCCESS) {
        conn_finish(c, false);
        return;
    }
    c->state = C_COMPLETING;
    issue(c, STEP_COMPLETE,
          c->connector->Dispatch->NdkCompleteConnect(c->connector, on_disconnect_event, c,
                                                     on_request_done, &c->ops[STEP_COMPLETE]));
}

static void complete_done(struct conn *c, NTSTATUS st)
{
    out("CONNECTED status=%s conn=%u\n", ndk_status_name(st), c->id);
    if (st != STATUS_SUCCESS) {
        conn_finish(c, false);
        return;
    }
    connected_next(c);
}

/* Listen mode: a new request. Reports it, then rejects or accepts it. */
static void handle_request(struct conn *c)
{
    struct conn_data d;
    get_connection_data(c->connector, &d);
    out("PEER-REQUEST rds=%u pd=%s ird=%u ord=%u conn=%u\n", (unsigned)d.rds, d.pd_hex,
        (unsigned)d.ird, (unsigned)d.ord, c->id);
    if (d.status != STATUS_SUCCESS) {
        conn_finish(c, false);
        return;
    }
    if (opt.reject) {
        NTSTATUS st = c->connector->Dispatch->NdkReject(c->connector, (PVOID)opt.pd, pd_len());
        out("REJECTED status=%s conn=%u\n", ndk_status_name(st), c->id);
        conn_finish(c, st == STATUS_SUCCESS);
        return;
    }
    if (!create_qp(&c->qp)) {
        conn_finish(c, false);
        return;
    }
    /* Without --ird/--ord, accept what the requester asked for, as rping's
     * and cmtime's servers do. */
    ULONG ird = opt.have_ird ? opt.ird : d.ird;
    ULONG ord = opt.have_ord ? opt.ord : d.ord;
    c->state = C_ACCEPTING;
    issue(c, STEP_ACCEPT,
          c->connector->Dispatch->NdkAccept(c->connector, c->qp, ird, ord, (PVOID)opt.pd,
                                            pd_len(), on_disconnect_event, c, on_request_done,
                                            &c->ops[STEP_ACCEPT]));
}

static void accept_done(struct conn *c, NTSTATUS st)
{
    out("ACCEPTED status=%s conn=%u\n", ndk_status_name(st), c->id);
    if (st != STATUS_SUCCESS) {
        conn_finish(c, false);
        return;
    }
    c->state = C_ESTABLISHED;
    /* The peer may have ended the connection already. */
    if (c->peer_disc)
        start_disconnect(c);
}

static void disconnect_done(struct conn *c, NTSTATUS st)
{
    if (opt.listen)
        out("DISCONNECTED status=%s conn=%u\n", ndk_status_name(st), c->id);
    else
        out("DISCONNECTED status=%s peer_first=%d conn=%u\n", ndk_status_name(st),
            c->peer_disc ? 1 : 0, c->id);
    conn_finish(c, st == STATUS_SUCCESS);
}

static void step_result(struct conn *c, enum step s, NTSTATUS st)
{
    static void (*const done[STEP_MAX])(struct conn *c, NTSTATUS st) = {
        [STEP_CONNECT] = connect_done,
        [STEP_COMPLETE] = complete_done,
        [STEP_ACCEPT] = accept_done,
        [STEP_DISCONNECT] = disconnect_done,
    };
    /* Completions of a connection that was already closed (a close cancels
     * what is pending) change nothing. */
    if (c->state != C_DONE && s < STEP_MAX)
        done[s](c, st);
}

static void peer_disconnected(struct conn *c)
{
    if (c->state == C_DONE || c->peer_disc)
        return;
    c->peer_disc = true;
    switch (c->state) {
    case C_HOLDING:
        out("PEER-DISCONNECTED conn=%u\n", c->id);
        start_disconnect(c);
        break;
    case C_ESTABLISHED:
        /* Listen mode: the normal end. Connect mode (--parallel): the peer
         * did not wait for us. */
        start_disconnect(c);
        break;
    default:
        /* Connect/Accept still pending: handled when they complete. */
        break;
    }
}

static void released(bool eof)
{
    releases = eof ? UINT32_MAX : releases + 1;
    for (unsigned i = 0; i < opt.count; i++)
        if (conns[i].state == C_HOLDING && conns[i].id <= releases)
            start_disconnect(&conns[i]);
}

/* ------------------------------------------------------------------------ */
/* The two modes                                                            */
/* ------------------------------------------------------------------------ */

static bool start_listening(void)
{
    struct token t = {0};
    NTSTATUS st = adapter->Dispatch->NdkCreateListener(adapter, on_connect_event, NULL,
                                                        on_create_done, &t, &listener);
    if (st == STATUS_PENDING) {
        st = token_finish(st, &t);
        listener = (NDK_LISTENER *)t.obj;
    }
    if (st != STATUS_SUCCESS) {
        diag("NdkCreateListener: %s", ndk_status_name(st));
        listener = NULL;
        return false;
    }
    /* NdkListen's completion is a request completion; it is waited for here
     * through the event queue like any other. */
    struct conn dummy = {0};
    dummy.ops[STEP_CONNECT] = (struct op){&dummy, STEP_CONNECT};
    st = listener->Dispatch->NdkListen(listener, (PSOCKADDR)&opt.addr, sizeof opt.addr,
                                       on_request_done, &dummy.ops[STEP_CONNECT]);
    if (st == STATUS_PENDING) {
        struct ev *e = next_event(opt.timeout_s);
        if (!e || e->kind != EV_DONE || e->c != &dummy) {
            diag("NdkListen did not complete");
            exit(1);
        }
        st = e->status;
        free(e);
    }
    if (st != STATUS_SUCCESS) {
        diag("NdkListen: %s", ndk_status_name(st));
        return false;
    }
    struct sockaddr_in bound;
    ULONG blen = sizeof bound;
    st = listener->Dispatch->NdkGetLocalAddress(listener, (PSOCKADDR)&bound, &blen);
    if (st != STATUS_SUCCESS) {
        diag("NdkGetLocalAddress (listener): %s", ndk_status_name(st));
        return false;
    }
    out("LISTENING port=%u\n", (unsigned)ntohs(bound.sin_port));
    return true;
}

static void dispatch(struct ev *e)
{
    switch (e->kind) {
    case EV_REQUEST:
        if (!opt.listen || started == opt.count) {
            /* Not ours to handle: closing an unanswered request resets it. */
            diag("an extra connection request; closing it");
            close_object(&e->connector->Header, e->connector->Dispatch->NdkCloseConnector,
                         "extra connector");
            extra_failure = true;
        } else {
            struct conn *c = &conns[started++];
            c->connector = e->connector;
            handle_request(c);
        }
        break;
    case EV_DONE:
        step_result(e->c, e->step, e->status);
        break;
    case EV_PEER_DISCONNECT:
        peer_disconnected(e->c);
        break;
    case EV_RELEASE:
        released(e->eof);
        break;
    }
}

static int run(void)
{
    conns = calloc(opt.count, sizeof *conns);
    if (!conns)
        return 1;
    for (unsigned i = 0; i < opt.count; i++) {
        conns[i].id = i + 1;
        for (int s = 0; s < STEP_MAX; s++)
            conns[i].ops[s] = (struct op){&conns[i], (enum step)s};
    }
    if (opt.hold) {
        pthread_t t;
        if (pthread_create(&t, NULL, stdin_reader, NULL)) {
            diag("pthread_create failed");
            return 1;
        }
        /* It may block in fgets() to the end; exit() ends it. */
        pthread_detach(t);
    }
    if (!open_shared() || (opt.listen && !start_listening())) {
        extra_failure = true;
        goto out;
    }

    if (!opt.listen)
        start_more();
    while (finished < opt.count) {
        struct ev *e = next_event(opt.timeout_s);
        if (!e) {
            diag("nothing happened for %u s (%u of %u connections started, %u finished)",
                 opt.timeout_s, started, opt.count, finished);
            extra_failure = true;
            break;
        }
        dispatch(e);
        free(e);
        if (!opt.listen)
            start_more();
    }

out:;
    bool ok = !extra_failure;
    for (unsigned i = 0; i < opt.count; i++) {
        if (conns[i].state != C_DONE && conns[i].state != C_FREE)
            conn_finish(&conns[i], false);
        if (conns[i].state == C_DONE)
            ok = ok && conns[i].ok;
        else
            ok = false;
    }
    if (listener && !close_object(&listener->Header, listener->Dispatch->NdkCloseListener,
                                  "listener"))
        ok = false;
    if (pd && !close_object(&pd->Header, pd->Dispatch->NdkClosePd, "PD"))
        ok = false;
    if (cq && !close_object(&cq->Header, cq->Dispatch->NdkCloseCq, "CQ"))
        ok = false;
    if (adapter)
        ndk_close_adapter(adapter);
    free(conns);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                             */
/* ------------------------------------------------------------------------ */

void usage(void)
{
    fputs("usage: ndk_peer listen PORT [--pd TEXT] [--ird N] [--ord N] [--count N] [--reject]\n"
          "                            [--crc] [--timeout S]\n"
          "       ndk_peer connect HOST:PORT [--pd TEXT] [--ird N] [--ord N] [--count N]\n"
          "                            [--parallel] [--no-p2p] [--crc] [--expect-refused]\n"
          "                            [--hold] [--timeout S]\n",
          stderr);
    exit(2);
}

static void parse(int argc, char **argv)
{
    if (argc < 3)
        usage();
    opt.count = 1;
    opt.timeout_s = 60;
    opt.addr.sin_family = AF_INET;
    opt.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (!strcmp(argv[1], "listen")) {
        opt.listen = true;
        opt.addr.sin_port = htons((uint16_t)number(argv[2], 65535));
    } else if (!strcmp(argv[1], "connect")) {
        char host[64];
        const char *colon = strrchr(argv[2], ':');
        if (!colon || (size_t)(colon - argv[2]) >= sizeof host)
            usage();
        memcpy(host, argv[2], (size_t)(colon - argv[2]));
        host[colon - argv[2]] = '\0';
        if (inet_pton(AF_INET, host, &opt.addr.sin_addr) != 1) {
            diag("not an IPv4 address: %s", host);
            usage();
        }
        opt.addr.sin_port = htons((uint16_t)number(colon + 1, 65535));
        if (opt.addr.sin_port == 0)
            usage();
    } else {
        usage();
    }
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i];
        bool has_arg = i + 1 < argc;
        if (!strcmp(a, "--pd") && has_arg) {
            opt.pd = argv[++i];
        } else if (!strcmp(a, "--ird") && has_arg) {
            opt.ird = (ULONG)number(argv[++i], 0xFFFF);
            opt.have_ird = true;
        } else if (!strcmp(a, "--ord") && has_arg) {
            opt.ord = (ULONG)number(argv[++i], 0xFFFF);
            opt.have_ord = true;
        } else if (!strcmp(a, "--count") && has_arg) {
            opt.count = (unsigned)number(argv[++i], 10000);
        } else if (!strcmp(a, "--timeout") && has_arg) {
            opt.timeout_s = (unsigned)number(argv[++i], 3600);
        } else if (!strcmp(a, "--reject") && opt.listen) {
            opt.reject = true;
        } else if (!strcmp(a, "--parallel") && !opt.listen) {
            opt.parallel = true;
        } else if (!strcmp(a, "--no-p2p") && !opt.listen) {
            opt.no_p2p = true;
        } else if (!strcmp(a, "--expect-refused") && !opt.listen) {
            opt.expect_refused = true;
        } else if (!strcmp(a, "--hold") && !opt.listen) {
            opt.hold = true;
        } else if (!strcmp(a, "--crc")) {
            opt.crc = true;
        } else {
            diag("unknown or incomplete option: %s", a);
            usage();
        }
    }
    if (opt.count == 0 || opt.timeout_s == 0)
        usage();
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    /* Timeouts must not move with the wall clock. */
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    return run();
}
