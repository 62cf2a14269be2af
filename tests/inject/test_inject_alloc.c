/*
 * Out of memory at every allocation: for each N, the N-th allocation libndk
 * makes (on any thread, see inject.h) fails, in
 *   - ndk_open_adapter and ndk_close_adapter;
 *   - the life of every object on an open adapter (PD, CQ and its resize,
 *     SRQ, QP with and without it, MR registration, fast-register MR, MW,
 *     LAM, connector, listener and NdkListen, shared endpoint), all closed;
 *   - a connection's life between two adapters and a data exchange over it
 *     (injconn.h: the three legs, Sends, a fast registration, RDMA Write
 *     and Read, disconnect, every object closed).
 * Each run must meet injconn.h's rules (the call that ran out of memory
 * says STATUS_INSUFFICIENT_RESOURCES; nothing else fails except as a
 * consequence, never by timing out); afterwards nothing libndk allocated is
 * left (its live blocks return to where they were; LSan checks the same in
 * the sanitizer build) and the same two adapters still connect and move
 * data. N runs from 1 until a run makes fewer than N allocations.
 */
#include "injconn.h"

static struct inj_side A, B;

#define MAX_N 2000
#define MAX_BAD 10 /* stop a sweep after this many failing N */

/* libndk's live blocks once both adapters are idle. */
static long settled_live(void)
{
    CHECK(inj_settle(A.ad) && inj_settle(B.ad));
    return inj_live();
}

/* Fails each allocation of fn in turn; returns how many fn makes. */
static unsigned sweep(const char *name, void (*fn)(void))
{
    long base = settled_live();
    struct inj_where w = {.count = 0};
    unsigned n, bad = 0;
    for (n = 1; n <= MAX_N && bad < MAX_BAD; n++) {
        int before = tl_failures;
        inj_arm(n);
        fn();
        bool fired = inj_fired();
        const char *where = inj_fired_in();
        inj_disarm();
        if (fired)
            inj_where_note(&w, where);
        if (tl_failures != before)
            fprintf(stderr, "  [%s] allocation %u failed in %s: the rules above were broken\n", name, n, where);
        long left = settled_live() - base;
        if (left) {
            CHECK(!"libndk freed everything it allocated");
            fprintf(stderr, "  [%s] allocation %u failed in %s: %ld blocks left\n", name, n, where, left);
        }
        if (!inj_conn_life(&A, &B)) {
            CHECK(!"the same adapters connect and move data afterwards");
            fprintf(stderr, "  [%s] after allocation %u failed in %s\n", name, n, where);
        }
        CHECK_EQ(settled_live(), base);
        if (tl_failures != before)
            bad++;
        if (!fired)
            break;
    }
    inj_where_print(&w, name, n - 1);
    return n - 1;
}

static void open_close(void)
{
    NDK_OPEN_OPTIONS o = inj_opts();
    NDK_ADAPTER *ad = NULL;
    if (CALL("ndk_open_adapter", STATUS_SUCCESS, ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &ad)) ==
        STATUS_SUCCESS) {
        inj_call("ndk_close_adapter");
        ndk_close_adapter(ad);
    }
}

/* CQ and SRQ notifications: never armed. */
static void no_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static void no_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx, (void)c;
    abort(); /* nobody connects to this listener */
}

