/*
 * net/tcp_owner.h - whether a descriptor another process passed us (with
 * SCM_RIGHTS over a UNIX socket) is the TCP socket of a given 4-tuple in
 * our network namespace. The shared-memory selection (docs/shm.md,
 * Selection) uses it to prove that the process at the other end of a UNIX
 * socket holds the socket at the other end of a TCP connection of ours,
 * without a byte on the TCP stream and without reading its descriptors:
 * only a holder of a socket can pass it, and an established TCP 4-tuple
 * belongs to one socket of a namespace.
 */
#ifndef NDK_NET_TCP_OWNER_H
#define NDK_NET_TCP_OWNER_H

#include <stdint.h>
#include <sys/socket.h>

/* The cookie of the network namespace socket fd belongs to
 * (SO_NETNS_COOKIE, Linux 5.14): 0, or -errno (-ENOPROTOOPT: the kernel
 * cannot tell). */
int tcp_owner_netns(int fd, uint64_t *cookie);

/* 1 when fd is a connected TCP socket of the namespace netns (a cookie of
 * tcp_owner_netns) whose own address is exactly local and whose peer is
 * exactly remote; 0 when it is anything else (not a socket, another kind
 * of socket, another 4-tuple, a socket not or no longer connected, another
 * namespace); -errno when it cannot be told. */
int tcp_owner_is(int fd, const struct sockaddr *local, const struct sockaddr *remote, uint64_t netns);

#endif
