/*
 * tcpbench.h - what tcp_pingpong and tcp_stream share: the two-process
 * layout of `ndkperf --loopback` (server and client processes over
 * 127.0.0.1, each pinned before it does anything), blocking sockets with a
 * bound on every wait, the command line (the placement, and each
 * program's own options from a table) and the fork of the server process.
 *
 * Everything is static inline: each program is one translation unit and
 * takes what it needs.
 */
#ifndef TCPBENCH_H
#define TCPBENCH_H

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/pin.h"

/* Longest a blocking call may wait before the run is declared failed. */
#define TB_TIMEOUT_MS 10000

static inline uint64_t tb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline bool tb_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

/* Pins the calling process (one thread) to cpu; -1 leaves it alone. */
static inline bool tb_pin(const char *prog, int cpu)
{
    int err = tc_pin_process(cpu);
    if (err)
        fprintf(stderr, "%s: cannot pin to CPU %d: %s\n", prog, cpu, strerror(err));
    return err == 0;
}

static inline const char *tb_cpu_text(int cpu, char *buf, size_t size)
{
    if (cpu < 0)
        snprintf(buf, size, "any");
    else
        snprintf(buf, size, "%d", cpu);
    return buf;
}

/* Blocking socket with bounded waits: a stuck peer fails the run instead
 * of hanging it. */
