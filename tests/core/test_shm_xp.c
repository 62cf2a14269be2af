/* The shared-memory transport (src/xp_shm.h), white box, between two
 * processes: each case forks a peer, and the two join QPs with
 * ndk_shm_connect over a UNIX socket pair. The parent drives, the child
 * answers commands over a second socket pair (post receives, reap and
 * check them, tell its disconnect reason). Proves Send, Write and Read of
 * small (in the slot) and large (single copy, or copied through the rings
 * with NDK_SHM_COPY=1) payloads, every protection error with the statuses
 * a Terminate gives on TCP, back-pressure when the peer stops, a peer
 * killed with SIGKILL seen at once, a peer that closes, and no descriptor
 * left behind. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "shm_ring.h"
#include "testlib.h"
#include "xp_shm.h"
#include "xp_side.h"

#define BUF (4u << 20)
#define DEPTH 32
#define CQ_DEPTH 4096
#define WAIT_MS 10000
/* The child's buffer: receives, Write targets, Read sources. */
#define RECV_AT 0
#define WRITE_AT (1u << 20)
#define READ_AT (2u << 20)
#define SEED_B 77

enum cmd {
    C_INFO,
    C_RECV,
    C_REAP,
    C_CHECK,
    C_REASON,
    C_CLOSE_QP,
    C_BIND,
    C_ZERO,
    C_FRMR,
    C_GARBAGE,
    C_CPU,
    C_SEND,
    C_ANSWERED,
    C_WRITE,
    C_HOLD,
    C_STATUSES,
    C_FLUSH,
    C_EXIT
};

struct msg {
    uint32_t cmd;
    uint32_t n, len, seed;
    uint64_t a, b;
    int32_t status;
    uint32_t ok;
};

static struct side S;
static NDK_MW *g_mw; /* the child's window (C_BIND) */
/* The child's fast-register MR (C_FRMR) and the LAM of its pages: more
 * pages than one transfer's iovecs (RX_IOV_MAX), so that a Write or Read
 * through all of it is moved in pieces. */
#define FR_PAGES 96
#define FR_AT (3u << 20)
static NDK_MR *g_fr;
static union {
    NDK_LOGICAL_ADDRESS_MAPPING lam;
    uint8_t room[sizeof(NDK_LOGICAL_ADDRESS_MAPPING) + FR_PAGES * sizeof(NDK_LOGICAL_ADDRESS)];
} g_lam;
static bool g_lam_built;
static tl_event g_req;
static NTSTATUS g_req_st;
static int g_ctl = -1;
static pid_t g_child;
static bool g_copy;
static ULONG g_parent_grace_ms; /* pair_up's ReceiveGraceMs for the parent (0: the default) */

static uint8_t pat(uint32_t seed, uint64_t i)
{
    return (uint8_t)(seed + i * 13 + (i >> 9));
}

static void fill(uint8_t *p, uint64_t len, uint32_t seed, uint64_t from)
{
    for (uint64_t i = 0; i < len; i++)
        p[i] = pat(seed, from + i);
}

static bool same(const uint8_t *p, uint64_t len, uint32_t seed, uint64_t from)
{
    for (uint64_t i = 0; i < len; i++)
        if (p[i] != pat(seed, from + i))
            return false;
    return true;
}

static bool g_busy;      /* the parent's adapter busy-polls (t_garbage) */
static ULONG g_engines; /* its MaxEngines (0: the default) */

/* Opens this process's side of the case (the parent's or the child's). */
static bool side_open(struct side *s, ULONG grace_ms)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .ReceiveGraceMs = grace_ms, .Flags = g_busy ? NDK_OPEN_FLAG_BUSY_POLL : 0,
                         .MaxEngines = g_engines};
    const struct side_shape shape = {
        .open = &o,
        .buf_len = BUF,
        .cq_depth = CQ_DEPTH,
        .rq_depth = 4096,
        .sq_depth = DEPTH,
        .inline_len = 64,
        .mr_flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
    };
    return side_up(s, &shape);
}

static bool next(struct side *s, NDK_RESULT_EX *r);

static void on_req(PVOID ctx, NTSTATUS st)
{
    (void)ctx;
    g_req_st = st;
    tl_event_signal(&g_req);
}

/* A request that may pend: its status, once completed. */
static NTSTATUS finish(NTSTATUS st)
{
    unsigned n = tl_event_count(&g_req);
    if (st != STATUS_PENDING)
        return st;
    return tl_event_wait(&g_req, n + 1, WAIT_MS) ? g_req_st : STATUS_IO_TIMEOUT;
}

/* The child fast-registers FR_PAGES pages of its buffer at FR_AT in
 * reverse order, at a base address of its choosing: a remote access
 * through it is placed page by page, one iovec each (mem.h). */
static bool frmr_up(uint64_t base, UINT32 *tok)
{
    MDL mdl = {.StartVa = S.buf + FR_AT, .ByteCount = FR_PAGES * 4096};
    ULONG size = sizeof g_lam, fbo = 0;
    if (S.pd->Dispatch->NdkCreateMr(S.pd, TRUE, NULL, NULL, &g_fr) != STATUS_SUCCESS ||
        finish(g_fr->Dispatch->NdkInitializeFastRegisterMr(g_fr, FR_PAGES, TRUE, on_req, NULL)) != STATUS_SUCCESS ||
        finish(S.ad->Dispatch->NdkBuildLAM(S.ad, &mdl, FR_PAGES * 4096, on_req, NULL, &g_lam.lam, &size, &fbo)) !=
            STATUS_SUCCESS)
        return false;
    g_lam_built = true;
    /* The page array runs past the struct's one declared element. */
    const NDK_LOGICAL_ADDRESS *pages =
        (const NDK_LOGICAL_ADDRESS *)(const void *)(g_lam.room + offsetof(NDK_LOGICAL_ADDRESS_MAPPING, AdapterPageArray));
    NDK_LOGICAL_ADDRESS rev[FR_PAGES];
    for (int i = 0; i < FR_PAGES; i++)
        rev[i] = pages[FR_PAGES - 1 - i];
    NDK_RESULT_EX r;
    if (S.qp->Dispatch->NdkFastRegister(S.qp, NULL, g_fr, FR_PAGES, rev, 0, FR_PAGES * 4096,
                                        (PVOID)(uintptr_t)base,
                                        NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE) !=
            STATUS_SUCCESS ||
        !next(&S, &r) || r.Status != STATUS_SUCCESS)
        return false;
    *tok = g_fr->Dispatch->NdkGetRemoteTokenFromMr(g_fr);
    return true;
}

/* The child, as a broken peer, writes one bad request straight into its
 * request ring (kind: see t_garbage); tok and at name the parent's MR. */
static bool garbage(uint32_t kind, UINT32 tok, uint64_t at)
{
    int side;
    uint8_t *region = ndk_shm_region(impl(S.qp), &side);
    if (!region)
        return false;
    struct shm_ring_ctl *ctl = (struct shm_ring_ctl *)(void *)(region + shm_ring_offset(side, false));
    uint32_t head = __atomic_load_n(&ctl->head, __ATOMIC_SEQ_CST);
    struct shm_msg *m =
        (struct shm_msg *)(void *)((uint8_t *)(ctl + 1) + (size_t)(head & (SHM_UNITS - 1)) * SHM_UNIT);
    memset(m, 0, sizeof *m);
    m->flags = SHM_F_LAST;
    switch (kind) {
    case 0: /* an unknown type */
        m->type = 99;
        break;
    case 1: /* a payload longer than a message holds */
        m->type = SHM_REQ_WRITE;
        m->len = SHM_MSG_MAX;
        m->total = SHM_MSG_MAX;
        m->stag = tok;
        m->to = at;
        break;
    case 2: /* a head more than a ring ahead */
        head += SHM_UNITS + 4;
        break;
    case 3: { /* a single-copy Write from memory this process does not map */
        struct shm_iov v = {4096, 8192};
        m->type = SHM_REQ_WRITE;
        m->flags |= SHM_F_IOV;
        m->niov = 1;
        m->len = sizeof v;
        m->total = v.len;
        m->stag = tok;
        m->to = at;
        memcpy(m + 1, &v, sizeof v);
        break;
    }
    case 4: /* a Send whose first piece does not start at 0 */
        m->type = SHM_REQ_SEND;
        m->off = 100;
        m->len = 10;
        m->total = 200;
        break;
    case 5: /* a Write whose length runs past the one unit published */
        m->type = SHM_REQ_WRITE;
        m->len = 300;
        m->total = 300;
        m->stag = tok;
        m->to = at;
        break;
    default: { /* a Send that fits the receive, then grows past it in its last piece */
        m->type = SHM_REQ_SEND;
        m->flags = 0;
        m->len = 40;
        m->total = 50;
        struct shm_msg *l =
            (struct shm_msg *)(void *)((uint8_t *)(ctl + 1) + (size_t)(++head & (SHM_UNITS - 1)) * SHM_UNIT);
        memset(l, 0, sizeof *l);
        l->type = SHM_REQ_SEND;
        l->flags = SHM_F_LAST;
        l->off = 40;
        l->len = 60;
        l->total = 100;
        break;
    }
    }
    __atomic_store_n(&ctl->head, head + 1, __ATOMIC_SEQ_CST);
    ndk_shm_mark_published(impl(S.qp));
    return true;
}

