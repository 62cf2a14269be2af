/*
 * libFuzzer target for the MPA startup reader and the first-FPDU path.
 *
 * Input layout: octet 0 low 3 bits = n, the next n octets are a cycle of
 * chunk sizes (n = 0: one octet per call), and the rest is the TCP byte
 * stream. Each stream is read by four readers (Request/Reply x PD limit
 * 256/512), each once whole, once octet by octet and once in the fuzzed
 * chunks: the three must agree, since the reader promises that the split
 * does not matter. A decoded frame must re-encode to the same fields. Then
 * the bytes after the frame go through mpa_fpdu_peek and
 * mpa_classify_first_fpdu. Any broken promise calls abort().
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ensure.h"
#include "wire/crc32c.h"
#include "wire/mpa.h"

/* Test-only entry point of crc32c.c: the fuzzer also cross-checks the
 * portable CRC against the dispatching one on every input. */
extern uint32_t crc32c_update_portable(uint32_t reg, const void *data, size_t len);

struct outcome {
    enum mpa_result res;
    size_t used;
    struct mpa_frame frame;
};

/* Feeds the stream in chunks from plan (plan_len 0: whole), checking the
 * per-call promises as it goes. The reader stays alive for the caller, as
 * frame.pd points into it. */
static struct outcome read_frame(struct mpa_reader *r, bool expect_reply, uint16_t limit,
                                 const uint8_t *s, size_t n, const uint8_t *plan,
                                 size_t plan_len, bool whole)
{
    struct outcome o = {MPA_NEED_MORE, 0, {0}};
    mpa_reader_init(r, expect_reply, limit);
    size_t k = 0;
    while (o.res == MPA_NEED_MORE && o.used < n) {
        size_t chunk = whole ? n : plan_len ? plan[k++ % plan_len] : 1;
        if (chunk == 0) {
            /* An empty feed must change nothing. */
            size_t c = 1;
            ENSURE(mpa_reader_feed(r, s + o.used, 0, &c, &o.frame) == MPA_NEED_MORE);
            ENSURE(c == 0);
            chunk = 1;
        }
        if (chunk > n - o.used)
            chunk = n - o.used;
        size_t c = (size_t)-1;
        o.res = mpa_reader_feed(r, s + o.used, chunk, &c, &o.frame);
        ENSURE(c <= chunk);
        ENSURE(o.res != MPA_NEED_MORE || c == chunk);
        o.used += c;
    }
    /* A finished or failed reader answers the same and takes nothing. */
    if (o.res != MPA_NEED_MORE) {
        size_t c = (size_t)-1;
        struct mpa_frame again;
        ENSURE(mpa_reader_feed(r, s, n, &c, &again) == o.res);
        ENSURE(c == 0);
        if (o.res == MPA_DONE)
            ENSURE(mpa_frame_same(&again, &o.frame));
    }
    return o;
}

static void check_frame(const struct mpa_frame *f, bool expect_reply, uint16_t limit,
                        const uint8_t *wire, size_t used)
{
    ENSURE(f->reply == expect_reply);
    ENSURE(f->rev == 1 || f->rev == 2);
    ENSURE(!f->enhanced || f->rev == 2);
    ENSURE(f->ird <= MPA_IRD_ORD_MASK && f->ord <= MPA_IRD_ORD_MASK);
    ENSURE(f->p2p || f->rtr == 0);
    ENSURE(mpa_frame_size(f) == used);
    ENSURE(used - MPA_HDR_LEN <= limit);

    /* Re-encode: same size, same octets but for what the decoder is told to
     * ignore (reserved flag bits; B/C/D when A=0). */
    uint8_t out[MPA_FRAME_MAX];
    size_t n = mpa_frame_encode(f, out, sizeof(out));
    ENSURE(n == used);
    ENSURE(mpa_frame_encode(f, out, n - 1) == 0);
    uint8_t orig[MPA_FRAME_MAX];
    memcpy(orig, wire, used);
    orig[16] &= 0xF0;
    if (f->enhanced && !f->p2p) {
        orig[20] &= 0xBF;
        orig[22] &= 0x3F;
    }
    ENSURE(memcmp(out, orig, n) == 0);

    struct mpa_reader r2;
    struct mpa_frame g;
    size_t c = 0;
    mpa_reader_init(&r2, expect_reply, limit);
    ENSURE(mpa_reader_feed(&r2, out, n, &c, &g) == MPA_DONE);
    ENSURE(c == n);
    ENSURE(mpa_frame_same(f, &g));

    if (!f->reply) {
        for (int ok = 0; ok < 2; ok++) {
            uint8_t rtr = mpa_choose_rtr(f, ok);
            if (f->enhanced && f->p2p)
                ENSURE(rtr == MPA_RTR_WRITE || (ok && rtr == MPA_RTR_READ));
            else
                ENSURE(rtr == 0);
        }
    }
}

