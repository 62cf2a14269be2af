/* tcp.h - socket helpers: addresses, non-blocking TCP sockets, errno to
 * NTSTATUS, and the interface list behind the adapters. */
#ifndef NDK_NET_TCP_H
#define NDK_NET_TCP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndk/ndk.h>

/* Windows passes AF_INET6 as 23; accepted as well as Linux's 10. */
#define NDK_WINDOWS_AF_INET6 23

/* Copies a consumer address after checking family and length; port and
 * address stay in network order. */
bool ndk_sockaddr_import(const struct sockaddr *sa, ULONG len, NDK_SOCKADDR *out);
socklen_t ndk_sockaddr_len(const NDK_SOCKADDR *a);
uint16_t ndk_sockaddr_port(const NDK_SOCKADDR *a); /* host order */
void ndk_sockaddr_set_port(NDK_SOCKADDR *a, uint16_t port);
bool ndk_sockaddr_is_any(const NDK_SOCKADDR *a);
/* Same family, address and port. */
bool ndk_sockaddr_equal(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b);
bool ndk_sockaddr_same_ip(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b);
/* Parses "1.2.3.4", "::1", with an optional port in "1.2.3.4:5" / "[::1]:5". */
bool ndk_sockaddr_parse(const char *s, uint16_t default_port, NDK_SOCKADDR *out);

/* The buffer-size pattern of NdkGetLocalAddress and NdkGetPeerAddress:
 * too small a buffer is STATUS_BUFFER_TOO_SMALL with the size needed. */
NTSTATUS ndk_sockaddr_copy_out(const NDK_SOCKADDR *a, struct sockaddr *out, ULONG *len);

/* Non-blocking, close-on-exec TCP socket with TCP_NODELAY (as siw: iWARP
 * messages must not wait for Nagle). Returns fd or -errno. */
int ndk_tcp_socket(int family);
/* Fixed socket buffer sizes (NDK_OPEN_OPTIONS SocketSendBufferBytes,
 * SocketReceiveBufferBytes; 0 leaves the system's autotuned default), and
 * with a small receive buffer (ours, or a small system default) an MSS to
 * match. Call before connect or listen: the handshake carries the window
 * scale and the MSS, and accepted sockets inherit the listener's settings. */
void ndk_tcp_set_buffers(int fd, ULONG sndbuf, ULONG rcvbuf);
/* Dead-peer detection (NDK_OPEN_OPTIONS TcpUserTimeoutMs and KeepAlive*,
 * resolved: never 0; NDK_OPEN_OPTION_SYSTEM leaves the system's; the probe
 * count only without a user timeout, which replaces it). Accepted sockets
 * inherit the listener's. */
void ndk_tcp_set_liveness(int fd, const NDK_OPEN_OPTIONS *o);
/* Close with an RST instead of a FIN (abortive teardown). */
void ndk_tcp_abort(int fd);
/* A blocking socket that is only ever bound: it holds a port against the
 * kernel's own ephemeral choices. Returns fd or -errno. */
int ndk_tcp_holder_socket(int family);
/* Binds fd to a, with SO_REUSEADDR first when reuse. 0 or -errno. */
int ndk_tcp_bind(int fd, const NDK_SOCKADDR *a, bool reuse);
/* An IPv6 socket that accepts IPv6 only (before bind). */
void ndk_tcp_v6only(int fd);
/* Starts a non-blocking connect: 0 (under way, or done) or -errno. */
int ndk_tcp_connect(int fd, const NDK_SOCKADDR *dst);
int ndk_tcp_listen(int fd, int backlog);
/* The next connection of a listening socket made by ndk_tcp_socket,
 * non-blocking, close-on-exec, with TCP_NODELAY (the listener's); fd or
 * -errno (-EAGAIN: none waits). */
int ndk_tcp_accept(int lfd, NDK_SOCKADDR *peer);
/* The address the socket is bound to. */
void ndk_tcp_local_addr(int fd, NDK_SOCKADDR *out);
/* The same, without asking the kernel when the socket (or the listener
 * that accepted it) was bound to `bound`, an address with its IP and port
 * both given: the connection's local address is then exactly that. */
void ndk_tcp_local_addr_of(int fd, const NDK_SOCKADDR *bound, NDK_SOCKADDR *out);

enum ndk_errno_phase {
    NDK_PHASE_BIND,    /* bind/listen of a local endpoint */
    NDK_PHASE_CONNECT, /* TCP handshake of an outgoing connection */
};
NTSTATUS ndk_status_from_errno(int err, enum ndk_errno_phase phase);

/* Reads the interfaces that have IPv4/IPv6 addresses. Returns the number of
 * adapters found (which may exceed cap: only cap entries are filled) or
 * -errno. */
int ndk_if_list(NDK_ADAPTER_DESCRIPTION *list, unsigned cap);

#endif
