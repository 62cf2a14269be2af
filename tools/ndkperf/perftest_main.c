/*
 * perftest_main.c - ndkperf --perftest's command line (perftest.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/args.h"
#include "lib/cmdline.h"
#include "lib/log.h"
#include "ndkperf/perftest.h"

#define HELP_CMD "ndkperf --perftest"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  ndkperf --perftest TEST [options]           server, for perftest's client\n"
            "  ndkperf --perftest TEST [options] SERVER    client of perftest's server\n"
            "\n"
            "Speaks perftest %s's protocol over rdma_cm (its -R mode), so that ndkperf and\n"
            "perftest run against each other: 'ib_write_bw -R -s 65536 -n 200' against\n"
            "'ndkperf --perftest write_bw -s 65536 -n 200', either side the server.\n"
            "Both sides must be given the same -s, -a, -n or -D, and -r (perftest does not\n"
            "exchange them).\n"
            "\n"
            "TEST: write_bw, read_bw, send_bw, send_lat, write_lat (or ib_write_bw, ...).\n"
            "\n"
            "  -s, --size=BYTES        message size (default 65536; latency tests 2)\n"
            "  -a, --all               latency tests: every size 2 B .. 8 MiB, powers of two\n"
            "  -n, --iters=N           iterations (default 5000 for write_bw, else 1000)\n"
            "  -D, --duration=SECONDS  bandwidth tests: run this long instead of -n\n"
            "  -t, --tx-depth=N        requests in flight (default 128); capped at -n\n"
            "  -r, --rx-depth=N        send_bw: the server's receives (default 512); capped at -n\n"
            "  -o, --outs=N            read_bw: outstanding reads (default 128)\n"
            "  -p, --port=PORT         port of the control and test connections (default %u;\n"
            "                          a server given 0 lets the provider pick and prints it)\n"
            "  -d, --ib-dev=ADAPTER    NDK adapter: interface name or address (default: lo for\n"
            "                          the server, the route's for the client)\n"
            "  -B, --bind=ADDRESS      server: listen on this address only\n"
            "  -R, -F                  accepted for perftest's command line (rdma_cm is always\n"
            "                          used; no CPU frequency check)\n"
            "      --timeout=MS        longest wait for a completion or message (default 10000)\n"
            "      --accept-timeout=S  how long the server waits for its client (default 60)\n"
            "      --crc               ask for MPA CRC32c\n"
            "      --verify            run libndk's NDK verifier on ndkperf's own calls\n"
            "  -h, --help              this text\n"
            "  -V, --version           ndkperf's version\n"
            "\n",
            PT_VERSION, NDKPERF_DEFAULT_PORT);
    tc_print_exit_statuses(f, true);
}

static const struct tc_cmdline cmdline = {.help_cmd = HELP_CMD, .usage = usage, .version_letter = true};

/* What the loop saw besides the parameters themselves. */
struct seen {
    bool size_given;
    uint32_t tx, rx;
};

/* The test, the role and the limits, as perftest sets them. */
static int check_options(struct pt *t, const struct seen *w, int argc, char **argv)
{
    if (optind >= argc)
        return tc_usage_error(HELP_CMD, "which test? (write_bw, read_bw, send_bw, send_lat, write_lat)");
    enum test_kind k = test_by_name(argv[optind]);
    if (k == T_COUNT || k == T_READ_LAT)
        return tc_usage_error(HELP_CMD, "unknown or unsupported test '%s' (read_lat is not done yet)", argv[optind]);
    t->p.test = k;
    if (optind + 2 < argc)
        return tc_usage_error(HELP_CMD, "unexpected argument '%s'", argv[optind + 2]);
    t->p.address = optind + 1 < argc ? argv[optind + 1] : NULL;
    t->p.server = t->p.address == NULL;
    t->role = t->p.server ? "server" : "client";
    if (!t->p.server && t->o.port == 0)
        return tc_usage_error(HELP_CMD, "a client needs the server's port (-p)");
    if (t->p.iters && t->p.duration_s)
        return tc_usage_error(HELP_CMD, "-n and -D exclude each other");
    if (t->p.duration_s && test_is_lat(k))
        return tc_usage_error(HELP_CMD, "-D is for the bandwidth tests here");
    if (t->p.all_sizes && w->size_given)
        return tc_usage_error(HELP_CMD, "-a and -s exclude each other");
    if (t->p.all_sizes && !test_is_lat(k))
        return tc_usage_error(HELP_CMD, "-a is for the latency tests (send_lat, write_lat)");
    return -1;
}

