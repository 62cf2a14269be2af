/*
 * toolcommon.h - helpers shared by ndkinfo, ndkping and ndkperf.
 *
 * Everything here is static: each tool is one translation unit, and the tools
 * use only the public headers, exactly as an outside consumer would. The
 * functions are marked unused so that a tool which needs only some of them
 * still builds with -Werror.
 */
#ifndef NDK_TOOLCOMMON_H
#define NDK_TOOLCOMMON_H

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ndk/ndk.h>

#define TC_FN static __attribute__((unused))
#define TC_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Big-endian fields of the tools' own messages and private data (and of
 * rping's and perftest's, which use the same order). */
TC_FN void tc_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

TC_FN uint32_t tc_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

TC_FN void tc_put_be64(uint8_t *p, uint64_t v)
{
    tc_put_be32(p, (uint32_t)(v >> 32));
    tc_put_be32(p + 4, (uint32_t)v);
}

TC_FN uint64_t tc_get_be64(const uint8_t *p)
{
    return (uint64_t)tc_get_be32(p) << 32 | tc_get_be32(p + 4);
}

/* The version both tools ask for: the newest one libndk implements. */
#define TC_NDK_VERSION ((NDK_VERSION){NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION})

/*
 * Our own status for "the call returned STATUS_PENDING and its completion
 * callback did not come within the tool's timeout". It must not collide with
 * a provider status (the provider reports its own timeouts as
 * STATUS_IO_TIMEOUT), so it uses the customer bit (0x20000000), which no
 * Microsoft-defined NTSTATUS sets.
 */
#define TC_STATUS_NO_CALLBACK ((NTSTATUS)0xE0DE0001L)

TC_FN const char *tc_status_name(NTSTATUS st)
{
    if (st == TC_STATUS_NO_CALLBACK)
        return "no completion callback within the timeout";
    return ndk_status_name(st);
}

TC_FN uint64_t tc_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ------------------------------------------------------------------------ */
/* Completions                                                              */
/* ------------------------------------------------------------------------ */

/*
 * One asynchronous NDK call (create, request, close) or one event
 * (disconnect). Each call gets its own completion and never shares it, so
 * that a callback arriving late (after we gave up waiting) cannot be taken
 * for the completion of a later call, and so that we can check afterwards
 * that the provider kept the callback rules (exactly once after
 * STATUS_PENDING, never after an inline return).
 */
struct tc_completion {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    const char *what;          /* the call's name, for diagnostics */
    unsigned calls;            /* callbacks received so far */
    bool issued;               /* the call has returned */
    bool pending;              /* ... with STATUS_PENDING */
    NTSTATUS returned;         /* what the call returned */
    NTSTATUS status;           /* status of the first callback */
    NDK_OBJECT_HEADER *object; /* object of a create completion */
    ULONG reason;              /* ProviderDisconnectReason of an _EX event */
    uint64_t t_callback;       /* tc_now_us() at the first callback */
};

/* A condition variable whose timed waits run on the monotonic clock, so
 * that a change of the wall clock cannot shorten or stretch them. */
TC_FN void tc_cond_init_mono(pthread_cond_t *cond)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cond, &attr);
    pthread_condattr_destroy(&attr);
}

TC_FN void tc_comp_init(struct tc_completion *c, const char *what)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    tc_cond_init_mono(&c->cond);
    c->what = what;
}

TC_FN void tc_comp_destroy(struct tc_completion *c)
{
    pthread_cond_destroy(&c->cond);
    pthread_mutex_destroy(&c->lock);
}

