/* Adapters: listing, opening (names, addresses, versions), NDK_ADAPTER_INFO
 * (seed 003), object headers, NdkQueryExtension, CQ and QP creation limits.
 * Contract: ndk.h, reference 2.3-2.5, 5.1.2, 5.3, 6.1-6.3, 10.7, and
 * docs/behaviour.md "Adapters". */
#include "ndktest.h"

#include <net/if.h>

static const NDK_VERSION v21 = {2, 1};

/* ------------------------------------------------------------------------ */
/* ndk_list_adapters                                                          */
/* ------------------------------------------------------------------------ */

static bool has_addr(const NDK_ADAPTER_DESCRIPTION *d, int fam)
{
    NDK_SOCKADDR want;
    nt_sa_loop(fam, 0, &want);
    for (ULONG i = 0; i < d->AddressCount && i < NDK_MAX_ADAPTER_ADDRESSES; i++)
        if (nt_sa_eq(&d->Addresses[i], &want))
            return true;
    return false;
}

NT_CASE(list_adapters)
{
    /* Size probe: no list, room for 0 -> too small, count = adapters. */
    ULONG n = 0;
    NTSTATUS st = ndk_list_adapters(NULL, &n);
    CHECK_STATUS(st, STATUS_BUFFER_TOO_SMALL);
    REQUIRE(n >= 1 && n < 1000);

    /* A roomier list than needed: success, count = adapters. */
    ULONG cap = n + 2;
    NDK_ADAPTER_DESCRIPTION *all = calloc(cap, sizeof *all);
    REQUIRE(all);
    ULONG m = cap;
    st = ndk_list_adapters(all, &m);
    CHECK_STATUS(st, STATUS_SUCCESS);
    CHECK_EQ(m, n);

    const NDK_ADAPTER_DESCRIPTION *lo = NULL;
    for (ULONG i = 0; i < m && i < cap; i++) {
        const NDK_ADAPTER_DESCRIPTION *d = &all[i];
        CHECK(d->Name[0] != '\0');
        CHECK(memchr(d->Name, '\0', sizeof d->Name) != NULL);
        /* Only interfaces with an address are adapters. */
        CHECK(d->AddressCount >= 1 && d->AddressCount <= NDK_MAX_ADAPTER_ADDRESSES);
        for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++) {
            int f = d->Addresses[k].sa.sa_family;
            CHECK(f == AF_INET || f == AF_INET6);
            CHECK_EQ(nt_sa_port(&d->Addresses[k]), 0);
        }
        if (strcmp(d->Name, "lo") == 0)
            lo = d;
    }
    REQUIRE(lo != NULL);
    CHECK(lo->Flags & NDK_ADAPTER_DESC_LOOPBACK);
    CHECK(lo->Flags & NDK_ADAPTER_DESC_UP);
    CHECK_EQ(lo->IfIndex, if_nametoindex("lo"));
    CHECK(lo->Mtu > 0);
    CHECK(has_addr(lo, AF_INET));

    /* Too small a list: the entries that fit are filled, nothing beyond
     * them is written, the count says how many exist. */
    if (n >= 2) {
        NDK_ADAPTER_DESCRIPTION *part = calloc(n, sizeof *part);
        REQUIRE(part);
        memset(part, 0xA5, n * sizeof *part);
        NDK_ADAPTER_DESCRIPTION canary;
        memset(&canary, 0xA5, sizeof canary);
        ULONG k = n - 1;
        st = ndk_list_adapters(part, &k);
        CHECK_STATUS(st, STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ(k, n);
        for (ULONG i = 0; i + 1 < n; i++) {
            bool known = false;
            for (ULONG j = 0; j < n; j++)
                if (strncmp(part[i].Name, all[j].Name, sizeof part[i].Name) == 0)
                    known = true;
            CHECK(known);
        }
        CHECK(memcmp(&part[n - 1], &canary, sizeof canary) == 0);
        free(part);
    }
    /* Room for one when more exist: same pattern. */
    NDK_ADAPTER_DESCRIPTION one[2];
    memset(one, 0xA5, sizeof one);
    NDK_ADAPTER_DESCRIPTION canary;
    memset(&canary, 0xA5, sizeof canary);
    ULONG k = 1;
    st = ndk_list_adapters(one, &k);
    CHECK_STATUS(st, n > 1 ? STATUS_BUFFER_TOO_SMALL : STATUS_SUCCESS);
    CHECK_EQ(k, n);
    CHECK(one[0].Name[0] != '\0');
    CHECK(memcmp(&one[1], &canary, sizeof canary) == 0);
    free(all);
}

