/* Completion queues, white box: CQs are created and drained through the
 * public dispatch; completions are pushed with ndk_cq_push as the data path
 * would. Contract: cqsrq.h; NdkCreateCq, NdkResizeCq,
 * NdkArmCq, NdkGetCqResults(Ex), NdkCqNotificationCallback, NDK_RESULT(_EX);
 * rules C1-C7 (docs/rules.md).
 *
 * "Nothing more arrives" is checked with a barrier, not a timeout: the
 * adapter runs callbacks one at a time in queue order, so once a barrier
 * CQ's notification (queued last) has run, every earlier one has run too. */
#include <sched.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>

#include "one_engine.h"

static NDK_ADAPTER *g_ad;
static NDK_ADAPTER_INFO g_info;

/* A consumer's CQ and the notifications it received. */
struct tcq {
    NDK_CQ *cq;
    struct ndk_cq_impl *impl;
    tl_event ev;       /* one signal per notification */
    NTSTATUS last;     /* status of the latest notification */
    void (*inside)(struct tcq *t, NTSTATUS st); /* runs inside the callback */
    void *user;
};

static void tcq_notify(PVOID ctx, NTSTATUS st)
{
    struct tcq *t = ctx;
    t->last = st;
    if (t->inside)
        t->inside(t, st);
    tl_event_signal(&t->ev);
}

static NTSTATUS tcq_open(struct tcq *t, ULONG depth)
{
    memset(t, 0, sizeof *t);
    tl_event_init(&t->ev);
    NTSTATUS st = g_ad->Dispatch->NdkCreateCq(g_ad, depth, tcq_notify, t, NULL, NULL, NULL, &t->cq);
    if (st == STATUS_SUCCESS)
        t->impl = container_of(ndk_obj_from_pub(t->cq, NdkObjectTypeCq), struct ndk_cq_impl, obj);
    return st;
}

/* Closes and waits for the completion if the close pended. */
static void close_cq(NDK_CQ *cq)
{
    struct close_rec c = {0};
    tl_event_init(&c.ev);
    NTSTATUS st = cq->Dispatch->NdkCloseCq(&cq->Header, close_done, &c);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    else
        CHECK_EQ(tl_event_count(&c.ev), 0);
    tl_event_destroy(&c.ev);
}

static void tcq_close(struct tcq *t)
{
    close_cq(t->cq);
    tl_event_destroy(&t->ev);
}

static struct ndk_cqe mk(NTSTATUS st, NDK_OPERATION_TYPE type, uintptr_t req, bool solicited)
{
    struct ndk_cqe e;
    memset(&e, 0, sizeof e);
    e.status = st;
    e.type = type;
    e.qp_ctx = (void *)(uintptr_t)0xC0DE;
    e.req_ctx = (void *)req;
    e.solicited = solicited;
    return e;
}

static bool push(struct tcq *t, NTSTATUS st, NDK_OPERATION_TYPE type, uintptr_t req, bool solicited)
{
    struct ndk_cqe e = mk(st, type, req, solicited);
    return ndk_cq_push(t->impl, &e);
}

static void arm(struct tcq *t, ULONG type)
{
    t->cq->Dispatch->NdkArmCq(t->cq, type);
}

static ULONG get(struct tcq *t, NDK_RESULT *r, ULONG n)
{
    return t->cq->Dispatch->NdkGetCqResults(t->cq, r, n);
}

static ULONG get_ex(struct tcq *t, NDK_RESULT_EX *r, ULONG n)
{
    return t->cq->Dispatch->NdkGetCqResultsEx(t->cq, r, n);
}

static ULONG drain_all(struct tcq *t)
{
    NDK_RESULT r[16];
    ULONG total = 0, n;
    while ((n = get(t, r, 16)) > 0)
        total += n;
    return total;
}

static struct barrier g_barrier;

static void flush(void)
{
    barrier_flush(&g_barrier);
}

/* ------------------------------------------------------------------------ */

