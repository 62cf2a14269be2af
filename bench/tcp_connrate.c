/*
 * tcp_connrate.c - the raw TCP anchor for connrate: the same shape of work
 * with nothing but non-blocking sockets and epoll, so libndk's connection
 * rate can be read against what the kernel alone does on this machine, in
 * the same run.
 *
 * One connection: the client connect()s (kernel-chosen port), waits for
 * EPOLLOUT, sends 1 byte, waits for the 1-byte echo and close()s; the server
 * accept4()s, echoes what it reads and close()s on EOF. TCP_NODELAY is set on
 * both ends, as libndk sets it on its sockets, and the client binds a random
 * local port before connect() as libndk does (see bind_random_port;
 * --kernel-port for a plain connect()).
 *
 * Layouts, as connrate: by default a server thread and a client thread in
 * one process (each with its own epoll); --server / --client run them as two
 * processes (pin them with taskset). Modes: -m serial (one connection at a
 * time) and -m inflight -q 64 (64 in flight, a new one started as soon as one
 * finishes). A connection counts when the client has its echo and has closed
 * its socket; the server closes on EOF concurrently.
 *
 * --mpa-shape gives the anchor libndk's exchange instead of the echo: the
 * client sends a 36-octet request, the server answers 24 octets, the client
 * sends 20 more and shuts its side down, the server closes on EOF, and the
 * client closes once it reads the server's EOF. These are the sizes of an
 * MPA Request with RFC 6581's IRD/ORD and connrate's 12 octets of private
 * data, of the Reply, and of a zero-length RDMA Write RTR (src/wire/mpa.h),
 * and the close is NetworkDirect's (the client's Disconnect completes on the
 * server's FIN). It measures what the kernel alone costs for the segments
 * and system calls that protocol needs (bench/README.md, "What bounds the
 * connection rate").
 *
 * Every wait is bounded: a connection older than --timeout ms ends the run
 * with exit status 1, and an exhausted local port range (EADDRNOTAVAIL, which
 * TIME_WAIT leftovers cause) with exit status 3.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "connrate_opts.h"

#define EXIT_FAILED 1
#define EXIT_PORTS 3
#define BATCH 64

/* --mpa-shape: MPA Request (20-octet header, 4 of IRD/ORD, connrate's 12 of
 * private data), Reply (header and IRD/ORD), zero-length RDMA Write RTR. */
#define MPA_REQ_LEN 36
#define MPA_REP_LEN 24
#define MPA_RTR_LEN 20

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct {
    struct connrate_opts opt;
    bool kernel_port; /* plain connect(): the kernel picks the local port */
    bool mpa_shape;   /* libndk's exchange instead of the echo (see above) */
    struct sockaddr_in dst;

    /* server */
    int lfd;
    int stop_efd; /* one process: the client tells the server thread to stop */
    _Atomic long srv_accepted, srv_closed, srv_resets;
    uint32_t *srv_got; /* --mpa-shape: octets read so far, by descriptor */
    size_t srv_cap;

    /* client results */
    uint32_t *lat_rt;  /* connect() called -> echo received, ns */
    uint32_t *lat_est; /* connect() called -> writable (TCP established), ns */
    long cap, nrec;
} g;

static void die(int code, const char *what)
{
    fprintf(stderr, "tcp_connrate: FAILED: %s\n", what);
    if (code == EXIT_PORTS)
        fprintf(stderr, "tcp_connrate: PORT EXHAUSTION: local ports are taken (TIME_WAIT, see "
                        "`ss -s`); run for a shorter time or wait 60 s\n");
    fflush(stderr);
    _exit(code);
}

static void die_errno(const char *what, int err)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s: %s", what, strerror(err));
    die(err == EADDRNOTAVAIL ? EXIT_PORTS : EXIT_FAILED, buf);
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

static void server_listen(void)
{
    g.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g.lfd < 0)
        die_errno("socket", errno);
    int one = 1;
    setsockopt(g.lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g.opt.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(g.lfd, (struct sockaddr *)&a, sizeof a) < 0)
        die_errno("bind", errno);
    /* As deep as libndk's listener (1024), capped by somaxconn anyway. */
    if (listen(g.lfd, 1024) < 0)
        die_errno("listen", errno);
    socklen_t len = sizeof a;
    getsockname(g.lfd, (struct sockaddr *)&a, &len);
    g.opt.port = ntohs(a.sin_port);
}

/* --mpa-shape: the Reply once the whole Request is in; the RTR after it is
 * only read. */
