/*
 * mpa_negotiation.h - the MPA negotiation of connection set-up, both roles,
 * sans-IO (RFC 5044 section 7, RFC 6581):
 *
 *   initiator: Request out; Reply in (checked, IRD/ORD negotiated); the RTR
 *              out on completion (peer-to-peer);
 *   responder: Request in; Reply or rejecting Reply out; the RTR in (a
 *              zero-length Write, or a zero-length Read answered with its
 *              Read Response), or a Terminate in its place.
 *
 * The caller owns the byte stream, the timers and the NDK statuses: it reads
 * at most mpa_neg_want() octets at a time (so no byte behind a startup frame
 * or the RTR is ever taken from the data path), feeds them, sends what
 * mpa_neg_output() holds, and acts on the event each step returns. No
 * sockets, clocks, locks or allocation; a negotiation is plain data and may
 * be copied (mpa_neg_peer_pd is then read from the copy).
 */
#ifndef NDK_WIRE_MPA_NEGOTIATION_H
#define NDK_WIRE_MPA_NEGOTIATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/mpa.h"

enum mpa_neg_state {
    MPA_NEG_IDLE,
    MPA_NEG_WAIT_REQUEST, /* responder: reading the Request */
    MPA_NEG_REQUESTED,    /* responder: Request read; mpa_neg_accept or mpa_neg_reject next */
    MPA_NEG_WAIT_REPLY,   /* initiator: Request built; reading the Reply */
    MPA_NEG_REPLIED,      /* initiator: Reply taken; mpa_neg_complete next */
    MPA_NEG_WAIT_RTR,     /* responder: Reply built; reading the RTR */
    MPA_NEG_DONE,         /* negotiated: what follows on the stream is FPDUs */
    MPA_NEG_FAILED,       /* refused, rejected or a protocol error: final */
};

/* What a step decided. Events past MPA_NEG_GOT_RTR end the negotiation
 * (state MPA_NEG_FAILED); those that say "out" left a frame to send in
 * mpa_neg_output before the stream is closed. */
enum mpa_neg_event {
    MPA_NEG_MORE = 0,        /* nothing decided: feed more octets */
    MPA_NEG_GOT_REQUEST,     /* responder: a usable Request (the peer_* fields) */
    MPA_NEG_GOT_REPLY,       /* initiator: the peer accepted; p2p/rtr say the third leg */
    MPA_NEG_GOT_RTR,         /* responder: the RTR arrived (a Read RTR: its Read Response out) */
    MPA_NEG_MALFORMED,       /* a startup frame that cannot be read (frame_error says why) */
    MPA_NEG_MARKERS,         /* responder: the Request wants markers; out: the rejecting Reply */
    MPA_NEG_UNUSABLE,        /* initiator: a Reply with markers, or not answering our S bit */
    MPA_NEG_PEER_REJECTED,   /* initiator: R=1 (its private data stays readable) */
    MPA_NEG_REFUSED_TERM,    /* initiator: the Reply cannot be lived with; out: a Terminate */
    MPA_NEG_BAD_RTR,         /* responder: no usable RTR (or a CRC error); out: a Terminate */
    MPA_NEG_PEER_TERMINATED, /* responder: a Terminate in place of the RTR (never answered) */
};

/* The initiator's choices (NdkConnect and the adapter's open flags). */
struct mpa_neg_request {
    bool rev1;            /* MPA revision 1, no RFC 6581 word */
    bool p2p;             /* peer-to-peer (A=1) when enhanced */
    bool crc;             /* ask for CRC */
    uint32_t ird, ord;    /* as the consumer asked; capped at the maxima */
    uint16_t max_ird, max_ord;
    const uint8_t *pd;
    uint16_t pd_len;
};

struct mpa_neg {
    enum mpa_neg_state state;
    bool initiator;
    bool sent_enhanced;          /* initiator: our Request carried the RFC 6581 word */
    uint16_t max_ird, max_ord;   /* the local maxima */

