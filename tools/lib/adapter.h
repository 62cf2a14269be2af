/*
 * adapter.h - one open instance of an adapter, as a tool uses it: chosen
 * from what the user gave (-d) or from an address, opened with the
 * provider's timeouts set to the tool's --timeout, its NDK_ADAPTER_INFO
 * read the documented way, and closed with a bound (ndk_close_adapter
 * blocks until every callback has returned).
 */
#ifndef TC_ADAPTER_H
#define TC_ADAPTER_H

#include <net/if.h>
#include <stdbool.h>

#include <ndk/ndk.h>

#include "lib/calls.h"

/* The tools wait this much longer than the provider's own timeouts, so
 * that a provider timeout shows as the provider's status (STATUS_IO_TIMEOUT)
 * and a missing callback as such. */
#define TC_GRACE_MS 2000u

struct tc_adapter {
    const char *role;
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    char name[160];                /* "lo", or "lo (127.0.0.2)": what was opened */
    NDK_ADAPTER_DESCRIPTION desc;  /* its entry in ndk_list_adapters */
    bool described;
    unsigned timeout_ms;           /* the provider's connect, MPA, RTR and disconnect timeouts */
    struct tc_calls grave;         /* completions whose callbacks may still come */
};

/*
 * Opens an adapter for role: `given` (the user's -d) exactly as given, so
 * that the provider's own answer shows; else the adapter that owns `near`
 * (an address: the listen address, the route's source), opened by its
 * interface name since every 127.0.0.0/8 address belongs to the loopback
 * adapter; else "lo". `near_what` says what `near` is, for the message when
 * no adapter owns it. On failure the message names what was tried and the
 * candidates follow.
 */
bool tc_adapter_open(struct tc_adapter *a, const char *role, const char *given, const NDK_SOCKADDR *near,
                     const char *near_what, ULONG flags, unsigned timeout_ms);
/* SO_SNDBUF and SO_RCVBUF of the connections of adapters opened from now on
 * (NDK_OPEN_OPTIONS SocketSendBufferBytes / SocketReceiveBufferBytes; 0:
 * the system's). */
void tc_adapter_socket_buffers(ULONG bytes);
/* How long a tool waits for any completion: the provider's timeout plus
 * the grace. */
unsigned tc_adapter_wait_ms(const struct tc_adapter *a);
/* A source address on this adapter to reach dst: `routed` (the route's
 * source) when the adapter owns it, else its first address of dst's family.
 * Port 0. False (after saying why) when it has none. */
bool tc_adapter_source(const struct tc_adapter *a, const NDK_SOCKADDR *dst, const NDK_SOCKADDR *routed,
                       NDK_SOCKADDR *src);
/* NdkQueryAdapterInfo the documented way: a size probe, then the query
 * into at least that much. *size (may be NULL): what the probe reported. */
NTSTATUS tc_query_info(NDK_ADAPTER *ad, NDK_ADAPTER_INFO *info, ULONG *size);
/* Closes the adapter, waiting at most tc_adapter_wait_ms: if
 * ndk_close_adapter does not return by then, that is reported and the
 * process exits (status 1) at once. Then frees the graveyard. */
void tc_adapter_close(struct tc_adapter *a);

#endif
