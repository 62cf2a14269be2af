/*
 * tcp_pingpong - the raw TCP anchor for `ndkperf send_lat`: ping-pong of
 * N-byte messages between two processes over 127.0.0.1, TCP_NODELAY,
 * blocking sockets, each process pinned like ndkperf --loopback's ends.
 *
 *   tcp_pingpong [-s SIZE] [-n ITERS] [-w WARMUP] [--epoll | --yield] [--cpu N | --cpu-server N --cpu-client N]
 *
 * --epoll: each side waits for the answer in epoll_wait and then reads
 * without blocking, as an event loop does (libndk's progress engine among
 * them): per message the same work as the blocking read plus the system
 * call that waits, the least an event-driven receiver costs.
 *
 * --yield: each side polls with non-blocking reads and calls sched_yield()
 * after every empty one, as `ndkperf --busy-poll --wait=yield` polls its
 * CQ: on one CPU the answer cannot be there before the peer ran, so every
 * message costs an empty read and a yield more than a blocking read does,
 * the least a busy poller that shares its CPU costs.
 *
 * Prints one line: the half round trip (one way, as ndkperf send_lat and
 * sockperf report it) in microseconds: min, typical (median), p99, avg.
 */
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <sys/epoll.h>

#include "tcpbench.h"

static const char *prog = "tcp_pingpong";

/* --epoll: the epoll set that watches the socket for input, or -1 for
 * blocking reads. */
static int g_ep = -1;
static bool g_want_epoll;
static bool g_want_yield; /* --yield: non-blocking reads, a yield after each empty one */

/* A side's socket made ready: TCP_NODELAY and, with --epoll, an epoll
 * instance watching it for reads. The socket, or -1 (closed, said on
 * stderr). */
