/* The MPA negotiation driver alone (wire/mpa_negotiation.h): an initiator
 * and a responder talk through byte buffers, fed in every chunking, and
 * hand-made frames check each refusal (RFC 5044 section 7, RFC 6581). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "testlib.h"
#include "wire/mpa_negotiation.h"

#define MAX_IRD 128
#define MAX_ORD 128

static const uint8_t req_pd[5] = {'h', 'e', 'l', 'l', 'o'};
static const uint8_t rep_pd[2] = {'y', 'o'};

static void start_initiator(struct mpa_neg *n, uint32_t ird, uint32_t ord, bool crc)
{
    struct mpa_neg_request r = {
        .p2p = true, .crc = crc, .ird = ird, .ord = ord, .max_ird = MAX_IRD, .max_ord = MAX_ORD,
        .pd = req_pd, .pd_len = sizeof req_pd,
    };
    CHECK(mpa_neg_start_initiator(n, &r));
}

/* Takes the output into buf; returns its length. */
static size_t take(struct mpa_neg *n, uint8_t *buf)
{
    size_t len;
    const uint8_t *p = mpa_neg_output(n, &len);
    memcpy(buf, p, len);
    size_t again;
    mpa_neg_output(n, &again);
    CHECK_EQ(again, 0); /* taking empties it */
    return len;
}

/* Feeds len octets in chunks of `chunk`, never more than mpa_neg_want asks
 * for; every step before the last must decide nothing. Returns the event
 * of the last step and checks that exactly len octets were taken (a frame
 * that cannot be read may be refused before its end). */
static enum mpa_neg_event feed_chunked(struct mpa_neg *n, const uint8_t *p, size_t len, size_t chunk)
{
    size_t at = 0;
    enum mpa_neg_event ev = MPA_NEG_MORE;
    while (at < len) {
        size_t want = mpa_neg_want(n);
        CHECK(want > 0 && want <= len - at); /* never asks past the frame */
        if (want == 0 || want > len - at)
            break;
        size_t step = chunk < want ? chunk : want, used;
        ev = mpa_neg_feed(n, p + at, step, &used);
        CHECK(used == step || (ev == MPA_NEG_MALFORMED && used < step));
        at += used;
        if (ev != MPA_NEG_MORE)
            break;
    }
    if (ev != MPA_NEG_MALFORMED)
        CHECK_EQ(at, len);
    return ev;
}

/* A whole peer-to-peer set-up, every frame fed in chunks of `chunk`. */
static void handshake(size_t chunk)
{
    struct mpa_neg ini, rsp;
    uint8_t wire[MPA_FRAME_MAX];
    start_initiator(&ini, 4, 4, false);
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);

    size_t n = take(&ini, wire);
    CHECK_EQ(n, MPA_HDR_LEN + MPA_ENH_LEN + sizeof req_pd);
    CHECK_EQ(feed_chunked(&rsp, wire, n, chunk), MPA_NEG_GOT_REQUEST);
    CHECK_EQ(rsp.state, MPA_NEG_REQUESTED);
    CHECK_EQ(mpa_neg_want(&rsp), 0);
    uint16_t pdl;
    const uint8_t *pd = mpa_neg_peer_pd(&rsp, &pdl);
    CHECK(pdl == sizeof req_pd && memcmp(pd, req_pd, pdl) == 0);
    CHECK(rsp.p2p);
    CHECK_EQ(rsp.rtr, MPA_RTR_WRITE);

    CHECK(mpa_neg_accept(&rsp, 2, 8, false, rep_pd, sizeof rep_pd));
    CHECK_EQ(rsp.eff_ird, 2); /* ours */
    CHECK_EQ(rsp.eff_ord, 4); /* bounded by the initiator's IRD */
    CHECK_EQ(rsp.state, MPA_NEG_WAIT_RTR);
    n = take(&rsp, wire);
    CHECK_EQ(feed_chunked(&ini, wire, n, chunk), MPA_NEG_GOT_REPLY);
    pd = mpa_neg_peer_pd(&ini, &pdl);
    CHECK(pdl == sizeof rep_pd && memcmp(pd, rep_pd, pdl) == 0);
    CHECK_EQ(ini.eff_ord, 2); /* bounded by the responder's IRD */
    CHECK_EQ(ini.eff_ird, 4);
    CHECK_EQ(ini.rtr, MPA_RTR_WRITE);

    mpa_neg_complete(&ini);
    CHECK_EQ(ini.state, MPA_NEG_DONE);
    n = take(&ini, wire);
    CHECK_EQ(n, 20); /* the zero-length Write */
    CHECK_EQ(feed_chunked(&rsp, wire, n, chunk), MPA_NEG_GOT_RTR);
    CHECK_EQ(rsp.state, MPA_NEG_DONE);
    CHECK(!rsp.read_rtr);
    CHECK_EQ(take(&rsp, wire), 0); /* a Write RTR is not answered */
}

