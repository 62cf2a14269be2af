/*
 * ucmatose_node.c - one connection of `ndkping --ucmatose` (see
 * ucmatose.h): its queues and buffers, ucmatose's Sends and receives, and
 * their completions, which come into two CQs (as ucmatose's), both taken
 * whenever either is waited for.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/pattern.h"
#include "ndkping/ucmatose.h"

/* The pattern of each direction: both ends know it, nothing is exchanged. */
#define SEED 0x75636d61u /* "ucma" */
enum { STREAM_FROM_SERVER = 1, STREAM_FROM_CLIENT = 2 };

/* RequestContext: the message's index and whether it is a receive. */
#define CTX(index, recv) ((PVOID)(uintptr_t)(((uint64_t)(index) << 1) | (recv)))
#define CTX_RECV(ctx) (((uintptr_t)(ctx)) & 1u)
#define CTX_INDEX(ctx) ((uint64_t)((uintptr_t)(ctx) >> 1))

#define TAKE_BATCH 16

static bool post_recvs(struct node *n)
{
    for (unsigned i = 0; i < uo.count; i++) {
        NDK_SGE sge = tc_mr_sge(&n->recv_buf, (size_t)i * uo.size, uo.size);
        NTSTATUS st = n->c.qp->Dispatch->NdkReceive(n->c.qp, CTX(i, 1), &sge, 1);
        if (st != STATUS_SUCCESS) {
            tc_ndk_failed(n->c.role, "NdkReceive", st, "%sreceive %u of %u", n->c.calls.label, i + 1, uo.count);
            return false;
        }
    }
    return true;
}

bool node_init(struct node *n, struct tc_adapter *a, unsigned id, bool client)
{
    memset(n, 0, sizeof *n);
    n->client = client;
    /* ucmatose's depth: the message count (1 without messages). */
    ULONG depth = uo.count ? uo.count : 1;
    const NDK_ADAPTER_INFO *in = &a->info;
    if (depth > in->MaxCqDepth || depth > in->MaxInitiatorQueueDepth || depth > in->MaxReceiveQueueDepth) {
        tc_complain(a->role, "-C %u needs queues of %" PRIu32 " entries; adapter %s allows a CQ of %" PRIu32
                             ", %" PRIu32 " initiator and %" PRIu32 " receive requests",
                    uo.count, depth, a->name, in->MaxCqDepth, in->MaxInitiatorQueueDepth, in->MaxReceiveQueueDepth);
        return false;
    }
    const struct tc_qp_shape shape = {.cq_depth = depth, .recv_cq_depth = depth, .rq_depth = depth, .sq_depth = depth};
    if (!tc_conn_init(&n->c, a, id) || !tc_conn_create(&n->c, &shape, n) ||
        (client && !tc_conn_create_connector(&n->c)))
        return false;
    if (!uo.count)
        return true;
    if (!tc_conn_add_mr(&n->c, &n->send_buf, "send buffer", uo.size, 0) ||
        !tc_conn_add_mr(&n->c, &n->recv_buf, "receive buffer", (size_t)uo.count * uo.size,
                        NDK_MR_FLAG_ALLOW_LOCAL_WRITE))
        return false;
    tc_pattern_fill(n->send_buf.mem, uo.size, SEED, client ? STREAM_FROM_CLIENT : STREAM_FROM_SERVER);
    return post_recvs(n);
}

static bool node_post_sends(struct node *n)
{
    NDK_SGE sge = tc_mr_sge(&n->send_buf, 0, uo.size);
    for (unsigned i = 0; i < uo.count; i++) {
        NTSTATUS st = n->c.qp->Dispatch->NdkSend(n->c.qp, CTX(i, 0), &sge, 1, 0);
        if (st != STATUS_SUCCESS) {
            tc_ndk_failed(n->c.role, "NdkSend", st, "%smessage %u of %u to %s", n->c.calls.label, i + 1, uo.count,
                          n->c.peer);
            return false;
        }
    }
    return true;
}

/* A received message: exactly -S bytes, and with --verify the peer's
 * pattern. */
