/* The same-host fast path chosen under NdkConnect/NdkAccept (docs/shm.md,
 * Selection): two adapters of one process, and two processes, select the
 * shared-memory transport; the off switches, a rendezvous peer that never
 * answers, and initiators that fail a check (a 4-tuple that is not theirs,
 * a hello whose descriptor is not the initiator's TCP socket, another
 * user) keep TCP; the
 * data is exact either way; a peer killed with SIGKILL flushes everything
 * and fires the disconnect event once, and so does a peer that a single-copy
 * transfer's look at its pidfd finds ended; 64 connections add no thread.
 * The transport each QP uses is read
 * from the stat snapshot ndkstat shows (its qp lines' transport=). */
#include <dirent.h>
#include <stdatomic.h>
#include <signal.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "dptest.h"
#include "net/shm_rv.h"
#include "net/tcp.h"
#include "shm_rendezvous.h"
#include "objects.h"
#include "stat.h"
#include "xp_shm.h"

/* How many QP lines of the snapshot carry transport=name. */
static unsigned qps_on(const char *name)
{
    size_t len;
    char *snap = ndk_stat_snapshot(&len);
    if (!snap)
        return 0;
    char want[32];
    snprintf(want, sizeof want, " transport=%s", name);
    unsigned n = 0;
    for (char *line = strtok(snap, "\n"); line; line = strtok(NULL, "\n"))
        if (strncmp(line, "qp ", 3) == 0 && strstr(line, want))
            n++;
    free(snap);
    return n;
}

/* Data both ways, then a graceful disconnect from the active side: one
 * event on the passive side, none on the active (X2). */
static void traffic_and_disconnect(dp_conn *c)
{
    CHECK(dp_roundtrip(c, 100, 1));
    CHECK(dp_roundtrip(c, 1 * MiB + 7, 2));
    dp_req *da = dp_req_new("NdkDisconnect (active)");
    da->started = true;
    da->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, da);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(da, da->returned, DP_WAIT_MS), STATUS_SUCCESS);
    CHECK_EQ(tl_event_count(&c->disc_p), 1);
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
}

/* Opens both sides with these flags and connects them (cfg may be NULL). */
static bool pair_open(dp_pair *x, ULONG flags_a, ULONG flags_p, const dp_cfg *cfg)
{
    memset(x, 0, sizeof *x);
    if (!dp_side_open_flags(&x->a, flags_a) || !dp_side_open_flags(&x->p, flags_p))
        return false;
    x->c = dp_conn_new(&x->a, &x->p, cfg);
    return x->c && dp_conn_establish(x->c);
}

DP_CASE(one_process_selects_shm)
{
    dp_pair x;
    REQUIRE(pair_open(&x, 0, 0, NULL));
    CHECK_EQ(qps_on("shm"), 2);
    CHECK_EQ(qps_on("iwarp"), 0);
    traffic_and_disconnect(x.c);
    dp_pair_close(&x);
}

/* The threads of this process (/proc/self/task); 0 when unreadable. */
static unsigned threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    unsigned n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Many same-host connections are served by the adapters' progress
 * engines (docs/shm.md, Wake-ups and threads): the process runs no thread
 * more with DP_MAX_CONNS of them than with none, and every one carries a
 * Send into a posted receive (the passive side was idle, armed, so its
 * engine is woken through the eventfd watch). */
DP_CASE(many_connections_add_no_thread)
{
    dp_side a, p;
    memset(&a, 0, sizeof a);
    memset(&p, 0, sizeof p);
    REQUIRE(dp_side_open(&a) && dp_side_open(&p));
    unsigned before = threads_now();
    REQUIRE(before > 0);
    dp_conn *c[DP_MAX_CONNS];
    unsigned n = 0;
    while (n < sizeof c / sizeof c[0]) {
        c[n] = dp_conn_new(&a, &p, NULL);
        REQUIRE(c[n]);
        REQUIRE(dp_conn_establish(c[n]));
        n++;
    }
    CHECK_EQ(qps_on("shm"), 2 * n);
    CHECK_EQ(threads_now(), before);
    for (unsigned i = 0; i < n; i++)
        CHECK(dp_roundtrip(c[i], 100, i));
    CHECK_EQ(threads_now(), before);
    for (unsigned i = 0; i < n; i++)
        dp_conn_close(c[i]);
    dp_side_close(&a);
    dp_side_close(&p);
}