static void test_handshake_every_chunking(void)
{
    for (size_t chunk = 1; chunk <= MPA_HDR_LEN + MPA_ENH_LEN + sizeof req_pd; chunk++)
        handshake(chunk);
}

/* A hand-made frame, encoded. */
static size_t frame(uint8_t *out, bool reply, bool reject, bool enhanced, bool p2p, uint8_t rtr, uint16_t ird,
                    uint16_t ord)
{
    struct mpa_frame f = {
        .reply = reply, .reject = reject, .enhanced = enhanced, .rev = enhanced ? 2 : 1,
        .p2p = p2p, .rtr = rtr, .ird = ird, .ord = ord, .pd = rep_pd, .pd_len = sizeof rep_pd,
    };
    size_t n = mpa_frame_encode(&f, out, MPA_FRAME_MAX);
    CHECK(n > 0);
    return n;
}

/* The responder asks for the Read RTR; the initiator sends it and the
 * responder answers with the zero-length Read Response, with CRC. */
static void test_read_rtr(void)
{
    struct mpa_neg ini, rsp;
    uint8_t wire[MPA_FRAME_MAX];
    start_initiator(&ini, 4, 4, true);
    size_t n = take(&ini, wire);
    CHECK(wire[16] & MPA_FLAG_C);
    n = frame(wire, true, false, true, true, MPA_RTR_READ, 4, 4);
    CHECK_EQ(feed_chunked(&ini, wire, n, 7), MPA_NEG_GOT_REPLY);
    CHECK_EQ(ini.rtr, MPA_RTR_READ);
    mpa_neg_complete(&ini);
    CHECK(ini.read_rtr);
    uint8_t rtr[64];
    size_t rn = take(&ini, rtr);
    CHECK_EQ(rn, 52);

    /* A Request offering only the Read RTR, so the responder picks it. */
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    struct mpa_frame f = {
        .crc = true, .enhanced = true, .rev = 2, .p2p = true, .rtr = MPA_RTR_READ, .ird = 4, .ord = 4,
    };
    n = mpa_frame_encode(&f, wire, sizeof wire);
    CHECK_EQ(feed_chunked(&rsp, wire, n, 3), MPA_NEG_GOT_REQUEST);
    CHECK_EQ(rsp.rtr, MPA_RTR_READ);
    CHECK(mpa_neg_accept(&rsp, 4, 4, false, NULL, 0));
    take(&rsp, wire);
    for (size_t chunk = 1; chunk <= rn; chunk++) {
        struct mpa_neg r2 = rsp;
        CHECK_EQ(feed_chunked(&r2, rtr, rn, chunk), MPA_NEG_GOT_RTR);
        CHECK(r2.read_rtr);
        uint8_t resp[32];
        CHECK_EQ(take(&r2, resp), 20); /* the Read Response */
    }
}

