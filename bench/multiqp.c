/*
 * multiqp.c - the aggregate message rate and bandwidth of many QPs at once,
 * over loopback in one process: what several progress engines
 * (docs/architecture.md, Engines) add over one.
 *
 *   client view of "lo"                      server view of "lo"
 *   QP i (its own CQ) --- Sends or Writes --> QP i (its own CQ)
 *
 * Each pair keeps a window of requests in flight. Everything after the
 * set-up is driven from the CQ notification callbacks, as an efficient
 * consumer does: the client's callback drains its CQ and posts one request
 * per completion; the server's (Sends) counts each received message and
 * posts the receive again. The callbacks run on the engines, so the engine
 * count decides how much of this runs at once. With --affinity, pair i's
 * CQs name CPU i of the process's affinity mask (modulo its size), else
 * libndk places them on the least loaded engine.
 *
 * Counted after a warm-up: Writes (the default) as they complete at the
 * client (handed to TCP; the socket buffers bound how far they run ahead),
 * Sends (--op send) as the server receives them. Sends complete once TCP
 * took them, so a client can run ahead of the server's receives; the
 * server then stops reading until it posted more (docs/behaviour.md,
 * Receiver not ready), which the Send figures include. Every wait is bounded; a failed request ends
 * the run with exit status 1.
 */
#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_QPS 256
#define WAIT_MS 10000

static struct {
    unsigned qps, engines, window;
    size_t size;
    double duration_s, warmup_s;
    bool send, affinity;
} opt = {.qps = 2, .size = 64, .duration_s = 3, .warmup_s = 0.5};

static _Noreturn void die(const char *what, NTSTATUS st)
{
    fprintf(stderr, "multiqp: %s: %s\n", what, ndk_status_name(st));
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- waiting for a request's completion, bounded ---- */

struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    NTSTATUS st;
};

static void w_init(struct waiter *w)
{
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    w->done = false;
    w->st = STATUS_PENDING;
}

static void w_signal(struct waiter *w, NTSTATUS st)
{
    pthread_mutex_lock(&w->mu);
    w->st = st;
    w->done = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void w_cb(PVOID ctx, NTSTATUS st)
{
    w_signal(ctx, st);
}

static void w_close_cb(PVOID ctx)
{
    w_signal(ctx, STATUS_SUCCESS);
}

/* The request's final status: returned, or its completion's (within WAIT_MS). */
static NTSTATUS w_end(struct waiter *w, NTSTATUS returned, const char *what)
{
    if (returned != STATUS_PENDING)
        return returned;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&w->mu);
    while (!w->done)
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) != 0)
            break;
    bool done = w->done;
    NTSTATUS st = w->st;
    pthread_mutex_unlock(&w->mu);
    if (!done)
        die(what, STATUS_IO_TIMEOUT);
    return st;
}

static void w_reset(struct waiter *w)
{
    pthread_mutex_lock(&w->mu);
    w->done = false;
    w->st = STATUS_PENDING;
    pthread_mutex_unlock(&w->mu);
}

/* Objects are created inline by libndk; a provider that pends is not
 * supported here. */
static void on_create(PVOID ctx, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    (void)ctx, (void)st, (void)obj;
}

static void must(NTSTATUS st, const char *what)
{
    if (st != STATUS_SUCCESS)
        die(what, st);
}

/* ---- the two sides and the pairs ---- */

struct side {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_MR *mr;
    MDL mdl;
    uint8_t *mem;
    size_t len;
    UINT32 ltok, rtok;
};

struct pair {
    unsigned idx;
    NDK_CQ *ccq, *scq;
    NDK_QP *cqp, *sqp;
    NDK_CONNECTOR *cc;
    _Atomic(NDK_CONNECTOR *) sc;
    size_t coff, soff; /* this pair's slices of the buffers */
    _Atomic int outstanding; /* client requests posted and not completed */
    _Atomic uint64_t msgs;   /* counted messages */
    struct waiter ev, conn, acc, cc_done;
};

