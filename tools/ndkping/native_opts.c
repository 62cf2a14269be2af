/*
 * native_opts.c - ndkping's own command line (see native.h), and its
 * output levels.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/args.h"
#include "lib/calls.h"
#include "lib/cmdline.h"
#include "lib/log.h"
#include "ndkping/native.h"

struct native_opts opt;

void native_say(int level, const char *role, const char *fmt, ...)
{
    if (opt.verbosity < level)
        return;
    char prefix[32] = "";
    if (role)
        snprintf(prefix, sizeof prefix, "%s: ", role);
    va_list ap;
    va_start(ap, fmt);
    tc_vsay(prefix, fmt, ap);
    va_end(ap);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage:\n"
        "  ndkping -s [-a ADDRESS] [-p PORT] [-d ADAPTER] [options]   server (listener)\n"
        "  ndkping -c -a ADDRESS [-p PORT] [-d ADAPTER] [options]     client\n"
        "  ndkping --loopback [options]                               both ends in this process\n"
        "  ndkping --rping -s|-c [rping's options]      rdma-core's rping protocol (--rping --help)\n"
        "  ndkping --ucmatose [ucmatose's options]      rdma-core's ucmatose protocol (--ucmatose --help)\n"
        "\n"
        "rping over NDK: the client connects with private data and its IRD/ORD; the\n"
        "server reads them and accepts with its own; both print what they received and\n"
        "the time of each leg. Then the data phase: each side has advertised a registered\n"
        "buffer in its private data; the client RDMA-writes a pattern into the server's\n"
        "buffer, RDMA-reads it back, and sends a message into the server's posted\n"
        "receive; the server checks it and its buffer, and answers with a Send. Last the\n"
        "client disconnects, the server answers; everything is closed.\n"
        "\n"
        "Roles and addresses:\n"
        "  -s, --server           listen for connections\n"
        "  -c, --client           connect to a server\n"
        "      --loopback         server and client in one process, each on its own\n"
        "                         instance of the adapter, on 127.0.0.1 (::1 with --ipv6)\n"
        "                         and a port the provider picks (-p to choose one); exits 0\n"
        "                         only if every connection worked and each side got the\n"
        "                         other's private data byte-exact and consistent IRD/ORD\n"
        "  -a, --address=ADDRESS  client: the server's address or host name (required);\n"
        "                         server: the address to listen on (default: any)\n"
        "  -p, --port=PORT        the server's port (default %u, as rping)\n"
        "  -d, --adapter=ADAPTER  interface name or address of the adapter to use (default:\n"
        "                         server: the adapter owning -a, else lo; client: the\n"
        "                         adapter the route to -a leaves from)\n"
        "  -C, --count=N          connections, one after the other (default: client 1;\n"
        "                         server: until interrupted). With --loopback, -c N means\n"
        "                         the same (there is no client role to pick there).\n",
        NATIVE_DEFAULT_PORT);
    fprintf(
        f,
        "\n"
        "Connection parameters:\n"
        "      --ird=N, --ord=N   requested inbound / outbound RDMA read limits (default %u)\n"
        "      --data=STRING      the client's private data (default \"ndkping client PID\")\n"
        "      --reply=STRING     the server's accept or reject private data\n"
        "                         (default \"ndkping server PID\")\n"
        "      --reject           server: reject each request, with its private data;\n"
        "                         --loopback then succeeds if every connect is refused\n"
        "                         and carries that data\n"
        "      --crc              ask for MPA CRC32c (NDK_OPEN_FLAG_REQUEST_CRC)\n"
        "      --verifier         run libndk's NDK verifier on ndkping's own calls\n"
        "      --no-p2p           client: client/server MPA, no RTR leg, as siw\n"
        "                         (NDK_OPEN_FLAG_NO_P2P)\n"
        "      --ipv6             IPv6: ::1 with --loopback, -a resolved as IPv6, the\n"
        "                         server listens on :: without -a\n"
        "      --timeout=MS       limit for each step (default %u): the provider's TCP\n"
        "                         connect, MPA Reply, RTR and disconnect timeouts; ndkping\n"
        "                         itself waits up to MS + %u for any completion\n",
        NATIVE_DEFAULT_READ_LIMIT, NATIVE_DEFAULT_TIMEOUT_MS, TC_GRACE_MS);
    fprintf(
        f,
        "\n"
        "Data phase:\n"
        "      --no-data          no data phase (both sides must agree: a server with the\n"
        "                         data phase rejects a client without, and the reverse)\n"
        "  -S, --size=N           this side's buffer, 1 to %u bytes (default %u); the\n"
        "                         RDMA Write and Read move the smaller of the two sides'\n"
        "                         buffers; the Send/Receive messages are %u bytes\n"
        "      --verify           check every byte: the pattern read back, the server's\n"
        "                         buffer after the Send, both messages (always on with\n"
        "                         --loopback)\n"
        "  Each step prints its size, time and rate (MB/s = 10^6 bytes/s); Send/Receive\n"
        "  is the round trip from the client's Send to the server's reply, less the time\n"
        "  the server spent checking (it says how long in the reply), and its rate counts\n"
        "  both messages. The private data is the text (--data, --reply), then a\n"
        "  NUL byte and the 16-byte advertisement: address (8), remote token (4) and size\n"
        "  (4), big-endian, as rping's message.\n"
        "\n"
        "Output:\n"
        "  -v, --verbose          every NDK call, and whether it completed inline or pended\n"
        "  -q, --quiet            only the summary lines and errors\n"
        "  -h, --help             this text\n"
        "  -V, --version          ndkping's version\n"
        "\n"
        "A server stops after -C connections, or at SIGINT/SIGTERM after the current\n"
        "one. ",
        NATIVE_MAX_SIZE, NATIVE_DEFAULT_SIZE, MSG_SIZE);
    tc_print_exit_statuses(f, false);
}

/* options_first: stop at the first non-option, so that a stray
 * argument is reported instead of being moved past the options. */
