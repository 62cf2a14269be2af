/* line_pingpong - the floor under a small message's half round trip
 * between the two CPUs (docs/shm.md, Latency): two processes, one on each
 * CPU, bounce a message through memory both map, with nothing of libndk in
 * between. What is left is what any shared-memory transport pays:
 *
 *   flag   the receiver spins on the line the sender writes, which holds
 *          the message (one cache line each way: the least possible)
 *   ring   the sender writes the message's line, then a separate index
 *          line (as a ring with a head counter, shm_ring.h, does); the
 *          receiver spins on the index and then reads the message (two
 *          cache lines each way, the second read after the first)
 *   ringpf ring, with the receiver also loading the message's line while
 *          it spins on the index, so that the two misses overlap
 *
 *   line_pingpong MODE [ITERS]
 *
 * Prints "line_pingpong MODE ns=X": the median over blocks of 1000 round
 * trips of half a round trip, in nanoseconds. CPUs: SHM_CPU_CLIENT
 * (default 0) and SHM_CPU_SERVER (default 1), as shm_perf. A peer that
 * stops answering ends the run after 20 s.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_os.h"

#define LINE 64
#define BLOCK 1000
#define WAIT_S 20

/* One direction of the exchange: the message line, and the index line
 * the ring mode publishes through. */
struct way {
    _Alignas(LINE) uint64_t msg[LINE / 8];
    _Alignas(LINE) uint64_t index;
};
struct shared {
    struct way to_server, to_client;
};

static void die(const char *what)
{
    fprintf(stderr, "line_pingpong: %s\n", what);
    exit(1);
}

static void put(struct way *w, uint64_t seq, int ring)
{
    /* The whole line is written, as a small message's header is. */
    for (int i = LINE / 8 - 1; i >= 0; i--)
        __atomic_store_n(&w->msg[i], seq, i ? __ATOMIC_RELAXED : __ATOMIC_RELEASE);
    if (ring)
        __atomic_store_n(&w->index, seq, __ATOMIC_RELEASE);
}

/* Waits for message seq (alarm(2) bounds the run). */
static void get(struct way *w, uint64_t seq, int ring)
{
    uint64_t *spin = ring ? &w->index : &w->msg[0];
    while (__atomic_load_n(spin, __ATOMIC_ACQUIRE) != seq)
        if (ring == 2)
            __builtin_prefetch(w->msg);
    uint64_t sum = 0;
    for (int i = 0; i < LINE / 8; i++)
        sum += __atomic_load_n(&w->msg[i], __ATOMIC_RELAXED);
    if (sum != seq * (LINE / 8))
        die("torn message");
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "flag") && strcmp(argv[1], "ring") && strcmp(argv[1], "ringpf"))) {
        fprintf(stderr, "usage: line_pingpong flag|ring|ringpf [ITERS]\n");
        return 2;
    }
    int ring = !strcmp(argv[1], "ring") ? 1 : !strcmp(argv[1], "ringpf") ? 2 : 0;
    unsigned iters = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 200000;
    unsigned blocks = iters / BLOCK ? iters / BLOCK : 1;
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED)
        die("mmap");
    memset(s, 0, sizeof *s);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        pin("SHM_CPU_SERVER", 1);
        alarm(WAIT_S);
        for (uint64_t seq = 1; seq <= (uint64_t)blocks * BLOCK; seq++) {
            get(&s->to_server, seq, ring);
            put(&s->to_client, seq, ring);
        }
        _exit(0);
    }
    pin("SHM_CPU_CLIENT", 0);
    alarm(WAIT_S);
    double *t = calloc(blocks, sizeof *t);
    if (!t)
        die("out of memory");
    uint64_t seq = 0;
    for (unsigned b = 0; b < blocks; b++) {
        double a = clock_s(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < BLOCK; i++) {
            seq++;
            put(&s->to_server, seq, ring);
            get(&s->to_client, seq, ring);
        }
        t[b] = (clock_s(CLOCK_MONOTONIC) - a) / BLOCK / 2 * 1e9;
    }
    int ws;
    waitpid(child, &ws, 0);
    qsort(t, blocks, sizeof *t, cmp);
    printf("line_pingpong %s ns=%.1f\n", argv[1], t[blocks / 2]);
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : 1;
}
