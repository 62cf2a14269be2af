/* MPA startup frames and FPDU framing, checked against the layouts of
 * RFC 5044 and RFC 6581, known-answer frames and frames recorded from Linux siw
 * (shared/interop/captures). Buffers handed to the parsers are allocated to
 * their exact size so that ASan reports any read past them. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawframe.h"
#include "testlib.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

/* An exactly sized heap copy: reading one octet past it trips ASan. */
static uint8_t *exact_copy(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (p && n)
        memcpy(p, src, n);
    return p;
}

#define KEY_REQ "4d 50 41 20 49 44 20 52 65 71 20 46 72 61 6d 65 "
#define KEY_REP "4d 50 41 20 49 44 20 52 65 70 20 46 72 61 6d 65 "

/* Reads a whole frame in one call; returns the result. */
static enum mpa_result feed_all(struct mpa_reader *r, const uint8_t *b, size_t n, size_t *used,
                                struct mpa_frame *f)
{
    return mpa_reader_feed(r, b, n, used, f);
}

/* Feeds one octet per call; returns the last result and the total taken. */
static enum mpa_result feed_bytewise(struct mpa_reader *r, const uint8_t *b, size_t n,
                                     size_t *used, struct mpa_frame *f)
{
    enum mpa_result res = MPA_NEED_MORE;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t c = 99;
        res = mpa_reader_feed(r, b + i, 1, &c, f);
        total += c;
        if (res != MPA_NEED_MORE)
            break;
        if (c != 1) {
            tl_failures++;
            fprintf(stderr, "  bytewise: octet %zu not consumed\n", i);
        }
    }
    *used = total;
    return res;
}

/* ---------------- startup frames: captures and known frames ---------------- */

struct frame_vec {
    const char *what;
    const char *hex;
    bool reply, markers, crc, reject, enhanced;
    uint8_t rev;
    bool p2p;
    uint8_t rtr;
    uint16_t ird, ord, pd_len;
};

static const struct frame_vec frame_vecs[] = {
    /* guest-to-host-mpa-request.txt: what siw sends as Initiator */
    {"siw request", KEY_REQ "10 02 00 04 00 01 00 01", false, false, false, false, true, 2,
     false, 0, 1, 1, 0},
    /* host-to-guest-mpa-v2.txt: siw's accepting Reply */
    {"siw reply v2", KEY_REP "10 02 00 04 00 01 00 01", true, false, false, false, true, 2, false,
     0, 1, 1, 0},
    /* host-to-guest-rping-crc.txt: Request and Reply with C */
    {"crc request", KEY_REQ "50 02 00 04 00 01 00 01", false, false, true, false, true, 2, false,
     0, 1, 1, 0},
    {"crc reply", KEY_REP "50 02 00 04 00 01 00 01", true, false, true, false, true, 2, false, 0,
     1, 1, 0},
    /* host-to-guest-markers-rejected.txt: M=1 Request and siw's protocol reject */
    {"markers request", KEY_REQ "90 02 00 04 00 01 00 01", false, true, false, false, true, 2,
     false, 0, 1, 1, 0},
    {"siw reject", KEY_REP "30 02 00 04 00 00 00 00", true, false, false, true, true, 2, false, 0,
     0, 0, 0},
    /* host-to-guest-mpa-v1.txt: Rev 1 both ways */
    {"v1 request", KEY_REQ "00 01 00 00", false, false, false, false, false, 1, false, 0, 0, 0, 0},
    {"v1 reply", KEY_REP "00 01 00 00", true, false, false, false, false, 1, false, 0, 0, 0, 0},
    /* host-to-guest-mpa-v2-p2p.txt: p2p offering Write; siw mirrors the word */
    {"p2p request", KEY_REQ "10 02 00 04 80 04 80 08", false, false, false, false, true, 2, true,
     MPA_RTR_WRITE, 4, 8, 0},
    {"p2p reply", KEY_REP "10 02 00 04 80 08 80 04", true, false, false, false, true, 2, true,
     MPA_RTR_WRITE, 8, 4, 0},
    /* Peer-to-peer (RFC 6581): the Request offering Write and Read RTRs, the
     * Reply picking Write */
    {"doc p2p request", KEY_REQ "10 02 00 04 80 10 C0 10", false, false, false, false, true, 2,
     true, MPA_RTR_WRITE | MPA_RTR_READ, 16, 16, 0},
    {"doc p2p reply", KEY_REP "10 02 00 04 80 10 80 10", true, false, false, false, true, 2, true,
     MPA_RTR_WRITE, 16, 16, 0},
    /* Send RTR bit B, IRD/ORD 0x3FFF, and ULP private data after the word */
    {"send rtr + pd", KEY_REQ "50 02 00 07 FF FF 3F FF 61 62 63", false, false, true, false, true,
     2, true, MPA_RTR_SEND, 0x3FFF, 0x3FFF, 3},
    /* Rev 1 with private data */
    {"v1 pd", KEY_REP "40 01 00 02 AA BB", true, false, true, false, false, 1, false, 0, 0, 0, 2},
};

static void check_fields(const struct frame_vec *v, const struct mpa_frame *f)
{
    CHECK_EQ(f->reply, v->reply);
    CHECK_EQ(f->markers, v->markers);
    CHECK_EQ(f->crc, v->crc);
    CHECK_EQ(f->reject, v->reject);
    CHECK_EQ(f->enhanced, v->enhanced);
    CHECK_EQ(f->rev, v->rev);
    CHECK_EQ(f->p2p, v->p2p);
    CHECK_EQ(f->rtr, v->rtr);
    CHECK_EQ(f->ird, v->ird);
    CHECK_EQ(f->ord, v->ord);
    CHECK_EQ(f->pd_len, v->pd_len);
}

