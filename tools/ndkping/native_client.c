/*
 * native_client.c - the active side of ndkping's own protocol (see
 * native.h): connect with private data and IRD/ORD, check the server's
 * answer, then the data phase (RDMA Write of a pattern into the server's
 * buffer, RDMA Read of it back, Send of a message whose reply lands in our
 * receive), then disconnect.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/pattern.h"
#include "ndkping/native.h"

static ULONG min_ul(ULONG a, ULONG b)
{
    return a < b ? a : b;
}

/* The effective limits the client reads after the server accepted. */
static bool check_limits(const struct client *cl, const struct peer_data *r)
{
    const char *role = cl->side.role;
    const NDK_ADAPTER_INFO *in = &cl->side.a.info;
    ULONG my_ird = min_ul(opt.ird, in->MaxInboundReadLimit), my_ord = min_ul(opt.ord, in->MaxOutboundReadLimit);
    if (!cl->peer) {
        if (r->ird <= my_ird && r->ord <= my_ord)
            return true;
        tc_complain(role, "effective IRD %" PRIu32 " ORD %" PRIu32 " exceed what was asked (IRD %" PRIu32 " ORD %" PRIu32 ")",
                    r->ird, r->ord, my_ird, my_ord);
        return false;
    }
    const NDK_ADAPTER_INFO *pi = &cl->peer->a.info;
    ULONG want_ird = min_ul(my_ird, min_ul(opt.ord, pi->MaxOutboundReadLimit));
    ULONG want_ord = min_ul(my_ord, min_ul(opt.ird, pi->MaxInboundReadLimit));
    return peer_data_exact(role, "effective", r, want_ird, want_ord, cl->peer, opt.reply, opt.reply_len);
}

/* The answer's shape against the data phase asked for. */
static bool check_answer(const struct client *cl, const struct peer_data *r, unsigned num)
{
    const char *role = cl->side.role;
    bool ok = check_limits(cl, r);
    if (!r->well_formed)
        tc_complain(role, "[%u] the server's private data has a NUL not followed by a %u-byte buffer advertisement",
                    num, ADV_LEN);
    else if (opt.data_phase && !r->adv_bytes)
        tc_complain(role, "[%u] the server advertises no buffer for the data phase (does it run with --no-data?)",
                    num);
    else if (!opt.data_phase && r->adv_bytes)
        tc_complain(role, "[%u] the server advertises a buffer for a data phase, but this client runs with --no-data",
                    num);
    else if (opt.data_phase && r->ord == 0)
        tc_complain(role, "[%u] the data phase's RDMA Read needs an effective ORD of 1 or more", num);
    else
        return ok;
    return false;
}

/* A refused connect: the reject's private data stays readable
 * (docs/behaviour.md). --loopback --reject expects exactly this. */
static bool refused(struct client *cl, struct nconn *n)
{
    if (opt.mode != MODE_LOOPBACK || !opt.reject) {
        tc_conn_explain_connect(&n->c, STATUS_CONNECTION_REFUSED);
        return false;
    }
    struct peer_data r = {0};
    NTSTATUS st = peer_data_read(n, &r);
    bool ok = false;
    if (st != STATUS_SUCCESS) {
        tc_complain(cl->side.role, "[%u] refused as asked, but NdkGetConnectionData failed: %s", n->c.num,
                    tc_status_name(st));
    } else {
        char p[PDATA_BUF];
        native_say(LVL_NORMAL, cl->side.role, "[%u] refused by %s as asked, server private data %s", n->c.num,
                   n->c.peer, fmt_pdata(r.pd, r.pd_len, p, sizeof p));
        ok = pdata_matches(cl->side.role, "server", r.pd, r.pd_len, opt.reply, opt.reply_len);
    }
    free(r.pd);
    return ok;
}

/* Before the connect: the source buffer (the pattern, advertised in the
 * connect's private data), the read sink, the message buffer ([0,
 * MSG_SIZE): our message; then the reply), and the receive for the reply. */
static bool data_setup(struct nconn *n)
{
    /* The read sink flag is required unless the adapter says otherwise,
     * and always allowed. */
    if (!nconn_buf(n, B_SOURCE, opt.size, NDK_MR_FLAG_ALLOW_REMOTE_READ) ||
        !nconn_buf(n, B_SINK, opt.size, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK) ||
        !nconn_buf(n, B_MSG, 2 * MSG_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE))
        return false;
    n->seed = tc_pattern_seed(n->c.num);
    tc_pattern_fill(n->bufs[B_SOURCE].mem, opt.size, n->seed, STREAM_BUFFER);
    return nconn_recv_and_advertise(n, B_SOURCE, opt.data, opt.data_len);
}

/* (a) RDMA Write of the pattern, (b) RDMA Read of it back into the sink,
 * which holds the complement first so that every byte must change. */
