/*
 * Connectors: NDK's three-leg connection establishment on the iWARP wire.
 *
 *   NdkConnect          TCP connect, MPA Request (v2, RFC 6581 word, A=1)
 *   (passive event)     the listener read the Request: connect event
 *   NdkAccept           MPA Reply
 *   Connect completes   the Reply arrived
 *   NdkCompleteConnect  the RTR (peer-to-peer) ...
 *   Accept completes    ... arrived at the responder
 *
 * With a client/server initiator (A=0, Linux siw's default) there is no third
 * leg on the wire: NdkAccept completes when its Reply is written. The MPA
 * negotiation (both roles) is wire/mpa_negotiation.c, sans-IO; this file
 * owns the socket, the timers and the NDK state, moves the negotiation's
 * bytes and acts on its decisions (docs/behaviour.md lists the choices made
 * where NDKPI is silent).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "mpa_stream.h"
#include "net/linger.h"
#include "net/stream.h"
#include "objects.h"
#include "wire/term.h"
#include "xp_shm.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

static struct ndk_connector_impl *conn_from(NDK_CONNECTOR *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeConnector);
    return o ? container_of(o, struct ndk_connector_impl, obj) : NULL;
}

/* The loop of the connector's engine: its QP's once NdkConnect or
 * NdkAccept gave it one (conn_place), before that the listener's or the
 * first. That engine's lock or mask_lock held (conn_place changes it under
 * both). */
static struct loop *conn_loop(struct ndk_connector_impl *c)
{
    return &c->obj.engine->loop;
}

static void conn_on_io(struct loop_watch *w, uint32_t events);
static void maybe_finish_disconnect(struct ndk_connector_impl *c);
static NTSTATUS finish_complete_connect(struct ndk_connector_impl *c, struct shm_conn *setup);

/* (Re)registers the socket for exactly these events. Errors and hang-ups are
 * always reported by epoll. */
static void apply_mask(struct ndk_connector_impl *c)
{
    uint32_t events = c->base_events | (c->want_out ? EPOLLOUT : 0);
    if (c->input_leased)
        events &= ~(uint32_t)EPOLLIN;
    if (c->input_paused)
        events &= ~(uint32_t)(EPOLLIN | EPOLLRDHUP);
    if (c->watch.added) {
        loop_watch_mod(conn_loop(c), &c->watch, events);
    } else {
        loop_watch_allow_unlocked(&c->watch); /* the data path's, once established */
        loop_watch_add(conn_loop(c), &c->watch, c->fd, events, conn_on_io);
    }
}

static void conn_watch(struct ndk_connector_impl *c, uint32_t events)
{
    if (c->fd < 0)
        return;
    pthread_mutex_lock(&c->mask_lock);
    c->base_events = events;
    apply_mask(c);
    pthread_mutex_unlock(&c->mask_lock);
}

/* ---- the data path's transport: the TCP socket ---- */

static struct ndk_connector_impl *tr_conn(struct ndk_transport *t)
{
    return t->owner;
}

static ssize_t tr_readv(struct ndk_transport *t, const struct iovec *iov, int n)
{
    return ndk_stream_readv(tr_conn(t)->fd, iov, n);
}

static ssize_t tr_writev(struct ndk_transport *t, const struct iovec *iov, int n)
{
    return ndk_stream_writev(tr_conn(t)->fd, iov, n);
}

/* Sets one of the flags apply_mask reads (EPOLLOUT wanted, input leased)
 * and re-registers when it changed. Posting and polling threads call this
 * too: only the leaf mask lock is taken. */
static void set_mask_flag(struct ndk_connector_impl *c, bool *flag, bool on)
{
    pthread_mutex_lock(&c->mask_lock);
    if (*flag != on && c->fd >= 0 && c->watch.added) {
        *flag = on;
        apply_mask(c);
    }
    pthread_mutex_unlock(&c->mask_lock);
}

static void tr_want_write(struct ndk_transport *t, bool on)
{
    struct ndk_connector_impl *c = tr_conn(t);
    set_mask_flag(c, &c->want_out, on);
}

static void tr_lease_input(struct ndk_transport *t, bool leased)
{
    struct ndk_connector_impl *c = tr_conn(t);
    set_mask_flag(c, &c->input_leased, leased);
}

static void tr_pause_input(struct ndk_transport *t, bool paused)
{
    struct ndk_connector_impl *c = tr_conn(t);
    set_mask_flag(c, &c->input_paused, paused);
}

static void tr_shutdown_write(struct ndk_transport *t)
{
    struct ndk_connector_impl *c = tr_conn(t);
    ndk_stream_shutdown_write(c->fd);
    c->fin_sent = true;
}

static void tr_failed(struct ndk_transport *t, bool peer_reset)
{
    (void)peer_reset;
    /* Any thread may get here, without the adapter lock: shutting the
     * receive side down makes the socket report the end of its input, and
     * the progress thread tears the connection down (a reset: the QP failed)
     * from that event; the fd stays open until then. Not the send side: a
     * FIN now would tell the peer the connection ended gracefully. */
    struct ndk_connector_impl *c = tr_conn(t);
    set_mask_flag(c, &c->input_paused, false); /* that event must be seen */
    ndk_stream_shutdown_read(c->fd);
}

/* The largest ULPDU whose FPDU fits one TCP segment now. */
static size_t socket_mulpdu(int fd)
{
    return mpa_mulpdu(ndk_stream_mss(fd)); /* capped at the 16-bit ULPDU_Length */
}

static size_t tr_mulpdu(struct ndk_transport *t)
{
    return socket_mulpdu(tr_conn(t)->fd);
}

static void conn_dp_io(struct ndk_connector_impl *c, uint32_t events);
static bool conn_dp_unlocked(struct loop_watch *w, uint32_t events);

static void tr_input_pending(struct ndk_transport *t)
{
    conn_dp_io(tr_conn(t), EPOLLIN);
}

static const struct ndk_transport_ops socket_transport = {
    .readv = tr_readv,
    .writev = tr_writev,
    .want_write = tr_want_write,
    .shutdown_write = tr_shutdown_write,
    .failed = tr_failed,
    .lease_input = tr_lease_input,
    .pause_input = tr_pause_input,
    .input_pending = tr_input_pending,
    .mulpdu = tr_mulpdu,
};

/* Connection management wants the socket's events under the engine's lock
 * again (docs/architecture.md, Threads and locks). An engine already in
 * conn_dp_unlocked finishes there: it takes the lock for whatever its
 * input leaves to decide. */
static void conn_dp_lock_events(struct ndk_connector_impl *c)
{
    loop_watch_set_unlocked(&c->watch, NULL);
}

/* Ends the TCP connection: abortive (RST) or graceful (FIN). */
static void stop_data_path(struct ndk_connector_impl *c)
{
    if (c->dp_started && c->qp) {
        /* After this no thread reads or writes the socket (an engine in
         * the middle of input holds the QP's rx_lock or sq_lock, which
         * ndk_qp_stop waits for); everything outstanding on the QP
         * completes (flushed). */
        c->dp_started = false;
        conn_dp_lock_events(c);
        ndk_qp_stop(c->qp);
    }
}

static void conn_close_wire(struct ndk_connector_impl *c, bool abortive)
{
    shm_rv_stop(&c->rv);
    if (abortive && c->shm && c->dp_started)
        ndk_shm_abort(c->qp);
    /* Unread octets at close() make the kernel reset instead of closing
     * gracefully, hence the drain below; once the data path's read met the
     * peer's FIN there are none, and the drain's read is saved. */
    bool drained = !abortive && c->dp_started && !c->shm && c->qp && ndk_qp_read_eof(c->qp);
    stop_data_path(c);
    loop_watch_del(conn_loop(c), &c->watch);
    loop_timer_cancel(conn_loop(c), &c->timer);
    if (c->fd < 0)
        return;
    if (abortive) {
        ndk_tcp_abort(c->fd);
    } else {
        if (!c->fin_sent)
            ndk_stream_shutdown_write(c->fd);
        if (!drained)
            ndk_stream_drain(c->fd);
        ndk_stream_close(c->fd);
    }
    c->fd = -1;
}

static void qp_detach_connected(struct ndk_connector_impl *c)
{
    if (c->qp)
        c->qp->connected = false;
}

static void close_pd_window(struct ndk_connector_impl *c)
{
    c->pd_window_open = false;
    free(c->peer_pd);
    c->peer_pd = NULL;
    c->peer_pd_len = 0;
}

static void leave_backlog(struct ndk_connector_impl *c)
{
    if (c->in_backlog) {
        c->in_backlog = false;
        c->backlog_left(c->listener);
    }
}

/* ---- log lines (log.h) ---- */

static const char *reason_name(ULONG why)
{
    switch (why) {
    case NDK_DISCONNECT_REASON_PEER_CLOSED: return "peer closed";
    case NDK_DISCONNECT_REASON_ABORTED: return "aborted";
    case NDK_DISCONNECT_REASON_TERMINATE_RECEIVED: return "Terminate received";
    case NDK_DISCONNECT_REASON_TERMINATE_SENT: return "Terminate sent";
    case NDK_DISCONNECT_REASON_LOCAL_ERROR: return "local error";
    default: return "unknown";
    }
}

#define CONN_LOG(lvl, cat, c, fmt, ...)                                                          \
    do {                                                                                       \
        if (NDK_LOG_ON(lvl, cat)) {                                                            \
            char la_[NDK_LOG_ADDR_LEN], pa_[NDK_LOG_ADDR_LEN];                                 \
            NDK_LOG(lvl, cat, &(c)->obj, "local %s peer %s: " fmt,                             \
                    ndk_log_addr(&(c)->local, la_), ndk_log_addr(&(c)->peer, pa_), __VA_ARGS__);\
        }                                                                                      \
    } while (0)

/* A Terminate that connection set-up sends (the data path logs its own). */
static void log_setup_term(struct ndk_connector_impl *c, uint8_t layer, uint8_t etype, uint8_t code)
{
    NDK_CM_STAT_INC(c->obj.ad, setup_term_tx);
    CONN_LOG(NDK_LL_WARN, NDK_LC_DP, c, "Terminate sent: %s", term_describe(layer, etype, code));
}

