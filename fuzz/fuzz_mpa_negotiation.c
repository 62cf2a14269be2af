/*
 * libFuzzer target for the MPA negotiation of connection set-up
 * (wire/mpa_negotiation.c), both roles, deterministically: no sockets,
 * threads or clocks, so the same input always takes the same path.
 *
 * Input: [0] bit 0 the role fed the stream (0 responder, 1 initiator),
 * bit 1 our Request is rev 1, bit 2 it asks for peer-to-peer, bit 3 it asks
 * for CRC, bit 4 the responder adds CRC on Accept, bit 5 the responder
 * rejects, bits 6-7 unused; [1] and [2] bits 0-3 and 4-7 the IRD and ORD
 * the initiator ([1]) and the responder ([2]) ask for, from a table; [3] low
 * 3 bits n, then n chunk sizes (0 means 1); the rest is what the peer
 * sends.
 *
 * Each input runs two scenarios; abort() marks a broken promise:
 *  1. An honest initiator and responder, with the parameters above, each
 *     frame delivered in the input's chunk sizes. Both must end the same
 *     way: connected with the same CRC, RTR and revision, the initiator's
 *     ORD within the responder's IRD and the responder's ORD within the
 *     initiator's IRD (RFC 6581), or the reject seen as a reject.
 *  2. The role of bit 0 reads the peer's octets (a Request, then after an
 *     Accept the RTR; or a Reply), once in the input's chunks and once in
 *     one piece: the same event and state either way, never an octet taken
 *     past what mpa_neg_want asked for, a frame to send exactly when the
 *     event says so (a reject Reply, a Terminate of 28 octets, a Read
 *     Response of 20), and nothing more read once it decided.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ensure.h"
#include "wire/mpa_negotiation.h"

#define MAX_IRD 128
#define MAX_ORD 128

static const uint32_t depths[16] = {0,   1,   2,      3,      4,      8,     16,    127,
                                    128, 129, 300, 0x3FFE, 0x3FFF, 0x4000, 65535, 0xFFFFFFFF};

struct plan {
    const uint8_t *chunks;
    size_t n, next;
};

static size_t next_chunk(struct plan *p)
{
    if (!p->n)
        return SIZE_MAX;
    size_t c = p->chunks[p->next++ % p->n];
    return c ? c : 1;
}

/* Feeds len octets as a socket reader would (never more than wanted, in
 * the plan's chunks); returns the first decision and how much was taken. */
static enum mpa_neg_event deliver(struct mpa_neg *n, const uint8_t *p, size_t len, struct plan *plan, size_t *taken)
{
    enum mpa_neg_event ev = MPA_NEG_MORE;
    *taken = 0;
    size_t want;
    while (ev == MPA_NEG_MORE && *taken < len && (want = mpa_neg_want(n)) != 0) {
        size_t step = next_chunk(plan);
        if (step > want)
            step = want;
        if (step > len - *taken)
            step = len - *taken;
        size_t used;
        ev = mpa_neg_feed(n, p + *taken, step, &used);
        ENSURE(used <= step);
        /* All of it, unless a frame that cannot be read, or an answer to
         * the Reply too long for an RTR, was refused before its end. */
        ENSURE(used == step || ev == MPA_NEG_MALFORMED || ev == MPA_NEG_BAD_RTR || ev == MPA_NEG_PEER_TERMINATED);
        *taken += used;
    }
    return ev;
}

static size_t take(struct mpa_neg *n, uint8_t *out)
{
    size_t len;
    const uint8_t *p = mpa_neg_output(n, &len);
    ENSURE(len <= MPA_FRAME_MAX);
    memcpy(out, p, len);
    return len;
}

/* Once decided (or failed), the negotiation reads nothing more. */
static void ensure_settled(struct mpa_neg *n)
{
    static const uint8_t junk[8] = {0};
    size_t used;
    if (n->state == MPA_NEG_FAILED || n->state == MPA_NEG_DONE || n->state == MPA_NEG_REQUESTED ||
        n->state == MPA_NEG_REPLIED) {
        ENSURE(mpa_neg_want(n) == 0);
        ENSURE(mpa_neg_feed(n, junk, sizeof junk, &used) == MPA_NEG_MORE && used == 0);
    }
}

static struct mpa_neg_request request_of(uint8_t cfg, uint8_t rw)
{
    struct mpa_neg_request r = {
        .rev1 = cfg & 2, .p2p = cfg & 4, .crc = cfg & 8, .ird = depths[rw & 15], .ord = depths[rw >> 4],
        .max_ird = MAX_IRD, .max_ord = MAX_ORD, .pd = (const uint8_t *)"fuzz", .pd_len = 4,
    };
    return r;
}

