/*
 * log.h - libndk's diagnostic log (docs/behaviour.md "Logging").
 *
 * NDK_LOG=LEVEL[,CATEGORY...] chooses what is written: every category at
 * LEVEL, or only the named ones (the others stay at the default, warn).
 * NDK_DEBUG (any value) is an alias of NDK_LOG=debug when NDK_LOG is unset.
 * NDK_LOG_TARGET=stderr (default), syslog or journal (journald reads the
 * syslog socket) chooses where lines go (net/log_sink.c).
 *
 * A disabled line costs one byte load and a compare. Lines are rate
 * limited per category (a token bucket), so a peer that sends garbage
 * cannot fill a disk: what the bucket drops is counted and reported in a
 * "N messages suppressed" line once lines flow again.
 */
#ifndef NDK_LOG_H
#define NDK_LOG_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

enum ndk_log_level {
    NDK_LL_ERROR = 1, /* the process lost something: a CQ overflowed */
    NDK_LL_WARN,      /* a connection failed because of the wire: Terminates, bad MPA */
    NDK_LL_INFO,      /* connection events and negotiation results */
    NDK_LL_DEBUG,     /* why a set-up step failed, in detail */
    NDK_LL_TRACE,
};

enum ndk_log_cat {
    NDK_LC_CM,       /* connection management: connect, accept, reject, disconnect */
    NDK_LC_MPA,      /* MPA negotiation */
    NDK_LC_DP,       /* the data path: Terminates sent and received */
    NDK_LC_MEM,      /* memory registration */
    NDK_LC_CQ,       /* completion queues */
    NDK_LC_API,      /* consumer calls that break a rule */
    NDK_LC_STAT,     /* the ndkstat channel (stat.h) */
    NDK_LC_VERIFIER, /* the NDK verifier (docs/verifier.md) */
    NDK_LC_COUNT
};

/* The highest level written, per category (NDK_LL_WARN until configured). */
extern uint8_t ndk_log_max[NDK_LC_COUNT];

#define NDK_LOG_ON(lvl, cat) ((uint8_t)(lvl) <= ndk_log_max[cat])
/* obj (a const struct ndk_obj *, or NULL) names the adapter and object. */
#define NDK_LOG(lvl, cat, obj, ...)                                                              \
    do {                                                                                       \
        if (NDK_LOG_ON(lvl, cat))                                                              \
            ndk_log_emit(lvl, cat, obj, __VA_ARGS__);                                          \
    } while (0)

struct ndk_obj;
void ndk_log_emit(enum ndk_log_level lvl, enum ndk_log_cat cat, const struct ndk_obj *obj,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reads NDK_LOG, NDK_DEBUG and NDK_LOG_TARGET once per process (the first
 * adapter open, or the first line). */
void ndk_log_init(void);

/* Applies a specification (NULL: the default) and a target (NULL: stderr).
 * Each bad part is reported once, in one line, and ignored. Returns the
 * number of bad parts. Used by ndk_log_init and the tests. */
int ndk_log_configure(const char *spec, const char *target);

/* "1.2.3.4:5" or "[::1]:5" into buf (at least NDK_LOG_ADDR_LEN octets). */
#define NDK_LOG_ADDR_LEN 64
const char *ndk_log_addr(const NDK_SOCKADDR *a, char *buf);

/* Tests: where finished lines go instead of the sink, and the clock of the
 * rate limiter (NULL restores each). */
extern void (*ndk_log_test_writer)(enum ndk_log_level lvl, const char *line);
extern uint64_t (*ndk_log_test_clock_ms)(void);

/* Rate limit: a burst of NDK_LOG_BURST lines per category, refilled at
 * NDK_LOG_PER_SEC lines a second. */
#define NDK_LOG_BURST 50
#define NDK_LOG_PER_SEC 10

/* ---- net/log_sink.c ---- */
enum ndk_log_target { NDK_LOG_TO_STDERR, NDK_LOG_TO_SYSLOG };
/* Writes one finished line (no newline) with one write(2) or syslog(3). */
void ndk_log_sink_write(enum ndk_log_target to, enum ndk_log_level lvl, const char *line);
/* The wall clock for the line's time stamp, and a monotonic one (ms). */
void ndk_log_sink_time(char *buf, unsigned len);
uint64_t ndk_log_sink_now_ms(void);

#endif
