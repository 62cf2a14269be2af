/*
 * term.c - Terminate encode/decode and the RFC names of the error codes
 * (RFC 5040 7.2, RFC 5041 7.2, RFC 5044 8, RFC 6581).
 */
#include "wire/term.h"

#include <string.h>

/* ULPDU offsets of the Terminate body. */
#define OFF_CTRL DDP_UNTAGGED_HDR_LEN                  /* 18 */
#define OFF_SEGLEN (OFF_CTRL + RDMAP_TERM_CTRL_LEN)    /* 22 */
#define OFF_DDPHDR (OFF_SEGLEN + 2)                    /* 24 */
#define OFF_RDMAHDR (OFF_DDPHDR + DDP_UNTAGGED_HDR_LEN) /* 42 */

uint32_t term_ctrl_pack(uint8_t layer, uint8_t etype, uint8_t code, bool m, bool d, bool r)
{
    return ((uint32_t)(layer & 0xF) << TERM_CTRL_LAYER_SHIFT) |
           ((uint32_t)(etype & 0xF) << TERM_CTRL_ETYPE_SHIFT) |
           ((uint32_t)code << TERM_CTRL_CODE_SHIFT) | (m ? TERM_CTRL_M : 0) |
           (d ? TERM_CTRL_D : 0) | (r ? TERM_CTRL_R : 0);
}

size_t term_encode(uint8_t *out, size_t cap, const struct ddp_term *t, uint16_t seg_len,
                   const uint8_t *ddp_hdr, size_t ddp_avail, const uint8_t *rdma_hdr)
{
    size_t ddp_len = 0;
    if (t->ddp_hdr && ddp_hdr && ddp_avail >= 1) {
        size_t n = (ddp_hdr[0] & DDP_CTRL_T) ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
        if (ddp_avail >= n)
            ddp_len = n;
    }
    /* The RDMA header sits after an untagged DDP copy (the 70-octet form);
     * no other position is defined, so without that copy it is left out. */
    bool rdma = t->rdma_hdr && rdma_hdr && ddp_len == DDP_UNTAGGED_HDR_LEN;
    size_t total = RDMAP_TERM_MIN_ULPDU_LEN + (ddp_len ? 2 + ddp_len : 0) +
                   (rdma ? RDMAP_READ_REQ_HDR_LEN : 0);
    if (cap < total)
        return 0;

    ddp_encode_untagged(out, cap, RDMAP_OP_TERMINATE, true, 0, DDP_QN_TERMINATE, 1, 0);
    ddp_wr32(out + OFF_CTRL, term_ctrl_pack(t->layer, t->etype, t->code, ddp_len != 0,
                                            ddp_len != 0, rdma));
    if (ddp_len) {
        ddp_wr16(out + OFF_SEGLEN, seg_len);
        memcpy(out + OFF_DDPHDR, ddp_hdr, ddp_len);
    }
    if (rdma)
        memcpy(out + OFF_RDMAHDR, rdma_hdr, RDMAP_READ_REQ_HDR_LEN);
    return total;
}

enum term_dec_result term_decode(const uint8_t *p, size_t len, struct term_msg *m)
{
    memset(m, 0, sizeof(*m));
    if (len < 2 || (p[0] & DDP_CTRL_T) || (p[1] & RDMAP_CTRL_OP_MASK) != RDMAP_OP_TERMINATE)
        return TERM_DEC_NOT_TERM;
    if (len < RDMAP_TERM_MIN_ULPDU_LEN)
        return TERM_DEC_SHORT;

    ddp_parse(p, len, &m->hdr);
    m->ctrl = ddp_rd32(p + OFF_CTRL);
    m->layer = (uint8_t)(m->ctrl >> TERM_CTRL_LAYER_SHIFT);
    m->etype = (uint8_t)((m->ctrl >> TERM_CTRL_ETYPE_SHIFT) & 0xF);
    m->code = (uint8_t)(m->ctrl >> TERM_CTRL_CODE_SHIFT);
    m->m = (m->ctrl & TERM_CTRL_M) != 0;
    m->d = (m->ctrl & TERM_CTRL_D) != 0;
    m->r = (m->ctrl & TERM_CTRL_R) != 0;
    if (m->ctrl & TERM_CTRL_RSVD)
        m->anomalies |= TERM_ANOM_RSVD;