/* Many joins at once on the same engines: every connection's Connect,
 * then every Accept, then every CompleteConnect is started before any of
 * them is waited for, so all the rendezvous are in flight together (hello,
 * region, answer, go on each UNIX socket, each taken when its socket is
 * readable). Each must be joined within its bound: one that waited for
 * the others past it would keep TCP. */
#define IN_FLIGHT 16

DP_CASE(joins_in_flight_on_one_engine)
{
    dp_side a, p;
    memset(&a, 0, sizeof a);
    memset(&p, 0, sizeof p);
    REQUIRE(dp_side_open(&a) && dp_side_open(&p));
    dp_conn *c[IN_FLIGHT];
    dp_req *rc[IN_FLIGHT], *ra[IN_FLIGHT], *rcc[IN_FLIGHT];
    for (unsigned i = 0; i < IN_FLIGHT; i++) {
        REQUIRE((c[i] = dp_conn_new(&a, &p, NULL)) && dp_conn_listen(c[i]));
        REQUIRE((rc[i] = dp_conn_connect_start(c[i])));
    }
    for (unsigned i = 0; i < IN_FLIGHT; i++) {
        REQUIRE((c[i]->cp = dp_conn_incoming(c[i], DP_WAIT_MS)));
        ra[i] = dp_req_new("NdkAccept");
        ra[i]->started = true;
        ra[i]->returned = c[i]->cp->Dispatch->NdkAccept(c[i]->cp, c[i]->qp, c[i]->cfg.p_ird, c[i]->cfg.p_ord, NULL,
                                                        0, dp_disc_cb, &c[i]->disc_p, dp_req_cb, ra[i]);
    }
    for (unsigned i = 0; i < IN_FLIGHT; i++)
        DP_REQUIRE_ST(dp_finish(rc[i], STATUS_PENDING, DP_WAIT_MS), STATUS_SUCCESS);
    for (unsigned i = 0; i < IN_FLIGHT; i++) {
        rcc[i] = dp_req_new("NdkCompleteConnect");
        rcc[i]->started = true;
        rcc[i]->returned =
            c[i]->ca->Dispatch->NdkCompleteConnect(c[i]->ca, dp_disc_cb, &c[i]->disc_a, dp_req_cb, rcc[i]);
    }
    for (unsigned i = 0; i < IN_FLIGHT; i++) {
        DP_CHECK_ST(dp_finish(rcc[i], rcc[i]->returned, DP_WAIT_MS), STATUS_SUCCESS);
        DP_CHECK_ST(dp_finish(ra[i], ra[i]->returned, DP_WAIT_MS), STATUS_SUCCESS);
    }
    CHECK_EQ(qps_on("shm"), 2 * IN_FLIGHT);
    CHECK_EQ(qps_on("iwarp"), 0);
    for (unsigned i = 0; i < IN_FLIGHT; i++)
        CHECK(dp_roundtrip(c[i], 100, i));
    for (unsigned i = 0; i < IN_FLIGHT; i++)
        dp_conn_close(c[i]);
    dp_side_close(&a);
    dp_side_close(&p);
}

/* The set-up steps over a socket pair, as the sim drives them: a step
 * takes what its socket holds and never waits for more. Each side's peer
 * is silent until the test lets it speak, so a step that waited would not
 * return (the alarm ends the test instead of a hang). */
static void step_blocked(int sig)
{
    (void)sig;
    static const char msg[] = "a set-up step waited for its peer\n";
    ssize_t n = write(2, msg, sizeof msg - 1);
    (void)n;
    _exit(1);
}

static struct ndk_qp_impl *qp_impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

