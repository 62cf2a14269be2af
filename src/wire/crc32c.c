/*
 * CRC32c (Castagnoli, reflected polynomial 0x82F63B78) for the MPA FPDU CRC.
 *
 * Two implementations give identical registers: the SSE4.2 crc32 instruction
 * (used when the CPU has it) and portable slicing-by-8. The slicing tables are
 * built on first use; until a thread sees them finished it falls back to the
 * bit-wise loop, so there is neither a lock nor a data race on the tables.
 */
#include "crc32c.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define CRC32C_HAVE_X86 1
#else
#define CRC32C_HAVE_X86 0
#endif

#define CRC32C_POLY 0x82F63B78u

/* ---- test-only section: the tests reach the non-dispatching paths through
 * these; they are deliberately not in crc32c.h. ---- */
uint32_t crc32c_update_portable(uint32_t reg, const void *data, size_t len);
uint32_t crc32c_update_bitwise(uint32_t reg, const void *data, size_t len);
/* Non-zero when crc32c_update() dispatches to the SSE4.2 instruction, so the
 * test can say which path the default entry point exercised. */
int crc32c_hw_active(void);
/* ---- end of test-only section ---- */

uint32_t crc32c_update_bitwise(uint32_t reg, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (; len; len--) {
        reg ^= *p++;
        for (int k = 0; k < 8; k++)
            reg = (reg >> 1) ^ (CRC32C_POLY & (0u - (reg & 1u)));
    }
    return reg;
}

/* tab[0] is the classic byte table; tab[k][b] advances tab[k-1][b] by one more
 * zero octet, which is what lets eight octets be folded with eight lookups. */
static uint32_t tab[8][256];
enum { TAB_NONE, TAB_BUILDING, TAB_READY };
static atomic_int tab_state = TAB_NONE;

static void tab_build(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t r = b;
        for (int k = 0; k < 8; k++)
            r = (r >> 1) ^ (CRC32C_POLY & (0u - (r & 1u)));
        tab[0][b] = r;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            tab[k][b] = (tab[k - 1][b] >> 8) ^ tab[0][tab[k - 1][b] & 0xFF];
}

static bool tab_ready(void)
{
    int s = atomic_load_explicit(&tab_state, memory_order_acquire);
    if (s == TAB_READY)
        return true;
    int expect = TAB_NONE;
    if (s == TAB_NONE &&
        atomic_compare_exchange_strong_explicit(&tab_state, &expect, TAB_BUILDING,
                                                memory_order_acq_rel, memory_order_acquire)) {
        tab_build();
        atomic_store_explicit(&tab_state, TAB_READY, memory_order_release);
        return true;
    }
    /* Another thread is building them right now. */
    return false;
}

static inline uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t crc32c_update_portable(uint32_t reg, const void *data, size_t len)
{
    if (!tab_ready())
        return crc32c_update_bitwise(reg, data, len);
    const uint8_t *p = data;
    while (len >= 8) {
        /* Explicit little-endian assembly keeps the result independent of
         * host byte order (the CRC is defined over the octet sequence). */
        uint32_t lo = reg ^ le32(p);
        uint32_t hi = le32(p + 4);
        reg = tab[7][lo & 0xFF] ^ tab[6][(lo >> 8) & 0xFF] ^ tab[5][(lo >> 16) & 0xFF] ^
              tab[4][lo >> 24] ^ tab[3][hi & 0xFF] ^ tab[2][(hi >> 8) & 0xFF] ^
              tab[1][(hi >> 16) & 0xFF] ^ tab[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    for (; len; len--)
        reg = (reg >> 8) ^ tab[0][(reg ^ *p++) & 0xFF];
    return reg;
}

#if CRC32C_HAVE_X86
__attribute__((target("sse4.2"))) static uint32_t crc32c_update_sse42(uint32_t reg,
                                                                      const void *data,
                                                                      size_t len)
{
    const uint8_t *p = data;
    /* Align the word loads; unaligned ones work but cost more on older cores. */
    while (len && ((uintptr_t)p & 7)) {
        reg = _mm_crc32_u8(reg, *p++);
        len--;
    }
#if defined(__x86_64__)
    uint64_t r64 = reg;
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        r64 = _mm_crc32_u64(r64, w);
        p += 8;
        len -= 8;
    }
    reg = (uint32_t)r64;
#else
    while (len >= 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        reg = _mm_crc32_u32(reg, w);
        p += 4;
        len -= 4;
    }
#endif
    for (; len; len--)
        reg = _mm_crc32_u8(reg, *p++);
    return reg;
}

/* -1 = not probed yet. Racing probes store the same answer, hence relaxed. */
static atomic_int hw_state = -1;

static bool hw_available(void)
{
    int s = atomic_load_explicit(&hw_state, memory_order_relaxed);
    if (s < 0) {
        /* The probe may run before libgcc's constructor has filled the CPU
         * model (e.g. from another constructor), so initialise it here. */
        __builtin_cpu_init();
        s = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        atomic_store_explicit(&hw_state, s, memory_order_relaxed);
    }
    return s != 0;
}
#endif

int crc32c_hw_active(void)
{
#if CRC32C_HAVE_X86
    return hw_available();
#else
    return 0;
#endif
}

uint32_t crc32c_update(uint32_t reg, const void *data, size_t len)
{
    if (len == 0)
        return reg;
#if CRC32C_HAVE_X86
    if (hw_available())
        return crc32c_update_sse42(reg, data, len);
#endif
    return crc32c_update_portable(reg, data, len);
}

uint32_t crc32c(const void *data, size_t len)
{
    return crc32c_final(crc32c_update(crc32c_init(), data, len));
}