static void test_capture_frames_decode(void)
{
    for (size_t i = 0; i < sizeof(frame_vecs) / sizeof(frame_vecs[0]); i++) {
        const struct frame_vec *v = &frame_vecs[i];
        uint8_t tmp[64];
        size_t n = rp_unhex(v->hex, tmp, sizeof(tmp));
        uint8_t *b = exact_copy(tmp, n);
        REQUIRE(b);
        tl_current = v->what;

        struct mpa_reader r;
        struct mpa_frame f;
        size_t used = 0;
        mpa_reader_init(&r, v->reply, 256);
        CHECK_EQ(feed_all(&r, b, n, &used, &f), MPA_DONE);
        CHECK_EQ(used, n);
        check_fields(v, &f);
        CHECK_EQ(mpa_frame_size(&f), n);
        if (v->pd_len)
            CHECK(memcmp(f.pd, b + n - v->pd_len, v->pd_len) == 0);

        /* The decoded frame re-encodes to the very octets on the wire. */
        uint8_t out[MPA_FRAME_MAX];
        CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), n);
        CHECK(memcmp(out, b, n) == 0);

        /* Same answer one octet at a time. */
        struct mpa_frame g;
        mpa_reader_init(&r, v->reply, 256);
        CHECK_EQ(feed_bytewise(&r, b, n, &used, &g), MPA_DONE);
        CHECK_EQ(used, n);
        CHECK(mpa_frame_same(&f, &g));

        /* The wrong reader for this key. */
        mpa_reader_init(&r, !v->reply, 256);
        CHECK_EQ(feed_all(&r, b, n, &used, &g), MPA_ERR_KEY);
        free(b);
    }
    tl_current = "test_capture_frames_decode";
}

/* The doc's reply bytes, built from fields rather than decoded. */
static void test_encode_doc_frames(void)
{
    uint8_t out[MPA_FRAME_MAX], want[64];
    struct mpa_frame f = {.reply = true, .enhanced = true, .rev = 2, .ird = 1, .ord = 1};
    size_t n = rp_unhex(KEY_REP "10 02 00 04 00 01 00 01", want, sizeof(want));
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), n);
    CHECK(memcmp(out, want, n) == 0);
    f.crc = true;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), n);
    CHECK_EQ(out[16], 0x50);

    struct mpa_frame req = {.enhanced = true, .rev = 2, .p2p = true,
                            .rtr = MPA_RTR_WRITE | MPA_RTR_READ, .ird = 16, .ord = 16};
    n = rp_unhex(KEY_REQ "10 02 00 04 80 10 C0 10", want, sizeof(want));
    CHECK_EQ(mpa_frame_encode(&req, out, sizeof(out)), n);
    CHECK(memcmp(out, want, n) == 0);

    struct mpa_frame rej = {.reply = true, .reject = true, .enhanced = true, .rev = 2};
    n = rp_unhex(KEY_REP "30 02 00 04 00 00 00 00", want, sizeof(want));
    CHECK_EQ(mpa_frame_encode(&rej, out, sizeof(out)), n);
    CHECK(memcmp(out, want, n) == 0);

    struct mpa_frame v1 = {.rev = 1};
    n = rp_unhex(KEY_REQ "00 01 00 00", want, sizeof(want));
    CHECK_EQ(mpa_frame_size(&v1), 20);
    CHECK_EQ(mpa_frame_encode(&v1, out, sizeof(out)), n);
    CHECK(memcmp(out, want, n) == 0);

    /* Word fields are not on the wire without S, whatever they hold. */
    struct mpa_frame plain = {.rev = 2, .p2p = false, .rtr = MPA_RTR_READ, .ird = 0x7FFF};
    n = rp_unhex(KEY_REQ "00 02 00 00", want, sizeof(want));
    CHECK_EQ(mpa_frame_encode(&plain, out, sizeof(out)), n);
    CHECK(memcmp(out, want, n) == 0);
}

static void test_encode_decode_all_flags(void)
{
    static const uint8_t pd[5] = {1, 2, 3, 4, 5};
    unsigned count = 0;
    for (unsigned bits = 0; bits < 64; bits++) {
        for (uint8_t rev = 1; rev <= 2; rev++) {
            for (uint8_t rtr = 0; rtr < 8; rtr++) {
                for (unsigned pdl = 0; pdl <= 5; pdl += 5) {
                    struct mpa_frame f = {
                        .reply = bits & 1, .markers = bits & 2, .crc = bits & 4,
                        .reject = bits & 8, .enhanced = bits & 16, .p2p = bits & 32,
                        .rev = rev, .rtr = rtr, .pd = pdl ? pd : NULL, .pd_len = (uint16_t)pdl,
                        .ird = (uint16_t)(rtr * 1000 + bits), .ord = (uint16_t)(0x3FFF - bits),
                    };
                    uint8_t out[MPA_FRAME_MAX];
                    size_t n = mpa_frame_encode(&f, out, sizeof(out));
                    bool ok = !(f.enhanced && rev == 1) && !(f.enhanced && rtr && !f.p2p);
                    CHECK_EQ(n, ok ? mpa_frame_size(&f) : 0);
                    if (!n)
                        continue;
                    count++;
                    uint8_t flags = (uint8_t)((f.markers ? 0x80 : 0) | (f.crc ? 0x40 : 0) |
                                              (f.reject ? 0x20 : 0) | (f.enhanced ? 0x10 : 0));
                    CHECK_EQ(out[16], flags);
                    CHECK_EQ(out[17], rev);
                    CHECK_EQ(out[18] << 8 | out[19], (f.enhanced ? 4 : 0) + pdl);
                    CHECK(memcmp(out, f.reply ? "MPA ID Rep Frame" : "MPA ID Req Frame", 16) == 0);
                    if (f.enhanced) {
                        unsigned w0 = (unsigned)(out[20] << 8 | out[21]);
                        unsigned w1 = (unsigned)(out[22] << 8 | out[23]);
                        CHECK_EQ(w0 & 0x3FFF, f.ird);
                        CHECK_EQ(w1 & 0x3FFF, f.ord);
                        CHECK_EQ(!!(w0 & 0x8000), f.p2p);
                        CHECK_EQ(!!(w0 & 0x4000), !!(rtr & MPA_RTR_SEND));
                        CHECK_EQ(!!(w1 & 0x8000), !!(rtr & MPA_RTR_WRITE));
                        CHECK_EQ(!!(w1 & 0x4000), !!(rtr & MPA_RTR_READ));
                    }

                    uint8_t *b = exact_copy(out, n);
                    REQUIRE(b);
                    struct mpa_reader r;
                    struct mpa_frame g;
                    size_t used;
                    mpa_reader_init(&r, f.reply, 512);
                    CHECK_EQ(feed_all(&r, b, n, &used, &g), MPA_DONE);
                    CHECK_EQ(used, n);
                    struct mpa_frame want = f;
                    if (!f.enhanced) {
                        want.p2p = false;
                        want.rtr = 0;
                        want.ird = want.ord = 0;
                    }
                    CHECK(mpa_frame_same(&g, &want));
                    free(b);
                }
            }
        }
    }
    /* Without S: 2^5 (key, M, C, R, A) x 2 revs x 8 rtr x 2 PD = 1024, all valid.
     * With S: Rev 2 only; 2^4 (key, M, C, R) x (A: 8 rtr + no A: rtr 0) x 2 PD = 288. */
    CHECK_EQ(count, 1024 + 288);
}