DP_CASE(setup_steps_never_wait)
{
    dp_side a;
    memset(&a, 0, sizeof a);
    REQUIRE(dp_side_open(&a));
    dp_conn *c = dp_conn_new(&a, &a, NULL);
    REQUIRE(c);
    int sv[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    signal(SIGALRM, step_blocked);
    alarm(10);
    int err = 0;
    /* The creator offers the region; nobody answers yet. */
    struct shm_conn *cr = ndk_shm_setup_start(qp_impl(c->qa), sv[0], true, &err);
    REQUIRE(cr);
    CHECK_EQ(ndk_shm_setup_step(cr), 1);
    CHECK_EQ(ndk_shm_setup_step(cr), 1);
    /* The other side answers the region at once, then waits for the
     * creator's last word without waiting for it. */
    struct shm_conn *ot = ndk_shm_setup_start(qp_impl(c->qp), sv[1], false, &err);
    REQUIRE(ot);
    CHECK_EQ(ndk_shm_setup_step(ot), 1);
    CHECK(ndk_shm_setup_said_all(ot));
    CHECK_EQ(ndk_shm_setup_step(ot), 1);
    /* The answer is there: the creator is ready, then so is the other. */
    CHECK_EQ(ndk_shm_setup_step(cr), 0);
    CHECK_EQ(ndk_shm_setup_step(ot), 0);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    ndk_shm_setup_abandon(cr);
    ndk_shm_setup_abandon(ot);
    close(sv[0]);
    close(sv[1]);
    dp_conn_close(c);
    dp_side_close(&a);
}

/* A listener on the wildcard address, connected to through the loopback
 * address: the initiator finds it under the wildcard's name. */
DP_CASE(wildcard_listener_selects_shm)
{
    dp_pair x;
    memset(&x, 0, sizeof x);
    REQUIRE(dp_side_open(&x.a) && dp_side_open(&x.p));
    /* The listener's address: the run's family, any address. */
    NDK_SOCKADDR any;
    dp_loop(&any, 0);
    if (any.sa.sa_family == AF_INET6)
        any.in6.sin6_addr = in6addr_any;
    else
        any.in4.sin_addr.s_addr = htonl(INADDR_ANY);
    x.p.host = any;
    x.c = dp_conn_new(&x.a, &x.p, NULL);
    REQUIRE(x.c && dp_conn_listen(x.c));
    /* Connect to the loopback address with the port it got. */
    x.c->laddrlen = dp_loop(&x.c->laddr, nt_sa_port(&x.c->laddr));
    memset(&x.p.host, 0, sizeof x.p.host);
    REQUIRE(dp_conn_connect(x.c));
    CHECK_EQ(qps_on("shm"), 2);
    traffic_and_disconnect(x.c);
    dp_pair_close(&x);
}

/* NDK_SHM=0 for the process, NDK_OPEN_FLAG_NO_SHM on either side. */
DP_CASE(off_switches_keep_tcp)
{
    static const struct {
        const char *what;
        bool env_off;
        ULONG fa, fp;
    } runs[] = {
        {"NDK_SHM=0", true, 0, 0},
        {"NO_SHM on the active side", false, NDK_OPEN_FLAG_NO_SHM, 0},
        {"NO_SHM on the passive side", false, 0, NDK_OPEN_FLAG_NO_SHM},
    };
    for (unsigned i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        fprintf(stderr, "  %s\n", runs[i].what);
        if (runs[i].env_off)
            setenv("NDK_SHM", "0", 1);
        dp_pair x;
        bool up = pair_open(&x, runs[i].fa, runs[i].fp, NULL);
        unsetenv("NDK_SHM");
        REQUIRE(up);
        CHECK_EQ(qps_on("iwarp"), 2);
        CHECK_EQ(qps_on("shm"), 0);
        traffic_and_disconnect(x.c);
        dp_pair_close(&x);
    }
}

/* ---- a rendezvous listener that never answers ---- */

static int g_mute = -1;

/* Takes the listener's name before the initiator asks (the provider's
 * listener has NO_SHM, so the name is free). */
static void bind_mute_name(dp_conn *c)
{
    g_mute = shm_rv_os_listen(&c->laddr.sa);
    CHECK(g_mute >= 0);
}

DP_CASE(mute_peer_keeps_tcp)
{
    unsetenv("NDK_SHM_WAIT_MS"); /* the default bound */
    dp_cfg cfg = dp_cfg_default();
    cfg.before_complete = bind_mute_name;
    dp_pair x;
    uint64_t t0 = tl_now_ns();
    bool up = pair_open(&x, 0, NDK_OPEN_FLAG_NO_SHM, &cfg);
    uint64_t took = (tl_now_ns() - t0) / 1000000;
    setenv("NDK_SHM_WAIT_MS", "3000", 1);
    REQUIRE(up && g_mute >= 0);
    /* The initiator did ask: its hello waits, unanswered, in our queue. */
    int fd = shm_rv_os_accept(g_mute);
    CHECK(fd >= 0);
    struct shm_rv_msg m;
    CHECK(fd >= 0 && recv(fd, &m, sizeof m, MSG_DONTWAIT) == (ssize_t)sizeof m && m.kind == SHM_RV_HELLO);
    if (fd >= 0)
        close(fd);
    close(g_mute);
    g_mute = -1;
    fprintf(stderr, "  connection set up in %llu ms\n", (unsigned long long)took);
    CHECK(took < DP_WAIT_MS);
    CHECK_EQ(qps_on("iwarp"), 2);
    CHECK_EQ(qps_on("shm"), 0);
    traffic_and_disconnect(x.c);
    dp_pair_close(&x);
}

/* ---- initiators that fail the listener's checks ---- */

/* Connects to the listener's name, sends a hello for (local, peer) with
 * descriptor pass (none when -1) as its proof, and tells what came back: 1
 * the listener answered OK, 0 it closed the socket, -1 nothing within the
 * bound or an error. Raw calls only: a forked child runs it too. */
static int ask(const NDK_SOCKADDR *listener, const NDK_SOCKADDR *local, const NDK_SOCKADDR *peer, int pass)
{
    int fd = shm_rv_os_connect(&listener->sa);
    if (fd < 0)
        return -1;
    struct shm_rv_msg m;
    memset(&m, 0, sizeof m);
    m.magic = SHM_RV_MAGIC;
    m.version = SHM_RV_VERSION;
    m.kind = SHM_RV_HELLO;
    m.local = *local;
    m.peer = *peer;
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct iovec iov = {&m, sizeof m};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (pass >= 0) {
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof u.buf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass, sizeof pass);
    }
    int r = -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (sendmsg(fd, &mh, 0) == (ssize_t)sizeof m && poll(&p, 1, DP_WAIT_MS) == 1) {
        ssize_t n = recv(fd, &m, sizeof m, 0);
        r = n == 0 ? 0 : n == (ssize_t)sizeof m && m.kind == SHM_RV_OK ? 1 : -1;
    }
    close(fd);
    return r;
}

