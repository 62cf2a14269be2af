/* Unit tests for src/wire/ddp.[ch]: header codec, known-answer FPDUs, the
 * siw captures, every receive check of docs/rules.md (R3-R22) with its
 * Terminate. */
#include "rawframe.h"
#include "testlib.h"
#include "wire/ddp.h"

#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

static bool term_is(const struct ddp_term *t, int layer, int etype, int code, bool d, bool r)
{
    return t->layer == layer && t->etype == etype && t->code == code && t->ddp_hdr == d &&
           t->rdma_hdr == r;
}

/* Decodes a ULPDU held in an exactly-sized heap copy, so ASan flags any read
 * past what was handed over. */
static enum ddp_result decode_exact(const uint8_t *p, size_t avail, size_t ulpdu_len,
                                    struct ddp_hdr *h, struct ddp_term *t)
{
    uint8_t *copy = malloc(avail ? avail : 1);
    if (avail)
        memcpy(copy, p, avail);
    enum ddp_result r = ddp_decode(copy, avail, ulpdu_len, h, t);
    free(copy);
    return r;
}

static const uint8_t opcode_ctrl_pairs[][4] = {
    /* opcode, tagged, non-last (octet 2, 3): RFC 5041 section 4, RFC 5040
     * section 4.1 ... */
    {RDMAP_OP_WRITE, 1, 0x81, 0x40},    {RDMAP_OP_READ_REQ, 0, 0x01, 0x41},
    {RDMAP_OP_READ_RESP, 1, 0x81, 0x42}, {RDMAP_OP_SEND, 0, 0x01, 0x43},
    {RDMAP_OP_SEND_INV, 0, 0x01, 0x44},  {RDMAP_OP_SEND_SE, 0, 0x01, 0x45},
    {RDMAP_OP_SEND_SE_INV, 0, 0x01, 0x46}, {RDMAP_OP_TERMINATE, 0, 0x01, 0x47},
};

/* ---- tests ---- */

static void test_constants(void)
{
    CHECK_EQ(DDP_TAGGED_HDR_LEN, 14);
    CHECK_EQ(DDP_UNTAGGED_HDR_LEN, 18);
    CHECK_EQ(RDMAP_READ_REQ_HDR_LEN, 28);
    CHECK_EQ(RDMAP_READ_REQ_ULPDU_LEN, 46);
    CHECK_EQ(RDMAP_TERM_MIN_ULPDU_LEN, 22);
    CHECK_EQ(DDP_CTRL_T, 0x80);
    CHECK_EQ(DDP_CTRL_L, 0x40);
    CHECK_EQ(DDP_VERSION, 1);
    CHECK_EQ(RDMAP_VERSION, 1);
    CHECK_EQ(RDMAP_OP_TERMINATE, 7);
    CHECK_EQ(DDP_QN_TERMINATE, 2);
    CHECK_EQ(ddp_msn_next(0xFFFFFFFFu), 0);
    CHECK_EQ(ddp_msn_next(1), 2);
}

static void test_hdr_len(void)
{
    /* The (octet 2, octet 3) pairs and each opcode's header size (RFC 5041
     * section 4, RFC 5040 section 4). */
    CHECK_EQ(ddp_hdr_len(0x81, 0x40), 14);
    CHECK_EQ(ddp_hdr_len(0xC1, 0x40), 14);
    CHECK_EQ(ddp_hdr_len(0x41, 0x41), 46);
    CHECK_EQ(ddp_hdr_len(0x81, 0x42), 14);
    CHECK_EQ(ddp_hdr_len(0xC1, 0x42), 14);
    for (uint8_t op = 3; op <= 6; op++) {
        CHECK_EQ(ddp_hdr_len(0x01, (uint8_t)(0x40 | op)), 18);
        CHECK_EQ(ddp_hdr_len(0x41, (uint8_t)(0x40 | op)), 18);
    }
    CHECK_EQ(ddp_hdr_len(0x41, 0x47), 22);
    /* Unknown opcodes and wrong T: the layout T names. */
    CHECK_EQ(ddp_hdr_len(0x41, 0x48), 18);
    CHECK_EQ(ddp_hdr_len(0x41, 0x4A), 18);
    CHECK_EQ(ddp_hdr_len(0xC1, 0x41), 14);
    CHECK_EQ(ddp_hdr_len(0xC1, 0x47), 14);
    CHECK_EQ(ddp_hdr_len(0x41, 0x40), 18);
    /* Versions and reserved bits do not change the size. */
    CHECK_EQ(ddp_hdr_len(0x7C, 0xF1), 46);
    CHECK_EQ(ddp_hdr_len(0x00, 0x07), 22);
    CHECK(ddp_hdr_len(0x41, 0x41) <= DDP_HDR_MAX);
}

static void test_ctrl_pairs(void)
{
    for (size_t i = 0; i < sizeof(opcode_ctrl_pairs) / sizeof(opcode_ctrl_pairs[0]); i++) {
        const uint8_t *e = opcode_ctrl_pairs[i];
        uint8_t b[18];
        for (int last = 0; last <= 1; last++) {
            size_t n = e[1] ? ddp_encode_tagged(b, sizeof(b), e[0], last, 1, 2)
                            : ddp_encode_untagged(b, sizeof(b), e[0], last, 0, 0, 1, 0);
            CHECK_EQ(n, e[1] ? 14 : 18);
            CHECK_EQ(b[0], e[2] | (last ? 0x40 : 0));
            CHECK_EQ(b[1], e[3]);
        }
    }
}

