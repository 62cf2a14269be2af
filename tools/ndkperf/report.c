/*
 * report.c - everything ndkperf prints: diagnostics on stderr, perftest's
 * header and table on stdout, the progress line on stderr, and the
 * statistics behind the table.
 *
 * Units as perftest: MB is 2^20 bytes, usec is microseconds, Mpps is
 * millions of messages per second. Latency tests report half the round
 * trip for Send and Write (one way), the whole round trip for Read.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ndkperf.h"

#define RULE "---------------------------------------------------------------------------------------\n"

bool show_role;

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Diagnostics                                                              */
/* ------------------------------------------------------------------------ */

/* One line, written at once: with --loopback two processes share stderr. */
static void vsay_err(const char *role, const char *what, const char *fmt, va_list ap)
{
    char line[1024];
    size_t n = (size_t)snprintf(line, sizeof line, "ndkperf: %s%s%s", role && show_role ? role : "",
                                role && show_role ? ": " : "", what ? what : "");
    if (n < sizeof line)
        n += (size_t)vsnprintf(line + n, sizeof line - n, fmt, ap);
    if (n > sizeof line - 2)
        n = sizeof line - 2;
    line[n++] = '\n';
    fflush(stdout); /* keep errors after the lines that led to them */
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

void complain(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay_err(role, NULL, fmt, ap);
    va_end(ap);
}

void library_problem(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsay_err(role, "library problem: ", fmt, ap);
    va_end(ap);
}

void ndk_failed(const char *role, const char *call, NTSTATUS st, const char *fmt, ...)
{
    char ctx[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ctx, sizeof ctx, fmt, ap);
        va_end(ap);
    }
    complain(role, "%s failed: %s%s%s%s", call, ndk_status_name(st), ctx[0] ? " (" : "", ctx, ctx[0] ? ")" : "");
}

/* ------------------------------------------------------------------------ */
/* Samples                                                                  */
/* ------------------------------------------------------------------------ */

bool lat_add(struct lat_samples *s, uint64_t ns)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 4096;
        uint64_t *p = realloc(s->ns, cap * sizeof *p);
        if (!p)
            return false;
        s->ns = p;
        s->cap = cap;
    }
    s->ns[s->n++] = ns;
    return true;
}

void lat_free(struct lat_samples *s)
{
    free(s->ns);
    memset(s, 0, sizeof *s);
}

bool bw_add(struct bw_samples *s, uint64_t msgs, uint64_t t)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *m = realloc(s->msgs, cap * sizeof *m);
        if (!m)
            return false;
        s->msgs = m;
        uint64_t *tt = realloc(s->t, cap * sizeof *tt);
        if (!tt)
            return false;
        s->t = tt;
        s->cap = cap;
    }
    s->msgs[s->n] = msgs;
    s->t[s->n] = t;
    s->n++;
    return true;
}

void bw_free(struct bw_samples *s)
{
    free(s->msgs);
    free(s->t);
    memset(s, 0, sizeof *s);
}

/* ------------------------------------------------------------------------ */
/* Header and table                                                         */
/* ------------------------------------------------------------------------ */

static const char *wait_text(const struct options *o)
{
    switch (o->wait) {
    case WAIT_SPIN:
        return "busy-polling NdkGetCqResults (--wait=spin)";
    case WAIT_EVENTS:
        return "NdkArmCq + notification callback (--wait=events)";
    default:
        return "polling NdkGetCqResults, sched_yield() when empty (--wait=yield)";
    }
}

