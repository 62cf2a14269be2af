/* copy_ceiling - what this machine can move between two processes, the
 * ceiling of the shared-memory transport's large transfers (docs/shm.md,
 * Bandwidth): the same SIZE octets copied over and over, for SECONDS, by
 *
 *   memcpy       one thread, private buffers (what a one-copy put through
 *                memory mapped from the peer, as UCX's posix transport
 *                does, can reach)
 *   pull, push   process_vm_readv / process_vm_writev of the peer's buffer
 *                (iovecs of IOV octets each, 0: one iovec for all)
 *   pull2        both processes at once, each pulling half of the peer's
 *                buffer (two CPUs on one transfer)
 *   stage        two copies through memory both map, pipelined: the
 *                sender copies pieces of IOV octets (default 64 KiB) into
 *                a shared area of STAGE_BYTES (default 1 MiB), the
 *                receiver copies each out as it comes (two CPUs, each
 *                copying every octet once)
 *
 *   copy_ceiling MODE SIZE [SECONDS] [IOV] [huge]
 *
 * "huge" asks for transparent huge pages (MADV_HUGEPAGE) on every buffer.
 * Prints "MODE SIZE GB/s=X cpu_GB/s=Y": wall-clock bandwidth, and octets
 * per second of the copying threads' processor time (both threads for
 * pull2). GB = 1e9 octets. CPUs: SHM_CPU_CLIENT (default 0) and
 * SHM_CPU_SERVER (default 1), as shm_perf. Every wait is bounded.
 */
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "bench_os.h"

#define IOV_MAX_USED 1024
#define WAIT_MS 20000

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static uint8_t *buffer(size_t len, bool huge)
{
    size_t align = huge ? (2u << 20) : 4096;
    size_t round = (len + align - 1) / align * align;
    uint8_t *p = aligned_alloc(align, round);
    if (!p)
        die("aligned_alloc");
    if (huge)
        madvise(p, round, MADV_HUGEPAGE);
    memset(p, 0x5a, round); /* touched: no fault is timed */
    return p;
}

/* base..base+len as iovecs of piece octets (0: one). */
static int iovs(uint8_t *base, size_t len, size_t piece, struct iovec *v)
{
    int n = 0;
    if (!piece)
        piece = len;
    for (size_t off = 0; off < len && n < IOV_MAX_USED; off += piece, n++)
        v[n] = (struct iovec){base + off, len - off < piece ? len - off : piece};
    return n;
}

/* One whole transfer, looping over partial ones. */
static void move(pid_t pid, bool push, struct iovec *l, int nl, struct iovec *r, int nr)
{
    size_t total = 0, done = 0;
    for (int i = 0; i < nl; i++)
        total += l[i].iov_len;
    struct iovec lc[IOV_MAX_USED], rc[IOV_MAX_USED];
    memcpy(lc, l, (size_t)nl * sizeof *l);
    memcpy(rc, r, (size_t)nr * sizeof *r);
    struct iovec *lp = lc, *rp = rc;
    while (done < total) {
        int cl = nl > 1024 ? 1024 : nl, cr = nr > 1024 ? 1024 : nr;
        ssize_t n = push ? process_vm_writev(pid, lp, (unsigned long)cl, rp, (unsigned long)cr, 0)
                         : process_vm_readv(pid, lp, (unsigned long)cl, rp, (unsigned long)cr, 0);
        if (n <= 0)
            die("process_vm_*");
        done += (size_t)n;
        for (size_t k = (size_t)n; k;) { /* advance both lists */
            size_t a = k < lp->iov_len ? k : lp->iov_len;
            lp->iov_base = (uint8_t *)lp->iov_base + a, lp->iov_len -= a, k -= a;
            if (!lp->iov_len)
                lp++, nl--;
        }
        for (size_t k = (size_t)n; k;) {
            size_t a = k < rp->iov_len ? k : rp->iov_len;
            rp->iov_base = (uint8_t *)rp->iov_base + a, rp->iov_len -= a, k -= a;
            if (!rp->iov_len)
                rp++, nr--;
        }
    }
}

/* The shared area of "stage": free-running piece counters, then the
 * pieces. */
struct stage {
    _Alignas(64) _Atomic uint64_t put;
    _Alignas(64) _Atomic uint64_t got;
    _Alignas(64) _Atomic int stop;
    _Alignas(64) uint8_t data[];
};

static struct stage *g_stage;
static size_t g_slots;

/* Sender: one transfer of len octets, piece by piece. */
static void stage_send(const uint8_t *src, size_t len, size_t piece, uint64_t *seq)
{
    for (size_t off = 0; off < len; off += piece, ++*seq) {
        while (*seq - atomic_load_explicit(&g_stage->got, memory_order_acquire) >= g_slots)
            ;
        size_t n = len - off < piece ? len - off : piece;
        memcpy(g_stage->data + (*seq % g_slots) * piece, src + off, n);
        atomic_store_explicit(&g_stage->put, *seq + 1, memory_order_release);
    }
}

/* Receiver: pieces into dst (len octets a transfer) until told to stop. */
static double stage_recv(uint8_t *dst, size_t len, size_t piece, double *wall, double *cpu)
{
    double bytes = 0, t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    for (uint64_t seq = 0, off = 0;; ++seq) {
        while (atomic_load_explicit(&g_stage->put, memory_order_acquire) == seq)
            if (atomic_load_explicit(&g_stage->stop, memory_order_acquire))
                goto out;
        size_t n = len - off < piece ? len - off : piece;
        memcpy(dst + off, g_stage->data + (seq % g_slots) * piece, n);
        atomic_store_explicit(&g_stage->got, seq + 1, memory_order_release);
        bytes += (double)n;
        off = off + n == len ? 0 : off + n;
    }
out:
    *wall = clock_s(CLOCK_MONOTONIC) - t0;
    *cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return bytes;
}

