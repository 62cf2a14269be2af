/*
 * adapters.h - the adapters ndk_list_adapters knows: listing them, finding
 * the one a name or an address means, and printing them as the candidates
 * when what the user named does not exist.
 */
#ifndef TC_ADAPTERS_H
#define TC_ADAPTERS_H

#include <stdbool.h>
#include <stddef.h>

#include <ndk/ndk.h>

/* Room for an adapter's addresses, comma-separated. */
#define TC_ADDRS_BUF (NDK_MAX_ADAPTER_ADDRESSES * (INET6_ADDRSTRLEN + IF_NAMESIZE + 4))

/* ndk_list_adapters into a malloc'ed array (*out, free() it); retries while
 * interfaces appear between the size probe and the call. */
NTSTATUS tc_list_adapters(NDK_ADAPTER_DESCRIPTION **out, ULONG *count);
/* The adapter that ndk_open_adapter(spec) opens: by interface name, else
 * by one of its addresses, and any 127.0.0.0/8 address means the loopback
 * adapter (ndk.h). Its index, or -1. */
int tc_find_adapter(const NDK_ADAPTER_DESCRIPTION *list, ULONG n, const char *spec);
/* tc_find_adapter over the current list, copied into *out. */
bool tc_describe(const char *spec, NDK_ADAPTER_DESCRIPTION *out);
bool tc_desc_owns(const NDK_ADAPTER_DESCRIPTION *d, const NDK_SOCKADDR *a);
/* The adapter's first address of the family, preferring one whose
 * link-local-ness matches; NULL if it has none. */
const NDK_SOCKADDR *tc_desc_pick_addr(const NDK_ADAPTER_DESCRIPTION *d, int family, bool want_link_local);
/* "127.0.0.1, ::1" (or "no address"). */
const char *tc_format_desc_addrs(const NDK_ADAPTER_DESCRIPTION *d, char *buf, size_t size);
/* "PROG: the adapters here: lo (127.0.0.1, ::1), eth0 (192.0.2.2) [DOWN]"
 * on stderr: what -d accepts. */
void tc_print_candidates(void);
const char *tc_technology_name(NDK_RDMA_TECHNOLOGY t);

#endif
