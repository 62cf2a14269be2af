/*
 * term.h - the RDMAP Terminate message (RFC 5040 section 7): encode one from a struct ddp_term, decode a received one
 * without trusting its flags. Works on the ULPDU (from the DDP control octet).
 *
 * Layout (ULPDU offsets): 0..17 untagged DDP header (41 47, QN 2, MSN 1,
 * MO 0); 18..21 Terminate Control; then optionally the 2-octet DDP Segment
 * Length + the offender's 14/18-octet DDP header (together they look like the
 * first 16/20 octets of the offending FPDU); then optionally the 28-octet
 * RDMA header. Total 22, 38, 42 or 70 octets.
 */
#ifndef NDK_WIRE_TERM_H
#define NDK_WIRE_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/ddp.h"

#define TERM_CTRL_LAYER_SHIFT 28
#define TERM_CTRL_ETYPE_SHIFT 24
#define TERM_CTRL_CODE_SHIFT 16
#define TERM_CTRL_M 0x00008000u /* DDP Segment Length valid */
#define TERM_CTRL_D 0x00004000u /* Terminated DDP header included */
#define TERM_CTRL_R 0x00002000u /* Terminated RDMA header included */
#define TERM_CTRL_RSVD 0x00001FFFu

/* The four well-formed ULPDU lengths. */
#define TERM_LEN_CTRL_ONLY 22 /* control word only */
#define TERM_LEN_TAGGED 38    /* + length + tagged DDP header */
#define TERM_LEN_UNTAGGED 42  /* + length + untagged DDP header */
#define TERM_LEN_RDMA 70      /* + length + untagged DDP header + RDMA header */
#define TERM_LEN_MAX TERM_LEN_RDMA

/* (layer << 28) | (etype << 24) | (code << 16) | M | D | R. Layer and etype
 * are 4-bit fields; higher bits are dropped. */
uint32_t term_ctrl_pack(uint8_t layer, uint8_t etype, uint8_t code, bool m, bool d, bool r);

/*
 * Builds a Terminate ULPDU into out: header with opcode 7, L=1, QN 2, MSN 1,
 * MO 0 (only one Terminate is ever sent), control word from t.
 * When t->ddp_hdr, ddp_hdr points at the offender's DDP control octet and
 * ddp_avail octets are readable there: its 14 or 18 octets (from its T bit)
 * are copied, preceded by seg_len (the offender's MPA ULPDU_Length, as
 * RFC 5040 asks), and M and D are set. When t->rdma_hdr too and the offender
 * is untagged, the 28 octets at rdma_hdr follow and R is set. A part asked
 * for but not supplied (NULL, too few octets) is left out with its flags
 * ("if possible"). Returns 22/38/42/70, or 0 when cap is too small.
 */
size_t term_encode(uint8_t *out, size_t cap, const struct ddp_term *t, uint16_t seg_len,
                   const uint8_t *ddp_hdr, size_t ddp_avail, const uint8_t *rdma_hdr);

/* Things in a decoded Terminate that a strict sender would not produce; the
 * parts present are still taken from the length. */
#define TERM_ANOM_FLAGS 0x1 /* D/R disagree with the parts present, or M without a DDP part
                               (siw sets R for Send-with-Invalidate offenders and appends nothing) */
#define TERM_ANOM_T 0x2     /* the copied DDP header's T bit does not fit its size */
#define TERM_ANOM_RSVD 0x4  /* reserved control bits set */

struct term_msg {
    struct ddp_hdr hdr;  /* the Terminate's own DDP header, unvalidated (ddp_decode's job) */
    uint32_t ctrl;       /* the raw control word */
    uint8_t layer, etype, code;
    bool m, d, r;        /* flags as received */
    uint16_t seg_len;    /* DDP Segment Length; informational (siw puts the payload length) */
    const uint8_t *ddp_hdr_copy; /* offender's DDP header (14/18 octets) in the input, or NULL */
    size_t ddp_hdr_copy_len;
    struct ddp_hdr ddp;          /* ddp_hdr_copy parsed, unvalidated */
    const uint8_t *rdma_hdr_copy; /* 28 octets in the input, or NULL */
    struct rdmap_rreq rdma;       /* rdma_hdr_copy parsed */
    unsigned anomalies;           /* TERM_ANOM_* */
};

enum term_dec_result {
    TERM_DEC_OK = 0,
    TERM_DEC_NOT_TERM = -1, /* not an untagged opcode-7 ULPDU (or under 2 octets) */
    TERM_DEC_SHORT = -2,    /* under 22 octets: no control word */
    TERM_DEC_BAD_LEN = -3,  /* not 22/38/42/70: control word decoded, optional parts ignored */
};

/* Decodes a received Terminate ULPDU of len octets (its MPA ULPDU_Length),
 * reading nothing past p + len. Any result but OK is a malformed Terminate,
 * fatal all the same; with BAD_LEN the error fields are still filled. */
enum term_dec_result term_decode(const uint8_t *p, size_t len, struct term_msg *m);

/* The RFC name of an error triple, for logs ("DDP tagged buffer: invalid
 * STag"); a generic string for unknown values, never NULL. */
const char *term_describe(uint8_t layer, uint8_t etype, uint8_t code);

#endif
