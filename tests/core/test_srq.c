/* Shared receive queues, white box: SRQs are created, posted to and modified
 * through the public dispatch; receives are taken with ndk_srq_take as the
 * data path would. Contract: cqsrq.h; NdkCreateSrq, NdkModifySrq,
 * NdkSrqReceive, NdkSrqNotificationCallback; rules C7 and W2 (docs/rules.md).
 *
 * "No notification" is checked with a barrier: callbacks of one engine run
 * one at a time in queue order, so once a barrier CQ's notification (queued
 * last) has run, every earlier one has run too; the adapter has one engine. */
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "one_engine.h"

static NDK_ADAPTER *g_ad;
static NDK_ADAPTER_INFO g_info;
static NDK_PD *g_pd;
/* Receive SGEs are checked against registered memory when posted: one
 * registration covers every address these tests use. Nothing is placed, so
 * the range need not be backed by pages the test owns. */
#define REG_BASE ((uintptr_t)0x100000000ull)
#define REG_LEN ((SIZE_T)1 << 34)
static NDK_MR *g_mr;
static UINT32 g_tok;

/* ---- barrier ---- */

static struct barrier g_barrier;

static void flush(void)
{
    barrier_flush(&g_barrier);
}

/* ---- an SRQ and its notifications ---- */

struct tsrq {
    NDK_SRQ *srq;
    struct ndk_srq_impl *impl;
    tl_event ev;
    NTSTATUS last;
    void (*inside)(struct tsrq *t);
    void *user;
};

static void tsrq_notify(PVOID ctx, NTSTATUS st)
{
    struct tsrq *t = ctx;
    t->last = st;
    if (t->inside)
        t->inside(t);
    tl_event_signal(&t->ev);
}

static NTSTATUS tsrq_open(struct tsrq *t, ULONG depth, ULONG sge, ULONG threshold, bool with_cb)
{
    memset(t, 0, sizeof *t);
    tl_event_init(&t->ev);
    NTSTATUS st = g_pd->Dispatch->NdkCreateSrq(g_pd, depth, sge, threshold,
                                               with_cb ? tsrq_notify : NULL, t, NULL, NULL, NULL,
                                               &t->srq);
    if (st == STATUS_SUCCESS)
        t->impl = container_of(ndk_obj_from_pub(t->srq, NdkObjectTypeSrq), struct ndk_srq_impl, obj);
    return st;
}

static void tsrq_close(struct tsrq *t)
{
    struct close_rec c = {0};
    tl_event_init(&c.ev);
    NTSTATUS st = t->srq->Dispatch->NdkCloseSrq(&t->srq->Header, close_done, &c);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    tl_event_destroy(&c.ev);
    tl_event_destroy(&t->ev);
}

static NTSTATUS post(struct tsrq *t, uintptr_t ctx, ULONG nsge, ULONG len)
{
    NDK_SGE sge[NDK_MAX_SGE + 1];
    memset(sge, 0, sizeof sge);
    for (ULONG i = 0; i < nsge && i <= NDK_MAX_SGE; i++) {
        sge[i].VirtualAddress = (void *)(REG_BASE + ctx * 0x1000 + i * 0x100);
        sge[i].Length = len;
        sge[i].MemoryRegionToken = g_tok;
    }
    return t->srq->Dispatch->NdkSrqReceive(t->srq, (void *)ctx, sge, nsge);
}

static NTSTATUS modify(struct tsrq *t, ULONG depth, ULONG threshold)
{
    return t->srq->Dispatch->NdkModifySrq(t->srq, depth, threshold, NULL, NULL);
}

/* Takes one receive and checks it is the one posted with ctx. */
static bool take_expect(struct tsrq *t, uintptr_t ctx)
{
    struct ndk_rwqe w;
    memset(&w, 0, sizeof w);
    if (!ndk_srq_take(t->impl, &w))
        return false;
    return (uintptr_t)w.ctx == ctx;
}

/* ------------------------------------------------------------------------ */

