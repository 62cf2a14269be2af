/*
 * stats.c - see stats.h.
 */
#include "lib/stats.h"

void tc_stats_add(struct tc_stats *s, uint64_t v)
{
    if (s->n == 0 || v < s->min)
        s->min = v;
    if (s->n == 0 || v > s->max)
        s->max = v;
    s->n++;
    s->sum += v;
}

double tc_mb_per_s(uint64_t bytes, uint64_t us)
{
    return (double)bytes / (double)(us ? us : 1);
}

int tc_rate_prec(double mb_s)
{
    return mb_s < 1.0 ? 3 : 1;
}