/* Octets behind a Reply or an RTR (FPDUs of the data path) are never taken. */
static void test_never_reads_past(void)
{
    struct mpa_neg ini;
    uint8_t wire[MPA_FRAME_MAX + 16];
    start_initiator(&ini, 4, 4, false);
    size_t n = frame(wire, true, false, true, true, MPA_RTR_WRITE, 4, 4);
    memset(wire + n, 0xAB, 16);
    size_t used;
    CHECK_EQ(mpa_neg_feed(&ini, wire, n + 16, &used), MPA_NEG_GOT_REPLY);
    CHECK_EQ(used, n);

    struct mpa_neg rsp;
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    start_initiator(&ini, 4, 4, false);
    n = take(&ini, wire);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, n, &used), MPA_NEG_GOT_REQUEST);
    CHECK(mpa_neg_accept(&rsp, 4, 4, false, NULL, 0));
    n = mpa_build_write_rtr(false, wire);
    memset(wire + n, 0, 16);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, n + 16, &used), MPA_NEG_GOT_RTR);
    CHECK_EQ(used, n);
}

/* Feeds a Reply to a fresh initiator (v2, p2p, IRD/ORD 4); returns the event. */
static enum mpa_neg_event reply_event(struct mpa_neg *ini, const uint8_t *wire, size_t n)
{
    start_initiator(ini, 4, 4, false);
    uint8_t req[MPA_FRAME_MAX];
    take(ini, req);
    return feed_chunked(ini, wire, n, n);
}

static void test_bad_replies(void)
{
    struct mpa_neg ini;
    uint8_t wire[MPA_FRAME_MAX], out[64];
    size_t n;

    n = frame(wire, true, false, false, false, 0, 0, 0); /* rev 1 to our enhanced Request */
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_UNUSABLE);
    CHECK_EQ(ini.state, MPA_NEG_FAILED);
    CHECK_EQ(take(&ini, out), 0);

    n = frame(wire, true, false, true, true, MPA_RTR_WRITE, 4, 4);
    wire[16] |= MPA_FLAG_M;
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_UNUSABLE);
    CHECK(ini.peer_frame.markers);

    n = frame(wire, false, false, true, true, MPA_RTR_WRITE, 4, 4); /* a Request's key */
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_MALFORMED);
    CHECK_EQ(ini.frame_error, MPA_ERR_KEY);

    n = frame(wire, true, true, true, false, 0, 4, 4);
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_PEER_REJECTED);
    uint16_t pdl;
    const uint8_t *pd = mpa_neg_peer_pd(&ini, &pdl);
    CHECK(pdl == sizeof rep_pd && memcmp(pd, rep_pd, pdl) == 0);
    CHECK_EQ(take(&ini, out), 0); /* a reject is not answered */

    /* The responder's ORD is more than any IRD we can hold: Terminate (2,0,6). */
    n = frame(wire, true, false, true, true, MPA_RTR_WRITE, 4, MAX_IRD + 1);
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_REFUSED_TERM);
    CHECK_EQ(ini.term_code, 0x06);
    CHECK_EQ(take(&ini, out), 28);

    /* Peer-to-peer with only the Send RTR, which we never offer: (2,0,7). */
    n = frame(wire, true, false, true, true, MPA_RTR_SEND, 4, 4);
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_REFUSED_TERM);
    CHECK_EQ(ini.term_code, 0x07);
    CHECK_EQ(take(&ini, out), 28);

    /* 0x3FFF: not negotiated, our values stand; A=0: no RTR. */
    n = frame(wire, true, false, true, false, 0, MPA_IRD_ORD_MASK, MPA_IRD_ORD_MASK);
    CHECK_EQ(reply_event(&ini, wire, n), MPA_NEG_GOT_REPLY);
    CHECK_EQ(ini.eff_ird, 4);
    CHECK_EQ(ini.eff_ord, 4);
    CHECK(!ini.p2p);
    mpa_neg_complete(&ini);
    CHECK_EQ(take(&ini, out), 0);
}

