/* The MPA negotiation of connection set-up, sans-IO (mpa_negotiation.h). */
#include "wire/mpa_negotiation.h"

#include <string.h>

#include "wire/ddp.h"
#include "wire/term.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* The MPA error codes of a Terminate (layer 2, the LLP; type 0): RFC 5044
 * (the CRC), RFC 6581 (IRD, RTR). */
#define TERM_CODE_CRC 0x02       /* CRC error in the RTR */
#define TERM_CODE_NO_IRD 0x06    /* the peer's ORD exceeds any IRD we can hold */
#define TERM_CODE_NO_RTR 0x07    /* no RTR type both sides support (RFC 6581) */

static uint32_t cap(uint32_t v, uint32_t max)
{
    return v > max ? max : v;
}

static void reset(struct mpa_neg *n, bool initiator, uint16_t max_ird, uint16_t max_ord)
{
    memset(n, 0, sizeof *n);
    n->initiator = initiator;
    n->max_ird = max_ird;
    n->max_ord = max_ord;
    mpa_reader_init(&n->reader, initiator, MPA_PD_MAX);
}

static bool put_frame(struct mpa_neg *n, const struct mpa_frame *f)
{
    n->out_len = mpa_frame_encode(f, n->out, sizeof n->out);
    return n->out_len != 0;
}

static void put_term(struct mpa_neg *n, uint8_t code)
{
    n->term_code = code;
    n->out_len = mpa_build_term_simple(2, 0, code, n->crc, n->out);
}

static enum mpa_neg_event fail(struct mpa_neg *n, enum mpa_neg_event ev)
{
    n->state = MPA_NEG_FAILED;
    return ev;
}

bool mpa_neg_start_initiator(struct mpa_neg *n, const struct mpa_neg_request *req)
{
    reset(n, true, req->max_ird, req->max_ord);
    n->want_ird = cap(req->ird, req->max_ird);
    n->want_ord = cap(req->ord, req->max_ord);
    n->crc = req->crc;
    n->sent_enhanced = !req->rev1;
    bool p2p = !req->rev1 && req->p2p;
    struct mpa_frame f = {
        .reply = false,
        .crc = n->crc,
        .enhanced = !req->rev1,
        .rev = req->rev1 ? 1 : 2,
        .p2p = p2p,
        .rtr = p2p ? (uint8_t)(MPA_RTR_WRITE | (n->want_ord >= 1 ? MPA_RTR_READ : 0)) : 0,
        .ird = (uint16_t)n->want_ird,
        .ord = (uint16_t)n->want_ord,
        .pd = req->pd,
        .pd_len = req->pd_len,
    };
    n->state = MPA_NEG_WAIT_REPLY;
    return put_frame(n, &f);
}

void mpa_neg_start_responder(struct mpa_neg *n, uint16_t max_ird, uint16_t max_ord)
{
    reset(n, false, max_ird, max_ord);
    n->state = MPA_NEG_WAIT_REQUEST;
}

/* Octets the startup frame still needs: the header, then its private data. */
static size_t frame_want(const struct mpa_reader *r)
{
    if (r->have < MPA_HDR_LEN)
        return MPA_HDR_LEN - r->have;
    size_t total = MPA_HDR_LEN + (((size_t)r->buf[18] << 8) | r->buf[19]);
    if (total <= r->have || total - r->have > MPA_FRAME_MAX)
        return 1; /* the reader has decided already (an error) */
    return total - r->have;
}

/* The shortest FPDU that may answer our Reply: the zero-length RDMA Write
 * RTR (MPA length, 14 octets of tagged DDP header, CRC: 20 octets, what
 * mpa_build_write_rtr writes). A Read RTR (52) and a Terminate (at least
 * 28) are longer. */
#define RTR_FPDU_MIN 20u

/* The RTR: the octets every answer has, in one read when the answer is a
 * Write RTR, then the rest of the FPDU its length field gives. Asking for
 * RTR_FPDU_MIN first never takes an octet of the FPDUs that may follow a
 * well-formed RTR; after a shorter, malformed one it may, and the
 * connection fails on it all the same (on_rtr). */
