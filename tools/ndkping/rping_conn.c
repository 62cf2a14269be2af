/*
 * rping_conn.c - one connection of `ndkping --rping` (see rping.h): its
 * objects and buffers, rping's 16-byte messages, and the CQ, which is
 * polled, armed when empty, and slept on until its notification.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ops.h"
#include "ndkping/rping.h"

#define CQ_DEPTH (2u * RPING_SQ_DEPTH)
#define MSG_FMT "rdma-ping-%lu: "

static const NDK_OPERATION_TYPE wr_type[] = {
    [WR_RECV] = NdkOperationTypeReceive,
    [WR_SEND] = NdkOperationTypeSend,
    [WR_READ] = NdkOperationTypeRead,
    [WR_WRITE] = NdkOperationTypeWrite,
};

static void msg_encode(uint8_t m[RPING_MSG_LEN], const struct rmsg *r)
{
    tc_put_be64(m, r->addr);
    tc_put_be32(m + 8, r->rkey);
    tc_put_be32(m + 12, r->size);
}

static void msg_decode(const uint8_t m[RPING_MSG_LEN], struct rmsg *r)
{
    r->addr = tc_get_be64(m);
    r->rkey = tc_get_be32(m + 8);
    r->size = tc_get_be32(m + 12);
}

/*
 * "rdma-ping-N: ", then ASCII from *start upwards, wrapping from 'z' (122)
 * to 'A' (65), and a NUL in the last byte. *start advances by one per
 * ping, with the same wrap. (rping's snprintf may truncate the header in a
 * small buffer: the run then starts past the end and only the NUL is
 * written, as here.)
 */
void rping_fill(uint8_t *buf, size_t size, unsigned long ping, int *start)
{
    int cc = snprintf((char *)buf, size, MSG_FMT, ping);
    unsigned char ch = (unsigned char)*start;
    for (size_t i = cc < 0 ? size : (size_t)cc; i < size; i++) {
        buf[i] = ch;
        if (++ch > 122)
            ch = 65;
    }
    if (++*start > 122)
        *start = 65;
    buf[size - 1] = 0;
}

struct rconn *rconn_new(struct tc_adapter *a, bool client)
{
    struct rconn *r = calloc(1, sizeof *r);
    if (!r) {
        tc_complain(NULL, "out of memory");
        return NULL;
    }
    for (unsigned i = 0; i < RPING_RQ_DEPTH; i++)
        r->recv_wr[i] = (struct wr){.kind = WR_RECV, .slot = i};
    for (unsigned i = 0; i < RPING_SQ_DEPTH; i++)
        r->send_wr[i] = (struct wr){.kind = WR_SEND, .slot = i};
    r->read_wr.kind = WR_READ;
    r->write_wr.kind = WR_WRITE;
    /* rping_setup_qp: CQ (2 x 16), PD, and an RC QP with rping's depths. */
    const struct tc_qp_shape shape = {.cq_depth = CQ_DEPTH, .rq_depth = RPING_RQ_DEPTH, .sq_depth = RPING_SQ_DEPTH};
    if (!tc_conn_init(&r->c, a, 0) || !tc_conn_create(&r->c, &shape, r) ||
        (client && !tc_conn_create_connector(&r->c))) {
        rconn_end(r);
        return NULL;
    }
    rping_dbg("created cq %p, pd %p, qp %p", (void *)r->c.cq, (void *)r->c.pd, (void *)r->c.qp);
    return r;
}

/* The RDMA Read sink needs NDK_MR_FLAG_RDMA_READ_SINK unless the adapter
 * says otherwise; rping's own access flags are what goes on the wire. */
static ULONG rdma_buf_flags(const struct rconn *r, bool read_sink)
{
    ULONG f = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    if (read_sink && !(r->c.adapter->info.AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED))
        f |= NDK_MR_FLAG_RDMA_READ_SINK;
    return f;
}

