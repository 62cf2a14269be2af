/* Shared endpoints: NdkCreateSharedEndpoint, NdkConnectWithSharedEndpoint,
 * its NdkGetLocalAddress and the endpoint rules E10-E15: one local
 * address and port for many connections to different destinations, the
 * port reserved until the endpoint and all its connectors are closed, and
 * the endpoint's close pending until then (L8). */
#include "ndktest.h"

#define NT_EPHEMERAL_LO 49152u
#define NT_EPHEMERAL_HI 65535u

static NTSTATUS sep_addr(NDK_SHARED_ENDPOINT *e, NDK_SOCKADDR *sa, ULONG *len)
{
    *len = sizeof *sa;
    memset(sa, 0, sizeof *sa);
    return e->Dispatch->NdkGetLocalAddress(e, &sa->sa, len);
}

static NTSTATUS conn_local(NDK_CONNECTOR *c, NDK_SOCKADDR *sa)
{
    ULONG len = sizeof *sa;
    memset(sa, 0, sizeof *sa);
    return c->Dispatch->NdkGetLocalAddress(c, &sa->sa, &len);
}

static NTSTATUS conn_peer(NDK_CONNECTOR *c, NDK_SOCKADDR *sa)
{
    ULONG len = sizeof *sa;
    memset(sa, 0, sizeof *sa);
    return c->Dispatch->NdkGetPeerAddress(c, &sa->sa, &len);
}

/* A shared endpoint on fam's loopback address, port 0; *ea and *elen then
 * hold the address it got. NULL, and a failure counted, when it could not
 * be made. */
static NDK_SHARED_ENDPOINT *new_sep(nt_side *s, int fam, NDK_SOCKADDR *ea, ULONG *elen)
{
    NDK_SHARED_ENDPOINT *e = NULL;
    *elen = nt_sa_loop(fam, 0, ea);
    CHECK_STATUS(nt_create_sep(s->ad, ea, *elen, &e), STATUS_SUCCESS);
    if (e)
        CHECK_STATUS(sep_addr(e, ea, elen), STATUS_SUCCESS);
    return e;
}

/* The opening of a connection case: both sides opened with o, and a shared
 * endpoint on the active side (new_sep). NULL, with nothing left open, when
 * any of them failed. */
static NDK_SHARED_ENDPOINT *open_sides_sep(nt_side *as, nt_side *ps, const NDK_OPEN_OPTIONS *o,
                                           int fam, NDK_SOCKADDR *ea, ULONG *elen)
{
    if (!nt_side_open(as, o))
        return NULL;
    if (!nt_side_open(ps, o)) {
        nt_side_close(as);
        return NULL;
    }
    NDK_SHARED_ENDPOINT *e = new_sep(as, fam, ea, elen);
    if (!e) {
        nt_side_close(as);
        nt_side_close(ps);
    }
    return e;
}

/* Closes what open_sides_sep opened (the endpoint unless already closed,
 * NULL). */
static void close_sides_sep(nt_side *as, nt_side *ps, NDK_SHARED_ENDPOINT *e)
{
    nt_close(e);
    nt_side_close(as);
    nt_side_close(ps);
}

/* A new listener on s, not yet listening; NULL, and a failure counted, when
 * NdkCreateListener failed. */
static nt_lsn *new_listener(nt_side *s)
{
    nt_lsn *L = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(s->ad, nt_connect_event, L, &L->l), STATUS_SUCCESS);
    return L->l ? L : NULL;
}

/* NdkListen of a new listener at sa: the status; the listener is closed
 * again. */
static NTSTATUS listen_once(nt_side *s, const NDK_SOCKADDR *sa, ULONG len)
{
    nt_lsn *L = new_listener(s);
    if (!L)
        return STATUS_UNSUCCESSFUL;
    NTSTATUS st = nt_listen_at(L->l, sa, len);
    nt_lsn_close(L);
    return st;
}

/* Port 0: the provider picks an ephemeral port (49152-65535) and reports it
 * through the endpoint's NdkGetLocalAddress, with the buffer-size pattern. */