static struct side cli, srv;
static struct pair pairs[MAX_QPS];
static _Atomic int stopping;
static _Atomic int failed;
static int cpus[CPU_SETSIZE];
static int ncpus;

static void open_side(struct side *s, size_t len)
{
    NDK_VERSION v = {.Major = NDK_PROVIDER_MAJOR_VERSION, .Minor = NDK_PROVIDER_MINOR_VERSION};
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .MaxEngines = opt.engines};
    must(ndk_open_adapter("lo", v, &o, &s->ad), "ndk_open_adapter(lo)");
    must(s->ad->Dispatch->NdkCreatePd(s->ad, on_create, NULL, &s->pd), "NdkCreatePd");
    if (posix_memalign((void **)&s->mem, 4096, len) != 0)
        die("memory", STATUS_NO_MEMORY);
    memset(s->mem, 0x5a, len);
    s->len = len;
    must(s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, on_create, NULL, &s->mr), "NdkCreateMr");
    s->mdl = (MDL){.StartVa = s->mem, .ByteCount = (ULONG)len};
    struct waiter w;
    w_init(&w);
    ULONG flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    must(w_end(&w, s->mr->Dispatch->NdkRegisterMr(s->mr, &s->mdl, len, flags, w_cb, &w), "NdkRegisterMr"),
         "NdkRegisterMr");
    s->ltok = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
    s->rtok = s->mr->Dispatch->NdkGetRemoteTokenFromMr(s->mr);
}

static NDK_SGE sge(const struct side *s, size_t off, size_t len)
{
    return (NDK_SGE){.VirtualAddress = s->mem + off, .Length = (ULONG)len, .MemoryRegionToken = s->ltok};
}

static void fail(const char *what, NTSTATUS st)
{
    if (atomic_exchange(&failed, 1) == 0)
        fprintf(stderr, "multiqp: %s: %s\n", what, ndk_status_name(st));
    atomic_store(&stopping, 1);
}

/* The client posts request k of its window (slot k % window). */
static void post_one(struct pair *p, unsigned k)
{
    size_t off = p->coff + (size_t)(k % opt.window) * opt.size;
    NDK_SGE g = sge(&cli, off, opt.size);
    NTSTATUS st;
    atomic_fetch_add(&p->outstanding, 1);
    if (opt.send)
        st = p->cqp->Dispatch->NdkSend(p->cqp, (PVOID)(uintptr_t)k, &g, 1, 0);
    else
        st = p->cqp->Dispatch->NdkWrite(p->cqp, (PVOID)(uintptr_t)k, &g, 1,
                                        (UINT64)(uintptr_t)(srv.mem + p->soff + off - p->coff), srv.rtok, 0);
    if (st != STATUS_SUCCESS) {
        atomic_fetch_sub(&p->outstanding, 1);
        fail(opt.send ? "NdkSend" : "NdkWrite", st);
    }
}

static void post_receive(struct pair *p, unsigned k)
{
    size_t off = p->soff + (size_t)(k % (2 * opt.window)) * opt.size;
    NDK_SGE g = sge(&srv, off, opt.size);
    NTSTATUS st = p->sqp->Dispatch->NdkReceive(p->sqp, (PVOID)(uintptr_t)k, &g, 1);
    if (st != STATUS_SUCCESS && !atomic_load(&stopping))
        fail("NdkReceive", st);
}

/* Drains the CQ, handling each result, then arms it again (an arm made
 * while newer results are queued fires at once, so none is stranded). */
static void drain(NDK_CQ *cq, struct pair *p, bool client)
{
    NDK_RESULT r[32];
    ULONG n;
    while ((n = cq->Dispatch->NdkGetCqResults(cq, r, 32)) > 0) {
        for (ULONG i = 0; i < n; i++) {
            unsigned k = (unsigned)(uintptr_t)r[i].RequestContext;
            if (r[i].Status != STATUS_SUCCESS) {
                if (!atomic_load(&stopping))
                    fail(client ? "client completion" : "server receive", r[i].Status);
                if (client)
                    atomic_fetch_sub(&p->outstanding, 1);
                continue;
            }
            if (client) {
                atomic_fetch_sub(&p->outstanding, 1);
                if (!opt.send)
                    atomic_fetch_add(&p->msgs, 1);
                if (!atomic_load(&stopping))
                    post_one(p, k + opt.window);
            } else {
                /* Also while stopping: the Sends still on their way need
                 * somewhere to land. */
                atomic_fetch_add(&p->msgs, 1);
                post_receive(p, k + 2 * opt.window);
            }
        }
    }
    cq->Dispatch->NdkArmCq(cq, NDK_CQ_NOTIFY_ANY);
}

