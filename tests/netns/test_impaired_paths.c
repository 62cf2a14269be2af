/*
 * Impaired paths between two hosts: the test builds three network
 * namespaces, a client host (10.202.0.1 on fc), a router and a server host
 * (10.202.0.2 on fs), the hosts' veths paired with the router's rc and rs,
 * and runs tests/netns/impair.c in the router: it bridges rc and rs in
 * userspace, delaying (with jitter), losing, reordering and duplicating
 * frames with a seeded PRNG. The kernel's netem qdisc would do the same,
 * but not every kernel has it: CONFIG_NET_SCH_NETEM is unset on the kernel
 * this was written on (`tc qdisc add ... netem` says "Specified qdisc kind
 * is unknown"), and nftables can drop at random but not delay or reorder.
 *
 * Each impairment, and all of them together:
 *   - connection set-up through it (NdkConnect, NdkAccept,
 *     NdkCompleteConnect, a Send round trip, teardown), several times, each
 *     within a bound;
 *   - a stream of RDMA Writes, Reads and Sends (netns_stream.h): every
 *     request and every receive completes exactly once, successfully, the
 *     data is exact, within a bound, and no disconnect event comes;
 *   - the impairer's counters show that it did impair (frames lost,
 *     duplicated, reordered), and that it dropped nothing for lack of room.
 * Then the impaired path stops for less than the timeouts in the middle of
 * a stream (SIGUSR2): the stream completes as above, exactly. And it dies
 * (the impairer drops everything, SIGUSR1):
 * during a stream both sides get NDK_DISCONNECT_REASON_ABORTED within
 * TcpUserTimeoutMs plus keepalive and every request completes exactly
 * once; during set-up NdkConnect ends with STATUS_IO_TIMEOUT in time.
 * docs/behaviour.md "Dead peers"; test_path_faults.c pulls the cable.
 *
 * Environment: NDK_IMPAIR_SEED (default 1) seeds the impairer,
 * NDK_IMPAIR_ROUNDS (default 1) streams per case (tests/soak/impaired_paths.sh
 * runs many seeds and rounds). IPv4 only. Needs root, the ip tool and the
 * impairer (built beside this test), else it reports itself skipped (77).
 */
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include "netns_stream.h"

#ifndef NDK_IMPAIR_PATH
#error "NDK_IMPAIR_PATH: the impairer's path (tests/CMakeLists.txt)"
#endif

extern char **environ;

static unsigned long g_seed = 1;
static unsigned g_rounds = 1;

#define CLI_MAC "02:00:0a:ca:00:01"
#define SRV_MAC "02:00:0a:ca:00:02"

/* The three hosts, one subnet: the router forwards frames, not packets.
 * Offloads off on every end, so the impairer sees MTU-sized frames with
 * their checksums. */
static bool topology_up(void)
{
    const char *c = ns_cli, *r = ns_rtr, *s = ns_srv;
    bool ok = namespaces_add("ndki") &&
              sh("ip -n %s link add rc type veth peer name fc address " CLI_MAC " netns %s", r, c) &&
              sh("ip -n %s link add rs type veth peer name fs address " SRV_MAC " netns %s", r, s) &&
              sh("ip -n %s addr add 10.202.0.1/24 dev fc && ip -n %s addr add 10.202.0.2/24 dev fs", c, s) &&
              sh("for n in %s %s %s; do ip -n $n link set lo up; done", c, r, s) &&
              sh("ip netns exec %s %s --offloads-off fc && ip netns exec %s %s --offloads-off fs && "
                 "ip netns exec %s %s --offloads-off rc rs",
                 c, NDK_IMPAIR_PATH, s, NDK_IMPAIR_PATH, r, NDK_IMPAIR_PATH) &&
              sh("ip -n %s link set fc up && ip -n %s link set rc up && ip -n %s link set rs up && "
                 "ip -n %s link set fs up",
                 c, r, r, s) &&
              /* Fixed neighbours: address resolution is not what is tested,
               * and a lost ARP frame would only add a second's wait. */
              sh("ip -n %s neigh add 10.202.0.2 lladdr " SRV_MAC " dev fc nud permanent", c) &&
              sh("ip -n %s neigh add 10.202.0.1 lladdr " CLI_MAC " dev fs nud permanent", s);
    return ok && namespaces_open();
}

