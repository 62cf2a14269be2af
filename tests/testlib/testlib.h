/* Minimal test support: checks that count failures, named test cases, and
 * bounded waits on events signalled from other threads (never sleeps). */
#ifndef NDK_TESTLIB_H
#define NDK_TESTLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

extern int tl_failures;
extern const char *tl_current;

/* Counts a failure of the current case and says where: what failed is
 * printed after the file, line and case. */
#define TL_FAIL(fmt, ...)                                                                    \
    (tl_failures++, fprintf(stderr, "%s:%d: [%s] " fmt "\n", __FILE__, __LINE__,              \
                            tl_current ? tl_current : "-", __VA_ARGS__))

#define CHECK(cond)                                                                          \
    do {                                                                                     \
        if (!(cond))                                                                         \
            TL_FAIL("check failed: %s", #cond);                                              \
    } while (0)

#define CHECK_EQ(a, b)                                                                       \
    do {                                                                                     \
        long long tl_a_ = (long long)(a), tl_b_ = (long long)(b);                           \
        if (tl_a_ != tl_b_)                                                                  \
            TL_FAIL("%s == %s failed: %lld (0x%llx) != %lld (0x%llx)", #a, #b, tl_a_,        \
                    (unsigned long long)tl_a_, tl_b_, (unsigned long long)tl_b_);            \
    } while (0)

/* Stops the current test case (the rest of it would only cascade). */
#define REQUIRE(cond)                                                                        \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            TL_FAIL("required: %s", #cond);                                                  \
            return;                                                                          \
        }                                                                                    \
    } while (0)

typedef void (*tl_case_fn)(void);
/* Runs one case, prints its result; returns true when it passed. RUN is for
 * a case that uses no network address: it runs in the IPv4 run only. */
bool tl_run(const char *name, tl_case_fn fn);
#define RUN(fn) tl_run(#fn, fn)

/* TL_CASES picks a program's cases (for CTest, which registers a case that
 * a known defect fails on one transport as a test of its own, disabled):
 * "a,b" runs only the cases a and b; "-a" runs all but a. A case left out
 * is neither passed nor failed. */

/*
 * Address families. A program whose cases connect runs them over one family
 * per process: IPv4 by default, IPv6 when started with --ipv6, so that CTest
 * shows each family as its own test (NAME and NAME.ipv6, registered for
 * every source that uses RUN_FAM) and an IPv6 run on a host without ::1 as
 * skipped, never as passed. Such a program calls tl_init first; the IPv6
 * run exits 77 at once, with the reason, when ::1 cannot be bound. A
 * RUN_FAM case reads its family from tl_family().
 */
void tl_init(int argc, char **argv);
int tl_family(void);
bool tl_run_fam(const char *name, tl_case_fn fn);
#define RUN_FAM(fn) tl_run_fam(#fn, fn)

/* A case `name` whose body runs between begin(#name) and end(): a harness's
 * per-case set-up and checks (DP_CASE, NT_CASE). arg is what the body is
 * called with, decl its parameter list. */
#define TL_CASE_BETWEEN(name, begin, end, decl, arg)                                         \
    static void name##_body decl;                                                            \
    static void name(void)                                                                   \
    {                                                                                        \
        begin(#name);                                                                        \
        name##_body arg;                                                                     \
        end();                                                                               \
    }                                                                                        \
    static void name##_body decl

/* Ends the program's report: prints "N passed, N failed" and returns the
 * exit status: 1 if a case failed or none ran, else 77 (CTest's
 * SKIP_RETURN_CODE) after tl_skip_all, else 0. */
int tl_finish(void);

/* Prints a reason and makes tl_finish() report the whole program as skipped
 * (CTest's SKIP_RETURN_CODE 77). Cases that can run where others cannot go
 * to a run of their own, as the IPv6 run does, so that no skipped case is
 * ever counted as passed. */
void tl_skip_all(const char *reason);

/* The next record of a harness's static pool of max records of size bytes
 * (*used of them taken), zeroed. Aborts with "out of WHAT" when all are
 * taken: a case that needs more is a harness to enlarge, not a failure to
 * count. */
void *tl_take_record(void *pool, size_t size, unsigned *used, unsigned max, const char *what);

/* A counting event: signalled from callbacks, waited on with a bound. */
typedef struct tl_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned count;
} tl_event;
void tl_event_init(tl_event *e);
void tl_event_destroy(tl_event *e);
void tl_event_signal(tl_event *e);
/* Waits until count >= n or timeout_ms elapses; returns true if reached. */
bool tl_event_wait(tl_event *e, unsigned n, unsigned timeout_ms);
unsigned tl_event_count(tl_event *e);

uint64_t tl_now_ns(void);

/* The time ms from now on clock, as pthread_cond_timedwait takes it (a
 * condition variable's clock: CLOCK_REALTIME unless set otherwise). */
struct timespec tl_deadline(clockid_t clock, unsigned ms);

/* Moves the calling thread into a network namespace of its own (only lo,
 * down). Call it first, before any thread exists: a namespace applies to
 * the calling thread, and the adapters' progress threads inherit it. False,
 * with the whole program marked skipped (tl_skip_all), where the process may
 * not (it needs root or CAP_SYS_ADMIN). */
bool tl_unshare_netns(void);

/* The process's resident set (VmRSS) in KiB; -1 when unknown. */
long tl_rss_kib(void);

/* The process's open file descriptors. */
unsigned tl_open_fds(void);

#endif
