/* Listeners: accept TCP, read the MPA Request, hand each valid request to
 * the consumer as a new connector through the connect event. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "mpa_stream.h"
#include "net/linger.h"
#include "net/stream.h"
#include "net/watched.h"
#include "objects.h"

/* A TCP connection accepted by a listener whose MPA Request has not fully
 * arrived yet. */
struct ndk_halfopen {
    struct watched_fd w; /* first: in the listener's set, the socket, its deadline */
    struct ndk_listener_impl *l;
    struct mpa_neg neg; /* reading the Request (wire/mpa_negotiation.h) */
    bool bytes_after;   /* octets came behind the Request (ndk_mpa_stream_read_request) */
    NDK_SOCKADDR local, peer;
};

static struct ndk_engine *listener_lock(struct ndk_listener_impl *l)
{
    ndk_engine_lock(l->obj.engine);
    return l->obj.engine;
}

static struct ndk_listener_impl *listener_from(NDK_LISTENER *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeListener);
    return o ? container_of(o, struct ndk_listener_impl, obj) : NULL;
}

/* The loop of the listener's engine: its socket, its half-open
 * connections and their timers (docs/architecture.md, Engines). A
 * listener never changes engine: its engine's lock guards all of its
 * connection management (listener_lock). */
static struct loop *listener_loop(struct ndk_listener_impl *l)
{
    return &l->obj.engine->loop;
}

/* Takes the connection out of the listener's set and returns its socket,
 * now the caller's; h stays readable until the loop's next iteration. */
static int halfopen_take(struct ndk_halfopen *h)
{
    return watched_fd_take(&h->w);
}

static void halfopen_free(struct ndk_halfopen *h, bool abort_tcp)
{
    int fd = halfopen_take(h);
    if (abort_tcp)
        ndk_tcp_abort(fd);
    else
        ndk_stream_close(fd);
}

/* Sends the rejecting Reply RFC 5044 asks for when markers are required and
 * we cannot produce them (the negotiation built it). Best effort: the
 * socket is fresh, so the small frame fits its send buffer. */
static void reply_markers_reject(struct ndk_halfopen *h)
{
    size_t n;
    const uint8_t *rep = mpa_neg_output(&h->neg, &n);
    if (n)
        (void)ndk_stream_send(h->w.fd, rep, n);
}

/* The connect event's hooks (struct ndk_cb): a listener that is closing or
 * paused must not see the request (5.2.6); the connector is dropped.
 * The listener's engine lock held (the connector is still there). */
static bool connect_event_admit(struct ndk_obj *listener, struct ndk_obj *conn)
{
    struct ndk_listener_impl *l = container_of(listener, struct ndk_listener_impl, obj);
    struct ndk_connector_impl *c = container_of(conn, struct ndk_connector_impl, obj);
    if (l->obj.closing || l->paused) {
        ndk_connector_drop_undelivered(c);
        return false;
    }
    return true;
}

static void connect_event_deliver(struct ndk_obj *listener, struct ndk_obj *conn)
{
    struct ndk_listener_impl *l = container_of(listener, struct ndk_listener_impl, obj);
    l->connect_event(l->connect_ctx, (NDK_CONNECTOR *)&conn->pub);
}

static void backlog_left(struct ndk_listener_impl *l)
{
    if (l->backlog_used)
        l->backlog_used--;
}

