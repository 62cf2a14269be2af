/*
 * inject.h - allocation-failure injection for libndk's internals.
 *
 * The tests here link a copy of ndk_core whose calls to malloc, calloc,
 * realloc, strdup, strndup, posix_memalign, aligned_alloc and free were
 * renamed (objcopy --redefine-sym, tests/inject/CMakeLists.txt) to the
 * ndk_inj_* functions of inject.c. So the test controls every allocation
 * libndk makes, on any thread, and none of its own (the test's code, libc's
 * internals and the sanitizer runtime allocate normally).
 *
 * inj_arm(n): the n-th libndk allocation from now fails (returns NULL, as
 * when memory runs out), once; every other one succeeds. inj_live() counts
 * libndk's blocks not yet freed, whenever allocated: back at its starting
 * value once everything is closed, or something leaked.
 *
 * A test names each libndk call it makes (inj_call) so a failure can be
 * charged to it: inj_hit_in_call() says whether the injected failure
 * happened on this thread since its last inj_call, i.e. inside that call.
 */
#ifndef NDK_TESTS_INJECT_H
#define NDK_TESTS_INJECT_H

#include <ndk/ndk.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fails the n-th libndk allocation from now (1 = the next one); 0 disarms. */
void inj_arm(uint64_t n);
void inj_disarm(void);
/* libndk allocations made since the last inj_arm. */
uint64_t inj_count(void);
/* Whether the armed failure happened (on any thread). */
bool inj_fired(void);
/* The call the failing thread had named (inj_call), or "a progress thread". */
const char *inj_fired_in(void);
/* libndk's live blocks. */
long inj_live(void);

/* While on, this thread's libndk allocations are neither counted nor made
 * to fail, and stay out of inj_live (also when another thread frees them):
 * for objects a test makes only to synchronise with a progress thread. */
void inj_untracked(bool on);
/* How many such blocks are still allocated. */
unsigned inj_untracked_live(void);

/* Names the libndk call this thread makes now. */
void inj_call(const char *what);
/* The armed failure happened on this thread inside its last named call. */
bool inj_hit_in_call(void);

/* While set, something other than an injected allocation is exhausted
 * (file descriptors): any call may answer STATUS_INSUFFICIENT_RESOURCES,
 * and inj_fired() is true. */
void inj_scarce(bool on);
bool inj_is_scarce(void);

/* accept4 calls libndk made (its listeners' attempts), failed or not. */
uint64_t inj_accepts(void);

/* ---- judging calls ---- */

/* Counts and prints a broken rule (a test failure) about what's status. */
void inj_report(const char *what, NTSTATUS got, const char *why);
/* How many inj_report calls so far. */
unsigned inj_problems(void);
/* The status st of the call just named (inj_call) must be
 * STATUS_INSUFFICIENT_RESOURCES if the injected failure hit inside it, else
 * ok or ok2. Returns st. */
NTSTATUS inj_judged(NTSTATUS st, const char *what, NTSTATUS ok, NTSTATUS ok2);
#define CALL(what, ok, expr) (inj_call(what), inj_judged((expr), what, ok, ok))
#define CALL2(what, ok, ok2, expr) (inj_call(what), inj_judged((expr), what, ok, ok2))

/* Where the failures of a sweep over N happened: call names, counts. */
struct inj_where {
    const char *call[64];
    unsigned n[64], count;
};
void inj_where_note(struct inj_where *w, const char *call);
/* "[inject] NAME: N allocations, each made to fail once, in: ..." */
void inj_where_print(const struct inj_where *w, const char *name, unsigned n);

/* Waits (bounded) until the adapter's progress thread has freed what
 * closed objects left it: the live count is then exact. Disarmed only. */
bool inj_settle(NDK_ADAPTER *ad);

#endif
