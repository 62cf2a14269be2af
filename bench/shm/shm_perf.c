/* shm_perf - the shared-memory transport (src/xp_shm.h, docs/shm.md)
 * between two processes on two CPUs: Send half round trip (busy polling
 * and events), RDMA Write and Read bandwidth, and the 64 B Send rate with
 * DEFER chains. Until the fast path is selected under a TCP connection,
 * the two processes are joined directly with ndk_shm_connect over a UNIX
 * socket; the operations, checks and completions are the provider's.
 *
 *   shm_perf TEST SIZE [SECONDS]     TEST: lat, lat_events, write_bw, read_bw, send_rate
 *
 * Prints one line: "TEST SIZE VALUE UNIT" (us for latency: the median half
 * round trip, and the mean; GB/s for bandwidth with GB = 1e9 octets,
 * Mmsg/s for rates; send_rate adds the sender's and the receiver's
 * processor time per message, all their threads, which a loaded machine
 * moves less than the rate). NDK_SHM_COPY=1 measures
 * copy mode. CPUs: SHM_CPU_CLIENT (default 0), SHM_CPU_SERVER (default 1).
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_os.h"
#include "objects.h"
#include "xp_shm.h"

#define MAX_SIZE (16u << 20)
#define WINDOW 16   /* bandwidth: requests in flight */
#define CHAIN 32    /* send_rate: DEFER chain length */
#define RQ 1024     /* send_rate: receives kept posted */
#define WAIT_S 20   /* longest wait for one completion */

struct end {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    UINT32 tok;
    uint8_t *buf;
    pthread_mutex_t m;
    pthread_cond_t cv;
    unsigned notified;
};

static struct end E;
static const char *g_test;
static size_t g_size;
static double g_secs;

static void die(const char *what)
{
    fprintf(stderr, "shm_perf: %s\n", what);
    exit(1);
}

static void on_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
    pthread_mutex_lock(&E.m);
    E.notified++;
    pthread_cond_signal(&E.cv);
    pthread_mutex_unlock(&E.m);
}

static void end_up(bool busy)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .Flags = busy ? NDK_OPEN_FLAG_BUSY_POLL : 0};
    size_t len = 2 * (size_t)MAX_SIZE;
    MDL mdl = {0};
    pthread_mutex_init(&E.m, NULL);
    pthread_cond_init(&E.cv, NULL);
    if (!(E.buf = aligned_alloc(4096, len)))
        die("out of memory");
    memset(E.buf, 1, len);
    mdl.StartVa = E.buf;
    mdl.ByteCount = (ULONG)len;
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &E.ad) != STATUS_SUCCESS ||
        E.ad->Dispatch->NdkCreatePd(E.ad, NULL, NULL, &E.pd) != STATUS_SUCCESS ||
        E.ad->Dispatch->NdkCreateCq(E.ad, 4096, on_notify, NULL, NULL, NULL, NULL, &E.cq) != STATUS_SUCCESS ||
        E.pd->Dispatch->NdkCreateQp(E.pd, E.cq, E.cq, NULL, RQ, 256, 1, 1, 64, NULL, NULL, &E.qp) !=
            STATUS_SUCCESS ||
        E.pd->Dispatch->NdkCreateMr(E.pd, FALSE, NULL, NULL, &E.mr) != STATUS_SUCCESS ||
        E.mr->Dispatch->NdkRegisterMr(E.mr, &mdl, len,
                                      NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                          NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                      NULL, NULL) != STATUS_SUCCESS)
        die("cannot set the adapter up");
    E.tok = E.mr->Dispatch->NdkGetLocalTokenFromMr(E.mr);
}

static struct ndk_qp_impl *impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

static NDK_SGE sge(size_t off, size_t len)
{
    return (NDK_SGE){.VirtualAddress = E.buf + off, .Length = (ULONG)len, .MemoryRegionToken = E.tok};
}

