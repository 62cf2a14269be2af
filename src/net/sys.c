#include "net/sys.h"

#include <sched.h>

#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

bool ndk_random(void *buf, size_t len)
{
    return getrandom(buf, len, 0) == (ssize_t)len;
}

uint64_t ndk_random_seed(uint64_t salt)
{
    uint64_t seed = 0;
    if (!ndk_random(&seed, sizeof seed)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ salt;
    }
    return seed ? seed : 1;
}

bool ndk_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
    return pthread_create(t, NULL, fn, arg) == 0;
}

void ndk_thread_join(pthread_t t)
{
    pthread_join(t, NULL);
}

void ndk_cond_init_monotonic(pthread_cond_t *c)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(c, &ca);
    pthread_condattr_destroy(&ca);
}

void ndk_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t deadline_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                          .tv_nsec = (long)(deadline_ns % 1000000000u)};
    pthread_cond_timedwait(c, m, &ts);
}

int ndk_thread_cpus(int *cpus, int max)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && n < max; cpu++)
        if (CPU_ISSET(cpu, &set))
            cpus[n++] = cpu;
    return n;
}

bool ndk_thread_pin(pthread_t t, int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return false;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof set, &set) == 0;
}

int ndk_thread_cpu_now(void)
{
    return sched_getcpu();
}

uint64_t ndk_netns_id(void)
{
    /* Per thread: setns(2) moves one thread, not the process. */
    struct stat st;
    if (stat("/proc/thread-self/ns/net", &st) != 0)
        return 0;
    return ((uint64_t)st.st_dev << 32) ^ (uint64_t)st.st_ino;
}
