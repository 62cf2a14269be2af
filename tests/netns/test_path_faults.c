/*
 * Broken paths and vanished peers between two hosts: the test builds three
 * network namespaces, a client host, a router and a server host
 * (10.201.1.2 -- 10.201.1.1 | 10.201.2.1 -- 10.201.2.2, veth pairs), and
 * "pulls the cable" by setting one of the router's interfaces down: the
 * router then drops what it cannot forward, silently (a blackhole route),
 * as a broken path does. The client adapter lives in the client namespace,
 * the server adapter in the server namespace, both in this process (each
 * socket is made in the namespace of the thread that makes it: dp_side
 * enter).
 *   - A link down for less than the provider's timeouts during streams of
 *     RDMA Writes, Reads and Sends: every request completes exactly once,
 *     successfully, and the data is exact.
 *   - Down for longer than TcpUserTimeoutMs with data outstanding: both
 *     sides' disconnect events (NDK_DISCONNECT_REASON_ABORTED) within the
 *     bound, every outstanding request completed exactly once (cancelled,
 *     or successful for a Write TCP had taken), and after the link is back
 *     a new connection works.
 *   - Down with both sides idle: keepalive finds the dead path on the side
 *     that accepted (its socket inherits the listener's options) and a
 *     pending NdkDisconnect ends with a documented status in time.
 *   - Down during connection set-up: before the SYN (STATUS_IO_TIMEOUT
 *     once the SYN's retransmissions gave up: TcpUserTimeoutMs covers them
 *     too), and after the MPA Request arrived (both legs fail with a
 *     documented status in time); down for a moment as the SYN leaves: a
 *     retransmitted SYN connects.
 *   - The server host vanishes (its link and adapter gone, its namespace
 *     deleted: no FIN, no RST): the idle client notices within
 *     TcpUserTimeoutMs plus the keepalive idle time.
 * docs/behaviour.md "Dead peers". IPv4 only (the faults are the same over
 * IPv6). Delay, loss, reordering and duplication are test_impaired_paths.c's
 * (through tests/netns/impair.c, as not every kernel has netem).
 * Needs root for namespaces and the ip tool, else the program reports
 * itself skipped (exit 77).
 */
#include <sys/wait.h>

#include "netns_stream.h"


/* Whether the router still has interface dev. */
static bool router_has(const char *dev)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ip -n %s link show %s >/dev/null 2>&1", ns_rtr, dev);
    return system(cmd) == 0;
}

/* The three hosts; false (with the command that failed printed) if they
 * cannot be made here. */
static bool topology_up(void)
{
    const char *c = ns_cli, *r = ns_rtr, *s = ns_srv;
    bool ok = namespaces_add("ndkf") &&
              sh("ip -n %s link add rc address 02:00:0a:c9:01:01 type veth peer name fc "
                 "address 02:00:0a:c9:01:02 netns %s", r, c) &&
              sh("ip -n %s link add rs address 02:00:0a:c9:02:01 type veth peer name fs "
                 "address 02:00:0a:c9:02:02 netns %s", r, s) &&
              sh("ip -n %s addr add 10.201.1.2/24 dev fc && ip -n %s addr add 10.201.1.1/24 dev rc", c, r) &&
              sh("ip -n %s addr add 10.201.2.2/24 dev fs && ip -n %s addr add 10.201.2.1/24 dev rs", s, r) &&
              sh("for n in %s %s %s; do ip -n $n link set lo up; done", c, r, s) &&
              sh("ip -n %s link set fc up && ip -n %s link set rc up && ip -n %s link set rs up && "
                 "ip -n %s link set fs up",
                 c, r, r, s) &&
              sh("ip -n %s route add default via 10.201.1.1 && ip -n %s route add default via 10.201.2.1", c,
                 s) &&
              /* Fixed neighbours: address resolution that failed during an
               * outage must not make the next case's packets fail locally. */
              sh("ip -n %s neigh add 10.201.1.1 lladdr 02:00:0a:c9:01:01 dev fc nud permanent", c) &&
              sh("ip -n %s neigh add 10.201.1.2 lladdr 02:00:0a:c9:01:02 dev rc nud permanent", r) &&
              sh("ip -n %s neigh add 10.201.2.2 lladdr 02:00:0a:c9:02:02 dev rs nud permanent", r) &&
              sh("ip -n %s neigh add 10.201.2.1 lladdr 02:00:0a:c9:02:01 dev fs nud permanent", s) &&
              /* With an interface down, its subnet falls to this route:
               * dropped without an ICMP error, as on a broken path. */
              sh("ip -n %s route add blackhole 10.201.0.0/16", r) &&
              sh("ip netns exec %s sh -c 'echo 1 > /proc/sys/net/ipv4/ip_forward'", r);
    return ok && namespaces_open();
}

