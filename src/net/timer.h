/*
 * timer.h - the monotonic clock in nanoseconds, and one-shot timers as
 * descriptors the event loop watches (loop_watch_add, net/loop.h), for the
 * layers above net/: CQ interrupt moderation (cq.c) holds a notification
 * back until a deadline.
 */
#ifndef NDK_NET_TIMER_H
#define NDK_NET_TIMER_H

#include <stdint.h>

/* CLOCK_MONOTONIC, in nanoseconds. */
uint64_t ndk_mono_ns(void);
/* A disarmed one-shot timer on the monotonic clock: a non-blocking
 * descriptor that turns readable when it expires; -1 when none can be made. */
int ndk_timer_open(void);
/* Arms the timer to expire at deadline_ns (ndk_mono_ns's clock). */
void ndk_timer_arm(int fd, uint64_t deadline_ns);
/* Consumes an expiry, so the descriptor is no longer readable; one already
 * consumed by a re-arm is no error. */
void ndk_timer_ack(int fd);
void ndk_timer_close(int fd);

#endif
