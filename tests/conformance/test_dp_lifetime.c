/* Exactly-once completion under flush, disconnect and close: NdkFlush with
 * receives and sends outstanding, NdkDisconnect with receives posted (their
 * implicit flush), both sides disconnecting at once, a peer reset, closing a
 * QP with receives posted, and the two races NDKPI requires providers to
 * survive: NdkCloseConnector while another thread posts on its QP (W5) and
 * NdkFlush while other threads post on both queues (W4). In every case each
 * request that was accepted completes exactly once and each request that
 * was refused inline never does.
 * Contract: NdkFlush, NdkDisconnect; rules D3 (one CQ entry per accepted
 * request, none for a refused one), L3, W2, W4, W5 and X1-X6 (docs/rules.md).
 * libndk decisions relied on (docs/behaviour.md): NdkFlush on a connected QP
 * cancels everything and leaves the connection up (the QP takes no more
 * requests and drops what the peer sends; NdkDisconnect then ends the
 * connection gracefully); work requests on a QP that is not
 * connected (any more), or flushed -> STATUS_CONNECTION_INVALID. */
#include "dptest.h"

/* Counts completions by RequestContext (1..n) and checks exactly-once. */
typedef struct ledger {
    unsigned n;
    unsigned char *hits;
    NTSTATUS *st;
    unsigned stray;
} ledger;

static void ledger_init(ledger *l, unsigned n)
{
    l->n = n;
    l->hits = dp_malloc(n + 1);
    l->st = dp_malloc((n + 1) * sizeof *l->st);
    l->stray = 0;
}

static void ledger_add(ledger *l, const NDK_RESULT_EX *r, ULONG k)
{
    for (ULONG i = 0; i < k; i++) {
        uintptr_t c = (uintptr_t)r[i].RequestContext;
        if (c == 0 || c > l->n) {
            l->stray++;
            continue;
        }
        if (l->hits[c] < 255)
            l->hits[c]++;
        l->st[c] = r[i].Status;
    }
}

/* Drains c into l until `want` completions were counted or ms passed. */
static void ledger_drain(ledger *l, dp_cq *c, unsigned want, unsigned ms)
{
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        unsigned have = 0;
        for (unsigned i = 1; i <= l->n; i++)
            have += l->hits[i];
        if (have >= want)
            break;
        NDK_RESULT_EX r[32];
        uint64_t now = tl_now_ns();
        unsigned left = now >= deadline ? 0 : (unsigned)((deadline - now) / 1000000u);
        ULONG k = dp_wait_ex(c, r, 1, left);
        if (k == 0)
            break;
        ledger_add(l, r, k);
        k = dp_get(c, r, 32);
        ledger_add(l, r, k);
    }
}

/* Every context in [1, n] that `accepted` marks completed exactly once,
 * every other context never, nothing stray. */
static void ledger_check(const char *what, ledger *l, const bool *accepted)
{
    unsigned bad = 0;
    for (unsigned i = 1; i <= l->n; i++) {
        unsigned want = accepted[i] ? 1u : 0u;
        if (l->hits[i] != want) {
            if (bad++ < 5)
                fprintf(stderr, "[%s] %s: request %u completed %u times (expected %u)\n",
                        tl_current, what, i, l->hits[i], want);
        }
    }
    if (l->stray)
        fprintf(stderr, "[%s] %s: %u completions with unknown contexts\n", tl_current, what,
                l->stray);
    if (bad || l->stray)
        tl_failures++;
}

static unsigned ledger_count(const ledger *l, NTSTATUS st)
{
    unsigned k = 0;
    for (unsigned i = 1; i <= l->n; i++)
        if (l->hits[i] && l->st[i] == st)
            k++;
    return k;
}

