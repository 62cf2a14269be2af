/*
 * Our CONNECTOR against a raw TCP responder: a plain listening socket in the
 * test that reads the MPA Request exactly (20 octets, then PD_Length) and
 * answers with whatever Reply the case needs.
 *
 * Contract (docs/behaviour.md "Status codes" and "The three legs on the
 * wire"; the MPA initiator of RFC 5044 and RFC 6581):
 *  - the Request is Rev 2, S=1, A=1 offering the Write RTR, IRD/ORD as asked
 *    (capped at 128), the private data exactly as given; C=1 with
 *    NDK_OPEN_FLAG_REQUEST_CRC; Rev 1 without the word with
 *    NDK_OPEN_FLAG_MPA_REV1;
 *  - a peer that closes or resets before its whole Reply: Connect fails with
 *    STATUS_CONNECTION_REFUSED (or STATUS_INVALID_NETWORK_RESPONSE if what
 *    came was already malformed), never success, never a hang;
 *  - a malformed Reply, or one asking for markers:
 *    STATUS_INVALID_NETWORK_RESPONSE; no Reply within MpaReplyTimeoutMs:
 *    STATUS_IO_TIMEOUT;
 *  - octets after a Reply are FPDUs, not an error;
 *  - R=1: STATUS_CONNECTION_REFUSED with the reject's private data readable;
 *  - after a p2p Reply choosing the Write RTR, NdkCompleteConnect sends
 *    exactly the 20-octet zero-length Write (with the CRC when negotiated);
 *    to a peer that stays silent, two more of them (docs/interop.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

/* MpaReplyTimeoutMs of every world here. Several cases watch the wire for
 * RP_QUIET_MS (300 ms) after the Request before they answer; the timeout
 * leaves that window more than a second of a loaded machine's delays. */
#define REPLY_TIMEOUT_MS 1500u

static const char ulp_pd[] = "hello-request"; /* 13 octets of ULP private data */

static nk_world *open_world(ULONG flags)
{
    NDK_OPEN_OPTIONS o = nk_options();
    o.Flags = flags;
    o.MpaReplyTimeoutMs = REPLY_TIMEOUT_MS;
    return nk_open(&o);
}

/* One connection attempt of our connector against the raw responder. */
struct attempt {
    NDK_CONNECTOR *c;
    NDK_QP *qp;
    nk_op op;
    uint64_t t0; /* when Connect was called */
    int fd;      /* the responder's side, -1 when none */
    uint8_t req[600];
    size_t req_len; /* 0 if no whole Request arrived */
};

/* A case's world, opened with the case's flags, and the raw responder's
 * listening socket. */
struct rig {
    nk_world *w;
    int lfd;
    uint16_t port;
};

/* False, and a failure counted, when the world or the socket could not be
 * made; rig_close is due either way. */
static bool rig_open(struct rig *r, ULONG flags)
{
    r->lfd = -1;
    r->w = open_world(flags);
    if (r->w)
        r->lfd = rp_listen(&r->port);
    CHECK(r->lfd >= 0);
    return r->lfd >= 0;
}

static void rig_close(struct rig *r)
{
    if (r->lfd >= 0)
        close(r->lfd);
    nk_close_world(r->w);
}

static void attempt_clear(struct attempt *a)
{
    memset(a, 0, sizeof *a);
    a->fd = -1;
}

/* Starts Connect and takes the Request on the raw side; false, and a
 * failure counted, when either did not happen. attempt_end is due either
 * way. */
static bool attempt_start(const struct rig *r, struct attempt *a, ULONG ird, ULONG ord,
                          const void *pd, ULONG pd_len)
{
    attempt_clear(a);
    a->c = nk_connector(r->w);
    a->qp = nk_qp(r->w);
    CHECK(a->c && a->qp);
    if (!a->c || !a->qp)
        return false;
    a->t0 = tl_now_ns();
    a->op = nk_connect(a->c, a->qp, r->port, ird, ord, pd, pd_len);
    if (a->op.st != STATUS_PENDING && a->op.st != STATUS_SUCCESS) {
        tl_failures++;
        fprintf(stderr, "    Connect failed inline: %s\n", nk_st(a->op.st));
        return false;
    }
    a->fd = rp_accept(r->lfd, NK_WAIT_MS);
    if (a->fd < 0) {
        tl_failures++;
        fprintf(stderr, "    the raw responder got no connection\n");
        return false;
    }
    a->req_len = rp_read_frame(a->fd, a->req, NK_WAIT_MS);
    if (a->req_len == 0) {
        tl_failures++;
        fprintf(stderr, "    no whole MPA Request arrived\n");
        rp_hexdump("header", a->req, RP_HDR_LEN);
        return false;
    }
    return true;
}

