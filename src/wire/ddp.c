/*
 * ddp.c - DDP/RDMAP header codec and the stateless + state-helper checks of
 * docs/rules.md (R1-R24). Each Terminate mapping names the check it comes
 * from; the codes are the ones the RFCs prescribe, not Linux siw's variants.
 */
#include "wire/ddp.h"

#include <string.h>

void ddp_term_set(struct ddp_term *t, uint8_t layer, uint8_t etype, uint8_t code,
                  bool rreq_offender)
{
    t->layer = layer;
    t->etype = etype;
    t->code = code;
    t->no_reply = false;
    switch (layer) {
    case TERM_LAYER_RDMAP:
        /* Figure 10: local catastrophic carries nothing; remote protection
         * and remote operation carry the DDP header; only protection errors
         * carry the RDMA header, and the only RDMA header format is the Read
         * Request one, so it exists only for Read Request offenders. */
        t->ddp_hdr = etype == TERM_ETYPE_RDMAP_PROTECTION || etype == TERM_ETYPE_RDMAP_OPERATION;
        t->rdma_hdr = etype == TERM_ETYPE_RDMAP_PROTECTION && rreq_offender;
        break;
    case TERM_LAYER_DDP:
        /* A DDP local catastrophic error need not have an offending segment,
         * but when one exists the RFC wants it copied; the caller clears
         * ddp_hdr when there is none. */
        t->ddp_hdr = true;
        t->rdma_hdr = false;
        break;
    default:
        /* LLP errors: the framing is broken, no header can be trusted. */
        t->ddp_hdr = false;
        t->rdma_hdr = false;
        break;
    }
}

/* RFC 5040 section 4: the opcodes, their buffer model, queue and header. */
const struct rdmap_opinfo rdmap_opinfo[RDMAP_OP_MAX + 1] = {
    [RDMAP_OP_WRITE] = {.known = true, .tagged = true, .hdr_len = DDP_TAGGED_HDR_LEN},
    [RDMAP_OP_READ_REQ] = {.known = true, .single = true, .qn = DDP_QN_READ_REQ,
                           .hdr_len = RDMAP_READ_REQ_ULPDU_LEN},
    [RDMAP_OP_READ_RESP] = {.known = true, .tagged = true, .hdr_len = DDP_TAGGED_HDR_LEN},
    [RDMAP_OP_SEND] = {.known = true, .send = true, .qn = DDP_QN_SEND,
                       .hdr_len = DDP_UNTAGGED_HDR_LEN},
    [RDMAP_OP_SEND_INV] = {.known = true, .send = true, .invalidate = true, .qn = DDP_QN_SEND,
                           .hdr_len = DDP_UNTAGGED_HDR_LEN},
    [RDMAP_OP_SEND_SE] = {.known = true, .send = true, .solicit = true, .qn = DDP_QN_SEND,
                          .hdr_len = DDP_UNTAGGED_HDR_LEN},
    [RDMAP_OP_SEND_SE_INV] = {.known = true, .send = true, .invalidate = true, .solicit = true,
                              .qn = DDP_QN_SEND, .hdr_len = DDP_UNTAGGED_HDR_LEN},
    [RDMAP_OP_TERMINATE] = {.known = true, .single = true, .qn = DDP_QN_TERMINATE,
                            .hdr_len = RDMAP_TERM_MIN_ULPDU_LEN},
};

const struct rdmap_opinfo *rdmap_op(uint8_t opcode)
{
    static const struct rdmap_opinfo unknown;
    return opcode <= RDMAP_OP_MAX ? &rdmap_opinfo[opcode] : &unknown;
}

uint8_t rdmap_send_opcode(bool invalidate, bool solicit)
{
    for (uint8_t op = 0; op <= RDMAP_OP_MAX; op++) {
        const struct rdmap_opinfo *i = &rdmap_opinfo[op];
        if (i->send && i->invalidate == invalidate && i->solicit == solicit)
            return op;
    }
    return RDMAP_OP_SEND;
}

size_t ddp_hdr_len(uint8_t ddp_ctrl, uint8_t rdmap_ctrl)
{
    if (ddp_ctrl & DDP_CTRL_T)
        return DDP_TAGGED_HDR_LEN;
    /* Untagged: the opcode's header, or the plain one for an opcode that
     * is not untagged (the header check then names what is wrong). */
    const struct rdmap_opinfo *i = rdmap_op(rdmap_ctrl & RDMAP_CTRL_OP_MASK);
    return i->known && !i->tagged ? i->hdr_len : DDP_UNTAGGED_HDR_LEN;
}