/* Every object on A, each closed again. */
static void objects(void)
{
    NDK_ADAPTER *ad = A.ad;
    NDK_PD *pd = NULL;
    NDK_CQ *cq = NULL;
    NDK_SRQ *srq = NULL;
    NDK_QP *qp = NULL, *qps = NULL;
    NDK_MR *mr = NULL, *frmr = NULL;
    NDK_MW *mw = NULL;
    NDK_CONNECTOR *c = NULL;
    NDK_LISTENER *l = NULL;
    NDK_SHARED_ENDPOINT *sep = NULL;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = NULL;
    static uint8_t buf[3 * 4096] __attribute__((aligned(4096)));

    CALL("NdkCreatePd", STATUS_SUCCESS, ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &pd));
    if (CALL("NdkCreateCq", STATUS_SUCCESS,
             ad->Dispatch->NdkCreateCq(ad, 32, no_notify, NULL, NULL, NULL, NULL, &cq)) == STATUS_SUCCESS) {
        struct inj_op o;
        inj_op_init(&o);
        NTSTATUS st = CALL2("NdkResizeCq", STATUS_SUCCESS, STATUS_PENDING,
                            cq->Dispatch->NdkResizeCq(cq, 128, inj_op_cb, &o));
        inj_op_finish(&o, st, "NdkResizeCq");
        tl_event_destroy(&o.ev);
    }
    if (pd) {
        CALL("NdkCreateSrq", STATUS_SUCCESS,
             pd->Dispatch->NdkCreateSrq(pd, 32, 2, 0, no_notify, NULL, NULL, NULL, NULL, &srq));
        if (cq)
            CALL("NdkCreateQp", STATUS_SUCCESS,
                 pd->Dispatch->NdkCreateQp(pd, cq, cq, NULL, 16, 16, 2, 2, 64, NULL, NULL, &qp));
        if (cq && srq)
            CALL("NdkCreateQpWithSrq", STATUS_SUCCESS,
                 pd->Dispatch->NdkCreateQpWithSrq(pd, cq, cq, srq, NULL, 16, 2, 64, NULL, NULL, &qps));
        if (CALL("NdkCreateMr", STATUS_SUCCESS, pd->Dispatch->NdkCreateMr(pd, FALSE, NULL, NULL, &mr)) ==
            STATUS_SUCCESS) {
            MDL mdl = {.StartVa = buf, .ByteCount = sizeof buf};
            if (CALL("NdkRegisterMr", STATUS_SUCCESS,
                     mr->Dispatch->NdkRegisterMr(mr, &mdl, sizeof buf, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, NULL, NULL)) ==
                STATUS_SUCCESS)
                CALL("NdkDeregisterMr", STATUS_SUCCESS, mr->Dispatch->NdkDeregisterMr(mr, NULL, NULL));
        }
        if (CALL("NdkCreateMr", STATUS_SUCCESS, pd->Dispatch->NdkCreateMr(pd, TRUE, NULL, NULL, &frmr)) ==
            STATUS_SUCCESS)
            CALL("NdkInitializeFastRegisterMr", STATUS_SUCCESS,
                 frmr->Dispatch->NdkInitializeFastRegisterMr(frmr, 8, TRUE, NULL, NULL));
        CALL("NdkCreateMw", STATUS_SUCCESS, pd->Dispatch->NdkCreateMw(pd, NULL, NULL, &mw));
    }
    MDL mdl = {.StartVa = buf, .ByteCount = sizeof buf};
    ULONG size = 0, fbo = 0;
    if (CALL("NdkBuildLAM", STATUS_BUFFER_TOO_SMALL,
             ad->Dispatch->NdkBuildLAM(ad, &mdl, sizeof buf, NULL, NULL, NULL, &size, &fbo)) ==
            STATUS_BUFFER_TOO_SMALL &&
        (lam = calloc(1, size)) != NULL) {
        if (CALL("NdkBuildLAM", STATUS_SUCCESS,
                 ad->Dispatch->NdkBuildLAM(ad, &mdl, sizeof buf, NULL, NULL, lam, &size, &fbo)) == STATUS_SUCCESS) {
            inj_call("NdkReleaseLAM");
            ad->Dispatch->NdkReleaseLAM(ad, lam);
        }
        free(lam);
    }
    CALL("NdkCreateConnector", STATUS_SUCCESS, ad->Dispatch->NdkCreateConnector(ad, NULL, NULL, &c));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (CALL("NdkCreateListener", STATUS_SUCCESS,
             ad->Dispatch->NdkCreateListener(ad, no_connect_event, NULL, NULL, NULL, &l)) == STATUS_SUCCESS) {
        struct inj_op o;
        inj_op_init(&o);
        NTSTATUS st = CALL2("NdkListen", STATUS_SUCCESS, STATUS_PENDING,
                            l->Dispatch->NdkListen(l, (PSOCKADDR)&sa, sizeof sa, inj_op_cb, &o));
        inj_op_finish(&o, st, "NdkListen");
        tl_event_destroy(&o.ev);
    }
    CALL("NdkCreateSharedEndpoint", STATUS_SUCCESS,
         ad->Dispatch->NdkCreateSharedEndpoint(ad, (PSOCKADDR)&sa, sizeof sa, NULL, NULL, &sep));

    inj_close_obj(sep);
    inj_close_obj(mw);
    inj_close_obj(l);
    inj_close_obj(c);
    inj_close_obj(qps);
    inj_close_obj(qp);
    inj_close_obj(srq);
    inj_close_obj(frmr);
    inj_close_obj(mr);
    inj_close_obj(cq);
    inj_close_obj(pd);
}

static void connection(void)
{
    inj_conn_life(&A, &B);
}

static void test_open_adapter(void)
{
    CHECK(sweep("ndk_open_adapter + ndk_close_adapter", open_close) > 0);
}

static void test_objects(void)
{
    CHECK(sweep("object lives", objects) > 0);
}

static void test_connection(void)
{
    CHECK(sweep("a connection's life and a data exchange", connection) > 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    long before = inj_live();
    NDK_OPEN_OPTIONS o = inj_opts();
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &A.ad) != STATUS_SUCCESS ||
        ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &B.ad) != STATUS_SUCCESS) {
        fprintf(stderr, "cannot open the loopback adapter\n");
        return 1;
    }
    /* The scenario works before anything is made to fail. */
    if (!inj_conn_life(&A, &B)) {
        fprintf(stderr, "the connection scenario fails without any injected failure\n");
        return 1;
    }
    RUN(test_open_adapter);
    RUN(test_objects);
    RUN(test_connection);
    ndk_close_adapter(A.ad);
    ndk_close_adapter(B.ad);
    CHECK_EQ(inj_live(), before);
    return tl_finish();
}