/* The connection is over (refused, aborted, timed out, disconnected). */
static void conn_dead(struct ndk_connector_impl *c, bool abortive)
{
    conn_close_wire(c, abortive);
    c->state = CONN_DEAD;
    qp_detach_connected(c);
    leave_backlog(c);
}

/* Why an established connection ended, for the _EX disconnect callbacks:
 * what the data path recorded (a Terminate either way, a broken stream, an
 * overflowed CQ), else how the socket ended. */
static ULONG disconnect_reason(struct ndk_connector_impl *c, bool reset)
{
    ULONG why = c->qp ? ndk_qp_end_reason(c->qp) : 0;
    if (why)
        return why;
    if (c->qp_start_failed)
        return NDK_DISCONNECT_REASON_LOCAL_ERROR;
    return reset ? NDK_DISCONNECT_REASON_ABORTED : NDK_DISCONNECT_REASON_PEER_CLOSED;
}

static void fire_disconnect_event(struct ndk_connector_impl *c, ULONG reason)
{
    /* At most once (X3); never for a local Disconnect or close (X2). */
    if (c->disc_event_done || c->local_disconnect || c->obj.closing)
        return;
    c->disc_event_done = true;
    CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "disconnected: %s", reason_name(reason));
    if (!c->disc_fn && !c->disc_fn_ex)
        return;
    c->disc_event.kind = CB_DISCONNECT;
    c->disc_event.obj = &c->obj;
    c->disc_event.u.disc.fn = c->disc_fn;
    c->disc_event.u.disc.fn_ex = c->disc_fn_ex;
    c->disc_event.u.disc.ctx = c->disc_ctx;
    c->disc_event.u.disc.reason = reason;
    ndk_cb_queue(c->obj.ad, &c->disc_event);
}

/* ---- sending startup frames ---- */

/* Writes what is left of c->tx. Returns 0 when all is out, 1 when the
 * socket is full (EPOLLOUT will resume it), or -errno. */
static int flush_tx(struct ndk_connector_impl *c)
{
    while (c->tx_off < c->tx_len) {
        ssize_t n = ndk_stream_send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off);
        if (n < 0)
            return n == -EAGAIN ? 1 : (int)n;
        c->tx_off += (size_t)n;
    }
    c->tx_len = c->tx_off = 0;
    return 0;
}

/* Sends the frame the negotiation produced last. Its octets stay in the
 * negotiation's output until written; a later frame replaces what is left
 * of an earlier one. Returns as flush_tx. */
static int send_output(struct ndk_connector_impl *c)
{
    c->tx = mpa_neg_output(&c->neg, &c->tx_len);
    c->tx_off = 0;
    return flush_tx(c);
}

/* Did the peer reset or close? Peeks without consuming FPDU bytes. */
static bool peer_went_away(struct ndk_connector_impl *c)
{
    if (c->peer_gone || c->fd < 0)
        return true;
    int n = ndk_stream_peek(c->fd);
    if (n == 0 || (n < 0 && n != -EAGAIN)) {
        c->peer_gone = true;
        return true;
    }
    return false;
}

/* ---- active side ---- */

static void connect_fail(struct ndk_connector_impl *c, NTSTATUS st, bool abortive)
{
    if (st == STATUS_CONNECTION_REFUSED)
        NDK_CM_STAT_INC(c->obj.ad, connect_refused);
    else
        NDK_CM_STAT_INC(c->obj.ad, connect_failed);
    CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "connect failed: %s", ndk_status_name(st));
    conn_dead(c, abortive);
    ndk_req_complete(&c->connect_req, st);
}

static void start_mpa_request(struct ndk_connector_impl *c)
{
    int r = flush_tx(c);
    if (r < 0) {
        connect_fail(c, ndk_status_from_errno(-r, NDK_PHASE_CONNECT), true);
        return;
    }
    c->state = CONN_MPA_REPLY;
    conn_watch(c, EPOLLIN | EPOLLRDHUP | (r == 1 ? EPOLLOUT : 0));
    loop_timer_arm(conn_loop(c), &c->timer, c->obj.ad->opt.MpaReplyTimeoutMs);
}

/* The private data of the peer's frame, kept for NdkGetConnectionData
 * (7.2: a reject's too). false: no memory. */
static bool keep_peer_pd(struct ndk_connector_impl *c)
{
    uint16_t len;
    const uint8_t *pd = mpa_neg_peer_pd(&c->neg, &len);
    free(c->peer_pd);
    c->peer_pd = NULL;
    c->peer_pd_len = len;
    if (len) {
        c->peer_pd = malloc(len);
        if (!c->peer_pd)
            return false;
        memcpy(c->peer_pd, pd, len);
    }
    return true;
}

/* Sends the Terminate the negotiation refused the peer's frame with. */
static void send_setup_term(struct ndk_connector_impl *c)
{
    log_setup_term(c, 2, 0, c->neg.term_code);
    send_output(c);
}

static void on_reply(struct ndk_connector_impl *c, enum mpa_neg_event ev)
{
    const struct mpa_frame *rep = &c->neg.peer_frame;
    if (ev == MPA_NEG_MALFORMED) {
        CONN_LOG(NDK_LL_WARN, NDK_LC_MPA, c, "malformed MPA Reply: %s", mpa_result_describe(c->neg.frame_error));
        connect_fail(c, STATUS_INVALID_NETWORK_RESPONSE, true);
        return;
    }
    if (ev == MPA_NEG_UNUSABLE) {
        CONN_LOG(NDK_LL_WARN, NDK_LC_MPA, c, "unusable MPA Reply (rev %u%s%s)", rep->rev,
                 rep->markers ? ", markers" : "", rep->enhanced ? ", enhanced" : "");
        connect_fail(c, STATUS_INVALID_NETWORK_RESPONSE, true);
        return;
    }
    if (!keep_peer_pd(c)) {
        connect_fail(c, STATUS_INSUFFICIENT_RESOURCES, true);
        return;
    }
    c->pd_window_open = true; /* the accept's or the reject's private data */
    if (ev == MPA_NEG_PEER_REJECTED) {
        /* 7.2: the reject private data stays readable after the refusal. */
        NDK_CM_STAT_INC(c->obj.ad, connect_refused);
        CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "connect rejected by the peer (%u octets of private data)",
                 (unsigned)rep->pd_len);
        conn_close_wire(c, false);
        c->state = CONN_DEAD;
        qp_detach_connected(c);
        ndk_req_complete(&c->connect_req, STATUS_CONNECTION_REFUSED);
        return;
    }
    if (ev == MPA_NEG_REFUSED_TERM) {
        send_setup_term(c);
        connect_fail(c, STATUS_INVALID_NETWORK_RESPONSE, true);
        return;
    }
    loop_timer_cancel(conn_loop(c), &c->timer);
    c->state = CONN_REPLIED;
    /* From here the peer's bytes are FPDUs for the data path, which
     * established() starts; until then only the peer going away is ours.
     * The interest in input stays until such bytes come (conn_on_io): a
     * peer that waits for our RTR sends none, and two epoll_ctl per
     * connection are saved. */
    ndk_req_complete(&c->connect_req, STATUS_SUCCESS);
}

static void read_reply(struct ndk_connector_impl *c)
{
    ssize_t io;
    enum mpa_neg_event ev = ndk_mpa_stream_read(c->fd, &c->neg, &io);
    if (ev != MPA_NEG_MORE) {
        on_reply(c, ev);
    } else if (io != -EAGAIN) {
        /* Closed or reset before a Reply: nobody accepted (7.2). A dead
         * path (TcpUserTimeoutMs or keepalive gave up) is no refusal: it
         * ends as the Reply's timer would. */
        connect_fail(c, io == -ETIMEDOUT ? STATUS_IO_TIMEOUT : STATUS_CONNECTION_REFUSED, true);
    }
}

/* ---- passive side: the RTR ---- */

static void accept_fail(struct ndk_connector_impl *c, NTSTATUS st, bool abortive)
{
    NDK_CM_STAT_INC(c->obj.ad, accept_failed);
    CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "accept failed: %s", ndk_status_name(st));
    conn_dead(c, abortive);
    ndk_req_complete(&c->accept_req, st);
}

/* The shared-memory transport ended on its own (the peer left, its
 * process ended, a Terminate): as tr_failed, the progress thread then sees
 * the socket's input end and tears the connection down. Any thread. */
static void conn_shm_ended(void *arg)
{
    struct ndk_connector_impl *c = arg;
    set_mask_flag(c, &c->input_paused, false);
    ndk_stream_shutdown_read(c->fd);
}

/* Attaches the shared-memory transport the rendezvous set up; TCP stays
 * the control channel. */
static bool start_shm(struct ndk_connector_impl *c, struct shm_conn *setup)
{
    bool copy;
    const struct mpa_neg *n = &c->neg;
    if (ndk_shm_setup_attach(setup, n->eff_ird, n->eff_ord, conn_shm_ended, c, &copy) != STATUS_SUCCESS) {
        c->qp_start_failed = true;
        return false;
    }
    c->shm = true;
    c->dp_started = true;
    CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "same host: shared memory (%s), TCP stays the control channel",
             copy ? "copy mode" : "single copy");
    return true;
}

/* The QP is connected, and never connected again (7.6 rule 7): `used` is
 * read by the other claims of a QP (check_qp, the loopback's and the
 * same-host transport's) under the device lock. */
static void qp_mark_used(struct ndk_connector_impl *c)
{
    struct ndk_device *dev = c->obj.ad->dev;
    pthread_mutex_lock(&dev->lock);
    c->qp->connected = true;
    c->qp->used = true;
    pthread_mutex_unlock(&dev->lock);
}

/* false: no memory for the data path's read queues; the caller fails the
 * leg with STATUS_INSUFFICIENT_RESOURCES and aborts the connection. setup:
 * the initiator's agreed shared-memory set-up, or NULL (the passive side
 * takes its own from the rendezvous now: the go came before the RTR). */
