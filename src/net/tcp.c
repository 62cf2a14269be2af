#include "net/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

bool ndk_sockaddr_import(const struct sockaddr *sa, ULONG len, NDK_SOCKADDR *out)
{
    if (!sa || !out)
        return false;
    memset(out, 0, sizeof *out);
    if (sa->sa_family == AF_INET) {
        if (len < sizeof(struct sockaddr_in))
            return false;
        memcpy(&out->in4, sa, sizeof out->in4);
        return true;
    }
    if (sa->sa_family == AF_INET6 || sa->sa_family == NDK_WINDOWS_AF_INET6) {
        if (len < sizeof(struct sockaddr_in6))
            return false;
        memcpy(&out->in6, sa, sizeof out->in6);
        out->in6.sin6_family = AF_INET6;
        return true;
    }
    return false;
}

socklen_t ndk_sockaddr_len(const NDK_SOCKADDR *a)
{
    return a->sa.sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

uint16_t ndk_sockaddr_port(const NDK_SOCKADDR *a)
{
    return ntohs(a->sa.sa_family == AF_INET ? a->in4.sin_port : a->in6.sin6_port);
}

void ndk_sockaddr_set_port(NDK_SOCKADDR *a, uint16_t port)
{
    if (a->sa.sa_family == AF_INET)
        a->in4.sin_port = htons(port);
    else
        a->in6.sin6_port = htons(port);
}

bool ndk_sockaddr_is_any(const NDK_SOCKADDR *a)
{
    if (a->sa.sa_family == AF_INET)
        return a->in4.sin_addr.s_addr == htonl(INADDR_ANY);
    return IN6_IS_ADDR_UNSPECIFIED(&a->in6.sin6_addr);
}

bool ndk_sockaddr_same_ip(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
{
    if (a->sa.sa_family != b->sa.sa_family)
        return false;
    if (a->sa.sa_family == AF_INET)
        return a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr;
    return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, sizeof a->in6.sin6_addr) == 0;
}

bool ndk_sockaddr_equal(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
{
    return ndk_sockaddr_same_ip(a, b) && ndk_sockaddr_port(a) == ndk_sockaddr_port(b);
}

bool ndk_sockaddr_parse(const char *s, uint16_t default_port, NDK_SOCKADDR *out)
{
    char host[INET6_ADDRSTRLEN + 2];
    const char *port_s = NULL;
    memset(out, 0, sizeof *out);
    if (!s || !*s)
        return false;
    if (s[0] == '[') {
        const char *end = strchr(s, ']');
        if (!end || (size_t)(end - s - 1) >= sizeof host)
            return false;
        memcpy(host, s + 1, (size_t)(end - s - 1));
        host[end - s - 1] = 0;
        if (end[1] == ':')
            port_s = end + 2;
        else if (end[1])
            return false;
    } else {
        const char *colon = strchr(s, ':');
        /* One colon means host:port; more are an IPv6 address without port. */
        if (colon && !strchr(colon + 1, ':')) {
            if ((size_t)(colon - s) >= sizeof host)
                return false;
            memcpy(host, s, (size_t)(colon - s));
            host[colon - s] = 0;
            port_s = colon + 1;
        } else {
            if (strlen(s) >= sizeof host)
                return false;
            strcpy(host, s);
        }
    }
    unsigned long port = default_port;
    if (port_s) {
        char *e;
        port = strtoul(port_s, &e, 10);
        if (!*port_s || *e || port > 65535)
            return false;
    }
    if (inet_pton(AF_INET, host, &out->in4.sin_addr) == 1) {
        out->in4.sin_family = AF_INET;
        out->in4.sin_port = htons((uint16_t)port);
        return true;
    }
    if (inet_pton(AF_INET6, host, &out->in6.sin6_addr) == 1) {
        out->in6.sin6_family = AF_INET6;
        out->in6.sin6_port = htons((uint16_t)port);
        return true;
    }
    return false;
}

NTSTATUS ndk_sockaddr_copy_out(const NDK_SOCKADDR *a, struct sockaddr *out, ULONG *len)
{
    if (!len)
        return STATUS_INVALID_PARAMETER;
    ULONG need = (ULONG)ndk_sockaddr_len(a);
    if (!out || *len < need) {
        *len = need;
        return STATUS_BUFFER_TOO_SMALL;
    }
    memcpy(out, a, need);
    *len = need;
    return STATUS_SUCCESS;
}

int ndk_tcp_socket(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

/* A receive buffer below this is not a system default (Linux starts at
 * 128 KiB, 85 KiB before 4.20, and autotunes upwards): someone made it
 * small on purpose. */
#define SMALL_RCVBUF (64 * 1024)

void ndk_tcp_set_buffers(int fd, ULONG sndbuf, ULONG rcvbuf)
{
    int v;
    if (sndbuf) {
        v = sndbuf > INT32_MAX / 2 ? INT32_MAX / 2 : (int)sndbuf;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof v);
    }
    if (rcvbuf) {
        v = rcvbuf > INT32_MAX / 2 ? INT32_MAX / 2 : (int)rcvbuf;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof v);
    }
    /*
     * With a receive buffer of a few segments, Linux can leave its window
     * stuck below one MSS: it reopens the window only by at least one MSS
     * (receiver-side silly-window avoidance, RFC 1122 4.2.3.3), while the
     * sender waits for a whole MSS of window (4.2.3.4) and
     * falls back to a zero-window probe per retransmission timeout, one
     * segment per 200 ms. Small FPDUs (an RTR, a Read Request, a short Send)
     * shift the window off MSS multiples and trigger it. A segment of at
     * most an eighth of the buffer (the window is about half of it) always
     * fits a stuck window. The MSS goes out in our SYN, so it bounds the
     * peer's segments to us as well as ours; FPDUs follow it (MULPDU).
     */
    socklen_t len = sizeof v;
    if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len) == 0 && v > 0 && v < SMALL_RCVBUF) {
        int mss = v / 8;
        setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &mss, sizeof mss);
    }
}