static bool add_buf(struct rconn *r, int b, const char *what, size_t len, ULONG flags)
{
    if (!tc_conn_add_mr(&r->c, &r->b[b], what, len, flags))
        return false;
    if (ro.debug > 1)
        rping_dbg("%s: %zu bytes at %p, flags 0x%" PRIx32 ", lkey %" PRIx32 " rkey %" PRIx32, what, len,
                  (void *)r->b[b].mem, flags, r->b[b].ltoken, r->b[b].rtoken);
    return true;
}

/* A posting call's result (SUCCESS queues it; anything else fails it
 * inline and no CQ entry follows). */
static bool posted(struct rconn *r, struct wr *w, NTSTATUS st)
{
    if (st != STATUS_SUCCESS) {
        tc_complain(NULL, "post %s error: %s returned %s", tc_op_name(wr_type[w->kind]),
                    tc_op_call(wr_type[w->kind]), tc_status_name(st));
        tc_check_post_not_pending(NULL, wr_type[w->kind], st);
        return false;
    }
    w->posted = true;
    if (w->kind != WR_RECV)
        r->sq_out++;
    return true;
}

static bool post_recv(struct rconn *r, unsigned slot)
{
    NDK_SGE sge = tc_mr_sge(&r->b[RB_RECV], slot * RPING_MSG_LEN, RPING_MSG_LEN);
    return posted(r, &r->recv_wr[slot], r->c.qp->Dispatch->NdkReceive(r->c.qp, &r->recv_wr[slot], &sge, 1));
}

bool rconn_setup(struct rconn *r, bool client)
{
    if (!add_buf(r, RB_RECV, "recv_buf", RPING_RQ_DEPTH * RPING_MSG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE) ||
        !add_buf(r, RB_SEND, "send_buf", RPING_SQ_DEPTH * RPING_MSG_LEN, 0) ||
        !add_buf(r, RB_RDMA, "rdma_buf", ro.size, rdma_buf_flags(r, !client)) ||
        (client && !add_buf(r, RB_START, "start_buf", ro.size, rdma_buf_flags(r, false))))
        return false;
    rping_dbg("allocated & registered buffers...");
    for (unsigned i = 0; i < RPING_RQ_DEPTH; i++)
        if (!post_recv(r, i))
            return false;
    return true;
}

bool rconn_fit_rdma_buf(struct rconn *r, uint32_t need)
{
    struct tc_mr *m = &r->b[RB_RDMA];
    if (need <= m->len)
        return true;
    rping_dbg("growing rdma_buf from %zu to %" PRIu32 " bytes for the client's size", m->len, need);
    /* Nothing uses it between pings. */
    if (!tc_mr_teardown(m, &r->c.calls))
        return false;
    tc_mr_free(m);
    return tc_mr_setup(m, &r->c.calls, r->c.pd, "rdma_buf", need, rdma_buf_flags(r, true));
}

/* Which of our requests a result belongs to, or NULL. */
static struct wr *owner(struct rconn *r, PVOID ctx)
{
    for (unsigned i = 0; i < RPING_RQ_DEPTH; i++)
        if (ctx == &r->recv_wr[i])
            return &r->recv_wr[i];
    for (unsigned i = 0; i < RPING_SQ_DEPTH; i++)
        if (ctx == &r->send_wr[i])
            return &r->send_wr[i];
    if (ctx == &r->read_wr || ctx == &r->write_wr)
        return ctx;
    return NULL;
}

/* A received message: rping's check (exactly 16 bytes), queued, and the
 * receive posted again into the slot it freed. */
static void received(struct rconn *r, struct wr *w, ULONG len)
{
    if (len != RPING_MSG_LEN) {
        tc_err(NULL, "Received bogus data, size %" PRIu32, len);
        r->failed = true;
        return;
    }
    if (r->q_len == RPING_RQ_DEPTH) {
        /* Only a peer that sends ahead of rping's protocol gets here:
         * rping never has more than one message in flight. */
        tc_complain(NULL, "%u messages received and not yet taken: the peer does not wait for the go-ahead",
                    RPING_RQ_DEPTH + 1);
        r->failed = true;
        return;
    }
    msg_decode(r->b[RB_RECV].mem + w->slot * RPING_MSG_LEN, &r->q[(r->q_head + r->q_len) % RPING_RQ_DEPTH]);
    r->q_len++;
    if (!post_recv(r, w->slot))
        r->failed = true;
}

