/*
 * ddp.h - sans-IO DDP (RFC 5041) + RDMAP (RFC 5040) headers: encode, decode
 * and the checks of docs/rules.md (R1-R24), each failure mapped to the exact Terminate
 * (layer, etype, code) to send. Everything works on ULPDU bytes, i.e. the
 * DDP segment starting at the DDP control octet (after MPA's 2-octet
 * ULPDU_Length). No I/O, no allocation. Layouts: RFC 5041, RFC 5040 section 4.
 *
 * Receive-path use (qp_rx.c):
 *   1. read ULPDU_Length (2) + the 2 control octets;
 *   2. n = ddp_hdr_len(ctrl0, ctrl1); read min(n, ULPDU_Length) octets in all
 *      (never past the ULPDU, so a too-short ULPDU is reported, not over-read);
 *   3. ddp_decode(): DDP_OK -> place the payload after validating the
 *      receiver-state checks below (MSN, MO, STag/range); DDP_TERM -> send the
 *      Terminate it describes (term_encode() in term.h), unless term.no_reply.
 *      A received Terminate is checked here only up to its 22-octet minimum:
 *      keep its whole ULPDU (only up to TERM_LEN_MAX = 70 octets can be
 *      well-formed) and hand it to term_decode().
 */
#ifndef NDK_WIRE_DDP_H
#define NDK_WIRE_DDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- control octets (RFC 5041; RFC 5040 section 4.1) ---- */
#define DDP_CTRL_T 0x80        /* tagged buffer model */
#define DDP_CTRL_L 0x40        /* last segment of the DDP message */
#define DDP_CTRL_RSVD 0x3C     /* sent as 0, ignored on receipt */
#define DDP_CTRL_DV_MASK 0x03
#define DDP_VERSION 1
#define RDMAP_CTRL_RV_MASK 0xC0
#define RDMAP_CTRL_RV_SHIFT 6
#define RDMAP_CTRL_RSVD 0x30   /* sent as 0, ignored on receipt */
#define RDMAP_CTRL_OP_MASK 0x0F
#define RDMAP_VERSION 1

/* ---- RDMAP opcodes (RFC 5040 section 4); 8..15 are unsupported here ---- */
#define RDMAP_OP_WRITE 0
#define RDMAP_OP_READ_REQ 1
#define RDMAP_OP_READ_RESP 2
#define RDMAP_OP_SEND 3
#define RDMAP_OP_SEND_INV 4
#define RDMAP_OP_SEND_SE 5
#define RDMAP_OP_SEND_SE_INV 6
#define RDMAP_OP_TERMINATE 7
#define RDMAP_OP_MAX RDMAP_OP_TERMINATE

/* ---- untagged queue numbers (RFC 5040) ---- */
#define DDP_QN_SEND 0
#define DDP_QN_READ_REQ 1
#define DDP_QN_TERMINATE 2

/* ---- what each opcode is: the one table transmit and receive read ---- */
struct rdmap_opinfo {
    bool known;      /* one of the opcodes above */
    bool tagged;     /* carried in DDP's tagged buffer model */
    bool single;     /* single-segment message: L must be set, MO is 0 */
    bool send;       /* a Send variant: it fills a posted receive */
    bool invalidate; /* carries an STag for the receiver to invalidate */
    bool solicit;    /* asks for a solicited event */
    uint8_t qn;      /* untagged: the queue number it travels on */
    uint8_t hdr_len; /* its ULPDU header octets, DDP and RDMAP (a Terminate: the minimum) */
};
extern const struct rdmap_opinfo rdmap_opinfo[RDMAP_OP_MAX + 1];
/* The table entry of any opcode value (unknown ones: a zeroed entry). */
const struct rdmap_opinfo *rdmap_op(uint8_t opcode);
/* The Send opcode with these options. */
uint8_t rdmap_send_opcode(bool invalidate, bool solicit);

