/*
 * endpoint.c - one end of an ndkperf connection: the adapter and the NDK
 * objects of the test (CQ, PD, MR, QP, connector, listener), the
 * connection phase with the out-of-band exchange in the private data, the
 * disconnect, and closing everything. The NDKPI steps themselves are the
 * tools library's (lib/conn.h).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "ndkperf/ndkperf.h"

void ep_init(struct endpoint *e, const char *role, const struct options *o)
{
    memset(e, 0, sizeof *e);
    e->role = role;
    e->opt = o;
}

bool ep_open(struct endpoint *e, const NDK_SOCKADDR *near, const char *near_what)
{
    const struct options *o = e->opt;
    ULONG flags = o->crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0;
    if (o->busy_poll)
        flags |= NDK_OPEN_FLAG_BUSY_POLL;
    /* perftest's write_lat server writes first; a client/server initiator
     * (siw) sends nothing until it has, so a server must not wait for it. */
    if (strcmp(e->role, "server") == 0)
        flags |= NDK_OPEN_FLAG_RELAXED_TX_GATE;
    e->a = &e->own;
    tc_adapter_socket_buffers(o->sockbuf);
    return tc_adapter_open(&e->own, e->role, o->adapter, near, near_what, flags, o->timeout_ms) &&
           tc_conn_init(&e->c, e->a, 0);
}

void ep_share(struct endpoint *e, const struct endpoint *owner)
{
    e->a = owner->a;
    tc_conn_init(&e->c, e->a, 0);
}

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

/* The test's needs against the adapter's limits. */
static bool fits(const struct endpoint *e, const struct layout *l)
{
    const NDK_ADAPTER_INFO *in = &e->a->info;
    if (l->cq_depth > in->MaxCqDepth || l->sq_depth > in->MaxInitiatorQueueDepth ||
        l->rq_depth > in->MaxReceiveQueueDepth) {
        tc_complain(e->role,
                    "the test needs a CQ of %" PRIu32 ", %" PRIu32 " initiator and %" PRIu32 " receive entries; "
                    "the adapter allows %" PRIu32 ", %" PRIu32 " and %" PRIu32 " (lower -q or -r)",
                    l->cq_depth, l->sq_depth, l->rq_depth, in->MaxCqDepth, in->MaxInitiatorQueueDepth,
                    in->MaxReceiveQueueDepth);
        return false;
    }
    if (l->region > in->MaxTransferLength) {
        tc_complain(e->role, "messages of %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32,
                    l->region, in->MaxTransferLength);
        return false;
    }
    return true;
}

/* One registration, page aligned, cache-line aligned parts; touched once
 * so that the first messages do not pay for page faults. */
static bool create_memory(struct endpoint *e, const struct layout *l)
{
    size_t part = round_up(l->region, 64);
    size_t size = round_up(2 * part + (size_t)(l->ctrl_tx_slots + l->ctrl_rx_slots) * CTRL_SLOT, 4096);
    ULONG flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE |
                  NDK_MR_FLAG_RDMA_READ_SINK;
    if (!tc_conn_add_mr(&e->c, &e->mr, "test buffer", size, flags))
        return false;
    e->region = l->region;
    e->ctrl_tx_slots = l->ctrl_tx_slots;
    e->ctrl_rx_slots = l->ctrl_rx_slots;
    e->target = e->mr.mem;
    e->source = e->mr.mem + part;
    e->ctrl_tx = e->source + part;
    e->ctrl_rx = e->ctrl_tx + (size_t)l->ctrl_tx_slots * CTRL_SLOT;
    /* Recognizable payload; write_lat overwrites the last byte each time. */
    memset(e->source, 0xa5, l->region);
    e->ltoken = e->mr.ltoken;
    e->local = (struct remote_buf){.va = (uint64_t)(uintptr_t)e->target, .token = e->mr.rtoken, .size = l->region};
    return true;
}

/* --moderation on the connection's CQ (one for both queues). */
static bool moderate(struct endpoint *e)
{
    const struct options *o = e->opt;
    if (!o->moderation)
        return true;
    NDK_CQ *cq = e->c.cq;
    NTSTATUS st = cq->Dispatch->NdkControlCqInterruptModeration(cq, o->mod_interval_us, o->mod_count);
    if (st != STATUS_SUCCESS)
        tc_complain(e->role, "NdkControlCqInterruptModeration(%" PRIu32 ", %" PRIu32 ") failed: %s%s",
                    o->mod_interval_us, o->mod_count, tc_status_name(st),
                    e->a->info.AdapterFlags & NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED
                        ? ""
                        : " (the adapter does not offer it)");
    return st == STATUS_SUCCESS;
}