/*
 * NdkFlush on a connected QP whose peer never reads (a raw MPA initiator):
 * 8 receives and 4 large Sends are outstanding; every one completes once,
 * with STATUS_CANCELLED (NdkFlush); the connection stays up (the raw peer's
 * stream does not end); a second NdkFlush adds nothing; after it an
 * initiator request is refused inline and a receive either is refused or
 * completes once, cancelled.
 */
DP_CASE(flush_cancels_outstanding_once)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cfg cfg = dp_cfg_default();
    int fd;
    dp_conn *c = dp_raw_accept(&s, &cfg, &fd);
    REQUIRE(c);
    dp_mr big, rr;
    uint8_t *b = dp_guarded(16 * MiB, false, 0x42);
    uint8_t *rb = dp_buf_reg(&s, &rr, 8 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(rb && dp_mr_reg(&s, &big, b, 16 * MiB, 0));
    ledger l;
    ledger_init(&l, 20);
    bool acc[21] = {false};
    for (unsigned i = 1; i <= 8; i++) {
        NDK_SGE r = dp_sge(&rr, (i - 1) * 64, 64);
        acc[i] = dp_recv(c->qp, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
        CHECK(acc[i]);
    }
    NDK_SGE g = dp_sge(&big, 0, 16 * MiB);
    for (unsigned i = 9; i <= 12; i++) {
        acc[i] = dp_send(c->qp, DP_CTX(i), &g, 1, 0) == STATUS_SUCCESS;
        CHECK(acc[i]);
    }
    DP_CHECK_QUIET(c->cqp);
    c->qp->Dispatch->NdkFlush(c->qp);
    ledger_drain(&l, c->cqp, 12, DP_WAIT_MS);
    c->qp->Dispatch->NdkFlush(c->qp);
    NDK_RESULT_EX r[8];
    ULONG k = dp_quiet(c->cqp, r, 8, DP_QUIET_MS);
    ledger_add(&l, r, k);
    ledger_check("flushed", &l, acc);
    CHECK_EQ(ledger_count(&l, STATUS_CANCELLED), 12);
    /* The connection is still there: no FIN, no RST, no disconnect event. */
    CHECK(!dp_raw_wait_end(fd, DP_QUIET_MS));
    CHECK_EQ(tl_event_count(&c->disc_p), 0);
    /* The flushed QP takes no more initiator requests. */
    NDK_SGE one = dp_sge(&big, 0, 1);
    DP_CHECK_ST(dp_send(c->qp, DP_CTX(13), &one, 1, 0), STATUS_CONNECTION_INVALID);
    NDK_SGE r14 = dp_sge(&rr, 0, 64);
    acc[14] = dp_recv(c->qp, DP_CTX(14), &r14, 1) == STATUS_SUCCESS;
    ledger_drain(&l, c->cqp, 12u + (acc[14] ? 1u : 0u), DP_WAIT_MS);
    k = dp_quiet(c->cqp, r, 8, DP_QUIET_MS);
    ledger_add(&l, r, k);
    ledger_check("after the flush", &l, acc);
    if (acc[14])
        DP_CHECK_ST(l.st[14], STATUS_CANCELLED);
    close(fd);
    dp_conn_close(c);
    dp_mr_close(&big);
    dp_mr_close(&rr);
    dp_side_close(&s);
}

/*
 * NdkFlush between two NDK sides: the flushing side's receives are all
 * cancelled once and its Reads complete once each (done or cancelled); the
 * connection stays up: no disconnect event on either side. What the peer
 * sends then (a Send, which without a receive would otherwise cost a
 * Terminate, and a Write) completes on the peer and is dropped by the
 * flushed side: nothing placed, no completion, no Terminate. NdkDisconnect
 * of the flushed side then ends the connection gracefully: the peer gets
 * one disconnect event, both NdkDisconnect calls succeed, and the peer's
 * receives are flushed by its own (X5).
 */
DP_CASE(flush_connected_pair)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ra, rp, src, sink, wt, ps;
    uint8_t *ab = dp_buf_reg(&x.a, &ra, 8 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *pb = dp_buf_reg(&x.p, &rp, 8 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *s = dp_buf_reg(&x.p, &src, 4 * MiB, NDK_MR_FLAG_ALLOW_REMOTE_READ, 3);
    uint8_t *k = dp_buf_reg(&x.a, &sink, 4 * MiB, DP_SINK_FLAGS, 0);
    uint8_t *w = dp_buf_reg(&x.a, &wt, 64, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 9);
    uint8_t *pp = dp_buf_reg(&x.p, &ps, 64, 0, 10);
    REQUIRE(ab && pb && s && k && w && pp);
    ledger la, lp;
    ledger_init(&la, 16);
    ledger_init(&lp, 16);
    bool acca[17] = {false}, accp[17] = {false};
    for (unsigned i = 1; i <= 8; i++) {
        NDK_SGE r = dp_sge(&ra, (i - 1) * 64, 64);
        acca[i] = dp_recv(c->qa, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
        NDK_SGE q = dp_sge(&rp, (i - 1) * 64, 64);
        accp[i] = dp_recv(c->qp, DP_CTX(i), &q, 1) == STATUS_SUCCESS;
        CHECK(acca[i] && accp[i]);
    }
    for (unsigned i = 9; i <= 12; i++) {
        NDK_SGE ks = dp_sge(&sink, (i - 9) * MiB, MiB);
        acca[i] = dp_read(c->qa, DP_CTX(i), &ks, 1, s + (i - 9) * MiB, src.rtok, 0) ==
                  STATUS_SUCCESS;
        CHECK(acca[i]);
    }
    c->qa->Dispatch->NdkFlush(c->qa);
    ledger_drain(&la, c->cqa, 12, DP_WAIT_MS);
    ledger_check("flushing side", &la, acca);
    for (unsigned i = 1; i <= 8; i++)
        DP_CHECK_ST(la.st[i], STATUS_CANCELLED);
    for (unsigned i = 9; i <= 12; i++)
        CHECK(la.st[i] == STATUS_SUCCESS || la.st[i] == STATUS_CANCELLED);
    NDK_SGE one = dp_sge(&ps, 0, 64);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(13), &one, 1, 0), STATUS_CONNECTION_INVALID);

    /* The peer sends into the flushed QP: completed there, dropped here. */
    accp[13] = dp_send(c->qp, DP_CTX(13), &one, 1, 0) == STATUS_SUCCESS;
    accp[14] = dp_write(c->qp, DP_CTX(14), &one, 1, w, wt.rtok, 0) == STATUS_SUCCESS;
    CHECK(accp[13] && accp[14]);
    NDK_RESULT_EX pr[2];
    ULONG pk = dp_wait_ex(c->cqp, pr, 2, DP_WAIT_MS);
    CHECK_EQ(pk, 2);
    for (ULONG i = 0; i < pk; i++)
        DP_CHECK_ST(pr[i].Status, STATUS_SUCCESS);
    ledger_add(&lp, pr, pk);
    DP_CHECK_QUIET(c->cqa);
    DP_CHECK_DATA(w, 64, 9, 0); /* the Write was not placed */
    CHECK(!tl_event_wait(&c->disc_a, 1, DP_QUIET_MS));
    CHECK_EQ(tl_event_count(&c->disc_p), 0);

    /* The flushed side ends the connection gracefully. */
    dp_req *da = dp_req_new("NdkDisconnect (flushed side)");
    da->started = true;
    da->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, da);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(da, da->returned, DP_WAIT_MS), STATUS_SUCCESS);
    ledger_drain(&lp, c->cqp, 10, DP_WAIT_MS);
    ledger_check("peer", &lp, accp);
    CHECK_EQ(ledger_count(&lp, STATUS_CANCELLED), 8);
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
    dp_mr_close(&ra);
    dp_mr_close(&rp);
    dp_mr_close(&src);
    dp_mr_close(&sink);
    dp_mr_close(&wt);
    dp_mr_close(&ps);
    dp_pair_close(&x);
}

