/* The verifier's connector, listener and shared-endpoint tables: the
 * connection-management rules (N1-N4, X6), from the consumer's calls and
 * the completions of its requests (docs/verifier.md). */
#include <stdlib.h>
#include <string.h>

#include "net/loop.h"
#include "verify/vcore.h"

#define CREAL(o) VREAL(o, NDK_CONNECTOR_DISPATCH)

static bool vc_terminal(enum vconn s)
{
    return s == VC_REFUSED || s == VC_REJECTED || s == VC_DISCONNECTED;
}

/* Lock held. */
static void unbind_qp(struct vobj *c)
{
    struct vobj *q = c->u.conn.qp;
    if (q && q->u.qp.conn == c)
        q->u.qp.conn = NULL;
    c->u.conn.qp = NULL;
}

static void vconn_closed(struct vobj *o)
{
    unbind_qp(o);
}

static void vconn_watch(struct vobj *o, uint64_t now)
{
    struct vconnr *c = &o->u.conn;
    if (!c->passive || c->state != VC_INCOMING || c->answered ||
        now - c->event_ms < o->v->connect_event_ms)
        return;
    vreport(o, VR_N3, "NdkConnectEventCallback",
            "answer every connect event promptly: NdkAccept, NdkReject, or close the connector",
            "delivered %llu ms ago and neither accepted, rejected nor closed; the initiator is "
            "still waiting and the listener's backlog entry stays taken",
            (unsigned long long)(now - c->event_ms));
}

/* The QP given to Connect* or Accept*: not connected before (X6), not
 * used by another connector (N4). Lock held; false after a finding. */
static bool qp_usable(struct vobj *c, NDK_QP *qp, const char *call, struct vobj **out,
                      struct vfinding *f)
{
    struct ndk_obj *obj = qp ? ndk_obj_from_pub(qp, NdkObjectTypeQp) : NULL;
    struct vobj *q = obj ? obj->verify : NULL;
    *out = q;
    if (!q || q->v != c->v)
        return true; /* the provider judges it */
    if (q->u.qp.was_connected) {
        vfind(f, q, VR_X6, call, "close a QP that was connected and create a new one",
              "this QP was connected before (and disconnected)");
        return false;
    }
    struct vobj *other = q->u.qp.conn;
    if (other && other != c && !vc_terminal(other->u.conn.state)) {
        vfind(f, q, VR_N4, call, "give each connector its own QP",
              "connector %p already uses this QP", (void *)other->pub);
        return false;
    }
    return true;
}

static void vc_connect_done(void *ctx, NTSTATUS st)
{
    struct vobj *o = ctx;
    struct vconnr *c = &o->u.conn;
    pthread_mutex_lock(&o->v->lock);
    NDK_FN_REQUEST_COMPLETION fn = c->connect_fn;
    void *fctx = c->connect_ctx;
    if (c->state == VC_CONNECTING) {
        c->state = st == STATUS_SUCCESS ? VC_REPLIED : VC_REFUSED;
        if (st != STATUS_SUCCESS)
            unbind_qp(o);
    }
    pthread_mutex_unlock(&o->v->lock);
    if (fn)
        fn(fctx, st);
}

/* Connect and ConnectWithSharedEndpoint: true when the call may start (the
 * completion is then wrapped); false with a finding, and the provider
 * answers the call as it is. */
static bool connect_begin(struct vobj *o, NDK_QP *qp, const char *call,
                          NDK_FN_REQUEST_COMPLETION fn, void *ctx, struct vfinding *f)
{
    struct vconnr *c = &o->u.conn;
    struct vobj *q;
    pthread_mutex_lock(&o->v->lock);
    bool ok = false;
    if (vc_terminal(c->state))
        vfind(f, o, VR_X6, call, "close the connector and create a new one for a new connection",
              "this connector's connection attempt already ended");
    else if (c->state != VC_IDLE)
        vfind(f, o, VR_N2, call, "call NdkConnect once, on a connector from NdkCreateConnector",
              "the connector is %s",
              c->passive ? "a listener's (passive)"
              : c->state == VC_CONNECTING ? "connecting"
                                          : "connected");
    else
        ok = qp_usable(o, qp, call, &q, f);
    if (ok) {
        c->state = VC_CONNECTING;
        c->qp = q;
        if (q)
            q->u.qp.conn = o;
        c->connect_fn = fn;
        c->connect_ctx = ctx;
    }
    pthread_mutex_unlock(&o->v->lock);
    return ok;
}

