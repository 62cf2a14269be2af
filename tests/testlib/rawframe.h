/*
 * rawframe.h - octets as the wire carries them, built by hand: byte order,
 * the bit-wise CRC32c, hex in and out, MPA startup frames and FPDUs.
 *
 * The layouts are written from RFC 5044 (MPA), RFC 6581 (its enhanced
 * startup) and RFC 5041/5040 (DDP, RDMAP), not from libndk's encoder in
 * src/wire, so that a unit test comparing the two, or a raw peer talking to
 * libndk, cannot hide an encoder bug behind a matching decoder bug. Needs
 * nothing but libc: the unit tests link it without the provider.
 */
#ifndef NDK_TESTS_RAWFRAME_H
#define NDK_TESTS_RAWFRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ======================================================================== */
/* Byte helpers, CRC32c and a seeded PRNG                                    */
/* ======================================================================== */

void rp_put16(uint8_t *p, uint16_t v);

void rp_put32(uint8_t *p, uint32_t v);

uint16_t rp_get16(const uint8_t *p);

uint32_t rp_get32(const uint8_t *p);

/* Bit-wise CRC32c (reflected polynomial 0x82F63B78). Deliberately the slow
 * textbook form: the tests must not share a table or SSE path with the code
 * under test. */
uint32_t rp_crc32c(const uint8_t *p, size_t n);

/* splitmix64: small, seedable, and the same sequence on every platform, so
 * a printed seed reproduces a failing garbage case exactly. */
uint64_t rp_rand(uint64_t *state);

/* Prints what and the octets, 16 a line, to stderr. */
void rp_hexdump(const char *what, const uint8_t *p, size_t n);

/* Hex digits (anything else, such as spaces, ignored) to octets; returns
 * how many the string holds, of which the first cap are stored. */
size_t rp_unhex(const char *s, uint8_t *out, size_t cap);

/* ======================================================================== */
/* MPA startup frames (RFC 5044 Request/Reply, RFC 6581 word)              */
/* ======================================================================== */

#define RP_KEY_REQ "MPA ID Req Frame"
#define RP_KEY_REP "MPA ID Rep Frame"
#define RP_KEY_LEN 16
#define RP_HDR_LEN 20

#define RP_F_M 0x80 /* markers wanted */
#define RP_F_C 0x40 /* CRC */
#define RP_F_R 0x20 /* reject */
#define RP_F_S 0x10 /* RFC 6581 word present */

/* RFC 6581 word bits: A, B in the IRD half, C, D in the ORD half. */
#define RP_W0_A 0x8000u /* peer-to-peer */
#define RP_W0_B 0x4000u /* Send RTR */
#define RP_W1_C 0x8000u /* Write RTR */
#define RP_W1_D 0x4000u /* Read RTR */
#define RP_IRD_ORD_MASK 0x3FFFu

/* The Request Linux siw sends as an rping client (IRD 1, ORD 1, no ULP
 * data): captures/guest-to-host-mpa-request.txt, byte for byte. */
extern const uint8_t rp_siw_request[24];

/* FPDUs with CRC on, as Linux siw sent them in the rping-crc captures (both
 * directions), in hex; the trailing 4 octets are the CRC field as seen on
 * the wire. None is an RTR. */
#define RP_SIW_CRC_FPDUS 12
extern const char *const rp_siw_crc_fpdus[RP_SIW_CRC_FPDUS];

/*
 * Writes a startup frame: key, flags octet, Rev, PD_Length = pd_length (which
 * the caller may set to lie about the data), then the private data octets
 * (pd_len of them, copied from pd). Returns the octets written.
 */
size_t rp_frame_raw(uint8_t *out, const char *key, uint8_t flags, uint8_t rev,
                    uint16_t pd_length, const void *pd, size_t pd_len);

/* A well-formed enhanced (S=1, Rev 2) frame: the word, then ULP data. */
size_t rp_frame_v2(uint8_t *out, const char *key, uint8_t flags, uint16_t w0,
                   uint16_t w1, const void *ulp, size_t ulp_len);

/* ======================================================================== */
/* FPDUs the raw peer sends or expects (RFC 5044 framing, RFC 5041/5040)    */
/* ======================================================================== */

/* Frames a ULPDU: length, ULPDU, zero pad, CRC (0 when crc is off). */
size_t rp_fpdu(uint8_t *out, const uint8_t *ulpdu, size_t ulpdu_len, bool crc);

/* Zero-length RDMA Write, STag 1, TO 0: the Write RTR siw sends
 * (00 0E C1 40 00000001 0000000000000000 + CRC). 20 octets. */
size_t rp_write_rtr(uint8_t out[20], bool crc);

/* Untagged Send (opcode 3), QN 0, the given MSN, MO 0, with payload. */
size_t rp_send_fpdu(uint8_t *out, uint32_t msn, const void *payload, size_t len,
                    bool crc);

#endif
