/* The diagnostic log (src/log.h), white box: NDK_LOG parsing, the one-time
 * complaint about bad values, the per-category rate limit and the line
 * format. Lines are captured through ndk_log_test_writer, and the rate
 * limiter runs on a clock the test moves. */
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "net/tcp.h"
#include "testlib.h"

#define MAX_LINES 256

static char g_lines[MAX_LINES][720];
static unsigned g_nlines;
static uint64_t g_clock_ms;

static void capture(enum ndk_log_level lvl, const char *line)
{
    (void)lvl;
    if (g_nlines < MAX_LINES)
        snprintf(g_lines[g_nlines], sizeof g_lines[0], "%s", line);
    g_nlines++;
}

static uint64_t test_clock(void)
{
    return g_clock_ms;
}

static unsigned count_matching(const char *needle)
{
    unsigned n = 0;
    for (unsigned i = 0; i < g_nlines && i < MAX_LINES; i++)
        n += strstr(g_lines[i], needle) != NULL;
    return n;
}

static void reset(void)
{
    g_nlines = 0;
}

static void levels_and_categories(void)
{
    CHECK_EQ(ndk_log_configure(NULL, NULL), 0);
    for (int c = 0; c < NDK_LC_COUNT; c++)
        CHECK_EQ(ndk_log_max[c], NDK_LL_WARN);

    CHECK_EQ(ndk_log_configure("debug", NULL), 0);
    for (int c = 0; c < NDK_LC_COUNT; c++)
        CHECK_EQ(ndk_log_max[c], NDK_LL_DEBUG);

    /* Named categories get the level; the others keep the default. */
    CHECK_EQ(ndk_log_configure("INFO,cm,Mpa", "stderr"), 0);
    CHECK_EQ(ndk_log_max[NDK_LC_CM], NDK_LL_INFO);
    CHECK_EQ(ndk_log_max[NDK_LC_MPA], NDK_LL_INFO);
    CHECK_EQ(ndk_log_max[NDK_LC_DP], NDK_LL_WARN);
    CHECK_EQ(ndk_log_max[NDK_LC_VERIFIER], NDK_LL_WARN);

    CHECK_EQ(ndk_log_configure("error", NULL), 0);
    CHECK_EQ(ndk_log_max[NDK_LC_CQ], NDK_LL_ERROR);
    CHECK_EQ(ndk_log_configure("trace,dp", NULL), 0);
    CHECK_EQ(ndk_log_max[NDK_LC_DP], NDK_LL_TRACE);
    CHECK_EQ(ndk_log_max[NDK_LC_CM], NDK_LL_WARN);
    CHECK(!NDK_LOG_ON(NDK_LL_INFO, NDK_LC_CM));
    CHECK(NDK_LOG_ON(NDK_LL_TRACE, NDK_LC_DP));
}

static void bad_values_complain_once(void)
{
    reset();
    CHECK_EQ(ndk_log_configure("loud,cm", NULL), 1);
    CHECK_EQ(g_nlines, 1u);
    CHECK(count_matching("\"loud\" is not a level (error, warn, info, debug, trace)") == 1);
    CHECK_EQ(ndk_log_max[NDK_LC_CM], NDK_LL_WARN); /* the default level, for the named category */

    reset();
    CHECK_EQ(ndk_log_configure("info,cm,bogus", "printer"), 2);
    CHECK_EQ(g_nlines, 2u);
    CHECK(count_matching("\"bogus\" is not a category") == 1);
    CHECK(count_matching("NDK_LOG_TARGET=printer is not stderr, syslog or journal") == 1);
    CHECK_EQ(ndk_log_max[NDK_LC_CM], NDK_LL_INFO); /* the good parts still apply */

    /* The complaint is about the configuration, not repeated per line. */
    reset();
    for (int i = 0; i < 5; i++)
        NDK_LOG(NDK_LL_INFO, NDK_LC_CM, NULL, "line %d", i);
    CHECK_EQ(g_nlines, 5u);
    CHECK_EQ(count_matching("is not"), 0u);
}

