/*
 * native_run.c - the three roles of ndkping's own protocol (see native.h):
 * a server (-s), a client (-c), and both in one process (--loopback), with
 * their summaries.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "lib/adapters.h"
#include "lib/args.h"
#include "lib/listener.h"
#include "lib/log.h"
#include "lib/signals.h"
#include "ndkping/native.h"

/* ------------------------------------------------------------------------ */
/* Summaries                                                                */
/* ------------------------------------------------------------------------ */

/* "N connections, avg connect X us, min Y, max Z", or "K of N connections
 * ok, ..." when only K of the N attempts went as asked. suffix qualifies
 * the noun (" refused"); leg NULL: nothing timed. */
static void stats_line(const char *role, const char *noun, const char *suffix, const char *leg,
                       const struct tc_stats *s, unsigned long attempted)
{
    bool partial = s->n < attempted;
    unsigned long total = partial ? attempted : s->n;
    char head[160], of[32] = "";
    if (partial)
        snprintf(of, sizeof of, "%u of ", s->n);
    snprintf(head, sizeof head, "%s%lu %s%s%s%s", of, total, noun, total == 1 ? "" : "s", suffix,
             partial ? (suffix[0] ? " as asked" : " ok") : "");
    if (s->n == 0 || !leg)
        native_say(LVL_SUMMARY, role, "%s", head);
    else
        native_say(LVL_SUMMARY, role, "%s, avg %s %" PRIu64 " us, min %" PRIu64 ", max %" PRIu64, head, leg,
                   s->sum / s->n, s->min, s->max);
}

static void server_summary(const struct server *s, unsigned long attempted)
{
    if (opt.reject)
        stats_line(s->side.role, "request", " rejected", NULL, &s->reject_stats, attempted);
    else
        stats_line(s->side.role, "connection", "", "accept", &s->accept_stats, attempted);
    if (opt.data_phase && !opt.reject)
        stats_line(s->side.role, "data phase", "", "reply Send", &s->reply_stats, attempted);
}

/* "client: 3 data phases, 65536 bytes each: RDMA Write avg ... (MB/s), ..." */
static void client_summary(const struct client *cl, unsigned long attempted)
{
    stats_line("client", "connection", opt.reject ? " refused" : "", "connect", &cl->connect_stats, attempted);
    if (!opt.data_phase || opt.reject)
        return;
    const struct tc_stats *w = &cl->write_stats, *r = &cl->read_stats, *sr = &cl->sr_stats;
    char of[32] = "";
    if (w->n < attempted)
        snprintf(of, sizeof of, "%u of ", w->n);
    unsigned long total = w->n < attempted ? attempted : w->n;
    if (w->n == 0) {
        native_say(LVL_SUMMARY, "client", "%s%lu data phase%s ok", of, total, total == 1 ? "" : "s");
        return;
    }
    native_say(LVL_SUMMARY, "client",
               "%s%lu data phase%s%s, %" PRIu64 " bytes each: RDMA Write avg %" PRIu64 " us (%.*f MB/s), RDMA Read avg %" PRIu64
               " us (%.*f MB/s), Send/Receive avg %" PRIu64 " us round trip%s",
               of, total, total == 1 ? "" : "s", of[0] ? " ok" : "", cl->data_bytes / w->n, w->sum / w->n,
               TC_RATE(cl->data_bytes, w->sum), r->sum / r->n, TC_RATE(cl->data_bytes, r->sum), sr->sum / sr->n,
               opt.verify ? "; every byte verified" : "");
}

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

/* Opens side's adapter (see tc_adapter_open) with ndkping's flags. */
static bool side_open(struct side *s, const char *role, const NDK_SOCKADDR *near, const char *near_what,
                      bool client)
{
    memset(s, 0, sizeof *s);
    s->role = role;
    ULONG flags = (opt.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0) | (client && opt.no_p2p ? NDK_OPEN_FLAG_NO_P2P : 0);
    if (!tc_adapter_open(&s->a, role, opt.adapter, near, near_what, flags, opt.timeout_ms))
        return false;
    native_say(LVL_VERBOSE, role, "opened adapter %s at NDK %u.%u, flags 0x%" PRIx32, s->a.name,
               s->a.info.Version.Major, s->a.info.Version.Minor, flags);
    return true;
}

static void print_adapter(const struct side *s, const char *how)
{
    char addrs[TC_ADDRS_BUF];
    const NDK_ADAPTER_INFO *in = &s->a.info;
    native_say(LVL_NORMAL, NULL,
               "adapter %s (%s)%s: NDK %u.%u, %s, MaxCallerData %" PRIu32 ", MaxCalleeData %" PRIu32 ", max IRD %" PRIu32
               " ORD %" PRIu32,
               s->a.described ? s->a.desc.Name : s->a.name,
               s->a.described ? tc_format_desc_addrs(&s->a.desc, addrs, sizeof addrs) : "?", how,
               in->Version.Major, in->Version.Minor, tc_technology_name(in->RdmaTechnology), in->MaxCallerData,
               in->MaxCalleeData, in->MaxInboundReadLimit, in->MaxOutboundReadLimit);
}

