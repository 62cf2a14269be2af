/*
 * adapters.c - see adapters.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/adapters.h"
#include "lib/addr.h"
#include "lib/log.h"

NTSTATUS tc_list_adapters(NDK_ADAPTER_DESCRIPTION **out, ULONG *count)
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

bool tc_desc_owns(const NDK_ADAPTER_DESCRIPTION *d, const NDK_SOCKADDR *a)
{
    for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++)
        if (tc_same_ip(&d->Addresses[k], a))
            return true;
    return false;
}

int tc_find_adapter(const NDK_ADAPTER_DESCRIPTION *list, ULONG n, const char *spec)
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

bool tc_describe(const char *spec, NDK_ADAPTER_DESCRIPTION *out)
{
    NDK_ADAPTER_DESCRIPTION *list;
    ULONG n;
    if (tc_list_adapters(&list, &n) != STATUS_SUCCESS)
        return false;
    int i = tc_find_adapter(list, n, spec);
    if (i >= 0)
        *out = list[i];
    free(list);
    return i >= 0;
}

const NDK_SOCKADDR *tc_desc_pick_addr(const NDK_ADAPTER_DESCRIPTION *d, int family, bool want_link_local)
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

const char *tc_format_desc_addrs(const NDK_ADAPTER_DESCRIPTION *d, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++) {
        char ip[TC_ADDR_BUF];
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

void tc_print_candidates(void)
{
    NDK_ADAPTER_DESCRIPTION *list;
    ULONG n;
    NTSTATUS st = tc_list_adapters(&list, &n);
    if (st != STATUS_SUCCESS) {
        tc_complain(NULL, "cannot list the adapters: %s", tc_status_name(st));
        return;
    }
    char line[2048];
    size_t used = (size_t)snprintf(line, sizeof line, "%s", n ? "" : " none");
    for (ULONG i = 0; i < n && used < sizeof line; i++) {
        char addrs[TC_ADDRS_BUF];
        used += (size_t)snprintf(line + used, sizeof line - used, "%s %s (%s)%s", i ? "," : "",
                                 list[i].Name, tc_format_desc_addrs(&list[i], addrs, sizeof addrs),
                                 (list[i].Flags & NDK_ADAPTER_DESC_UP) ? "" : " [DOWN]");
    }
    tc_complain(NULL, "the adapters here (-d takes a name or an address):%s", line);
    free(list);
}

const char *tc_technology_name(NDK_RDMA_TECHNOLOGY t)
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
