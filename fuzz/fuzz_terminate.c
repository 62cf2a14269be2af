/*
 * libFuzzer target for the Terminate decoder (wire/term.c) and for what the
 * receive engine does with a Terminate it receives (qp_rx.c on_terminate).
 *
 * Input:
 *   [0] bits 0-2 the offender the Terminate copies (the layout a peer
 *       would send, RFC 5040 section 7.1; ULPDU length in brackets):
 *         0 none [22]     1 our Read 1, DDP + RDMA header [70]
 *         2 our Read 1, DDP header [42]      3 our Read 2 [70]
 *         4 our Read 2 [42]   5 our Send [42]
 *         6 a tagged header naming Read 1's sink [38]
 *         7 raw: the octets after [4] are the whole ULPDU (up to 80)
 *       bit 3 deliver it to a QP (else: the decoder alone)
 *       bit 4 CRC on; bit 5 the Terminate's CRC is wrong
 *   [1..4] the Terminate Control word (layer, type, code, M/D/R, reserved)
 *   then (offenders 0-6) pairs (position, value) XORed into the ULPDU, so
 *   any field can be damaged, the Terminate's own header included.
 *
 * The decoder, on every ULPDU: term_decode's verdict and every field it
 * reports are checked against the octets read independently (RFC 5040
 * section 7 layout; the length alone says which parts are present); no
 * octet past the ULPDU is read (the ULPDU sits in a heap block of its exact
 * size); term_describe names every RFC 5040/5041/5044/6581 triple and only
 * those; ndk_status_from_term follows docs/behaviour.md ("Completions").
 *
 * The QP (started on an in-memory transport, as tests/sim does) has posted
 * Read 1, a Send, Read 2 and a receive, all transmitted; the ULPDU arrives in
 * one FPDU. Always: every request completes exactly once, the Send with
 * success (TCP took it before), and nothing lands in a Read's sink. For a
 * Terminate (its header passes ddp_decode): nothing lands anywhere, the QP
 * is in error and the receive cancelled; then, with a good CRC and a length
 * a Terminate can have, the QP sends nothing back; the Read the Terminate
 * names (by the copied DDP header's MSN, or by the RDMA header's sink STag,
 * TO and size) fails with ndk_status_from_term of the triple, the other Read
 * is cancelled; a copy that names neither puts the blame on the oldest Read;
 * both report the control word as ProviderErrorCode. With a wrong CRC (RFC
 * 5044 section 8: the FPDU is not passed on) or a length over 70, the
 * contents choose nothing: both Reads are cancelled.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ensure.h"
#include "objects.h"
#include "quiet_adapter.h"
#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/term.h"

/* ---- the decoder against the layout ---- */

/* The triples the RFCs define (RFC 5040 7.2, RFC 5041 7.2, RFC 5044 8 and
 * RFC 6581 for the last two LLP codes); RDMAP local catastrophic takes any
 * code. */
static bool rfc_triple(uint8_t layer, uint8_t etype, uint8_t code)
{
    static const uint8_t rdmap_prot[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x09, 0xFF};
    static const uint8_t rdmap_op[] = {0x05, 0x06, 0x07, 0x08, 0x09, 0xFF};
    static const uint8_t ddp_tagged[] = {0x00, 0x01, 0x02, 0x03, 0x04};
    static const uint8_t ddp_untagged[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06};
    static const uint8_t llp[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07};
    const uint8_t *set = NULL;
    size_t n = 0;
#define SET(a) (set = (a), n = sizeof(a))
    if (layer == 0 && etype == 0)
        return true;
    if (layer == 0 && etype == 1)
        SET(rdmap_prot);
    else if (layer == 0 && etype == 2)
        SET(rdmap_op);
    else if (layer == 1 && etype == 0)
        return code == 0;
    else if (layer == 1 && etype == 1)
        SET(ddp_tagged);
    else if (layer == 1 && etype == 2)
        SET(ddp_untagged);
    else if (layer == 2 && etype == 0)
        SET(llp);
#undef SET
    return set && memchr(set, code, n) != NULL;
}

/* docs/behaviour.md: a remote protection error (RDMAP type 1, DDP tagged
 * buffer) fails the Read it names with STATUS_ACCESS_VIOLATION, a bounds or
 * TO-wrap one with STATUS_REMOTE_RESOURCES; whatever the triple, the status
 * is a failure the consumer can tell from a flush. */
