/*
 * wire_ops - puts every RDMAP message type and every kind of MPA startup
 * frame on the wire of one TCP port, so that tests/wireshark/check.sh can
 * capture them and let Wireshark's iwarp_mpa and iwarp_ddp_rdmap dissectors
 * judge every frame.
 *
 *     wire_ops [--crc] [--timeout MS] PORT
 *
 * One process, two instances of the loopback adapter "lo" (as two hosts
 * would have): B listens on 127.0.0.1:PORT, A connects to it. Uses only the
 * public headers, as any consumer would. On the wire, in this order:
 *
 *   connection 1 (accepted): MPA Request and Reply, both with private data,
 *     then the zero-length RDMA Write RTR (libndk's peer-to-peer third leg);
 *     A -> B: Send, Send with Solicited Event, Send with Invalidate and Send
 *     with SE and Invalidate (of a memory region B fast-registered), a
 *     multi-FPDU Send, RDMA Write small and 256 KiB, RDMA Read Request (small
 *     and 256 KiB) with B's Read Responses, zero-length Send, Write and Read;
 *     last an RDMA Write to an STag B never issued: B answers with a
 *     Terminate and the connection ends.
 *   connection 2 (rejected): a Request without ULP private data, a rejecting
 *     Reply (R=1) with private data (NdkReject).
 *   connection 3 (rejected): a Request with private data, a rejecting Reply
 *     without ULP private data.
 *
 * Each operation is checked from the API too (completion status and type,
 * bytes, data, the invalidated token, the solicited notification), so that
 * the capture shows operations that really worked. Prints one line per step;
 * exits 0 when every step behaved as expected, 1 otherwise, 2 on bad usage.
 *
 * --crc opens both adapters with NDK_OPEN_FLAG_REQUEST_CRC: the Request and
 * the Reply carry C=1 and every FPDU carries a CRC32c.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ndk/ndk.h>

#include "testlib.h"

#define QUEUE_DEPTH 16
#define CQ_DEPTH (2 * QUEUE_DEPTH) /* one CQ serves both queues of a QP */
#define READ_LIMIT 8               /* IRD and ORD asked for on both sides */
#define BIG (256u * 1024u)         /* the large Write and Read: many FPDUs */
#define BIG_SEND (100u * 1024u)    /* the multi-FPDU Send */
#define MSG 64u                    /* the small Sends */
#define SMALL 100u                 /* the small Write and Read */
#define STASH 64                   /* completions polled but not yet asked for */

static unsigned timeout_ms = 10000;
static unsigned failures;

static const char REQ_PD[] = "wire_ops: connect request private data";
static const char ACC_PD[] = "wire_ops: accept";
static const char REJ_PD[] = "wire_ops: rejected, as the test asks";
static const char REQ3_PD[] = "wire_ops: a request to reject without private data";

/* ------------------------------------------------------------------------ */
/* Reporting                                                                */
/* ------------------------------------------------------------------------ */

static void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void ok(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("wire_ops: ok: ");
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
}

/* "wire_ops: FAIL: message" and `end` on stderr, after what stdout holds. */
static void say_failure(const char *fmt, va_list ap, const char *end)
{
    fflush(stdout);
    fprintf(stderr, "wire_ops: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputs(end, stderr);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_failure(fmt, ap, "\n");
    va_end(ap);
    failures++;
}

/*
 * A step that cannot go on (an object missing, a callback that never came).
 * Exiting at once is the only safe way out: a late callback could still
 * write into the waits we gave up on, and ndk_close_adapter would block on
 * requests in unknown states. The capture up to here is still checked by
 * the driver, which reports this exit status as the test's failure.
 */
static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_failure(fmt, ap, " (giving up)\n");
    va_end(ap);
    fflush(stderr);
    _exit(1);
}

/* ------------------------------------------------------------------------ */
/* Asynchronous calls and events                                            */
/* ------------------------------------------------------------------------ */

static bool past(const struct timespec *t)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/*
 * One completion callback or event: counts its calls and keeps the first
 * status and object. Waits use the monotonic clock so that a change of the
 * wall clock cannot stretch or cut them.
 */
struct signal {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned calls;
    NTSTATUS status;
    NDK_OBJECT_HEADER *obj;
    struct signal *next; /* in the list of sig_new's signals */
};

static void sig_init(struct signal *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &a);
    pthread_condattr_destroy(&a);
}