static size_t base_len(uint8_t ddp_ctrl)
{
    return (ddp_ctrl & DDP_CTRL_T) ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
}

bool ddp_parse(const uint8_t *p, size_t len, struct ddp_hdr *h)
{
    if (len < 1 || len < base_len(p[0]))
        return false;
    memset(h, 0, sizeof(*h));
    h->tagged = (p[0] & DDP_CTRL_T) != 0;
    h->last = (p[0] & DDP_CTRL_L) != 0;
    h->ddp_ver = p[0] & DDP_CTRL_DV_MASK;
    h->rdmap_ver = (uint8_t)((p[1] & RDMAP_CTRL_RV_MASK) >> RDMAP_CTRL_RV_SHIFT);
    h->opcode = p[1] & RDMAP_CTRL_OP_MASK;
    if (h->tagged) {
        h->stag = ddp_rd32(p + 2);
        h->to = ddp_rd64(p + 6);
    } else {
        h->inv_stag = ddp_rd32(p + 2);
        h->qn = ddp_rd32(p + 6);
        h->msn = ddp_rd32(p + 10);
        h->mo = ddp_rd32(p + 14);
    }
    return true;
}

static enum ddp_result fail(struct ddp_term *t, uint8_t layer, uint8_t etype, uint8_t code,
                            uint8_t opcode)
{
    ddp_term_set(t, layer, etype, code, false);
    t->no_reply = opcode == RDMAP_OP_TERMINATE;
    return DDP_TERM;
}

enum ddp_result ddp_decode(const uint8_t *p, size_t avail, size_t ulpdu_len, struct ddp_hdr *h,
                           struct ddp_term *t)
{
    if (avail < 2)
        return DDP_SHORT;
    uint8_t c0 = p[0], c1 = p[1];
    /* With ULPDU_Length < 2 the octet at p[1] is not part of the ULPDU, so
     * its opcode must not make the error look like a Terminate. */
    uint8_t op = ulpdu_len < 2 ? 0xFF : (c1 & RDMAP_CTRL_OP_MASK);
    size_t need = ddp_hdr_len(c0, c1);
    bool tagged = (c0 & DDP_CTRL_T) != 0;
    bool rreq = !tagged && op == RDMAP_OP_READ_REQ;

    /* R3 comes first because it decides how much may be read at all: a
     * ULPDU shorter than its header must not make us read into the pad/CRC.
     * The RFCs give no code; the table's (rec) is (0,2,0xFF) Remote
     * Operation / Unspecified. A Read Request carries no payload, so any
     * length but 46 is malformed too (siw drops such a connection). */
    if (ulpdu_len < need || ulpdu_len > DDP_ULPDU_MAX ||
        (rreq && ulpdu_len != RDMAP_READ_REQ_ULPDU_LEN)) {
        size_t have = avail < ulpdu_len ? avail : ulpdu_len;
        memset(h, 0, sizeof(*h));
        ddp_parse(p, have, h);
        fail(t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_UNSPECIFIED, op);
        /* Remote Operation wants the DDP header "if possible": only when the
         * ULPDU holds a whole one. */
        t->ddp_hdr = ulpdu_len >= base_len(c0);
        return DDP_TERM;
    }
    if (avail < need)
        return DDP_SHORT;

    ddp_parse(p, avail, h);