/* perftest's defaults and caps: the latency tests have one message in
 * flight, and the depths never exceed the iterations. */
static void apply_defaults(struct pt *t, const struct seen *w)
{
    if (!t->p.iters && !t->p.duration_s)
        t->p.iters = t->p.test == T_WRITE_BW ? 5000 : 1000;
    if (!w->size_given)
        t->p.size = t->p.all_sizes ? NDKPERF_MAX_SIZE : test_is_lat(t->p.test) ? 2 : 65536;
    uint32_t tx = test_is_lat(t->p.test) ? 1 : w->tx, rx = w->rx;
    if (t->p.iters) {
        tx = tx > t->p.iters ? t->p.iters : tx;
        rx = rx > t->p.iters ? t->p.iters : rx;
    }
    t->p.tx_depth = tx;
    t->p.rx_depth = rx;
    struct options *o = &t->o;
    o->test = t->p.test;
    o->size = t->p.size;
    o->iters = t->p.iters;
    o->duration_ms = t->p.duration_s * 1000u;
    o->progress = 0;
    const char *tr = getenv("NDKPERF_PERFTEST_TRACE");
    t->trace = tr && *tr && strcmp(tr, "0") != 0;
    const char *order = getenv("NDKPERF_PERFTEST_CLOSE");
    t->close_test_first = order && strcmp(order, "test-first") == 0;
}

int perftest_main(int argc, char **argv)
{
    static struct pt t; /* large; and its endpoints outlive any late callback */
    memset(&t, 0, sizeof t);
    t.o = (struct options){.cpu_server = -1,
                           .cpu_client = -1,
                           .wait = TC_WAIT_YIELD,
                           .timeout_ms = 10000,
                           .accept_timeout_ms = 60000,
                           .port = NDKPERF_DEFAULT_PORT};
    t.p.outs = 128;
    struct seen w = {.tx = 128, .rx = 512};
    struct options *o = &t.o;
    const struct tc_opt opts[] = {
        {'s', "size", .number = &t.p.size, .min = 1, .max = NDKPERF_MAX_SIZE, .suffixes = true, .what = "size",
         .given = &w.size_given},
        {'a', "all", .set_true = &t.p.all_sizes},
        {'n', "iters", .number = &t.p.iters, .min = 1, .max = UINT32_MAX, .what = "iteration count"},
        {'D', "duration", .number = &t.p.duration_s, .min = 1, .max = 86400, .what = "duration in seconds"},
        {'t', "tx-depth", .number = &w.tx, .min = 1, .max = 16383, .what = "TX depth"},
        {'r', "rx-depth", .number = &w.rx, .min = 1, .max = 16384, .what = "RX depth"},
        {'o', "outs", .number = &t.p.outs, .min = 1, .max = 65535, .what = "outstanding read count"},
        /* 0: the server lets the provider pick one (its line says which). */
        {'p', "port", .number = &o->port, .max = 65535, .what = "port", .given = &o->port_given},
        {'d', "ib-dev", .text = &o->adapter},
        {'B', "bind", .text = &o->bind},
        {.letter = 'R', .name = "rdma_cm"}, /* always rdma_cm */
        {.letter = 'F'},                    /* no CPU frequency check */
        {0, "timeout", .number = &o->timeout_ms, .min = 100, .max = 3600000, .what = "timeout in ms"},
        {0, "accept-timeout", .number = &o->accept_timeout_ms, .min = 1, .max = 86400, .scale = 1000,
         .what = "accept timeout in seconds"},
        {0, "crc", .set_true = &o->crc},
    };
    optind = 1;
    int rc = tc_parse_cmdline(&cmdline, TC_OPTS(opts), argc, argv);
    if (rc >= 0)
        return rc;
    if ((rc = check_options(&t, &w, argc, argv)) >= 0)
        return rc;
    apply_defaults(&t, &w);
    rc = t.p.server ? pt_server(&t) : pt_client(&t);
    /* The test endpoint uses the control one's adapter: it goes first. */
    if (t.inited) {
        ep_close(&t.tst);
        ep_close(&t.ctl);
    }
    return rc;
}