/* The same from a child that keeps no descriptor but keep (which it
 * passes) and, with uid, runs as that user. Its answer, or -2. */
static int ask_from_child(const NDK_SOCKADDR *listener, const NDK_SOCKADDR *local, const NDK_SOCKADDR *peer,
                          uid_t uid, int keep)
{
    pid_t pid = fork();
    if (pid < 0)
        return -2;
    if (pid == 0) {
        for (int fd = 3; fd < 4096; fd++)
            if (fd != keep)
                close(fd);
        if (uid && setuid(uid) != 0)
            _exit(9);
        _exit(ask(listener, local, peer, keep) + 2);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) > 3)
        return -2;
    return WEXITSTATUS(status) - 2;
}

/* Our descriptor of the TCP socket whose names are local and peer (the
 * initiator's, which the provider holds in this process), or -1. */
static int tcp_socket_of(const NDK_SOCKADDR *local, const NDK_SOCKADDR *peer)
{
    for (int fd = 3; fd < 4096; fd++) {
        NDK_SOCKADDR a, b;
        socklen_t la = sizeof a, lb = sizeof b;
        int type = 0;
        socklen_t lt = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &lt) == 0 && type == SOCK_STREAM &&
            getsockname(fd, &a.sa, &la) == 0 && getpeername(fd, &b.sa, &lb) == 0 &&
            ndk_sockaddr_equal(&a, local) && ndk_sockaddr_equal(&b, peer))
            return fd;
    }
    return -1;
}