/* ------------------------------------------------------------------------ */
/* ndk_open_adapter                                                           */
/* ------------------------------------------------------------------------ */

/* An adapter serves a listener on fam's loopback address: shows that an
 * adapter opened by address is the loopback interface's adapter. */
static void check_serves(NDK_ADAPTER *ad, int fam)
{
    nt_lsn *L = nt_lsn_new();
    NTSTATUS st = nt_create_listener(ad, nt_connect_event, L, &L->l);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return;
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(fam, 0, &sa);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    nt_close(L->l);
}

/* lo, opened by name or by 127.0.0.1, serves the run's loopback address
 * (127.0.0.1, or ::1 in the IPv6 run); opened by ::1 it serves both: one
 * interface owns both addresses. */
NT_CASE_FAM(open_by_name_and_address)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, &o, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    check_serves(ad, fam);
    nt_close_adapter(ad);

    /* pOptions may be NULL (defaults). */
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    nt_close_adapter(ad);

    CHECK_STATUS(nt_open("127.0.0.1", v21, &o, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    check_serves(ad, fam);
    nt_close_adapter(ad);
    if (fam == AF_INET6) {
        /* Opened by ::1 it is the same interface: it serves 127.0.0.1 too. */
        CHECK_STATUS(nt_open("::1", v21, &o, &ad), STATUS_SUCCESS);
        REQUIRE(ad);
        check_serves(ad, AF_INET6);
        check_serves(ad, AF_INET);
        nt_close_adapter(ad);
    }

    /* ndk_list_adapters names the address among lo's. */
    ULONG n = 0;
    CHECK_STATUS(ndk_list_adapters(NULL, &n), STATUS_BUFFER_TOO_SMALL);
    REQUIRE(n >= 1 && n < 1000);
    NDK_ADAPTER_DESCRIPTION *all = calloc(n, sizeof *all);
    REQUIRE(all);
    CHECK_STATUS(ndk_list_adapters(all, &n), STATUS_SUCCESS);
    bool found = false;
    for (ULONG i = 0; i < n; i++)
        if (strcmp(all[i].Name, "lo") == 0)
            found = has_addr(&all[i], fam);
    CHECK(found);
    free(all);
}

NT_CASE(open_unknown_is_not_found)
{
    NDK_ADAPTER *ad = (NDK_ADAPTER *)(uintptr_t)1;
    CHECK_STATUS(nt_open("nosuchif0", v21, NULL, &ad), STATUS_NOT_FOUND);
    CHECK(ad == NULL);
    /* Documentation addresses (RFC 5737 / RFC 3849): no interface has them. */
    CHECK_STATUS(nt_open("192.0.2.1", v21, NULL, &ad), STATUS_NOT_FOUND);
    CHECK_STATUS(nt_open("2001:db8::1", v21, NULL, &ad), STATUS_NOT_FOUND);
}

NT_CASE(open_invalid_parameters)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(ndk_open_adapter(NULL, v21, NULL, &ad), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(ndk_open_adapter("lo", v21, NULL, NULL), STATUS_INVALID_PARAMETER);
    NDK_OPEN_OPTIONS o = nt_opts();
    o.Size = 3; /* not sizeof(NDK_OPEN_OPTIONS) */
    NTSTATUS st = ndk_open_adapter("lo", v21, &o, &ad);
    CHECK_STATUS(st, STATUS_INVALID_PARAMETER);
    if (st == STATUS_SUCCESS)
        ndk_close_adapter(ad);
}

NT_CASE(open_bad_version)
{
    /* V1: unknown major, or a lowest-acceptable minor above the provider's
     * highest (1.2, 2.1). */
    static const NDK_VERSION bad[] = {{3, 0}, {1, 3}, {2, 2}, {0, 0}, {0, 1}, {4, 1}, {1, 0xFFFF}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NDK_ADAPTER *ad = NULL;
        NTSTATUS st = nt_open("lo", bad[i], NULL, &ad);
        if (st != NDIS_STATUS_BAD_VERSION)
            fprintf(stderr, "    version {%u,%u}\n", bad[i].Major, bad[i].Minor);
        CHECK_STATUS(st, NDIS_STATUS_BAD_VERSION);
        if (st == STATUS_SUCCESS)
            nt_close_adapter(ad);
    }
}

/* ------------------------------------------------------------------------ */
/* Object headers                                                           */
/* ------------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------------ */
/* NdkQueryAdapterInfo (seed 003)                                           */
/* ------------------------------------------------------------------------ */

NT_CASE(query_info_buffer_size)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    /* Size probe: NULL buffer -> too small, required size 0x68. */
    ULONG size = 0;
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, 0x68);
    CHECK_EQ(sizeof(NDK_ADAPTER_INFO), 0x68);
    /* NULL buffer even with a size claimed. */
    size = sizeof(NDK_ADAPTER_INFO);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, NULL, &size), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(size, 0x68);

    /* Below the old layout's 0x60 octets: too small, nothing written. */
    unsigned char buf[0x100];
    static const ULONG small[] = {1, 0x5F};
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
        memset(buf, 0xA5, sizeof buf);
        size = small[i];
        CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                     STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ(size, 0x68);
        bool untouched = true;
        for (size_t k = 0; k < sizeof buf; k++)
            untouched = untouched && buf[k] == 0xA5;
        CHECK(untouched);
    }

    /* docs/behaviour.md: a consumer built against a header whose structure
     * ends at AdapterFlags (0x60 octets, 6.1) is served that leading part:
     * success, size out 0x60, the octets a full query gives, nothing
     * written from 0x60 on (RdmaTechnology is not there for it). */
    NDK_ADAPTER_INFO full;
    CHECK_STATUS(nt_query_info(ad, &full), STATUS_SUCCESS);
    static const ULONG old_sizes[] = {0x60, 0x67};
    for (size_t i = 0; i < sizeof old_sizes / sizeof old_sizes[0]; i++) {
        memset(buf, 0xA5, sizeof buf);
        size = old_sizes[i];
        CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                     STATUS_SUCCESS);
        CHECK_EQ(size, 0x60);
        CHECK(memcmp(buf, &full, 0x60) == 0);
        bool rest = true;
        for (size_t k = 0x60; k < sizeof buf; k++)
            rest = rest && buf[k] == 0xA5;
        CHECK(rest);
    }

    /* Exact and larger buffers: success, size out = bytes written (0x68),
     * nothing written past the structure. */
    size = 0x68;
    memset(buf, 0xA5, sizeof buf);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                 STATUS_SUCCESS);
    CHECK_EQ(size, 0x68);
    size = sizeof buf;
    memset(buf, 0xA5, sizeof buf);
    CHECK_STATUS(ad->Dispatch->NdkQueryAdapterInfo(ad, (NDK_ADAPTER_INFO *)buf, &size),
                 STATUS_SUCCESS);
    CHECK_EQ(size, 0x68);
    bool tail = true;
    for (size_t k = 0x68; k < sizeof buf; k++)
        tail = tail && buf[k] == 0xA5;
    CHECK(tail);
    nt_close_adapter(ad);
}