static void test_responder_refusals(void)
{
    struct mpa_neg rsp;
    uint8_t wire[MPA_FRAME_MAX], out[MPA_FRAME_MAX];
    size_t n = frame(wire, false, false, true, true, MPA_RTR_WRITE, 7, 300);
    wire[16] |= MPA_FLAG_M;
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    CHECK_EQ(feed_chunked(&rsp, wire, n, 5), MPA_NEG_MARKERS);
    n = take(&rsp, out);
    struct mpa_reader r;
    struct mpa_frame f;
    size_t used;
    mpa_reader_init(&r, true, MPA_PD_MAX);
    CHECK_EQ(mpa_reader_feed(&r, out, n, &used, &f), MPA_DONE);
    CHECK(f.reject && f.pd_len == 0);

    /* NdkReject: R=1 with the IRD/ORD we would have offered (RFC 6581 9.1). */
    n = frame(wire, false, false, true, true, MPA_RTR_WRITE, 7, 300);
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    CHECK_EQ(feed_chunked(&rsp, wire, n, n), MPA_NEG_GOT_REQUEST);
    uint32_t ird, ord;
    mpa_neg_responder_limits(&rsp, &ird, &ord);
    CHECK_EQ(ird, MAX_IRD); /* its ORD 300, capped by our maximum */
    CHECK_EQ(ord, 7);       /* its IRD */
    CHECK(mpa_neg_reject(&rsp, rep_pd, sizeof rep_pd));
    CHECK_EQ(rsp.state, MPA_NEG_FAILED);
    n = take(&rsp, out);
    mpa_reader_init(&r, true, MPA_PD_MAX);
    CHECK_EQ(mpa_reader_feed(&r, out, n, &used, &f), MPA_DONE);
    CHECK(f.reject && f.ird == MAX_IRD && f.ord == 7 && f.pd_len == sizeof rep_pd);

    /* A Request with a Reply's key. */
    n = frame(wire, true, false, true, true, MPA_RTR_WRITE, 4, 4);
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    CHECK_EQ(feed_chunked(&rsp, wire, n, 1), MPA_NEG_MALFORMED);
    CHECK_EQ(rsp.frame_error, MPA_ERR_KEY);
}

/* A responder waiting for the RTR of a peer-to-peer Request (CRC as given). */
static void waiting_for_rtr(struct mpa_neg *rsp, bool crc)
{
    uint8_t wire[MPA_FRAME_MAX];
    struct mpa_frame f = {
        .crc = crc, .enhanced = true, .rev = 2, .p2p = true, .rtr = MPA_RTR_WRITE, .ird = 4, .ord = 4,
    };
    size_t n = mpa_frame_encode(&f, wire, sizeof wire), used;
    mpa_neg_start_responder(rsp, MAX_IRD, MAX_ORD);
    CHECK_EQ(mpa_neg_feed(rsp, wire, n, &used), MPA_NEG_GOT_REQUEST);
    CHECK(mpa_neg_accept(rsp, 4, 4, false, NULL, 0));
    take(rsp, wire);
}

static void test_bad_rtrs(void)
{
    struct mpa_neg rsp;
    uint8_t wire[128], out[64];
    size_t n;

    /* A Terminate in place of the RTR: decoded, never answered. */
    n = mpa_build_term_simple(2, 0, 0x07, false, wire);
    for (size_t chunk = 1; chunk <= n; chunk++) {
        waiting_for_rtr(&rsp, false);
        CHECK_EQ(feed_chunked(&rsp, wire, n, chunk), MPA_NEG_PEER_TERMINATED);
        CHECK(rsp.term_decoded);
        CHECK_EQ(rsp.peer_term_layer, 2);
        CHECK_EQ(rsp.peer_term_code, 0x07);
        CHECK_EQ(take(&rsp, out), 0);
    }

    /* The CRC of the RTR is wrong: (2,0,2). */
    waiting_for_rtr(&rsp, true);
    n = mpa_build_write_rtr(true, wire);
    wire[n - 1] ^= 1;
    CHECK_EQ(feed_chunked(&rsp, wire, n, 4), MPA_NEG_BAD_RTR);
    CHECK_EQ(rsp.term_code, 0x02);
    CHECK_EQ(take(&rsp, out), 28);

    /* A zero-length Send is no RTR we offered: (2,0,7). */
    static const uint8_t send0[24] = {0x00, 0x12, 0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0,
                                      0,    0,    0,    1,    0, 0, 0, 0, 0, 0, 0, 0};
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(feed_chunked(&rsp, send0, sizeof send0, 5), MPA_NEG_BAD_RTR);
    CHECK_EQ(rsp.term_code, 0x07);

    /* An FPDU longer than any RTR: decided on its first 4 octets, however
     * many more the read brought (the connection fails on it). */
    static const uint8_t big[20] = {0x04, 0x00, 0x80, 0x40}; /* tagged */
    size_t used;
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_feed(&rsp, big, 4, &used), MPA_NEG_BAD_RTR);
    CHECK_EQ(used, 4);
    CHECK_EQ(rsp.term_code, 0x07);
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_feed(&rsp, big, sizeof big, &used), MPA_NEG_BAD_RTR);
    CHECK_EQ(used, 4);
    static const uint8_t big_term[4] = {0x04, 0x00, 0x41, 0x47}; /* untagged, RDMAP opcode 7 */
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_feed(&rsp, big_term, 2, &used), MPA_NEG_MORE);
    CHECK_EQ(mpa_neg_feed(&rsp, big_term + 2, 2, &used), MPA_NEG_PEER_TERMINATED);
    CHECK(!rsp.term_decoded);
    CHECK_EQ(take(&rsp, out), 0);

    /* Shorter than a Write RTR (a zero-length ULPDU: 8 octets): the first
     * read may take the start of what follows; the connection fails on
     * it. */
    static const uint8_t tiny[20] = {0x00, 0x00, 0, 0, 0, 0, 0, 0, 0xAB, 0xAB, 0xAB, 0xAB};
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_want(&rsp), 20);
    CHECK_EQ(mpa_neg_feed(&rsp, tiny, sizeof tiny, &used), MPA_NEG_BAD_RTR);
    CHECK_EQ(rsp.term_code, 0x07);
}