TC_FN void tc_comp_signal(struct tc_completion *c, NTSTATUS st, NDK_OBJECT_HEADER *obj,
                          ULONG reason)
{
    uint64_t now = tc_now_us();
    pthread_mutex_lock(&c->lock);
    if (c->calls++ == 0) {
        c->status = st;
        c->object = obj;
        c->reason = reason;
        c->t_callback = now;
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

/* The callbacks, with the exact NDKPI signatures; Context is the completion. */
TC_FN VOID tc_on_request(PVOID Context, NTSTATUS Status)
{
    tc_comp_signal(Context, Status, NULL, 0);
}

TC_FN VOID tc_on_create(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *pNdkObject)
{
    tc_comp_signal(Context, Status, pNdkObject, 0);
}

TC_FN VOID tc_on_close(PVOID Context)
{
    tc_comp_signal(Context, STATUS_SUCCESS, NULL, 0);
}

TC_FN VOID tc_on_event(PVOID Context)
{
    tc_comp_signal(Context, STATUS_SUCCESS, NULL, 0);
}

/* Fills *deadline with now + ms on the monotonic clock. */
TC_FN void tc_deadline(struct timespec *deadline, unsigned ms)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    deadline->tv_sec += ms / 1000;
    deadline->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (deadline->tv_nsec >= 1000000000L) {
        deadline->tv_sec++;
        deadline->tv_nsec -= 1000000000L;
    }
}

/* Waits at most ms for the first callback; true if it came. */
TC_FN bool tc_comp_wait(struct tc_completion *c, unsigned ms)
{
    struct timespec deadline;
    tc_deadline(&deadline, ms);
    pthread_mutex_lock(&c->lock);
    while (c->calls == 0) {
        if (pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT)
            break;
    }
    bool done = c->calls > 0;
    pthread_mutex_unlock(&c->lock);
    return done;
}

/* Non-blocking: has the callback come? */
TC_FN bool tc_comp_fired(struct tc_completion *c)
{
    pthread_mutex_lock(&c->lock);
    bool done = c->calls > 0;
    pthread_mutex_unlock(&c->lock);
    return done;
}

/*
 * Finishes an asynchronous call that returned st: an inline result is final
 * (no callback may follow, reference 4.1); STATUS_PENDING waits at most ms
 * for the callback and returns its status, or TC_STATUS_NO_CALLBACK.
 */
TC_FN NTSTATUS tc_comp_finish(struct tc_completion *c, NTSTATUS st, unsigned ms)
{
    pthread_mutex_lock(&c->lock);
    c->issued = true;
    c->returned = st;
    c->pending = st == STATUS_PENDING;
    pthread_mutex_unlock(&c->lock);
    if (st != STATUS_PENDING)
        return st;
    if (!tc_comp_wait(c, ms))
        return TC_STATUS_NO_CALLBACK;
    return c->status;
}

/* The object of a successful create: from the callback when it pended,
 * else what the create stored through its output pointer (reference 4.2). */
TC_FN void *tc_comp_object(struct tc_completion *c, void *inline_object)
{
    return c->pending ? (void *)c->object : inline_object;
}

/* Microseconds from start to the completion: the callback's own timestamp
 * when the call pended (so the wake-up of the waiting thread is not
 * counted), else the time the call returned (*inline_end). */
TC_FN uint64_t tc_comp_elapsed(struct tc_completion *c, uint64_t start, uint64_t inline_end)
{
    uint64_t end = c->pending && c->calls ? c->t_callback : inline_end;
    return end > start ? end - start : 0;
}

/*
 * Checks, once no more callbacks can come for the call's object (it was
 * closed), that the provider kept the callback rules of reference 4.1/L2:
 * exactly one callback after STATUS_PENDING, none after an inline result.
 * Event completions (never "issued") may fire at most once (5.2.7).
 * Prints each violation and returns how many there were.
 */
TC_FN int tc_comp_audit(struct tc_completion *c, const char *prog)
{
    int problems = 0;
    pthread_mutex_lock(&c->lock);
    if (c->issued && !c->pending && c->calls > 0) {
        fprintf(stderr,
                "%s: library problem: %s returned %s inline, but its completion callback "
                "was called too (%u time%s)\n",
                prog, c->what, ndk_status_name(c->returned), c->calls, c->calls == 1 ? "" : "s");
        problems++;
    } else if (c->calls > 1) {
        fprintf(stderr, "%s: library problem: %s: callback called %u times, expected once\n", prog,
                c->what, c->calls);
        problems++;
    }
    pthread_mutex_unlock(&c->lock);
    return problems;
}

/* Closes an object and waits (bounded) for its close completion. Closes
 * never fail (reference 4.3): anything but SUCCESS/PENDING is a library
 * problem, reported as such. */
TC_FN NTSTATUS tc_close(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj, struct tc_completion *c,
                        unsigned ms, const char *prog)
{
    NTSTATUS st = fn(obj, tc_on_close, c);
    if (st != STATUS_SUCCESS && st != STATUS_PENDING) {
        fprintf(stderr,
                "%s: library problem: %s returned %s; closes return only STATUS_SUCCESS or "
                "STATUS_PENDING\n",
                prog, c->what, ndk_status_name(st));
        return st;
    }
    st = tc_comp_finish(c, st, ms);
    if (st == TC_STATUS_NO_CALLBACK)
        fprintf(stderr, "%s: %s: no close completion within %u ms\n", prog, c->what, ms);
    return st;
}

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */
/* ------------------------------------------------------------------------ */

TC_FN ULONG tc_sockaddr_len(const NDK_SOCKADDR *a)
{
    return a->sa.sa_family == AF_INET6 ? (ULONG)sizeof a->in6 : (ULONG)sizeof a->in4;
}

TC_FN unsigned tc_sockaddr_port(const NDK_SOCKADDR *a)
{
    return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in4.sin_port);
}