static size_t rtr_want(const struct mpa_neg *n)
{
    size_t whole = n->rtr_have < 4 ? 0 : mpa_fpdu_len(ddp_rd16(n->rtr_buf));
    if (whole < RTR_FPDU_MIN)
        whole = RTR_FPDU_MIN;
    return whole > n->rtr_have ? whole - n->rtr_have : 0;
}

size_t mpa_neg_want(const struct mpa_neg *n)
{
    switch (n->state) {
    case MPA_NEG_WAIT_REQUEST:
    case MPA_NEG_WAIT_REPLY:
        return frame_want(&n->reader);
    case MPA_NEG_WAIT_RTR:
        return rtr_want(n);
    default:
        return 0;
    }
}

static void keep_peer_pd(struct mpa_neg *n, const struct mpa_frame *f)
{
    n->peer_pd_off = (uint16_t)(f->pd ? f->pd - n->reader.buf : 0);
    n->peer_pd_len = f->pd_len;
}

/* The responder's reading of a Request (RFC 6581 section 9.1). */
static enum mpa_neg_event on_request(struct mpa_neg *n, const struct mpa_frame *req)
{
    n->rev = req->rev;
    n->enhanced = req->enhanced;
    n->crc = req->crc;
    if (req->markers) {
        /* We cannot insert markers: RFC 5044 section 7.1 asks for a
         * rejecting Reply. */
        struct mpa_frame rep = {
            .reply = true, .reject = true, .crc = req->crc, .enhanced = req->enhanced, .rev = req->rev,
        };
        put_frame(n, &rep);
        return fail(n, MPA_NEG_MARKERS);
    }
    n->p2p = req->enhanced && req->p2p;
    n->rtr = n->p2p ? mpa_choose_rtr(req, true) : 0;
    if (req->enhanced) {
        /* 0x3FFF asks us not to negotiate: our maxima then stand. */
        n->peer_ird = req->ird == MPA_IRD_ORD_MASK ? n->max_ord : req->ird;
        n->peer_ord = req->ord == MPA_IRD_ORD_MASK ? n->max_ird : req->ord;
    } else {
        n->peer_ird = n->max_ord;
        n->peer_ord = n->max_ird;
    }
    keep_peer_pd(n, req);
    n->state = MPA_NEG_REQUESTED;
    return MPA_NEG_GOT_REQUEST;
}

/* The initiator's reading of a Reply. */
static enum mpa_neg_event on_reply(struct mpa_neg *n, const struct mpa_frame *rep)
{
    if (rep->markers || (n->sent_enhanced && (!rep->enhanced || rep->rev < 2)) ||
        (!n->sent_enhanced && rep->enhanced)) {
        /* We cannot insert markers, and an enhanced Request needs an
         * enhanced Reply (RFC 6581; siw fails the same way). */
        return fail(n, MPA_NEG_UNUSABLE);
    }
    n->rev = rep->rev;
    n->enhanced = rep->enhanced;
    n->crc = n->crc || rep->crc;
    keep_peer_pd(n, rep);
    /* RFC 6581: the responder's IRD bounds our ORD and its ORD our IRD;
     * 0x3FFF means "not negotiated", so the local value stands. */
    if (rep->enhanced) {
        n->peer_ird = rep->ird;
        n->peer_ord = rep->ord;
        n->eff_ord = rep->ird == MPA_IRD_ORD_MASK ? n->want_ord : MIN(n->want_ord, rep->ird);
        n->eff_ird = rep->ord == MPA_IRD_ORD_MASK ? n->want_ird : MIN(n->want_ird, rep->ord);
    } else {
        n->eff_ord = n->want_ord;
        n->eff_ird = n->want_ird;
    }
    if (rep->reject)
        return fail(n, MPA_NEG_PEER_REJECTED);
    if (rep->enhanced && rep->ord != MPA_IRD_ORD_MASK && rep->ord > n->max_ird) {
        /* The responder would send more reads than we can ever hold. */
        put_term(n, TERM_CODE_NO_IRD);
        return fail(n, MPA_NEG_REFUSED_TERM);
    }
    n->p2p = false;
    n->rtr = 0;
    if (rep->enhanced && rep->p2p) {
        uint8_t offered = MPA_RTR_WRITE | (n->want_ord >= 1 ? MPA_RTR_READ : 0);
        uint8_t common = rep->rtr & offered;
        if (!common) {
            put_term(n, TERM_CODE_NO_RTR);
            return fail(n, MPA_NEG_REFUSED_TERM);
        }
        n->p2p = true;
        n->rtr = (common & MPA_RTR_WRITE) ? MPA_RTR_WRITE : MPA_RTR_READ;
    }
    n->state = MPA_NEG_REPLIED;
    return MPA_NEG_GOT_REPLY;
}