static void attempt_end(struct attempt *a)
{
    /* Connect may still pend after a failed check: closing the connector
     * cancels it, and the close waits for that completion. */
    nk_close_conn(&a->c, &a->qp, &a->fd);
}

/* The opening of a case with one attempt: its rig, then the attempt.
 * single_end is due either way. */
static bool single_start(struct rig *r, ULONG flags, struct attempt *a, ULONG ird, ULONG ord,
                         const void *pd, ULONG pd_len)
{
    attempt_clear(a);
    return rig_open(r, flags) && attempt_start(r, a, ird, ord, pd, pd_len);
}

static void single_end(struct rig *r, struct attempt *a)
{
    attempt_end(a);
    rig_close(r);
}

/* The responder answers with an enhanced (Rev 2) Reply. */
static void reply_v2(const struct attempt *a, uint8_t flags, uint16_t w0, uint16_t w1,
                     const void *pd, size_t pd_len)
{
    uint8_t rep[64];
    size_t rl = rp_frame_v2(rep, RP_KEY_REP, flags, w0, w1, pd, pd_len);
    CHECK(rp_send(a->fd, rep, rl));
}

/* Asserts nothing arrives on the raw side for RP_QUIET_MS. */
static void expect_quiet(int fd, const char *when)
{
    char what[128];
    snprintf(what, sizeof what, "unexpected octets or close %s", when);
    rp_expect_quiet(fd, what);
}

/* The nudge libndk sends while a peer has not answered (docs/interop.md):
 * a zero-length RDMA Write to STag 1, TO 0 (the Write RTR of RFC 6581, as
 * siw builds it); CRC octets EB D3 4C 5F when CRC is on, zero when off. */
