/*
 * addr.c - see addr.h.
 */
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/log.h"

ULONG tc_sockaddr_len(const NDK_SOCKADDR *a)
{
    return a->sa.sa_family == AF_INET6 ? (ULONG)sizeof a->in6 : (ULONG)sizeof a->in4;
}

unsigned tc_sockaddr_port(const NDK_SOCKADDR *a)
{
    return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in4.sin_port);
}

void tc_sockaddr_set_port(NDK_SOCKADDR *a, unsigned port)
{
    if (a->sa.sa_family == AF_INET6)
        a->in6.sin6_port = htons((uint16_t)port);
    else
        a->in4.sin_port = htons((uint16_t)port);
}

bool tc_is_link_local(const NDK_SOCKADDR *a)
{
    return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&a->in6.sin6_addr);
}

bool tc_is_wildcard(const NDK_SOCKADDR *a)
{
    if (a->sa.sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&a->in6.sin6_addr);
    return a->in4.sin_addr.s_addr == htonl(INADDR_ANY);
}

bool tc_same_ip(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
{
    if (a->sa.sa_family != b->sa.sa_family)
        return false;
    if (a->sa.sa_family == AF_INET)
        return a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr;
    if (a->sa.sa_family != AF_INET6)
        return false;
    if (memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof a->in6.sin6_addr) != 0)
        return false;
    return !a->in6.sin6_scope_id || !b->in6.sin6_scope_id ||
           a->in6.sin6_scope_id == b->in6.sin6_scope_id;
}

const char *tc_format_addr(const NDK_SOCKADDR *a, bool with_port, char *buf, size_t size)
{
    char ip[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "?";
    if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in4.sin_addr, ip, sizeof ip);
    } else if (a->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof ip);
        char ifname[IF_NAMESIZE];
        if (a->in6.sin6_scope_id && if_indextoname(a->in6.sin6_scope_id, ifname)) {
            size_t n = strlen(ip);
            snprintf(ip + n, sizeof ip - n, "%%%s", ifname);
        }
    } else {
        snprintf(ip, sizeof ip, "<family %u>", (unsigned)a->sa.sa_family);
    }
    if (!with_port)
        snprintf(buf, size, "%s", ip);
    else if (a->sa.sa_family == AF_INET6)
        snprintf(buf, size, "[%s]:%u", ip, tc_sockaddr_port(a));
    else
        snprintf(buf, size, "%s:%u", ip, tc_sockaddr_port(a));
    return buf;
}

/* getaddrinfo's answer (0 on success) with *out filled. */
static int lookup(const char *text, int family, bool numeric_only, NDK_SOCKADDR *out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = numeric_only ? AI_NUMERICHOST : 0;
    int rc = getaddrinfo(text, NULL, &hints, &res);
    if (rc != 0)
        return rc;
    rc = EAI_ADDRFAMILY;
    for (struct addrinfo *ai = res; ai && rc; ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            ai->ai_addrlen <= sizeof *out) {
            memset(out, 0, sizeof *out);
            memcpy(out, ai->ai_addr, ai->ai_addrlen);
            rc = 0;
        }
    }
    freeaddrinfo(res);
    return rc;
}

bool tc_parse_addr(const char *text, int family, bool numeric_only, NDK_SOCKADDR *out)
{
    return lookup(text, family, numeric_only, out) == 0;
}

bool tc_resolve(const char *role, const char *what, const char *text, int family, NDK_SOCKADDR *out)
{
    int rc = lookup(text, family, false, out);
    if (rc == 0)
        return true;
    tc_complain(role, "cannot resolve %s '%s'%s: %s", what, text,
                family == AF_INET6 ? " as IPv6" : family == AF_INET ? " as IPv4" : "",
                gai_strerror(rc));
    return false;
}

bool tc_route_source(const NDK_SOCKADDR *dst, NDK_SOCKADDR *src)
{
    NDK_SOCKADDR to = *dst;
    if (tc_sockaddr_port(&to) == 0)
        tc_sockaddr_set_port(&to, 9); /* any port will do: nothing is sent */
    int fd = socket(to.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    socklen_t len = sizeof *src;
    bool ok =
        connect(fd, &to.sa, tc_sockaddr_len(&to)) == 0 && getsockname(fd, &src->sa, &len) == 0;
    close(fd);
    if (ok)
        tc_sockaddr_set_port(src, 0);
    return ok;
}