NT_CASE(query_info_values)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, 2);
    CHECK_EQ(info.Version.Minor, 1);
    /* An iWARP provider (6.3). */
    CHECK_EQ(info.RdmaTechnology, NdkiWarp);
    /* Seed 003: at least 16 FRMR pages. */
    CHECK(info.FRMRPageCount >= 16);
    /* docs/behaviour.md: 252 octets of private data each way. */
    CHECK_EQ(info.MaxCallerData, 252);
    CHECK_EQ(info.MaxCalleeData, 252);
    /* docs/behaviour.md: IRD / ORD maxima 128. */
    CHECK_EQ(info.MaxInboundReadLimit, 128);
    CHECK_EQ(info.MaxOutboundReadLimit, 128);
    /* Seed 003: loopback to the same local address is supported. */
    CHECK(info.AdapterFlags & NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED);
    /* Undefined flag bits stay 0. */
    const ULONG known = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                        NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                        NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                        NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED |
                        NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                        NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                        NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    CHECK_EQ(info.AdapterFlags & ~known, 0);
    /* libndk's own flags (src/adapter.c says why each is set or not); the
     * conformance cases that depend on them assert them instead of
     * branching. MULTI_ENGINE follows the engine count, which follows the
     * CPUs: test_engines asserts it. */
    CHECK_EQ(info.AdapterFlags & ~(ULONG)NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED,
                                    NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                                    NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                                    NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                                    NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                                    NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                                    NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED);
    CHECK(info.MaxSrqDepth > 0);
    /* Limits a consumer sizes its objects by: all usable. */
    CHECK(info.MaxRegistrationSize > 0);
    CHECK(info.MaxInitiatorRequestSge >= 1);
    CHECK(info.MaxReceiveRequestSge >= 1);
    CHECK(info.MaxReadRequestSge >= 1);
    CHECK(info.MaxTransferLength > 0);
    CHECK(info.MaxReceiveQueueDepth >= 1);
    CHECK(info.MaxInitiatorQueueDepth >= 1);
    CHECK(info.MaxCqDepth >= 1);
    nt_close_adapter(ad);

    /* A 1.x adapter reports its own version. */
    CHECK_STATUS(nt_open("lo", (NDK_VERSION){1, 1}, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, 1);
    CHECK_EQ(info.Version.Minor, 2);
    nt_close_adapter(ad);
}