/* One completion, polled (events: sleeping until the CQ's notification). */
static NDK_RESULT_EX reap(bool events)
{
    NDK_RESULT_EX r;
    double end = clock_s(CLOCK_MONOTONIC) + WAIT_S;
    for (unsigned spins = 1;; spins++) {
        if (E.cq->Dispatch->NdkGetCqResultsEx(E.cq, &r, 1) == 1) {
            if (r.Status != STATUS_SUCCESS)
                die("a request failed");
            return r;
        }
        /* The clock costs as much as a poll: looked at now and then. */
        if (!(spins & 1023) && clock_s(CLOCK_MONOTONIC) > end)
            die("no completion");
        if (!events)
            continue;
        pthread_mutex_lock(&E.m);
        unsigned n = E.notified;
        pthread_mutex_unlock(&E.m);
        E.cq->Dispatch->NdkArmCq(E.cq, NDK_CQ_NOTIFY_ANY);
        if (E.cq->Dispatch->NdkGetCqResultsEx(E.cq, &r, 1) == 1) {
            if (r.Status != STATUS_SUCCESS)
                die("a request failed");
            return r;
        }
        pthread_mutex_lock(&E.m);
        while (E.notified == n) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += WAIT_S;
            if (pthread_cond_timedwait(&E.cv, &E.m, &ts))
                die("no notification");
        }
        pthread_mutex_unlock(&E.m);
    }
}

static void post_recv(size_t off, size_t len)
{
    NDK_SGE g = sge(off, len);
    if (E.qp->Dispatch->NdkReceive(E.qp, NULL, &g, 1) != STATUS_SUCCESS)
        die("NdkReceive failed");
}