static void test_encode_limits(void)
{
    static uint8_t pd[600];
    uint8_t out[MPA_FRAME_MAX + 8];
    for (size_t i = 0; i < sizeof(pd); i++)
        pd[i] = (uint8_t)(i * 7 + 1);
    struct mpa_frame base = {.enhanced = true, .rev = 2, .ird = 1, .ord = 1};
    struct mpa_frame f;

    f = base;
    f.rev = 0;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f.rev = 3;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f = base;
    f.rev = 1;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f.enhanced = false;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 20);
    f = base;
    f.ird = 0x4000;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f = base;
    f.ord = 0x4000;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f = base;
    f.ird = f.ord = 0x3FFF;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 24);
    CHECK(memcmp(out + 20, "\x3F\xFF\x3F\xFF", 4) == 0);
    f = base;
    f.rtr = MPA_RTR_WRITE;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0); /* rtr without p2p */
    f.p2p = true;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 24);
    f.rtr = 0x08;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);

    /* PD_Length counts the word: 508 ULP octets fill it exactly. */
    f = base;
    f.pd = pd;
    f.pd_len = 508;
    CHECK_EQ(mpa_frame_size(&f), MPA_FRAME_MAX);
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), MPA_FRAME_MAX);
    CHECK_EQ(out[18] << 8 | out[19], 512);
    CHECK(memcmp(out + 24, pd, 508) == 0);
    f.pd_len = 509;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
    f.enhanced = false;
    f.pd_len = 512;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), MPA_FRAME_MAX);
    f.pd_len = 513;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);

    /* Capacity: exact fits, one short does not. */
    f = base;
    f.pd = pd;
    f.pd_len = 10;
    CHECK_EQ(mpa_frame_encode(&f, out, 34), 34);
    CHECK_EQ(mpa_frame_encode(&f, out, 33), 0);
    CHECK_EQ(mpa_frame_encode(&f, NULL, 100), 0);
    f.pd = NULL;
    CHECK_EQ(mpa_frame_encode(&f, out, sizeof(out)), 0);
}

/* ---------------- the incremental reader ---------------- */

static void test_reader_trailing_fpdu(void)
{
    /* A Reply with a Write RTR right behind it, as one segment. */
    uint8_t tmp[64];
    size_t n = rp_unhex(KEY_REP "10 02 00 04 80 10 80 10 "
                             "00 0E C1 40 00 00 00 01 00 00 00 00 00 00 00 00 EB D3 4C 5F",
                     tmp, sizeof(tmp));
    REQUIRE(n == 44);
    uint8_t *b = exact_copy(tmp, n);
    REQUIRE(b);

    for (size_t chunk = 1; chunk <= n; chunk++) {
        struct mpa_reader r;
        struct mpa_frame f;
        mpa_reader_init(&r, true, 256);
        size_t pos = 0;
        enum mpa_result res = MPA_NEED_MORE;
        while (pos < n && res == MPA_NEED_MORE) {
            size_t len = chunk < n - pos ? chunk : n - pos;
            size_t used = 0;
            res = mpa_reader_feed(&r, b + pos, len, &used, &f);
            CHECK(used <= len);
            pos += used;
        }
        CHECK_EQ(res, MPA_DONE);
        CHECK_EQ(pos, 24); /* stopped exactly at the frame's end */
        CHECK(f.p2p && f.rtr == MPA_RTR_WRITE && f.ird == 16 && f.ord == 16);

        /* A finished reader takes nothing more and keeps answering DONE. */
        size_t used = 77;
        struct mpa_frame g;
        CHECK_EQ(mpa_reader_feed(&r, b + pos, n - pos, &used, &g), MPA_DONE);
        CHECK_EQ(used, 0);
        CHECK(mpa_frame_same(&f, &g));

        /* What is left is the RTR FPDU. */
        size_t flen = 0, ulen = 0;
        const uint8_t *u = NULL;
        CHECK_EQ(mpa_fpdu_peek(b + pos, n - pos, true, 14, &flen, &u, &ulen), MPA_FPDU_OK);
        CHECK_EQ(flen, 20);
        struct mpa_rtr_info info;
        mpa_classify_first_fpdu(u, ulen, &info);
        CHECK_EQ(info.kind, MPA_RTR_KIND_WRITE0);
    }
    free(b);

    /* Zero-length feeds change nothing. */
    struct mpa_reader r;
    size_t used = 5;
    mpa_reader_init(&r, false, 512);
    CHECK_EQ(mpa_reader_feed(&r, NULL, 0, &used, NULL), MPA_NEED_MORE);
    CHECK_EQ(used, 0);
    CHECK_EQ(r.have, 0);
}

/* Feeds the frame whole and octet by octet; both must fail with want, and a
 * further feed on the failed reader must repeat it without taking octets. */
/* Decodes one whole Request given in hex, as the responder's reader (PD
 * limit 256) reads it; f's private data stays in r. */
static enum mpa_result decode_request(const char *hex, struct mpa_reader *r, struct mpa_frame *f)
{
    uint8_t tmp[64];
    size_t n = rp_unhex(hex, tmp, sizeof(tmp)), used;
    uint8_t *b = exact_copy(tmp, n);
    if (!b)
        return MPA_NEED_MORE;
    mpa_reader_init(r, false, 256);
    enum mpa_result res = feed_all(r, b, n, &used, f);
    free(b);
    return res;
}

