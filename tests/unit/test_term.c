/* Unit tests for src/wire/term.[ch]: Terminate control words (RFC 5040
 * section 4.8), known-answer Terminates, the optional headers (RFC 5040
 * section 7, Figure 10), robust decoding (length decides, flags
 * cross-checked) and term_describe(). */
#include "rawframe.h"
#include "testlib.h"
#include "wire/ddp.h"
#include "wire/term.h"

#include <stdlib.h>
#include <string.h>

static enum term_dec_result decode_exact(const uint8_t *p, size_t len, struct term_msg *m)
{
    uint8_t *c = malloc(len ? len : 1);
    if (len)
        memcpy(c, p, len);
    enum term_dec_result r = term_decode(c, len, m);
    /* Pointers into c die with it; callers only look at values. */
    m->ddp_hdr_copy = NULL;
    m->rdma_hdr_copy = NULL;
    free(c);
    return r;
}

static struct ddp_term mk(uint8_t layer, uint8_t etype, uint8_t code, bool d, bool r)
{
    struct ddp_term t = {layer, etype, code, d, r, false};
    return t;
}

static void test_ctrl_words(void)
{
    /* Terminate control words that come up often. */
    CHECK_EQ(term_ctrl_pack(2, 0, 0x02, false, false, false), 0x20020000u);
    CHECK_EQ(term_ctrl_pack(2, 0, 0x06, false, false, false), 0x20060000u);
    CHECK_EQ(term_ctrl_pack(2, 0, 0x07, false, false, false), 0x20070000u);
    CHECK_EQ(term_ctrl_pack(1, 1, 0x00, true, true, false), 0x1100C000u);
    CHECK_EQ(term_ctrl_pack(1, 1, 0x01, true, true, false), 0x1101C000u);
    CHECK_EQ(term_ctrl_pack(1, 2, 0x02, true, true, false), 0x1202C000u);
    CHECK_EQ(term_ctrl_pack(0, 1, 0x00, true, true, true), 0x0100E000u);
    CHECK_EQ(term_ctrl_pack(0, 2, 0x06, false, false, false), 0x02060000u);
    CHECK_EQ(term_ctrl_pack(0, 0, 0xFF, false, false, false), 0x00FF0000u);
    CHECK_EQ(term_ctrl_pack(0xF, 0xF, 0xFF, true, true, true), 0xFFFFE000u);
    CHECK_EQ(term_ctrl_pack(0x1F, 0x12, 0, false, false, false), 0xF2000000u);
}

/* Known answer: Terminate, LLP CRC error (2,0,2), no headers. */
static void test_vector_llp_crc(void)
{
    uint8_t u[80], f[96], want[96];
    struct ddp_term t;
    ddp_term_set(&t, TERM_LAYER_LLP, TERM_ETYPE_LLP_MPA, TERM_LLP_CRC, false);
    /* Even if a header were offered, LLP errors carry none. */
    uint8_t junk[20] = {0x41, 0x43};
    size_t n = term_encode(u, sizeof(u), &t, 0x22, junk, sizeof(junk), NULL);
    CHECK_EQ(n, 22);
    size_t fn = rp_fpdu(f, u, n, true);
    size_t wn = rp_unhex("0016 4147 00000000 00000002 00000001 00000000 20020000 7FE42585", want,
                    sizeof(want));
    CHECK_EQ(fn, wn);
    CHECK(memcmp(f, want, wn) == 0);

    struct term_msg m;
    REQUIRE(term_decode(u, n, &m) == TERM_DEC_OK);
    CHECK_EQ(m.ctrl, 0x20020000u);
    CHECK(m.layer == 2 && m.etype == 0 && m.code == 2);
    CHECK(!m.m && !m.d && !m.r);
    CHECK(m.ddp_hdr_copy == NULL && m.rdma_hdr_copy == NULL);
    CHECK_EQ(m.anomalies, 0);

    /* The Terminate itself passes ddp_decode(). */
    struct ddp_hdr h;
    struct ddp_term dt;
    CHECK_EQ(ddp_hdr_len(u[0], u[1]), 22);
    CHECK(ddp_decode(u, n, n, &h, &dt) == DDP_OK);
    CHECK(h.opcode == RDMAP_OP_TERMINATE && h.qn == 2 && h.msn == 1 && h.mo == 0 && h.last);
}

