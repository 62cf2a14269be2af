/*
 * connrate_opts.h - the command line connrate.c (libndk) and
 * tcp_connrate.c (raw TCP, the anchor) share, so that bench/run.sh can run
 * both with the same words: -m serial|inflight, -q, -D, -n, -p, --server,
 * --client, --timeout, --lifetime. Each program adds its own options.
 * Also their signal handling and their reports' percentile.
 *
 * Everything is static inline: each program is one translation unit.
 */
#ifndef CONNRATE_OPTS_H
#define CONNRATE_OPTS_H

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum role { ROLE_BOTH, ROLE_SERVER, ROLE_CLIENT };

struct connrate_opts {
    enum role role;
    bool inflight_mode;
    unsigned q;
    double duration_s;
    long limit_n;
    unsigned port;
    unsigned timeout_ms;
    unsigned lifetime_s;

    /* while parsing */
    const char *mode;
    bool q_given;
};

/* getopt_long codes of the shared long options without a short one; a
 * program's own (connrate_parse_options) start at CR_O_OWN. */
enum { CR_O_SERVER = 256, CR_O_CLIENT, CR_O_TIMEOUT, CR_O_LIFETIME, CR_O_OWN };

#define CONNRATE_SHORT_OPTS "m:q:D:n:p:h"
#define CONNRATE_LONG_OPTS                                                                                 \
    {"mode", required_argument, NULL, 'm'}, {"inflight", required_argument, NULL, 'q'},                  \
        {"duration", required_argument, NULL, 'D'}, {"count", required_argument, NULL, 'n'},             \
        {"port", required_argument, NULL, 'p'}, {"server", no_argument, NULL, CR_O_SERVER},              \
        {"client", no_argument, NULL, CR_O_CLIENT}, {"timeout", required_argument, NULL, CR_O_TIMEOUT}, \
        {"lifetime", required_argument, NULL, CR_O_LIFETIME}, {"help", no_argument, NULL, 'h'}

/* The defaults: serial, 5 s, both sides in one process. */
static inline void connrate_opts_init(struct connrate_opts *c)
{
    memset(c, 0, sizeof *c);
    c->q = 1;
    c->duration_s = 5;
    c->timeout_ms = 10000;
    c->lifetime_s = 120;
    c->role = ROLE_BOTH;
    c->mode = "serial";
}

/* Takes option o (getopt_long's answer) if it is a shared one. */
static inline bool connrate_opt(struct connrate_opts *c, int o, const char *arg)
{
    switch (o) {
    case 'm':
        c->mode = arg;
        return true;
    case 'q':
        c->q = (unsigned)strtoul(arg, NULL, 10);
        c->q_given = true;
        return true;
    case 'D':
        c->duration_s = strtod(arg, NULL);
        return true;
    case 'n':
        c->limit_n = strtol(arg, NULL, 10);
        return true;
    case 'p':
        c->port = (unsigned)strtoul(arg, NULL, 10);
        return true;
    case CR_O_SERVER:
        c->role = ROLE_SERVER;
        return true;
    case CR_O_CLIENT:
        c->role = ROLE_CLIENT;
        return true;
    case CR_O_TIMEOUT:
        c->timeout_ms = (unsigned)strtoul(arg, NULL, 10);
        return true;
    case CR_O_LIFETIME:
        c->lifetime_s = (unsigned)strtoul(arg, NULL, 10);
        return true;
    default:
        return false;
    }
}

/* After the options: the mode's queue depth (inflight: 64 unless -q) and
 * the checks. False when the command line is wrong. */
static inline bool connrate_opts_done(struct connrate_opts *c)
{
    if (strcmp(c->mode, "serial") == 0) {
        c->q = 1;
    } else if (strcmp(c->mode, "inflight") == 0) {
        c->inflight_mode = true;
        if (!c->q_given)
            c->q = 64;
    } else {
        return false;
    }
    return c->q >= 1 && c->q <= 65536 && c->duration_s > 0 && c->port <= 65535 && c->timeout_ms != 0 &&
           !(c->role == ROLE_CLIENT && c->port == 0);
}

/* One of a program's own options, a long one: an unsigned number
 * (strtoul, as the shared ones) into *number, or, without an argument,
 * true into *flag. */
struct connrate_own_opt {
    const char *name;
    unsigned *number;
    bool *flag;
};

#define CONNRATE_MAX_OWN_OPTS 4

/* The command line: the shared options into *c, the n rows of own, and
 * connrate_opts_done. -1 to go on; else the exit status after usage():
 * 0 for -h, 2 when the command line is wrong. */
static inline int connrate_parse_options(struct connrate_opts *c, int argc, char **argv,
                                         const struct connrate_own_opt *own, unsigned n, void (*usage)(void))
{
    struct option lopts[11 + CONNRATE_MAX_OWN_OPTS] = {CONNRATE_LONG_OPTS};
    n = n < CONNRATE_MAX_OWN_OPTS ? n : CONNRATE_MAX_OWN_OPTS;
    for (unsigned i = 0; i < n; i++)
        lopts[10 + i] = (struct option){own[i].name, own[i].number ? required_argument : no_argument, NULL,
                                        CR_O_OWN + (int)i};
    int o;
    while ((o = getopt_long(argc, argv, CONNRATE_SHORT_OPTS, lopts, NULL)) != -1) {
        if (connrate_opt(c, o, optarg))
            continue;
        if (o < CR_O_OWN || o >= CR_O_OWN + (int)n) {
            usage();
            return o == 'h' ? 0 : 2;
        }
        if (own[o - CR_O_OWN].number)
            *own[o - CR_O_OWN].number = (unsigned)strtoul(optarg, NULL, 10);
        else
            *own[o - CR_O_OWN].flag = true;
    }
    if (!connrate_opts_done(c)) {
        usage();
        return 2;
    }
    return -1;
}

/* Set by SIGINT or SIGTERM; the loops that look at it end the run
 * (connrate's --server, tcp_connrate's server and, as a failure, client). */
static volatile sig_atomic_t g_signalled;

static void connrate_on_signal(int sig)
{
    (void)sig;
    g_signalled = 1;
}

/* SIGINT and SIGTERM set g_signalled; SIGPIPE is ignored (a peer that
 * went away is seen as a write error). */
static inline void connrate_catch_signals(void)
{
    signal(SIGINT, connrate_on_signal);
    signal(SIGTERM, connrate_on_signal);
    signal(SIGPIPE, SIG_IGN);
}

/* The nearest-rank percentile p of n sorted figures in nanoseconds, in
 * microseconds (0 without figures). */
static inline double connrate_percentile_us(const uint32_t *sorted, long n, double p)
{
    if (n <= 0)
        return 0;
    long k = (long)(p * (double)n + 0.999999) - 1;
    if (k < 0)
        k = 0;
    if (k >= n)
        k = n - 1;
    return sorted[k] / 1e3;
}

#endif