static void expect_error(const char *hex, bool expect_reply, uint16_t limit, enum mpa_result want)
{
    static uint8_t tmp[MPA_FRAME_MAX + 64];
    size_t n = rp_unhex(hex, tmp, sizeof(tmp));
    if (n > sizeof(tmp))
        n = sizeof(tmp);
    uint8_t *b = exact_copy(tmp, n);
    REQUIRE(b);
    struct mpa_reader r;
    struct mpa_frame f;
    size_t used = 0;

    mpa_reader_init(&r, expect_reply, limit);
    CHECK_EQ(feed_all(&r, b, n, &used, &f), want);
    CHECK(used <= MPA_HDR_LEN);
    size_t again = 9;
    CHECK_EQ(mpa_reader_feed(&r, b, n, &again, &f), want);
    CHECK_EQ(again, 0);

    mpa_reader_init(&r, expect_reply, limit);
    CHECK_EQ(feed_bytewise(&r, b, n, &used, &f), want);
    CHECK(used <= MPA_HDR_LEN);
    CHECK_EQ(mpa_reader_feed(&r, b, 1, &again, &f), want);
    CHECK_EQ(again, 0);
    free(b);
}

static void test_reader_errors(void)
{
    /* Key: the other direction's key, and garbage (found at its first octet). */
    expect_error(KEY_REP "10 02 00 04 00 01 00 01", false, 256, MPA_ERR_KEY);
    expect_error(KEY_REQ "10 02 00 04 00 01 00 01", true, 256, MPA_ERR_KEY);
    expect_error("47 45 54 20 2f 20 48 54 54 50 2f 31 2e 31 0d 0a 0d 0a 00 00", false, 256,
                 MPA_ERR_KEY);
    {
        struct mpa_reader r;
        size_t used = 0;
        mpa_reader_init(&r, false, 256);
        CHECK_EQ(mpa_reader_feed(&r, (const uint8_t *)"G", 1, &used, NULL), MPA_ERR_KEY);
        CHECK_EQ(used, 1);
        /* Case matters: the key is exact octets. */
        mpa_reader_init(&r, false, 256);
        CHECK_EQ(mpa_reader_feed(&r, (const uint8_t *)"mpa", 3, &used, NULL), MPA_ERR_KEY);
    }
    /* Rev: only 1 and 2. */
    expect_error(KEY_REQ "00 00 00 00", false, 256, MPA_ERR_REV);
    expect_error(KEY_REQ "10 03 00 04 00 01 00 01", false, 256, MPA_ERR_REV);
    expect_error(KEY_REP "00 FF 00 00", true, 256, MPA_ERR_REV);
    /* PD_Length above the reader's limit or the RFC's. */
    expect_error(KEY_REQ "00 02 02 01", false, 512, MPA_ERR_PD_LEN);
    expect_error(KEY_REQ "00 02 01 01", false, 256, MPA_ERR_PD_LEN);
    expect_error(KEY_REQ "00 02 FF FF", false, 512, MPA_ERR_PD_LEN);
    expect_error(KEY_REQ "00 02 00 01", false, 0, MPA_ERR_PD_LEN);
    /* S with Rev 1, and S with PD_Length under the word. */
    expect_error(KEY_REQ "10 01 00 04 00 01 00 01", false, 256, MPA_ERR_ENH);
    expect_error(KEY_REP "10 01 00 00", true, 256, MPA_ERR_ENH);
    for (int pdl = 0; pdl < 4; pdl++) {
        char hex[128];
        snprintf(hex, sizeof(hex), KEY_REQ "10 02 00 %02x 00 01 00", pdl);
        expect_error(hex, false, 256, MPA_ERR_ENH);
    }
    /* The checks come in a fixed order, whatever the split: key first... */
    expect_error(KEY_REP "10 07 FF FF", false, 256, MPA_ERR_KEY);
    /* ...then Rev, then the Rev 1/S clash, then PD_Length, then S vs PD. */
    expect_error(KEY_REQ "10 00 FF FF", false, 256, MPA_ERR_REV);
    expect_error(KEY_REQ "10 01 FF FF", false, 256, MPA_ERR_ENH);
    expect_error(KEY_REQ "10 02 FF FF", false, 256, MPA_ERR_PD_LEN);
    /* Reserved flag bits are ignored, not errors. */
    {
        struct mpa_reader r;
        struct mpa_frame f;
        CHECK_EQ(decode_request(KEY_REQ "1F 02 00 04 00 01 00 01", &r, &f), MPA_DONE);
        CHECK(f.enhanced && !f.markers && !f.crc && !f.reject);
    }
    /* B/C/D without A are ignored on receipt; IRD/ORD still reported. */
    {
        struct mpa_reader r;
        struct mpa_frame f;
        CHECK_EQ(decode_request(KEY_REQ "10 02 00 04 40 05 C0 06", &r, &f), MPA_DONE);
        CHECK(!f.p2p);
        CHECK_EQ(f.rtr, 0);
        CHECK_EQ(f.ird, 5);
        CHECK_EQ(f.ord, 6);
    }
}

static void test_reader_pd_limits(void)
{
    static uint8_t pd[512];
    for (size_t i = 0; i < sizeof(pd); i++)
        pd[i] = (uint8_t)(255 - i);
    uint8_t frame[MPA_FRAME_MAX];
    struct mpa_frame f = {.reply = true, .rev = 2, .pd = pd, .pd_len = 512};
    size_t n = mpa_frame_encode(&f, frame, sizeof(frame));
    REQUIRE(n == MPA_FRAME_MAX);
    uint8_t *b = exact_copy(frame, n);
    REQUIRE(b);

    struct mpa_reader r;
    struct mpa_frame g;
    size_t used;
    /* 512 is fine with the RFC limit, whole or byte by byte. */
    mpa_reader_init(&r, true, 512);
    CHECK_EQ(feed_all(&r, b, n, &used, &g), MPA_DONE);
    CHECK_EQ(used, n);
    CHECK_EQ(g.pd_len, 512);
    CHECK(memcmp(g.pd, pd, 512) == 0);
    CHECK(g.pd >= r.buf && g.pd + g.pd_len <= r.buf + sizeof(r.buf));
    mpa_reader_init(&r, true, 512);
    CHECK_EQ(feed_bytewise(&r, b, n, &used, &g), MPA_DONE);
    CHECK_EQ(used, n);
    /* siw's limit of 256 is honoured... */
    mpa_reader_init(&r, true, 256);
    CHECK_EQ(feed_all(&r, b, n, &used, &g), MPA_ERR_PD_LEN);
    /* ...and a limit above 512 means 512. */
    mpa_reader_init(&r, true, 1000);
    CHECK_EQ(r.pd_limit, 512);
    CHECK_EQ(feed_all(&r, b, n, &used, &g), MPA_DONE);
    free(b);

    /* Exactly at 256 passes a 256 limit; 257 does not. */
    f.pd_len = 256;
    n = mpa_frame_encode(&f, frame, sizeof(frame));
    mpa_reader_init(&r, true, 256);
    CHECK_EQ(feed_all(&r, frame, n, &used, &g), MPA_DONE);
    CHECK_EQ(used, 276);
    f.pd_len = 257;
    n = mpa_frame_encode(&f, frame, sizeof(frame));
    mpa_reader_init(&r, true, 256);
    CHECK_EQ(feed_all(&r, frame, n, &used, &g), MPA_ERR_PD_LEN);

    /* 513 never passes, whatever the limit. */
    uint8_t big[MPA_HDR_LEN];
    memcpy(big, frame, 16);
    big[16] = 0;
    big[17] = 2;
    big[18] = 0x02;
    big[19] = 0x01;
    mpa_reader_init(&r, true, 0xFFFF);
    CHECK_EQ(feed_all(&r, big, sizeof(big), &used, &g), MPA_ERR_PD_LEN);
}