    /* The length alone says what follows: peers disagree on
     * the flags (siw sets R with nothing appended), never on the sizes. */
    size_t ddp_len;
    bool rdma;
    switch (len) {
    case TERM_LEN_CTRL_ONLY:
        ddp_len = 0;
        rdma = false;
        break;
    case TERM_LEN_TAGGED:
        ddp_len = DDP_TAGGED_HDR_LEN;
        rdma = false;
        break;
    case TERM_LEN_UNTAGGED:
        ddp_len = DDP_UNTAGGED_HDR_LEN;
        rdma = false;
        break;
    case TERM_LEN_RDMA:
        ddp_len = DDP_UNTAGGED_HDR_LEN;
        rdma = true;
        break;
    default:
        return TERM_DEC_BAD_LEN;
    }

    if (ddp_len) {
        m->seg_len = ddp_rd16(p + OFF_SEGLEN);
        m->ddp_hdr_copy = p + OFF_DDPHDR;
        m->ddp_hdr_copy_len = ddp_len;
        bool t_bit = (p[OFF_DDPHDR] & DDP_CTRL_T) != 0;
        if (t_bit != (ddp_len == DDP_TAGGED_HDR_LEN)) {
            /* The size wins: the copy is parsed in the layout its size
             * implies (T forced in a local copy, so ddp.tagged follows the
             * size), and a sloppy peer's fields can still be logged. */
            uint8_t tmp[DDP_UNTAGGED_HDR_LEN];
            memcpy(tmp, p + OFF_DDPHDR, ddp_len);
            tmp[0] = (uint8_t)(t_bit ? tmp[0] & ~DDP_CTRL_T : tmp[0] | DDP_CTRL_T);
            ddp_parse(tmp, ddp_len, &m->ddp);
            m->anomalies |= TERM_ANOM_T;
        } else {
            ddp_parse(p + OFF_DDPHDR, ddp_len, &m->ddp);
        }
    }
    if (rdma) {
        m->rdma_hdr_copy = p + OFF_RDMAHDR;
        rdmap_rreq_decode(m->rdma_hdr_copy, RDMAP_READ_REQ_HDR_LEN, &m->rdma);
    }
    if (m->d != (ddp_len != 0) || m->r != rdma || (m->m && !ddp_len))
        m->anomalies |= TERM_ANOM_FLAGS;
    return TERM_DEC_OK;
}

/* The names of the errors a Terminate reports, by layer and error type:
 * RDMAP (RFC 5040 7.2), DDP (RFC 5041 7.2) and MPA as the LLP (RFC 5044 8,
 * RFC 6581). */
struct term_type_names {
    uint8_t layer, etype;
    const char *other_code; /* a code the type does not define */
    struct {
        uint8_t code;
        const char *name; /* NULL: the end of the list */
    } codes[8];
};

