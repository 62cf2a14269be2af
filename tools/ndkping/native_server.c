/*
 * native_server.c - the passive side of ndkping's own protocol (see
 * native.h): each request's private data and IRD/ORD are read and checked,
 * then it is accepted (with the server's private data and the
 * advertisement of its buffer) or rejected; after the client's data phase
 * and disconnect, the server answers the disconnect.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/listener.h"
#include "lib/log.h"
#include "lib/pattern.h"
#include "ndkping/native.h"

static ULONG min_ul(ULONG a, ULONG b)
{
    return a < b ? a : b;
}

/* What the passive side sees before accepting (docs/behaviour.md, IRD /
 * ORD: IRD = min(max, requester's ORD), ORD = min(max, requester's IRD)). */
static bool check_request(const struct server *s, const struct peer_data *r)
{
    const char *role = s->side.role;
    const NDK_ADAPTER_INFO *in = &s->side.a.info;
    if (!s->peer) {
        if (r->ird <= in->MaxInboundReadLimit && r->ord <= in->MaxOutboundReadLimit)
            return true;
        tc_complain(role, "request shows IRD %" PRIu32 " ORD %" PRIu32 ", above the adapter's maxima %" PRIu32 "/%" PRIu32,
                    r->ird, r->ord, in->MaxInboundReadLimit, in->MaxOutboundReadLimit);
        return false;
    }
    const NDK_ADAPTER_INFO *pi = &s->peer->a.info;
    ULONG want_ird = min_ul(in->MaxInboundReadLimit, min_ul(opt.ord, pi->MaxOutboundReadLimit));
    ULONG want_ord = min_ul(in->MaxOutboundReadLimit, min_ul(opt.ird, pi->MaxInboundReadLimit));
    return peer_data_exact(role, "request shows", r, want_ird, want_ord, s->peer, opt.data, opt.data_len);
}

/* Both sides must agree on the data phase: a mismatch is refused with a
 * reject, so that the client learns it at once. NULL: no reason. */
static const char *refusal(const struct peer_data *r)
{
    if (opt.reject)
        return NULL;
    if (!r->well_formed)
        return "malformed private data";
    if (opt.data_phase && !r->adv_bytes)
        return "the client advertises no buffer for the data phase (does it run with --no-data?)";
    if (!opt.data_phase && r->adv_bytes)
        return "the client advertises a buffer for a data phase, but this server runs with --no-data";
    return NULL;
}

/* Reads the request and prints it; false if it cannot be read. */
static bool read_request(struct nconn *n, struct peer_data *r)
{
    const char *role = n->side->role;
    unsigned num = n->c.num;
    tc_conn_name_peer(&n->c);
    NTSTATUS st = peer_data_read(n, r);
    if (st != STATUS_SUCCESS) {
        tc_complain(role, "[%u] NdkGetConnectionData on the request from %s failed: %s", num, n->c.peer,
                    tc_status_name(st));
        return false;
    }
    char p[PDATA_BUF];
    native_say(LVL_NORMAL, role, "[%u] request from %s: requested IRD %" PRIu32 " ORD %" PRIu32 ", client private data %s",
               num, n->c.peer, r->ird, r->ord, fmt_pdata_adv(r->pd, r->text_len, r->adv_bytes, p, sizeof p));
    if (!r->well_formed)
        tc_complain(role, "[%u] the client's private data has a NUL not followed by a %u-byte buffer advertisement",
                    num, ADV_LEN);
    return true;
}

/* --reject, or a refusal: the reject's private data tells the client why,
 * in as much as fits. True if that was asked for (--reject). */
static bool refuse(struct server *s, struct nconn *n, const char *why)
{
    char text[PDATA_SHOWN];
    const char *rtext = opt.reply;
    size_t rtext_len = opt.reply_len;
    if (why) {
        tc_complain(s->side.role, "[%u] rejecting %s: %s", n->c.num, n->c.peer, why);
        snprintf(text, sizeof text, "%s: refused: %s", opt.reply, why);
        rtext = text;
        rtext_len = min_ul((ULONG)strlen(text), s->side.a.info.MaxCalleeData);
    }
    if (!tc_conn_reject(&n->c, rtext, (ULONG)rtext_len))
        return false;
    char p[PDATA_BUF];
    native_say(LVL_NORMAL, s->side.role, "[%u] rejected, private data %s", n->c.num,
               fmt_pdata((const uint8_t *)rtext, rtext_len, p, sizeof p));
    return !why;
}

/*
 * Before the accept: the target buffer the client writes and reads (its
 * advertisement goes into the accept's private data), the message buffer
 * ([0, MSG_SIZE): the reply; then the receive), and the receive for the
 * client's Send, posted now because the Send may follow the accept at once.
 */
