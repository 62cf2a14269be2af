/* CRC32c (Castagnoli), as MPA uses it (RFC 5044). */
#ifndef NDK_WIRE_CRC32C_H
#define NDK_WIRE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Running register form: start with crc32c_init(), feed any number of
 * pieces, then crc32c_final() gives the CRC value (sent LSB first). */
static inline uint32_t crc32c_init(void) { return 0xFFFFFFFFu; }
uint32_t crc32c_update(uint32_t reg, const void *data, size_t len);
static inline uint32_t crc32c_final(uint32_t reg) { return reg ^ 0xFFFFFFFFu; }

/* One-shot CRC32c of a buffer. crc32c("123456789") == 0xE3069283. */
uint32_t crc32c(const void *data, size_t len);

#endif