/* One CQ entry. */
static void handle_result(struct rconn *r, const NDK_RESULT_EX *res)
{
    struct wr *w = owner(r, res->RequestContext);
    if (!w || !w->posted) {
        tc_library_problem(NULL, "a CQ entry (%s, type %d) for no outstanding request (context %p)",
                           tc_status_name(res->Status), (int)res->Type, res->RequestContext);
        r->failed = true;
        return;
    }
    w->posted = false;
    if (w->kind != WR_RECV)
        r->sq_out--;
    tc_check_completion(NULL, "", wr_type[w->kind], res, r);
    if (res->Status == STATUS_CANCELLED) {
        /* Flushed: the connection is going away (rping skips these too). */
        rping_dbg("%s flushed", tc_op_name(wr_type[w->kind]));
        return;
    }
    if (res->Status != STATUS_SUCCESS) {
        tc_complain(NULL, "cq completion failed status %s (ProviderErrorCode 0x%" PRIx32 ") on the %s",
                    tc_status_name(res->Status), res->ProviderErrorCode, tc_op_name(wr_type[w->kind]));
        r->failed = true;
        return;
    }
    rping_dbg("%s completion", w->kind == WR_SEND ? "send" : w->kind == WR_READ ? "rdma read"
                                                 : w->kind == WR_WRITE ? "rdma write" : "recv");
    if (w->kind == WR_READ)
        r->read_done = true;
    else if (w->kind == WR_WRITE)
        r->write_done = true;
    else if (w->kind == WR_RECV)
        received(r, w, res->BytesTransferred);
}

static long take(void *arg)
{
    struct rconn *r = arg;
    NDK_RESULT_EX res[CQ_DEPTH];
    ULONG n = r->c.cq->Dispatch->NdkGetCqResultsEx(r->c.cq, res, CQ_DEPTH);
    if (n > CQ_DEPTH) {
        tc_library_problem(NULL, "NdkGetCqResultsEx returned %" PRIu32 " of at most %u", n, CQ_DEPTH);
        n = CQ_DEPTH;
    }
    for (ULONG i = 0; i < n; i++)
        handle_result(r, &res[i]);
    return r->failed ? -1 : (long)n;
}

typedef bool (*ready_fn)(const struct rconn *r);

static bool have_msg(const struct rconn *r)
{
    return r->q_len > 0;
}

static bool have_read(const struct rconn *r)
{
    return r->read_done;
}

static bool have_write(const struct rconn *r)
{
    return r->write_done;
}

static bool sq_has_room(const struct rconn *r)
{
    return r->sq_out < RPING_SQ_DEPTH && !r->send_wr[r->next_send].posted;
}

/* Takes completions until ready(r); otherwise how the wait ended. */
static enum tc_waited wait_for(struct rconn *r, ready_fn ready)
{
    struct tc_cq_wait w;
    tc_conn_waiter(&r->c, &w, TC_WAIT_EVENTS, take, r);
    enum tc_waited why = r->failed ? TC_WAITED_FAILED : TC_WAITED_OK;
    while (why == TC_WAITED_OK && !ready(r))
        why = tc_cq_wait(&w, tc_adapter_wait_ms(r->c.adapter));
    return why;
}

/* Explains a wait that did not end well; `what` is what was awaited. */
static void explain(struct rconn *r, enum tc_waited why, const char *what)
{
    char text[256];
    snprintf(text, sizeof text, "%s from %s (ping %lu, %u send queue request%s outstanding)", what, r->c.peer,
             r->pings, r->sq_out, r->sq_out == 1 ? "" : "s");
    tc_explain_wait(NULL, why, &r->c.ev->waker, tc_adapter_wait_ms(r->c.adapter), text);
}

