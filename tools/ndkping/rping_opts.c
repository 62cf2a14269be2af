/*
 * rping_opts.c - the command line of `ndkping --rping` (see rping.h):
 * rping's options, and the NDK ones of every peer mode (peer.h).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>

#include "lib/args.h"
#include "lib/calls.h"
#include "lib/cmdline.h"
#include "lib/log.h"
#include "ndkping/rping.h"

#define HELP_CMD "ndkping --rping"

struct rping_opts ro;

void rping_dbg(const char *fmt, ...)
{
    if (!ro.debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    tc_vsay(NULL, fmt, ap);
    va_end(ap);
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  ndkping --rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]\n"
            "  ndkping --rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n"
            "\n"
            "rdma-core's rping over NDK: the same protocol, byte for byte, so that the peer\n"
            "may be the real rping (e.g. on Linux siw) or another ndkping --rping.\n"
            "\n"
            "rping's options:\n"
            "  -s             server side\n"
            "  -c             client side\n"
            "  -a addr        client: the server's address (required); server: the address\n"
            "                 to listen on (default: any IPv4 address)\n"
            "  -I addr        client: source address to bind to\n"
            "  -p port        port (default %u; a server given 0 lets the provider pick one,\n"
            "                 shown by -d's \"rdma_listen on\" line)\n"
            "  -C count       ping count (default: until the peer leaves). Unlike rping, a\n"
            "                 server given -C fails a connection that does not make exactly\n"
            "                 that many pings, and a client fails if the server leaves early\n"
            "  -S size        ping data size, %u to %u (default %u; rping itself takes at\n"
            "                 most %u); the server grows its buffer to the client's size\n"
            "  -v             display ping data to stdout\n"
            "  -V             validate ping data (client)\n"
            "  -d             debug printfs (-dd: also every NDK call and registration)\n"
            "  -P             persistent server: a thread per connection, until SIGINT/SIGTERM\n"
            "  -q             accepted for compatibility (rping's self-created QP); no effect\n"
            "\n",
            RPING_DEFAULT_PORT, RPING_MIN_SIZE, RPING_MAX_SIZE, RPING_DEFAULT_SIZE, RPING_RPING_MAX);
    peer_usage(f, "");
}

/* options_first: a stray argument is reported instead of being moved
 * past the options. */
static const struct tc_cmdline cmdline = {.help_cmd = HELP_CMD, .usage = usage,
                                         .options_first = true, .no_operands = true};

/* -C: rping's own complaint, and whether a count was asked for. */
static int take_count(void *ctx, const char *arg)
{
    (void)ctx;
    uint64_t v;
    if (!tc_parse_u64(arg, 0, UINT32_MAX, false, &v))
        return tc_usage_error(HELP_CMD, "Invalid count %s", arg);
    ro.count = (unsigned long)v;
    ro.count_given = v > 0;
    return -1;
}

static int check_options(void)
{
    if (ro.server == ro.client)
        return tc_usage_error(HELP_CMD, "choose -s (server) or -c (client)");
    if (ro.client && !ro.addr)
        return tc_usage_error(HELP_CMD, "the client needs the server's address (-a)");
    if (ro.client && ro.port == 0)
        return tc_usage_error(HELP_CMD, "the client needs the server's port (-p)");
    if (ro.client && ro.persistent)
        return tc_usage_error(HELP_CMD, "-P is a server option");
    if (ro.server && ro.source)
        return tc_usage_error(HELP_CMD, "-I is a client option");
    return ro.server ? peer_check_server(&ro.peer, HELP_CMD) : -1;
}

int rping_parse_options(int argc, char **argv)
{
    ro = (struct rping_opts){.port = RPING_DEFAULT_PORT, .size = RPING_DEFAULT_SIZE};
    peer_defaults(&ro.peer);
    const struct tc_opt opts[] = {
        {.name = "rping"}, /* the mode, chosen by main.c */
        {'a', .text = &ro.addr},
        {'I', .text = &ro.source},
        {'P', .set_true = &ro.persistent},
        {'p', .number = &ro.port, .max = 65535, .what = "port"},
        {'C', .take = take_count, .has_arg = required_argument},
        {'S', .number = &ro.size, .min = RPING_MIN_SIZE, .max = RPING_MAX_SIZE, .what = "size"},
        {'s', .set_true = &ro.server},
        {'c', .set_true = &ro.client},
        {'v', .set_true = &ro.verbose},
        {'V', .set_true = &ro.validate},
        {'d', .counter = &ro.debug},
        {.letter = 'q'}, /* rping's self-created QP: no effect */
        PEER_OPTIONS(&ro.peer),
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if ((rc = check_options()) >= 0)
        return rc;
    tc_calls_trace(ro.debug > 1);
    /* rping -d's first lines. */
    rping_dbg("%s", ro.server ? "server" : "client");
    rping_dbg("port %u", ro.port);
    rping_dbg("size %" PRIu32, ro.size);
    if (ro.count)
        rping_dbg("count %lu", ro.count);
    if (ro.verbose)
        rping_dbg("verbose");
    if (ro.validate)
        rping_dbg("validate data");
    return -1;
}
