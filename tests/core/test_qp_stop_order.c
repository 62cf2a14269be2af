/* The QP object's side of a connection's end (src/qp.c ndk_qp_stop,
 * src/transport.h stop and detach), white box, with a transport of the
 * test's own attached to a real QP: receives the transport took from the
 * queue and still holds (a Send being placed into one, those taken ahead
 * for the Sends behind it, as xp_shm.c does) complete, cancelled, before
 * the receives still queued, in posting order (NdkReceive); each exactly
 * once. The same-host transport's sim run once saw "completion of request
 * 6 after request 9" when the holder cancelled its receives at detach,
 * after the queue's flush. */
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "ndktest.h"
#include "testlib.h"
#include "transport.h"

#define DEPTH 8
#define HELD 2  /* receives the transport takes and holds */
#define POSTED 5

struct holder {
    struct ndk_rwqe held[HELD];
    unsigned nheld;
    unsigned stops, detaches, after_detach_held, local_errors;
};

static struct holder g_h;

static void h_nothing(struct ndk_qp_impl *qp)
{
    (void)qp;
}

/* What xp_shm.c's stop does with the receives it holds. */
static void h_stop(struct ndk_qp_impl *qp)
{
    struct holder *h = ndk_xp_ctx(qp);
    h->stops++;
    for (unsigned i = 0; i < h->nheld; i++)
        ndk_xp_complete_receive(qp, h->held[i].ctx, STATUS_CANCELLED, 0, false, 0, false);
    h->nheld = 0;
}

static void h_detach(struct ndk_qp_impl *qp, void *ctx)
{
    (void)qp;
    struct holder *h = ctx;
    h->detaches++;
    h->after_detach_held = h->nheld;
}

static const struct ndk_xp_ops holder_ops = {
    .name = "holder",
    .doorbell = h_nothing,
    .flush = h_stop,
    .forget = h_nothing,
    .stop = h_stop,
    .detach = h_detach,
};

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static struct ndk_qp_impl *impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

/* Posts POSTED receives (contexts 1..POSTED) on a QP with the holder
 * attached, lets the holder take the oldest HELD, then ends the QP's
 * connection by closing it (close_qp) or flushing it (NdkFlush): every
 * receive completes once, cancelled, 1..POSTED in order. */
static void held_first(bool close_qp)
{
    NDK_ADAPTER *ad = NULL;
    NDK_PD *pd = NULL;
    NDK_CQ *cq = NULL;
    NDK_QP *qp = NULL;
    REQUIRE(ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad) == STATUS_SUCCESS);
    REQUIRE(ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &pd) == STATUS_SUCCESS);
    REQUIRE(ad->Dispatch->NdkCreateCq(ad, 4 * DEPTH, cq_notify, NULL, NULL, NULL, NULL, &cq) == STATUS_SUCCESS);
    REQUIRE(pd->Dispatch->NdkCreateQp(pd, cq, cq, NULL, DEPTH, DEPTH, 1, 1, 0, NULL, NULL, &qp) == STATUS_SUCCESS);
    memset(&g_h, 0, sizeof g_h);
    ndk_qp_attach(impl(qp), &holder_ops, &g_h, 0, 0);
    for (int i = 1; i <= POSTED; i++)
        CHECK_EQ(qp->Dispatch->NdkReceive(qp, (void *)(uintptr_t)i, NULL, 0), STATUS_SUCCESS);
    g_h.nheld = ndk_xp_take_receives(impl(qp), g_h.held, HELD);
    REQUIRE(g_h.nheld == HELD);

    if (close_qp) {
        nt_close(qp);
        qp = NULL;
        CHECK_EQ(g_h.stops, 1u);
        CHECK_EQ(g_h.detaches, 1u);
        CHECK_EQ(g_h.after_detach_held, 0u);
    } else {
        qp->Dispatch->NdkFlush(qp);
    }
    NDK_RESULT_EX r[POSTED + 1];
    ULONG n = cq->Dispatch->NdkGetCqResultsEx(cq, r, POSTED + 1);
    CHECK_EQ(n, (ULONG)POSTED);
    for (ULONG i = 0; i < n; i++) {
        CHECK_EQ((uintptr_t)r[i].RequestContext, (uintptr_t)(i + 1));
        CHECK_EQ(r[i].Status, STATUS_CANCELLED);
        CHECK_EQ(r[i].Type, NdkOperationTypeReceive);
    }
    if (qp)
        nt_close(qp);
    nt_close(cq);
    nt_close(pd);
    ndk_close_adapter(ad);
}