static void create_limits(void)
{
    CHECK(g_info.MaxSrqDepth > 0);
    NDK_SRQ *srq = NULL;
    const NDK_PD_DISPATCH *d = g_pd->Dispatch;
    CHECK_EQ(d->NdkCreateSrq(g_pd, 0, 1, 0, NULL, NULL, NULL, NULL, NULL, &srq), STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkCreateSrq(g_pd, g_info.MaxSrqDepth + 1, 1, 0, NULL, NULL, NULL, NULL, NULL, &srq),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkCreateSrq(g_pd, 4, g_info.MaxReceiveRequestSge + 1, 0, NULL, NULL, NULL, NULL, NULL,
                             &srq),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkCreateSrq(NULL, 4, 1, 0, NULL, NULL, NULL, NULL, NULL, &srq), STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkCreateSrq(g_pd, 4, 1, 0, NULL, NULL, NULL, NULL, NULL, NULL), STATUS_INVALID_PARAMETER);
    CHECK(srq == NULL);

    struct tsrq t;
    REQUIRE(tsrq_open(&t, g_info.MaxSrqDepth, g_info.MaxReceiveRequestSge, 0, true) == STATUS_SUCCESS);
    CHECK_EQ(t.srq->Header.ObjectType, NdkObjectTypeSrq);
    CHECK_EQ(t.impl->depth, g_info.MaxSrqDepth);
    CHECK_EQ(t.impl->max_sge, g_info.MaxReceiveRequestSge);
    CHECK(!t.impl->armed);
    CHECK(t.srq->Dispatch->NdkModifySrq != NULL && t.srq->Dispatch->NdkSrqReceive != NULL);
    tsrq_close(&t);

    /* A non-zero threshold arms at creation, without firing on the empty SRQ. */
    REQUIRE(tsrq_open(&t, 8, 1, 3, true) == STATUS_SUCCESS);
    CHECK(t.impl->armed);
    CHECK_EQ(t.impl->threshold, 3);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    tsrq_close(&t);
}

static void pd_is_antecedent(void)
{
    NDK_PD *pd = NULL;
    REQUIRE(g_ad->Dispatch->NdkCreatePd(g_ad, NULL, NULL, &pd) == STATUS_SUCCESS);
    NDK_SRQ *srq = NULL;
    REQUIRE(pd->Dispatch->NdkCreateSrq(pd, 4, 1, 0, NULL, NULL, NULL, NULL, NULL, &srq) == STATUS_SUCCESS);
    struct close_rec c = {0};
    tl_event_init(&c.ev);
    CHECK_EQ(pd->Dispatch->NdkClosePd(&pd->Header, close_done, &c), STATUS_PENDING);
    flush();
    CHECK_EQ(tl_event_count(&c.ev), 0);
    CHECK_EQ(srq->Dispatch->NdkCloseSrq(&srq->Header, NULL, NULL), STATUS_SUCCESS);
    CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    tl_event_destroy(&c.ev);
}