/* ------------------------------------------------------------------------ */
/* NdkQueryExtension                                                        */
/* ------------------------------------------------------------------------ */

/* No standard extension interfaces exist and libndk has none of its own:
 * STATUS_NOT_SUPPORTED on every object type (5.1.2). */
static void check_no_ext(NDK_FN_QUERY_EXTENSION_INTERFACE fn, void *obj)
{
    REQUIRE(fn && obj);
    GUID g = {0x12345678, 0x9abc, 0xdef0, {1, 2, 3, 4, 5, 6, 7, 8}};
    GUID zero;
    memset(&zero, 0, sizeof zero);
    NDK_EXTENSION_INTERFACE ext = {.Dispatch = NULL};
    CHECK_STATUS(fn((NDK_OBJECT_HEADER *)obj, &g, (NDK_VERSION){1, 0}, &ext), STATUS_NOT_SUPPORTED);
    CHECK_STATUS(fn((NDK_OBJECT_HEADER *)obj, &zero, (NDK_VERSION){2, 1}, &ext),
                 STATUS_NOT_SUPPORTED);
}

NT_CASE(query_extension_not_supported)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    NDK_QP *qp = nt_qp(&s);
    NDK_SHARED_ENDPOINT *sep = NULL;
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, 0, &sa);
    CHECK_STATUS(nt_create_sep(s.ad, &sa, len, &sep), STATUS_SUCCESS);
    NDK_CONNECTOR *c = nt_connector(&s);
    nt_lsn *L = nt_listen(&s, AF_INET);
    REQUIRE(qp && sep && c && L);

    check_no_ext(s.ad->Dispatch->NdkQueryExtension, s.ad);
    check_no_ext(s.cq->Dispatch->NdkQueryExtension, s.cq);
    check_no_ext(s.pd->Dispatch->NdkQueryExtension, s.pd);
    check_no_ext(qp->Dispatch->NdkQueryExtension, qp);
    check_no_ext(sep->Dispatch->NdkQueryExtension, sep);
    check_no_ext(c->Dispatch->NdkQueryExtension, c);
    check_no_ext(L->l->Dispatch->NdkQueryExtension, L->l);

    /* And on a passive connector delivered by a connect event. */
    nt_conn cn;
    memset(&cn, 0, sizeof cn);
    cn.fam = AF_INET;
    cn.L = L;
    cn.qa = qp;
    cn.a = c;
    nt_conn_connect(&cn, 1, 1, NULL, 0);
    NDK_CONNECTOR *p = nt_incoming(L, 0, NT_WAIT_MS);
    if (p) {
        check_no_ext(p->Dispatch->NdkQueryExtension, p);
        nt_close(p);
    }
    CHECK_STATUS(nt_finish(cn.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);

    nt_close(c);
    nt_lsn_close(L);
    nt_close(sep);
    nt_close(qp);
    nt_side_close(&s);
}

