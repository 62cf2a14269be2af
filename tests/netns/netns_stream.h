/*
 * netns_stream.h - what the two-host netns tests (test_path_faults.c,
 * test_impaired_paths.c) share: shell commands, the three namespaces
 * (client, router, server) and entering them, the two hosts' adapters and
 * their connection, and a verified stream of RDMA Writes, Reads and Sends.
 *
 * The stream: chunk i of n is operation i % 3 (a Write into the server's
 * memory, a Read from it, a Send into a receive posted beforehand), each
 * from its own region filled with its own pattern, so that every byte can
 * be checked where it lands. stream_check checks that every request and
 * every receive completed exactly once, with a status of the allowed set.
 *
 * Everything is static: each test is one translation unit.
 */
#ifndef NDK_TESTS_NETNS_STREAM_H
#define NDK_TESTS_NETNS_STREAM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setns() */
#endif
#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>

#include "dptest.h"

/* Runs a shell command; true when it exited 0 (else it is printed). */
__attribute__((format(printf, 1, 2))) static bool sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0)
        fprintf(stderr, "    command failed (%d): %s\n", rc, cmd);
    return rc == 0;
}

/* The hosts' namespaces, named PREFIX<pid>-cli, -rtr and -srv; the client's
 * and the server's open (for setns). */
static char ns_cli[32], ns_rtr[32], ns_srv[32];
static int fd_cli = -1, fd_srv = -1;

static bool namespaces_add(const char *prefix)
{
    int pid = (int)getpid();
    snprintf(ns_cli, sizeof ns_cli, "%s%d-cli", prefix, pid);
    snprintf(ns_rtr, sizeof ns_rtr, "%s%d-rtr", prefix, pid);
    snprintf(ns_srv, sizeof ns_srv, "%s%d-srv", prefix, pid);
    return sh("ip netns add %s && ip netns add %s && ip netns add %s", ns_cli, ns_rtr, ns_srv);
}

/* Once the hosts are set up: their namespaces' descriptors. */
static bool namespaces_open(void)
{
    char path[64];
    snprintf(path, sizeof path, "/run/netns/%s", ns_cli);
    fd_cli = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof path, "/run/netns/%s", ns_srv);
    fd_srv = open(path, O_RDONLY | O_CLOEXEC);
    return fd_cli >= 0 && fd_srv >= 0;
}

static void namespaces_del(void)
{
    const char *names[] = {ns_cli, ns_rtr, ns_srv};
    for (int i = 0; i < 3; i++) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null", names[i]);
        if (system(cmd) < 0)
            fprintf(stderr, "cannot remove namespace %s\n", names[i]);
    }
}

/* dp_side.enter: the calling thread moves into the side's namespace. */
static void enter(const dp_side *s)
{
    if (setns(s->netns, CLONE_NEWNET) != 0) {
        fprintf(stderr, "setns: %s\n", strerror(errno));
        abort();
    }
}

/* The options of both tests' hosts: a dead path is found in
 * user_timeout_ms (TCP_USER_TIMEOUT) and by keep-alives after about 3 s. */
static NDK_OPEN_OPTIONS host_options(ULONG user_timeout_ms)
{
    NDK_OPEN_OPTIONS o = dp_options();
    o.TcpUserTimeoutMs = user_timeout_ms;
    o.KeepAliveIdleSeconds = 1;
    o.KeepAliveIntervalSeconds = 1;
    o.KeepAliveProbes = 2;
    return o;
}

/* Opens the client's and the server's adapter, each in its namespace at
 * its IPv4 address. */
static bool hosts_open(dp_side *cli, dp_side *srv, const char *cli_addr, const char *srv_addr,
                       const NDK_OPEN_OPTIONS *o)
{
    memset(cli, 0, sizeof *cli);
    memset(srv, 0, sizeof *srv);
    cli->enter = srv->enter = enter;
    cli->netns = fd_cli;
    srv->netns = fd_srv;
    cli->host.in4.sin_family = srv->host.in4.sin_family = AF_INET;
    inet_pton(AF_INET, cli_addr, &cli->host.in4.sin_addr);
    inet_pton(AF_INET, srv_addr, &srv->host.in4.sin_addr);
    return dp_side_open_as(cli, "fc", o) && dp_side_open_as(srv, "fs", o);
}

/* An established connection from the client to the server (disconnect
 * events with NdkCompleteConnectEx's callback), or NULL. */
static dp_conn *connect_hosts(dp_side *cli, dp_side *srv)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.disc_ex = true;
    dp_conn *c = dp_conn_new(cli, srv, &cfg);
    return c && dp_conn_establish(c) ? c : NULL;
}

/* How long after t0 something happened, in ms. */
static unsigned ms_since(uint64_t t0)
{
    return (unsigned)((tl_now_ns() - t0) / 1000000u);
}

#define STREAM_MAX 48u
#define RECV_CTX(i) DP_CTX(0x1000u + (i))
#define OP_CTX(i) DP_CTX(1u + (i))

typedef struct stream {
    dp_conn *c;
    size_t chunk;
    unsigned n;         /* chunks, a multiple of 3, at most STREAM_MAX */
    uint32_t seed;      /* of the patterns */
    dp_mr csrc, csink;  /* client: Write/Send source, Read sink */
    dp_mr sdst, ssrc;   /* server: Write/receive target, Read source */
} stream;