/* One valid ULPDU per opcode, encoded, decoded, re-encoded. */
static void test_roundtrip_all_opcodes(void)
{
    for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
        for (int last = 0; last <= 1; last++) {
            uint8_t u[64], re[64];
            size_t n;
            bool tagged = op == RDMAP_OP_WRITE || op == RDMAP_OP_READ_RESP;
            bool single = op == RDMAP_OP_READ_REQ || op == RDMAP_OP_TERMINATE;
            if (single && !last)
                continue;
            memset(u, 0, sizeof(u));
            struct rdmap_rreq rr = {0x11223344u, 0x8877665544332211ull, 0xFFFFFFFFu, 0xA0B0C0D0u,
                                    0x0102030405060708ull};
            if (tagged) {
                n = ddp_encode_tagged(u, sizeof(u), op, last, 0xDEADBE01u, 0xFEDCBA9876543210ull);
                CHECK_EQ(n, 14);
                n += 5; /* a little payload */
            } else if (op == RDMAP_OP_READ_REQ) {
                n = rdmap_encode_read_request(u, sizeof(u), 0xFFFFFFFFu, &rr);
                CHECK_EQ(n, 46);
            } else if (op == RDMAP_OP_TERMINATE) {
                n = ddp_encode_untagged(u, sizeof(u), op, true, 0, 2, 1, 0);
                ddp_wr32(u + n, 0x20020000u);
                n += 4;
            } else {
                uint32_t inv = (op == RDMAP_OP_SEND_INV || op == RDMAP_OP_SEND_SE_INV) ? 0xCAFE0001u : 0;
                n = ddp_encode_untagged(u, sizeof(u), op, last, inv, 0, 0x80000000u, 0x1234u);
                CHECK_EQ(n, 18);
                n += 3;
            }
            struct ddp_hdr h;
            struct ddp_term t;
            REQUIRE(ddp_decode(u, n, n, &h, &t) == DDP_OK);
            CHECK_EQ(h.opcode, op);
            CHECK_EQ(h.tagged, tagged);
            CHECK_EQ(h.last, last);
            CHECK_EQ(h.ddp_ver, 1);
            CHECK_EQ(h.rdmap_ver, 1);
            if (tagged) {
                CHECK_EQ(h.stag, 0xDEADBE01u);
                CHECK(h.to == 0xFEDCBA9876543210ull);
            } else if (op == RDMAP_OP_READ_REQ) {
                CHECK_EQ(h.qn, 1);
                CHECK_EQ(h.msn, 0xFFFFFFFFu);
                CHECK_EQ(h.mo, 0);
                CHECK_EQ(h.rreq.sink_stag, rr.sink_stag);
                CHECK(h.rreq.sink_to == rr.sink_to);
                CHECK_EQ(h.rreq.size, rr.size);
                CHECK_EQ(h.rreq.src_stag, rr.src_stag);
                CHECK(h.rreq.src_to == rr.src_to);
                CHECK_EQ(rdmap_rreq_encode(&h.rreq, re, sizeof(re)), 28);
                CHECK(memcmp(re, u + 18, 28) == 0);
            } else if (op == RDMAP_OP_TERMINATE) {
                CHECK_EQ(h.qn, 2);
                CHECK_EQ(h.msn, 1);
            } else {
                CHECK_EQ(h.qn, 0);
                CHECK_EQ(h.msn, 0x80000000u);
                CHECK_EQ(h.mo, 0x1234);
                CHECK_EQ(h.inv_stag, (op == RDMAP_OP_SEND_INV || op == RDMAP_OP_SEND_SE_INV) ? 0xCAFE0001u : 0);
            }
            size_t m = ddp_encode(&h, re, sizeof(re));
            CHECK_EQ(m, tagged ? 14 : 18);
            CHECK(memcmp(re, u, m) == 0);
        }
    }
}

static void test_encode_cap(void)
{
    uint8_t b[64];
    struct rdmap_rreq rr = {0};
    memset(b, 0xAA, sizeof(b));
    CHECK_EQ(ddp_encode_tagged(b, 13, 0, true, 1, 0), 0);
    CHECK_EQ(ddp_encode_untagged(b, 17, 3, true, 0, 0, 1, 0), 0);
    CHECK_EQ(rdmap_rreq_encode(&rr, b, 27), 0);
    CHECK_EQ(rdmap_encode_read_request(b, 45, 1, &rr), 0);
    for (size_t i = 0; i < sizeof(b); i++)
        CHECK_EQ(b[i], 0xAA);
    CHECK_EQ(ddp_encode_tagged(b, 14, 0, true, 1, 0), 14);
    CHECK_EQ(b[14], 0xAA);
    CHECK_EQ(rdmap_encode_read_request(b, 46, 1, &rr), 46);
    CHECK_EQ(b[46], 0xAA);
    /* Versions are written as given (2 bits), so bad versions can be built. */
    struct ddp_hdr h = {.tagged = false, .last = true, .ddp_ver = 2, .rdmap_ver = 3,
                        .opcode = 0x1F, .qn = 0, .msn = 1};
    CHECK_EQ(ddp_encode(&h, b, sizeof(b)), 18);
    CHECK_EQ(b[0], 0x42);
    CHECK_EQ(b[1], 0xCF);
}

