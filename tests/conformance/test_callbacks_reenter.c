/* Callbacks run without provider locks held: from inside every kind of
 * callback the consumer calls back into the provider - including closing
 * the very object, or the listener inside its own connect event - and the
 * calls return promptly and correctly (a deadlock trips the watchdog). */
#include "ndktest.h"

typedef struct re_ctx {
    nt_side *as, *ps;
    nt_conn *c;
    _Atomic uint64_t slowest_ms;
    /* inside the connect event */
    NTSTATUS ev_gcd, ev_local, ev_peer, ev_accept;
    ULONG ev_rds;
    /* inside the Connect completion */
    NTSTATUS cc_gcd, cc_local, cc_complete;
    ULONG cc_rds;
    /* inside the Accept and CompleteConnect completions */
    NTSTATUS ac_local, ac_peer, co_peer;
    /* inside the disconnect event */
    NTSTATUS de_peer;
    nt_op *de_disconnect;
    /* the closes started inside completions */
    nt_op *self_close_a;
    nt_op *nested[32];
    _Atomic unsigned nnested;
    _Atomic int ran_ev, ran_cc, ran_ac, ran_co, ran_de, ran_dd, ran_cl, ran_rf;
} re_ctx;

static void re_time(re_ctx *re, uint64_t t0)
{
    uint64_t ms = nt_ms_since(t0);
    uint64_t cur = atomic_load(&re->slowest_ms);
    while (ms > cur && !atomic_compare_exchange_weak(&re->slowest_ms, &cur, ms)) {
    }
    NT_CB_CHECK(ms < NT_PROMPT_MS);
}

static void re_keep(re_ctx *re, nt_op *op)
{
    unsigned i = atomic_fetch_add(&re->nnested, 1);
    NT_CB_CHECK(i < 32);
    if (i < 32)
        re->nested[i] = op;
}

/* Starts a close from a callback (no waiting: a close may pend) and keeps
 * its op for the main thread. */
static nt_op *re_close(re_ctx *re, void *obj)
{
    nt_op *op = nt_op_new(NT_CLOSE, "close from a callback");
    uint64_t t0 = tl_now_ns();
    NTSTATUS st = nt_close_fn(obj)((NDK_OBJECT_HEADER *)obj, nt_close_cb, op);
    re_time(re, t0);
    nt_started(op, st);
    NT_CB_CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    re_keep(re, op);
    return op;
}

/* A create completion that arrives later closes what it created. */
static void re_close_created(nt_op *op, NTSTATUS st)
{
    if (st == STATUS_SUCCESS)
        re_close(op->u1, atomic_load(&op->obj));
}

/* Creates a CQ (kind 0), a PD (1) or a connector (2) on ad from a callback,
 * and closes it again. */
static void re_create_close(re_ctx *re, NDK_ADAPTER *ad, int kind)
{
    nt_op *op = nt_op_new(NT_CREATE, "create from a callback");
    op->hook = re_close_created;
    op->u1 = re;
    void *obj = NULL;
    NTSTATUS st;
    uint64_t t0 = tl_now_ns();
    if (kind == 0) {
        NDK_CQ *cq = NULL;
        st = ad->Dispatch->NdkCreateCq(ad, 4, nt_cq_notify, NULL, NULL, nt_create_cb, op, &cq);
        obj = cq;
    } else if (kind == 1) {
        NDK_PD *pd = NULL;
        st = ad->Dispatch->NdkCreatePd(ad, nt_create_cb, op, &pd);
        obj = pd;
    } else {
        NDK_CONNECTOR *c = NULL;
        st = ad->Dispatch->NdkCreateConnector(ad, nt_create_cb, op, &c);
        obj = c;
    }
    re_time(re, t0);
    nt_started(op, st);
    re_keep(re, op);
    NT_CB_CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_SUCCESS && obj)
        re_close(re, obj);
}