static bool check_message(struct node *n, uint64_t index, ULONG len)
{
    if (len != uo.size) {
        tc_complain(n->c.role, "%smessage %" PRIu64 " from %s has %" PRIu32 " bytes, expected %u (-S)", n->c.calls.label,
                    index + 1, n->c.peer, len, uo.size);
        return false;
    }
    size_t first = 0, bad;
    uint8_t got = 0, want = 0;
    const uint8_t *m = n->recv_buf.mem + index * uo.size;
    if (uo.verify && (bad = tc_pattern_check(m, len, SEED, n->client ? STREAM_FROM_SERVER : STREAM_FROM_CLIENT,
                                             &first, &got, &want))) {
        tc_complain(n->c.role, "%smessage %" PRIu64 " from %s: %zu bytes differ, the first at offset %zu: 0x%02x, "
                               "expected 0x%02x",
                    n->c.calls.label, index + 1, n->c.peer, bad, first, got, want);
        return false;
    }
    return true;
}

static bool handle(struct node *n, const NDK_RESULT_EX *r)
{
    bool recv = CTX_RECV(r->RequestContext);
    uint64_t index = CTX_INDEX(r->RequestContext);
    if (r->QPContext != n || index >= uo.count) {
        tc_library_problem(n->c.role, "%sa completion for no request of this connection (context %p, QP context %p)",
                           n->c.calls.label, r->RequestContext, r->QPContext);
        return false;
    }
    if (r->Status != STATUS_SUCCESS) {
        tc_complain(n->c.role, "%s%s %" PRIu64 " with %s completed with %s (ProviderErrorCode 0x%" PRIx32 ")%s",
                    n->c.calls.label, recv ? "receive" : "Send", index + 1, n->c.peer, tc_status_name(r->Status),
                    r->ProviderErrorCode, r->Status == STATUS_CANCELLED ? ": the connection is gone" : "");
        return false;
    }
    if (!recv) {
        n->sent++;
        return true;
    }
    if (index != n->received++) {
        tc_library_problem(n->c.role, "%sreceive %" PRIu64 " completed as receive %" PRIu64, n->c.calls.label,
                           index + 1, n->received);
        return false;
    }
    return check_message(n, index, r->BytesTransferred);
}

/* Takes what both CQs hold. */
static long take(void *arg)
{
    struct node *n = arg;
    long got = 0;
    NDK_CQ *cqs[2] = {n->c.cq, n->c.rcq};
    for (int q = 0; q < 2; q++) {
        NDK_RESULT_EX r[TAKE_BATCH];
        ULONG k = cqs[q]->Dispatch->NdkGetCqResultsEx(cqs[q], r, TAKE_BATCH);
        if (k > TAKE_BATCH) {
            tc_library_problem(n->c.role, "NdkGetCqResultsEx returned %" PRIu32 " of at most %u", k, TAKE_BATCH);
            k = TAKE_BATCH;
        }
        for (ULONG i = 0; i < k; i++)
            if (!handle(n, &r[i]))
                n->failed = true;
        got += (long)k;
    }
    return n->failed ? -1 : got;
}

static bool node_wait(struct node *n, bool sends, const char *what)
{
    struct tc_cq_wait w;
    tc_conn_waiter(&n->c, &w, TC_WAIT_EVENTS, take, n);
    enum tc_waited why = n->failed ? TC_WAITED_FAILED : TC_WAITED_OK;
    while (why == TC_WAITED_OK && (sends ? n->sent : n->received) < uo.count)
        why = tc_cq_wait(&w, tc_adapter_wait_ms(n->c.adapter));
    if (why != TC_WAITED_OK) {
        char text[160];
        snprintf(text, sizeof text, "%s%s on the connection with %s (%" PRIu64 " of %u so far)", n->c.calls.label,
                 what, n->c.peer, sends ? n->sent : n->received, uo.count);
        tc_explain_wait(n->c.role, why, &n->c.ev->waker, tc_adapter_wait_ms(n->c.adapter), text);
    }
    return why == TC_WAITED_OK;
}

bool nodes_post_sends(struct node *nodes, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (!node_post_sends(&nodes[i]))
            return false;
    return true;
}

bool nodes_wait(struct node *nodes, unsigned n, bool sends, const char *what)
{
    for (unsigned i = 0; i < n; i++)
        if (!node_wait(&nodes[i], sends, what))
            return false;
    return true;
}

bool node_end(struct node *n)
{
    return tc_conn_teardown(&n->c);
}
