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

static const struct ndk_xp_ops holder_ops = {
    .name = "holder",
    .doorbell = h_finish_all,
    .flush = h_stop,
    .forget = h_nothing,
    .local_error = h_local_error,
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

/* A QP with the holder attached, its receive CQ rcq and its initiator
 * CQ icq of depth icq_depth; receives 1..POSTED posted, the oldest HELD
 * of them taken by the holder. */
struct rig {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *rcq, *icq;
    NDK_QP *qp;
};

static bool rig_up(struct rig *r, ULONG icq_depth)
{
    memset(r, 0, sizeof *r);
    memset(&g_h, 0, sizeof g_h);
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &r->ad) != STATUS_SUCCESS ||
        r->ad->Dispatch->NdkCreatePd(r->ad, NULL, NULL, &r->pd) != STATUS_SUCCESS ||
        r->ad->Dispatch->NdkCreateCq(r->ad, 4 * DEPTH, cq_notify, NULL, NULL, NULL, NULL, &r->rcq) != STATUS_SUCCESS ||
        r->ad->Dispatch->NdkCreateCq(r->ad, icq_depth, cq_notify, NULL, NULL, NULL, NULL, &r->icq) != STATUS_SUCCESS ||
        r->pd->Dispatch->NdkCreateQp(r->pd, r->rcq, r->icq, NULL, DEPTH, DEPTH, 1, 1, 0, NULL, NULL, &r->qp) !=
            STATUS_SUCCESS)
        return false;
    ndk_qp_attach(impl(r->qp), &holder_ops, &g_h, 0, 0);
    for (int i = 1; i <= POSTED; i++)
        CHECK_EQ(r->qp->Dispatch->NdkReceive(r->qp, (void *)(uintptr_t)i, NULL, 0), STATUS_SUCCESS);
    g_h.nheld = ndk_xp_take_receives(impl(r->qp), g_h.held, HELD);
    return g_h.nheld == HELD;
}

static void rig_down(struct rig *r)
{
    if (r->qp)
        nt_close(r->qp);
    if (r->icq)
        nt_close(r->icq);
    if (r->rcq)
        nt_close(r->rcq);
    if (r->pd)
        nt_close(r->pd);
    if (r->ad)
        ndk_close_adapter(r->ad);
}

/* The receive CQ holds exactly n completions: receives 1..n, in order,
 * each cancelled. */
static void expect_cancelled_in_order(NDK_CQ *cq, ULONG n)
{
    NDK_RESULT_EX r[POSTED + 2];
    ULONG got = cq->Dispatch->NdkGetCqResultsEx(cq, r, POSTED + 2);
    CHECK_EQ(got, n);
    for (ULONG i = 0; i < got; i++) {
        CHECK_EQ((uintptr_t)r[i].RequestContext, (uintptr_t)(i + 1));
        CHECK_EQ(r[i].Status, STATUS_CANCELLED);
        CHECK_EQ(r[i].Type, NdkOperationTypeReceive);
    }
}

/* The QP closed while its connection is up (ndk_qp_stop): the holder is
 * stopped before the queue's flush and detached after, holding nothing;
 * every receive completes once, cancelled, 1..POSTED in order. */
static void t_close_cancels_held_receives_first(void)
{
    struct rig r;
    REQUIRE(rig_up(&r, 4 * DEPTH));
    nt_close(r.qp);
    r.qp = NULL;
    CHECK_EQ(g_h.stops, 1u);
    CHECK_EQ(g_h.detaches, 1u);
    CHECK_EQ(g_h.after_detach_held, 0u);
    expect_cancelled_in_order(r.rcq, POSTED);
    rig_down(&r);
}

/* NdkFlush (5.9.1), which always asked the transport first. */
static void t_flush_cancels_held_receives_first(void)
{
    struct rig r;
    REQUIRE(rig_up(&r, 4 * DEPTH));
    r.qp->Dispatch->NdkFlush(r.qp);
    expect_cancelled_in_order(r.rcq, POSTED);
    rig_down(&r);
}

/* The initiator CQ (depth 1) overflows (qp_push_cqes: the QP goes to
 * error, the transport is told, LOCAL_ERROR) while the transport holds
 * the oldest HELD receives; the receive CQ is another, and healthy. A
 * receive posted then completes at once, flushed (NdkReceive on a QP in
 * error), and with it those still queued: they must not overtake the
 * ones the transport holds, which were posted first. Every receive
 * completes once, cancelled, 1..POSTED+1 in order, when the QP is
 * closed. */
static void t_receive_after_local_error_waits_for_held(void)
{
    struct rig r;
    REQUIRE(rig_up(&r, 1));
    /* Two signalled Sends into an initiator CQ of depth 1: the second
     * overflows it. */
    for (int i = 0; i < 2; i++)
        CHECK_EQ(r.qp->Dispatch->NdkSend(r.qp, (void *)(uintptr_t)(100 + i), NULL, 0, 0), STATUS_SUCCESS);
    CHECK_EQ(g_h.local_errors, 1u);
    CHECK_EQ(r.qp->Dispatch->NdkReceive(r.qp, (void *)(uintptr_t)(POSTED + 1), NULL, 0), STATUS_SUCCESS);
    nt_close(r.qp);
    r.qp = NULL;
    CHECK_EQ(g_h.detaches, 1u);
    expect_cancelled_in_order(r.rcq, POSTED + 1);
    rig_down(&r);
}

int main(void)
{
    RUN(t_close_cancels_held_receives_first);
    RUN(t_flush_cancels_held_receives_first);
    RUN(t_receive_after_local_error_waits_for_held);
    return tl_finish();
}
