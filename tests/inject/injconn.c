#include "injconn.h"

#include "ndktest.h"

#define WAIT_MS 4000u

/* ---- asynchronous results ---- */

void inj_op_init(struct inj_op *o)
{
    tl_event_init(&o->ev);
    atomic_store(&o->st, STATUS_PENDING);
    o->also = NULL;
}

void inj_op_cb(PVOID ctx, NTSTATUS st)
{
    struct inj_op *o = ctx;
    tl_event *also = o->also;
    atomic_store(&o->st, st);
    if (also)
        tl_event_signal(also);
    tl_event_signal(&o->ev); /* last: the waiter may free o as soon as it wakes */
}

/* A close completion or a disconnect event: no status of its own. */
static void inj_op_event_cb(PVOID ctx)
{
    inj_op_cb(ctx, STATUS_SUCCESS);
}

NTSTATUS inj_op_finish(struct inj_op *o, NTSTATUS returned, const char *what)
{
    if (returned != STATUS_PENDING)
        return returned;
    if (!tl_event_wait(&o->ev, 1, WAIT_MS)) {
        CHECK(!"a completion never came");
        fprintf(stderr, "    %s: no completion within %u ms\n", what, WAIT_MS);
        return STATUS_PENDING;
    }
    return atomic_load(&o->st);
}

/* ---- judging the connection's legs ---- */

/* The final status of an asynchronous leg of the connection: success, or,
 * once the injected failure fired somewhere, a failure that says so. */
static bool leg_ok(NTSTATUS st, const char *what)
{
    if (st == STATUS_SUCCESS)
        return true;
    /* A request a listener out of descriptors could not accept waits in
     * the kernel's queue until the initiator's MpaReplyTimeoutMs. */
    bool allowed = st == STATUS_INSUFFICIENT_RESOURCES || st == STATUS_CONNECTION_REFUSED ||
                   st == STATUS_CONNECTION_ABORTED || st == STATUS_CANCELLED ||
                   (st == STATUS_IO_TIMEOUT && inj_is_scarce());
    if (!inj_fired())
        inj_report(what, st, "nothing failed");
    else if (!allowed)
        inj_report(what, st, "not a status for a failed allocation");
    return false;
}

/* ---- the two adapters ---- */

NDK_OPEN_OPTIONS inj_opts(void)
{
    /* Short enough that a lost leg shows as a timeout failure quickly,
     * long enough never to fire on a loaded machine. */
    return nt_opts_ms(3000);
}

/* ---- the scenario ---- */

#define BUF_LEN (64u << 10)
#define MSG_A 1000u /* A's Send */
#define MSG_B 500u  /* B's Send */
#define WR_LEN 300u /* B's Write into A's fast registration */
#define RD_LEN 400u /* B's Read of A's buffer */

struct end {
    struct inj_side *sd;
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_MR *mr;
    NDK_CONNECTOR *conn;
    uint8_t *buf; /* BUF_LEN, page-aligned */
    uint32_t ltok, rtok;
    tl_event cq_ev;
    struct inj_op disc; /* disconnect event */
};

struct conn_run {
    struct end a, b;
    NDK_LISTENER *l;
    NDK_MR *frmr; /* A's fast registration */
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    uint8_t *frbuf; /* 2 pages */
    ULONG fbo;
    tl_event incoming;
    NDK_CONNECTOR *_Atomic passive;
    bool established;
    bool moved; /* the data exchange completed and checked */
};

static void cq_cb(PVOID ctx, NTSTATUS st)
{
    (void)st;
    tl_event_signal(ctx);
}

static void connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    struct conn_run *r = ctx;
    NDK_CONNECTOR *none = NULL;
    if (!atomic_compare_exchange_strong(&r->passive, &none, c)) {
        /* Only one request is ever made: a second is a provider bug. */
        fprintf(stderr, "    a second connect event\n");
        abort();
    }
    tl_event_signal(&r->incoming);
}

/* The objects of one end; the active end also makes its connector (the
 * passive one gets its own from the connect event). */