static NTSTATUS re_addr(re_ctx *re, NDK_FN_GET_LOCAL_ADDRESS fn, NDK_CONNECTOR *c, int fam)
{
    NDK_SOCKADDR sa;
    ULONG len = sizeof sa;
    uint64_t t0 = tl_now_ns();
    NTSTATUS st = fn(c, &sa.sa, &len);
    re_time(re, t0);
    NT_CB_CHECK(st != STATUS_SUCCESS || len == nt_sa_len(fam));
    return st;
}

/* Connect event: data, addresses, create + close objects, then Accept. */
static void re_on_connect_event(nt_lsn *L, NDK_CONNECTOR *p, unsigned idx)
{
    re_ctx *re = L->user;
    if (idx != 0)
        return;
    nt_conn *c = re->c;
    ULONG len = 0;
    uint64_t t0 = tl_now_ns();
    re->ev_gcd = nt_gcd(p, NULL, NULL, NULL, &len);
    re_time(re, t0);
    re->ev_rds = len;
    re->ev_local = re_addr(re, p->Dispatch->NdkGetLocalAddress, p, c->fam);
    re->ev_peer = re_addr(re, p->Dispatch->NdkGetPeerAddress, p, c->fam);
    re_create_close(re, re->ps->ad, 0);
    re_create_close(re, re->ps->ad, 2);
    c->p = p;
    t0 = tl_now_ns();
    re->ev_accept = nt_conn_accept(c, 2, 2, "pong", 4);
    re_time(re, t0);
    atomic_store(&re->ran_ev, 1);
}

/* Connect completion: data, address, then CompleteConnect. */
static void re_on_connect_done(nt_op *op, NTSTATUS st)
{
    nt_conn *c = op->u1;
    re_ctx *re = c->L->user;
    if (st != STATUS_SUCCESS)
        return;
    ULONG len = 0;
    uint64_t t0 = tl_now_ns();
    re->cc_gcd = nt_gcd(c->a, NULL, NULL, NULL, &len);
    re_time(re, t0);
    re->cc_rds = len;
    re->cc_local = re_addr(re, c->a->Dispatch->NdkGetLocalAddress, c->a, c->fam);
    t0 = tl_now_ns();
    re->cc_complete = nt_conn_complete(c);
    re_time(re, t0);
    atomic_store(&re->ran_cc, 1);
}

/* Accept completion: addresses, create + close a PD. */
static void re_on_accept_done(nt_op *op, NTSTATUS st)
{
    nt_conn *c = op->u1;
    re_ctx *re = c->L->user;
    (void)st;
    re->ac_local = re_addr(re, c->p->Dispatch->NdkGetLocalAddress, c->p, c->fam);
    re->ac_peer = re_addr(re, c->p->Dispatch->NdkGetPeerAddress, c->p, c->fam);
    re_create_close(re, re->ps->ad, 1);
    atomic_store(&re->ran_ac, 1);
}

/* CompleteConnect completion: the peer's address. */
static void re_on_complete_done(nt_op *op, NTSTATUS st)
{
    nt_conn *c = op->u1;
    re_ctx *re = c->L->user;
    (void)st;
    re->co_peer = re_addr(re, c->a->Dispatch->NdkGetPeerAddress, c->a, c->fam);
    re_create_close(re, re->as->ad, 0);
    atomic_store(&re->ran_co, 1);
}

/* Disconnect event (passive side): address, then NdkDisconnect. */
static void re_on_disconnect_event(nt_op *op, NTSTATUS st)
{
    re_ctx *re = op->u1;
    nt_conn *c = re->c;
    (void)st;
    re->de_peer = re_addr(re, c->p->Dispatch->NdkGetPeerAddress, c->p, c->fam);
    uint64_t t0 = tl_now_ns();
    nt_disconnect(c->p, &re->de_disconnect);
    re_time(re, t0);
    atomic_store(&re->ran_de, 1);
}

/* Disconnect completion (active side): close the very connector. */
static void re_on_disconnect_done(nt_op *op, NTSTATUS st)
{
    re_ctx *re = op->u1;
    (void)st;
    re->self_close_a = re_close(re, re->c->a);
    atomic_store(&re->ran_dd, 1);
}