/* Closes the side: the QP first, then what the child's commands made on
 * it (its window, its fast-register MR and LAM), then the rest. */
static void side_close(struct side *s)
{
    if (s->qp)
        nt_close(s->qp);
    s->qp = NULL;
    if (g_mw)
        nt_close(g_mw);
    g_mw = NULL;
    if (g_lam_built)
        s->ad->Dispatch->NdkReleaseLAM(s->ad, &g_lam.lam);
    g_lam_built = false;
    if (g_fr)
        nt_close(g_fr);
    g_fr = NULL;
    side_down(s);
}

/* The next completion, waiting at most WAIT_MS (busy: the CQ is polled). */
static bool next(struct side *s, NDK_RESULT_EX *r)
{
    uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
    memset(r, 0, sizeof *r);
    while (tl_now_ns() < end)
        if (s->cq->Dispatch->NdkGetCqResultsEx(s->cq, r, 1) == 1)
            return true;
    return false;
}

static bool msg_io(int fd, struct msg *m, bool send_it)
{
    if (send_it)
        return write(fd, m, sizeof *m) == (ssize_t)sizeof *m;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, WAIT_MS) == 1 && read(fd, m, sizeof *m) == (ssize_t)sizeof *m;
}

/* ---- the child ---- */

/* The QP's end reason once it has one (bounded): a side sends its
 * Terminate before it records its own end, so the peer may ask a moment
 * before the reason is there. */
static ULONG end_reason(NDK_QP *qp)
{
    uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
    ULONG why;
    while (!(why = ndk_qp_end_reason(impl(qp))) && tl_now_ns() < end)
        ;
    return why;
}

/* The child's receive completions in its CQ when it last published a
 * response (its device's shm_answered test hook, on its engine). */
static ULONG g_cqes_at_answer;
static void count_at_answer(struct ndk_qp_impl *qp)
{
    __atomic_store_n(&g_cqes_at_answer, ndk_cq_waiting(qp->rcq), __ATOMIC_RELAXED);
}

static void child_serve(int ctl)
{
    struct msg m;
    while (msg_io(ctl, &m, false)) {
        NDK_RESULT_EX r;
        m.ok = 1;
        switch (m.cmd) {
        case C_INFO:
            m.a = (uint64_t)(uintptr_t)S.buf;
            m.n = S.rtok;
            break;
        case C_RECV:
            for (uint32_t i = 0; i < m.n; i++) {
                NDK_SGE g = sge(&S, RECV_AT + (uint64_t)i * m.len, m.len);
                if (S.qp->Dispatch->NdkReceive(S.qp, (void *)(uintptr_t)(i + 1), &g, 1) != STATUS_SUCCESS)
                    m.ok = 0;
            }
            break;
        case C_REAP:
            /* n completions; each receive i must hold its own index when
             * seed is set (back-pressure: in order, none lost). */
            m.status = 0;
            for (uint32_t i = 0; i < m.n; i++) {
                if (!next(&S, &r)) {
                    m.ok = 0;
                    break;
                }
                if (r.Status != STATUS_SUCCESS && !m.status)
                    m.status = r.Status;
                m.a = r.BytesTransferred;
                m.b = (uint64_t)r.Type | (uint64_t)r.TypeSpecificCompletionOutput << 32;
                uint32_t got;
                memcpy(&got, S.buf + RECV_AT + (uint64_t)i * m.len, 4);
                if (m.seed && (r.RequestContext != (void *)(uintptr_t)(i + 1) || got != i))
                    m.ok = 0;
            }
            break;
        case C_CHECK:
            m.ok = same(S.buf + m.a, m.len, m.seed, m.b);
            break;
        case C_REASON:
            m.status = (int32_t)end_reason(S.qp);
            break;
        case C_BIND:
            /* A window over [a, a + len) of the buffer, remote write. */
            m.ok = S.pd->Dispatch->NdkCreateMw(S.pd, NULL, NULL, &g_mw) == STATUS_SUCCESS &&
                   S.qp->Dispatch->NdkBind(S.qp, NULL, S.mr, g_mw, S.buf + m.a, m.len,
                                           NDK_OP_FLAG_ALLOW_REMOTE_WRITE) == STATUS_SUCCESS &&
                   next(&S, &r) && r.Status == STATUS_SUCCESS;
            m.n = m.ok ? g_mw->Dispatch->NdkGetRemoteTokenFromMw(g_mw) : 0;
            break;
        case C_GARBAGE:
            m.ok = garbage(m.n, m.len, m.a);
            break;
        case C_FRMR:
            m.ok = frmr_up(m.a, &m.n);
            break;
        case C_CPU: {
            struct timespec t;
            m.ok = clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) == 0;
            m.a = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
            break;
        }
        case C_ZERO:
            for (uint32_t i = 0; i < m.len; i++)
                if (S.buf[m.a + i])
                    m.ok = 0;
            break;
        case C_SEND: {
            /* A Send of len octets of the buffer at a. */
            NDK_SGE g = sge(&S, m.a, m.len);
            m.ok = S.qp->Dispatch->NdkSend(S.qp, NULL, &g, 1, 0) == STATUS_SUCCESS;
            break;
        }
        case C_ANSWERED:
            m.n = __atomic_load_n(&g_cqes_at_answer, __ATOMIC_RELAXED);
            break;
        case C_WRITE: {
            /* A Write of len octets from READ_AT (seeded) to (a, token n). */
            NDK_SGE g = sge(&S, READ_AT, m.len);
            m.ok = S.qp->Dispatch->NdkWrite(S.qp, NULL, &g, 1, m.a, m.n, 0) == STATUS_SUCCESS;
            break;
        }
        case C_HOLD:
            /* Our initiator side stops (n: 1) or goes on (0): nothing takes
             * the responses while the test holds sq_lock. */
            if (m.n)
                pthread_mutex_lock(&impl(S.qp)->dp.sq_lock);
            else
                pthread_mutex_unlock(&impl(S.qp)->dp.sq_lock);
            break;
        case C_STATUSES:
            /* n completions, receives 1..n in order: a is the set (bit
             * i) of those that succeeded, b of those cancelled. */
            m.a = m.b = 0;
            for (uint32_t i = 0; i < m.n && m.ok; i++) {
                if (!next(&S, &r) || r.RequestContext != (void *)(uintptr_t)(i + 1)) {
                    m.ok = 0;
                    break;
                }
                m.a |= (uint64_t)(r.Status == STATUS_SUCCESS) << i;
                m.b |= (uint64_t)(r.Status == STATUS_CANCELLED) << i;
            }
            break;
        case C_CLOSE_QP:
            nt_close(S.qp);
            S.qp = NULL;
            break;
        case C_FLUSH:
            S.qp->Dispatch->NdkFlush(S.qp);
            break;
        case C_EXIT:
            msg_io(ctl, &m, true);
            return;
        }
        if (!msg_io(ctl, &m, true))
            return;
    }
}

static int child_main(int ctl, int sock, bool copy, ULONG grace_ms)
{
    if (copy)
        setenv("NDK_SHM_COPY", "1", 1);
    struct msg m = {0};
    bool cm = false;
    const struct ndk_test_hooks hooks = {.shm_answered = count_at_answer};
    if (side_open(&S, grace_ms) && ndk_test_hooks_set(S.ad, &hooks)) {
        fill(S.buf + READ_AT, 1u << 20, SEED_B, 0);
        m.status = ndk_shm_connect(impl(S.qp), sock, false, NDK_MAX_IRD, NDK_MAX_ORD, WAIT_MS, &cm);
    } else {
        m.status = STATUS_INSUFFICIENT_RESOURCES;
    }
    m.ok = cm;
    close(sock);
    if (msg_io(ctl, &m, true) && m.status == STATUS_SUCCESS)
        child_serve(ctl);
    side_close(&S);
    return tl_failures ? 1 : 0;
}

/* ---- the parent ---- */

static struct msg ask(uint32_t cmd, uint32_t n, uint32_t len, uint32_t seed, uint64_t a, uint64_t b)
{
    struct msg m = {.cmd = cmd, .n = n, .len = len, .seed = seed, .a = a, .b = b};
    if (!msg_io(g_ctl, &m, true) || !msg_io(g_ctl, &m, false))
        m = (struct msg){.ok = 0, .status = -1};
    return m;
}

/* A UNIX stream socket pair made by listen and connect, so that each end's
 * SO_PEERCRED names the other process (a socketpair's names its maker). */