static bool end_open(struct end *e, struct inj_side *sd, bool active)
{
    memset(e, 0, sizeof *e);
    e->sd = sd;
    tl_event_init(&e->cq_ev);
    inj_op_init(&e->disc);
    void *m = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    e->buf = m;
    NDK_ADAPTER *ad = sd->ad;
    if (CALL("NdkCreateCq", STATUS_SUCCESS,
             ad->Dispatch->NdkCreateCq(ad, 64, cq_cb, &e->cq_ev, NULL, NULL, NULL, &e->cq)) != STATUS_SUCCESS)
        return false;
    if (CALL("NdkCreatePd", STATUS_SUCCESS, ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &e->pd)) != STATUS_SUCCESS)
        return false;
    if (CALL("NdkCreateQp", STATUS_SUCCESS,
             e->pd->Dispatch->NdkCreateQp(e->pd, e->cq, e->cq, e, 8, 8, 2, 2, 64, NULL, NULL, &e->qp)) !=
        STATUS_SUCCESS)
        return false;
    if (CALL("NdkCreateMr", STATUS_SUCCESS, e->pd->Dispatch->NdkCreateMr(e->pd, FALSE, NULL, NULL, &e->mr)) !=
        STATUS_SUCCESS)
        return false;
    MDL mdl = {.StartVa = e->buf, .ByteCount = BUF_LEN};
    ULONG fl = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    if (CALL("NdkRegisterMr", STATUS_SUCCESS, e->mr->Dispatch->NdkRegisterMr(e->mr, &mdl, BUF_LEN, fl, NULL, NULL)) !=
        STATUS_SUCCESS)
        return false;
    e->ltok = e->mr->Dispatch->NdkGetLocalTokenFromMr(e->mr);
    e->rtok = e->mr->Dispatch->NdkGetRemoteTokenFromMr(e->mr);
    return !active || CALL("NdkCreateConnector", STATUS_SUCCESS,
                ad->Dispatch->NdkCreateConnector(ad, NULL, NULL, &e->conn)) == STATUS_SUCCESS;
}

/* Closes obj (if any), waiting for the completion; closes never fail. */
void inj_close_obj(void *obj)
{
    if (!obj)
        return;
    NDK_OBJECT_HEADER *h = obj;
    NDK_FN_CLOSE_OBJECT fn = NULL;
    switch (h->ObjectType) {
    case NdkObjectTypeQp: fn = ((NDK_QP *)obj)->Dispatch->NdkCloseQp; break;
    case NdkObjectTypeCq: fn = ((NDK_CQ *)obj)->Dispatch->NdkCloseCq; break;
    case NdkObjectTypeMr: fn = ((NDK_MR *)obj)->Dispatch->NdkCloseMr; break;
    case NdkObjectTypePd: fn = ((NDK_PD *)obj)->Dispatch->NdkClosePd; break;
    case NdkObjectTypeConnector: fn = ((NDK_CONNECTOR *)obj)->Dispatch->NdkCloseConnector; break;
    case NdkObjectTypeListener: fn = ((NDK_LISTENER *)obj)->Dispatch->NdkCloseListener; break;
    case NdkObjectTypeMw: fn = ((NDK_MW *)obj)->Dispatch->NdkCloseMw; break;
    case NdkObjectTypeSrq: fn = ((NDK_SRQ *)obj)->Dispatch->NdkCloseSrq; break;
    case NdkObjectTypeSharedEndpoint: fn = ((NDK_SHARED_ENDPOINT *)obj)->Dispatch->NdkCloseSharedEndpoint; break;
    default: break;
    }
    REQUIRE(fn);
    struct inj_op o;
    inj_op_init(&o);
    inj_call("NdkCloseXxx");
    NTSTATUS st = fn(h, inj_op_event_cb, &o);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    inj_op_finish(&o, st, "close");
    tl_event_destroy(&o.ev);
}

static void end_close(struct end *e)
{
    inj_close_obj(e->conn);
    inj_close_obj(e->qp);
    inj_close_obj(e->mr);
    inj_close_obj(e->pd);
    inj_close_obj(e->cq);
    if (e->buf)
        munmap(e->buf, BUF_LEN);
    tl_event_destroy(&e->cq_ev);
    tl_event_destroy(&e->disc.ev);
}