/* Known answer: DDP invalid STag (1,1,0) M+D for a 64-octet Write to STag
 * 0xDEADBE00 TO 0x1000, segment length 0x004E = 14 + 64. */
static void test_vector_ddp_invalid_stag(void)
{
    uint8_t w[14], u[80], f[96], want[96];
    CHECK_EQ(ddp_encode_tagged(w, sizeof(w), RDMAP_OP_WRITE, true, 0xDEADBE00u, 0x1000), 14);
    struct ddp_term t;
    CHECK(ddp_term_for_write(DDP_STAG_INVALID, &t));
    size_t n = term_encode(u, sizeof(u), &t, 14 + 64, w, sizeof(w), NULL);
    CHECK_EQ(n, 38);
    size_t fn = rp_fpdu(f, u, n, true);
    size_t wn = rp_unhex("0026 4147 00000000 00000002 00000001 00000000 1100C000 004E C140 DEADBE00 "
                    "0000000000001000 F51F8C94",
                    want, sizeof(want));
    CHECK_EQ(fn, wn);
    CHECK(memcmp(f, want, wn) == 0);

    struct term_msg m;
    REQUIRE(term_decode(u, n, &m) == TERM_DEC_OK);
    CHECK_EQ(m.ctrl, 0x1100C000u);
    CHECK(m.m && m.d && !m.r);
    CHECK_EQ(m.seg_len, 0x4E);
    CHECK(m.ddp_hdr_copy == u + 24);
    CHECK_EQ(m.ddp_hdr_copy_len, 14);
    CHECK(m.ddp.tagged && m.ddp.opcode == RDMAP_OP_WRITE && m.ddp.stag == 0xDEADBE00u &&
          m.ddp.to == 0x1000);
    CHECK(m.rdma_hdr_copy == NULL);
    CHECK_EQ(m.anomalies, 0);
    CHECK(strcmp(term_describe(m.layer, m.etype, m.code), "DDP tagged buffer: invalid STag") == 0);
}

/* Read Request with an invalid source: (0,1,0) M+D+R, 70 octets. */
static void test_read_source_terminate(void)
{
    uint8_t rq[46], u[80];
    struct rdmap_rreq rr = {0x00abc100u, 0x10000, 64, 0x0e616f00u, 0x56491e8df370ull};
    CHECK_EQ(rdmap_encode_read_request(rq, sizeof(rq), 7, &rr), 46);
    struct ddp_term t;
    CHECK(ddp_term_for_read_source(DDP_STAG_INVALID, &t));
    size_t n = term_encode(u, sizeof(u), &t, 46, rq, sizeof(rq), rq + 18);
    CHECK_EQ(n, 70);
    CHECK_EQ(ddp_rd32(u + 18), 0x0100E000u);
    CHECK_EQ(ddp_rd16(u + 22), 46);
    CHECK(memcmp(u + 24, rq, 46) == 0);

    struct term_msg m;
    REQUIRE(term_decode(u, n, &m) == TERM_DEC_OK);
    CHECK(m.layer == 0 && m.etype == 1 && m.code == 0 && m.m && m.d && m.r);
    CHECK_EQ(m.anomalies, 0);
    CHECK_EQ(m.ddp_hdr_copy_len, 18);
    CHECK(!m.ddp.tagged && m.ddp.opcode == RDMAP_OP_READ_REQ && m.ddp.qn == 1 && m.ddp.msn == 7);
    CHECK(m.rdma_hdr_copy == u + 42);
    CHECK_EQ(m.rdma.sink_stag, rr.sink_stag);
    CHECK(m.rdma.sink_to == rr.sink_to);
    CHECK_EQ(m.rdma.size, 64);
    CHECK_EQ(m.rdma.src_stag, rr.src_stag);
    CHECK(m.rdma.src_to == rr.src_to);

    /* A Terminate with headers passes ddp_decode() too (length >= 22). */
    struct ddp_hdr h;
    struct ddp_term dt;
    CHECK(ddp_decode(u, n, n, &h, &dt) == DDP_OK);
}

