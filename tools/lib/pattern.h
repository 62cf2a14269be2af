/*
 * pattern.h - the bytes the tools move: xorshift32 streams from a seed
 * and a stream number, so that no two connections or directions carry the
 * same bytes and the receiver, knowing the seed, can check every byte.
 * Bytes are taken big-endian from each word: the same on every host.
 */
#ifndef TC_PATTERN_H
#define TC_PATTERN_H

#include <stddef.h>
#include <stdint.h>

void tc_pattern_fill(uint8_t *p, size_t n, uint32_t seed, uint32_t stream);
/* How many of p[0..n) differ from the stream; the first at *first (got
 * *got, expected *want). */
size_t tc_pattern_check(const uint8_t *p, size_t n, uint32_t seed, uint32_t stream, size_t *first, uint8_t *got,
                        uint8_t *want);
/* A seed that differs between processes, runs and connections. */
uint32_t tc_pattern_seed(unsigned salt);

#endif