/* ---- sizes in ULPDU octets (the 2-octet MPA length not counted) ---- */
#define DDP_TAGGED_HDR_LEN 14
#define DDP_UNTAGGED_HDR_LEN 18
#define RDMAP_READ_REQ_HDR_LEN 28
#define RDMAP_READ_REQ_ULPDU_LEN (DDP_UNTAGGED_HDR_LEN + RDMAP_READ_REQ_HDR_LEN) /* 46 */
#define RDMAP_TERM_CTRL_LEN 4
#define RDMAP_TERM_MIN_ULPDU_LEN (DDP_UNTAGGED_HDR_LEN + RDMAP_TERM_CTRL_LEN) /* 22 */
#define DDP_ULPDU_MAX 65535 /* the MPA length field is 16 bits */
#define DDP_HDR_MAX RDMAP_READ_REQ_ULPDU_LEN /* largest ddp_hdr_len() */

/* ---- Terminate error triples (RFC 5040 7.2, RFC 5041 7.2, RFC 5044) ---- */
#define TERM_LAYER_RDMAP 0
#define TERM_LAYER_DDP 1
#define TERM_LAYER_LLP 2

#define TERM_ETYPE_RDMAP_CATASTROPHIC 0
#define TERM_ETYPE_RDMAP_PROTECTION 1
#define TERM_ETYPE_RDMAP_OPERATION 2
#define TERM_ETYPE_DDP_CATASTROPHIC 0
#define TERM_ETYPE_DDP_TAGGED 1
#define TERM_ETYPE_DDP_UNTAGGED 2
#define TERM_ETYPE_LLP_MPA 0

/* RDMAP Remote Protection (0,1,x) */
#define TERM_RP_INVALID_STAG 0x00
#define TERM_RP_BOUNDS 0x01
#define TERM_RP_ACCESS 0x02
#define TERM_RP_STAG_STREAM 0x03
#define TERM_RP_TO_WRAP 0x04
#define TERM_RP_CANT_INVALIDATE 0x09
#define TERM_RP_UNSPECIFIED 0xFF
/* RDMAP Remote Operation (0,2,x) */
#define TERM_RO_BAD_VERSION 0x05
#define TERM_RO_BAD_OPCODE 0x06
#define TERM_RO_CATASTROPHIC_STREAM 0x07
#define TERM_RO_CATASTROPHIC_GLOBAL 0x08
#define TERM_RO_CANT_INVALIDATE 0x09
#define TERM_RO_UNSPECIFIED 0xFF
/* DDP tagged buffer (1,1,x) */
#define TERM_DT_INVALID_STAG 0x00
#define TERM_DT_BOUNDS 0x01
#define TERM_DT_STAG_STREAM 0x02
#define TERM_DT_TO_WRAP 0x03
#define TERM_DT_BAD_VERSION 0x04
/* DDP untagged buffer (1,2,x) */
#define TERM_DU_BAD_QN 0x01
#define TERM_DU_NO_BUFFER 0x02
#define TERM_DU_BAD_MSN 0x03
#define TERM_DU_BAD_MO 0x04
#define TERM_DU_TOO_LONG 0x05
#define TERM_DU_BAD_VERSION 0x06
/* LLP / MPA (2,0,x) */
#define TERM_LLP_STREAM_LOST 0x01
#define TERM_LLP_CRC 0x02
#define TERM_LLP_FPDU_START 0x03
#define TERM_LLP_BAD_REQ_REP 0x04
#define TERM_LLP_CATASTROPHIC 0x05
#define TERM_LLP_NO_IRD 0x06
#define TERM_LLP_NO_RTR 0x07

/* The Terminate a check asks for. ddp_hdr means "carry the offender's DDP
 * header" (so M and D are set), rdma_hdr "carry its 28-octet RDMA header"
 * (R). They follow RFC 5040's Terminate header rules; term_encode()
 * leaves out what the caller cannot supply. */
struct ddp_term {
    uint8_t layer, etype, code;
    bool ddp_hdr;
    bool rdma_hdr;
    /* The offender carries the Terminate opcode: a Terminate is never
     * answered (docs/rules.md R24), so report it and close instead. */
    bool no_reply;
};

