#include "testlib.h"

#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int tl_failures;
const char *tl_current;
static int passed, failed;
static bool skipped_all;
static bool initialised;
static int family = AF_INET;

/* Is name in the comma-separated list (each entry after `skip` octets)? */
static bool listed(const char *list, const char *name, size_t skip)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == n + skip && !strncmp(p + skip, name, n) && (!skip || *p == '-'))
            return true;
        p += len + (p[len] == ',');
    }
    return false;
}

/* TL_CASES (testlib.h): "-a" leaves a out, "a" runs a alone. */
static bool case_selected(const char *name)
{
    const char *list = getenv("TL_CASES");
    if (!list || !*list)
        return true;
    return *list == '-' ? !listed(list, name, 1) : listed(list, name, 0);
}

static bool run_case(const char *name, const char *suffix, tl_case_fn fn)
{
    if (!case_selected(name))
        return true;
    int before = tl_failures;
    tl_current = name;
    uint64_t t0 = tl_now_ns();
    fn();
    uint64_t ms = (tl_now_ns() - t0) / 1000000;
    tl_current = NULL;
    bool ok = tl_failures == before;
    fprintf(stderr, "%s %s%s (%llu ms)\n", ok ? "PASS" : "FAIL", name, suffix,
            (unsigned long long)ms);
    if (ok)
        passed++;
    else
        failed++;
    return ok;
}

bool tl_run(const char *name, tl_case_fn fn)
{
    /* A case without an address belongs to the IPv4 run alone. */
    if (family != AF_INET)
        return true;
    return run_case(name, "", fn);
}

bool tl_run_fam(const char *name, tl_case_fn fn)
{
    if (!initialised) {
        /* Without tl_init an --ipv6 run would silently test IPv4 again. */
        fprintf(stderr, "FAIL %s: the program uses RUN_FAM without calling tl_init\n", name);
        tl_failures++;
        failed++;
        return false;
    }
    return run_case(name, family == AF_INET6 ? " [IPv6]" : " [IPv4]", fn);
}

/* Whether a TCP socket can be bound to ::1 (IPv6 may be disabled, or lo may
 * have no ::1). */
static bool have_ipv6_loopback(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

void tl_init(int argc, char **argv)
{
    initialised = true;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--ipv6") == 0) {
            family = AF_INET6;
        } else {
            fprintf(stderr, "usage: %s [--ipv6]\n", argv[0]);
            exit(2);
        }
    }
    if (family == AF_INET6 && !have_ipv6_loopback()) {
        printf("SKIP: ::1 cannot be bound on this host (IPv6 disabled or no ::1 on lo); "
               "the IPv6 run needs it\n");
        exit(77);
    }
}

int tl_family(void)
{
    return family;
}

void tl_skip_all(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    skipped_all = true;
}

int tl_finish(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    if (failed)
        return 1;
    if (skipped_all)
        return 77;
    if (passed == 0) {
        printf("FAIL: no case ran\n");
        return 1;
    }
    return 0;
}

void *tl_take_record(void *pool, size_t size, unsigned *used, unsigned max, const char *what)
{
    if (*used >= max) {
        fprintf(stderr, "out of %s\n", what);
        abort();
    }
    void *r = (char *)pool + (size_t)(*used)++ * size;
    memset(r, 0, size);
    return r;
}

void tl_event_init(tl_event *e)
{
    pthread_mutex_init(&e->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv, &ca);
    pthread_condattr_destroy(&ca);
    e->count = 0;
}

void tl_event_destroy(tl_event *e)
{
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->mu);
}

void tl_event_signal(tl_event *e)
{
    pthread_mutex_lock(&e->mu);
    e->count++;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
}

unsigned tl_event_count(tl_event *e)
{
    pthread_mutex_lock(&e->mu);
    unsigned c = e->count;
    pthread_mutex_unlock(&e->mu);
    return c;
}

bool tl_event_wait(tl_event *e, unsigned n, unsigned timeout_ms)
{
    struct timespec dl = tl_deadline(CLOCK_MONOTONIC, timeout_ms);
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (e->count < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    bool ok = e->count >= n;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

struct timespec tl_deadline(clockid_t clock, unsigned ms)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

uint64_t tl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

bool tl_unshare_netns(void)
{
    if (unshare(CLONE_NEWNET) == 0)
        return true;
    char why[160];
    snprintf(why, sizeof why,
             "unshare(CLONE_NEWNET) failed: %s (needs root/CAP_SYS_ADMIN and network namespaces)",
             strerror(errno));
    tl_skip_all(why);
    return false;
}

long tl_rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[128];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

unsigned tl_open_fds(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 0;
    while (readdir(d))
        n++;
    closedir(d);
    return n - 3; /* ".", ".." and the directory's own */
}