static NTSTATUS connect_end(struct vobj *o, NTSTATUS st)
{
    if (st == STATUS_PENDING)
        return st;
    pthread_mutex_lock(&o->v->lock);
    struct vconnr *c = &o->u.conn;
    if (c->state == VC_CONNECTING) {
        /* Refused at once, no callback: nothing was started. */
        c->state = st == STATUS_SUCCESS ? VC_REPLIED : VC_IDLE;
        if (st != STATUS_SUCCESS)
            unbind_qp(o);
    }
    pthread_mutex_unlock(&o->v->lock);
    return st;
}

/* A connection attempt: NdkConnect from the address src, or (with_sep)
 * NdkConnectWithSharedEndpoint from the address of sep. */
struct vconnect {
    bool with_sep;
    NDK_QP *qp;
    NDK_SHARED_ENDPOINT *sep;
    PSOCKADDR src;
    ULONG srclen;
    PSOCKADDR dst;
    ULONG dstlen, ird, ord;
    PVOID pd;
    ULONG pdlen;
    NDK_FN_REQUEST_COMPLETION fn;
    void *ctx;
};

/* The provider's entry of the attempt, completing to fn(ctx). */
static NTSTATUS connect_call(struct vobj *o, NDK_CONNECTOR *pc, const struct vconnect *a,
                             NDK_FN_REQUEST_COMPLETION fn, void *ctx)
{
    if (a->with_sep)
        return CREAL(o)->NdkConnectWithSharedEndpoint(pc, a->qp, a->sep, a->dst, a->dstlen, a->ird, a->ord,
                                                      a->pd, a->pdlen, fn, ctx);
    return CREAL(o)->NdkConnect(pc, a->qp, a->src, a->srclen, a->dst, a->dstlen, a->ird, a->ord, a->pd,
                                a->pdlen, fn, ctx);
}

/* Both attempts: one that may start completes through vc_connect_done,
 * which records the outcome and then calls the consumer's completion. */
static NTSTATUS vc_connect_any(NDK_CONNECTOR *pc, const struct vconnect *a)
{
    const char *call = a->with_sep ? "NdkConnectWithSharedEndpoint" : "NdkConnect";
    struct vobj *o = vobj_of(pc);
    if (!vobj_enter(o, call))
        return STATUS_INVALID_DEVICE_STATE;
    struct vfinding f = {0};
    NTSTATUS st;
    if (connect_begin(o, a->qp, call, a->fn, a->ctx, &f))
        st = connect_end(o, connect_call(o, pc, a, vc_connect_done, o));
    else
        st = connect_call(o, pc, a, a->fn, a->ctx);
    vfind_emit(&f, st);
    vobj_leave(o);
    return st;
}

static NTSTATUS vc_connect(NDK_CONNECTOR *pc, NDK_QP *qp, CONST PSOCKADDR src, ULONG srclen,
                           CONST PSOCKADDR dst, ULONG dstlen, ULONG ird, ULONG ord,
                           CONST PVOID pd, ULONG pdlen, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_connect_any(pc, &(struct vconnect){.qp = qp, .src = src, .srclen = srclen, .dst = dst,
                                                 .dstlen = dstlen, .ird = ird, .ord = ord, .pd = pd,
                                                 .pdlen = pdlen, .fn = fn, .ctx = ctx});
}

static NTSTATUS vc_connect_sep(NDK_CONNECTOR *pc, NDK_QP *qp, NDK_SHARED_ENDPOINT *sep,
                               CONST PSOCKADDR dst, ULONG dstlen, ULONG ird, ULONG ord,
                               CONST PVOID pd, ULONG pdlen, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_connect_any(pc, &(struct vconnect){.with_sep = true, .qp = qp, .sep = sep, .dst = dst,
                                                 .dstlen = dstlen, .ird = ird, .ord = ord, .pd = pd,
                                                 .pdlen = pdlen, .fn = fn, .ctx = ctx});
}