NT_CASE_FAM(ephemeral_port)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    NDK_SOCKADDR want;
    ULONG wlen = nt_sa_loop(fam, 0, &want);
    NDK_SHARED_ENDPOINT *e1 = NULL, *e2 = NULL;
    CHECK_STATUS(nt_create_sep(s.ad, &want, wlen, &e1), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_sep(s.ad, &want, wlen, &e2), STATUS_SUCCESS);
    REQUIRE(e1 && e2);

    /* Size probe and a short buffer: too small, required size stored. */
    ULONG len = 0;
    CHECK_STATUS(e1->Dispatch->NdkGetLocalAddress(e1, NULL, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, wlen);
    NDK_SOCKADDR sa;
    len = wlen - 1;
    CHECK_STATUS(e1->Dispatch->NdkGetLocalAddress(e1, &sa.sa, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, wlen);

    ULONG l1, l2;
    NDK_SOCKADDR a1, a2;
    CHECK_STATUS(sep_addr(e1, &a1, &l1), STATUS_SUCCESS);
    CHECK_STATUS(sep_addr(e2, &a2, &l2), STATUS_SUCCESS);
    CHECK_EQ(l1, wlen);
    CHECK_EQ(l2, wlen);
    unsigned p1 = nt_sa_port(&a1), p2 = nt_sa_port(&a2);
    CHECK(p1 >= NT_EPHEMERAL_LO && p1 <= NT_EPHEMERAL_HI);
    CHECK(p2 >= NT_EPHEMERAL_LO && p2 <= NT_EPHEMERAL_HI);
    CHECK(p1 != p2);
    nt_sa_set_port(&want, p1);
    CHECK_SA_EQ(&a1, &want);

    nt_close(e1);
    nt_close(e2);
    nt_side_close(&s);
}

/* Eight connections from one shared endpoint to eight listeners: every
 * connector's local address is the endpoint's address, which the passive
 * sides see as their peer. */
NT_CASE_FAM(many_connections)
{
    enum { N = 8 };
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = open_sides_sep(&as, &ps, &o, fam, &ea, &elen);
    REQUIRE(e);

    nt_lsn *L[N];
    nt_conn c[N];
    int tags[N];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++) {
        L[i] = nt_listen(&ps, fam);
        REQUIRE(L[i]);
    }
    /* Start all eight before answering any: they overlap. */
    for (int i = 0; i < N; i++) {
        REQUIRE(nt_conn_init(&c[i], fam, &as, &ps, L[i]));
        tags[i] = i;
        nt_conn_connect_sep(&c[i], e, 4, 4, &tags[i], sizeof tags[i]);
    }
    for (int i = 0; i < N; i++) {
        c[i].p = nt_incoming(L[i], 0, NT_WAIT_MS);
        if (!c[i].p)
            continue;
        int tag = -1;
        ULONG len = sizeof tag;
        CHECK_STATUS(nt_gcd(c[i].p, NULL, NULL, &tag, &len), STATUS_SUCCESS);
        CHECK_EQ(tag, i);
        NDK_SOCKADDR peer;
        CHECK_STATUS(conn_peer(c[i].p, &peer), STATUS_SUCCESS);
        CHECK_SA_EQ(&peer, &ea);
        nt_conn_accept(&c[i], 4, 4, NULL, 0);
    }
    for (int i = 0; i < N; i++) {
        if (!c[i].p)
            continue;
        NTSTATUS st = nt_finish(c[i].connect, NT_WAIT_MS);
        CHECK_STATUS(st, STATUS_SUCCESS);
        if (st != STATUS_SUCCESS)
            continue;
        nt_conn_complete(&c[i]);
    }
    for (int i = 0; i < N; i++) {
        if (!c[i].complete)
            continue;
        CHECK_STATUS(nt_finish(c[i].complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c[i].accept, NT_WAIT_MS), STATUS_SUCCESS);
        NDK_SOCKADDR local, peer;
        CHECK_STATUS(conn_local(c[i].a, &local), STATUS_SUCCESS);
        CHECK_SA_EQ(&local, &ea);
        CHECK_STATUS(conn_peer(c[i].a, &peer), STATUS_SUCCESS);
        CHECK_SA_EQ(&peer, &L[i]->addr);
        CHECK_STATUS(conn_local(c[i].p, &local), STATUS_SUCCESS);
        CHECK_SA_EQ(&local, &L[i]->addr);
        CHECK_STATUS(conn_peer(c[i].p, &peer), STATUS_SUCCESS);
        CHECK_SA_EQ(&peer, &ea);
    }
    for (int i = 0; i < N; i++) {
        nt_conn_close(&c[i]);
        nt_lsn_close(L[i]);
    }
    close_sides_sep(&as, &ps, e);
}