/* Another TCP connection's socket between the loopback addresses (its
 * peer's end closed), or -1. */
static int other_tcp_socket(int fam)
{
    NDK_SOCKADDR a;
    socklen_t len = dp_loop(&a, 0);
    int l = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    socklen_t al = sizeof a;
    bool ok = l >= 0 && s >= 0 && bind(l, &a.sa, len) == 0 && listen(l, 1) == 0 &&
              getsockname(l, &a.sa, &al) == 0 && connect(s, &a.sa, len) == 0;
    if (l >= 0)
        close(l);
    if (!ok && s >= 0)
        close(s);
    return ok ? s : -1;
}

static void refused_hellos(dp_conn *c)
{
    NDK_SOCKADDR local, peer;
    ULONG len = sizeof local;
    DP_REQUIRE_ST(c->ca->Dispatch->NdkGetLocalAddress(c->ca, &local.sa, &len), STATUS_SUCCESS);
    len = sizeof peer;
    DP_REQUIRE_ST(c->ca->Dispatch->NdkGetPeerAddress(c->ca, &peer.sa, &len), STATUS_SUCCESS);
    int mine = tcp_socket_of(&local, &peer);
    int other = other_tcp_socket(local.sa.sa_family);
    int un[2] = {-1, -1};
    REQUIRE(mine >= 0 && other >= 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, un) == 0);
    /* A 4-tuple no connection of the listener has. */
    NDK_SOCKADDR wrong = local;
    if (wrong.sa.sa_family == AF_INET6)
        wrong.in6.sin6_port = htons((uint16_t)(ntohs(wrong.in6.sin6_port) + 1));
    else
        wrong.in4.sin_port = htons((uint16_t)(ntohs(wrong.in4.sin_port) + 1));
    fprintf(stderr, "  a 4-tuple that is not the listener's\n");
    CHECK_EQ(ask(&c->laddr, &wrong, &peer, mine), 0);
    /* The right 4-tuple, from processes that do not hold its socket: all
     * they can pass is nothing, or something else. */
    fprintf(stderr, "  no descriptor as proof\n");
    CHECK_EQ(ask(&c->laddr, &local, &peer, -1), 0);
    fprintf(stderr, "  a UNIX socket as proof\n");
    CHECK_EQ(ask(&c->laddr, &local, &peer, un[0]), 0);
    fprintf(stderr, "  a process that holds another TCP connection, not this one\n");
    CHECK_EQ(ask_from_child(&c->laddr, &local, &peer, 0, other), 0);
    if (geteuid() == 0) {
        fprintf(stderr, "  another user, holding the socket\n");
        CHECK_EQ(ask_from_child(&c->laddr, &local, &peer, 65534, mine), 0);
    } else {
        fprintf(stderr, "  another user: not checked (needs root to change user)\n");
    }
    /* The control: the same hello with the socket itself is answered (the
     * listener then keeps TCP when we go away). */
    fprintf(stderr, "  the holder of the TCP socket (control)\n");
    CHECK_EQ(ask(&c->laddr, &local, &peer, mine), 1);
    close(other);
    close(un[0]);
    close(un[1]);
}

DP_CASE(checks_refuse_keep_tcp)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.before_complete = refused_hellos;
    dp_pair x;
    /* The initiator itself does not ask (NO_SHM); the test does, for it. */
    REQUIRE(pair_open(&x, NDK_OPEN_FLAG_NO_SHM, 0, &cfg));
    CHECK_EQ(qps_on("iwarp"), 2);
    CHECK_EQ(qps_on("shm"), 0);
    traffic_and_disconnect(x.c);
    dp_pair_close(&x);
}

/* ---- silent connections to the listener's name ---- */

#define SILENT 48

static int g_silent[SILENT];

/* Connects SILENT sockets to the listener's name that never say a word,
 * then lets the initiator ask: it must still get the fast path, and the
 * listener must hold at most its bound of them (32). */