static void test_crc_helper(void)
{
    CHECK_EQ(rp_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);
    uint8_t z[32] = {0};
    CHECK_EQ(rp_crc32c(z, 32), 0x8A9136AAu);
}

/* Known-answer FPDUs: build each ULPDU with the encoders, frame it, compare the
 * whole FPDU and its CRC; then decode it back. */
static void check_fpdu(const uint8_t *ulpdu, size_t len, const char *want_hex)
{
    uint8_t want[128], got[128];
    size_t wn = rp_unhex(want_hex, want, sizeof(want));
    size_t gn = rp_fpdu(got, ulpdu, len, true);
    CHECK_EQ(gn, wn);
    CHECK(memcmp(got, want, wn < gn ? wn : gn) == 0);
}

static void test_vectors_43(void)
{
    uint8_t u[64];
    struct ddp_hdr h;
    struct ddp_term t;
    size_t n;

    /* rping-style Send, 16-octet payload, QN0 MSN1 MO0. */
    n = ddp_encode_untagged(u, sizeof(u), RDMAP_OP_SEND, true, 0, 0, 1, 0);
    ddp_wr64(u + n, 0x00007F1234560000ull);
    ddp_wr32(u + n + 8, 0x00A1B200u);
    ddp_wr32(u + n + 12, 64);
    n += 16;
    check_fpdu(u, n, "0022 4143 00000000 00000000 00000001 00000000 00007F1234560000 00A1B200 "
                     "00000040 612EA717");
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    CHECK_EQ(h.opcode, RDMAP_OP_SEND);
    CHECK_EQ(h.msn, 1);

    /* Send of 'A': ULPDU 19, 3 pad octets. */
    n = ddp_encode_untagged(u, sizeof(u), RDMAP_OP_SEND, true, 0, 0, 1, 0);
    u[n++] = 'A';
    check_fpdu(u, n, "0013 4143 00000000 00000000 00000001 00000000 41 000000 F1967199");
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);

    /* RDMA Write "hello" to STag 0x12345600, TO 0x1000. */
    n = ddp_encode_tagged(u, sizeof(u), RDMAP_OP_WRITE, true, 0x12345600u, 0x1000);
    memcpy(u + n, "hello", 5);
    n += 5;
    check_fpdu(u, n, "0013 C140 12345600 0000000000001000 68656C6C6F 000000 E800BC31");
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    CHECK_EQ(h.stag, 0x12345600u);
    CHECK_EQ(h.to, 0x1000);

    /* Zero-length Write RTR (STag 1, TO 0). */
    n = ddp_encode_tagged(u, sizeof(u), RDMAP_OP_WRITE, true, 1, 0);
    check_fpdu(u, n, "000E C140 00000001 0000000000000000 EBD34C5F");
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);

    /* Zero-length Read RTR: QN1 MSN1, sink 0/0, size 0, source STag 1 TO 0. */
    struct rdmap_rreq rr = {0, 0, 0, 1, 0};
    n = rdmap_encode_read_request(u, sizeof(u), 1, &rr);
    check_fpdu(u, n, "002E 4141 00000000 00000001 00000001 00000000 00000000 0000000000000000 "
                     "00000000 00000001 0000000000000000 BA10E3C9");
    REQUIRE(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    CHECK_EQ(h.rreq.src_stag, 1);
    CHECK_EQ(h.rreq.size, 0);

    /* Zero-length Read Response (sink STag 0, TO 0). */
    n = ddp_encode_tagged(u, sizeof(u), RDMAP_OP_READ_RESP, true, 0, 0);
    check_fpdu(u, n, "000E C142 00000000 0000000000000000 6975D6CA");
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    CHECK_EQ(h.opcode, RDMAP_OP_READ_RESP);
}

/* FPDUs as captured from siw (shared/interop/captures, the rping files). The CRC
 * ones are checked with the bit-wise CRC; all are decoded from offset 2. */
struct capture {
    const char *what;
    const char *hex;
    bool crc;
};

static const struct capture captures[] = {
    {"siw Send (rping info), no CRC",
     "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 56 49 1e 8d f3 70 0e 61 6f 00"
     "00 00 00 40 00 00 00 00", false},
    {"Read Request to siw, no CRC",
     "00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 ab c1 00 00 00 00 00 00 01 00 00"
     "00 00 00 40 0e 61 6f 00 00 00 56 49 1e 8d f3 70 00 00 00 00", false},
    {"siw Read Response, no CRC",
     "00 4e c1 42 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
     "44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
     "64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 00 00 00 00", false},
    {"siw Read Request, CRC",
     "00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 1f 93 e4 00 00 00 7f 8d fc 00 0e 00"
     "00 00 00 40 00 ab c2 00 00 00 00 00 00 02 00 00 0b 47 44 cf", true},
    {"siw Send (zero info), CRC",
     "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00"
     "00 00 00 00 84 60 9a 12", true},
    {"siw Write, CRC",
     "00 4e c1 40 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
     "44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
     "64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 ef b7 64 36", true},
    {"siw Read Response, CRC",
     "00 4e c1 42 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 42 43"
     "44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f 60 61 62 63"
     "64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 9e f3 27 47", true},
    {"siw Send (rping info), CRC",
     "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 55 8b 81 c7 e5 50 4d 5e 20 00"
     "00 00 00 40 d3 27 dc 6b", true},
};

