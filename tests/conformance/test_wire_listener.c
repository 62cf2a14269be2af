/*
 * Our LISTENER against a raw TCP initiator (rawpeer.h): what libndk does with
 * every kind of MPA Request a network can deliver, good or bad.
 *
 * Contract (docs/behaviour.md "Listeners" and "The three legs on the wire",
 * iwarp.md 2.3-2.4):
 *  - a malformed Request (key, revision, PD_Length, bytes after the Request,
 *    a truncated frame) closes the TCP connection without a Reply and
 *    without a connect event;
 *  - a Request asking for markers gets a rejecting Reply (R=1), no event;
 *  - a Request that does not arrive within MpaRequestTimeoutMs is closed
 *    silently; at most MaxHalfOpen connections may wait for their Request;
 *  - whatever one connection did, the listener keeps serving the next one.
 * Valid Requests (siw v2, rev 1, peer-to-peer, CRC) check the Reply octets,
 * the RTR leg and RFC 5044 TX gating.
 *
 * Timing: the bad-input cases run with MpaRequestTimeoutMs = 4000 and demand
 * the close within PROMPT_MS, so a close caused by the request timer (i.e.
 * the bad input was not noticed) fails the test instead of passing it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

#define PROMPT_MS 1500u  /* our side must react to a complete bad input within this */
#define NO_EVENT_MS 100u /* after the close, a connect event would already be queued */
#define QUIET_MS 300u    /* "nothing is sent" windows */
#define BAD_INPUT_REQ_TIMEOUT 4000u

static nk_world *open_world(ULONG request_timeout_ms, ULONG max_half_open)
{
    NDK_OPEN_OPTIONS o = nk_options();
    o.MpaRequestTimeoutMs = request_timeout_ms;
    o.MaxHalfOpen = max_half_open;
    return nk_open(&o);
}

/* How the raw peer saw the connection end, for messages. */
static void report_end(const char *what, int end, unsigned ms, const uint8_t *got, size_t n)
{
    fprintf(stderr, "    %s: %s after %u ms, %zu octets received\n", what, rp_end_name(end), ms,
            n);
    if (n)
        rp_hexdump("received", got, n < 64 ? n : 64);
}

/*
 * One bad input: connect, send `bytes`, half-close if `fin`, then assert that
 * libndk closes within PROMPT_MS without sending anything, that no connect
 * event comes, and that a normal NDK connection to the same listener works.
 */
static void expect_dropped(nk_world *w, nk_listener *l, const uint8_t *bytes, size_t n, bool fin,
                           const char *what)
{
    int fd = rp_connect(l->port, NK_WAIT_MS);
    if (fd < 0) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: cannot connect to the listener\n", tl_current, what);
        return;
    }
    /* A send may fail once libndk reset the connection mid-way: fine. */
    (void)rp_send(fd, bytes, n);
    if (fin)
        rp_fin(fd);
    uint64_t t0 = tl_now_ns();
    uint8_t got[64];
    size_t nb = 0;
    int end = rp_wait_end(fd, PROMPT_MS, got, sizeof got, &nb);
    if (end == RP_OPEN || end == RP_ERROR || nb != 0) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: expected a close with no Reply\n", tl_current, what);
        report_end(what, end, rp_ms_since(t0), got, nb);
    }
    close(fd);
    (void)nk_no_event(l, NO_EVENT_MS, what);
    char tag[96];
    snprintf(tag, sizeof tag, "after %s", what);
    if (!nk_roundtrip(w, l, tag)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: the listener no longer serves\n", tl_current, what);
    }
}

