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

enum { OPT_UCMATOSE = 0x100, OPT_VERSION, OPT_VERIFY };

static const struct option longopts[] = {
    {"ucmatose", no_argument, NULL, OPT_UCMATOSE},
    {"verify", no_argument, NULL, OPT_VERIFY},
    PEER_LONGOPTS,
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* -f and -P: what NDK can follow. */
static int take_format(int ch, const char *arg)
{
    if (ch == 'f' && strncasecmp(arg, "gid", 3) == 0)
        return tc_usage_error(HELP_CMD, "-f gid: NDK has no InfiniBand addresses (ip, ipv6 or name)");
    if (ch == 'f' && strncasecmp(arg, "ip", 2) != 0 && strncasecmp(arg, "name", 4) != 0)
        return tc_usage_error(HELP_CMD, "unknown address format '%s' (ip, ipv6 or name)", arg);
    if (ch == 'P' && strncasecmp(arg, "tcp", 3) != 0)
        return tc_usage_error(HELP_CMD, "-P %s: NDK has the TCP port space only", arg);
    return -1;
}

/* One option: -1 to go on, else the exit status. */
static int take_option(int ch)
{
    int rc = peer_take_option(&uo.peer, ch, optarg, HELP_CMD);
    if (rc)
        return rc;
    switch (ch) {
    case OPT_UCMATOSE:
    case 't':
    case 'm':
        return -1;
    case 'f':
    case 'P':
        return take_format(ch, optarg);
    case 's':
        uo.dst = optarg;
        return -1;
    case 'b':
        uo.src = optarg;
        return -1;
    case 'p':
        return tc_opt_number(HELP_CMD, optarg, 0, 65535, false, &uo.port, "port");
    case 'c':
        return tc_opt_number(HELP_CMD, optarg, 1, UC_MAX_CONNECTIONS, false, &uo.connections, "connection count");
    case 'C':
        return tc_opt_number(HELP_CMD, optarg, 0, 1u << 20, false, &uo.count, "message count");
    case 'S':
        return tc_opt_number(HELP_CMD, optarg, 0, UC_MAX_SIZE, false, &uo.size, "message size");
    case OPT_VERIFY:
        uo.verify = true;
        return -1;
    default:
        return tc_common_option(ch, OPT_VERSION, usage, HELP_CMD);
    }
}

int ucmatose_parse_options(int argc, char **argv)
{
    uo = (struct ucmatose_opts){
        .port = UC_DEFAULT_PORT, .connections = UC_DEFAULT_CONNECTIONS, .count = UC_DEFAULT_COUNT,
        .size = UC_DEFAULT_SIZE};
    peer_defaults(&uo.peer);
    int ch, rc;
    while ((ch = getopt_long(argc, argv, "+s:b:f:P:c:C:S:t:p:mh", longopts, NULL)) != -1)
        if ((rc = take_option(ch)) >= 0)
            return rc;
    if (optind < argc)
        return tc_usage_error(HELP_CMD, "unexpected argument '%s'", argv[optind]);
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
