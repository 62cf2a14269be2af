/*
 * bytes.h - big-endian fields of the tools' own messages and private data,
 * and of rping's and perftest's, which use the same order.
 */
#ifndef TC_BYTES_H
#define TC_BYTES_H

#include <stdint.h>

static inline void tc_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}

static inline uint32_t tc_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void tc_put_be64(uint8_t *p, uint64_t v)
{
    tc_put_be32(p, (uint32_t)(v >> 32));
    tc_put_be32(p + 4, (uint32_t)v);
}

static inline uint64_t tc_get_be64(const uint8_t *p)
{
    return (uint64_t)tc_get_be32(p) << 32 | tc_get_be32(p + 4);
}

#endif
