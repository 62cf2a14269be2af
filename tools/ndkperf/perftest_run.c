/*
 * perftest_run.c - ndkperf --perftest's sequence (perftest.h): setting up
 * both connections, the exchanges around the data phase, the results, and
 * each role from start to end.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/args.h"
#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "ndkperf/perftest.h"

static void print_header(struct pt *t)
{
    const struct endpoint *e = &t->tst;
    tc_out_lock();
    printf("---------------------------------------------------------------------------------------\n");
    printf("                    %s Test (ndkperf --perftest)\n", test_title(t->p.test));
    const NDK_ADAPTER_INFO *in = &e->a->info;
    printf(" Adapter         : %s, NDK %u.%u, %s\n", e->a->name, in->Version.Major, in->Version.Minor,
           in->RdmaTechnology == NdkiWarp ? "iWARP" : "not iWARP");
    printf(" Protocol        : perftest %s over rdma_cm (-R), peer version \"%s\"\n", PT_VERSION, t->peer_version);
    printf(" Role            : %s\n", t->p.server ? "server" : "client");
    if (t->p.all_sizes)
        printf(" Message sizes   : %u .. %u bytes (-a)\n", NDKPERF_MIN_ALL_SIZE, NDKPERF_MAX_SIZE);
    else
        printf(" Message size    : %" PRIu32 " bytes\n", t->p.size);
    if (t->p.iters)
        printf(" Iterations      : %" PRIu32 "\n", t->p.iters);
    else
        printf(" Duration        : %" PRIu32 " s\n", t->p.duration_s);
    printf(" TX depth        : %" PRIu32 "\n", t->p.tx_depth);
    if (test_uses_send(t->p.test))
        printf(" RX depth        : %" PRIu32 "%s\n", t->p.rx_depth,
               t->p.test == T_SEND_BW ? " (iWARP credits: RDMA Write of the receive count)" : "");
    if (t->p.test == T_READ_BW)
        printf(" Outstand reads  : %" PRIu32 " (effective IRD %" PRIu32 ", ORD %" PRIu32 ")\n", t->p.outs, e->ird,
               e->ord);
    printf("---------------------------------------------------------------------------------------\n");
    printf(" local address: QPN 0x%04" PRIx32 " PSN 0x%06" PRIx32 " RKey 0x%08" PRIx32 " VAddr 0x%016" PRIx64 "\n",
           t->mine.qpn, t->mine.psn, t->mine.rkey, t->mine.vaddr);
    printf(" remote address: QPN 0x%04" PRIx32 " PSN 0x%06" PRIx32 " RKey 0x%08" PRIx32 " VAddr 0x%016" PRIx64 "\n",
           t->peer.qpn, t->peer.psn, t->peer.rkey, t->peer.vaddr);
    printf("---------------------------------------------------------------------------------------\n");
    fflush(stdout);
    tc_out_unlock();
}

static bool data_phase_over(struct pt *t)
{
    t->tst_ready = false;
    return !t->close_test_first || ep_disconnect(&t->tst, false);
}

/*
 * The latency tests, one size (-s) or every size (-a, 2 B .. 8 MiB, as
 * perftest's -a): send_lat exchanges pingpong_dest once more before each
 * size (perftest posts its receives for the size, then synchronises);
 * write_lat runs the sizes back to back. A results line per size.
 */
static bool run_lat(struct pt *t)
{
    struct test_params sizes_of = {.all_sizes = t->p.all_sizes, .size = t->p.size};
    uint32_t sizes[32];
    unsigned n = size_list(&sizes_of, sizes, 32);
    tc_table_columns(test_is_lat(t->p.test));
    for (unsigned i = 0; i < n; i++) {
        t->p.size = sizes[i];
        if (t->p.test == T_SEND_LAT && !pt_xchg_dest(t, "pingpong_dest before a size", t->o.timeout_ms))
            return false;
        struct tc_lat_samples lat = {0};
        bool ok = t->p.test == T_SEND_LAT ? pt_pingpong_send(t, &lat) : pt_pingpong_write(t, &lat);
        if (ok)
            tc_table_lat(t->p.size, &lat, 0.5);
        tc_lat_free(&lat);
        if (!ok)
            return false;
    }
    tc_table_rule();
    if (!data_phase_over(t))
        return false;
    return t->p.test != T_SEND_LAT || pt_xchg_dest(t, "closing pingpong_dest", t->o.timeout_ms);
}

/* The bandwidth tests' data phase, and the line of the side that
 * measured it (*mine: its numbers). */