static void server_mpa_input(int fd, uint32_t n)
{
    if ((size_t)fd >= g.srv_cap) {
        size_t cap = g.srv_cap ? g.srv_cap : 1024;
        while (cap <= (size_t)fd)
            cap *= 2;
        uint32_t *got = realloc(g.srv_got, cap * sizeof *got);
        if (!got)
            die(EXIT_FAILED, "out of memory");
        memset(got + g.srv_cap, 0, (cap - g.srv_cap) * sizeof *got);
        g.srv_got = got;
        g.srv_cap = cap;
    }
    uint32_t before = g.srv_got[fd];
    g.srv_got[fd] += n;
    if (before < MPA_REQ_LEN && g.srv_got[fd] >= MPA_REQ_LEN) {
        static const char reply[MPA_REP_LEN];
        if (send(fd, reply, sizeof reply, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof reply)
            die_errno("reply send", errno);
    }
}

/* The server's event loop; returns when stopped (eventfd, signal or its
 * lifetime). Connections are identified by their fd in the epoll data. */
static void *server_main(void *arg)
{
    (void)arg;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die_errno("epoll_create1", errno);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = g.lfd};
    epoll_ctl(ep, EPOLL_CTL_ADD, g.lfd, &ev);
    if (g.stop_efd >= 0) {
        ev.data.fd = g.stop_efd;
        epoll_ctl(ep, EPOLL_CTL_ADD, g.stop_efd, &ev);
    }
    uint64_t end = now_ns() + (uint64_t)g.opt.lifetime_s * 1000000000u;
    struct epoll_event evs[BATCH];
    for (;;) {
        /* The timeout only serves the signal / lifetime checks. */
        int n = epoll_wait(ep, evs, BATCH, 50);
        if (n < 0 && errno != EINTR)
            die_errno("epoll_wait (server)", errno);
        if (g_signalled || now_ns() > end)
            break;
        bool stop = false;
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == g.stop_efd) {
                stop = true;
                continue;
            }
            if (fd == g.lfd) {
                for (;;) {
                    int c = accept4(g.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                    if (c < 0) {
                        if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
                            break;
                        die_errno("accept4", errno);
                    }
                    set_nodelay(c);
                    struct epoll_event cev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = c};
                    if (epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0)
                        die_errno("epoll_ctl (server)", errno);
                    atomic_fetch_add_explicit(&g.srv_accepted, 1, memory_order_relaxed);
                }
                continue;
            }
            char buf[64];
            ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
            if (r > 0) {
                if (g.mpa_shape)
                    server_mpa_input(fd, (uint32_t)r);
                else if (send(fd, buf, (size_t)r, MSG_NOSIGNAL | MSG_DONTWAIT) != r)
                    die_errno("echo send", errno);
                continue;
            }
            if (r < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (r < 0)
                atomic_fetch_add_explicit(&g.srv_resets, 1, memory_order_relaxed);
            /* EOF (or an error): close, which also drops it from the epoll set. */
            if (g.mpa_shape && (size_t)fd < g.srv_cap)
                g.srv_got[fd] = 0;
            close(fd);
            atomic_fetch_add_explicit(&g.srv_closed, 1, memory_order_relaxed);
        }
        if (stop)
            break;
    }
    close(ep);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

enum cstate { C_IDLE, C_CONNECTING, C_WAIT_ECHO, C_WAIT_EOF };

struct cslot {
    int fd;
    enum cstate state;
    uint32_t got; /* --mpa-shape: octets of the Reply read */
    uint64_t t0, t_est, t_rt;
};

/* libndk binds every active connector to a port it picks at random in
 * 49152-65535 (with SO_REUSEADDR) before connect(): NDKPI reserves the local
 * endpoint. The anchor does the same by default, because the alternative,
 * the kernel's ephemeral-port search in connect(), costs more and more with
 * every TIME_WAIT socket that connection churn leaves behind (it walks the
 * range checking each 4-tuple), which would handicap the anchor only. */
#define RANDOM_PORT_FIRST 49152
#define RANDOM_PORT_SPAN 16384

static uint32_t rng_state = 0x9E3779B9u;

static uint32_t rng_next(void)
{
    /* xorshift32: quality is irrelevant, only spread across the range. */
    uint32_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return rng_state = x;
}