static int listen_unix(struct sockaddr_un *a)
{
    static unsigned seq;
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "ndk-shm-test-%d-%u", (int)getpid(), seq++);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof *a) || listen(fd, 1)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Forks the peer and connects to it; *peer_buf, *peer_tok name its buffer. */
static bool pair_up(bool copy, ULONG child_grace_ms, uint64_t *peer_buf, UINT32 *peer_tok)
{
    int ctl[2], sock[1];
    struct sockaddr_un a;
    int lfd = listen_unix(&a);
    if (lfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl))
        return false;
    fflush(stdout);
    fflush(stderr);
    g_child = fork();
    if (g_child == 0) {
        tl_failures = 0; /* the parent's count is not the child's */
        close(ctl[0]);
        close(lfd);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a))
            _exit(2);
        /* exit, not _exit: LeakSanitizer checks the child too. */
        exit(child_main(ctl[1], s, copy, child_grace_ms));
    }
    close(ctl[1]);
    g_ctl = ctl[0];
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    sock[0] = g_child > 0 && poll(&p, 1, WAIT_MS) == 1 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
    close(lfd);
    if (sock[0] < 0 || !side_open(&S, g_parent_grace_ms)) {
        if (sock[0] >= 0)
            close(sock[0]);
        return false;
    }
    bool cm = false;
    NTSTATUS st = ndk_shm_connect(impl(S.qp), sock[0], true, NDK_MAX_IRD, NDK_MAX_ORD, WAIT_MS, &cm);
    close(sock[0]);
    struct msg m;
    CHECK_EQ(st, STATUS_SUCCESS);
    if (!msg_io(g_ctl, &m, false) || m.status != STATUS_SUCCESS || st != STATUS_SUCCESS)
        return false;
    /* Copy mode is chosen by both: the child alone asked for it. */
    CHECK_EQ(cm, copy);
    CHECK_EQ(m.ok, copy);
    g_copy = cm;
    m = ask(C_INFO, 0, 0, 0, 0, 0);
    *peer_buf = m.a;
    *peer_tok = m.n;
    return m.ok;
}

/* Ends the case: the child exits (or was killed), everything is closed. */
static void pair_down(void)
{
    if (g_child > 0) {
        struct msg m = {.cmd = C_EXIT};
        if (!msg_io(g_ctl, &m, true) || !msg_io(g_ctl, &m, false))
            kill(g_child, SIGKILL);
        int ws = 0;
        CHECK(waitpid(g_child, &ws, 0) == g_child);
        CHECK(WIFSIGNALED(ws) || (WIFEXITED(ws) && WEXITSTATUS(ws) == 0));
    }
    g_child = 0;
    if (g_ctl >= 0)
        close(g_ctl);
    g_ctl = -1;
    side_close(&S);
}

/* The QP's disconnect reason, once the connection ended (bounded wait). */
static void expect_ok(enum _NDK_OPERATION_TYPE type, void *ctx)
{
    NDK_RESULT_EX r;
    REQUIRE(next(&S, &r));
    CHECK_EQ(r.Status, STATUS_SUCCESS);
    CHECK_EQ(r.Type, type);
    CHECK(r.RequestContext == ctx);
}

/* Send, Write and Read, small and large, data checked on both sides. */
static void ops(bool copy)
{
    uint64_t pb;
    UINT32 pt;
    unsigned fds = tl_open_fds();
    REQUIRE(pair_up(copy, 0, &pb, &pt));
    const ULONG small = 100, big = 200 * 1024;
    fill(S.buf, big, 5, 0);
    CHECK(ask(C_RECV, 2, 256 * 1024, 0, 0, 0).ok);
    NDK_SGE g = sge(&S, 0, small);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &g, 1, 0), STATUS_SUCCESS);
    g = sge(&S, 0, big);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)2, &g, 1, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeSend, (void *)1);
    expect_ok(NdkOperationTypeSend, (void *)2);
    struct msg m = ask(C_REAP, 2, 256 * 1024, 0, 0, 0);
    CHECK(m.ok && m.status == 0 && m.a == big);
    CHECK(ask(C_CHECK, 0, small, 5, RECV_AT, 0).ok);
    CHECK(ask(C_CHECK, 0, big, 5, RECV_AT + 256 * 1024, 0).ok);

    /* Writes: a small one, and a large one gathered from two SGEs. */
    const ULONG wbig = 300 * 1024;
    fill(S.buf, 1u << 20, 9, 0);
    g = sge(&S, 0, 500);
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)3, &g, 1, pb + WRITE_AT, pt, 0), STATUS_SUCCESS);
    NDK_SGE two[2] = {sge(&S, 0, 1000), sge(&S, 1000, wbig - 1000)};
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)4, two, 2, pb + WRITE_AT + 4096, pt, 0), STATUS_SUCCESS);
    /* A Write completes when handed over (as on TCP), not when placed: a
     * Send behind it is placed after it. */
    CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)7, NULL, 0, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeWrite, (void *)3);
    expect_ok(NdkOperationTypeWrite, (void *)4);
    expect_ok(NdkOperationTypeSend, (void *)7);
    CHECK(ask(C_REAP, 1, 64, 0, 0, 0).ok);
    CHECK(ask(C_CHECK, 0, 500, 9, WRITE_AT, 0).ok);
    CHECK(ask(C_CHECK, 0, wbig, 9, WRITE_AT + 4096, 0).ok);

    /* Reads: small, and large into two SGEs, of the child's seeded part. */
    memset(S.buf, 0, 1u << 20);
    g = sge(&S, 0, 700);
    CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)5, &g, 1, pb + READ_AT + 10, pt, 0), STATUS_SUCCESS);
    const ULONG rbig = 400 * 1024;
    NDK_SGE rd[2] = {sge(&S, 4096, 3000), sge(&S, 8192, rbig - 3000)};
    CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)6, rd, 2, pb + READ_AT + 20, pt, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeRead, (void *)5);
    expect_ok(NdkOperationTypeRead, (void *)6);
    CHECK(same(S.buf, 700, SEED_B, 10));
    CHECK(same(S.buf + 4096, 3000, SEED_B, 20));
    CHECK(same(S.buf + 8192, rbig - 3000, SEED_B, 3020));
    pair_down();
    CHECK_EQ(tl_open_fds(), fds);
}

static void t_ops_single_copy(void)
{
    ops(false);
}

static void t_ops_copy_mode(void)
{
    ops(true);
}

/* One protection error on a fresh connection: the post's completion, and
 * both ends' disconnect reasons, as a Terminate gives them on TCP. */
static void refused(bool copy, bool read, ULONG len, uint64_t at, bool bad_tok, NTSTATUS want)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(copy, 0, &pb, &pt));
    CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
    NDK_SGE g = sge(&S, 0, len);
    UINT32 tok = bad_tok ? pt ^ 0x100 : pt;
    NTSTATUS st = read ? S.qp->Dispatch->NdkRead(S.qp, (void *)1, &g, 1, pb + at, tok, 0)
                       : S.qp->Dispatch->NdkWrite(S.qp, (void *)1, &g, 1, pb + at, tok, 0);
    CHECK_EQ(st, STATUS_SUCCESS);
    NDK_RESULT_EX r;
    REQUIRE(next(&S, &r));
    CHECK_EQ(r.Status, want);
    CHECK(r.RequestContext == (void *)1);
    /* The peer's receive is flushed; it sent the Terminate. */
    struct msg m = ask(C_REAP, 1, 64, 0, 0, 0);
    CHECK(m.ok && m.status == STATUS_CANCELLED);
    CHECK_EQ(ask(C_REASON, 0, 0, 0, 0, 0).status, NDK_DISCONNECT_REASON_TERMINATE_SENT);
    CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)2, &g, 1, pb, pt, 0), STATUS_CONNECTION_INVALID);
    pair_down();
}

static void t_protection(void)
{
    for (int copy = 0; copy < 2; copy++) {
        /* Writes were handed over: they complete, the connection ends. */
        refused(copy, false, 64, WRITE_AT, true, STATUS_SUCCESS);
        refused(copy, false, 64 * 1024, WRITE_AT, true, STATUS_SUCCESS);
        refused(copy, false, 32768, BUF - 16384, false, STATUS_SUCCESS); /* single copy (but in copy mode) */
        refused(copy, false, 8192, BUF - 4096, false, STATUS_SUCCESS);   /* through the ring in either mode */
        /* A Read gets the Terminate's status: a bad STag, or bounds. */
        refused(copy, true, 64, READ_AT, true, STATUS_ACCESS_VIOLATION);
        refused(copy, true, 64 * 1024, READ_AT, true, STATUS_ACCESS_VIOLATION);
        refused(copy, true, 8192, BUF - 4096, false, STATUS_REMOTE_RESOURCES);
    }
}

/* A run of small Sends published at once (a DEFER chain), whose third
 * is longer than its receive: the target took the run's receives
 * together, so the two behind the refused Send are its own until the
 * connection ends. Every receive completes once, in order: the two
 * placed, the refused one with its error, then cancelled both those taken
 * ahead and the one still queued. */
