#include "net/stream.h"

#include <errno.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

static ssize_t result(ssize_t r)
{
    return r < 0 ? -(errno == EWOULDBLOCK ? EAGAIN : errno) : r;
}

ssize_t ndk_stream_recv(int fd, void *buf, size_t len)
{
    ssize_t r;
    do
        r = result(recv(fd, buf, len, MSG_DONTWAIT));
    while (r == -EINTR);
    return r;
}

ssize_t ndk_stream_send(int fd, const void *buf, size_t len)
{
    ssize_t r;
    do
        r = result(send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT));
    while (r == -EINTR);
    return r;
}

ssize_t ndk_stream_readv(int fd, const struct iovec *iov, int n)
{
    /* A lone buffer (a header, or a busy poller's look at an idle socket)
     * goes through recv: it skips the iovec import and file-position
     * handling of readv, which cost more than the read itself here. */
    if (n == 1)
        return ndk_stream_recv(fd, iov[0].iov_base, iov[0].iov_len);
    ssize_t r;
    do
        r = result(readv(fd, iov, n));
    while (r == -EINTR);
    return r;
}

ssize_t ndk_stream_writev(int fd, const struct iovec *iov, int n)
{
    /* A lone buffer (a small FPDU staged whole, an RTR, a Terminate) goes
     * through send, as ndk_stream_readv's through recv: sendmsg would copy
     * in the message header and import the iovec first. */
    if (n == 1)
        return ndk_stream_send(fd, iov[0].iov_base, iov[0].iov_len);
    struct msghdr m = {.msg_iov = (struct iovec *)(uintptr_t)iov, .msg_iovlen = (size_t)n};
    ssize_t r;
    do
        r = result(sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT));
    while (r == -EINTR);
    return r;
}

int ndk_stream_peek(int fd)
{
    uint8_t b;
    ssize_t r;
    do
        r = result(recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT));
    while (r == -EINTR);
    return (int)r;
}

void ndk_stream_shutdown_write(int fd)
{
    shutdown(fd, SHUT_WR);
}

void ndk_stream_shutdown_read(int fd)
{
    shutdown(fd, SHUT_RD);
}

size_t ndk_stream_mss(int fd)
{
    int mss = 0;
    socklen_t len = sizeof mss;
    if (getsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &len) < 0 || mss < 128)
        mss = 1460;
    return (size_t)mss;
}

int ndk_stream_error(int fd)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        return errno;
    return err;
}

void ndk_stream_drain(int fd)
{
    uint8_t buf[4096];
    for (int i = 0; i < 16; i++) {
        if (ndk_stream_recv(fd, buf, sizeof buf) <= 0)
            break;
    }
}

void ndk_stream_close(int fd)
{
    close(fd);
}