static void create_and_limits(void)
{
    NDK_CQ *cq = NULL;
    CHECK_EQ(g_ad->Dispatch->NdkCreateCq(g_ad, 0, tcq_notify, NULL, NULL, NULL, NULL, &cq),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(g_ad->Dispatch->NdkCreateCq(g_ad, g_info.MaxCqDepth + 1, tcq_notify, NULL, NULL, NULL,
                                         NULL, &cq),
             STATUS_INVALID_PARAMETER);
    CHECK(cq == NULL);

    struct tcq t;
    REQUIRE(tcq_open(&t, g_info.MaxCqDepth) == STATUS_SUCCESS);
    CHECK_EQ(t.cq->Header.ObjectType, NdkObjectTypeCq);
    CHECK_EQ(t.impl->depth, g_info.MaxCqDepth);
    CHECK_EQ(t.impl->armed, -1);
    tcq_close(&t);

    CHECK(g_info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED);
    CHECK(g_info.MaxCqDepth >= 1024);
}

static void results_fifo_and_fields(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 16) == STATUS_SUCCESS);
    struct ndk_cqe in[6];
    in[0] = mk(STATUS_SUCCESS, NdkOperationTypeReceive, 0x100, false);
    in[0].bytes = 1234;
    in[0].provider_error = 0x55; /* must not leak out with a success */
    in[1] = mk(STATUS_CANCELLED, NdkOperationTypeSend, 0x101, false);
    in[1].provider_error = 0x0203;
    in[2] = mk(STATUS_SUCCESS, NdkOperationTypeReceiveAndInvalidate, 0x102, false);
    in[2].bytes = 7;
    in[2].type_specific = 0xABCD1201;
    in[3] = mk(STATUS_SUCCESS, NdkOperationTypeRead, 0x103, false);
    in[4] = mk(STATUS_SUCCESS, NdkOperationTypeWrite, 0x104, false);
    in[5] = mk(STATUS_SUCCESS, NdkOperationTypeBind, 0x105, false);
    in[5].qp_ctx = (void *)(uintptr_t)0xBEEF;
    for (int i = 0; i < 6; i++)
        CHECK(ndk_cq_push(t.impl, &in[i]));

    /* nResults 0 removes nothing. */
    NDK_RESULT_EX rx[8];
    CHECK_EQ(get_ex(&t, rx, 0), 0);

    /* The Ex form for the first three, in order, every field. */
    memset(rx, 0xA5, sizeof rx);
    REQUIRE(get_ex(&t, rx, 3) == 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(rx[i].Status, in[i].status);
        CHECK(rx[i].QPContext == in[i].qp_ctx);
        CHECK(rx[i].RequestContext == in[i].req_ctx);
        CHECK_EQ(rx[i].Type, in[i].type);
    }
    CHECK_EQ(rx[0].BytesTransferred, 1234);
    CHECK_EQ(rx[0].ProviderErrorCode, 0);
    CHECK_EQ(rx[1].ProviderErrorCode, 0x0203);
    CHECK_EQ(rx[2].BytesTransferred, 7);
    CHECK_EQ(rx[2].ProviderErrorCode, 0);
    CHECK_EQ(rx[2].TypeSpecificCompletionOutput, 0xABCD1201);
    /* Nothing beyond the returned count is written. */
    NDK_RESULT_EX untouched;
    memset(&untouched, 0xA5, sizeof untouched);
    CHECK(memcmp(&rx[3], &untouched, sizeof untouched) == 0);

    /* The plain form for the rest; a larger array than needed. */
    NDK_RESULT r[8];
    memset(r, 0xA5, sizeof r);
    REQUIRE(get(&t, r, 8) == 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(r[i].Status, STATUS_SUCCESS);
        CHECK(r[i].QPContext == in[3 + i].qp_ctx);
        CHECK(r[i].RequestContext == in[3 + i].req_ctx);
    }
    CHECK_EQ(get(&t, r, 8), 0);
    CHECK_EQ(get_ex(&t, rx, 8), 0);

    /* C2: a ReceiveAndInvalidate is retrievable through the plain call. */
    CHECK(ndk_cq_push(t.impl, &in[2]));
    REQUIRE(get(&t, r, 1) == 1);
    CHECK(r[0].RequestContext == in[2].req_ctx);
    CHECK_EQ(r[0].BytesTransferred, 7);

    /* Interleaved push/get around the ring's end keeps FIFO order. */
    uintptr_t next_in = 1000, next_out = 1000;
    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < 11; k++)
            CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, next_in++, false));
        ULONG n = get(&t, r, 7);
        CHECK_EQ(n, 7);
        for (ULONG i = 0; i < n; i++)
            CHECK_EQ((uintptr_t)r[i].RequestContext, next_out++);
        n = get_ex(&t, rx, 4);
        CHECK_EQ(n, 4);
        for (ULONG i = 0; i < n; i++)
            CHECK_EQ((uintptr_t)rx[i].RequestContext, next_out++);
    }
    CHECK_EQ(next_in, next_out);
    CHECK_EQ(get(&t, r, 8), 0);
    tcq_close(&t);
}

static void no_callback_without_arm(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(push(&t, STATUS_CANCELLED, NdkOperationTypeSend, 2, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 3, true));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    tcq_close(&t);
}

static void one_callback_per_arm(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_ANY);
    flush(); /* an empty CQ satisfies nothing */
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_SUCCESS);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 3, true));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    /* A second arm fires at once: 2 and 3 arrived after the first callback
     * was queued and are still in the CQ (C4). */
    arm(&t, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 2);
    CHECK_EQ(drain_all(&t), 3);
    tcq_close(&t);
}