static inline void tb_bound_waits(int fd)
{
    struct timeval tv = {.tv_sec = TB_TIMEOUT_MS / 1000, .tv_usec = (TB_TIMEOUT_MS % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* A listening socket on 127.0.0.1 with a port the kernel picks. Made
 * before the fork, so the client can connect the moment it starts. */
static inline int tb_listen(const char *prog, struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
        return -1;
    }
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)addr, &len) != 0) {
        fprintf(stderr, "%s: listen on 127.0.0.1: %s\n", prog, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Accepts the one client, waiting at most TB_TIMEOUT_MS. */
static inline int tb_accept(const char *prog, int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int rc;
    do
        rc = poll(&p, 1, TB_TIMEOUT_MS);
    while (rc < 0 && errno == EINTR);
    if (rc <= 0) {
        fprintf(stderr, "%s: server: no client within %d ms\n", prog, TB_TIMEOUT_MS);
        return -1;
    }
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        fprintf(stderr, "%s: server: accept: %s\n", prog, strerror(errno));
    return fd;
}

static inline int tb_connect(const char *prog, const struct sockaddr_in *addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0) {
        fprintf(stderr, "%s: client: connect to 127.0.0.1:%u: %s\n", prog, ntohs(addr->sin_port), strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static inline void tb_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* Exactly len bytes; false on error, timeout or end of stream (*eof set
 * when the stream ended before the first byte). */
static inline bool tb_read_full(int fd, void *buf, size_t len, bool *eof)
{
    size_t got = 0;
    if (eof)
        *eof = false;
    while (got < len) {
        ssize_t n = recv(fd, (char *)buf + got, len - got, 0);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            if (eof && got == 0)
                *eof = true;
            return false;
        } else if (errno != EINTR) {
            return false;
        }
    }
    return true;
}

static inline bool tb_write_full(int fd, const void *buf, size_t len)
{
    size_t put = 0;
    while (put < len) {
        ssize_t n = send(fd, (const char *)buf + put, len - put, MSG_NOSIGNAL);
        if (n > 0)
            put += (size_t)n;
        else if (n < 0 && errno != EINTR)
            return false;
    }
    return true;
}

/* The server process's start: pinned, the one client accepted (the
 * listener closed), waits bounded. The socket, or -1 (said on stderr). */
static inline int tb_server_start(const char *prog, int lfd, int cpu)
{
    int fd = tb_pin(prog, cpu) ? tb_accept(prog, lfd) : -1;
    close(lfd);
    if (fd >= 0)
        tb_bound_waits(fd);
    return fd;
}

/* The client's start: pinned, connected, waits bounded. The socket, or -1
 * (said on stderr). */
static inline int tb_client_start(const char *prog, const struct sockaddr_in *addr, int cpu)
{
    int fd = tb_pin(prog, cpu) ? tb_connect(prog, addr) : -1;
    if (fd >= 0)
        tb_bound_waits(fd);
    return fd;
}

/* The options both programs take: -s SIZE (1 byte to 1 GiB) and the
 * placement options --cpu N (both), --cpu-server N and --cpu-client N,
 * given to getopt_long as 'C', 'S' and 'K'. Returns 1 when ch is one of
 * them, 0 when its value is bad, -1 when ch is another option. */
static inline int tb_common_opt(int ch, const char *arg, uint64_t *size, int *cpu_server, int *cpu_client)
{
    uint64_t v;
    switch (ch) {
    case 's':
        return tb_parse_u64(arg, 1, 1u << 30, size);
    case 'C':
    case 'S':
    case 'K':
        if (!tb_parse_u64(arg, 0, CPU_SETSIZE - 1, &v))
            return 0;
        if (ch != 'K')
            *cpu_server = (int)v;
        if (ch != 'S')
            *cpu_client = (int)v;
        return 1;
    default:
        return -1;
    }
}

/* One of a program's own options (letter 0: a long option only): a number
 * from min to max into *number, or, without an argument, true into *flag. */
struct tb_opt {
    int letter;
    const char *name;
    uint64_t *number;
    uint64_t min, max;
    bool *flag;
};

#define TB_MAX_OWN_OPTS 8
/* getopt_long's value for own row i without a letter. */
#define TB_LONG_ONLY 0x100

/* A program's command line: -h and tb_common_opt's options, and the n
 * rows of own. -1 to go on; else the exit status: 0 after -h (usage, the
 * words after "Usage: PROG ", and about on stdout), 2 after a bad option
 * or an operand (usage on stderr). */
static inline int tb_parse_options(int argc, char **argv, const char *prog, const char *usage, const char *about,
                                   const struct tb_opt *own, unsigned n, uint64_t *size, int *cpu_server,
                                   int *cpu_client)
{
    char shortopts[4 + 2 * TB_MAX_OWN_OPTS] = "s:h";
    struct option longopts[6 + TB_MAX_OWN_OPTS] = {
        {"size", required_argument, NULL, 's'},       {"cpu", required_argument, NULL, 'C'},
        {"cpu-server", required_argument, NULL, 'S'}, {"cpu-client", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
    };
    n = n < TB_MAX_OWN_OPTS ? n : TB_MAX_OWN_OPTS;
    for (unsigned i = 0, len = 3; i < n; i++) {
        int has_arg = own[i].number ? required_argument : no_argument;
        if (own[i].letter) {
            shortopts[len++] = (char)own[i].letter;
            shortopts[len] = has_arg ? ':' : '\0';
            len += has_arg;
        }
        int val = own[i].letter ? own[i].letter : TB_LONG_ONLY + (int)i;
        longopts[5 + i] = (struct option){own[i].name, has_arg, NULL, val};
    }
    int ch, common;
    while ((ch = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        if ((common = tb_common_opt(ch, optarg, size, cpu_server, cpu_client)) >= 0) {
            if (common == 0)
                break;
            continue;
        }
        if (ch == 'h') {
            printf("Usage: %s %s\n%s", prog, usage, about);
            return 0;
        }
        unsigned i = 0;
        while (i < n && (own[i].letter ? own[i].letter : TB_LONG_ONLY + (int)i) != ch)
            i++;
        if (i == n || (own[i].number && !tb_parse_u64(optarg, own[i].min, own[i].max, own[i].number)))
            break;
        if (own[i].flag)
            *own[i].flag = true;
    }
    if (ch == -1 && optind == argc)
        return -1;
    fprintf(stderr, "Usage: %s %s\n", prog, usage);
    return 2;
}

/* Listens on 127.0.0.1 (its address in *addr) and forks the server
 * process, which runs server(lfd, cpu, size) and exits with what it
 * returns. Returns the child's pid, or -1 (said on stderr). */
static inline pid_t tb_fork_server(const char *prog, int (*server)(int lfd, int cpu, size_t size), int cpu,
                                   size_t size, struct sockaddr_in *addr)
{
    int lfd = tb_listen(prog, addr);
    if (lfd < 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
        return -1;
    }
    if (pid == 0)
        _exit(server(lfd, cpu, size));
    close(lfd);
    return pid;
}

/* Waits for the server child; it ends on its own once the client closed
 * (its reads are bounded), so this wait is bounded too. Returns its exit
 * status, or 1 if it failed otherwise. */
static inline int tb_reap(pid_t pid, bool kill_first)
{
    if (kill_first)
        kill(pid, SIGTERM);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

#endif