/* The connection is up (Accept or CompleteConnect succeeded). Lock held. */
static void connected(struct vobj *o, NTSTATUS st)
{
    struct vconnr *c = &o->u.conn;
    if (c->state != VC_COMPLETING)
        return;
    c->state = st == STATUS_SUCCESS ? VC_CONNECTED : VC_DISCONNECTED;
    if (c->qp && st == STATUS_SUCCESS)
        c->qp->u.qp.was_connected = true;
}

static void vc_complete_done(void *ctx, NTSTATUS st)
{
    struct vobj *o = ctx;
    pthread_mutex_lock(&o->v->lock);
    NDK_FN_REQUEST_COMPLETION fn = o->u.conn.complete_fn;
    void *fctx = o->u.conn.complete_ctx;
    connected(o, st);
    pthread_mutex_unlock(&o->v->lock);
    if (fn)
        fn(fctx, st);
}

/* The connection ended: the consumer's disconnect callback of the answer,
 * in the form it gave (the other is NULL), hears it after the verifier. */
static void disc_event(struct vobj *o, ULONG reason)
{
    pthread_mutex_lock(&o->v->lock);
    NDK_FN_DISCONNECT_EVENT_CALLBACK fn = o->u.conn.disc_fn;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX fn_ex = o->u.conn.disc_fn_ex;
    void *fctx = o->u.conn.disc_ctx;
    if (o->u.conn.state == VC_CONNECTED)
        o->u.conn.state = VC_DISCONNECTED;
    pthread_mutex_unlock(&o->v->lock);
    if (fn)
        fn(fctx);
    if (fn_ex)
        fn_ex(fctx, reason);
}

static void vc_disc_event(void *ctx)
{
    disc_event(ctx, 0);
}

static void vc_disc_event_ex(void *ctx, ULONG reason)
{
    disc_event(ctx, reason);
}

/* An answer to a connection: NdkCompleteConnect[Ex] (accept false) or
 * NdkAccept[Ex] (accept true, with the QP, read limits and private data),
 * with the consumer's callbacks: the disconnect event in its plain or Ex
 * form (ex; the other is NULL), its context, and the request's
 * completion. */
struct vanswer {
    bool accept, ex;
    NDK_QP *qp;
    ULONG ird, ord;
    PVOID pd;
    ULONG pdlen;
    NDK_FN_DISCONNECT_EVENT_CALLBACK dfn;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX dfn_ex;
    void *dctx;
    NDK_FN_REQUEST_COMPLETION fn;
    void *ctx;
};

/* True when the answer may start (the consumer's callbacks are then kept
 * for the verifier's to call); false with a finding. */
static bool answer_begin(struct vobj *o, const char *call, const struct vanswer *a, struct vfinding *f)
{
    bool accept = a->accept;
    struct vconnr *c = &o->u.conn;
    enum vconn want = accept ? VC_INCOMING : VC_REPLIED;
    pthread_mutex_lock(&o->v->lock);
    if (c->state != want || c->passive != accept) {
        const char *what = c->passive != accept
                               ? (accept ? "an initiator's connector (NdkConnect)"
                                         : "a listener's connector (a connect event)")
                           : c->state == VC_COMPLETING || c->state == VC_CONNECTED ||
                                   c->state == VC_DISCONNECTED
                               ? "answered already (Accept or CompleteConnect was called)"
                           : c->state == VC_REJECTED ? "rejected already"
                                                     : "not connecting (no successful Connect)";
        vfind(f, o, VR_N2, call,
              accept ? "call NdkAccept once, on a connector from a connect event"
                     : "call NdkCompleteConnect once, after NdkConnect completed successfully",
              "the connector is %s", what);
        pthread_mutex_unlock(&o->v->lock);
        return false;
    }
    struct vobj *q = NULL;
    if (accept && !qp_usable(o, a->qp, call, &q, f)) {
        pthread_mutex_unlock(&o->v->lock);
        return false;
    }
    if (accept) {
        c->qp = q;
        if (q)
            q->u.qp.conn = o;
    }
    c->answered = true;
    c->state = VC_COMPLETING;
    c->complete_fn = a->fn;
    c->complete_ctx = a->ctx;
    c->disc_fn = a->dfn;
    c->disc_fn_ex = a->dfn_ex;
    c->disc_ctx = a->dctx;
    pthread_mutex_unlock(&o->v->lock);
    return true;
}