static void arm_with_queued_completions(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    /* C4 "must": a completion newer than the last callback (there was none). */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    arm(&t, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));

    /* C4 "may": re-armed without draining and nothing new -> libndk waits
     * for a new completion rather than calling again. */
    arm(&t, NDK_CQ_NOTIFY_ANY);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));

    /* A completion newer than the last callback, the older ones drained. */
    CHECK_EQ(drain_all(&t), 2);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 3, false));
    arm(&t, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&t.ev, 3, WAIT_MS));

    /* Newer completions that were drained before the arm do not count:
     * the CQ holds nothing. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 4, false));
    CHECK_EQ(drain_all(&t), 2);
    arm(&t, NDK_CQ_NOTIFY_ANY);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 3);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 5, false));
    CHECK(tl_event_wait(&t.ev, 4, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 4);
    tcq_close(&t);
}

/* One cell of the merge table: arm a then b, then feed completions of
 * increasing "strength" and see which one fires. */
static void merge_cell(ULONG a, ULONG b, ULONG want)
{
    int before = tl_failures;
    struct tcq t;
    REQUIRE(tcq_open(&t, 4) == STATUS_SUCCESS);
    arm(&t, a);
    arm(&t, b);
    CHECK_EQ(t.impl->armed, (int)want);
    /* An ordinary successful completion: only ANY. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), want == NDK_CQ_NOTIFY_ANY ? 1 : 0);
    if (want != NDK_CQ_NOTIFY_ANY) {
        /* A solicited receive: SOLICITED. */
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 2, true));
        flush();
        CHECK_EQ(tl_event_count(&t.ev), want == NDK_CQ_NOTIFY_SOLICITED ? 1 : 0);
    }
    if (want == NDK_CQ_NOTIFY_ERRORS) {
        /* An error completion is not a CQ error. */
        CHECK(push(&t, STATUS_CANCELLED, NdkOperationTypeReceive, 3, false));
        flush();
        CHECK_EQ(tl_event_count(&t.ev), 0);
        /* Overflow: the CQ error. */
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 4, false));
        CHECK(!push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 5, false));
        CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
        CHECK_EQ(t.last, STATUS_BUFFER_OVERFLOW);
    } else {
        CHECK_EQ(t.last, STATUS_SUCCESS);
    }
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    tcq_close(&t);
    if (tl_failures != before)
        fprintf(stderr, "  in merge cell first=%lu second=%lu\n", (unsigned long)a, (unsigned long)b);
}

static void merge_table(void)
{
    const ULONG A = NDK_CQ_NOTIFY_ANY, E = NDK_CQ_NOTIFY_ERRORS, S = NDK_CQ_NOTIFY_SOLICITED;
    /* Rule C6: row = first arm, column = second arm. */
    merge_cell(A, A, A);
    merge_cell(A, E, A);
    merge_cell(A, S, A);
    merge_cell(E, A, A);
    merge_cell(E, E, E);
    merge_cell(E, S, S);
    merge_cell(S, A, A);
    merge_cell(S, E, S);
    merge_cell(S, S, S);
}

