/*
 * cmdline.c - see cmdline.h.
 */
#include <getopt.h>
#include <stdlib.h>

#include "lib/args.h"
#include "lib/cmdline.h"
#include "lib/log.h"

/* getopt_long's value for row i without a letter (LONG_ONLY + i), and for
 * --version without -V (LONG_ONLY + n): above every letter. */
#define LONG_ONLY 0x100

static int arg_kind(const struct tc_opt *o)
{
    return o->text || o->number ? required_argument : o->has_arg;
}

/* "+s:c::a:..." for the rows with a letter, then h and V. */
static void build_optstring(const struct tc_cmdline *c, const struct tc_opt *opts, unsigned n, char *s)
{
    size_t len = 0;
    if (c->options_first)
        s[len++] = '+';
    for (unsigned i = 0; i < n; i++) {
        bool seen = false;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = opts[j].letter == opts[i].letter;
        if (!opts[i].letter || seen)
            continue;
        s[len++] = (char)opts[i].letter;
        for (int colons = arg_kind(&opts[i]); colons > 0; colons--)
            s[len++] = ':';
    }
    s[len++] = 'h';
    if (c->version_letter)
        s[len++] = 'V';
    s[len] = '\0';
}

static void build_longopts(const struct tc_cmdline *c, const struct tc_opt *opts, unsigned n, struct option *l)
{
    unsigned len = 0;
    for (unsigned i = 0; i < n; i++)
        if (opts[i].name)
            l[len++] = (struct option){opts[i].name, arg_kind(&opts[i]), NULL,
                                       opts[i].letter ? opts[i].letter : LONG_ONLY + (int)i};
    l[len++] = (struct option){"help", no_argument, NULL, 'h'};
    l[len++] = (struct option){"version", no_argument, NULL, c->version_letter ? 'V' : LONG_ONLY + (int)n};
    l[len] = (struct option){NULL, 0, NULL, 0};
}

/* The row getopt_long's value ch stands for; NULL: none. */
static const struct tc_opt *row_of(const struct tc_opt *opts, unsigned n, int ch)
{
    if (ch >= LONG_ONLY)
        return ch - LONG_ONLY < (int)n ? &opts[ch - LONG_ONLY] : NULL;
    for (unsigned i = 0; i < n; i++)
        if (opts[i].letter == ch)
            return &opts[i];
    return NULL;
}

static int take(const struct tc_cmdline *c, const struct tc_opt *o, const char *arg)
{
    if (o->given)
        *o->given = true;
    if (o->set_true)
        *o->set_true = true;
    else if (o->set_false)
        *o->set_false = false;
    else if (o->choice)
        *o->choice = o->value;
    else if (o->counter)
        ++*o->counter;
    else if (o->text)
        *o->text = arg;
    else if (o->number) {
        uint32_t v = 0;
        int rc = tc_opt_number(c->help_cmd, arg, o->min, o->max, o->suffixes, &v, o->what);
        if (rc >= 0)
            return rc;
        *o->number = v * (o->scale ? o->scale : 1u);
    } else if (o->take)
        return o->take(o->ctx, arg);
    return -1;
}

int tc_parse_cmdline(const struct tc_cmdline *c, const struct tc_opt *opts, unsigned n, int argc, char **argv)
{
    /* "+", a letter and up to two colons a row, "hV", NUL; a long option a
     * row, help, version and the end. */
    char *optstring = malloc(3 * (size_t)n + 4);
    struct option *longopts = calloc((size_t)n + 3, sizeof *longopts);
    if (!optstring || !longopts) {
        free(optstring);
        free(longopts);
        tc_complain(NULL, "out of memory");
        return TC_EXIT_FAILED;
    }
    build_optstring(c, opts, n, optstring);
    build_longopts(c, opts, n, longopts);
    int ch, rc = -1;
    while (rc < 0 && (ch = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
        const struct tc_opt *o = row_of(opts, n, ch);
        if (o)
            rc = take(c, o, optarg);
        else if (ch == 'h') {
            c->usage(stdout);
            rc = TC_EXIT_OK;
        } else if (ch == (c->version_letter ? 'V' : LONG_ONLY + (int)n))
            rc = tc_print_version();
        else
            rc = tc_usage_hint(c->help_cmd); /* getopt_long has said what is wrong */
    }
    free(optstring);
    free(longopts);
    if (rc < 0 && c->no_operands && optind < argc)
        rc = tc_usage_error(c->help_cmd, "unexpected argument '%s'", argv[optind]);
    return rc;
}