/* No receive posted for a Send: (1,2,2) M+D, 42 octets. */
static void test_untagged_ddp_terminate(void)
{
    uint8_t s[18], u[80];
    ddp_encode_untagged(s, sizeof(s), RDMAP_OP_SEND_SE_INV, true, 0x77, 0, 3, 0);
    struct ddp_term t;
    ddp_term_set(&t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_NO_BUFFER, false);
    size_t n = term_encode(u, sizeof(u), &t, 18 + 100, s, sizeof(s), NULL);
    CHECK_EQ(n, 42);
    CHECK_EQ(ddp_rd32(u + 18), 0x1202C000u);
    struct term_msg m;
    REQUIRE(term_decode(u, n, &m) == TERM_DEC_OK);
    CHECK_EQ(m.seg_len, 118);
    CHECK(m.ddp.opcode == RDMAP_OP_SEND_SE_INV && m.ddp.inv_stag == 0x77 && m.ddp.msn == 3);
    CHECK_EQ(m.anomalies, 0);
}

/* Parts asked for but not possible are left out with their flags. */
static void test_encode_if_possible(void)
{
    uint8_t u[80], w[14], s[18];
    struct ddp_term t;
    ddp_encode_tagged(w, sizeof(w), RDMAP_OP_WRITE, true, 1, 2);
    ddp_encode_untagged(s, sizeof(s), RDMAP_OP_SEND_INV, true, 9, 0, 1, 0);

    /* Row 3 with fewer than 14 octets of offender: control only. */
    t = mk(0, 2, 0xFF, true, false);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 10, w, 10, NULL), 22);
    CHECK_EQ(ddp_rd32(u + 18), 0x02FF0000u);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 10, NULL, 0, NULL), 22);
    /* An untagged offender needs 18. */
    CHECK_EQ(term_encode(u, sizeof(u), &t, 18, s, 17, NULL), 22);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 18, s, 18, NULL), 42);
    CHECK_EQ(ddp_rd32(u + 18), 0x02FFC000u);

    /* R asked for a tagged offender: no defined place, R dropped. */
    t = mk(0, 1, 0x00, true, true);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 14, w, sizeof(w), s), 38);
    CHECK_EQ(ddp_rd32(u + 18), 0x0100C000u);
    /* R asked but no RDMA header supplied. */
    CHECK_EQ(term_encode(u, sizeof(u), &t, 18, s, sizeof(s), NULL), 42);
    CHECK_EQ(ddp_rd32(u + 18), 0x0100C000u);
    /* R without D: R needs the DDP part before it. */
    uint8_t r28[28] = {0};
    t = mk(0, 1, 0x00, false, true);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 18, s, sizeof(s), r28), 22);
    CHECK_EQ(ddp_rd32(u + 18), 0x01000000u);

    /* Building-side error: caller clears ddp_hdr. */
    t = mk(0, 0, 0xFF, false, false);
    CHECK_EQ(term_encode(u, sizeof(u), &t, 0, NULL, 0, NULL), 22);
    CHECK_EQ(ddp_rd32(u + 18), 0x00FF0000u);
}

static void test_encode_cap(void)
{
    uint8_t rq[46], u[80];
    struct rdmap_rreq rr = {1, 2, 3, 4, 5};
    rdmap_encode_read_request(rq, sizeof(rq), 1, &rr);
    struct ddp_term t;
    ddp_term_for_read_source(DDP_STAG_BOUNDS, &t);
    static const size_t sizes[] = {22, 42, 70};
    for (int k = 0; k < 3; k++) {
        bool d = k >= 1, r = k == 2;
        struct ddp_term tt = t;
        tt.ddp_hdr = d;
        tt.rdma_hdr = r;
        memset(u, 0xAA, sizeof(u));
        CHECK_EQ(term_encode(u, sizes[k] - 1, &tt, 46, rq, sizeof(rq), rq + 18), 0);
        for (size_t i = 0; i < sizeof(u); i++)
            CHECK_EQ(u[i], 0xAA);
        CHECK_EQ(term_encode(u, sizes[k], &tt, 46, rq, sizeof(rq), rq + 18), sizes[k]);
        CHECK_EQ(u[sizes[k]], 0xAA);
    }
}

