/*
 * ports.h - reservations of local endpoints (address + port), process-wide.
 *
 * NDKPI keeps an endpoint's address and port reserved until the last object
 * using it is closed (docs/rules.md E1-E15): a listener's port stays taken
 * while connectors accepted over it live, even after the listening socket is
 * gone. The kernel does not know about that, so the reservations are kept
 * here, for every adapter of the process.
 */
#ifndef NDK_NET_PORTS_H
#define NDK_NET_PORTS_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

struct port_res;

enum port_kind { PORT_LISTENER, PORT_SHARED, PORT_CONNECTOR };

/* The first and last port handed out for port 0 (NdkListen, NdkConnect,
 * NdkCreateSharedEndpoint): the IANA dynamic range, as Windows uses. */
#define NDK_EPHEMERAL_FIRST 49152
#define NDK_EPHEMERAL_LAST 65535

/*
 * Reserves *addr and binds fd to it. Port 0 picks a free port in the
 * ephemeral range. On success *addr holds the port bound and *out the
 * reservation (one reference). Returns STATUS_SUCCESS,
 * STATUS_SHARING_VIOLATION (reserved here or bound elsewhere),
 * STATUS_INVALID_ADDRESS, STATUS_TOO_MANY_ADDRESSES (no ephemeral port free)
 * or STATUS_INSUFFICIENT_RESOURCES. reuse sets SO_REUSEADDR first (needed
 * where several sockets share the port: shared endpoints, listeners).
 */
NTSTATUS ports_reserve(NDK_SOCKADDR *addr, enum port_kind kind, int fd, bool reuse,
                       struct port_res **out);
void ports_ref(struct port_res *r);
void ports_unref(struct port_res *r);

/* For white-box tests: the next search for a free port (port 0) starts at
 * this one instead of a random one, once. */
void ports_start_next_search_at(uint16_t port);

#endif