/* ---------------- responder RTR policy ---------------- */

static void test_choose_rtr(void)
{
    struct mpa_frame q = {.enhanced = true, .rev = 2, .p2p = true};
    static const struct {
        uint8_t offered;
        bool read_ok;
        uint8_t want;
    } table[] = {
        {MPA_RTR_WRITE, false, MPA_RTR_WRITE},
        {MPA_RTR_WRITE, true, MPA_RTR_WRITE},
        {MPA_RTR_WRITE | MPA_RTR_READ, true, MPA_RTR_WRITE},
        {MPA_RTR_WRITE | MPA_RTR_READ, false, MPA_RTR_WRITE},
        {MPA_RTR_READ, true, MPA_RTR_READ},
        {MPA_RTR_READ, false, MPA_RTR_WRITE},
        {MPA_RTR_READ | MPA_RTR_SEND, true, MPA_RTR_READ},
        {MPA_RTR_SEND, true, MPA_RTR_WRITE},
        {MPA_RTR_SEND, false, MPA_RTR_WRITE},
        {0, true, MPA_RTR_WRITE},
        {MPA_RTR_SEND | MPA_RTR_WRITE | MPA_RTR_READ, true, MPA_RTR_WRITE},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        q.rtr = table[i].offered;
        CHECK_EQ(mpa_choose_rtr(&q, table[i].read_ok), table[i].want);
    }
    /* Client/server Requests get no RTR. */
    struct mpa_frame cs = {.enhanced = true, .rev = 2, .ird = 1, .ord = 1};
    CHECK_EQ(mpa_choose_rtr(&cs, true), 0);
    struct mpa_frame v1 = {.rev = 1};
    CHECK_EQ(mpa_choose_rtr(&v1, true), 0);
    /* A decoded cxgb4-style Request (A + Read only) with a Read-capable ULP. */
    struct mpa_reader r;
    struct mpa_frame f;
    REQUIRE(decode_request(KEY_REQ "50 02 00 04 80 01 40 01", &r, &f) == MPA_DONE);
    CHECK_EQ(mpa_choose_rtr(&f, true), MPA_RTR_READ);
    CHECK_EQ(mpa_choose_rtr(&f, false), MPA_RTR_WRITE);
}

/* ---------------- FPDU framing ---------------- */

/* Known answers of a size function: fn(in) == want. */
struct size_answer {
    size_t in, want;
};

static void check_answers(const char *name, size_t (*fn)(size_t), const struct size_answer *a,
                          size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t got = fn(a[i].in);
        CHECK_EQ(got, a[i].want);
        if (got != a[i].want)
            fprintf(stderr, "    in %s(%zu)\n", name, a[i].in);
    }
}

#define CHECK_ANSWERS(fn, table) check_answers(#fn, fn, table, sizeof(table) / sizeof((table)[0]))

static void test_mulpdu(void)
{
    static const struct size_answer mulpdu[] = {
        {1448, 1442}, {1460, 1454}, {1449, 1442}, {1450, 1442},
        {1451, 1442}, {536, 530},   {8948, 8942}, {65483, 65474}, /* siw over loopback */
        {0, 0},       {6, 0},       {7, 0},
    };
    CHECK_ANSWERS(mpa_mulpdu, mulpdu);
    for (size_t emss = 8; emss <= 65541; emss++) {
        size_t m = mpa_mulpdu(emss);
        if (m != emss - (6 + emss % 4)) {
            CHECK_EQ(m, emss - (6 + emss % 4));
            break;
        }
        /* The largest ULPDU whose FPDU fits the segment. */
        if (mpa_fpdu_len(m) > emss || mpa_fpdu_len(m + 1) <= emss) {
            CHECK(!"mulpdu not the largest fit");
            break;
        }
    }
    CHECK_EQ(mpa_mulpdu(70000), 0xFFFF);
}

static void test_pad_and_len(void)
{
    static const struct size_answer pad[] = {
        {0, 2}, {14, 0}, {18, 0}, {19, 3}, {46, 0}, {16, 2}, {17, 1},
    };
    static const struct size_answer fpdu[] = {{14, 20}, {46, 52}, {22, 28}, {19, 28}};
    CHECK_ANSWERS(mpa_pad_len, pad);
    CHECK_ANSWERS(mpa_fpdu_len, fpdu);
}

static void test_crc_store(void)
{
    uint8_t o[4];
    mpa_crc_store(crc32c_update(crc32c_init(), "123456789", 9), o);
    CHECK(memcmp(o, "\x83\x92\x06\xE3", 4) == 0);
}