static void test_siw_captures(void)
{
    for (size_t i = 0; i < sizeof(captures) / sizeof(captures[0]); i++) {
        uint8_t f[128];
        size_t n = rp_unhex(captures[i].hex, f, sizeof(f));
        size_t ulen = ddp_rd16(f);
        size_t pad = (4 - ((2 + ulen) % 4)) % 4;
        REQUIRE(n == 2 + ulen + pad + 4);
        if (captures[i].crc) {
            uint32_t c = rp_crc32c(f, 2 + ulen + pad);
            const uint8_t *w = f + 2 + ulen + pad;
            CHECK_EQ(c, (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 |
                            (uint32_t)w[3] << 24);
        }
        struct ddp_hdr h;
        struct ddp_term t;
        size_t need = ddp_hdr_len(f[2], f[3]);
        CHECK(ddp_decode(f + 2, need, ulen, &h, &t) == DDP_OK);
        uint8_t re[20];
        size_t m = ddp_encode(&h, re, sizeof(re));
        CHECK(m > 0 && memcmp(re, f + 2, m) == 0);
    }

    struct ddp_hdr h;
    struct ddp_term t;
    uint8_t f[128];
    /* Spot-check decoded values against the capture annotations. */
    rp_unhex(captures[0].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 34, 34, &h, &t) == DDP_OK);
    CHECK(!h.tagged && h.last && h.opcode == RDMAP_OP_SEND && h.qn == 0 && h.msn == 1 && h.mo == 0);
    CHECK(ddp_rd64(f + 20) == 0x56491e8df370ull);
    CHECK_EQ(ddp_rd32(f + 28), 0x0e616f00u);

    rp_unhex(captures[1].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 46, 46, &h, &t) == DDP_OK);
    CHECK(h.opcode == RDMAP_OP_READ_REQ && h.qn == 1 && h.msn == 1 && h.mo == 0);
    CHECK_EQ(h.rreq.sink_stag, 0x00abc100u);
    CHECK(h.rreq.sink_to == 0x10000);
    CHECK_EQ(h.rreq.size, 64);
    CHECK_EQ(h.rreq.src_stag, 0x0e616f00u);
    CHECK(h.rreq.src_to == 0x56491e8df370ull);

    rp_unhex(captures[3].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 46, 46, &h, &t) == DDP_OK);
    CHECK_EQ(h.rreq.sink_stag, 0x1f93e400u);
    CHECK(h.rreq.sink_to == 0x7f8dfc000e00ull);
    CHECK_EQ(h.rreq.src_stag, 0x00abc200u);
    CHECK(h.rreq.src_to == 0x20000);
    /* Re-encoding the whole Read Request reproduces siw's octets. */
    uint8_t re[46];
    CHECK_EQ(rdmap_encode_read_request(re, sizeof(re), h.msn, &h.rreq), 46);
    CHECK(memcmp(re, f + 2, 46) == 0);

    rp_unhex(captures[2].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 14, 78, &h, &t) == DDP_OK);
    CHECK(h.tagged && h.last && h.opcode == RDMAP_OP_READ_RESP);
    CHECK_EQ(h.stag, 0x00abc100u);
    CHECK(h.to == 0x10000);

    rp_unhex(captures[5].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 14, 78, &h, &t) == DDP_OK);
    CHECK(h.tagged && h.opcode == RDMAP_OP_WRITE && h.stag == 0x00abc100u && h.to == 0x10000);

    rp_unhex(captures[7].hex, f, sizeof(f));
    REQUIRE(ddp_decode(f + 2, 18, 34, &h, &t) == DDP_OK);
    CHECK_EQ(h.msn, 2);
}

/* Builds a valid ULPDU for op (header only plus payload octets). */
static size_t valid_ulpdu(uint8_t op, uint8_t *u, size_t cap)
{
    memset(u, 0, cap);
    struct rdmap_rreq rr = {0x100, 0x2000, 64, 0x300, 0x4000};
    switch (op) {
    case RDMAP_OP_WRITE:
    case RDMAP_OP_READ_RESP:
        return ddp_encode_tagged(u, cap, op, true, 0x1234, 0x5678) + 8;
    case RDMAP_OP_READ_REQ:
        return rdmap_encode_read_request(u, cap, 1, &rr);
    case RDMAP_OP_TERMINATE:
        ddp_encode_untagged(u, cap, op, true, 0, 2, 1, 0);
        ddp_wr32(u + 18, 0x20020000u);
        return 22;
    default:
        return ddp_encode_untagged(u, cap, op, true, 0, 0, 1, 0) + 8;
    }
}