static void solicited_rules(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 64) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 2, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeWrite, 3, false));
    /* Only a receive can be solicited; the flag on a send means nothing. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 4, true));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 5, true));
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_SUCCESS);

    /* Any error status satisfies SOLICITED (rule C9). */
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 6, false));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    CHECK(push(&t, STATUS_CANCELLED, NdkOperationTypeSend, 7, false));
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));

    /* So does a solicited ReceiveAndInvalidate. */
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceiveAndInvalidate, 8, true));
    CHECK(tl_event_wait(&t.ev, 3, WAIT_MS));

    /* At arm time only a qualifying newer entry fires at once. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 9, false));
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 3);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 10, true));
    CHECK(tl_event_wait(&t.ev, 4, WAIT_MS));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 11, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 12, true));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 13, false));
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    CHECK(tl_event_wait(&t.ev, 5, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 5);
    CHECK_EQ(drain_all(&t), 13);
    tcq_close(&t);
}

static void errors_arm_only_on_overflow(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 4) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_ERRORS);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(push(&t, STATUS_CANCELLED, NdkOperationTypeSend, 2, false));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeReceive, 3, true));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 4, false));
    CHECK(!ndk_cq_in_error(t.impl));
    CHECK(!push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 5, false));
    CHECK(ndk_cq_in_error(t.impl));
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_BUFFER_OVERFLOW);
    tcq_close(&t);
}

static void overflow(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 4) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_SOLICITED);
    for (uintptr_t i = 1; i <= 4; i++)
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, i, false));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK(!push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 5, false));
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_BUFFER_OVERFLOW);
    CHECK(ndk_cq_in_error(t.impl));

    /* The entries placed before the overflow can still be collected (those
     * requests did complete); nothing from the overflow on is reported. */
    NDK_RESULT r[8];
    REQUIRE(get(&t, r, 8) == 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ((uintptr_t)r[i].RequestContext, (uintptr_t)i + 1);
    CHECK(!push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 6, false));
    CHECK(!push(&t, STATUS_CANCELLED, NdkOperationTypeSend, 7, false));
    CHECK_EQ(get(&t, r, 8), 0);
    NDK_RESULT_EX rx[2];
    CHECK_EQ(get_ex(&t, rx, 2), 0);

    /* The error persists: any later arm reports it at once, once. */
    arm(&t, NDK_CQ_NOTIFY_ERRORS);
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));
    CHECK_EQ(t.last, STATUS_BUFFER_OVERFLOW);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 2);

    /* Overflow with no arm: no callback until one is armed. */
    struct tcq u;
    REQUIRE(tcq_open(&u, 1) == STATUS_SUCCESS);
    CHECK(push(&u, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(!push(&u, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    flush();
    CHECK_EQ(tl_event_count(&u.ev), 0);
    arm(&u, NDK_CQ_NOTIFY_ANY);
    CHECK(tl_event_wait(&u.ev, 1, WAIT_MS));
    CHECK_EQ(u.last, STATUS_BUFFER_OVERFLOW);
    tcq_close(&u);
    tcq_close(&t);
}

static tl_event g_req_ev;

static void req_done(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
    tl_event_signal(&g_req_ev);
}

/* A batch (ndk_cq_push_n, one lock for all) goes in in order and satisfies
 * an arm once; one that does not fit goes in up to the depth and the CQ
 * overflows, as the same entries pushed one by one would. */
static void push_batch(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 4) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_ANY);
    struct ndk_cqe in[6];
    for (uintptr_t i = 0; i < 6; i++)
        in[i] = mk(STATUS_SUCCESS, NdkOperationTypeReceive, i + 1, false);
    CHECK_EQ(ndk_cq_push_n(t.impl, in, 3), 3);
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    CHECK_EQ(t.last, STATUS_SUCCESS);
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 1);
    CHECK_EQ(ndk_cq_push_n(t.impl, in + 3, 3), 1); /* one fits; the next overflows */
    CHECK(ndk_cq_in_error(t.impl));
    CHECK_EQ(ndk_cq_push_n(t.impl, in, 1), 0);
    NDK_RESULT r[8];
    REQUIRE(get(&t, r, 8) == 4);
    for (int i = 0; i < 4; i++)
        CHECK_EQ((uintptr_t)r[i].RequestContext, (uintptr_t)i + 1);
    tcq_close(&t);
}

static void resize(void)
{
    tl_event_init(&g_req_ev);
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    const NDK_CQ_DISPATCH *d = t.cq->Dispatch;
    /* Wrap the ring: head moves to 4, then 6 entries spanning the end. */
    uintptr_t in = 1, out = 1;
    for (int i = 0; i < 6; i++)
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, in++, false));
    NDK_RESULT r[32];
    REQUIRE(get(&t, r, 4) == 4);
    out += 4;
    for (int i = 0; i < 4; i++)
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, in++, false));
    CHECK_EQ(ndk_cq_waiting(t.impl), 6);

    CHECK_EQ(d->NdkResizeCq(t.cq, 0, req_done, NULL), STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkResizeCq(t.cq, g_info.MaxCqDepth + 1, req_done, NULL), STATUS_INVALID_PARAMETER);
    CHECK_EQ(d->NdkResizeCq(t.cq, 5, req_done, NULL), STATUS_INVALID_PARAMETER); /* below count */
    CHECK_EQ(t.impl->depth, 8);

    /* Grow: entries kept, in order, and room for more. */
    CHECK_EQ(d->NdkResizeCq(t.cq, 20, req_done, NULL), STATUS_SUCCESS);
    CHECK_EQ(t.impl->depth, 20);
    for (int i = 0; i < 14; i++)
        CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, in++, false));
    REQUIRE(get(&t, r, 3) == 3);
    for (int i = 0; i < 3; i++)
        CHECK_EQ((uintptr_t)r[i].RequestContext, out++);

    /* Shrink to exactly the count: kept, in order, and now full. */
    CHECK_EQ(ndk_cq_waiting(t.impl), 17);
    CHECK_EQ(d->NdkResizeCq(t.cq, 17, req_done, NULL), STATUS_SUCCESS);
    CHECK(!push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 999, false));
    CHECK(ndk_cq_in_error(t.impl));
    REQUIRE(get(&t, r, 32) == 17);
    for (int i = 0; i < 17; i++)
        CHECK_EQ((uintptr_t)r[i].RequestContext, out++);
    CHECK_EQ(in, out);

    /* Inline success: no request completion is owed (C7). */
    flush();
    CHECK_EQ(tl_event_count(&g_req_ev), 0);
    tcq_close(&t);

    /* Arms survive a resize. */
    REQUIRE(tcq_open(&t, 4) == STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_ANY);
    CHECK_EQ(t.cq->Dispatch->NdkResizeCq(t.cq, 64, NULL, NULL), STATUS_SUCCESS);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(tl_event_wait(&t.ev, 1, WAIT_MS));
    tcq_close(&t);
    tl_event_destroy(&g_req_ev);
}