static void receive_limits(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 3, 2, 0, true) == STATUS_SUCCESS);
    CHECK_EQ(post(&t, 1, 3, 8), STATUS_INVALID_PARAMETER); /* more SGEs than the SRQ's max */
    CHECK_EQ(t.srq->Dispatch->NdkSrqReceive(t.srq, NULL, NULL, 1), STATUS_INVALID_PARAMETER);
    /* A total that a 32-bit BytesTransferred cannot express. */
    NDK_SGE big[2];
    memset(big, 0, sizeof big);
    big[0].Length = 0x80000000u;
    big[1].Length = 0x80000000u;
    big[0].VirtualAddress = (void *)REG_BASE;
    big[1].VirtualAddress = (void *)(REG_BASE + 0x80000000u);
    big[0].MemoryRegionToken = big[1].MemoryRegionToken = g_tok;
    CHECK_EQ(t.srq->Dispatch->NdkSrqReceive(t.srq, NULL, big, 2), STATUS_INVALID_PARAMETER);
    CHECK_EQ(t.impl->count, 0);
    /* Exactly 2^32-1 is fine; so is an empty SGE list. */
    big[1].Length = 0x7FFFFFFFu;
    CHECK_EQ(t.srq->Dispatch->NdkSrqReceive(t.srq, (void *)1, big, 2), STATUS_SUCCESS);
    CHECK_EQ(t.srq->Dispatch->NdkSrqReceive(t.srq, (void *)2, NULL, 0), STATUS_SUCCESS);
    CHECK_EQ(post(&t, 3, 2, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&t, 4, 1, 8), STATUS_INSUFFICIENT_RESOURCES); /* full */
    CHECK_EQ(t.impl->count, 3);

    struct ndk_rwqe w;
    REQUIRE(ndk_srq_take(t.impl, &w));
    CHECK_EQ((uintptr_t)w.ctx, 1);
    CHECK_EQ(w.nsge, 2);
    CHECK_EQ(w.total, 0xFFFFFFFFu);
    REQUIRE(ndk_srq_take(t.impl, &w));
    CHECK_EQ((uintptr_t)w.ctx, 2);
    CHECK_EQ(w.nsge, 0);
    CHECK_EQ(w.total, 0);
    /* Room again after a take. */
    CHECK_EQ(post(&t, 4, 1, 8), STATUS_SUCCESS);
    tsrq_close(&t);
}

static void take_order(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 5, 4, 0, true) == STATUS_SUCCESS);
    struct ndk_rwqe w;
    CHECK(!ndk_srq_take(t.impl, &w)); /* empty */

    /* The SGEs are copied at post time: changing the caller's array later
     * changes nothing. */
    NDK_SGE sge[3];
    for (int i = 0; i < 3; i++) {
        sge[i].VirtualAddress = (void *)(REG_BASE + 0x10000 + (uintptr_t)i);
        sge[i].Length = 100u + (ULONG)i;
        sge[i].MemoryRegionToken = g_tok;
    }
    CHECK_EQ(t.srq->Dispatch->NdkSrqReceive(t.srq, (void *)0x55, sge, 3), STATUS_SUCCESS);
    memset(sge, 0xEE, sizeof sge);
    REQUIRE(ndk_srq_take(t.impl, &w));
    CHECK_EQ((uintptr_t)w.ctx, 0x55);
    CHECK_EQ(w.nsge, 3);
    CHECK_EQ(w.total, 303);
    for (ULONG i = 0; i < 3; i++) {
        CHECK_EQ((uintptr_t)w.sge[i].VirtualAddress, REG_BASE + 0x10000 + i);
        CHECK_EQ(w.sge[i].Length, 100 + i);
        CHECK_EQ(w.sge[i].MemoryRegionToken, g_tok);
    }

    /* FIFO across many wraps of the ring. */
    uintptr_t in = 1, out = 1;
    for (int round = 0; round < 50; round++) {
        while (t.impl->count < 5) {
            CHECK_EQ(post(&t, in, 1 + (ULONG)(in % 4), 16), STATUS_SUCCESS);
            in++;
        }
        for (int k = 0; k < 3; k++) {
            memset(&w, 0, sizeof w);
            REQUIRE(ndk_srq_take(t.impl, &w));
            CHECK_EQ((uintptr_t)w.ctx, out);
            CHECK_EQ(w.nsge, 1 + (ULONG)(out % 4));
            CHECK_EQ(w.total, 16 * w.nsge);
            CHECK_EQ((uintptr_t)w.sge[0].VirtualAddress, REG_BASE + out * 0x1000);
            out++;
        }
    }
    while (ndk_srq_take(t.impl, &w))
        CHECK_EQ((uintptr_t)w.ctx, out++);
    CHECK_EQ(in, out);
    tsrq_close(&t);
}