    /* R4: the DDP version error is reported in the buffer model the
     * segment claims: tagged (1,1,0x04), untagged (1,2,0x06). */
    if (h->ddp_ver != DDP_VERSION)
        return tagged ? fail(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_BAD_VERSION, op)
                      : fail(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_VERSION, op);
    /* R5: (0,2,0x05) with the DDP header. */
    if (h->rdmap_ver != RDMAP_VERSION)
        return fail(t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_BAD_VERSION, op);
    /* R6: (0,2,0x06) for an unknown/unsupported opcode (8..15, RFC 7306
     * included), a T bit that does not fit the opcode (tagged only for
     * Write and Read Response), and a Read Request or Terminate without L:
     * both are single-segment messages by definition. */
    const struct rdmap_opinfo *info = rdmap_op(op);
    if (!info->known || tagged != info->tagged || (info->single && !h->last))
        return fail(t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_OPERATION, TERM_RO_BAD_OPCODE, op);
    if (tagged)
        return DDP_OK;
    /* R7: (1,2,0x01) Invalid QN. */
    if (h->qn != info->qn)
        return fail(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_QN, op);
    /* R8/R10 without state: a Terminate is always MSN 1 (one per
     * stream), and single-segment messages start at MO 0. */
    if (op == RDMAP_OP_TERMINATE && h->msn != 1)
        return fail(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_MSN, op);
    if (info->single && h->mo != 0)
        return fail(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_MO, op);
    if (op == RDMAP_OP_READ_REQ)
        rdmap_rreq_decode(p + DDP_UNTAGGED_HDR_LEN, avail - DDP_UNTAGGED_HDR_LEN, &h->rreq);
    return DDP_OK;
}

static uint8_t ctrl0(bool tagged, bool last, uint8_t dv)
{
    return (uint8_t)((tagged ? DDP_CTRL_T : 0) | (last ? DDP_CTRL_L : 0) | (dv & DDP_CTRL_DV_MASK));
}

static uint8_t ctrl1(uint8_t rv, uint8_t op)
{
    return (uint8_t)(((rv << RDMAP_CTRL_RV_SHIFT) & RDMAP_CTRL_RV_MASK) | (op & RDMAP_CTRL_OP_MASK));
}

size_t ddp_encode(const struct ddp_hdr *h, uint8_t *out, size_t cap)
{
    size_t n = h->tagged ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
    if (cap < n)
        return 0;
    out[0] = ctrl0(h->tagged, h->last, h->ddp_ver);
    out[1] = ctrl1(h->rdmap_ver, h->opcode);
    if (h->tagged) {
        ddp_wr32(out + 2, h->stag);
        ddp_wr64(out + 6, h->to);
    } else {
        ddp_wr32(out + 2, h->inv_stag);
        ddp_wr32(out + 6, h->qn);
        ddp_wr32(out + 10, h->msn);
        ddp_wr32(out + 14, h->mo);
    }
    return n;
}

size_t ddp_encode_tagged(uint8_t *out, size_t cap, uint8_t opcode, bool last, uint32_t stag,
                         uint64_t to)
{
    struct ddp_hdr h = {.tagged = true, .last = last, .ddp_ver = DDP_VERSION,
                        .rdmap_ver = RDMAP_VERSION, .opcode = opcode, .stag = stag, .to = to};
    return ddp_encode(&h, out, cap);
}

size_t ddp_encode_untagged(uint8_t *out, size_t cap, uint8_t opcode, bool last, uint32_t inv_stag,
                           uint32_t qn, uint32_t msn, uint32_t mo)
{
    struct ddp_hdr h = {.tagged = false, .last = last, .ddp_ver = DDP_VERSION,
                        .rdmap_ver = RDMAP_VERSION, .opcode = opcode, .inv_stag = inv_stag,
                        .qn = qn, .msn = msn, .mo = mo};
    return ddp_encode(&h, out, cap);
}

size_t rdmap_rreq_encode(const struct rdmap_rreq *r, uint8_t *out, size_t cap)
{
    if (cap < RDMAP_READ_REQ_HDR_LEN)
        return 0;
    ddp_wr32(out, r->sink_stag);
    ddp_wr64(out + 4, r->sink_to);
    ddp_wr32(out + 12, r->size);
    ddp_wr32(out + 16, r->src_stag);
    ddp_wr64(out + 20, r->src_to);
    return RDMAP_READ_REQ_HDR_LEN;
}

bool rdmap_rreq_decode(const uint8_t *p, size_t len, struct rdmap_rreq *r)
{
    if (len < RDMAP_READ_REQ_HDR_LEN)
        return false;
    r->sink_stag = ddp_rd32(p);
    r->sink_to = ddp_rd64(p + 4);
    r->size = ddp_rd32(p + 12);
    r->src_stag = ddp_rd32(p + 16);
    r->src_to = ddp_rd64(p + 20);
    return true;
}

