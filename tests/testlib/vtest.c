#include "vtest.h"

#define VT_MAX 32

static pthread_mutex_t vt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t vt_cond = PTHREAD_COND_INITIALIZER;
static char vt_lines[VT_MAX][1024];
static char vt_rules[VT_MAX][8];
static unsigned vt_n;

static const char *vt_hold_rule;
tl_event vt_held;
static tl_event vt_released;

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

void vt_hold(const char *rule)
{
    tl_event_init(&vt_held);
    tl_event_init(&vt_released);
    vt_hold_rule = rule;
}

void vt_release(void)
{
    tl_event_signal(&vt_released);
}

void vt_begin(void)
{
    ndk_verifier_set_report_callback(vt_report, NULL);
    pthread_mutex_lock(&vt_lock);
    vt_n = 0;
    pthread_mutex_unlock(&vt_lock);
}

unsigned vt_count(void)
{
    pthread_mutex_lock(&vt_lock);
    unsigned n = vt_n;
    pthread_mutex_unlock(&vt_lock);
    return n;
}

static const char *vt_find(const char *rule)
{
    for (unsigned i = 0; i < vt_n; i++)
        if (strcmp(vt_rules[i], rule) == 0)
            return vt_lines[i];
    return "";
}

const char *vt_wait(const char *rule, unsigned ms)
{
    struct timespec until = tl_deadline(CLOCK_REALTIME, ms);
    pthread_mutex_lock(&vt_lock);
    const char *found = vt_find(rule);
    while (!*found && pthread_cond_timedwait(&vt_cond, &vt_lock, &until) == 0)
        found = vt_find(rule);
    if (!*found)
        found = vt_find(rule);
    pthread_mutex_unlock(&vt_lock);
    return found;
}

const char *vt_line(char *buf, size_t n, const char *id_words, const char *call, const char *type,
                    const void *obj, const NDK_ADAPTER *ad, const char *detail,
                    const char *advice)
{
    snprintf(buf, n, "ndk verifier: %s: %s on %s %p (adapter lo %p): %s; instead: %s", id_words,
             call, type, obj, (const void *)ad, detail, advice);
    return buf;
}

const char *vt_rule(char *buf, size_t n, const char *id_words)
{
    snprintf(buf, n, "%.*s", (int)strcspn(id_words, " "), id_words);
    return buf;
}

bool vt_side_open(dp_side *s, ULONG connect_event_ms, ULONG defer_ms)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.Flags = NDK_OPEN_FLAG_VERIFY;
    o.VerifyConnectEventMs = connect_event_ms;
    o.VerifyDeferMs = defer_ms;
    return dp_side_open_as(s, "lo", &o);
}

bool vt_pair_open_ms(dp_pair *x, const dp_cfg *cfg, ULONG connect_event_ms, ULONG defer_ms)
{
    memset(x, 0, sizeof *x);
    if (!vt_side_open(&x->a, connect_event_ms, defer_ms) ||
        !vt_side_open(&x->p, connect_event_ms, defer_ms))
        return false;
    x->c = dp_conn_new(&x->a, &x->p, cfg);
    return x->c && dp_conn_establish(x->c);
}

bool vt_pair_open(dp_pair *x, const dp_cfg *cfg)
{
    return vt_pair_open_ms(x, cfg, 0, 0);
}

bool vt_sends_open(vt_sends *v, ULONG defer_ms)
{
    memset(v, 0, sizeof *v);
    if (!vt_pair_open_ms(&v->x, NULL, 0, defer_ms) ||
        !dp_buf_reg(&v->x.p, &v->rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1))
        return false;
    v->sbuf = dp_buf_reg(&v->x.a, &v->sm, 64, 0, 2);
    v->rs = dp_sge(&v->rm, 0, 64);
    v->ss = dp_sge(&v->sm, 0, 64);
    return v->sbuf != NULL;
}

void vt_sends_close(vt_sends *v, ULONG na, ULONG np)
{
    NDK_RESULT_EX r[8];
    if (na > 0)
        CHECK_EQ(dp_wait_ex(v->x.c->cqa, r, na, DP_WAIT_MS), na);
    if (np > 0)
        CHECK_EQ(dp_wait_ex(v->x.c->cqp, r, np, DP_WAIT_MS), np);
    dp_mr_close(&v->rm);
    dp_mr_close(&v->sm);
    dp_pair_close(&v->x);
}

bool vt_lone_qp_open(vt_lone_qp *l, const dp_cfg *cfg)
{
    memset(l, 0, sizeof *l);
    if (!vt_side_open(&l->s, 0, 0))
        return false;
    l->cq = dp_cq_new(&l->s, 16);
    if (!l->cq)
        return false;
    l->qp = dp_qp_create(&l->s, l->cq, l->cq, NULL, NULL, cfg, NULL);
    return l->qp != NULL;
}

void vt_lone_qp_close(vt_lone_qp *l)
{
    dp_close(l->qp);
    dp_cq_close(l->cq);
    dp_side_close(&l->s);
}