static void test_row3_length(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;

    /* Tagged: 13 is one short of the header; no DDP header can be copied. */
    size_t n = valid_ulpdu(RDMAP_OP_WRITE, u, sizeof(u));
    CHECK(ddp_decode(u, n, 13, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, false, false));
    CHECK(!t.no_reply);
    CHECK(ddp_decode(u, n, 14, &h, &t) == DDP_OK);
    CHECK(ddp_decode(u, n, 0, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, false, false));
    CHECK(ddp_decode(u, n, 1, &h, &t) == DDP_TERM);
    CHECK(ddp_decode(u, n, 65535, &h, &t) == DDP_OK);
    CHECK(ddp_decode(u, n, 65536, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, true, false));

    /* Untagged Send: 17 < 18. */
    n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
    CHECK(ddp_decode(u, n, 17, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, false, false));
    CHECK(ddp_decode(u, 18, 18, &h, &t) == DDP_OK);

    /* Read Request: anything but 46; the DDP header is whole from 18 on. */
    n = valid_ulpdu(RDMAP_OP_READ_REQ, u, sizeof(u));
    CHECK(ddp_decode(u, n, 45, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, true, false));
    CHECK_EQ(h.opcode, RDMAP_OP_READ_REQ);
    CHECK_EQ(h.qn, 1);
    CHECK(ddp_decode(u, n, 18, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, true, false));
    CHECK(ddp_decode(u, n, 17, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, false, false));
    CHECK(ddp_decode(u, sizeof(u), 47, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, true, false));
    CHECK(ddp_decode(u, sizeof(u), 46, &h, &t) == DDP_OK);

    /* Terminate: at least 22; a malformed Terminate is never answered. */
    n = valid_ulpdu(RDMAP_OP_TERMINATE, u, sizeof(u));
    CHECK(ddp_decode(u, n, 21, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, true, false));
    CHECK(t.no_reply);
    CHECK(ddp_decode(u, n, 22, &h, &t) == DDP_OK);
    CHECK(ddp_decode(u, n, 70, &h, &t) == DDP_OK);
    /* With ULPDU_Length 1 the opcode octet is outside the ULPDU. */
    CHECK(ddp_decode(u, n, 1, &h, &t) == DDP_TERM);
    CHECK(!t.no_reply);

    /* Row 3 is checked before the version (row 4). */
    n = valid_ulpdu(RDMAP_OP_WRITE, u, sizeof(u));
    u[0] = 0xC2;
    CHECK(ddp_decode(u, n, 10, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0xFF, false, false));
}

static void test_row4_ddp_version(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    for (uint8_t dv = 0; dv <= 3; dv++) {
        if (dv == 1)
            continue;
        size_t n = valid_ulpdu(RDMAP_OP_WRITE, u, sizeof(u));
        u[0] = (uint8_t)((u[0] & ~3) | dv);
        CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 1, 1, 0x04, true, false));
        CHECK_EQ(h.ddp_ver, dv);

        n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
        u[0] = (uint8_t)((u[0] & ~3) | dv);
        CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 1, 2, 0x06, true, false));

        n = valid_ulpdu(RDMAP_OP_TERMINATE, u, sizeof(u));
        u[0] = (uint8_t)((u[0] & ~3) | dv);
        CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 1, 2, 0x06, true, false));
        CHECK(t.no_reply);
    }
    /* DDP version before RDMAP version and opcode. */
    size_t n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
    u[0] = 0x42;
    u[1] = 0x0C;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x06, true, false));
}

static void test_row5_rdmap_version(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    for (uint8_t rv = 0; rv <= 3; rv++) {
        if (rv == 1)
            continue;
        for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
            size_t n = valid_ulpdu(op, u, sizeof(u));
            u[1] = (uint8_t)((u[1] & 0x3F) | rv << 6);
            CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
            CHECK(term_is(&t, 0, 2, 0x05, true, false));
            CHECK_EQ(h.rdmap_ver, rv);
            CHECK_EQ(t.no_reply, op == RDMAP_OP_TERMINATE);
        }
    }
    /* RDMAP version before the opcode check. */
    size_t n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
    u[1] = 0x0F;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0x05, true, false));
}

static void test_row6_opcode(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    /* 8..15 (RFC 7306 and reserved), both buffer models. */
    for (uint8_t op = 8; op <= 15; op++) {
        memset(u, 0, sizeof(u));
        ddp_encode_untagged(u, sizeof(u), op, true, 0, 0, 1, 0);
        CHECK(ddp_decode(u, 26, 26, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 0, 2, 0x06, true, false));
        CHECK_EQ(h.opcode, op);
        ddp_encode_tagged(u, sizeof(u), op, true, 1, 0);
        CHECK(ddp_decode(u, 14, 14, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 0, 2, 0x06, true, false));
    }
    /* T set on an untagged opcode. */
    for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
        if (op == RDMAP_OP_WRITE || op == RDMAP_OP_READ_RESP)
            continue;
        ddp_encode_tagged(u, sizeof(u), op, true, 1, 0);
        CHECK_EQ(ddp_hdr_len(u[0], u[1]), 14);
        CHECK(ddp_decode(u, 14, 14, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 0, 2, 0x06, true, false));
        CHECK_EQ(t.no_reply, op == RDMAP_OP_TERMINATE);
    }
    /* T clear on Write / Read Response. */
    for (uint8_t op = 0; op <= 2; op += 2) {
        memset(u, 0, sizeof(u));
        ddp_encode_untagged(u, sizeof(u), op, true, 0, 0, 1, 0);
        CHECK(ddp_decode(u, 18, 18, &h, &t) == DDP_TERM);
        CHECK(term_is(&t, 0, 2, 0x06, true, false));
    }
    /* L=0 on Read Request and Terminate. */
    size_t n = valid_ulpdu(RDMAP_OP_READ_REQ, u, sizeof(u));
    u[0] &= (uint8_t)~DDP_CTRL_L;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0x06, true, false));
    n = valid_ulpdu(RDMAP_OP_TERMINATE, u, sizeof(u));
    u[0] &= (uint8_t)~DDP_CTRL_L;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0x06, true, false));
    CHECK(t.no_reply);
    /* L=0 is fine for the others. */
    n = valid_ulpdu(RDMAP_OP_SEND_SE, u, sizeof(u));
    u[0] &= (uint8_t)~DDP_CTRL_L;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    n = valid_ulpdu(RDMAP_OP_WRITE, u, sizeof(u));
    u[0] &= (uint8_t)~DDP_CTRL_L;
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    /* Opcode before QN. */
    ddp_encode_untagged(u, sizeof(u), 9, true, 0, 7, 1, 0);
    CHECK(ddp_decode(u, 26, 26, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 0, 2, 0x06, true, false));
}

