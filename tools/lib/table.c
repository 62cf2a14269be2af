/*
 * table.c - see table.h.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/table.h"

/* *p grown to cap elements; false without memory (*p then unchanged). */
static bool grow(uint64_t **p, size_t cap)
{
    uint64_t *q = realloc(*p, cap * sizeof *q);
    if (!q)
        return false;
    *p = q;
    return true;
}

bool tc_lat_add(struct tc_lat_samples *s, uint64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        if (!grow(&s->ns, cap))
            return false;
        s->cap = cap;
    }
    s->ns[s->n++] = ns;
    return true;
}

void tc_lat_free(struct tc_lat_samples *s)
{
    free(s->ns);
    memset(s, 0, sizeof *s);
}

bool tc_bw_add(struct tc_bw_samples *s, uint64_t msgs, uint64_t t)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        if (!grow(&s->msgs, cap) || !grow(&s->t, cap))
            return false;
        s->cap = cap;
    }
    s->msgs[s->n] = msgs;
    s->t[s->n] = t;
    s->n++;
    return true;
}

void tc_bw_free(struct tc_bw_samples *s)
{
    free(s->msgs);
    free(s->t);
    memset(s, 0, sizeof *s);
}

/* Messages done at time t, interpolated between the samples (which are
 * irregular: one per signaled completion or credit). */
static double msgs_at(const struct tc_bw_samples *s, uint64_t t, size_t *hint)
{
    size_t i = *hint;
    while (i + 1 < s->n && s->t[i + 1] <= t)
        i++;
    *hint = i;
    if (i + 1 >= s->n || s->t[i + 1] == s->t[i])
        return (double)s->msgs[i];
    double f = (double)(t - s->t[i]) / (double)(s->t[i + 1] - s->t[i]);
    return (double)s->msgs[i] + f * (double)(s->msgs[i + 1] - s->msgs[i]);
}

/*
 * Average: all messages over the whole time. Peak: the best of ten equal
 * time slices of the run (perftest's peak compares single completions,
 * which says little when completions are moderated; a slice is steadier).
 */
bool tc_bw_result_of(uint32_t size, const struct tc_bw_samples *s, struct tc_bw_result *r)
{
    memset(r, 0, sizeof *r);
    r->msgs = s->n ? s->msgs[s->n - 1] : 0;
    if (s->n < 2 || s->t[s->n - 1] <= s->t[0])
        return false;
    uint64_t t0 = s->t[0], t1 = s->t[s->n - 1];
    double secs = (double)(t1 - t0) / 1e9;
    r->avg = (double)r->msgs * size / secs / 1048576.0;
    r->peak = r->avg;
    const int slices = 10;
    size_t hint = 0;
    double prev = msgs_at(s, t0, &hint);
    for (int j = 1; j <= slices; j++) {
        uint64_t tb = t0 + (t1 - t0) * (uint64_t)j / slices;
        uint64_t ta = t0 + (t1 - t0) * (uint64_t)(j - 1) / slices;
        double cur = msgs_at(s, tb, &hint);
        if (tb > ta) {
            double rate = (cur - prev) * size / ((double)(tb - ta) / 1e9) / 1048576.0;
            if (rate > r->peak)
                r->peak = rate;
        }
        prev = cur;
    }
    r->rate = (double)r->msgs / secs / 1e6;
    return true;
}

void tc_table_columns(bool latency)
{
    if (latency)
        tc_say(NULL, " #bytes   #iterations  t_min[usec]  t_typical[usec]  t_max[usec]  t_avg[usec]  "
                     "t_stdev[usec]  99%% percentile[usec]");
    else
        tc_say(NULL, " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]");
}

void tc_table_rule(void)
{
    tc_say(NULL, "%s", TC_TABLE_RULE);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void tc_table_lat(uint32_t size, struct tc_lat_samples *s, double factor)
{
    if (s->n == 0) {
        tc_say(NULL, " %-8" PRIu32 " %-12u (no samples)", size, 0u);
        return;
    }
    qsort(s->ns, s->n, sizeof *s->ns, cmp_u64);
    double k = factor / 1000.0; /* ns -> us, one way or whole */
    double sum = 0;
    for (size_t i = 0; i < s->n; i++)
        sum += (double)s->ns[i];
    double avg = sum / (double)s->n, var = 0;
    for (size_t i = 0; i < s->n; i++) {
        double d = (double)s->ns[i] - avg;
        var += d * d;
    }
    double stdev = sqrt(var / (double)s->n);
    size_t p99 = (size_t)ceil(0.99 * (double)s->n);
    if (p99 > 0)
        p99--;
    tc_say(NULL, " %-8" PRIu32 " %-12zu %-12.2f %-16.2f %-12.2f %-12.2f %-14.2f %.2f", size, s->n,
           (double)s->ns[0] * k, (double)s->ns[s->n / 2] * k, (double)s->ns[s->n - 1] * k, avg * k, stdev * k,
           (double)s->ns[p99] * k);
}

void tc_table_bw_result(uint32_t size, const struct tc_bw_result *r, const char *note)
{
    tc_say(NULL, " %-10" PRIu32 " %-14" PRIu64 " %-18.2f %-20.2f %.6f%s%s", size, r->msgs, r->peak, r->avg, r->rate,
           note ? "   " : "", note ? note : "");
}

void tc_table_too_short(uint32_t size, uint64_t msgs)
{
    tc_say(NULL, " %-10" PRIu32 " %-14" PRIu64 " (run too short to time)", size, msgs);
}

void tc_table_bw(uint32_t size, const struct tc_bw_samples *s)
{
    struct tc_bw_result r;
    if (tc_bw_result_of(size, s, &r))
        tc_table_bw_result(size, &r, NULL);
    else
        tc_table_too_short(size, r.msgs);
}
