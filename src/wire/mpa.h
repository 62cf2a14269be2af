/*
 * mpa.h - sans-IO MPA: the startup frames (RFC 5044 section 7 + RFC 6581) and
 * FPDU framing (length, pad, CRC32c). No sockets, clocks or allocation: bytes
 * in, bytes and decisions out. Layouts: RFC 5044, RFC 6581.
 */
#ifndef NDK_WIRE_MPA_H
#define NDK_WIRE_MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MPA_KEY_LEN 16
#define MPA_HDR_LEN 20          /* key + flags + rev + PD_Length */
#define MPA_PD_MAX 512          /* RFC limit on PD_Length */
#define MPA_ENH_LEN 4           /* the RFC 6581 IRD/ORD word */
#define MPA_FRAME_MAX (MPA_HDR_LEN + MPA_PD_MAX)
#define MPA_IRD_ORD_MASK 0x3FFF /* 0x3FFF = "no automatic negotiation" */

#define MPA_FLAG_M 0x80 /* markers wanted in the peer's TX */
#define MPA_FLAG_C 0x40 /* CRC */
#define MPA_FLAG_R 0x20 /* reject (Reply only) */
#define MPA_FLAG_S 0x10 /* RFC 6581 enhanced: PD starts with the IRD/ORD word */

/* RTR types (RFC 6581), as a bit set. */
#define MPA_RTR_SEND 0x1  /* B: zero-length Send */
#define MPA_RTR_WRITE 0x2 /* C: zero-length RDMA Write */
#define MPA_RTR_READ 0x4  /* D: zero-length RDMA Read */

/* One decoded (or to-be-encoded) Request or Reply. */
struct mpa_frame {
    bool reply;          /* key "MPA ID Rep Frame" (else "MPA ID Req Frame") */
    bool markers;        /* M */
    bool crc;            /* C */
    bool reject;         /* R */
    bool enhanced;       /* S: the IRD/ORD word is present */
    uint8_t rev;         /* 1 or 2 */
    /* The RFC 6581 word; meaningful only when enhanced. */
    bool p2p;            /* A */
    uint8_t rtr;         /* MPA_RTR_* offered (Request) or chosen (Reply); 0 when !p2p */
    uint16_t ird, ord;   /* 14-bit values */
    /* ULP private data: PD_Length minus the word when enhanced. */
    const uint8_t *pd;
    uint16_t pd_len;
};

/* Whether a and b say the same: every field, and the private data's
 * bytes (wherever each keeps them). */
bool mpa_frame_same(const struct mpa_frame *a, const struct mpa_frame *b);
/* Bytes the encoded frame takes: 20 + (enhanced ? 4 : 0) + pd_len. */
size_t mpa_frame_size(const struct mpa_frame *f);
/* Encodes f into out. Returns the size, or 0 when cap is too small or f is
 * not encodable (PD_Length over 512, rev not 1/2, enhanced with rev 1, IRD or
 * ORD over 0x3FFF, rtr bits without p2p). */
size_t mpa_frame_encode(const struct mpa_frame *f, uint8_t *out, size_t cap);

enum mpa_result {
    MPA_NEED_MORE = 0,   /* feed more bytes */
    MPA_DONE = 1,        /* a whole frame was read */
    MPA_ERR_KEY = -1,    /* wrong key for what was expected */
    MPA_ERR_REV = -2,    /* Rev 0 or > 2 */
    MPA_ERR_PD_LEN = -3, /* PD_Length over the reader's limit (at most 512) */
    MPA_ERR_ENH = -4,    /* S=1 with PD_Length < 4, or S=1 with Rev 1 */
};

/* Incremental reader for one startup frame: takes bytes in any split and
 * never consumes a byte past the end of the frame, so the caller keeps the
 * bytes that follow it (FPDUs may follow a Reply in the same segment). */
struct mpa_reader {
    uint8_t buf[MPA_FRAME_MAX];
    size_t have;
    bool expect_reply;
    uint16_t pd_limit;
};
void mpa_reader_init(struct mpa_reader *r, bool expect_reply, uint16_t pd_limit);
/* Feeds up to len bytes; *consumed says how many were used. On MPA_DONE, *out
 * describes the frame (out->pd points into r->buf, valid until the reader is
 * re-initialised). Errors are final: later calls return the same error. */
enum mpa_result mpa_reader_feed(struct mpa_reader *r, const uint8_t *data, size_t len,
                                size_t *consumed, struct mpa_frame *out);
/* What an error result means, in a few words (for logs). */
const char *mpa_result_describe(enum mpa_result r);

