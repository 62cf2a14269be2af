#include "net/timer.h"

#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

uint64_t ndk_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ndk_timer_open(void)
{
    return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
}

void ndk_timer_arm(int fd, uint64_t deadline_ns)
{
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                                          .tv_nsec = (long)(deadline_ns % 1000000000u)}};
    /* Cannot fail with a valid descriptor and a normalised absolute time. */
    timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL);
}

void ndk_timer_ack(int fd)
{
    uint64_t ticks;
    ssize_t r = read(fd, &ticks, sizeof ticks);
    (void)r; /* EAGAIN: a re-arm already consumed this expiry */
}

void ndk_timer_close(int fd)
{
    close(fd);
}