static void build_term(uint8_t *u, uint32_t ctrl)
{
    memset(u, 0, 80);
    ddp_encode_untagged(u, 80, RDMAP_OP_TERMINATE, true, 0, 2, 1, 0);
    ddp_wr32(u + 18, ctrl);
}

static void test_decode_flags_crosscheck(void)
{
    uint8_t u[80];
    struct term_msg m;

    /* Linux siw's (siw_init_terminate): Send-with-Invalidate offender, R set,
     * no RDMA hdr. */
    build_term(u, 0x0109E000u);
    ddp_wr16(u + 22, 8);
    ddp_encode_untagged(u + 24, 18, RDMAP_OP_SEND_INV, true, 0x1234, 0, 1, 0);
    REQUIRE(term_decode(u, 42, &m) == TERM_DEC_OK);
    CHECK(m.r && m.rdma_hdr_copy == NULL);
    CHECK(m.ddp_hdr_copy == u + 24);
    CHECK_EQ(m.ddp.inv_stag, 0x1234);
    CHECK_EQ(m.anomalies, TERM_ANOM_FLAGS);

    /* D set but only the control word present. */
    build_term(u, 0x1100C000u);
    REQUIRE(term_decode(u, 22, &m) == TERM_DEC_OK);
    CHECK(m.ddp_hdr_copy == NULL);
    CHECK_EQ(m.anomalies, TERM_ANOM_FLAGS);

    /* M alone at 22. */
    build_term(u, 0x11008000u);
    REQUIRE(term_decode(u, 22, &m) == TERM_DEC_OK);
    CHECK_EQ(m.anomalies, TERM_ANOM_FLAGS);

    /* Headers present but D clear: the length still wins. */
    build_term(u, 0x11000000u);
    ddp_encode_tagged(u + 24, 14, RDMAP_OP_WRITE, true, 5, 6);
    REQUIRE(term_decode(u, 38, &m) == TERM_DEC_OK);
    CHECK(m.ddp_hdr_copy == u + 24 && m.ddp.stag == 5);
    CHECK_EQ(m.anomalies, TERM_ANOM_FLAGS);

    /* D without M is allowed: the segment length is just not valid. */
    build_term(u, 0x11004000u);
    ddp_encode_tagged(u + 24, 14, RDMAP_OP_WRITE, true, 5, 6);
    REQUIRE(term_decode(u, 38, &m) == TERM_DEC_OK);
    CHECK(!m.m && m.d);
    CHECK_EQ(m.anomalies, 0);

    /* 70 octets but R clear. */
    build_term(u, 0x0100C000u);
    ddp_encode_untagged(u + 24, 18, RDMAP_OP_READ_REQ, true, 0, 1, 1, 0);
    REQUIRE(term_decode(u, 70, &m) == TERM_DEC_OK);
    CHECK(m.rdma_hdr_copy == u + 42);
    CHECK_EQ(m.anomalies, TERM_ANOM_FLAGS);

    /* Copied header's T bit disagrees with its size (38 with T=0, 42 with T=1). */
    build_term(u, 0x1100C000u);
    ddp_encode_untagged(u + 24, 18, RDMAP_OP_SEND, true, 0, 0, 1, 0);
    REQUIRE(term_decode(u, 38, &m) == TERM_DEC_OK);
    CHECK_EQ(m.anomalies, TERM_ANOM_T);
    CHECK(m.ddp.tagged);
    CHECK_EQ(m.ddp_hdr_copy_len, 14);
    build_term(u, 0x1202C000u);
    ddp_encode_tagged(u + 24, 18, RDMAP_OP_WRITE, true, 0xAB, 0xCD);
    REQUIRE(term_decode(u, 42, &m) == TERM_DEC_OK);
    CHECK_EQ(m.anomalies, TERM_ANOM_T);
    CHECK(!m.ddp.tagged);
    CHECK_EQ(m.ddp_hdr_copy_len, 18);

    /* Reserved control bits. */
    build_term(u, 0x20020001u);
    REQUIRE(term_decode(u, 22, &m) == TERM_DEC_OK);
    CHECK_EQ(m.anomalies, TERM_ANOM_RSVD);
    CHECK(m.layer == 2 && m.etype == 0 && m.code == 2);
}