static void test_row7_qn(void)
{
    static const uint32_t bad[] = {0, 1, 2, 3, 0xFFFFFFFFu, 0x100};
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    for (uint8_t op = 1; op <= RDMAP_OP_MAX; op++) {
        if (op == RDMAP_OP_READ_RESP)
            continue;
        uint32_t good = op == RDMAP_OP_READ_REQ ? 1 : op == RDMAP_OP_TERMINATE ? 2 : 0;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            size_t n = valid_ulpdu(op, u, sizeof(u));
            ddp_wr32(u + 6, bad[i]);
            enum ddp_result r = ddp_decode(u, n, n, &h, &t);
            if (bad[i] == good) {
                CHECK(r == DDP_OK);
            } else {
                CHECK(r == DDP_TERM);
                CHECK(term_is(&t, 1, 2, 0x01, true, false));
                CHECK_EQ(h.qn, bad[i]);
                CHECK_EQ(t.no_reply, op == RDMAP_OP_TERMINATE);
            }
        }
    }
    /* QN before the Terminate's MSN/MO. */
    size_t n = valid_ulpdu(RDMAP_OP_TERMINATE, u, sizeof(u));
    ddp_wr32(u + 6, 0);
    ddp_wr32(u + 10, 5);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x01, true, false));
}

static void test_single_segment_msn_mo(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    /* Terminate: MSN 1, MO 0. */
    size_t n = valid_ulpdu(RDMAP_OP_TERMINATE, u, sizeof(u));
    ddp_wr32(u + 10, 2);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x03, true, false));
    CHECK(t.no_reply);
    ddp_wr32(u + 10, 0);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x03, true, false));
    ddp_wr32(u + 10, 1);
    ddp_wr32(u + 14, 4);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x04, true, false));
    CHECK(t.no_reply);
    /* Read Request: MO 0; any MSN is left to ddp_check_msn(). */
    n = valid_ulpdu(RDMAP_OP_READ_REQ, u, sizeof(u));
    ddp_wr32(u + 14, 1);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_TERM);
    CHECK(term_is(&t, 1, 2, 0x04, true, false));
    CHECK(!t.no_reply);
    ddp_wr32(u + 14, 0);
    ddp_wr32(u + 10, 0xDEAD);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    /* A Send's MO is stateful: not checked here. */
    n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
    ddp_wr32(u + 14, 0x1000);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
}

static void test_reserved_ignored(void)
{
    uint8_t u[80];
    struct ddp_hdr h;
    struct ddp_term t;
    for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
        size_t n = valid_ulpdu(op, u, sizeof(u));
        u[0] |= DDP_CTRL_RSVD;
        u[1] |= RDMAP_CTRL_RSVD;
        CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
        CHECK_EQ(h.opcode, op);
    }
    /* Octets 4-7 of a plain Send are ignored but kept. */
    size_t n = valid_ulpdu(RDMAP_OP_SEND, u, sizeof(u));
    ddp_wr32(u + 2, 0x55667788u);
    CHECK(ddp_decode(u, n, n, &h, &t) == DDP_OK);
    CHECK_EQ(h.inv_stag, 0x55667788u);
}

/* Every prefix of every valid ULPDU: short supplies are DDP_SHORT, never an
 * over-read; a ULPDU that is itself that short is a row-3 Terminate. */
static void test_truncation(void)
{
    for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
        uint8_t u[80];
        size_t full = valid_ulpdu(op, u, sizeof(u));
        size_t need = ddp_hdr_len(u[0], u[1]);
        for (size_t avail = 0; avail <= full; avail++) {
            struct ddp_hdr h;
            struct ddp_term t;
            enum ddp_result r = decode_exact(u, avail, full, &h, &t);
            CHECK(r == (avail < 2 || avail < need ? DDP_SHORT : DDP_OK));

            r = decode_exact(u, avail, avail, &h, &t);
            bool ok_len = avail >= need && (op != RDMAP_OP_READ_REQ || avail == 46);
            if (avail < 2)
                CHECK(r == DDP_SHORT);
            else if (!ok_len)
                CHECK(r == DDP_TERM && t.layer == 0 && t.etype == 2 && t.code == 0xFF);
            else
                CHECK(r == DDP_OK);

            /* Raw pieces at every length. */
            uint8_t *c = malloc(avail ? avail : 1);
            memcpy(c, u, avail);
            struct ddp_hdr ph;
            bool pr = ddp_parse(c, avail, &ph);
            CHECK_EQ(pr, avail >= ((u[0] & DDP_CTRL_T) ? 14u : 18u));
            struct rdmap_rreq rr;
            CHECK_EQ(rdmap_rreq_decode(c, avail, &rr), avail >= 28);
            free(c);
        }
    }
}