static enum mpa_neg_event feed_frame(struct mpa_neg *n, const uint8_t *data, size_t len, size_t *used)
{
    struct mpa_frame f;
    enum mpa_result r = mpa_reader_feed(&n->reader, data, len, used, &f);
    if (r < 0) {
        n->frame_error = r;
        return fail(n, MPA_NEG_MALFORMED);
    }
    if (r != MPA_DONE)
        return MPA_NEG_MORE;
    n->peer_frame = f;
    return n->initiator ? on_reply(n, &f) : on_request(n, &f);
}

/* Is the FPDU whose first 4 octets are at p a Terminate (untagged, RDMAP
 * opcode 7)? */
static bool fpdu_is_terminate(const uint8_t *p)
{
    return !(p[2] & DDP_CTRL_T) && (p[3] & RDMAP_CTRL_OP_MASK) == RDMAP_OP_TERMINATE;
}

/* The initiator answered our Reply with a Terminate instead of its RTR (say
 * no RTR type it can use, or not enough IRD). RFC 5040 section 7: a
 * Terminate is never answered with one. */
static enum mpa_neg_event rtr_terminated(struct mpa_neg *n)
{
    if (n->rtr_have >= 2 + TERM_LEN_CTRL_ONLY) {
        size_t ulpdu = ddp_rd16(n->rtr_buf);
        struct term_msg m;
        term_decode(n->rtr_buf + 2, MIN(ulpdu, n->rtr_have - 2), &m);
        n->term_decoded = true;
        n->peer_term_layer = m.layer;
        n->peer_term_etype = m.etype;
        n->peer_term_code = m.code;
    }
    return fail(n, MPA_NEG_PEER_TERMINATED);
}

static enum mpa_neg_event bad_rtr(struct mpa_neg *n, uint8_t code)
{
    put_term(n, code);
    return fail(n, MPA_NEG_BAD_RTR);
}

/* A whole FPDU is in rtr_buf: is it an RTR we offered (RFC 6581)? */
static enum mpa_neg_event on_rtr(struct mpa_neg *n)
{
    if (fpdu_is_terminate(n->rtr_buf))
        return rtr_terminated(n);
    size_t fpdu_len, ulpdu_len;
    const uint8_t *ulpdu;
    enum mpa_fpdu_result fr = mpa_fpdu_peek(n->rtr_buf, n->rtr_have, n->crc, 14, &fpdu_len, &ulpdu, &ulpdu_len);
    if (fr == MPA_FPDU_NEED_MORE)
        return MPA_NEG_MORE;
    if (fr == MPA_FPDU_ERR_CRC)
        return bad_rtr(n, TERM_CODE_CRC);
    if (fr != MPA_FPDU_OK)
        return bad_rtr(n, TERM_CODE_NO_RTR);
    struct mpa_rtr_info info;
    mpa_classify_first_fpdu(ulpdu, ulpdu_len, &info);
    if (info.kind == MPA_RTR_KIND_READ0) {
        n->read_rtr = true;
        n->out_len = mpa_build_read_response0(info.sink_stag, info.sink_to, n->crc, n->out);
    } else if (info.kind != MPA_RTR_KIND_WRITE0) {
        return bad_rtr(n, TERM_CODE_NO_RTR);
    }
    n->state = MPA_NEG_DONE;
    return MPA_NEG_GOT_RTR;
}

/* Takes octets of the first FPDU after the Reply until it is whole, or
 * its first 4 octets already decide. */
