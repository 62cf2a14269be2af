/* The second and third legs: NdkAccept[Ex] and NdkCompleteConnect[Ex] with
 * libndk's wire behaviour (docs/behaviour.md "The three legs"), and the
 * address getters NdkGetLocalAddress and NdkGetPeerAddress (too small a
 * buffer: STATUS_BUFFER_TOO_SMALL and the size needed). Every case runs
 * with the plain and the Ex functions. */
#include "ndktest.h"

#define NT_EPHEMERAL_LO 49152u

static const char *ex_name(bool ex)
{
    return ex ? "Ex" : "plain";
}

/* Names the functions an iteration used when it failed (tl_failures moved
 * past f0). */
static void note_ex(int f0, bool ex)
{
    if (tl_failures != f0)
        fprintf(stderr, "    with the %s functions\n", ex_name(ex));
}

/* A connection record, with the plain or the Ex functions, whose Connect
 * (IRD/ORD 2/2) reached the listener: c->p is the connector of connect
 * event number idx. False when either did not happen. */
static bool connect_delivered(nt_conn *c, int fam, nt_side *as, nt_side *ps, nt_lsn *L, bool ex,
                              unsigned idx)
{
    if (!nt_conn_init(c, fam, as, ps, L))
        return false;
    c->ex = ex;
    nt_conn_connect(c, 2, 2, NULL, 0);
    c->p = nt_incoming(L, idx, NT_WAIT_MS);
    return c->p != NULL;
}

/* Seed 004: "STATUS_CONNECTION_ABORTED: the connecting peer abandoned the
 * pending connection establishment". The initiator closes its connector
 * after the passive side got the connect event (its Connect completes
 * STATUS_CANCELLED); once that close finished, Accept fails ABORTED,
 * inline or async. */
NT_CASE_FAM(accept_after_initiator_gave_up)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int ex = 0; ex < 2; ex++) {
        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(connect_delivered(&c, fam, &as, &ps, L, ex, (unsigned)ex));
        nt_op *cl = nt_close_start(c.a);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CANCELLED);
        CHECK(nt_close_wait(cl, NT_WAIT_MS));
        c.a = NULL;
        nt_conn_accept(&c, 2, 2, NULL, 0);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_CONNECTION_ABORTED);
        note_ex(f0, ex);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* Seed 004: "STATUS_IO_TIMEOUT: the peer did not call CompleteConnect".
 * The passive adapter's RtrTimeoutMs is 300 ms. */
NT_CASE_FAM(accept_times_out_without_complete_connect)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_OPEN_OPTIONS po = nt_opts();
    po.RtrTimeoutMs = 300;
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &po));
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    for (int ex = 0; ex < 2; ex++) {
        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(connect_delivered(&c, fam, &as, &ps, L, ex, (unsigned)ex));
        uint64_t t0 = tl_now_ns();
        nt_conn_accept(&c, 2, 2, NULL, 0);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
        /* No CompleteConnect. */
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_IO_TIMEOUT);
        uint64_t ms = nt_ms_since(t0);
        CHECK(ms >= 250);
        CHECK(ms < 3000);
        /* A timed-out establishment gives no disconnect event. */
        CHECK(!tl_event_wait(&c.dev_p->ev, 1, NT_QUIET_MS));
        note_ex(f0, ex);
        nt_conn_close(&c);
    }
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* Reference 5.10.3: "STATUS_CONNECTION_ABORTED: the accepting peer
 * abandoned the establishment". The passive side closes its connector
 * while its Accept is pending (after the initiator's Connect succeeded):
 * its Accept completes STATUS_CANCELLED, before its close completion;
 * then CompleteConnect fails ABORTED, inline or async. */
NT_CASE_FAM(complete_after_acceptor_abandoned)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int ex = 0; ex < 2; ex++) {
        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(connect_delivered(&c, fam, &as, &ps, L, ex, (unsigned)ex));
        nt_conn_accept(&c, 2, 2, NULL, 0);
        CHECK_STATUS(c.accept->returned, STATUS_PENDING);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);

        nt_op *cl = nt_close_start(c.p);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_CANCELLED);
        CHECK(nt_close_wait(cl, NT_WAIT_MS));
        c.p = NULL;
        if (cl->returned == STATUS_PENDING && c.accept->returned == STATUS_PENDING)
            CHECK(atomic_load(&c.accept->seq) < atomic_load(&cl->seq));

        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_CONNECTION_ABORTED);
        /* Not established: no disconnect event either. */
        CHECK(!tl_event_wait(&c.dev_a->ev, 1, NT_QUIET_MS));
        note_ex(f0, ex);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* Reference 5.10.3: STATUS_CONNECTION_INVALID when Connect has not
 * succeeded - never called, still pending, or failed. */
