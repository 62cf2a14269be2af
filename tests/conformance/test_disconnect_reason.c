/*
 * ProviderDisconnectReason of the _EX disconnect callbacks (5.2.8: values
 * are the provider's, 0 means none given): libndk gives one of the
 * NDK_DISCONNECT_REASON_* codes of ndk.h for every way an established
 * connection can end, on each side:
 *   - the peer's NdkDisconnect (FIN at an FPDU boundary): PEER_CLOSED;
 *   - the peer closes its connector (a RST): ABORTED;
 *   - an RDMA Write to a token that does not exist: the victim sends a
 *     Terminate (TERMINATE_SENT), the writer receives it
 *     (TERMINATE_RECEIVED);
 *   - a receive completion that overflows its CQ: the QP is unusable, the
 *     connection is reset (LOCAL_ERROR; the peer sees ABORTED).
 * The decisions of 5.2.4 and 5.2.5 are pinned too: neither a CQ nor an SRQ
 * has an error state besides a CQ's overflow, so a QP that fails leaves the
 * CQ and SRQ it shares with another connection working, and their
 * notifications report STATUS_SUCCESS (never STATUS_INTERNAL_ERROR).
 * docs/behaviour.md "Disconnect".
 */
#include "dptest.h"

/* One side's disconnect event: how many, and the last reason. */
typedef struct reason_rec {
    tl_event ev;
    _Atomic ULONG reason;
} reason_rec;

static reason_rec recs[8];
static unsigned nrecs;

static reason_rec *rec_new(void)
{
    reason_rec *r = &recs[nrecs++];
    memset(r, 0, sizeof *r);
    tl_event_init(&r->ev);
    return r;
}

static void recs_reset(void)
{
    for (unsigned i = 0; i < nrecs; i++)
        tl_event_destroy(&recs[i].ev);
    nrecs = 0;
}

static void disc_ex(PVOID ctx, ULONG reason)
{
    reason_rec *r = ctx;
    atomic_store(&r->reason, reason);
    tl_event_signal(&r->ev);
}

/* The three legs with NdkAcceptEx and NdkCompleteConnectEx, whose disconnect
 * events land in ra (active) and rp (passive). */
static bool establish_ex(dp_conn *c, reason_rec *ra, reason_rec *rp)
{
    if (!dp_conn_listen(c) || !(c->ca = dp_connector_new(c->a)))
        return false;
    NDK_SOCKADDR src;
    ULONG srclen = dp_loop(&src, 0);
    dp_req *rc = dp_req_new("NdkConnect");
    rc->started = true;
    rc->returned = c->ca->Dispatch->NdkConnect(c->ca, c->qa, &src.sa, srclen, &c->laddr.sa, c->laddrlen,
                                               c->cfg.ird, c->cfg.ord, NULL, 0, dp_req_cb, rc);
    if (rc->returned != STATUS_PENDING || !(c->cp = dp_conn_incoming(c, DP_WAIT_MS)))
        return false;
    dp_req *ra_req = dp_req_new("NdkAcceptEx");
    ra_req->started = true;
    ra_req->returned = c->cp->Dispatch->NdkAcceptEx(c->cp, c->qp, c->cfg.p_ird, c->cfg.p_ord, NULL, 0, disc_ex,
                                                    rp, dp_req_cb, ra_req);
    if (dp_finish(rc, STATUS_PENDING, DP_WAIT_MS) != STATUS_SUCCESS)
        return false;
    dp_req *rcc = dp_req_new("NdkCompleteConnectEx");
    NTSTATUS st = dp_finish(rcc, c->ca->Dispatch->NdkCompleteConnectEx(c->ca, disc_ex, ra, dp_req_cb, rcc),
                            DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    NTSTATUS sa = dp_finish(ra_req, ra_req->returned, DP_WAIT_MS);
    DP_CHECK_ST(sa, STATUS_SUCCESS);
    return st == STATUS_SUCCESS && sa == STATUS_SUCCESS;
}

/* Exactly one event on r, with this reason. */
static void expect_reason(reason_rec *r, ULONG want, const char *who)
{
    if (!tl_event_wait(&r->ev, 1, DP_WAIT_MS)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: no disconnect event\n", tl_current, who);
        return;
    }
    ULONG got = atomic_load(&r->reason);
    if (got != want) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: reason %lu, expected %lu\n", tl_current, who, (unsigned long)got,
                (unsigned long)want);
    }
}

static void expect_no_event(reason_rec *r, const char *who)
{
    if (tl_event_wait(&r->ev, 1, DP_QUIET_MS)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: a disconnect event (reason %lu) it should not have\n", tl_current, who,
                (unsigned long)atomic_load(&r->reason));
    }
}

