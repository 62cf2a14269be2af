/*
 * sys.h - the operating system's threads, condition variables on the
 * monotonic clock and randomness, for the layers above net/ (clocks:
 * loop_now_ms, net/loop.h).
 */
#ifndef NDK_NET_SYS_H
#define NDK_NET_SYS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fills buf with len octets from the kernel's random source; false when
 * it could not (buf is then unchanged or partly filled). */
bool ndk_random(void *buf, size_t len);
/* A seed for a generator: random, or when the kernel gives none, the
 * monotonic clock mixed with salt (never 0). */
uint64_t ndk_random_seed(uint64_t salt);
/* Runs fn(arg) on a new thread; false when it cannot be started. */
bool ndk_thread_start(pthread_t *t, void *(*fn)(void *), void *arg);
void ndk_thread_join(pthread_t t);
/* Initialises c for timed waits on the monotonic clock (ndk_mono_ns,
 * net/timer.h): setting the wall clock moves no deadline. */
void ndk_cond_init_monotonic(pthread_cond_t *c);
/* Waits on c, with m held, until it is signalled or the monotonic clock
 * reaches deadline_ns; c was initialised by ndk_cond_init_monotonic. */
void ndk_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t deadline_ns);
/* The CPUs the calling thread may run on (its affinity mask), ascending,
 * at most max of them; returns how many, 0 when the mask cannot be read. */
int ndk_thread_cpus(int *cpus, int max);
/* Keeps thread t on one CPU; false when the system refuses (the thread
 * then runs wherever the scheduler puts it). */
bool ndk_thread_pin(pthread_t t, int cpu);
/* The CPU the calling thread runs on now (a moment later it may be on
 * another, unless pinned), -1 when it cannot be told. No system call
 * where the kernel publishes it (rseq, the vDSO). */
int ndk_thread_cpu_now(void);
/* The network namespace the calling thread is in (the inode of its
 * /proc namespace file), 0 when it cannot be told: an interface index
 * names an interface only within one namespace. */
uint64_t ndk_netns_id(void);

#endif
