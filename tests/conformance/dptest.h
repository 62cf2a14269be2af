/*
 * dptest.h - helpers for the data-path conformance tests (test_dp_*.c).
 * Header only: every helper is static inline so a file that does not use one
 * still builds with -Werror.
 *
 * The tests drive libndk only through the public API (ndk.h, ndkpi.h), over
 * loopback on adapter "lo" (127.0.0.1, or ::1 in the IPv6 run: tl_init),
 * with two adapter instances so each side of a connection has its own
 * progress thread, PD and memory table.
 *
 * Why it is built this way:
 *  - Everything a provider callback writes to (request records, CQ records,
 *    connection records) lives in per-case static pools, never on a stack
 *    frame: a callback that arrives late (after a failed wait) must not
 *    scribble on a dead frame. The pools are reset after the case closed its
 *    adapters, when no callback can run any more (L12).
 *  - Every asynchronous call is checked for the 4.1 contract at the end of
 *    the case: exactly one completion when it returned STATUS_PENDING, none
 *    otherwise.
 *  - Waits are bounded: tl_event waits with a deadline, or polling the CQ
 *    with a deadline. Nothing sleeps to synchronise.
 *  - Buffers are mmap'ed between PROT_NONE guard pages, so a provider that
 *    places or gathers outside a buffer crashes the test instead of silently
 *    corrupting memory.
 *  - A case that stops early (REQUIRE) leaves objects open; the case wrapper
 *    closes its adapters (which tears down what is left), then unmaps the
 *    buffers and frees the helper allocations, so LSan stays quiet.
 */
#ifndef NDK_CONFORMANCE_DPTEST_H
#define NDK_CONFORMANCE_DPTEST_H

#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"

/* ------------------------------------------------------------------------ */
/* Bounds                                                                   */
/* ------------------------------------------------------------------------ */

#define DP_WAIT_MS 5000u       /* anything that must happen (generous for ASan) */
#define DP_QUIET_MS 200u       /* "nothing more happens": short, never zero */
#define DP_CASE_TIMEOUT_S 40u  /* watchdog per case: a hang becomes a failure */

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

/* CHECK_EQ with status names: 0xC0000120 says less than STATUS_CANCELLED. */
#define DP_CHECK_ST(got, want)                                                               \
    do {                                                                                     \
        NTSTATUS dp_g_ = (got), dp_w_ = (want);                                              \
        if (dp_g_ != dp_w_) {                                                                \
            char dp_gb_[64], dp_wb_[64];                                                     \
            snprintf(dp_gb_, sizeof dp_gb_, "%s", ndk_status_name(dp_g_));                     \
            snprintf(dp_wb_, sizeof dp_wb_, "%s", ndk_status_name(dp_w_));                     \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %s: got %s, expected %s\n", __FILE__, __LINE__,      \
                    tl_current ? tl_current : "-", #got, dp_gb_, dp_wb_);                    \
        }                                                                                    \
    } while (0)

#define DP_REQUIRE_ST(got, want)                                                             \
    do {                                                                                     \
        NTSTATUS dp_rg_ = (got);                                                             \
        DP_CHECK_ST(dp_rg_, (want));                                                         \
        if (dp_rg_ != (want))                                                                \
            return;                                                                          \
    } while (0)

/* Callbacks run on provider threads; tl_failures is not atomic, so they
 * count here and the case wrapper adds the count up. */
static _Atomic int dp_cb_failures;
#define DP_CB_CHECK(cond)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            atomic_fetch_add(&dp_cb_failures, 1);                                            \
            fprintf(stderr, "%s:%d: [callback] check failed: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                                  \
        }                                                                                    \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Per-case allocations (freed by the case wrapper)                          */
/* ------------------------------------------------------------------------ */

#define DP_MAX_MAPS 256
static struct {
    void *p;
    size_t len;
    bool mapped; /* mmap'ed (munmap) or malloc'ed (free) */
} dp_allocs[DP_MAX_MAPS];
static unsigned dp_nallocs;

static inline size_t dp_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static inline size_t dp_round_page(size_t n)
{
    size_t pg = dp_page();
    return (n + pg - 1) / pg * pg;
}

static inline void dp_track(void *p, size_t len, bool mapped)
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

/* Zeroed heap memory that lives until the end of the case. */
static inline void *dp_malloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p) {
        fprintf(stderr, "dptest: out of memory\n");
        abort();
    }
    dp_track(p, n, false);
    return p;
}

/*
 * `len` usable bytes between two PROT_NONE guard pages. With at_end the
 * buffer ends exactly at the upper guard page (a byte placed one past the end
 * faults); otherwise it starts right after the lower guard page. The whole
 * accessible span is filled with `fill`.
 */
static inline uint8_t *dp_guarded(size_t len, bool at_end, uint8_t fill)
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

static inline void dp_free_all(void)
{
    for (unsigned i = 0; i < dp_nallocs; i++) {
        if (dp_allocs[i].mapped)
            munmap(dp_allocs[i].p, dp_allocs[i].len);
        else
            free(dp_allocs[i].p);
    }
    dp_nallocs = 0;
}

/* ------------------------------------------------------------------------ */
/* Data patterns                                                            */
/* ------------------------------------------------------------------------ */

/* Byte i of stream `seed`: neighbouring bytes and neighbouring streams all
 * differ, so a misplaced, duplicated or shifted byte shows. */
static inline uint8_t dp_pat(uint32_t seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u ^ (seed + 1u) * 0x9E3779B9u ^ (uint32_t)(i >> 32);
    x ^= x >> 15;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    return (uint8_t)x;
}

/* Writes stream bytes [from, from+len) to p. */
static inline void dp_fill(void *p, size_t len, uint32_t seed, size_t from)
{
    uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        b[i] = dp_pat(seed, from + i);
}

/* Index of the first byte of p that is not stream byte from+i, or -1. */
static inline long dp_diff(const void *p, size_t len, uint32_t seed, size_t from)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != dp_pat(seed, from + i))
            return (long)i;
    return -1;
}