static void check_build_peek(size_t ulen, bool crc)
{
    static uint8_t u[65536], out[65536 + 16];
    for (size_t i = 0; i < ulen; i++)
        u[i] = (uint8_t)(i * 13 + ulen);
    size_t n = mpa_fpdu_build(u, ulen, crc, out, sizeof(out));
    CHECK_EQ(n, mpa_fpdu_len(ulen));
    CHECK_EQ(n % 4, 0);
    CHECK_EQ(out[0] << 8 | out[1], ulen);
    CHECK(memcmp(out + 2, u, ulen) == 0);
    for (size_t i = 2 + ulen; i < n - 4; i++)
        CHECK_EQ(out[i], 0);
    if (!crc)
        CHECK(memcmp(out + n - 4, "\0\0\0\0", 4) == 0);
    else
        CHECK_EQ(crc32c_update(crc32c_init(), out, n), 0xB798B438u);

    uint8_t *b = exact_copy(out, n);
    REQUIRE(b);
    size_t flen = 0, got = 0;
    const uint8_t *p = NULL;
    CHECK_EQ(mpa_fpdu_peek(b, n, crc, 0, &flen, &p, &got), MPA_FPDU_OK);
    CHECK_EQ(flen, n);
    CHECK(p == b + 2);
    CHECK_EQ(got, ulen);
    /* With CRC off the receiver ignores whatever is in the field. */
    CHECK_EQ(mpa_fpdu_peek(b, n, false, 0, &flen, &p, &got), MPA_FPDU_OK);
    free(b);
}

static void test_fpdu_round_trip(void)
{
    for (size_t ulen = 0; ulen <= 80; ulen++) {
        check_build_peek(ulen, false);
        check_build_peek(ulen, true);
    }
    check_build_peek(1442, true);
    check_build_peek(65535, true);
    check_build_peek(65535, false);

    uint8_t u[8] = {0}, out[64];
    CHECK_EQ(mpa_fpdu_build(u, 8, true, out, 15), 0);
    CHECK_EQ(mpa_fpdu_build(u, 8, true, out, 16), 16);
    CHECK_EQ(mpa_fpdu_build(u, 65536, true, out, sizeof(out)), 0);
    CHECK_EQ(mpa_fpdu_build(NULL, 0, true, out, sizeof(out)), 8);
    CHECK_EQ(mpa_fpdu_build(NULL, 3, true, out, sizeof(out)), 0);

    /* Built in place: the ULPDU already sits at out + 2. */
    uint8_t inplace[20] = {0};
    memcpy(inplace + 2, "\xC1\x40\x00\x00\x00\x01", 6);
    CHECK_EQ(mpa_fpdu_build(inplace + 2, 14, true, inplace, sizeof(inplace)), 20);
    uint8_t rtr[20];
    mpa_build_write_rtr(true, rtr);
    CHECK(memcmp(inplace, rtr, 20) == 0);
}

static void test_fpdu_peek_errors(void)
{
    uint8_t u[30], out[64];
    for (size_t i = 0; i < sizeof(u); i++)
        u[i] = (uint8_t)(0xA0 + i);
    size_t n = mpa_fpdu_build(u, 30, true, out, sizeof(out));
    REQUIRE(n == 36);
    size_t flen, ulen;
    const uint8_t *p;

    /* Any flipped octet, pad and CRC field included, fails the CRC. */
    for (size_t i = 2; i < n; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t *b = exact_copy(out, n);
            REQUIRE(b);
            b[i] ^= (uint8_t)(1u << bit);
            CHECK_EQ(mpa_fpdu_peek(b, n, true, 0, &flen, &p, &ulen), MPA_FPDU_ERR_CRC);
            CHECK_EQ(mpa_fpdu_peek(b, n, false, 0, &flen, &p, &ulen), MPA_FPDU_OK);
            free(b);
        }
    }
    /* Every truncation asks for more, never reads past the buffer. */
    for (size_t len = 0; len < n; len++) {
        uint8_t *b = exact_copy(out, len);
        REQUIRE(b);
        CHECK_EQ(mpa_fpdu_peek(b, len, true, 0, &flen, &p, &ulen), MPA_FPDU_NEED_MORE);
        CHECK_EQ(mpa_fpdu_peek(b, len, false, 0, &flen, &p, &ulen), MPA_FPDU_NEED_MORE);
        free(b);
    }
    CHECK_EQ(mpa_fpdu_peek(NULL, 0, true, 0, &flen, &p, &ulen), MPA_FPDU_NEED_MORE);
    /* Extra octets after the FPDU are not its business. */
    uint8_t longer[64];
    memcpy(longer, out, n);
    memset(longer + n, 0xEE, sizeof(longer) - n);
    CHECK_EQ(mpa_fpdu_peek(longer, sizeof(longer), true, 0, &flen, &p, &ulen), MPA_FPDU_OK);
    CHECK_EQ(flen, 36);

    /* ULPDU_Length below the smallest DDP header, judged from two octets. */
    uint8_t short_len[2] = {0x00, 0x0D};
    CHECK_EQ(mpa_fpdu_peek(short_len, 2, true, 14, &flen, &p, &ulen), MPA_FPDU_ERR_LENGTH);
    uint8_t zero[8] = {0};
    CHECK_EQ(mpa_fpdu_peek(zero, 8, false, 14, &flen, &p, &ulen), MPA_FPDU_ERR_LENGTH);
    CHECK_EQ(mpa_fpdu_peek(zero, 8, false, 0, &flen, &p, &ulen), MPA_FPDU_OK);
    CHECK_EQ(ulen, 0);
    CHECK_EQ(mpa_fpdu_peek(out, n, true, 30, &flen, &p, &ulen), MPA_FPDU_OK);
    CHECK_EQ(mpa_fpdu_peek(out, n, true, 31, &flen, &p, &ulen), MPA_FPDU_ERR_LENGTH);
}

/* ------------- control FPDUs: the RTRs of RFC 6581, Terminates ------------- */

static void expect_octets(const uint8_t *got, size_t n, const char *hex)
{
    uint8_t want[128];
    size_t wn = rp_unhex(hex, want, sizeof(want));
    CHECK_EQ(n, wn);
    if (n == wn && memcmp(got, want, n) != 0) {
        tl_failures++;
        fprintf(stderr, "  octets differ from %s\n  got:", hex);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %02x", got[i]);
        fprintf(stderr, "\n");
    }
}

#define WRITE_RTR "000E C140 00000001 0000000000000000"
#define READ_RTR                                                                       \
    "002E 4141 00000000 00000001 00000001 00000000 00000000 0000000000000000 00000000 " \
    "00000001 0000000000000000"
#define READ_RESP0 "000E C142 00000000 0000000000000000"
#define TERM_CRC "0016 4147 00000000 00000002 00000001 00000000 20020000"