static void client_cq_cb(PVOID ctx, NTSTATUS st)
{
    struct pair *p = ctx;
    if (st != STATUS_SUCCESS)
        fail("client CQ", st);
    drain(p->ccq, p, true);
}

static void server_cq_cb(PVOID ctx, NTSTATUS st)
{
    struct pair *p = ctx;
    if (st != STATUS_SUCCESS)
        fail("server CQ", st);
    drain(p->scq, p, false);
}

static void on_disconnect(PVOID ctx)
{
    (void)ctx;
}

static void on_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    UINT32 idx = UINT32_MAX;
    ULONG ird = 0, ord = 0, len = sizeof idx;
    NTSTATUS st = c->Dispatch->NdkGetConnectionData(c, &ird, &ord, &idx, &len);
    if (st != STATUS_SUCCESS || len != sizeof idx || idx >= opt.qps) {
        fail("connect event", st == STATUS_SUCCESS ? STATUS_INVALID_PARAMETER : st);
        return;
    }
    atomic_store(&pairs[idx].sc, c);
    w_signal(&pairs[idx].ev, STATUS_SUCCESS);
}

static NDK_CQ *make_cq(struct side *s, struct pair *p, NDK_FN_CQ_NOTIFICATION_CALLBACK cb, unsigned depth)
{
    GROUP_AFFINITY a;
    memset(&a, 0, sizeof a);
    int cpu = cpus[p->idx % (unsigned)ncpus];
    a.Group = (USHORT)(cpu / 64);
    a.Mask = (KAFFINITY)1 << (cpu % 64);
    NDK_CQ *cq = NULL;
    must(s->ad->Dispatch->NdkCreateCq(s->ad, depth, cb, p, opt.affinity ? &a : NULL, on_create, NULL, &cq),
         "NdkCreateCq");
    return cq;
}

static NDK_QP *make_qp(struct side *s, NDK_CQ *cq, struct pair *p, ULONG rq)
{
    NDK_QP *qp = NULL;
    must(s->pd->Dispatch->NdkCreateQp(s->pd, cq, cq, p, rq, opt.window, 1, 1, 0, on_create, NULL, &qp),
         "NdkCreateQp");
    return qp;
}

static void connect_pair(struct pair *p, NDK_LISTENER *l, const struct sockaddr_in *dst)
{
    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    must(cli.ad->Dispatch->NdkCreateConnector(cli.ad, on_create, NULL, &p->cc), "NdkCreateConnector");
    UINT32 idx = p->idx;
    NTSTATUS st = p->cc->Dispatch->NdkConnect(p->cc, p->cqp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)dst,
                                              sizeof *dst, 0, 0, &idx, sizeof idx, w_cb, &p->conn);
    if (st != STATUS_PENDING)
        die("NdkConnect", st);
    must(w_end(&p->ev, STATUS_PENDING, "connect event"), "connect event");
    NDK_CONNECTOR *sc = atomic_load(&p->sc);
    st = sc->Dispatch->NdkAccept(sc, p->sqp, 0, 0, NULL, 0, on_disconnect, p, w_cb, &p->acc);
    must(w_end(&p->conn, STATUS_PENDING, "NdkConnect"), "NdkConnect");
    must(w_end(&p->cc_done, p->cc->Dispatch->NdkCompleteConnect(p->cc, on_disconnect, p, w_cb, &p->cc_done),
               "NdkCompleteConnect"),
         "NdkCompleteConnect");
    must(w_end(&p->acc, st, "NdkAccept"), "NdkAccept");
    (void)l;
}

