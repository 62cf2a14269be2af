/*
 * ndkperf - perftest for NDK: Send, RDMA Write and RDMA Read latency and
 * bandwidth between two NDK endpoints, with perftest's options and table.
 *
 * main.c: the roles and their CPU placement.
 *
 * --loopback runs both ends in one command as two processes (fork before
 * any NDK call, so each process has its own adapter instance and its own
 * provider threads), like two hosts and like the raw TCP ping-pong it is
 * compared with. Each process pins itself (--cpu-server, --cpu-client)
 * before it opens its adapter, so the provider's progress thread inherits
 * the placement of the process it serves. The server tells the client its
 * port through a pipe; the pipe's end-of-file later tells the client that
 * the server has exited, which keeps that wait bounded without polling.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/args.h"
#include "lib/log.h"
#include "lib/pin.h"
#include "ndkperf/ndkperf.h"
#include "ndkperf/perftest.h"

/* Pins the whole process (it has one thread yet): the provider threads
 * that opening the adapter starts inherit the CPU. */
static bool pin_self(const char *role, int cpu)
{
    int err = tc_pin_process(cpu);
    if (err)
        tc_complain(role, "cannot pin to CPU %d: %s", cpu, strerror(err));
    return err == 0;
}

static const char *cpu_text(int cpu, char *buf, size_t size)
{
    if (cpu < 0)
        snprintf(buf, size, "not pinned");
    else
        snprintf(buf, size, "CPU %d", cpu);
    return buf;
}

/* write_lat reads the last byte of a message as the sign that all of it
 * has arrived; only in-order placement makes that valid. */
static bool check_in_order(const struct endpoint *e, enum test_kind t)
{
    if (t != T_WRITE_LAT || (e->a->info.AdapterFlags & NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED))
        return true;
    tc_complain(e->role,
                "adapter %s does not set NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED: write_lat's polling of the last "
                "byte would not prove that the message arrived; refusing",
                e->a->name);
    return false;
}

static void layout_for(const struct endpoint *e, const struct test_params *tp, bool server, struct layout *l)
{
    test_layout(tp, e->opt, server, l);
    if (l->inline_size > e->a->info.MaxInlineDataSize)
        l->inline_size = e->a->info.MaxInlineDataSize;
}

static void params_from_options(const struct options *o, struct test_params *tp)
{
    *tp = (struct test_params){.test = o->test,
                               .all_sizes = o->all_sizes,
                               .size = o->size,
                               .iters = o->iters,
                               .duration_ms = o->duration_ms,
                               .warmup = o->warmup,
                               .rx_depth = o->rx_depth};
}

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

/* Opens, listens, and says where (on stdout, or through notify_fd to the
 * --loopback client). */
static bool server_listen(struct endpoint *e, int notify_fd)
{
    const struct options *o = e->opt;
    bool loopback = notify_fd >= 0;
    const char *bind_text = loopback ? "127.0.0.1" : o->bind;
    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    if (bind_text && !tc_resolve(e->role, "the listen address (-B)", bind_text, AF_UNSPEC, &addr))
        return false;
    if (!bind_text)
        addr.sa.sa_family = AF_INET; /* every address */
    tc_sockaddr_set_port(&addr, o->port_given || !loopback ? o->port : 0);
    if (!ep_open(e, &addr, "the listen address (-B)") || !ep_listen(e, &addr, 1))
        return false;
    unsigned port = tc_sockaddr_port(&e->listener.bound);
    if (loopback) {
        uint8_t p[2] = {(uint8_t)(port >> 8), (uint8_t)port};
        if (write(notify_fd, p, sizeof p) == (ssize_t)sizeof p)
            return true;
        tc_complain(e->role, "cannot tell the client the port: %s", strerror(errno));
        return false;
    }
    char ip[TC_ADDR_BUF];
    tc_say(NULL, "ndkperf %s server: listening on %s port %u (adapter %s), waiting up to %u s for a client",
           test_name(o->test), tc_format_addr(&e->listener.bound, false, ip, sizeof ip), port, e->a->name,
           o->accept_timeout_ms / 1000);
    return true;
}

/* The client's request: its parameters, checked against ours; false after
 * rejecting it. */