static void check_status_map(uint8_t layer, uint8_t etype, uint8_t code)
{
    NTSTATUS st = ndk_status_from_term(layer, etype, code);
    ENSURE(st == STATUS_ACCESS_VIOLATION || st == STATUS_REMOTE_RESOURCES || st == STATUS_CONNECTION_ABORTED);
    bool rdmap_prot = layer == 0 && etype == 1, ddp_tagged = layer == 1 && etype == 1;
    if (rdmap_prot || ddp_tagged) {
        bool bounds = rdmap_prot ? (code == 0x01 || code == 0x04) : (code == 0x01 || code == 0x03);
        ENSURE(st == (bounds ? STATUS_REMOTE_RESOURCES : STATUS_ACCESS_VIOLATION));
    }
}

static void check_decoder(const uint8_t *p, size_t len)
{
    struct term_msg m;
    enum term_dec_result r = term_decode(p, len, &m);
    if (len < 2 || (p[0] & 0x80) || (p[1] & 0x0F) != 7) {
        ENSURE(r == TERM_DEC_NOT_TERM);
        return;
    }
    if (len < 22) {
        ENSURE(r == TERM_DEC_SHORT);
        return;
    }
    uint32_t ctrl = (uint32_t)p[18] << 24 | (uint32_t)p[19] << 16 | (uint32_t)p[20] << 8 | p[21];
    ENSURE(m.ctrl == ctrl);
    ENSURE(m.layer == p[18] >> 4 && m.etype == (p[18] & 0x0F) && m.code == p[19]);
    ENSURE(m.m == !!(p[20] & 0x80) && m.d == !!(p[20] & 0x40) && m.r == !!(p[20] & 0x20));
    ENSURE(!!(m.anomalies & TERM_ANOM_RSVD) == ((ctrl & 0x1FFF) != 0));
    const char *name = term_describe(m.layer, m.etype, m.code);
    ENSURE(name && *name);
    ENSURE((strstr(name, "unknown") == NULL) == rfc_triple(m.layer, m.etype, m.code));
    check_status_map(m.layer, m.etype, m.code);
    /* The Terminate's own header, read raw (its checks are ddp_decode's). */
    ENSURE(m.hdr.msn == ddp_rd32(p + 10) && m.hdr.qn == ddp_rd32(p + 6) && m.hdr.mo == ddp_rd32(p + 14));

    if (len != 22 && len != 38 && len != 42 && len != 70) {
        ENSURE(r == TERM_DEC_BAD_LEN);
        ENSURE(!m.ddp_hdr_copy && !m.rdma_hdr_copy);
        return;
    }
    ENSURE(r == TERM_DEC_OK);
    size_t copy = len == 22 ? 0 : len == 38 ? 14 : 18;
    bool rdma = len == 70;
    ENSURE(m.ddp_hdr_copy_len == copy);
    ENSURE(copy ? m.ddp_hdr_copy == p + 24 : m.ddp_hdr_copy == NULL);
    ENSURE(rdma ? m.rdma_hdr_copy == p + 42 : m.rdma_hdr_copy == NULL);
    bool sloppy_flags = m.d != (copy != 0) || m.r != rdma || (m.m && !copy);
    ENSURE(!!(m.anomalies & TERM_ANOM_FLAGS) == sloppy_flags);
    if (copy) {
        const uint8_t *c = p + 24;
        ENSURE(m.seg_len == ddp_rd16(p + 22));
        ENSURE(!!(m.anomalies & TERM_ANOM_T) == (!!(c[0] & 0x80) != (copy == 14)));
        /* The layout follows the size, whatever the copied T bit says. */
        ENSURE(m.ddp.tagged == (copy == 14) && m.ddp.opcode == (c[1] & 0x0F) && m.ddp.last == !!(c[0] & 0x40));
        if (copy == 14)
            ENSURE(m.ddp.stag == ddp_rd32(c + 2) && m.ddp.to == ddp_rd64(c + 6));
        else
            ENSURE(m.ddp.inv_stag == ddp_rd32(c + 2) && m.ddp.qn == ddp_rd32(c + 6) &&
                   m.ddp.msn == ddp_rd32(c + 10) && m.ddp.mo == ddp_rd32(c + 14));
    } else {
        ENSURE(!(m.anomalies & TERM_ANOM_T));
    }
    if (rdma)
        ENSURE(m.rdma.sink_stag == ddp_rd32(p + 42) && m.rdma.sink_to == ddp_rd64(p + 46) &&
               m.rdma.size == ddp_rd32(p + 54) && m.rdma.src_stag == ddp_rd32(p + 58) &&
               m.rdma.src_to == ddp_rd64(p + 62));
}