/* ---- close while a notification is queued ---- */

static tl_event g_blk_in, g_blk_go;

static void blocker_inside(struct tcq *t, NTSTATUS st)
{
    (void)t, (void)st;
    tl_event_signal(&g_blk_in);
    tl_event_wait(&g_blk_go, 1, WAIT_MS);
}

static unsigned g_b_order;

static void record_order(struct tcq *t, NTSTATUS st)
{
    (void)t, (void)st;
    g_b_order = __atomic_add_fetch(&g_seq, 1, __ATOMIC_ACQ_REL);
}

static void close_with_queued_notification(void)
{
    tl_event_init(&g_blk_in);
    tl_event_init(&g_blk_go);
    struct tcq a, b;
    REQUIRE(tcq_open(&a, 4) == STATUS_SUCCESS);
    REQUIRE(tcq_open(&b, 4) == STATUS_SUCCESS);
    a.inside = blocker_inside;
    b.inside = record_order;

    /* Hold the progress thread inside a's callback ... */
    arm(&a, NDK_CQ_NOTIFY_ANY);
    CHECK(push(&a, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    REQUIRE(tl_event_wait(&g_blk_in, 1, WAIT_MS));
    /* ... so b's notification stays queued behind it. */
    arm(&b, NDK_CQ_NOTIFY_ANY);
    CHECK(push(&b, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    CHECK(b.impl->notify_cb.queued);

    struct close_rec c = {0};
    tl_event_init(&c.ev);
    CHECK_EQ(b.cq->Dispatch->NdkCloseCq(&b.cq->Header, close_done, &c), STATUS_PENDING);
    /* Closing disarms: a completion now queues nothing new. */
    CHECK(push(&b, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    CHECK_EQ(tl_event_count(&c.ev), 0);
    tl_event_signal(&g_blk_go);

    CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    CHECK_EQ(tl_event_count(&b.ev), 1);
    CHECK(g_b_order != 0 && g_b_order < c.order);
    flush();
    CHECK_EQ(tl_event_count(&b.ev), 1);
    tl_event_destroy(&c.ev);
    tl_event_destroy(&b.ev);
    tcq_close(&a);
    tl_event_destroy(&g_blk_in);
    tl_event_destroy(&g_blk_go);
}

/* An arm satisfied while the previous callback still runs, whose
 * completion the consumer then takes before that callback returns: the
 * callback is owed all the same (NdkArmCq: "the next completion placed in
 * the CQ"), once. */
static void arm_satisfied_then_drained_during_callback(void)
{
    tl_event_init(&g_blk_in);
    tl_event_init(&g_blk_go);
    struct tcq a;
    REQUIRE(tcq_open(&a, 4) == STATUS_SUCCESS);
    a.inside = blocker_inside;
    arm(&a, NDK_CQ_NOTIFY_ANY);
    CHECK(push(&a, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    REQUIRE(tl_event_wait(&g_blk_in, 1, WAIT_MS));
    /* Inside the first callback: arm, a completion, and the consumer takes
     * everything. */
    arm(&a, NDK_CQ_NOTIFY_ANY);
    CHECK(push(&a, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    CHECK_EQ(drain_all(&a), 2);
    tl_event_signal(&g_blk_go);
    CHECK(tl_event_wait(&a.ev, 2, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&a.ev), 2);
    tcq_close(&a);
    tl_event_destroy(&g_blk_in);
    tl_event_destroy(&g_blk_go);
}

/* A CQ with a QP stays open until the QP is closed (successor count). */
static void close_waits_for_qp(void)
{
    NDK_PD *pd = NULL;
    REQUIRE(g_ad->Dispatch->NdkCreatePd(g_ad, NULL, NULL, &pd) == STATUS_SUCCESS);
    struct tcq t;
    REQUIRE(tcq_open(&t, 16) == STATUS_SUCCESS);
    NDK_QP *qp = NULL;
    REQUIRE(pd->Dispatch->NdkCreateQp(pd, t.cq, t.cq, NULL, 4, 4, 1, 1, 0, NULL, NULL, &qp) ==
            STATUS_SUCCESS);
    arm(&t, NDK_CQ_NOTIFY_ANY);
    struct close_rec c = {0};
    tl_event_init(&c.ev);
    CHECK_EQ(t.cq->Dispatch->NdkCloseCq(&t.cq->Header, close_done, &c), STATUS_PENDING);
    /* The data path may still complete into it; no notification follows the
     * close call even though an arm was set. */
    CHECK(push(&t, STATUS_CANCELLED, NdkOperationTypeReceive, 1, false));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 0);
    CHECK_EQ(tl_event_count(&c.ev), 0);

    struct close_rec q = {0};
    tl_event_init(&q.ev);
    NTSTATUS st = qp->Dispatch->NdkCloseQp(&qp->Header, close_done, &q);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        CHECK(tl_event_wait(&q.ev, 1, WAIT_MS));
    CHECK(tl_event_wait(&c.ev, 1, WAIT_MS));
    CHECK_EQ(tl_event_count(&t.ev), 0);
    tl_event_destroy(&q.ev);
    tl_event_destroy(&c.ev);
    tl_event_destroy(&t.ev);
    /* The QP may still be finishing its destruction: either answer is right. */
    st = pd->Dispatch->NdkClosePd(&pd->Header, NULL, NULL);
    CHECK(st == STATUS_SUCCESS || st == STATUS_PENDING);
}

/* ---- re-entrancy: Get and Arm from inside the callback ---- */

struct reent {
    tl_event entered, go;
    unsigned calls;
    uintptr_t got[8];
    unsigned ngot;
};

static void reent_inside(struct tcq *t, NTSTATUS st)
{
    (void)st;
    struct reent *r = t->user;
    r->calls++;
    if (r->calls == 1) {
        tl_event_signal(&r->entered);
        tl_event_wait(&r->go, 1, WAIT_MS);
        /* Take only the oldest, then re-arm: the CQ still holds a completion
         * that arrived after this callback was queued, so C4 demands another
         * callback, which must come after this one returns (C5). */
        NDK_RESULT_EX rx[1];
        if (get_ex(t, rx, 1) == 1)
            r->got[r->ngot++] = (uintptr_t)rx[0].RequestContext;
        arm(t, NDK_CQ_NOTIFY_ANY);
    } else if (r->calls == 2) {
        NDK_RESULT res[4];
        ULONG n = get(t, res, 4);
        for (ULONG i = 0; i < n && r->ngot < 8; i++)
            r->got[r->ngot++] = (uintptr_t)res[i].RequestContext;
        /* Arm with nothing newer queued: the next completion fires it. */
        arm(t, NDK_CQ_NOTIFY_ANY);
    } else {
        NDK_RESULT res[4];
        ULONG n = get(t, res, 4);
        for (ULONG i = 0; i < n && r->ngot < 8; i++)
            r->got[r->ngot++] = (uintptr_t)res[i].RequestContext;
    }
}

static void reentrant_callback(void)
{
    struct reent r;
    memset(&r, 0, sizeof r);
    tl_event_init(&r.entered);
    tl_event_init(&r.go);
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    t.inside = reent_inside;
    t.user = &r;
    arm(&t, NDK_CQ_NOTIFY_ANY);
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    REQUIRE(tl_event_wait(&r.entered, 1, WAIT_MS));
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 2, false));
    tl_event_signal(&r.go);
    CHECK(tl_event_wait(&t.ev, 2, WAIT_MS));
    /* Pushed while the second callback may still be returning: the arm it
     * made must still produce exactly one more callback. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 3, false));
    CHECK(tl_event_wait(&t.ev, 3, WAIT_MS));
    flush();
    CHECK_EQ(tl_event_count(&t.ev), 3);
    CHECK_EQ(r.calls, 3);
    CHECK_EQ(r.ngot, 3);
    for (unsigned i = 0; i < r.ngot; i++)
        CHECK_EQ(r.got[i], i + 1);
    tcq_close(&t);
    tl_event_destroy(&r.entered);
    tl_event_destroy(&r.go);
}

/* ---- busy-poll hook ---- */

static struct tcq *g_hook_cq;
static unsigned g_hook_calls;

static void test_poll_hook(struct ndk_cq_impl *cq)
{
    g_hook_calls++;
    if (cq == g_hook_cq->impl)
        push(g_hook_cq, STATUS_SUCCESS, NdkOperationTypeReceive, 0x77, false);
}

static void poll_hook(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 8) == STATUS_SUCCESS);
    g_hook_cq = &t;
    g_hook_calls = 0;
    t.impl->poll_hook = test_poll_hook;
    /* Empty: the hook runs first and what it produced is returned. */
    NDK_RESULT r[4];
    REQUIRE(get(&t, r, 4) == 1);
    CHECK_EQ((uintptr_t)r[0].RequestContext, 0x77);
    CHECK_EQ(g_hook_calls, 1);
    /* Not empty: the hook is not called. */
    CHECK(push(&t, STATUS_SUCCESS, NdkOperationTypeSend, 1, false));
    NDK_RESULT_EX rx[4];
    REQUIRE(get_ex(&t, rx, 4) == 1);
    CHECK_EQ((uintptr_t)rx[0].RequestContext, 1);
    CHECK_EQ(g_hook_calls, 1);
    t.impl->poll_hook = NULL;
    CHECK_EQ(get(&t, r, 4), 0);
    CHECK_EQ(g_hook_calls, 1);
    tcq_close(&t);
}

/* ---- many producers ---- */

#define PER_PRODUCER 100000u
static unsigned g_per_producer = PER_PRODUCER; /* completions each producer pushes */

struct producer {
    pthread_t th;
    struct ndk_cq_impl *cq;
    sem_t *credits; /* free CQ slots: a producer never overruns the CQ */
    uintptr_t id;
    unsigned failed;
};

static void *producer_main(void *arg)
{
    struct producer *p = arg;
    for (unsigned i = 1; i <= g_per_producer; i++) {
        while (sem_wait(p->credits) != 0)
            ;
        struct ndk_cqe e;
        memset(&e, 0, sizeof e);
        e.status = STATUS_SUCCESS;
        e.type = NdkOperationTypeReceive;
        e.bytes = i;
        e.qp_ctx = (void *)p->id;
        e.req_ctx = (void *)(uintptr_t)i;
        if (!ndk_cq_push(p->cq, &e))
            p->failed++;
    }
    return NULL;
}

/* Checks per-producer FIFO order and returns credits. */
static unsigned consume(const NDK_RESULT *r, ULONG n, uintptr_t next[3], sem_t *credits)
{
    unsigned bad = 0;
    for (ULONG i = 0; i < n; i++) {
        uintptr_t id = (uintptr_t)r[i].QPContext;
        if (id < 1 || id > 2 || (uintptr_t)r[i].RequestContext != next[id] ||
            r[i].BytesTransferred != (ULONG)next[id] || r[i].Status != STATUS_SUCCESS)
            bad++;
        else
            next[id]++;
        sem_post(credits);
    }
    return bad;
}

static void run_producers(struct tcq *t, sem_t *credits, struct producer p[2])
{
    for (int i = 0; i < 2; i++) {
        p[i].cq = t->impl;
        p[i].credits = credits;
        p[i].id = (uintptr_t)i + 1;
        p[i].failed = 0;
        CHECK(pthread_create(&p[i].th, NULL, producer_main, &p[i]) == 0);
    }
}

static void producers_polled(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 4096) == STATUS_SUCCESS);
    sem_t credits;
    sem_init(&credits, 0, 4096);
    struct producer p[2];
    run_producers(&t, &credits, p);
    uintptr_t next[3] = {0, 1, 1};
    unsigned total = 0, bad = 0;
    uint64_t deadline = tl_now_ns() + 60ull * 1000000000ull;
    NDK_RESULT r[64];
    while (total < 2 * PER_PRODUCER && tl_now_ns() < deadline) {
        ULONG n = get(&t, r, 64);
        bad += consume(r, n, next, &credits);
        total += n;
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i].th, NULL);
        CHECK_EQ(p[i].failed, 0);
    }
    CHECK_EQ(total, 2 * PER_PRODUCER);
    CHECK_EQ(bad, 0);
    CHECK_EQ(next[1], PER_PRODUCER + 1);
    CHECK_EQ(next[2], PER_PRODUCER + 1);
    CHECK(!ndk_cq_in_error(t.impl));
    CHECK_EQ(t.impl->pushed, 2 * PER_PRODUCER);
    sem_destroy(&credits);
    tcq_close(&t);
}

/* The consumer sleeps on notifications only (drain, re-arm, drain once more): a
 * lost wake-up shows as a wait that runs out. */
static void producers_notified(void)
{
    struct tcq t;
    REQUIRE(tcq_open(&t, 1024) == STATUS_SUCCESS);
    sem_t credits;
    sem_init(&credits, 0, 1024);
    struct producer p[2];
    run_producers(&t, &credits, p);
    uintptr_t next[3] = {0, 1, 1};
    unsigned total = 0, bad = 0, waits = 0;
    bool stalled = false;
    NDK_RESULT r[64];
    while (total < 2 * PER_PRODUCER) {
        ULONG n = get(&t, r, 64);
        if (n) {
            bad += consume(r, n, next, &credits);
            total += n;
            continue;
        }
        unsigned seen = tl_event_count(&t.ev);
        arm(&t, NDK_CQ_NOTIFY_ANY);
        n = get(&t, r, 64);
        if (n) {
            bad += consume(r, n, next, &credits);
            total += n;
            continue;
        }
        waits++;
        if (!tl_event_wait(&t.ev, seen + 1, WAIT_MS)) {
            stalled = true;
            break;
        }
    }
    CHECK(!stalled);
    if (stalled) {
        /* Let the producers finish so they can be joined. */
        for (unsigned i = 0; i < 2 * PER_PRODUCER; i++)
            sem_post(&credits);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i].th, NULL);
        CHECK_EQ(p[i].failed, 0);
    }
    CHECK_EQ(total, 2 * PER_PRODUCER);
    CHECK_EQ(bad, 0);
    fprintf(stderr, "  %u notification waits\n", waits);
    flush();
    sem_destroy(&credits);
    tcq_close(&t);
}

