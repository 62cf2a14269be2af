/* The diagnostic log: configuration from the environment, rate limiting
 * and line format (log.h). Where lines go is net/log_sink.c. */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "core.h"
#include "log.h"

uint8_t ndk_log_max[NDK_LC_COUNT] = {
    NDK_LL_WARN, NDK_LL_WARN, NDK_LL_WARN, NDK_LL_WARN,
    NDK_LL_WARN, NDK_LL_WARN, NDK_LL_WARN, NDK_LL_WARN,
};
void (*ndk_log_test_writer)(enum ndk_log_level lvl, const char *line);
uint64_t (*ndk_log_test_clock_ms)(void);

static const char *const level_names[] = {NULL, "error", "warn", "info", "debug", "trace"};
static const char *const cat_names[NDK_LC_COUNT] = {"cm",  "mpa",  "dp",      "mem",
                                                    "cq",  "api",  "stat",    "verifier"};

/* Token buckets, in thousandths of a line so the refill needs no float. */
struct bucket {
    uint64_t milli_tokens;
    uint64_t last_ms;
    uint64_t suppressed;
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static struct bucket buckets[NDK_LC_COUNT];
static enum ndk_log_target target = NDK_LOG_TO_STDERR;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static uint64_t now_ms(void)
{
    return ndk_log_test_clock_ms ? ndk_log_test_clock_ms() : ndk_log_sink_now_ms();
}

static void write_line(enum ndk_log_level lvl, const char *line)
{
    if (ndk_log_test_writer)
        ndk_log_test_writer(lvl, line);
    else
        ndk_log_sink_write(target, lvl, line);
}

/* A line about the configuration itself: not rate limited, no object. */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
    char msg[256], line[360];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char ts[40];
    ndk_log_sink_time(ts, sizeof ts);
    snprintf(line, sizeof line, "%s libndk[%ld] warn - - -: %s", ts, (long)getpid(), msg);
    write_line(NDK_LL_WARN, line);
}

static int parse_level(const char *s, size_t n)
{
    for (int l = NDK_LL_ERROR; l <= NDK_LL_TRACE; l++)
        if (strlen(level_names[l]) == n && strncasecmp(s, level_names[l], n) == 0)
            return l;
    return 0;
}

static int parse_cat(const char *s, size_t n)
{
    for (int c = 0; c < NDK_LC_COUNT; c++)
        if (strlen(cat_names[c]) == n && strncasecmp(s, cat_names[c], n) == 0)
            return c;
    return -1;
}

int ndk_log_configure(const char *spec, const char *to)
{
    int bad = 0;
    uint8_t lv[NDK_LC_COUNT];
    memset(lv, NDK_LL_WARN, sizeof lv);
    enum ndk_log_target t = NDK_LOG_TO_STDERR;

    if (to && *to && strcasecmp(to, "stderr") != 0) {
        if (strcasecmp(to, "syslog") == 0 || strcasecmp(to, "journal") == 0) {
            t = NDK_LOG_TO_SYSLOG;
        } else {
            complain("NDK_LOG_TARGET=%.64s is not stderr, syslog or journal: logging to stderr", to);
            bad++;
        }
    }
    pthread_mutex_lock(&log_lock);
    target = t;
    pthread_mutex_unlock(&log_lock);

    if (spec && *spec) {
        size_t n = strcspn(spec, ",");
        int level = parse_level(spec, n);
        if (!level) {
            complain("NDK_LOG=%.64s: \"%.*s\" is not a level (error, warn, info, debug, trace): "
                     "using warn",
                     spec, (int)(n > 32 ? 32 : n), spec);
            bad++;
            level = NDK_LL_WARN;
        }
        bool any_cat = false;
        for (const char *p = spec + n; *p == ',';) {
            p++;
            size_t m = strcspn(p, ",");
            int c = parse_cat(p, m);
            if (c < 0) {
                complain("NDK_LOG: \"%.*s\" is not a category (cm, mpa, dp, mem, cq, api, stat, "
                         "verifier): ignored",
                         (int)(m > 32 ? 32 : m), p);
                bad++;
            } else {
                lv[c] = (uint8_t)level;
                any_cat = true;
            }
            p += m;
        }
        if (!any_cat && spec[n] == '\0')
            memset(lv, level, sizeof lv);
    }
    pthread_mutex_lock(&log_lock);
    for (int c = 0; c < NDK_LC_COUNT; c++) {
        __atomic_store_n(&ndk_log_max[c], lv[c], __ATOMIC_RELAXED);
        buckets[c] = (struct bucket){.milli_tokens = NDK_LOG_BURST * 1000ull, .last_ms = now_ms()};
    }
    pthread_mutex_unlock(&log_lock);
    return bad;
}