static void halfopen_request(struct ndk_halfopen *h, enum mpa_neg_event ev)
{
    struct ndk_listener_impl *l = h->l;
    struct ndk_adapter_impl *ad = l->obj.ad;

    /* The initiator may send nothing until it has our Reply (RFC 5044). */
    if (h->bytes_after) {
        char a[NDK_LOG_ADDR_LEN];
        NDK_LOG(NDK_LL_WARN, NDK_LC_MPA, &l->obj, "%s sent bytes after its MPA Request: closed",
                ndk_log_addr(&h->peer, a));
        halfopen_free(h, true);
        return;
    }
    if (ev == MPA_NEG_MARKERS) {
        char a[NDK_LOG_ADDR_LEN];
        NDK_LOG(NDK_LL_WARN, NDK_LC_MPA, &l->obj, "%s asked for MPA markers: rejected",
                ndk_log_addr(&h->peer, a));
        reply_markers_reject(h);
        /* The initiator closes once it has read the reject. */
        ndk_linger_close(&l->obj.engine->lingers, listener_loop(l), halfopen_take(h), NDK_REJECT_LINGER_MS);
        return;
    }
    if (l->obj.closing || l->paused || l->backlog_used >= ad->opt.ListenBacklog) {
        /* Paused or over the backlog: as if nobody listened (5.11.3). */
        NDK_CM_STAT_INC(ad, requests_refused);
        char a[NDK_LOG_ADDR_LEN];
        NDK_LOG(NDK_LL_INFO, NDK_LC_CM, &l->obj, "request from %s refused: %s",
                ndk_log_addr(&h->peer, a),
                l->obj.closing ? "closing" : l->paused ? "paused" : "backlog full");
        halfopen_free(h, true);
        return;
    }
    /* The socket changes owner, and its registration in the loop with it
     * (watched_fd_hand_over): closing it on failure ends the registration. */
    int fd = watched_fd_hand_over(&h->w);
    struct ndk_connector_impl *c = ndk_connector_new_passive(l, fd, &h->w.watch, &h->local, &h->peer, &h->neg);
    if (!c) {
        ndk_tcp_abort(fd);
        return;
    }
    l->backlog_used++;
    c->in_backlog = true;
    c->backlog_left = backlog_left;

    struct ndk_cb *cb = &c->connect_event;
    cb->kind = CB_CONNECT_EVENT;
    cb->obj = &l->obj;
    cb->u.connect.admit = connect_event_admit;
    cb->u.connect.deliver = connect_event_deliver;
    cb->u.connect.connector = &c->obj;
    NDK_CM_STAT_INC(ad, requests);
    char a[NDK_LOG_ADDR_LEN];
    NDK_LOG(NDK_LL_INFO, NDK_LC_CM, &l->obj, "request from %s (MPA rev %u%s): conn#%u",
            ndk_log_addr(&h->peer, a), h->neg.rev, h->neg.crc ? ", CRC" : "", c->obj.id);
    ndk_cb_queue(ad, cb);
}

static void halfopen_on_io(struct loop_watch *w, uint32_t events)
{
    struct ndk_halfopen *h = container_of(w, struct ndk_halfopen, w.watch);
    if (events & (EPOLLERR | EPOLLHUP)) {
        halfopen_free(h, true);
        return;
    }
    /* Nothing may follow the Request: what does is found by the read. */
    ssize_t io;
    enum mpa_neg_event ev = ndk_mpa_stream_read_request(h->w.fd, &h->neg, &io, &h->bytes_after);
    if (ev == MPA_NEG_MALFORMED) {
        char a[NDK_LOG_ADDR_LEN];
        NDK_LOG(NDK_LL_WARN, NDK_LC_MPA, &h->l->obj, "malformed MPA Request from %s (%s): closed",
                ndk_log_addr(&h->peer, a), mpa_result_describe(h->neg.frame_error));
        halfopen_free(h, true);
    } else if (ev != MPA_NEG_MORE) {
        halfopen_request(h, ev);
    } else if (io != -EAGAIN) {
        halfopen_free(h, true);
    }
}

static void halfopen_on_timer(struct loop_timer *t)
{
    struct ndk_halfopen *h = container_of(t, struct ndk_halfopen, w.timer);
    char a[NDK_LOG_ADDR_LEN];
    NDK_LOG(NDK_LL_INFO, NDK_LC_CM, &h->l->obj, "no MPA Request from %s in time: closed",
            ndk_log_addr(&h->peer, a));
    halfopen_free(h, false);
}

static const struct watched_kind halfopen_kind = {
    .events = EPOLLIN | EPOLLRDHUP,
    .on_io = halfopen_on_io,
    .on_timer = halfopen_on_timer,
};

/* Accepting failed for want of a descriptor (or kernel memory): the socket
 * stays readable, and epoll reports it again at once, so the listener
 * stops watching it for this long instead of spinning; the request waits
 * in the kernel's queue (its initiator's MpaReplyTimeoutMs runs). */
#define ACCEPT_RETRY_MS 100