static void nudge_bytes(bool crc, uint8_t out[20])
{
    static const uint8_t fpdu[16] = {0x00, 0x0E, 0xC1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t crc_on[4] = {0xEB, 0xD3, 0x4C, 0x5F};
    memcpy(out, fpdu, 16);
    memset(out + 16, 0, 4);
    if (crc)
        memcpy(out + 16, crc_on, 4);
}

/* After the RTR, libndk may send its documented nudges (docs/interop.md:
 * siw 6.1 can miss an RTR that lands right after its Reply), at most 14:
 * each must be byte for byte the same zero-length Write, and nothing else
 * may come. */
#define MAX_NUDGES 14

static void expect_only_nudges(int fd, const uint8_t *rtr, size_t len, const char *when)
{
    uint8_t got[(MAX_NUDGES + 1) * 52];
    size_t n = 0;
    int end = RP_OPEN;
    uint64_t t0 = tl_now_ns();
    /* The schedule ends 300 ms after CompleteConnect; on a loaded machine
     * its timers run late. So: until every nudge came, or nothing did for
     * 300 ms once a second has passed, within 5 s; then the whole of it
     * must be nudges. */
    for (;;) {
        unsigned ms = (unsigned)((tl_now_ns() - t0) / 1000000u);
        if (ms >= 5000 || n >= MAX_NUDGES * len || n >= sizeof got)
            break;
        size_t k = rp_read(fd, got + n, sizeof got - n, 300, &end);
        n += k;
        if (!k && (end != RP_OPEN || ms >= 1000))
            break;
    }
    bool ok = n % len == 0 && n / len <= MAX_NUDGES;
    for (size_t i = 0; ok && i < n; i += len)
        ok = memcmp(got + i, rtr, len) == 0;
    if (!ok) {
        tl_failures++;
        fprintf(stderr, "[%s] unexpected octets %s (only zero-length Write nudges may follow; %s)\n",
                tl_current, when, rp_end_name(end));
        rp_hexdump("received", got, n);
    }
    expect_quiet(fd, when);
}

/* Once Connect succeeded, CompleteConnect succeeds and sends no RTR: at
 * most the nudges follow (CRC off). */
static void complete_without_rtr(struct attempt *a, const char *when)
{
    CHECK_ST(nk_op_wait(&a->op, NK_WAIT_MS), STATUS_SUCCESS);
    if (nk_op_wait(&a->op, 0) != STATUS_SUCCESS)
        return;
    nk_op cc = nk_complete(a->c);
    CHECK_ST(nk_op_wait(&cc, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t nudge[20];
    nudge_bytes(false, nudge);
    expect_only_nudges(a->fd, nudge, sizeof nudge, when);
}

/*
 * Checks an enhanced Request: key, M=0 R=0 S=1, C as `crc`, Rev 2, PD_Length
 * = 4 + ULP length, A=1 with the Write RTR offered, the IRD/ORD values, and
 * the ULP private data octet for octet.
 */
static void check_request_v2(const struct attempt *a, bool crc, unsigned ird, unsigned ord,
                             const void *pd, size_t pd_len)
{
    const uint8_t *r = a->req;
    CHECK(memcmp(r, RP_KEY_REQ, RP_KEY_LEN) == 0);
    CHECK_EQ(r[16] & RP_F_M, 0);
    CHECK_EQ(r[16] & RP_F_R, 0);
    CHECK_EQ(r[16] & RP_F_S, RP_F_S);
    CHECK_EQ(r[16] & RP_F_C, crc ? RP_F_C : 0);
    CHECK_EQ(r[17], 2);
    CHECK_EQ(rp_get16(r + 18), 4 + pd_len);
    CHECK_EQ(a->req_len, RP_HDR_LEN + 4 + pd_len);
    if (a->req_len < RP_HDR_LEN + 4)
        return;
    uint16_t w0 = rp_get16(r + 20), w1 = rp_get16(r + 22);
    CHECK(w0 & RP_W0_A);
    CHECK(w1 & RP_W1_C);
    CHECK_EQ(w0 & RP_IRD_ORD_MASK, ird);
    CHECK_EQ(w1 & RP_IRD_ORD_MASK, ord);
    /* A Read RTR needs an ORD slot (RFC 6581): not offered with ORD 0. */
    if (ord == 0)
        CHECK_EQ(w1 & RP_W1_D, 0);
    if (a->req_len == RP_HDR_LEN + 4 + pd_len)
        CHECK(pd_len == 0 || memcmp(r + 24, pd, pd_len) == 0);
}

/* ------------------------------------------------------------------------ */
/* The Request we send, and the RTR leg                                     */
/* ------------------------------------------------------------------------ */

/*
 * The default Request, then a p2p Reply choosing the Write RTR: Connect
 * succeeds, GetConnectionData shows the negotiated IRD/ORD, nothing is sent
 * until NdkCompleteConnect, which sends exactly the zero-length Write RTR
 * (zero CRC octets: CRC is off both ways) and nothing after it.
 *   crc_flag: the world was opened with NDK_OPEN_FLAG_REQUEST_CRC;
 *   reply_crc: the Reply has C=1 (CRC on either way: RFC 5044 turns it
 *   on when the Request or the Reply asks).
 */
static void p2p_connect(ULONG flags, bool reply_crc)
{
    bool crc_flag = (flags & NDK_OPEN_FLAG_REQUEST_CRC) != 0;
    struct rig r;
    struct attempt a;
    if (!single_start(&r, flags, &a, 5, 7, ulp_pd, sizeof ulp_pd - 1))
        goto out;
    check_request_v2(&a, crc_flag, 5, 7, ulp_pd, sizeof ulp_pd - 1);
    /* Nothing but the Request before the Reply (RFC 5044). */
    expect_quiet(a.fd, "after the Request");

    /* The responder answers IRD 7 (>= our ORD) and ORD 5 (<= our IRD), as
     * RFC 6581 9.1 says, with A=1 and the Write RTR. */
    reply_v2(&a, (uint8_t)(reply_crc ? RP_F_C : 0), RP_W0_A | 7, RP_W1_C | 5, NULL, 0);
    CHECK_ST(nk_op_wait(&a.op, NK_WAIT_MS), STATUS_SUCCESS);
    if (nk_op_wait(&a.op, 0) != STATUS_SUCCESS)
        goto out;
    ULONG ird = 0, ord = 0, len = 0; /* NULL buffer: a size probe */
    CHECK_ST(nk_conn_data(a.c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(ird, 5);
    CHECK_EQ(ord, 7);
    CHECK_EQ(len, 0);
    expect_quiet(a.fd, "between Connect and CompleteConnect");

    nk_op cc = nk_complete(a.c);
    uint8_t want[20], got[20];
    bool crc = crc_flag || reply_crc;
    rp_write_rtr(want, crc);
    if (crc) {
        /* The known answer, checked against our own CRC too. */
        static const uint8_t kat[4] = {0xEB, 0xD3, 0x4C, 0x5F};
        CHECK(memcmp(want + 16, kat, 4) == 0);
    }
    int end;
    size_t n = rp_read(a.fd, got, sizeof got, NK_WAIT_MS, &end);
    if (n != sizeof want || memcmp(got, want, sizeof want) != 0) {
        tl_failures++;
        fprintf(stderr, "[%s] the RTR after CompleteConnect (%s)\n", tl_current, rp_end_name(end));
        rp_hexdump("expected", want, sizeof want);
        rp_hexdump("got", got, n);
    }
    CHECK_ST(nk_op_wait(&cc, NK_WAIT_MS), STATUS_SUCCESS);
    expect_only_nudges(a.fd, want, sizeof want, "after the RTR");
out:
    single_end(&r, &a);
}

static void request_and_write_rtr(void)
{
    p2p_connect(0, false);
}

/* C=1 only in the Reply still turns CRC on: the RTR carries EB D3 4C 5F. */
static void reply_crc_turns_crc_on(void)
{
    p2p_connect(0, true);
}

/* NDK_OPEN_FLAG_REQUEST_CRC: C=1 in the Request; the Reply echoes it. */
static void request_crc_flag(void)
{
    p2p_connect(NDK_OPEN_FLAG_REQUEST_CRC, true);
}

/* IRD/ORD over the adapter maxima go out as 128; ORD 0 offers no Read RTR.
 * The responder rejects (R=1, no data) to end each attempt. */
static void request_caps_ird_ord(void)
{
    struct rig r;
    bool ok = rig_open(&r, 0);
    static const unsigned cases[][4] = {
        /* asked IRD, ORD -> expected on the wire */
        {1000, 500, 128, 128},
        {128, 129, 128, 128},
        {3, 0, 3, 0},
        {0, 0, 0, 0},
    };
    for (unsigned i = 0; ok && i < sizeof cases / sizeof cases[0]; i++) {
        struct attempt a;
        if (attempt_start(&r, &a, cases[i][0], cases[i][1], NULL, 0)) {
            check_request_v2(&a, false, cases[i][2], cases[i][3], NULL, 0);
            reply_v2(&a, RP_F_R, 0, 0, NULL, 0);
            CHECK_ST(nk_op_wait(&a.op, NK_WAIT_MS), STATUS_CONNECTION_REFUSED);
        }
        attempt_end(&a);
    }
    rig_close(&r);
}

/* NDK_OPEN_FLAG_MPA_REV1: Rev 1, S=0, no word, PD_Length = the ULP data. A
 * Rev 1 Reply then completes the connection with nothing more on the wire. */
static void request_rev1(void)
{
    struct rig r;
    struct attempt a;
    if (!single_start(&r, NDK_OPEN_FLAG_MPA_REV1, &a, 4, 4, ulp_pd, sizeof ulp_pd - 1))
        goto out;
    CHECK(memcmp(a.req, RP_KEY_REQ, RP_KEY_LEN) == 0);
    CHECK_EQ(a.req[16] & 0xF0, 0); /* M, C, R, S all 0 */
    CHECK_EQ(a.req[17], 1);
    CHECK_EQ(rp_get16(a.req + 18), sizeof ulp_pd - 1);
    CHECK_EQ(a.req_len, RP_HDR_LEN + sizeof ulp_pd - 1);
    CHECK(memcmp(a.req + RP_HDR_LEN, ulp_pd, sizeof ulp_pd - 1) == 0);
    uint8_t rep[32];
    size_t rl = rp_frame_raw(rep, RP_KEY_REP, 0, 1, 0, NULL, 0);
    CHECK(rp_send(a.fd, rep, rl));
    complete_without_rtr(&a, "after CompleteConnect on a Rev 1 connection (no RTR exists)");
out:
    single_end(&r, &a);
}

/* NDK_OPEN_FLAG_NO_P2P: the siw-style client/server Request, A=0 and no
 * RTR bits; after an A=0 Reply, CompleteConnect sends nothing. */
static void request_no_p2p(void)
{
    struct rig r;
    struct attempt a;
    if (!single_start(&r, NDK_OPEN_FLAG_NO_P2P, &a, 1, 1, NULL, 0))
        goto out;
    CHECK(memcmp(a.req, RP_KEY_REQ, RP_KEY_LEN) == 0);
    CHECK_EQ(a.req[16] & 0xF0, RP_F_S);
    CHECK_EQ(a.req[17], 2);
    CHECK_EQ(a.req_len, 24);
    /* Byte for byte what siw sends (captures/guest-to-host-mpa-request). */
    CHECK(a.req_len == 24 && memcmp(a.req, rp_siw_request, 24) == 0);
    reply_v2(&a, 0, 1, 1, NULL, 0);
    complete_without_rtr(&a, "after CompleteConnect in client/server mode");
out:
    single_end(&r, &a);
}

/* ------------------------------------------------------------------------ */
/* Bad Replies                                                              */
/* ------------------------------------------------------------------------ */

/*
 * The responder sends the first k octets of a valid Reply (with 8 octets of
 * ULP data, so k covers key, flags, PD_Length, word and data) and closes,
 * for every k from 0 to len-1; then a few with a RST instead of a FIN.
 */
static void reply_cut_at_every_octet(void)
{
    struct rig r;
    bool ok = rig_open(&r, 0);
    uint8_t rep[64];
    size_t len = rp_frame_v2(rep, RP_KEY_REP, 0, RP_W0_A | 4, RP_W1_C | 4, "reply-pd", 8);
    for (size_t k = 0; ok && k < len + 4; k++) {
        /* k < len: FIN after k octets; the last four: RST after 0, 10, 20, 31. */
        bool rst = k >= len;
        size_t cut = rst ? (size_t[]){0, 10, 20, 31}[k - len] : k;
        struct attempt a;
        if (!attempt_start(&r, &a, 4, 4, NULL, 0)) {
            attempt_end(&a);
            continue;
        }
        CHECK(cut == 0 || rp_send(a.fd, rep, cut));
        if (rst)
            rp_reset(a.fd);
        else
            close(a.fd);
        a.fd = -1;
        NTSTATUS st = nk_op_wait(&a.op, NK_WAIT_MS);
        if (st != STATUS_CONNECTION_REFUSED && st != STATUS_INVALID_NETWORK_RESPONSE) {
            tl_failures++;
            fprintf(stderr,
                    "[%s] Reply cut after %zu of %zu octets (%s): Connect %s, expected "
                    "STATUS_CONNECTION_REFUSED\n",
                    tl_current, cut, len, rst ? "RST" : "FIN", nk_st(st));
        } else if (st == STATUS_INVALID_NETWORK_RESPONSE) {
            fprintf(stderr, "    cut after %zu (%s): STATUS_INVALID_NETWORK_RESPONSE\n", cut,
                    rst ? "RST" : "FIN");
        }
        attempt_end(&a);
    }
    rig_close(&r);
}

/*
 * Malformed Replies and a Reply asking for markers, each with the socket left
 * open: Connect must fail with STATUS_INVALID_NETWORK_RESPONSE (not time out,
 * which would mean the frame was not judged), and our side must close the
 * connection (siw sends a Terminate first for a wrong key: allowed).
 */
static void reply_malformed(void)
{
    struct rig r;
    bool ok = rig_open(&r, 0);
    struct bad {
        const char *what;
        uint8_t frame[64];
        size_t len;
    } bad[12];
    unsigned nbad = 0;
    uint8_t good[64];
    size_t gl = rp_frame_v2(good, RP_KEY_REP, 0, RP_W0_A | 4, RP_W1_C | 4, NULL, 0);

#define BAD(desc) (bad[nbad].what = (desc), memcpy(bad[nbad].frame, good, gl), bad[nbad].len = gl, &bad[nbad++])
    memcpy(BAD("Request key in a Reply")->frame, RP_KEY_REQ, RP_KEY_LEN);
    memcpy(BAD("lower-case key")->frame, "mpa id rep frame", RP_KEY_LEN);
    memset(BAD("zero key")->frame, 0, RP_KEY_LEN);
    BAD("Rev 0")->frame[17] = 0;
    BAD("Rev 3")->frame[17] = 3;
    BAD("Rev 255")->frame[17] = 255;
    {
        struct bad *b = BAD("PD_Length 513, header only");
        rp_put16(b->frame + 18, 513);
        b->len = RP_HDR_LEN;
    }
    {
        struct bad *b = BAD("PD_Length 65535, header only");
        rp_put16(b->frame + 18, 0xFFFF);
        b->len = RP_HDR_LEN;
    }
    BAD("M=1 (markers wanted)")->frame[16] |= RP_F_M;
    BAD("M=1 with C=1")->frame[16] |= RP_F_M | RP_F_C;
#undef BAD

    for (unsigned i = 0; ok && i < nbad; i++) {
        struct attempt a;
        if (!attempt_start(&r, &a, 4, 4, NULL, 0)) {
            attempt_end(&a);
            continue;
        }
        CHECK(rp_send(a.fd, bad[i].frame, bad[i].len));
        NTSTATUS st = nk_op_wait(&a.op, NK_WAIT_MS);
        if (st != STATUS_INVALID_NETWORK_RESPONSE) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: Connect %s, expected STATUS_INVALID_NETWORK_RESPONSE\n",
                    tl_current, bad[i].what, nk_st(st));
        }
        uint8_t got[64];
        size_t nb = 0;
        int end = rp_wait_end(a.fd, NK_WAIT_MS, got, sizeof got, &nb);
        if (end != RP_EOF && end != RP_RESET) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: our side did not close the connection (%s)\n", tl_current,
                    bad[i].what, rp_end_name(end));
        }
        if (nb) {
            fprintf(stderr, "    %s: %zu octets before the close\n", bad[i].what, nb);
            rp_hexdump("sent", got, nb < sizeof got ? nb : sizeof got);
        }
        attempt_end(&a);
    }
    rig_close(&r);
}

/* A responder that takes the Request and never answers: STATUS_IO_TIMEOUT
 * after MpaReplyTimeoutMs (not before it), then our side closes. */
static void reply_never_comes(void)
{
    struct rig r;
    struct attempt a;
    if (!single_start(&r, 0, &a, 4, 4, NULL, 0))
        goto out;
    NTSTATUS st = nk_op_wait(&a.op, REPLY_TIMEOUT_MS + NK_WAIT_MS);
    unsigned ms = rp_ms_since(a.t0);
    CHECK_ST(st, STATUS_IO_TIMEOUT);
    fprintf(stderr, "    Connect ended after %u ms (MpaReplyTimeoutMs %u)\n", ms,
            REPLY_TIMEOUT_MS);
    CHECK(ms + 50 >= REPLY_TIMEOUT_MS);
    CHECK(ms <= REPLY_TIMEOUT_MS + 2000);
    uint8_t got[64];
    size_t nb = 0;
    int end = rp_wait_end(a.fd, NK_WAIT_MS, got, sizeof got, &nb);
    CHECK(end == RP_EOF || end == RP_RESET);
    CHECK_EQ(nb, 0);
out:
    single_end(&r, &a);
}

/*
 * A client/server Reply (A=0) followed in the same send() by a zero-length
 * Write and a 4-octet Send: a siw responder may do exactly this. The extra
 * octets are FPDUs: Connect and CompleteConnect succeed, and the Send lands
 * in the receive posted before Connect.
 */
static void reply_followed_by_fpdus(void)
{
    struct rig r;
    struct attempt a;
    nk_mr m = {0};
    attempt_clear(&a);
    if (!rig_open(&r, 0))
        goto out;
    /* Without a registered buffer for the Send's receive, only the
     * zero-length Write follows the Reply. */
    bool data = nk_mr_register(r.w, &m);
    CHECK(data);
    if (!attempt_start(&r, &a, 4, 4, NULL, 0))
        goto out;
    if (data) {
        /* Posted after Connect started but before any octet of the Reply
         * left the responder, so the Send always finds it. */
        NDK_SGE rs = nk_sge(&m, 0, 64);
        CHECK_ST(a.qp->Dispatch->NdkReceive(a.qp, (PVOID)(uintptr_t)7, &rs, 1), STATUS_SUCCESS);
    }

    uint8_t buf[128];
    size_t n = rp_frame_v2(buf, RP_KEY_REP, 0, 4, 4, NULL, 0);
    n += rp_write_rtr(buf + n, false);
    if (data)
        n += rp_send_fpdu(buf + n, 1, "DATA", 4, false);
    CHECK(rp_send(a.fd, buf, n));

    CHECK_ST(nk_op_wait(&a.op, NK_WAIT_MS), STATUS_SUCCESS);
    if (nk_op_wait(&a.op, 0) != STATUS_SUCCESS)
        goto out;
    nk_op cc = nk_complete(a.c);
    CHECK_ST(nk_op_wait(&cc, NK_WAIT_MS), STATUS_SUCCESS);
    /* No RTR in client/server mode, and no Terminate for the FPDUs. */
    expect_quiet(a.fd, "after CompleteConnect (A=0 Reply + FPDUs)");
    if (!data)
        goto out;
    NDK_RESULT res;
    bool got = nk_cq_next(r.w, &res, NK_WAIT_MS);
    CHECK(got);
    if (got) {
        CHECK(res.RequestContext == (PVOID)(uintptr_t)7);
        CHECK_ST(res.Status, STATUS_SUCCESS);
        CHECK_EQ(res.BytesTransferred, 4);
        CHECK(memcmp(m.buf, "DATA", 4) == 0);
    }
out:
    attempt_end(&a);
    nk_mr_release(&m);
    rig_close(&r);
}

/* R=1 with private data: STATUS_CONNECTION_REFUSED, and the reject's data
 * (after the RFC 6581 word) readable with NdkGetConnectionData, RDS = 8. */
static void reply_reject_with_private_data(void)
{
    struct rig r;
    struct attempt a;
    if (!single_start(&r, 0, &a, 4, 4, ulp_pd, sizeof ulp_pd - 1))
        goto out;
    reply_v2(&a, RP_F_R, 0, 0, "nope-pd!", 8);
    CHECK_ST(nk_op_wait(&a.op, NK_WAIT_MS), STATUS_CONNECTION_REFUSED);
    ULONG len = 0;
    CHECK_ST(nk_conn_data(a.c, NULL, NULL, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 8);
    uint8_t pd[32];
    memset(pd, 0xEE, sizeof pd);
    len = sizeof pd;
    CHECK_ST(nk_conn_data(a.c, NULL, NULL, pd, &len), STATUS_SUCCESS);
    CHECK_EQ(len, 8);
    CHECK(memcmp(pd, "nope-pd!", 8) == 0);
    /* A short buffer gets the first octets and STATUS_BUFFER_TOO_SMALL. */
    memset(pd, 0xEE, sizeof pd);
    len = 4;
    CHECK_ST(nk_conn_data(a.c, NULL, NULL, pd, &len), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, 8);
    CHECK(memcmp(pd, "nope", 4) == 0 && pd[4] == 0xEE);
out:
    single_end(&r, &a);
}

int main(void)
{
    RUN(request_and_write_rtr);
    RUN(reply_crc_turns_crc_on);
    RUN(request_crc_flag);
    RUN(request_caps_ird_ord);
    RUN(request_rev1);
    RUN(request_no_p2p);
    RUN(reply_cut_at_every_octet);
    RUN(reply_malformed);
    RUN(reply_never_comes);
    RUN(reply_followed_by_fpdus);
    RUN(reply_reject_with_private_data);
    return tl_finish();
}
