/*
 * Many concurrent connections between two processes, each moving data: the
 * server process accepts every request (a QP and one posted receive each),
 * the client process establishes CONNS connections one after the other and
 * keeps them all, then posts one Send on every one of them at once. Every
 * Send completes successfully, every receive on the server gets its own
 * connection's bytes (each message names its connection), exactly once.
 * The descriptor limit is raised to the hard limit first (each side holds
 * one socket per connection). Printed: the time to establish, each
 * process's RSS per connection (QPs, sockets, provider state).
 *   CONNS (environment; default 1000): tests/soak/many_connections.sh runs
 * it with 10000.
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "rawpeer.h"

#define MSG 64u

static unsigned conns;

/* One side: an adapter on 127.0.0.1, a PD, a CQ for every connection, and
 * a registered buffer of MSG octets per connection. */
typedef struct side {
    nk_world *w;
    NDK_CQ *cq;
    NDK_MR *mr;
    MDL mdl;
    uint8_t *buf;
    UINT32 token;
} side;

static bool side_open(side *s)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = nk_options();
    o.MpaReplyTimeoutMs = o.MpaRequestTimeoutMs = o.RtrTimeoutMs = 10000;
    o.ListenBacklog = 1024;
    s->w = nk_open(&o);
    if (!s->w)
        return false;
    nk_req *r = nk_req_new();
    NDK_CQ *cq = NULL;
    NTSTATUS st = s->w->ad->Dispatch->NdkCreateCq(s->w->ad, conns + 16, nk_cq_notify, s->w, NULL, nk_create_done,
                                                  r, &cq);
    s->cq = nk_created(r, st, cq);
    if (!s->cq)
        return false;
    /* nk_cq_next reads the world's CQ: this one, big enough for all (the
     * world's own small one goes with the adapter). */
    s->w->cq = s->cq;
    r = nk_req_new();
    NDK_MR *mr = NULL;
    st = s->w->pd->Dispatch->NdkCreateMr(s->w->pd, FALSE, nk_create_done, r, &mr);
    s->mr = nk_created(r, st, mr);
    s->buf = calloc(conns, MSG);
    if (!s->mr || !s->buf)
        return false;
    s->mdl.StartVa = s->buf;
    s->mdl.ByteCount = conns * MSG;
    r = nk_req_new();
    st = s->mr->Dispatch->NdkRegisterMr(s->mr, &s->mdl, conns * MSG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nk_req_done,
                                        r);
    nk_op op = nk_op_begin(r, st);
    if (nk_op_wait(&op, NK_WAIT_MS) != STATUS_SUCCESS)
        return false;
    s->token = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
    return true;
}

static NDK_QP *side_qp(side *s, unsigned i)
{
    nk_req *r = nk_req_new();
    NDK_QP *qp = NULL;
    NTSTATUS st = s->w->pd->Dispatch->NdkCreateQp(s->w->pd, s->cq, s->cq, (PVOID)(uintptr_t)(i + 1), 1, 1, 1, 1, 0,
                                                   nk_create_done, r, &qp);
    return nk_created(r, st, qp);
}

static NDK_SGE side_sge(side *s, unsigned i)
{
    return (NDK_SGE){.VirtualAddress = s->buf + (size_t)i * MSG, .Length = MSG, .MemoryRegionToken = s->token};
}

static void fill(uint8_t *p, unsigned i)
{
    for (unsigned k = 0; k < MSG; k++)
        p[k] = (uint8_t)(i * 7u + k + (i >> 8));
}

/* Polls up to want results within ms; counts them through fn. */
static unsigned drain_cq(side *s, unsigned want, unsigned ms, void (*fn)(const NDK_RESULT *r, void *ctx), void *ctx)
{
    unsigned got = 0;
    uint64_t dl = rp_deadline(ms);
    while (got < want) {
        NDK_RESULT res;
        if (!nk_cq_next(s->w, &res, (unsigned)rp_ms_left(dl)))
            break;
        fn(&res, ctx);
        got++;
    }
    return got;
}

/* ---- the server process ---- */

typedef struct srv_tally {
    side *s;
    unsigned ok, bad;
    uint8_t *seen;
} srv_tally;

static void srv_result(const NDK_RESULT *r, void *ctx)
{
    srv_tally *t = ctx;
    unsigned i = (unsigned)((uintptr_t)r->RequestContext - 1u);
    uint8_t want[MSG];
    fill(want, i);
    if (i < conns && r->Status == STATUS_SUCCESS && r->BytesTransferred == MSG && !t->seen[i] &&
        memcmp(t->s->buf + (size_t)i * MSG, want, MSG) == 0) {
        t->seen[i] = 1;
        t->ok++;
    } else {
        t->bad++;
    }
}