static enum mpa_neg_event feed_rtr(struct mpa_neg *n, const uint8_t *data, size_t len, size_t *used)
{
    for (size_t want; (want = rtr_want(n)) != 0 && *used < len;) {
        /* The length field first, however much the read brought: an FPDU
         * too long for an RTR is refused at its 4th octet, as when the
         * octets come one by one. */
        size_t step = n->rtr_have < 4 ? 4 - n->rtr_have : want;
        size_t take = MIN(len - *used, step);
        memcpy(n->rtr_buf + n->rtr_have, data + *used, take);
        n->rtr_have += take;
        *used += take;
        if (n->rtr_have >= 4 && mpa_fpdu_len(ddp_rd16(n->rtr_buf)) > sizeof n->rtr_buf) {
            /* Longer than any RTR or Terminate: malformed, and a Terminate
             * still never answered. */
            return fpdu_is_terminate(n->rtr_buf) ? rtr_terminated(n) : bad_rtr(n, TERM_CODE_NO_RTR);
        }
    }
    return rtr_want(n) ? MPA_NEG_MORE : on_rtr(n);
}

enum mpa_neg_event mpa_neg_feed(struct mpa_neg *n, const uint8_t *data, size_t len, size_t *used)
{
    *used = 0;
    switch (n->state) {
    case MPA_NEG_WAIT_REQUEST:
    case MPA_NEG_WAIT_REPLY:
        return feed_frame(n, data, len, used);
    case MPA_NEG_WAIT_RTR:
        return feed_rtr(n, data, len, used);
    default:
        return MPA_NEG_MORE;
    }
}

bool mpa_neg_accept(struct mpa_neg *n, uint32_t ird, uint32_t ord, bool want_crc, const uint8_t *pd,
                    uint16_t pd_len)
{
    n->want_ird = cap(ird, n->max_ird);
    n->want_ord = cap(ord, n->max_ord);
    n->eff_ird = MIN(n->want_ird, n->peer_ord);
    n->eff_ord = MIN(n->want_ord, n->peer_ird);
    n->crc = n->crc || want_crc;
    struct mpa_frame rep = {
        .reply = true,
        .crc = n->crc,
        .enhanced = n->enhanced,
        .rev = n->rev,
        .p2p = n->p2p,
        .rtr = n->rtr,
        .ird = (uint16_t)n->eff_ird,
        .ord = (uint16_t)n->eff_ord,
        .pd = pd,
        .pd_len = pd_len,
    };
    n->rtr_have = 0;
    n->state = n->p2p ? MPA_NEG_WAIT_RTR : MPA_NEG_DONE;
    return put_frame(n, &rep);
}

void mpa_neg_responder_limits(const struct mpa_neg *n, uint32_t *ird, uint32_t *ord)
{
    *ird = MIN(n->max_ird, n->peer_ord);
    *ord = MIN(n->max_ord, n->peer_ird);
}

bool mpa_neg_reject(struct mpa_neg *n, const uint8_t *pd, uint16_t pd_len)
{
    uint32_t ird, ord;
    mpa_neg_responder_limits(n, &ird, &ord);
    struct mpa_frame rep = {
        .reply = true,
        .reject = true,
        .crc = n->crc,
        .enhanced = n->enhanced,
        .rev = n->rev,
        .ird = (uint16_t)ird,
        .ord = (uint16_t)ord,
        .pd = pd,
        .pd_len = pd_len,
    };
    n->state = MPA_NEG_FAILED;
    return put_frame(n, &rep);
}

void mpa_neg_complete(struct mpa_neg *n)
{
    if (n->p2p) {
        n->read_rtr = n->rtr == MPA_RTR_READ;
        n->out_len = n->read_rtr ? mpa_build_read_rtr(n->crc, n->out) : mpa_build_write_rtr(n->crc, n->out);
    }
    n->state = MPA_NEG_DONE;
}

const uint8_t *mpa_neg_output(struct mpa_neg *n, size_t *len)
{
    *len = n->out_len;
    n->out_len = 0;
    return n->out;
}

const uint8_t *mpa_neg_peer_pd(const struct mpa_neg *n, uint16_t *len)
{
    *len = n->peer_pd_len;
    return n->reader.buf + n->peer_pd_off;
}