/* ---- the QP: a transport that keeps what we send and hands over one FPDU ---- */

struct pipe_tr {
    struct ndk_transport tr;
    uint8_t out[4096];
    size_t out_len;
    const uint8_t *in;
    size_t in_len, in_off;
    bool failed;
};

static ssize_t pipe_readv(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct pipe_tr *p = (struct pipe_tr *)(void *)t;
    if (p->in_off == p->in_len)
        return p->failed ? 0 : -EAGAIN;
    size_t got = 0;
    for (int i = 0; i < n && p->in_off < p->in_len; i++) {
        size_t take = p->in_len - p->in_off < iov[i].iov_len ? p->in_len - p->in_off : iov[i].iov_len;
        memcpy(iov[i].iov_base, p->in + p->in_off, take);
        p->in_off += take;
        got += take;
    }
    return (ssize_t)got;
}

static ssize_t pipe_writev(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct pipe_tr *p = (struct pipe_tr *)(void *)t;
    if (p->failed)
        return -EPIPE;
    size_t put = 0;
    for (int i = 0; i < n; i++) {
        ENSURE(iov[i].iov_len <= sizeof p->out - p->out_len);
        memcpy(p->out + p->out_len, iov[i].iov_base, iov[i].iov_len);
        p->out_len += iov[i].iov_len;
        put += iov[i].iov_len;
    }
    return (ssize_t)put;
}

static void pipe_want_write(struct ndk_transport *t, bool on)
{
    (void)t, (void)on; /* the socket never fills up */
}

static void pipe_shutdown_write(struct ndk_transport *t)
{
    (void)t;
}

static void pipe_failed(struct ndk_transport *t, bool peer_reset)
{
    (void)peer_reset;
    ((struct pipe_tr *)(void *)t)->failed = true;
}

static const struct ndk_transport_ops pipe_ops = {
    .readv = pipe_readv,
    .writev = pipe_writev,
    .want_write = pipe_want_write,
    .shutdown_write = pipe_shutdown_write,
    .failed = pipe_failed,
};

static NDK_ADAPTER *g_ad;

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st; /* never armed */
}

enum { REQ_READ1, REQ_SEND, REQ_READ2, REQ_RECV, NREQ };
#define RECV_OFF 1000 /* the posted receive's buffer in g.buf */
#define RECV_LEN 64
#define STAGE_SIZE 128 /* the receive staging buffer (setup_once) */

/* The ULPDUs a Terminate may copy from: what we sent for each request. */
struct offenders {
    const uint8_t *u[NREQ];
    size_t len[NREQ];
};

/* Made once per process: the adapter, its PD, CQ and MR outlive every
 * input (the CQ is drained and the buffer refilled each time). Only the QP
 * is new per input, as a Terminate leaves it in error for good. */
static struct {
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_MR *mr;
    uint32_t tok;
    uint8_t buf[2048];
} g;

struct ctx {
    NDK_QP *qp;
    struct ndk_qp_impl *impl;
    struct pipe_tr pipe;
    struct offenders sent; /* our FPDUs' ULPDUs, in pipe.out */
    NDK_RESULT_EX res[NREQ];
    unsigned cqes[NREQ];
};

static void drain(struct ctx *c)
{
    NDK_RESULT_EX res[8];
    ULONG n;
    while ((n = g.cq->Dispatch->NdkGetCqResultsEx(g.cq, res, 8)) > 0) {
        for (ULONG i = 0; i < n; i++) {
            uintptr_t id = (uintptr_t)res[i].RequestContext;
            ENSURE(id >= 1 && id <= NREQ); /* no completion from nowhere */
            ENSURE(c->cqes[id - 1]++ == 0); /* never twice */
            c->res[id - 1] = res[i];
        }
    }
}