static bool established(struct ndk_connector_impl *c, struct shm_conn *setup)
{
    loop_timer_cancel(conn_loop(c), &c->timer);
    c->state = CONN_CONNECTED;
    conn_watch(c, EPOLLIN | EPOLLRDHUP);
    if (c->passive)
        setup = shm_rv_take(&c->rv);
    if (c->qp && setup) {
        qp_mark_used(c);
        if (!start_shm(c, setup))
            return false;
    } else if (c->qp) {
        qp_mark_used(c);
        c->tr.ops = &socket_transport;
        c->tr.owner = c;
        /* RFC 5044 rule 4: a responder to a client/server initiator sends
         * nothing before the initiator's first FPDU (siw initiators fail on
         * bytes right behind the Reply). */
        const struct mpa_neg *n = &c->neg;
        bool gated = c->passive && !n->p2p;
        if (!ndk_qp_start(c->qp, &c->tr, n->crc, n->eff_ird, n->eff_ord, socket_mulpdu(c->fd), gated)) {
            c->qp_start_failed = true; /* the disconnect reason, if one comes */
            return false;
        }
        if (n->read_rtr) {
            if (c->passive)
                ndk_qp_read_rtr_received(c->qp);
            else
                ndk_qp_read_rtr_sent(c->qp);
        }
        c->dp_started = true;
        c->dp_qp = c->qp;
        loop_watch_set_unlocked(&c->watch, conn_dp_unlocked);
        if (gated && (c->obj.ad->opt.Flags & NDK_OPEN_FLAG_RELAXED_TX_GATE))
            loop_timer_arm(conn_loop(c), &c->timer, NDK_RELAXED_GATE_MS);
    }
    if (c->passive)
        NDK_CM_STAT_INC(c->obj.ad, accept_ok);
    else
        NDK_CM_STAT_INC(c->obj.ad, connect_ok);
    CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "%s, qp#%u", c->passive ? "accepted" : "connected",
             c->qp ? c->qp->obj.id : 0);
    const struct mpa_neg *n = &c->neg;
    CONN_LOG(NDK_LL_INFO, NDK_LC_MPA, c, "MPA rev %u%s, CRC %s, RTR %s, IRD %lu ORD %lu", n->rev,
             n->enhanced ? " enhanced" : "", n->crc ? "on" : "off",
             !n->p2p ? "none" : n->rtr == MPA_RTR_WRITE ? "write" : "read", (unsigned long)n->eff_ird,
             (unsigned long)n->eff_ord);
    return true;
}

static void on_rtr(struct ndk_connector_impl *c, enum mpa_neg_event ev)
{
    if (ev == MPA_NEG_PEER_TERMINATED) {
        /* The initiator answered our Reply with a Terminate instead of its
         * RTR (say no RTR type it can use, or not enough IRD): the accept
         * fails, and the Terminate is never answered with one of ours (RFC
         * 5040 section 7). */
        if (c->neg.term_decoded) {
            const struct mpa_neg *n = &c->neg;
            NDK_CM_STAT_INC(c->obj.ad, setup_term_rx);
            CONN_LOG(NDK_LL_WARN, NDK_LC_DP, c, "Terminate received instead of the RTR: %s",
                     term_describe(n->peer_term_layer, n->peer_term_etype, n->peer_term_code));
        }
        accept_fail(c, STATUS_CONNECTION_ABORTED, false);
        return;
    }
    if (ev == MPA_NEG_BAD_RTR) {
        send_setup_term(c);
        accept_fail(c, STATUS_INVALID_NETWORK_RESPONSE, true);
        return;
    }
    /* A Read RTR is answered with its Read Response. */
    if (c->neg.out_len && send_output(c) < 0) {
        accept_fail(c, STATUS_CONNECTION_ABORTED, true);
        return;
    }
    if (!established(c, NULL)) {
        accept_fail(c, STATUS_INSUFFICIENT_RESOURCES, true);
        return;
    }
    ndk_req_complete(&c->accept_req, STATUS_SUCCESS);
}

static void read_rtr(struct ndk_connector_impl *c)
{
    /* The negotiation reads exactly one FPDU (the RTR, or a Terminate), so
     * anything behind it stays in the socket for the data path. */
    ssize_t io;
    enum mpa_neg_event ev = ndk_mpa_stream_read(c->fd, &c->neg, &io);
    if (ev != MPA_NEG_MORE) {
        on_rtr(c, ev);
    } else if (io != -EAGAIN) {
        /* The initiator gave up before its CompleteConnect (5.10.4). */
        accept_fail(c, STATUS_CONNECTION_ABORTED, true);
    }
}

/* ---- events ---- */

static void on_peer_closed(struct ndk_connector_impl *c, bool reset)
{
    switch (c->state) {
    case CONN_INCOMING:
        /* The requester gave up before Accept/Reject (5.10.4/5.10.5). */
        c->peer_gone = true;
        conn_close_wire(c, true);
        break;
    case CONN_REPLIED:
        c->peer_gone = true;
        conn_close_wire(c, true);
        qp_detach_connected(c);
        break;
    case CONN_SHM_RV:
        /* The acceptor went away while NdkCompleteConnect pended. */
        c->peer_gone = true;
        conn_dead(c, true);
        ndk_req_complete(&c->complete_req, STATUS_CONNECTION_ABORTED);
        break;
    case CONN_CONNECTED:
        if (reset) {
            c->peer_gone = true;
            conn_close_wire(c, true);
            qp_detach_connected(c);
        } else {
            c->peer_fin = true;
            /* Keep the socket: our side may still send until NdkDisconnect
             * sends our FIN. Stop reading (end of stream stays readable). */
            conn_watch(c, 0);
        }
        fire_disconnect_event(c, disconnect_reason(c, reset));
        break;
    case CONN_DISCONNECTING:
        if (reset) {
            c->peer_gone = true;
            conn_dead(c, true);
            ndk_req_complete(&c->disconnect_req, STATUS_CONNECTION_ABORTED);
        } else {
            c->peer_fin = true;
            if (!c->dp_started) {
                conn_dead(c, false);
                ndk_req_complete(&c->disconnect_req, STATUS_SUCCESS);
            } else {
                maybe_finish_disconnect(c);
            }
            /* Stop reading if the socket stays (requests still to finish);
             * a disconnect that finished closed it, and no epoll_ctl is
             * spent on a socket about to leave the set. */
            conn_watch(c, 0);
        }
        break;
    default:
        conn_close_wire(c, true);
        break;
    }
}

/* epoll reports EPOLLHUP both for a reset and for a connection shut down in
 * both directions (our FIN sent, theirs received): only a pending socket
 * error tells a reset apart. */
static bool was_reset(struct ndk_connector_impl *c, uint32_t events)
{
    if (!(events & (EPOLLERR | EPOLLHUP)))
        return false;
    return ndk_stream_error(c->fd) != 0 || !(events & EPOLLRDHUP);
}

/* Nothing of ours is queued or in flight (X1 "DMA finished"). */
static bool quiescent(struct ndk_connector_impl *c)
{
    return c->shm ? ndk_shm_quiescent(c->qp) : ndk_qp_quiescent(c->qp);
}

/* NdkDisconnect is done when our FIN is out (after everything queued) and
 * the peer's FIN has arrived (X1); the QP is then flushed (X5). */
static void maybe_finish_disconnect(struct ndk_connector_impl *c)
{
    if (c->state != CONN_DISCONNECTING || !c->peer_fin || !c->qp || !quiescent(c))
        return;
    conn_dead(c, false);
    ndk_req_complete(&c->disconnect_req, STATUS_SUCCESS);
}

/* Socket events of a connection over shared memory: TCP only says how it
 * ends. Octets on it mean the peer speaks iWARP to us: it is reset. */
static void conn_shm_io(struct ndk_connector_impl *c, uint32_t events)
{
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) {
        int n = ndk_stream_peek(c->fd);
        if (n == -EAGAIN && !(events & (EPOLLERR | EPOLLHUP)))
            return;
        /* First what the peer published before it ended the stream: its
         * last messages, or the Terminate that made it reset. */
        ndk_shm_drain(c->qp);
        ULONG why = ndk_qp_end_reason(c->qp);
        bool reset = n > 0 || was_reset(c, events) || (why && why != NDK_DISCONNECT_REASON_PEER_CLOSED);
        on_peer_closed(c, reset);
        return;
    }
    maybe_finish_disconnect(c);
}

/* What connection management makes of an established connection's socket
 * events once the QP moved the data (alive: its input goes on). The
 * connector's engine lock held. */
static void conn_dp_after(struct ndk_connector_impl *c, uint32_t events, bool alive)
{
    struct ndk_qp_impl *qp = c->qp;
    if (!alive) {
        /* The QP failed (a Terminate either way, a protocol error, a
         * local failure) or the stream ended. Only the peer's FIN at an
         * FPDU boundary on a healthy QP, or on a flushed one, is a
         * graceful disconnect. */
        bool failed = ndk_qp_failed(qp);
        if (failed && ndk_qp_sent_term(qp)) {
            /* We sent a Terminate (or it is still queued): the consumer
             * hears now; the wire ends when the peer, having read it,
             * closes (RFC 5040 prefers that to a reset, which could make
             * its kernel drop the Terminate unread), or when the timer
             * gives up. Until the peer's FIN the QP reads and drops what
             * it sent behind the offender (RX_DISCARD): unread, that
             * would fill our window and hold the FIN back. */
            if (!c->term_draining) {
                c->term_draining = true;
                fire_disconnect_event(c, disconnect_reason(c, true));
                loop_timer_arm(conn_loop(c), &c->timer, c->obj.ad->opt.DisconnectTimeoutMs);
            }
            if (!ndk_qp_rx_over(qp) && !(events & (EPOLLERR | EPOLLHUP)))
                return;
        }
        on_peer_closed(c, failed || was_reset(c, events));
        return;
    }
    maybe_finish_disconnect(c);
}

/* Socket events of an established connection: the QP moves the data.
 * The connector's engine lock held. */
static void conn_dp_io(struct ndk_connector_impl *c, uint32_t events)
{
    struct ndk_qp_impl *qp = c->qp;
    if (c->shm) {
        conn_shm_io(c, events);
        return;
    }
    if (events & EPOLLOUT)
        ndk_qp_on_writable(qp);
    if (!c->dp_started)
        return;
    if (events & (EPOLLERR | EPOLLHUP))
        ndk_qp_rx_give_up(qp); /* a Send waiting for a receive: the stream is gone */
    bool alive = true;
    if (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))
        alive = ndk_qp_on_readable(qp);
    conn_dp_after(c, events, alive);
}

