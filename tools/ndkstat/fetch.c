/* Finding libndk processes and reading their snapshots, every read
 * bounded by the timeout: a stopped or dying process is skipped, never
 * waited for. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fetch.h"

#define NAME_PREFIX "@libndk-stat-"

static int cmp_pid(const void *a, const void *b)
{
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

static bool owned_by_me(pid_t pid)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof path, "/proc/%ld", (long)pid);
    return stat(path, &st) == 0 && st.st_uid == geteuid();
}

int ns_list_pids(pid_t *out, int max)
{
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f) && n < max) {
        char *name = strstr(line, NAME_PREFIX);
        unsigned long flags;
        /* "Num: RefCount Protocol Flags ...": 0x10000 is a listening socket. */
        if (!name || sscanf(line, "%*s %*s %*s %lx", &flags) != 1 || !(flags & 0x10000))
            continue;
        char *end;
        long pid = strtol(name + strlen(NAME_PREFIX), &end, 10);
        if (pid <= 0 || (*end != '\n' && *end != '\0') || !owned_by_me((pid_t)pid))
            continue;
        out[n++] = (pid_t)pid;
    }
    fclose(f);
    qsort(out, (size_t)n, sizeof *out, cmp_pid);
    return n;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* 'T' (stopped), 't' (traced), 'Z' (zombie)... from /proc/PID/stat, or 0. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *paren = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

static void why_not_answering(pid_t pid, unsigned timeout_ms, char *why, size_t len)
{
    char st = proc_state(pid);
    snprintf(why, len, "no answer within %u ms%s", timeout_ms,
             st == 'T' || st == 't' ? " (the process is stopped)"
             : st == 'Z' || st == 'X' ? " (the process is exiting)"
                                      : "");
}

char *ns_fetch(pid_t pid, unsigned timeout_ms, char *why, size_t why_len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, why_len, "socket: %s", strerror(errno));
        return NULL;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "libndk-stat-%ld", (long)pid);
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (connect(fd, (struct sockaddr *)&sa, sl) < 0) {
        if (errno == EAGAIN)
            why_not_answering(pid, timeout_ms, why, why_len); /* its backlog is full */
        else if (kill(pid, 0) < 0 && errno == ESRCH)
            snprintf(why, why_len, "no such process");
        else
            snprintf(why, why_len, "no libndk stat channel (no adapter open, NDK_STAT=0, or "
                                   "another network namespace)");
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    uint64_t deadline = now_ms() + timeout_ms;
    bool done = false;
    while (buf) {
        uint64_t now = now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0) {
            why_not_answering(pid, timeout_ms, why, why_len);
            break;
        }
        if (len == cap) {
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger) {
                snprintf(why, why_len, "out of memory");
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0) {
            snprintf(why, why_len, "read: %s", strerror(errno));
            break;
        }
        if (r == 0) {
            done = true;
            break;
        }
        len += (size_t)r;
    }
    close(fd);
    if (!done || !buf) {
        free(buf);
        return NULL;
    }
    buf[len] = '\0';
    if (strcmp(buf, "refused\n") == 0 || len == 0 || strncmp(buf, "process ", 8) != 0) {
        snprintf(why, why_len, len == 0 ? "closed without an answer (the process is exiting?)"
                                        : "refused: the process runs as another user");
        free(buf);
        return NULL;
    }
    return buf;
}