static void bind_random_port(int fd)
{
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < RANDOM_PORT_SPAN; i++) {
        a.sin_port = htons((uint16_t)(RANDOM_PORT_FIRST + rng_next() % RANDOM_PORT_SPAN));
        if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0)
            return;
        if (errno != EADDRINUSE)
            die_errno("bind", errno);
    }
    die(EXIT_PORTS, "no free local port in 49152-65535");
}

static struct cslot *slots;
static int cep;
static long port_retries; /* random port refused by connect(), tried another */
static long started, completed, inflight;
static bool stopping;
static uint64_t last_end;

static void client_start(struct cslot *s)
{
    if (stopping || (g.opt.limit_n && started >= g.opt.limit_n)) {
        s->state = C_IDLE;
        inflight--;
        return;
    }
    started++;
    s->t0 = now_ns();
    int err = 0;
    for (int attempt = 0;; attempt++) {
        s->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (s->fd < 0)
            die_errno("socket", errno);
        set_nodelay(s->fd);
        if (!g.kernel_port)
            bind_random_port(s->fd);
        err = connect(s->fd, (struct sockaddr *)&g.dst, sizeof g.dst) < 0 ? errno : 0;
        if (err == 0 || err == EINPROGRESS)
            break;
        /* A bound port whose last connection to the server is still half
         * closed (we closed, the server has not yet: FIN_WAIT2) cannot be
         * reused; TIME_WAIT proper can. Another random port will do. */
        if (err != EADDRNOTAVAIL || g.kernel_port || attempt >= 64)
            break;
        close(s->fd);
        port_retries++;
    }
    if (err != 0 && err != EINPROGRESS) {
        struct sockaddr_in la;
        socklen_t ll = sizeof la;
        char what[96];
        getsockname(s->fd, (struct sockaddr *)&la, &ll);
        snprintf(what, sizeof what, "connect from local port %u (connection %ld)",
                 ntohs(la.sin_port), started);
        die_errno(what, err);
    }
    s->state = C_CONNECTING;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = s};
    if (epoll_ctl(cep, EPOLL_CTL_ADD, s->fd, &ev) < 0)
        die_errno("epoll_ctl (client)", errno);
}

