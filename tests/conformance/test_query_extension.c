/* NdkQueryExtensionInterface: libndk offers no extension, on any object,
 * memory objects included. */
#include "ndktest.h"

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

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(query_extension_not_supported);
    RUN(query_extension_not_supported_memory_objects);
    return tl_finish();
}