static void close_hdr(NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *h, const char *what)
{
    struct waiter w;
    w_init(&w);
    must(w_end(&w, fn(h, w_close_cb, &w), what), what);
}

static uint64_t total_msgs(void)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < opt.qps; i++)
        n += atomic_load(&pairs[i].msgs);
    return n;
}

static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end == 'K' || *end == 'k')
        v <<= 10;
    else if (*end == 'M' || *end == 'm')
        v <<= 20;
    return (size_t)v;
}

static void usage(void)
{
    fprintf(stderr, "usage: multiqp [--qps N] [--size BYTES[K|M]] [--op write|send] [--engines N]\n"
                    "               [--window N] [--affinity] [-D seconds] [--warmup seconds]\n"
                    "  prints: multiqp op= size= qps= engines= window= msgs_per_s= MBps= seconds=\n");
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"qps", required_argument, NULL, 'q'},     {"size", required_argument, NULL, 's'},
        {"op", required_argument, NULL, 'o'},      {"engines", required_argument, NULL, 'e'},
        {"window", required_argument, NULL, 'w'},  {"affinity", no_argument, NULL, 'a'},
        {"duration", required_argument, NULL, 'D'}, {"warmup", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    int o;
    while ((o = getopt_long(argc, argv, "q:s:o:e:w:aD:W:h", lopts, NULL)) != -1) {
        switch (o) {
        case 'q': opt.qps = (unsigned)strtoul(optarg, NULL, 10); break;
        case 's': opt.size = parse_size(optarg); break;
        case 'o': opt.send = strcmp(optarg, "send") == 0; break;
        case 'e': opt.engines = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'w': opt.window = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'a': opt.affinity = true; break;
        case 'D': opt.duration_s = strtod(optarg, NULL); break;
        case 'W': opt.warmup_s = strtod(optarg, NULL); break;
        default: usage(); return o == 'h' ? 0 : 2;
        }
    }
    if (!opt.window)
        opt.window = opt.size <= 4096 ? 64 : opt.size >= (1u << 20) ? 4 : 16;
    if (opt.qps < 1 || opt.qps > MAX_QPS || opt.size < 1 || opt.size > (64u << 20) || opt.window > 1024 ||
        opt.duration_s <= 0 || opt.warmup_s < 0) {
        usage();
        return 2;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                cpus[ncpus++] = c;
    if (!ncpus)
        cpus[ncpus++] = 0;

    /* Client slices: window requests; server slices: 2 x window receives
     * (or the Write targets at the client's offsets). */
    size_t per = (size_t)opt.window * opt.size;
    open_side(&cli, per * opt.qps);
    open_side(&srv, 2 * per * opt.qps);
    NDK_LISTENER *l = NULL;
    must(srv.ad->Dispatch->NdkCreateListener(srv.ad, on_connect_event, NULL, on_create, NULL, &l),
         "NdkCreateListener");
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct waiter w;
    w_init(&w);
    must(w_end(&w, l->Dispatch->NdkListen(l, (PSOCKADDR)&any, sizeof any, w_cb, &w), "NdkListen"),
         "NdkListen");
    struct sockaddr_in dst;
    ULONG dlen = sizeof dst;
    must(l->Dispatch->NdkGetLocalAddress(l, (PSOCKADDR)&dst, &dlen), "NdkGetLocalAddress");

    for (unsigned i = 0; i < opt.qps; i++) {
        struct pair *p = &pairs[i];
        p->idx = i;
        p->coff = i * per;
        p->soff = 2 * i * per;
        w_init(&p->ev);
        w_init(&p->conn);
        w_init(&p->acc);
        w_init(&p->cc_done);
        p->ccq = make_cq(&cli, p, client_cq_cb, 2 * opt.window + 4);
        p->scq = make_cq(&srv, p, server_cq_cb, 2 * opt.window + 4);
        p->cqp = make_qp(&cli, p->ccq, p, 1);
        p->sqp = make_qp(&srv, p->scq, p, 2 * opt.window);
        if (opt.send)
            for (unsigned k = 0; k < 2 * opt.window; k++)
                post_receive(p, k);
        connect_pair(p, l, &dst);
    }

    for (unsigned i = 0; i < opt.qps; i++) {
        pairs[i].ccq->Dispatch->NdkArmCq(pairs[i].ccq, NDK_CQ_NOTIFY_ANY);
        pairs[i].scq->Dispatch->NdkArmCq(pairs[i].scq, NDK_CQ_NOTIFY_ANY);
    }
    for (unsigned i = 0; i < opt.qps; i++)
        for (unsigned k = 0; k < opt.window; k++)
            post_one(&pairs[i], k);

    struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
    uint64_t t0 = now_ns(), warm_end = t0 + (uint64_t)(opt.warmup_s * 1e9);
    while (now_ns() < warm_end && !atomic_load(&failed))
        nanosleep(&tick, NULL);
    uint64_t m0 = total_msgs(), t1 = now_ns();
    uint64_t end = t1 + (uint64_t)(opt.duration_s * 1e9);
    while (now_ns() < end && !atomic_load(&failed))
        nanosleep(&tick, NULL);
    uint64_t m1 = total_msgs(), t2 = now_ns();
    atomic_store(&stopping, 1);

    /* Every request posted completes (a Write or Send is done once TCP
     * took it): wait for the windows to empty, bounded. */
    uint64_t drain_end = now_ns() + (uint64_t)WAIT_MS * 1000000u;
    for (unsigned i = 0; i < opt.qps; i++)
        while (atomic_load(&pairs[i].outstanding) > 0 && now_ns() < drain_end)
            nanosleep(&tick, NULL);
    for (unsigned i = 0; i < opt.qps; i++)
        if (atomic_load(&pairs[i].outstanding) > 0)
            fail("requests still outstanding 10 s after the run", STATUS_IO_TIMEOUT);

    double secs = (double)(t2 - t1) / 1e9;
    double rate = (double)(m1 - m0) / secs;
    printf("multiqp op=%s size=%zu qps=%u engines=%u window=%u affinity=%d msgs_per_s=%.0f MBps=%.1f "
           "seconds=%.2f\n",
           opt.send ? "send" : "write", opt.size, opt.qps, opt.engines, opt.window, opt.affinity, rate,
           rate * (double)opt.size / 1e6, secs);
    fflush(stdout);

    for (unsigned i = 0; i < opt.qps; i++) {
        struct pair *p = &pairs[i];
        NDK_CONNECTOR *sc = atomic_load(&p->sc);
        close_hdr(p->cc->Dispatch->NdkCloseConnector, &p->cc->Header, "NdkCloseConnector");
        close_hdr(sc->Dispatch->NdkCloseConnector, &sc->Header, "NdkCloseConnector");
        close_hdr(p->cqp->Dispatch->NdkCloseQp, &p->cqp->Header, "NdkCloseQp");
        close_hdr(p->sqp->Dispatch->NdkCloseQp, &p->sqp->Header, "NdkCloseQp");
        close_hdr(p->ccq->Dispatch->NdkCloseCq, &p->ccq->Header, "NdkCloseCq");
        close_hdr(p->scq->Dispatch->NdkCloseCq, &p->scq->Header, "NdkCloseCq");
    }
    close_hdr(l->Dispatch->NdkCloseListener, &l->Header, "NdkCloseListener");
    struct side *sides[2] = {&cli, &srv};
    for (int i = 0; i < 2; i++) {
        struct side *s = sides[i];
        w_reset(&w);
        must(w_end(&w, s->mr->Dispatch->NdkDeregisterMr(s->mr, w_cb, &w), "NdkDeregisterMr"),
             "NdkDeregisterMr");
        close_hdr(s->mr->Dispatch->NdkCloseMr, &s->mr->Header, "NdkCloseMr");
        close_hdr(s->pd->Dispatch->NdkClosePd, &s->pd->Header, "NdkClosePd");
        ndk_close_adapter(s->ad);
        free(s->mem);
    }
    return atomic_load(&failed) ? 1 : 0;
}
