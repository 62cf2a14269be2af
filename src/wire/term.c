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

static const char *rdmap_protection(uint8_t code)
{
    switch (code) {
    case TERM_RP_INVALID_STAG:
        return "RDMAP remote protection: invalid STag";
    case TERM_RP_BOUNDS:
        return "RDMAP remote protection: base or bounds violation";
    case TERM_RP_ACCESS:
        return "RDMAP remote protection: access rights violation";
    case TERM_RP_STAG_STREAM:
        return "RDMAP remote protection: STag not associated with RDMAP stream";
    case TERM_RP_TO_WRAP:
        return "RDMAP remote protection: TO wrap";
    case TERM_RP_CANT_INVALIDATE:
        return "RDMAP remote protection: STag cannot be invalidated";
    case TERM_RP_UNSPECIFIED:
        return "RDMAP remote protection: unspecified error";
    default:
        return "RDMAP remote protection: unknown code";
    }
}

static const char *rdmap_operation(uint8_t code)
{
    switch (code) {
    case TERM_RO_BAD_VERSION:
        return "RDMAP remote operation: invalid RDMAP version";
    case TERM_RO_BAD_OPCODE:
        return "RDMAP remote operation: unexpected OpCode";
    case TERM_RO_CATASTROPHIC_STREAM:
        return "RDMAP remote operation: catastrophic error, localized to RDMAP stream";
    case TERM_RO_CATASTROPHIC_GLOBAL:
        return "RDMAP remote operation: catastrophic error, global";
    case TERM_RO_CANT_INVALIDATE:
        return "RDMAP remote operation: STag cannot be invalidated";
    case TERM_RO_UNSPECIFIED:
        return "RDMAP remote operation: unspecified error";
    default:
        return "RDMAP remote operation: unknown code";
    }
}

static const char *ddp_tagged(uint8_t code)
{
    switch (code) {
    case TERM_DT_INVALID_STAG:
        return "DDP tagged buffer: invalid STag";
    case TERM_DT_BOUNDS:
        return "DDP tagged buffer: base or bounds violation";
    case TERM_DT_STAG_STREAM:
        return "DDP tagged buffer: STag not associated with DDP stream";
    case TERM_DT_TO_WRAP:
        return "DDP tagged buffer: TO wrap";
    case TERM_DT_BAD_VERSION:
        return "DDP tagged buffer: invalid DDP version";
    default:
        return "DDP tagged buffer: unknown code";
    }
}

static const char *ddp_untagged(uint8_t code)
{
    switch (code) {
    case TERM_DU_BAD_QN:
        return "DDP untagged buffer: invalid QN";
    case TERM_DU_NO_BUFFER:
        return "DDP untagged buffer: invalid MSN - no buffer available";
    case TERM_DU_BAD_MSN:
        return "DDP untagged buffer: invalid MSN - MSN range is not valid";
    case TERM_DU_BAD_MO:
        return "DDP untagged buffer: invalid MO";
    case TERM_DU_TOO_LONG:
        return "DDP untagged buffer: DDP message too long for available buffer";
    case TERM_DU_BAD_VERSION:
        return "DDP untagged buffer: invalid DDP version";
    default:
        return "DDP untagged buffer: unknown code";
    }
}

static const char *llp_mpa(uint8_t code)
{
    switch (code) {
    case TERM_LLP_STREAM_LOST:
        return "LLP: TCP connection closed, terminated or lost";
    case TERM_LLP_CRC:
        return "LLP: MPA CRC error";
    case TERM_LLP_FPDU_START:
        return "LLP: MPA marker and ULPDU_Length disagree (FPDU start error)";
    case TERM_LLP_BAD_REQ_REP:
        return "LLP: invalid MPA Request/Reply frame";
    case TERM_LLP_CATASTROPHIC:
        return "LLP: MPA local catastrophic error";
    case TERM_LLP_NO_IRD:
        return "LLP: MPA insufficient IRD resources";
    case TERM_LLP_NO_RTR:
        return "LLP: MPA no matching RTR option";
    default:
        return "LLP: unknown MPA code";
    }
}

const char *term_describe(uint8_t layer, uint8_t etype, uint8_t code)
{
    switch (layer) {
    case TERM_LAYER_RDMAP:
        switch (etype) {
        case TERM_ETYPE_RDMAP_CATASTROPHIC:
            /* Any code is allowed here; the name does not depend on it. */
            return "RDMAP local catastrophic error";
        case TERM_ETYPE_RDMAP_PROTECTION:
            return rdmap_protection(code);
        case TERM_ETYPE_RDMAP_OPERATION:
            return rdmap_operation(code);
        default:
            return "RDMAP: unknown error type";
        }
    case TERM_LAYER_DDP:
        switch (etype) {
        case TERM_ETYPE_DDP_CATASTROPHIC:
            return code == 0 ? "DDP local catastrophic error"
                             : "DDP local catastrophic error: unknown code";
        case TERM_ETYPE_DDP_TAGGED:
            return ddp_tagged(code);
        case TERM_ETYPE_DDP_UNTAGGED:
            return ddp_untagged(code);
        default:
            return "DDP: unknown error type";
        }
    case TERM_LAYER_LLP:
        return etype == TERM_ETYPE_LLP_MPA ? llp_mpa(code) : "LLP: unknown error type";
    default:
        return "unknown Terminate layer";
    }
}