static bool data_setup(struct nconn *n)
{
    return nconn_buf(n, B_TARGET, opt.size,
                     NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE) &&
           nconn_buf(n, B_MSG, 2 * MSG_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE) &&
           nconn_recv_and_advertise(n, B_TARGET, opt.reply, opt.reply_len);
}

/* The client's message, and with --verify the buffer it wrote before its
 * Send (an RDMA Write is placed before a later Send on the same connection
 * completes). Returns the verdict; *seed from the message. */
static uint32_t judge(struct nconn *n, uint32_t len, uint32_t *seed)
{
    const char *role = n->side->role;
    char why[160];
    struct msg h = {0};
    const char *bad = msg_check(n->bufs[B_MSG].mem + MSG_SIZE, n->ops[OP_RECV].res.BytesTransferred, MSG_CLIENT,
                                len, &h, why, sizeof why);
    *seed = h.seed;
    if (bad) {
        tc_complain(role, "[%u] Receive: the client's message is not as sent: %s", n->c.num, bad);
        return VERDICT_BAD_MSG;
    }
    if (!opt.verify)
        return VERDICT_UNCHECKED;
    size_t first = 0, nbad;
    uint8_t g = 0, w = 0;
    if ((nbad = tc_pattern_check(n->bufs[B_TARGET].mem, len, h.seed, STREAM_BUFFER, &first, &g, &w))) {
        tc_complain(role,
                    "[%u] after the client's Send, %zu of the %" PRIu32 " bytes it wrote differ in the buffer, the "
                    "first at offset %zu: 0x%02x, expected 0x%02x",
                    n->c.num, nbad, len, first, g, w);
        return VERDICT_BAD_BUFFER;
    }
    return VERDICT_OK;
}

/* The server's part of the data phase, after the accept: the client's
 * Send, checked, and the reply Send with the verdict. */
static bool server_data(struct server *s, struct nconn *n, const struct adv *peer)
{
    uint32_t len = opt.size < peer->size ? opt.size : peer->size;
    nconn_wait(n, 1u << OP_RECV);
    if (!nconn_op_ok(n, OP_RECV))
        return false;
    uint32_t seed = 0, verdict = judge(n, len, &seed);
    /* The reply goes out even when a check failed: it tells the client. */
    uint64_t now = tc_now_us(), t_recv = n->ops[OP_RECV].t_done;
    uint64_t held = now > t_recv ? now - t_recv : 0;
    struct msg h = {.kind = MSG_REPLY, .seed = seed, .len = len, .verdict = verdict,
                    .held_us = held > UINT32_MAX ? UINT32_MAX : (uint32_t)held};
    msg_build(n->bufs[B_MSG].mem, &h);
    if (!nconn_post(n, OP_SEND, B_MSG, 0, MSG_SIZE, NULL))
        return false;
    nconn_wait(n, 1u << OP_SEND);
    if (!nconn_op_ok(n, OP_SEND))
        return false;
    uint64_t t_send = nconn_op_us(n, OP_SEND);
    bool ok = verdict == VERDICT_OK || verdict == VERDICT_UNCHECKED;
    char what[128];
    if (!ok)
        snprintf(what, sizeof what, "verification FAILED");
    else if (opt.verify)
        snprintf(what, sizeof what, "message and the %" PRIu32 " written bytes verified", len);
    else
        snprintf(what, sizeof what, "%" PRIu32 " bytes written, not verified (no --verify)", len);
    native_say(LVL_NORMAL, s->side.role, "[%u] Receive %" PRIu32 " bytes: %s; reply Send %u bytes %" PRIu64 " us (%.*f MB/s)",
               n->c.num, n->ops[OP_RECV].res.BytesTransferred, what, MSG_SIZE, t_send, TC_RATE(MSG_SIZE, t_send));
    if (ok)
        tc_stats_add(&s->reply_stats, t_send);
    return ok;
}

/* Accepts; false after saying why. */
static bool accept_request(struct server *s, struct nconn *n, const struct peer_data *r)
{
    const void *reply = opt.reply_len ? opt.reply : NULL;
    ULONG reply_len = (ULONG)opt.reply_len;
    if (opt.data_phase) {
        if (!data_setup(n))
            return false;
        reply = n->pdata_out;
        reply_len = n->pdata_out_len;
    }
    if (!tc_conn_accept(&n->c, opt.ird, opt.ord, reply, reply_len))
        return false;
    /* GetConnectionData is not allowed after Accept: the effective values
     * follow from the request and our own limits. */
    const NDK_ADAPTER_INFO *in = &s->side.a.info;
    ULONG eff_ird = min_ul(min_ul(opt.ird, in->MaxInboundReadLimit), r->ird);
    ULONG eff_ord = min_ul(min_ul(opt.ord, in->MaxOutboundReadLimit), r->ord);
    char p[PDATA_BUF];
    native_say(LVL_NORMAL, s->side.role,
               "[%u] accepted with IRD %" PRIu32 " ORD %" PRIu32 " (effective IRD %" PRIu32 " ORD %" PRIu32
               "), private data %s",
               n->c.num, opt.ird, opt.ord, eff_ird, eff_ord,
               fmt_pdata_adv((const uint8_t *)opt.reply, opt.reply_len,
                             opt.data_phase ? n->pdata_out + opt.reply_len + 1 : NULL, p, sizeof p));
    return true;
}