/* Fills *t with (layer, etype, code) and the optional-header flags of the
 * Figure-10 rules: DDP header for every DDP-layer error and for RDMAP Remote
 * Protection/Operation errors; RDMA header only for Remote Protection errors
 * whose offender is a Read Request (rreq_offender); none for local
 * catastrophic and LLP errors. no_reply is cleared. For an error found while
 * building an outbound message the caller clears ddp_hdr (nothing to copy). */
void ddp_term_set(struct ddp_term *t, uint8_t layer, uint8_t etype, uint8_t code,
                  bool rreq_offender);

/* The 28-octet RDMA Read Request header (RFC 5040 section 4), also the format of a
 * Terminate's "Terminated RDMA Header". */
struct rdmap_rreq {
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t src_stag;
    uint64_t src_to;
};

/* One DDP/RDMAP header. Tagged: stag/to. Untagged: inv_stag (octets 4-7 as
 * received; only meaningful for Send with Invalidate, send 0 otherwise),
 * qn, msn, mo. rreq is filled by ddp_decode() for an untagged Read Request. */
struct ddp_hdr {
    bool tagged;
    bool last;
    uint8_t ddp_ver;   /* 2 bits */
    uint8_t rdmap_ver; /* 2 bits */
    uint8_t opcode;    /* 4 bits */
    uint32_t stag;
    uint64_t to;
    uint32_t inv_stag;
    uint32_t qn;
    uint32_t msn;
    uint32_t mo;
    struct rdmap_rreq rreq;
};

/* Octets of fixed header from the DDP control octet on, known from the two
 * control octets: tagged 14; untagged 18, 46 for a Read Request, 22 for a
 * Terminate (its optional parts are term.c's business). The T bit alone
 * picks the DDP layout, so an opcode that does not fit T is still read with
 * the layout T names and then rejected by ddp_decode(). */
size_t ddp_hdr_len(uint8_t ddp_ctrl, uint8_t rdmap_ctrl);

/* Raw field parse, no validation: needs 14 (T=1) or 18 (T=0) octets and
 * leaves rreq zeroed. Returns false, touching nothing, when len is short. */
bool ddp_parse(const uint8_t *p, size_t len, struct ddp_hdr *h);

enum ddp_result {
    DDP_OK = 0,    /* *h holds a header that passed every stateless check */
    DDP_TERM = 1,  /* *t holds the Terminate to send; *h is filled as far as parsed */
    DDP_SHORT = 2, /* fewer octets than needed were supplied; nothing decided */
};

/*
 * Decodes and validates one header. p/avail: the ULPDU octets the caller
 * has (at least min(ddp_hdr_len(), ulpdu_len), more is fine); ulpdu_len: the
 * MPA ULPDU_Length. Checks, in the order of docs/rules.md:
 *   R3  ulpdu_len >= ddp_hdr_len, <= 65535, and == 46 for a Read Request
 *   R4  DDP version 1
 *   R5  RDMAP version 1
 *   R6  opcode 0..7, T fits the opcode, L=1 for Read Request/Terminate
 *   R7  QN fits the opcode
 *   R8/R10 where no state is needed: a Read Request has MO 0, a Terminate
 *          MSN 1 and MO 0 (single-segment messages)
 * Reserved bits are ignored, as the RFCs say.
 */
enum ddp_result ddp_decode(const uint8_t *p, size_t avail, size_t ulpdu_len, struct ddp_hdr *h,
                           struct ddp_term *t);

/* Encoders write big-endian into out and return the octets written, or 0
 * when cap is too small. Reserved bits are written as 0. */
/* The DDP header of h alone (14 or 18 octets), with h's versions as given:
 * the exact inverse of ddp_parse(). */
size_t ddp_encode(const struct ddp_hdr *h, uint8_t *out, size_t cap);
/* Tagged header, DV=1, RV=1. */
size_t ddp_encode_tagged(uint8_t *out, size_t cap, uint8_t opcode, bool last, uint32_t stag,
                         uint64_t to);
/* Untagged header, DV=1, RV=1. */
size_t ddp_encode_untagged(uint8_t *out, size_t cap, uint8_t opcode, bool last, uint32_t inv_stag,
                           uint32_t qn, uint32_t msn, uint32_t mo);

