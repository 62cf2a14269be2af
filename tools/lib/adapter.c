/*
 * adapter.c - see adapter.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/adapter.h"
#include "lib/adapters.h"
#include "lib/addr.h"
#include "lib/log.h"

/* The spec to open and how to name a failure: *given* as is, else the
 * name of the adapter owning `near`. False (after saying why) if none. */
static bool choose(struct tc_adapter *a, const char *given, const NDK_SOCKADDR *near, const char *near_what,
                   char *spec, size_t size)
{
    if (given) {
        snprintf(spec, size, "%s", given);
        a->described = tc_describe(given, &a->desc);
        return true;
    }
    if (!near || tc_is_wildcard(near)) {
        snprintf(spec, size, "lo");
        a->described = tc_describe("lo", &a->desc);
        return true;
    }
    char ip[TC_ADDR_BUF];
    tc_format_addr(near, false, ip, sizeof ip);
    a->described = tc_describe(ip, &a->desc);
    if (!a->described) {
        tc_complain(a->role, "no adapter has the address %s (%s); name one with -d", ip, near_what);
        tc_print_candidates();
        return false;
    }
    snprintf(spec, size, "%s", a->desc.Name);
    return true;
}

static ULONG socket_buffer_bytes;

void tc_adapter_socket_buffers(ULONG bytes)
{
    socket_buffer_bytes = bytes;
}

bool tc_adapter_open(struct tc_adapter *a, const char *role, const char *given, const NDK_SOCKADDR *near,
                     const char *near_what, ULONG flags, unsigned timeout_ms)
{
    memset(a, 0, sizeof *a);
    a->role = role;
    a->timeout_ms = timeout_ms;
    tc_calls_init(&a->grave, role, 0);
    char spec[IF_NAMESIZE + INET6_ADDRSTRLEN + 8];
    if (!choose(a, given, near, near_what, spec, sizeof spec))
        return false;
    NDK_OPEN_OPTIONS o = {
        .Size = sizeof o,
        .Flags = flags,
        .TcpConnectTimeoutMs = timeout_ms,
        .MpaReplyTimeoutMs = timeout_ms,
        .RtrTimeoutMs = timeout_ms,
        .DisconnectTimeoutMs = timeout_ms,
        .SocketSendBufferBytes = socket_buffer_bytes,
        .SocketReceiveBufferBytes = socket_buffer_bytes,
    };
    NTSTATUS st = ndk_open_adapter(spec, (NDK_VERSION){NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION},
                                   &o, &a->ad);
    if (st != STATUS_SUCCESS) {
        a->ad = NULL;
        tc_complain(role, "cannot open adapter '%s': %s", spec, tc_status_name(st));
        tc_print_candidates();
        return false;
    }
    if (a->described && strcmp(a->desc.Name, spec) != 0)
        snprintf(a->name, sizeof a->name, "%s (%s)", a->desc.Name, spec);
    else
        snprintf(a->name, sizeof a->name, "%s", spec);
    st = tc_query_info(a->ad, &a->info, NULL);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(role, "NdkQueryAdapterInfo", st, "adapter %s", a->name);
        return false;
    }
    return true;
}

unsigned tc_adapter_wait_ms(const struct tc_adapter *a)
{
    return a->timeout_ms + TC_GRACE_MS;
}

bool tc_adapter_source(const struct tc_adapter *a, const NDK_SOCKADDR *dst, const NDK_SOCKADDR *routed,
                       NDK_SOCKADDR *src)
{
    const NDK_SOCKADDR *pick = NULL;
    if (routed && a->described && tc_desc_owns(&a->desc, routed))
        pick = routed;
    else if (a->described)
        pick = tc_desc_pick_addr(&a->desc, dst->sa.sa_family, tc_is_link_local(dst));
    if (!pick) {
        tc_complain(a->role, "adapter %s has no %s address to connect from", a->name,
                    dst->sa.sa_family == AF_INET6 ? "IPv6" : "IPv4");
        return false;
    }
    *src = *pick;
    tc_sockaddr_set_port(src, 0);
    return true;
}

NTSTATUS tc_query_info(NDK_ADAPTER *ad, NDK_ADAPTER_INFO *info, ULONG *size)
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

struct closer {
    NDK_ADAPTER *ad;
    struct tc_calls calls;
    struct tc_completion *done;
};

static void *closer_main(void *arg)
{
    struct closer *k = arg;
    ndk_close_adapter(k->ad);
    tc_comp_signal(k->done, STATUS_SUCCESS, NULL);
    return NULL;
}

/* ndk_close_adapter on a thread of its own, waited for with a bound. */
static void close_bounded(struct tc_adapter *a)
{
    struct closer *k = calloc(1, sizeof *k);
    pthread_t t;
    if (k) {
        tc_calls_init(&k->calls, a->role, tc_adapter_wait_ms(a));
        k->ad = a->ad;
        k->done = tc_call(&k->calls, "ndk_close_adapter");
    }
    if (!k || !k->done || pthread_create(&t, NULL, closer_main, k) != 0) {
        ndk_close_adapter(a->ad);
    } else if (!tc_comp_wait(k->done, tc_adapter_wait_ms(a))) {
        /* The thread still uses k: it is left to the exit. */
        tc_library_problem(a->role, "ndk_close_adapter did not return within %u ms", tc_adapter_wait_ms(a));
        fflush(NULL);
        _exit(1);
    } else {
        pthread_join(t, NULL);
    }
    if (k)
        tc_calls_free(&k->calls);
    free(k);
}

void tc_adapter_close(struct tc_adapter *a)
{
    if (a->ad)
        close_bounded(a);
    a->ad = NULL;
    /* The adapter is closed: no callback can run any more. */
    tc_calls_free(&a->grave);
}