static void threshold_from_create(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 8, 1, 2, true) == STATUS_SUCCESS);
    for (uintptr_t i = 1; i <= 3; i++)
        CHECK_EQ(post(&t, i, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&t, 1)); /* 2 left: not below 2 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(take_expect(&t, 2)); /* 1 left: below */
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_SUCCESS);
    CHECK(!t.impl->armed);
    CHECK(take_expect(&t, 3)); /* disarmed after firing */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    tsrq_close(&t);
}

static tl_event g_req_ev;

static void req_done(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
    tl_event_signal(&g_req_ev);
}

static void modify_threshold_rules(void)
{
    tl_event_init(&g_req_ev);
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 16, 1, 0, true) == STATUS_SUCCESS);
    uintptr_t in = 1, out = 1;
    for (int i = 0; i < 5; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS);

    /* Threshold 0 on a disarmed SRQ keeps it disarmed. */
    CHECK_EQ(modify(&t, 0, 0), STATUS_SUCCESS);
    CHECK(!t.impl->armed);
    CHECK(take_expect(&t, out++)); /* 4 */

    /* > 0 arms; fires when the count drops below it, once. */
    CHECK_EQ(t.srq->Dispatch->NdkModifySrq(t.srq, 0, 3, req_done, NULL), STATUS_SUCCESS);
    CHECK(t.impl->armed);
    CHECK(take_expect(&t, out++)); /* 3 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(take_expect(&t, out++)); /* 2 < 3 */
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK(take_expect(&t, out++)); /* 1 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);

    /* After firing, threshold 0 keeps it disarmed (and the threshold). */
    CHECK_EQ(modify(&t, 0, 0), STATUS_SUCCESS);
    CHECK(!t.impl->armed);
    CHECK_EQ(t.impl->threshold, 3);
    CHECK(take_expect(&t, out++)); /* 0 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);

    /* Arming with the count already below: fires at once, once. */
    CHECK_EQ(t.impl->count, 0);
    CHECK_EQ(modify(&t, 0, 1), STATUS_SUCCESS);
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));
    CHECK(!t.impl->armed);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 2);

    /* Armed, then threshold 0: stays armed with the old threshold. */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(modify(&t, 0, 2), STATUS_SUCCESS);
    CHECK_EQ(modify(&t, 0, 0), STATUS_SUCCESS);
    CHECK(t.impl->armed);
    CHECK_EQ(t.impl->threshold, 2);
    CHECK(take_expect(&t, out++)); /* 3 */
    CHECK(take_expect(&t, out++)); /* 2 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 2);
    CHECK(take_expect(&t, out++)); /* 1 < 2 */
    CHECK(tl_event_wait(&t.ev, 3, WAIT_MS));

    /* A new non-zero threshold replaces the old one. */
    for (int i = 0; i < 4; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS); /* 5 queued */
    CHECK_EQ(modify(&t, 0, 2), STATUS_SUCCESS);
    CHECK_EQ(modify(&t, 0, 4), STATUS_SUCCESS);
    CHECK_EQ(t.impl->threshold, 4);
    CHECK(take_expect(&t, out++)); /* 4 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 3);
    CHECK(take_expect(&t, out++)); /* 3 < 4 */
    CHECK(tl_event_wait(&t.ev, 4, WAIT_MS));

    /* Completed inline: the request completion is never called (C7). */
    flush();
    CHECK_EQ(tl_event_count(&g_req_ev), 0);
    CHECK_EQ(tl_event_count(&t.ev), 4);
    tsrq_close(&t);
    tl_event_destroy(&g_req_ev);
}