static bool server_take_request(struct endpoint *e, struct test_params *tp, ULONG *ird, ULONG *ord)
{
    uint8_t req[PDATA_REQ_LEN];
    uint32_t len = 0;
    const char *why = NULL;
    char reason[160];
    if (!ep_request_data(e, req, sizeof req, &len, ird, ord))
        return false;
    if (len > sizeof req || !pdata_get_request(req, len, &e->peer, tp, &why))
        return ep_reject(e, why ? why : "private data too long for ndkperf");
    if (tp->test != e->opt->test) {
        snprintf(reason, sizeof reason, "the client runs %s, this server %s", test_name(tp->test),
                 test_name(e->opt->test));
        return ep_reject(e, reason);
    }
    if (!check_in_order(e, tp->test))
        return ep_reject(e, "no in-order placement for write_lat");
    return true;
}

/* Creates what the client's test needs and accepts it. */
static bool server_accept(struct endpoint *e, const struct test_params *tp, ULONG ird, ULONG ord)
{
    struct layout l;
    layout_for(e, tp, true, &l);
    if (e->peer.size < l.region) {
        char reason[160];
        snprintf(reason, sizeof reason, "the client's buffer (%" PRIu32 " bytes) is smaller than its messages",
                 e->peer.size);
        return ep_reject(e, reason);
    }
    if (!ep_create(e, &l) || !test_prepost(e, tp, true))
        return false;
    uint8_t rep[PDATA_REP_LEN];
    pdata_put_reply(rep, &e->local);
    ULONG my_ird, my_ord;
    test_read_limits(tp, e->opt, &my_ird, &my_ord);
    /* Our requests capped by the client's. */
    return ep_accept(e, rep, sizeof rep, my_ird < ird ? my_ird : ird, my_ord < ord ? my_ord : ord);
}

/*
 * The server: one client, then exit (as perftest). notify_fd >= 0
 * (--loopback): the bound port goes there, and the header is left to the
 * client, which prints the table.
 */