static NTSTATUS answer_end(struct vobj *o, NTSTATUS st, const struct vfinding *f)
{
    if (!f->o && st != STATUS_PENDING) {
        pthread_mutex_lock(&o->v->lock);
        connected(o, st);
        pthread_mutex_unlock(&o->v->lock);
    }
    vfind_emit(f, st);
    vobj_leave(o);
    return st;
}

/* The provider's entry of the answer the consumer called. */
static NTSTATUS answer_call(struct vobj *o, NDK_CONNECTOR *pc, const struct vanswer *a)
{
    if (!a->accept && !a->ex)
        return CREAL(o)->NdkCompleteConnect(pc, a->dfn, a->dctx, a->fn, a->ctx);
    if (!a->accept)
        return CREAL(o)->NdkCompleteConnectEx(pc, a->dfn_ex, a->dctx, a->fn, a->ctx);
    if (!a->ex)
        return CREAL(o)->NdkAccept(pc, a->qp, a->ird, a->ord, a->pd, a->pdlen, a->dfn, a->dctx, a->fn,
                                   a->ctx);
    return CREAL(o)->NdkAcceptEx(pc, a->qp, a->ird, a->ord, a->pd, a->pdlen, a->dfn_ex, a->dctx, a->fn,
                                 a->ctx);
}

/* The four answers: a call that may start goes to the provider with the
 * verifier's callbacks in place of the consumer's (which they call in
 * turn), so the verifier sees the connection complete and end; one that
 * may not goes with the consumer's own, and the consumer gets the
 * provider's status. */
static NTSTATUS vc_answer(NDK_CONNECTOR *pc, struct vanswer a)
{
    static const char *const calls[2][2] = {{"NdkCompleteConnect", "NdkCompleteConnectEx"},
                                            {"NdkAccept", "NdkAcceptEx"}};
    const char *call = calls[a.accept][a.ex];
    struct vobj *o = vobj_of(pc);
    if (!vobj_enter(o, call))
        return STATUS_INVALID_DEVICE_STATE;
    struct vfinding f = {0};
    if (answer_begin(o, call, &a, &f)) {
        a.dfn = a.dfn ? vc_disc_event : NULL;
        a.dfn_ex = a.dfn_ex ? vc_disc_event_ex : NULL;
        a.dctx = o;
        a.fn = vc_complete_done;
        a.ctx = o;
    }
    return answer_end(o, answer_call(o, pc, &a), &f);
}

static NTSTATUS vc_complete_connect(NDK_CONNECTOR *pc, NDK_FN_DISCONNECT_EVENT_CALLBACK dfn,
                                    PVOID dctx, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_answer(pc, (struct vanswer){.dfn = dfn, .dctx = dctx, .fn = fn, .ctx = ctx});
}

static NTSTATUS vc_complete_connect_ex(NDK_CONNECTOR *pc, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX dfn,
                                       PVOID dctx, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_answer(pc, (struct vanswer){.ex = true, .dfn_ex = dfn, .dctx = dctx, .fn = fn, .ctx = ctx});
}

static NTSTATUS vc_accept(NDK_CONNECTOR *pc, NDK_QP *qp, ULONG ird, ULONG ord, CONST PVOID pd,
                          ULONG pdlen, NDK_FN_DISCONNECT_EVENT_CALLBACK dfn, PVOID dctx,
                          NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_answer(pc, (struct vanswer){.accept = true, .qp = qp, .ird = ird, .ord = ord, .pd = pd,
                                          .pdlen = pdlen, .dfn = dfn, .dctx = dctx, .fn = fn, .ctx = ctx});
}

static NTSTATUS vc_accept_ex(NDK_CONNECTOR *pc, NDK_QP *qp, ULONG ird, ULONG ord, CONST PVOID pd,
                             ULONG pdlen, NDK_FN_DISCONNECT_EVENT_CALLBACK_EX dfn, PVOID dctx,
                             NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    return vc_answer(pc, (struct vanswer){.accept = true, .ex = true, .qp = qp, .ird = ird, .ord = ord,
                                          .pd = pd, .pdlen = pdlen, .dfn_ex = dfn, .dctx = dctx, .fn = fn,
                                          .ctx = ctx});
}

