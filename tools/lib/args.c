/*
 * args.c - see args.h.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <ndk/ndk.h>

#include "lib/args.h"
#include "lib/log.h"

bool tc_parse_u64(const char *s, uint64_t min, uint64_t max, bool suffixes, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    unsigned shift = 0;
    if (suffixes && (*end == 'k' || *end == 'K'))
        shift = 10, end++;
    else if (suffixes && (*end == 'm' || *end == 'M'))
        shift = 20, end++;
    if (*end || v > (max >> shift))
        return false;
    v <<= shift;
    if (v < min)
        return false;
    *out = v;
    return true;
}

int tc_opt_number(const char *help_cmd, const char *arg, uint64_t min, uint64_t max, bool suffixes, uint32_t *out,
                  const char *what)
{
    uint64_t v;
    if (!tc_parse_u64(arg, min, max, suffixes, &v))
        return tc_usage_error(help_cmd, "invalid %s '%s' (%llu to %llu)", what, arg, (unsigned long long)min,
                              (unsigned long long)max);
    *out = (uint32_t)v;
    return -1;
}

int tc_usage_error(const char *help_cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tc_err(NULL, "%s: %s\nTry '%s --help'.", tc_prog(), msg, help_cmd ? help_cmd : tc_prog());
    return TC_EXIT_USAGE;
}

int tc_usage_hint(const char *help_cmd)
{
    tc_err(NULL, "Try '%s --help'.", help_cmd ? help_cmd : tc_prog());
    return TC_EXIT_USAGE;
}

int tc_print_version(void)
{
    printf("%s %s (libndk, NDK %u.%u)\n", tc_prog(), NDK_TOOLS_VERSION, NDK_PROVIDER_MAJOR_VERSION,
           NDK_PROVIDER_MINOR_VERSION);
    return TC_EXIT_OK;
}

void tc_print_exit_statuses(FILE *f, bool unsupported)
{
    fprintf(f, "Exit status: 0 success; 1 the run failed (the message says what to check);\n"
               "2 usage error;%s 130 interrupted twice.\n",
            unsupported ? " 3 the adapter cannot run this;" : "");
}

void tc_take_verifier_option(int *argc, char **argv, const char *name)
{
    bool found = false;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        if (!found && strcmp(argv[i], "--") == 0) {
            for (; i < *argc; i++)
                argv[out++] = argv[i];
            break;
        }
        if (strcmp(argv[i], name) == 0)
            found = true;
        else
            argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    if (found)
        setenv("NDK_VERIFY", "1", 0);
}