static void test_decode_lengths(void)
{
    uint8_t u[128];
    struct term_msg m;
    build_term(u, 0x1202C000u);
    memset(u + 22, 0, sizeof(u) - 22);
    for (size_t len = 0; len <= sizeof(u); len++) {
        enum term_dec_result r = decode_exact(u, len, &m);
        if (len < 2)
            CHECK(r == TERM_DEC_NOT_TERM);
        else if (len < 22)
            CHECK(r == TERM_DEC_SHORT);
        else if (len == 22 || len == 38 || len == 42 || len == 70)
            CHECK(r == TERM_DEC_OK);
        else {
            CHECK(r == TERM_DEC_BAD_LEN);
            /* Still reportable. */
            CHECK(m.layer == 1 && m.etype == 2 && m.code == 2);
            CHECK(m.ddp_hdr_copy_len == 0);
        }
    }
    /* Not a Terminate at all. */
    uint8_t s[40] = {0};
    ddp_encode_untagged(s, sizeof(s), RDMAP_OP_SEND, true, 0, 0, 1, 0);
    CHECK(term_decode(s, 22, &m) == TERM_DEC_NOT_TERM);
    ddp_encode_tagged(s, sizeof(s), RDMAP_OP_TERMINATE, true, 0, 0);
    CHECK(term_decode(s, 22, &m) == TERM_DEC_NOT_TERM);
    /* The Terminate's own header is exposed, not judged. */
    build_term(u, 0x20020000u);
    ddp_wr32(u + 10, 9);
    REQUIRE(term_decode(u, 22, &m) == TERM_DEC_OK);
    CHECK_EQ(m.hdr.msn, 9);
    CHECK_EQ(m.hdr.qn, 2);
}

/* Round trip of every Figure-10 shape through encode and decode, and every
 * truncation of the largest one in an exact-size buffer. */
static void test_roundtrip_and_truncation(void)
{
    uint8_t rq[46], u[80], re[80];
    struct rdmap_rreq rr = {0x11, 0x22, 0x33, 0x44, 0x55};
    rdmap_encode_read_request(rq, sizeof(rq), 1, &rr);
    struct ddp_term t;
    ddp_term_for_read_source(DDP_STAG_WRAP, &t);
    size_t n = term_encode(u, sizeof(u), &t, 46, rq, sizeof(rq), rq + 18);
    REQUIRE(n == 70);
    struct term_msg m;
    REQUIRE(term_decode(u, n, &m) == TERM_DEC_OK);
    struct ddp_term back = {m.layer, m.etype, m.code, m.ddp_hdr_copy != NULL,
                            m.rdma_hdr_copy != NULL, false};
    size_t n2 = term_encode(re, sizeof(re), &back, m.seg_len, m.ddp_hdr_copy,
                            m.ddp_hdr_copy_len, m.rdma_hdr_copy);
    CHECK_EQ(n2, n);
    CHECK(memcmp(re, u, n) == 0);

    for (size_t len = 0; len <= n; len++) {
        enum term_dec_result r = decode_exact(u, len, &m);
        CHECK(r == (len < 22 ? TERM_DEC_SHORT
                             : (len == 22 || len == 38 || len == 42 || len == 70)
                                   ? TERM_DEC_OK
                                   : TERM_DEC_BAD_LEN) ||
              (len < 2 && r == TERM_DEC_NOT_TERM));
    }
    /* term_encode reading offenders from exact-size buffers. */
    for (size_t avail = 0; avail <= 46; avail++) {
        uint8_t *c = malloc(avail ? avail : 1);
        memcpy(c, rq, avail);
        size_t k = term_encode(re, sizeof(re), &t, 46, c, avail, NULL);
        CHECK_EQ(k, avail >= 18 ? 42u : 22u);
        free(c);
    }
}