static NTSTATUS vc_reject(NDK_CONNECTOR *pc, CONST PVOID pd, ULONG pdlen)
{
    struct vobj *o = vobj_of(pc);
    if (!vobj_enter(o, "NdkReject"))
        return STATUS_INVALID_DEVICE_STATE;
    struct vconnr *c = &o->u.conn;
    struct vfinding f = {0};
    pthread_mutex_lock(&o->v->lock);
    enum vconn s = c->state;
    if ((c->passive && s == VC_INCOMING) || (!c->passive && s == VC_REPLIED)) {
        c->state = VC_REJECTED;
        c->answered = true;
        unbind_qp(o);
    } else {
        vfind(&f, o, VR_N2, "NdkReject",
              "reject once, on a connector from a connect event or after NdkConnect completed "
              "successfully, instead of NdkAccept or NdkCompleteConnect",
              "the connector is %s",
              s == VC_REJECTED                                             ? "rejected already"
              : s == VC_COMPLETING || s == VC_CONNECTED || s == VC_DISCONNECTED
                  ? "accepted or completed already"
                  : "not connecting");
    }
    pthread_mutex_unlock(&o->v->lock);
    NTSTATUS st = CREAL(o)->NdkReject(pc, pd, pdlen);
    vfind_emit(&f, st);
    vobj_leave(o);
    return st;
}

static NTSTATUS vc_get_connection_data(NDK_CONNECTOR *pc, ULONG *ird, ULONG *ord, PVOID pd,
                                       ULONG *pdlen)
{
    struct vobj *o = vobj_of(pc);
    if (!vobj_enter(o, "NdkGetConnectionData"))
        return STATUS_INVALID_DEVICE_STATE;
    struct vconnr *c = &o->u.conn;
    pthread_mutex_lock(&o->v->lock);
    enum vconn s = c->state;
    pthread_mutex_unlock(&o->v->lock);
    bool window = c->passive ? s == VC_INCOMING : s == VC_REPLIED || s == VC_REFUSED;
    struct vfinding f = {0};
    const char *advice = c->passive
                             ? "call it from the connect event until NdkAccept or NdkReject"
                             : "call it after NdkConnect completed, until NdkCompleteConnect or "
                               "NdkReject";
    bool late = s == VC_COMPLETING || s == VC_CONNECTED || s == VC_DISCONNECTED;
    if (late || s == VC_REJECTED)
        vfind(&f, o, VR_N1, "NdkGetConnectionData", advice,
              "called after %s (a provider may have freed the peer's data by then)",
              s == VC_REJECTED ? "NdkReject" : c->passive ? "NdkAccept" : "NdkCompleteConnect");
    else if (!window)
        vfind(&f, o, VR_N1, "NdkGetConnectionData", advice, "%s",
              s == VC_IDLE ? "the connector never connected" : "NdkConnect has not completed");
    /* After Accept or CompleteConnect libndk still answers, as Windows
     * providers do: the call goes on, reported. */
    NTSTATUS st = CREAL(o)->NdkGetConnectionData(pc, ird, ord, pd, pdlen);
    vfind_emit(&f, st);
    vobj_leave(o);
    return st;
}

static NTSTATUS vc_local_address(NDK_CONNECTOR *pc, PSOCKADDR a, ULONG *len)
{
    struct vobj *o = vobj_of(pc);
    VFORWARD(o, "NdkGetLocalAddress", STATUS_INVALID_DEVICE_STATE,
             CREAL(o)->NdkGetLocalAddress(pc, a, len));
}

static NTSTATUS vc_peer_address(NDK_CONNECTOR *pc, PSOCKADDR a, ULONG *len)
{
    struct vobj *o = vobj_of(pc);
    VFORWARD(o, "NdkGetPeerAddress", STATUS_INVALID_DEVICE_STATE,
             CREAL(o)->NdkGetPeerAddress(pc, a, len));
}

static void vc_disconnect_done(void *ctx, NTSTATUS st)
{
    struct vobj *o = ctx;
    pthread_mutex_lock(&o->v->lock);
    NDK_FN_REQUEST_COMPLETION fn = o->u.conn.disconnect_fn;
    void *fctx = o->u.conn.disconnect_ctx;
    o->u.conn.state = VC_DISCONNECTED;
    pthread_mutex_unlock(&o->v->lock);
    if (fn)
        fn(fctx, st);
}