NT_CASE_FAM(complete_before_connect_succeeded)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    for (int ex = 0; ex < 2; ex++) {
        int f0 = tl_failures;
        /* Never connected. */
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
        c.ex = ex;
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_CONNECTION_INVALID);

        /* Pending: a peer that never answers MPA. */
        nt_raw raw;
        REQUIRE(nt_raw_listen(&raw, fam));
        nt_conn_connect_to(&c, &raw.addr, raw.len, 1, 1, NULL, 0);
        CHECK(nt_raw_accept(&raw, NT_WAIT_MS));
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_CONNECTION_INVALID);
        CHECK(!nt_done(c.connect));
        nt_op *cl = nt_close_start(c.a);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CANCELLED);
        CHECK(nt_close_wait(cl, NT_WAIT_MS));
        c.a = NULL;
        nt_conn_close(&c);
        nt_raw_close(&raw);

        /* Failed: refused. */
        NDK_SOCKADDR dead;
        ULONG dlen;
        int dfd = nt_dead_port(fam, &dead, &dlen);
        REQUIRE(dfd >= 0);
        REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
        c.ex = ex;
        nt_conn_connect_to(&c, &dead, dlen, 1, 1, NULL, 0);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_CONNECTION_INVALID);
        close(dfd);
        nt_conn_close(&c);
        note_ex(f0, ex);
    }
    nt_side_close(&as);
}

/* NdkAcceptEx / NdkCompleteConnectEx (2.1) establish connections like the
 * plain functions, alone or mixed with them; the Ex disconnect callback is
 * the one registered. */
NT_CASE_FAM(ex_functions)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    /* accept Ex?, complete Ex? */
    static const bool mix[4][2] = {{true, true}, {true, false}, {false, true}, {false, false}};
    for (int i = 0; i < 4; i++) {
        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        nt_conn_connect(&c, 4, 4, "ex", 2);
        c.p = nt_incoming(L, (unsigned)i, NT_WAIT_MS);
        REQUIRE(c.p);
        c.ex = mix[i][0];
        nt_conn_accept(&c, 4, 4, "EX", 2);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
        char got[8];
        ULONG len = sizeof got;
        CHECK_STATUS(nt_gcd(c.a, NULL, NULL, got, &len), STATUS_SUCCESS);
        CHECK_EQ(len, 2);
        CHECK(memcmp(got, "EX", 2) == 0);
        c.ex = mix[i][1];
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);

        /* The active side goes away: the passive side's registered
         * callback (Ex or not) runs once. */
        nt_close(c.a);
        c.a = NULL;
        CHECK(tl_event_wait(&c.dev_p->ev, 1, NT_WAIT_MS));
        CHECK_EQ(atomic_load(&c.dev_p->ex_called), mix[i][0] ? 1 : 0);
        if (tl_failures != f0)
            fprintf(stderr, "    AcceptEx %d CompleteConnectEx %d\n", mix[i][0], mix[i][1]);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* The address getters, with the buffer-size pattern: NULL or short buffer
 * -> STATUS_BUFFER_TOO_SMALL with the required size; success -> the size
 * written. */