/*
 * The same without the engine's lock, on the QP's own rx_lock and sq_lock
 * (docs/architecture.md, Threads and locks): posting threads and pollers
 * move the same QP's data at once. The loop calls it while the handler is
 * set (from established() until connection management takes the events
 * back, conn_dp_lock_events), possibly for an event fetched just before: a
 * QP stopped since has no transport any more, and its input reports the
 * stream dead, which the engine's lock then finds already handled. The
 * memory stays: the connector and the QP are freed only after this
 * engine's next iteration (ndk_free_deferred).
 */
static bool conn_dp_unlocked(struct loop_watch *w, uint32_t events)
{
    struct ndk_connector_impl *c = container_of(w, struct ndk_connector_impl, watch);
    if (events & (EPOLLERR | EPOLLHUP))
        return false; /* the connection broke: connection management's, locked */
    struct ndk_qp_impl *qp = c->dp_qp;
    if (events & EPOLLOUT)
        ndk_qp_on_writable(qp);
    bool alive = !(events & (EPOLLIN | EPOLLRDHUP)) || ndk_qp_on_readable(qp);
    /* Read after the input (both sequentially consistent with the store
     * in conn_dp_lock_events): a state change that needs to hear of this
     * input (NdkDisconnect waiting for our FIN) either comes after it, and
     * looks at the QP itself, or is seen here. */
    if (alive && __atomic_load_n(&c->watch.unlocked, __ATOMIC_SEQ_CST))
        return true;
    /* Only tried: a thread holding the engine's lock may be waiting for
     * this loop's unlocked handlers to return (loop_unlocked_barrier, a
     * same-host connection's detach). Busy, the events go to conn_on_io
     * under the lock, which moves the data again (nothing, or what came
     * since) and then decides. */
    struct ndk_engine *e = __atomic_load_n(&c->obj.engine, __ATOMIC_ACQUIRE);
    if (pthread_mutex_trylock(&e->lock) != 0)
        return false;
    if (c->dp_started && c->watch.added)
        conn_dp_after(c, events, alive);
    ndk_engine_unlock(e);
    return true;
}

/* A handshake state's socket events: sends more of what is queued (the
 * Reply, the RTR) and, once it is all out, stops watching for room.
 * Returns -1 when the stream broke, else whether there is input to read. */
static int handshake_io(struct ndk_connector_impl *c, uint32_t events)
{
    if ((events & EPOLLOUT) && c->tx_len) {
        int r = flush_tx(c);
        if (r < 0)
            return -1;
        if (r == 0)
            conn_watch(c, EPOLLIN | EPOLLRDHUP);
    }
    return (events & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) != 0;
}

static void conn_on_io(struct loop_watch *w, uint32_t events)
{
    struct ndk_connector_impl *c = container_of(w, struct ndk_connector_impl, watch);
    switch (c->state) {
    case CONN_TCP: {
        int err = ndk_stream_error(c->fd);
        if (err) {
            connect_fail(c, ndk_status_from_errno(err, NDK_PHASE_CONNECT), true);
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        start_mpa_request(c);
        return;
    }
    case CONN_MPA_REPLY: {
        int r = handshake_io(c, events);
        if (r < 0)
            connect_fail(c, STATUS_CONNECTION_REFUSED, true);
        else if (r)
            read_reply(c);
        return;
    }
    case CONN_ACCEPTING: {
        int r = handshake_io(c, events);
        if (r < 0)
            accept_fail(c, STATUS_CONNECTION_ABORTED, true);
        else if (r)
            read_rtr(c);
        return;
    }
    case CONN_INCOMING:
        if (events & EPOLLIN) {
            if (ndk_stream_peek(c->fd) > 0) {
                /* Bytes before our Reply: protocol violation (RFC 5044). */
                CONN_LOG(NDK_LL_WARN, NDK_LC_MPA, c, "%s", "initiator sent data before the Reply: aborted");
                on_peer_closed(c, true);
                return;
            }
        }
        on_peer_closed(c, was_reset(c, events));
        return;
    case CONN_CONNECTED:
        if (c->local_disconnect && c->peer_fin && (events & EPOLLHUP) && !ndk_stream_error(c->fd)) {
            /* NdkDisconnect's FIN, which it sends without the locks, is out
             * and the peer's had come: both directions are shut (a hang-up
             * with no error; RDHUP is no longer asked for). The call, back
             * under the lock, finds the connection over (disconnect_wait). */
            conn_dead(c, false);
            return;
        }
        __attribute__((fallthrough));
    case CONN_DISCONNECTING:
        if (c->dp_started) {
            conn_dp_io(c, events);
            return;
        }
        /* No QP data path (cannot happen for a live QP): as below. */
        __attribute__((fallthrough));
    default:
        if (events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))
            on_peer_closed(c, c->qp_start_failed || was_reset(c, events));
        else if (events & EPOLLIN)
            conn_watch(c, EPOLLRDHUP); /* the data path's bytes, before it runs (on_reply) */
        return;
    }
}

/*
 * siw 6.1 sends its Reply before it installs the callbacks that read the
 * socket, so what lands in between (our RTR, or our first message) sits
 * unread until more octets arrive (the interop harness README). While the
 * peer has sent nothing, ndk_qp_nudge sends such octets, as this schedule
 * (ms after NdkCompleteConnect) says: densely while the window is likely
 * open (most last a few ms, some tens under emulation), then more sparsely,
 * for 300 ms. A peer that answers, or a message of our own going out, ends
 * or skips them; one that stays silent gets 14 zero-length Writes.
 */
static const uint16_t nudge_at_ms[] = {2, 4, 7, 10, 14, 18, 24, 30, 40, 50, 75, 100, 200, 300};
#define NUDGES (sizeof nudge_at_ms / sizeof nudge_at_ms[0])

static void conn_on_timer(struct loop_timer *t)
{
    struct ndk_connector_impl *c = container_of(t, struct ndk_connector_impl, timer);
    switch (c->state) {
    case CONN_TCP:
    case CONN_MPA_REPLY:
        connect_fail(c, STATUS_IO_TIMEOUT, true);
        break;
    case CONN_ACCEPTING:
        accept_fail(c, STATUS_IO_TIMEOUT, true);
        break;
    case CONN_SHM_RV:
        /* The rendezvous did not settle in time: TCP. */
        CONN_LOG(NDK_LL_WARN, NDK_LC_CM, c,
                 "same host: the fast path was not set up within %u ms; TCP carries the connection",
                 ndk_shm_rendezvous_ms());
        shm_rv_stop(&c->rv);
        ndk_req_complete(&c->complete_req, finish_complete_connect(c, NULL));
        break;
    case CONN_DISCONNECTING:
        conn_dead(c, true);
        ndk_req_complete(&c->disconnect_req, STATUS_IO_TIMEOUT);
        break;
    case CONN_CONNECTED:
        if (c->term_draining) {
            on_peer_closed(c, true); /* the Terminate never got out */
        } else if (c->passive && c->dp_started) {
            ndk_qp_ungate(c->qp); /* NDK_OPEN_FLAG_RELAXED_TX_GATE */
        } else if (c->nudge_next < NUDGES && c->dp_started) {
            unsigned at = nudge_at_ms[c->nudge_next++];
            if (ndk_qp_nudge(c->qp) && c->nudge_next < NUDGES)
                loop_timer_arm(conn_loop(c), &c->timer, nudge_at_ms[c->nudge_next] - at);
        }
        break;
    default:
        break;
    }
}

/* ---- NDK_CONNECTOR_DISPATCH ---- */

static NTSTATUS check_private_data(const void *pd, ULONG len, ULONG max)
{
    if (!pd && len)
        return STATUS_INVALID_PARAMETER;
    if (len > max)
        return STATUS_INVALID_BUFFER_SIZE;
    return STATUS_SUCCESS;
}

/* The arguments NdkConnect(WithSharedEndpoint) and NdkAccept(Ex) share,
 * checked before their own: the connector, the QP, the completion callback
 * and the private data. */
static NTSTATUS check_conn_args(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp, NDK_FN_REQUEST_COMPLETION cb,
                               const void *pd, ULONG pdLen, struct ndk_connector_impl **c,
                               struct ndk_qp_impl **qp)
{
    struct ndk_obj *qpo = ndk_obj_from_pub(pNdkQp, NdkObjectTypeQp);
    *c = conn_from(pNdkConnector);
    if (!*c || !qpo || !cb)
        return STATUS_INVALID_PARAMETER;
    *qp = container_of(qpo, struct ndk_qp_impl, obj);
    return check_private_data(pd, pdLen, NDK_MAX_PRIVATE_DATA);
}

/* Common checks for a QP given to Connect/Accept. Device lock held (which
 * connector holds a QP is device-wide: connectors on two engines may race
 * for one). */
static NTSTATUS check_qp(struct ndk_connector_impl *c, struct ndk_qp_impl *qp)
{
    if (!qp || qp->obj.ad->dev != c->obj.ad->dev)
        return STATUS_INVALID_PARAMETER;
    if (qp->obj.closing || qp->conn || qp->used)
        return STATUS_INVALID_DEVICE_STATE;
    return STATUS_SUCCESS;
}

/* The connection runs on its QP's engine (docs/architecture.md, Engines):
 * a passive connector's socket and timer move there from the listener's.
 * The connector has no callback queued yet (NdkConnect and NdkAccept are
 * its first requests), so its callbacks still never run on two engines at
 * once. Both engines' locks held (conn_lock2): whoever locks the
 * connector's engine re-checks after locking that it did not move. */