static void modify_depth_rules(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 4, 1, 0, true) == STATUS_SUCCESS);
    uintptr_t in = 1, out = 1;
    /* Wrap the ring before resizing it. */
    for (int i = 0; i < 3; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&t, out++));
    CHECK(take_expect(&t, out++));
    for (int i = 0; i < 3; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&t, in, 1, 8), STATUS_INSUFFICIENT_RESOURCES);

    /* Depth 0 keeps the depth. */
    CHECK_EQ(modify(&t, 0, 0), STATUS_SUCCESS);
    CHECK_EQ(t.impl->depth, 4);
    CHECK_EQ(post(&t, in, 1, 8), STATUS_INSUFFICIENT_RESOURCES);

    /* Beyond the adapter limit, or below the queued count: refused, and the
     * threshold given with it does not take effect either. */
    CHECK_EQ(modify(&t, g_info.MaxSrqDepth + 1, 100), STATUS_INVALID_PARAMETER);
    CHECK_EQ(modify(&t, 3, 100), STATUS_INVALID_PARAMETER);
    CHECK(!t.impl->armed);
    CHECK_EQ(t.impl->depth, 4);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);

    /* Grow: entries kept in order, room for more. */
    CHECK_EQ(modify(&t, 9, 0), STATUS_SUCCESS);
    CHECK_EQ(t.impl->depth, 9);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(post(&t, in++, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&t, in, 1, 8), STATUS_INSUFFICIENT_RESOURCES);
    CHECK(take_expect(&t, out++));
    CHECK(take_expect(&t, out++));
    CHECK(take_expect(&t, out++));

    /* Shrink to exactly the count. */
    CHECK_EQ(t.impl->count, 6);
    CHECK_EQ(modify(&t, 6, 0), STATUS_SUCCESS);
    CHECK_EQ(post(&t, in, 1, 8), STATUS_INSUFFICIENT_RESOURCES);
    /* Depth and threshold together: both apply. */
    CHECK_EQ(modify(&t, 7, 5), STATUS_SUCCESS);
    CHECK_EQ(t.impl->depth, 7);
    CHECK(t.impl->armed);
    CHECK(take_expect(&t, out++)); /* 5: not below 5 */
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(take_expect(&t, out++)); /* 4 < 5 */
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    while (take_expect(&t, out))
        out++;
    CHECK_EQ(in, out);
    tsrq_close(&t);
}

static void no_callback_given(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 4, 1, 2, false) == STATUS_SUCCESS);
    CHECK_EQ(post(&t, 1, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&t, 2, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&t, 1));
    CHECK(!t.impl->armed); /* spent, though there is nobody to tell */
    CHECK_EQ(modify(&t, 0, 3), STATUS_SUCCESS);
    flush();
    CHECK(take_expect(&t, 2));
    CHECK_EQ(tl_event_count(&t.ev), 0);
    tsrq_close(&t);
}

/* ---- re-entrancy: post and re-arm from inside the callback ---- */

static void rearm_inside(struct tsrq *t)
{
    unsigned *calls = t->user;
    (*calls)++;
    if (*calls == 1) {
        /* Re-arm with the count still below: 5.8.1 wants a notification at
         * once, and it must follow this one, not overlap it (serialized). */
        CHECK_EQ(modify(t, 0, 3), STATUS_SUCCESS);
    } else if (*calls == 2) {
        /* Refill above the threshold from inside the callback and re-arm:
         * nothing more now. */
        CHECK_EQ(post(t, 101, 1, 8), STATUS_SUCCESS);
        CHECK_EQ(post(t, 102, 1, 8), STATUS_SUCCESS);
        CHECK_EQ(modify(t, 0, 3), STATUS_SUCCESS);
    }
}

static void reentrant_callback(void)
{
    unsigned calls = 0;
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 8, 1, 3, true) == STATUS_SUCCESS);
    t.inside = rearm_inside;
    t.user = &calls;
    for (uintptr_t i = 1; i <= 4; i++)
        CHECK_EQ(post(&t, i, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&t, 1)); /* 3: not below */
    CHECK(take_expect(&t, 2)); /* 2 < 3: fires */
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 2);
    CHECK_EQ(calls, 2);
    CHECK_EQ(t.impl->count, 4);
    CHECK(t.impl->armed);
    /* The arm made in the second callback still works. */
    CHECK(take_expect(&t, 3));   /* 3 */
    CHECK(take_expect(&t, 4));   /* 2 < 3 */
    CHECK(tl_event_wait(&t.ev, 3, WAIT_MS));
    CHECK(take_expect(&t, 101));
    CHECK(take_expect(&t, 102));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 3);
    CHECK_EQ(calls, 3);
    tsrq_close(&t);
}