/* The 28-octet Read Request header. decode needs len >= 28. */
size_t rdmap_rreq_encode(const struct rdmap_rreq *r, uint8_t *out, size_t cap);
bool rdmap_rreq_decode(const uint8_t *p, size_t len, struct rdmap_rreq *r);
/* A whole Read Request ULPDU (46 octets): untagged, L=1, QN 1, the given
 * MSN, MO 0, then the 28-octet header. */
size_t rdmap_encode_read_request(uint8_t *out, size_t cap, uint32_t msn,
                                 const struct rdmap_rreq *r);

/* ---- checks that need receiver state (pure; the caller owns the state) ---- */

/* MSNs count modulo 2^32 from 1 (RFC 5041): after 0xFFFFFFFF comes 0. */
static inline uint32_t ddp_msn_next(uint32_t msn) { return msn + 1u; }

/* R8: on TCP messages arrive in order, so the MSN must equal the expected
 * one. false -> (1,2,0x03) with the DDP header. */
bool ddp_check_msn(uint32_t expected, uint32_t got, struct ddp_term *t);

/* R10/R11, one untagged segment of seg_len payload octets: mo must equal
 * the octets already received for this message (so_far), else (1,2,0x04);
 * mo + seg_len must fit the buffer (buf_len), else (1,2,0x05). */
bool ddp_check_mo(uint32_t mo, uint64_t seg_len, uint64_t so_far, uint64_t buf_len,
                  struct ddp_term *t);

/* What a tagged access found; the caller decides INVALID/PD/ACCESS from its
 * STag table, ddp_check_range() decides BOUNDS/WRAP. */
enum ddp_stag_fault {
    DDP_STAG_OK = 0,
    DDP_STAG_INVALID, /* unknown, invalidated, or key mismatch */
    DDP_STAG_PD,      /* not associated with this stream (PD, or MW of another QP) */
    DDP_STAG_ACCESS,  /* REMOTE_WRITE (Write) / REMOTE_READ (Read source) missing */
    DDP_STAG_BOUNDS,  /* [to, to+len) not inside the region */
    DDP_STAG_WRAP,    /* to + len runs past 2^64 */
};

/* R15/R16 for a region {base_to, region_len} and an access [to, to+len).
 * len == 0 is always OK: zero-length segments and reads are not validated
 * (they place nothing). A wrap is reported before bounds because a wrapping
 * range is never inside a region, and the RFCs give wrap its own code. The
 * last octet may be at 2^64-1: only an access whose last octet would lie at
 * 2^64 or beyond wraps. */
enum ddp_stag_fault ddp_check_range(uint64_t base_to, uint64_t region_len, uint64_t to,
                                    uint64_t len);

/* R12-R16 for a Write (tagged sink): DDP codes (1,1,x) with the DDP
 * header; access rights have no DDP code, so (0,1,0x02). Returns false when
 * f is DDP_STAG_OK (nothing to send). */
bool ddp_term_for_write(enum ddp_stag_fault f, struct ddp_term *t);
/* R19 for a Read Request source: RDMAP (0,1,x) with DDP + RDMA headers. */
bool ddp_term_for_read_source(enum ddp_stag_fault f, struct ddp_term *t);

/* R17 (and the STag/TO part of R20): a tagged continuation segment, or
 * a Read Response checked against its ORQ entry, must carry the expected STag,
 * else (1,1,0x00), and the next contiguous TO, else (1,1,0x01). */
bool ddp_check_tagged_cont(uint32_t exp_stag, uint64_t exp_to, uint32_t stag, uint64_t to,
                           struct ddp_term *t);

/* ---- big-endian field access, shared with term.c ---- */
static inline uint16_t ddp_rd16(const uint8_t *p) { return (uint16_t)((p[0] << 8) | p[1]); }
static inline uint32_t ddp_rd32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t ddp_rd64(const uint8_t *p)
{
    return ((uint64_t)ddp_rd32(p) << 32) | ddp_rd32(p + 4);
}
static inline void ddp_wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void ddp_wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void ddp_wr64(uint8_t *p, uint64_t v)
{
    ddp_wr32(p, (uint32_t)(v >> 32));
    ddp_wr32(p + 4, (uint32_t)v);
}

#endif
