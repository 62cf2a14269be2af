/*
 * table.h - perftest's results tables: latency samples and bandwidth
 * progress points, and the lines perftest prints for them.
 *
 * Units as perftest: MB is 2^20 bytes, usec is microseconds, Mpps is
 * millions of messages per second.
 */
#ifndef TC_TABLE_H
#define TC_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Latency samples of one size, in ns. */
struct tc_lat_samples {
    uint64_t *ns;
    size_t n, cap;
};
bool tc_lat_add(struct tc_lat_samples *s, uint64_t ns);
void tc_lat_free(struct tc_lat_samples *s);

/* Bandwidth progress points: (messages done, time in ns). */
struct tc_bw_samples {
    uint64_t *msgs, *t;
    size_t n, cap;
};
bool tc_bw_add(struct tc_bw_samples *s, uint64_t msgs, uint64_t t);
void tc_bw_free(struct tc_bw_samples *s);

/* What a bandwidth line shows; false when the run was too short to time. */
struct tc_bw_result {
    uint64_t msgs;
    double peak, avg, rate; /* MB/s, MB/s, Mpps */
};
bool tc_bw_result_of(uint32_t size, const struct tc_bw_samples *s, struct tc_bw_result *r);

#define TC_TABLE_RULE "---------------------------------------------------------------------------------------"

void tc_table_columns(bool latency);
/* factor: 0.5 for round trips reported one way, 1 for whole ones. Sorts s. */
void tc_table_lat(uint32_t size, struct tc_lat_samples *s, double factor);
void tc_table_bw(uint32_t size, const struct tc_bw_samples *s);
void tc_table_bw_result(uint32_t size, const struct tc_bw_result *r, const char *note);
void tc_table_too_short(uint32_t size, uint64_t msgs);
void tc_table_rule(void);

#endif