/* The client disconnects first; the server answers its disconnect. After
 * a failed data phase the client may still wait for the reply: the server
 * disconnects first, which ends that wait. *peer_left: the client did. */
static bool answer_disconnect(struct server *s, struct nconn *n, bool data_ok, uint64_t t_event, bool *peer_left)
{
    const char *role = s->side.role;
    unsigned ms = tc_adapter_wait_ms(&s->side.a);
    uint64_t t_accept = n->c.leg_us;
    *peer_left = data_ok && tc_conn_peer_left(&n->c, ms);
    if (!data_ok)
        native_say(LVL_VERBOSE, role, "[%u] the data phase failed: disconnecting first", n->c.num);
    else if (!*peer_left)
        tc_complain(role, "[%u] no disconnect event from %s within %u ms; disconnecting", n->c.num, n->c.peer, ms);
    else
        native_say(LVL_VERBOSE, role, "[%u] disconnect event", n->c.num);
    NTSTATUS st = tc_conn_disconnect(&n->c);
    if (st != STATUS_SUCCESS) {
        tc_complain(role, "[%u] disconnect from %s failed: %s", n->c.num, n->c.peer, tc_status_name(st));
        return false;
    }
    uint64_t now = tc_now_us();
    native_say(LVL_NORMAL, role, "[%u] accept (reply -> RTR) %" PRIu64 " us, disconnect %" PRIu64 " us, total %" PRIu64 " us",
               n->c.num, t_accept, n->c.leg_us, now > t_event ? now - t_event : 0);
    return true;
}

/* An accepted connection: the data phase and the disconnect. True if it
 * went as asked. */
static bool serve_accepted(struct server *s, struct nconn *n, const struct peer_data *r, bool request_ok)
{
    struct adv peer_adv = {0};
    if (r->adv_bytes)
        adv_decode(r->adv_bytes, &peer_adv);
    uint64_t t_accept = n->c.leg_us;
    /* A failed data phase still ends with the disconnect. */
    bool data_ok = !opt.data_phase || server_data(s, n, &peer_adv);
    bool peer_left = false;
    if (!answer_disconnect(s, n, data_ok, r->t_event, &peer_left))
        return false;
    /* The connection phase went as asked even if the data phase did not
     * (then we did not wait for the client's disconnect). */
    if (request_ok && (peer_left || !data_ok))
        tc_stats_add(&s->accept_stats, t_accept);
    return request_ok && peer_left && data_ok;
}

/* One connection, passive side. True if it went as asked. */
static bool server_handle(struct server *s, NDK_CONNECTOR *cn, uint64_t t_event, unsigned num)
{
    struct nconn *n = nconn_new(&s->side, num, false);
    if (!n) {
        tc_listener_refuse(cn);
        return false;
    }
    n->c.cn = cn; /* ours from the connect event on */
    struct peer_data r = {.t_event = t_event};
    bool ok = false;
    if (read_request(n, &r)) {
        bool request_ok = check_request(s, &r) && r.well_formed;
        const char *why = refusal(&r);
        if (opt.reject || why) {
            ok = refuse(s, n, why) && request_ok;
            if (ok)
                tc_stats_add(&s->reject_stats, 0);
        } else {
            ok = accept_request(s, n, &r) && serve_accepted(s, n, &r, request_ok);
        }
    }
    free(r.pd);
    return nconn_end(n) && ok;
}

void server_serve(struct server *s)
{
    unsigned ms = s->bounded_wait ? tc_adapter_wait_ms(&s->side.a) : 0;
    while (!s->limit || s->handled < s->limit) {
        NDK_CONNECTOR *cn;
        uint64_t t_event = 0;
        enum tc_next got = tc_listener_next(s->listener, ms, &cn, &t_event);
        if (got == TC_NEXT_STOPPED)
            break;
        if (got == TC_NEXT_TIMEOUT) {
            tc_complain(s->side.role, "no connection request within %u ms", ms);
            s->failed = true;
            break;
        }
        s->handled++;
        if (server_handle(s, cn, t_event, s->handled))
            s->ok++;
        else
            s->failed = true;
    }
}