/* The responder asks for the 20 octets every answer to its Reply has
 * first: a Write RTR is one read, a Read RTR (52) or a Terminate two, and
 * no ask reaches past the FPDU. */
static void test_rtr_reads(void)
{
    struct mpa_neg rsp;
    uint8_t wire[64];
    size_t used;
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_want(&rsp), 20);
    size_t n = mpa_build_write_rtr(false, wire);
    CHECK_EQ(n, 20);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, mpa_neg_want(&rsp), &used), MPA_NEG_GOT_RTR);
    CHECK_EQ(used, 20);
    CHECK_EQ(mpa_neg_want(&rsp), 0);

    n = mpa_build_read_rtr(false, wire);
    CHECK_EQ(n, 52);
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, mpa_neg_want(&rsp), &used), MPA_NEG_MORE);
    CHECK_EQ(used, 20);
    CHECK_EQ(mpa_neg_want(&rsp), 32);

    n = mpa_build_term_simple(2, 0, 0x07, false, wire);
    CHECK(n > 20);
    waiting_for_rtr(&rsp, false);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, mpa_neg_want(&rsp), &used), MPA_NEG_MORE);
    CHECK_EQ(mpa_neg_want(&rsp), n - 20);
}

/* A negotiation is plain data: a copy reads the same private data. */
static void test_copy(void)
{
    struct mpa_neg ini, rsp, copy;
    uint8_t wire[MPA_FRAME_MAX];
    start_initiator(&ini, 4, 4, false);
    size_t n = take(&ini, wire), used;
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    CHECK_EQ(mpa_neg_feed(&rsp, wire, n, &used), MPA_NEG_GOT_REQUEST);
    copy = rsp;
    memset(&rsp, 0xEE, sizeof rsp);
    uint16_t pdl;
    const uint8_t *pd = mpa_neg_peer_pd(&copy, &pdl);
    CHECK(pdl == sizeof req_pd && memcmp(pd, req_pd, pdl) == 0);
    CHECK(mpa_neg_accept(&copy, 1, 1, false, NULL, 0));
    CHECK_EQ(copy.state, MPA_NEG_WAIT_RTR);
}

int main(void)
{
    RUN(test_handshake_every_chunking);
    RUN(test_read_rtr);
    RUN(test_never_reads_past);
    RUN(test_bad_replies);
    RUN(test_responder_refusals);
    RUN(test_bad_rtrs);
    RUN(test_rtr_reads);
    RUN(test_copy);
    return tl_finish();
}
