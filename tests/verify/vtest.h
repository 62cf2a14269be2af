/*
 * vtest.h - helpers for the NDK verifier's tests (docs/verifier.md): each
 * test is a consumer that breaks one rule on a verified adapter and checks
 * the exact report line (ndk_verifier_set_report_callback) and the status
 * of the offending call. Built on the data-path helpers of the conformance
 * tests (tests/conformance/dptest.h).
 */
#ifndef NDK_VERIFY_VTEST_H
#define NDK_VERIFY_VTEST_H

#include "../conformance/dptest.h"

#define VT_MAX 32

static pthread_mutex_t vt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t vt_cond = PTHREAD_COND_INITIALIZER;
static char vt_lines[VT_MAX][1024];
static char vt_rules[VT_MAX][8];
static unsigned vt_n;

/* A report of this rule holds the reporting thread (inside its NDK call)
 * until vt_release: the races of W2, C1 and L5 made deterministic. */
static const char *vt_hold_rule;
static tl_event vt_held, vt_released;

static void vt_report(PVOID ctx, NDK_ADAPTER *ad, const char *rule, const char *line)
{
    (void)ctx;
    (void)ad;
    pthread_mutex_lock(&vt_lock);
    if (vt_n < VT_MAX) {
        snprintf(vt_lines[vt_n], sizeof vt_lines[0], "%s", line);
        snprintf(vt_rules[vt_n], sizeof vt_rules[0], "%s", rule);
        vt_n++;
    }
    bool hold = vt_hold_rule && strcmp(rule, vt_hold_rule) == 0;
    pthread_cond_broadcast(&vt_cond);
    pthread_mutex_unlock(&vt_lock);
    if (hold) {
        tl_event_signal(&vt_held);
        tl_event_wait(&vt_released, 1, DP_WAIT_MS);
    }
}

/* The next report of rule holds its thread until vt_release(). */
static inline void vt_hold(const char *rule)
{
    tl_event_init(&vt_held);
    tl_event_init(&vt_released);
    vt_hold_rule = rule;
}

static inline void vt_release(void)
{
    tl_event_signal(&vt_released);
}

/* Installs the report callback and forgets earlier reports. */
static inline void vt_begin(void)
{
    ndk_verifier_set_report_callback(vt_report, NULL);
    pthread_mutex_lock(&vt_lock);
    vt_n = 0;
    pthread_mutex_unlock(&vt_lock);
}

static inline unsigned vt_count(void)
{
    pthread_mutex_lock(&vt_lock);
    unsigned n = vt_n;
    pthread_mutex_unlock(&vt_lock);
    return n;
}

/* The first report of rule, waiting at most ms for it; "" when none came. */
static inline const char *vt_wait(const char *rule, unsigned ms)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    const char *found = "";
    pthread_mutex_lock(&vt_lock);
    for (;;) {
        for (unsigned i = 0; i < vt_n && !*found; i++)
            if (strcmp(vt_rules[i], rule) == 0)
                found = vt_lines[i];
        if (*found || pthread_cond_timedwait(&vt_cond, &vt_lock, &until) != 0)
            break;
    }
    for (unsigned i = 0; i < vt_n && !*found; i++)
        if (strcmp(vt_rules[i], rule) == 0)
            found = vt_lines[i];
    pthread_mutex_unlock(&vt_lock);
    return found;
}

/* The exact line the verifier prints for rule on obj. */
static inline const char *vt_line(char *buf, size_t n, const char *id_words, const char *call,
                                  const char *type, const void *obj, const NDK_ADAPTER *ad,
                                  const char *detail, const char *advice)
{
    snprintf(buf, n, "ndk verifier: %s: %s on %s %p (adapter lo %p): %s; instead: %s", id_words,
             call, type, obj, (const void *)ad, detail, advice);
    return buf;
}

#define VT_CHECK_LINE(got, want)                                                               \
    do {                                                                                       \
        const char *g_ = (got), *w_ = (want);                                                  \
        if (strcmp(g_, w_) != 0) {                                                             \
            tl_failures++;                                                                     \
            fprintf(stderr, "%s:%d: report\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, g_,  \
                    w_);                                                                       \
        }                                                                                      \
    } while (0)

/* A line with a time in it: the part before and the part after. */
#define VT_CHECK_AROUND(got, head, tail)                                                       \
    do {                                                                                       \
        const char *g_ = (got), *h_ = (head), *t_ = (tail);                                    \
        size_t gl_ = strlen(g_), hl_ = strlen(h_), tl_ = strlen(t_);                           \
        if (gl_ < hl_ + tl_ || strncmp(g_, h_, hl_) != 0 || strcmp(g_ + gl_ - tl_, t_) != 0) {  \
            tl_failures++;                                                                     \
            fprintf(stderr, "%s:%d: report\n  got:  %s\n  want: %s...%s\n", __FILE__,         \
                    __LINE__, g_, h_, t_);                                                     \
        }                                                                                      \
    } while (0)

/* Opens "lo" with the verifier on (and the suite's short timeouts). */
static inline bool vt_side_open(dp_side *s, ULONG connect_event_ms, ULONG defer_ms)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.Flags = NDK_OPEN_FLAG_VERIFY;
    o.VerifyConnectEventMs = connect_event_ms;
    o.VerifyDeferMs = defer_ms;
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &s->ad);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    for (unsigned i = 0; i < DP_MAX_ADAPTERS; i++) {
        if (!dp_adapters[i]) {
            dp_adapters[i] = s->ad;
            break;
        }
    }
    ULONG size = sizeof s->info;
    DP_CHECK_ST(s->ad->Dispatch->NdkQueryAdapterInfo(s->ad, &s->info, &size), STATUS_SUCCESS);
    s->pd = dp_pd_new(s);
    return s->pd != NULL;
}

/* Two verified adapters (with these verifier timeouts, 0: the defaults)
 * and an established connection between them. */
static inline bool vt_pair_open_ms(dp_pair *x, const dp_cfg *cfg, ULONG connect_event_ms,
                                   ULONG defer_ms)
{
    memset(x, 0, sizeof *x);
    if (!vt_side_open(&x->a, connect_event_ms, defer_ms) ||
        !vt_side_open(&x->p, connect_event_ms, defer_ms))
        return false;
    x->c = dp_conn_new(&x->a, &x->p, cfg);
    return x->c && dp_conn_establish(x->c);
}

static inline bool vt_pair_open(dp_pair *x, const dp_cfg *cfg)
{
    return vt_pair_open_ms(x, cfg, 0, 0);
}

#endif