static void sig_raise(struct signal *s, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    pthread_mutex_lock(&s->lock);
    if (s->calls++ == 0) {
        s->status = st;
        s->obj = obj;
    }
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Waits until the signal has been raised more than `seen` times. */
static bool sig_wait_past(struct signal *s, unsigned seen, unsigned ms)
{
    struct timespec dl = tl_deadline(CLOCK_MONOTONIC, ms);
    pthread_mutex_lock(&s->lock);
    while (s->calls <= seen)
        if (pthread_cond_timedwait(&s->cond, &s->lock, &dl) == ETIMEDOUT)
            break;
    bool got = s->calls > seen;
    pthread_mutex_unlock(&s->lock);
    return got;
}

static unsigned sig_calls(struct signal *s)
{
    pthread_mutex_lock(&s->lock);
    unsigned n = s->calls;
    pthread_mutex_unlock(&s->lock);
    return n;
}

/* Callbacks with the exact NDKPI signatures; the context is a struct signal. */
static VOID on_request(PVOID ctx, NTSTATUS st)
{
    sig_raise(ctx, st, NULL);
}

static VOID on_create(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    sig_raise(ctx, st, obj);
}

static VOID on_close(PVOID ctx)
{
    sig_raise(ctx, STATUS_SUCCESS, NULL);
}

static VOID on_event(PVOID ctx)
{
    sig_raise(ctx, STATUS_SUCCESS, NULL);
}

static VOID on_cq_notify(PVOID ctx, NTSTATUS st)
{
    sig_raise(ctx, st, NULL);
}

/*
 * Every asynchronous call gets a fresh signal, kept until the adapters are
 * closed (after ndk_close_adapter no callback can run): if we give up waiting
 * (die), nothing a late callback touches has gone away. The list is locked
 * because a connect event callback may take one too.
 */
static pthread_mutex_t signals_lock = PTHREAD_MUTEX_INITIALIZER;
static struct signal *signals;

static struct signal *sig_new(void)
{
    struct signal *s = malloc(sizeof *s);
    if (!s)
        die("out of memory");
    sig_init(s);
    pthread_mutex_lock(&signals_lock);
    s->next = signals;
    signals = s;
    pthread_mutex_unlock(&signals_lock);
    return s;
}

/* Only once every adapter is closed. */
static void sig_free_all(void)
{
    pthread_mutex_lock(&signals_lock);
    while (signals) {
        struct signal *s = signals;
        signals = s->next;
        pthread_cond_destroy(&s->cond);
        pthread_mutex_destroy(&s->lock);
        free(s);
    }
    pthread_mutex_unlock(&signals_lock);
}

/*
 * Finishes a call that returned st: an inline result is final; after
 * STATUS_PENDING exactly one callback brings the result (NDKPI's rule).
 */
static NTSTATUS finish(struct signal *s, NTSTATUS st, const char *what)
{
    if (st != STATUS_PENDING)
        return st;
    if (!sig_wait_past(s, 0, timeout_ms))
        die("%s: no completion callback within %u ms", what, timeout_ms);
    return s->status;
}

/* A create call: the object from the callback when it pended, else the one
 * stored through the output pointer. */
static void *created(struct signal *s, NTSTATUS st, void *inline_obj, const char *what)
{
    bool pended = st == STATUS_PENDING;
    st = finish(s, st, what);
    if (st != STATUS_SUCCESS)
        die("%s failed: %s", what, ndk_status_name(st));
    void *obj = pended ? (void *)s->obj : inline_obj;
    if (!obj)
        die("%s succeeded without an object", what);
    return obj;
}

static void close_obj(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj, const char *what)
{
    if (!obj)
        return;
    struct signal *s = sig_new();
    NTSTATUS st = finish(s, fn(obj, on_close, s), what);
    if (st != STATUS_SUCCESS)
        fail("%s returned %s", what, ndk_status_name(st));
}

/* ------------------------------------------------------------------------ */
/* Adapters, queues and memory                                              */
/* ------------------------------------------------------------------------ */

/* One host: an adapter instance, its CQ, PD and the current connection. */
struct side {
    const char *name; /* "A" (initiator) or "B" (listener) */
    NDK_ADAPTER *ad;
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_CONNECTOR *cn;
    struct signal cq_note;    /* the CQ's notification callback */
    struct signal disconnect; /* the connection's disconnect event */
    NDK_RESULT_EX stash[STASH];
    unsigned stashed;
};

static void side_open(struct side *s, const char *name, bool crc)
{
    memset(s, 0, sizeof *s);
    s->name = name;
    sig_init(&s->cq_note);
    sig_init(&s->disconnect);
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.Size = sizeof o;
    /* A new remote token for every fast registration, so that the capture
     * shows two different invalidated keys (by default a fast-register MR
     * keeps its token, docs/behaviour.md). Both ends are libndk on this
     * host, so the same-host fast path (docs/shm.md) would carry the
     * operations past the capture: it is off. */
    o.Flags = NDK_OPEN_FLAG_FRMR_NEW_TOKEN | NDK_OPEN_FLAG_NO_SHM | (crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0);
    NDK_VERSION v = {NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION};
    NTSTATUS st = ndk_open_adapter("lo", v, &o, &s->ad);
    if (st != STATUS_SUCCESS)
        die("%s: ndk_open_adapter(\"lo\") failed: %s", name, ndk_status_name(st));

    struct signal *k = sig_new();
    NDK_CQ *cq = NULL;
    st = s->ad->Dispatch->NdkCreateCq(s->ad, CQ_DEPTH, on_cq_notify, &s->cq_note, NULL, on_create,
                                      k, &cq);
    s->cq = created(k, st, cq, "NdkCreateCq");
    k = sig_new();
    NDK_PD *pd = NULL;
    st = s->ad->Dispatch->NdkCreatePd(s->ad, on_create, k, &pd);
    s->pd = created(k, st, pd, "NdkCreatePd");
}

static NDK_QP *qp_new(struct side *s)
{
    struct signal *k = sig_new();
    NDK_QP *qp = NULL;
    NTSTATUS st = s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, s, QUEUE_DEPTH, QUEUE_DEPTH, 2,
                                               2, 0, on_create, k, &qp);
    return created(k, st, qp, "NdkCreateQp");
}

static NDK_CONNECTOR *connector_new(struct side *s)
{
    struct signal *k = sig_new();
    NDK_CONNECTOR *cn = NULL;
    NTSTATUS st = s->ad->Dispatch->NdkCreateConnector(s->ad, on_create, k, &cn);
    return created(k, st, cn, "NdkCreateConnector");
}

/* A registered, page-aligned buffer (NdkCreateMr + NdkRegisterMr over the
 * MDL stand-in). */
struct mem {
    uint8_t *buf;
    size_t len;
    MDL mdl; /* must stay put while registered */
    NDK_MR *mr;
    UINT32 ltok, rtok;
};

