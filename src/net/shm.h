/*
 * net/shm.h - the operating system under the shared-memory transport
 * (docs/shm.md): the shared region (an anonymous memfd, never a named
 * file), eventfd doorbells, timerfd tickers, the peer's pidfd, descriptors
 * passed over a UNIX socket, the peer's credentials, and single-copy
 * transfers into and out of the peer's memory (process_vm_readv /
 * process_vm_writev).
 * Every function returns 0 (or a count) on success, -errno on failure.
 */
#ifndef NDK_NET_SHM_H
#define NDK_NET_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* A new sealed region of len octets, mapped shared at *map; returns its fd. */
int shm_os_region_create(size_t len, void **map);
/* Maps a region received from the peer: it must be a sealed memfd of
 * exactly len octets. */
int shm_os_region_map(int fd, size_t len, void **map);
void shm_os_region_unmap(void *map, size_t len);

/* An eventfd (non-blocking, close-on-exec); its fd. */
int shm_os_doorbell_new(void);
void shm_os_doorbell_ring(int fd);
/* Reads a doorbell, or a ticker, back to not readable. */
void shm_os_doorbell_drain(int fd);
/* A ticker: a timerfd (non-blocking, close-on-exec) that, once set,
 * becomes readable every period_ms (0: never again). */
int shm_os_ticker_new(void);
void shm_os_ticker_set(int fd, int period_ms);
/* A pidfd of pid: readable once that process ended. */
int shm_os_pidfd(pid_t pid);
/* A pidfd of the process at the other end of the UNIX socket sock, whose
 * pid is pid: the very process, by reference (SO_PEERPIDFD, Linux 6.5),
 * else, on a kernel without that option, shm_os_pidfd(pid). */
int shm_os_peer_pidfd(int sock, pid_t pid);
/* Whether the process of pidfd ended (its pidfd is readable, or there is
 * no pidfd to tell); no wait. */
bool shm_os_ended(int pidfd);
void shm_os_close(int fd);
pid_t shm_os_self(void);

/* Sends len octets and nfds descriptors (SCM_RIGHTS) in one message. */
int shm_os_send(int sock, const void *buf, size_t len, const int *fds, int nfds);
/* Receives one message of exactly len octets with at most maxfds
 * descriptors (*nfds: how many came), waiting at most timeout_ms (0: not
 * at all, one non-blocking receive); -ETIMEDOUT when none came. */
int shm_os_recv(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds, int timeout_ms);
/* The peer's pid, and whether it runs as our user (SO_PEERCRED). */
int shm_os_peer(int sock, pid_t *pid, bool *same_user);

/* Moves every octet between our iovecs and the peer's (its addresses),
 * looping over partial transfers: pull reads the peer into ours, push
 * writes ours into the peer. The peer is named by pid, which names
 * another process once the peer ended and was reaped: the caller looks
 * at the peer's pidfd first (shm_os_ended; xp_shm.c, peer_move). */
int shm_os_pull(pid_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr);
int shm_os_push(pid_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr);

/* Waits while the shared word still holds value (the peer is in the
 * middle of a transfer it announced there), at most timeout_ms: 0 once it
 * changed, -ESRCH when the process of pidfd ended, -ETIMEDOUT. */
int shm_os_wait_while(const uint64_t *word, uint64_t value, int pidfd, int timeout_ms);

#endif