static void rate_limit_counts_suppressed(void)
{
    CHECK_EQ(ndk_log_configure("info", NULL), 0);
    reset();
    for (int i = 0; i < NDK_LOG_BURST + 30; i++)
        NDK_LOG(NDK_LL_WARN, NDK_LC_DP, NULL, "garbage %d", i);
    CHECK_EQ(g_nlines, (unsigned)NDK_LOG_BURST);
    /* Another category has its own bucket. */
    NDK_LOG(NDK_LL_WARN, NDK_LC_MPA, NULL, "other category");
    CHECK_EQ(g_nlines, NDK_LOG_BURST + 1u);

    /* A second later the bucket holds NDK_LOG_PER_SEC lines: the next one
     * is preceded by the count of what was dropped. */
    g_clock_ms += 1000;
    reset();
    NDK_LOG(NDK_LL_WARN, NDK_LC_DP, NULL, "after the pause");
    CHECK_EQ(g_nlines, 2u);
    CHECK(strstr(g_lines[0], "warn dp - -: 30 messages suppressed") != NULL);
    CHECK(strstr(g_lines[1], "after the pause") != NULL);
    for (int i = 0; i < 2 * NDK_LOG_PER_SEC; i++)
        NDK_LOG(NDK_LL_WARN, NDK_LC_DP, NULL, "more %d", i);
    CHECK_EQ(g_nlines, 2u + NDK_LOG_PER_SEC - 1);
    g_clock_ms += 60000;
    reset();
    NDK_LOG(NDK_LL_WARN, NDK_LC_DP, NULL, "later");
    CHECK(strstr(g_lines[0], ": 11 messages suppressed") != NULL);
}

static void format_has_time_pid_adapter_object(void)
{
    CHECK_EQ(ndk_log_configure("debug", NULL), 0);
    struct ndk_device dev;
    memset(&dev, 0, sizeof dev);
    snprintf(dev.name, sizeof dev.name, "eth7");
    struct ndk_adapter_impl ad;
    memset(&ad, 0, sizeof ad);
    ad.dev = &dev;
    ad.obj.type = NdkObjectTypeAdapter;
    ad.obj.ad = &ad;
    struct ndk_obj qp = {.type = NdkObjectTypeQp, .id = 42, .ad = &ad};

    reset();
    NDK_LOG(NDK_LL_WARN, NDK_LC_DP, &qp, "Terminate received: %s", "x");
    NDK_LOG(NDK_LL_INFO, NDK_LC_CM, &ad.obj, "adapter line");
    NDK_LOG(NDK_LL_DEBUG, NDK_LC_MEM, NULL, "no object");
    NDK_LOG(NDK_LL_TRACE, NDK_LC_MEM, NULL, "not at debug");
    REQUIRE(g_nlines == 3);

    char want[200];
    snprintf(want, sizeof want,
             "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z libndk\\[%ld\\] "
             "warn dp eth7 qp#42: Terminate received: x$",
             (long)getpid());
    regex_t re;
    REQUIRE(regcomp(&re, want, REG_EXTENDED | REG_NOSUB) == 0);
    CHECK(regexec(&re, g_lines[0], 0, NULL, 0) == 0);
    regfree(&re);
    CHECK(strstr(g_lines[1], " info cm eth7 -: adapter line") != NULL);
    CHECK(strstr(g_lines[2], " debug mem - -: no object") != NULL);
}

static void addresses(void)
{
    NDK_SOCKADDR a;
    char buf[NDK_LOG_ADDR_LEN];
    REQUIRE(ndk_sockaddr_parse("10.1.2.3:4791", 0, &a));
    CHECK(strcmp(ndk_log_addr(&a, buf), "10.1.2.3:4791") == 0);
    REQUIRE(ndk_sockaddr_parse("[fe80::1]:80", 0, &a));
    CHECK(strcmp(ndk_log_addr(&a, buf), "[fe80::1]:80") == 0);
}

int main(void)
{
    ndk_log_init(); /* the environment's configuration is read first and then replaced */
    ndk_log_test_writer = capture;
    ndk_log_test_clock_ms = test_clock;
    g_clock_ms = 1000000;
    RUN(levels_and_categories);
    RUN(bad_values_complain_once);
    RUN(rate_limit_counts_suppressed);
    RUN(format_has_time_pid_adapter_object);
    RUN(addresses);
    return tl_finish();
}