static void test_describe(void)
{
    struct {
        uint8_t l, e, c;
        const char *name;
    } v[] = {
        {1, 1, 0x00, "DDP tagged buffer: invalid STag"},
        {1, 1, 0x01, "DDP tagged buffer: base or bounds violation"},
        {1, 1, 0x02, "DDP tagged buffer: STag not associated with DDP stream"},
        {1, 1, 0x03, "DDP tagged buffer: TO wrap"},
        {1, 1, 0x04, "DDP tagged buffer: invalid DDP version"},
        {1, 2, 0x01, "DDP untagged buffer: invalid QN"},
        {1, 2, 0x02, "DDP untagged buffer: invalid MSN - no buffer available"},
        {1, 2, 0x03, "DDP untagged buffer: invalid MSN - MSN range is not valid"},
        {1, 2, 0x04, "DDP untagged buffer: invalid MO"},
        {1, 2, 0x05, "DDP untagged buffer: DDP message too long for available buffer"},
        {1, 2, 0x06, "DDP untagged buffer: invalid DDP version"},
        {1, 0, 0x00, "DDP local catastrophic error"},
        {0, 0, 0xFF, "RDMAP local catastrophic error"},
        {0, 0, 0x00, "RDMAP local catastrophic error"},
        {0, 1, 0x00, "RDMAP remote protection: invalid STag"},
        {0, 1, 0x01, "RDMAP remote protection: base or bounds violation"},
        {0, 1, 0x02, "RDMAP remote protection: access rights violation"},
        {0, 1, 0x03, "RDMAP remote protection: STag not associated with RDMAP stream"},
        {0, 1, 0x04, "RDMAP remote protection: TO wrap"},
        {0, 1, 0x09, "RDMAP remote protection: STag cannot be invalidated"},
        {0, 1, 0xFF, "RDMAP remote protection: unspecified error"},
        {0, 2, 0x05, "RDMAP remote operation: invalid RDMAP version"},
        {0, 2, 0x06, "RDMAP remote operation: unexpected OpCode"},
        {0, 2, 0x07, "RDMAP remote operation: catastrophic error, localized to RDMAP stream"},
        {0, 2, 0x08, "RDMAP remote operation: catastrophic error, global"},
        {0, 2, 0x09, "RDMAP remote operation: STag cannot be invalidated"},
        {0, 2, 0xFF, "RDMAP remote operation: unspecified error"},
        {2, 0, 0x01, "LLP: TCP connection closed, terminated or lost"},
        {2, 0, 0x02, "LLP: MPA CRC error"},
        {2, 0, 0x03, "LLP: MPA marker and ULPDU_Length disagree (FPDU start error)"},
        {2, 0, 0x04, "LLP: invalid MPA Request/Reply frame"},
        {2, 0, 0x05, "LLP: MPA local catastrophic error"},
        {2, 0, 0x06, "LLP: MPA insufficient IRD resources"},
        {2, 0, 0x07, "LLP: MPA no matching RTR option"},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        const char *s = term_describe(v[i].l, v[i].e, v[i].c);
        CHECK(s && strcmp(s, v[i].name) == 0);
        if (!s || strcmp(s, v[i].name) != 0)
            fprintf(stderr, "  (%u,%u,0x%02X) -> %s\n", v[i].l, v[i].e, v[i].c, s ? s : "NULL");
    }
    /* Everything else gets some non-NULL text. */
    for (int l = 0; l < 16; l++)
        for (int e = 0; e < 16; e++)
            for (int c = 0; c < 256; c++)
                CHECK(term_describe((uint8_t)l, (uint8_t)e, (uint8_t)c) != NULL);
    CHECK(strstr(term_describe(0, 1, 0x05), "unknown") != NULL);
    CHECK(strstr(term_describe(3, 0, 0), "unknown") != NULL);
    CHECK(strstr(term_describe(1, 3, 0), "unknown") != NULL);
}

int main(void)
{
    RUN(test_ctrl_words);
    RUN(test_vector_llp_crc);
    RUN(test_vector_ddp_invalid_stag);
    RUN(test_read_source_terminate);
    RUN(test_untagged_ddp_terminate);
    RUN(test_encode_if_possible);
    RUN(test_encode_cap);
    RUN(test_decode_flags_crosscheck);
    RUN(test_decode_lengths);
    RUN(test_roundtrip_and_truncation);
    RUN(test_describe);
    return tl_finish();
}