static void check_getter(NDK_FN_GET_LOCAL_ADDRESS fn, NDK_CONNECTOR *c, int fam,
                         NDK_SOCKADDR *out)
{
    const ULONG need = nt_sa_len(fam);
    ULONG len = 0;
    CHECK_STATUS(fn(c, NULL, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, need);
    NDK_SOCKADDR sa;
    len = need - 1;
    CHECK_STATUS(fn(c, &sa.sa, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, need);
    unsigned char big[128];
    memset(big, 0xEE, sizeof big);
    len = sizeof big;
    CHECK_STATUS(fn(c, (PSOCKADDR)big, &len), STATUS_SUCCESS);
    CHECK_EQ(len, need);
    bool tail = true;
    for (size_t i = need; i < sizeof big; i++)
        tail = tail && big[i] == 0xEE;
    CHECK(tail);
    memset(out, 0, sizeof *out);
    len = need;
    CHECK_STATUS(fn(c, &out->sa, &len), STATUS_SUCCESS);
    CHECK_EQ(len, need);
    CHECK_EQ(out->sa.sa_family, fam);
}

/* Local and peer addresses on both sides match each other and the
 * listener's, inside the connect event, after Connect, and established. */
NT_CASE_FAM(addresses)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));

    /* The listener's own getter. */
    ULONG len = 0;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, NULL, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, nt_sa_len(fam));
    NDK_SOCKADDR want;
    nt_sa_loop(fam, nt_sa_port(&L->addr), &want);
    CHECK_SA_EQ(&L->addr, &want);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    REQUIRE(nt_conn_deliver(&c, 2, 2));
    NDK_SOCKADDR pl, pp, al, ap;
    /* Passive, before Accept: the requester's address at once. */
    check_getter(c.p->Dispatch->NdkGetLocalAddress, c.p, fam, &pl);
    check_getter(c.p->Dispatch->NdkGetPeerAddress, c.p, fam, &pp);
    CHECK_SA_EQ(&pl, &L->addr);
    nt_conn_accept(&c, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    /* Active, after Connect. */
    check_getter(c.a->Dispatch->NdkGetLocalAddress, c.a, fam, &al);
    check_getter(c.a->Dispatch->NdkGetPeerAddress, c.a, fam, &ap);
    CHECK_SA_EQ(&ap, &L->addr);
    CHECK_SA_EQ(&al, &pp);
    /* Source port 0: an ephemeral port (NdkConnect), on the loopback address. */
    CHECK(nt_sa_port(&al) >= NT_EPHEMERAL_LO);
    nt_sa_loop(fam, nt_sa_port(&al), &want);
    CHECK_SA_EQ(&al, &want);

    nt_conn_complete(&c);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    /* Established: unchanged. */
    NDK_SOCKADDR x;
    check_getter(c.a->Dispatch->NdkGetLocalAddress, c.a, fam, &x);
    CHECK_SA_EQ(&x, &al);
    check_getter(c.a->Dispatch->NdkGetPeerAddress, c.a, fam, &x);
    CHECK_SA_EQ(&x, &ap);
    check_getter(c.p->Dispatch->NdkGetLocalAddress, c.p, fam, &x);
    CHECK_SA_EQ(&x, &pl);
    check_getter(c.p->Dispatch->NdkGetPeerAddress, c.p, fam, &x);
    CHECK_SA_EQ(&x, &pp);

    nt_conn_close(&c);
    nt_pair_close(&as, &ps, L);
}

/* Reference 7.1 and 7.8: Connect completes only once the peer accepted,
 * Accept only once the initiator called CompleteConnect; each leg then
 * follows promptly. Timings are printed. */
