/*
 * peer.h - what ndkping's modes that play an rdma-core tool's peer
 * (--rping, --ucmatose) share: the NDK options rdma_cm leaves to the
 * device, choosing and opening the adapter for a server's listen address
 * or a client's source, and the pause some siw servers need.
 */
#ifndef NDKPING_PEER_H
#define NDKPING_PEER_H

#include <stdbool.h>
#include <stdio.h>

#include <ndk/ndk.h>

#include "lib/adapter.h"
#include "lib/cmdline.h"

#define PEER_DEFAULT_TIMEOUT_MS 10000u

struct peer_opts {
    const char *adapter; /* --adapter */
    bool no_p2p, crc;
    bool relaxed_tx_gate;    /* the server speaks first (ucmatose) */
    unsigned timeout_ms;     /* --timeout */
    unsigned delay_first_ms; /* --delay-first */
};

/* The rows of these options in a tool's table (lib/cmdline.h), taking
 * them into *p. */
#define PEER_OPTIONS(p)                                                                                          \
    {.name = "adapter", .text = &(p)->adapter}, {.name = "no-p2p", .set_true = &(p)->no_p2p},                 \
        {.name = "crc", .set_true = &(p)->crc},                                                                 \
        {.name = "timeout", .number = &(p)->timeout_ms, .min = 1, .max = 3600000, .what = "timeout in ms"},     \
        {.name = "delay-first", .number = &(p)->delay_first_ms, .max = 60000, .what = "delay in ms"}

void peer_defaults(struct peer_opts *p);
/* The options that only a client takes: -1 fine, else TC_EXIT_USAGE. */
int peer_check_server(const struct peer_opts *p, const char *help_cmd);
/* The end of a --help text: these options, --help and --version, then
 * `note` (may be empty) and the exit statuses. */
void peer_usage(FILE *f, const char *note);

/* An address as the user gave it, and the option that gave it ("-a"). */
struct peer_addr {
    const char *text; /* NULL: not given */
    const char *option;
};

/* A server's adapter and listen address: `at` (not given: every IPv4
 * address, as rdma_cm's tools) and port. */
bool peer_open_server(struct tc_adapter *a, const struct peer_opts *p, struct peer_addr at, unsigned port,
                      NDK_SOCKADDR *addr);
/* A client's adapter and its source address to reach `to`:port: `from`
 * when given (-I, -b), else where the route leaves from. */
bool peer_open_client(struct tc_adapter *a, const struct peer_opts *p, struct peer_addr to, unsigned port,
                      struct peer_addr from, NDK_SOCKADDR *dst, NDK_SOCKADDR *src);
/* --delay-first: pauses between the MPA Reply and the first FPDU. */
void peer_delay_first(const struct peer_opts *p);

#endif