static void setup_once(void)
{
    NDK_ADAPTER *ad = g_ad;
    /* A QP here receives one FPDU of at most 2 + 80 + 2 + 4 octets, which
     * the receive engine takes in one staged read (rx_stage.h) whatever the
     * buffer's size beyond that: 128 octets instead of the default 64 KiB
     * keep every step the same, and spare each input a 64 KiB block, whose
     * allocation and release under ASan (8 KiB of shadow poisoned three
     * times) were a tenth of the run time. */
    ENSURE(ndk_test_rx_stage_set(ad, NDK_RX_STAGE_THRESHOLD, STAGE_SIZE));
    ENSURE(ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &g.pd) == STATUS_SUCCESS);
    ENSURE(ad->Dispatch->NdkCreateCq(ad, 16, cq_notify, NULL, NULL, NULL, NULL, &g.cq) == STATUS_SUCCESS);
    ENSURE(g.pd->Dispatch->NdkCreateMr(g.pd, FALSE, NULL, NULL, &g.mr) == STATUS_SUCCESS);
    MDL mdl = {.StartVa = g.buf, .ByteCount = sizeof g.buf};
    ENSURE(g.mr->Dispatch->NdkRegisterMr(g.mr, &mdl, sizeof g.buf, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, NULL, NULL) ==
           STATUS_SUCCESS);
    g.tok = g.mr->Dispatch->NdkGetLocalTokenFromMr(g.mr);
}