/* The QP closed while its connection is up: ndk_qp_stop. */
static void t_close_cancels_held_receives_first(void)
{
    held_first(true);
}

/* NdkFlush (5.9.1), which always asked the transport first. */
static void t_flush_cancels_held_receives_first(void)
{
    held_first(false);
}

/* What xp_shm.c's doorbell does with a small Send: it is handed over,
 * and completes, at once. */
static void h_finish_all(struct ndk_qp_impl *qp)
{
    while (ndk_xp_sq_next(qp))
        ndk_xp_sq_finish(qp, STATUS_SUCCESS);
}

/* What xp_shm.c's local_error does: the connection is marked dead and its
 * owner told; the receives it holds wait for ndk_qp_stop. */
static void h_local_error(struct ndk_qp_impl *qp)
{
    struct holder *h = ndk_xp_ctx(qp);
    h->local_errors++;
}

static const struct ndk_xp_ops overflow_ops = {
    .name = "holder",
    .doorbell = h_finish_all,
    .flush = h_stop,
    .forget = h_nothing,
    .local_error = h_local_error,
    .stop = h_stop,
    .detach = h_detach,
};

/* The initiator CQ overflows (qp_push_cqes: the QP goes to error, the
 * transport is told, LOCAL_ERROR) while the transport holds the oldest
 * HELD receives; the receive CQ is another, and healthy. A receive
 * posted then completes at once, flushed (NdkReceive on a QP in error),
 * and with it those still queued: they must not overtake the ones the
 * transport holds, which were posted first. Every receive completes
 * once, cancelled, 1..POSTED+1 in order, when the QP is closed. */
static void t_receive_after_local_error_waits_for_held(void)
{
    NDK_ADAPTER *ad = NULL;
    NDK_PD *pd = NULL;
    NDK_CQ *rcq = NULL, *icq = NULL;
    NDK_QP *qp = NULL;
    REQUIRE(ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad) == STATUS_SUCCESS);
    REQUIRE(ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &pd) == STATUS_SUCCESS);
    REQUIRE(ad->Dispatch->NdkCreateCq(ad, 4 * DEPTH, cq_notify, NULL, NULL, NULL, NULL, &rcq) == STATUS_SUCCESS);
    REQUIRE(ad->Dispatch->NdkCreateCq(ad, 1, cq_notify, NULL, NULL, NULL, NULL, &icq) == STATUS_SUCCESS);
    REQUIRE(pd->Dispatch->NdkCreateQp(pd, rcq, icq, NULL, DEPTH, DEPTH, 1, 1, 0, NULL, NULL, &qp) ==
            STATUS_SUCCESS);
    memset(&g_h, 0, sizeof g_h);
    ndk_qp_attach(impl(qp), &overflow_ops, &g_h, 0, 0);
    for (int i = 1; i <= POSTED; i++)
        CHECK_EQ(qp->Dispatch->NdkReceive(qp, (void *)(uintptr_t)i, NULL, 0), STATUS_SUCCESS);
    g_h.nheld = ndk_xp_take_receives(impl(qp), g_h.held, HELD);
    REQUIRE(g_h.nheld == HELD);
    /* Two signalled Sends into an initiator CQ of depth 1: the second
     * overflows it. */
    for (int i = 0; i < 2; i++)
        CHECK_EQ(qp->Dispatch->NdkSend(qp, (void *)(uintptr_t)(100 + i), NULL, 0, 0), STATUS_SUCCESS);
    CHECK_EQ(g_h.local_errors, 1u);
    CHECK_EQ(qp->Dispatch->NdkReceive(qp, (void *)(uintptr_t)(POSTED + 1), NULL, 0), STATUS_SUCCESS);
    nt_close(qp);
    CHECK_EQ(g_h.detaches, 1u);
    NDK_RESULT_EX r[POSTED + 2];
    ULONG n = rcq->Dispatch->NdkGetCqResultsEx(rcq, r, POSTED + 2);
    CHECK_EQ(n, (ULONG)POSTED + 1);
    for (ULONG i = 0; i < n; i++) {
        CHECK_EQ((uintptr_t)r[i].RequestContext, (uintptr_t)(i + 1));
        CHECK_EQ(r[i].Status, STATUS_CANCELLED);
    }
    nt_close(icq);
    nt_close(rcq);
    nt_close(pd);
    ndk_close_adapter(ad);
}

int main(void)
{
    RUN(t_close_cancels_held_receives_first);
    RUN(t_flush_cancels_held_receives_first);
    RUN(t_receive_after_local_error_waits_for_held);
    return tl_finish();
}