static void t_run_refused(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    CHECK(ask(C_RECV, 6, 64, 0, 0, 0).ok);
    const ULONG len[5] = {64, 64, 100, 64, 64};
    for (int i = 0; i < 5; i++) {
        NDK_SGE g = sge(&S, 0, len[i]);
        CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)(uintptr_t)(i + 1), &g, 1, i < 4 ? NDK_OP_FLAG_DEFER : 0),
                 STATUS_SUCCESS);
    }
    struct msg m = ask(C_STATUSES, 6, 0, 0, 0, 0);
    CHECK(m.ok);
    CHECK_EQ(m.a, 0x3u);  /* 1 and 2 placed */
    CHECK_EQ(m.b, 0x38u); /* 4 and 5 (taken ahead), 6 (queued) cancelled; 3 neither */
    CHECK_EQ(ask(C_REASON, 0, 0, 0, 0, 0).status, NDK_DISCONNECT_REASON_TERMINATE_SENT);
    pair_down();
}

/* A second MR over len octets of our buffer at off. */
static NDK_MR *mr_over(uint64_t off, ULONG len, UINT32 *tok)
{
    NDK_MR *mr = NULL;
    MDL mdl = {.StartVa = S.buf + off, .ByteCount = len};
    if (S.pd->Dispatch->NdkCreateMr(S.pd, FALSE, NULL, NULL, &mr) != STATUS_SUCCESS)
        return NULL;
    if (finish(mr->Dispatch->NdkRegisterMr(mr, &mdl, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, on_req, NULL)) !=
        STATUS_SUCCESS) {
        nt_close(mr);
        return NULL;
    }
    *tok = mr->Dispatch->NdkGetLocalTokenFromMr(mr);
    return mr;
}

static void expect_st(NTSTATUS st, enum _NDK_OPERATION_TYPE type, void *ctx)
{
    NDK_RESULT_EX r;
    REQUIRE(next(&S, &r));
    CHECK_EQ(r.Status, st);
    CHECK_EQ(r.Type, type);
    CHECK(r.RequestContext == ctx);
}

/* The checks a post made are reused when its request goes out only while
 * the memory table is unchanged (mem_map_posted): memory revoked between
 * the post and the transfer is refused then, as when every request was
 * checked again. Sends (in the message and single copy), a Write and a
 * Read sink of an MR deregistered after their DEFER posts complete with
 * STATUS_ACCESS_VIOLATION, and so does a Send of logical addresses whose
 * LAM was released; a receive of a deregistered MR fails the Send that
 * comes for it as a bad receive buffer does. Posts after the
 * deregistration are refused at once. */
static void t_revoked_after_post(void)
{
    uint64_t pb;
    UINT32 pt, tok, ptok;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    NDK_MR *mr = mr_over(0, 64 * 1024, &tok);
    REQUIRE(mr);
    const ULONG D = NDK_OP_FLAG_DEFER;
    NDK_SGE small = {.VirtualAddress = S.buf, .Length = 64, .MemoryRegionToken = tok};
    NDK_SGE big = {.VirtualAddress = S.buf + 4096, .Length = 32 * 1024, .MemoryRegionToken = tok};
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &small, 1, D), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)2, &big, 1, D), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)3, &small, 1, pb + WRITE_AT, pt, D), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)4, &small, 1, pb + READ_AT, pt, D), STATUS_SUCCESS);
    CHECK_EQ(finish(mr->Dispatch->NdkDeregisterMr(mr, on_req, NULL)), STATUS_SUCCESS);
    /* A post after it is refused at once (this thread's posts just found
     * their SGEs in that MR: mem.c, last_mr). */
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)9, &small, 1, D), STATUS_ACCESS_VIOLATION);
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)9, &small, 1), STATUS_ACCESS_VIOLATION);
    /* Logical addresses under the privileged token, their LAM released
     * after the post. */
    MDL mdl = {.StartVa = S.buf + FR_AT, .ByteCount = 4096};
    ULONG size = sizeof g_lam, fbo = 0;
    REQUIRE(finish(S.ad->Dispatch->NdkBuildLAM(S.ad, &mdl, 4096, on_req, NULL, &g_lam.lam, &size, &fbo)) ==
            STATUS_SUCCESS);
    S.pd->Dispatch->NdkGetPrivilegedMemoryRegionToken(S.pd, &ptok);
    NDK_SGE logical = {.VirtualAddress = S.buf + FR_AT, .Length = 64, .MemoryRegionToken = ptok};
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)5, &logical, 1, D), STATUS_SUCCESS);
    S.ad->Dispatch->NdkReleaseLAM(S.ad, &g_lam.lam);
    CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
    NDK_SGE ok = sge(&S, 8192, 16);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)6, &ok, 1, 0), STATUS_SUCCESS);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeSend, (void *)1);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeSend, (void *)2);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeWrite, (void *)3);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeRead, (void *)4);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeSend, (void *)5);
    expect_ok(NdkOperationTypeSend, (void *)6);
    struct msg m = ask(C_REAP, 1, 64, 0, 0, 0);
    CHECK(m.ok && m.status == 0 && m.a == 16);

    /* A receive whose MR goes after its post. */
    CHECK_EQ(finish(mr->Dispatch->NdkRegisterMr(mr, &(MDL){.StartVa = S.buf, .ByteCount = 4096}, 4096,
                                                 NDK_MR_FLAG_ALLOW_LOCAL_WRITE, on_req, NULL)),
             STATUS_SUCCESS);
    NDK_SGE rs = {.VirtualAddress = S.buf, .Length = 64, .MemoryRegionToken = mr->Dispatch->NdkGetLocalTokenFromMr(mr)};
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)7, &rs, 1), STATUS_SUCCESS);
    CHECK_EQ(finish(mr->Dispatch->NdkDeregisterMr(mr, on_req, NULL)), STATUS_SUCCESS);
    memset(S.buf, 0xEE, 64);
    CHECK(ask(C_SEND, 0, 64, 0, RECV_AT, 0).ok);
    expect_st(STATUS_ACCESS_VIOLATION, NdkOperationTypeReceive, (void *)7);
    CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_SENT);
    for (int i = 0; i < 64; i++)
        CHECK_EQ(S.buf[i], 0xEE); /* nothing placed */
    nt_close(mr);
    pair_down();
}

/* The hook of t_terminate_race, on the parent's engine: its pass took
 * the child's Terminate and has not applied it yet. First the child leaves
 * and another pass over the rings (ndk_shm_drain, the connector's when it
 * sees the TCP reset) ends the connection. */
static bool g_raced;
static void leave_then_drain(struct ndk_qp_impl *qp)
{
    ndk_test_hooks_set(S.ad, NULL);
    CHECK(ask(C_CLOSE_QP, 0, 0, 0, 0, 0).ok);
    ndk_shm_drain(qp);
    __atomic_store_n(&g_raced, true, __ATOMIC_RELEASE);
}

/* A Terminate taken by one thread while another sees the peer gone and
 * ends the connection first: the refused Read still completes with the
 * Terminate's status and control word, and the reason stays the
 * Terminate's (it completed STATUS_CANCELLED, the reason PEER_CLOSED,
 * when the status waited to be applied by the thread that took it). */
static void t_terminate_race(void)
{
    for (int copy = 0; copy < 2; copy++) {
        uint64_t pb;
        UINT32 pt;
        REQUIRE(pair_up(copy, 0, &pb, &pt));
        NDK_SGE g = sge(&S, 0, 64);
        g_raced = false;
        CHECK(ndk_test_hooks_set(S.ad, &(struct ndk_test_hooks){.shm_failing = leave_then_drain}));
        CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)1, &g, 1, pb + READ_AT, pt ^ 0x100, 0), STATUS_SUCCESS);
        NDK_RESULT_EX r;
        REQUIRE(next(&S, &r));
        CHECK_EQ(r.Status, STATUS_ACCESS_VIOLATION);
        CHECK(r.ProviderErrorCode != 0);
        CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
        /* The race was run (the Read completes before the hook does). */
        uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
        while (!__atomic_load_n(&g_raced, __ATOMIC_ACQUIRE) && tl_now_ns() < end)
            ;
        CHECK(__atomic_load_n(&g_raced, __ATOMIC_ACQUIRE));
        ndk_test_hooks_set(S.ad, NULL);
        pair_down();
    }
}

/* Sends, then a Read, taken by the target in one pass: the Read's answer
 * goes out only once the Sends' receives are in the target's CQ, so the
 * initiator that saw its Read complete knows they completed (the answer
 * went first, the pass's receives after it). */
static void t_answer_after_receives(void)
{
    for (int copy = 0; copy < 2; copy++) {
        uint64_t pb;
        UINT32 pt;
        REQUIRE(pair_up(copy, 0, &pb, &pt));
        const uint32_t sends = 8;
        CHECK(ask(C_RECV, sends, 64, 0, 0, 0).ok);
        /* One chain (NDK_OP_FLAG_DEFER): one publish, one pass. */
        for (uint32_t i = 0; i < sends; i++) {
            NDK_SGE g = sge(&S, 64 * (uint64_t)i, 64);
            CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &g, 1, NDK_OP_FLAG_SILENT_SUCCESS | NDK_OP_FLAG_DEFER),
                     STATUS_SUCCESS);
        }
        NDK_SGE g = sge(&S, 65536, 64);
        CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)2, &g, 1, pb + READ_AT, pt, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeRead, (void *)2);
        CHECK_EQ(ask(C_ANSWERED, 0, 0, 0, 0, 0).n, sends);
        struct msg m = ask(C_REAP, sends, 64, 0, 0, 0);
        CHECK(m.ok && m.status == 0);
        pair_down();
    }
}