static void post_send(size_t len, ULONG flags)
{
    NDK_SGE g = sge(MAX_SIZE, len);
    NTSTATUS st;
    double end = 0;
    /* The initiator queue is full (send_rate): polling drives the transport. */
    while ((st = E.qp->Dispatch->NdkSend(E.qp, NULL, &g, len ? 1 : 0, flags)) == STATUS_INSUFFICIENT_RESOURCES) {
        NDK_RESULT_EX r;
        if (E.cq->Dispatch->NdkGetCqResultsEx(E.cq, &r, 1) == 1 && r.Status != STATUS_SUCCESS)
            die("a Send failed");
        if (!end)
            end = clock_s(CLOCK_MONOTONIC) + WAIT_S;
        else if (clock_s(CLOCK_MONOTONIC) > end)
            break;
    }
    if (st != STATUS_SUCCESS)
        die("NdkSend failed");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Ping-pong: the client's Send, the server's Send back. Half the round
 * trip: the median (a shared machine preempts some round trips by
 * milliseconds); the mean goes to *avg. */
static double pingpong(bool client, bool events, unsigned iters, double *avg)
{
    double *t = calloc(iters, sizeof *t);
    if (!t)
        die("out of memory");
    post_recv(0, g_size);
    double t0 = 0;
    unsigned warm = iters / 10;
    for (unsigned i = 0; i < iters + warm; i++) {
        if (i == warm)
            t0 = clock_s(CLOCK_MONOTONIC); /* the first tenth warms up */
        if (client) {
            double a = clock_s(CLOCK_MONOTONIC);
            post_send(g_size, 0);
            reap(events); /* our Send */
            reap(events); /* its answer */
            post_recv(0, g_size);
            if (i >= warm)
                t[i - warm] = (clock_s(CLOCK_MONOTONIC) - a) / 2 * 1e6;
        } else {
            reap(events);
            post_recv(0, g_size);
            post_send(g_size, 0);
            reap(events);
        }
    }
    *avg = (clock_s(CLOCK_MONOTONIC) - t0) / iters / 2 * 1e6;
    qsort(t, iters, sizeof *t, cmp_double);
    double p50 = t[iters / 2];
    free(t);
    return p50;
}

/* Write or Read bandwidth, WINDOW requests in flight, for g_secs. */
static double bandwidth(bool read, uint64_t peer_buf, UINT32 peer_tok)
{
    unsigned out = 0;
    uint64_t done = 0;
    double t0 = clock_s(CLOCK_MONOTONIC), end = t0 + g_secs;
    while (clock_s(CLOCK_MONOTONIC) < end || out) {
        while (out < WINDOW && clock_s(CLOCK_MONOTONIC) < end) {
            NDK_SGE g = sge(0, g_size);
            NTSTATUS st = read ? E.qp->Dispatch->NdkRead(E.qp, NULL, &g, 1, peer_buf, peer_tok, 0)
                               : E.qp->Dispatch->NdkWrite(E.qp, NULL, &g, 1, peer_buf, peer_tok, 0);
            if (st != STATUS_SUCCESS)
                die("post failed");
            out++;
        }
        reap(false);
        out--;
        done++;
    }
    return done * (double)g_size / (clock_s(CLOCK_MONOTONIC) - t0) / 1e9;
}

/* The sender's processor time per message (all its threads): on a shared
 * machine the rate follows the share of a CPU the sender gets, this does
 * much less. */
static double g_sender_ns;
/* The same of the receiver (this process), from its first message to its
 * last. */
static double g_receiver_ns;

/* 64 B Sends in DEFER chains; the server counts what it received. */
static double send_rate(bool client, int ctl)
{
    if (client) {
        double end = clock_s(CLOCK_MONOTONIC) + g_secs + 0.5, c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        uint64_t sent = 0;
        while (clock_s(CLOCK_MONOTONIC) < end) {
            for (int i = 0; i < CHAIN; i++)
                post_send(g_size, NDK_OP_FLAG_SILENT_SUCCESS | (i < CHAIN - 1 ? NDK_OP_FLAG_DEFER : 0));
            sent += CHAIN;
        }
        post_send(0, 0); /* the last one: the server stops at it */
        double ns = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)sent * 1e9;
        if (write(ctl, &ns, sizeof ns) != sizeof ns)
            die("control socket");
        return 0;
    }
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    for (unsigned i = 0; i < RQ; i++)
        post_recv((size_t)i * 64, g_size);
    uint64_t n = 0;
    double t0 = 0, t1 = 0, c0 = 0;
    for (;;) {
        NDK_RESULT_EX r[64];
        ULONG k = E.cq->Dispatch->NdkGetCqResultsEx(E.cq, r, 64);
        for (ULONG i = 0; i < k; i++) {
            if (r[i].Status != STATUS_SUCCESS)
                die("a receive failed");
            if (!n++) {
                t0 = clock_s(CLOCK_MONOTONIC);
                c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            }
            if (!r[i].BytesTransferred) {
                t1 = clock_s(CLOCK_MONOTONIC);
                g_receiver_ns = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / (double)(n - 1) * 1e9;
                if (poll(&p, 1, WAIT_S * 1000) != 1 || read(ctl, &g_sender_ns, sizeof g_sender_ns) != sizeof g_sender_ns)
                    die("control socket");
                return (n - 1) / (t1 - t0) / 1e6;
            }
            post_recv((size_t)(n % RQ) * 64, g_size);
        }
    }
}

/* The target of the bandwidth tests polls its CQ, as a perftest server
 * does (its polls drive the transport) until the client says it is done. */
static void serve(int ctl)
{
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    for (unsigned spins = 1;; spins++) {
        NDK_RESULT_EX r;
        if (E.cq->Dispatch->NdkGetCqResultsEx(E.cq, &r, 1) == 1)
            die("unexpected completion");
        if (!(spins & 1023) && poll(&p, 1, 0) == 1)
            return;
    }
}

static int listen_unix(struct sockaddr_un *a)
{
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "ndk-shm-perf-%d", (int)getpid());
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof *a) || listen(fd, 1))
        die("cannot listen on a UNIX socket");
    return fd;
}