static void mem_reg(struct side *s, struct mem *m, size_t len, ULONG flags, const char *what)
{
    memset(m, 0, sizeof *m);
    void *p = NULL;
    if (posix_memalign(&p, (size_t)sysconf(_SC_PAGESIZE), len) != 0)
        die("%s: cannot allocate %zu bytes", what, len);
    m->buf = p;
    m->len = len;
    memset(m->buf, 0, len);
    struct signal *k = sig_new();
    NDK_MR *mr = NULL;
    NTSTATUS st = s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, on_create, k, &mr);
    m->mr = created(k, st, mr, "NdkCreateMr");
    m->mdl.Next = NULL;
    m->mdl.StartVa = m->buf;
    m->mdl.ByteOffset = 0;
    m->mdl.ByteCount = (ULONG)len;
    k = sig_new();
    st = finish(k, m->mr->Dispatch->NdkRegisterMr(m->mr, &m->mdl, len, flags, on_request, k),
                "NdkRegisterMr");
    if (st != STATUS_SUCCESS)
        die("%s: NdkRegisterMr of %zu bytes failed: %s", what, len, ndk_status_name(st));
    m->ltok = m->mr->Dispatch->NdkGetLocalTokenFromMr(m->mr);
    m->rtok = m->mr->Dispatch->NdkGetRemoteTokenFromMr(m->mr);
}

static void mem_free(struct mem *m)
{
    if (m->mr) {
        struct signal *k = sig_new();
        NTSTATUS st =
            finish(k, m->mr->Dispatch->NdkDeregisterMr(m->mr, on_request, k), "NdkDeregisterMr");
        if (st != STATUS_SUCCESS)
            fail("NdkDeregisterMr: %s", ndk_status_name(st));
        close_obj(m->mr->Dispatch->NdkCloseMr, &m->mr->Header, "NdkCloseMr");
    }
    free(m->buf);
    memset(m, 0, sizeof *m);
}

static NDK_SGE sge(const struct mem *m, size_t off, size_t len)
{
    NDK_SGE g;
    memset(&g, 0, sizeof g);
    g.VirtualAddress = m->buf + off;
    g.Length = (ULONG)len;
    g.MemoryRegionToken = m->ltok;
    return g;
}

/* Bytes that differ from buffer to buffer and from step to step, so that a
 * misplaced payload cannot pass a comparison by accident. */
static void fill(uint8_t *p, size_t n, unsigned seed)
{
    uint32_t x = 0x9E3779B9u * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        p[i] = (uint8_t)x;
    }
}

/* ------------------------------------------------------------------------ */
/* Completions                                                              */
/* ------------------------------------------------------------------------ */

/* Takes what the CQ holds into the side's stash. */
static void cq_drain(struct side *s)
{
    while (s->stashed < STASH) {
        ULONG n = s->cq->Dispatch->NdkGetCqResultsEx(s->cq, s->stash + s->stashed,
                                                      STASH - s->stashed);
        if (n == 0)
            break;
        s->stashed += n;
    }
}

/*
 * The completion of the request with context ctx, polled from the CQ with a
 * bound. Completions of other requests stay stashed for their own waits, so
 * the order in which a side's two queues complete does not matter.
 */
static NDK_RESULT_EX cq_wait(struct side *s, void *ctx, const char *what)
{
    struct timespec dl = tl_deadline(CLOCK_MONOTONIC, timeout_ms);
    for (;;) {
        cq_drain(s);
        for (unsigned i = 0; i < s->stashed; i++) {
            if (s->stash[i].RequestContext != ctx)
                continue;
            NDK_RESULT_EX r = s->stash[i];
            memmove(s->stash + i, s->stash + i + 1, (s->stashed - i - 1) * sizeof r);
            s->stashed--;
            return r;
        }
        if (past(&dl))
            die("%s: %s: no completion within %u ms", s->name, what, timeout_ms);
        struct timespec nap = {0, 200000}; /* 0.2 ms: loopback is fast */
        nanosleep(&nap, NULL);
    }
}

/* Checks a completion's status, type and (when bytes >= 0) its length. */
static bool expect(const NDK_RESULT_EX *r, const char *what, NTSTATUS st, NDK_OPERATION_TYPE type,
                   long bytes)
{
    if (r->Status != st) {
        fail("%s: completion status %s (ProviderErrorCode 0x%08" PRIx32 "), expected %s", what,
             ndk_status_name(r->Status), r->ProviderErrorCode, ndk_status_name(st));
        return false;
    }
    if (st == STATUS_SUCCESS && r->Type != type) {
        fail("%s: completion type %d, expected %d", what, (int)r->Type, (int)type);
        return false;
    }
    if (bytes >= 0 && r->BytesTransferred != (ULONG)bytes) {
        fail("%s: %" PRIu32 " bytes transferred, expected %ld", what, r->BytesTransferred, bytes);
        return false;
    }
    return true;
}

/* A work request's post: anything but STATUS_SUCCESS means no completion
 * will come. */
static bool posted(NTSTATUS st, const char *what)
{
    if (st == STATUS_SUCCESS)
        return true;
    fail("%s: the post returned %s", what, ndk_status_name(st));
    return false;
}

/* ------------------------------------------------------------------------ */
/* The listener                                                             */
/* ------------------------------------------------------------------------ */

/* Connect events, handed from the provider's thread to the main thread. */
static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    NDK_CONNECTOR *queue[4];
    unsigned n;
} events = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {NULL}, 0};

