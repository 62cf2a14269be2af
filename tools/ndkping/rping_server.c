/*
 * rping_server.c - the server of `ndkping --rping` (see rping.h):
 * rping_run_server and rping_run_persistent_server, rping_test_server.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lib/args.h"
#include "lib/clock.h"
#include "lib/listener.h"
#include "lib/log.h"
#include "lib/signals.h"
#include "ndkping/rping.h"

/* Checks what the client advertises for the RDMA Read, and fits rdma_buf. */
static bool take_source(struct rconn *r, const struct rmsg *src)
{
    rping_dbg("Received rkey %" PRIx32 " addr %" PRIx64 " len %" PRIu32 " from peer", src->rkey, src->addr, src->size);
    rping_dbg("server received sink adv");
    if (src->size == 0 || src->size > RPING_MAX_SIZE) {
        tc_complain(NULL, "ping %lu: the client advertises %" PRIu32 " bytes (1 to %u allowed)", r->pings, src->size,
                    RPING_MAX_SIZE);
        return false;
    }
    if (src->size > r->c.adapter->info.MaxTransferLength) {
        tc_complain(NULL, "ping %lu: %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32, r->pings,
                    src->size, r->c.adapter->info.MaxTransferLength);
        return false;
    }
    return rconn_fit_rdma_buf(r, src->size);
}

/* One ping after the client's start_buf advertisement: Read, go-ahead,
 * the client's rdma_buf advertisement, Write, go-ahead. */
static bool one_ping(struct rconn *r, const struct rmsg *src)
{
    const struct rmsg go_ahead = {0};
    uint8_t *data = r->b[RB_RDMA].mem;
    memset(data, 0, src->size);
    if (!rconn_rdma(r, WR_READ, src->size, src, "the RDMA Read of the client's start_buf (RDMA_READ_COMPLETE)"))
        return false;
    rping_dbg("server received read complete");
    if (ro.verbose)
        tc_say(NULL, "server ping data: %.*s", (int)strnlen((const char *)data, src->size), (const char *)data);
    if (!rconn_send(r, &go_ahead))
        return false;
    rping_dbg("server posted go ahead");
    struct rmsg sink;
    if (!rconn_recv(r, "the client's rdma_buf advertisement (RDMA_WRITE_ADV)", &sink, NULL))
        return false;
    rping_dbg("Received rkey %" PRIx32 " addr %" PRIx64 " len %" PRIu32 " from peer", sink.rkey, sink.addr, sink.size);
    /* rping echoes strlen(rdma_buf) + 1 bytes: the string and its NUL
     * (all of what was read when it holds no NUL). */
    size_t n = strnlen((const char *)data, src->size);
    n = n < src->size ? n + 1 : n;
    if (n > sink.size) {
        tc_complain(NULL, "ping %lu: the client's rdma_buf (%" PRIu32 " bytes) cannot take the %zu bytes to echo",
                    r->pings, sink.size, n);
        return false;
    }
    rping_dbg("rdma write from lkey %" PRIx32 " laddr %" PRIx64 " len %zu", r->b[RB_RDMA].ltoken,
              (uint64_t)(uintptr_t)data, n);
    if (!rconn_rdma(r, WR_WRITE, n, &sink, "the RDMA Write into the client's rdma_buf (RDMA_WRITE_COMPLETE)"))
        return false;
    rping_dbg("server rdma write complete");
    if (!rconn_send(r, &go_ahead))
        return false;
    rping_dbg("server posted go ahead");
    return true;
}

/* rping_test_server: the pings until the client leaves. True if they all
 * worked (and, with -C, there were exactly that many). */
static bool server_pings(struct rconn *r)
{
    bool left = false;
    struct rmsg src;
    while (rconn_recv(r, "the client's start_buf advertisement (RDMA_READ_ADV)", &src, &left)) {
        if (!take_source(r, &src))
            return false;
        r->ping_size = src.size;
        if (r->pings == 0)
            r->t_first = tc_now_us();
        if (!one_ping(r, &src))
            return false;
        r->pings++;
        r->t_last = tc_now_us();
    }
    if (!left)
        return false;
    tc_err(NULL, "server DISCONNECT EVENT...");
    if (ro.count_given && r->pings != ro.count) {
        tc_complain(NULL, "the client %s made %lu ping%s, expected %lu (-C)", r->c.peer, r->pings,
                    r->pings == 1 ? "" : "s", ro.count);
        return false;
    }
    return true;
}

/* rdma_accept(id, NULL) answers with the request's IRD/ORD: the passive
 * side's view of them (docs/behaviour.md, IRD / ORD). */
