#include "dptest.h"

#include "rawpeer.h"

static struct {
    void *p;
    size_t len;
    bool mapped; /* mmap'ed (munmap) or malloc'ed (free) */
} dp_allocs[DP_MAX_MAPS];
static unsigned dp_nallocs;
static dp_cq dp_cqs[DP_MAX_CQS];
static unsigned dp_ncqs;
static dp_conn dp_conns[DP_MAX_CONNS];
static unsigned dp_nconns;

size_t dp_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

size_t dp_round_page(size_t n)
{
    size_t pg = dp_page();
    return (n + pg - 1) / pg * pg;
}

void dp_track(void *p, size_t len, bool mapped)
{
    if (dp_nallocs >= DP_MAX_MAPS) {
        fprintf(stderr, "dptest: out of allocation slots\n");
        abort();
    }
    dp_allocs[dp_nallocs].p = p;
    dp_allocs[dp_nallocs].len = len;
    dp_allocs[dp_nallocs].mapped = mapped;
    dp_nallocs++;
}

void *dp_malloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "dptest: out of memory\n");
        abort();
    }
    dp_track(p, n, false);
    return p;
}

uint8_t *dp_guarded(size_t len, bool at_end, uint8_t fill)
{
    size_t pg = dp_page();
    size_t span = dp_round_page(len ? len : 1);
    size_t total = span + 2 * pg;
    uint8_t *m = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "dptest: mmap of %zu bytes failed\n", total);
        abort();
    }
    if (mprotect(m + pg, span, PROT_READ | PROT_WRITE) != 0) {
        fprintf(stderr, "dptest: mprotect failed\n");
        abort();
    }
    dp_track(m, total, true);
    memset(m + pg, fill, span);
    return at_end ? m + pg + span - len : m + pg;
}

void dp_free_all(void)
{
    for (unsigned i = 0; i < dp_nallocs; i++) {
        if (dp_allocs[i].mapped)
            munmap(dp_allocs[i].p, dp_allocs[i].len);
        else
            free(dp_allocs[i].p);
    }
    dp_nallocs = 0;
}

uint8_t dp_pat(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ (seed + 1u) * 0x9E3779B9u ^ (uint32_t)(i >> 32);
    x ^= x >> 15;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    return (uint8_t)x;
}

void dp_fill(void *p, size_t len, uint32_t seed, size_t from)
{
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        b[i] = dp_pat(seed, from + i);
}

long dp_diff(const void *p, size_t len, uint32_t seed, size_t from)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != dp_pat(seed, from + i))
            return (long)i;
    return -1;
}

long dp_diff_byte(const void *p, size_t len, uint8_t v)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != v)
            return (long)i;
    return -1;
}

NTSTATUS dp_finish(dp_req *r, NTSTATUS returned, unsigned ms)
{
    nt_started(r, returned);
    return nt_finish(r, ms);
}

void *dp_created(dp_req *r, NTSTATUS returned, void *inline_obj, NTSTATUS *st)
{
    void *obj = NULL;
    NTSTATUS fin = nt_created(r, returned, &obj, inline_obj);
    if (st)
        *st = fin;
    return obj;
}

NDK_OPEN_OPTIONS dp_options(void)
{
    return nt_opts_ms(3000);
}

NDK_PD *dp_pd_new(dp_side *s)
{
    NDK_PD *o = NULL;
    DP_CHECK_ST(nt_create_pd(s->ad, &o), STATUS_SUCCESS);
    return o;
}

bool dp_side_open_as(dp_side *s, const char *adapter, const NDK_OPEN_OPTIONS *o)
{
    s->ad = NULL;
    s->pd = NULL;
    if (s->enter)
        s->enter(s);
    NTSTATUS st = nt_open(adapter, (NDK_VERSION){2, 1}, o, &s->ad);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    ULONG size = sizeof s->info;
    st = s->ad->Dispatch->NdkQueryAdapterInfo(s->ad, &s->info, &size);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    s->pd = dp_pd_new(s);
    return st == STATUS_SUCCESS && s->pd != NULL;
}

bool dp_side_open_flags(dp_side *s, ULONG flags)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.Flags = flags;
    return dp_side_open_as(s, "lo", &o);
}

bool dp_over_shm(const dp_side *a, const dp_side *b)
{
    return ndk_shm_available(a->ad, NULL) && ndk_shm_available(b->ad, NULL);
}

bool dp_side_open(dp_side *s)
{
    return dp_side_open_flags(s, 0);
}

