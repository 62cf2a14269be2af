/* Why a connect fails, and with what: NdkConnect and NdkReject
 * (STATUS_CONNECTION_REFUSED for no listener, backlog limits, a peer's
 * reject; STATUS_IO_TIMEOUT; all inline or async) and docs/behaviour.md
 * (paused listener, ListenBacklog, MPA Reply timeout, peer closing before
 * its Reply, malformed Replies, oversize private data -> inline
 * STATUS_INVALID_BUFFER_SIZE for Connect, Accept and Reject). */
#include "ndktest.h"

#include <sys/socket.h>

/* Connects c to dst and returns the final status. */
static NTSTATUS connect_final(nt_conn *c, const NDK_SOCKADDR *dst, ULONG len)
{
    nt_conn_connect_to(c, dst, len, 1, 1, NULL, 0);
    return nt_finish(c->connect, NT_WAIT_MS);
}

/* Nothing listens: a port bound without listen(), and the port of a
 * listener that was closed. */
NT_CASE_FAM(no_listener)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));

    NDK_SOCKADDR dead;
    ULONG dlen;
    int dfd = nt_dead_port(fam, &dead, &dlen);
    REQUIRE(dfd >= 0);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
    CHECK_STATUS(connect_final(&c, &dead, dlen), STATUS_CONNECTION_REFUSED);
    nt_conn_close(&c);
    close(dfd);

    nt_lsn *L = nt_listen(&as, fam);
    REQUIRE(L);
    NDK_SOCKADDR gone = L->addr;
    ULONG glen = L->addrlen;
    nt_lsn_close(L);
    REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
    CHECK_STATUS(connect_final(&c, &gone, glen), STATUS_CONNECTION_REFUSED);
    CHECK_EQ(nt_lsn_count(L), 0);
    nt_conn_close(&c);
    nt_side_close(&as);
}

/* NdkControlConnectEvents(TRUE): requests are refused as if no listener
 * existed, and no connect event is delivered, then or later;
 * NdkControlConnectEvents(FALSE): connects work again. */
NT_CASE_FAM(paused_listener)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));

    L->l->Dispatch->NdkControlConnectEvents(L->l, TRUE);
    for (int i = 0; i < 2; i++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        CHECK_STATUS(connect_final(&c, &L->addr, L->addrlen), STATUS_CONNECTION_REFUSED);
        nt_conn_close(&c);
    }
    CHECK(!tl_event_wait(&L->ev, 1, NT_QUIET_MS));

    L->l->Dispatch->NdkControlConnectEvents(L->l, FALSE);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK(nt_establish(&c));
    /* The refused requests were not queued for later. */
    CHECK(!tl_event_wait(&L->ev, 2, NT_QUIET_MS));
    CHECK_EQ(nt_lsn_count(L), 1);
    nt_conn_close(&c);

    /* Pausing again after a connection works the same. */
    L->l->Dispatch->NdkControlConnectEvents(L->l, TRUE);
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK_STATUS(connect_final(&c, &L->addr, L->addrlen), STATUS_CONNECTION_REFUSED);
    nt_conn_close(&c);
    CHECK_EQ(nt_lsn_count(L), 1);

    nt_pair_close(&as, &ps, L);
}

/* ListenBacklog = 2: two requests delivered and not answered fill it; the
 * third is refused without a connect event. Answering (reject, accept) or
 * closing a delivered connector makes room again. */