/* A busy poller's pass, in its own thread (t_left_contended). */
static bool g_polled;
static void *poll_once(void *arg)
{
    struct ndk_qp_impl *qp = arg;
    qp->dp.xp->poll(qp);
    __atomic_store_n(&g_polled, true, __ATOMIC_RELEASE);
    return NULL;
}

/* The peer answers a Read (its data; or a Terminate naming it), then
 * leaves, while another thread of ours holds sq_lock: a busy poller that
 * cannot take the lock leaves the response ring, and the ending, to the
 * thread that can. The Read completes with the peer's answer, not
 * STATUS_CANCELLED (the poller ended the connection with the responses
 * untaken). */
static void t_left_contended(void)
{
    for (int bad = 0; bad < 2; bad++) {
        uint64_t pb;
        UINT32 pt;
        REQUIRE(pair_up(false, 0, &pb, &pt));
        struct ndk_qp_impl *qp = impl(S.qp);
        int side;
        uint8_t *region = ndk_shm_region(qp, &side);
        REQUIRE(region);
        struct shm_ring_ctl *in = (struct shm_ring_ctl *)(void *)(region + shm_ring_offset(1 - side, true));
        /* The child answers only once sq_lock is ours. */
        int ws;
        REQUIRE(kill(g_child, SIGSTOP) == 0 && waitpid(g_child, &ws, WUNTRACED) == g_child && WIFSTOPPED(ws));
        memset(S.buf, 0, 64);
        NDK_SGE g = sge(&S, 0, 64);
        CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)1, &g, 1, pb + READ_AT, bad ? pt ^ 0x100 : pt, 0),
                 STATUS_SUCCESS);
        pthread_mutex_lock(&qp->dp.sq_lock);
        kill(g_child, SIGCONT);
        uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
        while (__atomic_load_n(&in->head, __ATOMIC_SEQ_CST) == __atomic_load_n(&in->tail, __ATOMIC_SEQ_CST) &&
               tl_now_ns() < end)
            ;
        CHECK(__atomic_load_n(&in->head, __ATOMIC_SEQ_CST) != __atomic_load_n(&in->tail, __ATOMIC_SEQ_CST));
        CHECK(ask(C_CLOSE_QP, 0, 0, 0, 0, 0).ok);
        /* The poller's pass returns at once; one that ended the connection
         * waits for sq_lock in the flush (the wait is bounded, and only
         * makes the failure quick). */
        g_polled = false;
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, poll_once, qp) == 0);
        end = tl_now_ns() + 1000000000ull;
        while (!__atomic_load_n(&g_polled, __ATOMIC_ACQUIRE) && tl_now_ns() < end)
            ;
        pthread_mutex_unlock(&qp->dp.sq_lock);
        pthread_join(t, NULL);
        NDK_RESULT_EX r;
        REQUIRE(next(&S, &r));
        CHECK(r.RequestContext == (void *)1);
        CHECK_EQ(r.Status, bad ? STATUS_ACCESS_VIOLATION : STATUS_SUCCESS);
        if (!bad)
            CHECK(same(S.buf, 64, SEED_B, 0));
        CHECK_EQ(end_reason(S.qp),
                 bad ? NDK_DISCONNECT_REASON_TERMINATE_RECEIVED : NDK_DISCONNECT_REASON_PEER_CLOSED);
        pair_down();
    }
}

/* The hook of t_post_vs_stop, in the thread that posted the receive: the
 * connection is stopped (as the connector's thread does on a reset) while
 * that post has not returned yet. */
static bool g_posted;
static void stop_after_post(struct ndk_qp_impl *qp)
{
    ndk_test_hooks_set(S.ad, NULL);
    g_posted = true;
    ndk_qp_stop(qp);
}

/* A receive posted for a Send that waits, and the QP stopped before the
 * post returned: the post does not touch the connection after releasing
 * the QP's lock (it ran a pass over the freed rings: ASan reports the use
 * after free). The receive completes once, placed or flushed. */
static void t_post_vs_stop(void)
{
    uint64_t pb;
    UINT32 pt;
    g_parent_grace_ms = 60000;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    g_parent_grace_ms = 0;
    CHECK(ask(C_SEND, 0, 100, 0, 0, 0).ok);
    /* The Send is in our request ring; a pass of ours finds no receive,
     * and from then the Send waits for one (the grace is a minute). */
    int side;
    uint8_t *region = ndk_shm_region(impl(S.qp), &side);
    REQUIRE(region);
    struct shm_ring_ctl *in = (struct shm_ring_ctl *)(void *)(region + shm_ring_offset(1 - side, false));
    uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
    while (__atomic_load_n(&in->head, __ATOMIC_SEQ_CST) == __atomic_load_n(&in->tail, __ATOMIC_SEQ_CST) &&
           tl_now_ns() < end)
        ;
    REQUIRE(__atomic_load_n(&in->head, __ATOMIC_SEQ_CST) != __atomic_load_n(&in->tail, __ATOMIC_SEQ_CST));
    ndk_shm_drain(impl(S.qp));
    g_posted = false;
    CHECK(ndk_test_hooks_set(S.ad, &(struct ndk_test_hooks){.shm_posted = stop_after_post}));
    NDK_SGE g = sge(&S, 0, 100);
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)5, &g, 1), STATUS_SUCCESS);
    ndk_test_hooks_set(S.ad, NULL);
    CHECK(g_posted);
    NDK_RESULT_EX r;
    REQUIRE(next(&S, &r));
    CHECK(r.RequestContext == (void *)5);
    CHECK(r.Status == STATUS_SUCCESS || r.Status == STATUS_CANCELLED);
    CHECK_EQ(S.cq->Dispatch->NdkGetCqResultsEx(S.cq, &r, 1), 0u);
    pair_down();
}

/* A window bound by the peer: a Write through it lands (single copy and
 * copy mode), one past its end is refused although the MR covers it, and
 * after a Send with Invalidate names it, a Write through it ends the
 * connection (docs/rules.md R21). */
static void t_window(void)
{
    for (int copy = 0; copy < 2; copy++) {
        uint64_t pb;
        UINT32 pt;
        REQUIRE(pair_up(copy, 0, &pb, &pt));
        const ULONG win = 128 * 1024;
        struct msg m = ask(C_BIND, 0, win, 0, WRITE_AT, 0);
        REQUIRE(m.ok);
        UINT32 wtok = m.n;
        fill(S.buf, win, 21, 0);
        NDK_SGE g = sge(&S, 0, win);
        CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)1, &g, 1, pb + WRITE_AT, wtok, 0), STATUS_SUCCESS);
        CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
        CHECK_EQ(S.qp->Dispatch->NdkSendAndInvalidate(S.qp, (void *)2, NULL, 0, 0, wtok), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeWrite, (void *)1);
        expect_ok(NdkOperationTypeSend, (void *)2);
        m = ask(C_REAP, 1, 64, 0, 0, 0);
        CHECK(m.ok && m.status == 0);
        CHECK_EQ(m.b & 0xffffffff, NdkOperationTypeReceiveAndInvalidate);
        CHECK_EQ(m.b >> 32, wtok);
        CHECK(ask(C_CHECK, 0, win, 21, WRITE_AT, 0).ok);
        /* Invalid now: the next Write through it is refused. */
        g = sge(&S, 0, 64);
        CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)3, &g, 1, pb + WRITE_AT, wtok, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeWrite, (void *)3);
        CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
        CHECK_EQ(ask(C_REASON, 0, 0, 0, 0, 0).status, NDK_DISCONNECT_REASON_TERMINATE_SENT);
        pair_down();

        /* Past the window's end, inside the MR: bounds. */
        REQUIRE(pair_up(copy, 0, &pb, &pt));
        m = ask(C_BIND, 0, 4096, 0, WRITE_AT, 0);
        REQUIRE(m.ok);
        fill(S.buf, 8192, 3, 0);
        g = sge(&S, 0, 8192);
        CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)4, &g, 1, pb + WRITE_AT, m.n, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeWrite, (void *)4);
        CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
        CHECK(ask(C_ZERO, 0, 8192, 0, WRITE_AT, 0).ok); /* not one octet placed */
        pair_down();
    }
}

/* Receiver not ready (docs/behaviour.md): Sends that find no receive wait
 * for one posted within ReceiveGraceMs, then land in order; past the
 * grace the target ends the connection with its Terminate. */