static int ready_socket(int fd)
{
    if (fd < 0)
        return -1;
    tb_nodelay(fd);
    if (!g_want_epoll)
        return fd;
    g_ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (g_ep < 0 || epoll_ctl(g_ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fprintf(stderr, "%s: epoll: %s\n", prog, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* A side's end: its buffer, its socket and the epoll instance. */
static void close_side(int fd, char *buf)
{
    free(buf);
    close(fd);
    if (g_ep >= 0)
        close(g_ep);
}

/* As tb_read_full; with --epoll every read waits in epoll_wait first
 * (bounded as the blocking reads are) and then takes what is there. */
static bool read_polling(int fd, void *buf, size_t len, bool *eof);

static bool read_full(int fd, void *buf, size_t len, bool *eof)
{
    if (g_want_yield)
        return read_polling(fd, buf, len, eof);
    if (g_ep < 0)
        return tb_read_full(fd, buf, len, eof);
    size_t got = 0;
    if (eof)
        *eof = false;
    while (got < len) {
        struct epoll_event ev;
        int r = epoll_wait(g_ep, &ev, 1, TB_TIMEOUT_MS);
        if (r == 0 || (r < 0 && errno != EINTR))
            return false;
        if (r < 0)
            continue;
        ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (eof && got == 0)
                *eof = true;
            return false;
        } else if (errno != EINTR && errno != EAGAIN) {
            return false;
        }
    }
    return true;
}

/* --yield: non-blocking reads until len octets are in, a sched_yield()
 * after each empty one; bounded as the blocking reads are. */
static bool read_polling(int fd, void *buf, size_t len, bool *eof)
{
    size_t got = 0;
    uint64_t deadline = tb_now_ns() + (uint64_t)TB_TIMEOUT_MS * 1000000u;
    if (eof)
        *eof = false;
    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n == 0) {
            if (eof && got == 0)
                *eof = true;
            return false;
        }
        if (errno != EINTR && errno != EAGAIN)
            return false;
        if (tb_now_ns() > deadline)
            return false;
        sched_yield();
    }
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Echoes every message until the client closes. */
static int server(int lfd, int cpu, size_t size)
{
    int fd = ready_socket(tb_server_start(prog, lfd, cpu));
    if (fd < 0)
        return 1;
    char *buf = malloc(size);
    int rc = 1;
    bool eof = false;
    while (buf && read_full(fd, buf, size, &eof))
        if (!tb_write_full(fd, buf, size))
            goto out;
    if (eof)
        rc = 0;
    else
        fprintf(stderr, "%s: server: %s\n", prog, buf ? "read failed or timed out" : "out of memory");
out:
    close_side(fd, buf);
    return rc;
}

static int client(const struct sockaddr_in *addr, int cpu, size_t size, uint64_t iters, uint64_t warmup,
                  uint64_t *rtt)
{
    int fd = ready_socket(tb_client_start(prog, addr, cpu));
    if (fd < 0)
        return 1;
    char *buf = calloc(1, size);
    int rc = buf ? 0 : 1;
    for (uint64_t i = 0; rc == 0 && i < warmup + iters; i++) {
        uint64_t t0 = tb_now_ns();
        if (!tb_write_full(fd, buf, size) || !read_full(fd, buf, size, NULL)) {
            fprintf(stderr, "%s: client: ping-pong failed at iteration %" PRIu64 ": %s\n", prog, i,
                    errno ? strerror(errno) : "connection closed");
            rc = 1;
        } else if (i >= warmup) {
            rtt[i - warmup] = tb_now_ns() - t0;
        }
    }
    close_side(fd, buf);
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t size = 64, iters = 20000, warmup = 100;
    int cpu_server = -1, cpu_client = -1;
    const struct tb_opt own[] = {
        {'n', "iters", .number = &iters, .min = 1, .max = 100000000},
        {'w', "warmup", .number = &warmup, .max = 100000000},
        {0, "epoll", .flag = &g_want_epoll},
        {0, "yield", .flag = &g_want_yield},
    };
    int rc = tb_parse_options(argc, argv, prog,
                              "[-s SIZE] [-n ITERS] [-w WARMUP] [--epoll | --yield] [--cpu N | --cpu-server N --cpu-client N]",
                              "Raw TCP ping-pong over 127.0.0.1 between two processes (TCP_NODELAY, blocking\n"
                              "sockets); prints the half round trip in microseconds. --epoll: every wait is\n"
                              "an epoll_wait, then a non-blocking read (an event loop's way). --yield:\n"
                              "non-blocking reads, sched_yield() after each empty one (a busy poller's way).\n",
                              own, sizeof own / sizeof own[0], &size, &cpu_server, &cpu_client);
    if (rc >= 0)
        return rc;
    if (g_want_epoll && g_want_yield) {
        fprintf(stderr, "%s: --epoll and --yield are two ways to wait: pick one\n", prog);
        return 2;
    }

    uint64_t *rtt = malloc(iters * sizeof *rtt);
    if (!rtt) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    struct sockaddr_in addr;
    pid_t pid = tb_fork_server(prog, server, cpu_server, size, &addr);
    if (pid < 0) {
        free(rtt);
        return 1;
    }
    rc = client(&addr, cpu_client, size, iters, warmup, rtt);
    if (tb_reap(pid, rc != 0) != 0 && rc == 0)
        rc = 1;
    if (rc == 0) {
        qsort(rtt, iters, sizeof *rtt, cmp_u64);
        double sum = 0;
        for (uint64_t i = 0; i < iters; i++)
            sum += (double)rtt[i];
        uint64_t p99 = (uint64_t)(0.99 * (double)iters + 0.999999);
        p99 = p99 ? p99 - 1 : 0;
        char a[16], b[16];
        /* Half the round trip: one way, as ndkperf send_lat reports. */
        printf("tcp_pingpong%s size=%" PRIu64 " iters=%" PRIu64 " cpu_server=%s cpu_client=%s half_rtt_usec min=%.2f "
               "typical=%.2f p99=%.2f avg=%.2f\n",
               g_want_epoll ? " epoll" : g_want_yield ? " yield" : "", size, iters, tb_cpu_text(cpu_server, a, sizeof a), tb_cpu_text(cpu_client, b, sizeof b),
               (double)rtt[0] / 2000.0, (double)rtt[iters / 2] / 2000.0, (double)rtt[p99] / 2000.0,
               sum / (double)iters / 2000.0);
    }
    free(rtt);
    return rc;
}