void report_header(const struct endpoint *e, const struct test_params *tp, const char *placement)
{
    const struct options *o = e->opt;
    const NDK_ADAPTER_INFO *in = &e->info;
    printf(RULE);
    printf("                    NDK %s Test\n", test_title(tp->test));
    printf(" Adapter         : %s, NDK %u.%u, %s\n", e->adapter_name, in->Version.Major, in->Version.Minor,
           in->RdmaTechnology == NdkiWarp ? "iWARP" : "not iWARP");
    printf(" Placement       : %s\n", placement);
    printf(" Completions     : %s%s\n", wait_text(o), o->busy_poll ? ", provider busy-poll mode" : "");
    if (tp->all_sizes)
        printf(" Message sizes   : %u .. %u bytes (-a)\n", NDKPERF_MIN_ALL_SIZE, NDKPERF_MAX_SIZE);
    else
        printf(" Message size    : %" PRIu32 " bytes\n", tp->size);
    if (tp->iters)
        printf(" Iterations      : %" PRIu32, tp->iters);
    else
        printf(" Duration        : %.1f s", tp->duration_ms / 1000.0);
    if (test_is_lat(tp->test))
        printf(" per size, after %" PRIu32 " warm-up iterations\n", tp->warmup);
    else
        printf(" per size\n");
    printf(" Queue depths    : initiator %" PRIu32 " (%s), receive %" PRIu32 ", CQ signaled every %" PRIu32 "%s\n",
           e->sq_limit, test_is_lat(tp->test) ? "latency test: one message in flight" : "-q plus one for control",
           e->rq_depth, e->signal_every, o->signal_all ? " (--signal-all: every request)" : "");
    if (!test_is_lat(tp->test) && o->post_list > 1)
        printf(" Doorbells       : one per chain of up to %" PRIu32 " requests (-l; NDK_OP_FLAG_DEFER on all but the last)\n",
               o->post_list);
    else if (!test_is_lat(tp->test))
        printf(" Doorbells       : one per request (-l 1)\n");
    if (tp->test == T_SEND_BW)
        printf(" Send credits    : receiver keeps %" PRIu32 " receives posted, credits every %" PRIu32 "\n",
               tp->rx_depth, tp->rx_depth / 4 ? tp->rx_depth / 4 : 1);
    printf(" Inline data     : up to %" PRIu32 " bytes (adapter max %" PRIu32 ")\n", e->qp_inline,
           in->MaxInlineDataSize);
    if (test_uses_read(tp->test))
        printf(" Read limits     : effective IRD %" PRIu32 ", ORD %" PRIu32 "\n", e->ird, e->ord);
    printf(" local buffer    : VA 0x%016" PRIx64 " remote token 0x%08" PRIx32 " size %" PRIu32 "\n", e->local.va,
           e->local.token, e->local.size);
    printf(" remote buffer   : VA 0x%016" PRIx64 " remote token 0x%08" PRIx32 " size %" PRIu32 "\n", e->peer.va,
           e->peer.token, e->peer.size);
    printf(RULE);
    fflush(stdout);
}

void report_columns(enum test_kind t)
{
    if (test_is_lat(t))
        printf(" #bytes   #iterations  t_min[usec]  t_typical[usec]  t_max[usec]  t_avg[usec]  t_stdev[usec]"
               "  99%% percentile[usec]\n");
    else
        printf(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n");
    fflush(stdout);
}

void report_footer(void)
{
    printf(RULE);
    fflush(stdout);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void report_lat(uint32_t size, struct lat_samples *s, double factor)
{
    if (s->n == 0) {
        printf(" %-8" PRIu32 " %-12u (no samples)\n", size, 0u);
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
    printf(" %-8" PRIu32 " %-12zu %-12.2f %-16.2f %-12.2f %-12.2f %-14.2f %.2f\n", size, s->n,
           (double)s->ns[0] * k, (double)s->ns[s->n / 2] * k, (double)s->ns[s->n - 1] * k, avg * k, stdev * k,
           (double)s->ns[p99] * k);
    fflush(stdout);
}

/* Messages done at time t, interpolated between the samples (which are
 * irregular: one per signaled completion or credit). */
static double msgs_at(const struct bw_samples *s, uint64_t t, size_t *hint)
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

/* The numbers of report_bw (see there). */
bool bw_result_of(uint32_t size, const struct bw_samples *s, struct bw_result *r)
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

void report_bw_result(uint32_t size, const struct bw_result *r, const char *note)
{
    printf(" %-10" PRIu32 " %-14" PRIu64 " %-18.2f %-20.2f %.6f%s%s\n", size, r->msgs, r->peak, r->avg, r->rate,
           note ? "   " : "", note ? note : "");
    fflush(stdout);
}

/*
 * Average: all messages over the whole time. Peak: the best of ten equal
 * time slices of the run (perftest's peak compares single completions,
 * which says little when completions are moderated; a slice is steadier).
 */
void report_bw(uint32_t size, const struct bw_samples *s)
{
    struct bw_result r;
    if (!bw_result_of(size, s, &r)) {
        printf(" %-10" PRIu32 " %-14" PRIu64 " (run too short to time)\n", size, r.msgs);
        return;
    }
    report_bw_result(size, &r, NULL);
}

/* ------------------------------------------------------------------------ */
/* Progress line                                                            */
/* ------------------------------------------------------------------------ */

#define PROGRESS_AFTER_NS 3000000000ull
#define PROGRESS_EVERY_NS 500000000ull

void progress_start(struct progress *p, const struct options *o, uint32_t size, const char *unit, uint64_t start)
{
    p->enabled = o->progress > 0 || (o->progress < 0 && isatty(STDERR_FILENO));
    p->shown = false;
    p->start = start;
    p->next = start + PROGRESS_AFTER_NS;
    p->size = size;
    p->unit = unit;
}

void progress_update(struct progress *p, uint64_t now, uint64_t count, double extra, const char *extra_unit)
{
    if (!p->enabled || now < p->next)
        return;
    p->next = now + PROGRESS_EVERY_NS;
    p->shown = true;
    fprintf(stderr, "\r %" PRIu32 " bytes: %" PRIu64 " %s in %.1f s, %.2f %s    ", p->size, count, p->unit,
            (double)(now - p->start) / 1e9, extra, extra_unit);
    fflush(stderr);
}

void progress_end(struct progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r%79s\r", "");
    p->shown = false;
}
