/*
 * Sans-IO MPA: startup frames and FPDU framing. Layouts: RFC 5044, RFC
 * 6581. Every multi-octet field is big-endian except the CRC,
 * which goes out least-significant octet first.
 */
#include "mpa.h"

#include <string.h>

#include "crc32c.h"
#include "wire/ddp.h"
#include "wire/term.h"

/* Spelled as octets: a 16-character string literal would want a 17th octet
 * for its NUL, and the keys carry none on the wire. */
static const uint8_t key_req[MPA_KEY_LEN] = {0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                             0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65};
static const uint8_t key_rep[MPA_KEY_LEN] = {0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                             0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65};

/* RFC 6581 word bits: A and B ride in the IRD half, C and D
 * in the ORD half. */
#define ENH_A 0x8000u
#define ENH_B 0x4000u
#define ENH_C 0x8000u
#define ENH_D 0x4000u
#define RTR_ALL (MPA_RTR_SEND | MPA_RTR_WRITE | MPA_RTR_READ)

/* ULPDU lengths of the zero-payload control FPDUs of connection set-up. */
#define ULPDU_TAGGED_HDR DDP_TAGGED_HDR_LEN
#define ULPDU_UNTAGGED_HDR DDP_UNTAGGED_HDR_LEN
#define ULPDU_READ_REQ RDMAP_READ_REQ_ULPDU_LEN
#define ULPDU_TERM_SIMPLE RDMAP_TERM_MIN_ULPDU_LEN

/* ---- startup frames ---- */

bool mpa_frame_same(const struct mpa_frame *a, const struct mpa_frame *b)
{
    return a->reply == b->reply && a->markers == b->markers && a->crc == b->crc &&
           a->reject == b->reject && a->enhanced == b->enhanced && a->rev == b->rev &&
           a->p2p == b->p2p && a->rtr == b->rtr && a->ird == b->ird && a->ord == b->ord &&
           a->pd_len == b->pd_len && (a->pd_len == 0 || memcmp(a->pd, b->pd, a->pd_len) == 0);
}

size_t mpa_frame_size(const struct mpa_frame *f)
{
    return MPA_HDR_LEN + (f->enhanced ? MPA_ENH_LEN : 0) + (size_t)f->pd_len;
}

size_t mpa_frame_encode(const struct mpa_frame *f, uint8_t *out, size_t cap)
{
    if (f->rev != 1 && f->rev != 2)
        return 0;
    size_t word = f->enhanced ? MPA_ENH_LEN : 0;
    size_t pd_length = word + f->pd_len;
    if (pd_length > MPA_PD_MAX)
        return 0;
    /* The word's fields only reach the wire when S is set; otherwise they
     * are ignored rather than policed. */
    if (f->enhanced) {
        if (f->rev < 2 || f->ird > MPA_IRD_ORD_MASK || f->ord > MPA_IRD_ORD_MASK)
            return 0;
        if ((f->rtr & ~RTR_ALL) || (f->rtr && !f->p2p))
            return 0;
    }
    if (f->pd_len && !f->pd)
        return 0;
    size_t n = MPA_HDR_LEN + pd_length;
    if (!out || cap < n)
        return 0;

    /* The PD goes first so that a pd that already sits at its final place
     * inside out (or overlaps it) survives the header writes. */
    if (f->pd_len)
        memmove(out + MPA_HDR_LEN + word, f->pd, f->pd_len);
    memcpy(out, f->reply ? key_rep : key_req, MPA_KEY_LEN);
    out[16] = (uint8_t)((f->markers ? MPA_FLAG_M : 0) | (f->crc ? MPA_FLAG_C : 0) |
                        (f->reject ? MPA_FLAG_R : 0) | (f->enhanced ? MPA_FLAG_S : 0));
    out[17] = f->rev;
    ddp_wr16(out + 18, (uint16_t)pd_length);
    if (f->enhanced) {
        uint16_t w0 = (uint16_t)((f->p2p ? ENH_A : 0) | ((f->rtr & MPA_RTR_SEND) ? ENH_B : 0) |
                                 f->ird);
        uint16_t w1 = (uint16_t)(((f->rtr & MPA_RTR_WRITE) ? ENH_C : 0) |
                                 ((f->rtr & MPA_RTR_READ) ? ENH_D : 0) | f->ord);
        ddp_wr16(out + 20, w0);
        ddp_wr16(out + 22, w1);
    }
    return n;
}

