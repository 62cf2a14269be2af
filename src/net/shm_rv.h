/*
 * net/shm_rv.h - the operating system under the same-host rendezvous
 * (docs/shm.md, Selection): abstract UNIX sockets (SOCK_SEQPACKET, so each
 * message arrives whole) named after a TCP endpoint, "ndk-shm:<address>:
 * <port>". Abstract names belong to the network namespace and are never
 * files. Every function returns a descriptor (non-blocking, close-on-exec)
 * or -errno.
 */
#ifndef NDK_NET_SHM_RV_H
#define NDK_NET_SHM_RV_H

#include <stddef.h>
#include <sys/socket.h>

/* The name of TCP endpoint ep (IPv4 or IPv6) into buf; its length. */
size_t shm_rv_os_name(const struct sockaddr *ep, char *buf, size_t len);
/* Listens on the name of a listener's TCP endpoint. */
int shm_rv_os_listen(const struct sockaddr *ep);
/* Connects to the name of the TCP peer ep, or to that of a listener on
 * the wildcard address with ep's port. Never waits: a listener with a
 * full queue is no listener. */
int shm_rv_os_connect(const struct sockaddr *ep);
/* Accepts one connection; -EAGAIN when none is queued. */
int shm_rv_os_accept(int lfd);

#endif