static void test_control_builders(void)
{
    uint8_t b[64];
    memset(b, 0xCC, sizeof(b));
    CHECK_EQ(mpa_build_write_rtr(true, b), 20);
    expect_octets(b, 20, WRITE_RTR " EB D3 4C 5F");
    CHECK_EQ(mpa_build_write_rtr(false, b), 20);
    expect_octets(b, 20, WRITE_RTR " 00000000");

    CHECK_EQ(mpa_build_read_rtr(true, b), 52);
    expect_octets(b, 52, READ_RTR " BA 10 E3 C9");
    CHECK_EQ(mpa_build_read_rtr(false, b), 52);
    expect_octets(b, 52, READ_RTR " 00000000");

    CHECK_EQ(mpa_build_read_response0(0, 0, true, b), 20);
    expect_octets(b, 20, READ_RESP0 " 69 75 D6 CA");
    CHECK_EQ(mpa_build_read_response0(0, 0, false, b), 20);
    expect_octets(b, 20, READ_RESP0 " 00000000");
    /* Echoes a non-zero sink, e.g. the one of the siw Read Request. */
    CHECK_EQ(mpa_build_read_response0(0x1f93e400u, 0x7f8dfc000e00ull, true, b), 20);
    {
        size_t flen, ulen;
        const uint8_t *u;
        CHECK_EQ(mpa_fpdu_peek(b, 20, true, 14, &flen, &u, &ulen), MPA_FPDU_OK);
        CHECK_EQ(u[0], 0xC1);
        CHECK_EQ(u[1], 0x42);
        expect_octets(b + 4, 12, "1f93e400 00007f8dfc000e00");
    }

    CHECK_EQ(mpa_build_term_simple(2, 0, 2, true, b), 28);
    expect_octets(b, 28, TERM_CRC " 7F E4 25 85");
    CHECK_EQ(mpa_build_term_simple(2, 0, 2, false, b), 28);
    expect_octets(b, 28, TERM_CRC " 00000000");
    CHECK_EQ(mpa_build_term_simple(2, 0, 7, false, b), 28);
    expect_octets(b + 20, 4, "20070000");
    CHECK_EQ(mpa_build_term_simple(2, 0, 6, true, b), 28);
    expect_octets(b + 20, 4, "20060000");
    CHECK_EQ(crc32c_update(crc32c_init(), b, 28), 0xB798B438u);
    CHECK_EQ(mpa_build_term_simple(0, 0, 0xFF, false, b), 28);
    expect_octets(b + 20, 4, "00FF0000");
    /* Out-of-range nibbles cannot spill into the neighbouring field. */
    CHECK_EQ(mpa_build_term_simple(0x12, 0x34, 0x56, false, b), 28);
    expect_octets(b + 20, 4, "24560000");
    /* Nothing is written past the documented sizes. */
    memset(b, 0xCC, sizeof(b));
    mpa_build_write_rtr(true, b);
    CHECK_EQ(b[20], 0xCC);
    mpa_build_read_response0(1, 2, true, b);
    CHECK_EQ(b[20], 0xCC);
    mpa_build_term_simple(2, 0, 1, true, b);
    CHECK_EQ(b[28], 0xCC);
    mpa_build_read_rtr(true, b);
    CHECK_EQ(b[52], 0xCC);
}

/* ---------------- first-FPDU classification ---------------- */

static struct mpa_rtr_info classify_exact(const uint8_t *u, size_t ulen)
{
    struct mpa_rtr_info info;
    uint8_t *b = exact_copy(u, ulen);
    memset(&info, 0x5A, sizeof(info));
    mpa_classify_first_fpdu(b, ulen, &info);
    free(b);
    return info;
}

/* Classifies an FPDU given in hex (length field included, CRC left off). */
static struct mpa_rtr_info classify_hex(const char *hex)
{
    uint8_t tmp[128];
    size_t n = rp_unhex(hex, tmp, sizeof(tmp));
    return classify_exact(tmp + 2, n - 2);
}

/* Every shorter prefix of a valid RTR ULPDU is OTHER, with no over-read. */
static void check_truncations(const char *hex)
{
    uint8_t tmp[128];
    size_t n = rp_unhex(hex, tmp, sizeof(tmp)) - 2;
    for (size_t len = 0; len < n; len++)
        CHECK_EQ(classify_exact(tmp + 2, len).kind, MPA_RTR_KIND_OTHER);
    /* And a longer one (payload attached) too. */
    uint8_t longer[129];
    memcpy(longer, tmp + 2, n);
    longer[n] = 0x41;
    CHECK_EQ(classify_exact(longer, n + 1).kind, MPA_RTR_KIND_OTHER);
}

#define SEND_RTR "0012 4143 00000000 00000000 00000001 00000000"