dp_req *dp_close_start(void *obj)
{
    return obj ? nt_close_start(obj) : NULL;
}

bool dp_close_wait(dp_req *r)
{
    return !r || nt_close_wait(r, DP_WAIT_MS);
}

void dp_side_close(dp_side *s)
{
    dp_close(s->pd);
    s->pd = NULL;
    dp_close_adapter(s->ad);
    s->ad = NULL;
}

void dp_cq_cb(PVOID ctx, NTSTATUS status)
{
    dp_cq *c = ctx;
    if (atomic_fetch_add(&c->in_cb, 1) != 0)
        atomic_fetch_add(&c->overlapped, 1);
    atomic_store(&c->last, status);
    if (c->hook)
        c->hook(c, status);
    atomic_fetch_sub(&c->in_cb, 1);
    tl_event_signal(&c->notify);
}

unsigned dp_cq_notified(dp_cq *c)
{
    return tl_event_count(&c->notify);
}

dp_cq *dp_cq_record(void)
{
    dp_cq *c = tl_take_record(dp_cqs, sizeof *c, &dp_ncqs, DP_MAX_CQS, "dptest's CQ records");
    tl_event_init(&c->notify);
    return c;
}

dp_cq *dp_cq_new(dp_side *s, ULONG depth)
{
    dp_cq *c = dp_cq_record();
    dp_req *r = dp_req_new("NdkCreateCq");
    NDK_CQ *cq = NULL;
    NTSTATUS st;
    NTSTATUS ret =
        s->ad->Dispatch->NdkCreateCq(s->ad, depth, dp_cq_cb, c, NULL, dp_create_cb, r, &cq);
    c->cq = dp_created(r, ret, cq, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return c->cq ? c : NULL;
}

void dp_cq_close(dp_cq *c)
{
    if (c && c->cq) {
        dp_close(c->cq);
        c->cq = NULL;
    }
}

void dp_arm(dp_cq *c, ULONG type)
{
    c->cq->Dispatch->NdkArmCq(c->cq, type);
}

ULONG dp_get(dp_cq *c, NDK_RESULT_EX *out, ULONG n)
{
    return c->cq->Dispatch->NdkGetCqResultsEx(c->cq, out, n);
}

/* One poll of c into out[from .. from + n), with the Ex or the plain call. */
typedef ULONG (*dp_poll_fn)(dp_cq *c, void *out, ULONG from, ULONG n);

static ULONG poll_ex(dp_cq *c, void *out, ULONG from, ULONG n)
{
    return dp_get(c, (NDK_RESULT_EX *)out + from, n);
}

static ULONG poll_plain(dp_cq *c, void *out, ULONG from, ULONG n)
{
    return c->cq->Dispatch->NdkGetCqResults(c->cq, (NDK_RESULT *)out + from, n);
}

/* After a poll that did not find what the caller waits for: arms the CQ
 * and calls again(arg) to poll once more, so that a completion that lands
 * between the poll and the arm is not missed, then waits for the
 * notification unless again found it. A poll-only CQ yields instead. False
 * once the deadline has passed. */
static bool pause_for_results(dp_cq *c, uint64_t deadline, bool (*again)(void *arg), void *arg)
{
    uint64_t now = tl_now_ns();
    if (now >= deadline)
        return false;
    if (c->poll_only) {
        sched_yield();
        return true;
    }
    unsigned before = dp_cq_notified(c);
    dp_arm(c, NDK_CQ_NOTIFY_ANY);
    if (!again(arg))
        tl_event_wait(&c->notify, before + 1, (unsigned)((deadline - now) / 1000000u) + 1);
    return true;
}

/* wait_results' state: results land in out[0 .. want). */
struct want {
    dp_cq *c;
    dp_poll_fn poll_fn;
    void *out;
    ULONG got, want;
};

/* One poll for the results still wanted; true when all are in. */
static bool poll_wanted(void *arg)
{
    struct want *w = arg;
    w->got += w->poll_fn(w->c, w->out, w->got, w->want - w->got);
    return w->got >= w->want;
}

/* Polls until `want` results or ms passed. */
static ULONG wait_results(dp_cq *c, dp_poll_fn poll_fn, void *out, ULONG want, unsigned ms)
{
    struct want w = {c, poll_fn, out, 0, want};
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    while (w.got < want && !poll_wanted(&w) && pause_for_results(c, deadline, poll_wanted, &w))
        ;
    return w.got;
}

ULONG dp_wait_ex(dp_cq *c, NDK_RESULT_EX *out, ULONG want, unsigned ms)
{
    return wait_results(c, poll_ex, out, want, ms);
}

ULONG dp_wait_plain(dp_cq *c, NDK_RESULT *out, ULONG want, unsigned ms)
{
    return wait_results(c, poll_plain, out, want, ms);
}

/* dp_quiet's state: the first max results land in out (if any), all are
 * counted. */
struct drain {
    dp_cq *c;
    NDK_RESULT_EX *out;
    ULONG max, total;
};

/* One poll; true when it found any result. */
static bool poll_drain(void *arg)
{
    struct drain *d = arg;
    NDK_RESULT_EX tmp[16];
    ULONG n = dp_get(d->c, tmp, 16);
    for (ULONG i = 0; i < n; i++) {
        if (d->out && d->total < d->max)
            d->out[d->total] = tmp[i];
        d->total++;
    }
    return n != 0;
}

ULONG dp_quiet(dp_cq *c, NDK_RESULT_EX *out, ULONG max, unsigned ms)
{
    struct drain d = {c, out, max, 0};
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    while (poll_drain(&d) || pause_for_results(c, deadline, poll_drain, &d))
        ;
    return d.total;
}

unsigned dp_count_ctx(const NDK_RESULT_EX *r, ULONG n, void *ctx)
{
    unsigned k = 0;
    for (ULONG i = 0; i < n; i++)
        if (r[i].RequestContext == ctx)
            k++;
    return k;
}

void dp_check_posted_in_order(dp_conn *c, const NDK_OPERATION_TYPE *types, ULONG n)
{
    NDK_RESULT_EX r[32];
    REQUIRE(n <= 32);
    ULONG got = dp_wait_ex(c->cqa, r, n, DP_WAIT_MS);
    CHECK_EQ(got, n);
    for (ULONG i = 0; i < got; i++)
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, types[i], dp_qpctx_a(c), DP_CTX(i + 1), -1);
}