/* Close completion: create and close another object. */
static void re_on_close_done(nt_op *op, NTSTATUS st)
{
    re_ctx *re = op->u1;
    (void)st;
    re_create_close(re, re->ps->ad, 0);
    re_create_close(re, re->ps->ad, 2);
    atomic_store(&re->ran_cl, 1);
}

/* Refused Connect: close the connector from inside its own completion (the
 * example of L7). */
static void re_on_refused(nt_op *op, NTSTATUS st)
{
    nt_conn *c = op->u1;
    re_ctx *re = c->L->user;
    NT_CB_CHECK_STATUS(st, STATUS_CONNECTION_REFUSED);
    re_close(re, c->a);
    atomic_store(&re->ran_rf, 1);
}

static void wait_nested(re_ctx *re)
{
    /* A create that pended closes its object from its completion, which
     * adds that close to the list: re-read the count as we go. */
    for (unsigned i = 0; i < atomic_load(&re->nnested) && i < 32; i++)
        CHECK_STATUS(nt_finish(re->nested[i], NT_WAIT_MS), STATUS_SUCCESS);
}

NT_CASE_FAM(callbacks_reenter_provider)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &o));
    re_ctx re;
    memset(&re, 0, sizeof re);
    re.as = &as;
    re.ps = &ps;
    nt_lsn *L = nt_lsn_new();
    L->user = &re;
    L->hook = re_on_connect_event;
    CHECK_STATUS(nt_create_listener(ps.ad, nt_connect_event, L, &L->l), STATUS_SUCCESS);
    REQUIRE(L->l);
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(fam, 0, &sa);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    L->addrlen = sizeof L->addr;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, &L->addr.sa, &L->addrlen),
                 STATUS_SUCCESS);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    re.c = &c;
    c.h_connect = re_on_connect_done;
    c.h_accept = re_on_accept_done;
    c.h_complete = re_on_complete_done;
    c.dev_p->hook = re_on_disconnect_event;
    c.dev_p->u1 = &re;

    /* The three legs run entirely inside callbacks. */
    nt_conn_connect(&c, 2, 2, "ping", 4);
    CHECK(tl_event_wait(&L->ev, 1, NT_WAIT_MS));
    CHECK(atomic_load(&re.ran_ev));
    CHECK_STATUS(re.ev_gcd, STATUS_SUCCESS);
    CHECK_EQ(re.ev_rds, 4);
    CHECK_STATUS(re.ev_local, STATUS_SUCCESS);
    CHECK_STATUS(re.ev_peer, STATUS_SUCCESS);
    REQUIRE(c.accept);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    if (c.connect->returned == STATUS_PENDING) {
        CHECK(atomic_load(&re.ran_cc));
        CHECK_STATUS(re.cc_gcd, STATUS_SUCCESS);
        CHECK_EQ(re.cc_rds, 4);
        CHECK_STATUS(re.cc_local, STATUS_SUCCESS);
    } else {
        nt_conn_complete(&c); /* completed inline: leg 3 from here */
    }
    REQUIRE(c.complete);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    if (c.accept->returned == STATUS_PENDING) {
        CHECK(atomic_load(&re.ran_ac));
        CHECK_STATUS(re.ac_local, STATUS_SUCCESS);
        CHECK_STATUS(re.ac_peer, STATUS_SUCCESS);
    }
    if (c.complete->returned == STATUS_PENDING)
        CHECK_STATUS(re.co_peer, STATUS_SUCCESS);

    /* Disconnect: the passive side answers from inside its event; the
     * active side closes its connector from inside its own Disconnect
     * completion. */
    nt_op *da = nt_op_new(NT_REQ, "NdkDisconnect");
    da->hook = re_on_disconnect_done;
    da->u1 = &re;
    nt_started(da, c.a->Dispatch->NdkDisconnect(c.a, nt_req_cb, da));
    CHECK(tl_event_wait(&c.dev_p->ev, 1, NT_WAIT_MS));
    CHECK(atomic_load(&re.ran_de));
    CHECK_STATUS(re.de_peer, STATUS_SUCCESS);
    REQUIRE(re.de_disconnect);
    CHECK_STATUS(nt_finish(re.de_disconnect, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_SUCCESS);
    if (da->returned == STATUS_PENDING) {
        CHECK(atomic_load(&re.ran_dd));
        REQUIRE(re.self_close_a);
        CHECK(nt_close_wait(re.self_close_a, NT_WAIT_MS));
    } else {
        nt_close(c.a);
    }
    c.a = NULL;

    /* A close completion that calls back in: the QP's close pends while
     * its connector lives, so its completion runs when that one closes. */
    nt_op *qc = nt_close_start_hook(c.qp, re_on_close_done, &re);
    c.qp = NULL;
    nt_close(c.p);
    c.p = NULL;
    CHECK(nt_close_wait(qc, NT_WAIT_MS));
    if (qc->returned == STATUS_PENDING)
        CHECK(atomic_load(&re.ran_cl));

    /* A refused Connect whose completion closes its own connector. */
    NDK_SOCKADDR dead;
    ULONG dlen;
    int dfd = nt_dead_port(fam, &dead, &dlen);
    REQUIRE(dfd >= 0);
    nt_conn r;
    REQUIRE(nt_conn_init(&r, fam, &as, &ps, NULL));
    r.L = L;
    r.h_connect = re_on_refused;
    nt_conn_connect_to(&r, &dead, dlen, 1, 1, NULL, 0);
    if (r.connect->returned == STATUS_PENDING) {
        CHECK(tl_event_wait(&r.connect->ev, 1, NT_WAIT_MS));
        CHECK(atomic_load(&re.ran_rf));
        r.a = NULL; /* closed by the callback */
    } else {
        CHECK_STATUS(r.connect->returned, STATUS_CONNECTION_REFUSED);
    }
    close(dfd);

    wait_nested(&re);
    fprintf(stderr, "    slowest provider call from a callback: %llu ms\n",
            (unsigned long long)atomic_load(&re.slowest_ms));
    nt_conn_close(&r);
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* L13: closing a listener from inside its own connect event cannot finish
 * before the event returns: STATUS_PENDING, completion once the event (and
 * the connector it delivered) are done. The delivered connector stays
 * usable: it is accepted after the listener's close began. */
static void close_listener_in_event(nt_lsn *L, NDK_CONNECTOR *p, unsigned idx)
{
    (void)p;
    if (idx != 0)
        return;
    nt_op *op = nt_op_new(NT_CLOSE, "NdkCloseListener(inside its connect event)");
    uint64_t t0 = tl_now_ns();
    NTSTATUS st = L->l->Dispatch->NdkCloseListener(&L->l->Header, nt_close_cb, op);
    NT_CB_CHECK(nt_ms_since(t0) < NT_PROMPT_MS);
    nt_started(op, st);
    NT_CB_CHECK_STATUS(st, STATUS_PENDING);
    /* The completion cannot have run: this event has not returned. */
    NT_CB_CHECK(nt_count(op) == 0);
    *(nt_op **)L->user = op;
}

NT_CASE_FAM(close_listener_inside_connect_event)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    nt_op *lc = NULL;
    nt_lsn_set_hook(L, close_listener_in_event, &lc);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    nt_conn_connect(&c, 1, 1, NULL, 0);
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(c.p && lc);
    L->l = NULL;
    /* Pending for the delivered connector, which still works. */
    CHECK(!tl_event_wait(&lc->ev, 1, NT_QUIET_MS));
    nt_conn_accept(&c, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    nt_conn_complete(&c);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_EQ(nt_count(lc), 0);
    nt_conn_close(&c);
    CHECK(nt_close_wait(lc, NT_WAIT_MS));
    nt_side_close(&as);
    nt_side_close(&ps);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(callbacks_reenter_provider);
    RUN_FAM(close_listener_inside_connect_event);
    return tl_finish();
}