static void t_receive_wait(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 60000, &pb, &pt));
    fill(S.buf, 65536, 31, 0);
    NDK_SGE big = sge(&S, 0, 65536), small = sge(&S, 0, 100);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &big, 1, 0), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)2, &small, 1, 0), STATUS_SUCCESS);
    /* While they wait, the child's engine sleeps between its looks
     * (it used to spin on the unconsumed Send): a window of 300 ms costs
     * it far less than 100 ms of processor time. The window measures; it
     * synchronises nothing. */
    struct msg c0 = ask(C_CPU, 0, 0, 0, 0, 0);
    poll(NULL, 0, 300);
    struct msg c1 = ask(C_CPU, 0, 0, 0, 0, 0);
    CHECK(c0.ok && c1.ok);
    CHECK(c1.a - c0.a < 100000000u);
    CHECK(ask(C_RECV, 2, 65536, 0, 0, 0).ok);
    expect_ok(NdkOperationTypeSend, (void *)1);
    expect_ok(NdkOperationTypeSend, (void *)2);
    struct msg m = ask(C_REAP, 2, 65536, 0, 0, 0);
    CHECK(m.ok && m.status == 0 && m.a == 100);
    CHECK(ask(C_CHECK, 0, 65536, 31, RECV_AT, 0).ok);
    CHECK(ask(C_CHECK, 0, 100, 31, RECV_AT + 65536, 0).ok);
    pair_down();

    REQUIRE(pair_up(false, 50, &pb, &pt));
    small = sge(&S, 0, 100);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)3, &small, 1, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeSend, (void *)3);
    CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
    CHECK_EQ(ask(C_REASON, 0, 0, 0, 0, 0).status, NDK_DISCONNECT_REASON_TERMINATE_SENT);
    pair_down();
}

static tl_event g_granted;
static void on_grant(struct ndk_qp_impl *qp)
{
    (void)qp;
    tl_event_signal(&g_granted);
}

/* A split Write whose grant the target takes back before the initiator
 * moved its part (here: NdkFlush while the initiator's side is held): the
 * target placed its own half, and nothing of the granted half ever
 * lands, also once the initiator takes the grant; the Write completes
 * (the flushed target acknowledges what it dropped). */
static void t_grant_revoked(void)
{
    uint64_t pb;
    UINT32 pt;
    const ULONG len = 1u << 20;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    memset(S.buf, 0, len);
    struct ndk_qp_impl *q = impl(S.qp);
    /* Our target side takes nothing until the child's side is held. */
    pthread_mutex_lock(&q->dp.rx_lock);
    CHECK(ask(C_WRITE, S.rtok, len, 0, (uint64_t)(uintptr_t)S.buf, 0).ok);
    CHECK(ask(C_HOLD, 1, 0, 0, 0, 0).ok);
    unsigned grants = tl_event_count(&g_granted);
    CHECK(ndk_test_hooks_set(S.ad, &(struct ndk_test_hooks){.shm_answered = on_grant}));
    pthread_mutex_unlock(&q->dp.rx_lock);
    CHECK(tl_event_wait(&g_granted, grants + 1, WAIT_MS));
    /* Flush waits for the pass that granted (rx_lock), then takes the
     * grant back. */
    S.qp->Dispatch->NdkFlush(S.qp);
    ndk_test_hooks_set(S.ad, NULL);
    CHECK(ask(C_HOLD, 0, 0, 0, 0, 0).ok);
    /* The flushed target drops the Write and acknowledges it, as TCP
     * would have taken it: the child's completes. */
    struct msg m = ask(C_REAP, 1, 0, 0, 0, 0);
    CHECK(m.ok && m.status == STATUS_SUCCESS);
    nt_close(S.qp);
    S.qp = NULL;
    CHECK(same(S.buf, len / 2, SEED_B, 0));
    bool untouched = true;
    for (ULONG i = len / 2; i < len; i++)
        untouched = untouched && !S.buf[i];
    CHECK(untouched);
    pair_down();
}

/* A fast-registered region whose pages are not in address order: a Write
 * and a Read through it are placed and gathered page by page, in single
 * copy and copy mode; a Write past its end is refused. */
static void t_fast_register(void)
{
    const uint64_t base = 0x7e5000000000ull;
    const ULONG len = FR_PAGES * 4096;
    for (int copy = 0; copy < 2; copy++) {
        uint64_t pb;
        UINT32 pt, tok;
        REQUIRE(pair_up(copy, 0, &pb, &pt));
        struct msg m = ask(C_FRMR, 0, 0, 0, base, 0);
        REQUIRE(m.ok);
        tok = m.n;
        fill(S.buf, len, 41, 0);
        NDK_SGE g = sge(&S, 0, len);
        CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)1, &g, 1, base, tok, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeWrite, (void *)1);
        memset(S.buf + len, 0, len);
        g = sge(&S, len, len);
        CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)2, &g, 1, base, tok, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeRead, (void *)2);
        CHECK(same(S.buf + len, len, 41, 0));
        /* A Send behind them: once the child reaped its receive, what was
         * placed before it is the child's to read (in its own order). */
        CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
        CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)4, NULL, 0, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeSend, (void *)4);
        CHECK(ask(C_REAP, 1, 64, 0, 0, 0).ok);
        /* In the child's buffer, virtual page k is page FR_PAGES-1-k. */
        for (uint32_t k = 0; k < FR_PAGES; k += 7)
            CHECK(ask(C_CHECK, 0, 4096, 41, FR_AT + (uint64_t)(FR_PAGES - 1 - k) * 4096, (uint64_t)k * 4096).ok);
        g = sge(&S, 0, 8192);
        CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)3, &g, 1, base + len - 4096, tok, 0), STATUS_SUCCESS);
        expect_ok(NdkOperationTypeWrite, (void *)3);
        CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
        pair_down();
    }
}

/* Bad input from the peer (it shares the rings, so it is the wire here):
 * an unknown message, a payload longer than a message holds, an impossible
 * ring index, a single-copy source the peer does not map, a Send starting
 * in its middle, a length past what was published, a Send whose total
 * grows between its pieces. Each ends the connection (ABORTED, the parent's
 * receive flushed, nothing placed), and the process goes on. */
static void t_garbage(void)
{
    g_busy = true; /* nobody rings our doorbell: our polls find the input */
    for (uint32_t kind = 0; kind < 7; kind++) {
        uint64_t pb;
        UINT32 pt;
        REQUIRE(pair_up(false, 0, &pb, &pt));
        NDK_SGE g = sge(&S, 0, 64);
        CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)9, &g, 1), STATUS_SUCCESS);
        CHECK(ask(C_GARBAGE, kind, S.rtok, 0, (uint64_t)(uintptr_t)(S.buf + 65536), 0).ok);
        NDK_RESULT_EX r;
        REQUIRE(next(&S, &r));
        CHECK_EQ(r.Status, STATUS_CANCELLED);
        CHECK(r.RequestContext == (void *)9);
        CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_ABORTED);
        for (int i = 0; i < 8192; i++)
            if (S.buf[65536 + i])
                CHECK(!"placed");
        pair_down();
    }
    g_busy = false;
}

/* A peer that stops (SIGSTOP) fills the ring with SHM_UNITS 64-octet
 * Sends: posts succeed until the initiator queue is full, then fail with STATUS_INSUFFICIENT_RESOURCES;
 * once it runs again every message arrives, in order, intact. */
static void t_back_pressure(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    const uint32_t total = SHM_UNITS + DEPTH; /* a 64-octet Send takes one unit */
    REQUIRE(ask(C_RECV, total, 64, 0, 0, 0).ok);
    int ws;
    REQUIRE(kill(g_child, SIGSTOP) == 0 && waitpid(g_child, &ws, WUNTRACED) == g_child && WIFSTOPPED(ws));
    uint32_t posted = 0;
    NTSTATUS st = STATUS_SUCCESS;
    for (; posted <= total; posted++) {
        memcpy(S.buf + posted * 64, &posted, 4);
        NDK_SGE g = sge(&S, posted * 64, 64);
        /* In DEFER chains of 32: a chain is one batch, packed (shm_ring.h). */
        ULONG fl = posted % 32 == 31 ? 0 : NDK_OP_FLAG_DEFER;
        if ((st = S.qp->Dispatch->NdkSend(S.qp, (void *)(uintptr_t)posted, &g, 1, fl)) != STATUS_SUCCESS)
            break;
    }
    CHECK_EQ(st, STATUS_INSUFFICIENT_RESOURCES);
    CHECK_EQ(posted, total);
    kill(g_child, SIGCONT);
    for (uint32_t i = 0; i < posted; i++)
        expect_ok(NdkOperationTypeSend, (void *)(uintptr_t)i);
    struct msg m = ask(C_REAP, posted, 64, 1, 0, 0);
    CHECK(m.ok && m.status == 0);
    pair_down();
}

/* The peer's request ring as a producer that publishes a pad (no
 * message: the consumer skips it, docs/shm.md) at each pass of our
 * engine: every pass finds news. Only once the peer's own Send is in the
 * ring: the peer keeps its head in its own memory, so a pad published
 * before it would take the unit the Send then overwrites, and the head
 * the Send publishes would not move past it. */