static void connect_silent(dp_conn *c)
{
    unsigned before = tl_open_fds();
    for (int i = 0; i < SILENT; i++)
        g_silent[i] = shm_rv_os_connect(&c->laddr.sa);
    /* Then one that says something wrong: once the listener closed it, it
     * has accepted every connection queued before it. */
    int last = shm_rv_os_connect(&c->laddr.sa);
    char junk[8] = {0};
    struct pollfd p = {.fd = last, .events = POLLIN};
    CHECK(last >= 0 && send(last, junk, sizeof junk, 0) == (ssize_t)sizeof junk);
    CHECK(last >= 0 && poll(&p, 1, DP_WAIT_MS) == 1 && recv(last, junk, sizeof junk, 0) == 0);
    unsigned grown = tl_open_fds() - before;
    if (last >= 0)
        close(last);
    fprintf(stderr, "  %u descriptors for %d silent connections and one refused\n", grown, SILENT);
    CHECK(grown <= SILENT + 1 + 32);
}

DP_CASE(silent_connections_do_not_hold_the_fast_path)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.before_complete = connect_silent;
    dp_pair x;
    REQUIRE(pair_open(&x, 0, 0, &cfg));
    for (int i = 0; i < SILENT; i++) {
        CHECK(g_silent[i] >= 0);
        if (g_silent[i] >= 0)
            close(g_silent[i]);
    }
    CHECK_EQ(qps_on("shm"), 2);
    traffic_and_disconnect(x.c);
    dp_pair_close(&x);
}

/* ---- two processes ---- */

static bool put_u32(int fd, uint32_t v)
{
    return write(fd, &v, sizeof v) == (ssize_t)sizeof v;
}

static bool get_u32(int fd, uint32_t *v)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, DP_WAIT_MS) == 1 && read(fd, v, sizeof *v) == (ssize_t)sizeof *v;
}

#define TWO_PROC_BYTES (1 * MiB + 3)

/* The child: connects to port, checks that its QP runs over shared memory,
 * sends TWO_PROC_BYTES, reports, then waits to be killed. */
static void child_initiator(int ctl)
{
    uint32_t port = 0, ok = 0;
    dp_side s;
    memset(&s, 0, sizeof s);
    if (!get_u32(ctl, &port) || !dp_side_open(&s))
        _exit(1);
    dp_conn *c = dp_conn_new(&s, &s, NULL);
    if (!c)
        _exit(1);
    c->laddrlen = dp_loop(&c->laddr, port);
    c->ca = dp_connector_new(&s);
    NDK_SOCKADDR src;
    ULONG srclen = dp_side_addr(&s, &src, 0);
    dp_req *rc = dp_req_new("NdkConnect");
    rc->started = true;
    NTSTATUS st = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa, c->laddrlen,
                                              c->cfg.ird, c->cfg.ord, NULL, 0, dp_req_cb, rc);
    if (dp_finish(rc, st, DP_WAIT_MS) == STATUS_SUCCESS) {
        dp_req *rcc = dp_req_new("NdkCompleteConnect");
        st = c->ca->Dispatch->NdkCompleteConnect(c->ca, dp_disc_cb, &c->disc_a, dp_req_cb, rcc);
        if (dp_finish(rcc, st, DP_WAIT_MS) == STATUS_SUCCESS && qps_on("shm") == 1) {
            dp_mr m;
            uint8_t *buf = dp_buf_reg(&s, &m, TWO_PROC_BYTES, 0, 21);
            NDK_SGE sge = dp_sge(&m, 0, TWO_PROC_BYTES);
            NDK_RESULT_EX r;
            ok = buf && dp_send(c->qa, DP_CTX(1), &sge, 1, 0) == STATUS_SUCCESS &&
                 dp_wait_ex(c->cqa, &r, 1, DP_WAIT_MS) == 1 && r.Status == STATUS_SUCCESS;
        }
    }
    put_u32(ctl, ok);
    uint32_t never;
    get_u32(ctl, &never); /* killed while waiting here */
    _exit(2);
}