/* Both ends tell each other their buffer over the control socket. */
static void swap_buf(int ctl, uint64_t *peer_buf, UINT32 *peer_tok)
{
    uint64_t mine[2] = {(uint64_t)(uintptr_t)E.buf + MAX_SIZE, E.tok}, theirs[2];
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    if (write(ctl, mine, sizeof mine) != sizeof mine || poll(&p, 1, WAIT_S * 1000) != 1 ||
        read(ctl, theirs, sizeof theirs) != sizeof theirs)
        die("control socket");
    *peer_buf = theirs[0];
    *peer_tok = (UINT32)theirs[1];
}

static double run(bool client, int sock, int ctl, double *avg)
{
    bool events = strcmp(g_test, "lat_events") == 0;
    end_up(!events);
    bool copy;
    if (ndk_shm_connect(impl(E.qp), sock, client, NDK_MAX_IRD, NDK_MAX_ORD, WAIT_S * 1000, &copy) != STATUS_SUCCESS)
        die("ndk_shm_connect failed");
    uint64_t pb;
    UINT32 pt;
    swap_buf(ctl, &pb, &pt);
    double v = 0;
    unsigned iters = g_size <= 65536 ? 20000 : g_size <= (1u << 20) ? 1000 : 100;
    if (!strcmp(g_test, "lat") || events)
        v = pingpong(client, events, events ? iters / 4 : iters, avg);
    else if (!strcmp(g_test, "send_rate"))
        v = send_rate(client, ctl);
    else if (client)
        v = bandwidth(!strcmp(g_test, "read_bw"), pb, pt);
    else
        serve(ctl);
    /* The end: both sides say they are done before either goes. */
    char c = 0;
    struct pollfd p = {.fd = ctl, .events = POLLIN};
    if (write(ctl, &c, 1) != 1 || poll(&p, 1, WAIT_S * 1000) != 1 || read(ctl, &c, 1) != 1)
        die("control socket at the end");
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: shm_perf lat|lat_events|write_bw|read_bw|send_rate SIZE [SECONDS]\n");
        return 2;
    }
    g_test = argv[1];
    g_size = strtoul(argv[2], NULL, 0);
    g_secs = argc > 3 ? atof(argv[3]) : 1;
    if (g_size > MAX_SIZE || (!strcmp(g_test, "send_rate") && g_size > 64))
        die("size out of range");
    int ctl[2];
    struct sockaddr_un a;
    int lfd = listen_unix(&a);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl))
        die("socketpair");
    /* The side that measures is this process: the receiver of send_rate. */
    bool parent_is_client = strcmp(g_test, "send_rate") != 0;
    pid_t child = fork();
    if (child == 0) {
        pin("SHM_CPU_SERVER", 1);
        close(lfd);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a))
            die("connect");
        double ignored;
        run(!parent_is_client, s, ctl[1], &ignored);
        _exit(0);
    }
    pin("SHM_CPU_CLIENT", 0);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int s = poll(&p, 1, WAIT_S * 1000) == 1 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
    if (s < 0)
        die("accept");
    double avg = 0;
    double v = run(parent_is_client, s, ctl[0], &avg);
    int ws;
    waitpid(child, &ws, 0);
    const char *unit = !strncmp(g_test, "lat", 3) ? "us" : !strcmp(g_test, "send_rate") ? "Mmsg/s" : "GB/s";
    if (!strncmp(g_test, "lat", 3))
        printf("%s %zu %.3f %s (p50; mean %.3f)\n", g_test, g_size, v, unit, avg);
    else if (g_sender_ns > 0)
        printf("%s %zu %.3f %s (sender %.0f, receiver %.0f ns CPU per message)\n", g_test, g_size, v, unit,
               g_sender_ns, g_receiver_ns);
    else
        printf("%s %zu %.3f %s\n", g_test, g_size, v, unit);
    return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : 1;
}