static bool resolve(const char *what, const char *text, NDK_SOCKADDR *out)
{
    return tc_resolve(NULL, what, text, opt.ipv6 ? AF_INET6 : AF_UNSPEC, out);
}

/* The server's listener on addr; "listening on ..." once it is. */
static bool server_listen(struct server *s, struct tc_listener *l, const NDK_SOCKADDR *addr)
{
    if (!tc_listen(l, &s->side.a, addr, 0))
        return false;
    s->listener = l;
    char a[TC_ADDR_BUF];
    native_say(LVL_NORMAL, s->side.role, "listening on %s (adapter %s)%s", tc_format_addr(&l->bound, true, a, sizeof a),
               s->side.a.described ? s->side.a.desc.Name : s->side.a.name,
               opt.reject ? ", rejecting every request" : "");
    return true;
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

static int run_client(void)
{
    struct client cl;
    memset(&cl, 0, sizeof cl);
    if (!resolve("the server's address (-a)", opt.address, &cl.dst))
        return TC_EXIT_FAILED;
    tc_sockaddr_set_port(&cl.dst, opt.port);
    /* Default adapter: the one the route to the server leaves from, which
     * is the adapter owning -a when -a is local; lo when there is none. */
    NDK_SOCKADDR routed;
    bool have_route = tc_route_source(&cl.dst, &routed);
    int rc = TC_EXIT_FAILED;
    if (!side_open(&cl.side, "client", have_route ? &routed : NULL, "where the route to the server leaves from",
                   true) ||
        !tc_adapter_source(&cl.side.a, &cl.dst, have_route ? &routed : NULL, &cl.side.addr))
        goto out;
    print_adapter(&cl.side, "");
    unsigned long count = opt.count ? opt.count : 1;
    for (unsigned long i = 1; i <= count && client_once(&cl, (unsigned)i); i++)
        cl.ok++;
    client_summary(&cl, count);
    rc = cl.ok == count && !tc_library_problems() ? TC_EXIT_OK : TC_EXIT_FAILED;
out:
    tc_adapter_close(&cl.side.a);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

/* SIGINT/SIGTERM stop the server between connections. The signal thread
 * may come before the listener exists: both sides look at both flags. */
static atomic_bool interrupted, listening;
static struct tc_listener server_listener;

static void on_interrupt(void *arg)
{
    (void)arg;
    atomic_store(&interrupted, true);
    if (atomic_load(&listening))
        tc_listener_stop(&server_listener);
    native_say(LVL_NORMAL, "server", "interrupted, stopping after the current connection");
}

/* The listen address: -a, else every address of the family. */
static bool server_address(NDK_SOCKADDR *addr)
{
    memset(addr, 0, sizeof *addr);
    if (opt.address && !resolve("the listen address (-a)", opt.address, addr))
        return false;
    if (!opt.address)
        addr->sa.sa_family = opt.ipv6 ? AF_INET6 : AF_INET; /* as rping */
    tc_sockaddr_set_port(addr, opt.port);
    return true;
}

static int run_server(void)
{
    struct server s;
    memset(&s, 0, sizeof s);
    s.limit = opt.count;
    NDK_SOCKADDR addr;
    if (!server_address(&addr))
        return TC_EXIT_FAILED;
    /* Before any thread exists (the provider's start with the adapter). */
    tc_signals_start(on_interrupt, NULL);
    int rc = TC_EXIT_FAILED;
    bool listens = side_open(&s.side, "server", &addr, "the listen address (-a)", false);
    if (listens) {
        print_adapter(&s.side, "");
        listens = server_listen(&s, &server_listener, &addr);
    }
    if (listens) {
        atomic_store(&listening, true);
        if (atomic_load(&interrupted))
            tc_listener_stop(&server_listener);
        server_serve(&s);
        atomic_store(&listening, false);
        bool closed = tc_listener_close(&server_listener);
        server_summary(&s, s.handled);
        rc = closed && !s.failed && !tc_library_problems() ? TC_EXIT_OK : TC_EXIT_FAILED;
    }
    tc_adapter_close(&s.side.a);
    tc_signals_end();
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Both in one process                                                      */
/* ------------------------------------------------------------------------ */

static void *server_thread(void *arg)
{
    server_serve(arg);
    return NULL;
}

/* The address both ends use: -a, else the adapter's (-d) first address of
 * the family, else the loopback address. */
static bool loopback_address(NDK_SOCKADDR *addr)
{
    int family = opt.ipv6 ? AF_INET6 : AF_INET;
    memset(addr, 0, sizeof *addr);
    if (opt.address)
        return resolve("the address (-a)", opt.address, addr);
    if (!opt.adapter)
        return tc_parse_addr(opt.ipv6 ? "::1" : "127.0.0.1", family, true, addr);
    NDK_ADAPTER_DESCRIPTION d;
    const NDK_SOCKADDR *a = tc_describe(opt.adapter, &d) ? tc_desc_pick_addr(&d, family, false) : NULL;
    if (!a) {
        tc_complain(NULL, "adapter '%s' has no %s address", opt.adapter, opt.ipv6 ? "IPv6" : "IPv4");
        tc_print_candidates();
        return false;
    }
    *addr = *a;
    return true;
}

static bool loopback_sides(struct server *s, struct client *cl, const NDK_SOCKADDR *addr)
{
    /* Two instances of the adapter, as two hosts would have. */
    if (!side_open(&s->side, "server", addr, "the address", false) ||
        !side_open(&cl->side, "client", addr, "the address", true))
        return false;
    if (memcmp(&s->side.a.info, &cl->side.a.info, sizeof s->side.a.info) != 0)
        tc_library_problem(NULL, "two instances of adapter %s report different NDK_ADAPTER_INFO", s->side.a.name);
    print_adapter(&s->side, ", opened twice (server and client)");
    s->peer = &cl->side;
    cl->peer = &s->side;
    cl->side.addr = *addr;
    tc_sockaddr_set_port(&cl->side.addr, 0);
    return true;
}

static void loopback_verdict(const struct server *s, const struct client *cl, unsigned long count, int *rc)
{
    unsigned problems = tc_library_problems();
    if (cl->ok == count && s->ok == count && !s->failed && !problems) {
        native_say(LVL_SUMMARY, NULL, "ndkping: %lu/%lu connection%s %s%s", count, count, count == 1 ? "" : "s",
                   opt.reject ? "rejected as asked; reject private data byte-exact"
                              : "ok; private data byte-exact and IRD/ORD consistent on both sides",
                   opt.reject || !opt.data_phase
                       ? ""
                       : "; RDMA Write, RDMA Read and Send/Receive moved every byte intact");
        *rc = TC_EXIT_OK;
    } else {
        native_say(LVL_SUMMARY, NULL, "ndkping: FAILED: client %u/%lu ok, server %u/%lu ok, %u library problem%s",
                   cl->ok, count, s->ok, count, problems, problems == 1 ? "" : "s");
    }
}

/* The clients, while the server serves on its thread. */
static void loopback_run(struct server *s, struct client *cl, unsigned long count)
{
    pthread_t tid;
    if (pthread_create(&tid, NULL, server_thread, s) != 0) {
        tc_complain(NULL, "cannot start the server thread");
        return;
    }
    for (unsigned long i = 1; i <= count && client_once(cl, (unsigned)i); i++)
        cl->ok++;
    /* If the client stopped early, the server must not wait for requests
     * that will not come. */
    tc_listener_stop(s->listener);
    pthread_join(tid, NULL);
}

static int run_loopback(void)
{
    struct server s;
    struct client cl;
    struct tc_listener l;
    memset(&s, 0, sizeof s);
    memset(&cl, 0, sizeof cl);
    tc_log_show_roles(true);
    unsigned long count = opt.count ? opt.count : 1;
    int rc = TC_EXIT_FAILED;
    NDK_SOCKADDR addr;
    if (loopback_address(&addr) && loopback_sides(&s, &cl, &addr)) {
        s.side.addr = addr;
        tc_sockaddr_set_port(&s.side.addr, opt.port_given ? opt.port : 0);
        if (server_listen(&s, &l, &s.side.addr)) {
            s.limit = count;
            s.bounded_wait = true;
            cl.dst = l.bound;
            loopback_run(&s, &cl, count);
            bool closed = tc_listener_close(&l);
            client_summary(&cl, count);
            server_summary(&s, count);
            loopback_verdict(&s, &cl, count, &rc);
            if (!closed)
                rc = TC_EXIT_FAILED;
        }
    }
    tc_adapter_close(&cl.side.a);
    tc_adapter_close(&s.side.a);
    return rc;
}

int native_main(int argc, char **argv)
{
    int rc = native_parse_options(argc, argv);
    if (rc >= 0)
        return rc;
    switch (opt.mode) {
    case MODE_SERVER:
        return run_server();
    case MODE_CLIENT:
        return run_client();
    case MODE_LOOPBACK:
        return run_loopback();
    default:
        return TC_EXIT_USAGE;
    }
}
