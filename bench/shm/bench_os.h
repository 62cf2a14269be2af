/*
 * bench_os.h - what the two shared-memory benchmarks (shm_perf.c,
 * copy_ceiling.c) both ask of the OS: a clock in seconds and pinning to
 * the CPU an environment variable names, so both place their ends alike.
 */
#ifndef NDK_BENCH_SHM_OS_H
#define NDK_BENCH_SHM_OS_H

#include <sched.h>
#include <stdlib.h>
#include <time.h>

/* Clock id's time in seconds (CLOCK_MONOTONIC for wall time, a CPU-time
 * clock for CPU seconds). */
static inline double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Pins the calling thread to the CPU in env (dflt when unset). */
static inline void pin(const char *env, int dflt)
{
    const char *v = getenv(env);
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(v ? atoi(v) : dflt, &s);
    sched_setaffinity(0, sizeof s, &s);
}

#endif
