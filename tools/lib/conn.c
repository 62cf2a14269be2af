/*
 * conn.c - see conn.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/conn.h"
#include "lib/log.h"

/* NdkConnect may spend the TCP handshake timeout and then the MPA Reply
 * timeout. */
static unsigned connect_wait_ms(const struct tc_conn *c)
{
    return 2 * c->adapter->timeout_ms + TC_GRACE_MS;
}

static VOID on_disconnect_event(PVOID Context)
{
    struct tc_conn_events *ev = Context;
    tc_comp_signal(ev->gone, STATUS_SUCCESS, NULL);
    tc_waker_wake(&ev->waker, STATUS_SUCCESS);
}

bool tc_conn_init(struct tc_conn *c, struct tc_adapter *a, unsigned num)
{
    memset(c, 0, sizeof *c);
    c->adapter = a;
    c->role = a->role;
    c->num = num;
    snprintf(c->peer, sizeof c->peer, "the peer");
    tc_calls_init(&c->calls, a->role, tc_adapter_wait_ms(a));
    if (num)
        snprintf(c->calls.label, sizeof c->calls.label, "[%u] ", num);
    if (!(c->ev = tc_calls_alloc(&c->calls, sizeof *c->ev)))
        return false;
    tc_waker_init(&c->ev->waker);
    return (c->ev->gone = tc_call(&c->calls, "the disconnect event")) != NULL;
}

static void *create_cq(struct tc_conn *c, ULONG depth)
{
    struct tc_completion *k = tc_call(&c->calls, "NdkCreateCq");
    if (!k)
        return NULL;
    NDK_ADAPTER *ad = c->adapter->ad;
    NDK_CQ *cq = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, depth, tc_cq_notification, &c->ev->waker, NULL, tc_on_create, k, &cq);
    return tc_create_end(&c->calls, k, st, cq);
}

bool tc_conn_create(struct tc_conn *c, const struct tc_qp_shape *s, PVOID qp_context)
{
    if (!(c->cq = create_cq(c, s->cq_depth)))
        return false;
    if (s->recv_cq_depth && !(c->rcq = create_cq(c, s->recv_cq_depth)))
        return false;
    NDK_ADAPTER *ad = c->adapter->ad;
    struct tc_completion *k = tc_call(&c->calls, "NdkCreatePd");
    if (!k)
        return false;
    NDK_PD *pd = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreatePd(ad, tc_on_create, k, &pd);
    if (!(c->pd = tc_create_end(&c->calls, k, st, pd)))
        return false;
    if (!(k = tc_call(&c->calls, "NdkCreateQp")))
        return false;
    NDK_QP *qp = NULL;
    st = c->pd->Dispatch->NdkCreateQp(c->pd, c->rcq ? c->rcq : c->cq, c->cq, qp_context, s->rq_depth,
                                      s->sq_depth, s->rq_sge ? s->rq_sge : 1, s->sq_sge ? s->sq_sge : 1,
                                      s->inline_size, tc_on_create, k, &qp);
    return (c->qp = tc_create_end(&c->calls, k, st, qp)) != NULL;
}

bool tc_conn_create_connector(struct tc_conn *c)
{
    struct tc_completion *k = tc_call(&c->calls, "NdkCreateConnector");
    if (!k)
        return false;
    NDK_ADAPTER *ad = c->adapter->ad;
    NDK_CONNECTOR *cn = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateConnector(ad, tc_on_create, k, &cn);
    return (c->cn = tc_create_end(&c->calls, k, st, cn)) != NULL;
}

bool tc_conn_add_mr(struct tc_conn *c, struct tc_mr *m, const char *what, size_t len, ULONG flags)
{
    if (c->n_mrs == TC_CONN_MRS) {
        tc_complain(c->role, "%stoo many buffers for one connection", c->calls.label);
        return false;
    }
    c->mrs[c->n_mrs++] = m;
    return tc_mr_setup(m, &c->calls, c->pd, what, len, flags);
}

/* A connection step begun: its completion, what the call returned, and
 * how long it may take. */
static struct tc_completion *step_begin(struct tc_conn *c, const char *what, unsigned ms)
{
    if (!(c->step = tc_call(&c->calls, what)))
        return NULL;
    c->step_ms = ms;
    c->step_t0 = tc_now_us();
    return c->step;
}

static void step_returned(struct tc_conn *c, NTSTATUS st)
{
    c->step_returned = st;
    c->step_t_ret = tc_now_us();
}

/* The step's final status; its time in c->leg_us. */
static NTSTATUS step_end(struct tc_conn *c)
{
    if (!c->step)
        return STATUS_NO_MEMORY;
    NTSTATUS st = tc_call_end_ms(&c->calls, c->step, c->step_returned, c->step_ms);
    c->leg_us = tc_comp_elapsed(c->step, c->step_t0, c->step_t_ret);
    c->step = NULL;
    return st;
}

