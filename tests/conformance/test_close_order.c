/* The order of closes: the close completion is an object's last callback,
 * and an antecedent's close (a QP under its connector, CQ and PD under a QP,
 * a listener under the connectors accepted or delivered over it) pends
 * until its successors are closed; a closing listener refuses new requests
 * at once, and its port stays reserved while those connectors live. */
#include "ndktest.h"

/* L14: once a connector's close finished, its disconnect event never runs,
 * even when the peer then disconnects or goes away; once a listener's close
 * finished, no connect event runs. */
NT_CASE_FAM(close_completion_is_last)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int active = 0; active < 2; active++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        REQUIRE(nt_establish(&c));
        NDK_CONNECTOR **me = active ? &c.a : &c.p, **peer = active ? &c.p : &c.a;
        nt_op *my_ev = active ? c.dev_a : c.dev_p;
        nt_close(*me);
        *me = NULL;
        unsigned n = nt_count(my_ev);
        nt_op *d;
        nt_disconnect(*peer, &d);
        nt_finish(d, NT_WAIT_MS);
        nt_close(*peer);
        *peer = NULL;
        CHECK(!tl_event_wait(&my_ev->ev, n + 1, NT_QUIET_MS));
        CHECK_EQ(n, 0);
        nt_conn_close(&c);
    }
    NDK_SOCKADDR addr = L->addr;
    ULONG alen = L->addrlen;
    nt_lsn_close(L);
    unsigned n = nt_lsn_count(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, NULL));
    nt_conn_connect_to(&c, &addr, alen, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    CHECK(!tl_event_wait(&L->ev, n + 1, NT_QUIET_MS));
    nt_conn_close(&c);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* The close of ante (started) stays pending while succ lives, and
 * completes after succ's close completion has run. */
static void pends_until(nt_op *ante_close, void *succ)
{
    CHECK_STATUS(ante_close->returned, STATUS_PENDING);
    CHECK(!tl_event_wait(&ante_close->ev, 1, NT_QUIET_MS));
    nt_op *sc = nt_close_start(succ);
    CHECK(nt_close_wait(sc, NT_WAIT_MS));
    CHECK(nt_close_wait(ante_close, NT_WAIT_MS));
    if (sc->returned == STATUS_PENDING && ante_close->returned == STATUS_PENDING)
        CHECK(atomic_load(&sc->seq) < atomic_load(&ante_close->seq));
}

/* QP -> connector (the QP is the connector's antecedent once NdkConnect or
 * NdkAccept joined them, L8): a QP closed while its connector lives. Both
 * sides; the connection keeps working meanwhile (a graceful disconnect). */
NT_CASE_FAM(qp_close_pends_for_connector)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_establish(&c));
    nt_op *qa_close = nt_close_start(c.qa);
    nt_op *qp_close = nt_close_start(c.qp);
    c.qa = c.qp = NULL;
    CHECK(!tl_event_wait(&qa_close->ev, 1, NT_QUIET_MS));
    nt_graceful_disconnect(c.a, c.p, c.dev_p);
    pends_until(qa_close, c.a);
    pends_until(qp_close, c.p);
    c.a = c.p = NULL;
    nt_pair_close(&as, &ps, L);
}

/* CQ and PD -> QP: closed first, they pend until the QP is closed. */
NT_CASE(cq_pd_close_pend_for_qp)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    NDK_QP *qp = nt_qp(&s);
    REQUIRE(qp);
    nt_op *cq_close = nt_close_start(s.cq);
    nt_op *pd_close = nt_close_start(s.pd);
    s.cq = NULL;
    s.pd = NULL;
    CHECK_STATUS(cq_close->returned, STATUS_PENDING);
    CHECK(!tl_event_wait(&pd_close->ev, 1, NT_QUIET_MS));
    nt_op *qc = nt_close_start(qp);
    CHECK(nt_close_wait(qc, NT_WAIT_MS));
    CHECK(nt_close_wait(cq_close, NT_WAIT_MS));
    CHECK(nt_close_wait(pd_close, NT_WAIT_MS));
    CHECK_STATUS(pd_close->returned, STATUS_PENDING);
    if (qc->returned == STATUS_PENDING) {
        CHECK(atomic_load(&qc->seq) < atomic_load(&cq_close->seq));
        CHECK(atomic_load(&qc->seq) < atomic_load(&pd_close->seq));
    }
    nt_side_close(&s);
}