static bool run_bw(struct pt *t, struct tc_bw_result *mine)
{
    enum test_kind kind = t->p.test;
    struct tc_bw_samples bw = {0};
    bool ok = true;
    if (!t->p.server)
        ok = pt_client_bw(t, &bw);
    else if (kind == T_SEND_BW)
        ok = pt_server_send_bw(t, &bw);
    if (ok && (!t->p.server || kind == T_SEND_BW)) {
        tc_table_columns(false);
        if (tc_bw_result_of(t->p.size, &bw, mine))
            tc_table_bw_result(t->p.size, mine, NULL);
        else
            tc_table_too_short(t->p.size, mine->msgs);
    }
    tc_bw_free(&bw);
    return ok && data_phase_over(t);
}

/* write_bw, read_bw after the data phase: pingpong_dest, the report (the
 * server prints the client's numbers), pingpong_dest. */
static bool report_rdma_bw(struct pt *t, const struct tc_bw_result *mine)
{
    struct tc_bw_result peer = {0};
    uint32_t peer_size = 0;
    if (!pt_xchg_dest(t, "pingpong_dest after the data phase", pt_after_data_ms(t)) ||
        !pt_xchg_report(t, mine, &peer, &peer_size))
        return false;
    if (t->p.server) {
        tc_table_columns(false);
        tc_table_bw_result(peer_size, &peer, "(measured by the client)");
    }
    tc_table_rule();
    return pt_xchg_dest(t, "closing pingpong_dest", t->o.timeout_ms);
}

/* From message 6 on: the exchanges around the data phase, and the data
 * phase itself, with the results printed. */
static bool run_test(struct pt *t)
{
    struct ctl_msg in;
    uint8_t buf[PT_DEST_LEN];
    memset(buf, 0, sizeof buf);
    if (!pt_xchg(t, buf, PT_DEST_LEN, false, &in, PT_DEST_LEN, t->o.timeout_ms, "second synchronisation"))
        return false;
    unsigned k = pt_dests_before(t->p.test);
    for (unsigned i = 0; i < k; i++)
        if (!pt_xchg_dest(t, "pingpong_dest", t->o.timeout_ms))
            return false;
    print_header(t);
    if (test_is_lat(t->p.test))
        return run_lat(t);
    struct tc_bw_result mine = {0};
    if (!run_bw(t, &mine))
        return false;
    if (t->p.test != T_SEND_BW)
        return report_rdma_bw(t, &mine);
    tc_table_rule();
    /* The server of -D ended its loop on this message: it is queued. */
    return pt_xchg_dest(t, "closing pingpong_dest", pt_after_data_ms(t));
}

static void layouts(const struct pt *t, const NDK_ADAPTER_INFO *in, struct layout *cl, struct layout *tl)
{
    memset(cl, 0, sizeof *cl);
    cl->region = 64;
    cl->ctrl_tx_slots = 1;
    cl->ctrl_rx_slots = CTL_SLOTS;
    cl->sq_depth = 4;
    cl->rq_depth = CTL_SLOTS;
    cl->cq_depth = 4 + CTL_SLOTS + 16;
    cl->signal_every = 1;

    const struct pt_params *p = &t->p;
    memset(tl, 0, sizeof *tl);
    /* The peer's small messages walk through a cycle buffer (perftest's
     * increase_rem_addr): twice the larger of it and the message covers
     * every address perftest may use. */
    uint32_t unit = p->size > PT_CYCLE_BUFFER ? p->size : PT_CYCLE_BUFFER;
    tl->region = 2 * unit;
    if (test_is_lat(p->test)) {
        tl->sq_depth = 16;
        tl->signal_every = 8;
    } else if (p->server) {
        tl->sq_depth = 16; /* credit Writes */
        tl->signal_every = 4;
    } else {
        tl->sq_depth = p->tx_depth + 1;
        tl->signal_every = p->tx_depth / 4 ? p->tx_depth / 4 : 1;
    }
    if (tl->sq_depth > in->MaxInitiatorQueueDepth)
        tl->sq_depth = in->MaxInitiatorQueueDepth;
    if (p->test == T_SEND_BW && p->server)
        tl->rq_depth = p->rx_depth;
    else if (p->test == T_SEND_LAT)
        tl->rq_depth = LAT_RECVS;
    else
        tl->rq_depth = 1; /* unused */
    tl->ctrl_tx_slots = tl->sq_depth + 1;
    tl->ctrl_rx_slots = 0;
    tl->cq_depth = tl->sq_depth + tl->rq_depth + 16;
    tl->inline_size = 0;
}