NT_CASE_FAM(three_legs)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int ex = 0; ex < 2; ex++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        c.ex = ex;
        uint64_t t0 = tl_now_ns();
        nt_conn_connect(&c, 2, 2, NULL, 0);
        c.p = nt_incoming(L, (unsigned)ex, NT_WAIT_MS);
        REQUIRE(c.p);
        uint64_t t_event = nt_ms_since(t0);
        /* Leg 1 done; Connect waits for the Accept. */
        CHECK(!tl_event_wait(&c.connect->ev, 1, NT_QUIET_MS));
        CHECK(!nt_done(c.connect));

        unsigned before_accept = nt_next_seq();
        uint64_t t1 = tl_now_ns();
        nt_conn_accept(&c, 2, 2, NULL, 0);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
        uint64_t t_reply = nt_ms_since(t1);
        if (c.connect->returned == STATUS_PENDING)
            CHECK(atomic_load(&c.connect->seq) > before_accept);
        /* Leg 2 done; Accept waits for CompleteConnect. */
        CHECK(!tl_event_wait(&c.accept->ev, 1, NT_QUIET_MS));
        CHECK(!nt_done(c.accept));

        unsigned before_complete = nt_next_seq();
        uint64_t t2 = tl_now_ns();
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
        uint64_t t_rtr = nt_ms_since(t2);
        CHECK(atomic_load(&c.accept->seq) > before_complete);
        fprintf(stderr, "    %s %s: connect event %llu ms, reply %llu ms, RTR %llu ms\n",
                nt_fam_name(fam), ex_name(ex), (unsigned long long)t_event,
                (unsigned long long)t_reply, (unsigned long long)t_rtr);
        CHECK(t_event < 2000 && t_reply < 2000 && t_rtr < 2000);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* docs/behaviour.md: a client/server initiator (NDK_OPEN_FLAG_NO_P2P, A=0,
 * as Linux siw) has no third leg on the wire, so the Accept completes once
 * the Reply is written - before CompleteConnect - and CompleteConnect has
 * nothing to send. */
