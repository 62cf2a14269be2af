/*
 * polled.h - bytes of registered memory that a peer's RDMA Write reaches, or
 * that our next RDMA Write sends, with no completion ordering the access on
 * this side: the latency tests spin on the last byte of their buffer and
 * rewrite the last byte of their source between unsignaled Writes, and
 * perftest's send_bw client reads the credits the server writes, all as
 * perftest does. The provider places and sends those bytes from its own
 * threads, as an RNIC's DMA would, so the order is the peer's answer on the
 * wire, which no tool inside this process can see. These accessors are
 * therefore not instrumented by ThreadSanitizer (so its reports stay about
 * the provider, where a race is a bug).
 */
#ifndef TC_POLLED_H
#define TC_POLLED_H

#include <stdint.h>

/* The byte at p, read once. */
uint8_t tc_polled_byte(const volatile uint8_t *p);
/* The little-endian 32-bit value at p (perftest's credit count). */
uint32_t tc_polled_le32(const volatile uint8_t *p);
/* Stores v at p. */
void tc_polled_store(volatile uint8_t *p, uint8_t v);

#endif