static void init_from_env(void)
{
    const char *spec = getenv("NDK_LOG");
    if ((!spec || !*spec) && getenv("NDK_DEBUG"))
        spec = "debug"; /* the older switch, kept as an alias */
    ndk_log_configure(spec, getenv("NDK_LOG_TARGET"));
}

void ndk_log_init(void)
{
    pthread_once(&init_once, init_from_env);
}

static const char *type_name(NDK_OBJECT_TYPE t)
{
    switch (t) {
    case NdkObjectTypeAdapter: return "adapter";
    case NdkObjectTypeQp: return "qp";
    case NdkObjectTypeCq: return "cq";
    case NdkObjectTypeMr: return "mr";
    case NdkObjectTypeMw: return "mw";
    case NdkObjectTypePd: return "pd";
    case NdkObjectTypeSharedEndpoint: return "sep";
    case NdkObjectTypeConnector: return "conn";
    case NdkObjectTypeListener: return "listener";
    case NdkObjectTypeSrq: return "srq";
    default: return "obj";
    }
}

/* Takes a token from cat's bucket (log_lock held). */
static bool bucket_take(struct bucket *b)
{
    uint64_t now = now_ms();
    if (now > b->last_ms) {
        b->milli_tokens += (now - b->last_ms) * NDK_LOG_PER_SEC;
        if (b->milli_tokens > NDK_LOG_BURST * 1000ull)
            b->milli_tokens = NDK_LOG_BURST * 1000ull;
        b->last_ms = now;
    }
    if (b->milli_tokens < 1000)
        return false;
    b->milli_tokens -= 1000;
    return true;
}

void ndk_log_emit(enum ndk_log_level lvl, enum ndk_log_cat cat, const struct ndk_obj *obj,
                  const char *fmt, ...)
{
    ndk_log_init();
    if (!NDK_LOG_ON(lvl, cat))
        return; /* the first line of the process, before the configuration */
    /* The rate limiter decides first: a line it drops costs no formatting
     * (a peer that provokes one warning per message must not buy a
     * formatted line and a getpid per message). Formatting under the lock
     * keeps the lines in the order their tokens were taken. */
    pthread_mutex_lock(&log_lock);
    struct bucket *b = &buckets[cat];
    if (!bucket_take(b)) {
        b->suppressed++;
        pthread_mutex_unlock(&log_lock);
        return;
    }
    char ts[40], who[IF_NAMESIZE + 32], msg[512], line[700];
    ndk_log_sink_time(ts, sizeof ts);
    if (b->suppressed) {
        char note[160];
        snprintf(note, sizeof note, "%s libndk[%ld] warn %s - -: %llu messages suppressed", ts, (long)getpid(),
                 cat_names[cat], (unsigned long long)b->suppressed);
        b->suppressed = 0;
        write_line(NDK_LL_WARN, note);
    }
    if (!obj)
        snprintf(who, sizeof who, "- -");
    else if (obj->type == NdkObjectTypeAdapter)
        snprintf(who, sizeof who, "%s -", obj->ad->dev->name);
    else
        snprintf(who, sizeof who, "%s %s#%u", obj->ad ? obj->ad->dev->name : "-", type_name(obj->type),
                 obj->id);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "%s libndk[%ld] %s %s %s: %s", ts, (long)getpid(), level_names[lvl],
             cat_names[cat], who, msg);
    write_line(lvl, line);
    pthread_mutex_unlock(&log_lock);
}

const char *ndk_log_addr(const NDK_SOCKADDR *a, char *buf)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->sa.sa_family == AF_INET) {
        inet_ntop(AF_INET, &a->in4.sin_addr, ip, sizeof ip);
        snprintf(buf, NDK_LOG_ADDR_LEN, "%s:%u", ip, ntohs(a->in4.sin_port));
    } else if (a->sa.sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &a->in6.sin6_addr, ip, sizeof ip);
        snprintf(buf, NDK_LOG_ADDR_LEN, "[%s]:%u", ip, ntohs(a->in6.sin6_port));
    } else {
        snprintf(buf, NDK_LOG_ADDR_LEN, "-");
    }
    return buf;
}