/* Posts the four requests; all go out at once (the socket has room). */
static void setup(struct ctx *c, bool crc)
{
    ENSURE(g.pd->Dispatch->NdkCreateQp(g.pd, g.cq, g.cq, NULL, 4, 8, 1, 1, 0, NULL, NULL, &c->qp) ==
           STATUS_SUCCESS);
    c->impl = container_of(ndk_obj_from_pub(c->qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
    memset(g.buf, 0x5C, sizeof g.buf);
    uint32_t tok = g.tok;
    c->pipe.tr.ops = &pipe_ops;
    ENSURE(ndk_qp_start(c->impl, &c->pipe.tr, crc, 4, 4, 1024, false));

    NDK_QP *qp = c->qp;
    NDK_SGE sink1 = {.VirtualAddress = g.buf, .Length = 100, .MemoryRegionToken = tok};
    NDK_SGE src = {.VirtualAddress = g.buf + 400, .Length = 20, .MemoryRegionToken = tok};
    NDK_SGE sink2 = {.VirtualAddress = g.buf + 200, .Length = 50, .MemoryRegionToken = tok};
    NDK_SGE rcv = {.VirtualAddress = g.buf + RECV_OFF, .Length = RECV_LEN, .MemoryRegionToken = tok};
    ENSURE(qp->Dispatch->NdkRead(qp, (PVOID)(REQ_READ1 + 1), &sink1, 1, 0x10000, 0x1234, 0) == STATUS_SUCCESS);
    ENSURE(qp->Dispatch->NdkSend(qp, (PVOID)(REQ_SEND + 1), &src, 1, 0) == STATUS_SUCCESS);
    ENSURE(qp->Dispatch->NdkRead(qp, (PVOID)(REQ_READ2 + 1), &sink2, 1, 0x20000, 0x5678, 0) == STATUS_SUCCESS);
    ENSURE(qp->Dispatch->NdkReceive(qp, (PVOID)(REQ_RECV + 1), &rcv, 1) == STATUS_SUCCESS);

    /* Our three FPDUs, in posting order, as the peer got them. */
    size_t pos = 0;
    for (int i = 0; i < 3; i++) {
        size_t flen = 0, ulen = 0;
        const uint8_t *u = NULL;
        ENSURE(mpa_fpdu_peek(c->pipe.out + pos, c->pipe.out_len - pos, crc, 0, &flen, &u, &ulen) == MPA_FPDU_OK);
        c->sent.u[i] = u;
        c->sent.len[i] = ulen;
        pos += flen;
    }
    ENSURE(pos == c->pipe.out_len);
    ENSURE(c->sent.len[REQ_READ1] == 46 && c->sent.len[REQ_READ2] == 46 && c->sent.len[REQ_SEND] == 18 + 20);
}

static void teardown(struct ctx *c)
{
    ENSURE(c->qp->Dispatch->NdkCloseQp(&c->qp->Header, NULL, NULL) == STATUS_SUCCESS);
    quiet_free_closed(g_ad);
}

/* The Terminate the input describes, into u (room for 80 octets); returns
 * its length. */
static size_t build_terminate(const struct offenders *o, const uint8_t *data, size_t size, uint8_t *u)
{
    size_t n = ddp_encode_untagged(u, 70, RDMAP_OP_TERMINATE, true, 0, DDP_QN_TERMINATE, 1, 0);
    ddp_wr32(u + n, ddp_rd32(data + 1));
    n += 4;
    const uint8_t *off = NULL; /* the offender's ULPDU */
    size_t off_len = 0, copy = 0;
    bool rdma = false;
    uint8_t tagged[14];
    switch (data[0] & 7) {
    case 1: case 2: case 3: case 4: {
        int r = (data[0] & 7) <= 2 ? REQ_READ1 : REQ_READ2;
        off = o->u[r];
        off_len = o->len[r];
        copy = 18;
        rdma = (data[0] & 7) % 2 == 1;
        break;
    }
    case 5:
        off = o->u[REQ_SEND];
        off_len = o->len[REQ_SEND];
        copy = 18;
        break;
    case 6: {
        const uint8_t *rr = o->u[REQ_READ1] + 18; /* its sink STag and TO */
        ddp_encode_tagged(tagged, sizeof tagged, RDMAP_OP_READ_RESP, true, ddp_rd32(rr), ddp_rd64(rr + 4));
        off = tagged;
        off_len = 14 + 100;
        copy = 14;
        break;
    }
    default:
        break;
    }
    if (copy) {
        ddp_wr16(u + n, (uint16_t)off_len);
        memcpy(u + n + 2, off, copy);
        n += 2 + copy;
        if (rdma) {
            memcpy(u + n, off + 18, 28);
            n += 28;
        }
    }
    for (size_t i = 5; i + 1 < size; i += 2)
        u[data[i] % n] ^= data[i + 1];
    return n;
}

/* Which of our Reads the Terminate names (RFC 5040 7.1), -1 for none; *blame:
 * it carries a copy that points at a Read (named or not). */
static int named_read(const struct ctx *c, const uint8_t *u, size_t len, bool *blame)
{
    struct term_msg m;
    term_decode(u, len, &m);
    bool by_msn = m.ddp_hdr_copy && !m.ddp.tagged && m.ddp.opcode == RDMAP_OP_READ_REQ;
    *blame = by_msn || m.rdma_hdr_copy;
    for (int r = REQ_READ1; r <= REQ_READ2; r += REQ_READ2 - REQ_READ1) {
        const uint8_t *mine = c->sent.u[r];
        if (by_msn ? m.ddp.msn == ddp_rd32(mine + 10)
                   : m.rdma_hdr_copy && m.rdma.sink_stag == ddp_rd32(mine + 18) &&
                         m.rdma.sink_to == ddp_rd64(mine + 22) && m.rdma.size == ddp_rd32(mine + 30))
            return r;
    }
    return -1;
}

static size_t make_ulpdu(const struct offenders *o, const uint8_t *data, size_t size, uint8_t u[80])
{
    if ((data[0] & 7) != 7)
        return build_terminate(o, data, size, u);
    size_t len = size - 5 < 80 ? size - 5 : 80;
    memcpy(u, data + 5, len);
    return len;
}

/* The decoder on exactly the octets a receiver holds: a heap block of the
 * ULPDU's size, so a read past it is an ASan report. */
static void check_decoder_exact(const uint8_t *u, size_t len)
{
    uint8_t *exact = malloc(len ? len : 1);
    ENSURE(exact);
    memcpy(exact, u, len);
    check_decoder(exact, len);
    free(exact);
}

/* What the QP did with the ULPDU u (see the top of the file). */
static void check_outcome(const struct ctx *c, const uint8_t *u, size_t len, bool bad_crc, bool qp_error,
                          bool nothing_sent)
{
    for (int i = 0; i < NREQ; i++)
        ENSURE(c->cqes[i] == 1);
    ENSURE(c->res[REQ_SEND].Status == STATUS_SUCCESS); /* TCP took it before anything came */
    struct ddp_hdr h;
    struct ddp_term t;
    bool is_term = ddp_decode(u, len, len, &h, &t) == DDP_OK && h.opcode == RDMAP_OP_TERMINATE;
    /* Nothing lands in a Read's sink or anywhere else. A Send with a bad
     * header may have been read ahead into the posted receive, which then
     * fails (qp_rx.c read_send_ahead); a Terminate places nothing. */
    ENSURE(all_octets(g.buf, RECV_OFF, 0x5C));
    ENSURE(all_octets(g.buf + RECV_OFF + RECV_LEN, sizeof g.buf - RECV_OFF - RECV_LEN, 0x5C));
    if (!is_term)
        return;
    ENSURE(all_octets(g.buf + RECV_OFF, RECV_LEN, 0x5C));
    ENSURE(c->res[REQ_RECV].Status == STATUS_CANCELLED);
    NTSTATUS r1 = c->res[REQ_READ1].Status, r2 = c->res[REQ_READ2].Status;
    if (bad_crc || len > TERM_LEN_MAX) {
        /* The contents are noise (RFC 5044 section 8: an FPDU that fails
         * its CRC is not delivered), or longer than any Terminate can be
         * (RFC 5040 7.1): the QP fails, every Read is flushed. */
        ENSURE(qp_error);
        ENSURE(r1 == STATUS_CANCELLED && r2 == STATUS_CANCELLED);
        return;
    }
    ENSURE(qp_error);
    ENSURE(nothing_sent); /* a Terminate is never answered */
    bool blame;
    int named = named_read(c, u, len, &blame);
    int failed = named >= 0 ? named : blame ? REQ_READ1 : -1;
    struct term_msg m;
    term_decode(u, len, &m);
    NTSTATUS st = ndk_status_from_term(m.layer, m.etype, m.code);
    ENSURE(r1 == (failed == REQ_READ1 ? st : STATUS_CANCELLED));
    ENSURE(r2 == (failed == REQ_READ2 ? st : STATUS_CANCELLED));
    ENSURE(c->res[REQ_READ1].ProviderErrorCode == m.ctrl && c->res[REQ_READ2].ProviderErrorCode == m.ctrl);
}

static void run_qp(const uint8_t *data, size_t size)
{
    const bool crc = data[0] & 0x10, bad_crc = crc && (data[0] & 0x20);
    static struct ctx c;
    memset(&c, 0, sizeof c);
    setup(&c, crc);
    size_t before_term = c.pipe.out_len;

    uint8_t u[80], fpdu[2 + 80 + 3 + 4];
    _Static_assert(sizeof fpdu < STAGE_SIZE, "the FPDU is taken in one staged read, as with the default buffer");
    size_t len = make_ulpdu(&c.sent, data, size, u);
    check_decoder_exact(u, len);
    size_t flen = mpa_fpdu_build(u, len, crc, fpdu, sizeof fpdu);
    ENSURE(flen);
    if (bad_crc)
        fpdu[flen - 1] ^= 0x01;
    c.pipe.in = fpdu;
    c.pipe.in_len = flen;
    for (int i = 0; i < 8 && ndk_qp_on_readable(c.impl); i++)
        ;
    bool qp_error = c.impl->dp.state == QP_ERROR;
    bool nothing_sent = c.impl->dp.term_len == 0 && c.pipe.out_len == before_term;
    ndk_qp_stop(c.impl);
    drain(&c);
    check_outcome(&c, u, len, bad_crc, qp_error, nothing_sent);
    teardown(&c);
}

/* Without a QP the offenders are what a QP would have sent: Read 1 (MSN 1),
 * the Send, Read 2 (MSN 2). */
static const struct offenders *model_offenders(void)
{
    static uint8_t r1[46], send[38], r2[46];
    static struct offenders o = {{r1, send, r2, NULL}, {46, 38, 46, 0}};
    static const struct rdmap_rreq rr1 = {0x11111111, 0x1000, 100, 0x1234, 0x10000};
    static const struct rdmap_rreq rr2 = {0x22222222, 0x2000, 50, 0x5678, 0x20000};
    rdmap_encode_read_request(r1, sizeof r1, 1, &rr1);
    ddp_encode_untagged(send, sizeof send, RDMAP_OP_SEND, true, 0, DDP_QN_SEND, 1, 0);
    rdmap_encode_read_request(r2, sizeof r2, 2, &rr2);
    return &o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 5)
        return 0;
    if (!(data[0] & 8)) {
        uint8_t u[80];
        check_decoder_exact(u, make_ulpdu(model_offenders(), data, size, u));
        return 0;
    }
    if (!g_ad) {
        if (!quiet_adapter_open(&g_ad))
            return 0;
        setup_once();
    }
    run_qp(data, size);
    return 0;
}
