/* Disconnect: the NetworkDirect disconnect scheme (rules X1-X6,
 * docs/rules.md; NdkDisconnect, NdkDisconnectEventCallback[Ex]) with
 * libndk's choices (docs/behaviour.md "Disconnect": FIN then completion on
 * the peer's FIN; one disconnect event for a peer's FIN or RST, none after a
 * local NdkDisconnect; closing an established connector resets it unless the
 * peer already sent its FIN; STATUS_IO_TIMEOUT after DisconnectTimeoutMs). */
#include "ndktest.h"

/* The connector, QP and disconnect-event op of one side. */
typedef struct end {
    NDK_CONNECTOR **c;
    NDK_QP *qp;
    nt_op *dev;
    const char *name;
} end;

static end end_of(nt_conn *c, bool active)
{
    end e;
    e.c = active ? &c->a : &c->p;
    e.qp = active ? c->qa : c->qp;
    e.dev = active ? c->dev_a : c->dev_p;
    e.name = active ? "active" : "passive";
    return e;
}

/* A disconnects, B sees exactly one event, B disconnects, both complete
 * STATUS_SUCCESS, A never sees an event (it disconnected first). */
static void graceful(int fam, bool ex, bool active_first)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    c.ex = ex;
    REQUIRE(nt_establish(&c));
    end A = end_of(&c, active_first), B = end_of(&c, !active_first);

    nt_op *da, *db;
    nt_disconnect(*A.c, &da);
    /* B's event: once. */
    CHECK(tl_event_wait(&B.dev->ev, 1, NT_WAIT_MS));
    CHECK(!tl_event_wait(&B.dev->ev, 2, NT_QUIET_MS));
    CHECK_EQ(atomic_load(&B.dev->ex_called), ex ? 1 : 0);
    /* X1: A's Disconnect waits for B's graceful notification. */
    CHECK(!nt_done(da));

    nt_disconnect(*B.c, &db);
    CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(db, NT_WAIT_MS), STATUS_SUCCESS);
    /* X2: no event on A, which called NdkDisconnect before B's FIN came. */
    CHECK(!tl_event_wait(&A.dev->ev, 1, NT_QUIET_MS));
    CHECK_EQ(nt_count(B.dev), 1);

    nt_conn_close(&c);
    /* Nothing after the close either. */
    CHECK_EQ(nt_count(A.dev), 0);
    CHECK_EQ(nt_count(B.dev), 1);
    nt_pair_close(&as, &ps, L);
    /* After the adapters closed (every callback returned): unchanged. */
    CHECK_EQ(nt_count(A.dev), 0);
    CHECK_EQ(nt_count(B.dev), 1);
}

NT_CASE_FAM(graceful_active_first)
{
    graceful(fam, false, true);
}

NT_CASE_FAM(graceful_passive_first)
{
    graceful(fam, false, false);
}

/* The same with NdkAcceptEx / NdkCompleteConnectEx: the Ex callback runs,
 * with its context and a provider reason (any value, 0 = none). */
NT_CASE_FAM(graceful_ex_active_first)
{
    graceful(fam, true, true);
}

NT_CASE_FAM(graceful_ex_passive_first)
{
    graceful(fam, true, false);
}

/* X4: both sides disconnect at once. Both complete STATUS_SUCCESS; an
 * event racing with the local Disconnect is allowed, at most one each. */
NT_CASE_FAM(both_at_once)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int ex = 0; ex < 2; ex++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        c.ex = ex;
        REQUIRE(nt_establish(&c));
        nt_op *da, *dp;
        nt_disconnect(c.a, &da);
        nt_disconnect(c.p, &dp);
        CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(dp, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK(!tl_event_wait(&c.dev_a->ev, 2, NT_QUIET_MS));
        CHECK(nt_count(c.dev_p) <= 1);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* 7.7: closing an established connector is the abortive path; the peer
 * gets its disconnect event once, the closing side none. Both directions.
 * The peer's own NdkDisconnect then fails STATUS_CONNECTION_ABORTED (its
 * peer reset instead of sending a FIN). */
