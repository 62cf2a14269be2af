/*
 * tcp_pingpong - the raw TCP anchor for `ndkperf send_lat`: ping-pong of
 * N-byte messages between two processes over 127.0.0.1, TCP_NODELAY,
 * blocking sockets, each process pinned like ndkperf --loopback's ends.
 *
 *   tcp_pingpong [-s SIZE] [-n ITERS] [-w WARMUP] [--cpu N | --cpu-server N --cpu-client N]
 *
 * Prints one line: the half round trip (one way, as ndkperf send_lat and
 * sockperf report it) in microseconds: min, typical (median), p99, avg.
 */
#include <getopt.h>
#include <inttypes.h>

#include "tcpbench.h"

static const char *prog = "tcp_pingpong";

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Echoes every message until the client closes. */
static int server(int lfd, int cpu, size_t size)
{
    int fd = tb_server_start(prog, lfd, cpu);
    if (fd < 0)
        return 1;
    tb_nodelay(fd);
    char *buf = malloc(size);
    int rc = 1;
    bool eof = false;
    while (buf && tb_read_full(fd, buf, size, &eof))
        if (!tb_write_full(fd, buf, size))
            goto out;
    if (eof)
        rc = 0;
    else
        fprintf(stderr, "%s: server: %s\n", prog, buf ? "read failed or timed out" : "out of memory");
out:
    free(buf);
    close(fd);
    return rc;
}

static int client(const struct sockaddr_in *addr, int cpu, size_t size, uint64_t iters, uint64_t warmup,
                  uint64_t *rtt)
{
    int fd = tb_client_start(prog, addr, cpu);
    if (fd < 0)
        return 1;
    tb_nodelay(fd);
    char *buf = calloc(1, size);
    int rc = buf ? 0 : 1;
    for (uint64_t i = 0; rc == 0 && i < warmup + iters; i++) {
        uint64_t t0 = tb_now_ns();
        if (!tb_write_full(fd, buf, size) || !tb_read_full(fd, buf, size, NULL)) {
            fprintf(stderr, "%s: client: ping-pong failed at iteration %" PRIu64 ": %s\n", prog, i,
                    errno ? strerror(errno) : "connection closed");
            rc = 1;
        } else if (i >= warmup) {
            rtt[i - warmup] = tb_now_ns() - t0;
        }
    }
    free(buf);
    close(fd);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},
        TB_COMMON_LONGOPTS,
    };
    uint64_t size = 64, iters = 20000, warmup = 100;
    int cpu_server = -1, cpu_client = -1, ch;
    while ((ch = tb_next_opt(argc, argv, "s:n:w:h", longopts, &size, &cpu_server, &cpu_client)) != -1) {
        switch (ch) {
        case 'n':
            if (!tb_parse_u64(optarg, 1, 100000000, &iters))
                goto bad;
            break;
        case 'w':
            if (!tb_parse_u64(optarg, 0, 100000000, &warmup))
                goto bad;
            break;
        case 'h':
            printf("Usage: %s [-s SIZE] [-n ITERS] [-w WARMUP] [--cpu N | --cpu-server N --cpu-client N]\n"
                   "Raw TCP ping-pong over 127.0.0.1 between two processes (TCP_NODELAY, blocking\n"
                   "sockets); prints the half round trip in microseconds.\n",
                   prog);
            return 0;
        default:
            goto bad;
        }
    }
    if (optind < argc)
        goto bad;

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
    int rc = client(&addr, cpu_client, size, iters, warmup, rtt);
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
        printf("tcp_pingpong size=%" PRIu64 " iters=%" PRIu64 " cpu_server=%s cpu_client=%s half_rtt_usec min=%.2f "
               "typical=%.2f p99=%.2f avg=%.2f\n",
               size, iters, tb_cpu_text(cpu_server, a, sizeof a), tb_cpu_text(cpu_client, b, sizeof b),
               (double)rtt[0] / 2000.0, (double)rtt[iters / 2] / 2000.0, (double)rtt[p99] / 2000.0,
               sum / (double)iters / 2000.0);
    }
    free(rtt);
    return rc;
bad:
    fprintf(stderr, "Usage: %s [-s SIZE] [-n ITERS] [-w WARMUP] [--cpu N | --cpu-server N --cpu-client N]\n", prog);
    return 2;
}