/*
 * Responder policy (RFC 6581 section 9.1): given the Request,
 * pick the RTR type for the Reply. p2p Request -> prefer Write if offered,
 * then Read (only if read_rtr_ok), else Write anyway; never Send.
 * Returns 0 for a client/server Request.
 */
uint8_t mpa_choose_rtr(const struct mpa_frame *request, bool read_rtr_ok);

/* ---- FPDU framing (RFC 5044) ---- */

/* Pad octets after a ULPDU of this length: (4 - (2 + len) % 4) % 4. */
static inline size_t mpa_pad_len(size_t ulpdu_len) { return (4 - ((2 + ulpdu_len) & 3)) & 3; }
/* Whole FPDU on the wire: 2 + ULPDU + pad + 4 (no markers). */
static inline size_t mpa_fpdu_len(size_t ulpdu_len) { return 2 + ulpdu_len + mpa_pad_len(ulpdu_len) + 4; }
/* Largest ULPDU for a TCP send MSS (no markers): EMSS - (6 + EMSS % 4). */
size_t mpa_mulpdu(size_t emss);

/* Builds a whole FPDU from a contiguous ULPDU (DDP+RDMAP header + payload):
 * length, ULPDU, zero pad, CRC32c (or 0 when !crc). Returns bytes written or
 * 0 if cap is too small or ulpdu_len > 65535. For small control FPDUs
 * (RTR, Terminate); the data path frames scatter-gather lists itself. */
size_t mpa_fpdu_build(const uint8_t *ulpdu, size_t ulpdu_len, bool crc, uint8_t *out, size_t cap);

/* The 4 octets after the pad: CRC over [length .. last pad octet] in wire
 * order (LSB first), from a running register the caller fed. */
void mpa_crc_store(uint32_t reg, uint8_t out[4]);

enum mpa_fpdu_result {
    MPA_FPDU_NEED_MORE = 0,
    MPA_FPDU_OK = 1,
    MPA_FPDU_ERR_CRC = -1,    /* CRC on and the received CRC does not match */
    MPA_FPDU_ERR_LENGTH = -2, /* ULPDU_Length below min_ulpdu */
};
/* Looks at a contiguous buffer that starts at an FPDU boundary. On
 * MPA_FPDU_OK: *fpdu_len = octets the whole FPDU takes, *ulpdu / *ulpdu_len =
 * the ULPDU inside it. With crc, the CRC is verified. Needs the whole FPDU in
 * the buffer (fine for control FPDUs; the data path parses headers only). */
enum mpa_fpdu_result mpa_fpdu_peek(const uint8_t *buf, size_t len, bool crc, size_t min_ulpdu,
                                   size_t *fpdu_len, const uint8_t **ulpdu, size_t *ulpdu_len);

/* ---- control FPDUs of connection set-up (RFC 6581) ---- */

/* Zero-length RDMA Write RTR: STag 1, TO 0. Returns the FPDU size (20). */
size_t mpa_build_write_rtr(bool crc, uint8_t out[20]);
/* Zero-length RDMA Read RTR: QN 1, MSN 1, sink STag 0 / TO 0, size 0,
 * source STag 1 / TO 0. Returns the FPDU size (52). */
size_t mpa_build_read_rtr(bool crc, uint8_t out[52]);
/* Zero-length Read Response echoing the sink STag/TO. Returns 20. */
size_t mpa_build_read_response0(uint32_t sink_stag, uint64_t sink_to, bool crc, uint8_t out[20]);
/* Terminate with only the control word (layer, etype, code; no headers),
 * QN 2, MSN 1, MO 0: used for LLP errors (2,0,x). Returns 28. */
size_t mpa_build_term_simple(uint8_t layer, uint8_t etype, uint8_t code, bool crc, uint8_t out[28]);

/* What the first FPDU a responder receives turned out to be. */
enum mpa_rtr_kind {
    MPA_RTR_KIND_WRITE0,  /* zero-length tagged RDMA Write: consume it */
    MPA_RTR_KIND_READ0,   /* zero-length Read Request (QN 1): answer with a zero-length
                             Read Response to the given sink STag/TO */
    MPA_RTR_KIND_SEND0,   /* zero-length Send (QN 0): consumes a receive (data path) */
    MPA_RTR_KIND_OTHER,   /* any other FPDU: client/server model, the ULP's first message */
};
struct mpa_rtr_info {
    enum mpa_rtr_kind kind;
    uint32_t msn;         /* READ0/SEND0: the MSN carried */
    uint32_t sink_stag;   /* READ0 */
    uint64_t sink_to;     /* READ0 */
};
/* Classifies a received ULPDU (from mpa_fpdu_peek). */
void mpa_classify_first_fpdu(const uint8_t *ulpdu, size_t ulpdu_len, struct mpa_rtr_info *info);

#endif
