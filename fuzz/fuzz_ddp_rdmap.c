/*
 * libFuzzer target for the DDP/RDMAP header codec and the Terminate codec.
 *
 * The input is one ULPDU (from the DDP control octet on; its length is the
 * MPA ULPDU_Length). It goes through ddp_decode() twice, once with every
 * octet and once with exactly what a streaming receiver would have read
 * (min(ddp_hdr_len, ULPDU_Length)): both must decide the same. A header that
 * decodes must re-encode to the same octets (reserved bits aside, which the
 * RFCs say to ignore); a rejected one must yield a Terminate of the 3.9
 * table that term_encode() can build and term_decode() reads back. The input
 * is also decoded as a Terminate and, when it is a strict one, re-encoded
 * octet for octet. The range and MO checks are compared with 128-bit
 * arithmetic on values taken from the input. Any broken promise: abort().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ensure.h"
#include "wire/ddp.h"
#include "wire/term.h"

static bool same_term(const struct ddp_term *a, const struct ddp_term *b)
{
    return a->layer == b->layer && a->etype == b->etype && a->code == b->code &&
           a->ddp_hdr == b->ddp_hdr && a->rdma_hdr == b->rdma_hdr && a->no_reply == b->no_reply;
}

/* The triples ddp_decode() may produce (docs/rules.md R3-R8, R10). */
static bool decode_triple_allowed(const struct ddp_term *t)
{
    static const uint8_t ok[][3] = {
        {0, 2, 0xFF}, {1, 1, 0x04}, {1, 2, 0x06}, {0, 2, 0x05},
        {0, 2, 0x06}, {1, 2, 0x01}, {1, 2, 0x03}, {1, 2, 0x04},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (t->layer == ok[i][0] && t->etype == ok[i][1] && t->code == ok[i][2])
            return true;
    return false;
}

static void check_header(const uint8_t *data, size_t size)
{
    struct ddp_hdr h, h2;
    struct ddp_term t, t2;
    memset(&t, 0, sizeof(t));
    memset(&t2, 0, sizeof(t2));
    enum ddp_result r = ddp_decode(data, size, size, &h, &t);
    if (size < 2) {
        ENSURE(r == DDP_SHORT);
        return;
    }
    size_t need = ddp_hdr_len(data[0], data[1]);
    ENSURE(need == 14 || need == 18 || need == 22 || need == 46);
    size_t stream = need < size ? need : size;
    enum ddp_result r2 = ddp_decode(data, stream, size, &h2, &t2);
    ENSURE(r == r2);
    ENSURE(r != DDP_SHORT);
    if (r == DDP_TERM)
        ENSURE(same_term(&t, &t2));
    /* Fewer octets than a streaming receiver reads is never enough. */
    if (stream > 2) {
        enum ddp_result r3 = ddp_decode(data, stream - 1, size, &h2, &t2);
        bool row3 = r == DDP_TERM && t.layer == 0 && t.etype == 2 && t.code == 0xFF;
        ENSURE(r3 == DDP_SHORT || (row3 && r3 == DDP_TERM));
    }

    if (r == DDP_OK) {
        ENSURE(size >= need && size <= DDP_ULPDU_MAX);
        ENSURE(h.ddp_ver == DDP_VERSION && h.rdmap_ver == RDMAP_VERSION);
        ENSURE(h.opcode <= RDMAP_OP_MAX);
        ENSURE(h.tagged == (h.opcode == RDMAP_OP_WRITE || h.opcode == RDMAP_OP_READ_RESP));
        uint8_t re[DDP_HDR_MAX];
        size_t n = ddp_encode(&h, re, sizeof(re));
        ENSURE(n == (h.tagged ? 14u : 18u));
        ENSURE(re[0] == (data[0] & ~DDP_CTRL_RSVD));
        ENSURE(re[1] == (data[1] & ~RDMAP_CTRL_RSVD));
        ENSURE(memcmp(re + 2, data + 2, n - 2) == 0);
        if (!h.tagged) {
            uint32_t want_qn = h.opcode == RDMAP_OP_READ_REQ    ? 1u
                               : h.opcode == RDMAP_OP_TERMINATE ? 2u
                                                                : 0u;
            ENSURE(h.qn == want_qn);
        }
        if (h.opcode == RDMAP_OP_READ_REQ) {
            ENSURE(size == RDMAP_READ_REQ_ULPDU_LEN && h.last && h.mo == 0);
            ENSURE(rdmap_rreq_encode(&h.rreq, re, sizeof(re)) == 28);
            ENSURE(memcmp(re, data + 18, 28) == 0);
            if (h.inv_stag == 0 && (data[0] & DDP_CTRL_RSVD) == 0 &&
                (data[1] & RDMAP_CTRL_RSVD) == 0) {
                ENSURE(rdmap_encode_read_request(re, sizeof(re), h.msn, &h.rreq) == 46);
                ENSURE(memcmp(re, data, 46) == 0);
            }
        }
        if (h.opcode == RDMAP_OP_TERMINATE)
            ENSURE(h.last && h.msn == 1 && h.mo == 0);
    } else {
        ENSURE(decode_triple_allowed(&t));
        ENSURE(!t.rdma_hdr);
        ENSURE(t.no_reply == ((data[1] & RDMAP_CTRL_OP_MASK) == RDMAP_OP_TERMINATE));
        /* Whatever was rejected can be reported: the Terminate builds from
         * the octets the receiver holds and reads back strictly. */
        uint8_t out[TERM_LEN_MAX];
        size_t n = term_encode(out, sizeof(out), &t, (uint16_t)size, data, stream, NULL);
        ENSURE(n == 22 || n == 38 || n == 42);
        ENSURE(n == 22 || t.ddp_hdr);
        struct term_msg m;
        ENSURE(term_decode(out, n, &m) == TERM_DEC_OK);
        ENSURE(m.layer == t.layer && m.etype == t.etype && m.code == t.code);
        ENSURE(m.anomalies == 0);
        struct ddp_hdr th;
        struct ddp_term tt;
        ENSURE(ddp_decode(out, n, n, &th, &tt) == DDP_OK);
        if (m.ddp_hdr_copy)
            ENSURE(memcmp(m.ddp_hdr_copy, data, m.ddp_hdr_copy_len) == 0);
    }
}

static void check_terminate(const uint8_t *data, size_t size)
{
    struct term_msg m;
    enum term_dec_result r = term_decode(data, size, &m);
    if (r == TERM_DEC_NOT_TERM || r == TERM_DEC_SHORT)
        return;
    ENSURE(size >= 22);
    ENSURE(term_describe(m.layer, m.etype, m.code) != NULL);
    ENSURE(strlen(term_describe(m.layer, m.etype, m.code)) > 0);
    ENSURE(m.ctrl == ddp_rd32(data + 18));
    if (r == TERM_DEC_BAD_LEN) {
        ENSURE(m.ddp_hdr_copy == NULL && m.rdma_hdr_copy == NULL);
        return;
    }
    ENSURE(r == TERM_DEC_OK);
    ENSURE(size == 22 || size == 38 || size == 42 || size == 70);
    if (m.ddp_hdr_copy)
        ENSURE(m.ddp_hdr_copy >= data && m.ddp_hdr_copy + m.ddp_hdr_copy_len <= data + size);
    if (m.rdma_hdr_copy)
        ENSURE(m.rdma_hdr_copy >= data && m.rdma_hdr_copy + 28 <= data + size);

    struct ddp_term back = {m.layer, m.etype, m.code, m.ddp_hdr_copy != NULL,
                            m.rdma_hdr_copy != NULL, false};
    uint8_t re[TERM_LEN_MAX];
    size_t n = term_encode(re, sizeof(re), &back, m.seg_len, m.ddp_hdr_copy, m.ddp_hdr_copy_len,
                           m.rdma_hdr_copy);
    /* The size wins even over a T bit that disagrees, but then the encoder
     * sizes the copy from that T bit: only compare strict Terminates. */
    if (m.anomalies & TERM_ANOM_T)
        return;
    ENSURE(n == size);
    if (m.anomalies == 0 && m.m == m.d) {
        ENSURE(memcmp(re + 18, data + 18, size - 18) == 0);
        /* The Terminate's own header is fixed: compare when it is canonical. */
        if (m.hdr.last && m.hdr.ddp_ver == 1 && m.hdr.rdmap_ver == 1 && m.hdr.inv_stag == 0 &&
            m.hdr.qn == 2 && m.hdr.msn == 1 && m.hdr.mo == 0 &&
            (data[0] & DDP_CTRL_RSVD) == 0 && (data[1] & RDMAP_CTRL_RSVD) == 0)
            ENSURE(memcmp(re, data, 18) == 0);
    }
}

static void check_state_helpers(const uint8_t *data, size_t size)
{
    if (size < 32)
        return;
    uint64_t base = ddp_rd64(data), rlen = ddp_rd64(data + 8);
    uint64_t to = ddp_rd64(data + 16), len = ddp_rd64(data + 24);
    /* Small lengths are the interesting ones near the edges. */
    if (data[0] & 1)
        len &= 0xFFFF;
    if (data[1] & 1)
        to = UINT64_MAX - (to & 0xFFFF);
    enum ddp_stag_fault f = ddp_check_range(base, rlen, to, len);
    typedef unsigned __int128 u128;
    u128 end = (u128)to + len;
    if (len == 0)
        ENSURE(f == DDP_STAG_OK);
    else if (end > ((u128)1 << 64))
        ENSURE(f == DDP_STAG_WRAP);
    else if (to < base || end > (u128)base + rlen)
        ENSURE(f == DDP_STAG_BOUNDS);
    else
        ENSURE(f == DDP_STAG_OK);
    struct ddp_term t;
    if (f != DDP_STAG_OK) {
        ENSURE(ddp_term_for_write(f, &t));
        ENSURE(ddp_term_for_read_source(f, &t) && t.rdma_hdr && t.ddp_hdr);
    }

    uint32_t mo = ddp_rd32(data + 2);
    uint64_t so_far = (data[2] & 1) ? mo : ddp_rd64(data + 8);
    bool ok = ddp_check_mo(mo, len, so_far, rlen, &t);
    bool want = (uint64_t)mo == so_far && (u128)mo + len <= rlen;
    ENSURE(ok == want);
    if (!ok)
        ENSURE(t.layer == 1 && t.etype == 2 && (t.code == 4 || t.code == 5));

    uint32_t e = ddp_rd32(data + 4), g = ddp_rd32(data + 12);
    ENSURE(ddp_check_msn(e, g, &t) == (e == g));
    bool cont = ddp_check_tagged_cont(e, to, g, base, &t);
    ENSURE(cont == (e == g && to == base));
    if (!cont)
        ENSURE(t.layer == 1 && t.etype == 1 && t.code == (e != g ? 0 : 1));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_header(data, size);
    check_terminate(data, size);
    check_state_helpers(data, size);
    struct rdmap_rreq rr;
    if (rdmap_rreq_decode(data, size, &rr)) {
        uint8_t re[28];
        ENSURE(rdmap_rreq_encode(&rr, re, sizeof(re)) == 28);
        ENSURE(memcmp(re, data, 28) == 0);
    } else {
        ENSURE(size < 28);
    }
    return 0;
}