DP_CASE(two_processes_select_shm_and_survive_kill)
{
    int sp[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
    /* Forked before this process opens an adapter: the child starts from
     * a library with no device, engine or thread. */
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(sp[0]);
        child_initiator(sp[1]);
    }
    close(sp[1]);
    dp_side p;
    memset(&p, 0, sizeof p);
    bool up = dp_side_open(&p);
    dp_conn *c = up ? dp_conn_new(NULL, &p, NULL) : NULL;
    up = c && dp_conn_listen(c) && put_u32(sp[0], nt_sa_port(&c->laddr));
    if (c)
        c->cp = up ? dp_conn_incoming(c, DP_WAIT_MS) : NULL;
    dp_req *ra = dp_req_new("NdkAccept");
    dp_mr m;
    uint8_t *dst = dp_buf_reg(&p, &m, TWO_PROC_BYTES + 100, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    NDK_SGE sge = dp_sge(&m, 0, TWO_PROC_BYTES + 100);
    if (c && c->cp && dst) {
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(10), &sge, 1), STATUS_SUCCESS);
        ra->started = true;
        ra->returned = c->cp->Dispatch->NdkAccept(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord, NULL, 0, dp_disc_cb,
                                                  &c->disc_p, dp_req_cb, ra);
        DP_CHECK_ST(dp_finish(ra, ra->returned, DP_WAIT_MS), STATUS_SUCCESS);
        CHECK_EQ(qps_on("shm"), 1);
        EXPECT_ONE(c->cqp, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(10), TWO_PROC_BYTES);
        DP_CHECK_DATA(dst, TWO_PROC_BYTES, 21, 0);
    } else {
        CHECK(!"the passive side was set up");
    }
    uint32_t child_ok = 0;
    CHECK(get_u32(sp[0], &child_ok));
    CHECK_EQ(child_ok, 1);
    /* The peer process dies with receives outstanding here: all of them
     * complete (cancelled), the disconnect event comes once. */
    if (c && c->cp) {
        for (int i = 0; i < 3; i++)
            DP_CHECK_ST(dp_recv(c->qp, DP_CTX(20 + i), &sge, 1), STATUS_SUCCESS);
    }
    kill(pid, SIGKILL);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status));
    close(sp[0]);
    if (c && c->cp) {
        NDK_RESULT_EX r[3];
        DP_WAIT(c->cqp, r, 3);
        for (int i = 0; i < 3; i++)
            DP_CHECK_CQE(r[i], STATUS_CANCELLED, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(20 + i), -1);
        CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
        DP_CHECK_QUIET(c->cqp);
        CHECK_EQ(tl_event_count(&c->disc_p), 1);
    }
    dp_mr_close(&m);
    dp_conn_close(c);
    dp_side_close(&p);
}

/* The look at the peer's pidfd that every single-copy transfer makes
 * first (xp_shm.c, peer_move; a pid names another process once the peer
 * ended and was reaped) made to report the peer ended, for the passive
 * side's QP alone (the device's test hook shm_peer_ended). */
static struct ndk_qp_impl *_Atomic g_ended_qp;
static _Atomic unsigned g_ended_looks;

static bool peer_ended_for(struct ndk_qp_impl *qp)
{
    if (qp != atomic_load(&g_ended_qp))
        return false;
    atomic_fetch_add(&g_ended_looks, 1);
    return true;
}

static bool all_zero(const uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i])
            return false;
    return true;
}

/* The passive side, with three receives posted, finds its peer ended at
 * a transfer: as the target pulling a Send of 32 KiB (read: false;
 * single copy: larger than the rings carry),
 * or as the initiator moving its granted part of a split Read of 256 KiB
 * (read). Nothing is moved (the receive the Send took, the granted part
 * of the Read's sink stay zero); every request of the passive side
 * completes once, cancelled; its disconnect event fires once, as when
 * the engine sees the pidfd readable; then the active side's requests
 * complete too, and nothing is left (the case's checks, LeakSanitizer). */