static VOID on_connect_event(PVOID ctx, NDK_CONNECTOR *cn)
{
    (void)ctx;
    pthread_mutex_lock(&events.lock);
    if (events.n < sizeof events.queue / sizeof events.queue[0]) {
        events.queue[events.n++] = cn;
        cn = NULL;
    }
    pthread_cond_broadcast(&events.cond);
    pthread_mutex_unlock(&events.lock);
    /* More requests than the test makes: closing an undelivered request
     * rejects it, and closes may be started from a callback. */
    if (cn)
        cn->Dispatch->NdkCloseConnector(&cn->Header, on_close, sig_new());
}

/* The next connect event's connector. The condition variable uses the
 * default (realtime) clock, so this wait polls in short slices against a
 * monotonic deadline instead. */
static NDK_CONNECTOR *next_request(const char *what)
{
    struct timespec dl = tl_deadline(CLOCK_MONOTONIC, timeout_ms);
    for (;;) {
        pthread_mutex_lock(&events.lock);
        NDK_CONNECTOR *cn = NULL;
        if (events.n) {
            cn = events.queue[0];
            memmove(events.queue, events.queue + 1, --events.n * sizeof events.queue[0]);
        }
        pthread_mutex_unlock(&events.lock);
        if (cn)
            return cn;
        if (past(&dl))
            die("B: %s: no connect event within %u ms", what, timeout_ms);
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
}

/* 127.0.0.1:port; port 0 lets the provider pick (a connect's source). */
static struct sockaddr_in loopback(unsigned port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

static NDK_LISTENER *listen_on(struct side *b, unsigned port)
{
    struct signal *k = sig_new();
    NDK_LISTENER *l = NULL;
    NTSTATUS st = b->ad->Dispatch->NdkCreateListener(b->ad, on_connect_event, NULL, on_create, k, &l);
    l = created(k, st, l, "NdkCreateListener");
    struct sockaddr_in a = loopback(port);
    k = sig_new();
    st = finish(k, l->Dispatch->NdkListen(l, (PSOCKADDR)&a, sizeof a, on_request, k), "NdkListen");
    if (st != STATUS_SUCCESS)
        die("B: NdkListen on 127.0.0.1:%u failed: %s", port, ndk_status_name(st));
    return l;
}

/* NdkGetConnectionData into buf (at most cap bytes): the RDS probe first, as
 * the reference describes, then the read. Returns the private data length. */
static ULONG connection_data(NDK_CONNECTOR *cn, uint8_t *buf, ULONG cap, ULONG *ird, ULONG *ord,
                             const char *what)
{
    ULONG rds = 0;
    NTSTATUS st = cn->Dispatch->NdkGetConnectionData(cn, ird, ord, NULL, &rds);
    if (st != STATUS_SUCCESS)
        die("%s: NdkGetConnectionData (size) failed: %s", what, ndk_status_name(st));
    if (rds == 0)
        return 0;
    if (rds > cap)
        die("%s: %" PRIu32 " bytes of private data, more than the %" PRIu32 " expected", what, rds,
            cap);
    ULONG got = rds;
    st = cn->Dispatch->NdkGetConnectionData(cn, ird, ord, buf, &got);
    if (st != STATUS_SUCCESS)
        die("%s: NdkGetConnectionData failed: %s", what, ndk_status_name(st));
    return got;
}

static bool same_pdata(const uint8_t *got, ULONG got_len, const void *want, size_t want_len,
                       const char *what)
{
    if (got_len == want_len && (want_len == 0 || memcmp(got, want, want_len) == 0))
        return true;
    fail("%s: private data of %" PRIu32 " bytes differs from the %zu bytes sent", what, got_len,
         want_len);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Connection 1: establishment                                              */
/* ------------------------------------------------------------------------ */

/* What B advertises in its accept private data after the text and a NUL:
 * the target buffer's address, remote token and size, big-endian, as an
 * application tells its peer where to write. */
#define ADV_LEN 16u

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

struct remote {
    uint64_t addr;
    uint32_t token, size;
};

/*
 * NdkConnect from A with private data; B reads the request and accepts with
 * its own private data (text, NUL, the advertisement of `target`); A reads
 * the reply and sends the RTR (NdkCompleteConnect); B's accept completes
 * when the RTR arrives. All calls are asynchronous, so one thread drives
 * both sides. (Nothing is sent before a receive is posted for it: each Send
 * step posts B's receive first.)
 */
static bool establish(struct side *a, struct side *b, unsigned port, const struct mem *target,
                      struct remote *out)
{
    a->qp = qp_new(a);
    b->qp = qp_new(b);
    a->cn = connector_new(a);
    struct sockaddr_in src = loopback(0), dst = loopback(port);
    struct signal *kc = sig_new();
    NTSTATUS st_connect = a->cn->Dispatch->NdkConnect(
        a->cn, a->qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&dst, sizeof dst, READ_LIMIT,
        READ_LIMIT, (PVOID)REQ_PD, sizeof REQ_PD - 1, on_request, kc);
    if (st_connect != STATUS_PENDING && st_connect != STATUS_SUCCESS)
        die("A: NdkConnect returned %s", ndk_status_name(st_connect));

    b->cn = next_request("connection 1");
    uint8_t pd[256];
    ULONG ird = 0, ord = 0;
    ULONG n = connection_data(b->cn, pd, sizeof pd, &ird, &ord, "B: request 1");
    bool good = same_pdata(pd, n, REQ_PD, sizeof REQ_PD - 1, "B: request 1");

    uint8_t reply[sizeof ACC_PD + ADV_LEN];
    memcpy(reply, ACC_PD, sizeof ACC_PD); /* with its NUL */
    uint64_t va = (uint64_t)(uintptr_t)target->buf;
    put32(reply + sizeof ACC_PD, (uint32_t)(va >> 32));
    put32(reply + sizeof ACC_PD + 4, (uint32_t)va);
    put32(reply + sizeof ACC_PD + 8, target->rtok);
    put32(reply + sizeof ACC_PD + 12, (uint32_t)target->len);
    struct signal *ka = sig_new();
    NTSTATUS st_accept = b->cn->Dispatch->NdkAccept(b->cn, b->qp, READ_LIMIT, READ_LIMIT, reply,
                                                    sizeof reply, on_event, &b->disconnect,
                                                    on_request, ka);
    if (st_accept != STATUS_PENDING && st_accept != STATUS_SUCCESS)
        die("B: NdkAccept returned %s", ndk_status_name(st_accept));

    NTSTATUS st = finish(kc, st_connect, "NdkConnect");
    if (st != STATUS_SUCCESS)
        die("A: NdkConnect to 127.0.0.1:%u failed: %s", port, ndk_status_name(st));
    n = connection_data(a->cn, pd, sizeof pd, &ird, &ord, "A: reply 1");
    if (!same_pdata(pd, n, reply, sizeof reply, "A: reply 1"))
        return false; /* no advertisement to use */
    if (ord < 1)
        die("A: effective ORD %" PRIu32 ": the RDMA Reads need at least 1", ord);
    const uint8_t *adv = pd + sizeof ACC_PD;
    out->addr = (uint64_t)get32(adv) << 32 | get32(adv + 4);
    out->token = get32(adv + 8);
    out->size = get32(adv + 12);

    struct signal *kr = sig_new();
    st = finish(kr,
                a->cn->Dispatch->NdkCompleteConnect(a->cn, on_event, &a->disconnect, on_request, kr),
                "NdkCompleteConnect");
    if (st != STATUS_SUCCESS)
        die("A: NdkCompleteConnect failed: %s", ndk_status_name(st));
    st = finish(ka, st_accept, "NdkAccept");
    if (st != STATUS_SUCCESS)
        die("B: NdkAccept failed: %s", ndk_status_name(st));
    if (good)
        ok("connection 1: MPA Request and Reply with private data (%zu and %zu bytes), RTR, "
           "effective IRD %" PRIu32 " ORD %" PRIu32,
           sizeof REQ_PD - 1, sizeof reply, ird, ord);
    return good;
}

/* ------------------------------------------------------------------------ */
/* Connection 1: the operations                                             */
/* ------------------------------------------------------------------------ */

/* Buffers of connection 1. */
struct bufs {
    struct mem src;    /* A: what A sends and writes */
    struct mem sink;   /* A: where A's Reads land */
    struct mem target; /* B: A writes and reads it (advertised) */
    struct mem recv;   /* B: receives */
};

/* Request contexts: distinct addresses, nothing behind them. */
static char ctx_tag[64];
#define CTX(i) ((void *)&ctx_tag[(i)])

/*
 * One Send A -> B of len bytes from src at offset off into B's posted
 * receive, with the given NdkSend flags (or through NdkSendAndInvalidate
 * when inval_tok is non-zero). Checks both completions and the bytes.
 * A solicited Send also checks that B's CQ, armed for solicited
 * completions only, notified.
 */
static bool send_one(struct side *a, struct side *b, struct bufs *m, size_t off, size_t len,
                     ULONG flags, UINT32 inval_tok, const char *what)
{
    static unsigned seed = 100;
    fill(m->src.buf + off, len, seed++);
    memset(m->recv.buf, 0, len ? len : 1);
    NDK_SGE rs = sge(&m->recv, 0, m->recv.len);
    if (!posted(b->qp->Dispatch->NdkReceive(b->qp, CTX(1), &rs, 1), what))
        return false;
    bool solicited = flags & NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT;
    unsigned notes = sig_calls(&b->cq_note);
    if (solicited)
        b->cq->Dispatch->NdkArmCq(b->cq, NDK_CQ_NOTIFY_SOLICITED);
    /* A zero-length Send names no buffer at all (nSge 0). */
    NDK_SGE ss = sge(&m->src, off, len);
    ULONG nsge = len ? 1 : 0;
    NTSTATUS st = inval_tok ? a->qp->Dispatch->NdkSendAndInvalidate(a->qp, CTX(2), len ? &ss : NULL,
                                                                    nsge, flags, inval_tok)
                            : a->qp->Dispatch->NdkSend(a->qp, CTX(2), len ? &ss : NULL, nsge, flags);
    if (!posted(st, what))
        return false;
    NDK_RESULT_EX r = cq_wait(a, CTX(2), what);
    bool good = expect(&r, what, STATUS_SUCCESS, NdkOperationTypeSend, -1);
    r = cq_wait(b, CTX(1), what);
    NDK_OPERATION_TYPE want =
        inval_tok ? NdkOperationTypeReceiveAndInvalidate : NdkOperationTypeReceive;
    good = expect(&r, what, STATUS_SUCCESS, want, (long)len) && good;
    if (inval_tok && r.TypeSpecificCompletionOutput != inval_tok) {
        fail("%s: B's receive names token 0x%08" PRIx64 " as invalidated, not 0x%08" PRIx32, what,
             (uint64_t)r.TypeSpecificCompletionOutput, inval_tok);
        good = false;
    }
    if (len && memcmp(m->recv.buf, m->src.buf + off, len) != 0) {
        fail("%s: the received bytes differ from those sent", what);
        good = false;
    }
    if (solicited && !sig_wait_past(&b->cq_note, notes, timeout_ms)) {
        fail("%s: B's CQ, armed for solicited completions, did not notify", what);
        good = false;
    }
    if (good)
        ok("%s: %zu bytes", what, len);
    return good;
}

/* A fast-registered MR of B's, for the Sends with Invalidate. */
struct frmr {
    uint8_t *buf;
    size_t len;
    MDL mdl;
    NDK_MR *mr;
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    ULONG fbo;
};

/* NdkCreateMr(pd, TRUE), NdkInitializeFastRegisterMr for its pages, and the
 * page addresses from NdkBuildLAM (size probe first). */
static void frmr_init(struct side *b, struct frmr *f, size_t pages)
{
    memset(f, 0, sizeof *f);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    void *p = NULL;
    if (posix_memalign(&p, pg, pages * pg) != 0)
        die("cannot allocate the fast-register buffer");
    f->buf = p;
    f->len = pages * pg;
    memset(f->buf, 0, f->len);
    struct signal *k = sig_new();
    NDK_MR *mr = NULL;
    NTSTATUS st = b->pd->Dispatch->NdkCreateMr(b->pd, TRUE, on_create, k, &mr);
    f->mr = created(k, st, mr, "NdkCreateMr (fast register)");
    k = sig_new();
    st = finish(k,
                f->mr->Dispatch->NdkInitializeFastRegisterMr(f->mr, (ULONG)pages, TRUE, on_request,
                                                             k),
                "NdkInitializeFastRegisterMr");
    if (st != STATUS_SUCCESS)
        die("NdkInitializeFastRegisterMr failed: %s", ndk_status_name(st));
    f->mdl.StartVa = f->buf;
    f->mdl.ByteCount = (ULONG)f->len;
    ULONG size = 0, fbo = 0;
    k = sig_new();
    st = finish(k, b->ad->Dispatch->NdkBuildLAM(b->ad, &f->mdl, f->len, on_request, k, NULL, &size,
                                                &fbo),
                "NdkBuildLAM (size)");
    if (st != STATUS_BUFFER_TOO_SMALL || size == 0)
        die("NdkBuildLAM without a buffer: %s, size %" PRIu32 ", expected STATUS_BUFFER_TOO_SMALL",
            ndk_status_name(st), size);
    f->lam = calloc(1, size);
    if (!f->lam)
        die("out of memory");
    k = sig_new();
    st = finish(k, b->ad->Dispatch->NdkBuildLAM(b->ad, &f->mdl, f->len, on_request, k, f->lam,
                                                &size, &f->fbo),
                "NdkBuildLAM");
    if (st != STATUS_SUCCESS)
        die("NdkBuildLAM failed: %s", ndk_status_name(st));
}

/* NdkFastRegister of the whole buffer with remote write rights, on B's QP;
 * the token is read once the post returned (it changes with every
 * registration). */
static UINT32 frmr_register(struct side *b, struct frmr *f)
{
    NTSTATUS st = b->qp->Dispatch->NdkFastRegister(
        b->qp, CTX(3), f->mr, f->lam->AdapterPageCount, f->lam->AdapterPageArray, f->fbo, f->len,
        f->buf, NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ);
    if (st != STATUS_SUCCESS)
        die("B: NdkFastRegister failed: %s", ndk_status_name(st));
    UINT32 tok = f->mr->Dispatch->NdkGetRemoteTokenFromMr(f->mr);
    NDK_RESULT_EX r = cq_wait(b, CTX(3), "NdkFastRegister");
    if (!expect(&r, "B: NdkFastRegister", STATUS_SUCCESS, NdkOperationTypeFastRegister, -1))
        die("B: the fast registration failed");
    return tok;
}

static void frmr_free(struct side *b, struct frmr *f)
{
    if (f->lam)
        b->ad->Dispatch->NdkReleaseLAM(b->ad, f->lam);
    free(f->lam);
    if (f->mr)
        close_obj(f->mr->Dispatch->NdkCloseMr, &f->mr->Header, "NdkCloseMr (fast register)");
    free(f->buf);
    memset(f, 0, sizeof *f);
}

/* A's request (context ctx) was posted (st) and completed successfully as
 * an operation of this type. */
static bool completed(struct side *a, NTSTATUS st, void *ctx, NDK_OPERATION_TYPE type,
                      const char *what)
{
    if (!posted(st, what))
        return false;
    NDK_RESULT_EX r = cq_wait(a, ctx, what);
    return expect(&r, what, STATUS_SUCCESS, type, -1);
}

/* An RDMA Write of len bytes of src (offset soff) to B's target at offset
 * toff; nSge 0 for a zero-length Write. */
static bool write_one(struct side *a, struct bufs *m, const struct remote *rb, size_t soff,
                      size_t toff, size_t len, const char *what)
{
    NDK_SGE g = sge(&m->src, soff, len);
    NTSTATUS st = a->qp->Dispatch->NdkWrite(a->qp, CTX(4), len ? &g : NULL, len ? 1 : 0,
                                            rb->addr + toff, rb->token, 0);
    return completed(a, st, CTX(4), NdkOperationTypeWrite, what);
}

/* An RDMA Read of len bytes of B's target (offset toff) into A's sink at
 * offset koff; nSge 0 for a zero-length Read. */
static bool read_one(struct side *a, struct bufs *m, const struct remote *rb, size_t toff,
                     size_t koff, size_t len, const char *what)
{
    NDK_SGE g = sge(&m->sink, koff, len);
    NTSTATUS st = a->qp->Dispatch->NdkRead(a->qp, CTX(5), len ? &g : NULL, len ? 1 : 0,
                                           rb->addr + toff, rb->token, 0);
    return completed(a, st, CTX(5), NdkOperationTypeRead, what);
}

static bool data_ops(struct side *a, struct side *b, struct bufs *m, const struct remote *rb)
{
    bool good = true;
    good = send_one(a, b, m, 0, MSG, 0, 0, "Send") && good;
    good = send_one(a, b, m, 0, MSG, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, 0,
                    "Send with Solicited Event") &&
           good;

    /* Send with Invalidate, then with SE and Invalidate: each time B
     * fast-registers the region anew (with NDK_OPEN_FLAG_FRMR_NEW_TOKEN
     * under a new token) and A names the fresh token. One process: the token is
     * handed over in memory, as an application would in a message. */
    struct frmr f;
    frmr_init(b, &f, 2);
    UINT32 tok = frmr_register(b, &f);
    good = send_one(a, b, m, 0, MSG, 0, tok, "Send with Invalidate") && good;
    UINT32 tok2 = frmr_register(b, &f);
    if (tok2 == tok) {
        fail("B: a new fast registration kept the invalidated token 0x%08" PRIx32, tok);
        good = false;
    }
    good = send_one(a, b, m, 0, MSG, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, tok2,
                    "Send with SE and Invalidate") &&
           good;
    frmr_free(b, &f);

    good = send_one(a, b, m, 0, BIG_SEND, 0, 0, "Send, multi-FPDU") && good;

    /* The Writes are checked by reading the bytes back: a Write completes
     * at A once handed to TCP, before B has placed it. */
    fill(m->src.buf, BIG, 7);
    bool w = write_one(a, m, rb, 0, 0, SMALL, "RDMA Write, small");
    if (w)
        ok("RDMA Write, small: %u bytes", SMALL);
    w = write_one(a, m, rb, 0, 0, BIG, "RDMA Write, 256 KiB") && w;
    if (w)
        ok("RDMA Write, 256 KiB: %u bytes", BIG);
    good = w && good;

    memset(m->sink.buf, 0, m->sink.len);
    if (read_one(a, m, rb, 1000, 0, SMALL, "RDMA Read, small")) {
        if (memcmp(m->sink.buf, m->src.buf + 1000, SMALL) != 0) {
            fail("RDMA Read, small: the bytes read differ from those written");
            good = false;
        } else {
            ok("RDMA Read, small: %u bytes, equal to those written", SMALL);
        }
    } else {
        good = false;
    }
    memset(m->sink.buf, 0, m->sink.len);
    if (read_one(a, m, rb, 0, 0, BIG, "RDMA Read, 256 KiB")) {
        if (memcmp(m->sink.buf, m->src.buf, BIG) != 0) {
            fail("RDMA Read, 256 KiB: the bytes read differ from those written");
            good = false;
        } else {
            ok("RDMA Read, 256 KiB: %u bytes, equal to those written", BIG);
        }
    } else {
        good = false;
    }

    good = send_one(a, b, m, 0, 0, 0, 0, "Send, zero-length") && good;
    if (write_one(a, m, rb, 0, 0, 0, "RDMA Write, zero-length"))
        ok("RDMA Write, zero-length");
    else
        good = false;
    if (read_one(a, m, rb, 0, 0, 0, "RDMA Read, zero-length"))
        ok("RDMA Read, zero-length");
    else
        good = false;
    return good;
}

/*
 * The Terminate: an RDMA Write through a token B never issued (the right
 * index with another key). B must refuse it with a Terminate and end the
 * connection; A's Write itself may complete either way (libndk completes a
 * Write once it is handed to TCP), and both sides see the disconnect event.
 */
static bool terminate(struct side *a, struct side *b, struct bufs *m, const struct remote *rb)
{
    const char *what = "RDMA Write to an invalid STag (Terminate)";
    unsigned da = sig_calls(&a->disconnect), db = sig_calls(&b->disconnect);
    struct remote bad = *rb;
    bad.token ^= 0xA5u;
    NDK_SGE g = sge(&m->src, 0, SMALL);
    if (!posted(a->qp->Dispatch->NdkWrite(a->qp, CTX(6), &g, 1, bad.addr, bad.token, 0), what))
        return false;
    NDK_RESULT_EX r = cq_wait(a, CTX(6), what);
    bool good = true;
    if (r.Status != STATUS_SUCCESS && r.Status != STATUS_CANCELLED) {
        fail("%s: A's Write completed with %s", what, ndk_status_name(r.Status));
        good = false;
    }
    if (!sig_wait_past(&a->disconnect, da, timeout_ms)) {
        fail("%s: A saw no disconnect event within %u ms", what, timeout_ms);
        good = false;
    }
    if (!sig_wait_past(&b->disconnect, db, timeout_ms)) {
        fail("%s: B saw no disconnect event within %u ms", what, timeout_ms);
        good = false;
    }
    if (good)
        ok("%s: A's Write completed %s, the connection ended on both sides", what,
           ndk_status_name(r.Status));
    return good;
}

/* Closes connection 1's objects: connectors before QPs (a connector relies
 * on its QP), QPs before the MRs and PD. Completions flushed from the QPs
 * (B's spare receive) are drained and ignored. */
static void conn_close(struct side *s)
{
    if (s->cn)
        close_obj(s->cn->Dispatch->NdkCloseConnector, &s->cn->Header, "NdkCloseConnector");
    if (s->qp)
        close_obj(s->qp->Dispatch->NdkCloseQp, &s->qp->Header, "NdkCloseQp");
    s->cn = NULL;
    s->qp = NULL;
    cq_drain(s);
    s->stashed = 0;
}

/* ------------------------------------------------------------------------ */
/* Connections 2 and 3: rejected                                            */
/* ------------------------------------------------------------------------ */

/*
 * A connects with request_pd (may be empty); B reads it and rejects with
 * reject_pd (may be empty); A's NdkConnect fails with
 * STATUS_CONNECTION_REFUSED and the reject's private data stays readable.
 */
static bool rejected(struct side *a, unsigned port, const char *request_pd,
                     const char *reject_pd, const char *what)
{
    NDK_QP *qp = qp_new(a);
    NDK_CONNECTOR *cn = connector_new(a);
    size_t req_len = strlen(request_pd), rej_len = strlen(reject_pd);
    struct sockaddr_in src = loopback(0), dst = loopback(port);
    struct signal *kc = sig_new();
    NTSTATUS st_connect = cn->Dispatch->NdkConnect(
        cn, qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&dst, sizeof dst, READ_LIMIT, READ_LIMIT,
        req_len ? (PVOID)request_pd : NULL, (ULONG)req_len, on_request, kc);
    if (st_connect != STATUS_PENDING && st_connect != STATUS_SUCCESS)
        die("A: %s: NdkConnect returned %s", what, ndk_status_name(st_connect));

    NDK_CONNECTOR *bcn = next_request(what);
    uint8_t pd[256];
    ULONG ird = 0, ord = 0;
    ULONG n = connection_data(bcn, pd, sizeof pd, &ird, &ord, what);
    bool good = same_pdata(pd, n, request_pd, req_len, what);
    NTSTATUS st =
        bcn->Dispatch->NdkReject(bcn, rej_len ? (PVOID)reject_pd : NULL, (ULONG)rej_len);
    if (st != STATUS_SUCCESS) {
        fail("B: %s: NdkReject failed: %s", what, ndk_status_name(st));
        good = false;
    }
    st = finish(kc, st_connect, "NdkConnect");
    if (st != STATUS_CONNECTION_REFUSED) {
        fail("A: %s: NdkConnect completed with %s, expected STATUS_CONNECTION_REFUSED", what,
             ndk_status_name(st));
        good = false;
    } else {
        n = connection_data(cn, pd, sizeof pd, NULL, NULL, what);
        good = same_pdata(pd, n, reject_pd, rej_len, what) && good;
    }
    close_obj(bcn->Dispatch->NdkCloseConnector, &bcn->Header, "NdkCloseConnector");
    close_obj(cn->Dispatch->NdkCloseConnector, &cn->Header, "NdkCloseConnector");
    close_obj(qp->Dispatch->NdkCloseQp, &qp->Header, "NdkCloseQp");
    if (good)
        ok("%s: Request with %zu bytes of private data, rejecting Reply with %zu", what, req_len,
           rej_len);
    return good;
}

/* ------------------------------------------------------------------------ */

static int usage(void)
{
    fprintf(stderr, "usage: wire_ops [--crc] [--timeout MS] PORT\n");
    return 2;
}

int main(int argc, char **argv)
{
    bool crc = false;
    unsigned port = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--crc") == 0) {
            crc = true;
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            unsigned long v = strtoul(argv[++i], &end, 10);
            if (*end || v < 100 || v > 600000)
                return usage();
            timeout_ms = (unsigned)v;
        } else if (!port && argv[i][0] != '-') {
            unsigned long v = strtoul(argv[i], &end, 10);
            if (*end || v < 1 || v > 65535)
                return usage();
            port = (unsigned)v;
        } else {
            return usage();
        }
    }
    if (!port)
        return usage();
    printf("wire_ops: port %u, MPA CRC %s\n", port, crc ? "on" : "off");

    struct side a, b;
    side_open(&b, "B", crc);
    side_open(&a, "A", crc);
    NDK_LISTENER *l = listen_on(&b, port);

    struct bufs m;
    mem_reg(&a, &m.src, BIG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, "A: source");
    mem_reg(&a, &m.sink, BIG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK,
            "A: read sink");
    mem_reg(&b, &m.target, BIG, NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ,
            "B: target");
    mem_reg(&b, &m.recv, BIG_SEND, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, "B: receive buffer");

    struct remote rb;
    if (establish(&a, &b, port, &m.target, &rb)) {
        if (rb.addr != (uint64_t)(uintptr_t)m.target.buf || rb.token != m.target.rtok ||
            rb.size != m.target.len)
            fail("A: the advertisement in B's private data is not what B put there");
        data_ops(&a, &b, &m, &rb);
        terminate(&a, &b, &m, &rb);
    }
    conn_close(&a);
    conn_close(&b);

    rejected(&a, port, "", REJ_PD, "connection 2 (rejected)");
    rejected(&a, port, REQ3_PD, "", "connection 3 (rejected)");

    close_obj(l->Dispatch->NdkCloseListener, &l->Header, "NdkCloseListener");
    mem_free(&m.src);
    mem_free(&m.sink);
    mem_free(&m.target);
    mem_free(&m.recv);
    struct side *sides[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        struct side *s = sides[i];
        close_obj(s->pd->Dispatch->NdkClosePd, &s->pd->Header, "NdkClosePd");
        close_obj(s->cq->Dispatch->NdkCloseCq, &s->cq->Header, "NdkCloseCq");
        ndk_close_adapter(s->ad);
    }
    sig_free_all();
    if (failures) {
        printf("wire_ops: %u step%s FAILED\n", failures, failures == 1 ? "" : "s");
        return 1;
    }
    printf("wire_ops: every operation behaved as expected\n");
    return 0;
}