/*
 * NdkDisconnect with receives posted on both sides (X1-X6):
 * the peer gets exactly one disconnect event and, since the provider should
 * not flush because of an incoming disconnect (X3), its receives stay
 * posted until it calls NdkDisconnect itself; then both NdkDisconnect calls
 * complete successfully, each side's receives are flushed (STATUS_CANCELLED,
 * once each), the initiating side gets no disconnect event, and the QP takes
 * no more initiator requests (X6).
 */
DP_CASE(disconnect_flushes_receives)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ra, rp, ms;
    uint8_t *ab = dp_buf_reg(&x.a, &ra, 4 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *pb = dp_buf_reg(&x.p, &rp, 4 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    uint8_t *mb = dp_buf_reg(&x.a, &ms, 64, 0, 4);
    REQUIRE(ab && pb && mb);
    ledger la, lp;
    ledger_init(&la, 8);
    ledger_init(&lp, 8);
    bool acca[9] = {false}, accp[9] = {false};
    for (unsigned i = 1; i <= 4; i++) {
        NDK_SGE r = dp_sge(&ra, (i - 1) * 64, 64);
        acca[i] = dp_recv(c->qa, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
        NDK_SGE q = dp_sge(&rp, (i - 1) * 64, 64);
        accp[i] = dp_recv(c->qp, DP_CTX(i), &q, 1) == STATUS_SUCCESS;
    }
    DP_CHECK_QUIET(c->cqa);
    dp_req *da = dp_req_new("NdkDisconnect (active)");
    da->started = true;
    da->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, da);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    /* X3: nothing flushed on the passive side by the incoming disconnect. */
    DP_CHECK_QUIET(c->cqp);
    DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(da, da->returned, DP_WAIT_MS), STATUS_SUCCESS);
    ledger_drain(&la, c->cqa, 4, DP_WAIT_MS);
    ledger_drain(&lp, c->cqp, 4, DP_WAIT_MS);
    ledger_check("active", &la, acca);
    ledger_check("passive", &lp, accp);
    CHECK_EQ(ledger_count(&la, STATUS_CANCELLED), 4);
    CHECK_EQ(ledger_count(&lp, STATUS_CANCELLED), 4);
    /* No reuse (X6): initiator requests are refused, a receive is either
     * refused or completes once, cancelled. */
    NDK_SGE g = dp_sge(&ms, 0, 8);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), &g, 1, 0), STATUS_CONNECTION_INVALID);
    NDK_SGE r6 = dp_sge(&ra, 0, 64);
    acca[6] = dp_recv(c->qa, DP_CTX(6), &r6, 1) == STATUS_SUCCESS;
    ledger_drain(&la, c->cqa, 4u + (acca[6] ? 1u : 0u), DP_WAIT_MS);
    NDK_RESULT_EX r[4];
    ULONG k = dp_quiet(c->cqa, r, 4, DP_QUIET_MS);
    ledger_add(&la, r, k);
    ledger_check("active, after", &la, acca);
    if (acca[6])
        DP_CHECK_ST(la.st[6], STATUS_CANCELLED);
    CHECK_EQ(tl_event_count(&c->disc_p), 1);
    CHECK_EQ(tl_event_count(&c->disc_a), 0);
    dp_mr_close(&ra);
    dp_mr_close(&rp);
    dp_mr_close(&ms);
    dp_pair_close(&x);
}