/* Takes n completions from e's CQ into res (bounded by WAIT_MS). */
static bool reap(struct end *e, NDK_RESULT *res, ULONG n)
{
    ULONG got = 0;
    uint64_t end = tl_now_ns() + WAIT_MS * 1000000ull;
    while (got < n) {
        inj_call("NdkGetCqResults");
        got += e->cq->Dispatch->NdkGetCqResults(e->cq, res + got, n - got);
        if (got == n)
            break;
        unsigned seen = tl_event_count(&e->cq_ev);
        e->cq->Dispatch->NdkArmCq(e->cq, NDK_CQ_NOTIFY_ANY);
        ULONG more = e->cq->Dispatch->NdkGetCqResults(e->cq, res + got, n - got);
        got += more;
        if (more)
            continue;
        uint64_t now = tl_now_ns();
        if (now >= end || !tl_event_wait(&e->cq_ev, seen + 1, (unsigned)((end - now) / 1000000) + 1))
            return false;
    }
    return true;
}

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(seed + i * 7);
}

static bool filled(const uint8_t *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (uint8_t)(seed + i * 7))
            return false;
    return true;
}

/* The three legs. */
static void establish(struct conn_run *r)
{
    struct end *A = &r->a, *B = &r->b;
    NDK_ADAPTER *bad = B->sd->ad;
    if (CALL("NdkCreateListener", STATUS_SUCCESS,
             bad->Dispatch->NdkCreateListener(bad, connect_event, r, NULL, NULL, &r->l)) != STATUS_SUCCESS)
        return;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct inj_op lo;
    inj_op_init(&lo);
    NTSTATUS st = CALL2("NdkListen", STATUS_SUCCESS, STATUS_PENDING,
                        r->l->Dispatch->NdkListen(r->l, (PSOCKADDR)&sa, sizeof sa, inj_op_cb, &lo));
    st = inj_op_finish(&lo, st, "NdkListen");
    tl_event_destroy(&lo.ev);
    if (st != STATUS_SUCCESS)
        return;
    ULONG len = sizeof sa;
    CHECK_EQ(r->l->Dispatch->NdkGetLocalAddress(r->l, (PSOCKADDR)&sa, &len), STATUS_SUCCESS);

    struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct inj_op conn, acc;
    inj_op_init(&conn);
    inj_op_init(&acc);
    conn.also = &r->incoming; /* woken by the connect event or a failed connect */
    st = CALL("NdkConnect", STATUS_PENDING,
              A->conn->Dispatch->NdkConnect(A->conn, A->qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&sa, sizeof sa,
                                            4, 4, "A", 1, inj_op_cb, &conn));
    if (st != STATUS_PENDING)
        goto out;
    /* Either the request reaches B, or the connect fails first. */
    if (!tl_event_wait(&r->incoming, 1, WAIT_MS))
        inj_report("NdkConnect", STATUS_PENDING, "neither a connect event nor a completion");
    B->conn = atomic_load(&r->passive);
    NTSTATUS ast = STATUS_PENDING;
    if (B->conn)
        ast = CALL("NdkAccept", STATUS_PENDING,
                   B->conn->Dispatch->NdkAccept(B->conn, B->qp, 4, 4, "B", 1, inj_op_event_cb, &B->disc, inj_op_cb, &acc));
    NTSTATUS cst = inj_op_finish(&conn, STATUS_PENDING, "NdkConnect");
    if (!leg_ok(cst, "NdkConnect completion")) {
        if (B->conn && ast == STATUS_PENDING)
            leg_ok(inj_op_finish(&acc, ast, "NdkAccept"), "NdkAccept after a failed Connect");
        goto out;
    }
    if (!B->conn) {
        inj_report("NdkConnect completion", cst, "success without a connect event");
        goto out;
    }
    st = CALL("NdkCompleteConnect", STATUS_SUCCESS,
              A->conn->Dispatch->NdkCompleteConnect(A->conn, inj_op_event_cb, &A->disc, inj_op_cb, &conn));
    if (ast != STATUS_PENDING)
        goto out;
    ast = inj_op_finish(&acc, ast, "NdkAccept");
    if (st == STATUS_SUCCESS && leg_ok(ast, "NdkAccept completion"))
        r->established = true;
out:
    tl_event_destroy(&conn.ev);
    tl_event_destroy(&acc.ev);
}

/* A fast registration of A's, B's Write into it and B's Read of A's
 * buffer, a Send each way. Every posted request must complete, with
 * success and the right bytes, unless the failure hit a post. */