void dp_write_placed(dp_conn *c, const NDK_SGE *g, const void *raddr, UINT32 rtok, const dp_mr *rr)
{
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(2), g, 1, raddr, rtok, 0), STATUS_SUCCESS);
    NDK_SGE rs = dp_sge(rr, 0, 64);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(3), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), dp_nosge(), 0, 0), STATUS_SUCCESS);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(2), -1);
    EXPECT_ONE(c->cqa, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(4), -1);
    EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(3), 0);
}

void dp_check_send_landed(dp_conn *c, uintptr_t sctx, uintptr_t rctx, const uint8_t *rb, size_t len,
                          uint32_t seed)
{
    NDK_RESULT_EX e;
    DP_WAIT(c->cqa, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(sctx), -1);
    DP_WAIT(c->cqp, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(rctx), len);
    DP_CHECK_DATA(rb, len, seed, 0);
}

void dp_check_sends_in_order(dp_conn *c, ULONG n, uintptr_t ctx0, const uint8_t *rb, size_t stride,
                             uint32_t seed)
{
    NDK_RESULT_EX r[32];
    REQUIRE(n <= 32);
    ULONG got = dp_wait_ex(c->cqp, r, n, DP_WAIT_MS);
    CHECK_EQ(got, n);
    for (ULONG i = 0; i < got; i++) {
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c),
                     DP_CTX(ctx0 + i), 100 + i);
        DP_CHECK_DATA(rb + i * stride, 100 + i, seed, i * 1024);
    }
}

NDK_MR *dp_mr_create(NDK_PD *pd, BOOLEAN fast)
{
    NDK_MR *o = NULL;
    DP_CHECK_ST(nt_create_mr(pd, fast, &o), STATUS_SUCCESS);
    return o;
}

NTSTATUS dp_mr_reg_pd(NDK_PD *pd, dp_mr *m, void *addr, size_t len, ULONG flags)
{
    memset(m, 0, sizeof *m);
    m->mr = dp_mr_create(pd, FALSE);
    if (!m->mr)
        return STATUS_UNSUCCESSFUL;
    m->addr = addr;
    m->len = len;
    m->mdl.Next = NULL;
    m->mdl.StartVa = addr;
    m->mdl.ByteOffset = 0;
    m->mdl.ByteCount = (ULONG)len;
    dp_req *r = dp_req_new("NdkRegisterMr");
    NTSTATUS st = dp_finish(
        r, m->mr->Dispatch->NdkRegisterMr(m->mr, &m->mdl, len, flags, dp_req_cb, r), DP_WAIT_MS);
    if (st == STATUS_SUCCESS) {
        m->registered = true;
        m->ltok = m->mr->Dispatch->NdkGetLocalTokenFromMr(m->mr);
        m->rtok = m->mr->Dispatch->NdkGetRemoteTokenFromMr(m->mr);
    }
    return st;
}