/* Checks the fixed part of a Reply: key, flags (compared under mask), Rev. */
static bool check_reply_header(const uint8_t *r, size_t n, uint8_t flags, uint8_t mask,
                               uint8_t rev)
{
    bool ok = n >= RP_HDR_LEN && memcmp(r, RP_KEY_REP, RP_KEY_LEN) == 0 &&
              (r[16] & mask) == flags && r[17] == rev;
    if (!ok) {
        tl_failures++;
        fprintf(stderr,
                "[%s] Reply header: want key \"%s\", flags 0x%02x under mask 0x%02x, Rev %u\n",
                tl_current, RP_KEY_REP, flags, mask, rev);
        rp_hexdump("got", r, n < 64 ? n : 64);
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Valid Requests                                                           */
/* ------------------------------------------------------------------------ */

/*
 * The Request a siw rping client sends (captures/guest-to-host-mpa-request):
 * the connect event shows no private data (RDS 0) and IRD/ORD 1/1; the Reply
 * is Rev 2, S=1, A=0 with IRD/ORD 1/1; and then libndk sends nothing until
 * the initiator's first FPDU has arrived, even with a Send already posted
 * (RFC 5044 rule 4; a siw initiator fails on FPDUs queued behind the Reply).
 */
static void siw_request_accepted(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    nk_mr m = {0};
    int fd = -1;
    if (!l)
        goto out;
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0 || !rp_send(fd, rp_siw_request, sizeof rp_siw_request))
        goto out;

    c = nk_next_event(l, NK_WAIT_MS);
    CHECK(c != NULL);
    if (!c)
        goto out;
    ULONG ird = 0xFFFF, ord = 0xFFFF, len = 0;
    CHECK_ST(nk_conn_data(c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 0);
    CHECK_EQ(ird, 1);
    CHECK_EQ(ord, 1);

    qp = nk_qp(w);
    CHECK(qp != NULL);
    if (!qp)
        goto out;
    /* The data exchange needs a registered buffer; without one the Reply and
     * the silence after it are still checked. */
    bool data = nk_mr_register(w, &m);
    CHECK(data);
    if (data) {
        /* A receive for the initiator's first message, posted before Accept
         * as an rping server does. */
        NDK_SGE rs = nk_sge(&m, 0, 64);
        CHECK_ST(qp->Dispatch->NdkReceive(qp, (PVOID)(uintptr_t)1, &rs, 1), STATUS_SUCCESS);
    }

    nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
    /* A=0: there is no third leg, Accept completes once the Reply is out. */
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);

    uint8_t rep[64];
    int end;
    size_t n = rp_read(fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24 && check_reply_header(rep, n, RP_F_S, 0xF0, 2)) {
        CHECK_EQ(rp_get16(rep + 18), 4);
        /* A=0 and no RTR bits (client/server), IRD 1, ORD 1. */
        CHECK_EQ(rp_get16(rep + 20), 0x0001);
        CHECK_EQ(rp_get16(rep + 22), 0x0001);
    }

    /* Post our first Send now: it must be held until the peer's FPDU. */
    if (data) {
        memcpy(m.buf + 64, "PING", 4);
        NDK_SGE ss = nk_sge(&m, 64, 4);
        CHECK_ST(qp->Dispatch->NdkSend(qp, (PVOID)(uintptr_t)2, &ss, 1, 0), STATUS_SUCCESS);
    }
    uint8_t early[64];
    size_t nearly = 0;
    if (!rp_quiet(fd, QUIET_MS, early, &nearly)) {
        tl_failures++;
        fprintf(stderr, "[%s] libndk sent before the initiator's first FPDU (TX gating)\n",
                tl_current);
        rp_hexdump("sent early", early, nearly);
    }
    if (!data)
        goto out;

    /* The initiator's first message: a 4-octet Send, QN 0, MSN 1. */
    uint8_t f[64];
    size_t fl = rp_send_fpdu(f, 1, "HELO", 4, false);
    CHECK(rp_send(fd, f, fl));

    /* Now our Send goes out: exactly this FPDU (CRC off -> zero CRC). */
    uint8_t want[64], got[64];
    size_t wl = rp_send_fpdu(want, 1, "PING", 4, false);
    n = rp_read(fd, got, wl, NK_WAIT_MS, &end);
    if (n != wl || memcmp(got, want, wl) != 0) {
        tl_failures++;
        fprintf(stderr, "[%s] our first Send after the gate (%s)\n", tl_current,
                rp_end_name(end));
        rp_hexdump("expected", want, wl);
        rp_hexdump("got", got, n);
    }

    /* Both completions: the receive (4 octets "HELO") and our Send. */
    bool saw_recv = false, saw_send = false;
    for (int i = 0; i < 2; i++) {
        NDK_RESULT res;
        if (!nk_cq_next(w, &res, NK_WAIT_MS))
            break;
        if (res.RequestContext == (PVOID)(uintptr_t)1) {
            saw_recv = true;
            CHECK_ST(res.Status, STATUS_SUCCESS);
            CHECK_EQ(res.BytesTransferred, 4);
            CHECK(memcmp(m.buf, "HELO", 4) == 0);
        } else if (res.RequestContext == (PVOID)(uintptr_t)2) {
            saw_send = true;
            CHECK_ST(res.Status, STATUS_SUCCESS);
        }
    }
    CHECK(saw_recv);
    CHECK(saw_send);
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    nk_mr_release(&m);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/* NDK_OPEN_FLAG_RELAXED_TX_GATE (docs/behaviour.md "The three legs on the
 * wire"): to a client/server initiator that sends nothing first, our Send
 * goes out 100 ms after the Reply, not before, and without waiting for the
 * initiator's first FPDU. */
static void relaxed_tx_gate(void)
{
    NDK_OPEN_OPTIONS o = nk_options();
    o.Flags = NDK_OPEN_FLAG_RELAXED_TX_GATE;
    nk_world *w = nk_open(&o);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    nk_mr m = {0};
    int fd = -1;
    if (!l)
        goto out;
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    uint64_t t_req = tl_now_ns();
    if (fd < 0 || !rp_send(fd, rp_siw_request, sizeof rp_siw_request))
        goto out;
    c = nk_next_event(l, NK_WAIT_MS);
    qp = nk_qp(w);
    CHECK(c != NULL && qp != NULL);
    if (!c || !qp || !nk_mr_register(w, &m)) {
        tl_failures++;
        goto out;
    }
    nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    int end;
    CHECK_EQ(rp_read(fd, rep, 24, NK_WAIT_MS, &end), 24);
    memcpy(m.buf, "PING", 4);
    NDK_SGE ss = nk_sge(&m, 0, 4);
    CHECK_ST(qp->Dispatch->NdkSend(qp, (PVOID)(uintptr_t)2, &ss, 1, 0), STATUS_SUCCESS);
    /* Our Send, though the initiator never sent anything; not before the
     * timer, started after our Request arrived, ran its 100 ms (the loop
     * counts whole milliseconds). */
    uint8_t want[64], got[64];
    size_t wl = rp_send_fpdu(want, 1, "PING", 4, false);
    size_t n = rp_read(fd, got, wl, NK_WAIT_MS, &end);
    unsigned after_req = rp_ms_since(t_req);
    if (n != wl || memcmp(got, want, wl) != 0 || after_req < 99) {
        tl_failures++;
        fprintf(stderr, "[%s] our Send, %u ms after the Request (%s)\n", tl_current, after_req,
                rp_end_name(end));
        rp_hexdump("expected", want, wl);
        rp_hexdump("got", got, n);
    }
    NDK_RESULT res;
    bool done = nk_cq_next(w, &res, NK_WAIT_MS);
    CHECK(done);
    if (done) {
        CHECK(res.RequestContext == (PVOID)(uintptr_t)2);
        CHECK_ST(res.Status, STATUS_SUCCESS);
    }
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    nk_mr_release(&m);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/* ndk_close_adapter right after NdkReject still keeps our FIN off the
 * reject (docs/interop.md: siw drops a reject's data once it has seen a
 * FIN): the close waits until the initiator closes, at most 500 ms. */
static void *close_adapter_thread(void *arg)
{
    ndk_close_adapter(arg);
    return NULL;
}

static void reject_then_close_adapter(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    int fd = l ? rp_connect(l->port, NK_WAIT_MS) : -1;
    CHECK(fd >= 0);
    NDK_CONNECTOR *c = NULL;
    if (fd < 0 || !rp_send(fd, rp_siw_request, sizeof rp_siw_request) ||
        !(c = nk_next_event(l, NK_WAIT_MS))) {
        tl_failures++;
        goto out;
    }
    static const char no[] = "no-thanks";
    uint64_t t0 = tl_now_ns();
    CHECK_ST(c->Dispatch->NdkReject(c, (PVOID)no, sizeof no - 1), STATUS_SUCCESS);
    NK_CLOSE(c);
    c = NULL;
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, close_adapter_thread, w->ad) == 0);
    uint8_t rep[600];
    size_t n = rp_read_frame(fd, rep, NK_WAIT_MS);
    CHECK(n == RP_HDR_LEN + 4 + sizeof no - 1 && check_reply_header(rep, n, RP_F_R, RP_F_R, 2));
    uint8_t got[64];
    size_t nb = 0;
    int end = rp_wait_end(fd, PROMPT_MS, got, sizeof got, &nb);
    unsigned ms = rp_ms_since(t0);
    if ((end != RP_EOF && end != RP_RESET) || nb || ms < 490) {
        tl_failures++;
        fprintf(stderr, "[%s] the close came %u ms after NdkReject, expected 500\n", tl_current,
                ms);
        report_end("after the reject", end, ms, got, nb);
    }
    pthread_join(th, NULL);
    w->ad = NULL; /* closed by the thread */
out:
    NK_CLOSE(c);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/* An MPA revision 1 Request (no S bit, no IRD/ORD word) gets a revision 1
 * Reply with no word either; IRD/ORD count as the adapter maxima (128). */
static void rev1_request_gets_rev1_reply(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    int fd = -1;
    if (!l)
        goto out;
    uint8_t req[32];
    size_t rl = rp_frame_raw(req, RP_KEY_REQ, 0x00, 1, 0, NULL, 0);
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0 || !rp_send(fd, req, rl))
        goto out;
    c = nk_next_event(l, NK_WAIT_MS);
    CHECK(c != NULL);
    if (!c)
        goto out;
    ULONG ird = 0, ord = 0, len = 0;
    CHECK_ST(nk_conn_data(c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 0);
    CHECK_EQ(ird, 128);
    CHECK_EQ(ord, 128);
    qp = nk_qp(w);
    CHECK(qp != NULL);
    if (!qp)
        goto out;
    nk_op a = nk_accept(c, qp, 4, 4, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    int end;
    size_t n = rp_read(fd, rep, RP_HDR_LEN, NK_WAIT_MS, &end);
    CHECK_EQ(n, RP_HDR_LEN);
    /* M=C=R=S=0, Rev 1, PD_Length 0: nothing else may follow. */
    if (n == RP_HDR_LEN && check_reply_header(rep, n, 0x00, 0xF0, 1))
        CHECK_EQ(rp_get16(rep + 18), 0);
    uint8_t extra[64];
    size_t ne = 0;
    if (!rp_quiet(fd, QUIET_MS, extra, &ne)) {
        tl_failures++;
        fprintf(stderr, "[%s] octets after the rev 1 Reply\n", tl_current);
        rp_hexdump("extra", extra, ne);
    }
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/*
 * Peer-to-peer Requests (A=1 offering the Write RTR, IRD 4 / ORD 8 as in
 * captures/host-to-guest-mpa-v2-p2p): the Reply has A=1 and the Write RTR
 * chosen; NdkAccept completes only after the zero-length Write RTR FPDU.
 * With C=1 in the Request the Reply echoes C=1, and an RTR whose CRC is wrong
 * must make Accept fail and the connection close.
 *   crc: 0 = CRC off, 1 = CRC on with a good RTR CRC, 2 = CRC on, bad CRC.
 */
static void p2p_case(int crc)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    int fd = -1;
    if (!l)
        goto out;
    uint8_t req[64];
    size_t rl = rp_frame_v2(req, RP_KEY_REQ, crc ? RP_F_C : 0, RP_W0_A | 4, RP_W1_C | 8, NULL, 0);
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0 || !rp_send(fd, req, rl))
        goto out;
    c = nk_next_event(l, NK_WAIT_MS);
    CHECK(c != NULL);
    if (!c)
        goto out;
    ULONG ird = 0, ord = 0, len = 0;
    CHECK_ST(nk_conn_data(c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(ird, 8); /* min(128, requester ORD 8) */
    CHECK_EQ(ord, 4); /* min(128, requester IRD 4) */
    qp = nk_qp(w);
    CHECK(qp != NULL);
    if (!qp)
        goto out;
    nk_op a = nk_accept(c, qp, 8, 4, NULL, 0);

    uint8_t rep[64];
    int end;
    size_t n = rp_read(fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24 &&
        check_reply_header(rep, n, (uint8_t)(RP_F_S | (crc ? RP_F_C : 0)), 0xF0, 2)) {
        CHECK_EQ(rp_get16(rep + 18), 4);
        uint16_t w0 = rp_get16(rep + 20), w1 = rp_get16(rep + 22);
        CHECK(w0 & RP_W0_A);        /* peer-to-peer mirrored */
        CHECK(!(w0 & RP_W0_B));     /* not the Send RTR */
        CHECK(w1 & RP_W1_C);        /* the Write RTR, as offered */
        CHECK(!(w1 & RP_W1_D));     /* exactly one type chosen */
        CHECK_EQ(w0 & RP_IRD_ORD_MASK, 8);
        CHECK_EQ(w1 & RP_IRD_ORD_MASK, 4);
    }
    /* Before the RTR: Accept still pending and nothing sent. */
    uint8_t early[64];
    size_t ne = 0;
    if (!rp_quiet(fd, QUIET_MS, early, &ne)) {
        tl_failures++;
        fprintf(stderr, "[%s] libndk sent before the RTR\n", tl_current);
        rp_hexdump("sent", early, ne);
    }
    if (nk_op_done(&a)) {
        tl_failures++;
        fprintf(stderr, "[%s] Accept completed (%s) before the RTR arrived\n", tl_current,
                nk_st(nk_op_wait(&a, 0)));
    }

    uint8_t rtr[20];
    rp_write_rtr(rtr, crc != 0);
    if (crc) {
        /* The CRC known-answer value of iwarp.md 4.3: our encoder agrees. */
        static const uint8_t kat[4] = {0xEB, 0xD3, 0x4C, 0x5F};
        CHECK(memcmp(rtr + 16, kat, 4) == 0);
    }
    if (crc == 2)
        rtr[19] ^= 0x01;
    CHECK(rp_send(fd, rtr, sizeof rtr));

    NTSTATUS st = nk_op_wait(&a, 2000 + NK_WAIT_MS); /* RtrTimeoutMs is 2000 */
    if (crc != 2) {
        CHECK_ST(st, STATUS_SUCCESS);
        /* A Write RTR needs no answer, and TX stays quiet until we post. */
        if (!rp_quiet(fd, QUIET_MS, early, &ne)) {
            tl_failures++;
            fprintf(stderr, "[%s] octets sent after the RTR\n", tl_current);
            rp_hexdump("sent", early, ne);
        }
    } else {
        if (st == STATUS_SUCCESS || st == NK_NO_COMPLETION) {
            tl_failures++;
            fprintf(stderr, "[%s] Accept with a bad-CRC RTR: got %s, expected a failure\n",
                    tl_current, nk_st(st));
        }
        /* A CRC error is fatal to the stream (iwarp.md 1.11): a Terminate
         * may precede the close, which must come. */
        uint8_t got[64];
        size_t nb = 0;
        uint64_t t0 = tl_now_ns();
        end = rp_wait_end(fd, NK_WAIT_MS, got, sizeof got, &nb);
        if (end != RP_EOF && end != RP_RESET) {
            tl_failures++;
            fprintf(stderr, "[%s] connection not closed after the bad-CRC RTR\n", tl_current);
        }
        report_end("bad-CRC RTR", end, rp_ms_since(t0), got, nb);
    }
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

static void p2p_write_rtr(void)
{
    p2p_case(0);
}

static void p2p_crc_rtr_good(void)
{
    p2p_case(1);
}

static void p2p_crc_rtr_bad(void)
{
    p2p_case(2);
}

/* ------------------------------------------------------------------------ */
/* Markers: the one bad Request that gets a Reply                           */
/* ------------------------------------------------------------------------ */

static void markers_rejected(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (!l) {
        nk_close_world(w);
        REQUIRE(l);
    }
    for (int v = 0; v < 2; v++) {
        uint8_t req[64];
        size_t rl;
        const char *what;
        if (v == 0) {
            /* captures/host-to-guest-markers-rejected: 90 02 00 04 00 01 00 01 */
            rl = rp_frame_v2(req, RP_KEY_REQ, RP_F_M, 1, 1, NULL, 0);
            what = "M=1 Rev 2";
        } else {
            rl = rp_frame_raw(req, RP_KEY_REQ, RP_F_M, 1, 0, NULL, 0);
            what = "M=1 Rev 1";
        }
        int fd = rp_connect(l->port, NK_WAIT_MS);
        CHECK(fd >= 0);
        if (fd < 0)
            continue;
        uint64_t t_req = tl_now_ns();
        CHECK(rp_send(fd, req, rl));
        uint8_t rep[600];
        size_t n = rp_read_frame(fd, rep, NK_WAIT_MS);
        if (n == 0) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: no rejecting Reply\n", tl_current, what);
        } else {
            /* R=1, and the Reply must not ask for markers itself. */
            check_reply_header(rep, n, RP_F_R, RP_F_R | RP_F_M, (uint8_t)(v == 0 ? 2 : 1));
        }
        /* No FIN right behind the reject (docs/interop.md: siw drops data
         * once it has seen a FIN): libndk waits for the initiator to close,
         * at most NDK_REJECT_LINGER_MS (500 ms, a timer started after our
         * Request arrived, so never sooner than that after t_req; the loop
         * counts whole milliseconds), then closes by itself. */
        uint8_t got[64];
        size_t nb = 0;
        uint64_t t0 = tl_now_ns();
        int end = rp_wait_end(fd, PROMPT_MS, got, sizeof got, &nb);
        unsigned after_req = rp_ms_since(t_req);
        if ((end != RP_EOF && end != RP_RESET) || nb || after_req < 490) {
            tl_failures++;
            fprintf(stderr,
                    "[%s] %s: expected the close, and nothing else, 500 ms after the Request "
                    "(came %u ms after it)\n",
                    tl_current, what, after_req);
            report_end(what, end, rp_ms_since(t0), got, nb);
        }
        close(fd);
        nk_no_event(l, NO_EVENT_MS, what);
        CHECK(nk_roundtrip(w, l, what));
    }
    nk_close_world(w);
}

/* ------------------------------------------------------------------------ */
/* Malformed Requests: close, no Reply, no event                            */
/* ------------------------------------------------------------------------ */

/* The siw Request with `key` in place of the real one. */
static void wrong_key(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (l) {
        /* NULL stands for 16 zero octets. */
        static const char *keys[] = {
            RP_KEY_REP,         /* a Reply sent as a Request */
            "mpa id req frame", /* case matters */
            NULL,
            "MPA ID Req Fram_", /* only the last octet wrong */
        };
        for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            uint8_t req[24];
            memcpy(req, rp_siw_request, sizeof req);
            if (keys[i])
                memcpy(req, keys[i], RP_KEY_LEN);
            else
                memset(req, 0, RP_KEY_LEN);
            char what[64];
            snprintf(what, sizeof what, "wrong key #%u", i);
            expect_dropped(w, l, req, sizeof req, false, what);
        }
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

/* Rev 0 and Rev > 2: the revision cannot be handled, close (iwarp.md 2.3). */
static void unknown_revision(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (l) {
        static const uint8_t revs[] = {0, 3, 255};
        for (unsigned i = 0; i < sizeof revs; i++) {
            uint8_t req[24];
            memcpy(req, rp_siw_request, sizeof req);
            req[17] = revs[i];
            char what[64];
            snprintf(what, sizeof what, "Rev %u with S=1", revs[i]);
            expect_dropped(w, l, req, sizeof req, false, what);
            /* And the non-enhanced form, in case only S=1 frames are checked. */
            size_t n = rp_frame_raw(req, RP_KEY_REQ, 0, revs[i], 0, NULL, 0);
            snprintf(what, sizeof what, "Rev %u with S=0", revs[i]);
            expect_dropped(w, l, req, n, false, what);
        }
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

/* PD_Length over the RFC limit of 512: judged from the header alone, so the
 * connection stays open on our side of the test. */
static void pd_length_over_limit(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (l) {
        uint8_t req[RP_HDR_LEN + 600];
        memset(req, 0, sizeof req);
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 513, NULL, 0);
        expect_dropped(w, l, req, n, false, "PD_Length 513, header only");
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 0xFFFF, NULL, 0);
        expect_dropped(w, l, req, n, false, "PD_Length 65535, header only");
        uint8_t pd[513];
        memset(pd, 0x5A, sizeof pd);
        pd[0] = 0, pd[1] = 1, pd[2] = 0, pd[3] = 1;
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 513, pd, sizeof pd);
        expect_dropped(w, l, req, n, false, "PD_Length 513 with 513 octets");
        n = rp_frame_raw(req, RP_KEY_REQ, 0, 1, 513, pd, sizeof pd);
        expect_dropped(w, l, req, n, false, "Rev 1 PD_Length 513 with 513 octets");
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

/* PD_Length promises more than the initiator sends before its FIN. */
static void pd_length_beyond_data(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (l) {
        uint8_t req[RP_HDR_LEN + 16];
        static const uint8_t pd[10] = {0, 1, 0, 1, 'a', 'b', 'c', 'd', 'e', 'f'};
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 100, pd, sizeof pd);
        expect_dropped(w, l, req, n, true, "PD_Length 100 with 10 octets, then FIN");
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 512, NULL, 0);
        expect_dropped(w, l, req, n, true, "PD_Length 512 with none, then FIN");
        n = rp_frame_raw(req, RP_KEY_REQ, 0, 1, 7, pd, 3);
        expect_dropped(w, l, req, n, true, "Rev 1 PD_Length 7 with 3 octets, then FIN");
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

/*
 * S=1 with PD_Length < 4: the RFC 6581 word cannot be there. siw answers
 * with a rejecting Reply, behaviour.md's list of malformed frames closes
 * without one; both are accepted here, nothing else is (no connect event, no
 * accepting Reply, no hanging connection).
 */
static void enhanced_pd_too_short(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    for (unsigned pdl = 0; l && pdl < 4; pdl++) {
        char what[64];
        snprintf(what, sizeof what, "S=1 with PD_Length %u", pdl);
        uint8_t req[32];
        static const uint8_t pd[3] = {0, 1, 0};
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, (uint16_t)pdl, pd, pdl);
        int fd = rp_connect(l->port, NK_WAIT_MS);
        CHECK(fd >= 0);
        if (fd < 0)
            continue;
        CHECK(rp_send(fd, req, n));
        uint8_t got[600];
        size_t nb = 0;
        uint64_t t0 = tl_now_ns();
        int end = rp_wait_end(fd, PROMPT_MS, got, sizeof got, &nb);
        bool closed = end == RP_EOF || end == RP_RESET;
        bool reject_reply = nb >= RP_HDR_LEN && memcmp(got, RP_KEY_REP, RP_KEY_LEN) == 0 &&
                            (got[16] & RP_F_R) && nb == (size_t)RP_HDR_LEN + rp_get16(got + 18);
        if (!closed || (nb && !reject_reply)) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: expected a close (optionally after an R=1 Reply)\n",
                    tl_current, what);
            report_end(what, end, rp_ms_since(t0), got, nb);
        }
        close(fd);
        nk_no_event(l, NO_EVENT_MS, what);
        CHECK(nk_roundtrip(w, l, what));
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

/*
 * Every prefix of a valid Request, then FIN: k = 0 .. len-1 must all be
 * dropped (truncated in the key, the flags, PD_Length, the word and the ULP
 * data). At k = len the Request is whole: a connect event may come, and then
 * the connector must be acceptable or at least closable.
 */
static void truncated_request(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (!l) {
        nk_close_world(w);
        REQUIRE(l);
    }
    uint8_t req[64];
    size_t len = rp_frame_v2(req, RP_KEY_REQ, 0, 1, 1, "trunc-pd", 8);
    for (size_t k = 0; k < len; k++) {
        char what[96];
        snprintf(what, sizeof what, "first %zu of %zu octets, then FIN", k, len);
        expect_dropped(w, l, req, k, true, what);
    }

    int fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(rp_send(fd, req, len));
        rp_fin(fd);
        NDK_CONNECTOR *c = nk_next_event(l, 1000);
        if (c) {
            uint8_t pd[16];
            ULONG pl = sizeof pd;
            CHECK_ST(nk_conn_data(c, NULL, NULL, pd, &pl), STATUS_SUCCESS);
            CHECK(pl == 8 && memcmp(pd, "trunc-pd", 8) == 0);
            NDK_QP *qp = nk_qp(w);
            CHECK(qp != NULL);
            if (qp) {
                nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
                NTSTATUS st = nk_op_wait(&a, NK_WAIT_MS);
                fprintf(stderr, "    whole Request then FIN: connect event, Accept %s\n",
                        nk_st(st));
                CHECK(st != NK_NO_COMPLETION);
            }
            NK_CLOSE(c);
            NK_CLOSE(qp);
        } else {
            fprintf(stderr, "    whole Request then FIN: no connect event\n");
        }
        close(fd);
    }
    CHECK(nk_roundtrip(w, l, "after the whole Request + FIN"));
    nk_close_world(w);
}

/*
 * Random octets from a seeded PRNG (seed printed; NDK_TEST_SEED reproduces a
 * run). 20 octets or more hold a whole header with a wrong key, which must be
 * judged without a FIN; shorter ones are followed by a FIN.
 */
static uint64_t garbage_seed;

static void random_garbage(void)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    if (!l) {
        nk_close_world(w);
        REQUIRE(l);
    }
    fprintf(stderr, "    garbage seed %llu (set NDK_TEST_SEED to repeat)\n",
            (unsigned long long)garbage_seed);
    uint64_t s = garbage_seed;
    static const size_t sizes[] = {1, 3, 15, 16, 19, 20, 21, 24, 64, 511, 532, 533, 1500, 4096};
    static uint8_t buf[4096];
    for (int round = 0; round < 2; round++) {
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint8_t)rp_rand(&s);
            if (round == 1 && n >= RP_HDR_LEN) {
                /* Round 2: the key is right and only what follows is random,
                 * which reaches the flag, revision and length checks. Valid
                 * combinations are ruled out: the Rev is forced to 3..255. */
                memcpy(buf, RP_KEY_REQ, RP_KEY_LEN);
                if (buf[17] <= 2)
                    buf[17] = (uint8_t)(buf[17] + 3);
            }
            char what[96];
            snprintf(what, sizeof what, "%s garbage of %zu octets (seed %llu, round %d)",
                     round ? "keyed" : "random", n, (unsigned long long)garbage_seed, round);
            expect_dropped(w, l, buf, n, n < RP_HDR_LEN, what);
        }
    }
    nk_close_world(w);
}

/*
 * Octets after a valid Request: the initiator sent before the Reply, a
 * protocol violation (iwarp.md 2.3 step 2). Our side must close. If a connect
 * event was delivered before the violation was seen, Accept must then fail.
 *   later = false: Request and extra octets in one send();
 *   later = true:  the extra octets come after the connect event.
 */
static void extra_after_request(bool later)
{
    nk_world *w = open_world(BAD_INPUT_REQ_TIMEOUT, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    int fd = -1;
    if (!l)
        goto out;
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    /* The extra octets look like the start of an FPDU (a Write RTR). */
    uint8_t buf[64];
    memcpy(buf, rp_siw_request, sizeof rp_siw_request);
    size_t n = sizeof rp_siw_request;
    n += rp_write_rtr(buf + n, false);
    if (later) {
        CHECK(rp_send(fd, buf, sizeof rp_siw_request));
        c = nk_next_event(l, NK_WAIT_MS);
        CHECK(c != NULL); /* the Request alone is valid */
        CHECK(rp_send(fd, buf + sizeof rp_siw_request, n - sizeof rp_siw_request));
    } else {
        CHECK(rp_send(fd, buf, n));
    }
    uint8_t got[64];
    size_t nb = 0;
    uint64_t t0 = tl_now_ns();
    int end = rp_wait_end(fd, PROMPT_MS, got, sizeof got, &nb);
    if ((end != RP_EOF && end != RP_RESET) || nb) {
        tl_failures++;
        fprintf(stderr, "[%s] expected a close with no Reply\n", tl_current);
        report_end("octets after the Request", end, rp_ms_since(t0), got, nb);
    }
    if (!c) {
        c = nk_next_event(l, NO_EVENT_MS);
        if (c)
            fprintf(stderr, "    note: a connect event came although the extra octets were in "
                            "the same segment\n");
    }
    if (c) {
        qp = nk_qp(w);
        CHECK(qp != NULL);
        if (qp) {
            nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
            NTSTATUS st = nk_op_wait(&a, NK_WAIT_MS);
            if (st == STATUS_SUCCESS || st == NK_NO_COMPLETION) {
                tl_failures++;
                fprintf(stderr, "[%s] Accept of the violated connection: %s, expected a failure "
                                "(e.g. STATUS_CONNECTION_ABORTED)\n",
                        tl_current, nk_st(st));
            } else {
                fprintf(stderr, "    Accept of the violated connection: %s\n", nk_st(st));
            }
        }
    }
    NK_CLOSE(c);
    c = NULL;
    NK_CLOSE(qp);
    qp = NULL;
    CHECK(nk_roundtrip(w, l, "after extra octets"));
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

static void extra_after_request_same_segment(void)
{
    extra_after_request(false);
}

static void extra_after_request_after_event(void)
{
    extra_after_request(true);
}

/* ------------------------------------------------------------------------ */
/* Slow and silent initiators                                               */
/* ------------------------------------------------------------------------ */

/*
 * Sends the siw Request one octet per 100 ms. The pause is a poll() on the
 * socket, so a close by libndk ends it at once. Returns the octets sent
 * before the connection ended (all 24 if it did not); *end and *t_end tell
 * how and when (ms since the connect).
 */
static size_t send_slowly(int fd, uint64_t t0, int *end, unsigned *t_end, uint8_t *got, size_t *nb)
{
    *end = RP_OPEN;
    *nb = 0;
    *t_end = 0;
    for (size_t i = 0; i < sizeof rp_siw_request; i++) {
        if (!rp_send(fd, rp_siw_request + i, 1)) {
            *end = RP_RESET; /* EPIPE/ECONNRESET: libndk is gone */
            *t_end = rp_ms_since(t0);
            return i;
        }
        if (!rp_quiet(fd, 100, NULL, NULL)) {
            /* Something came: octets, a FIN or a RST. Collect it. */
            *end = rp_wait_end(fd, 50, got, 64, nb);
            *t_end = rp_ms_since(t0);
            return i + 1;
        }
    }
    return sizeof rp_siw_request;
}

/* With a 5000 ms request timer a 2.4 s Request is still in time. */
static void slow_request_accepted(void)
{
    nk_world *w = open_world(5000, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    NDK_CONNECTOR *c = NULL;
    NDK_QP *qp = NULL;
    int fd = -1;
    if (!l)
        goto out;
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    int end;
    unsigned t_end = 0;
    uint8_t got[64];
    size_t nb;
    size_t sent = send_slowly(fd, tl_now_ns(), &end, &t_end, got, &nb);
    if (sent != sizeof rp_siw_request || end != RP_OPEN || nb) {
        tl_failures++;
        fprintf(stderr, "[%s] the slow Request was cut off after %zu octets\n", tl_current, sent);
        report_end("slow Request", end, t_end, got, nb);
        goto out;
    }
    c = nk_next_event(l, NK_WAIT_MS);
    CHECK(c != NULL);
    if (!c)
        goto out;
    qp = nk_qp(w);
    CHECK(qp != NULL);
    if (!qp)
        goto out;
    nk_op a = nk_accept(c, qp, 1, 1, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    size_t n = rp_read(fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24)
        check_reply_header(rep, n, RP_F_S, 0xF0, 2);
out:
    NK_CLOSE(c);
    NK_CLOSE(qp);
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/* With a 500 ms request timer the same initiator is closed silently after
 * about 500 ms: not at once (each octet is fine so far), not never (the
 * timer runs from the accept, not from the last octet). */
static void slow_request_times_out(void)
{
    nk_world *w = open_world(500, 0);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    int fd = -1;
    if (!l)
        goto out;
    fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    uint64_t t0 = tl_now_ns();
    int end;
    unsigned t_end = 0;
    uint8_t got[64];
    size_t nb = 0;
    size_t sent = send_slowly(fd, t0, &end, &t_end, got, &nb);
    if (end == RP_OPEN) {
        /* Still open (all 24 octets sent, or octets came back): wait. */
        size_t more = 0;
        end = rp_wait_end(fd, NK_WAIT_MS, got + nb, sizeof got - nb, &more);
        nb += more;
        t_end = rp_ms_since(t0);
    }
    fprintf(stderr, "    slow initiator: %zu octets sent, %s at %u ms\n", sent, rp_end_name(end),
            t_end);
    CHECK(end == RP_EOF || end == RP_RESET);
    CHECK_EQ(nb, 0);
    CHECK(t_end >= 400);  /* not before the timer (some scheduling slack) */
    CHECK(t_end <= 2000); /* and not long after it */
    CHECK(sent < sizeof rp_siw_request);
    nk_no_event(l, NO_EVENT_MS, "slow Request after the timer");
    CHECK(nk_roundtrip(w, l, "after the slow initiator"));
out:
    if (fd >= 0)
        close(fd);
    nk_close_world(w);
}

/*
 * 200 TCP connections that never send anything against MaxHalfOpen = 32 and
 * MpaRequestTimeoutMs = 3000: at most 32 may be held waiting, the rest are
 * reset at once; a real NDK connection still gets through during the flood;
 * every held one is closed by its request timer.
 */
#define FLOOD 200
#define FLOOD_HALF_OPEN 32
#define FLOOD_REQ_MS 3000u
#define FLOOD_QUICK_MS 1000u

struct flood {
    int fd[FLOOD];
    bool connected[FLOOD], ended[FLOOD];
    int how[FLOOD];
    unsigned t_end[FLOOD]; /* ms since the flood started */
    size_t bytes;          /* octets received: there must be none */
};

/* Polls every live connection until deadline; records how each one ends. */
static void flood_poll(struct flood *f, uint64_t t0, uint64_t deadline)
{
    for (;;) {
        struct pollfd p[FLOOD];
        int idx[FLOOD], np = 0;
        for (int i = 0; i < FLOOD; i++) {
            if (f->ended[i])
                continue;
            p[np].fd = f->fd[i];
            p[np].events = (short)(f->connected[i] ? POLLIN : (POLLOUT | POLLIN));
            p[np].revents = 0;
            idx[np++] = i;
        }
        int left = rp_ms_left(deadline);
        if (np == 0 || left == 0)
            return;
        int r = poll(p, (nfds_t)np, left);
        if (r <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            int i = idx[k];
            if (!p[k].revents)
                continue;
            if (!f->connected[i]) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(f->fd[i], SOL_SOCKET, SO_ERROR, &err, &el);
                if (err == 0 && (p[k].revents & POLLOUT)) {
                    f->connected[i] = true;
                } else if (err != 0) {
                    /* Refused or reset during the handshake: closed at once. */
                    f->ended[i] = true;
                    f->how[i] = RP_RESET;
                    f->t_end[i] = rp_ms_since(t0);
                    continue;
                }
                if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
            }
            uint8_t b[256];
            ssize_t n = recv(f->fd[i], b, sizeof b, MSG_DONTWAIT);
            if (n > 0) {
                f->bytes += (size_t)n;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            f->ended[i] = true;
            f->how[i] = n == 0 ? RP_EOF : errno == ECONNRESET ? RP_RESET : RP_ERROR;
            f->t_end[i] = rp_ms_since(t0);
        }
    }
}

struct flood_rt {
    nk_world *w;
    nk_listener *l;
    uint64_t t_start;
    bool ok;
};

static void *flood_roundtrip(void *arg)
{
    struct flood_rt *rt = arg;
    rt->t_start = tl_now_ns();
    rt->ok = nk_roundtrip(rt->w, rt->l, "during the half-open flood");
    return NULL;
}

static void half_open_flood(void)
{
    nk_world *w = open_world(FLOOD_REQ_MS, FLOOD_HALF_OPEN);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    struct flood *f = calloc(1, sizeof *f);
    if (!l || !f)
        goto out;
    uint64_t t0 = tl_now_ns();
    int started = 0;
    for (int i = 0; i < FLOOD; i++) {
        f->fd[i] = rp_connect_start(l->port);
        if (f->fd[i] < 0) {
            f->ended[i] = true; /* could not even start: counts as refused */
            f->how[i] = RP_ERROR;
            f->t_end[i] = 0;
        } else {
            started++;
        }
    }
    CHECK_EQ(started, FLOOD);

    /* The "quick" window: everything over the limit must be gone by now. */
    flood_poll(f, t0, t0 + (uint64_t)FLOOD_QUICK_MS * 1000000u);
    int quick = 0, rst = 0;
    for (int i = 0; i < FLOOD; i++) {
        quick += f->ended[i];
        rst += f->ended[i] && f->how[i] == RP_RESET;
    }
    fprintf(stderr, "    flood: %d of %d closed within %u ms (%d by RST)\n", quick, FLOOD,
            FLOOD_QUICK_MS, rst);
    /* "Most beyond 32": allow a little slack for connections the kernel had
     * not handed over yet. */
    CHECK(quick >= FLOOD - FLOOD_HALF_OPEN - 16);
    CHECK(FLOOD - quick <= FLOOD_HALF_OPEN); /* at most MaxHalfOpen held */
    CHECK(FLOOD - quick >= FLOOD_HALF_OPEN - 8); /* and the held ones are really held */

    /* During the flood (the held ones are still waiting): a real client,
     * from another thread so that the close times below stay exact. */
    struct flood_rt rt = {.w = w, .l = l};
    pthread_t th;
    bool started_rt = pthread_create(&th, NULL, flood_roundtrip, &rt) == 0;
    CHECK(started_rt);

    /* Every held connection is closed by its request timer. */
    flood_poll(f, t0, t0 + (uint64_t)(FLOOD_REQ_MS + 2500) * 1000000u);
    if (started_rt) {
        pthread_join(th, NULL);
        fprintf(stderr, "    NDK connection during the flood: %s (%u ms after the flood began)\n",
                rt.ok ? "ok" : "FAILED", (unsigned)((rt.t_start - t0) / 1000000u));
        CHECK(rt.ok);
    }
    int open_left = 0, early_late = 0;
    unsigned last = 0, first_held = ~0u;
    for (int i = 0; i < FLOOD; i++) {
        if (!f->ended[i]) {
            open_left++;
            continue;
        }
        if (f->t_end[i] > last)
            last = f->t_end[i];
        if (f->t_end[i] > FLOOD_QUICK_MS && f->t_end[i] < first_held)
            first_held = f->t_end[i];
        /* A held one ends at its timer (~3000 ms), unless the real client's
         * connection evicted it: the listener then resets the oldest. */
        if (f->t_end[i] > FLOOD_QUICK_MS && f->t_end[i] + 500 < FLOOD_REQ_MS)
            early_late++;
    }
    fprintf(stderr, "    flood: held ones closed from %u to %u ms, %d still open, %d closed "
                    "between the quick window and the timer\n",
            first_held, last, open_left, early_late);
    /* MpaRequestTimeoutMs bounds each one (plus scheduling slack). */
    CHECK(last <= FLOOD_REQ_MS + 1000);
    CHECK_EQ(open_left, 0);
    CHECK(early_late <= 1); /* at most the one the real connection displaced */
    CHECK_EQ(f->bytes, 0);
    CHECK(nk_roundtrip(w, l, "after the half-open flood"));
out:
    if (f) {
        for (int i = 0; i < FLOOD; i++)
            if (f->fd[i] > 0)
                close(f->fd[i]);
        free(f);
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

int main(void)
{
    const char *seed = getenv("NDK_TEST_SEED");
    garbage_seed = seed ? strtoull(seed, NULL, 0) : (uint64_t)tl_now_ns();

    RUN(siw_request_accepted);
    RUN(relaxed_tx_gate);
    RUN(rev1_request_gets_rev1_reply);
    RUN(p2p_write_rtr);
    RUN(p2p_crc_rtr_good);
    RUN(p2p_crc_rtr_bad);
    RUN(markers_rejected);
    RUN(reject_then_close_adapter);
    RUN(wrong_key);
    RUN(unknown_revision);
    RUN(pd_length_over_limit);
    RUN(pd_length_beyond_data);
    RUN(enhanced_pd_too_short);
    RUN(truncated_request);
    if (!RUN(random_garbage))
        fprintf(stderr, "random_garbage failed with seed %llu\n",
                (unsigned long long)garbage_seed);
    RUN(extra_after_request_same_segment);
    RUN(extra_after_request_after_event);
    RUN(slow_request_accepted);
    RUN(slow_request_times_out);
    RUN(half_open_flood);
    return tl_finish();
}
