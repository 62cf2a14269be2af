/*
 * fake_kernel.h - an in-memory stand-in for the operating system under
 * src/net/, linked only into the fuzz targets that drive connections
 * (fuzz_mpa_reply, fuzz_cm_events). The src/net/ files are compiled for them with
 * redirect.h force-included, which sends their socket, epoll, eventfd,
 * timerfd, clock, randomness and thread calls here; everything above
 * src/net/ runs unchanged.
 *
 * What it gives the fuzzers: no kernel TCP (a connection costs a few
 * allocations instead of a three-way handshake through the loopback
 * device), no threads (each progress engine is a coroutine on the fuzzing
 * thread that runs only when fake_net_run is called, so an input runs the
 * same way every time), and a clock that moves only when the fuzzer says
 * (fake_net_advance), so every timeout can fire between any two events
 * without sleeping.
 *
 * Sockets (TCP only; other families and types go to the real calls) model
 * what the provider relies on: a non-blocking connect answers EINPROGRESS
 * and the connection is made at once when something listens on the address
 * (else the socket ends with ECONNREFUSED); the accepting side finds it in
 * its listener's queue. Octets sent are readable by the peer at once. A
 * FIN (shutdown or close) makes the peer read 0 after its data; a close
 * with SO_LINGER {1, 0}, or with unread data, resets the peer (its data is
 * still read first, then ECONNRESET), as does sending to a closed peer.
 * Ports that are multiples of 61 are taken by "other processes": binding
 * one fails with EADDRINUSE.
 * Descriptors of the fake start at FAKE_FD_BASE; the real calls get every
 * other one.
 */
#ifndef NDK_FUZZ_FAKE_KERNEL_H
#define NDK_FUZZ_FAKE_KERNEL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "fake_threads.h"

#define FAKE_FD_BASE 100000

/* ---- for the fuzz targets ---- */

/* fake_net_run (fake_threads.h) runs the progress engines until none has
 * anything to do. */
/* Moves the clock ms forward, then runs the engines. */
bool fake_net_advance(uint64_t ms);
/* Runs the engines, moving the clock on to the next deadline they wait
 * for whenever they are idle, until done(arg); false when that has not
 * happened within max_ms of the clock (or the engines livelock). */
bool fake_net_wait(bool (*done)(void *), void *arg, uint64_t max_ms);
/* Starts the random source over: the same input gets the same ports and
 * STags. */
void fake_net_seed(uint64_t seed);
/* Open fake descriptors (a leak check between inputs). */
unsigned fake_net_open_fds(void);

/* ---- the calls redirect.h sends here (same contracts as the real ones) ---- */

int fake_socket(int domain, int type, int protocol);
int fake_bind(int fd, const struct sockaddr *a, socklen_t len);
int fake_listen(int fd, int backlog);
int fake_connect(int fd, const struct sockaddr *a, socklen_t len);
int fake_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags);
int fake_getsockname(int fd, struct sockaddr *a, socklen_t *len);
int fake_getpeername(int fd, struct sockaddr *a, socklen_t *len);
int fake_setsockopt(int fd, int level, int name, const void *v, socklen_t len);
int fake_getsockopt(int fd, int level, int name, void *v, socklen_t *len);
int fake_shutdown(int fd, int how);
int fake_close(int fd);
ssize_t fake_recv(int fd, void *buf, size_t len, int flags);
ssize_t fake_send(int fd, const void *buf, size_t len, int flags);
ssize_t fake_read(int fd, void *buf, size_t len);
ssize_t fake_write(int fd, const void *buf, size_t len);
ssize_t fake_readv(int fd, const struct iovec *iov, int n);
ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags);
int fake_epoll_create1(int flags);
int fake_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int fake_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout_ms);
int fake_eventfd(unsigned initval, int flags);
int fake_timerfd_create(int clockid, int flags);
struct itimerspec;
int fake_timerfd_settime(int fd, int flags, const struct itimerspec *n, struct itimerspec *old);
int fake_clock_gettime(clockid_t clk, struct timespec *ts);
ssize_t fake_getrandom(void *buf, size_t len, unsigned flags);
/* pthread_create, _join, _self and _setaffinity_np: fake_threads.h. */

#endif