bool dp_mr_reg(dp_side *s, dp_mr *m, void *addr, size_t len, ULONG flags)
{
    NTSTATUS st = dp_mr_reg_pd(s->pd, m, addr, len, flags);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

NTSTATUS dp_mr_dereg(dp_mr *m)
{
    dp_req *r = dp_req_new("NdkDeregisterMr");
    NTSTATUS st =
        dp_finish(r, m->mr->Dispatch->NdkDeregisterMr(m->mr, dp_req_cb, r), DP_WAIT_MS);
    if (st == STATUS_SUCCESS)
        m->registered = false;
    return st;
}

void dp_mr_close(dp_mr *m)
{
    if (!m->mr)
        return;
    if (m->registered)
        DP_CHECK_ST(dp_mr_dereg(m), STATUS_SUCCESS);
    dp_close(m->mr);
    m->mr = NULL;
}

uint8_t *dp_buf_reg(dp_side *s, dp_mr *m, size_t len, ULONG flags, uint32_t seed)
{
    uint8_t *b = dp_guarded(len, false, 0);
    dp_fill(b, len, seed, 0);
    if (!dp_mr_reg(s, m, b, len, flags))
        return NULL;
    return b;
}

NDK_SGE dp_sge(const dp_mr *m, size_t off, ULONG len)
{
    return (NDK_SGE){.VirtualAddress = m->addr + off, .Length = len, .MemoryRegionToken = m->ltok};
}

bool dp_frmr_init(dp_side *s, dp_frmr *f, void *addr, size_t len, BOOLEAN remote)
{
    memset(f, 0, sizeof *f);
    f->ad = s->ad;
    f->addr = addr;
    f->len = len;
    f->mdl.StartVa = addr;
    f->mdl.ByteCount = (ULONG)len;
    f->mr = dp_mr_create(s->pd, TRUE);
    if (!f->mr)
        return false;
    size_t pg = dp_page();
    ULONG pages = (ULONG)(((uintptr_t)addr % pg + len + pg - 1) / pg);
    dp_req *r = dp_req_new("NdkInitializeFastRegisterMr");
    NTSTATUS st = dp_finish(r,
                            f->mr->Dispatch->NdkInitializeFastRegisterMr(f->mr, pages, remote,
                                                                         dp_req_cb, r),
                            DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    ULONG size = 0, fbo = 0;
    r = dp_req_new("NdkBuildLAM (size)");
    st = dp_finish(r, s->ad->Dispatch->NdkBuildLAM(s->ad, &f->mdl, len, dp_req_cb, r, NULL, &size,
                                                   &fbo),
                   DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_BUFFER_TOO_SMALL);
    ULONG want = (ULONG)(offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray) +
                         pages * sizeof(NDK_LOGICAL_ADDRESS));
    CHECK_EQ(size, want);
    if (size < want)
        size = want;
    f->lam = dp_malloc(size);
    r = dp_req_new("NdkBuildLAM");
    st = dp_finish(r, s->ad->Dispatch->NdkBuildLAM(s->ad, &f->mdl, len, dp_req_cb, r, f->lam, &size,
                                                   &f->fbo),
                   DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS) {
        f->lam = NULL;
        return false;
    }
    CHECK_EQ(f->fbo, (uintptr_t)addr % pg);
    CHECK_EQ(f->lam->AdapterPageCount, pages);
    return true;
}

NTSTATUS dp_frmr_post(NDK_QP *qp, void *ctx, dp_frmr *f, void *base_va, ULONG flags)
{
    NTSTATUS st = qp->Dispatch->NdkFastRegister(qp, ctx, f->mr, f->lam->AdapterPageCount,
                                                f->lam->AdapterPageArray, f->fbo, f->len, base_va,
                                                flags);
    if (st == STATUS_SUCCESS)
        f->tok = f->mr->Dispatch->NdkGetRemoteTokenFromMr(f->mr);
    return st;
}

void dp_frmr_close(dp_frmr *f)
{
    if (f->lam) {
        f->ad->Dispatch->NdkReleaseLAM(f->ad, f->lam);
        f->lam = NULL;
    }
    if (f->mr) {
        dp_close(f->mr);
        f->mr = NULL;
    }
}

NDK_MW *dp_mw_new(dp_side *s)
{
    NDK_MW *o = NULL;
    DP_CHECK_ST(nt_create_mw(s->pd, &o), STATUS_SUCCESS);
    return o;
}

dp_cfg dp_cfg_default(void)
{
    dp_cfg c;
    memset(&c, 0, sizeof c);
    c.rqd = 64;
    c.iqd = 64;
    c.rsge = 4;
    c.isge = 4;
    c.inl = 0;
    c.ird = 16;
    c.ord = 16;
    return c;
}

void *dp_qpctx_a(dp_conn *c)
{
    return &c->ctx_a;
}

void *dp_qpctx_p(dp_conn *c)
{
    return &c->ctx_p;
}

void dp_disc_cb(PVOID ctx)
{
    tl_event_signal(ctx);
}

static void dp_disc_ex_a(PVOID ctx, ULONG reason)
{
    dp_conn *c = ctx;
    atomic_store(&c->reason_a, reason);
    tl_event_signal(&c->disc_a);
}

static void dp_disc_ex_p(PVOID ctx, ULONG reason)
{
    dp_conn *c = ctx;
    atomic_store(&c->reason_p, reason);
    tl_event_signal(&c->disc_p);
}

void dp_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    dp_conn *k = ctx;
    NDK_CONNECTOR *none = NULL;
    /* One connection per listener here; a second request is a bug. */
    DP_CB_CHECK(atomic_compare_exchange_strong(&k->incoming, &none, c));
    tl_event_signal(&k->lev);
}