static bool pre_post(struct pt *t)
{
    if (t->o.wait != TC_WAIT_EVENTS) {
        /* An overflow is then reported instead of a silent stall. */
        t->ctl.c.cq->Dispatch->NdkArmCq(t->ctl.c.cq, NDK_CQ_NOTIFY_ERRORS);
        t->tst.c.cq->Dispatch->NdkArmCq(t->tst.c.cq, NDK_CQ_NOTIFY_ERRORS);
    }
    for (uint32_t i = 0; i < CTL_SLOTS; i++)
        if (!post_ctrl_recv(&t->ctl, i, CTRL_SLOT))
            return false;
    bool data = (t->p.test == T_SEND_BW && t->p.server) || t->p.test == T_SEND_LAT;
    for (uint32_t i = 0; data && i < t->tst.rq_depth; i++)
        if (!post_data_recv(&t->tst))
            return false;
    /* A recognisable pattern, and zeros where the pings and credits go. */
    for (uint32_t i = 0; i < t->tst.region; i++)
        t->tst.source[i] = (uint8_t)(i * 7 + 1);
    memset(t->tst.target, 0, t->tst.region);
    if (t->p.test == T_WRITE_LAT)
        t->tst.source[t->p.size - 1] = 0;
    return true;
}

static void fill_mine(struct pt *t, const NDK_SOCKADDR *local)
{
    struct pt_dest *d = &t->mine;
    memset(d, 0, sizeof *d);
    d->out_reads = t->p.test == T_READ_BW ? t->p.outs : 1;
    /* No QP numbers in NDK: a distinct small number, as perftest prints it. */
    d->qpn = (uint32_t)getpid() & 0xffffff;
    srand48((long)(tc_now_ns() ^ (uint64_t)getpid()));
    d->psn = (uint32_t)lrand48() & 0xffffff;
    d->rkey = t->tst.local.token;
    d->vaddr = t->tst.local.va;
    /* The GID of an IPv4 address, as RoCE v2 writes it (::ffff:a.b.c.d). */
    if (local->sa.sa_family == AF_INET) {
        d->gid[10] = d->gid[11] = 0xff;
        memcpy(d->gid + 12, &local->in4.sin_addr, 4);
    } else {
        memcpy(d->gid, &local->in6.sin6_addr, 16);
    }
}

/* One adapter for both connections (the server's listener hands out
 * both), opened for `near` (the listen address, the route's source). */
static bool open_both(struct pt *t, const NDK_SOCKADDR *near, const char *near_what)
{
    ep_init(&t->ctl, t->role, &t->o);
    ep_init(&t->tst, t->role, &t->o);
    t->inited = true;
    /* perftest tears its connections down as soon as it is done, at times
     * abortively: once the results are in, that is no failure. */
    t->ctl.peer_may_abort = t->tst.peer_may_abort = true;
    if (!ep_open(&t->ctl, near, near_what))
        return false;
    ep_share(&t->tst, &t->ctl);
    const struct tc_adapter *a = t->ctl.a;
    if (t->p.test == T_WRITE_LAT && !(a->info.AdapterFlags & NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED)) {
        tc_complain(t->role, "adapter %s does not place data in order: write_lat cannot poll the last byte", a->name);
        return false;
    }
    struct layout cl, tl;
    layouts(t, &a->info, &cl, &tl);
    if (!ep_create(&t->ctl, &cl) || !ep_create(&t->tst, &tl))
        return false;
    t->signal_every = t->tst.signal_every;
    return pre_post(t);
}

static void read_limits(const struct pt *t, ULONG *ird, ULONG *ord)
{
    /* perftest: IRD = ORD = the outstanding reads for read tests, else 0. */
    const NDK_ADAPTER_INFO *in = &t->ctl.a->info;
    ULONG v = t->p.test == T_READ_BW ? t->p.outs : 0;
    *ird = v < in->MaxInboundReadLimit ? v : in->MaxInboundReadLimit;
    *ord = v < in->MaxOutboundReadLimit ? v : in->MaxOutboundReadLimit;
}

/* The test connection: perftest's server listens again for it, so the
 * client tries for a while, as perftest's does. */
static bool connect_test(struct pt *t, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst)
{
    ULONG ird, ord;
    read_limits(t, &ird, &ord);
    uint8_t rep[64];
    uint32_t rep_len = 0;
    t->tst.quiet_connect = true;
    for (int i = 0; i < CONNECT_TRIES; i++) {
        if (ep_connect(&t->tst, src, dst, NULL, 0, ird, ord, rep, sizeof rep, &rep_len))
            return true;
        ep_drop_connector(&t->tst);
        usleep(CONNECT_RETRY_MS * 1000);
    }
    t->tst.quiet_connect = false;
    if (ep_connect(&t->tst, src, dst, NULL, 0, ird, ord, rep, sizeof rep, &rep_len))
        return true;
    tc_complain(t->role, "the test connection: perftest's server did not listen again within %u s of the control "
                "exchange", CONNECT_TRIES * CONNECT_RETRY_MS / 1000);
    return false;
}

