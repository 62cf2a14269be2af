/* CRC32c (the MPA FPDU CRC of RFC 5044): known-answer vectors and the CRCs
 * of FPDUs recorded against Linux siw, through every implementation path. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "rawframe.h"
#include "testlib.h"
#include "wire/crc32c.h"

/* Test-only entry points of crc32c.c (not part of the header's API). */
extern uint32_t crc32c_update_portable(uint32_t reg, const void *data, size_t len);
extern uint32_t crc32c_update_bitwise(uint32_t reg, const void *data, size_t len);
extern int crc32c_hw_active(void);

typedef uint32_t (*update_fn)(uint32_t, const void *, size_t);
static const struct {
    const char *name;
    update_fn fn;
} paths[] = {
    {"dispatch", crc32c_update},
    {"portable", crc32c_update_portable},
    {"bitwise", crc32c_update_bitwise},
};
#define NPATHS (sizeof(paths) / sizeof(paths[0]))

static uint32_t wire_le(const char *wire)
{
    uint8_t w[4];
    rp_unhex(wire, w, 4);
    return (uint32_t)w[0] | (uint32_t)w[1] << 8 | (uint32_t)w[2] << 16 | (uint32_t)w[3] << 24;
}

static uint32_t run(update_fn fn, const void *d, size_t n)
{
    return crc32c_final(fn(crc32c_init(), d, n));
}

/* Checks one vector through every path, whole and in every 2- and 3-way split. */
static void check_vector(const uint8_t *d, size_t n, uint32_t expect)
{
    for (size_t p = 0; p < NPATHS; p++) {
        update_fn fn = paths[p].fn;
        uint32_t got = run(fn, d, n);
        if (got != expect)
            fprintf(stderr, "  path %s len %zu\n", paths[p].name, n);
        CHECK_EQ(got, expect);
        for (size_t i = 0; i <= n; i++) {
            uint32_t r = fn(crc32c_init(), d, i);
            r = fn(r, d + i, n - i);
            CHECK_EQ(crc32c_final(r), expect);
            for (size_t j = i; j <= n; j += 5) {
                uint32_t r3 = fn(crc32c_init(), d, i);
                r3 = fn(r3, d + i, j - i);
                r3 = fn(r3, d + j, n - j);
                CHECK_EQ(crc32c_final(r3), expect);
            }
        }
    }
    CHECK_EQ(crc32c(d, n), expect);
}

static void check_hex_vector(const char *hex, size_t expect_len, const char *wire)
{
    uint8_t buf[256];
    size_t n = rp_unhex(hex, buf, sizeof(buf));
    REQUIRE(n <= sizeof(buf));
    CHECK_EQ(n, expect_len);
    check_vector(buf, n, wire_le(wire));
}

static void test_check_value(void)
{
    const char *s = "123456789";
    CHECK_EQ(crc32c(s, 9), 0xE3069283u);
    check_vector((const uint8_t *)s, 9, 0xE3069283u);
    /* Wire order is LSB first: 83 92 06 E3. */
    CHECK_EQ(wire_le("83 92 06 E3"), 0xE3069283u);
    fprintf(stderr, "  crc32c_update uses %s\n",
            crc32c_hw_active() ? "SSE4.2" : "the portable tables");
}