void mpa_reader_init(struct mpa_reader *r, bool expect_reply, uint16_t pd_limit)
{
    memset(r, 0, sizeof(*r));
    r->expect_reply = expect_reply;
    r->pd_limit = pd_limit > MPA_PD_MAX ? MPA_PD_MAX : pd_limit;
}

/*
 * Judges what the reader holds so far. The checks run in a fixed order, each
 * as soon as its octets are in (key per octet, Rev and the Rev 1/S clash at
 * 18, PD_Length at 20), so the verdict does not depend on how the bytes were
 * split, and re-running it on a failed reader yields the same error, which
 * is what makes errors final without a separate state field.
 * *want: total octets needed before the next check can make progress.
 */
static enum mpa_result reader_check(const struct mpa_reader *r, size_t *want)
{
    const uint8_t *b = r->buf;
    const uint8_t *key = r->expect_reply ? key_rep : key_req;
    size_t have = r->have;

    if (have < MPA_KEY_LEN) {
        if (memcmp(b, key, have) != 0)
            return MPA_ERR_KEY;
        *want = MPA_KEY_LEN;
        return MPA_NEED_MORE;
    }
    if (memcmp(b, key, MPA_KEY_LEN) != 0)
        return MPA_ERR_KEY;
    if (have < 18) {
        *want = 18;
        return MPA_NEED_MORE;
    }
    uint8_t rev = b[17];
    bool enh = (b[16] & MPA_FLAG_S) != 0;
    if (rev != 1 && rev != 2)
        return MPA_ERR_REV;
    if (enh && rev < 2)
        return MPA_ERR_ENH;
    if (have < MPA_HDR_LEN) {
        *want = MPA_HDR_LEN;
        return MPA_NEED_MORE;
    }
    size_t pd_length = ddp_rd16(b + 18);
    /* Re-clamped here because the field is public and may be set directly. */
    size_t limit = r->pd_limit > MPA_PD_MAX ? MPA_PD_MAX : r->pd_limit;
    if (pd_length > limit)
        return MPA_ERR_PD_LEN;
    if (enh && pd_length < MPA_ENH_LEN)
        return MPA_ERR_ENH;
    *want = MPA_HDR_LEN + pd_length;
    return have < *want ? MPA_NEED_MORE : MPA_DONE;
}

static void reader_describe(const struct mpa_reader *r, struct mpa_frame *f)
{
    const uint8_t *b = r->buf;
    uint8_t flags = b[16];
    uint16_t pd_length = ddp_rd16(b + 18);

    memset(f, 0, sizeof(*f));
    f->reply = r->expect_reply;
    f->markers = (flags & MPA_FLAG_M) != 0;
    f->crc = (flags & MPA_FLAG_C) != 0;
    f->reject = (flags & MPA_FLAG_R) != 0;
    f->enhanced = (flags & MPA_FLAG_S) != 0;
    f->rev = b[17];
    if (f->enhanced) {
        uint16_t w0 = ddp_rd16(b + 20), w1 = ddp_rd16(b + 22);
        f->p2p = (w0 & ENH_A) != 0;
        /* RFC 6581: with A=0, B/C/D are to be ignored on receipt. */
        if (f->p2p)
            f->rtr = (uint8_t)(((w0 & ENH_B) ? MPA_RTR_SEND : 0) |
                               ((w1 & ENH_C) ? MPA_RTR_WRITE : 0) |
                               ((w1 & ENH_D) ? MPA_RTR_READ : 0));
        f->ird = w0 & MPA_IRD_ORD_MASK;
        f->ord = w1 & MPA_IRD_ORD_MASK;
        f->pd = b + MPA_HDR_LEN + MPA_ENH_LEN;
        f->pd_len = (uint16_t)(pd_length - MPA_ENH_LEN);
    } else {
        f->pd = b + MPA_HDR_LEN;
        f->pd_len = pd_length;
    }
}

const char *mpa_result_describe(enum mpa_result r)
{
    switch (r) {
    case MPA_ERR_KEY: return "wrong key";
    case MPA_ERR_REV: return "unknown revision";
    case MPA_ERR_PD_LEN: return "private data too long";
    case MPA_ERR_ENH: return "bad enhanced (RFC 6581) header";
    default: return "no error";
    }
}