static bool write_and_read(struct nconn *n, const struct adv *peer, uint32_t len)
{
    if (!nconn_post(n, OP_WRITE, B_SOURCE, 0, len, peer))
        return false;
    nconn_wait(n, 1u << OP_WRITE);
    if (!nconn_op_ok(n, OP_WRITE))
        return false;
    uint8_t *sink = n->bufs[B_SINK].mem;
    const uint8_t *src = n->bufs[B_SOURCE].mem;
    for (uint32_t i = 0; i < len; i++)
        sink[i] = (uint8_t)~src[i];
    if (!nconn_post(n, OP_READ, B_SINK, 0, len, peer))
        return false;
    nconn_wait(n, 1u << OP_READ);
    if (!nconn_op_ok(n, OP_READ))
        return false;
    size_t first = 0, nbad;
    uint8_t g = 0, w = 0;
    if (opt.verify && (nbad = tc_pattern_check(sink, len, n->seed, STREAM_BUFFER, &first, &g, &w))) {
        tc_complain(n->side->role,
                    "[%u] RDMA Read: %zu of the %" PRIu32 " bytes read back differ from those written, the first at "
                    "offset %zu: 0x%02x, expected 0x%02x",
                    n->c.num, nbad, len, first, g, w);
        return false;
    }
    return true;
}

/* (c) Send of our message into the server's receive; its reply lands in
 * ours, whose header is left in *reply. */
static bool send_and_receive(struct nconn *n, uint32_t len, struct msg *reply)
{
    const char *role = n->side->role;
    struct msg h = {.kind = MSG_CLIENT, .seed = n->seed, .len = len};
    msg_build(n->bufs[B_MSG].mem, &h);
    if (!nconn_post(n, OP_SEND, B_MSG, 0, MSG_SIZE, NULL))
        return false;
    nconn_wait(n, 1u << OP_SEND | 1u << OP_RECV);
    if (!nconn_op_ok(n, OP_SEND) || !nconn_op_ok(n, OP_RECV))
        return false;
    char why[160];
    const char *bad = msg_check(n->bufs[B_MSG].mem + MSG_SIZE, n->ops[OP_RECV].res.BytesTransferred, MSG_REPLY, len,
                                &h, why, sizeof why);
    if (!bad && h.seed != n->seed) {
        snprintf(why, sizeof why, "seed 0x%08" PRIx32 ", expected 0x%08" PRIx32, h.seed, n->seed);
        bad = why;
    }
    if (bad) {
        tc_complain(role, "[%u] Receive: the server's reply is not as sent: %s", n->c.num, bad);
        return false;
    }
    if (h.verdict != VERDICT_OK && h.verdict != VERDICT_UNCHECKED) {
        tc_complain(role, "[%u] the server reports: %s", n->c.num, verdict_name(h.verdict));
        return false;
    }
    *reply = h;
    return true;
}

/* How the bytes were checked: here with --verify, and by the server
 * unless it runs without. */
static const char *checked(uint32_t verdict)
{
    if (opt.verify)
        return verdict == VERDICT_OK ? ", every byte verified" : ", verified here (the server runs without --verify)";
    return verdict == VERDICT_OK ? ", verified by the server (not here: no --verify)" : ", not verified (no --verify)";
}

/* The data phase's line, and its statistics. */
static void report_data(struct client *cl, struct nconn *n, uint32_t len, const struct msg *reply)
{
    uint32_t held = reply->held_us;
    uint64_t t_write = nconn_op_us(n, OP_WRITE), t_read = nconn_op_us(n, OP_READ);
    const struct op *sent = &n->ops[OP_SEND], *back = &n->ops[OP_RECV];
    /* The round trip, less the time the server spent checking. */
    uint64_t t_rtt = back->t_done > sent->t_post ? back->t_done - sent->t_post : 0;
    uint64_t t_sr = t_rtt > held ? t_rtt - held : 0;
    native_say(LVL_VERBOSE, cl->side.role,
               "[%u] Send/Receive: round trip %" PRIu64 " us, of which the server held the message %" PRIu32 " us",
               n->c.num, t_rtt, held);
    native_say(LVL_NORMAL, cl->side.role,
               "[%u] RDMA Write %" PRIu32 " bytes %" PRIu64 " us (%.*f MB/s), RDMA Read %" PRIu32 " bytes %" PRIu64
               " us (%.*f MB/s), Send/Receive %u bytes %" PRIu64 " us round trip (%.*f MB/s)%s",
               n->c.num, len, t_write, TC_RATE(len, t_write), len, t_read, TC_RATE(len, t_read), MSG_SIZE, t_sr,
               TC_RATE(2 * MSG_SIZE, t_sr), checked(reply->verdict));
    tc_stats_add(&cl->write_stats, t_write);
    tc_stats_add(&cl->read_stats, t_read);
    tc_stats_add(&cl->sr_stats, t_sr);
    cl->data_bytes += len;
}

