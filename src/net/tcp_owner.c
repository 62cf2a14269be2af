/* Whether a passed descriptor is the TCP socket of a 4-tuple
 * (net/tcp_owner.h). */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "net/tcp_owner.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14, include/uapi/asm-generic/socket.h */
#endif

int tcp_owner_netns(int fd, uint64_t *cookie)
{
    socklen_t l = sizeof *cookie;
    if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, cookie, &l) < 0)
        return -errno;
    return l == sizeof *cookie ? 0 : -EPROTO;
}

static int sockopt_is(int fd, int name, int want)
{
    int v = -1;
    socklen_t l = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, name, &v, &l) < 0)
        return errno == ENOTSOCK ? 0 : -errno;
    return v == want;
}

/* Address and port of an IPv4 or IPv6 endpoint equal (the flow label and
 * scope of IPv6 are not part of a TCP 4-tuple's identity, but a scope
 * differs only between link-local addresses of two interfaces, which are
 * two addresses). */
static bool same_end(const struct sockaddr_storage *got, socklen_t len, const struct sockaddr *want)
{
    if (got->ss_family != want->sa_family)
        return false;
    if (want->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)got, *b = (const struct sockaddr_in *)want;
        return len >= sizeof *a && a->sin_port == b->sin_port && a->sin_addr.s_addr == b->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)got, *b = (const struct sockaddr_in6 *)want;
    return len >= sizeof *a && a->sin6_port == b->sin6_port && a->sin6_scope_id == b->sin6_scope_id &&
           memcmp(&a->sin6_addr, &b->sin6_addr, sizeof a->sin6_addr) == 0;
}

int tcp_owner_is(int fd, const struct sockaddr *local, const struct sockaddr *remote, uint64_t netns)
{
    if (local->sa_family != remote->sa_family ||
        (local->sa_family != AF_INET && local->sa_family != AF_INET6))
        return 0;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISSOCK(st.st_mode))
        return 0;
    int r;
    if ((r = sockopt_is(fd, SO_DOMAIN, local->sa_family)) != 1 || (r = sockopt_is(fd, SO_TYPE, SOCK_STREAM)) != 1 ||
        (r = sockopt_is(fd, SO_PROTOCOL, IPPROTO_TCP)) != 1)
        return r;
    /* The namespace first: a 4-tuple is unique only within one. */
    uint64_t ns = 0;
    if ((r = tcp_owner_netns(fd, &ns)) < 0)
        return r;
    if (ns != netns)
        return 0;
    struct sockaddr_storage a;
    socklen_t l = sizeof a;
    if (getsockname(fd, (struct sockaddr *)&a, &l) < 0)
        return -errno;
    if (!same_end(&a, l, local))
        return 0;
    /* A socket that is not connected (never, or no longer: closed, reset)
     * has no peer: ENOTCONN. */
    l = sizeof a;
    if (getpeername(fd, (struct sockaddr *)&a, &l) < 0)
        return errno == ENOTCONN ? 0 : -errno;
    return same_end(&a, l, remote);
}