/* The router's interface towards the client ("rc") or the server ("rs"). */
static bool router_link(const char *dev, bool up)
{
    return sh("ip -n %s link set %s %s", ns_rtr, dev, up ? "up" : "down");
}

static void link_set(const char *dev, bool up)
{
    CHECK(router_link(dev, up));
}

/* Fast detection for the test: the user timeout in ms, keepalive 1 s idle,
 * probes 1 s apart. */
static bool open_hosts_with(dp_side *cli, dp_side *srv, const NDK_OPEN_OPTIONS *o)
{
    return hosts_open(cli, srv, "10.201.1.2", "10.201.2.2", o);
}

static bool open_hosts(dp_side *cli, dp_side *srv, ULONG user_timeout_ms)
{
    NDK_OPEN_OPTIONS o = host_options(user_timeout_ms);
    return open_hosts_with(cli, srv, &o);
}

/* Holds a link down for a while, on its own thread, so the test thread can
 * go on posting and waiting: the outage's length is the fault injected,
 * nothing waits on it to synchronise. */
typedef struct outage {
    pthread_t th;
    const char *dev;
    unsigned ms;
    bool restored; /* read after the join */
} outage;

static void *outage_main(void *arg)
{
    outage *o = arg;
    struct timespec ts = {.tv_sec = o->ms / 1000, .tv_nsec = (long)(o->ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    o->restored = router_link(o->dev, true);
    return NULL;
}

static void outage_start(outage *o, const char *dev, unsigned ms)
{
    o->dev = dev;
    o->ms = ms;
    link_set(dev, false);
    if (pthread_create(&o->th, NULL, outage_main, o) != 0)
        abort();
}

/* The stream of the cases: 6 MiB in Writes, Reads and Sends. */
#define CHUNK (256u * 1024u)
#define NCHUNK 24u

static void close_hosts(dp_conn *c, dp_side *cli, dp_side *srv)
{
    dp_conn_close(c);
    dp_side_close(cli);
    dp_side_close(srv);
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                    */
/* ------------------------------------------------------------------------ */

/* User timeout of the cases where the path comes back: far above the
 * outage, which TCP rides out with its retransmissions. */
#define LONG_USER_TIMEOUT_MS 8000u
#define OUTAGE_MS 700u
/* Where it does not: short, so the case is. */
#define USER_TIMEOUT_MS 1500u
/* A dead path is found within the user timeout plus a keepalive's idle
 * time and interval (1 s each here), plus slack for a loaded machine. */
#define DETECT_BOUND_MS (USER_TIMEOUT_MS + 2000u + 3000u)

DP_CASE(outage_shorter_than_timeouts_during_streams)
{
    dp_side cli, srv;
    REQUIRE(open_hosts(&cli, &srv, LONG_USER_TIMEOUT_MS));
    dp_conn *c = connect_hosts(&cli, &srv);
    REQUIRE(c);
    stream st;
    REQUIRE(stream_init(&st, c, CHUNK, NCHUNK, 0));
    /* Half the stream goes out, the link drops, the rest is posted into
     * the outage; TCP retransmits once the link is back. */
    stream_post(&st, 0, NCHUNK / 2);
    outage o;
    outage_start(&o, "rs", OUTAGE_MS);
    stream_post(&st, NCHUNK / 2, NCHUNK);
    uint64_t t0 = tl_now_ns();
    stream_check(&st, OUTAGE_MS + 10000u, true);
    pthread_join(o.th, NULL);
    CHECK(o.restored);
    fprintf(stderr, "    %u MiB in Writes, Reads and Sends across a %u ms outage: %u ms\n",
            NCHUNK * CHUNK / (1024u * 1024u), OUTAGE_MS, ms_since(t0));
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
    CHECK_EQ(tl_event_count(&c->disc_p), 0);
    CHECK(dp_roundtrip(c, 4096, 7));
    stream_close(&st);
    close_hosts(c, &cli, &srv);
}

DP_CASE(outage_longer_than_user_timeout_with_data_outstanding)
{
    dp_side cli, srv;
    REQUIRE(open_hosts(&cli, &srv, USER_TIMEOUT_MS));
    dp_conn *c = connect_hosts(&cli, &srv);
    REQUIRE(c);
    stream st;
    REQUIRE(stream_init(&st, c, CHUNK, NCHUNK, 0));
    link_set("rs", false);
    uint64_t t0 = tl_now_ns();
    stream_post(&st, 0, NCHUNK);
    bool a = tl_event_wait(&c->disc_a, 1, DETECT_BOUND_MS);
    unsigned ta = ms_since(t0);
    bool p = tl_event_wait(&c->disc_p, 1, DETECT_BOUND_MS);
    unsigned tp = ms_since(t0);
    fprintf(stderr, "    dead path found: client (sending) after %u ms, server (idle) after %u ms\n", ta, tp);
    CHECK(a);
    CHECK(p);
    /* The client's data went unacknowledged: the user timeout ended it,
     * not something sooner. */
    CHECK(ta >= USER_TIMEOUT_MS - 200u);
    CHECK_EQ(atomic_load(&c->reason_a), NDK_DISCONNECT_REASON_ABORTED);
    CHECK_EQ(atomic_load(&c->reason_p), NDK_DISCONNECT_REASON_ABORTED);
    stream_check(&st, DP_WAIT_MS, false);
    stream_close(&st);
    /* The path is back: a new connection between the same adapters works. */
    link_set("rs", true);
    dp_conn *c2 = connect_hosts(&cli, &srv);
    CHECK(c2 && dp_roundtrip(c2, 65536, 9));
    dp_conn_close(c2);
    close_hosts(c, &cli, &srv);
}

DP_CASE(outage_with_both_sides_idle)
{
    dp_side cli, srv;
    REQUIRE(open_hosts(&cli, &srv, USER_TIMEOUT_MS));
    dp_conn *c = connect_hosts(&cli, &srv);
    REQUIRE(c);
    link_set("rc", false);
    uint64_t t0 = tl_now_ns();
    /* The client disconnects into the dead path: its FIN is never
     * acknowledged, so the disconnect ends by a timeout, in time. */
    dp_req *d = dp_req_new("NdkDisconnect");
    d->started = true;
    d->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, d);
    /* The server stays idle: keepalive on its socket (which it inherited
     * from the listener) finds the dead path. */
    bool p = tl_event_wait(&c->disc_p, 1, DETECT_BOUND_MS);
    fprintf(stderr, "    idle server found the dead path after %u ms\n", ms_since(t0));
    CHECK(p);
    CHECK_EQ(atomic_load(&c->reason_p), NDK_DISCONNECT_REASON_ABORTED);
    NTSTATUS s = dp_finish(d, d->returned, DETECT_BOUND_MS);
    fprintf(stderr, "    NdkDisconnect on the dead path: %s after %u ms\n", ndk_status_name(s), ms_since(t0));
    CHECK(s == STATUS_IO_TIMEOUT || s == STATUS_CONNECTION_ABORTED);
    CHECK_EQ(tl_event_count(&c->disc_a), 0); /* no event after our own NdkDisconnect */
    link_set("rc", true);
    close_hosts(c, &cli, &srv);
}

DP_CASE(outage_during_connection_setup)
{
    dp_side cli, srv;
    REQUIRE(open_hosts(&cli, &srv, USER_TIMEOUT_MS));
    dp_cfg cfg = dp_cfg_default();

    /* Down before the SYN, for longer than TcpConnectTimeoutMs. */
    dp_conn *c = dp_conn_new(&cli, &srv, &cfg);
    REQUIRE(c && dp_conn_listen(c));
    link_set("rs", false);
    uint64_t t0 = tl_now_ns();
    dp_req *r = dp_conn_connect_start(c);
    REQUIRE(r);
    NTSTATUS s = dp_finish(r, r->returned, DETECT_BOUND_MS);
    fprintf(stderr, "    connect into a dead path: %s after %u ms\n", ndk_status_name(s), ms_since(t0));
    DP_CHECK_ST(s, STATUS_IO_TIMEOUT);
    CHECK_EQ(tl_event_count(&c->lev), 0);
    link_set("rs", true);
    dp_conn_close(c);

    /* Down once the MPA Request arrived: the Reply never comes, nor the
     * RTR; both legs end with a documented status in time. */
    c = dp_conn_new(&cli, &srv, &cfg);
    REQUIRE(c && dp_conn_listen(c));
    r = dp_conn_connect_start(c);
    REQUIRE(r && r->returned == STATUS_PENDING);
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    REQUIRE(c->cp);
    link_set("rs", false);
    t0 = tl_now_ns();
    dp_req *ra = dp_req_new("NdkAccept");
    NTSTATUS sa = dp_finish(ra,
                            c->cp->Dispatch->NdkAccept(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord, NULL, 0,
                                                       dp_disc_cb, &c->disc_p, dp_req_cb, ra),
                            DETECT_BOUND_MS);
    unsigned tsa = ms_since(t0);
    s = dp_finish(r, STATUS_PENDING, DETECT_BOUND_MS);
    fprintf(stderr, "    path lost after the MPA Request: NdkConnect %s after %u ms, NdkAccept %s after %u ms\n",
            ndk_status_name(s), ms_since(t0), ndk_status_name(sa), tsa);
    DP_CHECK_ST(s, STATUS_IO_TIMEOUT); /* as when MpaReplyTimeoutMs runs out; no refusal */
    CHECK(sa == STATUS_IO_TIMEOUT || sa == STATUS_CONNECTION_ABORTED);
    link_set("rs", true);
    dp_conn_close(c);

    /* And the adapters still connect. */
    c = connect_hosts(&cli, &srv);
    CHECK(c && dp_roundtrip(c, 4096, 5));
    close_hosts(c, &cli, &srv);
}

/* Down for a moment as the SYN leaves: a retransmission of the SYN (1 s,
 * then 3 s after it) connects, well inside the connect and user timeouts. */
DP_CASE(short_outage_as_the_syn_leaves)
{
    dp_side cli, srv;
    NDK_OPEN_OPTIONS o = host_options(LONG_USER_TIMEOUT_MS);
    o.TcpConnectTimeoutMs = 10000;
    REQUIRE(open_hosts_with(&cli, &srv, &o));
    dp_conn *c = dp_conn_new(&cli, &srv, NULL);
    REQUIRE(c);
    outage out;
    outage_start(&out, "rs", 300);
    bool ok = dp_conn_establish(c);
    pthread_join(out.th, NULL);
    CHECK(out.restored);
    CHECK(ok && dp_roundtrip(c, 4096, 3));
    close_hosts(c, &cli, &srv);
}

/* Last: the server's namespace is gone afterwards. */
DP_CASE(server_host_vanishes)
{
    dp_side cli, srv;
    REQUIRE(open_hosts(&cli, &srv, USER_TIMEOUT_MS));
    dp_conn *c = connect_hosts(&cli, &srv);
    REQUIRE(c);
    dp_mr m;
    REQUIRE(dp_buf_reg(&cli, &m, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    NDK_SGE sge = dp_sge(&m, 0, 4096);
    DP_CHECK_ST(dp_recv(c->qa, DP_CTX(0x55), &sge, 1), STATUS_SUCCESS);
    /* The host goes silent (its interface down, so the RSTs of its closing
     * sockets go nowhere), its adapter goes, then its namespace. */
    CHECK(sh("ip -n %s link set fs down", ns_srv));
    uint64_t t0 = tl_now_ns();
    dp_close_adapter(srv.ad);
    c->cp = NULL, c->qp = NULL, c->l = NULL;
    c->cqp = c->rcqp = NULL;
    enter(&cli); /* nothing of this process stays in the server's namespace */
    close(fd_srv);
    fd_srv = -1;
    CHECK(sh("ip netns del %s", ns_srv));
    /* The namespace is gone once its interfaces are: the router's end of
     * the pair disappears with it. */
    bool gone = false;
    while (!gone && ms_since(t0) < DP_WAIT_MS)
        gone = !router_has("rs");
    CHECK(gone);
    bool a = tl_event_wait(&c->disc_a, 1, DETECT_BOUND_MS);
    fprintf(stderr, "    idle client found its vanished peer after %u ms\n", ms_since(t0));
    CHECK(a);
    CHECK_EQ(atomic_load(&c->reason_a), NDK_DISCONNECT_REASON_ABORTED);
    NDK_RESULT_EX res;
    REQUIRE(dp_wait_ex(c->cqa, &res, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(res, STATUS_CANCELLED, NdkOperationTypeReceive, dp_qpctx_a(c), DP_CTX(0x55), -1);
    DP_CHECK_QUIET(c->cqa);
    dp_mr_close(&m);
    dp_conn_close(c);
    dp_side_close(&cli);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    if (geteuid() != 0 || system("command -v ip >/dev/null 2>&1") != 0) {
        tl_skip_all("needs root and the ip tool (iproute2) to make network namespaces");
        return tl_finish();
    }
    if (!topology_up()) {
        namespaces_del();
        tl_skip_all("cannot make the namespaces, veth pairs and routes (command above)");
        return tl_finish();
    }
    RUN(outage_shorter_than_timeouts_during_streams);
    RUN(outage_longer_than_user_timeout_with_data_outstanding);
    RUN(outage_with_both_sides_idle);
    RUN(outage_during_connection_setup);
    RUN(short_outage_as_the_syn_leaves);
    RUN(server_host_vanishes);
    namespaces_del();
    return tl_finish();
}