static void test_generic_vectors(void)
{
    uint8_t b[32];
    memset(b, 0x00, 32);
    check_vector(b, 32, wire_le("AA 36 91 8A"));
    CHECK_EQ(crc32c(b, 32), 0x8A9136AAu);
    memset(b, 0xFF, 32);
    check_vector(b, 32, wire_le("43 AB A8 62"));
    CHECK_EQ(crc32c(b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    check_vector(b, 32, wire_le("4E 79 DD 46"));
    CHECK_EQ(crc32c(b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    check_vector(b, 32, wire_le("5C DB 3F 11"));
    CHECK_EQ(crc32c(b, 32), 0x113FDB5Cu);
}

static void test_rfc5044_marker_examples(void)
{
    /* Fig. 5: the marker at stream start is covered by the FPDU's CRC. */
    check_hex_vector("00000000 002A4143 00000000 00000000 00000001 00000000"
                     "000000000000000000000000000000000000000000000000",
                     48, "52 23 99 83");
    /* The same FPDU without the marker. */
    check_hex_vector("002A4143 00000000 00000000 00000001 00000000"
                     "000000000000000000000000000000000000000000000000",
                     44, "B7 24 3E C3");
    CHECK_EQ(wire_le("B7 24 3E C3"), 0xC33E24B7u);
    /* Fig. 6: a marker inside the FPDU, after the 20 header octets. */
    check_hex_vector("002A4143 00000000 00000000 00000002 00000000 00000014"
                     "000000000000000000000000000000000000000000000000",
                     48, "84 92 58 98");
}

static void test_iwarp_fpdu_vectors(void)
{
    check_hex_vector("0022 4143 00000000 00000000 00000001 00000000 00007F1234560000 00A1B200 "
                     "00000040",
                     36, "61 2E A7 17");
    check_hex_vector("0013 4143 00000000 00000000 00000001 00000000 41 000000", 24,
                     "F1 96 71 99");
    check_hex_vector("0013 C140 12345600 0000000000001000 68656C6C6F 000000", 24, "E8 00 BC 31");
    check_hex_vector("000E C140 00000001 0000000000000000", 16, "EB D3 4C 5F");
    check_hex_vector("002E 4141 00000000 00000001 00000001 00000000 00000000 0000000000000000 "
                     "00000000 00000001 0000000000000000",
                     48, "BA 10 E3 C9");
    check_hex_vector("000E C142 00000000 0000000000000000", 16, "69 75 D6 CA");
    check_hex_vector("0016 4147 00000000 00000002 00000001 00000000 20020000", 24, "7F E4 25 85");
    check_hex_vector("0026 4147 00000000 00000002 00000001 00000000 1100C000 004E C140 DEADBE00 "
                     "0000000000001000",
                     40, "F5 1F 8C 94");
}

static void test_siw_capture_crcs(void)
{
    for (size_t i = 0; i < RP_SIW_CRC_FPDUS; i++) {
        uint8_t b[128];
        size_t n = rp_unhex(rp_siw_crc_fpdus[i], b, sizeof(b));
        REQUIRE(n <= sizeof(b) && n >= 8 && n % 4 == 0);
        size_t body = n - 4;
        uint32_t field = (uint32_t)b[body] | (uint32_t)b[body + 1] << 8 |
                         (uint32_t)b[body + 2] << 16 | (uint32_t)b[body + 3] << 24;
        for (size_t p = 0; p < NPATHS; p++)
            CHECK_EQ(run(paths[p].fn, b, body), field);
        /* A receiver's shortcut: data plus the CRC octets leave CRC32c's fixed
         * residue in the un-inverted register. */
        CHECK_EQ(crc32c_update(crc32c_init(), b, n), 0xB798B438u);
        CHECK_EQ(crc32c_update_portable(crc32c_init(), b, n), 0xB798B438u);
    }
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint8_t rnd8(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint8_t)(rng_state >> 24);
}

/* The hardware path aligns to 8 octets and the table path works in blocks
 * of 8, so every start offset and tail length gets exercised. */
static void test_paths_agree(void)
{
    static uint8_t buf[70000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = rnd8();
    for (size_t off = 0; off < 16; off++) {
        for (size_t n = 0; n <= 300; n++) {
            uint32_t a = run(crc32c_update, buf + off, n);
            uint32_t b = run(crc32c_update_portable, buf + off, n);
            uint32_t c = run(crc32c_update_bitwise, buf + off, n);
            CHECK_EQ(a, c);
            CHECK_EQ(b, c);
        }
    }
    for (size_t n = 1000; n <= sizeof(buf) - 16; n += 7919) {
        uint32_t a = run(crc32c_update, buf + 3, n);
        CHECK_EQ(a, run(crc32c_update_portable, buf + 3, n));
        CHECK_EQ(a, run(crc32c_update_bitwise, buf + 3, n));
    }
    /* A register carried across pieces of odd sizes, as the data path feeds
     * header, SGEs and pad. */
    uint32_t whole = run(crc32c_update_bitwise, buf, 65536);
    uint32_t reg = crc32c_init(), preg = crc32c_init();
    size_t pos = 0, step = 1;
    while (pos < 65536) {
        size_t n = step < 65536 - pos ? step : 65536 - pos;
        reg = crc32c_update(reg, buf + pos, n);
        preg = crc32c_update_portable(preg, buf + pos, n);
        pos += n;
        step = step * 3 + 1;
        if (step > 9000)
            step = 5;
    }
    CHECK_EQ(crc32c_final(reg), whole);
    CHECK_EQ(crc32c_final(preg), whole);
}

static void test_empty(void)
{
    CHECK_EQ(crc32c(NULL, 0), 0u);
    for (size_t p = 0; p < NPATHS; p++) {
        CHECK_EQ(paths[p].fn(0x12345678u, NULL, 0), 0x12345678u);
        CHECK_EQ(paths[p].fn(crc32c_init(), "", 0), crc32c_init());
    }
    CHECK_EQ(crc32c_final(crc32c_init()), 0u);
}

int main(void)
{
    RUN(test_check_value);
    RUN(test_generic_vectors);
    RUN(test_rfc5044_marker_examples);
    RUN(test_iwarp_fpdu_vectors);
    RUN(test_siw_capture_crcs);
    RUN(test_paths_agree);
    RUN(test_empty);
    return tl_finish();
}