static void listener_on_retry(struct loop_timer *t)
{
    struct ndk_listener_impl *l = container_of(t, struct ndk_listener_impl, accept_retry);
    if (l->fd >= 0)
        loop_watch_mod(listener_loop(l), &l->watch, EPOLLIN);
}

static void listener_on_accept(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct ndk_listener_impl *l = container_of(w, struct ndk_listener_impl, watch);
    struct ndk_adapter_impl *ad = l->obj.ad;
    /* Bounded per wake-up so one busy listener cannot starve the loop. */
    for (int i = 0; i < 64; i++) {
        NDK_SOCKADDR peer;
        int fd = ndk_tcp_accept(l->fd, &peer);
        if (fd < 0) {
            if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                loop_watch_mod(listener_loop(l), &l->watch, 0);
                loop_timer_arm(listener_loop(l), &l->accept_retry, ACCEPT_RETRY_MS);
            }
            return;
        }
        if (l->obj.closing || l->paused) {
            ndk_tcp_abort(fd);
            continue;
        }
        if (l->halfopen.count >= ad->opt.MaxHalfOpen) {
            /* Make room by resetting the connection that has waited longest
             * for its Request: a flood of silent connections then cannot
             * lock a real initiator out, whose Request comes at once. */
            struct watched_fd *oldest = watched_fd_oldest(&l->halfopen);
            if (oldest)
                halfopen_free(container_of(oldest, struct ndk_halfopen, w), true);
        }
        /* Its first event comes from the loop, after this handler filled it. */
        struct ndk_halfopen *h = watched_fd_new(&l->halfopen, sizeof *h, &halfopen_kind,
                                                listener_loop(l), fd, ad->opt.MpaRequestTimeoutMs);
        if (!h) {
            ndk_tcp_abort(fd);
            continue;
        }
        h->l = l;
        h->peer = peer;
        ndk_tcp_local_addr_of(fd, &l->local, &h->local);
        mpa_neg_start_responder(&h->neg, NDK_MAX_IRD, NDK_MAX_ORD);
    }
}

static void stop_listening(struct ndk_listener_impl *l)
{
    shm_rv_listen_stop(&l->shm);
    loop_timer_cancel(listener_loop(l), &l->accept_retry);
    if (l->fd >= 0) {
        loop_watch_del(listener_loop(l), &l->watch);
        ndk_stream_close(l->fd);
        l->fd = -1;
    }
    while (l->halfopen.head)
        halfopen_free(container_of(l->halfopen.head, struct ndk_halfopen, w), true);
}

static NTSTATUS listener_listen(NDK_LISTENER *pNdkListener, CONST PSOCKADDR pAddress,
                                ULONG AddressLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext;
    struct ndk_listener_impl *l = listener_from(pNdkListener);
    NDK_SOCKADDR local;
    if (!l || !ndk_sockaddr_import(pAddress, AddressLength, &local))
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = l->obj.ad;
    if (!ndk_adapter_owns(ad, &local))
        return STATUS_INVALID_ADDRESS;
    int fd = ndk_tcp_socket(local.sa.sa_family);
    if (fd < 0)
        return ndk_status_from_errno(-fd, NDK_PHASE_BIND);
    ndk_tcp_set_buffers(fd, ad->opt.SocketSendBufferBytes, ad->opt.SocketReceiveBufferBytes);
    ndk_tcp_set_liveness(fd, &ad->opt);
    if (local.sa.sa_family == AF_INET6)
        ndk_tcp_v6only(fd);
    struct ndk_engine *e = listener_lock(l);
    if (l->listening || l->obj.closing) {
        ndk_engine_unlock(e);
        ndk_stream_close(fd);
        return STATUS_INVALID_DEVICE_STATE;
    }
    /* SO_REUSEADDR: a port whose earlier connections sit in TIME_WAIT can
     * be listened on again; our own registry enforces the NDK rules. */
    NTSTATUS st = ports_reserve(&local, PORT_LISTENER, fd, true, &l->port);
    int err = st == STATUS_SUCCESS ? ndk_tcp_listen(fd, 1024) : 0;
    if (err < 0) {
        st = ndk_status_from_errno(-err, NDK_PHASE_BIND);
        ports_unref(l->port);
        l->port = NULL;
    }
    if (st == STATUS_SUCCESS &&
        loop_watch_add(listener_loop(l), &l->watch, fd, EPOLLIN, listener_on_accept) < 0) {
        st = STATUS_INSUFFICIENT_RESOURCES;
        ports_unref(l->port);
        l->port = NULL;
    }
    if (st != STATUS_SUCCESS) {
        ndk_engine_unlock(e);
        ndk_stream_close(fd);
        return st;
    }
    l->fd = fd;
    l->local = local;
    l->listening = true;
    /* Initiators of this host may ask for the fast path (docs/shm.md). */
    if (ndk_shm_allowed(ad))
        shm_rv_listen_start(&l->shm, listener_loop(l), &local);
    ndk_engine_unlock(e);
    return STATUS_SUCCESS;
}

