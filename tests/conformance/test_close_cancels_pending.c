/* A request pending when its connector is closed completes
 * STATUS_CANCELLED, and before the close completes (docs/behaviour.md): a
 * Connect, an Accept and a Disconnect, each cancelled by closing its
 * connector. The case wrapper counts every completion: each call completes
 * exactly once iff it returned STATUS_PENDING. */
#include "ndktest.h"

/* The close of obj (started now) finishes, req completes STATUS_CANCELLED,
 * and req's completion comes first: before the close completion, or - for
 * a close returning STATUS_SUCCESS - before the close returned. */
static void close_cancels(void *obj, nt_op *req)
{
    nt_op *cl = nt_close_start(obj);
    if (cl->returned == STATUS_SUCCESS && req->returned == STATUS_PENDING)
        CHECK_EQ(nt_count(req), 1); /* L13: completed and returned already */
    CHECK_STATUS(nt_finish(req, NT_WAIT_MS), STATUS_CANCELLED);
    CHECK(nt_close_wait(cl, NT_WAIT_MS));
    if (cl->returned == STATUS_PENDING && req->returned == STATUS_PENDING)
        CHECK(atomic_load(&req->seq) < atomic_load(&cl->seq));
}

NT_CASE_FAM(connect_cancelled_by_close)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    nt_raw raw;
    REQUIRE(nt_raw_listen(&raw, fam));
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &as, NULL));
    nt_conn_connect_to(&c, &raw.addr, raw.len, 1, 1, NULL, 0);
    CHECK_STATUS(c.connect->returned, STATUS_PENDING);
    CHECK(nt_raw_accept(&raw, NT_WAIT_MS));
    close_cancels(c.a, c.connect);
    c.a = NULL;
    /* No late completion once the close is done. */
    CHECK(!tl_event_wait(&c.connect->ev, 2, NT_QUIET_MS));
    nt_conn_close(&c);
    nt_raw_close(&raw);
    nt_side_close(&as);
}

NT_CASE_FAM(accept_cancelled_by_close)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    REQUIRE(nt_conn_deliver(&c, 1, 1));
    nt_conn_accept(&c, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(c.accept->returned, STATUS_PENDING); /* waits for CompleteConnect */
    close_cancels(c.p, c.accept);
    c.p = NULL;
    CHECK(!tl_event_wait(&c.accept->ev, 2, NT_QUIET_MS));
    nt_pair_conn_close(&as, &ps, L, &c);
}

NT_CASE_FAM(disconnect_cancelled_by_close)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    for (int active = 0; active < 2; active++) {
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        REQUIRE(nt_establish(&c));
        NDK_CONNECTOR **me = active ? &c.a : &c.p;
        nt_op *peer_ev = active ? c.dev_p : c.dev_a;
        nt_op *d;
        nt_disconnect(*me, &d);
        /* The peer got the FIN but does not answer: Disconnect pends. */
        CHECK(tl_event_wait(&peer_ev->ev, 1, NT_WAIT_MS));
        CHECK_STATUS(d->returned, STATUS_PENDING);
        close_cancels(*me, d);
        *me = NULL;
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(connect_cancelled_by_close);
    RUN_FAM(accept_cancelled_by_close);
    RUN_FAM(disconnect_cancelled_by_close);
    return tl_finish();
}
