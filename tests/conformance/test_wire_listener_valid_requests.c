/*
 * Our LISTENER against a raw TCP initiator (rawpeer.h) sending valid MPA
 * Requests (siw v2, rev 1, peer-to-peer with and without CRC): the Reply
 * octets, the RTR leg and RFC 5044 TX gating (docs/behaviour.md "The three
 * legs on the wire").
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

static bool open_passive(nk_passive *p)
{
    return nk_passive_open(p, nk_open_responder(RP_BAD_INPUT_REQ_TIMEOUT, 0));
}

/* What the connect event shows of the Request: no private data (RDS 0)
 * and the IRD/ORD libndk will use. */
static void expect_offer(NDK_CONNECTOR *c, ULONG want_ird, ULONG want_ord)
{
    ULONG ird = 0xFFFF, ord = 0xFFFF, len = 0; /* NULL buffer: a size probe */
    CHECK_ST(nk_conn_data(c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 0);
    CHECK_EQ(ird, want_ird);
    CHECK_EQ(ord, want_ord);
}

/*
 * The Request a siw rping client sends (captures/guest-to-host-mpa-request):
 * the connect event shows no private data (RDS 0) and IRD/ORD 1/1; the Reply
 * is Rev 2, S=1, A=0 with IRD/ORD 1/1; and then libndk sends nothing until
 * the initiator's first FPDU has arrived, even with a Send already posted
 * (RFC 5044 rule 4; a siw initiator fails on FPDUs queued behind the Reply).
 */
static void siw_request_accepted(void)
{
    nk_passive p;
    nk_mr m = {0};
    if (!open_passive(&p) || !nk_passive_deliver(&p, rp_siw_request, sizeof rp_siw_request))
        goto out;
    expect_offer(p.c, 1, 1);

    /* The data exchange needs a registered buffer; without one the Reply and
     * the silence after it are still checked. */
    bool data = nk_mr_register(p.w, &m);
    CHECK(data);
    if (data) {
        /* A receive for the initiator's first message, posted before Accept
         * as an rping server does. */
        NDK_SGE rs = nk_sge(&m, 0, 64);
        CHECK_ST(p.qp->Dispatch->NdkReceive(p.qp, (PVOID)(uintptr_t)1, &rs, 1), STATUS_SUCCESS);
    }

    nk_op a = nk_accept(p.c, p.qp, 1, 1, NULL, 0);
    /* A=0: there is no third leg, Accept completes once the Reply is out. */
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);

    uint8_t rep[64];
    int end;
    size_t n = rp_read(p.fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24 && rp_check_reply_header(rep, n, RP_F_S, 0xF0, 2)) {
        CHECK_EQ(rp_get16(rep + 18), 4);
        /* A=0 and no RTR bits (client/server), IRD 1, ORD 1. */
        CHECK_EQ(rp_get16(rep + 20), 0x0001);
        CHECK_EQ(rp_get16(rep + 22), 0x0001);
    }

    /* Post our first Send now: it must be held until the peer's FPDU. */
    if (data) {
        memcpy(m.buf + 64, "PING", 4);
        NDK_SGE ss = nk_sge(&m, 64, 4);
        CHECK_ST(p.qp->Dispatch->NdkSend(p.qp, (PVOID)(uintptr_t)2, &ss, 1, 0), STATUS_SUCCESS);
    }
    rp_expect_quiet(p.fd, "libndk sent before the initiator's first FPDU (TX gating)");
    if (!data)
        goto out;

    /* The initiator's first message: a 4-octet Send, QN 0, MSN 1. */
    uint8_t f[64];
    size_t fl = rp_send_fpdu(f, 1, "HELO", 4, false);
    CHECK(rp_send(p.fd, f, fl));

    /* Now our Send goes out: exactly this FPDU (CRC off -> zero CRC). */
    uint8_t want[64], got[64];
    size_t wl = rp_send_fpdu(want, 1, "PING", 4, false);
    n = rp_read(p.fd, got, wl, NK_WAIT_MS, &end);
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
        if (!nk_cq_next(p.w, &res, NK_WAIT_MS))
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
    nk_passive_drop(&p); /* the QP before its buffer's MR */
    nk_mr_release(&m);
    nk_passive_close(&p);
}

/* NDK_OPEN_FLAG_RELAXED_TX_GATE (docs/behaviour.md "The three legs on the
 * wire"): to a client/server initiator that sends nothing first, our Send
 * goes out 100 ms after the Reply, not before, and without waiting for the
 * initiator's first FPDU. */