/* Scenario 1: both sides honest. */
static void honest(uint8_t cfg, uint8_t rw, uint8_t rsp_rw, struct plan plan)
{
    static struct mpa_neg ini, rsp;
    uint8_t wire[MPA_FRAME_MAX];
    size_t n, taken;
    struct mpa_neg_request req = request_of(cfg, rw);
    ENSURE(mpa_neg_start_initiator(&ini, &req));
    mpa_neg_start_responder(&rsp, MAX_IRD, MAX_ORD);
    n = take(&ini, wire);
    ENSURE(deliver(&rsp, wire, n, &plan, &taken) == MPA_NEG_GOT_REQUEST && taken == n);
    ensure_settled(&rsp);
    if (cfg & 32) {
        ENSURE(mpa_neg_reject(&rsp, NULL, 0));
        n = take(&rsp, wire);
        ENSURE(deliver(&ini, wire, n, &plan, &taken) == MPA_NEG_PEER_REJECTED && taken == n);
        ENSURE(ini.state == MPA_NEG_FAILED && rsp.state == MPA_NEG_FAILED);
        return;
    }
    ENSURE(mpa_neg_accept(&rsp, depths[rsp_rw & 15], depths[rsp_rw >> 4], cfg & 16, NULL, 0));
    n = take(&rsp, wire);
    ENSURE(deliver(&ini, wire, n, &plan, &taken) == MPA_NEG_GOT_REPLY && taken == n);
    ensure_settled(&ini);
    mpa_neg_complete(&ini);
    n = take(&ini, wire);
    ENSURE(ini.p2p == rsp.p2p && ini.rtr == rsp.rtr && ini.crc == rsp.crc && ini.rev == rsp.rev);
    if (ini.enhanced) /* MPA rev 1 carries no IRD/ORD to negotiate */
        ENSURE(ini.eff_ord <= rsp.eff_ird && rsp.eff_ord <= ini.eff_ird);
    ENSURE(ini.eff_ird <= MAX_IRD && ini.eff_ord <= MAX_ORD && rsp.eff_ird <= MAX_IRD && rsp.eff_ord <= MAX_ORD);
    if (!rsp.p2p) {
        ENSURE(n == 0 && rsp.state == MPA_NEG_DONE);
        return;
    }
    ENSURE(deliver(&rsp, wire, n, &plan, &taken) == MPA_NEG_GOT_RTR && taken == n);
    ENSURE(rsp.read_rtr == ini.read_rtr && rsp.state == MPA_NEG_DONE && ini.state == MPA_NEG_DONE);
    ENSURE(take(&rsp, wire) == (rsp.read_rtr ? 20u : 0u));
    ensure_settled(&rsp);
}

struct outcome {
    enum mpa_neg_event ev[2];
    size_t taken[2];
    enum mpa_neg_state state;
    size_t out_len;
};

/* Scenario 2, one delivery: the role reads the peer's octets. */
static struct outcome hostile(struct mpa_neg *n, uint8_t cfg, uint8_t rw, const uint8_t *s, size_t len,
                              struct plan plan)
{
    struct outcome o = {{MPA_NEG_MORE, MPA_NEG_MORE}, {0, 0}, MPA_NEG_IDLE, 0};
    uint8_t out[MPA_FRAME_MAX];
    if (cfg & 1) {
        struct mpa_neg_request req = request_of(cfg, rw);
        ENSURE(mpa_neg_start_initiator(n, &req));
        take(n, out);
        o.ev[0] = deliver(n, s, len, &plan, &o.taken[0]);
    } else {
        mpa_neg_start_responder(n, MAX_IRD, MAX_ORD);
        o.ev[0] = deliver(n, s, len, &plan, &o.taken[0]);
        if (o.ev[0] == MPA_NEG_GOT_REQUEST) {
            uint16_t pdl;
            mpa_neg_peer_pd(n, &pdl);
            ENSURE(pdl <= MPA_PD_MAX);
            ENSURE(mpa_neg_accept(n, depths[rw & 15], depths[rw >> 4], cfg & 16, NULL, 0));
            take(n, out);
            o.ev[1] = deliver(n, s + o.taken[0], len - o.taken[0], &plan, &o.taken[1]);
        }
    }
    enum mpa_neg_event last = o.ev[1] != MPA_NEG_MORE ? o.ev[1] : o.ev[0];
    o.state = n->state;
    o.out_len = take(n, out);
    switch (last) {
    case MPA_NEG_MARKERS:
        ENSURE(o.out_len >= MPA_HDR_LEN && (out[16] & MPA_FLAG_R));
        break;
    case MPA_NEG_REFUSED_TERM:
    case MPA_NEG_BAD_RTR:
        ENSURE(o.out_len == 28);
        break;
    case MPA_NEG_GOT_RTR:
        ENSURE(o.out_len == (n->read_rtr ? 20u : 0u));
        break;
    default:
        ENSURE(o.out_len == 0);
        break;
    }
    if (last > MPA_NEG_GOT_RTR)
        ENSURE(n->state == MPA_NEG_FAILED);
    ensure_settled(n);
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    uint8_t cfg = data[0], rw = data[1], rsp_rw = data[2];
    size_t nplan = data[3] & 7;
    if (size < 4 + nplan)
        return 0;
    struct plan plan = {data + 4, nplan, 0}, whole = {NULL, 0, 0};
    const uint8_t *s = data + 4 + nplan;
    size_t len = size - 4 - nplan;

    honest(cfg, rw, rsp_rw, plan);

    static struct mpa_neg a, b;
    uint8_t own_rw = cfg & 1 ? rw : rsp_rw;
    struct outcome x = hostile(&a, cfg, own_rw, s, len, plan);
    struct outcome y = hostile(&b, cfg, own_rw, s, len, whole);
    ENSURE(x.ev[0] == y.ev[0] && x.ev[1] == y.ev[1]);
    /* A frame that cannot be read may be refused at another octet. */
    bool malformed = x.ev[0] == MPA_NEG_MALFORMED;
    ENSURE(malformed || (x.taken[0] == y.taken[0] && x.taken[1] == y.taken[1]));
    ENSURE(x.state == y.state && x.out_len == y.out_len);
    ENSURE(a.crc == b.crc && a.p2p == b.p2p && a.rtr == b.rtr && a.eff_ird == b.eff_ird && a.eff_ord == b.eff_ord);
    return 0;
}