/* ------------------------------------------------------------------------ */
/* The impairer, a child process in the router's namespace                  */
/* ------------------------------------------------------------------------ */

typedef struct impair_dir {
    unsigned long in, fwd, lost, dup, reordered, out_of_order, blackholed, overflow, send_err;
} impair_dir;

typedef struct impairer {
    pid_t pid;
    int in;           /* its stdin: it ends when this closes (--until-eof) */
    int out;          /* its stdout */
    impair_dir d[2];  /* client->server, server->client (after impair_stop) */
} impairer;

/* Reads one line from fd within ms; false on a timeout or end of file. */
static bool read_line(int fd, char *buf, size_t cap, unsigned ms)
{
    size_t n = 0;
    uint64_t t0 = tl_now_ns();
    while (n + 1 < cap) {
        unsigned spent = ms_since(t0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (spent >= ms || poll(&p, 1, (int)(ms - spent)) != 1)
            return false;
        char ch;
        if (read(fd, &ch, 1) != 1)
            return false;
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = 0;
    return true;
}

/* Reads and drops what fd still carries until end of file, within ms;
 * false on a timeout. */
static bool read_eof(int fd, unsigned ms)
{
    uint64_t t0 = tl_now_ns();
    for (;;) {
        unsigned spent = ms_since(t0);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (spent >= ms || poll(&p, 1, (int)(ms - spent)) != 1)
            return false;
        char buf[256];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            return true;
        if (n < 0)
            return false;
    }
}

static bool impair_start(impairer *im, const char *args)
{
    memset(im, 0, sizeof *im);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0)
        return false;
    if (pipe2(out, O_CLOEXEC) != 0) {
        close(in[0]);
        close(in[1]);
        return false;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "exec ip netns exec %s %s --a rc --b rs --until-eof --seed %lu %s", ns_rtr,
             NDK_IMPAIR_PATH, g_seed, args);
    fprintf(stderr, "    impair %s (seed %lu)\n", args, g_seed);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    char *argv[] = {"sh", "-c", cmd, NULL};
    int rc = posix_spawnp(&im->pid, "sh", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    im->in = in[1];
    im->out = out[0];
    char line[64];
    if (rc != 0 || !read_line(im->out, line, sizeof line, DP_WAIT_MS) || strcmp(line, "ready") != 0) {
        fprintf(stderr, "    the impairer did not start\n");
        if (rc == 0) {
            kill(im->pid, SIGKILL);
            waitpid(im->pid, NULL, 0);
        }
        close(im->in);
        close(im->out);
        return false;
    }
    return true;
}

/* Every frame dropped from now on (again: forwarded as before). */
static void impair_blackhole(impairer *im)
{
    CHECK(kill(im->pid, SIGUSR1) == 0);
}

/* Every frame dropped for the impairer's --outage ms from now on. */
static void impair_outage(impairer *im)
{
    CHECK(kill(im->pid, SIGUSR2) == 0);
}

/* Ends the impairer and reads its counters; false if it did not report. */
static bool impair_stop(impairer *im)
{
    close(im->in);
    bool ok = true;
    for (int d = 0; d < 2 && ok; d++) {
        char line[256];
        impair_dir *x = &im->d[d];
        ok = read_line(im->out, line, sizeof line, DP_WAIT_MS) &&
             sscanf(line,
                    "%*s in %lu fwd %lu lost %lu dup %lu reordered %lu out_of_order %lu blackholed %lu overflow %lu "
                    "send_err %lu",
                    &x->in, &x->fwd, &x->lost, &x->dup, &x->reordered, &x->out_of_order, &x->blackholed,
                    &x->overflow, &x->send_err) == 9;
        if (ok)
            fprintf(stderr, "    %s\n", line);
    }
    /* Its stdout reaching end of file is its exit; one that has not exited
     * within the bound is killed, so that waitpid below cannot block. */
    bool exited = ok && read_eof(im->out, DP_WAIT_MS);
    if (!exited)
        kill(im->pid, SIGKILL);
    close(im->out);
    int status = 0;
    CHECK(waitpid(im->pid, &status, 0) == im->pid);
    CHECK(exited);
    CHECK(ok && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return ok;
}

/* A counter of both directions together. */
#define BOTH(im, f) ((im)->d[0].f + (im)->d[1].f)

/* ------------------------------------------------------------------------ */
/* Hosts and connections                                                    */
/* ------------------------------------------------------------------------ */

/* Set-up timeouts far above what the impairments cost (a lost SYN waits
 * 1 s, then 2 s more); the user timeout as given. */
static bool open_hosts(dp_side *cli, dp_side *srv, ULONG user_timeout_ms)
{
    NDK_OPEN_OPTIONS o = host_options(user_timeout_ms);
    o.TcpConnectTimeoutMs = 10000;
    o.MpaReplyTimeoutMs = o.MpaRequestTimeoutMs = o.RtrTimeoutMs = 10000;
    return hosts_open(cli, srv, "10.202.0.1", "10.202.0.2", &o);
}

static void close_hosts(dp_side *cli, dp_side *srv)
{
    dp_side_close(cli);
    dp_side_close(srv);
}

/* ------------------------------------------------------------------------ */
/* One impairment: set-up loops, then streams                               */
/* ------------------------------------------------------------------------ */

#define SETUPS 3u
#define CHUNK (64u * 1024u)
#define NCHUNK 24u /* 1.5 MiB each way per stream */
/* Each connection set-up and each stream, with the impairments below
 * (at most 10 +- 5 ms of delay, 3% loss), plus slack for a loaded machine
 * and sanitizers. */
#define SETUP_BOUND_MS 8000u
#define STREAM_BOUND_MS 20000u
#define USER_TIMEOUT_MS 20000u

/* What the impairer must have done: frames lost, duplicated, sent out of
 * their order. */
enum { SAW_LOSS = 1, SAW_DUP = 2, SAW_REORDER = 4 };

/* min_setup_ms: the delay's share of a set-up (a SYN and an MPA Request
 * each wait for their answer: four one-way delays at least). */
static void run_impairment(const char *args, unsigned saw, unsigned min_setup_ms)
{
    impairer im;
    REQUIRE(impair_start(&im, args));
    dp_side cli, srv;
    if (!open_hosts(&cli, &srv, USER_TIMEOUT_MS)) {
        CHECK(!"the hosts' adapters open");
        impair_stop(&im);
        return;
    }
    unsigned worst_setup = 0, best_setup = ~0u, worst_stream = 0;
    for (unsigned i = 0; i < SETUPS; i++) {
        uint64_t t0 = tl_now_ns();
        dp_conn *c = connect_hosts(&cli, &srv);
        CHECK(c && dp_roundtrip(c, 4096, 40 + i));
        dp_conn_close(c);
        unsigned ms = ms_since(t0);
        CHECK(ms <= SETUP_BOUND_MS);
        worst_setup = ms > worst_setup ? ms : worst_setup;
        best_setup = ms < best_setup ? ms : best_setup;
    }
    CHECK(best_setup >= min_setup_ms);
    dp_conn *c = connect_hosts(&cli, &srv);
    CHECK(c);
    for (unsigned r = 0; c && r < g_rounds; r++) {
        alarm(DP_CASE_TIMEOUT_S); /* the watchdog is per stream here */
        stream st;
        REQUIRE(stream_init(&st, c, CHUNK, NCHUNK, r * 1000u));
        uint64_t t0 = tl_now_ns();
        stream_post(&st, 0, st.n);
        bool ok = stream_check(&st, STREAM_BOUND_MS, true);
        unsigned ms = ms_since(t0);
        CHECK(ms <= STREAM_BOUND_MS);
        worst_stream = ms > worst_stream ? ms : worst_stream;
        stream_close(&st);
        if (!ok)
            break;
    }
    if (c) {
        CHECK_EQ(tl_event_count(&c->disc_a), 0);
        CHECK_EQ(tl_event_count(&c->disc_p), 0);
        CHECK(dp_roundtrip(c, 65536, 7));
    }
    fprintf(stderr, "    %u set-ups (%u to %u ms), %u stream(s) of %u KiB each way (slowest %u ms)\n", SETUPS,
            best_setup, worst_setup, g_rounds, NCHUNK * CHUNK / 1024u, worst_stream);
    dp_conn_close(c);
    close_hosts(&cli, &srv);
    if (!impair_stop(&im))
        return;
    CHECK(BOTH(&im, fwd) > 0);
    CHECK_EQ(BOTH(&im, overflow), 0);
    CHECK_EQ(BOTH(&im, send_err), 0);
    CHECK_EQ(BOTH(&im, blackholed), 0);
    if (saw & SAW_LOSS)
        CHECK(BOTH(&im, lost) > 0);
    if (saw & SAW_DUP)
        CHECK(BOTH(&im, dup) > 0);
    if (saw & SAW_REORDER)
        CHECK(BOTH(&im, out_of_order) > 0);
}

DP_CASE(delay_and_jitter)
{
    /* 10 +- 5 ms one way: frames sent less than 10 ms apart may overtake
     * each other. */
    run_impairment("--delay 10 --jitter 5", SAW_REORDER, 4 * 5);
}

DP_CASE(loss)
{
    run_impairment("--loss 3", SAW_LOSS, 0);
}

DP_CASE(reordering)
{
    run_impairment("--delay 1 --reorder 10 --reorder-by 4", SAW_REORDER, 4 * 1);
}

DP_CASE(duplication)
{
    run_impairment("--dup 10", SAW_DUP, 0);
}

#define ALL_TOGETHER "--delay 5 --jitter 3 --loss 2 --dup 3 --reorder 5 --reorder-by 3"

DP_CASE(all_together)
{
    run_impairment(ALL_TOGETHER, SAW_LOSS | SAW_DUP | SAW_REORDER, 4 * 2);
}

/* ------------------------------------------------------------------------ */
/* The impaired path stops for a while, or dies                             */
/* ------------------------------------------------------------------------ */

#define OUTAGE_MS 700u

/* Down for less than the timeouts in the middle of a stream: TCP's
 * retransmissions carry it through, as test_path_faults.c's short outage,
 * but over a path that is also impaired before and after. */
DP_CASE(impaired_path_pauses)
{
    impairer im;
    char args[160];
    snprintf(args, sizeof args, "%s --outage %u", ALL_TOGETHER, OUTAGE_MS);
    REQUIRE(impair_start(&im, args));
    dp_side cli, srv;
    if (!open_hosts(&cli, &srv, USER_TIMEOUT_MS)) {
        CHECK(!"the hosts' adapters open");
        impair_stop(&im);
        return;
    }
    dp_conn *c = connect_hosts(&cli, &srv);
    stream st;
    if (c && stream_init(&st, c, CHUNK, NCHUNK, 0)) {
        stream_post(&st, 0, st.n / 2);
        impair_outage(&im);
        uint64_t t0 = tl_now_ns();
        stream_post(&st, st.n / 2, st.n);
        stream_check(&st, OUTAGE_MS + STREAM_BOUND_MS, true);
        fprintf(stderr, "    stream across a %u ms outage: %u ms\n", OUTAGE_MS, ms_since(t0));
        stream_close(&st);
        CHECK_EQ(tl_event_count(&c->disc_a), 0);
        CHECK_EQ(tl_event_count(&c->disc_p), 0);
        CHECK(dp_roundtrip(c, 4096, 3));
    } else {
        CHECK(!"a connection with a stream's memory");
    }
    dp_conn_close(c);
    close_hosts(&cli, &srv);
    if (impair_stop(&im))
        CHECK(BOTH(&im, blackholed) > 0);
}

#define DEAD_USER_TIMEOUT_MS 1500u
/* The user timeout plus a keepalive's idle time and interval (1 s each),
 * plus slack for a loaded machine. */
#define DETECT_BOUND_MS (DEAD_USER_TIMEOUT_MS + 2000u + 3000u)

DP_CASE(impaired_path_dies)
{
    impairer im;
    REQUIRE(impair_start(&im, ALL_TOGETHER));
    dp_side cli, srv;
    if (!open_hosts(&cli, &srv, DEAD_USER_TIMEOUT_MS)) {
        CHECK(!"the hosts' adapters open");
        impair_stop(&im);
        return;
    }

    /* During a stream: half of it goes out over the impaired path, then
     * the path dies and the rest is posted into it. */
    dp_conn *c = connect_hosts(&cli, &srv);
    REQUIRE(c);
    stream st;
    REQUIRE(stream_init(&st, c, CHUNK, NCHUNK, 0));
    stream_post(&st, 0, st.n / 2);
    impair_blackhole(&im);
    uint64_t t0 = tl_now_ns();
    stream_post(&st, st.n / 2, st.n);
    bool a = tl_event_wait(&c->disc_a, 1, DETECT_BOUND_MS);
    bool p = tl_event_wait(&c->disc_p, 1, DETECT_BOUND_MS);
    fprintf(stderr, "    dead path found by both sides after %u ms\n", ms_since(t0));
    CHECK(a && p);
    CHECK_EQ(atomic_load(&c->reason_a), NDK_DISCONNECT_REASON_ABORTED);
    CHECK_EQ(atomic_load(&c->reason_p), NDK_DISCONNECT_REASON_ABORTED);
    stream_check(&st, DP_WAIT_MS, false);
    stream_close(&st);
    dp_conn_close(c);

    /* During set-up: the SYN goes into the dead path. */
    dp_cfg cfg = dp_cfg_default();
    c = dp_conn_new(&cli, &srv, &cfg);
    REQUIRE(c && dp_conn_listen(c));
    c->ca = dp_connector_new(c->a);
    REQUIRE(c->ca);
    NDK_SOCKADDR src;
    ULONG srclen = dp_side_addr(c->a, &src, 0);
    dp_req *r = dp_req_new("NdkConnect");
    r->started = true;
    t0 = tl_now_ns();
    r->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa, c->laddrlen, c->cfg.ird,
                                              c->cfg.ord, NULL, 0, dp_req_cb, r);
    NTSTATUS s = dp_finish(r, r->returned, DETECT_BOUND_MS);
    fprintf(stderr, "    connect into the dead path: %s after %u ms\n", ndk_status_name(s), ms_since(t0));
    DP_CHECK_ST(s, STATUS_IO_TIMEOUT);
    CHECK_EQ(tl_event_count(&c->lev), 0);
    dp_conn_close(c);

    /* The path comes back, impaired as before: the adapters connect. */
    impair_blackhole(&im);
    c = connect_hosts(&cli, &srv);
    CHECK(c && dp_roundtrip(c, 4096, 5));
    dp_conn_close(c);
    close_hosts(&cli, &srv);
    if (impair_stop(&im))
        CHECK(BOTH(&im, blackholed) > 0);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    const char *e = getenv("NDK_IMPAIR_SEED");
    if (e)
        g_seed = strtoul(e, NULL, 0);
    e = getenv("NDK_IMPAIR_ROUNDS");
    if (e && atoi(e) > 0)
        g_rounds = (unsigned)atoi(e);
    if (geteuid() != 0 || system("command -v ip >/dev/null 2>&1") != 0) {
        tl_skip_all("needs root and the ip tool (iproute2) to make network namespaces");
        return tl_finish();
    }
    if (access(NDK_IMPAIR_PATH, X_OK) != 0) {
        tl_skip_all("no impairer at " NDK_IMPAIR_PATH " (built with the tests)");
        return tl_finish();
    }
    if (!topology_up()) {
        namespaces_del();
        tl_skip_all("cannot make the namespaces, veth pairs and offload settings (command above)");
        return tl_finish();
    }
    signal(SIGPIPE, SIG_IGN);
    RUN(delay_and_jitter);
    RUN(loss);
    RUN(reordering);
    RUN(duplication);
    RUN(all_together);
    RUN(impaired_path_pauses);
    RUN(impaired_path_dies);
    namespaces_del();
    return tl_finish();
}
