/*
 * args.h - what every tool's command line shares: numbers, usage errors,
 * --version, and the exit statuses (the same for every tool; docs/tools.md).
 */
#ifndef TC_ARGS_H
#define TC_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum {
    TC_EXIT_OK = 0,            /* everything asked for was done */
    TC_EXIT_FAILED = 1,        /* the run failed: the message says what to check */
    TC_EXIT_USAGE = 2,         /* the command line is wrong */
    TC_EXIT_UNSUPPORTED = 3,   /* the adapter cannot do what was asked */
    TC_EXIT_INTERRUPTED = 130, /* a second SIGINT/SIGTERM ended it at once */
};

/* A decimal number from min to max; with suffixes also "64K", "8M"
 * (binary). False if s is anything else. */
bool tc_parse_u64(const char *s, uint64_t min, uint64_t max, bool suffixes, uint64_t *out);

/* A number option: -1 when arg is a number from min to max (stored in
 * *out), else the usage error "invalid WHAT 'ARG' (MIN to MAX)" (2). */
int tc_opt_number(const char *help_cmd, const char *arg, uint64_t min, uint64_t max, bool suffixes, uint32_t *out,
                  const char *what);
/* "PROG: message" and "Try 'HELP_CMD --help'." on stderr; returns
 * TC_EXIT_USAGE. help_cmd NULL: the program's name. */
int tc_usage_error(const char *help_cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "Try 'HELP_CMD --help'." after getopt's own complaint; TC_EXIT_USAGE. */
int tc_usage_hint(const char *help_cmd);

/* Takes the option `name` ("--verify") out of argv, wherever it is before
 * a "--", and turns libndk's NDK verifier on for every adapter the tool
 * opens (NDK_VERIFY=1; an NDK_VERIFY already set, such as "abort", is
 * kept; docs/verifier.md). Every mode of a tool has it this way. */
void tc_take_verifier_option(int *argc, char **argv, const char *name);

/* "PROG VERSION (libndk, NDK MAJOR.MINOR)" on stdout; returns TC_EXIT_OK. */
int tc_print_version(void);

/* The "Exit status:" paragraph of a --help text; unsupported: the tool
 * can exit with TC_EXIT_UNSUPPORTED. */
void tc_print_exit_statuses(FILE *f, bool unsupported);

#endif