enum mpa_result mpa_reader_feed(struct mpa_reader *r, const uint8_t *data, size_t len,
                                size_t *consumed, struct mpa_frame *out)
{
    size_t used = 0, want = 0;
    enum mpa_result res = reader_check(r, &want);
    /* Copy only up to the next check point: that way nothing past the
     * frame's end (or past the octet that proved it bad) is ever taken. */
    while (res == MPA_NEED_MORE && used < len) {
        size_t take = want - r->have;
        if (take > len - used)
            take = len - used;
        memcpy(r->buf + r->have, data + used, take);
        r->have += take;
        used += take;
        res = reader_check(r, &want);
    }
    if (consumed)
        *consumed = used;
    if (res == MPA_DONE && out)
        reader_describe(r, out);
    return res;
}

uint8_t mpa_choose_rtr(const struct mpa_frame *request, bool read_rtr_ok)
{
    if (!request->enhanced || !request->p2p)
        return 0;
    if (request->rtr & MPA_RTR_WRITE)
        return MPA_RTR_WRITE;
    if ((request->rtr & MPA_RTR_READ) && read_rtr_ok)
        return MPA_RTR_READ;
    /* Nothing usable offered: name Write anyway and let the Initiator send
     * TERM (2,0,7) if it cannot comply (RFC 6581). */
    return MPA_RTR_WRITE;
}

/* ---- FPDU framing ---- */

size_t mpa_mulpdu(size_t emss)
{
    size_t overhead = 6 + (emss & 3);
    if (emss <= overhead)
        return 0;
    size_t m = emss - overhead;
    /* ULPDU_Length is a 16-bit field, whatever the MSS. */
    return m > 0xFFFF ? 0xFFFF : m;
}

void mpa_crc_store(uint32_t reg, uint8_t out[4])
{
    uint32_t v = crc32c_final(reg);
    out[0] = (uint8_t)v;
    out[1] = (uint8_t)(v >> 8);
    out[2] = (uint8_t)(v >> 16);
    out[3] = (uint8_t)(v >> 24);
}

size_t mpa_fpdu_build(const uint8_t *ulpdu, size_t ulpdu_len, bool crc, uint8_t *out, size_t cap)
{
    if (ulpdu_len > 0xFFFF)
        return 0;
    if (ulpdu_len && !ulpdu)
        return 0;
    size_t n = mpa_fpdu_len(ulpdu_len);
    if (!out || cap < n)
        return 0;
    /* ULPDU first: a caller may have laid it out in place at out + 2 (or at
     * out), and memmove keeps that working before the length lands. */
    if (ulpdu_len)
        memmove(out + 2, ulpdu, ulpdu_len);
    ddp_wr16(out, (uint16_t)ulpdu_len);
    size_t body = 2 + ulpdu_len;
    size_t pad = mpa_pad_len(ulpdu_len);
    memset(out + body, 0, pad);
    body += pad;
    if (crc)
        mpa_crc_store(crc32c_update(crc32c_init(), out, body), out + body);
    else
        memset(out + body, 0, 4);
    return n;
}

enum mpa_fpdu_result mpa_fpdu_peek(const uint8_t *buf, size_t len, bool crc, size_t min_ulpdu,
                                   size_t *fpdu_len, const uint8_t **ulpdu, size_t *ulpdu_len)
{
    if (!buf || len < 2)
        return MPA_FPDU_NEED_MORE;
    size_t ul = ddp_rd16(buf);
    /* Judged from the length field alone, so a bogus header is reported
     * without waiting for octets that may never come. */
    if (ul < min_ulpdu)
        return MPA_FPDU_ERR_LENGTH;
    size_t n = mpa_fpdu_len(ul);
    if (len < n)
        return MPA_FPDU_NEED_MORE;
    if (crc) {
        size_t body = n - 4;
        uint32_t want = crc32c(buf, body);
        uint32_t got = (uint32_t)buf[body] | (uint32_t)buf[body + 1] << 8 |
                       (uint32_t)buf[body + 2] << 16 | (uint32_t)buf[body + 3] << 24;
        if (want != got)
            return MPA_FPDU_ERR_CRC;
    }
    if (fpdu_len)
        *fpdu_len = n;
    if (ulpdu)
        *ulpdu = buf + 2;
    if (ulpdu_len)
        *ulpdu_len = ul;
    return MPA_FPDU_OK;
}