struct run {
    const char *mode;
    size_t size, piece;
    double secs;
    pid_t peer;
    uint8_t *mine;     /* our buffer */
    uint64_t theirs;   /* the peer's, in its address space */
};

/* Copies for secs; returns octets moved, *cpu the thread's CPU seconds. */
static double loop(const struct run *r, size_t off, size_t len, double *wall, double *cpu)
{
    struct iovec l[IOV_MAX_USED], rv[IOV_MAX_USED];
    int nl = iovs(r->mine + off, len, r->piece, l);
    int nr = iovs((uint8_t *)(uintptr_t)r->theirs + off, len, r->piece, rv);
    bool copy = !strcmp(r->mode, "memcpy"), push = !strcmp(r->mode, "push");
    bool stage = !strcmp(r->mode, "stage");
    uint8_t *src = copy ? r->mine + r->size : NULL;
    uint64_t seq = 0;
    double bytes = 0, t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t;
    do {
        for (int i = 0; i < 16; i++) {
            if (stage) {
                stage_send(r->mine + off, len, r->piece, &seq);
            } else if (copy) {
                memcpy(r->mine + off, src + off, len);
                __asm__ __volatile__("" : : "r"(r->mine) : "memory");
            } else {
                move(r->peer, push, l, nl, rv, nr);
            }
            bytes += (double)len;
        }
        t = clock_s(CLOCK_MONOTONIC);
    } while (t - t0 < r->secs);
    *wall = t - t0;
    *cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return bytes;
}

static void xfer(int fd, void *p, size_t n, bool out)
{
    struct pollfd q = {.fd = fd, .events = out ? POLLOUT : POLLIN};
    if (poll(&q, 1, WAIT_MS) != 1 || (out ? write(fd, p, n) : read(fd, p, n)) != (ssize_t)n)
        die("control socket");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: copy_ceiling memcpy|pull|push|pull2 SIZE [SECONDS] [IOV] [huge]\n");
        return 2;
    }
    struct run r = {.mode = argv[1], .size = strtoull(argv[2], NULL, 0)};
    r.secs = argc > 3 ? atof(argv[3]) : 1;
    r.piece = argc > 4 ? strtoull(argv[4], NULL, 0) : 0;
    bool huge = argc > 5 && !strcmp(argv[5], "huge");
    if (!r.size || r.size > (1u << 30) || r.secs <= 0 || r.secs > 60 ||
        (r.piece && r.size / r.piece > IOV_MAX_USED))
        die("arguments");
    bool two = !strcmp(r.mode, "pull2"), stage = !strcmp(r.mode, "stage");
    if (stage) {
        size_t area = getenv("STAGE_BYTES") ? strtoull(getenv("STAGE_BYTES"), NULL, 0) : (1u << 20);
        if (!r.piece)
            r.piece = 64 * 1024;
        g_slots = area / r.piece;
        g_stage = mmap(NULL, sizeof *g_stage + g_slots * r.piece, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (g_stage == MAP_FAILED || !g_slots)
            die("stage area");
        memset(g_stage->data, 0, g_slots * r.piece);
    }
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl))
        die("socketpair");
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0)
        die("fork");
    bool am_child = child == 0;
    pin(am_child ? "SHM_CPU_SERVER" : "SHM_CPU_CLIENT", am_child ? 1 : 0);
    int fd = ctl[am_child ? 1 : 0];
    /* Each allocates its own after the fork (a huge page shared by the
     * fork would be split by the first write), then names it. */
    r.mine = buffer(2 * r.size, huge);
    uint64_t me = (uint64_t)(uintptr_t)r.mine;
    xfer(fd, &me, sizeof me, true);
    xfer(fd, &r.theirs, sizeof r.theirs, false);
    r.peer = am_child ? parent : child;
    double wall = 0, cpu = 0, bytes = 0, stats[3] = {0};
    if (am_child) {
        if (two) /* the second half, at once with the parent's first */
            bytes = loop(&r, r.size / 2, r.size - r.size / 2, &wall, &cpu);
        else if (stage)
            bytes = stage_recv(r.mine, r.size, r.piece, &wall, &cpu);
        double out[3] = {bytes, wall, cpu};
        xfer(fd, out, sizeof out, true);
        char c;
        xfer(fd, &c, 1, false); /* the parent is done with our memory */
        _exit(0);
    }
    bytes = loop(&r, 0, two ? r.size / 2 : r.size, &wall, &cpu);
    if (stage)
        atomic_store_explicit(&g_stage->stop, 1, memory_order_release);
    xfer(fd, stats, sizeof stats, false);
    char c = 0;
    xfer(fd, &c, 1, true);
    int ws;
    waitpid(child, &ws, 0);
    if (stage) {
        printf("%s %zu GB/s=%.3f cpu_GB/s=%.3f\n", r.mode, r.size, bytes / wall / 1e9,
               bytes / (cpu + stats[2]) / 1e9);
    } else if (two) {
        /* Each moved its half as often as it could; the pair moved the
         * smaller count of whole transfers per second. */
        double per_s = bytes / wall < stats[0] / stats[1] ? bytes / wall : stats[0] / stats[1];
        printf("%s %zu GB/s=%.3f cpu_GB/s=%.3f\n", r.mode, r.size, 2 * per_s / 1e9,
               (bytes + stats[0]) / (cpu + stats[2]) / 1e9);
    } else {
        printf("%s %zu GB/s=%.3f cpu_GB/s=%.3f\n", r.mode, r.size, bytes / wall / 1e9, bytes / cpu / 1e9);
    }
    return 0;
}