static void peer_ended_at_transfer(bool read)
{
    dp_pair x;
    REQUIRE(pair_open(&x, 0, 0, NULL));
    dp_conn *c = x.c;
    REQUIRE(qps_on("shm") == 2);
    const size_t len = 256 * KiB;
    dp_mr ma, mp;
    uint8_t *src = dp_buf_reg(&x.a, &ma, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ, 5);
    uint8_t *dst = dp_buf_reg(&x.p, &mp, 4 * len, DP_SINK_FLAGS, 0);
    REQUIRE(src && dst);
    memset(dst, 0, 4 * len);
    for (int i = 0; i < 3; i++) {
        NDK_SGE g = dp_sge(&mp, i * len, (ULONG)len);
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(10 + i), &g, 1), STATUS_SUCCESS);
    }
    atomic_store(&g_ended_looks, 0);
    atomic_store(&g_ended_qp, qp_impl(c->qp));
    struct ndk_test_hooks hooks = {.shm_peer_ended = peer_ended_for};
    REQUIRE(ndk_test_hooks_set(x.p.ad, &hooks));
    if (read) {
        NDK_SGE g = dp_sge(&mp, 3 * len, (ULONG)len);
        DP_CHECK_ST(dp_read(c->qp, DP_CTX(20), &g, 1, src, ma.rtok, 0), STATUS_SUCCESS);
    } else {
        NDK_SGE g = dp_sge(&ma, 0, 32 * 1024);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(30), &g, 1, 0), STATUS_SUCCESS);
    }
    ULONG n = read ? 4 : 3;
    NDK_RESULT_EX r[4];
    DP_WAIT(c->cqp, r, n);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_ST(r[i].Status, STATUS_CANCELLED);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(dp_count_ctx(r, n, DP_CTX(10 + i)), 1);
    if (read)
        CHECK_EQ(dp_count_ctx(r, n, DP_CTX(20)), 1);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    CHECK(atomic_load(&g_ended_looks) >= 1);
    /* The target moves the first half of a split Read itself, rounded
     * down to 4 KiB (docs/shm.md, Bandwidth); the rest was the passive
     * side's, which it never moved. */
    CHECK(read ? all_zero(dst + 3 * len + len / 2, len / 2) : all_zero(dst, len));
    REQUIRE(ndk_test_hooks_set(x.p.ad, NULL));
    atomic_store(&g_ended_qp, NULL);
    /* The application answers its disconnect event: the active side's
     * connection ends, and its Send (it waited for the pull) completes. */
    dp_disconnect(c->cp);
    if (!read) {
        DP_WAIT(c->cqa, r, 1);
        CHECK(r[0].RequestContext == DP_CTX(30));
    }
    /* Nothing completes twice, and the event does not come again (a
     * short look: the ends ran before the event and the answer). */
    CHECK_EQ(dp_quiet(c->cqp, r, 4, 50) + dp_quiet(c->cqa, r, 4, 1), 0);
    CHECK_EQ(tl_event_count(&c->disc_p), 1);
    dp_mr_close(&ma);
    dp_mr_close(&mp);
    dp_pair_close(&x);
}

DP_CASE(peer_found_ended_at_a_pull)
{
    peer_ended_at_transfer(false);
}

DP_CASE(peer_found_ended_at_a_granted_part)
{
    peer_ended_at_transfer(true);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    const char *why = NULL;
    NDK_ADAPTER *ad = NULL;
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad) == STATUS_SUCCESS) {
        if (!ndk_shm_available(ad, &why))
            tl_skip_all(why);
        ndk_close_adapter(ad);
    }
    /* Generous for loaded and sanitized runs; mute_peer_keeps_tcp checks
     * the default. */
    setenv("NDK_SHM_WAIT_MS", "3000", 1);
    unsetenv("NDK_SHM");
    RUN_FAM(two_processes_select_shm_and_survive_kill);
    RUN_FAM(one_process_selects_shm);
    RUN_FAM(wildcard_listener_selects_shm);
    RUN_FAM(many_connections_add_no_thread);
    RUN_FAM(joins_in_flight_on_one_engine);
    RUN_FAM(setup_steps_never_wait);
    RUN_FAM(off_switches_keep_tcp);
    RUN_FAM(mute_peer_keeps_tcp);
    RUN_FAM(checks_refuse_keep_tcp);
    RUN_FAM(silent_connections_do_not_hold_the_fast_path);
    RUN_FAM(peer_found_ended_at_a_pull);
    RUN_FAM(peer_found_ended_at_a_granted_part);
    return tl_finish();
}
