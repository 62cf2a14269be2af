/*
 * options.c - ndkperf's command line, and the tests' names and defaults.
 */
#include <getopt.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lib/args.h"
#include "lib/cmdline.h"
#include "lib/log.h"
#include "ndkperf/ndkperf.h"

#define DEFAULT_ITERS 1000
#define DEFAULT_ITERS_WRITE_BW 5000 /* perftest's defaults */
#define DEFAULT_WARMUP 100
#define DEFAULT_DEPTH 128
#define DEFAULT_RX_DEPTH 512
#define DEFAULT_OUTS 128
#define DEFAULT_POST_LIST 32
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_ACCEPT_TIMEOUT_S 60

static const struct {
    const char *name, *title;
    uint32_t default_inline; /* perftest's default -I */
} tests[T_COUNT] = {
    [T_SEND_LAT] = {"send_lat", "Send Latency", 236},
    [T_SEND_BW] = {"send_bw", "Send BW", 236},
    [T_WRITE_LAT] = {"write_lat", "RDMA_Write Latency", 220},
    [T_WRITE_BW] = {"write_bw", "RDMA_Write BW", 220},
    [T_READ_LAT] = {"read_lat", "RDMA_Read Latency", 0},
    [T_READ_BW] = {"read_bw", "RDMA_Read BW", 0},
};

const char *test_name(enum test_kind t)
{
    return tests[t].name;
}

const char *test_title(enum test_kind t)
{
    return tests[t].title;
}

bool test_is_lat(enum test_kind t)
{
    return t == T_SEND_LAT || t == T_WRITE_LAT || t == T_READ_LAT;
}

bool test_uses_send(enum test_kind t)
{
    return t == T_SEND_LAT || t == T_SEND_BW;
}

bool test_uses_read(enum test_kind t)
{
    return t == T_READ_LAT || t == T_READ_BW;
}