static void client_event(struct cslot *s, uint32_t events)
{
    if (s->state == C_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err)
            die_errno("connect (async)", err);
        if (!(events & EPOLLOUT))
            return;
        s->t_est = now_ns();
        static const char req[MPA_REQ_LEN] = {'x'};
        size_t n = g.mpa_shape ? MPA_REQ_LEN : 1;
        if (send(s->fd, req, n, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)n)
            die_errno("send", errno);
        s->got = 0;
        s->state = C_WAIT_ECHO;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = s};
        if (epoll_ctl(cep, EPOLL_CTL_MOD, s->fd, &ev) < 0)
            die_errno("epoll_ctl mod (client)", errno);
        return;
    }
    if (s->state == C_IDLE)
        return;
    char b[MPA_REP_LEN];
    size_t want = s->state == C_WAIT_EOF ? sizeof b : g.mpa_shape ? MPA_REP_LEN - s->got : 1;
    ssize_t r = recv(s->fd, b, want, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (s->state == C_WAIT_EOF) {
        if (r > 0)
            die(EXIT_FAILED, "the server sent more than its Reply");
        if (r < 0)
            die_errno("recv of the server's FIN", errno);
    } else {
        if (r <= 0)
            die(EXIT_FAILED, r == 0 ? "server closed before its echo" : "recv of the echo failed");
        s->got += (uint32_t)r;
        if (g.mpa_shape && s->got < MPA_REP_LEN)
            return;
        s->t_rt = now_ns();
        if (g.mpa_shape) {
            /* The RTR, then the client's Disconnect; it completes on the
             * server's FIN. */
            static const char rtr[MPA_RTR_LEN];
            if (send(s->fd, rtr, sizeof rtr, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof rtr)
                die_errno("RTR send", errno);
            if (shutdown(s->fd, SHUT_WR) < 0)
                die_errno("shutdown", errno);
            s->state = C_WAIT_EOF;
            return;
        }
    }
    uint64_t t = s->t_rt;
    close(s->fd);
    s->fd = -1;
    last_end = now_ns();
    if (g.nrec < g.cap) {
        uint64_t rt = t - s->t0, est = s->t_est - s->t0;
        g.lat_rt[g.nrec] = rt > UINT32_MAX ? UINT32_MAX : (uint32_t)rt;
        g.lat_est[g.nrec] = est > UINT32_MAX ? UINT32_MAX : (uint32_t)est;
        g.nrec++;
    }
    completed++;
    client_start(s);
}

static void client_check_stuck(uint64_t now)
{
    for (unsigned i = 0; i < g.opt.q; i++) {
        struct cslot *s = &slots[i];
        if (s->state == C_IDLE || now - s->t0 < (uint64_t)g.opt.timeout_ms * 1000000u)
            continue;
        fprintf(stderr, "tcp_connrate: FAILED: connection (slot %u) not finished after %u ms, "
                        "stuck %s\n",
                i, g.opt.timeout_ms,
                s->state == C_CONNECTING  ? "connecting"
                : s->state == C_WAIT_EOF ? "waiting for the server's FIN"
                                         : "waiting for the echo");
        _exit(EXIT_FAILED);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static int client_main(void)
{
    slots = calloc(g.opt.q, sizeof *slots);
    g.cap = g.opt.limit_n ? g.opt.limit_n : (long)(g.opt.duration_s * 400000.0);
    if (g.cap < 100000)
        g.cap = 100000;
    if (g.cap > 8000000)
        g.cap = 8000000;
    g.lat_rt = malloc(sizeof(uint32_t) * (size_t)g.cap);
    g.lat_est = malloc(sizeof(uint32_t) * (size_t)g.cap);
    if (!slots || !g.lat_rt || !g.lat_est)
        die(EXIT_FAILED, "out of memory");
    /* Touch the pages now, not on the measured path. */
    memset(g.lat_rt, 0, sizeof(uint32_t) * (size_t)g.cap);
    memset(g.lat_est, 0, sizeof(uint32_t) * (size_t)g.cap);
    cep = epoll_create1(EPOLL_CLOEXEC);
    if (cep < 0)
        die_errno("epoll_create1", errno);

    uint64_t t_begin = now_ns();
    uint64_t deadline = t_begin + (uint64_t)(g.opt.duration_s * 1e9);
    uint64_t next_check = t_begin + 10000000u;
    uint64_t stopped_at = 0;
    inflight = g.opt.q;
    for (unsigned i = 0; i < g.opt.q; i++)
        client_start(&slots[i]);
    struct epoll_event evs[BATCH];
    while (inflight > 0) {
        int n = epoll_wait(cep, evs, BATCH, 10);
        if (n < 0 && errno != EINTR)
            die_errno("epoll_wait (client)", errno);
        for (int i = 0; i < n; i++)
            client_event(evs[i].data.ptr, evs[i].events);
        uint64_t now = now_ns();
        if (!g.opt.limit_n && now >= deadline)
            stopping = true;
        if (g_signalled)
            die(EXIT_FAILED, "interrupted");
        if (now >= next_check) {
            /* Every 10 ms is plenty for a multi-second bound. */
            client_check_stuck(now);
            next_check = now + 10000000u;
        }
        if (!stopped_at && (stopping || (g.opt.limit_n && started >= g.opt.limit_n)))
            stopped_at = now;
        /* The drain is bounded too, in case the count and the slots disagree. */
        if (stopped_at && now - stopped_at > (uint64_t)g.opt.timeout_ms * 2000000u)
            die(EXIT_FAILED, "connections still counted in flight long after the run stopped");
    }
    double secs = (double)(last_end - t_begin) / 1e9;
    double rate = secs > 0 ? (double)completed / secs : 0;
    long n = g.nrec;
    qsort(g.lat_rt, (size_t)n, sizeof *g.lat_rt, cmp_u32);
    qsort(g.lat_est, (size_t)n, sizeof *g.lat_est, cmp_u32);
    double r50 = connrate_percentile_us(g.lat_rt, n, 0.5), r99 = connrate_percentile_us(g.lat_rt, n, 0.99);
    double e50 = connrate_percentile_us(g.lat_est, n, 0.5), e99 = connrate_percentile_us(g.lat_est, n, 0.99);
    const char *mode = g.opt.inflight_mode ? "inflight" : "serial";
    bool one = g.opt.role == ROLE_BOTH;
    printf("\n## tcp_connrate (raw TCP anchor): %s, q=%u, %s, local port: %s, exchange: %s\n\n", mode,
           g.opt.q, one ? "one process, server thread + client thread" : "two processes (this is the client)",
           g.kernel_port ? "kernel ephemeral (plain connect)" : "random 49152-65535, bound first",
           g.mpa_shape ? "MPA's (request, reply, RTR; the client closes after the server's FIN)" : "1-byte echo");
    printf("| what | layout | connections | seconds | conn/s | rt p50 us | rt p99 us | "
           "est p50 us | est p99 us |\n|---|---|---|---|---|---|---|---|---|\n");
    printf("| raw TCP %s q=%u | %s | %ld | %.2f | %.0f | %.1f | %.1f | %.1f | %.1f |\n", mode, g.opt.q,
           one ? "1 proc" : "2 procs", completed, secs, rate, r50, r99, e50, e99);
    printf("\nrt = connect() called -> %s received; est = connect() called -> "
           "socket writable (TCP established)\n",
           g.mpa_shape ? "the reply" : "1-byte echo");
    if (n < completed)
        printf("(percentiles over the first %ld connections)\n", n);
    if (port_retries)
        printf("(%ld connect()s refused EADDRNOTAVAIL on a half-closed 4-tuple; retried with "
               "another port)\n",
               port_retries);
    printf("\nRESULT prog=tcp_connrate mode=%s q=%u layout=%s port=%s exchange=%s conns=%ld secs=%.3f "
           "rate=%.1f rt_p50_us=%.1f rt_p99_us=%.1f est_p50_us=%.1f est_p99_us=%.1f\n",
           mode, g.opt.q, one ? "oneproc" : "twoproc", g.kernel_port ? "kernel" : "random",
           g.mpa_shape ? "mpa" : "echo", completed, secs, rate, r50, r99, e50, e99);
    fflush(stdout);
    close(cep);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* main                                                                     */
/* ------------------------------------------------------------------------ */

static void usage(void)
{
    fprintf(stderr,
            "usage: tcp_connrate [-m serial|inflight] [-q N] [-D seconds | -n count]\n"
            "                    [--server | --client] [-p port] [--timeout ms] [--lifetime s]\n"
            "                    [--kernel-port] [--mpa-shape]\n"
            "  --kernel-port: plain connect() (kernel ephemeral port) instead of binding a\n"
            "                 random port in 49152-65535 first, as libndk does\n"
            "  --mpa-shape:   libndk's exchange (MPA Request, Reply, RTR, the NetworkDirect\n"
            "                 close) instead of the 1-byte echo\n");
}

static void report_server(void)
{
    printf("\n## tcp_connrate server side: %ld accepted, %ld closed, %ld errors\n",
           atomic_load(&g.srv_accepted), atomic_load(&g.srv_closed),
           atomic_load(&g.srv_resets));
    fflush(stdout);
}

int main(int argc, char **argv)
{
    connrate_opts_init(&g.opt);
    g.stop_efd = -1;
    const struct connrate_own_opt own[] = {{"kernel-port", .flag = &g.kernel_port},
                                           {"mpa-shape", .flag = &g.mpa_shape}};
    int rc = connrate_parse_options(&g.opt, argc, argv, own, 2, usage);
    if (rc >= 0)
        return rc;
    rng_state ^= (uint32_t)getpid() * 2654435761u ^ (uint32_t)now_ns();
    if (!rng_state)
        rng_state = 1;
    connrate_catch_signals();

    if (g.opt.role == ROLE_SERVER) {
        server_listen();
        printf("tcp_connrate server: listening on 127.0.0.1:%u\n", g.opt.port);
        fflush(stdout);
        server_main(NULL);
        report_server();
        return 0;
    }

    pthread_t th;
    if (g.opt.role == ROLE_BOTH) {
        server_listen();
        g.stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (g.stop_efd < 0)
            die_errno("eventfd", errno);
        if (pthread_create(&th, NULL, server_main, NULL) != 0)
            die(EXIT_FAILED, "pthread_create");
    }
    g.dst.sin_family = AF_INET;
    g.dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    g.dst.sin_port = htons((uint16_t)g.opt.port);
    rc = client_main();
    if (g.opt.role == ROLE_BOTH) {
        /* Let the server close what it still has (bounded), then stop it. */
        uint64_t t0 = now_ns();
        while (atomic_load(&g.srv_closed) < atomic_load(&g.srv_accepted) &&
               now_ns() - t0 < 2000000000u) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
        uint64_t one = 1;
        if (write(g.stop_efd, &one, sizeof one) != sizeof one)
            die_errno("eventfd write", errno);
        pthread_join(th, NULL);
        report_server();
        if (atomic_load(&g.srv_closed) < atomic_load(&g.srv_accepted)) {
            fprintf(stderr, "tcp_connrate: FAILED: server still holds %ld connections\n",
                    atomic_load(&g.srv_accepted) - atomic_load(&g.srv_closed));
            rc = EXIT_FAILED;
        }
    }
    return rc;
}
