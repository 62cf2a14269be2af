/*
 * redirect.h - force-included (-include) into the src/net/ files of the fuzz
 * targets built on the fake kernel (fake_kernel.h): the system headers
 * come first, so their declarations keep their names, then every call the
 * provider makes to the operating system is renamed to the fake's.
 */
#ifndef NDK_FUZZ_REDIRECT_H
#define NDK_FUZZ_REDIRECT_H

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "fake_kernel.h"

#define socket(...) fake_socket(__VA_ARGS__)
#define bind(...) fake_bind(__VA_ARGS__)
#define listen(...) fake_listen(__VA_ARGS__)
#define connect(...) fake_connect(__VA_ARGS__)
#define accept4(...) fake_accept4(__VA_ARGS__)
#define getsockname(...) fake_getsockname(__VA_ARGS__)
#define getpeername(...) fake_getpeername(__VA_ARGS__)
#define setsockopt(...) fake_setsockopt(__VA_ARGS__)
#define getsockopt(...) fake_getsockopt(__VA_ARGS__)
#define shutdown(...) fake_shutdown(__VA_ARGS__)
#define close(...) fake_close(__VA_ARGS__)
#define recv(...) fake_recv(__VA_ARGS__)
#define send(...) fake_send(__VA_ARGS__)
#define read(...) fake_read(__VA_ARGS__)
#define write(...) fake_write(__VA_ARGS__)
#define readv(...) fake_readv(__VA_ARGS__)
#define sendmsg(...) fake_sendmsg(__VA_ARGS__)
#define epoll_create1(...) fake_epoll_create1(__VA_ARGS__)
#define epoll_ctl(...) fake_epoll_ctl(__VA_ARGS__)
#define epoll_wait(...) fake_epoll_wait(__VA_ARGS__)
#define eventfd(...) fake_eventfd(__VA_ARGS__)
#define timerfd_create(...) fake_timerfd_create(__VA_ARGS__)
#define timerfd_settime(...) fake_timerfd_settime(__VA_ARGS__)
#define clock_gettime(...) fake_clock_gettime(__VA_ARGS__)
#define getrandom(...) fake_getrandom(__VA_ARGS__)
#define pthread_create(...) fake_pthread_create(__VA_ARGS__)
#define pthread_join(...) fake_pthread_join(__VA_ARGS__)
#define pthread_self(...) fake_pthread_self(__VA_ARGS__)
#define pthread_setaffinity_np(...) fake_pthread_setaffinity_np(__VA_ARGS__)

#endif