/* Registers the four regions, fills the sources, posts the receives. */
static bool stream_init(stream *st, dp_conn *c, size_t chunk, unsigned n, uint32_t seed)
{
    memset(st, 0, sizeof *st);
    st->c = c;
    st->chunk = chunk;
    /* Whole rounds of three, so the last request is a Send (stream_check). */
    st->n = (n < STREAM_MAX ? n : STREAM_MAX) / 3 * 3;
    st->seed = seed;
    size_t len = chunk * st->n;
    if (!dp_buf_reg(c->a, &st->csrc, len, 0, 0) || !dp_buf_reg(c->a, &st->csink, len, DP_SINK_FLAGS, 0) ||
        !dp_buf_reg(c->p, &st->sdst, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0) ||
        !dp_buf_reg(c->p, &st->ssrc, len, NDK_MR_FLAG_ALLOW_REMOTE_READ, 0))
        return false;
    for (unsigned i = 0; i < st->n; i++) {
        dp_fill(st->csrc.addr + (size_t)i * chunk, chunk, seed + 100 + i, 0);
        dp_fill(st->ssrc.addr + (size_t)i * chunk, chunk, seed + 200 + i, 0);
        if (i % 3 == 2) {
            NDK_SGE sge = dp_sge(&st->sdst, (size_t)i * chunk, (ULONG)chunk);
            DP_CHECK_ST(dp_recv(c->qp, RECV_CTX(i), &sge, 1), STATUS_SUCCESS);
        }
    }
    return true;
}

static void stream_post(stream *st, unsigned from, unsigned to)
{
    for (unsigned i = from; i < to; i++) {
        size_t off = (size_t)i * st->chunk;
        ULONG len = (ULONG)st->chunk;
        NDK_SGE src = dp_sge(&st->csrc, off, len), sink = dp_sge(&st->csink, off, len);
        NTSTATUS s;
        if (i % 3 == 0)
            s = dp_write(st->c->qa, OP_CTX(i), &src, 1, st->sdst.addr + off, st->sdst.rtok, 0);
        else if (i % 3 == 1)
            s = dp_read(st->c->qa, OP_CTX(i), &sink, 1, st->ssrc.addr + off, st->ssrc.rtok, 0);
        else
            s = dp_send(st->c->qa, OP_CTX(i), &src, 1, 0);
        DP_CHECK_ST(s, STATUS_SUCCESS);
    }
}

static unsigned stream_receives(const stream *st)
{
    return st->n / 3;
}

/* Every request of the stream (and every receive) completed exactly once,
 * within ms, with a status of the allowed set; and nothing more came. With
 * `exact`, all succeeded and every byte is where it belongs. False when a
 * check failed. */
static bool stream_check(stream *st, unsigned ms, bool exact)
{
    int fails = tl_failures;
    NDK_RESULT_EX ops[STREAM_MAX], recvs[STREAM_MAX / 3];
    ULONG nops = dp_wait_ex(st->c->cqa, ops, st->n, ms);
    ULONG nrecv = dp_wait_ex(st->c->rcqp, recvs, stream_receives(st), ms);
    CHECK_EQ(nops, st->n);
    CHECK_EQ(nrecv, stream_receives(st));
    for (unsigned i = 0; i < st->n; i++) {
        CHECK_EQ(dp_count_ctx(ops, nops, OP_CTX(i)), 1);
        if (i % 3 == 2)
            CHECK_EQ(dp_count_ctx(recvs, nrecv, RECV_CTX(i)), 1);
    }
    for (ULONG k = 0; k < nops; k++) {
        unsigned i = (unsigned)((uintptr_t)ops[k].RequestContext - 1u);
        NTSTATUS s = ops[k].Status;
        /* A Write or Send completes when TCP took it, so it may have
         * succeeded before the path broke; a Read needs the peer. */
        if (exact || i % 3 == 1)
            DP_CHECK_ST(s, exact ? STATUS_SUCCESS : STATUS_CANCELLED);
        else if (s != STATUS_SUCCESS)
            DP_CHECK_ST(s, STATUS_CANCELLED);
    }
    for (ULONG k = 0; k < nrecv; k++) {
        if (exact || recvs[k].Status != STATUS_CANCELLED) {
            DP_CHECK_ST(recvs[k].Status, STATUS_SUCCESS);
            CHECK_EQ(recvs[k].BytesTransferred, st->chunk);
        }
    }
    DP_CHECK_QUIET(st->c->cqa);
    DP_CHECK_QUIET(st->c->rcqp);
    if (exact) {
        /* The last Send's receive completed after every Write before it
         * was placed (one ordered stream), so all the data is there now. */
        for (unsigned i = 0; i < st->n; i++) {
            size_t off = (size_t)i * st->chunk;
            if (i % 3 == 1)
                DP_CHECK_DATA(st->csink.addr + off, st->chunk, st->seed + 200 + i, 0);
            else
                DP_CHECK_DATA(st->sdst.addr + off, st->chunk, st->seed + 100 + i, 0);
        }
    }
    return tl_failures == fails;
}

static void stream_close(stream *st)
{
    dp_mr_close(&st->csrc);
    dp_mr_close(&st->csink);
    dp_mr_close(&st->sdst);
    dp_mr_close(&st->ssrc);
}

#endif