static bool accept_request(struct rconn *r)
{
    ULONG ird = 0, ord = 0, rds = 0;
    NTSTATUS st = r->c.cn->Dispatch->NdkGetConnectionData(r->c.cn, &ird, &ord, NULL, &rds);
    if (st != STATUS_SUCCESS) {
        tc_complain(NULL, "NdkGetConnectionData on the request from %s failed: %s", r->c.peer, tc_status_name(st));
        return false;
    }
    rping_dbg("cma_event type RDMA_CM_EVENT_CONNECT_REQUEST from %s: IRD %" PRIu32 " ORD %" PRIu32
              ", %" PRIu32 " bytes of private data",
              r->c.peer, ird, ord, rds);
    if (ord == 0)
        tc_complain(NULL, "the client %s allows no RDMA Read (its IRD is 0): the server's reads will fail", r->c.peer);
    if (!rconn_setup(r, false))
        return false;
    rping_dbg("accepting client connection request");
    if (!tc_conn_accept(&r->c, ird, ord, NULL, 0))
        return false;
    rping_dbg("cma_event type RDMA_CM_EVENT_ESTABLISHED (accepted %s with IRD %" PRIu32 " ORD %" PRIu32 ")",
              r->c.peer, ird, ord);
    return true;
}

/* One connection, passive side: rping_setup_qp, rping_setup_buffers, post
 * the receives, rping_accept, rping_test_server, rping_disconnect. */
static bool serve(struct tc_adapter *a, NDK_CONNECTOR *cn)
{
    struct rconn *r = rconn_new(a, false);
    if (!r) {
        tc_listener_refuse(cn);
        return false;
    }
    r->c.cn = cn; /* ours from the connect event on */
    uint64_t t0 = tc_now_us();
    tc_conn_name_peer(&r->c);
    bool ok = accept_request(r);
    if (ok) {
        /* A failed ping loop still disconnects. */
        ok = rconn_disconnect(r, server_pings(r));
        rconn_summary(r, "server", r->ping_size, t0);
    }
    return rconn_end(r) && ok;
}

struct server {
    struct tc_adapter a;
    struct tc_listener l;
    atomic_uint ok, failed;
};

struct worker {
    pthread_t tid;
    struct server *s;
    NDK_CONNECTOR *cn;
    struct worker *next;
};

static void count(struct server *s, bool ok)
{
    atomic_fetch_add(ok ? &s->ok : &s->failed, 1);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    count(w->s, serve(&w->s->a, w->cn));
    return NULL;
}

/* rping_run_persistent_server: a thread per connection, until stopped. */
static unsigned serve_persistent(struct server *s)
{
    struct worker *workers = NULL;
    unsigned handled = 0;
    NDK_CONNECTOR *cn;
    while (tc_listener_next(&s->l, 0, &cn, NULL) == TC_NEXT_GOT) {
        handled++;
        struct worker *w = calloc(1, sizeof *w);
        if (w)
            *w = (struct worker){.s = s, .cn = cn, .next = workers};
        if (!w || pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            tc_complain(NULL, "cannot start a connection thread");
            tc_listener_refuse(cn);
            count(s, false);
            free(w);
            continue;
        }
        workers = w;
    }
    /* Each connection thread ends within its own bounded waits. */
    for (struct worker *w = workers, *next; w; w = next) {
        next = w->next;
        pthread_join(w->tid, NULL);
        free(w);
    }
    return handled;
}

/* SIGINT/SIGTERM: no further connections. */
static atomic_bool interrupted, listening;
static struct server *the_server;

static void on_interrupt(void *arg)
{
    (void)arg;
    atomic_store(&interrupted, true);
    if (atomic_load(&listening))
        tc_listener_stop(&the_server->l);
    rping_dbg("interrupted: no further connections");
}

/* rping_bind_server and rping_listen; "rdma_listen on ADDR:PORT" (with
 * -d) once the listener takes connections. */
static bool start(struct server *s)
{
    NDK_SOCKADDR addr;
    if (!peer_open_server(&s->a, &ro.peer, (struct peer_addr){ro.addr, "-a"}, ro.port, &addr) ||
        !tc_listen(&s->l, &s->a, &addr, 0))
        return false;
    rping_dbg("rdma_bind_addr successful");
    char at[TC_ADDR_BUF];
    rping_dbg("rdma_listen on %s", tc_format_addr(&s->l.bound, true, at, sizeof at));
    atomic_store(&listening, true);
    if (atomic_load(&interrupted))
        tc_listener_stop(&s->l);
    return true;
}

int rping_run_server(void)
{
    static struct server s;
    the_server = &s;
    /* Before any thread exists (the provider's start with the adapter). */
    tc_signals_start(on_interrupt, NULL);
    unsigned handled = 0;
    bool closed = true, listened = start(&s);
    if (listened) {
        NDK_CONNECTOR *cn;
        if (ro.persistent)
            handled = serve_persistent(&s);
        else if (tc_listener_next(&s.l, 0, &cn, NULL) == TC_NEXT_GOT)
            handled = 1, count(&s, serve(&s.a, cn));
        atomic_store(&listening, false);
        closed = tc_listener_close(&s.l);
    }
    tc_adapter_close(&s.a);
    tc_signals_end();
    unsigned ok = atomic_load(&s.ok), failed = atomic_load(&s.failed);
    if (ro.persistent && ro.debug)
        tc_say(NULL, "server: %u connection%s, %u ok, %u failed", handled, handled == 1 ? "" : "s", ok, failed);
    /* A persistent server stopped before any client came has done all it
     * was asked. */
    bool done = listened && (handled > 0 || ro.persistent);
    return done && closed && failed == 0 && !tc_library_problems() ? TC_EXIT_OK : TC_EXIT_FAILED;
}
