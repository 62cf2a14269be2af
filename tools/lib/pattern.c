/*
 * pattern.c - see pattern.h.
 */
#include <string.h>
#include <unistd.h>

#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/pattern.h"

#define CHUNK 1024u

static uint32_t start(uint32_t seed, uint32_t stream)
{
    uint32_t s = seed ^ (stream * 0x9E3779B9u);
    return s ? s : 0x6D2B79F5u; /* xorshift never leaves 0 */
}

static uint32_t next(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* The next up to CHUNK bytes of a stream. */
static size_t chunk(uint32_t *s, uint8_t *out, size_t left)
{
    size_t k = left < CHUNK ? left : CHUNK;
    for (size_t i = 0; i < k; i += 4) {
        uint8_t w[4];
        tc_put_be32(w, next(s));
        memcpy(out + i, w, k - i < 4 ? k - i : 4);
    }
    return k;
}

void tc_pattern_fill(uint8_t *p, size_t n, uint32_t seed, uint32_t stream)
{
    uint32_t s = start(seed, stream);
    for (size_t i = 0; i < n;)
        i += chunk(&s, p + i, n - i);
}

size_t tc_pattern_check(const uint8_t *p, size_t n, uint32_t seed, uint32_t stream, size_t *first, uint8_t *got,
                        uint8_t *want)
{
    uint32_t s = start(seed, stream);
    size_t bad = 0;
    uint8_t expect[CHUNK];
    for (size_t i = 0; i < n;) {
        size_t k = chunk(&s, expect, n - i);
        if (memcmp(p + i, expect, k) != 0) {
            for (size_t j = 0; j < k; j++)
                if (p[i + j] != expect[j] && bad++ == 0)
                    *first = i + j, *got = p[i + j], *want = expect[j];
        }
        i += k;
    }
    return bad;
}

uint32_t tc_pattern_seed(unsigned salt)
{
    return (uint32_t)(tc_now_us() * 2654435761u) ^ (uint32_t)getpid() ^ (salt << 16);
}