typedef struct world {
    dp_side a, p;
    dp_conn *c;
    reason_rec *ra, *rp;
} world;

static bool world_open(world *w, const dp_cfg *cfg)
{
    memset(w, 0, sizeof *w);
    if (!dp_side_open(&w->a) || !dp_side_open(&w->p))
        return false;
    w->c = dp_conn_new(&w->a, &w->p, cfg);
    w->ra = rec_new();
    w->rp = rec_new();
    return w->c && establish_ex(w->c, w->ra, w->rp);
}

static void world_close(world *w)
{
    dp_conn_close(w->c);
    dp_side_close(&w->a);
    dp_side_close(&w->p);
    recs_reset();
}

DP_CASE(peer_disconnect_is_peer_closed)
{
    world w;
    REQUIRE(world_open(&w, NULL));
    dp_req *d = dp_req_new("NdkDisconnect (active)");
    d->started = true;
    d->returned = w.c->ca->Dispatch->NdkDisconnect(w.c->ca, dp_req_cb, d);
    expect_reason(w.rp, NDK_DISCONNECT_REASON_PEER_CLOSED, "passive side");
    DP_CHECK_ST(dp_disconnect(w.c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(d, d->returned, DP_WAIT_MS), STATUS_SUCCESS);
    expect_no_event(w.ra, "active side (its own NdkDisconnect)");
    world_close(&w);
}

DP_CASE(peer_close_is_aborted)
{
    world w;
    REQUIRE(world_open(&w, NULL));
    dp_close(w.c->ca); /* an established connector closed: a RST */
    w.c->ca = NULL;
    expect_reason(w.rp, NDK_DISCONNECT_REASON_ABORTED, "passive side");
    expect_no_event(w.ra, "active side (its own close)");
    world_close(&w);
}

DP_CASE(terminate_sent_and_received)
{
    world w;
    REQUIRE(world_open(&w, NULL));
    dp_mr src;
    REQUIRE(dp_buf_reg(&w.a, &src, 64, 0, 7));
    NDK_SGE g = dp_sge(&src, 0, 64);
    /* A token the passive side never issued: it sends a Terminate. */
    DP_CHECK_ST(dp_write(w.c->qa, DP_CTX(1), &g, 1, (void *)(uintptr_t)0x1000, 0x12345600u, 0),
                STATUS_SUCCESS);
    expect_reason(w.rp, NDK_DISCONNECT_REASON_TERMINATE_SENT, "passive side (the victim)");
    expect_reason(w.ra, NDK_DISCONNECT_REASON_TERMINATE_RECEIVED, "active side (the writer)");
    dp_mr_close(&src);
    world_close(&w);
}

DP_CASE(cq_overflow_is_local_error)
{
    /* Receive CQs of one entry: the passive side's second receive
     * completion overflows its CQ (rule C8). */
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = true;
    cfg.cqd = 1;
    world w;
    REQUIRE(world_open(&w, &cfg));
    dp_mr rb, sb;
    REQUIRE(dp_buf_reg(&w.p, &rb, 2 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    REQUIRE(dp_buf_reg(&w.a, &sb, 64, 0, 3));
    for (unsigned i = 0; i < 2; i++) {
        NDK_SGE r = dp_sge(&rb, i * 64, 64);
        DP_CHECK_ST(dp_recv(w.c->qp, DP_CTX(10 + i), &r, 1), STATUS_SUCCESS);
    }
    NDK_SGE s = dp_sge(&sb, 0, 64);
    for (unsigned i = 0; i < 2; i++)
        DP_CHECK_ST(dp_send(w.c->qa, DP_CTX(20 + i), &s, 1, NDK_OP_FLAG_SILENT_SUCCESS), STATUS_SUCCESS);
    expect_reason(w.rp, NDK_DISCONNECT_REASON_LOCAL_ERROR, "passive side (its CQ overflowed)");
    expect_reason(w.ra, NDK_DISCONNECT_REASON_ABORTED, "active side (reset by the peer)");
    dp_mr_close(&rb);
    dp_mr_close(&sb);
    world_close(&w);
}

static tl_event srq_ev;
static _Atomic NTSTATUS srq_status = STATUS_PENDING;

static void srq_cb(PVOID ctx, NTSTATUS st)
{
    (void)ctx;
    atomic_store(&srq_status, st);
    tl_event_signal(&srq_ev);
}

/*
 * Two connections whose passive QPs share one CQ and one SRQ; the first
 * fails (a Terminate). The second still receives through the SRQ into the
 * CQ, NdkSrqReceive still takes receives, and both notifications report
 * STATUS_SUCCESS.
 */
DP_CASE(failed_qp_leaves_cq_and_srq_working)
{
    dp_side a, p;
    REQUIRE(dp_side_open(&a) && dp_side_open(&p));
    tl_event_init(&srq_ev);
    dp_req *r = dp_req_new("NdkCreateSrq");
    NDK_SRQ *made = NULL;
    NTSTATUS ret = p.pd->Dispatch->NdkCreateSrq(p.pd, 16, 1, 0, srq_cb, NULL, NULL, dp_create_cb, r, &made);
    NTSTATUS st;
    NDK_SRQ *srq = dp_created(r, ret, made, &st);
    REQUIRE(srq);
    dp_cfg cfg = dp_cfg_default();
    cfg.srq_p = srq;
    dp_conn *c1 = dp_conn_new(&a, &p, &cfg);
    dp_conn *c2 = dp_conn_new(&a, &p, &cfg);
    REQUIRE(c1 && c2);
    /* Connection 2's passive QP completes into connection 1's CQ. */
    dp_close(c2->qp);
    dp_cq_close(c2->cqp);
    c2->cqp = c2->rcqp = NULL; /* closed with connection 1 */
    c2->qp = dp_qp_create(&p, c1->rcqp, c1->cqp, srq, dp_qpctx_p(c2), &cfg, NULL);
    REQUIRE(c2->qp);
    dp_cq *cq = c1->cqp;
    reason_rec *r1a = rec_new(), *r1p = rec_new(), *r2a = rec_new(), *r2p = rec_new();
    REQUIRE(establish_ex(c1, r1a, r1p) && establish_ex(c2, r2a, r2p));
    dp_mr rb, sb;
    REQUIRE(dp_buf_reg(&p, &rb, 4 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    REQUIRE(dp_buf_reg(&a, &sb, 64, 0, 5));
    NDK_SGE r0 = dp_sge(&rb, 0, 64);
    DP_CHECK_ST(srq->Dispatch->NdkSrqReceive(srq, DP_CTX(1), &r0, 1), STATUS_SUCCESS);

    /* Connection 1 fails. */
    NDK_SGE g = dp_sge(&sb, 0, 64);
    DP_CHECK_ST(dp_write(c1->qa, DP_CTX(2), &g, 1, (void *)(uintptr_t)0x1000, 0x12345600u, 0), STATUS_SUCCESS);
    expect_reason(r1p, NDK_DISCONNECT_REASON_TERMINATE_SENT, "connection 1, passive side");
    /* The SRQ still takes receives and arms; the CQ still arms; connection
     * 2 receives, and both notify with STATUS_SUCCESS. */
    NDK_SGE r1 = dp_sge(&rb, 64, 64);
    DP_CHECK_ST(srq->Dispatch->NdkSrqReceive(srq, DP_CTX(3), &r1, 1), STATUS_SUCCESS);
    dp_req *m = dp_req_new("NdkModifySrq");
    DP_CHECK_ST(dp_finish(m, srq->Dispatch->NdkModifySrq(srq, 0, 2, dp_req_cb, m), DP_WAIT_MS), STATUS_SUCCESS);
    NDK_RESULT_EX res[4];
    CHECK_EQ(dp_get(cq, res, 4), 0);
    unsigned before = dp_cq_notified(cq);
    dp_arm(cq, NDK_CQ_NOTIFY_ANY);
    DP_CHECK_ST(dp_send(c2->qa, DP_CTX(4), &g, 1, 0), STATUS_SUCCESS);
    CHECK(tl_event_wait(&cq->notify, before + 1, DP_WAIT_MS));
    DP_CHECK_ST(atomic_load(&cq->last), STATUS_SUCCESS);
    ULONG n = dp_wait_ex(cq, res, 1, DP_WAIT_MS);
    CHECK_EQ(n, 1);
    if (n == 1) {
        DP_CHECK_ST(res[0].Status, STATUS_SUCCESS);
        CHECK(res[0].QPContext == dp_qpctx_p(c2));
    }
    CHECK(tl_event_wait(&srq_ev, 1, DP_WAIT_MS));
    DP_CHECK_ST(atomic_load(&srq_status), STATUS_SUCCESS);
    expect_no_event(r2p, "connection 2, passive side");
    dp_mr_close(&rb);
    dp_mr_close(&sb);
    dp_conn_close(c2);
    dp_conn_close(c1);
    dp_close(srq);
    dp_side_close(&a);
    dp_side_close(&p);
    tl_event_destroy(&srq_ev);
    recs_reset();
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(peer_disconnect_is_peer_closed);
    RUN_FAM(peer_close_is_aborted);
    RUN_FAM(terminate_sent_and_received);
    RUN_FAM(cq_overflow_is_local_error);
    RUN_FAM(failed_qp_leaves_cq_and_srq_working);
    return tl_finish();
}