static void exchange(struct conn_run *r)
{
    struct end *A = &r->a, *B = &r->b;
    fill(A->buf, MSG_A, 0x11);
    fill(B->buf, MSG_B, 0x22);
    fill(B->buf + 4096, WR_LEN, 0x33);
    fill(A->buf + 8192, RD_LEN, 0x44);
#define SGE(p, n, tok) {.VirtualAddress = (p), .Length = (n), .MemoryRegionToken = (tok)}
    NDK_SGE ra = SGE(A->buf + 16384, 2048, A->ltok), rb = SGE(B->buf + 16384, 2048, B->ltok);
    NDK_SGE sa = SGE(A->buf, MSG_A, A->ltok), sb = SGE(B->buf, MSG_B, B->ltok);
    NDK_SGE wsrc = SGE(B->buf + 4096, WR_LEN, B->ltok), rsink = SGE(B->buf + 24576, RD_LEN, B->ltok);
#undef SGE
    unsigned na = 0, nb = 0; /* completions owed */
    bool fr_ok = false;
    if (CALL("NdkReceive", STATUS_SUCCESS, B->qp->Dispatch->NdkReceive(B->qp, (PVOID)1, &rb, 1)) == STATUS_SUCCESS)
        nb++;
    if (CALL("NdkReceive", STATUS_SUCCESS, A->qp->Dispatch->NdkReceive(A->qp, (PVOID)1, &ra, 1)) == STATUS_SUCCESS)
        na++;
    if (r->frmr && r->lam) {
        ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_LOCAL_WRITE;
        fr_ok = CALL("NdkFastRegister", STATUS_SUCCESS,
                     A->qp->Dispatch->NdkFastRegister(A->qp, (PVOID)2, r->frmr, r->lam->AdapterPageCount,
                                                      r->lam->AdapterPageArray, r->fbo, 2 * 4096,
                                                      (PVOID)0x10000000, fl)) == STATUS_SUCCESS;
        na += fr_ok;
    }
    if (CALL("NdkSend", STATUS_SUCCESS, A->qp->Dispatch->NdkSend(A->qp, (PVOID)3, &sa, 1, 0)) == STATUS_SUCCESS)
        na++;
    NDK_RESULT res[8];
    /* B may use the registration once A's queue has executed it: the Send
     * posted behind it arrived. */
    if (nb && !reap(B, res, 1)) {
        inj_report("B's receive", STATUS_PENDING, "never completed");
        return;
    }
    bool ok = nb && res[0].Status == STATUS_SUCCESS && res[0].BytesTransferred == MSG_A &&
              filled(B->buf + 16384, MSG_A, 0x11);
    if (!ok)
        inj_report("A's Send at B", nb ? res[0].Status : STATUS_PENDING, "established, yet the data did not arrive");
    nb = 0;
    if (CALL("NdkSend", STATUS_SUCCESS, B->qp->Dispatch->NdkSend(B->qp, (PVOID)3, &sb, 1, 0)) == STATUS_SUCCESS)
        nb++;
    if (fr_ok) {
        uint32_t tok = r->frmr->Dispatch->NdkGetRemoteTokenFromMr(r->frmr);
        if (CALL("NdkWrite", STATUS_SUCCESS,
                 B->qp->Dispatch->NdkWrite(B->qp, (PVOID)4, &wsrc, 1, 0x10000000 + r->fbo + 100, tok, 0)) ==
            STATUS_SUCCESS)
            nb++;
    }
    if (CALL("NdkRead", STATUS_SUCCESS,
             B->qp->Dispatch->NdkRead(B->qp, (PVOID)5, &rsink, 1, (uint64_t)(uintptr_t)(A->buf + 8192), A->rtok,
                                      0)) == STATUS_SUCCESS)
        nb++;
    bool all = reap(B, res, nb);
    for (unsigned i = 0; all && i < nb; i++)
        all = res[i].Status == STATUS_SUCCESS;
    NDK_RESULT resa[8];
    all = all && reap(A, resa, na);
    for (unsigned i = 0; all && i < na; i++)
        all = resa[i].Status == STATUS_SUCCESS;
    all = all && filled(A->buf + 16384, MSG_B, 0x22) && filled(B->buf + 24576, RD_LEN, 0x44) &&
          (!fr_ok || filled(r->frbuf + r->fbo + 100, WR_LEN, 0x33));
    if (!ok || !all)
        inj_report("the data exchange", STATUS_UNSUCCESSFUL, "established, yet requests failed or data differ");
    r->moved = ok && all;
}