TC_FN void tc_sockaddr_set_port(NDK_SOCKADDR *a, unsigned port)
{
    if (a->sa.sa_family == AF_INET6)
        a->in6.sin6_port = htons((uint16_t)port);
    else
        a->in4.sin_port = htons((uint16_t)port);
}

TC_FN bool tc_is_link_local(const NDK_SOCKADDR *a)
{
    return a->sa.sa_family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&a->in6.sin6_addr);
}

/* "127.0.0.1", "::1", "fe80::1%eth0"; with_port: "127.0.0.1:7174", "[::1]:7174". */
TC_FN const char *tc_format_addr(const NDK_SOCKADDR *a, bool with_port, char *buf, size_t size)
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

/*
 * Parses an IPv4/IPv6 address or a host name (family AF_UNSPEC, AF_INET or
 * AF_INET6). numeric_only: no name lookup (used to tell "lo" from an
 * address). Returns true and fills *out, port 0.
 */
TC_FN bool tc_parse_addr(const char *text, int family, bool numeric_only, NDK_SOCKADDR *out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = numeric_only ? AI_NUMERICHOST : 0;
    if (getaddrinfo(text, NULL, &hints, &res) != 0 || !res)
        return false;
    bool ok = false;
    for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
            ai->ai_addrlen <= sizeof *out) {
            memset(out, 0, sizeof *out);
            memcpy(out, ai->ai_addr, ai->ai_addrlen);
            ok = true;
        }
    }
    freeaddrinfo(res);
    return ok;
}

/* Same IP (ports ignored); a link-local scope counts only when both set one. */
TC_FN bool tc_same_ip(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
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

/*
 * The local address the kernel would use to reach dst: a connected UDP
 * socket picks a route and a source address without sending anything.
 * Used to find the adapter a client connects from.
 */
TC_FN bool tc_route_source(const NDK_SOCKADDR *dst, NDK_SOCKADDR *src)
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

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * ndk_list_adapters into a malloc'ed array (*out, free() it). Probes the count
 * first, then retries while interfaces appear between the two calls.
 */
TC_FN NTSTATUS tc_list_adapters(NDK_ADAPTER_DESCRIPTION **out, ULONG *count)
{
    *out = NULL;
    *count = 0;
    ULONG n = 0;
    NTSTATUS st = ndk_list_adapters(NULL, &n);
    for (int attempt = 0; attempt < 8; attempt++) {
        if (st != STATUS_SUCCESS && st != STATUS_BUFFER_TOO_SMALL)
            return st;
        if (n == 0 && st == STATUS_SUCCESS)
            return STATUS_SUCCESS;
        ULONG cap = n + 4; /* room for an interface that appears meanwhile */
        NDK_ADAPTER_DESCRIPTION *list = calloc(cap, sizeof *list);
        if (!list)
            return STATUS_NO_MEMORY;
        n = cap;
        st = ndk_list_adapters(list, &n);
        if (st == STATUS_SUCCESS) {
            *out = list;
            *count = n;
            return STATUS_SUCCESS;
        }
        free(list);
    }
    return st;
}

TC_FN bool tc_desc_owns(const NDK_ADAPTER_DESCRIPTION *d, const NDK_SOCKADDR *a)
{
    for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++)
        if (tc_same_ip(&d->Addresses[k], a))
            return true;
    return false;
}

/*
 * Finds the adapter that ndk_open_adapter(spec) would open: by interface name,
 * else by one of its addresses; any 127.0.0.0/8 address belongs to the
 * loopback adapter (ndk.h). Returns the index or -1.
 */
TC_FN int tc_find_adapter(const NDK_ADAPTER_DESCRIPTION *list, ULONG n, const char *spec)
{
    for (ULONG i = 0; i < n; i++)
        if (strncmp(list[i].Name, spec, sizeof list[i].Name) == 0)
            return (int)i;
    NDK_SOCKADDR a;
    if (!tc_parse_addr(spec, AF_UNSPEC, true, &a))
        return -1;
    for (ULONG i = 0; i < n; i++)
        if (tc_desc_owns(&list[i], &a))
            return (int)i;
    if (a.sa.sa_family == AF_INET && (ntohl(a.in4.sin_addr.s_addr) >> 24) == 127)
        for (ULONG i = 0; i < n; i++)
            if (list[i].Flags & NDK_ADAPTER_DESC_LOOPBACK)
                return (int)i;
    return -1;
}

