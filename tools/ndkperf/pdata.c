/*
 * pdata.c - ndkperf's out-of-band exchange, in the private data of the
 * connect request and the accept. Big-endian, as perftest sends its
 * pingpong_dest:
 *   0  VA of the buffer the peer may write to / read from (8)
 *   8  its remote token (4)
 *  12  its size in bytes (4)
 *  16  "NDKP", version 1, then (request only) the test, flags (bit 0: -a),
 *      one reserved byte, -s, -n, -D in ms, the receive depth, the warm-up.
 * NDK private data is made for this: it arrives with the connect request
 * and the accept, before either side can post anything, so no extra
 * message exchange is needed.
 */
#include <string.h>

#include "lib/bytes.h"
#include "ndkperf/ndkperf.h"

#define PDATA_MAGIC 0x4e444b50u /* "NDKP" */
#define PDATA_VERSION 1

static void put_buf(uint8_t *p, const struct remote_buf *b)
{
    tc_put_be64(p, b->va);
    tc_put_be32(p + 8, b->token);
    tc_put_be32(p + 12, b->size);
    tc_put_be32(p + 16, PDATA_MAGIC);
    p[20] = PDATA_VERSION;
}

static bool get_buf(const uint8_t *p, uint32_t len, uint32_t need, struct remote_buf *b, const char **why)
{
    if (len < need) {
        *why = "private data too short for ndkperf";
        return false;
    }
    if (tc_get_be32(p + 16) != PDATA_MAGIC) {
        *why = "private data is not from ndkperf";
        return false;
    }
    if (p[20] != PDATA_VERSION) {
        *why = "private data from another ndkperf version";
        return false;
    }
    b->va = tc_get_be64(p);
    b->token = tc_get_be32(p + 8);
    b->size = tc_get_be32(p + 12);
    return true;
}

void pdata_put_request(uint8_t *p, const struct remote_buf *b, const struct test_params *tp)
{
    memset(p, 0, PDATA_REQ_LEN);
    put_buf(p, b);
    p[21] = (uint8_t)tp->test;
    p[22] = tp->all_sizes ? 1 : 0;
    tc_put_be32(p + 24, tp->size);
    tc_put_be32(p + 28, tp->iters);
    tc_put_be32(p + 32, tp->duration_ms);
    tc_put_be32(p + 36, tp->rx_depth);
    tc_put_be32(p + 40, tp->warmup);
}

bool pdata_get_request(const uint8_t *p, uint32_t len, struct remote_buf *b, struct test_params *tp,
                       const char **why)
{
    if (!get_buf(p, len, PDATA_REQ_LEN, b, why))
        return false;
    if (p[21] >= T_COUNT) {
        *why = "unknown test in the request";
        return false;
    }
    tp->test = (enum test_kind)p[21];
    tp->all_sizes = p[22] & 1;
    tp->size = tc_get_be32(p + 24);
    tp->iters = tc_get_be32(p + 28);
    tp->duration_ms = tc_get_be32(p + 32);
    tp->rx_depth = tc_get_be32(p + 36);
    tp->warmup = tc_get_be32(p + 40);
    if (tp->size == 0 || tp->size > NDKPERF_MAX_MSG || (tp->iters == 0) == (tp->duration_ms == 0) ||
        tp->rx_depth == 0) {
        *why = "invalid test parameters in the request";
        return false;
    }
    return true;
}

void pdata_put_reply(uint8_t *p, const struct remote_buf *b)
{
    memset(p, 0, PDATA_REP_LEN);
    put_buf(p, b);
}

bool pdata_get_reply(const uint8_t *p, uint32_t len, struct remote_buf *b, const char **why)
{
    return get_buf(p, len, PDATA_REP_LEN, b, why);
}
