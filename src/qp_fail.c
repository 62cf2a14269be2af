/*
 * The iWARP transport failing a connection (qp.h, qp_fatal): the Terminate
 * that names the offence, the flush of every
 * outstanding request, and the end of the stream. Below the connector's
 * entry points (qp_iwarp.c): the receive engine calls down here when a
 * check fails, and nothing here calls back up.
 */
#include "objects.h"
#include "wire/term.h"

/* Maps a received Terminate to the status of the request it condemns. */
NTSTATUS ndk_status_from_term(uint8_t layer, uint8_t etype, uint8_t code)
{
    if ((layer == TERM_LAYER_RDMAP && etype == TERM_ETYPE_RDMAP_PROTECTION) ||
        (layer == TERM_LAYER_DDP && etype == TERM_ETYPE_DDP_TAGGED)) {
        bool bounds = (layer == TERM_LAYER_RDMAP && (code == TERM_RP_BOUNDS || code == TERM_RP_TO_WRAP)) ||
                      (layer == TERM_LAYER_DDP && (code == TERM_DT_BOUNDS || code == TERM_DT_TO_WRAP));
        return bounds ? STATUS_REMOTE_RESOURCES : STATUS_ACCESS_VIOLATION;
    }
    if (layer == TERM_LAYER_DDP && etype == TERM_ETYPE_DDP_UNTAGGED &&
        (code == TERM_DU_NO_BUFFER || code == TERM_DU_TOO_LONG))
        return STATUS_REMOTE_RESOURCES;
    if (layer == TERM_LAYER_RDMAP && etype == TERM_ETYPE_RDMAP_OPERATION && code == TERM_RO_CANT_INVALIDATE)
        return STATUS_ACCESS_VIOLATION;
    return STATUS_CONNECTION_ABORTED;
}

/* The receive engine drops what comes from now on (rx_lock held). */
void qp_rx_discard_start(struct ndk_qp_dp *dp, uint64_t limit)
{
    dp->rx_st = RX_DISCARD;
    dp->rx_over = false;
    dp->rx_discard_left = limit;
}

void qp_fatal(struct ndk_qp_impl *qp, const struct ddp_term *term, const uint8_t *offender,
              size_t offender_len, bool send_term)
{
    struct ndk_qp_dp *dp = &qp->dp;
    pthread_mutex_lock(&dp->sq_lock);
    /* A Terminate that names a Terminate as its offender (a malformed one
     * we received) is not answered: it is the peer's. */
    bool was_rts = qp_enter_error(qp, !term                          ? NDK_DISCONNECT_REASON_ABORTED
                                      : send_term && !term->no_reply ? NDK_DISCONNECT_REASON_TERMINATE_SENT
                                                                     : NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
    NTSTATUS head = STATUS_CANCELLED;
    ULONG perr = 0;
    if (term) {
        /* ProviderErrorCode: the Terminate's control word as on the wire
         * (the peer's, whatever it holds, even 0; else the one we send). */
        perr = !send_term ? dp->rx_term_ctrl
                          : term_ctrl_pack(term->layer, term->etype, term->code, term->ddp_hdr, term->ddp_hdr,
                                           term->rdma_hdr);
        /* A received Terminate condemns one of our requests only if it
         * names a Read Request (term->rdma_hdr, set by the receive path):
         * Writes and Sends completed when TCP took them (RFC 5040 rule 14). */
        if (!send_term && term->rdma_hdr)
            head = ndk_status_from_term(term->layer, term->etype, term->code);
    }
    if (send_term && term && was_rts && !term->no_reply && !dp->term_len) {
        uint8_t ulpdu[80];
        uint16_t seg_len = 0;
        const uint8_t *rdma = NULL;
        if (offender && offender_len >= 2) {
            seg_len = ddp_rd16(offender);
            if (offender_len >= 2 + RDMAP_READ_REQ_ULPDU_LEN)
                rdma = offender + 2 + DDP_UNTAGGED_HDR_LEN;
        }
        size_t n = term_encode(ulpdu, sizeof ulpdu, term, seg_len, offender ? offender + 2 : NULL,
                               offender_len >= 2 ? offender_len - 2 : 0, rdma);
        if (n)
            qp_tx_terminate(qp, ulpdu, n);
    }
    if (dp->term_len && !dp->tx_dead && dp->tr) {
        /* Our Terminate goes out, then our FIN; the peer closes once it
         * read it. Until then what it sent behind the offender is read and
         * dropped: left unread it fills our receive window, and its FIN
         * never arrives (bounded in octets here, in time by the owner). */
        qp_rx_discard_start(dp, RX_DISCARD_MAX_OCTETS);
    }
    qp_flush_sq(qp, head, perr);
    pthread_mutex_unlock(&dp->sq_lock);
    qp_flush_rx_message(qp);
    qp_flush_rq(qp);
    pthread_mutex_lock(&dp->sq_lock);
    /* With a Terminate the transmit engine sends it, then our FIN, and the
     * owner waits for the peer to close; without one the stream just ends. */
    if (!dp->term_len && dp->tr && was_rts)
        dp->tr->ops->failed(dp->tr, false);
    pthread_mutex_unlock(&dp->sq_lock);
}