bool ep_create(struct endpoint *e, const struct layout *l)
{
    const struct tc_qp_shape shape = {.cq_depth = l->cq_depth,
                                      .rq_depth = l->rq_depth,
                                      .sq_depth = l->sq_depth,
                                      .inline_size = l->inline_size};
    if (!fits(e, l) || !tc_conn_create(&e->c, &shape, e) || !moderate(e) || !create_memory(e, l))
        return false;
    e->qp_inline = l->inline_size;
    e->rq_depth = l->rq_depth;
    e->sq_limit = l->sq_depth;
    e->signal_every = l->signal_every ? l->signal_every : 1;
    if (!(e->sq_op = calloc(l->ctrl_tx_slots, 1))) {
        tc_complain(e->role, "out of memory");
        return false;
    }
    return true;
}

bool ep_listen(struct endpoint *e, const NDK_SOCKADDR *addr, unsigned requests)
{
    e->listening = tc_listen(&e->listener, e->a, addr, requests);
    return e->listening;
}

bool ep_wait_request(struct endpoint *e, struct endpoint *from, unsigned ms)
{
    NDK_CONNECTOR *cn = NULL;
    if (tc_listener_next(&from->listener, ms, &cn, NULL) != TC_NEXT_GOT) {
        tc_complain(e->role, "no client connected within %u s (--accept-timeout)", ms / 1000);
        return false;
    }
    e->c.cn = cn;
    tc_conn_name_peer(&e->c);
    return true;
}

bool ep_request_data(struct endpoint *e, uint8_t *buf, uint32_t cap, uint32_t *len, ULONG *ird, ULONG *ord)
{
    uint8_t *data = NULL;
    ULONG got = 0;
    NTSTATUS st = tc_conn_data(&e->c, ird, ord, &data, &got);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, "NdkGetConnectionData", st, "the private data of %s", e->c.peer);
        return false;
    }
    *len = got;
    if (got > cap)
        tc_complain(e->role, "the peer sent %" PRIu32 " bytes of private data, more than ndkperf's %" PRIu32, got,
                    cap);
    else if (got)
        memcpy(buf, data, got);
    free(data);
    return true; /* too long: the caller rejects it as foreign */
}

/* The reason goes back in the reject's private data, so the client can
 * print it (the active side can read it after the refused connect). */
bool ep_reject(struct endpoint *e, const char *why)
{
    tc_complain(e->role, "rejecting the connection from %s: %s", e->c.peer, why);
    ULONG len = (ULONG)strlen(why);
    if (len > e->a->info.MaxCalleeData)
        len = e->a->info.MaxCalleeData;
    tc_conn_reject(&e->c, why, len);
    return false;
}

bool ep_accept(struct endpoint *e, const uint8_t *pdata, uint32_t len, ULONG ird, ULONG ord)
{
    if (!tc_conn_accept(&e->c, ird, ord, pdata, len))
        return false;
    /* What the requests make of both sides; the passive side cannot ask
     * NdkGetConnectionData after the accept. */
    e->ird = ird;
    e->ord = ord;
    return true;
}

bool ep_connect(struct endpoint *e, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, const uint8_t *pdata,
                uint32_t len, ULONG ird, ULONG ord, uint8_t *reply, uint32_t cap, uint32_t *reply_len)
{
    if (!tc_conn_create_connector(&e->c))
        return false;
    NTSTATUS st = tc_conn_connect(&e->c, src, dst, ird, ord, pdata, len);
    if (st != STATUS_SUCCESS) {
        if (!e->quiet_connect) /* else the caller tries again, and reports the last failure */
            tc_conn_explain_connect(&e->c, st);
        return false;
    }
    return ep_request_data(e, reply, cap, reply_len, &e->ird, &e->ord) && tc_conn_complete(&e->c);
}

bool ep_peer_left(struct endpoint *e, unsigned ms)
{
    return tc_conn_peer_left(&e->c, ms);
}

bool ep_disconnect_begin(struct endpoint *e)
{
    return tc_conn_disconnect_begin(&e->c);
}

