#include "rawframe.h"

#include <stdio.h>
#include <string.h>

const uint8_t rp_siw_request[24] = {
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46,
    0x72, 0x61, 0x6d, 0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
};

const char *const rp_siw_crc_fpdus[RP_SIW_CRC_FPDUS] = {
    /* guest-to-host-rping-crc.txt */
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 55 8b 81 c7 e3 70 31 55 "
    "4d 00 00 00 00 40 d2 d2 b3 96",
    "00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 ab c1 00 00 00 00 00 00 01 "
    "00 00 00 00 00 40 31 55 4d 00 00 00 55 8b 81 c7 e3 70 20 59 3c 8f",
    "00 4e c1 42 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 "
    "42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f "
    "60 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 9e f3 27 47",
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 00 00 00 00 00 "
    "00 00 00 00 00 00 84 60 9a 12",
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 55 8b 81 c7 e5 50 4d 5e "
    "20 00 00 00 00 40 d3 27 dc 6b",
    "00 4e c1 40 4d 5e 20 00 00 00 55 8b 81 c7 e5 50 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 "
    "42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f "
    "60 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 20 53 c2 c7",
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00 00 "
    "00 00 00 00 00 00 b3 e6 84 05",
    /* host-to-guest-rping-crc.txt */
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 00 02 00 00 00 ab "
    "c2 00 00 00 00 40 f7 ad 73 8f",
    "00 2e 41 41 00 00 00 00 00 00 00 01 00 00 00 01 00 00 00 00 1f 93 e4 00 00 00 7f 8d fc 00 "
    "0e 00 00 00 00 40 00 ab c2 00 00 00 00 00 00 02 00 00 0b 47 44 cf",
    "00 4e c1 42 1f 93 e4 00 00 00 7f 8d fc 00 0e 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 "
    "42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f "
    "60 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 1f 46 a5 6d",
    "00 22 41 43 00 00 00 00 00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 00 00 01 00 00 00 ab "
    "c1 00 00 00 00 40 a8 8e af 10",
    "00 4e c1 40 00 ab c1 00 00 00 00 00 00 01 00 00 72 64 6d 61 2d 70 69 6e 67 2d 30 3a 20 41 "
    "42 43 44 45 46 47 48 49 4a 4b 4c 4d 4e 4f 50 51 52 53 54 55 56 57 58 59 5a 5b 5c 5d 5e 5f "
    "60 61 62 63 64 65 66 67 68 69 6a 6b 6c 6d 6e 6f 70 71 72 00 ef b7 64 36",
};

void rp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

void rp_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

uint16_t rp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

uint32_t rp_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

uint32_t rp_crc32c(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
    return crc ^ 0xFFFFFFFFu;
}

uint64_t rp_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

size_t rp_unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    int hi = -1;
    for (; *s; s++) {
        int v;
        if (*s >= '0' && *s <= '9')
            v = *s - '0';
        else if (*s >= 'a' && *s <= 'f')
            v = *s - 'a' + 10;
        else if (*s >= 'A' && *s <= 'F')
            v = *s - 'A' + 10;
        else
            continue;
        if (hi < 0) {
            hi = v;
        } else {
            if (n < cap)
                out[n] = (uint8_t)(hi << 4 | v);
            n++;
            hi = -1;
        }
    }
    return n;
}

void rp_hexdump(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "    %s (%zu octets):", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%02x", i % 16 ? " " : "\n      ", p[i]);
    fprintf(stderr, "\n");
}

size_t rp_frame_raw(uint8_t *out, const char *key, uint8_t flags, uint8_t rev,
                    uint16_t pd_length, const void *pd, size_t pd_len)
{
    memcpy(out, key, RP_KEY_LEN);
    out[16] = flags;
    out[17] = rev;
    rp_put16(out + 18, pd_length);
    if (pd_len)
        memcpy(out + RP_HDR_LEN, pd, pd_len);
    return RP_HDR_LEN + pd_len;
}

size_t rp_frame_v2(uint8_t *out, const char *key, uint8_t flags, uint16_t w0,
                   uint16_t w1, const void *ulp, size_t ulp_len)
{
    uint8_t pd[4 + 512];
    rp_put16(pd, w0);
    rp_put16(pd + 2, w1);
    if (ulp_len)
        memcpy(pd + 4, ulp, ulp_len);
    return rp_frame_raw(out, key, (uint8_t)(flags | RP_F_S), 2, (uint16_t)(4 + ulp_len), pd,
                        4 + ulp_len);
}

size_t rp_fpdu(uint8_t *out, const uint8_t *ulpdu, size_t ulpdu_len, bool crc)
{
    size_t pad = (4 - ((2 + ulpdu_len) & 3)) & 3;
    rp_put16(out, (uint16_t)ulpdu_len);
    memcpy(out + 2, ulpdu, ulpdu_len);
    memset(out + 2 + ulpdu_len, 0, pad);
    size_t n = 2 + ulpdu_len + pad;
    uint32_t c = crc ? rp_crc32c(out, n) : 0;
    /* The CRC travels least-significant octet first (as siw and every
     * RFC 5044 peer send it). */
    out[n] = (uint8_t)c;
    out[n + 1] = (uint8_t)(c >> 8);
    out[n + 2] = (uint8_t)(c >> 16);
    out[n + 3] = (uint8_t)(c >> 24);
    return n + 4;
}

size_t rp_write_rtr(uint8_t out[20], bool crc)
{
    uint8_t u[14] = {0xC1, 0x40};
    rp_put32(u + 2, 1);
    return rp_fpdu(out, u, sizeof u, crc);
}

size_t rp_send_fpdu(uint8_t *out, uint32_t msn, const void *payload, size_t len,
                    bool crc)
{
    uint8_t u[18 + 256];
    memset(u, 0, 18);
    u[0] = 0x41; /* DDP: T=0 L=1 DV=1 */
    u[1] = 0x43; /* RDMAP: RV=1, Send */
    rp_put32(u + 6, 0);   /* QN 0 */
    rp_put32(u + 10, msn);
    rp_put32(u + 14, 0);  /* MO 0 */
    memcpy(u + 18, payload, len);
    return rp_fpdu(out, u, 18 + len, crc);
}