/* An int socket option, the value capped at max (Linux refuses more). */
static void set_capped(int fd, int level, int name, ULONG v, ULONG max)
{
    int i = (int)(v > max ? max : v);
    setsockopt(fd, level, name, &i, sizeof i);
}

void ndk_tcp_set_liveness(int fd, const NDK_OPEN_OPTIONS *o)
{
    if (o->TcpUserTimeoutMs != NDK_OPEN_OPTION_SYSTEM)
        set_capped(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, o->TcpUserTimeoutMs, INT32_MAX);
    if (o->KeepAliveIdleSeconds == NDK_OPEN_OPTION_SYSTEM)
        return;
    set_capped(fd, SOL_SOCKET, SO_KEEPALIVE, 1, 1);
    set_capped(fd, IPPROTO_TCP, TCP_KEEPIDLE, o->KeepAliveIdleSeconds, 32767);
    if (o->KeepAliveIntervalSeconds != NDK_OPEN_OPTION_SYSTEM)
        set_capped(fd, IPPROTO_TCP, TCP_KEEPINTVL, o->KeepAliveIntervalSeconds, 32767);
    /* With a user timeout, Linux ends a connection whose probes went
     * unanswered for that long and never counts them (tcp(7),
     * TCP_USER_TIMEOUT): the count would be a system call per connecting
     * socket that changes nothing. */
    bool user_timeout = o->TcpUserTimeoutMs != NDK_OPEN_OPTION_SYSTEM && o->TcpUserTimeoutMs != 0;
    if (o->KeepAliveProbes != NDK_OPEN_OPTION_SYSTEM && !user_timeout)
        set_capped(fd, IPPROTO_TCP, TCP_KEEPCNT, o->KeepAliveProbes, 127);
}

void ndk_tcp_abort(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

NTSTATUS ndk_status_from_errno(int err, enum ndk_errno_phase phase)
{
    switch (err) {
    case 0:
        return STATUS_SUCCESS;
    case EADDRINUSE:
        return STATUS_SHARING_VIOLATION;
    case EADDRNOTAVAIL:
        /* At bind time the address is not ours; at connect time the
         * kernel found the 4-tuple taken. */
        return phase == NDK_PHASE_BIND ? STATUS_INVALID_ADDRESS : STATUS_ADDRESS_ALREADY_EXISTS;
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case EACCES:
    case EPERM:
        return STATUS_CONNECTION_REFUSED;
    case ENETUNREACH:
    case ENETDOWN:
        return STATUS_NETWORK_UNREACHABLE;
    case EHOSTUNREACH:
    case EHOSTDOWN:
        return STATUS_HOST_UNREACHABLE;
    case ETIMEDOUT:
        return STATUS_IO_TIMEOUT;
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE:
        return STATUS_INSUFFICIENT_RESOURCES;
    case EAFNOSUPPORT:
    case EINVAL:
        return STATUS_INVALID_ADDRESS;
    default:
        return STATUS_UNSUCCESSFUL;
    }
}

static int find_or_add(NDK_ADAPTER_DESCRIPTION *tmp, int *n, int max, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(tmp[i].Name, name) == 0)
            return i;
    if (*n >= max)
        return -1;
    NDK_ADAPTER_DESCRIPTION *d = &tmp[(*n)++];
    memset(d, 0, sizeof *d);
    snprintf(d->Name, sizeof d->Name, "%s", name);
    d->IfIndex = if_nametoindex(name);
    return *n - 1;
}