size_t rdmap_encode_read_request(uint8_t *out, size_t cap, uint32_t msn,
                                 const struct rdmap_rreq *r)
{
    if (cap < RDMAP_READ_REQ_ULPDU_LEN)
        return 0;
    ddp_encode_untagged(out, cap, RDMAP_OP_READ_REQ, true, 0, DDP_QN_READ_REQ, msn, 0);
    rdmap_rreq_encode(r, out + DDP_UNTAGGED_HDR_LEN, cap - DDP_UNTAGGED_HDR_LEN);
    return RDMAP_READ_REQ_ULPDU_LEN;
}

bool ddp_check_msn(uint32_t expected, uint32_t got, struct ddp_term *t)
{
    if (got == expected)
        return true;
    /* R8: (1,2,0x03) Invalid MSN - MSN range is not valid. */
    ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_MSN, false);
    return false;
}

bool ddp_check_mo(uint32_t mo, uint64_t seg_len, uint64_t so_far, uint64_t buf_len,
                  struct ddp_term *t)
{
    /* R10: (1,2,0x04) when MO is not where the message stands. A message
     * past 4 GiB cannot be addressed by the 32-bit MO, so so_far above
     * UINT32_MAX never matches. */
    if ((uint64_t)mo != so_far) {
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_BAD_MO, false);
        return false;
    }
    /* R11: (1,2,0x05) DDP message too long for the buffer. Written as a
     * subtraction so that no sum can overflow. */
    if (mo > buf_len || seg_len > buf_len - mo) {
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_UNTAGGED, TERM_DU_TOO_LONG, false);
        return false;
    }
    return true;
}

enum ddp_stag_fault ddp_check_range(uint64_t base_to, uint64_t region_len, uint64_t to,
                                    uint64_t len)
{
    if (len == 0)
        return DDP_STAG_OK;
    /* Last octet to + len - 1 must be representable: len - 1 <= max - to. */
    if (len - 1 > UINT64_MAX - to)
        return DDP_STAG_WRAP;
    if (to < base_to)
        return DDP_STAG_BOUNDS;
    uint64_t off = to - base_to;
    if (off > region_len || len > region_len - off)
        return DDP_STAG_BOUNDS;
    return DDP_STAG_OK;
}

bool ddp_term_for_write(enum ddp_stag_fault f, struct ddp_term *t)
{
    switch (f) {
    case DDP_STAG_INVALID: /* R12: (1,1,0x00) */
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_INVALID_STAG, false);
        return true;
    case DDP_STAG_PD: /* R13: (1,1,0x02) STag not associated with DDP stream */
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_STAG_STREAM, false);
        return true;
    case DDP_STAG_ACCESS:
        /* R14: DDP has no access-rights code, so RDMAP (0,1,0x02). A Write
         * has no RDMA header to copy: DDP header only. */
        ddp_term_set(t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_PROTECTION, TERM_RP_ACCESS, false);
        return true;
    case DDP_STAG_BOUNDS: /* R15: (1,1,0x01) */
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_BOUNDS, false);
        return true;
    case DDP_STAG_WRAP: /* R16: (1,1,0x03) */
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_TO_WRAP, false);
        return true;
    default:
        return false;
    }
}

bool ddp_term_for_read_source(enum ddp_stag_fault f, struct ddp_term *t)
{
    /* R19: RDMAP remote protection, with M, D and R. */
    uint8_t code;
    switch (f) {
    case DDP_STAG_INVALID:
        code = TERM_RP_INVALID_STAG;
        break;
    case DDP_STAG_PD:
        code = TERM_RP_STAG_STREAM;
        break;
    case DDP_STAG_ACCESS:
        code = TERM_RP_ACCESS;
        break;
    case DDP_STAG_BOUNDS:
        code = TERM_RP_BOUNDS;
        break;
    case DDP_STAG_WRAP:
        code = TERM_RP_TO_WRAP;
        break;
    default:
        return false;
    }
    ddp_term_set(t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_PROTECTION, code, true);
    return true;
}

bool ddp_check_tagged_cont(uint32_t exp_stag, uint64_t exp_to, uint32_t stag, uint64_t to,
                           struct ddp_term *t)
{
    /* R17: (1,1,0x00) for a changed STag, (1,1,0x01) for a gap. */
    if (stag != exp_stag) {
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_INVALID_STAG, false);
        return false;
    }
    if (to != exp_to) {
        ddp_term_set(t, TERM_LAYER_DDP, TERM_ETYPE_DDP_TAGGED, TERM_DT_BOUNDS, false);
        return false;
    }
    return true;
}