NT_CASE(query_extension_not_supported_memory_objects)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    NDK_MR *mr = NULL;
    NDK_MW *mw = NULL;
    NDK_SRQ *srq = NULL;
    CHECK_STATUS(nt_create_mr(s.pd, TRUE, &mr), STATUS_SUCCESS);
    CHECK_STATUS(nt_create_mw(s.pd, &mw), STATUS_SUCCESS);
    CHECK(s.info.MaxSrqDepth > 0); /* libndk has SRQs */
    CHECK_STATUS(nt_create_srq(s.pd, 4, &srq), STATUS_SUCCESS);
    if (mr)
        check_no_ext(mr->Dispatch->NdkQueryExtension, mr);
    if (mw)
        check_no_ext(mw->Dispatch->NdkQueryExtension, mw);
    if (srq)
        check_no_ext(srq->Dispatch->NdkQueryExtension, srq);
    nt_close(srq);
    nt_close(mw);
    nt_close(mr);
    nt_side_close(&s);
}

/* ------------------------------------------------------------------------ */
/* Creation limits                                                          */
/* ------------------------------------------------------------------------ */

NT_CASE(cq_depth_limits)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    NDK_ADAPTER_INFO info;
    CHECK_STATUS(nt_query_info(ad, &info), STATUS_SUCCESS);
    NDK_CQ *cq = NULL;
    /* 0 entries (reference 5.3.2 [I]) and MaxCqDepth + 1 are invalid. */
    CHECK_STATUS(nt_create_cq(ad, 0, &cq), STATUS_INVALID_PARAMETER);
    nt_close(cq);
    cq = NULL;
    if (info.MaxCqDepth < MAXULONG) {
        CHECK_STATUS(nt_create_cq(ad, info.MaxCqDepth + 1, &cq), STATUS_INVALID_PARAMETER);
        nt_close(cq);
        cq = NULL;
    }
    CHECK_STATUS(nt_create_cq(ad, MAXULONG, &cq), STATUS_INVALID_PARAMETER);
    nt_close(cq);
    cq = NULL;
    /* The limits themselves work (a huge maximum is not allocated here). */
    CHECK_STATUS(nt_create_cq(ad, 1, &cq), STATUS_SUCCESS);
    nt_close(cq);
    cq = NULL;
    if (info.MaxCqDepth <= (1u << 20)) {
        CHECK_STATUS(nt_create_cq(ad, info.MaxCqDepth, &cq), STATUS_SUCCESS);
        nt_close(cq);
    }
    nt_close_adapter(ad);
}

/* One QP creation with the five sizes given; closes the QP if created. */
static NTSTATUS try_qp(nt_side *s, ULONG rq, ULONG iq, ULONG rsge, ULONG isge, ULONG inl)
{
    NDK_QP *qp = NULL;
    NTSTATUS st = nt_create_qp(s->pd, s->cq, rq, iq, rsge, isge, inl, &qp);
    nt_close(qp);
    return st;
}

NT_CASE(qp_limits)
{
    nt_side s;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&s, &o));
    const NDK_ADAPTER_INFO *i = &s.info;
    /* Each of the five limits of 5.5.4 at its maximum works... */
    if (i->MaxReceiveQueueDepth <= (1u << 20))
        CHECK_STATUS(try_qp(&s, i->MaxReceiveQueueDepth, 4, 1, 1, 0), STATUS_SUCCESS);
    if (i->MaxInitiatorQueueDepth <= (1u << 20))
        CHECK_STATUS(try_qp(&s, 4, i->MaxInitiatorQueueDepth, 1, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, i->MaxReceiveRequestSge, 1, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, 1, i->MaxInitiatorRequestSge, 0), STATUS_SUCCESS);
    CHECK_STATUS(try_qp(&s, 4, 4, 1, 1, i->MaxInlineDataSize), STATUS_SUCCESS);
    /* ...and one more than it is STATUS_INVALID_PARAMETER. */
    if (i->MaxReceiveQueueDepth < MAXULONG)
        CHECK_STATUS(try_qp(&s, i->MaxReceiveQueueDepth + 1, 4, 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInitiatorQueueDepth < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, i->MaxInitiatorQueueDepth + 1, 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxReceiveRequestSge < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, i->MaxReceiveRequestSge + 1, 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInitiatorRequestSge < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, 1, i->MaxInitiatorRequestSge + 1, 0),
                     STATUS_INVALID_PARAMETER);
    if (i->MaxInlineDataSize < MAXULONG)
        CHECK_STATUS(try_qp(&s, 4, 4, 1, 1, i->MaxInlineDataSize + 1), STATUS_INVALID_PARAMETER);
    nt_side_close(&s);
}

