/*
 * net/tcp_owner.h - who owns a TCP connection of this host: the socket of
 * a 4-tuple in our network namespace (NETLINK_SOCK_DIAG, inet_diag), its
 * inode and its owner's uid, and whether a given process holds a
 * descriptor of it (/proc/<pid>/fd, readable for processes of our user).
 * The shared-memory selection (docs/shm.md, Selection) uses both to prove
 * that the process at the other end of a UNIX socket is the one at the
 * other end of a TCP connection, without a byte on the TCP stream.
 */
#ifndef NDK_NET_TCP_OWNER_H
#define NDK_NET_TCP_OWNER_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* The TCP socket whose own address is local and whose peer is remote (both
 * IPv4 or both IPv6): its inode and uid. 0; -ENOENT when this namespace
 * has no such socket; another -errno when the kernel cannot be asked. */
int tcp_owner_lookup(const struct sockaddr *local, const struct sockaddr *remote, uint64_t *inode, uid_t *uid);

/* 1 when process pid holds a descriptor of the socket inode, 0 when it
 * does not, -errno when its descriptors cannot be read (another user, a
 * process that ended). */
int tcp_owner_holds(pid_t pid, uint64_t inode);

#endif