static NTSTATUS vc_disconnect(NDK_CONNECTOR *pc, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    struct vobj *o = vobj_of(pc);
    if (!vobj_enter(o, "NdkDisconnect"))
        return STATUS_INVALID_DEVICE_STATE;
    pthread_mutex_lock(&o->v->lock);
    o->u.conn.disconnect_fn = fn;
    o->u.conn.disconnect_ctx = ctx;
    pthread_mutex_unlock(&o->v->lock);
    NTSTATUS st = CREAL(o)->NdkDisconnect(pc, vc_disconnect_done, o);
    if (st != STATUS_PENDING) {
        pthread_mutex_lock(&o->v->lock);
        if (o->u.conn.state == VC_CONNECTED || st == STATUS_SUCCESS)
            o->u.conn.state = VC_DISCONNECTED;
        pthread_mutex_unlock(&o->v->lock);
    }
    vobj_leave(o);
    return st;
}

const NDK_CONNECTOR_DISPATCH vconnector_dispatch = {
    .NdkCloseConnector = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkConnect = vc_connect,
    .NdkConnectWithSharedEndpoint = vc_connect_sep,
    .NdkCompleteConnect = vc_complete_connect,
    .NdkAccept = vc_accept,
    .NdkReject = vc_reject,
    .NdkGetConnectionData = vc_get_connection_data,
    .NdkGetLocalAddress = vc_local_address,
    .NdkGetPeerAddress = vc_peer_address,
    .NdkDisconnect = vc_disconnect,
    .NdkCompleteConnectEx = vc_complete_connect_ex,
    .NdkAcceptEx = vc_accept_ex,
};

/* ---- listener ---- */

void vlistener_event(void *ctx, NDK_CONNECTOR *pc)
{
    struct vobj *l = ctx;
    struct vobj *o = vobj_new(l->v, &vconnector_type);
    if (o) {
        o->u.conn.passive = true;
        o->u.conn.state = VC_INCOMING;
        o->u.conn.event_ms = loop_now_ms();
        vobj_bind(o, pc);
    }
    l->u.listener.event_fn(l->u.listener.event_ctx, pc);
}

#define LREAL(o) VREAL(o, NDK_LISTENER_DISPATCH)

static NTSTATUS vl_listen(NDK_LISTENER *pl, CONST PSOCKADDR a, ULONG len,
                          NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    struct vobj *o = vobj_of(pl);
    VFORWARD(o, "NdkListen", STATUS_INVALID_DEVICE_STATE, LREAL(o)->NdkListen(pl, a, len, fn, ctx));
}

static NTSTATUS vl_local_address(NDK_LISTENER *pl, PSOCKADDR a, ULONG *len)
{
    struct vobj *o = vobj_of(pl);
    VFORWARD(o, "NdkGetLocalAddress", STATUS_INVALID_DEVICE_STATE,
             LREAL(o)->NdkGetLocalAddress(pl, a, len));
}

static VOID vl_control(NDK_LISTENER *pl, BOOLEAN pause)
{
    struct vobj *o = vobj_of(pl);
    VFORWARD_VOID(o, "NdkControlConnectEvents", LREAL(o)->NdkControlConnectEvents(pl, pause));
}

const NDK_LISTENER_DISPATCH vlistener_dispatch = {
    .NdkCloseListener = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkListen = vl_listen,
    .NdkGetLocalAddress = vl_local_address,
    .NdkControlConnectEvents = vl_control,
};

/* ---- shared endpoint ---- */

static NTSTATUS vs_local_address(NDK_SHARED_ENDPOINT *ps, PSOCKADDR a, ULONG *len)
{
    struct vobj *o = vobj_of(ps);
    VFORWARD(o, "NdkGetLocalAddress", STATUS_INVALID_DEVICE_STATE,
             VREAL(o, NDK_SHARED_ENDPOINT_DISPATCH)->NdkGetLocalAddress(ps, a, len));
}

const NDK_SHARED_ENDPOINT_DISPATCH vsep_dispatch = {
    .NdkCloseSharedEndpoint = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkGetLocalAddress = vs_local_address,
};

const struct vtype vconnector_type = {NdkObjectTypeConnector, &vconnector_dispatch, NULL, vconn_closed,
                                      vconn_watch};
const struct vtype vlistener_type = {NdkObjectTypeListener, &vlistener_dispatch, NULL, NULL, NULL};
const struct vtype vsep_type = {NdkObjectTypeSharedEndpoint, &vsep_dispatch, NULL, NULL, NULL};