/* A second connection with the same 4-tuple (same endpoint, same
 * destination) while the first connector lives fails with
 * STATUS_ADDRESS_ALREADY_EXISTS, inline or async - whether the first is
 * still being set up or established. The listener sees nothing of it. */
NT_CASE_FAM(same_destination_twice)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = open_sides_sep(&as, &ps, &o, fam, &ea, &elen);
    REQUIRE(e);
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);

    nt_conn first;
    REQUIRE(nt_conn_init(&first, fam, &as, &ps, L));
    nt_conn_connect_sep(&first, e, 4, 4, NULL, 0);
    first.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(first.p);

    /* While the first is waiting for its Accept. */
    nt_conn dup;
    REQUIRE(nt_conn_init(&dup, fam, &as, &ps, L));
    nt_conn_connect_sep(&dup, e, 4, 4, NULL, 0);
    CHECK_STATUS(nt_finish(dup.connect, NT_WAIT_MS), STATUS_ADDRESS_ALREADY_EXISTS);
    nt_conn_close(&dup);

    nt_conn_accept(&first, 4, 4, NULL, 0);
    CHECK_STATUS(nt_finish(first.connect, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_complete(&first);
    CHECK_STATUS(nt_finish(first.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(first.accept, NT_WAIT_MS), STATUS_SUCCESS);

    /* While the first is established. */
    nt_conn dup2;
    REQUIRE(nt_conn_init(&dup2, fam, &as, &ps, L));
    nt_conn_connect_sep(&dup2, e, 4, 4, NULL, 0);
    CHECK_STATUS(nt_finish(dup2.connect, NT_WAIT_MS), STATUS_ADDRESS_ALREADY_EXISTS);
    nt_conn_close(&dup2);

    /* Neither duplicate reached the listener. */
    CHECK(!tl_event_wait(&L->ev, 2, NT_QUIET_MS));
    CHECK_EQ(nt_lsn_count(L), 1);

    nt_conn_close(&first);
    nt_lsn_close(L);
    close_sides_sep(&as, &ps, e);
}

/* The endpoint's address and port are in use: another shared endpoint, a
 * listener, or an NdkConnect from it fail with STATUS_SHARING_VIOLATION
 * (inline or async); a listener's port likewise refuses a shared endpoint.
 * Closing the (unused) endpoint frees the port at once (E14). */
NT_CASE_FAM(address_in_use)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = new_sep(&s, fam, &ea, &elen), *e2 = NULL;
    REQUIRE(e);

    CHECK_STATUS(nt_create_sep(s.ad, &ea, elen, &e2), STATUS_SHARING_VIOLATION);
    nt_close(e2);
    e2 = NULL;

    CHECK_STATUS(listen_once(&s, &ea, elen), STATUS_SHARING_VIOLATION);

    /* NdkConnect from the endpoint's address:port (to a live listener). */
    nt_lsn *L2 = nt_listen(&s, fam);
    REQUIRE(L2);
    NDK_CONNECTOR *c = nt_connector(&s);
    NDK_QP *qp = nt_qp(&s);
    REQUIRE(c && qp);
    nt_op *cop = nt_op_new(NT_REQ, "NdkConnect");
    nt_started(cop, c->Dispatch->NdkConnect(c, qp, &ea.sa, elen, &L2->addr.sa, L2->addrlen, 1, 1,
                                            NULL, 0, nt_req_cb, cop));
    CHECK_STATUS(nt_finish(cop, NT_WAIT_MS), STATUS_SHARING_VIOLATION);
    CHECK(!tl_event_wait(&L2->ev, 1, NT_QUIET_MS));
    nt_close(c);
    nt_close(qp);

    /* A listener's port refuses a shared endpoint. */
    CHECK_STATUS(nt_create_sep(s.ad, &L2->addr, L2->addrlen, &e2), STATUS_SHARING_VIOLATION);
    nt_close(e2);
    e2 = NULL;
    nt_lsn_close(L2);

    /* Released when the endpoint (without connectors) is closed. */
    nt_op *cl = nt_close_start(e);
    CHECK(nt_close_wait(cl, NT_WAIT_MS));
    CHECK_STATUS(nt_create_sep(s.ad, &ea, elen, &e2), STATUS_SUCCESS);
    nt_close(e2);
    nt_side_close(&s);
}

/* E15 / L8: closing the endpoint while connectors over it live pends until
 * the last of them is closed; meanwhile its port stays reserved, and its
 * close completion comes after theirs. */
NT_CASE_FAM(close_pends_for_connectors)
{
    enum { N = 3 };
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = open_sides_sep(&as, &ps, &o, fam, &ea, &elen);
    REQUIRE(e);

    nt_lsn *L[N];
    nt_conn c[N];
    for (int i = 0; i < N; i++) {
        L[i] = nt_listen(&ps, fam);
        REQUIRE(L[i]);
        REQUIRE(nt_conn_init(&c[i], fam, &as, &ps, L[i]));
        CHECK(nt_establish_via(&c[i], e));
    }

    nt_op *ecl = nt_close_start(e);
    CHECK_STATUS(ecl->returned, STATUS_PENDING);
    CHECK(!tl_event_wait(&ecl->ev, 1, NT_QUIET_MS));

    /* Still reserved while the close pends. */
    NDK_SHARED_ENDPOINT *e2 = NULL;
    CHECK_STATUS(nt_create_sep(as.ad, &ea, elen, &e2), STATUS_SHARING_VIOLATION);
    nt_close(e2);
    e2 = NULL;
    /* The connectors are unaffected. */
    NDK_SOCKADDR local;
    CHECK_STATUS(conn_local(c[0].a, &local), STATUS_SUCCESS);
    CHECK_SA_EQ(&local, &ea);

    nt_op *last = NULL;
    for (int i = 0; i < N; i++) {
        if (i == N - 1)
            CHECK_EQ(nt_count(ecl), 0); /* not before the last connector */
        last = nt_close_start(c[i].a);
        CHECK(nt_close_wait(last, NT_WAIT_MS));
        c[i].a = NULL;
        if (i < N - 1)
            CHECK(!tl_event_wait(&ecl->ev, 1, NT_QUIET_MS));
    }
    CHECK(nt_close_wait(ecl, NT_WAIT_MS));
    /* L11: not before the last connector's close completion returned. */
    if (last && last->returned == STATUS_PENDING && nt_count(ecl) == 1)
        CHECK(atomic_load(&ecl->seq) > atomic_load(&last->seq));

    /* E14: free again. */
    CHECK_STATUS(nt_create_sep(as.ad, &ea, elen, &e2), STATUS_SUCCESS);
    nt_close(e2);

    for (int i = 0; i < N; i++) {
        nt_conn_close(&c[i]);
        nt_lsn_close(L[i]);
    }
    close_sides_sep(&as, &ps, NULL); /* e closed above */
}

/* Seed 002's failure codes over a shared endpoint: no listener gives
 * STATUS_CONNECTION_REFUSED, a silent peer STATUS_IO_TIMEOUT (after
 * MpaReplyTimeoutMs, short here: reject_with_private_data, which needs a
 * listener's answer in time, runs with the usual one). */
NT_CASE_FAM(connect_outcomes)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    o.MpaReplyTimeoutMs = 300;
    nt_side as, ps;
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = open_sides_sep(&as, &ps, &o, fam, &ea, &elen);
    REQUIRE(e);

    /* No listener. */
    NDK_SOCKADDR dead;
    ULONG dlen;
    int dfd = nt_dead_port(fam, &dead, &dlen);
    REQUIRE(dfd >= 0);
    nt_conn c1;
    REQUIRE(nt_conn_init(&c1, fam, &as, &ps, NULL));
    nt_conn_connect_sep_to(&c1, e, &dead, dlen, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c1.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    nt_conn_close(&c1);
    close(dfd);

    /* A peer that never answers the MPA Request. */
    nt_raw raw;
    REQUIRE(nt_raw_listen(&raw, fam));
    nt_conn c2;
    REQUIRE(nt_conn_init(&c2, fam, &as, &ps, NULL));
    uint64_t t0 = tl_now_ns();
    nt_conn_connect_sep_to(&c2, e, &raw.addr, raw.len, 1, 1, NULL, 0);
    CHECK(nt_raw_accept(&raw, NT_WAIT_MS));
    CHECK_STATUS(nt_finish(c2.connect, NT_WAIT_MS), STATUS_IO_TIMEOUT);
    CHECK(nt_ms_since(t0) >= 250);
    nt_conn_close(&c2);
    nt_raw_close(&raw);
    close_sides_sep(&as, &ps, e);
}

/* Private data over a shared endpoint reaches the listener, whose reject
 * gives STATUS_CONNECTION_REFUSED and its own private data. The
 * initiator's MpaReplyTimeoutMs is nt_opts' (4 s): the listener's event
 * and the test thread's NdkReject must come within it, and on a loaded
 * machine connect_outcomes' 300 ms ran out first (the initiator reset the
 * connection before the listener took the Request: no connect event, and
 * NT_WAIT_MS waited for it in vain). */
NT_CASE_FAM(reject_with_private_data)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    NDK_SOCKADDR ea;
    ULONG elen;
    NDK_SHARED_ENDPOINT *e = open_sides_sep(&as, &ps, &o, fam, &ea, &elen);
    REQUIRE(e);
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    nt_conn c3;
    REQUIRE(nt_conn_init(&c3, fam, &as, &ps, L));
    char msg[30] = "over a shared endpoint";
    nt_conn_connect_sep(&c3, e, 1, 1, msg, sizeof msg);
    c3.p = nt_incoming(L, 0, NT_WAIT_MS);
    if (c3.p) {
        char got[64];
        ULONG len = sizeof got;
        CHECK_STATUS(nt_gcd(c3.p, NULL, NULL, got, &len), STATUS_SUCCESS);
        CHECK_EQ(len, sizeof msg);
        CHECK(memcmp(got, msg, sizeof msg) == 0);
        CHECK_STATUS(c3.p->Dispatch->NdkReject(c3.p, "no", 2), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c3.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
        len = sizeof got;
        CHECK_STATUS(nt_gcd(c3.a, NULL, NULL, got, &len), STATUS_SUCCESS);
        CHECK_EQ(len, 2);
        CHECK(memcmp(got, "no", 2) == 0);
    }
    nt_conn_close(&c3);
    nt_lsn_close(L);
    close_sides_sep(&as, &ps, e);
}

/* An address the adapter does not have: STATUS_INVALID_ADDRESS for a shared
 * endpoint and for a listener (NdkCreateSharedEndpoint, NdkListen); the
 * wildcard address is accepted (docs/behaviour.md). */
NT_CASE_FAM(foreign_and_wildcard_address)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    NDK_SOCKADDR sa;
    memset(&sa, 0, sizeof sa);
    ULONG len = nt_sa_len(fam);
    sa.sa.sa_family = (sa_family_t)fam;
    if (fam == AF_INET6)
        inet_pton(AF_INET6, "2001:db8::1", &sa.in6.sin6_addr);
    else
        inet_pton(AF_INET, "192.0.2.1", &sa.in4.sin_addr);
    NDK_SHARED_ENDPOINT *e = NULL;
    CHECK_STATUS(nt_create_sep(s.ad, &sa, len, &e), STATUS_INVALID_ADDRESS);
    nt_close(e);
    e = NULL;
    CHECK_STATUS(listen_once(&s, &sa, len), STATUS_INVALID_ADDRESS);

    memset(&sa, 0, sizeof sa);
    sa.sa.sa_family = (sa_family_t)fam; /* 0.0.0.0 / ::, port 0 */
    CHECK_STATUS(nt_create_sep(s.ad, &sa, len, &e), STATUS_SUCCESS);
    if (e) {
        NDK_SOCKADDR got;
        ULONG glen;
        CHECK_STATUS(sep_addr(e, &got, &glen), STATUS_SUCCESS);
        CHECK_EQ(got.sa.sa_family, fam);
        unsigned p = nt_sa_port(&got);
        CHECK(p >= NT_EPHEMERAL_LO && p <= NT_EPHEMERAL_HI);
    }
    nt_close(e);

    /* A wildcard listener takes connections to the loopback address. */
    nt_lsn *L = new_listener(&s);
    REQUIRE(L);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    NDK_SOCKADDR la;
    ULONG lalen = sizeof la;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, &la.sa, &lalen), STATUS_SUCCESS);
    CHECK_EQ(la.sa.sa_family, fam);
    CHECK(nt_sa_port(&la) != 0);
    L->addrlen = nt_sa_loop(fam, nt_sa_port(&la), &L->addr);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &s, &s, L));
    CHECK(nt_establish(&c));
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(ephemeral_port);
    RUN_FAM(many_connections);
    RUN_FAM(same_destination_twice);
    RUN_FAM(address_in_use);
    RUN_FAM(close_pends_for_connectors);
    RUN_FAM(connect_outcomes);
    RUN_FAM(reject_with_private_data);
    RUN_FAM(foreign_and_wildcard_address);
    return tl_finish();
}