static const struct tc_cmdline cmdline = {.usage = usage, .version_letter = true, .options_first = true};

/* What the loop saw besides opt. */
struct seen {
    bool server, client, loopback, size_given;
    const char *c_count; /* "-c N": a count, valid with --loopback only */
    int argc;            /* the command line, for -c's count */
    char **argv;
};

static int set_count(const char *text)
{
    uint32_t v = 0;
    int rc = tc_opt_number(NULL, text, 1, UINT32_MAX, false, &v, "count");
    if (rc >= 0)
        return rc;
    if (opt.count && opt.count != v)
        return tc_usage_error(NULL, "the count is given twice");
    opt.count = v;
    return -1;
}

static int take_count(void *ctx, const char *arg)
{
    (void)ctx;
    return set_count(arg);
}

/* -c, the client; its count may follow as "-cN" or as the next argument. */
static int take_client(void *ctx, const char *arg)
{
    struct seen *w = ctx;
    w->client = true;
    if (arg)
        w->c_count = arg;
    else if (optind < w->argc && isdigit((unsigned char)w->argv[optind][0]))
        w->c_count = w->argv[optind++];
    return -1;
}

/* The options together: -1 to go on, else the exit status. */
static int check_options(const struct seen *w)
{
    if (w->loopback + w->server + (w->client && !w->loopback) > 1)
        return tc_usage_error(NULL, "choose one of -s, -c and --loopback");
    if (w->c_count && !w->loopback)
        return tc_usage_error(NULL, "-c takes no count except with --loopback; the count is -C N");
    if (w->c_count && set_count(w->c_count) >= 0)
        return TC_EXIT_USAGE;
    opt.mode = w->loopback ? MODE_LOOPBACK : w->server ? MODE_SERVER : w->client ? MODE_CLIENT : MODE_UNSET;
    if (opt.mode == MODE_UNSET)
        return tc_usage_error(NULL, "choose -s (server), -c (client) or --loopback");
    if (opt.mode == MODE_CLIENT && !opt.address)
        return tc_usage_error(NULL, "the client needs the server's address (-a)");
    if (opt.mode == MODE_CLIENT && opt.port == 0)
        return tc_usage_error(NULL, "the client needs the server's port (-p)");
    if (opt.mode == MODE_CLIENT && opt.reject)
        return tc_usage_error(NULL, "--reject is a server option");
    if (!opt.data_phase && (w->size_given || opt.verify))
        return tc_usage_error(NULL, "%s belongs to the data phase, which --no-data turns off",
                              w->size_given ? "-S" : "--verify");
    if (opt.mode == MODE_LOOPBACK)
        opt.verify = true;
    opt.data_len = strlen(opt.data);
    opt.reply_len = strlen(opt.reply);
    return -1;
}