NT_CASE_FAM(client_server_initiator)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    o.Flags = NDK_OPEN_FLAG_NO_P2P;
    NDK_OPEN_OPTIONS po = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &po));
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    REQUIRE(nt_conn_deliver(&c, 2, 2));
    nt_conn_accept(&c, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_complete(&c);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* Reference 5.10.5 / 7.2: the initiator may reject after its Connect
 * succeeded (NdkReject returns STATUS_SUCCESS); the acceptor's pending
 * Accept then fails: the connecting peer abandoned it. */
NT_CASE_FAM(initiator_rejects_after_accept)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_conn_deliver(&c, 2, 2));
    nt_conn_accept(&c, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(c.a->Dispatch->NdkReject(c.a, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_CONNECTION_ABORTED);
    /* Rejected: CompleteConnect is now out of place. */
    nt_conn_complete(&c);
    NTSTATUS st = nt_finish(c.complete, NT_WAIT_MS);
    CHECK(st != STATUS_SUCCESS && st != STATUS_PENDING);
    nt_pair_conn_close(&as, &ps, L, &c);
}

/* docs/behaviour.md: calls in the wrong state are STATUS_INVALID_DEVICE_STATE
 * - Accept twice, Connect on a used connector, a QP another connector uses. */
NT_CASE_FAM(wrong_state_calls)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_establish(&c));

    /* Accept again on the accepted connector. */
    nt_conn_accept(&c, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
    /* Connect again on the connected connector. */
    nt_conn_connect(&c, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
    CHECK(!tl_event_wait(&L->ev, 2, NT_QUIET_MS));

    /* An initiator offering the QP the first connection uses. */
    nt_conn b;
    REQUIRE(nt_conn_init(&b, fam, &as, &ps, L));
    NDK_QP *own = b.qa;
    b.qa = c.qa;
    nt_conn_connect(&b, 2, 2, NULL, 0);
    CHECK_STATUS(nt_finish(b.connect, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
    b.qa = own;
    nt_conn_close(&b);
    CHECK_EQ(nt_lsn_count(L), 1);

    /* An acceptor offering a QP in use. */
    nt_conn d;
    REQUIRE(nt_conn_init(&d, fam, &as, &ps, L));
    nt_conn_connect(&d, 2, 2, NULL, 0);
    d.p = nt_incoming(L, 1, NT_WAIT_MS);
    if (d.p) {
        NDK_QP *ownp = d.qp;
        d.qp = c.qp;
        nt_conn_accept(&d, 2, 2, NULL, 0);
        CHECK_STATUS(nt_finish(d.accept, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
        d.qp = ownp;
        CHECK(!nt_done(d.connect));
        /* The connector is still unanswered: a proper Accept works. */
        nt_conn_accept(&d, 2, 2, NULL, 0);
        CHECK_STATUS(nt_finish(d.connect, NT_WAIT_MS), STATUS_SUCCESS);
        nt_conn_complete(&d);
        CHECK_STATUS(nt_finish(d.complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(d.accept, NT_WAIT_MS), STATUS_SUCCESS);
    }
    nt_conn_close(&d);
    nt_pair_conn_close(&as, &ps, L, &c);
}

/* Seed 004 / 5.10.3: DisconnectEvent and its context are optional (NULL
 * callbacks: the connection works and goes away without them), and so is
 * every RequestContext (the completion then gets NULL). */
static _Atomic int null_ctx_calls;
static _Atomic int null_ctx_bad;
static tl_event null_ctx_ev;

static void null_ctx_cb(PVOID ctx, NTSTATUS st)
{
    if (ctx != NULL || st != STATUS_SUCCESS)
        atomic_fetch_add(&null_ctx_bad, 1);
    atomic_fetch_add(&null_ctx_calls, 1);
    tl_event_signal(&null_ctx_ev);
}

NT_CASE_FAM(optional_callbacks_and_contexts)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    tl_event_init(&null_ctx_ev);
    atomic_store(&null_ctx_calls, 0);
    atomic_store(&null_ctx_bad, 0);
    unsigned total = 0;
    for (int ex = 0; ex < 2; ex++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        const unsigned base = tl_event_count(&null_ctx_ev);
        unsigned pend = 0;
        NDK_SOCKADDR src;
        ULONG srclen = nt_sa_loop(fam, 0, &src);
        NTSTATUS st = c.a->Dispatch->NdkConnect(c.a, c.qa, &src.sa, srclen, &L->addr.sa,
                                                L->addrlen, 1, 1, NULL, 0, null_ctx_cb, NULL);
        CHECK(st == STATUS_PENDING || st == STATUS_SUCCESS);
        pend += st == STATUS_PENDING;
        c.p = nt_incoming(L, (unsigned)ex, NT_WAIT_MS);
        REQUIRE(c.p);
        if (ex)
            st = c.p->Dispatch->NdkAcceptEx(c.p, c.qp, 1, 1, NULL, 0, NULL, NULL, null_ctx_cb,
                                            NULL);
        else
            st = c.p->Dispatch->NdkAccept(c.p, c.qp, 1, 1, NULL, 0, NULL, NULL, null_ctx_cb,
                                          NULL);
        CHECK(st == STATUS_PENDING || st == STATUS_SUCCESS);
        const unsigned accept_pend = st == STATUS_PENDING;
        /* The Accept waits for CompleteConnect, so the first completion is
         * the Connect's. */
        CHECK(tl_event_wait(&null_ctx_ev, base + pend, NT_WAIT_MS));
        pend += accept_pend;
        if (ex)
            st = c.a->Dispatch->NdkCompleteConnectEx(c.a, NULL, NULL, null_ctx_cb, NULL);
        else
            st = c.a->Dispatch->NdkCompleteConnect(c.a, NULL, NULL, null_ctx_cb, NULL);
        CHECK(st == STATUS_PENDING || st == STATUS_SUCCESS);
        pend += st == STATUS_PENDING;
        CHECK(tl_event_wait(&null_ctx_ev, base + pend, NT_WAIT_MS));
        /* No callback registered: an abort on one side is silent. */
        nt_close(c.a);
        c.a = NULL;
        nt_close(c.p);
        c.p = NULL;
        CHECK(!tl_event_wait(&null_ctx_ev, base + pend + 1, NT_QUIET_MS));
        total += pend;
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
    CHECK_EQ(atomic_load(&null_ctx_bad), 0);
    /* Exactly one completion per STATUS_PENDING, each with the NULL context. */
    CHECK_EQ(atomic_load(&null_ctx_calls), total);
    tl_event_destroy(&null_ctx_ev);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(accept_after_initiator_gave_up);
    RUN_FAM(accept_times_out_without_complete_connect);
    RUN_FAM(complete_after_acceptor_abandoned);
    RUN_FAM(complete_before_connect_succeeded);
    RUN_FAM(ex_functions);
    RUN_FAM(addresses);
    RUN_FAM(three_legs);
    RUN_FAM(client_server_initiator);
    RUN_FAM(initiator_rejects_after_accept);
    RUN_FAM(wrong_state_calls);
    RUN_FAM(optional_callbacks_and_contexts);
    return tl_finish();
}
