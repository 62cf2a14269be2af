/*
 * polled.c - see polled.h: memory accesses ordered only by the peer, kept
 * out of ThreadSanitizer's view. Out of line (noinline) so that the attribute
 * holds whatever the caller's optimisation does.
 */
#include "polled.h"

#define TC_UNTRACKED __attribute__((noinline, no_sanitize("thread")))

TC_UNTRACKED uint8_t tc_polled_byte(const volatile uint8_t *p)
{
    return *p;
}

TC_UNTRACKED uint32_t tc_polled_le32(const volatile uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

TC_UNTRACKED void tc_polled_store(volatile uint8_t *p, uint8_t v)
{
    *p = v;
}