    /* Negotiated (or, before the peer's frame, offered) parameters. */
    bool crc, p2p, enhanced;
    uint8_t rev, rtr;            /* rtr: the MPA_RTR_* type chosen, 0 without p2p */
    bool read_rtr;               /* the Read RTR was used (initiator: sent; responder: received) */
    uint32_t want_ird, want_ord; /* the local values, capped at the maxima */
    uint32_t peer_ird, peer_ord; /* the peer's frame's (responder: unknown = our maxima) */
    uint32_t eff_ird, eff_ord;   /* what the connection runs with */

    /* Why a step failed, for logs. */
    enum mpa_result frame_error; /* MPA_NEG_MALFORMED */
    struct mpa_frame peer_frame; /* the peer's last startup frame as read (its pd
                                    pointer only while n is not copied: use
                                    mpa_neg_peer_pd) */
    uint8_t term_code;           /* MPA_NEG_REFUSED_TERM, MPA_NEG_BAD_RTR: (2,0,term_code) sent */
    bool term_decoded;           /* MPA_NEG_PEER_TERMINATED: its control word, decoded */
    uint8_t peer_term_layer, peer_term_etype, peer_term_code;

    /* Input being read. */
    struct mpa_reader reader;
    uint16_t peer_pd_off, peer_pd_len; /* the peer's private data, in reader.buf */
    uint8_t rtr_buf[80];         /* the RTR FPDU (at most 52) or a Terminate (at most 76) */
    size_t rtr_have;

    /* A frame to send. */
    uint8_t out[MPA_FRAME_MAX];
    size_t out_len;
};

/* Initiator: builds the Request into the output. Returns false when it
 * cannot be encoded (private data over the limit). */
bool mpa_neg_start_initiator(struct mpa_neg *n, const struct mpa_neg_request *req);
/* Responder: expects a Request; the maxima bound what Accept may offer. */
void mpa_neg_start_responder(struct mpa_neg *n, uint16_t max_ird, uint16_t max_ord);

/* Octets to read next (0: none wanted in this state). Never past the frame
 * or FPDU being read. */
size_t mpa_neg_want(const struct mpa_neg *n);
/* Feeds received octets; *used says how many were taken (never more than
 * mpa_neg_want() asked for). */
enum mpa_neg_event mpa_neg_feed(struct mpa_neg *n, const uint8_t *data, size_t len, size_t *used);

/* Responder, after MPA_NEG_GOT_REQUEST: the accepting Reply, with the
 * consumer's IRD/ORD (capped, then bounded by the Request's RFC 6581
 * values), into the output. The state becomes MPA_NEG_WAIT_RTR
 * (peer-to-peer) or MPA_NEG_DONE. Returns false when it cannot be encoded. */
bool mpa_neg_accept(struct mpa_neg *n, uint32_t ird, uint32_t ord, bool want_crc, const uint8_t *pd,
                    uint16_t pd_len);
/* Responder, after MPA_NEG_GOT_REQUEST: the rejecting Reply (RFC 6581
 * section 9.1: it carries the IRD/ORD we would have offered). */
bool mpa_neg_reject(struct mpa_neg *n, const uint8_t *pd, uint16_t pd_len);
/* Responder: the IRD/ORD known before (and kept after) the accept: our
 * maxima bounded by the Request (NdkGetConnectionData). */
void mpa_neg_responder_limits(const struct mpa_neg *n, uint32_t *ird, uint32_t *ord);
/* Initiator, after MPA_NEG_GOT_REPLY: the RTR (peer-to-peer) into the
 * output; the state becomes MPA_NEG_DONE. */
void mpa_neg_complete(struct mpa_neg *n);

/* The frame waiting to be sent (length in *len, 0 when none); taking it
 * empties the output, and its octets stay valid until the negotiation
 * produces its next frame. */
const uint8_t *mpa_neg_output(struct mpa_neg *n, size_t *len);
/* The private data of the peer's last frame (Request or Reply). */
const uint8_t *mpa_neg_peer_pd(const struct mpa_neg *n, uint16_t *len);

#endif