enum test_kind test_by_name(const char *name)
{
    if (strncmp(name, "ib_", 3) == 0)
        name += 3;
    for (int t = 0; t < T_COUNT; t++)
        if (strcmp(name, tests[t].name) == 0)
            return (enum test_kind)t;
    return T_COUNT;
}

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  ndkperf TEST -S [options]              server: waits for one client, follows its parameters\n"
            "  ndkperf TEST -c ADDRESS [options]      client: runs the test against a server\n"
            "  ndkperf TEST --loopback [options]      both ends, as two processes on 127.0.0.1\n"
            "  ndkperf --perftest TEST [perftest options] [SERVER]   talks perftest's own protocol\n"
            "                          (ib_write_bw -R ...) to perftest; 'ndkperf --perftest -h'\n"
            "\n"
            "TEST: send_lat, send_bw, write_lat, write_bw, read_lat, read_bw (perftest's ib_*).\n"
            "\n"
            "Test:\n"
            "  -s, --size=BYTES        message size (default 2 for latency, 65536 for bandwidth;\n"
            "                          K and M suffixes; send tests need at least 2)\n"
            "  -a, --all               every size 2 B .. 8 MiB, powers of two\n"
            "  -n, --iters=N           iterations per size (default 1000; write_bw 5000)\n"
            "  -D, --duration=SECONDS  run each size this long instead of -n\n"
            "      --warmup=N          latency tests: iterations run first and not counted (default %u)\n"
            "  -q, --depth=N           bandwidth tests: work requests in flight (default %u)\n"
            "  -r, --rx-depth=N        send_bw: receives the server keeps posted (default %u); the\n"
            "                          client stays within them using the server's credits\n"
            "  -I, --inline=BYTES      Sends and Writes up to this size are posted with\n"
            "                          NDK_OP_FLAG_INLINE (default: send 236, write 220, as\n"
            "                          perftest; capped at the adapter's MaxInlineDataSize; 0: never)\n"
            "  -o, --outs=N            read tests: outstanding RDMA Reads asked for (IRD/ORD,\n"
            "                          default %u, capped by the adapters)\n"
            "  -l, --post-list=N       bandwidth tests: post in chains of up to N requests, all but\n"
            "                          the last with NDK_OP_FLAG_DEFER, so one doorbell sends the\n"
            "                          chain (default %u; 1: a doorbell per request, as perftest)\n",
            DEFAULT_WARMUP, DEFAULT_DEPTH, DEFAULT_RX_DEPTH, DEFAULT_OUTS, DEFAULT_POST_LIST);
    fprintf(f,
            "\n"
            "Connection:\n"
            "  -S, --server            be the server\n"
            "  -c, --client=ADDRESS    be the client of the server at ADDRESS\n"
            "      --loopback          run server and client as two processes on 127.0.0.1\n"
            "  -p, --port=PORT         server port (default %u; --loopback: one the provider picks)\n"
            "  -B, --bind=ADDRESS      server: listen on this address only (default: all)\n"
            "  -d, --adapter=ADAPTER   interface name or address of the adapter (default: the\n"
            "                          adapter of -B or of the route to -c, else lo)\n"
            "      --crc               ask for MPA CRC32c\n"
            "      --sockbuf=BYTES     SO_SNDBUF and SO_RCVBUF of the connection (K and M\n"
            "                          suffixes; 1: the system's minimum; default: autotuned)\n"
            "      --verify            run libndk's NDK verifier on ndkperf's own calls\n"
            "\n"
            "Placement and completions:\n"
            "      --cpu=N             pin this process (--loopback: both processes) to CPU N\n"
            "      --cpu-server=N      pin the server process to CPU N\n"
            "      --cpu-client=N      pin the client process to CPU N\n"
            "      --wait=MODE         yield (default): poll NdkGetCqResults, sched_yield() when\n"
            "                          empty, so a progress thread on the same CPU can run;\n"
            "                          spin: poll without yielding (perftest's way);\n"
            "                          events: NdkArmCq and sleep until the notification callback\n"
            "      --events            the same as --wait=events\n"
            "      --busy-poll         open the adapter in the provider's busy-poll mode (polling\n"
            "                          the CQ drives the connection)\n"
            "      --moderation=US,N   NdkControlCqInterruptModeration(US, N) on every CQ: a\n"
            "                          notification waits for N completions or US microseconds\n"
            "                          (0,0: none); with --wait=events each side reports its\n"
            "                          notifications per message received\n"
            "      --signal-all        signal every work request (no NDK_OP_FLAG_SILENT_SUCCESS)\n"
            "      --timeout=MS        longest wait for any completion or event (default %u)\n"
            "      --accept-timeout=S  how long a server waits for its client (default %u)\n",
            NDKPERF_DEFAULT_PORT, DEFAULT_TIMEOUT_MS, DEFAULT_ACCEPT_TIMEOUT_S);
    fprintf(f, "\n"
               "Output:\n"
               "      --progress, --no-progress  the live line of a long run (-a, -D, or a size\n"
               "                          that runs over a second) on stderr, drawn in place\n"
               "                          (default: only when stderr is a terminal)\n"
               "  -h, --help              this text\n"
               "  -V, --version           ndkperf's version\n"
               "\n"
               "Units as perftest: MB = 2^20 bytes. Latency: half the round trip for send_lat and\n"
               "write_lat, the whole round trip for read_lat. write_lat needs an adapter that sets\n"
               "NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED.\n");
    tc_print_exit_statuses(f, true);
}

static const struct tc_cmdline cmdline = {.usage = usage, .version_letter = true};

/* What the loop saw besides the options themselves. */
struct seen {
    bool server, loopback, size_given, inline_given, warmup_given;
};

/* --wait=MODE: -1 when it parses, else the usage error. */
static int take_wait(void *ctx, const char *arg)
{
    struct options *o = ctx;
    if (strcmp(arg, "yield") == 0)
        o->wait = TC_WAIT_YIELD;
    else if (strcmp(arg, "spin") == 0)
        o->wait = TC_WAIT_SPIN;
    else if (strcmp(arg, "events") == 0)
        o->wait = TC_WAIT_EVENTS;
    else
        return tc_usage_error(NULL, "invalid --wait '%s' (yield, spin or events)", arg);
    return -1;
}

