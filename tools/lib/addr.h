/*
 * addr.h - IPv4/IPv6 socket addresses as NDK takes them: parsing and
 * resolving, printing, ports, and the route the kernel would take.
 */
#ifndef TC_ADDR_H
#define TC_ADDR_H

#include <arpa/inet.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>

#include <ndk/ndk.h>

/* Room for "[address%interface]:port". */
#define TC_ADDR_BUF (INET6_ADDRSTRLEN + IF_NAMESIZE + 16)

ULONG tc_sockaddr_len(const NDK_SOCKADDR *a);
unsigned tc_sockaddr_port(const NDK_SOCKADDR *a);
void tc_sockaddr_set_port(NDK_SOCKADDR *a, unsigned port);
bool tc_is_link_local(const NDK_SOCKADDR *a);
/* 0.0.0.0 or ::, which name no adapter. */
bool tc_is_wildcard(const NDK_SOCKADDR *a);
/* Same IP (ports ignored); a link-local scope counts only when both set one. */
bool tc_same_ip(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b);

/* "127.0.0.1", "::1", "fe80::1%eth0"; with_port: "127.0.0.1:7174", "[::1]:7174". */
const char *tc_format_addr(const NDK_SOCKADDR *a, bool with_port, char *buf, size_t size);

/* An IPv4/IPv6 address or a host name (family AF_UNSPEC, AF_INET or
 * AF_INET6) into *out, port 0. numeric_only: no name lookup. */
bool tc_parse_addr(const char *text, int family, bool numeric_only, NDK_SOCKADDR *out);
/* tc_parse_addr with lookup; on failure "PROG: [ROLE: ]cannot resolve WHAT
 * 'TEXT': reason". */
bool tc_resolve(const char *role, const char *what, const char *text, int family, NDK_SOCKADDR *out);

/* The local address (port 0) the kernel would send from to reach dst: a
 * connected UDP socket picks the route without sending anything. */
bool tc_route_source(const NDK_SOCKADDR *dst, NDK_SOCKADDR *src);

#endif