int native_parse_options(int argc, char **argv)
{
    static char default_data[64], default_reply[64];
    snprintf(default_data, sizeof default_data, "ndkping client %ld", (long)getpid());
    snprintf(default_reply, sizeof default_reply, "ndkping server %ld", (long)getpid());
    opt = (struct native_opts){
        .port = NATIVE_DEFAULT_PORT,
        .ird = NATIVE_DEFAULT_READ_LIMIT,
        .ord = NATIVE_DEFAULT_READ_LIMIT,
        .timeout_ms = NATIVE_DEFAULT_TIMEOUT_MS,
        .verbosity = LVL_NORMAL,
        .data = default_data,
        .reply = default_reply,
        .data_phase = true,
        .size = NATIVE_DEFAULT_SIZE,
    };
    struct seen w = {.argc = argc, .argv = argv};
    const struct tc_opt opts[] = {
        {'s', "server", .set_true = &w.server},
        /* "-c5" but "--client 5": the count is -c's optional argument only. */
        {'c', .take = take_client, .ctx = &w, .has_arg = optional_argument},
        {0, "client", .take = take_client, .ctx = &w},
        {0, "loopback", .set_true = &w.loopback},
        {'a', "address", .text = &opt.address},
        {'p', "port", .number = &opt.port, .max = 65535, .what = "port", .given = &opt.port_given},
        {'d', "adapter", .text = &opt.adapter},
        {'C', "count", .take = take_count, .has_arg = required_argument},
        {0, "ird", .number = &opt.ird, .max = UINT32_MAX, .what = "--ird"},
        {0, "ord", .number = &opt.ord, .max = UINT32_MAX, .what = "--ord"},
        {0, "data", .text = &opt.data},
        {0, "reply", .text = &opt.reply},
        {0, "reject", .set_true = &opt.reject},
        {0, "crc", .set_true = &opt.crc},
        {0, "no-p2p", .set_true = &opt.no_p2p},
        {0, "ipv6", .set_true = &opt.ipv6},
        {0, "timeout", .number = &opt.timeout_ms, .min = 1, .max = 3600000, .what = "timeout in ms"},
        {0, "no-data", .set_false = &opt.data_phase},
        {'S', "size", .number = &opt.size, .min = 1, .max = NATIVE_MAX_SIZE, .what = "size in bytes",
         .given = &w.size_given},
        {0, "verify", .set_true = &opt.verify},
        {'v', "verbose", .choice = &opt.verbosity, .value = LVL_VERBOSE},
        {'q', "quiet", .choice = &opt.verbosity, .value = LVL_SUMMARY},
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if (optind < argc)
        return tc_usage_error(NULL, "unexpected argument '%s'%s", argv[optind],
                              isdigit((unsigned char)argv[optind][0]) ? " (the count is -C N)" : "");
    if ((rc = check_options(&w)) >= 0)
        return rc;
    tc_calls_trace(opt.verbosity >= LVL_VERBOSE);
    return -1;
}