/* The adapter's first address of the family, preferring one whose
 * link-local-ness matches want_link_local. NULL if it has none. */
TC_FN const NDK_SOCKADDR *tc_desc_pick_addr(const NDK_ADAPTER_DESCRIPTION *d, int family,
                                            bool want_link_local)
{
    const NDK_SOCKADDR *fallback = NULL;
    for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++) {
        const NDK_SOCKADDR *a = &d->Addresses[k];
        if (a->sa.sa_family != family)
            continue;
        if (tc_is_link_local(a) == want_link_local)
            return a;
        if (!fallback)
            fallback = a;
    }
    return fallback;
}

/* "127.0.0.1, ::1" */
TC_FN const char *tc_format_desc_addrs(const NDK_ADAPTER_DESCRIPTION *d, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++) {
        char ip[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
        tc_format_addr(&d->Addresses[k], false, ip, sizeof ip);
        int w = snprintf(buf + used, size - used, "%s%s", k ? ", " : "", ip);
        if (w < 0 || (size_t)w >= size - used)
            break;
        used += (size_t)w;
    }
    if (!d->AddressCount)
        snprintf(buf, size, "no address");
    return buf;
}

/* "available adapters: lo (127.0.0.1, ::1), eth0 (192.0.2.2, ...)", after a
 * failed open, so the user sees what -d accepts. */
TC_FN void tc_print_available(FILE *f)
{
    NDK_ADAPTER_DESCRIPTION *list;
    ULONG n;
    NTSTATUS st = tc_list_adapters(&list, &n);
    if (st != STATUS_SUCCESS) {
        fprintf(f, "available adapters: cannot list them: %s\n", ndk_status_name(st));
        return;
    }
    fprintf(f, "available adapters:");
    if (n == 0)
        fprintf(f, " none");
    for (ULONG i = 0; i < n; i++) {
        char addrs[NDK_MAX_ADAPTER_ADDRESSES * (INET6_ADDRSTRLEN + IF_NAMESIZE + 4)];
        fprintf(f, "%s %s (%s)%s", i ? "," : "", list[i].Name,
                tc_format_desc_addrs(&list[i], addrs, sizeof addrs),
                (list[i].Flags & NDK_ADAPTER_DESC_UP) ? "" : " [DOWN]");
    }
    fprintf(f, "\n");
    free(list);
}

/* Opens spec; on failure prints "PROG: cannot open adapter 'spec': STATUS"
 * and the available adapters. */
TC_FN NTSTATUS tc_open_adapter(const char *prog, const char *spec, const NDK_OPEN_OPTIONS *opt,
                               NDK_ADAPTER **out)
{
    *out = NULL;
    NTSTATUS st = ndk_open_adapter(spec, TC_NDK_VERSION, opt, out);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "%s: cannot open adapter '%s': %s\n", prog, spec, ndk_status_name(st));
        tc_print_available(stderr);
        *out = NULL;
    }
    return st;
}

/*
 * NdkQueryAdapterInfo the documented way: probe the size with a NULL
 * buffer, then query into a buffer at least that large. *size gets the
 * size the probe reported.
 */
TC_FN NTSTATUS tc_query_info(NDK_ADAPTER *ad, NDK_ADAPTER_INFO *info, ULONG *size)
{
    ULONG need = 0;
    NTSTATUS st = ad->Dispatch->NdkQueryAdapterInfo(ad, NULL, &need);
    if (st != STATUS_BUFFER_TOO_SMALL && st != STATUS_SUCCESS)
        return st;
    if (size)
        *size = need;
    /* A larger structure from a newer provider: keep the fields we know. */
    ULONG cap = need > sizeof *info ? need : (ULONG)sizeof *info;
    void *buf = calloc(1, cap);
    if (!buf)
        return STATUS_NO_MEMORY;
    ULONG got = cap;
    st = ad->Dispatch->NdkQueryAdapterInfo(ad, buf, &got);
    if (st == STATUS_SUCCESS)
        memcpy(info, buf, sizeof *info);
    free(buf);
    return st;
}

TC_FN const char *tc_technology_name(NDK_RDMA_TECHNOLOGY t)
{
    switch (t) {
    case NdkUndefined:
        return "Undefined";
    case NdkiWarp:
        return "iWARP";
    case NdkInfiniBand:
        return "InfiniBand";
    case NdkRoCE:
        return "RoCE";
    case NdkRoCEv2:
        return "RoCEv2";
    default:
        return "unknown";
    }
}

#endif