/* ---- close while the notification is queued ---- */

static tl_event g_blk_in, g_blk_go;
static unsigned g_b_order;

static void block_inside(struct tsrq *t)
{
    (void)t;
    tl_event_signal(&g_blk_in);
    tl_event_wait(&g_blk_go, 1, WAIT_MS);
}

static void order_inside(struct tsrq *t)
{
    (void)t;
    g_b_order = __atomic_add_fetch(&g_seq, 1, __ATOMIC_ACQ_REL);
}

static void close_with_queued_notification(void)
{
    tl_event_init(&g_blk_in);
    tl_event_init(&g_blk_go);
    struct tsrq a, b;
    REQUIRE(tsrq_open(&a, 4, 1, 1, true) == STATUS_SUCCESS);
    REQUIRE(tsrq_open(&b, 4, 1, 1, true) == STATUS_SUCCESS);
    a.inside = block_inside;
    b.inside = order_inside;
    CHECK_EQ(post(&a, 1, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&b, 1, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&a, 1));
    REQUIRE(tl_event_wait(&g_blk_in, 1, WAIT_MS));
    CHECK(take_expect(&b, 1)); /* queued behind a's running callback */
    CHECK(b.impl->notify_cb.queued);

    struct close_rec c = {0};
    tl_event_init(&c.ev);
    CHECK_EQ(b.srq->Dispatch->NdkCloseSrq(&b.srq->Header, close_done, &c), STATUS_PENDING);
    tl_event_signal(&g_blk_go);
    CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    CHECK_EQ(tl_event_count(&b.ev), 1);
    CHECK(g_b_order != 0 && g_b_order < c.order);
    tl_event_destroy(&c.ev);
    tl_event_destroy(&b.ev);
    tsrq_close(&a);
    tl_event_destroy(&g_blk_in);
    tl_event_destroy(&g_blk_go);
}

/* The threshold met while the previous notification's callback still
 * runs, and the count back above it before that callback returns: the
 * notification is owed all the same (the count did drop below the armed
 * threshold), once. */
static void threshold_met_then_refilled_during_callback(void)
{
    tl_event_init(&g_blk_in);
    tl_event_init(&g_blk_go);
    struct tsrq a;
    REQUIRE(tsrq_open(&a, 4, 1, 1, true) == STATUS_SUCCESS);
    a.inside = block_inside;
    CHECK_EQ(post(&a, 1, 1, 8), STATUS_SUCCESS);
    CHECK(take_expect(&a, 1));
    REQUIRE(tl_event_wait(&g_blk_in, 1, WAIT_MS));
    /* Inside the first callback: arm at 2 with 2 posted, drop to 1, refill. */
    CHECK_EQ(post(&a, 2, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(post(&a, 3, 1, 8), STATUS_SUCCESS);
    CHECK_EQ(modify(&a, 4, 2), STATUS_SUCCESS);
    CHECK(take_expect(&a, 2));
    CHECK_EQ(post(&a, 4, 1, 8), STATUS_SUCCESS);
    tl_event_signal(&g_blk_go);
    CHECK(tl_event_wait(&a.ev, 2, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&a.ev), 2);
    tsrq_close(&a);
    tl_event_destroy(&g_blk_in);
    tl_event_destroy(&g_blk_go);
}

/* ---- a taker thread against the poster ---- */

#define NRECV 100000u

struct taker {
    struct ndk_srq_impl *srq;
    sem_t *posted, *room;
    unsigned bad, got;
};

static void *taker_main(void *arg)
{
    struct taker *k = arg;
    for (uintptr_t want = 1; want <= NRECV; want++) {
        while (sem_wait(k->posted) != 0)
            ;
        struct ndk_rwqe w;
        if (!ndk_srq_take(k->srq, &w) || (uintptr_t)w.ctx != want || w.nsge != 1 || w.total != 8)
            k->bad++;
        else
            k->got++;
        sem_post(k->room);
    }
    return NULL;
}

static void concurrent_take(void)
{
    struct tsrq t;
    REQUIRE(tsrq_open(&t, 64, 1, 0, true) == STATUS_SUCCESS);
    sem_t posted, room;
    sem_init(&posted, 0, 0);
    sem_init(&room, 0, 64);
    struct taker k = {.srq = t.impl, .posted = &posted, .room = &room};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, taker_main, &k) == 0);
    unsigned refused = 0;
    for (uintptr_t i = 1; i <= NRECV; i++) {
        while (sem_wait(&room) != 0)
            ;
        if (post(&t, i, 1, 8) != STATUS_SUCCESS)
            refused++;
        sem_post(&posted);
    }
    pthread_join(th, NULL);
    CHECK_EQ(refused, 0);
    CHECK_EQ(k.bad, 0);
    CHECK_EQ(k.got, NRECV);
    CHECK_EQ(t.impl->count, 0);
    sem_destroy(&posted);
    sem_destroy(&room);
    tsrq_close(&t);
}