#define PADS 100
static struct {
    struct shm_ring_ctl *ctl;
    uint8_t *units;
    uint32_t head0;     /* the ring's head before the peer's Send */
    unsigned published; /* the engine's thread only */
    int max_pass;       /* atomic */
    tl_event passes;
} g_pad;

static void pad_per_pass(struct ndk_qp_impl *qp, int pass)
{
    (void)qp;
    if (__atomic_load_n(&g_pad.ctl->head, __ATOMIC_SEQ_CST) == g_pad.head0)
        return; /* a pass before the peer's Send: not one of the wake-up's */
    if (pass > __atomic_load_n(&g_pad.max_pass, __ATOMIC_RELAXED))
        __atomic_store_n(&g_pad.max_pass, pass, __ATOMIC_RELAXED);
    if (g_pad.published < PADS) {
        uint32_t head = __atomic_load_n(&g_pad.ctl->head, __ATOMIC_SEQ_CST);
        struct shm_msg *m = (struct shm_msg *)(void *)(g_pad.units + (size_t)(head & (SHM_UNITS - 1)) * SHM_UNIT);
        memset(m, 0, sizeof *m);
        m->type = SHM_PAD;
        m->len = SHM_UNIT - sizeof *m;
        __atomic_store_n(&g_pad.ctl->head, head + 1, __ATOMIC_SEQ_CST);
        g_pad.published++;
    }
    tl_event_signal(&g_pad.passes);
}

/* While the peer keeps publishing, one wake-up of the engine runs at most
 * 17 passes, then comes back through the loop (docs/shm.md, Wake-ups and
 * threads): the engine's other connections and callbacks get their turn.
 * The peer's Send starts a wake-up and every pass finds a new pad; then
 * the connection still carries a Send. */
static void t_pass_cap(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    int side;
    uint8_t *region = ndk_shm_region(impl(S.qp), &side);
    REQUIRE(region);
    g_pad.ctl = (struct shm_ring_ctl *)(void *)(region + shm_ring_offset(1 - side, false));
    g_pad.units = (uint8_t *)g_pad.ctl + sizeof(struct shm_ring_ctl);
    g_pad.head0 = __atomic_load_n(&g_pad.ctl->head, __ATOMIC_SEQ_CST);
    g_pad.published = 0;
    g_pad.max_pass = -1;
    unsigned seen = tl_event_count(&g_pad.passes);
    NDK_SGE g = sge(&S, 0, 64);
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)1, &g, 1), STATUS_SUCCESS);
    CHECK(ndk_test_hooks_set(S.ad, &(struct ndk_test_hooks){.shm_pass = pad_per_pass}));
    CHECK(ask(C_SEND, 0, 64, 0, 0, 0).ok);
    /* The pass that took the last pad, at least. */
    CHECK(tl_event_wait(&g_pad.passes, seen + PADS + 1, WAIT_MS));
    ndk_test_hooks_set(S.ad, NULL);
    CHECK_EQ(__atomic_load_n(&g_pad.max_pass, __ATOMIC_RELAXED), 16);
    expect_ok(NdkOperationTypeReceive, (void *)1);
    CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)2, &g, 1, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeSend, (void *)2);
    /* The child's own Send's completion, then the receive. */
    struct msg m = ask(C_REAP, 2, 64, 0, 0, 0);
    CHECK(m.ok && m.status == 0);
    CHECK_EQ((uint32_t)m.b, (uint32_t)NdkOperationTypeReceive);
    pair_down();
}

/* kill -9 of the peer: every outstanding request is flushed at once, and
 * the descriptors and the region go with the QP. */
static void t_peer_killed(void)
{
    uint64_t pb;
    UINT32 pt;
    unsigned fds = tl_open_fds();
    /* The child waits a minute for a receive: the large Send stays out. */
    REQUIRE(pair_up(false, 60000, &pb, &pt));
    for (int i = 0; i < 4; i++) {
        NDK_SGE g = sge(&S, 4096 * (uint64_t)i, 4096);
        CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)(uintptr_t)(10 + i), &g, 1), STATUS_SUCCESS);
    }
    NDK_SGE g = sge(&S, 65536, 65536);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &g, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r;
    CHECK_EQ(S.cq->Dispatch->NdkGetCqResultsEx(S.cq, &r, 1), 0);
    uint64_t t0 = tl_now_ns();
    kill(g_child, SIGKILL);
    int seen = 0;
    for (int i = 0; i < 5; i++) {
        REQUIRE(next(&S, &r));
        CHECK_EQ(r.Status, STATUS_CANCELLED);
        seen++;
    }
    printf("peer killed: outstanding requests flushed after %.2f ms\n", (tl_now_ns() - t0) / 1e6);
    CHECK_EQ(seen, 5);
    CHECK_EQ(ndk_qp_end_reason(impl(S.qp)), NDK_DISCONNECT_REASON_ABORTED);
    int ws;
    CHECK(waitpid(g_child, &ws, 0) == g_child && WIFSIGNALED(ws));
    g_child = 0;
    pair_down();
    CHECK_EQ(tl_open_fds(), fds);
}

/* The peer answers our Read and is killed before our engine took the
 * answer, and the engine handles the pidfd's event first. A busy poller
 * (this thread) holds the QP's input lease, so a pass of the engine ends
 * unarmed and the answer rings nothing. The engine (the only one, which
 * also ages the lease) is held in such a pass by the shm_pass hook while
 * the poller renews the lease, the Read is posted and answered, and the
 * peer killed. Released, the pass ends for the lease, the lease stays
 * (renewed), and the only event ready is the pidfd's, with the answer
 * still in the ring. */
static struct {
    struct shm_ring_ctl *ctl; /* the peer's request ring */
    uint32_t head0;           /* its head before the peer's Send */
    int state;                /* the engine's thread only: 0 waits, 1 held, 2 released, 3 looked after */
    ULONG reason_after;       /* the end reason at the first pass after the release */
    tl_event held, go, after;
} g_kill;

static void hold_one_pass(struct ndk_qp_impl *qp, int pass)
{
    (void)pass;
    if (__atomic_load_n(&g_kill.ctl->head, __ATOMIC_SEQ_CST) == g_kill.head0)
        return; /* a pass before the peer's Send */
    if (g_kill.state == 2) {
        g_kill.reason_after = ndk_qp_end_reason(qp);
        g_kill.state = 3;
        tl_event_signal(&g_kill.after);
    }
    if (g_kill.state != 0)
        return;
    g_kill.state = 1;
    tl_event_signal(&g_kill.held);
    tl_event_wait(&g_kill.go, 1, WAIT_MS);
    g_kill.state = 2;
}

/* What the killed peer published is taken before the connection ends:
 * the answered Read completes with its data, as TCP delivers what was
 * sent before the FIN the kernel sends for a killed process; then the
 * connection ends, ABORTED. */
static void t_killed_after_answer(void)
{
    uint64_t pb;
    UINT32 pt;
    g_busy = true;
    g_engines = 1;
    bool up = pair_up(false, 0, &pb, &pt);
    g_busy = false;
    g_engines = 0;
    REQUIRE(up);
    REQUIRE(impl(S.qp)->obj.ad->dev->nengines == 1); /* no other view made the device */
    int side;
    uint8_t *region = ndk_shm_region(impl(S.qp), &side);
    REQUIRE(region);
    g_kill.ctl = (struct shm_ring_ctl *)(void *)(region + shm_ring_offset(1 - side, false));
    g_kill.head0 = __atomic_load_n(&g_kill.ctl->head, __ATOMIC_SEQ_CST);
    g_kill.state = 0;
    g_kill.reason_after = 0;
    tl_event_init(&g_kill.held);
    tl_event_init(&g_kill.go);
    tl_event_init(&g_kill.after);
    const struct shm_ring_ctl *answers = (const void *)(region + shm_ring_offset(1 - side, true));
    NDK_SGE g = sge(&S, 0, 64);
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)1, &g, 1), STATUS_SUCCESS);
    CHECK(ndk_test_hooks_set(S.ad, &(struct ndk_test_hooks){.shm_pass = hold_one_pass}));
    CHECK(ask(C_SEND, 0, 64, 0, 0, 0).ok);
    bool held = tl_event_wait(&g_kill.held, 1, WAIT_MS);
    CHECK(held);
    NDK_RESULT_EX r[2];
    memset(r, 0, sizeof r);
    /* The receive's completion (the held pass placed the Send), then a
     * poll of the empty CQ, which takes the lease. */
    ULONG got = S.cq->Dispatch->NdkGetCqResultsEx(S.cq, r, 1);
    got += S.cq->Dispatch->NdkGetCqResultsEx(S.cq, r + got, 1);
    if (held) {
        uint32_t before = __atomic_load_n(&answers->head, __ATOMIC_SEQ_CST);
        g = sge(&S, 8192, 64);
        CHECK_EQ(S.qp->Dispatch->NdkRead(S.qp, (void *)2, &g, 1, pb + READ_AT + 5, pt, 0), STATUS_SUCCESS);
        uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
        while (__atomic_load_n(&answers->head, __ATOMIC_SEQ_CST) == before && tl_now_ns() < end)
            sched_yield();
        CHECK(__atomic_load_n(&answers->head, __ATOMIC_SEQ_CST) != before); /* answered */
    }
    int ws;
    kill(g_child, SIGKILL);
    CHECK(waitpid(g_child, &ws, 0) == g_child && WIFSIGNALED(ws));
    g_child = 0;
    tl_event_signal(&g_kill.go);
    /* The lease ends unrenewed and rings the engine: one more pass. */
    CHECK(tl_event_wait(&g_kill.after, 1, WAIT_MS));
    ndk_test_hooks_set(S.ad, NULL);
    /* The engine handled the pidfd first: the connection had ended when
     * it next passed over the rings. */
    CHECK_EQ(g_kill.reason_after, NDK_DISCONNECT_REASON_ABORTED);
    while (got < 2 && next(&S, &r[got]))
        got++;
    REQUIRE(got == 2);
    CHECK_EQ(r[0].Status, STATUS_SUCCESS);
    CHECK(r[0].RequestContext == (void *)1 && r[0].Type == NdkOperationTypeReceive);
    CHECK_EQ(r[1].Status, STATUS_SUCCESS); /* answered before the peer died */
    CHECK(r[1].RequestContext == (void *)2 && r[1].Type == NdkOperationTypeRead);
    CHECK(same(S.buf + 8192, 64, SEED_B, 5));
    CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_ABORTED);
    pair_down();
    tl_event_destroy(&g_kill.held);
    tl_event_destroy(&g_kill.go);
    tl_event_destroy(&g_kill.after);
}

