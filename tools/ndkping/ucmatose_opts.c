/*
 * ucmatose_opts.c - the command line of `ndkping --ucmatose` (see
 * ucmatose.h): ucmatose's options, and the NDK ones of every peer mode
 * (peer.h); and the run's last lines.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/args.h"
#include "lib/log.h"
#include "ndkping/ucmatose.h"

#define HELP_CMD "ndkping --ucmatose"

struct ucmatose_opts uo;

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  ndkping --ucmatose [-b bind_address] [-c connections] [-C count] [-S size] [-p port]\n"
            "  ndkping --ucmatose -s server_address [-b bind_address] [-c connections] [-C count]\n"
            "                     [-S size] [-p port]\n"
            "\n"
            "rdma-core's ucmatose over NDK: the same protocol, so that the peer may be the\n"
            "real ucmatose (e.g. on Linux siw) or another ndkping --ucmatose. The client\n"
            "opens all its connections at once; once all are up the server sends COUNT\n"
            "messages of SIZE bytes on each, the client sends as many back, and the server\n"
            "disconnects them all.\n"
            "\n"
            "ucmatose's options:\n"
            "  -s address     client: the server's address (without -s: the server)\n"
            "  -b address     client: the source address; server: the address to listen on\n"
            "                 (default: any IPv4 address)\n"
            "  -p port        port (default %u; a server given 0 lets the provider pick one,\n"
            "                 shown in its \"cmatose: listening on\" line)\n"
            "  -c connections connections at once (default %u, at most %u); the server\n"
            "                 serves exactly that many, and refuses more\n"
            "  -C count       messages each way on each connection (default %u; 0: none)\n"
            "  -S size        bytes of each message (default %u, at most %u; 0: no messages)\n"
            "  -f format      ip, ipv6 or name: accepted (addresses are resolved either way);\n"
            "                 gid has no NDK twin\n"
            "  -P tcp         the only port space NDK has\n"
            "  -t tos, -m     accepted for ucmatose's command line; no effect on NDK\n"
            "\n"
            "Beyond ucmatose:\n"
            "      --verify           check that every message holds ndkping's pattern (when\n"
            "                         the peer is ndkping --ucmatose too); every message must\n"
            "                         be exactly SIZE bytes either way\n"
            "\n",
            UC_DEFAULT_PORT, UC_DEFAULT_CONNECTIONS, UC_MAX_CONNECTIONS, UC_DEFAULT_COUNT, UC_DEFAULT_SIZE,
            UC_MAX_SIZE);
    peer_usage(f, "The server waits for its connections until they come or SIGINT/SIGTERM; every\n"
                  "wait after that is bounded by --timeout. ");
}

static const struct tc_cmdline cmdline = {.help_cmd = HELP_CMD, .usage = usage,
                                         .options_first = true, .no_operands = true};

/* -f: the address formats NDK can follow. */
static int take_format(void *ctx, const char *arg)
{
    (void)ctx;
    if (strncasecmp(arg, "gid", 3) == 0)
        return tc_usage_error(HELP_CMD, "-f gid: NDK has no InfiniBand addresses (ip, ipv6 or name)");
    if (strncasecmp(arg, "ip", 2) != 0 && strncasecmp(arg, "name", 4) != 0)
        return tc_usage_error(HELP_CMD, "unknown address format '%s' (ip, ipv6 or name)", arg);
    return -1;
}

/* -P: the port space, which NDK has one of. */
static int take_port_space(void *ctx, const char *arg)
{
    (void)ctx;
    if (strncasecmp(arg, "tcp", 3) != 0)
        return tc_usage_error(HELP_CMD, "-P %s: NDK has the TCP port space only", arg);
    return -1;
}

int ucmatose_parse_options(int argc, char **argv)
{
    uo = (struct ucmatose_opts){
        .port = UC_DEFAULT_PORT, .connections = UC_DEFAULT_CONNECTIONS, .count = UC_DEFAULT_COUNT,
        .size = UC_DEFAULT_SIZE};
    peer_defaults(&uo.peer);
    const struct tc_opt opts[] = {
        {.name = "ucmatose"}, /* the mode, chosen by main.c */
        {.name = "verify", .set_true = &uo.verify},
        {'s', .text = &uo.dst},
        {'b', .text = &uo.src},
        {'f', .take = take_format, .has_arg = required_argument},
        {'P', .take = take_port_space, .has_arg = required_argument},
        {'c', .number = &uo.connections, .min = 1, .max = UC_MAX_CONNECTIONS, .what = "connection count"},
        {'C', .number = &uo.count, .max = 1u << 20, .what = "message count"},
        {'S', .number = &uo.size, .max = UC_MAX_SIZE, .what = "message size"},
        {'t', .has_arg = required_argument}, /* -t tos: accepted, no effect on NDK */
        {'p', .number = &uo.port, .max = 65535, .what = "port"},
        {.letter = 'm'}, /* accepted, no effect on NDK */
        PEER_OPTIONS(&uo.peer),
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if (uo.dst && uo.port == 0)
        return tc_usage_error(HELP_CMD, "the client needs the server's port (-p)");
    if (!uo.dst && (rc = peer_check_server(&uo.peer, HELP_CMD)) >= 0)
        return rc;
    if (uo.size == 0)
        uo.count = 0; /* as ucmatose: no messages without a size */
    if ((uint64_t)uo.count * uo.size > UC_MAX_RECV_BYTES)
        return tc_usage_error(HELP_CMD, "-C %u x -S %u bytes is more than the %u MiB a connection may receive",
                              uo.count, uo.size, UC_MAX_RECV_BYTES >> 20);
    /* The server speaks first: a client/server initiator (siw) sends
     * nothing before it has the server's messages. */
    uo.peer.relaxed_tx_gate = !uo.dst;
    return -1;
}

int ucmatose_finish(bool ok, unsigned connected)
{
    ok = ok && !tc_library_problems();
    tc_say(NULL, "ndkping --ucmatose: %u of %u connection%s, %u message%s of %u bytes each way%s: %s", connected,
           uo.connections, uo.connections == 1 ? "" : "s", uo.count, uo.count == 1 ? "" : "s", uo.size,
           uo.verify ? ", every byte verified" : "", ok ? "ok" : "FAILED");
    tc_say(NULL, "test complete");
    tc_say(NULL, "return status %d", ok ? 0 : 1);
    return ok ? TC_EXIT_OK : TC_EXIT_FAILED;
}
