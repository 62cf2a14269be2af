/*
 * stream.h - the byte stream over a connected, non-blocking TCP socket:
 * what the connector, the listener and the iWARP transport's socket
 * (connector.c, struct ndk_transport) read and write. Every call returns
 * at once: the octets moved, 0 for the end of the stream (reads), or
 * -errno, with -EAGAIN for "would block" (an interrupted call is retried).
 */
#ifndef NDK_NET_STREAM_H
#define NDK_NET_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

ssize_t ndk_stream_recv(int fd, void *buf, size_t len);
ssize_t ndk_stream_send(int fd, const void *buf, size_t len);
/* Gathering and scattering forms: one system call for the whole list. */
ssize_t ndk_stream_readv(int fd, const struct iovec *iov, int n);
ssize_t ndk_stream_writev(int fd, const struct iovec *iov, int n);
/* Looks without reading: 1 when input waits, 0 at the peer's FIN, -errno
 * (-EAGAIN: nothing yet). */
int ndk_stream_peek(int fd);
/* Our FIN (nothing more will be written). */
void ndk_stream_shutdown_write(int fd);
/* No more input: the socket then reports the end of its input, which
 * wakes whoever watches it (a way to hand teardown to the progress thread
 * from any thread, without the FIN a write shutdown would send). */
void ndk_stream_shutdown_read(int fd);
/* The connection's maximum segment size now, or 1460 when unknown. */
size_t ndk_stream_mss(int fd);
/* The socket's pending error (SO_ERROR): 0 when none, else an errno. */
int ndk_stream_error(int fd);
/* Reads and drops what the peer sent after its FIN, so that a close sends
 * a FIN and not an RST (Linux resets when unread data is left). Bounded. */
void ndk_stream_drain(int fd);
void ndk_stream_close(int fd);

#endif