/* The peer closes its QP: ours ends, its receives flushed. */
static void t_peer_closed(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    NDK_SGE g = sge(&S, 0, 64);
    CHECK_EQ(S.qp->Dispatch->NdkReceive(S.qp, (void *)7, &g, 1), STATUS_SUCCESS);
    CHECK(ask(C_CLOSE_QP, 0, 0, 0, 0, 0).ok);
    NDK_RESULT_EX r;
    REQUIRE(next(&S, &r));
    CHECK_EQ(r.Status, STATUS_CANCELLED);
    CHECK(r.RequestContext == (void *)7);
    CHECK_EQ(end_reason(S.qp), NDK_DISCONNECT_REASON_PEER_CLOSED);
    pair_down();
}

/* Our small Send is published (and completes, handed over), then we
 * close our QP (left: closed) before the child's engine ran: the child
 * finds the Send in its ring and the peer gone in one pass. */
static void t_left_after_send(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    CHECK(ask(C_RECV, 1, 64, 0, 0, 0).ok);
    int ws;
    REQUIRE(kill(g_child, SIGSTOP) == 0 && waitpid(g_child, &ws, WUNTRACED) == g_child && WIFSTOPPED(ws));
    NDK_SGE g = sge(&S, 0, 64);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &g, 1, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeSend, (void *)1);
    nt_close(S.qp);
    S.qp = NULL;
    kill(g_child, SIGCONT);
    struct msg m = ask(C_STATUSES, 1, 0, 0, 0, 0);
    CHECK(m.ok);
    CHECK_EQ(m.a, 0x1u); /* placed, as TCP delivers what came before the FIN */
    CHECK_EQ(m.b, 0x0u);
    pair_down();
}

/* The child flushed its QP (NdkFlush): what we send is dropped there,
 * and our single-copy Send and Write still complete, as over TCP once the
 * octets were handed over (before, nothing acknowledged them: they waited
 * for the connection's end and completed cancelled). Small ones too, and
 * ones of 8 KiB, which go through the ring in pieces and wait for the
 * target's acknowledgement as single-copy ones do (SHM_F_ACK). */
static void t_sent_to_flushed_peer(void)
{
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    CHECK(ask(C_FLUSH, 0, 0, 0, 0, 0).ok);
    const ULONG big = 200 * 1024;
    NDK_SGE g = sge(&S, 0, big);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)1, &g, 1, 0), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)2, &g, 1, pb + WRITE_AT, pt, 0), STATUS_SUCCESS);
    g = sge(&S, 0, 64);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)3, &g, 1, 0), STATUS_SUCCESS);
    g = sge(&S, 0, 8192);
    CHECK_EQ(S.qp->Dispatch->NdkSend(S.qp, (void *)4, &g, 1, 0), STATUS_SUCCESS);
    CHECK_EQ(S.qp->Dispatch->NdkWrite(S.qp, (void *)5, &g, 1, pb + WRITE_AT, pt, 0), STATUS_SUCCESS);
    expect_ok(NdkOperationTypeSend, (void *)1);
    expect_ok(NdkOperationTypeWrite, (void *)2);
    expect_ok(NdkOperationTypeSend, (void *)3);
    expect_ok(NdkOperationTypeSend, (void *)4);
    expect_ok(NdkOperationTypeWrite, (void *)5);
    pair_down();
}

/* A peer process that connects the UNIX socket and then, mute, either
 * closes it at once or holds it until the parent closes the control
 * socket: ndk_shm_connect fails with the exchange's status, releases what
 * it made, and leaves the QP idle and unused. A connected QP is refused. */
static pid_t spawn_mute(bool hold, int *sock, int *ctl_out)
{
    struct sockaddr_un a;
    int lfd = listen_unix(&a), ctl[2];
    if (lfd < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl))
        return -1;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(ctl[0]);
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a))
            _exit(2);
        char c;
        if (hold) {
            struct pollfd p = {.fd = ctl[1], .events = POLLIN};
            if (poll(&p, 1, WAIT_MS) == 1 && read(ctl[1], &c, 1) < 0)
                _exit(3);
        }
        _exit(0);
    }
    close(ctl[1]);
    *ctl_out = ctl[0];
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    *sock = pid > 0 && poll(&p, 1, WAIT_MS) == 1 ? accept4(lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
    close(lfd);
    return pid;
}

static void t_connect_fails(void)
{
    unsigned fds = tl_open_fds();
    REQUIRE(side_open(&S, 0));
    for (int hold = 0; hold < 2; hold++) {
        int sock, ctl;
        pid_t pid = spawn_mute(hold, &sock, &ctl);
        REQUIRE(pid > 0 && sock >= 0);
        bool cm;
        uint64_t t0 = tl_now_ns();
        /* Creator: the peer hangs up; not the creator: the peer never
         * sends its region (200 ms). */
        NTSTATUS st = ndk_shm_connect(impl(S.qp), sock, !hold, NDK_MAX_IRD, NDK_MAX_ORD, 200, &cm);
        CHECK_EQ(st, hold ? STATUS_IO_TIMEOUT : STATUS_CONNECTION_REFUSED);
        CHECK(tl_now_ns() - t0 < 5000000000ull);
        close(sock);
        close(ctl);
        int ws;
        CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
        CHECK_EQ(impl(S.qp)->dp.state, QP_IDLE);
        CHECK(!impl(S.qp)->used);
    }
    /* Not a socket: refused before any descriptor of its own is made, and
     * no descriptor of the process (0 included) is closed on the way out. */
    int pp[2];
    REQUIRE(pipe2(pp, O_CLOEXEC) == 0);
    int zero = fcntl(0, F_GETFD) >= 0 ? -1 : open("/dev/null", O_RDONLY);
    bool cm0;
    CHECK_EQ(ndk_shm_connect(impl(S.qp), pp[0], true, 1, 1, 10, &cm0), STATUS_CONNECTION_REFUSED);
    CHECK(fcntl(0, F_GETFD) >= 0);
    CHECK(!impl(S.qp)->used);
    close(pp[0]);
    close(pp[1]);
    if (zero >= 0)
        close(zero);
    side_close(&S);
    CHECK_EQ(tl_open_fds(), fds);
    uint64_t pb;
    UINT32 pt;
    REQUIRE(pair_up(false, 0, &pb, &pt));
    bool cm;
    CHECK_EQ(ndk_shm_connect(impl(S.qp), -1, true, 1, 1, 10, &cm), STATUS_INVALID_DEVICE_STATE);
    pair_down();
}

int main(void)
{
    tl_event_init(&g_req);
    tl_event_init(&g_granted);
    tl_event_init(&g_pad.passes);
    RUN(t_ops_single_copy);
    RUN(t_ops_copy_mode);
    RUN(t_protection);
    RUN(t_run_refused);
    RUN(t_left_after_send);
    RUN(t_sent_to_flushed_peer);
    RUN(t_revoked_after_post);
    RUN(t_terminate_race);
    RUN(t_answer_after_receives);
    RUN(t_left_contended);
    RUN(t_post_vs_stop);
    RUN(t_window);
    RUN(t_receive_wait);
    RUN(t_fast_register);
    RUN(t_grant_revoked);
    RUN(t_garbage);
    RUN(t_back_pressure);
    RUN(t_pass_cap);
    RUN(t_peer_killed);
    RUN(t_killed_after_answer);
    RUN(t_peer_closed);
    RUN(t_connect_fails);
    return tl_finish();
}
