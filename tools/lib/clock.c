/*
 * clock.c - see clock.h.
 */
#include "lib/clock.h"

uint64_t tc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tc_now_us(void)
{
    return tc_now_ns() / 1000u;
}

void tc_deadline(struct timespec *deadline, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    deadline->tv_sec += ms / 1000;
    deadline->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
}

void tc_cond_init_mono(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}
