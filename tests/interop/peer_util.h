/*
 * peer_util - what the two ends of the siw interop tests share: ndk_peer
 * (libndk on the host) and cm_peer (librdmacm in the guest) print their
 * lines, their private data and their diagnostics alike, and parse numbers
 * on their command lines alike.
 */
#ifndef NDK_INTEROP_PEER_UTIL_H
#define NDK_INTEROP_PEER_UTIL_H

#include <stddef.h>

/* The program's name, for diag(); each peer defines it. */
extern const char peer_name[];

/* Prints the usage and exits with status 2; each peer defines it. */
void usage(void) __attribute__((noreturn));

/* One line to stdout, flushed: the driver reads the lines while the peer
 * runs (LISTENING, HOLDING), and the guest's console interleaves several
 * programs. */
void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line to stderr, prefixed with "peer_name: ". */
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* LEN octets of SRC as lower-case hex in DST (2 * LEN + 1 bytes). */
void hex(char *dst, const void *src, size_t len);

/* The decimal number S, at most MAX; anything else is a usage error. */
unsigned long number(const char *s, unsigned long max);

#endif
