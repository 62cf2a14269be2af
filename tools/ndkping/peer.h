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

#define PEER_DEFAULT_TIMEOUT_MS 10000u

struct peer_opts {
    const char *adapter; /* --adapter */
    bool no_p2p, crc;
    bool relaxed_tx_gate;    /* the server speaks first (ucmatose) */
    unsigned timeout_ms;     /* --timeout */
    unsigned delay_first_ms; /* --delay-first */
};

/* getopt_long entries for the options below, and their values of ch. */
enum { PEER_OPT_ADAPTER = 0x200, PEER_OPT_NO_P2P, PEER_OPT_CRC, PEER_OPT_TIMEOUT, PEER_OPT_DELAY_FIRST };
#define PEER_LONGOPTS                                                                                              \
    {"adapter", required_argument, NULL, PEER_OPT_ADAPTER}, {"no-p2p", no_argument, NULL, PEER_OPT_NO_P2P},        \
        {"crc", no_argument, NULL, PEER_OPT_CRC}, {"timeout", required_argument, NULL, PEER_OPT_TIMEOUT},          \
        {"delay-first", required_argument, NULL, PEER_OPT_DELAY_FIRST}

void peer_defaults(struct peer_opts *p);
/* One of the options: -1 taken, 0 not one of them, or the exit status
 * (2) when its value is wrong. help_cmd names the mode for the hint. */
int peer_take_option(struct peer_opts *p, int ch, const char *arg, const char *help_cmd);
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