/* ------------------------------------------------------------------------ */
/* Several adapters                                                         */
/* ------------------------------------------------------------------------ */

NT_CASE(two_adapters)
{
    /* V4: several instances open at once on one interface, each usable on
     * its own, even talking to each other; closing one leaves the other. */
    nt_side a, b;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&a, &o));
    REQUIRE(nt_side_open(&b, &o));
    CHECK(a.ad != b.ad);
    CHECK(a.ad->Dispatch != NULL && b.ad->Dispatch != NULL);

    nt_lsn *L = nt_listen(&b, AF_INET);
    REQUIRE(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, AF_INET, &a, &b, L));
    CHECK(nt_establish(&c));
    nt_conn_close(&c);
    nt_lsn_close(L);

    nt_side_close(&a);
    NDK_CQ *cq = NULL;
    CHECK_STATUS(nt_create_cq(b.ad, 4, &cq), STATUS_SUCCESS);
    nt_close(cq);
    nt_side_close(&b);
}

/* docs/behaviour.md: on a loopback interface every address of 127.0.0.0/8
 * is local - a listener on 127.0.0.2 takes a connection from 127.0.0.3. */
NT_CASE(loopback_owns_127_8)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    nt_lsn *L = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(s.ad, nt_connect_event, L, &L->l), STATUS_SUCCESS);
    REQUIRE(L->l);
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, 0, &sa);
    sa.in4.sin_addr.s_addr = htonl(0x7F000002);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    L->addrlen = sizeof L->addr;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, &L->addr.sa, &L->addrlen),
                 STATUS_SUCCESS);
    CHECK_EQ(ntohl(L->addr.in4.sin_addr.s_addr), 0x7F000002);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, AF_INET, &s, &s, L));
    NDK_SOCKADDR src;
    ULONG srclen = nt_sa_loop(AF_INET, 0, &src);
    src.in4.sin_addr.s_addr = htonl(0x7F000003);
    c.connect = nt_op_new(NT_REQ, "NdkConnect");
    nt_started(c.connect, c.a->Dispatch->NdkConnect(c.a, c.qa, &src.sa, srclen, &L->addr.sa,
                                                    L->addrlen, 1, 1, NULL, 0, nt_req_cb,
                                                    c.connect));
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    if (c.p) {
        NDK_SOCKADDR peer;
        ULONG plen = sizeof peer;
        CHECK_STATUS(c.p->Dispatch->NdkGetPeerAddress(c.p, &peer.sa, &plen), STATUS_SUCCESS);
        CHECK_EQ(ntohl(peer.in4.sin_addr.s_addr), 0x7F000003);
        nt_conn_accept(&c, 1, 1, NULL, 0);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    }
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&s);
}

NT_CASE(status_names)
{
    CHECK(strcmp(ndk_status_name(STATUS_CONNECTION_REFUSED), "STATUS_CONNECTION_REFUSED") == 0);
    CHECK(strcmp(ndk_status_name(STATUS_SUCCESS), "STATUS_SUCCESS") == 0);
    CHECK(strcmp(ndk_status_name(STATUS_PENDING), "STATUS_PENDING") == 0);
    CHECK(strcmp(ndk_status_name(NDIS_STATUS_BAD_VERSION), "NDIS_STATUS_BAD_VERSION") == 0);
    CHECK(strcmp(ndk_status_name((NTSTATUS)0xC0FFEE01), "0xC0FFEE01") == 0 ||
          strcmp(ndk_status_name((NTSTATUS)0xC0FFEE01), "0xc0ffee01") == 0);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(list_adapters);
    RUN_FAM(open_by_name_and_address);
    RUN(open_unknown_is_not_found);
    RUN(open_invalid_parameters);
    RUN(open_bad_version);
    RUN(negotiated_versions);
    RUN(negotiated_versions_memory_objects);
    RUN(consumer_owns_dispatch_and_reserved);
    RUN(query_info_buffer_size);
    RUN(query_info_values);
    RUN(query_extension_not_supported);
    RUN(query_extension_not_supported_memory_objects);
    RUN(cq_depth_limits);
    RUN(qp_limits);
    RUN(two_adapters);
    RUN(loopback_owns_127_8);
    RUN(status_names);
    return tl_finish();
}