/* Index of the first byte that is not `v`, or -1. */
static inline long dp_diff_byte(const void *p, size_t len, uint8_t v)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != v)
            return (long)i;
    return -1;
}

#define DP_CHECK_DATA(p, len, seed, from)                                                    \
    do {                                                                                     \
        long dp_d_ = dp_diff((p), (len), (seed), (from));                                    \
        if (dp_d_ >= 0) {                                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] data of %s differs at byte %ld of %zu\n", __FILE__,  \
                    __LINE__, tl_current ? tl_current : "-", #p, dp_d_, (size_t)(len));      \
        }                                                                                    \
    } while (0)

#define DP_CHECK_BYTES(p, len, v)                                                            \
    do {                                                                                     \
        long dp_b_ = dp_diff_byte((p), (len), (v));                                          \
        if (dp_b_ >= 0) {                                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %s changed at byte %ld of %zu (0x%02x, expected "   \
                            "0x%02x)\n",                                                     \
                    __FILE__, __LINE__, tl_current ? tl_current : "-", #p, dp_b_,            \
                    (size_t)(len), ((const uint8_t *)(p))[dp_b_], (unsigned)(v));            \
        }                                                                                    \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Asynchronous calls                                                       */
/* ------------------------------------------------------------------------ */

/* One asynchronous provider call (request, create or close). */
typedef struct dp_req {
    tl_event ev;
    const char *what;
    bool started;      /* the provider function returned */
    NTSTATUS returned; /* what it returned */
    _Atomic NTSTATUS status;
    _Atomic(NDK_OBJECT_HEADER *) obj;
} dp_req;

#define DP_MAX_REQS 2048
static dp_req dp_reqs[DP_MAX_REQS];
static _Atomic unsigned dp_nreqs;

static inline dp_req *dp_req_new(const char *what)
{
    unsigned i = atomic_fetch_add(&dp_nreqs, 1);
    if (i >= DP_MAX_REQS) {
        fprintf(stderr, "dptest: out of request records\n");
        abort();
    }
    dp_req *r = &dp_reqs[i];
    memset(r, 0, sizeof *r);
    tl_event_init(&r->ev);
    r->what = what;
    return r;
}

static inline void dp_req_cb(PVOID ctx, NTSTATUS st)
{
    dp_req *r = ctx;
    atomic_store(&r->status, st);
    tl_event_signal(&r->ev);
}

static inline void dp_create_cb(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    dp_req *r = ctx;
    atomic_store(&r->obj, obj);
    atomic_store(&r->status, st);
    tl_event_signal(&r->ev);
}

static inline void dp_close_cb(PVOID ctx)
{
    dp_req *r = ctx;
    atomic_store(&r->status, STATUS_SUCCESS);
    tl_event_signal(&r->ev);
}

/* The final status: the return value if the call finished inline (its
 * callback must then not run), else its one completion's status. */
static inline NTSTATUS dp_finish(dp_req *r, NTSTATUS returned, unsigned ms)
{
    r->started = true;
    r->returned = returned;
    if (returned != STATUS_PENDING)
        return returned;
    if (!tl_event_wait(&r->ev, 1, ms)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: no completion within %u ms\n", tl_current ? tl_current : "-",
                r->what, ms);
        return STATUS_PENDING;
    }
    return atomic_load(&r->status);
}

/* Created object: the inline one, or the one the completion delivered. */
static inline void *dp_created(dp_req *r, NTSTATUS returned, void *inline_obj, NTSTATUS *st)
{
    NTSTATUS fin = dp_finish(r, returned, DP_WAIT_MS);
    if (st)
        *st = fin;
    if (fin != STATUS_SUCCESS)
        return NULL;
    return returned == STATUS_PENDING ? (void *)atomic_load(&r->obj) : inline_obj;
}

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

#define DP_MAX_ADAPTERS 8
static NDK_ADAPTER *dp_adapters[DP_MAX_ADAPTERS];

typedef struct dp_side {
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    NDK_PD *pd;
    /* A side on another host (tests/netns): the address its listeners and
     * connects use (family 0: the run's loopback address), and a call that
     * moves the calling thread into its network namespace before it
     * creates a socket there (NULL: stay), which netns is for. */
    NDK_SOCKADDR host;
    void (*enter)(const struct dp_side *s);
    int netns;
} dp_side;

/* Short provider timeouts keep every failure path well inside a case. */
static inline NDK_OPEN_OPTIONS dp_options(void)
{
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.Size = sizeof o;
    o.TcpConnectTimeoutMs = 3000;
    o.MpaReplyTimeoutMs = 3000;
    o.MpaRequestTimeoutMs = 3000;
    o.RtrTimeoutMs = 3000;
    o.DisconnectTimeoutMs = 3000;
    return o;
}

static inline NDK_PD *dp_pd_new(dp_side *s)
{
    dp_req *r = dp_req_new("NdkCreatePd");
    NDK_PD *pd = NULL;
    NTSTATUS st;
    NTSTATUS ret = s->ad->Dispatch->NdkCreatePd(s->ad, dp_create_cb, r, &pd);
    NDK_PD *o = dp_created(r, ret, pd, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return o;
}

/* Opens an adapter (NDKPI 2.1) with these options, reads its limits and
 * creates a PD; host, enter and netns of *s are kept. */
static inline bool dp_side_open_as(dp_side *s, const char *adapter, const NDK_OPEN_OPTIONS *o)
{
    s->ad = NULL;
    s->pd = NULL;
    if (s->enter)
        s->enter(s);
    NTSTATUS st = ndk_open_adapter(adapter, (NDK_VERSION){2, 1}, o, &s->ad);
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
    st = s->ad->Dispatch->NdkQueryAdapterInfo(s->ad, &s->info, &size);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    s->pd = dp_pd_new(s);
    return st == STATUS_SUCCESS && s->pd != NULL;
}

/* Opens "lo" with the suite's options and these open flags. */
static inline bool dp_side_open_flags(dp_side *s, ULONG flags)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.Flags = flags;
    return dp_side_open_as(s, "lo", &o);
}

static inline bool dp_side_open(dp_side *s)
{
    return dp_side_open_flags(s, 0);
}

/* Each table's close member (the adapter has none). */
static inline NDK_FN_CLOSE_OBJECT dp_close_fn(void *obj)
{
    switch (((NDK_OBJECT_HEADER *)obj)->ObjectType) {
    case NdkObjectTypeQp: return ((NDK_QP *)obj)->Dispatch->NdkCloseQp;
    case NdkObjectTypeCq: return ((NDK_CQ *)obj)->Dispatch->NdkCloseCq;
    case NdkObjectTypeMr: return ((NDK_MR *)obj)->Dispatch->NdkCloseMr;
    case NdkObjectTypeMw: return ((NDK_MW *)obj)->Dispatch->NdkCloseMw;
    case NdkObjectTypePd: return ((NDK_PD *)obj)->Dispatch->NdkClosePd;
    case NdkObjectTypeConnector: return ((NDK_CONNECTOR *)obj)->Dispatch->NdkCloseConnector;
    case NdkObjectTypeListener: return ((NDK_LISTENER *)obj)->Dispatch->NdkCloseListener;
    case NdkObjectTypeSrq: return ((NDK_SRQ *)obj)->Dispatch->NdkCloseSrq;
    default: return NULL;
    }
}

/* Starts closing obj (NULL: nothing); the record tells when it is done. */
static inline dp_req *dp_close_start(void *obj)
{
    if (!obj)
        return NULL;
    dp_req *r = dp_req_new("NdkCloseXxx");
    NDK_FN_CLOSE_OBJECT fn = dp_close_fn(obj);
    if (!fn) {
        tl_failures++;
        fprintf(stderr, "[%s] no close function for object type %d\n",
                tl_current ? tl_current : "-", (int)((NDK_OBJECT_HEADER *)obj)->ObjectType);
        return NULL;
    }
    r->started = true;
    r->returned = fn((NDK_OBJECT_HEADER *)obj, dp_close_cb, r);
    /* A close never fails (L15). */
    if (r->returned != STATUS_SUCCESS && r->returned != STATUS_PENDING) {
        tl_failures++;
        fprintf(stderr, "[%s] close returned %s\n", tl_current ? tl_current : "-",
                ndk_status_name(r->returned));
    }
    return r;
}

static inline bool dp_close_wait(dp_req *r)
{
    if (!r)
        return true;
    if (r->returned != STATUS_PENDING)
        return true;
    if (!tl_event_wait(&r->ev, 1, DP_WAIT_MS)) {
        tl_failures++;
        fprintf(stderr, "[%s] close not completed within %u ms\n", tl_current ? tl_current : "-",
                DP_WAIT_MS);
        return false;
    }
    return true;
}

static inline void dp_close(void *obj)
{
    dp_close_wait(dp_close_start(obj));
}

static inline void dp_close_adapter(NDK_ADAPTER *ad)
{
    if (!ad)
        return;
    for (unsigned i = 0; i < DP_MAX_ADAPTERS; i++)
        if (dp_adapters[i] == ad)
            dp_adapters[i] = NULL;
    ndk_close_adapter(ad);
}

static inline void dp_side_close(dp_side *s)
{
    dp_close(s->pd);
    s->pd = NULL;
    dp_close_adapter(s->ad);
    s->ad = NULL;
}

/* ------------------------------------------------------------------------ */
/* Completion queues                                                        */
/* ------------------------------------------------------------------------ */

typedef struct dp_cq dp_cq;
typedef void (*dp_cq_hook)(dp_cq *c, NTSTATUS status);

struct dp_cq {
    NDK_CQ *cq;
    tl_event notify;          /* one signal per notification callback */
    _Atomic NTSTATUS last;    /* CqStatus of the latest callback */
    _Atomic int in_cb;        /* callbacks running now */
    _Atomic int overlapped;   /* a callback started while another ran (C5) */
    bool poll_only;           /* waits never arm: the case counts notifications itself */
    dp_cq_hook hook;          /* runs inside the callback, before the signal */
    void *user;
};

#define DP_MAX_CQS 64
static dp_cq dp_cqs[DP_MAX_CQS];
static unsigned dp_ncqs;

static inline void dp_cq_cb(PVOID ctx, NTSTATUS status)
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

static inline unsigned dp_cq_notified(dp_cq *c)
{
    return tl_event_count(&c->notify);
}

/* A CQ of `depth` entries whose notifications are counted. */
static inline dp_cq *dp_cq_new(dp_side *s, ULONG depth)
{
    if (dp_ncqs >= DP_MAX_CQS) {
        fprintf(stderr, "dptest: out of CQ records\n");
        abort();
    }
    dp_cq *c = &dp_cqs[dp_ncqs++];
    memset(c, 0, sizeof *c);
    tl_event_init(&c->notify);
    dp_req *r = dp_req_new("NdkCreateCq");
    NDK_CQ *cq = NULL;
    NTSTATUS st;
    NTSTATUS ret =
        s->ad->Dispatch->NdkCreateCq(s->ad, depth, dp_cq_cb, c, NULL, dp_create_cb, r, &cq);
    c->cq = dp_created(r, ret, cq, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return c->cq ? c : NULL;
}

static inline void dp_cq_close(dp_cq *c)
{
    if (c && c->cq) {
        dp_close(c->cq);
        c->cq = NULL;
    }
}

static inline void dp_arm(dp_cq *c, ULONG type)
{
    c->cq->Dispatch->NdkArmCq(c->cq, type);
}

static inline ULONG dp_get(dp_cq *c, NDK_RESULT_EX *out, ULONG n)
{
    return c->cq->Dispatch->NdkGetCqResultsEx(c->cq, out, n);
}

/*
 * Collects exactly `want` completions (fewer if they do not come within ms;
 * never more, so later ones stay queued). Between polls it arms the CQ for
 * any completion and waits for the notification, draining once more after
 * arming so a completion that slipped in before the arm is not missed (8.2
 * rule 9). poll_only CQs are polled with sched_yield between attempts, so
 * the case's own count of notifications stays exact.
 */
static inline ULONG dp_wait_ex(dp_cq *c, NDK_RESULT_EX *out, ULONG want, unsigned ms)
{
    ULONG got = 0;
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    while (got < want) {
        got += dp_get(c, out + got, want - got);
        if (got >= want)
            break;
        uint64_t now = tl_now_ns();
        if (now >= deadline)
            break;
        if (c->poll_only) {
            sched_yield();
            continue;
        }
        unsigned before = dp_cq_notified(c);
        dp_arm(c, NDK_CQ_NOTIFY_ANY);
        got += dp_get(c, out + got, want - got);
        if (got >= want)
            break;
        unsigned left = (unsigned)((deadline - now) / 1000000u) + 1;
        tl_event_wait(&c->notify, before + 1, left);
    }
    return got;
}

/* As dp_wait_ex, through NdkGetCqResults (NDK_RESULT). */
static inline ULONG dp_wait_plain(dp_cq *c, NDK_RESULT *out, ULONG want, unsigned ms)
{
    ULONG got = 0;
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    while (got < want) {
        got += c->cq->Dispatch->NdkGetCqResults(c->cq, out + got, want - got);
        if (got >= want)
            break;
        uint64_t now = tl_now_ns();
        if (now >= deadline)
            break;
        if (c->poll_only) {
            sched_yield();
            continue;
        }
        unsigned before = dp_cq_notified(c);
        dp_arm(c, NDK_CQ_NOTIFY_ANY);
        got += c->cq->Dispatch->NdkGetCqResults(c->cq, out + got, want - got);
        if (got >= want)
            break;
        unsigned left = (unsigned)((deadline - now) / 1000000u) + 1;
        tl_event_wait(&c->notify, before + 1, left);
    }
    return got;
}

/* Exactly `want` completions or a failure naming how many came. */
#define DP_WAIT(c, out, want)                                                                \
    do {                                                                                     \
        ULONG dp_w_got_ = dp_wait_ex((c), (out), (want), DP_WAIT_MS);                        \
        if (dp_w_got_ != (ULONG)(want)) {                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %lu of %lu completions arrived on %s\n", __FILE__,   \
                    __LINE__, tl_current ? tl_current : "-", (unsigned long)dp_w_got_,       \
                    (unsigned long)(want), #c);                                              \
        }                                                                                    \
    } while (0)

/* Completions that arrive within ms (they are consumed; up to max kept). */
static inline ULONG dp_quiet(dp_cq *c, NDK_RESULT_EX *out, ULONG max, unsigned ms)
{
    NDK_RESULT_EX tmp[16];
    ULONG total = 0;
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        ULONG n = dp_get(c, tmp, 16);
        for (ULONG i = 0; i < n; i++) {
            if (out && total < max)
                out[total] = tmp[i];
            total++;
        }
        if (n)
            continue;
        uint64_t now = tl_now_ns();
        if (now >= deadline)
            break;
        if (c->poll_only) {
            sched_yield();
            continue;
        }
        unsigned before = dp_cq_notified(c);
        dp_arm(c, NDK_CQ_NOTIFY_ANY);
        if ((n = dp_get(c, tmp, 16)) != 0) {
            for (ULONG i = 0; i < n; i++) {
                if (out && total < max)
                    out[total] = tmp[i];
                total++;
            }
            continue;
        }
        tl_event_wait(&c->notify, before + 1, (unsigned)((deadline - now) / 1000000u) + 1);
    }
    return total;
}

/* No completion within DP_QUIET_MS. */
#define DP_CHECK_QUIET(c)                                                                    \
    do {                                                                                     \
        NDK_RESULT_EX dp_q_[4];                                                              \
        ULONG dp_qn_ = dp_quiet((c), dp_q_, 4, DP_QUIET_MS);                                 \
        if (dp_qn_) {                                                                        \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %lu unexpected completion(s) on %s, first: ctx %p "  \
                            "%s type %d\n",                                                  \
                    __FILE__, __LINE__, tl_current ? tl_current : "-",                       \
                    (unsigned long)dp_qn_, #c, dp_q_[0].RequestContext,                      \
                    ndk_status_name(dp_q_[0].Status), (int)dp_q_[0].Type);                     \
        }                                                                                    \
    } while (0)

/* Checks one completion's fields. bytes < 0: BytesTransferred not checked
 * (it is defined for receives only, 6.4). */
#define DP_CHECK_CQE(r, st, type, qpctx, reqctx, bytes)                                      \
    do {                                                                                     \
        const NDK_RESULT_EX *dp_r_ = &(r);                                                   \
        DP_CHECK_ST(dp_r_->Status, (st));                                                    \
        CHECK_EQ(dp_r_->Type, (type));                                                       \
        CHECK(dp_r_->QPContext == (void *)(qpctx));                                          \
        CHECK(dp_r_->RequestContext == (void *)(reqctx));                                    \
        if ((long long)(bytes) >= 0)                                                         \
            CHECK_EQ(dp_r_->BytesTransferred, (bytes));                                      \
        if (dp_r_->Status == STATUS_SUCCESS)                                                 \
            CHECK_EQ(dp_r_->ProviderErrorCode, 0);                                           \
    } while (0)

/* A request context that is just a number. */
#define DP_CTX(n) ((void *)(uintptr_t)(n))

/* How many of the n results carry request context ctx. */
static inline unsigned dp_count_ctx(const NDK_RESULT_EX *r, ULONG n, void *ctx)
{
    unsigned k = 0;
    for (ULONG i = 0; i < n; i++)
        if (r[i].RequestContext == ctx)
            k++;
    return k;
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct dp_mr {
    NDK_MR *mr;
    MDL mdl;
    uint8_t *addr;
    size_t len;
    UINT32 ltok, rtok;
    bool registered;
} dp_mr;

static inline NDK_MR *dp_mr_create(NDK_PD *pd, BOOLEAN fast)
{
    dp_req *r = dp_req_new("NdkCreateMr");
    NDK_MR *mr = NULL;
    NTSTATUS st;
    NTSTATUS ret = pd->Dispatch->NdkCreateMr(pd, fast, dp_create_cb, r, &mr);
    NDK_MR *o = dp_created(r, ret, mr, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return o;
}

/* Registers [addr, addr+len) with NdkRegisterMr; the final status (inline,
 * or its completion). The tokens are read on success. */
static inline NTSTATUS dp_mr_reg_pd(NDK_PD *pd, dp_mr *m, void *addr, size_t len, ULONG flags)
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

/* As dp_mr_reg_pd in the side's PD; a failure is a test failure. */
static inline bool dp_mr_reg(dp_side *s, dp_mr *m, void *addr, size_t len, ULONG flags)
{
    NTSTATUS st = dp_mr_reg_pd(s->pd, m, addr, len, flags);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

static inline NTSTATUS dp_mr_dereg(dp_mr *m)
{
    dp_req *r = dp_req_new("NdkDeregisterMr");
    NTSTATUS st =
        dp_finish(r, m->mr->Dispatch->NdkDeregisterMr(m->mr, dp_req_cb, r), DP_WAIT_MS);
    if (st == STATUS_SUCCESS)
        m->registered = false;
    return st;
}

/* Deregisters (if registered) and closes. */
static inline void dp_mr_close(dp_mr *m)
{
    if (!m->mr)
        return;
    if (m->registered)
        DP_CHECK_ST(dp_mr_dereg(m), STATUS_SUCCESS);
    dp_close(m->mr);
    m->mr = NULL;
}

/* A guarded buffer of len bytes filled with stream `seed`, registered. */
static inline uint8_t *dp_buf_reg(dp_side *s, dp_mr *m, size_t len, ULONG flags, uint32_t seed)
{
    uint8_t *b = dp_guarded(len, false, 0);
    dp_fill(b, len, seed, 0);
    if (!dp_mr_reg(s, m, b, len, flags))
        return NULL;
    return b;
}

static inline NDK_SGE dp_sge(const dp_mr *m, size_t off, ULONG len)
{
    NDK_SGE s;
    memset(&s, 0, sizeof s);
    s.VirtualAddress = m->addr + off;
    s.Length = len;
    s.MemoryRegionToken = m->ltok;
    return s;
}

/* A fast-register MR over a buffer, with the LAM NdkBuildLAM gave for it. */
typedef struct dp_frmr {
    NDK_MR *mr;
    NDK_ADAPTER *ad;
    MDL mdl;
    uint8_t *addr;
    size_t len;
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    ULONG fbo;
    UINT32 tok; /* remote token current after the last NdkFastRegister */
} dp_frmr;

/* Creates the MR, initializes it for the pages of [addr, addr+len) and
 * builds their LAM (asking its size first, 4.7). */
static inline bool dp_frmr_init(dp_side *s, dp_frmr *f, void *addr, size_t len, BOOLEAN remote)
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

/* Posts NdkFastRegister of the whole buffer at base_va; reads the new token
 * once the call returned (5.6.4). */
static inline NTSTATUS dp_frmr_post(NDK_QP *qp, void *ctx, dp_frmr *f, void *base_va, ULONG flags)
{
    NTSTATUS st = qp->Dispatch->NdkFastRegister(qp, ctx, f->mr, f->lam->AdapterPageCount,
                                                f->lam->AdapterPageArray, f->fbo, f->len, base_va,
                                                flags);
    if (st == STATUS_SUCCESS)
        f->tok = f->mr->Dispatch->NdkGetRemoteTokenFromMr(f->mr);
    return st;
}

static inline void dp_frmr_close(dp_frmr *f)
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

static inline NDK_MW *dp_mw_new(dp_side *s)
{
    dp_req *r = dp_req_new("NdkCreateMw");
    NDK_MW *mw = NULL;
    NTSTATUS st;
    NTSTATUS ret = s->pd->Dispatch->NdkCreateMw(s->pd, dp_create_cb, r, &mw);
    NDK_MW *o = dp_created(r, ret, mw, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return o;
}

/* ------------------------------------------------------------------------ */
/* Queue pairs and connections                                              */
/* ------------------------------------------------------------------------ */

typedef struct dp_cfg {
    ULONG rqd, iqd;     /* receive / initiator queue depth */
    ULONG rsge, isge;   /* SGE limits */
    ULONG inl;          /* InlineDataSize */
    ULONG ird, ord;     /* asked for by both sides... */
    ULONG p_ird, p_ord; /* ...unless these are set for the passive side */
    ULONG cqd;          /* depth of each CQ (0: rqd + iqd + 16) */
    bool split_cq;      /* separate receive and initiator CQs */
    bool disc_ex;       /* NdkAcceptEx / NdkCompleteConnectEx: the disconnect
                           reasons land in reason_a / reason_p of dp_conn */
    NDK_SRQ *srq_a, *srq_p; /* CreateQpWithSrq on that side */
} dp_cfg;

static inline dp_cfg dp_cfg_default(void)
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

typedef struct dp_conn {
    dp_side *a, *p;             /* active (connecting) and passive sides */
    dp_cfg cfg;
    dp_cq *cqa, *cqp;           /* initiator CQ (and receive CQ unless split) */
    dp_cq *rcqa, *rcqp;         /* receive CQs (== cqa / cqp unless split) */
    NDK_QP *qa, *qp;
    NDK_LISTENER *l;
    NDK_SOCKADDR laddr;
    ULONG laddrlen;
    NDK_CONNECTOR *ca, *cp;
    tl_event lev;               /* connect events */
    _Atomic(NDK_CONNECTOR *) incoming;
    tl_event disc_a, disc_p;    /* disconnect events of each side */
    _Atomic ULONG reason_a, reason_p; /* their ProviderDisconnectReason (cfg.disc_ex) */
    ULONG ird_a, ord_a, ird_p, ord_p; /* effective limits (NdkGetConnectionData) */
    uint8_t ctx_a, ctx_p;       /* their addresses are the QPContexts */
} dp_conn;

#define DP_MAX_CONNS 64
static dp_conn dp_conns[DP_MAX_CONNS];
static unsigned dp_nconns;

static inline void *dp_qpctx_a(dp_conn *c)
{
    return &c->ctx_a;
}

static inline void *dp_qpctx_p(dp_conn *c)
{
    return &c->ctx_p;
}

static inline void dp_disc_cb(PVOID ctx)
{
    tl_event_signal(ctx);
}

static inline void dp_disc_ex_a(PVOID ctx, ULONG reason)
{
    dp_conn *c = ctx;
    atomic_store(&c->reason_a, reason);
    tl_event_signal(&c->disc_a);
}

static inline void dp_disc_ex_p(PVOID ctx, ULONG reason)
{
    dp_conn *c = ctx;
    atomic_store(&c->reason_p, reason);
    tl_event_signal(&c->disc_p);
}

static inline void dp_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    dp_conn *k = ctx;
    NDK_CONNECTOR *none = NULL;
    /* One connection per listener here; a second request is a bug. */
    DP_CB_CHECK(atomic_compare_exchange_strong(&k->incoming, &none, c));
    tl_event_signal(&k->lev);
}

static inline NDK_QP *dp_qp_create(dp_side *s, dp_cq *rcq, dp_cq *icq, NDK_SRQ *srq, void *qpctx,
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

/* CQs and QPs for a connection from a to p; nothing is connected yet, so
 * receives may be pre-posted before dp_conn_establish. */
static inline dp_conn *dp_conn_new(dp_side *a, dp_side *p, const dp_cfg *cfg)
{
    if (dp_nconns >= DP_MAX_CONNS) {
        fprintf(stderr, "dptest: out of connection records\n");
        abort();
    }
    dp_conn *c = &dp_conns[dp_nconns++];
    memset(c, 0, sizeof *c);
    tl_event_init(&c->lev);
    tl_event_init(&c->disc_a);
    tl_event_init(&c->disc_p);
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

static inline NDK_CONNECTOR *dp_connector_new(dp_side *s)
{
    dp_req *r = dp_req_new("NdkCreateConnector");
    NDK_CONNECTOR *k = NULL;
    NTSTATUS st;
    NTSTATUS ret = s->ad->Dispatch->NdkCreateConnector(s->ad, dp_create_cb, r, &k);
    NDK_CONNECTOR *o = dp_created(r, ret, k, &st);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    return o;
}

/* The loopback address of the run's family (tl_family(): 127.0.0.1, or ::1
 * when the program was started with --ipv6) with the given port. */
static inline ULONG dp_loop(NDK_SOCKADDR *sa, unsigned port)
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

/* A side's own address (dp_side host) with the given port; the calling
 * thread enters its namespace, so a socket made next is made there. */
static inline ULONG dp_side_addr(const dp_side *s, NDK_SOCKADDR *sa, unsigned port)
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

/* A listener on p's side for this connection, on its address (the run's
 * loopback address) with a port the provider picks (read back into laddr). */
static inline bool dp_conn_listen(dp_conn *c)
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

/* The passive connector the listener delivered, within ms. */
static inline NDK_CONNECTOR *dp_conn_incoming(dp_conn *c, unsigned ms)
{
    if (!tl_event_wait(&c->lev, 1, ms)) {
        tl_failures++;
        fprintf(stderr, "[%s] no connect event within %u ms\n", tl_current ? tl_current : "-", ms);
        return NULL;
    }
    return atomic_load(&c->incoming);
}

/* Connect, Accept, CompleteConnect (the three legs), then the effective
 * IRD/ORD of both sides. */
static inline bool dp_conn_establish(dp_conn *c)
{
    if (!dp_conn_listen(c))
        return false;
    c->ca = dp_connector_new(c->a);
    if (!c->ca)
        return false;
    NDK_SOCKADDR src;
    ULONG srclen = dp_side_addr(c->a, &src, 0);
    dp_req *rc = dp_req_new("NdkConnect");
    rc->started = true;
    rc->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa,
                                               c->laddrlen, c->cfg.ird, c->cfg.ord, NULL, 0,
                                               dp_req_cb, rc);
    if (rc->returned != STATUS_PENDING) {
        DP_CHECK_ST(rc->returned, STATUS_PENDING);
        return false;
    }
    c->cp = dp_conn_incoming(c, DP_WAIT_MS);
    if (!c->cp)
        return false;
    /* The passive side's window for NdkGetConnectionData is before NdkAccept
     * (7.3): the requester's limits capped by the adapter (7.4 rule 4); the
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

/* NdkDisconnect on one connector; the final status. */
static inline NTSTATUS dp_disconnect(NDK_CONNECTOR *k)
{
    dp_req *r = dp_req_new("NdkDisconnect");
    return dp_finish(r, k->Dispatch->NdkDisconnect(k, dp_req_cb, r), DP_WAIT_MS);
}

/* Closes the connectors, QPs, listener and CQs of a connection, and checks
 * that neither side saw more than one disconnect event (X3). */
static inline void dp_conn_close(dp_conn *c)
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

/* A valid SGE list pointer for calls with nSge 0 (a NULL list with nSge 0
 * is checked on its own in test_dp_ops). */
static inline const NDK_SGE *dp_nosge(void)
{
    static const NDK_SGE none;
    return &none;
}

/* Posting shorthands. */
static inline NTSTATUS dp_recv(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n)
{
    return qp->Dispatch->NdkReceive(qp, ctx, sgl, n);
}

static inline NTSTATUS dp_send(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n, ULONG flags)
{
    return qp->Dispatch->NdkSend(qp, ctx, sgl, n, flags);
}

static inline NTSTATUS dp_write(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                                const void *raddr, UINT32 rtok, ULONG flags)
{
    return qp->Dispatch->NdkWrite(qp, ctx, sgl, n, (UINT64)(uintptr_t)raddr, rtok, flags);
}

static inline NTSTATUS dp_read(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                               const void *raddr, UINT32 rtok, ULONG flags)
{
    return qp->Dispatch->NdkRead(qp, ctx, sgl, n, (UINT64)(uintptr_t)raddr, rtok, flags);
}

/* Sink flags for NdkRead targets: the read-sink right is needed unless the
 * adapter says otherwise (5.6.1, 9.6). */
#define DP_SINK_FLAGS (NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK)

/* One Send/Receive round trip of `len` bytes a -> p with data check: a
 * connection still carries traffic. */
static inline bool dp_roundtrip(dp_conn *c, size_t len, uint32_t seed)
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

/* Two adapters and one established connection between them. */
typedef struct dp_pair {
    dp_side a, p;
    dp_conn *c;
} dp_pair;

static inline bool dp_pair_open(dp_pair *x, const dp_cfg *cfg)
{
    memset(x, 0, sizeof *x);
    if (!dp_side_open(&x->a) || !dp_side_open(&x->p))
        return false;
    x->c = dp_conn_new(&x->a, &x->p, cfg);
    return x->c && dp_conn_establish(x->c);
}

/* The caller closed its MRs, MWs and SRQs first (they hold the PD). */
static inline void dp_pair_close(dp_pair *x)
{
    dp_conn_close(x->c);
    x->c = NULL;
    dp_side_close(&x->a);
    dp_side_close(&x->p);
}

/* ------------------------------------------------------------------------ */
/* A raw MPA initiator that never sends an FPDU and never reads: a peer that */
/* is "slow" for ever, so requests stay outstanding on the NDK side.        */
/* ------------------------------------------------------------------------ */

/* TCP connect to dst within ms; -1 on failure. */
static inline int dp_raw_connect(const NDK_SOCKADDR *dst, ULONG len, unsigned ms)
{
    int fd = socket(dst->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, &dst->sa, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, (int)ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 ||
        err != 0) {
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    /* A tiny receive buffer makes "never reads" bite early. */
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    return fd;
}

/*
 * An MPA revision 2 Request (RFC 5044 + RFC 6581, iwarp.md 1.1-1.2): key,
 * flags S only (no markers, no CRC), Rev 2, PD_Length 4, then the IRD/ORD
 * words with the peer-to-peer bit clear, i.e. the client/server model that
 * Linux siw uses: no RTR follows.
 */
static inline bool dp_raw_mpa_request(int fd, uint16_t ird, uint16_t ord)
{
    uint8_t f[24];
    memcpy(f, "MPA ID Req Frame", 16);
    f[16] = 0x10;
    f[17] = 2;
    f[18] = 0;
    f[19] = 4;
    f[20] = (uint8_t)(ird >> 8 & 0x3F);
    f[21] = (uint8_t)ird;
    f[22] = (uint8_t)(ord >> 8 & 0x3F);
    f[23] = (uint8_t)ord;
    return send(fd, f, sizeof f, MSG_NOSIGNAL) == (ssize_t)sizeof f;
}

/* Closes with a RST (SO_LINGER 0): the NDK side sees the connection abort. */
static inline void dp_raw_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/* Waits for the end of the raw peer's stream (FIN or RST), discarding what
 * arrives first; true if it ended within ms. */
static inline bool dp_raw_wait_end(int fd, unsigned ms)
{
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    uint8_t buf[65536];
    for (;;) {
        uint64_t now = tl_now_ns();
        if (now >= deadline)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int n = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
        if (n <= 0)
            continue;
        ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
    }
}

/*
 * A connection whose active side is a raw socket: the passive side (p) gets
 * a QP per cfg, listens, and accepts the raw peer's client/server MPA
 * Request. *fd is the raw socket; the NDK side's connector is c->cp. Nothing
 * is ever read from the socket, so the NDK side's outbound data backs up.
 */
static inline dp_conn *dp_raw_accept(dp_side *p, const dp_cfg *cfg, int *fd)
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

/* ------------------------------------------------------------------------ */
/* Case wrapper                                                             */
/* ------------------------------------------------------------------------ */

static const char *dp_case_name;

static inline void dp_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "\ndptest: case timed out (hang or deadlock): ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    if (dp_case_name)
        w = write(2, dp_case_name, strlen(dp_case_name));
    w = write(2, "\n", 1);
    (void)w;
    _exit(1);
}

static inline void dp_case_begin(const char *name)
{
    dp_case_name = name;
    atomic_store(&dp_nreqs, 0);
    dp_ncqs = 0;
    dp_nconns = 0;
    atomic_store(&dp_cb_failures, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, dp_watchdog);
    alarm(DP_CASE_TIMEOUT_S);
}

static inline void dp_case_end(void)
{
    /* A case that stopped early left adapters open: closing them tears down
     * what is left and, once ndk_close_adapter returned, no callback runs any
     * more (L12), so the pools can be reused. Its requests are not audited:
     * some may legitimately never have completed. */
    bool left_open = false;
    for (unsigned i = 0; i < DP_MAX_ADAPTERS; i++) {
        if (dp_adapters[i]) {
            left_open = true;
            ndk_close_adapter(dp_adapters[i]);
            dp_adapters[i] = NULL;
        }
    }
    unsigned n = atomic_load(&dp_nreqs);
    if (n > DP_MAX_REQS)
        n = DP_MAX_REQS;
    for (unsigned i = 0; i < n; i++) {
        dp_req *r = &dp_reqs[i];
        unsigned got = tl_event_count(&r->ev);
        if (!left_open && r->started) {
            unsigned want = r->returned == STATUS_PENDING ? 1u : 0u;
            if (got != want) {
                tl_failures++;
                fprintf(stderr, "[%s] %s returned %s and its completion ran %u times (4.1: %u)\n",
                        dp_case_name, r->what, ndk_status_name(r->returned), got, want);
            }
        }
        tl_event_destroy(&r->ev);
    }
    for (unsigned i = 0; i < dp_ncqs; i++) {
        if (atomic_load(&dp_cqs[i].overlapped)) {
            tl_failures++;
            fprintf(stderr, "[%s] notification callbacks of one CQ overlapped (C5)\n",
                    dp_case_name);
        }
        tl_event_destroy(&dp_cqs[i].notify);
    }
    for (unsigned i = 0; i < dp_nconns; i++) {
        tl_event_destroy(&dp_conns[i].lev);
        tl_event_destroy(&dp_conns[i].disc_a);
        tl_event_destroy(&dp_conns[i].disc_p);
    }
    atomic_store(&dp_nreqs, 0);
    dp_ncqs = 0;
    dp_nconns = 0;
    dp_free_all();
    tl_failures += atomic_exchange(&dp_cb_failures, 0);
    alarm(0);
    dp_case_name = NULL;
}

#define DP_CASE(name)                                                                        \
    static void name##_body(void);                                                           \
    static void name(void)                                                                   \
    {                                                                                        \
        dp_case_begin(#name);                                                                \
        name##_body();                                                                       \
        dp_case_end();                                                                       \
    }                                                                                        \
    static void name##_body(void)

#endif
