/* peer_util.h: what ndk_peer and cm_peer share. */
#include "peer_util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", peer_name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void hex(char *dst, const void *src, size_t len)
{
    static const char digits[] = "0123456789abcdef";
    const uint8_t *s = src;
    for (size_t i = 0; i < len; i++) {
        dst[2 * i] = digits[s[i] >> 4];
        dst[2 * i + 1] = digits[s[i] & 15];
    }
    dst[2 * len] = '\0';
}

unsigned long number(const char *s, unsigned long max)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || end == s || *end || v > max) {
        diag("bad number: %s", s);
        usage();
    }
    return v;
}