bool rconn_send(struct rconn *r, const struct rmsg *m)
{
    enum tc_waited why = wait_for(r, sq_has_room);
    if (why != TC_WAITED_OK) {
        explain(r, why, "room in the send queue");
        return false;
    }
    unsigned slot = r->next_send;
    r->next_send = (slot + 1) % RPING_SQ_DEPTH;
    msg_encode(r->b[RB_SEND].mem + slot * RPING_MSG_LEN, m);
    NDK_SGE sge = tc_mr_sge(&r->b[RB_SEND], slot * RPING_MSG_LEN, RPING_MSG_LEN);
    return posted(r, &r->send_wr[slot], r->c.qp->Dispatch->NdkSend(r->c.qp, &r->send_wr[slot], &sge, 1, 0));
}

bool rconn_send_adv(struct rconn *r, int b)
{
    struct rmsg m = {.addr = (uint64_t)(uintptr_t)r->b[b].mem, .rkey = r->b[b].rtoken, .size = ro.size};
    rping_dbg("RDMA addr %" PRIx64 " rkey %" PRIx32 " len %" PRIu32, m.addr, m.rkey, m.size);
    return rconn_send(r, &m);
}

bool rconn_recv(struct rconn *r, const char *what, struct rmsg *m, bool *left)
{
    enum tc_waited why = wait_for(r, have_msg);
    if (why == TC_WAITED_LEFT && left) {
        *left = true;
        return false;
    }
    if (why != TC_WAITED_OK) {
        explain(r, why, what);
        return false;
    }
    *m = r->q[r->q_head];
    r->q_head = (r->q_head + 1) % RPING_RQ_DEPTH;
    r->q_len--;
    return true;
}

bool rconn_rdma(struct rconn *r, enum wr_kind kind, size_t len, const struct rmsg *remote, const char *what)
{
    NDK_QP *qp = r->c.qp;
    NDK_SGE sge = tc_mr_sge(&r->b[RB_RDMA], 0, len);
    NTSTATUS st;
    if (kind == WR_READ) {
        r->read_done = false;
        st = qp->Dispatch->NdkRead(qp, &r->read_wr, &sge, 1, remote->addr, remote->rkey, 0);
    } else {
        r->write_done = false;
        st = qp->Dispatch->NdkWrite(qp, &r->write_wr, &sge, 1, remote->addr, remote->rkey, 0);
    }
    if (!posted(r, kind == WR_READ ? &r->read_wr : &r->write_wr, st))
        return false;
    enum tc_waited why = wait_for(r, kind == WR_READ ? have_read : have_write);
    if (why != TC_WAITED_OK)
        explain(r, why, what);
    return why == TC_WAITED_OK;
}

bool rconn_disconnect(struct rconn *r, bool ok)
{
    NTSTATUS st = tc_conn_disconnect(&r->c);
    if (st == STATUS_SUCCESS || !ok)
        return ok;
    tc_complain(NULL, "rdma_disconnect: NdkDisconnect from %s failed: %s", r->c.peer, tc_status_name(st));
    return false;
}

void rconn_summary(const struct rconn *r, const char *role, uint32_t size, uint64_t t0)
{
    if (!ro.debug)
        return;
    uint64_t t_pings = r->t_last > r->t_first ? r->t_last - r->t_first : 0;
    tc_say(NULL, "%s: %s: %lu ping%s of %" PRIu32 " bytes in %" PRIu64 " us (%" PRIu64 " us each), connection %" PRIu64
                 " us",
           role, r->c.peer, r->pings, r->pings == 1 ? "" : "s", size, t_pings, r->pings ? t_pings / r->pings : 0,
           tc_now_us() - t0);
}

bool rconn_end(struct rconn *r)
{
    bool ok = tc_conn_teardown(&r->c);
    free(r);
    return ok;
}
