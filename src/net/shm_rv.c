/* Abstract UNIX sockets of the same-host rendezvous (net/shm_rv.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/shm_rv.h"

size_t shm_rv_os_name(const struct sockaddr *ep, char *buf, size_t len)
{
    char a[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (ep->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ep;
        inet_ntop(AF_INET, &in->sin_addr, a, sizeof a);
        port = ntohs(in->sin_port);
    } else if (ep->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ep;
        inet_ntop(AF_INET6, &in6->sin6_addr, a, sizeof a);
        port = ntohs(in6->sin6_port);
    }
    int n = snprintf(buf, len, ep->sa_family == AF_INET6 ? "ndk-shm:[%s]:%u" : "ndk-shm:%s:%u", a, port);
    return n < 0 ? 0 : (size_t)n < len ? (size_t)n : len - 1;
}

/* The abstract address of name: a leading NUL, no terminating one. */
static socklen_t abstract_addr(const struct sockaddr *ep, struct sockaddr_un *un)
{
    memset(un, 0, sizeof *un);
    un->sun_family = AF_UNIX;
    size_t n = shm_rv_os_name(ep, un->sun_path + 1, sizeof un->sun_path - 1);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int new_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
}

int shm_rv_os_listen(const struct sockaddr *ep)
{
    struct sockaddr_un un;
    socklen_t l = abstract_addr(ep, &un);
    int fd = new_socket();
    if (fd < 0)
        return fd;
    if (bind(fd, (struct sockaddr *)&un, l) < 0 || listen(fd, 64) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

static int connect_name(const struct sockaddr *ep)
{
    struct sockaddr_un un;
    socklen_t l = abstract_addr(ep, &un);
    int fd = new_socket();
    if (fd < 0)
        return fd;
    int r;
    do
        r = connect(fd, (struct sockaddr *)&un, l);
    while (r < 0 && errno == EINTR);
    if (r < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    return fd;
}

int shm_rv_os_connect(const struct sockaddr *ep)
{
    int fd = connect_name(ep);
    if (fd != -ECONNREFUSED)
        return fd;
    /* A listener on the wildcard address is named after it. */
    struct sockaddr_storage any;
    memset(&any, 0, sizeof any);
    if (ep->sa_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&any;
        in->sin_family = AF_INET;
        in->sin_port = ((const struct sockaddr_in *)ep)->sin_port;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&any;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = ((const struct sockaddr_in6 *)ep)->sin6_port;
    }
    return connect_name((const struct sockaddr *)&any);
}

int shm_rv_os_accept(int lfd)
{
    int fd;
    do
        fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}