bool ep_disconnect_end(struct endpoint *e)
{
    NTSTATUS st = tc_conn_disconnect_end(&e->c);
    if (e->peer_may_abort && (st == STATUS_CONNECTION_ABORTED || st == STATUS_CONNECTION_RESET))
        return true;
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, "NdkDisconnect", st, "the connection with %s", e->c.peer);
        return false;
    }
    return true;
}

/*
 * Graceful disconnect (NdkDisconnect's rules). The client disconnects
 * first; the server waits for that (bounded) and answers with its own
 * NdkDisconnect, so that neither side resets a connection whose last
 * messages are still on the way.
 */
bool ep_disconnect(struct endpoint *e, bool wait_for_peer_first)
{
    if (!e->c.connected)
        return true;
    unsigned ms = e->opt->timeout_ms;
    if (wait_for_peer_first && !e->c.disconnecting && !ep_peer_left(e, ms))
        tc_complain(e->role, "the client did not disconnect within %u ms; disconnecting", ms);
    return ep_disconnect_begin(e) && ep_disconnect_end(e);
}

void ep_drop_connector(struct endpoint *e)
{
    if (e->c.cn)
        tc_close_object(&e->c.calls, e->c.cn->Dispatch->NdkCloseConnector, &e->c.cn->Header, "NdkCloseConnector");
    e->c.cn = NULL;
    e->c.connected = false;
}

/* Successors before antecedents: the connector (and so the listener's
 * requests) before the listener; then the adapter, if it is ours. */
void ep_close(struct endpoint *e)
{
    if (e->c.adapter)
        tc_conn_teardown(&e->c);
    if (e->listening)
        tc_listener_close(&e->listener);
    e->listening = false;
    if (e->a == &e->own)
        tc_adapter_close(&e->own);
    free(e->sq_op);
    e->sq_op = NULL;
}

bool post_data_recv(struct endpoint *e)
{
    NDK_SGE sge = {.VirtualAddress = e->target, .Length = e->region, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->c.qp->Dispatch->NdkReceive(e->c.qp, WR_CTX(WR_RX_DATA, 0), &sge, 1);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, "NdkReceive", st, "%" PRIu32 " bytes", e->region);
        return false;
    }
    return true;
}

bool post_ctrl_recv(struct endpoint *e, uint32_t slot, uint32_t len)
{
    NDK_SGE sge = {
        .VirtualAddress = e->ctrl_rx + (size_t)slot * CTRL_SLOT, .Length = len, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->c.qp->Dispatch->NdkReceive(e->c.qp, WR_CTX(WR_RX_CTRL, slot), &sge, 1);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(e->role, "NdkReceive", st, "control slot %" PRIu32, slot);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Waiting for completions: the library's ways (--wait), with a bound        */
/* ------------------------------------------------------------------------ */

struct taker {
    struct endpoint *e;
    NDK_RESULT *r;
    unsigned max, got;
};

static long take(void *arg)
{
    struct taker *t = arg;
    return t->got = cq_take(t->e, t->r, t->max);
}

unsigned wait_limit_ms(const struct endpoint *e)
{
    return e->wait_ms ? e->wait_ms : e->opt->timeout_ms;
}

unsigned cq_wait(struct endpoint *e, NDK_RESULT *r, unsigned max, const char *what)
{
    /* No poll of our own first: tc_cq_wait polls before it yields, arms or
     * sleeps, and a second look costs an empty read of the socket per
     * message, which on one CPU, before the peer could run, always is. */
    struct taker t = {.e = e, .r = r, .max = max};
    struct tc_cq_wait w;
    tc_conn_waiter(&e->c, &w, e->opt->wait, take, &t);
    enum tc_waited why = tc_cq_wait(&w, wait_limit_ms(e));
    if (why == TC_WAITED_OK)
        return t.got;
    tc_explain_wait(e->role, why, &e->c.ev->waker, wait_limit_ms(e), what);
    return 0;
}

bool wait_ok(struct endpoint *e, uint64_t start_ns, const char *what)
{
    struct tc_cq_wait w;
    tc_conn_waiter(&e->c, &w, e->opt->wait, NULL, NULL);
    enum tc_waited why = tc_cq_stalled(&w, start_ns, wait_limit_ms(e));
    if (why != TC_WAITED_OK)
        tc_explain_wait(e->role, why, &e->c.ev->waker, wait_limit_ms(e), what);
    return why == TC_WAITED_OK;
}