bool tc_conn_connect_begin(struct tc_conn *c, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, ULONG ird,
                           ULONG ord, const void *pdata, ULONG len)
{
    tc_format_addr(dst, true, c->peer, sizeof c->peer);
    struct tc_completion *k = step_begin(c, "NdkConnect", connect_wait_ms(c));
    if (!k)
        return false;
    NDK_SOCKADDR from = *src, to = *dst;
    step_returned(c, c->cn->Dispatch->NdkConnect(c->cn, c->qp, &from.sa, tc_sockaddr_len(&from), &to.sa,
                                                 tc_sockaddr_len(&to), ird, ord, (PVOID)pdata, len, tc_on_request, k));
    return true;
}

NTSTATUS tc_conn_connect_end(struct tc_conn *c)
{
    return step_end(c);
}

NTSTATUS tc_conn_connect(struct tc_conn *c, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, ULONG ird,
                         ULONG ord, const void *pdata, ULONG len)
{
    if (!tc_conn_connect_begin(c, src, dst, ird, ord, pdata, len))
        return STATUS_NO_MEMORY;
    return tc_conn_connect_end(c);
}

void tc_conn_explain_connect(struct tc_conn *c, NTSTATUS st)
{
    const char *hint = "";
    char why[160] = "";
    if (st == STATUS_CONNECTION_REFUSED) {
        ULONG n = sizeof why - 1;
        if (c->cn->Dispatch->NdkGetConnectionData(c->cn, NULL, NULL, why, &n) == STATUS_SUCCESS && n > 0) {
            why[n < sizeof why ? n : sizeof why - 1] = '\0';
            tc_complain(c->role, "%sthe server at %s refused the connection: %s", c->calls.label, c->peer, why);
            return;
        }
        hint = ": is a server listening on that address and port?";
    } else if (st == STATUS_IO_TIMEOUT) {
        hint = ": no answer within --timeout; is the address reachable, the port open?";
    } else if (st == STATUS_INVALID_BUFFER_SIZE) {
        hint = ": the private data is longer than the adapter's MaxCallerData";
    }
    tc_complain(c->role, "%sconnect to %s failed: %s%s", c->calls.label, c->peer, tc_status_name(st), hint);
}

/* The size probe, then the read; the checks a second call allows. */
static NTSTATUS read_data(struct tc_conn *c, ULONG rds, ULONG *ird, ULONG *ord, uint8_t **data, ULONG *len)
{
    uint8_t *buf = malloc(rds);
    if (!buf)
        return STATUS_NO_MEMORY;
    ULONG got = rds, ird2 = 0, ord2 = 0;
    NTSTATUS st = c->cn->Dispatch->NdkGetConnectionData(c->cn, &ird2, &ord2, buf, &got);
    if (st != STATUS_SUCCESS) {
        free(buf);
        return st;
    }
    if (got != rds)
        tc_library_problem(c->role, "NdkGetConnectionData: RDS %" PRIu32 " after the probe said %" PRIu32, got, rds);
    if ((ird && ird2 != *ird) || (ord && ord2 != *ord))
        tc_library_problem(c->role, "NdkGetConnectionData: IRD/ORD changed between two calls");
    *data = buf;
    *len = got < rds ? got : rds;
    return STATUS_SUCCESS;
}

NTSTATUS tc_conn_data(struct tc_conn *c, ULONG *ird, ULONG *ord, uint8_t **data, ULONG *len)
{
    *data = NULL;
    *len = 0;
    ULONG rds = 0;
    NTSTATUS st = c->cn->Dispatch->NdkGetConnectionData(c->cn, ird, ord, NULL, &rds);
    if (st != STATUS_SUCCESS || rds == 0)
        return st;
    return read_data(c, rds, ird, ord, data, len);
}

bool tc_conn_complete(struct tc_conn *c)
{
    struct tc_completion *k = step_begin(c, "NdkCompleteConnect", c->calls.wait_ms);
    if (!k)
        return false;
    step_returned(c, c->cn->Dispatch->NdkCompleteConnect(c->cn, on_disconnect_event, c->ev, tc_on_request, k));
    NTSTATUS st = step_end(c);
    if (st != STATUS_SUCCESS) {
        tc_complain(c->role, "%sNdkCompleteConnect to %s failed: %s", c->calls.label, c->peer, tc_status_name(st));
        return false;
    }
    c->connected = true;
    return true;
}

void tc_conn_name_peer(struct tc_conn *c)
{
    NDK_SOCKADDR peer;
    memset(&peer, 0, sizeof peer);
    ULONG len = sizeof peer;
    NTSTATUS st = c->cn->Dispatch->NdkGetPeerAddress(c->cn, &peer.sa, &len);
    if (st == STATUS_SUCCESS)
        tc_format_addr(&peer, true, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "? (NdkGetPeerAddress: %s)", tc_status_name(st));
}

bool tc_conn_accept_begin(struct tc_conn *c, ULONG ird, ULONG ord, const void *pdata, ULONG len)
{
    struct tc_completion *k = step_begin(c, "NdkAccept", c->calls.wait_ms);
    if (!k)
        return false;
    step_returned(c, c->cn->Dispatch->NdkAccept(c->cn, c->qp, ird, ord, (PVOID)pdata, len, on_disconnect_event, c->ev,
                                                tc_on_request, k));
    return true;
}