NDK_QP *dp_qp_create(dp_side *s, dp_cq *rcq, dp_cq *icq, NDK_SRQ *srq, void *qpctx,
                     const dp_cfg *cfg, NTSTATUS *pst)
{
    dp_req *r = dp_req_new("NdkCreateQp");
    NDK_QP *qp = NULL;
    NTSTATUS ret;
    if (srq)
        ret = s->pd->Dispatch->NdkCreateQpWithSrq(s->pd, rcq->cq, icq->cq, srq, qpctx, cfg->iqd,
                                                  cfg->isge, cfg->inl, dp_create_cb, r, &qp);
    else
        ret = s->pd->Dispatch->NdkCreateQp(s->pd, rcq->cq, icq->cq, qpctx, cfg->rqd, cfg->iqd,
                                           cfg->rsge, cfg->isge, cfg->inl, dp_create_cb, r, &qp);
    NTSTATUS st;
    NDK_QP *o = dp_created(r, ret, qp, &st);
    if (pst)
        *pst = st;
    else
        DP_CHECK_ST(st, STATUS_SUCCESS);
    return o;
}

dp_conn *dp_conn_record(void)
{
    dp_conn *c = tl_take_record(dp_conns, sizeof *c, &dp_nconns, DP_MAX_CONNS, "dptest's connection records");
    tl_event_init(&c->lev);
    tl_event_init(&c->disc_a);
    tl_event_init(&c->disc_p);
    return c;
}

dp_conn *dp_conn_new(dp_side *a, dp_side *p, const dp_cfg *cfg)
{
    dp_conn *c = dp_conn_record();
    c->a = a;
    c->p = p;
    c->cfg = cfg ? *cfg : dp_cfg_default();
    if (!c->cfg.p_ird)
        c->cfg.p_ird = c->cfg.ird;
    if (!c->cfg.p_ord)
        c->cfg.p_ord = c->cfg.ord;
    ULONG cqd = c->cfg.cqd ? c->cfg.cqd : c->cfg.rqd + c->cfg.iqd + 16;
    /* a == NULL: the active side is not an NDK consumer (a raw peer). */
    if (a) {
        c->cqa = dp_cq_new(a, cqd);
        c->rcqa = c->cfg.split_cq ? dp_cq_new(a, cqd) : c->cqa;
        if (!c->cqa || !c->rcqa)
            return NULL;
        c->qa = dp_qp_create(a, c->rcqa, c->cqa, c->cfg.srq_a, dp_qpctx_a(c), &c->cfg, NULL);
        if (!c->qa)
            return NULL;
    }
    c->cqp = dp_cq_new(p, cqd);
    c->rcqp = c->cfg.split_cq ? dp_cq_new(p, cqd) : c->cqp;
    if (!c->cqp || !c->rcqp)
        return NULL;
    c->qp = dp_qp_create(p, c->rcqp, c->cqp, c->cfg.srq_p, dp_qpctx_p(c), &c->cfg, NULL);
    return c->qp ? c : NULL;
}