/* ---- control FPDUs of connection set-up ---- */

size_t mpa_build_write_rtr(bool crc, uint8_t out[20])
{
    uint8_t u[ULPDU_TAGGED_HDR];
    /* STag 1 is a placeholder: a zero-length Write is not validated. */
    ddp_encode_tagged(u, sizeof u, RDMAP_OP_WRITE, true, 1, 0);
    return mpa_fpdu_build(u, sizeof(u), crc, out, 20);
}

size_t mpa_build_read_rtr(bool crc, uint8_t out[52])
{
    uint8_t u[ULPDU_READ_REQ];
    /* Source STag 1: a placeholder, unchecked for size 0. */
    const struct rdmap_rreq rr = {.src_stag = 1};
    rdmap_encode_read_request(u, sizeof u, 1, &rr);
    return mpa_fpdu_build(u, sizeof(u), crc, out, 52);
}

size_t mpa_build_read_response0(uint32_t sink_stag, uint64_t sink_to, bool crc, uint8_t out[20])
{
    uint8_t u[ULPDU_TAGGED_HDR];
    ddp_encode_tagged(u, sizeof u, RDMAP_OP_READ_RESP, true, sink_stag, sink_to);
    return mpa_fpdu_build(u, sizeof(u), crc, out, 20);
}

size_t mpa_build_term_simple(uint8_t layer, uint8_t etype, uint8_t code, bool crc, uint8_t out[28])
{
    uint8_t u[ULPDU_TERM_SIMPLE];
    /* Only one Terminate is ever sent per stream, hence MSN 1. */
    ddp_encode_untagged(u, sizeof u, RDMAP_OP_TERMINATE, true, 0, DDP_QN_TERMINATE, 1, 0);
    ddp_wr32(u + DDP_UNTAGGED_HDR_LEN, term_ctrl_pack(layer, etype, code, false, false, false));
    return mpa_fpdu_build(u, sizeof(u), crc, out, 28);
}

/*
 * Only the exact RTR shapes qualify; anything else is OTHER and goes to the
 * normal receive path, which validates it fully and answers with the proper
 * Terminate. So this check can be strict without losing error reporting.
 */
void mpa_classify_first_fpdu(const uint8_t *ulpdu, size_t ulpdu_len, struct mpa_rtr_info *info)
{
    memset(info, 0, sizeof(*info));
    info->kind = MPA_RTR_KIND_OTHER;
    if (!ulpdu || ulpdu_len < 2)
        return;
    uint8_t ddp = ulpdu[0], rdmap = ulpdu[1];
    /* Single-segment messages of the current versions only; the Rsvd bits
     * are ignored as the RFCs ask. */
    if (!(ddp & DDP_CTRL_L) || (ddp & DDP_CTRL_DV_MASK) != DDP_VERSION ||
        (rdmap & RDMAP_CTRL_RV_MASK) >> RDMAP_CTRL_RV_SHIFT != RDMAP_VERSION)
        return;
    bool tagged = (ddp & DDP_CTRL_T) != 0;
    uint8_t op = rdmap & RDMAP_CTRL_OP_MASK;

    if (tagged) {
        if (op == RDMAP_OP_WRITE && ulpdu_len == ULPDU_TAGGED_HDR)
            info->kind = MPA_RTR_KIND_WRITE0;
        return;
    }
    if (op == RDMAP_OP_READ_REQ && ulpdu_len == ULPDU_READ_REQ) {
        if (ddp_rd32(ulpdu + 6) != DDP_QN_READ_REQ || ddp_rd32(ulpdu + 14) != 0 || ddp_rd32(ulpdu + 30) != 0)
            return;
        info->kind = MPA_RTR_KIND_READ0;
        info->msn = ddp_rd32(ulpdu + 10);
        info->sink_stag = ddp_rd32(ulpdu + 18);
        info->sink_to = ddp_rd64(ulpdu + 22);
        return;
    }
    if (op == RDMAP_OP_SEND && ulpdu_len == ULPDU_UNTAGGED_HDR) {
        if (ddp_rd32(ulpdu + 6) != DDP_QN_SEND || ddp_rd32(ulpdu + 14) != 0)
            return;
        info->kind = MPA_RTR_KIND_SEND0;
        info->msn = ddp_rd32(ulpdu + 10);
    }
}