static void conn_place(struct ndk_connector_impl *c, struct ndk_engine *e)
{
    if (c->obj.engine == e)
        return;
    pthread_mutex_lock(&c->mask_lock);
    struct loop *from = conn_loop(c);
    /* Should epoll refuse the socket on the QP's engine, the connector
     * stays where it is, still watched: everything it does runs under its
     * engine's lock, so only the placement is lost, never the connection. */
    if (loop_watch_move(&e->loop, &c->watch) == 0) {
        __atomic_store_n(&c->obj.engine, e, __ATOMIC_RELEASE);
        loop_timer_move(from, &e->loop, &c->timer);
    } else {
        CONN_LOG(NDK_LL_WARN, NDK_LC_CM, c, "%s", "socket not movable to the QP's engine: stays on its own");
    }
    pthread_mutex_unlock(&c->mask_lock);
}

/* Ties c and qp together (device lock held: check_qp passed under it). */
static void claim_qp(struct ndk_connector_impl *c, struct ndk_qp_impl *qp)
{
    c->qp = qp;
    qp->conn = c;
    ndk_obj_add_successor(&qp->obj);
}

/* Locks the connector's engine and `other` (the QP's), in ascending index,
 * re-checking that the connector did not move meanwhile; returns the
 * connector's engine. */
static struct ndk_engine *conn_lock2(struct ndk_connector_impl *c, struct ndk_engine *other)
{
    for (;;) {
        struct ndk_engine *e = __atomic_load_n(&c->obj.engine, __ATOMIC_ACQUIRE);
        ndk_engines_lock2(e, other);
        if (__atomic_load_n(&c->obj.engine, __ATOMIC_RELAXED) == e)
            return e;
        ndk_engines_unlock2(e, other);
    }
}

/* A connector's own local address (no shared endpoint): the address
 * family matches the peer's and the registry reserves the port. Needs no
 * device state (the registry has its own lock). */
static NTSTATUS reserve_own(int fd, NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, struct port_res **port)
{
    if (src->sa.sa_family != dst->sa.sa_family)
        return STATUS_INVALID_ADDRESS;
    /* SO_REUSEADDR lets the port be bound beside TIME_WAIT leftovers;
     * the registry still refuses a second live endpoint. */
    return ports_reserve(src, PORT_CONNECTOR, fd, true, port);
}

/* A connector on a shared endpoint takes its address and port, once per
 * peer. Device lock held (the endpoint's connections). */
static NTSTATUS bind_shared(struct ndk_connector_impl *c, int fd, struct ndk_sep_impl *sep, const NDK_SOCKADDR *dst)
{
    if (sep->obj.closing)
        return STATUS_INVALID_DEVICE_STATE;
    if (sep->local.sa.sa_family != dst->sa.sa_family)
        return STATUS_INVALID_ADDRESS;
    for (struct ndk_connector_impl *o = sep->conns; o; o = o->sep_next)
        if (ndk_sockaddr_equal(&o->peer, dst))
            return STATUS_ADDRESS_ALREADY_EXISTS;
    int err = ndk_tcp_bind(fd, &sep->local, true);
    if (err < 0)
        return ndk_status_from_errno(-err, NDK_PHASE_BIND);
    c->local = sep->local;
    c->port = sep->port;
    ports_ref(c->port);
    return STATUS_SUCCESS;
}

/* Can c connect qp now? The connector's engine lock and the device lock
 * held. */
static NTSTATUS connect_check(struct ndk_connector_impl *c, struct ndk_qp_impl *qp)
{
    if (c->state != CONN_IDLE || c->obj.closing || c->passive)
        return STATUS_INVALID_DEVICE_STATE;
    return check_qp(c, qp);
}

/* Starts the TCP handshake of a socket bind_shared bound; on failure the
 * reservation is given back. Device lock held (the shared endpoint's
 * connections are checked against each other: its rare bind and connect
 * stay under it). */
static NTSTATUS connect_socket(struct ndk_connector_impl *c, int fd, const NDK_SOCKADDR *dst)
{
    int err = ndk_tcp_connect(fd, dst);
    if (err >= 0)
        return STATUS_SUCCESS;
    ports_unref(c->port);
    c->port = NULL;
    return ndk_status_from_errno(-err, NDK_PHASE_CONNECT);
}

/* The Request is built now, so the private data need not outlive the call. */
static void build_request(struct ndk_connector_impl *c, ULONG ird, ULONG ord, const void *pd, ULONG pdLen)
{
    ULONG flags = c->obj.ad->opt.Flags;
    struct mpa_neg_request req = {
        .rev1 = (flags & NDK_OPEN_FLAG_MPA_REV1) != 0,
        .p2p = !(flags & NDK_OPEN_FLAG_NO_P2P),
        .crc = (flags & NDK_OPEN_FLAG_REQUEST_CRC) != 0,
        .ird = ird,
        .ord = ord,
        .max_ird = NDK_MAX_IRD,
        .max_ord = NDK_MAX_ORD,
        .pd = pd,
        .pd_len = (uint16_t)pdLen,
    };
    mpa_neg_start_initiator(&c->neg, &req);
    c->tx = mpa_neg_output(&c->neg, &c->tx_len); /* sent once TCP is up */
    c->tx_off = 0;
}

/* The socket is connecting: the connector, its QP and its shared endpoint
 * are tied together (device lock held). */
static void connect_claim(struct ndk_connector_impl *c, struct ndk_qp_impl *qp, struct ndk_sep_impl *sep)
{
    claim_qp(c, qp);
    if (sep) {
        c->sep = sep;
        ndk_obj_add_successor(&sep->obj);
        c->sep_next = sep->conns;
        sep->conns = c;
    }
}

/* The TCP handshake is watched, on the QP's engine. Both engines' locks
 * held, not the device lock. */
static void connect_started(struct ndk_connector_impl *c, struct ndk_qp_impl *qp, NDK_FN_REQUEST_COMPLETION cb,
                            void *ctx)
{
    /* Bound to c->local (connect_own_port, or bind_shared's endpoint);
     * with a wildcard IP there, the kernel says which one it took. */
    NDK_SOCKADDR bound = c->local;
    ndk_tcp_local_addr_of(c->fd, &bound, &c->local);
    conn_place(c, qp->obj.engine);
    ndk_req_begin(&c->connect_req, &c->obj, cb, ctx);
    c->state = CONN_TCP;
    conn_watch(c, EPOLLOUT);
    loop_timer_arm(conn_loop(c), &c->timer, c->obj.ad->opt.TcpConnectTimeoutMs);
}

/* A socket for an active connection: TCP_NODELAY, the adapter's buffer
 * sizes and liveness options; fd or -errno. */
static int connect_socket_new(const struct ndk_adapter_impl *ad, int family)
{
    int fd = ndk_tcp_socket(family);
    if (fd < 0)
        return fd;
    ndk_tcp_set_buffers(fd, ad->opt.SocketSendBufferBytes, ad->opt.SocketReceiveBufferBytes);
    ndk_tcp_set_liveness(fd, &ad->opt);
    return fd;
}

/* How many ports an NdkConnect from port 0 tries when the kernel finds
 * the 4-tuple of the one picked taken. */
#define CONNECT_PORT_TRIES 8

/*
 * Binds *fd to its own port at src (port 0: a free port the registry
 * picks) and makes the TCP handshake to dst, with no lock held meanwhile:
 * the bind and the handshake are the costliest steps of NdkConnect (on
 * loopback, connect() runs the peer's side of the handshake too), and need
 * no engine or device state: the port registry has its own lock, and the
 * socket is nobody's yet. So the engines' connections progress meanwhile.
 * The connector cannot be closed during its own call (L5); its QP can, so
 * the checks are made again. Called and returns with the connector's and
 * the QP's engine locks (*from, to) and the device lock held; on failure
 * the reservation is given back. A port we picked whose 4-tuple to dst
 * the kernel finds taken (EADDRNOTAVAIL: a TIME_WAIT it may not reuse yet,
 * or another process's connection from that port) is our choice, not the
 * consumer's error: another port is tried, on a new socket (a socket binds
 * once), CONNECT_PORT_TRIES in all.
 */
static NTSTATUS connect_own_port(struct ndk_connector_impl *c, struct ndk_qp_impl *qp, int *fd,
                                 NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, struct ndk_engine **from)
{
    struct ndk_device *dev = c->obj.ad->dev;
    struct ndk_engine *to = qp->obj.engine;
    pthread_mutex_unlock(&dev->lock);
    ndk_engines_unlock2(*from, to);
    struct port_res *port = NULL;
    bool any_port = ndk_sockaddr_port(src) == 0;
    NTSTATUS st;
    for (unsigned tries = 1;; tries++) {
        st = reserve_own(*fd, src, dst, &port);
        int err = st == STATUS_SUCCESS ? ndk_tcp_connect(*fd, dst) : 0;
        if (err == -EADDRNOTAVAIL && any_port && tries < CONNECT_PORT_TRIES) {
            int again = connect_socket_new(c->obj.ad, dst->sa.sa_family);
            if (again >= 0) {
                ports_unref(port);
                port = NULL;
                ndk_stream_close(*fd);
                *fd = again;
                ndk_sockaddr_set_port(src, 0);
                continue;
            }
        }
        if (err < 0)
            st = ndk_status_from_errno(-err, NDK_PHASE_CONNECT);
        break;
    }
    *from = conn_lock2(c, to);
    pthread_mutex_lock(&dev->lock);
    if (st == STATUS_SUCCESS)
        st = connect_check(c, qp);
    if (st != STATUS_SUCCESS) {
        ports_unref(port);
        return st;
    }
    c->port = port;
    c->local = *src;
    return STATUS_SUCCESS;
}