NDK_CONNECTOR *dp_connector_new(dp_side *s)
{
    NDK_CONNECTOR *o = NULL;
    DP_CHECK_ST(nt_create_connector(s->ad, &o), STATUS_SUCCESS);
    return o;
}

ULONG dp_loop(NDK_SOCKADDR *sa, unsigned port)
{
    memset(sa, 0, sizeof *sa);
    if (tl_family() == AF_INET6) {
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_addr = in6addr_loopback;
        sa->in6.sin6_port = htons((uint16_t)port);
        return (ULONG)sizeof(struct sockaddr_in6);
    }
    sa->in4.sin_family = AF_INET;
    sa->in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa->in4.sin_port = htons((uint16_t)port);
    return (ULONG)sizeof(struct sockaddr_in);
}

ULONG dp_side_addr(const dp_side *s, NDK_SOCKADDR *sa, unsigned port)
{
    if (s->enter)
        s->enter(s);
    if (!s->host.sa.sa_family)
        return dp_loop(sa, port);
    *sa = s->host;
    if (sa->sa.sa_family == AF_INET) {
        sa->in4.sin_port = htons((uint16_t)port);
        return (ULONG)sizeof(struct sockaddr_in);
    }
    sa->in6.sin6_port = htons((uint16_t)port);
    return (ULONG)sizeof(struct sockaddr_in6);
}