/* Graceful end: A disconnects, B sees the event and disconnects too. */
static void hang_up(struct conn_run *r)
{
    struct end *A = &r->a, *B = &r->b;
    struct inj_op d1, d2;
    inj_op_init(&d1);
    inj_op_init(&d2);
    NTSTATUS sta = CALL2("NdkDisconnect", STATUS_PENDING, STATUS_SUCCESS,
                         A->conn->Dispatch->NdkDisconnect(A->conn, inj_op_cb, &d1));
    if (sta == STATUS_PENDING || sta == STATUS_SUCCESS) {
        if (!tl_event_wait(&B->disc.ev, 1, WAIT_MS))
            inj_report("B's disconnect event", STATUS_PENDING, "never came");
        NTSTATUS stb = CALL2("NdkDisconnect", STATUS_PENDING, STATUS_SUCCESS,
                             B->conn->Dispatch->NdkDisconnect(B->conn, inj_op_cb, &d2));
        leg_ok(inj_op_finish(&d2, stb, "B's NdkDisconnect"), "B's NdkDisconnect");
        leg_ok(inj_op_finish(&d1, sta, "A's NdkDisconnect"), "A's NdkDisconnect");
    }
    tl_event_destroy(&d1.ev);
    tl_event_destroy(&d2.ev);
}

/* A's fast-register MR and the LAM of its buffer. */
static void fastreg_setup(struct conn_run *r)
{
    struct end *A = &r->a;
    void *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;
    r->frbuf = m;
    if (CALL("NdkCreateMr", STATUS_SUCCESS, A->pd->Dispatch->NdkCreateMr(A->pd, TRUE, NULL, NULL, &r->frmr)) !=
        STATUS_SUCCESS)
        return;
    if (CALL("NdkInitializeFastRegisterMr", STATUS_SUCCESS,
             r->frmr->Dispatch->NdkInitializeFastRegisterMr(r->frmr, 3, TRUE, NULL, NULL)) != STATUS_SUCCESS) {
        inj_close_obj(r->frmr);
        r->frmr = NULL;
        return;
    }
    MDL mdl = {.StartVa = r->frbuf, .ByteCount = 2 * 4096};
    ULONG size = 0;
    NDK_ADAPTER *ad = A->sd->ad;
    if (CALL("NdkBuildLAM", STATUS_BUFFER_TOO_SMALL,
             ad->Dispatch->NdkBuildLAM(ad, &mdl, 2 * 4096, NULL, NULL, NULL, &size, &r->fbo)) !=
        STATUS_BUFFER_TOO_SMALL)
        return;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = calloc(1, size);
    if (!lam)
        return;
    if (CALL("NdkBuildLAM", STATUS_SUCCESS, ad->Dispatch->NdkBuildLAM(ad, &mdl, 2 * 4096, NULL, NULL, lam, &size,
                                                                     &r->fbo)) != STATUS_SUCCESS) {
        free(lam);
        return;
    }
    r->lam = lam;
}

/* The whole life; returns true when everything worked (no failure hit). */
bool inj_conn_life(struct inj_side *sa, struct inj_side *sb)
{
    struct conn_run r;
    memset(&r, 0, sizeof r);
    tl_event_init(&r.incoming);
    unsigned before = inj_problems();
    if (end_open(&r.a, sa, true) && end_open(&r.b, sb, false)) {
        fastreg_setup(&r);
        establish(&r);
        if (r.established) {
            exchange(&r);
            hang_up(&r);
        }
    }
    /* The passive connector is the consumer's once its event came, even
     * when establish() gave up before it took it. */
    r.b.conn = atomic_load(&r.passive);
    inj_close_obj(r.a.conn);
    r.a.conn = NULL;
    inj_close_obj(r.b.conn);
    r.b.conn = NULL;
    inj_close_obj(r.l);
    if (r.lam) {
        inj_call("NdkReleaseLAM");
        sa->ad->Dispatch->NdkReleaseLAM(sa->ad, r.lam);
        free(r.lam);
    }
    inj_close_obj(r.frmr);
    end_close(&r.a);
    end_close(&r.b);
    if (r.frbuf)
        munmap(r.frbuf, 3 * 4096);
    tl_event_destroy(&r.incoming);
    return r.moved && inj_problems() == before;
}