static int take_events(void *ctx, const char *arg)
{
    (void)arg;
    return take_wait(ctx, "events");
}

/* --moderation=US,N: -1 when it parses, else the usage error. */
static int take_moderation(void *ctx, const char *arg)
{
    struct options *o = ctx;
    char us[16];
    const char *comma = strchr(arg, ',');
    if (!comma || (size_t)(comma - arg) >= sizeof us)
        return tc_usage_error(NULL, "invalid --moderation '%s' (MICROSECONDS,COUNT, e.g. 100,16)", arg);
    memcpy(us, arg, (size_t)(comma - arg));
    us[comma - arg] = '\0';
    int rc = tc_opt_number(NULL, us, 0, UINT32_MAX, false, &o->mod_interval_us, "moderation interval");
    if (rc >= 0)
        return rc;
    o->moderation = true;
    return tc_opt_number(NULL, comma + 1, 0, UINT32_MAX, false, &o->mod_count, "moderation count");
}

/* --cpu, --cpu-server, --cpu-client: the CPU for either side or both. */
static int take_cpu_of(struct options *o, const char *arg, bool server, bool client)
{
    uint32_t cpu = 0;
    int rc = tc_opt_number(NULL, arg, 0, CPU_SETSIZE - 1, false, &cpu, "CPU");
    if (rc >= 0)
        return rc;
    if (server)
        o->cpu_server = (int)cpu;
    if (client)
        o->cpu_client = (int)cpu;
    return -1;
}

static int take_cpu(void *ctx, const char *arg)
{
    return take_cpu_of(ctx, arg, true, true);
}

static int take_cpu_server(void *ctx, const char *arg)
{
    return take_cpu_of(ctx, arg, true, false);
}

static int take_cpu_client(void *ctx, const char *arg)
{
    return take_cpu_of(ctx, arg, false, true);
}

/* The test and the options together: -1 to go on, else the exit status. */
static int check_options(struct options *o, const struct seen *w)
{
    if (w->server + w->loopback + (o->address != NULL) != 1)
        return tc_usage_error(NULL, "choose one of -S (server), -c ADDRESS (client) and --loopback");
    o->mode = w->loopback ? MODE_LOOPBACK : w->server ? MODE_SERVER : MODE_CLIENT;
    if (o->all_sizes && w->size_given)
        return tc_usage_error(NULL, "-a and -s exclude each other");
    if (o->iters && o->duration_ms)
        return tc_usage_error(NULL, "-n and -D exclude each other");
    if (!o->iters && !o->duration_ms)
        o->iters = o->test == T_WRITE_BW ? DEFAULT_ITERS_WRITE_BW : DEFAULT_ITERS;
    if (!w->size_given)
        o->size = o->all_sizes ? NDKPERF_MAX_SIZE : test_is_lat(o->test) ? 2 : 65536;
    if (test_uses_send(o->test) && o->size < 2)
        return tc_usage_error(NULL, "send tests need messages of at least 2 bytes (1-byte Sends are their "
                                    "control messages)");
    if (!w->warmup_given)
        o->warmup = test_is_lat(o->test) ? DEFAULT_WARMUP : 0;
    if (!w->inline_given)
        o->inline_size = tests[o->test].default_inline;
    if (o->test == T_WRITE_LAT && o->wait == TC_WAIT_EVENTS)
        return tc_usage_error(NULL, "write_lat polls memory, not the CQ: --wait=events does not apply");
    if (o->mode != MODE_SERVER && o->bind)
        return tc_usage_error(NULL, "-B is a server option");
    return -1;
}