static const struct term_type_names term_names[] = {
    /* Any code is allowed here; the name does not depend on it. */
    {TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_CATASTROPHIC, "RDMAP local catastrophic error", {{0, NULL}}},
    {TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_PROTECTION, "RDMAP remote protection: unknown code",
     {{TERM_RP_INVALID_STAG, "RDMAP remote protection: invalid STag"},
      {TERM_RP_BOUNDS, "RDMAP remote protection: base or bounds violation"},
      {TERM_RP_ACCESS, "RDMAP remote protection: access rights violation"},
      {TERM_RP_STAG_STREAM, "RDMAP remote protection: STag not associated with RDMAP stream"},
      {TERM_RP_TO_WRAP, "RDMAP remote protection: TO wrap"},
      {TERM_RP_CANT_INVALIDATE, "RDMAP remote protection: STag cannot be invalidated"},
      {TERM_RP_UNSPECIFIED, "RDMAP remote protection: unspecified error"}}},
    {TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, "RDMAP remote operation: unknown code",
     {{TERM_RO_BAD_VERSION, "RDMAP remote operation: invalid RDMAP version"},
      {TERM_RO_BAD_OPCODE, "RDMAP remote operation: unexpected OpCode"},
      {TERM_RO_CATASTROPHIC_STREAM, "RDMAP remote operation: catastrophic error, localized to RDMAP stream"},
      {TERM_RO_CATASTROPHIC_GLOBAL, "RDMAP remote operation: catastrophic error, global"},
      {TERM_RO_CANT_INVALIDATE, "RDMAP remote operation: STag cannot be invalidated"},
      {TERM_RO_UNSPECIFIED, "RDMAP remote operation: unspecified error"}}},
    {TERM_LAYER_DDP, TERM_ETYPE_DDP_CATASTROPHIC, "DDP local catastrophic error: unknown code",
     {{0, "DDP local catastrophic error"}}},
    {TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, "DDP tagged buffer: unknown code",
     {{TERM_DT_INVALID_STAG, "DDP tagged buffer: invalid STag"},
      {TERM_DT_BOUNDS, "DDP tagged buffer: base or bounds violation"},
      {TERM_DT_STAG_STREAM, "DDP tagged buffer: STag not associated with DDP stream"},
      {TERM_DT_TO_WRAP, "DDP tagged buffer: TO wrap"},
      {TERM_DT_BAD_VERSION, "DDP tagged buffer: invalid DDP version"}}},
    {TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, "DDP untagged buffer: unknown code",
     {{TERM_DU_BAD_QN, "DDP untagged buffer: invalid QN"},
      {TERM_DU_NO_BUFFER, "DDP untagged buffer: invalid MSN - no buffer available"},
      {TERM_DU_BAD_MSN, "DDP untagged buffer: invalid MSN - MSN range is not valid"},
      {TERM_DU_BAD_MO, "DDP untagged buffer: invalid MO"},
      {TERM_DU_TOO_LONG, "DDP untagged buffer: DDP message too long for available buffer"},
      {TERM_DU_BAD_VERSION, "DDP untagged buffer: invalid DDP version"}}},
    {TERM_LAYER_LLP, TERM_ETYPE_LLP_MPA, "LLP: unknown MPA code",
     {{TERM_LLP_STREAM_LOST, "LLP: TCP connection closed, terminated or lost"},
      {TERM_LLP_CRC, "LLP: MPA CRC error"},
      {TERM_LLP_FPDU_START, "LLP: MPA marker and ULPDU_Length disagree (FPDU start error)"},
      {TERM_LLP_BAD_REQ_REP, "LLP: invalid MPA Request/Reply frame"},
      {TERM_LLP_CATASTROPHIC, "LLP: MPA local catastrophic error"},
      {TERM_LLP_NO_IRD, "LLP: MPA insufficient IRD resources"},
      {TERM_LLP_NO_RTR, "LLP: MPA no matching RTR option"}}},
};

/* The name of an error type a layer does not define, by layer. */
static const char *const layer_other_type[] = {
    [TERM_LAYER_RDMAP] = "RDMAP: unknown error type",
    [TERM_LAYER_DDP] = "DDP: unknown error type",
    [TERM_LAYER_LLP] = "LLP: unknown error type",
};

const char *term_describe(uint8_t layer, uint8_t etype, uint8_t code)
{
    for (size_t i = 0; i < sizeof term_names / sizeof term_names[0]; i++) {
        const struct term_type_names *t = &term_names[i];
        if (t->layer != layer || t->etype != etype)
            continue;
        for (size_t c = 0; c < sizeof t->codes / sizeof t->codes[0] && t->codes[c].name; c++) {
            if (t->codes[c].code == code)
                return t->codes[c].name;
        }
        return t->other_code;
    }
    if (layer < sizeof layer_other_type / sizeof layer_other_type[0])
        return layer_other_type[layer];
    return "unknown Terminate layer";
}