static NTSTATUS listener_get_local_address(NDK_LISTENER *pNdkListener, PSOCKADDR pAddress,
                                           ULONG *pAddressLength)
{
    struct ndk_listener_impl *l = listener_from(pNdkListener);
    if (!l)
        return STATUS_INVALID_PARAMETER;
    struct ndk_engine *e = listener_lock(l);
    NTSTATUS st = l->listening ? ndk_sockaddr_copy_out(&l->local, pAddress, pAddressLength)
                               : STATUS_INVALID_DEVICE_STATE;
    ndk_engine_unlock(e);
    return st;
}

static VOID listener_control_events(NDK_LISTENER *pNdkListener, BOOLEAN Pause)
{
    struct ndk_listener_impl *l = listener_from(pNdkListener);
    if (!l)
        return;
    struct ndk_engine *e = listener_lock(l);
    l->paused = Pause != FALSE;
    ndk_engine_unlock(e);
}

static const NDK_LISTENER_DISPATCH listener_dispatch = {
    .NdkCloseListener = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkListen = listener_listen,
    .NdkGetLocalAddress = listener_get_local_address,
    .NdkControlConnectEvents = listener_control_events,
};

/* close_engine: the listener's engine lock held, not the device lock. */
static void listener_close_engine(struct ndk_obj *obj)
{
    /* E6: refuse new requests at once, even while the close pends. */
    stop_listening(container_of(obj, struct ndk_listener_impl, obj));
}

/* After listener_close_engine (device lock held, maybe another engine's
 * lock): nothing is left on the listener's engine. */
static void listener_release(struct ndk_obj *obj)
{
    struct ndk_listener_impl *l = container_of(obj, struct ndk_listener_impl, obj);
    ports_unref(l->port);
    l->port = NULL;
}

/* Its engine's lock held as well, or the engines stopped: a listener the
 * consumer never closed still listens. */
static void listener_destroy(struct ndk_obj *obj)
{
    stop_listening(container_of(obj, struct ndk_listener_impl, obj));
    listener_release(obj);
    ndk_engine_unplace(obj);
}

static void listener_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct ndk_listener_impl, obj));
}

static const struct ndk_obj_ops listener_ops = {
    .close_engine = listener_close_engine,
    .destroy = listener_destroy,
    .free = listener_free,
    .release = listener_release,
};

NTSTATUS ndk_create_listener(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                             PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                             PVOID RequestContext, NDK_LISTENER **ppNdkListener)
{
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !ConnectEvent || !ppNdkListener)
        return STATUS_INVALID_PARAMETER;
    struct ndk_listener_impl *l = calloc(1, sizeof *l);
    if (!l)
        return STATUS_INSUFFICIENT_RESOURCES;
    loop_timer_init(&l->accept_retry, listener_on_retry);
    l->connect_event = ConnectEvent;
    l->connect_ctx = ConnectEventContext;
    l->fd = -1;
    shm_rv_listen_init(&l->shm);
    pthread_mutex_lock(&ad->dev->lock); /* the view's object list, the placement */
    ndk_obj_init(&l->obj, ad, NdkObjectTypeListener, &listener_dispatch, &listener_ops);
    l->obj.engine = ndk_engine_place_listener(ad);
    pthread_mutex_unlock(&ad->dev->lock);
    *ppNdkListener = (NDK_LISTENER *)&l->obj.pub;
    return STATUS_SUCCESS;
}