/* E5/E6: the listener's close pends while connectors accepted over it live,
 * but it refuses new requests at once; its address and port stay reserved
 * (another Listen, or a Connect from it: STATUS_SHARING_VIOLATION) until the
 * listener and all those connectors are closed, then they are free. */
NT_CASE_FAM(listener_close_pends_for_accepted)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    nt_conn c1, c2;
    REQUIRE(nt_conn_init(&c1, fam, &as, &ps, L));
    REQUIRE(nt_establish(&c1));
    REQUIRE(nt_conn_init(&c2, fam, &as, &ps, L));
    REQUIRE(nt_establish(&c2));

    /* Reserved while the listener lives too. */
    nt_lsn *L2 = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(ps.ad, nt_connect_event, L2, &L2->l), STATUS_SUCCESS);
    REQUIRE(L2->l);
    CHECK_STATUS(nt_listen_at(L2->l, &L->addr, L->addrlen), STATUS_SHARING_VIOLATION);
    nt_close(L2->l);
    L2->l = NULL;

    nt_op *lc = nt_close_start(L->l);
    L->l = NULL;
    CHECK_STATUS(lc->returned, STATUS_PENDING);
    /* Refuses at once, no event. */
    nt_conn r;
    REQUIRE(nt_conn_init(&r, fam, &as, &ps, NULL));
    nt_conn_connect_to(&r, &L->addr, L->addrlen, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(r.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    CHECK_EQ(nt_lsn_count(L), 2);
    nt_conn_close(&r);

    /* The port is still reserved. */
    L2 = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(ps.ad, nt_connect_event, L2, &L2->l), STATUS_SUCCESS);
    REQUIRE(L2->l);
    CHECK_STATUS(nt_listen_at(L2->l, &L->addr, L->addrlen), STATUS_SHARING_VIOLATION);
    NDK_CONNECTOR *x = nt_connector(&ps);
    NDK_QP *xq = nt_qp(&ps);
    nt_lsn *L3 = nt_listen(&as, fam);
    REQUIRE(x && xq && L3);
    nt_op *xc = nt_op_new(NT_REQ, "NdkConnect(from a reserved port)");
    nt_started(xc, x->Dispatch->NdkConnect(x, xq, &L->addr.sa, L->addrlen, &L3->addr.sa,
                                           L3->addrlen, 1, 1, NULL, 0, nt_req_cb, xc));
    CHECK_STATUS(nt_finish(xc, NT_WAIT_MS), STATUS_SHARING_VIOLATION);
    nt_close(x);
    nt_close(xq);
    nt_lsn_close(L3);

    /* The accepted connectors still work: one disconnects gracefully. */
    nt_graceful_disconnect(c1.p, c1.a, c1.dev_a);

    nt_conn_close(&c1);
    CHECK(!tl_event_wait(&lc->ev, 1, NT_QUIET_MS));
    nt_close(c2.a);
    c2.a = NULL;
    CHECK_EQ(nt_count(lc), 0); /* the passive connector is what it waits for */
    nt_op *last = nt_close_start(c2.p);
    c2.p = NULL;
    CHECK(nt_close_wait(last, NT_WAIT_MS));
    CHECK(nt_close_wait(lc, NT_WAIT_MS));
    if (last->returned == STATUS_PENDING)
        CHECK(atomic_load(&last->seq) < atomic_load(&lc->seq));
    nt_conn_close(&c2);
    nt_lsn_close(L2);

    /* Free again: listen there, and connect to it. */
    nt_lsn *L4 = nt_listen_on(&ps, fam, nt_sa_port(&L->addr));
    REQUIRE(L4);
    CHECK_SA_EQ(&L4->addr, &L->addr);
    nt_conn c3;
    REQUIRE(nt_conn_init(&c3, fam, &as, &ps, L4));
    CHECK(nt_establish(&c3));
    nt_conn_close(&c3);
    nt_lsn_close(L4);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* A connector delivered and not answered is a successor of its listener as
 * well (2.2: "delivery through NdkConnectEventCallback"). */
NT_CASE_FAM(listener_close_pends_for_delivered)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_conn_deliver(&c, 1, 1));
    nt_op *lc = nt_close_start(L->l);
    L->l = NULL;
    pends_until(lc, c.p);
    c.p = NULL;
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
    nt_conn_close(&c);
    nt_side_close(&as);
    nt_side_close(&ps);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(close_completion_is_last);
    RUN_FAM(qp_close_pends_for_connector);
    RUN(cq_pd_close_pend_for_qp);
    RUN_FAM(listener_close_pends_for_accepted);
    RUN_FAM(listener_close_pends_for_delivered);
    return tl_finish();
}