static NTSTATUS connect_common(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                               NDK_SHARED_ENDPOINT *pSep, const struct sockaddr *pSrc, ULONG srcLen,
                               const struct sockaddr *pDst, ULONG dstLen, ULONG ird, ULONG ord,
                               const void *pd, ULONG pdLen, NDK_FN_REQUEST_COMPLETION cb, void *ctx)
{
    struct ndk_connector_impl *c;
    struct ndk_qp_impl *qp;
    NTSTATUS st = check_conn_args(pNdkConnector, pNdkQp, cb, pd, pdLen, &c, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_obj *sepo = pSep ? ndk_obj_from_pub(pSep, NdkObjectTypeSharedEndpoint) : NULL;
    NDK_SOCKADDR dst, src;
    if ((pSep && !sepo) || !ndk_sockaddr_import(pDst, dstLen, &dst))
        return STATUS_INVALID_PARAMETER;
    if (!pSep && !ndk_sockaddr_import(pSrc, srcLen, &src))
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = c->obj.ad;
    struct ndk_sep_impl *sep = sepo ? container_of(sepo, struct ndk_sep_impl, obj) : NULL;
    if ((sep && sepo->ad->dev != ad->dev) || qp->obj.ad->dev != ad->dev)
        return STATUS_INVALID_PARAMETER;
    if (!sep && !ndk_adapter_owns(ad, &src))
        return STATUS_INVALID_ADDRESS;

    int fd = connect_socket_new(ad, dst.sa.sa_family);
    if (fd < 0)
        return ndk_status_from_errno(-fd, NDK_PHASE_CONNECT);

    /* The connector moves to its QP's engine (conn_place): both engines'
     * locks, then the device lock for the claims. */
    struct ndk_engine *to = qp->obj.engine;
    struct ndk_engine *from = conn_lock2(c, to);
    pthread_mutex_lock(&ad->dev->lock);
    st = connect_check(c, qp);
    if (st == STATUS_SUCCESS && sep) {
        /* A shared endpoint's connections are checked against each other
         * (bind_shared): its bind and connect stay under the lock. */
        st = bind_shared(c, fd, sep, &dst);
        if (st == STATUS_SUCCESS)
            st = connect_socket(c, fd, &dst);
    } else if (st == STATUS_SUCCESS) {
        st = connect_own_port(c, qp, &fd, &src, &dst, &from);
    }
    if (st != STATUS_SUCCESS)
        goto fail_locked;
    connect_claim(c, qp, sep);
    pthread_mutex_unlock(&ad->dev->lock);
    c->peer = dst;
    c->fd = fd;
    build_request(c, ird, ord, pd, pdLen);
    connect_started(c, qp, cb, ctx);
    ndk_engines_unlock2(from, to);
    return STATUS_PENDING;

fail_locked:
    pthread_mutex_unlock(&ad->dev->lock);
    ndk_engines_unlock2(from, to);
    ndk_stream_close(fd);
    return st;
}

static NTSTATUS conn_connect(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp, CONST PSOCKADDR pSrcAddress,
                             ULONG SrcAddressLength, CONST PSOCKADDR pDestAddress, ULONG DestAddressLength,
                             ULONG InboundReadLimit, ULONG OutboundReadLimit, CONST PVOID pPrivateData,
                             ULONG PrivateDataLength, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                             PVOID RequestContext)
{
    return connect_common(pNdkConnector, pNdkQp, NULL, pSrcAddress, SrcAddressLength, pDestAddress,
                          DestAddressLength, InboundReadLimit, OutboundReadLimit, pPrivateData,
                          PrivateDataLength, RequestCompletion, RequestContext);
}

static NTSTATUS conn_connect_sep(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp,
                                 NDK_SHARED_ENDPOINT *pNdkSharedEndpoint, CONST PSOCKADDR pDestAddress,
                                 ULONG DestAddressLength, ULONG InboundReadLimit, ULONG OutboundReadLimit,
                                 CONST PVOID pPrivateData, ULONG PrivateDataLength,
                                 NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    if (!pNdkSharedEndpoint)
        return STATUS_INVALID_PARAMETER;
    return connect_common(pNdkConnector, pNdkQp, pNdkSharedEndpoint, NULL, 0, pDestAddress,
                          DestAddressLength, InboundReadLimit, OutboundReadLimit, pPrivateData,
                          PrivateDataLength, RequestCompletion, RequestContext);
}

/* NdkCompleteConnect's second half: the RTR, then the data path, over
 * shared memory when setup is the rendezvous' agreed set-up. The
 * connector's engine lock held. */
static NTSTATUS finish_complete_connect(struct ndk_connector_impl *c, struct shm_conn *setup)
{
    c->state = CONN_REPLIED;
    /* Peer-to-peer: the RTR. A fresh socket always takes 52 octets;
     * anything else means it is already broken. */
    if (c->neg.out_len && send_output(c) != 0) {
        ndk_shm_setup_abandon(setup);
        conn_dead(c, true);
        return STATUS_CONNECTION_ABORTED;
    }
    if (!established(c, setup)) {
        conn_dead(c, true);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    if (c->dp_started && !c->shm) {
        c->nudge_next = 0;
        loop_timer_arm(conn_loop(c), &c->timer, nudge_at_ms[0]);
    }
    return STATUS_SUCCESS;
}

/* The rendezvous settled (from the loop, the connector's engine lock held). */
static void rv_settled(struct shm_rv *rv, bool shm)
{
    struct ndk_connector_impl *c = container_of(rv, struct ndk_connector_impl, rv);
    if (c->state != CONN_SHM_RV)
        return;
    struct shm_conn *setup = shm ? shm_rv_take(rv) : NULL;
    if (!setup)
        CONN_LOG(NDK_LL_WARN, NDK_LC_CM, c, "%s",
                 "same host: the fast path was refused or failed; TCP carries the connection");
    ndk_req_complete(&c->complete_req, finish_complete_connect(c, setup));
}

/* Whether the initiator asks for the fast path: its adapter allows it, the
 * connection is peer-to-peer with an RTR the peer's transport need not
 * answer on TCP (a Read RTR is answered with a Read Response), and a QP
 * is there to carry it. */
static bool shm_wanted(struct ndk_connector_impl *c)
{
    return c->qp && c->neg.p2p && c->neg.rtr != MPA_RTR_READ && ndk_shm_allowed(c->obj.ad);
}

static NTSTATUS complete_connect_common(NDK_CONNECTOR *pNdkConnector, NDK_FN_DISCONNECT_EVENT_CALLBACK fn,
                                        NDK_FN_DISCONNECT_EVENT_CALLBACK_EX fn_ex, void *dctx,
                                        NDK_FN_REQUEST_COMPLETION cb, void *ctx)
{
    struct ndk_connector_impl *c = conn_from(pNdkConnector);
    if (!c || !cb)
        return STATUS_INVALID_PARAMETER;
    struct ndk_engine *e = ndk_obj_engine_lock(&c->obj);
    NTSTATUS st = STATUS_SUCCESS;
    if (c->passive || c->state != CONN_REPLIED || c->obj.closing) {
        st = STATUS_CONNECTION_INVALID;
        goto out;
    }
    if (peer_went_away(c)) {
        /* The acceptor abandoned the establishment (5.10.3). */
        conn_dead(c, true);
        st = STATUS_CONNECTION_ABORTED;
        goto out;
    }
    mpa_neg_complete(&c->neg);
    c->disc_fn = fn;
    c->disc_fn_ex = fn_ex;
    c->disc_ctx = dctx;
    /* The window stays open: consumers written for Windows providers call
     * NdkGetConnectionData after NdkCompleteConnect too, and get the same
     * answers (docs/behaviour.md, "Private data"). */
    if (shm_wanted(c) && shm_rv_connect(&c->rv, conn_loop(c), c->qp, c->fd, &c->local, &c->peer, rv_settled)) {
        /* A listener of this host answered the name: the RTR waits until
         * the rendezvous settles, at most NDK_SHM_RENDEZVOUS_MS. */
        c->state = CONN_SHM_RV;
        ndk_req_begin(&c->complete_req, &c->obj, cb, ctx);
        loop_timer_arm(conn_loop(c), &c->timer, ndk_shm_rendezvous_ms());
        st = STATUS_PENDING;
        goto out;
    }
    st = finish_complete_connect(c, NULL);
out:
    ndk_engine_unlock(e);
    return st;
}

static NTSTATUS conn_complete_connect(NDK_CONNECTOR *pNdkConnector, NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                      PVOID DisconnectEventContext, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      PVOID RequestContext)
{
    return complete_connect_common(pNdkConnector, DisconnectEvent, NULL, DisconnectEventContext,
                                   RequestCompletion, RequestContext);
}

static NTSTATUS conn_complete_connect_ex(NDK_CONNECTOR *pNdkConnector,
                                         NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                                         PVOID DisconnectEventContext,
                                         NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    return complete_connect_common(pNdkConnector, NULL, DisconnectEvent, DisconnectEventContext,
                                   RequestCompletion, RequestContext);
}

/* Will the accepted connection wait in its listener's rendezvous list
 * (shm_rv_expect)? The listener's loop then runs the rendezvous, and the
 * connector stays on the listener's engine, whose lock guards the list
 * (docs/architecture.md, Engines). The listener's engine lock held. */
static bool rv_expected(struct ndk_connector_impl *c)
{
    return c->neg.p2p && c->listener && c->listener->shm.fd >= 0 && ndk_shm_allowed(c->obj.ad);
}

/* The Reply is out (r: send_output's result, 0 or 1): peer-to-peer, NdkAccept
 * completes when the initiator's RTR (its NdkCompleteConnect) arrives;
 * else the connection is up now. The listener's and the connector's engine
 * locks held. */
static NTSTATUS accept_replied(struct ndk_connector_impl *c, int r, NDK_FN_REQUEST_COMPLETION cb, void *ctx)
{
    if (c->neg.p2p) {
        c->state = CONN_ACCEPTING;
        /* An initiator of this host may ask for shared memory before its RTR. */
        if (rv_expected(c))
            shm_rv_expect(&c->rv, &c->listener->shm, c->qp, &c->local, &c->peer);
        ndk_req_begin(&c->accept_req, &c->obj, cb, ctx);
        conn_watch(c, EPOLLIN | EPOLLRDHUP | (r == 1 ? EPOLLOUT : 0));
        loop_timer_arm(conn_loop(c), &c->timer, c->obj.ad->opt.RtrTimeoutMs);
        return STATUS_PENDING;
    }
    /* Client/server initiator: nothing more comes on the wire; our TX stays
     * held until its first FPDU arrives (RFC 5044). The Reply must be whole
     * before the data path owns the socket. */
    if (r == 1) {
        conn_dead(c, true);
        return STATUS_CONNECTION_ABORTED;
    }
    if (!established(c, NULL)) {
        conn_dead(c, true);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    return STATUS_SUCCESS;
}

static NTSTATUS accept_common(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp, ULONG ird, ULONG ord,
                              const void *pd, ULONG pdLen, NDK_FN_DISCONNECT_EVENT_CALLBACK fn,
                              NDK_FN_DISCONNECT_EVENT_CALLBACK_EX fn_ex, void *dctx,
                              NDK_FN_REQUEST_COMPLETION cb, void *ctx)
{
    struct ndk_connector_impl *c;
    struct ndk_qp_impl *qp;
    NTSTATUS st = check_conn_args(pNdkConnector, pNdkQp, cb, pd, pdLen, &c, &qp);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_adapter_impl *ad = c->obj.ad;
    if (qp->obj.ad->dev != ad->dev)
        return STATUS_INVALID_PARAMETER;
    /* The connector moves from the listener's engine to its QP's
     * (conn_place): both engines' locks; the device lock only for the
     * QP's checks and claim, not across the Reply's write. */
    struct ndk_engine *to = qp->obj.engine;
    struct ndk_engine *from = conn_lock2(c, to);
    if (!c->passive || c->state != CONN_INCOMING || c->obj.closing) {
        st = STATUS_INVALID_DEVICE_STATE;
        goto out;
    }
    pthread_mutex_lock(&ad->dev->lock);
    st = check_qp(c, qp);
    pthread_mutex_unlock(&ad->dev->lock);
    if (st != STATUS_SUCCESS)
        goto out;
    if (peer_went_away(c)) {
        conn_dead(c, true);
        close_pd_window(c);
        st = STATUS_CONNECTION_ABORTED;
        goto out;
    }
    bool crc = (ad->opt.Flags & NDK_OPEN_FLAG_REQUEST_CRC) != 0;
    bool ok = mpa_neg_accept(&c->neg, ird, ord, crc, pd, (uint16_t)pdLen);
    int r = ok ? send_output(c) : -EINVAL;
    if (r < 0) {
        conn_dead(c, true);
        close_pd_window(c);
        st = STATUS_CONNECTION_ABORTED;
        goto out;
    }
    /* The QP may have been closed or claimed while the Reply went out:
     * the connection is then reset. */
    pthread_mutex_lock(&ad->dev->lock);
    st = check_qp(c, qp);
    if (st == STATUS_SUCCESS)
        claim_qp(c, qp);
    pthread_mutex_unlock(&ad->dev->lock);
    if (st != STATUS_SUCCESS) {
        conn_dead(c, true);
        close_pd_window(c);
        goto out;
    }
    if (!rv_expected(c))
        conn_place(c, to);
    leave_backlog(c);
    /* The window stays open after NdkAccept, as after NdkCompleteConnect. */
    c->disc_fn = fn;
    c->disc_fn_ex = fn_ex;
    c->disc_ctx = dctx;
    st = accept_replied(c, r, cb, ctx);
out:
    ndk_engines_unlock2(from, to);
    return st;
}

static NTSTATUS conn_accept(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp, ULONG InboundReadLimit,
                            ULONG OutboundReadLimit, CONST PVOID pPrivateData, ULONG PrivateDataLength,
                            NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent, PVOID DisconnectEventContext,
                            NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    return accept_common(pNdkConnector, pNdkQp, InboundReadLimit, OutboundReadLimit, pPrivateData,
                         PrivateDataLength, DisconnectEvent, NULL, DisconnectEventContext,
                         RequestCompletion, RequestContext);
}

static NTSTATUS conn_accept_ex(NDK_CONNECTOR *pNdkConnector, NDK_QP *pNdkQp, ULONG InboundReadLimit,
                               ULONG OutboundReadLimit, CONST PVOID pPrivateData, ULONG PrivateDataLength,
                               NDK_FN_DISCONNECT_EVENT_CALLBACK_EX DisconnectEvent,
                               PVOID DisconnectEventContext, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                               PVOID RequestContext)
{
    return accept_common(pNdkConnector, pNdkQp, InboundReadLimit, OutboundReadLimit, pPrivateData,
                         PrivateDataLength, NULL, DisconnectEvent, DisconnectEventContext,
                         RequestCompletion, RequestContext);
}

static NTSTATUS conn_reject(NDK_CONNECTOR *pNdkConnector, CONST PVOID pPrivateData, ULONG PrivateDataLength)
{
    struct ndk_connector_impl *c = conn_from(pNdkConnector);
    if (!c)
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = check_private_data(pPrivateData, PrivateDataLength, NDK_MAX_PRIVATE_DATA);
    if (st != STATUS_SUCCESS)
        return st;
    struct ndk_engine *e = ndk_obj_engine_lock(&c->obj);
    if (c->obj.closing) {
        st = STATUS_INVALID_DEVICE_STATE;
    } else if (c->passive && c->state == CONN_INCOMING) {
        if (peer_went_away(c)) {
            st = STATUS_CONNECTION_ABORTED;
            conn_dead(c, true);
        } else {
            /* The rejecting Reply carries our would-be IRD/ORD (RFC 6581
             * 9.1) and the private data; then a graceful close. */
            NDK_CM_STAT_INC(c->obj.ad, rejected);
            CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "%s", "rejected");
            bool ok = mpa_neg_reject(&c->neg, pPrivateData, (uint16_t)PrivateDataLength);
            if (!ok || send_output(c) != 0) {
                st = STATUS_CONNECTION_ABORTED;
                conn_dead(c, true);
            } else {
                /* No FIN right behind the reject: the initiator closes
                 * once it has read it (siw drops data after a FIN). */
                loop_watch_del(conn_loop(c), &c->watch);
                ndk_linger_close(&e->lingers, conn_loop(c), c->fd, NDK_REJECT_LINGER_MS);
                c->fd = -1;
                conn_dead(c, false);
            }
        }
        close_pd_window(c);
    } else if (!c->passive && c->state == CONN_REPLIED) {
        /* The initiator turns down an accepted connection (5.10.5): MPA has
         * no frame for it, so the responder sees the connection reset. */
        st = peer_went_away(c) ? STATUS_CONNECTION_ABORTED : STATUS_SUCCESS;
        conn_dead(c, true);
        close_pd_window(c);
    } else {
        st = STATUS_INVALID_DEVICE_STATE;
    }
    ndk_engine_unlock(e);
    return st;
}

static NTSTATUS conn_get_connection_data(NDK_CONNECTOR *pNdkConnector, ULONG *pInboundReadLimit,
                                         ULONG *pOutboundReadLimit, PVOID pPrivateData,
                                         ULONG *pPrivateDataLength)
{
    struct ndk_connector_impl *c = conn_from(pNdkConnector);
    if (!c || !pPrivateDataLength || (!pPrivateData && *pPrivateDataLength))
        return STATUS_INVALID_PARAMETER;
    struct ndk_engine *e = ndk_obj_engine_lock(&c->obj);
    NTSTATUS st;
    if (!c->pd_window_open) {
        st = STATUS_INVALID_DEVICE_STATE;
    } else {
        ULONG ird, ord;
        if (c->passive) {
            /* Before Accept only the requester's values and our maxima are
             * known (NdkGetConnectionData; docs/behaviour.md, IRD / ORD);
             * after it the answer stays the same. */
            uint32_t ri, ro;
            mpa_neg_responder_limits(&c->neg, &ri, &ro);
            ird = ri;
            ord = ro;
        } else {
            ird = c->neg.eff_ird;
            ord = c->neg.eff_ord;
        }
        if (pInboundReadLimit)
            *pInboundReadLimit = ird;
        if (pOutboundReadLimit)
            *pOutboundReadLimit = ord;
        ULONG rds = c->peer_pd_len;
        if (pPrivateData) {
            if (rds)
                memcpy(pPrivateData, c->peer_pd, MIN(*pPrivateDataLength, rds));
            st = *pPrivateDataLength >= rds ? STATUS_SUCCESS : STATUS_BUFFER_TOO_SMALL;
        } else {
            st = STATUS_SUCCESS; /* the size probe: (NULL, 0) -> RDS */
        }
        *pPrivateDataLength = rds;
    }
    ndk_engine_unlock(e);
    return st;
}

/* NdkGetLocalAddress and NdkGetPeerAddress: both ends are known from the
 * connect or the connection request on. */
static NTSTATUS conn_get_address(NDK_CONNECTOR *pNdkConnector, bool peer, PSOCKADDR pAddress,
                                 ULONG *pAddressLength)
{
    struct ndk_connector_impl *c = conn_from(pNdkConnector);
    if (!c)
        return STATUS_INVALID_PARAMETER;
    struct ndk_engine *e = ndk_obj_engine_lock(&c->obj);
    NTSTATUS st = c->state == CONN_IDLE
                      ? STATUS_INVALID_DEVICE_STATE
                      : ndk_sockaddr_copy_out(peer ? &c->peer : &c->local, pAddress, pAddressLength);
    ndk_engine_unlock(e);
    return st;
}

static NTSTATUS conn_get_local_address(NDK_CONNECTOR *pNdkConnector, PSOCKADDR pAddress, ULONG *pAddressLength)
{
    return conn_get_address(pNdkConnector, false, pAddress, pAddressLength);
}

static NTSTATUS conn_get_peer_address(NDK_CONNECTOR *pNdkConnector, PSOCKADDR pAddress, ULONG *pAddressLength)
{
    return conn_get_address(pNdkConnector, true, pAddress, pAddressLength);
}

/* NdkDisconnect's end once our FIN is on its way: done at once when the
 * peer's FIN came and nothing of ours is in flight (X1), else pending until
 * it is. The connector's engine lock held. */
static NTSTATUS disconnect_wait(struct ndk_connector_impl *c, NDK_FN_REQUEST_COMPLETION cb, void *ctx)
{
    if (c->state == CONN_DEAD && !c->peer_gone)
        return STATUS_SUCCESS; /* both FINs went while ours was sent (conn_on_io) */
    if (c->peer_gone || c->fd < 0) {
        /* The peer aborted while our FIN went out. */
        conn_dead(c, true);
        return STATUS_CONNECTION_ABORTED;
    }
    if (c->peer_fin && (!c->dp_started || quiescent(c))) {
        conn_dead(c, false);
        return STATUS_SUCCESS;
    }
    c->state = CONN_DISCONNECTING;
    ndk_req_begin(&c->disconnect_req, &c->obj, cb, ctx);
    if (!c->peer_fin)
        conn_watch(c, EPOLLIN | EPOLLRDHUP);
    loop_timer_arm(conn_loop(c), &c->timer, c->obj.ad->opt.DisconnectTimeoutMs);
    return STATUS_PENDING;
}

static NTSTATUS conn_disconnect(NDK_CONNECTOR *pNdkConnector, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                PVOID RequestContext)
{
    struct ndk_connector_impl *c = conn_from(pNdkConnector);
    if (!c || !RequestCompletion)
        return STATUS_INVALID_PARAMETER;
    struct ndk_engine *e = ndk_obj_engine_lock(&c->obj);
    NTSTATUS st;
    if (c->state != CONN_CONNECTED || c->obj.closing) {
        st = STATUS_INVALID_DEVICE_STATE;
    } else if (c->peer_gone || c->fd < 0) {
        /* The peer already aborted: nothing graceful is left (X1). */
        c->local_disconnect = true;
        conn_dead(c, true);
        st = STATUS_CONNECTION_ABORTED;
    } else {
        c->local_disconnect = true;
        /* Before looking at the QP: input an engine moves unlocked from
         * now on ends in maybe_finish_disconnect, under the lock. */
        conn_dp_lock_events(c);
        CONN_LOG(NDK_LL_INFO, NDK_LC_CM, c, "%s", "disconnecting (NdkDisconnect)");
        if (c->dp_started && !c->shm) {
            /*
             * Our FIN goes once everything already queued is out, sent
             * by the QP under its own sq_lock as a post's data is: on
             * loopback shutdown() also runs the peer's side of the FIN,
             * so it goes without the engine's lock, as that engine's
             * other connections progress meanwhile. What the engine does
             * with the connection in between (the peer's FIN or reset, a
             * Terminate) is under the lock, and disconnect_wait looks at
             * it after. A QP whose data path stops in between has no
             * transport: its FIN is the stop's. The connector does not
             * move any more (it is connected).
             */
            struct ndk_qp_impl *qp = c->qp;
            ndk_engine_unlock(e);
            ndk_qp_disconnect(qp);
            e = ndk_obj_engine_lock(&c->obj);
        } else {
            /* Over shared memory what is published is the peer's: it
             * takes it all when it sees our FIN (conn_shm_io). A Send of
             * its waiting for a receive gets the Terminate now. */
            if (c->dp_started)
                ndk_qp_rx_give_up(c->qp);
            ndk_stream_shutdown_write(c->fd);
            c->fin_sent = true;
        }
        st = disconnect_wait(c, RequestCompletion, RequestContext);
    }
    ndk_engine_unlock(e);
    return st;
}

const NDK_CONNECTOR_DISPATCH ndk_connector_dispatch = {
    .NdkCloseConnector = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkConnect = conn_connect,
    .NdkConnectWithSharedEndpoint = conn_connect_sep,
    .NdkCompleteConnect = conn_complete_connect,
    .NdkAccept = conn_accept,
    .NdkReject = conn_reject,
    .NdkGetConnectionData = conn_get_connection_data,
    .NdkGetLocalAddress = conn_get_local_address,
    .NdkGetPeerAddress = conn_get_peer_address,
    .NdkDisconnect = conn_disconnect,
    .NdkCompleteConnectEx = conn_complete_connect_ex,
    .NdkAcceptEx = conn_accept_ex,
};

/* ---- lifetime ---- */

/* The close on the connector's engine (close_engine: its lock held, not
 * the device lock), so the socket's reset or FIN goes without it. */
static void conn_close_engine(struct ndk_obj *obj)
{
    struct ndk_connector_impl *c = container_of(obj, struct ndk_connector_impl, obj);
    /* L3: everything pending completes (cancelled) before the close does. */
    ndk_req_complete(&c->connect_req, STATUS_CANCELLED);
    ndk_req_complete(&c->complete_req, STATUS_CANCELLED);
    ndk_req_complete(&c->accept_req, STATUS_CANCELLED);
    ndk_req_complete(&c->disconnect_req, STATUS_CANCELLED);
    /* Closing an established connection is an abort (7.7), unless the peer
     * already finished gracefully; an unanswered request is implicitly
     * rejected by the reset. */
    bool graceful = (c->state == CONN_CONNECTED || c->state == CONN_DISCONNECTING) && c->peer_fin;
    conn_dead(c, !graceful);
}

static void conn_destroy(struct ndk_obj *obj)
{
    struct ndk_connector_impl *c = container_of(obj, struct ndk_connector_impl, obj);
    conn_close_wire(c, true);
    leave_backlog(c);
    close_pd_window(c);
    if (c->qp) {
        c->qp->conn = NULL;
        c->qp->connected = false;
        ndk_obj_release_successor(&c->qp->obj);
        c->qp = NULL;
    }
    if (c->sep) {
        struct ndk_connector_impl **pp = &c->sep->conns;
        while (*pp && *pp != c)
            pp = &(*pp)->sep_next;
        if (*pp)
            *pp = c->sep_next;
        ndk_obj_release_successor(&c->sep->obj);
        c->sep = NULL;
    }
    if (c->listener) {
        ndk_obj_release_successor(&c->listener->obj);
        c->listener = NULL;
    }
    ports_unref(c->port);
    c->port = NULL;
}

static void conn_free(struct ndk_obj *obj)
{
    struct ndk_connector_impl *c = container_of(obj, struct ndk_connector_impl, obj);
    pthread_mutex_destroy(&c->mask_lock);
    free(c);
}

static void conn_release(struct ndk_obj *obj)
{
    struct ndk_connector_impl *c = container_of(obj, struct ndk_connector_impl, obj);
    ports_unref(c->port);
    c->port = NULL;
}

static const struct ndk_obj_ops conn_ops = {
    .close_engine = conn_close_engine,
    .destroy = conn_destroy,
    .free = conn_free,
    .release = conn_release,
};

static struct ndk_connector_impl *conn_alloc(struct ndk_adapter_impl *ad)
{
    struct ndk_connector_impl *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->fd = -1;
    c->state = CONN_IDLE;
    pthread_mutex_init(&c->mask_lock, NULL);
    loop_timer_init(&c->timer, conn_on_timer);
    shm_rv_init(&c->rv);
    ndk_obj_init(&c->obj, ad, NdkObjectTypeConnector, &ndk_connector_dispatch, &conn_ops);
    return c;
}

/*
 * Where a new connector waits until NdkConnect or NdkAccept places it
 * (conn_place): on the engine whose thread creates it, when that is one of
 * the device's, else on the first. A consumer that makes its next
 * connection from a callback of its QP's CQ (or of the connection before)
 * so has its connector already on its QP's engine, and NdkConnect takes
 * one engine lock, not the first engine's as well (bench/connrate, two
 * engines, one process: futex calls per connection fell from about 5 to
 * about 2).
 */
static struct ndk_engine *creator_engine(struct ndk_device *dev)
{
    if (ndk_on_engine_thread())
        for (unsigned i = 0; i < dev->nengines; i++)
            if (loop_in_owner(&dev->engines[i].loop))
                return &dev->engines[i];
    return ndk_dev_engine0(dev);
}

NTSTATUS ndk_create_connector(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector)
{
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !ppNdkConnector)
        return STATUS_INVALID_PARAMETER;
    pthread_mutex_lock(&ad->dev->lock); /* the view's object list */
    struct ndk_connector_impl *c = conn_alloc(ad);
    if (c)
        c->obj.engine = creator_engine(ad->dev);
    pthread_mutex_unlock(&ad->dev->lock);
    if (!c)
        return STATUS_INSUFFICIENT_RESOURCES;
    *ppNdkConnector = (NDK_CONNECTOR *)&c->obj.pub;
    return STATUS_SUCCESS;
}

struct ndk_connector_impl *ndk_connector_new_passive(struct ndk_listener_impl *l, int fd,
                                                     struct loop_watch *registered,
                                                     const NDK_SOCKADDR *local,
                                                     const NDK_SOCKADDR *peer,
                                                     const struct mpa_neg *neg)
{
    struct ndk_adapter_impl *ad = l->obj.ad;
    uint16_t pd_len;
    const uint8_t *req_pd = mpa_neg_peer_pd(neg, &pd_len);
    uint8_t *pd = NULL;
    if (pd_len) {
        pd = malloc(pd_len);
        if (!pd)
            return NULL;
        memcpy(pd, req_pd, pd_len);
    }
    /* The view's object list and the listener's successors: device-wide. */
    pthread_mutex_lock(&ad->dev->lock);
    struct ndk_connector_impl *c = conn_alloc(ad);
    if (c) {
        c->obj.engine = l->obj.engine; /* until NdkAccept gives it a QP */
        ndk_obj_add_successor(&l->obj);
    }
    pthread_mutex_unlock(&ad->dev->lock);
    if (!c) {
        free(pd);
        return NULL;
    }
    c->passive = true;
    c->state = CONN_INCOMING;
    c->fd = fd;
    c->local = *local;
    c->peer = *peer;
    c->listener = l;
    c->port = l->port;
    ports_ref(c->port);
    c->neg = *neg; /* the Request as read: Accept or Reject answers it */
    c->peer_pd = pd;
    c->peer_pd_len = pd_len;
    c->pd_window_open = true;
    /* Watch for the requester going away or (illegally) sending early:
     * the listener's registration of the socket becomes ours. The
     * connector sits on the listener's engine (above), so its loop is the
     * listener's. */
    pthread_mutex_lock(&c->mask_lock);
    c->base_events = EPOLLIN | EPOLLRDHUP;
    loop_watch_allow_unlocked(&c->watch); /* as apply_mask's first add */
    loop_watch_take_over(conn_loop(c), registered, &c->watch, c->base_events, conn_on_io);
    pthread_mutex_unlock(&c->mask_lock);
    return c;
}

void ndk_connector_drop_undelivered(struct ndk_connector_impl *c)
{
    conn_dead(c, true); /* its reset without the device lock */
    struct ndk_device *dev = c->obj.ad->dev;
    pthread_mutex_lock(&dev->lock);
    c->obj.closing = true;
    ndk_obj_destroy(&c->obj);
    pthread_mutex_unlock(&dev->lock);
}