static int server_main(const struct options *o, int notify_fd)
{
    if (!pin_self("server", o->cpu_server))
        return TC_EXIT_FAILED;
    struct endpoint e;
    ep_init(&e, "server", o);
    struct test_params tp;
    ULONG ird = 0, ord = 0;
    bool ok = server_listen(&e, notify_fd) && ep_wait_request(&e, &e, o->accept_timeout_ms) &&
              server_take_request(&e, &tp, &ird, &ord) && server_accept(&e, &tp, ird, ord);
    if (ok && notify_fd < 0) {
        char place[64], cpu[32];
        snprintf(place, sizeof place, "server process, %s", cpu_text(o->cpu_server, cpu, sizeof cpu));
        report_header(&e, &tp, place);
    }
    ok = ok && run_server_tests(&e, &tp) && ep_disconnect(&e, true);
    if (ok && notify_fd < 0)
        tc_say(NULL, "ndkperf %s server: done", test_name(tp.test));
    ep_close(&e);
    return ok ? TC_EXIT_OK : TC_EXIT_FAILED;
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

/* Connects with the request; the server's accept must fit. */
static bool client_connect(struct endpoint *e, const struct test_params *tp, const struct layout *l,
                           const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst)
{
    uint8_t req[PDATA_REQ_LEN], rep[PDATA_REP_LEN + 64];
    pdata_put_request(req, &e->local, tp);
    ULONG ird, ord;
    test_read_limits(tp, e->opt, &ird, &ord);
    uint32_t rep_len = 0;
    if (!ep_connect(e, src, dst, req, sizeof req, ird, ord, rep, sizeof rep, &rep_len))
        return false;
    const char *why = NULL;
    if (rep_len > sizeof rep || !pdata_get_reply(rep, rep_len, &e->peer, &why)) {
        tc_complain(e->role, "the server's accept: %s", why ? why : "private data too long for ndkperf");
        return false;
    }
    if (e->peer.size < l->region) {
        tc_complain(e->role, "the server's buffer (%" PRIu32 " bytes) is smaller than the messages", e->peer.size);
        return false;
    }
    test_connected(e, tp);
    return true;
}

static int client_main(const struct options *o, const char *address, unsigned port, const char *placement)
{
    if (!pin_self("client", o->cpu_client))
        return TC_EXIT_FAILED;
    struct endpoint e;
    ep_init(&e, "client", o);
    int rc = TC_EXIT_FAILED;
    NDK_SOCKADDR dst, src;
    struct test_params tp;
    params_from_options(o, &tp);
    struct layout l;
    if (!tc_resolve("client", "the server's address (-c)", address, AF_UNSPEC, &dst))
        goto out;
    tc_sockaddr_set_port(&dst, port);
    /* Default adapter: the one the route to the server leaves from. */
    bool routed = tc_route_source(&dst, &src);
    if (!ep_open(&e, routed ? &src : NULL, "where the route to the server leaves from") ||
        !tc_adapter_source(e.a, &dst, routed ? &src : NULL, &src))
        goto out;
    if (!check_in_order(&e, tp.test)) {
        rc = TC_EXIT_UNSUPPORTED;
        goto out;
    }
    layout_for(&e, &tp, false, &l);
    if (ep_create(&e, &l) && test_prepost(&e, &tp, false) && client_connect(&e, &tp, &l, &src, &dst)) {
        report_header(&e, &tp, placement);
        if (run_client_tests(&e, &tp) && ep_disconnect(&e, false))
            rc = TC_EXIT_OK;
    }
out:
    ep_close(&e);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --loopback                                                               */
/* ------------------------------------------------------------------------ */

/* Waits at most ms for fd to have data or end-of-file. */
static bool wait_readable(int fd, unsigned ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc;
    do
        rc = poll(&p, 1, (int)ms);
    while (rc < 0 && errno == EINTR);
    return rc > 0;
}

/* The client's part: the server's port from the pipe, then the run. */
static int loopback_client(const struct options *o, int fd, pid_t server)
{
    uint8_t port[2];
    if (!wait_readable(fd, o->timeout_ms + 2000) || read(fd, port, sizeof port) != (ssize_t)sizeof port) {
        tc_complain(NULL, "the server process did not start listening");
        return TC_EXIT_FAILED;
    }
    char place[160], a[32], b[32];
    snprintf(place, sizeof place,
             "--loopback: two processes over 127.0.0.1, server pid %ld on %s, client pid %ld on %s", (long)server,
             cpu_text(o->cpu_server, a, sizeof a), (long)getpid(), cpu_text(o->cpu_client, b, sizeof b));
    return client_main(o, "127.0.0.1", (unsigned)port[0] << 8 | port[1], place);
}

/* The pipe reaches end-of-file when the server process has exited; its
 * exit status joins the client's. */
static int loopback_reap(const struct options *o, int fd, pid_t server, int rc)
{
    /* A failed client leaves the server waiting: stop it (it is our child). */
    if (rc != TC_EXIT_OK)
        kill(server, SIGTERM);
    char c;
    if (!wait_readable(fd, 2 * (o->timeout_ms + 2000)) || read(fd, &c, 1) != 0) {
        tc_complain(NULL, "the server process (pid %ld) did not exit; killing it", (long)server);
        kill(server, SIGKILL);
    }
    int status = 0;
    while (waitpid(server, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == TC_EXIT_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        tc_complain(NULL, "the server process failed (%s %d)", WIFEXITED(status) ? "exit status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        rc = TC_EXIT_FAILED;
    }
    return rc;
}

static int run_loopback(const struct options *o)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        tc_complain(NULL, "pipe: %s", strerror(errno));
        return TC_EXIT_FAILED;
    }
    tc_log_show_roles(true);
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        tc_complain(NULL, "fork: %s", strerror(errno));
        return TC_EXIT_FAILED;
    }
    if (pid == 0) {
        close(fds[0]);
        int rc = server_main(o, fds[1]);
        fflush(NULL);
        _exit(rc);
    }
    close(fds[1]);
    int rc = loopback_reap(o, fds[0], pid, loopback_client(o, fds[0], pid));
    close(fds[0]);
    return rc;
}

int main(int argc, char **argv)
{
    tc_log_init("ndkperf");
    tc_take_verifier_option(&argc, argv, "--verify");
    /* The perftest-compatible mode has perftest's command line, not ours. */
    if (argc > 1 && strcmp(argv[1], "--perftest") == 0)
        return perftest_main(argc - 1, argv + 1);
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    switch (o.mode) {
    case MODE_SERVER:
        return server_main(&o, -1);
    case MODE_CLIENT: {
        char place[64], cpu[32];
        snprintf(place, sizeof place, "client process, %s", cpu_text(o.cpu_client, cpu, sizeof cpu));
        return client_main(&o, o.address, o.port, place);
    }
    default:
        return run_loopback(&o);
    }
}
