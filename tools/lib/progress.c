/*
 * progress.c - see progress.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/progress.h"

#define FIRST_AFTER_NS 1000000000ull
#define EVERY_NS 250000000ull
#define WIDTH 79

void tc_progress_init(struct tc_progress *p, int mode)
{
    p->enabled = mode > 0 || (mode < 0 && isatty(STDERR_FILENO));
    p->shown = false;
    p->next = tc_now_ns() + FIRST_AFTER_NS;
}

void tc_progress_show(struct tc_progress *p, uint64_t now_ns, const char *fmt, ...)
{
    char line[WIDTH + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    p->next = now_ns + EVERY_NS;
    p->shown = true;
    tc_err_in_place("%-*s", WIDTH, line);
}

void tc_progress_clear(struct tc_progress *p)
{
    if (p->shown)
        tc_err_in_place("%*s\r", WIDTH, "");
    p->shown = false;
}