/*
 * The client's end. perftest's server closes when it is done, and siw may
 * still be completing its last Send then: a FIN from us at that moment
 * makes siw complete that Send with an error (IBV_WC_LOC_QP_OP_ERR, seen
 * as "Bad wc status 2" from a guest ib_send_bw server) although we have
 * received it. So the server goes first, within a bound.
 */
static bool client_close(struct pt *t)
{
    t->tst_ready = t->ctl_ready = false;
    ep_peer_left(&t->tst, LINGER_MS);
    bool ok = ep_disconnect(&t->tst, false);
    ep_peer_left(&t->ctl, LINGER_MS);
    return ep_disconnect(&t->ctl, false) && ok;
}

int pt_client(struct pt *t)
{
    NDK_SOCKADDR dst, src;
    if (!tc_resolve(t->role, "the server's address", t->p.address, AF_UNSPEC, &dst))
        return TC_EXIT_FAILED;
    tc_sockaddr_set_port(&dst, t->o.port);
    bool routed = tc_route_source(&dst, &src);
    if (!open_both(t, routed ? &src : NULL, "where the route to the server leaves from") ||
        !tc_adapter_source(t->ctl.a, &dst, routed ? &src : NULL, &src))
        return TC_EXIT_FAILED;
    uint8_t rep[64];
    uint32_t rep_len = 0;
    if (!ep_connect(&t->ctl, &src, &dst, NULL, 0, 0, 0, rep, sizeof rep, &rep_len))
        return TC_EXIT_FAILED;
    t->ctl_ready = true;
    fill_mine(t, &src);
    if (!pt_exchange_setup(t) || !connect_test(t, &src, &dst))
        return TC_EXIT_FAILED;
    t->tst_ready = true;
    if (!run_test(t))
        return TC_EXIT_FAILED;
    return client_close(t) ? TC_EXIT_OK : TC_EXIT_FAILED;
}

/* Opens and listens for the control and the test connection. */
static bool server_listen(struct pt *t)
{
    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    if (t->o.bind && !tc_resolve(t->role, "the listen address (-B)", t->o.bind, AF_UNSPEC, &addr))
        return false;
    if (!t->o.bind)
        addr.sa.sa_family = AF_INET;
    tc_sockaddr_set_port(&addr, t->o.port);
    if (!open_both(t, &addr, "the listen address (-B)") || !ep_listen(&t->ctl, &addr, 2))
        return false;
    char ip[TC_ADDR_BUF];
    const NDK_SOCKADDR *bound = &t->ctl.listener.bound;
    tc_say(NULL, "ndkperf --perftest %s server: listening on %s port %u (adapter %s), waiting up to %u s for "
                 "perftest's client (%s -R)",
           test_name(t->p.test), tc_format_addr(bound, false, ip, sizeof ip), tc_sockaddr_port(bound),
           t->ctl.a->name, t->o.accept_timeout_ms / 1000, test_name(t->p.test));
    return true;
}

/* A request taken from the listener and accepted with the limits. */
static bool server_accept(struct pt *t, struct endpoint *e, unsigned ms, ULONG ird, ULONG ord)
{
    uint8_t pd[64];
    uint32_t len = 0;
    ULONG rird = 0, rord = 0;
    /* Our limits capped by the client's. */
    return ep_wait_request(e, &t->ctl, ms) && ep_request_data(e, pd, sizeof pd, &len, &rird, &rord) &&
           ep_accept(e, NULL, 0, ird < rird ? ird : rird, ord < rord ? ord : rord);
}

int pt_server(struct pt *t)
{
    if (!server_listen(t) || !server_accept(t, &t->ctl, t->o.accept_timeout_ms, 0, 0))
        return TC_EXIT_FAILED;
    t->ctl_ready = true;
    fill_mine(t, &t->ctl.listener.bound);
    ULONG ird, ord;
    read_limits(t, &ird, &ord);
    /* The test connection: the listener's second request, on the test QP. */
    if (!pt_exchange_setup(t) || !server_accept(t, &t->tst, t->o.timeout_ms, ird, ord))
        return TC_EXIT_FAILED;
    t->tst_ready = true;
    if (!run_test(t))
        return TC_EXIT_FAILED;
    /* perftest's client disconnects when it is done; wait for it. */
    t->tst_ready = t->ctl_ready = false;
    bool ok = ep_disconnect(&t->tst, true);
    ok = ep_disconnect(&t->ctl, true) && ok;
    tc_say(NULL, "ndkperf --perftest %s server: done", test_name(t->p.test));
    return ok ? TC_EXIT_OK : TC_EXIT_FAILED;
}