NT_CASE_FAM(backlog_exhausted)
{
    enum { N = 7 };
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_OPEN_OPTIONS po = nt_opts();
    po.ListenBacklog = 2;
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &po));
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    nt_conn c[N];
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++)
        REQUIRE(nt_conn_init(&c[i], fam, &as, &ps, L));

    /* Two delivered, unanswered. */
    nt_conn_connect(&c[0], 1, 1, NULL, 0);
    c[0].p = nt_incoming(L, 0, NT_WAIT_MS);
    nt_conn_connect(&c[1], 1, 1, NULL, 0);
    c[1].p = nt_incoming(L, 1, NT_WAIT_MS);
    REQUIRE(c[0].p && c[1].p);
    /* The third: refused, not delivered. */
    nt_conn_connect(&c[2], 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c[2].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    CHECK(!tl_event_wait(&L->ev, 3, NT_QUIET_MS));
    CHECK(!nt_done(c[0].connect));
    CHECK(!nt_done(c[1].connect));

    /* A reject makes room for one. */
    CHECK_STATUS(c[1].p->Dispatch->NdkReject(c[1].p, NULL, 0), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c[1].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    nt_conn_connect(&c[3], 1, 1, NULL, 0);
    c[3].p = nt_incoming(L, 2, NT_WAIT_MS);
    REQUIRE(c[3].p);
    nt_conn_connect(&c[4], 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c[4].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);

    /* So does an accept. */
    nt_conn_accept(&c[0], 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c[0].connect, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_complete(&c[0]);
    CHECK_STATUS(nt_finish(c[0].complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c[0].accept, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_connect(&c[5], 1, 1, NULL, 0);
    c[5].p = nt_incoming(L, 3, NT_WAIT_MS);
    REQUIRE(c[5].p);

    /* And closing a delivered connector (which refuses its request). */
    nt_close(c[3].p);
    c[3].p = NULL;
    CHECK_STATUS(nt_finish(c[3].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    nt_conn_connect(&c[6], 1, 1, NULL, 0);
    c[6].p = nt_incoming(L, 4, NT_WAIT_MS);
    CHECK(c[6].p != NULL);

    /* Never answered: closing them refuses the initiators. */
    nt_close(c[5].p);
    c[5].p = NULL;
    CHECK_STATUS(nt_finish(c[5].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    nt_close(c[6].p);
    c[6].p = NULL;
    if (c[6].connect)
        CHECK_STATUS(nt_finish(c[6].connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);

    for (int i = 0; i < N; i++)
        nt_conn_close(&c[i]);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* NdkReject: the initiator's Connect fails with STATUS_CONNECTION_REFUSED
 * (inline or async) and it can read the reject's private data; the
 * listener keeps working. */
NT_CASE_FAM(peer_reject)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    nt_conn_connect(&c, 4, 4, "knock", 5);
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(c.p);
    static const char why[] = "not today";
    CHECK_STATUS(c.p->Dispatch->NdkReject(c.p, (PVOID)why, sizeof why), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    char got[32];
    ULONG len = sizeof got;
    CHECK_STATUS(nt_gcd(c.a, NULL, NULL, got, &len), STATUS_SUCCESS);
    CHECK_EQ(len, sizeof why);
    CHECK(memcmp(got, why, sizeof why) == 0);
    /* A second Reject on the same connector is a call in the wrong state. */
    CHECK_STATUS(c.p->Dispatch->NdkReject(c.p, NULL, 0), STATUS_INVALID_DEVICE_STATE);
    nt_conn_close(&c);

    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK(nt_establish(&c));
    nt_pair_conn_close(&as, &ps, L, &c);
}

/* A peer that accepts the TCP connection and never sends an MPA Reply:
 * STATUS_IO_TIMEOUT after MpaReplyTimeoutMs (300 ms here). */
NT_CASE_FAM(mpa_reply_timeout)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    o.MpaReplyTimeoutMs = 300;
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    nt_raw raw;
    REQUIRE(nt_raw_listen(&raw, fam));
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
    uint64_t t0 = tl_now_ns();
    nt_conn_connect_to(&c, &raw.addr, raw.len, 1, 1, NULL, 0);
    CHECK(nt_raw_accept(&raw, NT_WAIT_MS));
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_IO_TIMEOUT);
    uint64_t ms = nt_ms_since(t0);
    CHECK(ms >= 250);
    CHECK(ms < 3000);
    nt_conn_close(&c);
    nt_raw_close(&raw);
    nt_side_close(&as);
}

/* The TCP handshake never finishes within TcpConnectTimeoutMs (300 ms):
 * STATUS_IO_TIMEOUT. A listening socket whose accept queue is full (backlog
 * 0, filled by plain connections nobody accepts) makes Linux drop the SYN. */
NT_CASE_FAM(tcp_connect_timeout)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    o.TcpConnectTimeoutMs = 300;
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    int lfd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(lfd >= 0);
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(fam, 0, &sa);
    socklen_t sl = len;
    REQUIRE(bind(lfd, &sa.sa, len) == 0 && listen(lfd, 0) == 0 &&
            getsockname(lfd, &sa.sa, &sl) == 0);
    int fill[3];
    for (int i = 0; i < 3; i++) {
        fill[i] = socket(fam, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        REQUIRE(fill[i] >= 0);
        int r = connect(fill[i], &sa.sa, len);
        CHECK(r == 0 || errno == EINPROGRESS);
    }
    /* The first filler's handshake completes (it sits in the accept queue);
     * wait for that, bounded, so the queue is known to be full. */
    struct pollfd pf = {.fd = fill[0], .events = POLLOUT};
    CHECK_EQ(poll(&pf, 1, (int)NT_WAIT_MS), 1);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
    uint64_t t0 = tl_now_ns();
    nt_conn_connect_to(&c, &sa, len, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_IO_TIMEOUT);
    uint64_t ms = nt_ms_since(t0);
    CHECK(ms >= 250);
    CHECK(ms < 3000);
    nt_conn_close(&c);
    for (int i = 0; i < 3; i++)
        close(fill[i]);
    close(lfd);
    nt_side_close(&as);
}

/* A Connect from side as to a raw responder that has taken the TCP
 * connection and read the MPA Request, and answered nothing yet. False
 * when the responder or the connection record could not be made. */
static bool connect_to_raw(nt_conn *c, nt_raw *raw, nt_side *as, int fam)
{
    if (!nt_raw_listen(raw, fam))
        return false;
    if (!nt_conn_init(c, fam, as, as, NULL))
        return false;
    nt_conn_connect_to(c, &raw->addr, raw->len, 1, 1, NULL, 0);
    CHECK(nt_raw_accept(raw, NT_WAIT_MS));
    char req[600];
    CHECK(nt_raw_read(raw, req, sizeof req, NT_WAIT_MS) >= 20);
    return true;
}

/* The peer closes (FIN) or resets (RST) its TCP connection before any MPA
 * Reply: STATUS_CONNECTION_REFUSED. */
NT_CASE_FAM(peer_closes_before_reply)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    for (int reset = 0; reset < 2; reset++) {
        nt_raw raw;
        nt_conn c;
        REQUIRE(connect_to_raw(&c, &raw, &as, fam));
        if (reset) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(raw.cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(raw.cfd);
        raw.cfd = -1;
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
        nt_conn_close(&c);
        nt_raw_close(&raw);
    }
    nt_side_close(&as);
}

/* A malformed MPA Reply (wrong key, unsupported revision):
 * STATUS_INVALID_NETWORK_RESPONSE. */
NT_CASE_FAM(malformed_reply)
{
    static const unsigned char bad_key[20] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'X', 'x', 'x',
                                              ' ', 'F', 'r', 'a', 'm', 'e', 0x10, 2, 0, 0};
    static const unsigned char bad_rev[20] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p',
                                              ' ', 'F', 'r', 'a', 'm', 'e', 0x10, 9, 0, 0};
    const unsigned char *frames[] = {bad_key, bad_rev};
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    for (int i = 0; i < 2; i++) {
        nt_raw raw;
        nt_conn c;
        REQUIRE(connect_to_raw(&c, &raw, &as, fam));
        CHECK_EQ(send(raw.cfd, frames[i], 20, MSG_NOSIGNAL), 20);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_INVALID_NETWORK_RESPONSE);
        nt_conn_close(&c);
        nt_raw_close(&raw);
    }
    nt_side_close(&as);
}

/* Private data over MaxCallerData (Connect) or MaxCalleeData (Accept,
 * Reject): STATUS_INVALID_BUFFER_SIZE returned inline, no completion; the
 * request was not made, so the passive connector can still be accepted. */
NT_CASE_FAM(oversize_private_data)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    static unsigned char big[1024];
    memset(big, 0x5A, sizeof big);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    static const ULONG over_r[] = {0, 1, 300};
    for (int i = 0; i < 3; i++) {
        ULONG n = as.info.MaxCallerData + 1 + over_r[i];
        NTSTATUS st = nt_conn_connect(&c, 1, 1, big, n);
        CHECK_STATUS(st, STATUS_INVALID_BUFFER_SIZE);
        CHECK_EQ(nt_count(c.connect), 0);
    }
    CHECK(!tl_event_wait(&L->ev, 1, NT_QUIET_MS));
    nt_conn_close(&c);

    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    nt_conn_connect(&c, 1, 1, big, as.info.MaxCallerData);
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(c.p);
    ULONG n = ps.info.MaxCalleeData + 1;
    CHECK_STATUS(nt_conn_accept(&c, 1, 1, big, n), STATUS_INVALID_BUFFER_SIZE);
    nt_op *bad_accept = c.accept;
    CHECK_STATUS(c.p->Dispatch->NdkReject(c.p, big, n), STATUS_INVALID_BUFFER_SIZE);
    CHECK_STATUS(c.p->Dispatch->NdkReject(c.p, big, sizeof big), STATUS_INVALID_BUFFER_SIZE);
    c.ex = true;
    CHECK_STATUS(nt_conn_accept(&c, 1, 1, big, n), STATUS_INVALID_BUFFER_SIZE);
    c.ex = false;
    CHECK(!nt_done(c.connect));

    /* The largest allowed reply goes through. */
    nt_conn_accept(&c, 1, 1, big, ps.info.MaxCalleeData);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_complete(&c);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_EQ(nt_count(bad_accept), 0);
    nt_conn_close(&c);

    nt_pair_close(&as, &ps, L);
}

/* A source address of the other family than the destination's: NdkConnect
 * refuses it inline with STATUS_INVALID_ADDRESS, before any socket call,
 * and no completion follows; the next connect on the pair works. */
NT_CASE_FAM(mixed_families)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    NDK_SOCKADDR other;
    ULONG olen = nt_sa_loop(fam == AF_INET ? AF_INET6 : AF_INET, 4791, &other);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK_STATUS(connect_final(&c, &other, olen), STATUS_INVALID_ADDRESS);
    nt_conn_close(&c);
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK(nt_establish(&c));
    nt_conn_close(&c);
    nt_pair_close(&as, &ps, L);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(no_listener);
    RUN_FAM(paused_listener);
    RUN_FAM(backlog_exhausted);
    RUN_FAM(peer_reject);
    RUN_FAM(mpa_reply_timeout);
    RUN_FAM(tcp_connect_timeout);
    RUN_FAM(peer_closes_before_reply);
    RUN_FAM(malformed_reply);
    RUN_FAM(oversize_private_data);
    RUN_FAM(mixed_families);
    return tl_finish();
}