int parse_options(int argc, char **argv, struct options *o)
{
    *o = (struct options){
        .cpu_server = -1,
        .cpu_client = -1,
        .wait = TC_WAIT_YIELD,
        .progress = -1,
        .timeout_ms = DEFAULT_TIMEOUT_MS,
        .accept_timeout_ms = DEFAULT_ACCEPT_TIMEOUT_S * 1000u,
        .depth = DEFAULT_DEPTH,
        .rx_depth = DEFAULT_RX_DEPTH,
        .outs = DEFAULT_OUTS,
        .post_list = DEFAULT_POST_LIST,
        .port = NDKPERF_DEFAULT_PORT,
    };
    struct seen w = {0};
    const struct tc_opt opts[] = {
        {'s', "size", .number = &o->size, .min = 1, .max = NDKPERF_MAX_MSG, .suffixes = true, .what = "size",
         .given = &w.size_given},
        {'a', "all", .set_true = &o->all_sizes},
        {'n', "iters", .number = &o->iters, .min = 1, .max = UINT32_MAX, .what = "iteration count"},
        {'D', "duration", .number = &o->duration_ms, .min = 1, .max = 86400, .scale = 1000,
         .what = "duration in seconds"},
        {0, "warmup", .number = &o->warmup, .max = UINT32_MAX, .what = "warm-up count", .given = &w.warmup_given},
        {'q', "depth", .number = &o->depth, .min = 1, .max = 16383, .what = "depth"},
        {'r', "rx-depth", .number = &o->rx_depth, .min = 4, .max = 16384, .what = "receive depth"},
        {'I', "inline", .number = &o->inline_size, .max = UINT32_MAX, .what = "inline size",
         .given = &w.inline_given},
        {'o', "outs", .number = &o->outs, .min = 1, .max = UINT32_MAX, .what = "outstanding read count"},
        {'l', "post-list", .number = &o->post_list, .min = 1, .max = 16384, .what = "post list length"},
        {'S', "server", .set_true = &w.server},
        {'c', "client", .text = &o->address},
        {0, "loopback", .set_true = &w.loopback},
        {'p', "port", .number = &o->port, .min = 1, .max = 65535, .what = "port", .given = &o->port_given},
        {'B', "bind", .text = &o->bind},
        {'d', "adapter", .text = &o->adapter},
        {0, "crc", .set_true = &o->crc},
        {0, "sockbuf", .number = &o->sockbuf, .min = 1, .max = INT32_MAX / 2, .suffixes = true,
         .what = "socket buffer size"},
        {0, "cpu", .take = take_cpu, .ctx = o, .has_arg = required_argument},
        {0, "cpu-server", .take = take_cpu_server, .ctx = o, .has_arg = required_argument},
        {0, "cpu-client", .take = take_cpu_client, .ctx = o, .has_arg = required_argument},
        {0, "wait", .take = take_wait, .ctx = o, .has_arg = required_argument},
        {0, "events", .take = take_events, .ctx = o},
        {0, "busy-poll", .set_true = &o->busy_poll},
        {0, "moderation", .take = take_moderation, .ctx = o, .has_arg = required_argument},
        {0, "signal-all", .set_true = &o->signal_all},
        {0, "timeout", .number = &o->timeout_ms, .min = 100, .max = 3600000, .what = "timeout in ms"},
        {0, "accept-timeout", .number = &o->accept_timeout_ms, .min = 1, .max = 86400, .scale = 1000,
         .what = "accept timeout in seconds"},
        {0, "progress", .choice = &o->progress, .value = 1},
        {0, "no-progress", .choice = &o->progress, .value = 0},
    };
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if (optind >= argc)
        return tc_usage_error(NULL, "which test? (send_lat, send_bw, write_lat, write_bw, read_lat, read_bw)");
    if (optind + 1 < argc)
        return tc_usage_error(NULL, "unexpected argument '%s' (the server's address goes with -c)",
                              argv[optind + 1]);
    if ((o->test = test_by_name(argv[optind])) == T_COUNT)
        return tc_usage_error(NULL, "unknown test '%s'", argv[optind]);
    return check_options(o, &w);
}
