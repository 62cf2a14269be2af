/*
 * tcp_stream - the raw TCP anchor for `ndkperf write_bw -s 1048576`: one
 * TCP stream over 127.0.0.1 between two processes placed like ndkperf
 * --loopback's ends; the client writes 1 MiB at a time for D seconds.
 *
 *   tcp_stream [-s WRITE_SIZE] [-D SECONDS] [--spin] [--cpu N | --cpu-server N --cpu-client N]
 *
 * --spin: neither end ever sleeps in the kernel; each retries its
 * non-blocking send or recv until it moves bytes, as ndkperf's busy-poll
 * mode (--busy-poll --wait=spin) does. The anchor for that mode: without
 * it a full or empty socket costs a wake-up, which can cross CPUs.
 *
 * The bandwidth is the receiver's: bytes read over the time from the first
 * byte to the end of the stream (the server sends both back), in MB/s with
 * MB = 2^20 bytes, as ndkperf and perftest.
 */
#include <getopt.h>
#include <inttypes.h>

#include "tcpbench.h"

static const char *prog = "tcp_stream";
/* --spin: MSG_DONTWAIT on every call, retried (bounded: TB_TIMEOUT_MS
 * without progress ends the run). */
static bool g_spin;

/* One recv or send of the run: with --spin, retried while the socket has
 * nothing (or no room), for at most TB_TIMEOUT_MS. */
static ssize_t io_once(int fd, void *buf, size_t len, bool out)
{
    int flags = (out ? MSG_NOSIGNAL : 0) | (g_spin ? MSG_DONTWAIT : 0);
    uint64_t give_up = 0;
    for (;;) {
        ssize_t n = out ? send(fd, buf, len, flags) : recv(fd, buf, len, flags);
        if (n >= 0 || !g_spin || errno != EAGAIN)
            return n;
        uint64_t now = tb_now_ns();
        if (!give_up)
            give_up = now + (uint64_t)TB_TIMEOUT_MS * 1000000u;
        else if (now > give_up)
            return -1; /* errno EAGAIN: said by the caller */
    }
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* Reads until the client shuts its side down, then reports. */
static int server(int lfd, int cpu, size_t size)
{
    int fd = tb_server_start(prog, lfd, cpu);
    if (fd < 0)
        return 1;
    char *buf = malloc(size);
    if (!buf) {
        close(fd);
        return 1;
    }
    uint64_t bytes = 0, first = 0, last = 0;
    int rc = 1;
    for (;;) {
        ssize_t n = io_once(fd, buf, size, false);
        if (n > 0) {
            if (bytes == 0)
                first = tb_now_ns();
            bytes += (uint64_t)n;
        } else if (n == 0) {
            last = tb_now_ns();
            rc = 0;
            break;
        } else if (errno != EINTR) {
            fprintf(stderr, "%s: server: recv: %s\n", prog, strerror(errno));
            break;
        }
    }
    uint8_t rep[16];
    put64(rep, bytes);
    put64(rep + 8, last - first);
    if (rc == 0 && !tb_write_full(fd, rep, sizeof rep))
        rc = 1;
    free(buf);
    close(fd);
    return rc;
}

static int client(const struct sockaddr_in *addr, int cpu, size_t size, uint64_t seconds, uint64_t *bytes,
                  uint64_t *ns)
{
    int fd = tb_client_start(prog, addr, cpu);
    if (fd < 0)
        return 1;
    char *buf = malloc(size);
    int rc = 1;
    if (!buf)
        goto out;
    memset(buf, 0xa5, size);
    uint64_t end = tb_now_ns() + seconds * 1000000000u;
    while (tb_now_ns() < end)
        for (size_t put = 0; put < size;) {
            ssize_t n = io_once(fd, buf + put, size - put, true);
            if (n < 0 && errno != EINTR) {
                fprintf(stderr, "%s: client: send: %s\n", prog, strerror(errno));
                goto out;
            }
            put += n > 0 ? (size_t)n : 0;
        }
    shutdown(fd, SHUT_WR);
    uint8_t rep[16];
    if (!tb_read_full(fd, rep, sizeof rep, NULL)) {
        fprintf(stderr, "%s: client: no report from the server\n", prog);
        goto out;
    }
    *bytes = get64(rep);
    *ns = get64(rep + 8);
    rc = 0;
out:
    free(buf);
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    uint64_t size = 1u << 20, seconds = 5;
    int cpu_server = -1, cpu_client = -1;
    const struct tb_opt own[] = {{'D', "duration", .number = &seconds, .min = 1, .max = 3600},
                                 {0, "spin", .flag = &g_spin}};
    int rc = tb_parse_options(argc, argv, prog,
                              "[-s WRITE_SIZE] [-D SECONDS] [--spin] [--cpu N | --cpu-server N --cpu-client N]",
                              "One raw TCP stream over 127.0.0.1 between two processes; prints the receiver's MB/s\n"
                              "(MB = 2^20 bytes). --spin: non-blocking calls retried, never a sleep in the kernel.\n",
                              own, 2, &size, &cpu_server, &cpu_client);
    if (rc >= 0)
        return rc;

    struct sockaddr_in addr;
    pid_t pid = tb_fork_server(prog, server, cpu_server, size, &addr);
    if (pid < 0)
        return 1;
    uint64_t bytes = 0, ns = 0;
    rc = client(&addr, cpu_client, size, seconds, &bytes, &ns);
    if (tb_reap(pid, rc != 0) != 0 && rc == 0)
        rc = 1;
    if (rc == 0) {
        char a[16], b[16];
        printf("tcp_stream%s write=%" PRIu64 " seconds=%.2f cpu_server=%s cpu_client=%s bytes=%" PRIu64
               " MB_per_sec=%.2f\n",
               g_spin ? " spin" : "", size, (double)ns / 1e9, tb_cpu_text(cpu_server, a, sizeof a), tb_cpu_text(cpu_client, b, sizeof b),
               bytes, ns ? (double)bytes / 1048576.0 / ((double)ns / 1e9) : 0.0);
    }
    return rc;
}
