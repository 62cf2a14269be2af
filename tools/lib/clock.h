/*
 * clock.h - the monotonic clock, deadlines on it, and condition variables
 * that wait on it (so that a change of the wall clock cannot shorten or
 * stretch a bounded wait).
 */
#ifndef TC_CLOCK_H
#define TC_CLOCK_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

uint64_t tc_now_ns(void);
uint64_t tc_now_us(void);
/* *deadline = now + ms, for pthread_cond_timedwait on a tc_cond_init_mono
 * condition variable. */
void tc_deadline(struct timespec *deadline, unsigned ms);
void tc_cond_init_mono(pthread_cond_t *cond);

#endif
