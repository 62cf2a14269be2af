/*
 * one_engine.h - what the CQ and SRQ white-box tests (test_cq.c,
 * test_srq.c) share: the "lo" adapter opened with one engine, the barrier
 * that proves "no notification" without a timeout, and the record of a
 * close's completion.
 *
 * The barrier: callbacks of one engine run one at a time in queue order, so
 * once a barrier CQ's notification (queued last) has run, every earlier one
 * has run too. Header-only: each test is one translation unit.
 */
#ifndef NDK_TESTS_CORE_ONE_ENGINE_H
#define NDK_TESTS_CORE_ONE_ENGINE_H

#include <stdio.h>
#include <string.h>

#include "objects.h"
#include "testlib.h"

#define WAIT_MS 10000

/* Opens "lo" with one engine and reads its NDK_ADAPTER_INFO; false (said
 * on stderr) on failure: lo always exists, so that is a failure, not a
 * skip. */
static inline bool open_lo_one_engine(NDK_ADAPTER **ad, NDK_ADAPTER_INFO *info)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .MaxEngines = 1};
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, ad);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "FAIL: ndk_open_adapter(lo): %s\n", ndk_status_name(st));
        return false;
    }
    ULONG size = sizeof *info;
    if ((*ad)->Dispatch->NdkQueryAdapterInfo(*ad, info, &size) != STATUS_SUCCESS) {
        fprintf(stderr, "FAIL: NdkQueryAdapterInfo(lo)\n");
        return false;
    }
    return true;
}

/* ---- the barrier ---- */

struct barrier {
    NDK_CQ *cq;
    struct ndk_cq_impl *impl;
    tl_event ev; /* one signal per notification */
};

static inline void barrier_notify(PVOID ctx, NTSTATUS st)
{
    struct barrier *b = ctx;
    (void)st;
    tl_event_signal(&b->ev);
}

static inline NTSTATUS barrier_open(struct barrier *b, NDK_ADAPTER *ad)
{
    memset(b, 0, sizeof *b);
    tl_event_init(&b->ev);
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, 16, barrier_notify, b, NULL, NULL, NULL, &b->cq);
    if (st == STATUS_SUCCESS)
        b->impl = container_of(ndk_obj_from_pub(b->cq, NdkObjectTypeCq), struct ndk_cq_impl, obj);
    return st;
}

/* Returns once every notification queued before the call has run. */
static inline void barrier_flush(struct barrier *b)
{
    unsigned n = tl_event_count(&b->ev);
    b->cq->Dispatch->NdkArmCq(b->cq, NDK_CQ_NOTIFY_ANY);
    struct ndk_cqe e;
    memset(&e, 0, sizeof e);
    e.type = NdkOperationTypeSend;
    CHECK(ndk_cq_push(b->impl, &e));
    CHECK(tl_event_wait(&b->ev, n + 1, WAIT_MS));
    NDK_RESULT r[16];
    while (b->cq->Dispatch->NdkGetCqResults(b->cq, r, 16))
        ;
}

/* ---- closes ---- */

/* A close's completion, and its place among the callbacks of a case. */
struct close_rec {
    tl_event ev;
    unsigned order;
};

static unsigned g_seq; /* orders callbacks in the close tests */

static inline void close_done(PVOID ctx)
{
    struct close_rec *c = ctx;
    c->order = __atomic_add_fetch(&g_seq, 1, __ATOMIC_ACQ_REL);
    tl_event_signal(&c->ev);
}

#endif