static int server_main(int to_client)
{
    side s;
    if (!side_open(&s))
        return 1;
    nk_listener *l = nk_listen(s.w);
    if (!l)
        return 1;
    if (write(to_client, &l->port, sizeof l->port) != sizeof l->port)
        return 1;
    long rss0 = tl_rss_kib();
    srv_tally t = {.s = &s, .seen = calloc(conns, 1)};
    unsigned accepted = 0;
    while (accepted < conns) {
        NDK_CONNECTOR *c = nk_next_event(l, 30000);
        if (!c) {
            fprintf(stderr, "    server: no connect event within 30 s after %u\n", accepted);
            return 1;
        }
        NDK_QP *qp = side_qp(&s, accepted);
        NDK_SGE g = side_sge(&s, accepted);
        if (!qp || qp->Dispatch->NdkReceive(qp, (PVOID)(uintptr_t)(accepted + 1), &g, 1) != STATUS_SUCCESS)
            return 1;
        nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
        if (nk_op_wait(&a, 10000) != STATUS_SUCCESS) {
            fprintf(stderr, "    server: Accept %u failed\n", accepted);
            return 1;
        }
        accepted++;
    }
    long rss1 = tl_rss_kib();
    drain_cq(&s, conns, 60000, srv_result, &t);
    fprintf(stderr, "    server: %u accepted, %u messages right, %u wrong; RSS %ld -> %ld KiB (%.1f KiB per connection)\n",
            accepted, t.ok, t.bad, rss0, rss1, (double)(rss1 - rss0) / conns);
    /* Tear everything down at once: the client sees its connections end. */
    ndk_close_adapter(s.w->ad);
    return t.ok == conns && t.bad == 0 ? 0 : 1;
}

/* ---- the client process ---- */

static void cli_result(const NDK_RESULT *r, void *ctx)
{
    unsigned *ok = ctx;
    if (r->Status == STATUS_SUCCESS)
        (*ok)++;
    else
        fprintf(stderr, "    client: Send %p: %s\n", r->RequestContext, nk_st(r->Status));
}

static void many_connections(void)
{
    const char *env = getenv("CONNS");
    conns = env && atoi(env) > 0 ? (unsigned)atoi(env) : 1000;
    struct rlimit rl;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &rl) == 0);
    rl.rlim_cur = rl.rlim_max;
    REQUIRE(setrlimit(RLIMIT_NOFILE, &rl) == 0);
    if (rl.rlim_cur < conns + 64) {
        fprintf(stderr, "    descriptor limit %lu is too low for %u connections\n", (unsigned long)rl.rlim_cur,
                conns);
        REQUIRE(false);
    }
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    /* Before any thread exists here: the server process opens its own
     * adapter after the fork. */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(pfd[0]);
        _exit(server_main(pfd[1]));
    }
    close(pfd[1]);
    uint16_t port = 0;
    struct pollfd p = {.fd = pfd[0], .events = POLLIN};
    bool have_port = poll(&p, 1, 10000) == 1 && read(pfd[0], &port, sizeof port) == sizeof port;
    side s;
    bool ok = have_port && side_open(&s);
    CHECK(ok);
    static NDK_CONNECTOR **cs;
    static NDK_QP **qs;
    cs = calloc(conns, sizeof *cs);
    qs = calloc(conns, sizeof *qs);
    long rss0 = ok ? tl_rss_kib() : 0;
    uint64_t t0 = tl_now_ns();
    unsigned up = 0;
    for (; ok && up < conns; up++) {
        cs[up] = nk_connector(s.w);
        qs[up] = side_qp(&s, up);
        if (!cs[up] || !qs[up])
            break;
        nk_op c = nk_connect(cs[up], qs[up], port, 1, 1, NULL, 0);
        NTSTATUS st = nk_op_wait(&c, 15000);
        if (st == STATUS_SUCCESS) {
            nk_op cc = nk_complete(cs[up]);
            st = nk_op_wait(&cc, 15000);
        }
        if (st != STATUS_SUCCESS) {
            fprintf(stderr, "    client: connection %u: %s\n", up, nk_st(st));
            break;
        }
    }
    double secs = (double)(tl_now_ns() - t0) / 1e9;
    long rss1 = tl_rss_kib();
    CHECK_EQ(up, conns);
    unsigned sent_ok = 0;
    if (up == conns) {
        for (unsigned i = 0; i < conns; i++) {
            fill(s.buf + (size_t)i * MSG, i);
            NDK_SGE g = side_sge(&s, i);
            CHECK(qs[i]->Dispatch->NdkSend(qs[i], (PVOID)(uintptr_t)(i + 1), &g, 1, 0) == STATUS_SUCCESS);
        }
        drain_cq(&s, conns, 60000, cli_result, &sent_ok);
    }
    CHECK_EQ(sent_ok, conns);
    fprintf(stderr,
            "    client: %u connections established in %.1f s (%.0f/s), all held; %u Sends completed; RSS %ld -> %ld "
            "KiB (%.1f KiB per connection)\n",
            up, secs, up / (secs > 0 ? secs : 1), sent_ok, rss0, rss1, up ? (double)(rss1 - rss0) / up : 0.0);
    /* The server checks every message, then exits: its end of the pipe
     * closes. Bounded; a server that hangs is killed. */
    p.events = POLLIN;
    bool ended = poll(&p, 1, 120000) == 1;
    if (!ended)
        kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(ended && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(pfd[0]);
    if (ok) {
        nk_close_world(s.w);
        free(s.buf);
    }
    free(cs);
    free(qs);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    nt_ops_reserve(1u << 17); /* about 6 call records per connection */
    RUN(many_connections);
    return tl_finish();
}