static bool client_data(struct client *cl, struct nconn *n, const struct adv *peer)
{
    uint32_t len = opt.size < peer->size ? opt.size : peer->size;
    if (len == 0) {
        tc_complain(cl->side.role, "[%u] the server advertises an empty buffer", n->c.num);
        return false;
    }
    if (len > cl->side.a.info.MaxTransferLength) {
        tc_complain(cl->side.role, "[%u] %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32, n->c.num,
                    len, cl->side.a.info.MaxTransferLength);
        return false;
    }
    struct msg reply;
    if (!write_and_read(n, peer, len) || !send_and_receive(n, len, &reply))
        return false;
    report_data(cl, n, len, &reply);
    return true;
}

/* Reads and prints the server's answer; false if it cannot be read. */
static bool read_answer(struct client *cl, struct nconn *n, struct peer_data *r)
{
    NDK_SOCKADDR local;
    memset(&local, 0, sizeof local);
    ULONG alen = sizeof local;
    char src[TC_ADDR_BUF + 48], p[PDATA_BUF];
    NTSTATUS st = n->c.cn->Dispatch->NdkGetLocalAddress(n->c.cn, &local.sa, &alen);
    if (st == STATUS_SUCCESS)
        tc_format_addr(&local, true, src, sizeof src);
    else
        snprintf(src, sizeof src, "? (NdkGetLocalAddress: %s)", tc_status_name(st));
    if ((st = peer_data_read(n, r)) != STATUS_SUCCESS) {
        tc_complain(cl->side.role, "[%u] NdkGetConnectionData after the connect failed: %s", n->c.num,
                    tc_status_name(st));
        return false;
    }
    native_say(LVL_NORMAL, cl->side.role,
               "[%u] %s -> %s: effective IRD %" PRIu32 " ORD %" PRIu32 ", server private data %s", n->c.num, src,
               n->c.peer, r->ird, r->ord, fmt_pdata_adv(r->pd, r->text_len, r->adv_bytes, p, sizeof p));
    return true;
}

/* Connected: check, complete, data phase, disconnect. */
static bool connected(struct client *cl, struct nconn *n, uint64_t t0, uint64_t t_connect)
{
    const char *role = cl->side.role;
    struct peer_data r = {0};
    if (!read_answer(cl, n, &r)) {
        free(r.pd);
        return false;
    }
    bool answer_ok = check_answer(cl, &r, n->c.num);
    struct adv peer_adv = {0};
    if (r.adv_bytes)
        adv_decode(r.adv_bytes, &peer_adv);
    free(r.pd);
    if (!tc_conn_complete(&n->c))
        return false;
    uint64_t t_complete = n->c.leg_us;
    /* A failed data phase still ends with the disconnect. */
    bool data_ok = !opt.data_phase || (answer_ok && client_data(cl, n, &peer_adv));
    NTSTATUS st = tc_conn_disconnect(&n->c);
    if (st != STATUS_SUCCESS) {
        tc_complain(role, "[%u] disconnect from %s failed: %s", n->c.num, n->c.peer, tc_status_name(st));
        return false;
    }
    /* The peer's disconnect may race with ours (NdkDisconnect's rules). */
    if (tc_conn_peer_left(&n->c, 0))
        native_say(LVL_VERBOSE, role, "[%u] disconnect event (raced with our NdkDisconnect)", n->c.num);
    if (answer_ok)
        tc_stats_add(&cl->connect_stats, t_connect);
    uint64_t now = tc_now_us();
    native_say(LVL_NORMAL, role,
               "[%u] connect (request -> reply) %" PRIu64 " us, complete (CompleteConnect) %" PRIu64
               " us, disconnect %" PRIu64 " us, total %" PRIu64 " us",
               n->c.num, t_connect, t_complete, n->c.leg_us, now > t0 ? now - t0 : 0);
    return answer_ok && data_ok;
}

/* The connect and what follows it; true if it went as asked. */
static bool connect_and_run(struct client *cl, struct nconn *n)
{
    const void *data = opt.data_len ? opt.data : NULL;
    ULONG data_len = (ULONG)opt.data_len;
    if (opt.data_phase) {
        data = n->pdata_out;
        data_len = n->pdata_out_len;
    }
    uint64_t t0 = tc_now_us();
    NTSTATUS st = tc_conn_connect(&n->c, &cl->side.addr, &cl->dst, opt.ird, opt.ord, data, data_len);
    if (st == STATUS_CONNECTION_REFUSED) {
        bool ok = refused(cl, n);
        if (ok)
            tc_stats_add(&cl->connect_stats, n->c.leg_us);
        return ok;
    }
    if (st != STATUS_SUCCESS) {
        tc_conn_explain_connect(&n->c, st);
        return false;
    }
    if (opt.mode == MODE_LOOPBACK && opt.reject) {
        tc_complain(cl->side.role, "[%u] connect to %s succeeded although the server rejects", n->c.num, n->c.peer);
        return false;
    }
    return connected(cl, n, t0, n->c.leg_us);
}

bool client_once(struct client *cl, unsigned num)
{
    struct nconn *n = nconn_new(&cl->side, num, true);
    if (!n)
        return false;
    bool ok = (!opt.data_phase || data_setup(n)) && connect_and_run(cl, n);
    return nconn_end(n) && ok;
}