static void test_classify(void)
{
    struct mpa_rtr_info i;
    i = classify_hex(WRITE_RTR);
    CHECK_EQ(i.kind, MPA_RTR_KIND_WRITE0);

    i = classify_hex(READ_RTR);
    CHECK_EQ(i.kind, MPA_RTR_KIND_READ0);
    CHECK_EQ(i.msn, 1);
    CHECK_EQ(i.sink_stag, 0);
    CHECK_EQ(i.sink_to, 0);

    /* A zero-length Read with a real sink (the siw Read Request with size 0). */
    i = classify_hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 07 00 00 00 00 1f 93 e4 00 "
                     "00 00 7f 8d fc 00 0e 00 00 00 00 00 00 ab c2 00 00 00 00 00 00 02 00 00");
    CHECK_EQ(i.kind, MPA_RTR_KIND_READ0);
    CHECK_EQ(i.msn, 7);
    CHECK_EQ(i.sink_stag, 0x1f93e400u);
    CHECK_EQ(i.sink_to, 0x7f8dfc000e00ull);
    /* The same Read Request for 64 octets, as siw sent it: a real Read. */
    i = classify_hex("00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 1f 93 e4 00 "
                     "00 00 7f 8d fc 00 0e 00 00 00 00 40 00 ab c2 00 00 00 00 00 00 02 00 00");
    CHECK_EQ(i.kind, MPA_RTR_KIND_OTHER);

    i = classify_hex(SEND_RTR);
    CHECK_EQ(i.kind, MPA_RTR_KIND_SEND0);
    CHECK_EQ(i.msn, 1);

    /* rping's first Send with its 16-octet payload (guest-to-host-rping-crc). */
    i = classify_hex("00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 55 8b "
                     "81 c7 e3 70 31 55 4d 00 00 00 00 40");
    CHECK_EQ(i.kind, MPA_RTR_KIND_OTHER);
    /* A Write with payload (host-to-guest-rping-crc). */
    i = classify_hex("00 4e c1 40 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e "
                     "67 2d 30 3a 20 41 42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 "
                     "54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63 64 65 66 67 68 69 6a 6b "
                     "6c 6d 6e 6f 70 71 72 00");
    CHECK_EQ(i.kind, MPA_RTR_KIND_OTHER);
    /* Zero-length Read Response, Terminate: not RTRs. */
    CHECK_EQ(classify_hex(READ_RESP0).kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex(TERM_CRC).kind, MPA_RTR_KIND_OTHER);
    /* Other Send variants with no payload are not the Send RTR. */
    CHECK_EQ(classify_hex("0012 4145 00000000 00000000 00000001 00000000").kind,
             MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("0012 4144 00000000 00000000 00000001 00000000").kind,
             MPA_RTR_KIND_OTHER);

    /* Wrong model, version, segment or queue: OTHER, for the data path. */
    CHECK_EQ(classify_hex("000E 4140 00000001 0000000000000000").kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("000E 8140 00000001 0000000000000000").kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("000E C040 00000001 0000000000000000").kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("000E C100 00000001 0000000000000000").kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("000E C141 00000001 0000000000000000").kind, MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("0012 C143 00000000 00000000 00000001 00000000").kind,
             MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("0012 4143 00000000 00000001 00000001 00000000").kind,
             MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("0012 4143 00000000 00000000 00000001 00000004").kind,
             MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("002E 4141 00000000 00000000 00000001 00000000 00000000 "
                          "0000000000000000 00000000 00000001 0000000000000000")
                 .kind,
             MPA_RTR_KIND_OTHER);
    CHECK_EQ(classify_hex("002E C141 00000000 00000001 00000001 00000000 00000000 "
                          "0000000000000000 00000000 00000001 0000000000000000")
                 .kind,
             MPA_RTR_KIND_OTHER);
    /* Reserved bits set: ignored, still the RTR. */
    CHECK_EQ(classify_hex("000E FD70 00000001 0000000000000000").kind, MPA_RTR_KIND_WRITE0);

    check_truncations(WRITE_RTR);
    check_truncations(READ_RTR);
    check_truncations(SEND_RTR);

    mpa_classify_first_fpdu(NULL, 0, &i);
    CHECK_EQ(i.kind, MPA_RTR_KIND_OTHER);
    mpa_classify_first_fpdu(NULL, 46, &i);
    CHECK_EQ(i.kind, MPA_RTR_KIND_OTHER);
}

static void test_classify_garbage(void)
{
    uint64_t s = 0x243F6A8885A308D3ull;
    uint8_t tmp[80];
    unsigned kinds[4] = {0};
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = (size_t)(iter % 61);
        for (size_t k = 0; k < len; k++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            tmp[k] = (uint8_t)s;
        }
        /* Steer some inputs onto the RTR shapes so the deep checks run. */
        if (len >= 2 && (iter & 3) == 0) {
            static const uint8_t ctl[3][2] = {{0xC1, 0x40}, {0x41, 0x41}, {0x41, 0x43}};
            memcpy(tmp, ctl[iter / 4 % 3], 2);
        }
        struct mpa_rtr_info info = classify_exact(tmp, len);
        REQUIRE(info.kind <= MPA_RTR_KIND_OTHER);
        kinds[info.kind]++;
    }
    CHECK(kinds[MPA_RTR_KIND_WRITE0] > 0);
    CHECK(kinds[MPA_RTR_KIND_OTHER] > 0);
}

/* ---------------- siw capture FPDUs: peek and rebuild ---------------- */

static void test_capture_fpdus(void)
{
    /* All of siw's (rawframe.h) back to back, as in a TCP stream behind the
     * Reply. */
    static uint8_t stream[1024];
    size_t total = 0;
    size_t sizes[16];
    size_t count = RP_SIW_CRC_FPDUS;
    for (size_t k = 0; k < count; k++) {
        sizes[k] = rp_unhex(rp_siw_crc_fpdus[k], stream + total, sizeof(stream) - total);
        uint8_t *b = exact_copy(stream + total, sizes[k]);
        REQUIRE(b);
        size_t flen = 0, ulen = 0;
        const uint8_t *u = NULL;
        CHECK_EQ(mpa_fpdu_peek(b, sizes[k], true, 14, &flen, &u, &ulen), MPA_FPDU_OK);
        CHECK_EQ(flen, sizes[k]);
        /* Rebuilding from the ULPDU reproduces siw's octets, CRC included. */
        uint8_t re[128];
        CHECK_EQ(mpa_fpdu_build(u, ulen, true, re, sizeof(re)), sizes[k]);
        CHECK(memcmp(re, b, sizes[k]) == 0);
        /* None of these is an RTR. */
        struct mpa_rtr_info info;
        mpa_classify_first_fpdu(u, ulen, &info);
        CHECK_EQ(info.kind, MPA_RTR_KIND_OTHER);
        free(b);
        total += sizes[k];
    }
    size_t pos = 0, k = 0;
    while (pos < total) {
        size_t flen = 0, ulen = 0;
        const uint8_t *u;
        REQUIRE(mpa_fpdu_peek(stream + pos, total - pos, true, 14, &flen, &u, &ulen) ==
                MPA_FPDU_OK);
        CHECK_EQ(flen, sizes[k]);
        pos += flen;
        k++;
    }
    CHECK_EQ(k, count);
}

int main(void)
{
    RUN(test_capture_frames_decode);
    RUN(test_encode_doc_frames);
    RUN(test_encode_decode_all_flags);
    RUN(test_encode_limits);
    RUN(test_reader_trailing_fpdu);
    RUN(test_reader_errors);
    RUN(test_reader_pd_limits);
    RUN(test_choose_rtr);
    RUN(test_mulpdu);
    RUN(test_pad_and_len);
    RUN(test_crc_store);
    RUN(test_fpdu_round_trip);
    RUN(test_fpdu_peek_errors);
    RUN(test_control_builders);
    RUN(test_classify);
    RUN(test_classify_garbage);
    RUN(test_capture_fpdus);
    return tl_finish();
}
