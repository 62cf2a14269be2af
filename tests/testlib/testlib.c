#include "testlib.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

int tl_failures;
const char *tl_current;
static int passed, failed;
static bool skipped;

bool tl_run(const char *name, tl_case_fn fn)
{
    int before = tl_failures;
    tl_current = name;
    uint64_t t0 = tl_now_ns();
    fn();
    uint64_t ms = (tl_now_ns() - t0) / 1000000;
    tl_current = NULL;
    bool ok = tl_failures == before;
    fprintf(stderr, "%s %s (%llu ms)\n", ok ? "PASS" : "FAIL", name, (unsigned long long)ms);
    if (ok)
        passed++;
    else
        failed++;
    return ok;
}

void tl_skip_all(const char *reason)
{
    fprintf(stderr, "SKIP: %s\n", reason);
    skipped = true;
}

int tl_finish(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    if (failed)
        return 1;
    return skipped && passed == 0 ? 77 : 0;
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
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&e->mu);
    int rc = 0;
    while (e->count < n && rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&e->cv, &e->mu, &dl);
    bool ok = e->count >= n;
    pthread_mutex_unlock(&e->mu);
    return ok;
}

uint64_t tl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