bool tc_conn_accept_end(struct tc_conn *c)
{
    NTSTATUS st = step_end(c);
    if (st != STATUS_SUCCESS) {
        tc_complain(c->role, "%saccept of %s failed: %s%s", c->calls.label, c->peer, tc_status_name(st),
                    st == STATUS_INVALID_BUFFER_SIZE ? " (private data longer than the adapter's MaxCalleeData)"
                    : st == STATUS_IO_TIMEOUT        ? " (no RTR from the initiator within --timeout)"
                                                     : "");
        return false;
    }
    c->connected = true;
    return true;
}

bool tc_conn_accept(struct tc_conn *c, ULONG ird, ULONG ord, const void *pdata, ULONG len)
{
    return tc_conn_accept_begin(c, ird, ord, pdata, len) && tc_conn_accept_end(c);
}

bool tc_conn_reject(struct tc_conn *c, const void *pdata, ULONG len)
{
    NTSTATUS st = c->cn->Dispatch->NdkReject(c->cn, len ? (PVOID)pdata : NULL, len);
    if (st != STATUS_SUCCESS)
        tc_ndk_failed(c->role, "NdkReject", st, "%sthe request from %s", c->calls.label, c->peer);
    return st == STATUS_SUCCESS;
}

bool tc_conn_disconnect_begin(struct tc_conn *c)
{
    if (!c->connected || c->disconnecting)
        return true;
    struct tc_completion *k = step_begin(c, "NdkDisconnect", c->calls.wait_ms);
    if (!k)
        return false;
    c->disconnecting = true;
    step_returned(c, c->cn->Dispatch->NdkDisconnect(c->cn, tc_on_request, k));
    return true;
}

NTSTATUS tc_conn_disconnect_end(struct tc_conn *c)
{
    if (!c->disconnecting)
        return STATUS_SUCCESS;
    NTSTATUS st = step_end(c);
    c->disconnecting = false;
    c->connected = false;
    return st;
}

NTSTATUS tc_conn_disconnect(struct tc_conn *c)
{
    return tc_conn_disconnect_begin(c) ? tc_conn_disconnect_end(c) : STATUS_NO_MEMORY;
}

bool tc_conn_peer_left(struct tc_conn *c, unsigned ms)
{
    return ms ? tc_comp_wait(c->ev->gone, ms) : tc_comp_fired(c->ev->gone);
}

static bool peer_left(void *c)
{
    return tc_conn_peer_left(c, 0);
}

void tc_conn_waiter(struct tc_conn *c, struct tc_cq_wait *w, enum tc_wait_mode mode, long (*take)(void *),
                    void *arg)
{
    *w = (struct tc_cq_wait){.mode = mode,
                             .waker = &c->ev->waker,
                             .cq = {c->cq, c->rcq},
                             .take = take,
                             .arg = arg,
                             .peer_left = peer_left,
                             .peer = c};
}

/* Closes one object if there is one; false if that misbehaved. */
static bool close_one(struct tc_conn *c, NDK_FN_CLOSE_OBJECT fn, void *obj, const char *what)
{
    return !obj || tc_close_object(&c->calls, fn, obj, what);
}

bool tc_conn_teardown(struct tc_conn *c)
{
    bool ok = true;
    if (c->cn)
        ok &= close_one(c, c->cn->Dispatch->NdkCloseConnector, &c->cn->Header, "NdkCloseConnector");
    if (c->qp)
        ok &= close_one(c, c->qp->Dispatch->NdkCloseQp, &c->qp->Header, "NdkCloseQp");
    for (unsigned i = 0; i < c->n_mrs; i++)
        ok &= tc_mr_teardown(c->mrs[i], &c->calls);
    if (c->pd)
        ok &= close_one(c, c->pd->Dispatch->NdkClosePd, &c->pd->Header, "NdkClosePd");
    if (c->rcq)
        ok &= close_one(c, c->rcq->Dispatch->NdkCloseCq, &c->rcq->Header, "NdkCloseCq (receive)");
    if (c->cq)
        ok &= close_one(c, c->cq->Dispatch->NdkCloseCq, &c->cq->Header, "NdkCloseCq");
    c->cn = NULL, c->qp = NULL, c->pd = NULL, c->rcq = NULL, c->cq = NULL;
    bool abandoned = c->calls.abandoned;
    /* Every object is closed: no callback can come any more, unless one
     * was abandoned (then the memory stays for the adapter's close). */
    if (!abandoned) {
        for (unsigned i = 0; i < c->n_mrs; i++)
            tc_mr_free(c->mrs[i]);
        if (c->ev)
            tc_waker_destroy(&c->ev->waker);
    }
    c->n_mrs = 0;
    ok &= tc_calls_release(&c->calls, &c->adapter->grave);
    c->ev = NULL;
    return ok && !abandoned;
}
