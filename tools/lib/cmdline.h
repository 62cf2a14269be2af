/*
 * cmdline.h - a tool's command line from one table: each row names an
 * option (its letter, its long name or both) and what taking it does, and
 * tc_parse_cmdline builds getopt_long's option string and table from the
 * rows, runs the loop and takes each option as its row says. -h/--help and
 * --version are every tool's (args.h); the checks of options together and
 * the operands after them stay with each tool.
 */
#ifndef TC_CMDLINE_H
#define TC_CMDLINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/*
 * One option. Exactly one of the targets says what it does; none: accepted
 * for another tool's command line and ignored (with an argument when
 * has_arg says so).
 */
struct tc_opt {
    int letter;       /* -x; 0: a long option only */
    const char *name; /* --name; NULL: a letter only */

    bool *set_true;  /* *set_true = true */
    bool *set_false; /* *set_false = false */
    int *choice;     /* *choice = value */
    int value;
    int *counter;      /* ++*counter (-dd) */
    const char **text; /* *text = the argument */
    /* *number = the argument, a decimal number from min to max (with
     * suffixes "64K", "8M" too), times scale (0: 1); out of range: "invalid
     * WHAT 'ARG' (MIN to MAX)" (tc_opt_number). */
    uint32_t *number;
    uint64_t min, max;
    bool suffixes;
    uint32_t scale;
    const char *what;
    /* take(ctx, arg): -1 taken, else the exit status; its argument as
     * has_arg says (getopt.h's no_argument, required_argument,
     * optional_argument). */
    int (*take)(void *ctx, const char *arg);
    void *ctx;
    int has_arg;

    bool *given; /* also set true when the option is taken */
};

/* What a command line is besides its table. */
struct tc_cmdline {
    const char *help_cmd;       /* the usage errors' hint; NULL: the program */
    void (*usage)(FILE *f);     /* -h, --help */
    bool version_letter;        /* -V is --version too */
    bool options_first;         /* stop at the first operand (getopt's "+") */
    bool no_operands;           /* an operand is "unexpected argument 'ARG'" */
};

/* Takes argv's options from optind on, as the n rows of opts say: -1 when
 * all were taken (optind at the first operand), else the exit status:
 * TC_EXIT_OK after --help or --version, TC_EXIT_USAGE for an option that
 * is wrong. */
int tc_parse_cmdline(const struct tc_cmdline *c, const struct tc_opt *opts, unsigned n, int argc, char **argv);

/* A table and its number of rows, for tc_parse_cmdline. */
#define TC_OPTS(table) (table), (unsigned)(sizeof(table) / sizeof((table)[0]))

#endif
