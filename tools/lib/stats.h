/*
 * stats.h - summaries of repeated measurements (count, average, minimum,
 * maximum) and rates as the tools print them.
 */
#ifndef TC_STATS_H
#define TC_STATS_H

#include <stdint.h>

struct tc_stats {
    unsigned n;
    uint64_t sum, min, max;
};

void tc_stats_add(struct tc_stats *s, uint64_t v);
/* MB/s (10^6 bytes per second) of bytes in us microseconds. */
double tc_mb_per_s(uint64_t bytes, uint64_t us);
/* Decimals for a rate printed with "%.*f": small rates keep three. */
int tc_rate_prec(double mb_s);
/* The two arguments of "%.*f MB/s" for bytes in us. */
#define TC_RATE(bytes, us) tc_rate_prec(tc_mb_per_s((bytes), (us))), tc_mb_per_s((bytes), (us))

#endif