NT_CASE_FAM(abortive_close)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int i = 0; i < 4; i++) {
        bool active_closes = i % 2 == 0;
        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        c.ex = i >= 2;
        REQUIRE(nt_establish(&c));
        end A = end_of(&c, active_closes), B = end_of(&c, !active_closes);
        nt_close(*A.c);
        *A.c = NULL;
        CHECK(tl_event_wait(&B.dev->ev, 1, NT_WAIT_MS));
        CHECK(!tl_event_wait(&B.dev->ev, 2, NT_QUIET_MS));
        CHECK_EQ(nt_count(A.dev), 0);
        nt_op *db;
        nt_disconnect(*B.c, &db);
        CHECK_STATUS(nt_finish(db, NT_WAIT_MS), STATUS_CONNECTION_ABORTED);
        CHECK_EQ(nt_count(B.dev), 1);
        if (tl_failures != f0)
            fprintf(stderr, "    %s side closed%s\n", A.name, c.ex ? " (Ex)" : "");
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* docs/behaviour.md: after the peer's FIN a close is graceful - A's pending
 * Disconnect completes STATUS_SUCCESS when B closes its connector instead
 * of calling NdkDisconnect; A gets no event. */
NT_CASE_FAM(peer_closes_after_fin)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int active_first = 0; active_first < 2; active_first++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        REQUIRE(nt_establish(&c));
        end A = end_of(&c, active_first), B = end_of(&c, !active_first);
        nt_op *da;
        nt_disconnect(*A.c, &da);
        CHECK(tl_event_wait(&B.dev->ev, 1, NT_WAIT_MS));
        nt_close(*B.c);
        *B.c = NULL;
        CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK(!tl_event_wait(&A.dev->ev, 1, NT_QUIET_MS));
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* docs/behaviour.md: no FIN from the peer within DisconnectTimeoutMs (300
 * ms) -> STATUS_IO_TIMEOUT, and the connection is reset; the peer's single
 * event has already been delivered and no second one follows. */
NT_CASE_FAM(disconnect_timeout)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    o.DisconnectTimeoutMs = 300;
    NDK_OPEN_OPTIONS po = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &po));
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    REQUIRE(nt_establish(&c));
    uint64_t t0 = tl_now_ns();
    nt_op *da;
    nt_disconnect(c.a, &da);
    CHECK(tl_event_wait(&c.dev_p->ev, 1, NT_WAIT_MS));
    CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_IO_TIMEOUT);
    uint64_t ms = nt_ms_since(t0);
    CHECK(ms >= 250);
    CHECK(ms < 3000);
    CHECK(!tl_event_wait(&c.dev_p->ev, 2, NT_QUIET_MS));
    CHECK_EQ(nt_count(c.dev_a), 0);
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* X6 / 7.6 rule 7: a disconnected connector cannot be reused (Connect or
 * Disconnect on it -> STATUS_INVALID_DEVICE_STATE), nor can its QP back
 * another connection (Connect or Accept with it -> STATUS_INVALID_DEVICE_STATE),
 * whether its old connector still lives or not. */
NT_CASE_FAM(no_reuse_after_disconnect)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_establish(&c));
    nt_graceful_disconnect(c.a, c.p, c.dev_p);

    /* The disconnected connector, with a fresh QP. */
    NDK_QP *fresh = nt_qp(&as);
    REQUIRE(fresh);
    NDK_QP *old_qa = c.qa;
    c.qa = fresh;
    nt_conn_connect(&c, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
    c.qa = old_qa;
    nt_op *again;
    nt_disconnect(c.a, &again);
    CHECK_STATUS(nt_finish(again, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
    CHECK(!tl_event_wait(&L->ev, 2, NT_QUIET_MS));

    for (int closed = 0; closed < 2; closed++) {
        int f0 = tl_failures;
        if (closed) {
            /* Now without the old connectors. */
            nt_close(c.a);
            nt_close(c.p);
            c.a = c.p = NULL;
        }
        /* The old active QP on a new connector. */
        nt_conn d;
        REQUIRE(nt_conn_init(&d, fam, &as, &ps, L));
        NDK_QP *own = d.qa;
        d.qa = c.qa;
        nt_conn_connect(&d, 1, 1, NULL, 0);
        CHECK_STATUS(nt_finish(d.connect, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
        d.qa = own;
        nt_close(d.a);
        d.a = nt_connector(&as);
        REQUIRE(d.a);
        /* The old passive QP offered to a new incoming connection. */
        unsigned idx = nt_lsn_count(L);
        nt_conn_connect(&d, 1, 1, NULL, 0);
        d.p = nt_incoming(L, idx, NT_WAIT_MS);
        if (d.p) {
            NDK_QP *ownp = d.qp;
            d.qp = c.qp;
            nt_conn_accept(&d, 1, 1, NULL, 0);
            CHECK_STATUS(nt_finish(d.accept, NT_WAIT_MS), STATUS_INVALID_DEVICE_STATE);
            d.qp = ownp;
        }
        if (tl_failures != f0)
            fprintf(stderr, "    old connectors %s\n", closed ? "closed" : "alive");
        nt_conn_close(&d);
    }
    nt_close(fresh);
    nt_pair_conn_close(&as, &ps, L, &c);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(graceful_active_first);
    RUN_FAM(graceful_passive_first);
    RUN_FAM(graceful_ex_active_first);
    RUN_FAM(graceful_ex_passive_first);
    RUN_FAM(both_at_once);
    RUN_FAM(abortive_close);
    RUN_FAM(peer_closes_after_fin);
    RUN_FAM(disconnect_timeout);
    RUN_FAM(no_reuse_after_disconnect);
    return tl_finish();
}
