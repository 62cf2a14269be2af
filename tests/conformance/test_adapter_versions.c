/* The NDKPI version an adapter is opened with: every object's header
 * carries the negotiated version and the dispatch table of that version,
 * memory objects included, and the consumer owns the dispatch tables'
 * reserved members. */
#include "ndktest.h"

/* Every member of every dispatch table is mandatory (V5). */
#define NT_CHECK_FN(d, m)                                                                    \
    do {                                                                                     \
        if (!(d)->m) {                                                                       \
            tl_failures++;                                                                   \
            fprintf(stderr, "[%s] dispatch member %s is NULL\n", tl_current, #m);             \
        }                                                                                    \
    } while (0)

static void check_dispatch(void *obj)
{
    NDK_OBJECT_HEADER *h = obj;
    switch (h->ObjectType) {
    case NdkObjectTypeAdapter: {
        const NDK_ADAPTER_DISPATCH *d = ((NDK_ADAPTER *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkQueryAdapterInfo);
        NT_CHECK_FN(d, NdkCreateCq);
        NT_CHECK_FN(d, NdkCreatePd);
        NT_CHECK_FN(d, NdkCreateSharedEndpoint);
        NT_CHECK_FN(d, NdkCreateConnector);
        NT_CHECK_FN(d, NdkCreateListener);
        NT_CHECK_FN(d, NdkBuildLAM);
        NT_CHECK_FN(d, NdkReleaseLAM);
        break;
    }
    case NdkObjectTypeCq: {
        const NDK_CQ_DISPATCH *d = ((NDK_CQ *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseCq);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkResizeCq);
        NT_CHECK_FN(d, NdkArmCq);
        NT_CHECK_FN(d, NdkGetCqResults);
        NT_CHECK_FN(d, NdkControlCqInterruptModeration);
        NT_CHECK_FN(d, NdkGetCqResultsEx);
        break;
    }
    case NdkObjectTypePd: {
        const NDK_PD_DISPATCH *d = ((NDK_PD *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkClosePd);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkCreateMr);
        NT_CHECK_FN(d, NdkCreateMw);
        NT_CHECK_FN(d, NdkCreateSrq);
        NT_CHECK_FN(d, NdkCreateQp);
        NT_CHECK_FN(d, NdkCreateQpWithSrq);
        NT_CHECK_FN(d, NdkGetPrivilegedMemoryRegionToken);
        break;
    }
    case NdkObjectTypeMr: {
        const NDK_MR_DISPATCH *d = ((NDK_MR *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseMr);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkRegisterMr);
        NT_CHECK_FN(d, NdkDeregisterMr);
        NT_CHECK_FN(d, NdkInitializeFastRegisterMr);
        NT_CHECK_FN(d, NdkGetRemoteTokenFromMr);
        NT_CHECK_FN(d, NdkGetLocalTokenFromMr);
        break;
    }
    case NdkObjectTypeMw: {
        const NDK_MW_DISPATCH *d = ((NDK_MW *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseMw);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkGetRemoteTokenFromMw);
        break;
    }
    case NdkObjectTypeSrq: {
        const NDK_SRQ_DISPATCH *d = ((NDK_SRQ *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseSrq);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkModifySrq);
        NT_CHECK_FN(d, NdkSrqReceive);
        break;
    }
    case NdkObjectTypeQp: {
        const NDK_QP_DISPATCH *d = ((NDK_QP *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseQp);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkFlush);
        NT_CHECK_FN(d, NdkSend);
        NT_CHECK_FN(d, NdkReceive);
        NT_CHECK_FN(d, NdkBind);
        NT_CHECK_FN(d, NdkFastRegister);
        NT_CHECK_FN(d, NdkInvalidate);
        NT_CHECK_FN(d, NdkRead);
        NT_CHECK_FN(d, NdkWrite);
        NT_CHECK_FN(d, NdkSendAndInvalidate);
        break;
    }
    case NdkObjectTypeSharedEndpoint: {
        const NDK_SHARED_ENDPOINT_DISPATCH *d = ((NDK_SHARED_ENDPOINT *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseSharedEndpoint);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkGetLocalAddress);
        break;
    }
    case NdkObjectTypeConnector: {
        const NDK_CONNECTOR_DISPATCH *d = ((NDK_CONNECTOR *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseConnector);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkConnect);
        NT_CHECK_FN(d, NdkConnectWithSharedEndpoint);
        NT_CHECK_FN(d, NdkCompleteConnect);
        NT_CHECK_FN(d, NdkAccept);
        NT_CHECK_FN(d, NdkReject);
        NT_CHECK_FN(d, NdkGetConnectionData);
        NT_CHECK_FN(d, NdkGetLocalAddress);
        NT_CHECK_FN(d, NdkGetPeerAddress);
        NT_CHECK_FN(d, NdkDisconnect);
        NT_CHECK_FN(d, NdkCompleteConnectEx);
        NT_CHECK_FN(d, NdkAcceptEx);
        break;
    }
    case NdkObjectTypeListener: {
        const NDK_LISTENER_DISPATCH *d = ((NDK_LISTENER *)obj)->Dispatch;
        REQUIRE(d);
        NT_CHECK_FN(d, NdkCloseListener);
        NT_CHECK_FN(d, NdkQueryExtension);
        NT_CHECK_FN(d, NdkListen);
        NT_CHECK_FN(d, NdkGetLocalAddress);
        NT_CHECK_FN(d, NdkControlConnectEvents);
        break;
    }
    default:
        tl_failures++;
        fprintf(stderr, "[%s] unexpected object type %d\n", tl_current, (int)h->ObjectType);
    }
}

/* Header rules (2.3, L16, V2): negotiated version, the right ObjectType
 * (never Undefined), NdkReserved zero, Dispatch set with every member. */
static void check_header(void *obj, NDK_OBJECT_TYPE type, NDK_VERSION v)
{
    REQUIRE(obj);
    NDK_OBJECT_HEADER *h = obj;
    CHECK_EQ(h->ObjectType, type);
    CHECK(h->ObjectType != NdkObjectTypeUndefined);
    CHECK_EQ(h->Version.Major, v.Major);
    CHECK_EQ(h->Version.Minor, v.Minor);
    for (int i = 0; i < 4; i++)
        CHECK(h->NdkReserved.rf[i] == NULL);
    check_dispatch(obj);
}

/* The objects of one adapter opened at version `req`, all checked against
 * the negotiated version `got`. */
static void check_all_objects(NDK_VERSION req, NDK_VERSION got)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_ADAPTER *ad = NULL;
    NTSTATUS st = nt_open("lo", req, &o, &ad);
    CHECK_STATUS(st, STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, got.Major);
    CHECK_EQ(info.Version.Minor, got.Minor);
    check_header(ad, NdkObjectTypeAdapter, got);

    NDK_CQ *cq = NULL;
    NDK_PD *pd = NULL;
    NDK_QP *qp = NULL;
    NDK_CONNECTOR *c = NULL;
    NDK_SHARED_ENDPOINT *sep = NULL;
    CHECK_STATUS(nt_create_cq(ad, 16, &cq), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_pd(ad, &pd), STATUS_SUCCESS);
    REQUIRE(cq && pd);
    CHECK_STATUS(nt_create_qp(pd, cq, 4, 4, 1, 1, 0, &qp), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_connector(ad, &c), STATUS_SUCCESS);
    NDK_SOCKADDR sa;
    ULONG salen = nt_sa_loop(AF_INET, 0, &sa);
    CHECK_STATUS(nt_create_sep(ad, &sa, salen, &sep), STATUS_SUCCESS);

    check_header(cq, NdkObjectTypeCq, got);
    check_header(pd, NdkObjectTypePd, got);
    check_header(qp, NdkObjectTypeQp, got);
    check_header(c, NdkObjectTypeConnector, got);
    check_header(sep, NdkObjectTypeSharedEndpoint, got);

    /* The listener, and a connector the provider creates for a connect
     * event (the passive side), carry the same header. */
    nt_side side = {.ad = ad, .info = info, .cq = cq, .pd = pd};
    nt_lsn *L = nt_listen(&side, AF_INET);
    if (L) {
        check_header(L->l, NdkObjectTypeListener, got);
        nt_conn cn;
        memset(&cn, 0, sizeof cn);
        cn.fam = AF_INET;
        cn.as = cn.ps = &side;
        cn.L = L;
        cn.qa = qp;
        cn.a = c;
        nt_conn_connect(&cn, 1, 1, NULL, 0);
        NDK_CONNECTOR *p = nt_incoming(L, 0, NT_WAIT_MS);
        if (p) {
            check_header(p, NdkObjectTypeConnector, got);
            /* Never answered: closing it refuses the request. */
            nt_close(p);
        }
        CHECK_STATUS(nt_finish(cn.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
        nt_lsn_close(L);
    }

    nt_close(c);
    nt_close(sep);
    nt_close(qp);
    nt_close(pd);
    nt_close(cq);
    nt_close_adapter(ad);
}

/* The memory objects (MR, MW, SRQ) of a PD, in their own case so that the
 * connection objects are judged on their own. */
static void check_memory_objects(NDK_VERSION req, NDK_VERSION got)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", req, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    NDK_PD *pd = NULL;
    NDK_MR *mr = NULL, *fmr = NULL;
    NDK_MW *mw = NULL;
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(nt_create_pd(ad, &pd), STATUS_SUCCESS);
    REQUIRE(pd);
    CHECK_STATUS(nt_create_mr(pd, FALSE, &mr), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_mr(pd, TRUE, &fmr), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_mw(pd, &mw), STATUS_SUCCESS);
    CHECK(info.MaxSrqDepth > 0); /* libndk has SRQs */
    CHECK_STATUS(nt_create_srq(pd, 4, &srq), STATUS_SUCCESS);
    if (mr)
        check_header(mr, NdkObjectTypeMr, got);
    if (fmr)
        check_header(fmr, NdkObjectTypeMr, got);
    if (mw)
        check_header(mw, NdkObjectTypeMw, got);
    if (srq)
        check_header(srq, NdkObjectTypeSrq, got);
    nt_close(srq);
    nt_close(mw);
    nt_close(fmr);
    nt_close(mr);
    nt_close(pd);
    nt_close_adapter(ad);
}

NT_CASE(negotiated_versions_memory_objects)
{
    check_memory_objects((NDK_VERSION){1, 0}, (NDK_VERSION){1, 2});
    check_memory_objects((NDK_VERSION){2, 0}, (NDK_VERSION){2, 1});
}

NT_CASE(negotiated_versions)
{
    /* V1/V2: the provider's highest minor of the requested major, in
     * NDK_ADAPTER_INFO.Version and in every object's Header.Version. */
    check_all_objects((NDK_VERSION){1, 0}, (NDK_VERSION){1, 2});
    check_all_objects((NDK_VERSION){1, 1}, (NDK_VERSION){1, 2});
    check_all_objects((NDK_VERSION){1, 2}, (NDK_VERSION){1, 2});
    check_all_objects((NDK_VERSION){2, 0}, (NDK_VERSION){2, 1});
    check_all_objects((NDK_VERSION){2, 1}, (NDK_VERSION){2, 1});
}

/* The consumer may overwrite Dispatch and use NdkReserved (2.3, L16): the
 * provider never reads Dispatch back and never touches NdkReserved. Here
 * the consumer NULLs every Dispatch after saving it, fills NdkReserved with
 * a pattern, uses the objects through the saved tables, and checks the
 * pattern before closing. A provider reading Dispatch would crash. */
NT_CASE(consumer_owns_dispatch_and_reserved)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    NDK_QP *qp = nt_qp(&s);
    NDK_CONNECTOR *c = nt_connector(&s);
    nt_lsn *L = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(s.ad, nt_connect_event, L, &L->l), STATUS_SUCCESS);
    REQUIRE(qp && c && L->l);

    const NDK_CQ_DISPATCH *dcq = s.cq->Dispatch;
    const NDK_PD_DISPATCH *dpd = s.pd->Dispatch;
    const NDK_QP_DISPATCH *dqp = qp->Dispatch;
    const NDK_CONNECTOR_DISPATCH *dc = c->Dispatch;
    const NDK_LISTENER_DISPATCH *dl = L->l->Dispatch;
    void *pattern[4] = {(void *)0x1111, (void *)0x2222, (void *)0x3333, (void *)0x4444};
    NDK_OBJECT_HEADER *objs[] = {&s.cq->Header, &s.pd->Header, &qp->Header, &c->Header,
                                 &L->l->Header};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        memcpy(objs[i]->NdkReserved.rf, pattern, sizeof pattern);
    s.cq->Dispatch = NULL;
    s.pd->Dispatch = NULL;
    qp->Dispatch = NULL;
    c->Dispatch = NULL;
    L->l->Dispatch = NULL;

    /* Listen, connect (to the listener: the connect event fires), refuse by
     * closing the passive connector. */
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, 0, &sa);
    nt_op *lop = nt_op_new(NT_REQ, "NdkListen");
    nt_started(lop, dl->NdkListen(L->l, &sa.sa, len, nt_req_cb, lop));
    CHECK_STATUS(nt_finish(lop, NT_WAIT_MS), STATUS_SUCCESS);
    L->addrlen = sizeof L->addr;
    CHECK_STATUS(dl->NdkGetLocalAddress(L->l, &L->addr.sa, &L->addrlen), STATUS_SUCCESS);

    NDK_SOCKADDR src;
    ULONG srclen = nt_sa_loop(AF_INET, 0, &src);
    nt_op *cop = nt_op_new(NT_REQ, "NdkConnect");
    nt_started(cop, dc->NdkConnect(c, qp, &src.sa, srclen, &L->addr.sa, L->addrlen, 1, 1, NULL, 0,
                                   nt_req_cb, cop));
    NDK_CONNECTOR *p = nt_incoming(L, 0, NT_WAIT_MS);
    if (p) {
        const NDK_CONNECTOR_DISPATCH *dp = p->Dispatch;
        memcpy(p->Header.NdkReserved.rf, pattern, sizeof pattern);
        p->Dispatch = NULL;
        ULONG plen = 0;
        CHECK_STATUS(dp->NdkGetConnectionData(p, NULL, NULL, NULL, &plen), STATUS_SUCCESS);
        CHECK(memcmp(p->Header.NdkReserved.rf, pattern, sizeof pattern) == 0);
        nt_op *pc = nt_op_new(NT_CLOSE, "NdkCloseConnector(passive)");
        nt_started(pc, dp->NdkCloseConnector(&p->Header, nt_close_cb, pc));
        CHECK(nt_close_wait(pc, NT_WAIT_MS));
    }
    CHECK_STATUS(nt_finish(cop, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);

    /* The CQ and QP still answer through the saved tables. */
    NDK_RESULT res[4];
    CHECK_EQ(dcq->NdkGetCqResults(s.cq, res, 4), 0);
    dqp->NdkFlush(qp);
    UINT32 tok = 0;
    dpd->NdkGetPrivilegedMemoryRegionToken(s.pd, &tok);

    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        CHECK(memcmp(objs[i]->NdkReserved.rf, pattern, sizeof pattern) == 0);

    nt_op *ops[5];
    ops[0] = nt_op_new(NT_CLOSE, "NdkCloseConnector");
    nt_started(ops[0], dc->NdkCloseConnector(&c->Header, nt_close_cb, ops[0]));
    ops[1] = nt_op_new(NT_CLOSE, "NdkCloseListener");
    nt_started(ops[1], dl->NdkCloseListener(&L->l->Header, nt_close_cb, ops[1]));
    ops[2] = nt_op_new(NT_CLOSE, "NdkCloseQp");
    nt_started(ops[2], dqp->NdkCloseQp(&qp->Header, nt_close_cb, ops[2]));
    ops[3] = nt_op_new(NT_CLOSE, "NdkClosePd");
    nt_started(ops[3], dpd->NdkClosePd(&s.pd->Header, nt_close_cb, ops[3]));
    ops[4] = nt_op_new(NT_CLOSE, "NdkCloseCq");
    nt_started(ops[4], dcq->NdkCloseCq(&s.cq->Header, nt_close_cb, ops[4]));
    for (int i = 0; i < 5; i++)
        CHECK(nt_close_wait(ops[i], NT_WAIT_MS));
    nt_close_adapter(s.ad);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(negotiated_versions);
    RUN(negotiated_versions_memory_objects);
    RUN(consumer_owns_dispatch_and_reserved);
    return tl_finish();
}