int ndk_if_list(NDK_ADAPTER_DESCRIPTION *list, unsigned cap)
{
    struct ifaddrs *ifa0;
    if (getifaddrs(&ifa0) < 0)
        return -errno;
    enum { MAXIF = 64 };
    NDK_ADAPTER_DESCRIPTION *tmp = calloc(MAXIF, sizeof *tmp);
    if (!tmp) {
        freeifaddrs(ifa0);
        return -ENOMEM;
    }
    int n = 0;
    int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    for (struct ifaddrs *ifa = ifa0; ifa; ifa = ifa->ifa_next) {
        if (!ifa->ifa_addr)
            continue;
        int fam = ifa->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        int i = find_or_add(tmp, &n, MAXIF, ifa->ifa_name);
        if (i < 0)
            continue;
        NDK_ADAPTER_DESCRIPTION *d = &tmp[i];
        if (ifa->ifa_flags & IFF_UP)
            d->Flags |= NDK_ADAPTER_DESC_UP;
        if (ifa->ifa_flags & IFF_LOOPBACK)
            d->Flags |= NDK_ADAPTER_DESC_LOOPBACK;
        if (d->AddressCount < NDK_MAX_ADAPTER_ADDRESSES) {
            NDK_SOCKADDR *a = &d->Addresses[d->AddressCount++];
            memset(a, 0, sizeof *a);
            memcpy(a, ifa->ifa_addr, fam == AF_INET ? sizeof a->in4 : sizeof a->in6);
        }
        if (!d->Mtu && sock >= 0) {
            struct ifreq ifr;
            memset(&ifr, 0, sizeof ifr);
            snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifa->ifa_name);
            if (ioctl(sock, SIOCGIFMTU, &ifr) == 0)
                d->Mtu = (ULONG)ifr.ifr_mtu;
        }
    }
    if (sock >= 0)
        close(sock);
    freeifaddrs(ifa0);
    for (int i = 0; i < n && (unsigned)i < cap; i++)
        list[i] = tmp[i];
    free(tmp);
    return n;
}

int ndk_tcp_holder_socket(int family)
{
    int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
}

int ndk_tcp_bind(int fd, const NDK_SOCKADDR *a, bool reuse)
{
    int one = 1;
    if (reuse)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    return bind(fd, &a->sa, ndk_sockaddr_len(a)) < 0 ? -errno : 0;
}

void ndk_tcp_v6only(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
}

int ndk_tcp_connect(int fd, const NDK_SOCKADDR *dst)
{
    if (connect(fd, &dst->sa, ndk_sockaddr_len(dst)) < 0 && errno != EINPROGRESS)
        return -errno;
    return 0;
}

int ndk_tcp_listen(int fd, int backlog)
{
    return listen(fd, backlog) < 0 ? -errno : 0;
}

int ndk_tcp_accept(int lfd, NDK_SOCKADDR *peer)
{
    socklen_t plen = sizeof *peer;
    /* TCP_NODELAY comes from the listener (ndk_tcp_socket): Linux copies
     * it into every socket the listener accepts. */
    int fd = accept4(lfd, &peer->sa, &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

void ndk_tcp_local_addr(int fd, NDK_SOCKADDR *out)
{
    socklen_t len = sizeof *out;
    getsockname(fd, &out->sa, &len);
}

void ndk_tcp_local_addr_of(int fd, const NDK_SOCKADDR *bound, NDK_SOCKADDR *out)
{
    bool known = (bound->sa.sa_family == AF_INET || bound->sa.sa_family == AF_INET6) &&
                 !ndk_sockaddr_is_any(bound) && ndk_sockaddr_port(bound) != 0;
    if (known)
        *out = *bound;
    else
        ndk_tcp_local_addr(fd, out);
}