/* NdkResizeCq while the consumer takes (nothing orders the two; the
 * consumer reads the ring without the lock, cq.c): no completion is lost,
 * repeated or reordered, and the rings replaced are freed (LeakSanitizer,
 * ThreadSanitizer). Depths stay at or above the credits, so no resize is
 * refused for the count. */
struct resizer {
    pthread_t th;
    NDK_CQ *cq;
    bool stop;
    unsigned done, refused;
};

static void *resizer_main(void *arg)
{
    struct resizer *z = arg;
    static const ULONG depth[] = {64, 100, 257, 64, 1000};
    for (unsigned i = 0; !__atomic_load_n(&z->stop, __ATOMIC_ACQUIRE); i++) {
        if (z->cq->Dispatch->NdkResizeCq(z->cq, depth[i % 5], req_done, NULL) == STATUS_SUCCESS)
            __atomic_fetch_add(&z->done, 1, __ATOMIC_RELEASE);
        else
            z->refused++;
        sched_yield(); /* the producers and the consumer get their turn too */
    }
    return NULL;
}

static void resize_while_polled(void)
{
    tl_event_init(&g_req_ev);
    g_per_producer = 3000;
    struct tcq t;
    REQUIRE(tcq_open(&t, 64) == STATUS_SUCCESS);
    sem_t credits;
    sem_init(&credits, 0, 64);
    /* The resizer first, and the consumer goes on until it resized a few
     * times: on a loaded machine (or under ASan) the consumer may take all
     * 6000 completions before the resizer's thread is first scheduled. */
    struct resizer z = {.cq = t.cq};
    CHECK(pthread_create(&z.th, NULL, resizer_main, &z) == 0);
    uint64_t deadline = tl_now_ns() + 60ull * 1000000000ull;
    while (__atomic_load_n(&z.done, __ATOMIC_ACQUIRE) == 0 && tl_now_ns() < deadline)
        sched_yield();
    struct producer p[2];
    run_producers(&t, &credits, p);
    uintptr_t next[3] = {0, 1, 1};
    unsigned total = 0, bad = 0;
    NDK_RESULT r[16];
    while ((total < 2 * g_per_producer || __atomic_load_n(&z.done, __ATOMIC_ACQUIRE) < 8) &&
           tl_now_ns() < deadline) {
        ULONG n = get(&t, r, 16);
        bad += consume(r, n, next, &credits);
        total += n;
    }
    __atomic_store_n(&z.stop, true, __ATOMIC_RELEASE);
    pthread_join(z.th, NULL);
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i].th, NULL);
        CHECK_EQ(p[i].failed, 0);
    }
    CHECK_EQ(total, 2 * g_per_producer);
    CHECK_EQ(bad, 0);
    CHECK(z.done >= 8);
    CHECK_EQ(z.refused, 0);
    CHECK(!ndk_cq_in_error(t.impl));
    CHECK_EQ(tl_event_count(&g_req_ev), 0); /* inline: no request completion (C7) */
    sem_destroy(&credits);
    tcq_close(&t);
    g_per_producer = PER_PRODUCER;
}

int main(void)
{
    /* flush() takes the barrier CQ's notification as proof that every
     * callback queued before it ran: true when all CQs share one engine. */
    if (!open_lo_one_engine(&g_ad, &g_info))
        return 1;
    if (barrier_open(&g_barrier, g_ad) != STATUS_SUCCESS) {
        fprintf(stderr, "adapter setup failed\n");
        return 1;
    }

    RUN(create_and_limits);
    RUN(results_fifo_and_fields);
    RUN(no_callback_without_arm);
    RUN(one_callback_per_arm);
    RUN(arm_with_queued_completions);
    RUN(merge_table);
    RUN(solicited_rules);
    RUN(errors_arm_only_on_overflow);
    RUN(overflow);
    RUN(push_batch);
    RUN(resize);
    RUN(close_with_queued_notification);
    RUN(arm_satisfied_then_drained_during_callback);
    RUN(close_waits_for_qp);
    RUN(reentrant_callback);
    RUN(poll_hook);
    RUN(producers_polled);
    RUN(producers_notified);
    RUN(resize_while_polled);

    close_cq(g_barrier.cq);
    tl_event_destroy(&g_barrier.ev);
    ndk_close_adapter(g_ad);
    return tl_finish();
}
