/*
 * fake_threads.h - the fake kernel's threads (fake_threads.c): each
 * pthread_create of src/net/ (a progress engine) becomes a coroutine on
 * the fuzzing thread, run only inside fake_net_run. The layer under
 * fake_kernel.c: it knows nothing of descriptors or of the clock; what a
 * blocked coroutine waits for is a question it asks the caller of
 * fake_thread_block through the function given there.
 */
#ifndef NDK_FUZZ_FAKE_THREADS_H
#define NDK_FUZZ_FAKE_THREADS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Runs the progress engines until none has anything to do; false when
 * they are still busy after a bound of rounds (a livelock: a finding). */
bool fake_net_run(void);

/* What a blocked coroutine waits for: whether epfd has an event, or the
 * clock reached until (ns). */
typedef bool fake_ready_fn(int epfd, uint64_t until);
/* The engine coroutine calling epoll_wait on epfd found nothing to do
 * before until (ns) and gives the CPU back until ready(epfd, until);
 * false when not on a coroutine (the caller then returns at once). */
bool fake_thread_block(fake_ready_fn *ready, int epfd, uint64_t until);
/* epoll_wait returns to the engine: it has work. */
void fake_thread_worked(void);
/* The earliest deadline (ns) a live engine waits for; UINT64_MAX: none. */
uint64_t fake_threads_next_deadline(void);

int fake_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
int fake_pthread_join(pthread_t t, void **ret);
pthread_t fake_pthread_self(void);
int fake_pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t *set);

#endif