bool dp_conn_listen(dp_conn *c)
{
    dp_req *r = dp_req_new("NdkCreateListener");
    NDK_LISTENER *l = NULL;
    NTSTATUS st;
    NTSTATUS ret = c->p->ad->Dispatch->NdkCreateListener(c->p->ad, dp_connect_event, c,
                                                         dp_create_cb, r, &l);
    c->l = dp_created(r, ret, l, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (!c->l)
        return false;
    NDK_SOCKADDR sa;
    ULONG len = dp_side_addr(c->p, &sa, 0);
    r = dp_req_new("NdkListen");
    st = dp_finish(r, c->l->Dispatch->NdkListen(c->l, &sa.sa, len, dp_req_cb, r), DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    c->laddrlen = sizeof c->laddr;
    st = c->l->Dispatch->NdkGetLocalAddress(c->l, &c->laddr.sa, &c->laddrlen);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

NDK_CONNECTOR *dp_conn_incoming(dp_conn *c, unsigned ms)
{
    if (!tl_event_wait(&c->lev, 1, ms)) {
        tl_failures++;
        fprintf(stderr, "[%s] no connect event within %u ms\n", tl_current ? tl_current : "-", ms);
        return NULL;
    }
    return atomic_load(&c->incoming);
}

bool dp_conn_establish(dp_conn *c)
{
    return dp_conn_listen(c) && dp_conn_connect(c);
}

dp_req *dp_conn_connect_start(dp_conn *c)
{
    c->ca = dp_connector_new(c->a);
    if (!c->ca)
        return NULL;
    NDK_SOCKADDR src;
    ULONG srclen = dp_side_addr(c->a, &src, 0);
    dp_req *r = dp_req_new("NdkConnect");
    r->started = true;
    r->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa,
                                              c->laddrlen, c->cfg.ird, c->cfg.ord, NULL, 0,
                                              dp_req_cb, r);
    return r;
}

bool dp_conn_connect(dp_conn *c)
{
    dp_req *rc = dp_conn_connect_start(c);
    if (!rc)
        return false;
    if (rc->returned != STATUS_PENDING) {
        DP_CHECK_ST(rc->returned, STATUS_PENDING);
        return false;
    }
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    if (!c->cp)
        return false;
    /* The passive side's window for NdkGetConnectionData is before NdkAccept
     * (rule N1): the requester's limits capped by the adapter
     * (docs/behaviour.md, IRD / ORD); the
     * effective values are those capped again by what we accept with. */
    ULONG len = 0, ird = 0, ord = 0;
    DP_CHECK_ST(c->cp->Dispatch->NdkGetConnectionData(c->cp, &ird, &ord, NULL, &len),
                STATUS_SUCCESS);
    c->ird_p = ird < c->cfg.p_ird ? ird : c->cfg.p_ird;
    c->ord_p = ord < c->cfg.p_ord ? ord : c->cfg.p_ord;
    dp_req *ra = dp_req_new("NdkAccept");
    ra->started = true;
    if (c->cfg.disc_ex)
        ra->returned = c->cp->Dispatch->NdkAcceptEx(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord, NULL,
                                                    0, dp_disc_ex_p, c, dp_req_cb, ra);
    else
        ra->returned = c->cp->Dispatch->NdkAccept(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord, NULL,
                                                  0, dp_disc_cb, &c->disc_p, dp_req_cb, ra);
    NTSTATUS st = dp_finish(rc, STATUS_PENDING, DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    /* The active side's window: after Connect, before CompleteConnect. */
    len = 0;
    DP_CHECK_ST(c->ca->Dispatch->NdkGetConnectionData(c->ca, &c->ird_a, &c->ord_a, NULL, &len),
                STATUS_SUCCESS);
    if (c->cfg.before_complete)
        c->cfg.before_complete(c);
    dp_req *rcc = dp_req_new("NdkCompleteConnect");
    NTSTATUS ret = c->cfg.disc_ex ? c->ca->Dispatch->NdkCompleteConnectEx(c->ca, dp_disc_ex_a, c,
                                                                          dp_req_cb, rcc)
                                  : c->ca->Dispatch->NdkCompleteConnect(c->ca, dp_disc_cb,
                                                                        &c->disc_a, dp_req_cb, rcc);
    st = dp_finish(rcc, ret, DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    st = dp_finish(ra, ra->returned, DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

NTSTATUS dp_disconnect(NDK_CONNECTOR *k)
{
    dp_req *r = dp_req_new("NdkDisconnect");
    return dp_finish(r, k->Dispatch->NdkDisconnect(k, dp_req_cb, r), DP_WAIT_MS);
}

void dp_conn_close(dp_conn *c)
{
    if (!c)
        return;
    dp_close(c->ca);
    dp_close(c->cp);
    c->ca = c->cp = NULL;
    dp_close(c->qa);
    dp_close(c->qp);
    c->qa = c->qp = NULL;
    dp_close(c->l);
    c->l = NULL;
    CHECK(tl_event_count(&c->disc_a) <= 1);
    CHECK(tl_event_count(&c->disc_p) <= 1);
    if (c->rcqa != c->cqa)
        dp_cq_close(c->rcqa);
    if (c->rcqp != c->cqp)
        dp_cq_close(c->rcqp);
    dp_cq_close(c->cqa);
    dp_cq_close(c->cqp);
}

const NDK_SGE *dp_nosge(void)
{
    static const NDK_SGE none;
    return &none;
}

NTSTATUS dp_recv(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n)
{
    return qp->Dispatch->NdkReceive(qp, ctx, sgl, n);
}

NTSTATUS dp_send(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n, ULONG flags)
{
    return qp->Dispatch->NdkSend(qp, ctx, sgl, n, flags);
}

NTSTATUS dp_write(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                  const void *raddr, UINT32 rtok, ULONG flags)
{
    return qp->Dispatch->NdkWrite(qp, ctx, sgl, n, (UINT64)(uintptr_t)raddr, rtok, flags);
}

NTSTATUS dp_read(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                 const void *raddr, UINT32 rtok, ULONG flags)
{
    return qp->Dispatch->NdkRead(qp, ctx, sgl, n, (UINT64)(uintptr_t)raddr, rtok, flags);
}

bool dp_roundtrip(dp_conn *c, size_t len, uint32_t seed)
{
    dp_mr ms, mr;
    uint8_t *src = dp_buf_reg(c->a, &ms, len, 0, seed);
    uint8_t *dst = dp_buf_reg(c->p, &mr, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, seed + 1000);
    if (!src || !dst)
        return false;
    NDK_SGE rs = dp_sge(&mr, 0, (ULONG)len), ss = dp_sge(&ms, 0, (ULONG)len);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x7001), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x7002), &ss, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX ra, rp;
    bool ok = dp_wait_ex(c->cqa, &ra, 1, DP_WAIT_MS) == 1 &&
              dp_wait_ex(c->rcqp, &rp, 1, DP_WAIT_MS) == 1;
    CHECK(ok);
    if (ok) {
        DP_CHECK_CQE(ra, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(0x7002), -1);
        DP_CHECK_CQE(rp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(0x7001),
                     len);
        DP_CHECK_DATA(dst, len, seed, 0);
    }
    dp_mr_close(&ms);
    dp_mr_close(&mr);
    return ok && dp_diff(dst, len, seed, 0) < 0;
}

bool dp_pair_open(dp_pair *x, const dp_cfg *cfg)
{
    memset(x, 0, sizeof *x);
    if (!dp_side_open(&x->a) || !dp_side_open(&x->p))
        return false;
    x->c = dp_conn_new(&x->a, &x->p, cfg);
    return x->c && dp_conn_establish(x->c);
}

void dp_pair_close(dp_pair *x)
{
    dp_conn_close(x->c);
    x->c = NULL;
    dp_side_close(&x->a);
    dp_side_close(&x->p);
}

bool dp_bufs_reg(dp_pair *x, dp_bufs *b, dp_buf_sizes len, uint32_t seed)
{
    memset(b, 0, sizeof *b);
    b->a = dp_buf_reg(&x->a, &b->ms, len.send, 0, seed);
    b->s = dp_buf_reg(&x->p, &b->src, len.src, NDK_MR_FLAG_ALLOW_REMOTE_READ, seed + 1);
    b->k = dp_buf_reg(&x->a, &b->sink, len.sink, DP_SINK_FLAGS, 0);
    b->rb = dp_buf_reg(&x->p, &b->rr, len.recv, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    b->wb = dp_buf_reg(&x->p, &b->wr, len.write, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0);
    return b->a && b->s && b->k && b->rb && b->wb;
}

void dp_bufs_close(dp_bufs *b)
{
    dp_mr_close(&b->ms);
    dp_mr_close(&b->src);
    dp_mr_close(&b->sink);
    dp_mr_close(&b->rr);
    dp_mr_close(&b->wr);
}

int dp_raw_connect(const NDK_SOCKADDR *dst, ULONG len, unsigned ms)
{
    int fd = rp_connect_sa(&dst->sa, len, ms);
    if (fd < 0)
        return -1;
    /* A tiny receive buffer makes "never reads" bite early. */
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    return fd;
}

bool dp_raw_mpa_request(int fd, uint16_t ird, uint16_t ord)
{
    uint8_t f[RP_HDR_LEN + 4];
    size_t n = rp_frame_v2(f, RP_KEY_REQ, 0, ird & RP_IRD_ORD_MASK, ord & RP_IRD_ORD_MASK, NULL, 0);
    return rp_send(fd, f, n);
}

void dp_raw_reset(int fd)
{
    rp_reset(fd);
}

bool dp_raw_wait_end(int fd, unsigned ms)
{
    return rp_wait_end(fd, ms, NULL, 0, NULL) != RP_OPEN;
}

dp_conn *dp_raw_accept(dp_side *p, const dp_cfg *cfg, int *fd)
{
    *fd = -1;
    dp_conn *c = dp_conn_new(NULL, p, cfg);
    if (!c || !dp_conn_listen(c))
        return NULL;
    *fd = dp_raw_connect(&c->laddr, c->laddrlen, DP_WAIT_MS);
    CHECK(*fd >= 0);
    if (*fd < 0)
        return NULL;
    CHECK(dp_raw_mpa_request(*fd, (uint16_t)c->cfg.ird, (uint16_t)c->cfg.ord));
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    if (!c->cp)
        return NULL;
    dp_req *ra = dp_req_new("NdkAccept");
    NTSTATUS st = dp_finish(ra,
                            c->cp->Dispatch->NdkAccept(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord,
                                                       NULL, 0, dp_disc_cb, &c->disc_p,
                                                       dp_req_cb, ra),
                            DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS ? c : NULL;
}

void dp_case_begin(const char *name)
{
    nt_case_begin(name);
    dp_ncqs = 0;
    dp_nconns = 0;
}

void dp_case_end(void)
{
    /* nt_case_end closes what the case left open and audits its calls;
     * after it no callback runs any more (L12), so the data-path pools can
     * be checked and reused. */
    const char *name = tl_current ? tl_current : "-";
    nt_case_end();
    for (unsigned i = 0; i < dp_ncqs; i++) {
        if (atomic_load(&dp_cqs[i].overlapped)) {
            tl_failures++;
            fprintf(stderr, "[%s] notification callbacks of one CQ overlapped (C5)\n", name);
        }
        tl_event_destroy(&dp_cqs[i].notify);
    }
    for (unsigned i = 0; i < dp_nconns; i++) {
        tl_event_destroy(&dp_conns[i].lev);
        tl_event_destroy(&dp_conns[i].disc_a);
        tl_event_destroy(&dp_conns[i].disc_p);
    }
    dp_ncqs = 0;
    dp_nconns = 0;
    dp_free_all();
}