static void test_term_set_figure10(void)
{
    struct ddp_term t;
    ddp_term_set(&t, 0, 0, 0xFF, true);
    CHECK(term_is(&t, 0, 0, 0xFF, false, false));
    ddp_term_set(&t, 0, 1, 0x00, true);
    CHECK(term_is(&t, 0, 1, 0x00, true, true));
    ddp_term_set(&t, 0, 1, 0x09, false); /* Send with Invalidate offender */
    CHECK(term_is(&t, 0, 1, 0x09, true, false));
    ddp_term_set(&t, 0, 2, 0x07, true);
    CHECK(term_is(&t, 0, 2, 0x07, true, false));
    ddp_term_set(&t, 1, 0, 0x00, false);
    CHECK(term_is(&t, 1, 0, 0x00, true, false));
    ddp_term_set(&t, 1, 2, 0x02, false);
    CHECK(term_is(&t, 1, 2, 0x02, true, false));
    ddp_term_set(&t, 2, 0, 0x02, true);
    CHECK(term_is(&t, 2, 0, 0x02, false, false));
    CHECK(!t.no_reply);
}

static void test_msn(void)
{
    struct ddp_term t;
    memset(&t, 0, sizeof(t));
    CHECK(ddp_check_msn(1, 1, &t));
    CHECK(!ddp_check_msn(1, 2, &t));
    CHECK(term_is(&t, 1, 2, 0x03, true, false));
    memset(&t, 0, sizeof(t));
    CHECK(!ddp_check_msn(1, 0, &t));
    CHECK(term_is(&t, 1, 2, 0x03, true, false));
    /* Wrap: 0xFFFFFFFF, then 0, then 1. */
    uint32_t exp = 0xFFFFFFFFu;
    CHECK(ddp_check_msn(exp, 0xFFFFFFFFu, &t));
    exp = ddp_msn_next(exp);
    CHECK_EQ(exp, 0);
    CHECK(!ddp_check_msn(exp, 0xFFFFFFFFu, &t));
    CHECK(!ddp_check_msn(exp, 1, &t));
    CHECK(ddp_check_msn(exp, 0, &t));
    exp = ddp_msn_next(exp);
    CHECK(ddp_check_msn(exp, 1, &t));
}

static void test_mo(void)
{
    struct ddp_term t;
    CHECK(ddp_check_mo(0, 100, 0, 100, &t));
    CHECK(ddp_check_mo(0, 0, 0, 0, &t)); /* zero-length Send into a 0-octet buffer */
    CHECK(ddp_check_mo(100, 0, 100, 100, &t));
    CHECK(ddp_check_mo(50, 50, 50, 100, &t));
    CHECK(!ddp_check_mo(50, 51, 50, 100, &t));
    CHECK(term_is(&t, 1, 2, 0x05, true, false));
    CHECK(!ddp_check_mo(40, 10, 50, 100, &t));
    CHECK(term_is(&t, 1, 2, 0x04, true, false));
    CHECK(!ddp_check_mo(60, 10, 50, 100, &t));
    CHECK(term_is(&t, 1, 2, 0x04, true, false));
    /* MO beyond the buffer but where the message stands: too long. */
    CHECK(!ddp_check_mo(200, 0, 200, 100, &t));
    CHECK(term_is(&t, 1, 2, 0x05, true, false));
    /* 32/64-bit edges: no overflow in mo + seg_len. */
    CHECK(ddp_check_mo(0xFFFFFFFFu, 1, 0xFFFFFFFFull, 0x100000000ull, &t));
    CHECK(!ddp_check_mo(0xFFFFFFFFu, 2, 0xFFFFFFFFull, 0x100000000ull, &t));
    CHECK(term_is(&t, 1, 2, 0x05, true, false));
    CHECK(!ddp_check_mo(0xFFFFFFFFu, UINT64_MAX, 0xFFFFFFFFull, UINT64_MAX, &t));
    CHECK(ddp_check_mo(0xFFFFFFFFu, UINT64_MAX - 0xFFFFFFFFull, 0xFFFFFFFFull, UINT64_MAX, &t));
    /* A message past 4 GiB cannot be addressed by MO. */
    CHECK(!ddp_check_mo(0, 1, 0x100000000ull, UINT64_MAX, &t));
    CHECK(term_is(&t, 1, 2, 0x04, true, false));
}