static void relaxed_tx_gate(void)
{
    NDK_OPEN_OPTIONS o = nk_options();
    o.Flags = NDK_OPEN_FLAG_RELAXED_TX_GATE;
    nk_passive p;
    nk_mr m = {0};
    if (!nk_passive_open(&p, nk_open(&o)) || !nk_passive_connect(&p))
        goto out;
    uint64_t t_req = tl_now_ns();
    bool sent = rp_send(p.fd, rp_siw_request, sizeof rp_siw_request);
    CHECK(sent);
    if (!sent)
        goto out;
    p.c = nk_next_event(p.l, NK_WAIT_MS);
    p.qp = nk_qp(p.w);
    CHECK(p.c != NULL && p.qp != NULL);
    if (!p.c || !p.qp || !nk_mr_register(p.w, &m)) {
        tl_failures++;
        goto out;
    }
    nk_op a = nk_accept(p.c, p.qp, 1, 1, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    int end;
    CHECK_EQ(rp_read(p.fd, rep, 24, NK_WAIT_MS, &end), 24);
    memcpy(m.buf, "PING", 4);
    NDK_SGE ss = nk_sge(&m, 0, 4);
    CHECK_ST(p.qp->Dispatch->NdkSend(p.qp, (PVOID)(uintptr_t)2, &ss, 1, 0), STATUS_SUCCESS);
    /* Our Send, though the initiator never sent anything; not before the
     * timer, started after our Request arrived, ran its 100 ms (the loop
     * counts whole milliseconds). */
    uint8_t want[64], got[64];
    size_t wl = rp_send_fpdu(want, 1, "PING", 4, false);
    size_t n = rp_read(p.fd, got, wl, NK_WAIT_MS, &end);
    unsigned after_req = rp_ms_since(t_req);
    if (n != wl || memcmp(got, want, wl) != 0 || after_req < 99) {
        tl_failures++;
        fprintf(stderr, "[%s] our Send, %u ms after the Request (%s)\n", tl_current, after_req,
                rp_end_name(end));
        rp_hexdump("expected", want, wl);
        rp_hexdump("got", got, n);
    }
    NDK_RESULT res;
    bool done = nk_cq_next(p.w, &res, NK_WAIT_MS);
    CHECK(done);
    if (done) {
        CHECK(res.RequestContext == (PVOID)(uintptr_t)2);
        CHECK_ST(res.Status, STATUS_SUCCESS);
    }
out:
    nk_passive_drop(&p); /* the QP before its buffer's MR */
    nk_mr_release(&m);
    nk_passive_close(&p);
}

/* An MPA revision 1 Request (no S bit, no IRD/ORD word) gets a revision 1
 * Reply with no word either; IRD/ORD count as the adapter maxima (128). */
static void rev1_request_gets_rev1_reply(void)
{
    nk_passive p;
    if (!open_passive(&p))
        goto out;
    uint8_t req[32];
    size_t rl = rp_frame_raw(req, RP_KEY_REQ, 0x00, 1, 0, NULL, 0);
    if (!nk_passive_deliver(&p, req, rl))
        goto out;
    expect_offer(p.c, 128, 128);
    nk_op a = nk_accept(p.c, p.qp, 4, 4, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    int end;
    size_t n = rp_read(p.fd, rep, RP_HDR_LEN, NK_WAIT_MS, &end);
    CHECK_EQ(n, RP_HDR_LEN);
    /* M=C=R=S=0, Rev 1, PD_Length 0: nothing else may follow. */
    if (n == RP_HDR_LEN && rp_check_reply_header(rep, n, 0x00, 0xF0, 1))
        CHECK_EQ(rp_get16(rep + 18), 0);
    rp_expect_quiet(p.fd, "octets after the rev 1 Reply");
out:
    nk_passive_close(&p);
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
    nk_passive p;
    if (!open_passive(&p))
        goto out;
    uint8_t req[64];
    size_t rl = rp_frame_v2(req, RP_KEY_REQ, crc ? RP_F_C : 0, RP_W0_A | 4, RP_W1_C | 8, NULL, 0);
    if (!nk_passive_deliver(&p, req, rl))
        goto out;
    expect_offer(p.c, 8, 4); /* min(128, requester ORD 8), min(128, requester IRD 4) */
    nk_op a = nk_accept(p.c, p.qp, 8, 4, NULL, 0);

    uint8_t rep[64];
    int end;
    size_t n = rp_read(p.fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24 &&
        rp_check_reply_header(rep, n, (uint8_t)(RP_F_S | (crc ? RP_F_C : 0)), 0xF0, 2)) {
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
    rp_expect_quiet(p.fd, "libndk sent before the RTR");
    if (nk_op_done(&a)) {
        tl_failures++;
        fprintf(stderr, "[%s] Accept completed (%s) before the RTR arrived\n", tl_current,
                nk_st(nk_op_wait(&a, 0)));
    }

    uint8_t rtr[20];
    rp_write_rtr(rtr, crc != 0);
    if (crc) {
        /* The CRC's known-answer value: our encoder agrees. */
        static const uint8_t kat[4] = {0xEB, 0xD3, 0x4C, 0x5F};
        CHECK(memcmp(rtr + 16, kat, 4) == 0);
    }
    if (crc == 2)
        rtr[19] ^= 0x01;
    CHECK(rp_send(p.fd, rtr, sizeof rtr));

    NTSTATUS st = nk_op_wait(&a, 2000 + NK_WAIT_MS); /* RtrTimeoutMs is 2000 */
    if (crc != 2) {
        CHECK_ST(st, STATUS_SUCCESS);
        /* A Write RTR needs no answer, and TX stays quiet until we post. */
        rp_expect_quiet(p.fd, "octets sent after the RTR");
    } else {
        if (st == STATUS_SUCCESS || st == NK_NO_COMPLETION) {
            tl_failures++;
            fprintf(stderr, "[%s] Accept with a bad-CRC RTR: got %s, expected a failure\n",
                    tl_current, nk_st(st));
        }
        /* A CRC error is fatal to the stream (rule R1): a Terminate
         * may precede the close, which must come. */
        uint8_t got[64];
        size_t nb = 0;
        uint64_t t0 = tl_now_ns();
        end = rp_wait_end(p.fd, NK_WAIT_MS, got, sizeof got, &nb);
        if (end != RP_EOF && end != RP_RESET) {
            tl_failures++;
            fprintf(stderr, "[%s] connection not closed after the bad-CRC RTR\n", tl_current);
        }
        rp_report_end("bad-CRC RTR", end, rp_ms_since(t0), got, nb);
    }
out:
    nk_passive_close(&p);
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

int main(void)
{
    RUN(siw_request_accepted);
    RUN(relaxed_tx_gate);
    RUN(rev1_request_gets_rev1_reply);
    RUN(p2p_write_rtr);
    RUN(p2p_crc_rtr_good);
    RUN(p2p_crc_rtr_bad);
    return tl_finish();
}