static void check_classify(const uint8_t *u, size_t ulen)
{
    struct mpa_rtr_info info;
    mpa_classify_first_fpdu(u, ulen, &info);
    switch (info.kind) {
    case MPA_RTR_KIND_WRITE0:
        ENSURE(ulen == 14 && (u[0] & 0x80));
        break;
    case MPA_RTR_KIND_READ0:
        ENSURE(ulen == 46 && !(u[0] & 0x80));
        break;
    case MPA_RTR_KIND_SEND0:
        ENSURE(ulen == 18 && !(u[0] & 0x80));
        break;
    case MPA_RTR_KIND_OTHER:
        break;
    default:
        abort();
    }
}

/* Walks FPDUs the way a receiver would right after the startup frame. */
static void walk_fpdus(const uint8_t *s, size_t n, bool crc, size_t min_ulpdu)
{
    while (n) {
        size_t flen = 0, ulen = 0;
        const uint8_t *u = NULL;
        enum mpa_fpdu_result res = mpa_fpdu_peek(s, n, crc, min_ulpdu, &flen, &u, &ulen);
        if (res != MPA_FPDU_OK) {
            ENSURE(res == MPA_FPDU_NEED_MORE || res == MPA_FPDU_ERR_CRC ||
                   res == MPA_FPDU_ERR_LENGTH);
            if (res == MPA_FPDU_NEED_MORE && n >= 2)
                ENSURE(n < mpa_fpdu_len((size_t)(s[0] << 8 | s[1])));
            return;
        }
        ENSURE(flen <= n && flen == mpa_fpdu_len(ulen) && u == s + 2 && ulen >= min_ulpdu);
        check_classify(u, ulen);

        /* Rebuilding gives the same header and ULPDU; with zero pad and the
         * CRC verified, the very same octets. */
        static uint8_t re[2 + 65535 + 3 + 4];
        ENSURE(mpa_fpdu_build(u, ulen, crc, re, sizeof(re)) == flen);
        ENSURE(memcmp(re, s, 2 + ulen) == 0);
        bool zero_pad = true;
        for (size_t i = 2 + ulen; i < flen - 4; i++)
            zero_pad = zero_pad && s[i] == 0;
        if (crc && zero_pad)
            ENSURE(memcmp(re, s, flen) == 0);
        s += flen;
        n -= flen;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    size_t plan_len = data[0] & 7;
    if (plan_len > size - 1)
        plan_len = size - 1;
    const uint8_t *plan = data + 1;
    const uint8_t *s = data + 1 + plan_len;
    size_t n = size - 1 - plan_len;

    ENSURE(crc32c_update(crc32c_init(), s, n) == crc32c_update_portable(crc32c_init(), s, n));

    static const uint16_t limits[2] = {256, 512};
    for (int rep = 0; rep < 2; rep++) {
        for (int li = 0; li < 2; li++) {
            struct mpa_reader ra, rb, rc;
            struct outcome a = read_frame(&ra, rep, limits[li], s, n, NULL, 0, true);
            struct outcome b = read_frame(&rb, rep, limits[li], s, n, NULL, 0, false);
            struct outcome c = read_frame(&rc, rep, limits[li], s, n, plan, plan_len, false);
            ENSURE(a.res == b.res && a.res == c.res);
            if (a.res == MPA_DONE) {
                ENSURE(a.used == b.used && a.used == c.used);
                ENSURE(mpa_frame_same(&a.frame, &b.frame) && mpa_frame_same(&a.frame, &c.frame));
                check_frame(&a.frame, rep, limits[li], s, a.used);
            }
            if (a.res == MPA_NEED_MORE)
                ENSURE(a.used == n && b.used == n && c.used == n);
            /* Only the first configuration needs to walk the rest: the
             * others see the same bytes after a frame of the same length. */
            if (rep == 0 && li == 0) {
                size_t off = a.res == MPA_DONE ? a.used : 0;
                walk_fpdus(s + off, n - off, true, 0);
                walk_fpdus(s + off, n - off, false, 14);
                check_classify(s + off, n - off);
                if (n - off >= 2)
                    check_classify(s + off + 2, n - off - 2);
            } else if (a.res == MPA_DONE) {
                walk_fpdus(s + a.used, n - a.used, a.frame.crc, 14);
            }
        }
    }
    return 0;
}