/* Both sides call NdkDisconnect at once (X4): both complete, neither sees
 * more than one disconnect event, each side's receives complete once. */
typedef struct disc_arg {
    NDK_CONNECTOR *k;
    NTSTATUS st;
    tl_event *go;
} disc_arg;

static void *disc_thread(void *p)
{
    disc_arg *d = p;
    tl_event_wait(d->go, 1, DP_WAIT_MS);
    dp_req *r = dp_req_new("NdkDisconnect");
    r->started = true;
    r->returned = d->k->Dispatch->NdkDisconnect(d->k, dp_req_cb, r);
    d->st = r->returned == STATUS_PENDING
                ? (tl_event_wait(&r->ev, 1, DP_WAIT_MS) ? atomic_load(&r->status) : STATUS_PENDING)
                : r->returned;
    return NULL;
}

DP_CASE(both_sides_disconnect_at_once)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ra, rp;
    REQUIRE(dp_buf_reg(&x.a, &ra, 4 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) &&
            dp_buf_reg(&x.p, &rp, 4 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    ledger la, lp;
    ledger_init(&la, 4);
    ledger_init(&lp, 4);
    bool acca[5] = {false}, accp[5] = {false};
    for (unsigned i = 1; i <= 4; i++) {
        NDK_SGE r = dp_sge(&ra, (i - 1) * 64, 64);
        acca[i] = dp_recv(c->qa, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
        NDK_SGE q = dp_sge(&rp, (i - 1) * 64, 64);
        accp[i] = dp_recv(c->qp, DP_CTX(i), &q, 1) == STATUS_SUCCESS;
    }
    tl_event go;
    tl_event_init(&go);
    disc_arg da = {.k = c->ca, .go = &go}, dp = {.k = c->cp, .go = &go};
    pthread_t ta, tp;
    REQUIRE(pthread_create(&ta, NULL, disc_thread, &da) == 0);
    REQUIRE(pthread_create(&tp, NULL, disc_thread, &dp) == 0);
    tl_event_signal(&go);
    pthread_join(ta, NULL);
    pthread_join(tp, NULL);
    tl_event_destroy(&go);
    fprintf(stderr, "    NdkDisconnect: active %s, passive %s\n", ndk_status_name(da.st),
            ndk_status_name(dp.st));
    CHECK(da.st != STATUS_PENDING && dp.st != STATUS_PENDING);
    ledger_drain(&la, c->cqa, 4, DP_WAIT_MS);
    ledger_drain(&lp, c->cqp, 4, DP_WAIT_MS);
    NDK_RESULT_EX r[4];
    ledger_add(&la, r, dp_quiet(c->cqa, r, 4, DP_QUIET_MS));
    ledger_add(&lp, r, dp_quiet(c->cqp, r, 4, DP_QUIET_MS));
    ledger_check("active", &la, acca);
    ledger_check("passive", &lp, accp);
    CHECK(tl_event_count(&c->disc_a) <= 1);
    CHECK(tl_event_count(&c->disc_p) <= 1);
    dp_mr_close(&ra);
    dp_mr_close(&rp);
    dp_pair_close(&x);
}

/*
 * The peer resets (closes its connector): one disconnect event; once the
 * local side closes its connector and QP (L3: a close cancels what is
 * pending), every receive and Read it had outstanding has completed
 * exactly once.
 */
DP_CASE(peer_reset_then_close)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    dp_mr ra;
    REQUIRE(dp_buf_reg(&x.a, &ra, 8 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    ledger la;
    ledger_init(&la, 8);
    bool acca[9] = {false};
    for (unsigned i = 1; i <= 8; i++) {
        NDK_SGE r = dp_sge(&ra, (i - 1) * 64, 64);
        acca[i] = dp_recv(c->qa, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
    }
    dp_close(c->cp);
    c->cp = NULL;
    CHECK(tl_event_wait(&c->disc_a, 1, DP_WAIT_MS));
    dp_close(c->ca);
    c->ca = NULL;
    dp_close(c->qa);
    c->qa = NULL;
    ledger_drain(&la, c->cqa, 8, DP_WAIT_MS);
    NDK_RESULT_EX r[4];
    ledger_add(&la, r, dp_quiet(c->cqa, r, 4, DP_QUIET_MS));
    ledger_check("reset side", &la, acca);
    CHECK_EQ(ledger_count(&la, STATUS_CANCELLED), 8);
    CHECK_EQ(tl_event_count(&c->disc_a), 1);
    dp_mr_close(&ra);
    dp_pair_close(&x);
}

/* Closing a QP cancels its posted receives (L3): each completes once,
 * STATUS_CANCELLED, with the QP's context, before the close completes. */
DP_CASE(close_qp_cancels_receives)
{
    dp_side s;
    REQUIRE(dp_side_open(&s));
    dp_cq *cq = dp_cq_new(&s, 64);
    REQUIRE(cq);
    dp_cfg cfg = dp_cfg_default();
    uint8_t qctx;
    NDK_QP *qp = dp_qp_create(&s, cq, cq, NULL, &qctx, &cfg, NULL);
    dp_mr mr;
    REQUIRE(qp && dp_buf_reg(&s, &mr, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0));
    for (unsigned i = 1; i <= 4; i++) {
        NDK_SGE r = dp_sge(&mr, (i - 1) * 64, 64);
        DP_CHECK_ST(dp_recv(qp, DP_CTX(i), &r, 1), STATUS_SUCCESS);
    }
    dp_close(qp);
    NDK_RESULT_EX e[8];
    ULONG n = dp_wait_ex(cq, e, 4, DP_WAIT_MS);
    CHECK_EQ(n, 4);
    for (ULONG i = 0; i < n; i++)
        DP_CHECK_CQE(e[i], STATUS_CANCELLED, NdkOperationTypeReceive, &qctx, DP_CTX(i + 1), -1);
    DP_CHECK_QUIET(cq);
    dp_mr_close(&mr);
    dp_cq_close(cq);
    dp_side_close(&s);
}

/* ---- races: a thread posting while another closes or flushes ---- */

/* Posts up to `max` requests (contexts 1..max) on one queue of a QP and
 * drains that queue's CQ, which no other thread touches (C1, W2). It stops
 * at the first post refused for a reason other than a full queue. On the
 * initiator queue it posts 8-byte RDMA Writes (which need no receive at the
 * peer, so it can go on until the race hits) with every 64th request a Send. */
typedef struct poster {
    NDK_QP *qp;
    dp_cq *cq;
    dp_mr *mr;
    bool receives;
    void *raddr;     /* Write target at the peer */
    UINT32 rtok;
    unsigned max;
    ledger l;
    bool *acc;
    _Atomic unsigned posted;
    NTSTATUS stop_status;
    pthread_t th;
} poster;

static void *poster_run(void *p)
{
    poster *w = p;
    NDK_RESULT_EX r[32];
    unsigned accepted = 0;
    /* Bounded even if the queue stayed full for ever. */
    uint64_t deadline = tl_now_ns() + (uint64_t)DP_WAIT_MS * 1000000u;
    for (unsigned i = 1; i <= w->max && tl_now_ns() < deadline;) {
        NDK_SGE g = dp_sge(w->mr, ((i - 1) % 64) * 64, w->receives ? 64 : 8);
        NTSTATUS st;
        if (w->receives)
            st = dp_recv(w->qp, DP_CTX(i), &g, 1);
        else if (i % 64 == 0)
            st = dp_send(w->qp, DP_CTX(i), &g, 1, 0);
        else
            st = dp_write(w->qp, DP_CTX(i), &g, 1, (uint8_t *)w->raddr + (i % 64) * 8, w->rtok, 0);
        if (st == STATUS_SUCCESS) {
            w->acc[i] = true;
            accepted++;
            atomic_store(&w->posted, i);
            i++;
        } else if (st != STATUS_INSUFFICIENT_RESOURCES) {
            w->stop_status = st;
            break;
        }
        ULONG k = dp_get(w->cq, r, 32);
        ledger_add(&w->l, r, k);
    }
    atomic_store(&w->posted, w->max + 1); /* done posting */
    ledger_drain(&w->l, w->cq, accepted, DP_WAIT_MS);
    return NULL;
}

static void poster_start(poster *w, NDK_QP *qp, dp_cq *cq, dp_mr *mr, const dp_mr *target,
                         unsigned max)
{
    memset(w, 0, sizeof *w);
    w->qp = qp;
    w->cq = cq;
    w->mr = mr;
    w->receives = target == NULL;
    if (target) {
        w->raddr = target->addr;
        w->rtok = target->rtok;
    }
    w->max = max;
    ledger_init(&w->l, max);
    w->acc = dp_malloc((max + 1) * sizeof *w->acc);
    /* The poster waits by polling: the arming waiter would race with
     * nothing here, but polling keeps the thread's CQ use trivially its own. */
    cq->poll_only = true;
    if (pthread_create(&w->th, NULL, poster_run, w) != 0) {
        tl_failures++;
        w->max = 0;
    }
}

/* Waits until the poster has posted `n` requests (or stopped). */
static void poster_wait_posted(poster *w, unsigned n)
{
    uint64_t deadline = tl_now_ns() + (uint64_t)DP_WAIT_MS * 1000000u;
    while (atomic_load(&w->posted) < n && tl_now_ns() < deadline)
        sched_yield();
}

/* The peer of a posting race: 1000 receives, enough for the Sends among
 * the poster's (at most 60000) requests, and a region for its Writes. */
typedef struct peer {
    dp_mr rp, wt;
    ledger l;
    bool *acc;
} peer;

static bool peer_setup(peer *q, dp_conn *c)
{
    if (!dp_buf_reg(c->p, &q->rp, 64 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) ||
        !dp_buf_reg(c->p, &q->wt, 64 * 8, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 0))
        return false;
    ledger_init(&q->l, 1000);
    q->acc = dp_malloc(1001 * sizeof *q->acc);
    for (unsigned i = 1; i <= 1000; i++) {
        NDK_SGE r = dp_sge(&q->rp, ((i - 1) % 64) * 64, 64);
        q->acc[i] = dp_recv(c->qp, DP_CTX(i), &r, 1) == STATUS_SUCCESS;
    }
    return true;
}

/* The connection is gone (the race ended it); the peer flushes its QP and
 * every receive it had posted completes exactly once. */
static void peer_finish(peer *q, dp_conn *c, const poster *w)
{
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    c->qp->Dispatch->NdkFlush(c->qp);
    ledger_drain(&q->l, c->rcqp, 1000, DP_WAIT_MS);
    ledger_check("peer receives", &q->l, q->acc);
    /* No more messages arrived than Sends completed successfully. */
    unsigned sends_ok = 0;
    for (unsigned i = 64; i <= w->max; i += 64)
        sends_ok += w->l.hits[i] && w->l.st[i] == STATUS_SUCCESS;
    CHECK(ledger_count(&q->l, STATUS_SUCCESS) <= sends_ok);
    dp_mr_close(&q->rp);
    dp_mr_close(&q->wt);
}

static unsigned accepted_count(const poster *w)
{
    unsigned n = 0;
    for (unsigned i = 1; i <= w->max; i++)
        n += w->acc[i];
    return n;
}

/* The pair of the posting-race cases (W4, W5): deep receive queues, and
 * receive completions on CQs of their own so that the posters' ledgers
 * see only their own queues. */
static bool open_posting_pair(dp_pair *x)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.rqd = 1024;
    cfg.iqd = 64;
    cfg.split_cq = true;
    return dp_pair_open(x, &cfg);
}

/* How many requests the poster has posted when the race starts, in each of
 * the three rounds of a posting-race case. */
static const unsigned race_at[3] = {1, 500, 3000};

/*
 * W5: NdkCloseConnector while another thread posts on the connector's QP,
 * at three different moments. Every accepted request completes exactly once
 * (done or cancelled), the refused ones never, nothing crashes; on the peer,
 * every posted receive completes exactly once too.
 */
DP_CASE(close_connector_while_posting)
{
    for (int round = 0; round < 3; round++) {
        dp_pair x;
        REQUIRE(open_posting_pair(&x));
        dp_conn *c = x.c;
        dp_mr ms;
        peer q;
        REQUIRE(dp_buf_reg(&x.a, &ms, 64 * 64, 0, 5) && peer_setup(&q, c));
        poster w;
        poster_start(&w, c->qa, c->cqa, &ms, &q.wt, 60000);
        poster_wait_posted(&w, race_at[round]);
        dp_close(c->ca); /* concurrently with the poster's posting calls */
        c->ca = NULL;
        pthread_join(w.th, NULL);
        fprintf(stderr, "    round %d: %u requests accepted, stopped by %s\n", round,
                accepted_count(&w), ndk_status_name(w.stop_status));
        CHECK(w.stop_status != STATUS_SUCCESS); /* the close stopped it, not max */
        ledger_check("poster", &w.l, w.acc);
        peer_finish(&q, c, &w);
        dp_mr_close(&ms);
        dp_pair_close(&x);
    }
}

/*
 * W4: NdkFlush while one thread posts on the initiator queue and another
 * posts Receives (different queues may be used concurrently, W2). Every
 * accepted request completes exactly once, the refused ones never.
 */
DP_CASE(flush_while_posting)
{
    for (int round = 0; round < 3; round++) {
        dp_pair x;
        REQUIRE(open_posting_pair(&x));
        dp_conn *c = x.c;
        dp_mr ms, ra;
        peer q;
        REQUIRE(dp_buf_reg(&x.a, &ms, 64 * 64, 0, 6) &&
                dp_buf_reg(&x.a, &ra, 64 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) &&
                peer_setup(&q, c));
        poster ws, wr;
        poster_start(&ws, c->qa, c->cqa, &ms, &q.wt, 60000);
        poster_start(&wr, c->qa, c->rcqa, &ra, NULL, 800);
        poster_wait_posted(&ws, race_at[round]);
        c->qa->Dispatch->NdkFlush(c->qa); /* concurrently with both posters */
        pthread_join(ws.th, NULL);
        pthread_join(wr.th, NULL);
        fprintf(stderr,
                "    round %d: %u requests accepted, stopped by %s; %u receives, stopped by %s\n",
                round, accepted_count(&ws), ndk_status_name(ws.stop_status), accepted_count(&wr),
                ndk_status_name(wr.stop_status));
        CHECK(ws.stop_status != STATUS_SUCCESS);
        ledger_check("initiator queue", &ws.l, ws.acc);
        ledger_check("receives", &wr.l, wr.acc);
        /* Receives were never matched (the peer sends nothing), so every
         * accepted one was cancelled. */
        CHECK_EQ(ledger_count(&wr.l, STATUS_SUCCESS), 0);
        /* The flush left the connection up; the flushed side's
         * NdkDisconnect ends it. */
        CHECK_EQ(tl_event_count(&c->disc_p), 0);
        dp_req *da = dp_req_new("NdkDisconnect (flushed side)");
        da->started = true;
        da->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, da);
        peer_finish(&q, c, &ws);
        DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
        DP_CHECK_ST(dp_finish(da, da->returned, DP_WAIT_MS), STATUS_SUCCESS);
        dp_mr_close(&ms);
        dp_mr_close(&ra);
        dp_pair_close(&x);
    }
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(flush_cancels_outstanding_once);
    RUN_FAM(flush_connected_pair);
    RUN_FAM(disconnect_flushes_receives);
    RUN_FAM(both_sides_disconnect_at_once);
    RUN_FAM(peer_reset_then_close);
    RUN(close_qp_cancels_receives);
    RUN_FAM(close_connector_while_posting);
    RUN_FAM(flush_while_posting);
    return tl_finish();
}