int main(void)
{
    /* The barrier holds only among objects of one engine: one engine. */
    if (!open_lo_one_engine(&g_ad, &g_info))
        return 1;
    if (g_ad->Dispatch->NdkCreatePd(g_ad, NULL, NULL, &g_pd) != STATUS_SUCCESS ||
        barrier_open(&g_barrier, g_ad) != STATUS_SUCCESS) {
        fprintf(stderr, "adapter setup failed\n");
        return 1;
    }
    MDL mdl = {.StartVa = (void *)REG_BASE, .ByteCount = (ULONG)0};
    mdl.ByteCount = 0xFFFFFFFFu;
    MDL mdl2 = {.StartVa = (void *)(REG_BASE + 0xFFFFFFFFu), .ByteCount = 0xFFFFFFFFu};
    MDL mdl3 = {.StartVa = (void *)(REG_BASE + 2 * (uintptr_t)0xFFFFFFFFu), .ByteCount = 0xFFFFFFFFu};
    MDL mdl4 = {.StartVa = (void *)(REG_BASE + 3 * (uintptr_t)0xFFFFFFFFu), .ByteCount = 0xFFFFFFFFu};
    MDL mdl5 = {.StartVa = (void *)(REG_BASE + 4 * (uintptr_t)0xFFFFFFFFu), .ByteCount = 16};
    mdl.Next = &mdl2, mdl2.Next = &mdl3, mdl3.Next = &mdl4, mdl4.Next = &mdl5;
    if (g_pd->Dispatch->NdkCreateMr(g_pd, FALSE, NULL, NULL, &g_mr) != STATUS_SUCCESS ||
        g_mr->Dispatch->NdkRegisterMr(g_mr, &mdl, 4 * (SIZE_T)0xFFFFFFFFu + 16, NDK_MR_FLAG_ALLOW_LOCAL_WRITE,
                                      NULL, NULL) != STATUS_SUCCESS) {
        fprintf(stderr, "registration failed\n");
        return 1;
    }
    g_tok = g_mr->Dispatch->NdkGetLocalTokenFromMr(g_mr);

    RUN(create_limits);
    RUN(pd_is_antecedent);
    RUN(receive_limits);
    RUN(take_order);
    RUN(threshold_from_create);
    RUN(modify_threshold_rules);
    RUN(modify_depth_rules);
    RUN(no_callback_given);
    RUN(reentrant_callback);
    RUN(close_with_queued_notification);
    RUN(threshold_met_then_refilled_during_callback);
    RUN(concurrent_take);

    g_mr->Dispatch->NdkCloseMr(&g_mr->Header, NULL, NULL);
    ndk_close_adapter(g_ad);
    tl_event_destroy(&g_barrier.ev);
    return tl_finish();
}