static void test_range_and_wrap(void)
{
    /* Plain region 0x1000..0x10FF. */
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x1000, 0x100), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x1000, 0x101), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x0FFF, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x10FF, 1), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x1100, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x2000, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0x1100, 0), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0x1000, 0x100, 0, 0), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0x1000, 0, 0x1000, 1), DDP_STAG_BOUNDS);
    /* Top of the 64-bit space: the last octet may be 2^64-1. */
    const uint64_t M = UINT64_MAX;
    CHECK_EQ(ddp_check_range(M - 15, 16, M - 15, 16), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(M - 15, 16, M, 1), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(M - 15, 16, M, 2), DDP_STAG_WRAP);
    CHECK_EQ(ddp_check_range(M - 15, 16, M - 15, 17), DDP_STAG_WRAP);
    CHECK_EQ(ddp_check_range(M - 15, 16, M - 15, M), DDP_STAG_WRAP);
    CHECK_EQ(ddp_check_range(0, M, 0, M), DDP_STAG_OK);
    /* Last octet exactly 2^64-1: no wrap, but past a region that ends at
     * 2^64-2. One more octet and it wraps. */
    CHECK_EQ(ddp_check_range(0, M, 1, M), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0, M, 2, M), DDP_STAG_WRAP);
    CHECK_EQ(ddp_check_range(0, M, 1, M - 1), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0, M, 0x7FFFFFFFFFFFFFFFull, 0x8000000000000000ull), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(0, M, 0x8000000000000000ull, 0x8000000000000000ull), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0, M, 0x8000000000000001ull, 0x8000000000000000ull), DDP_STAG_WRAP);
    CHECK_EQ(ddp_check_range(0, M, M, M), DDP_STAG_WRAP);
    /* A bogus region whose end would overflow stays arithmetic-safe. */
    CHECK_EQ(ddp_check_range(M, 100, M, 1), DDP_STAG_OK);
    CHECK_EQ(ddp_check_range(M, 100, 0, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0, 10, 11, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0, 10, 10, 1), DDP_STAG_BOUNDS);
    CHECK_EQ(ddp_check_range(0, 10, 9, 1), DDP_STAG_OK);
}

static void test_stag_faults(void)
{
    struct ddp_term t;
    memset(&t, 0x5A, sizeof(t));
    CHECK(!ddp_term_for_write(DDP_STAG_OK, &t));
    CHECK(!ddp_term_for_read_source(DDP_STAG_OK, &t));
    CHECK_EQ(t.layer, 0x5A); /* untouched */

    /* Write target (rows 12-16). */
    CHECK(ddp_term_for_write(DDP_STAG_INVALID, &t) && term_is(&t, 1, 1, 0x00, true, false));
    CHECK(ddp_term_for_write(DDP_STAG_PD, &t) && term_is(&t, 1, 1, 0x02, true, false));
    CHECK(ddp_term_for_write(DDP_STAG_ACCESS, &t) && term_is(&t, 0, 1, 0x02, true, false));
    CHECK(ddp_term_for_write(DDP_STAG_BOUNDS, &t) && term_is(&t, 1, 1, 0x01, true, false));
    CHECK(ddp_term_for_write(DDP_STAG_WRAP, &t) && term_is(&t, 1, 1, 0x03, true, false));

    /* Read Request source (row 19): M+D+R. */
    CHECK(ddp_term_for_read_source(DDP_STAG_INVALID, &t) && term_is(&t, 0, 1, 0x00, true, true));
    CHECK(ddp_term_for_read_source(DDP_STAG_PD, &t) && term_is(&t, 0, 1, 0x03, true, true));
    CHECK(ddp_term_for_read_source(DDP_STAG_ACCESS, &t) && term_is(&t, 0, 1, 0x02, true, true));
    CHECK(ddp_term_for_read_source(DDP_STAG_BOUNDS, &t) && term_is(&t, 0, 1, 0x01, true, true));
    CHECK(ddp_term_for_read_source(DDP_STAG_WRAP, &t) && term_is(&t, 0, 1, 0x04, true, true));
    CHECK(!t.no_reply);

    /* Range result straight into the mapping. */
    CHECK(ddp_term_for_write(ddp_check_range(0x1000, 16, UINT64_MAX, 2), &t));
    CHECK(term_is(&t, 1, 1, 0x03, true, false));
    CHECK(ddp_term_for_read_source(ddp_check_range(0x1000, 16, 0x1008, 9), &t));
    CHECK(term_is(&t, 0, 1, 0x01, true, true));
}

static void test_tagged_cont(void)
{
    struct ddp_term t;
    CHECK(ddp_check_tagged_cont(0xAB, 0x2000, 0xAB, 0x2000, &t));
    CHECK(!ddp_check_tagged_cont(0xAB, 0x2000, 0xAC, 0x2000, &t));
    CHECK(term_is(&t, 1, 1, 0x00, true, false));
    CHECK(!ddp_check_tagged_cont(0xAB, 0x2000, 0xAB, 0x2001, &t));
    CHECK(term_is(&t, 1, 1, 0x01, true, false));
    /* STag is checked first. */
    CHECK(!ddp_check_tagged_cont(0xAB, 0x2000, 0xAC, 0x2001, &t));
    CHECK(term_is(&t, 1, 1, 0x00, true, false));
}

int main(void)
{
    RUN(test_constants);
    RUN(test_hdr_len);
    RUN(test_ctrl_pairs);
    RUN(test_roundtrip_all_opcodes);
    RUN(test_encode_cap);
    RUN(test_crc_helper);
    RUN(test_vectors_43);
    RUN(test_siw_captures);
    RUN(test_row3_length);
    RUN(test_row4_ddp_version);
    RUN(test_row5_rdmap_version);
    RUN(test_row6_opcode);
    RUN(test_row7_qn);
    RUN(test_single_segment_msn_mo);
    RUN(test_reserved_ignored);
    RUN(test_truncation);
    RUN(test_term_set_figure10);
    RUN(test_msn);
    RUN(test_mo);
    RUN(test_range_and_wrap);
    RUN(test_stag_faults);
    RUN(test_tagged_cont);
    return tl_finish();
}
