/* The allocation functions libndk's internals call in the inject tests
 * (inject.h). */
#include "inject.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/socket.h>

#include "testlib.h"

void *ndk_inj_malloc(size_t n);
void *ndk_inj_calloc(size_t n, size_t size);
void *ndk_inj_realloc(void *p, size_t n);
char *ndk_inj_strdup(const char *s);
char *ndk_inj_strndup(const char *s, size_t n);
int ndk_inj_posix_memalign(void **out, size_t align, size_t n);
void *ndk_inj_aligned_alloc(size_t align, size_t n);
void ndk_inj_free(void *p);
int ndk_inj_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags);

static _Atomic uint64_t seq;     /* allocations since inj_arm */
static _Atomic uint64_t fail_at; /* 0: none */
static _Atomic bool fired;
static _Atomic long live;
static _Atomic uint64_t marks;   /* inj_call sequence: each call its own mark */
static _Atomic uint64_t fired_mark;
static const char *_Atomic fired_in;

static _Thread_local const char *cur_call;
static _Thread_local uint64_t cur_mark;

/* Untracked blocks: few at a time, so a small table does. */
#define UNTRACKED_MAX 16
static _Thread_local bool untracked;
static pthread_mutex_t untracked_lock = PTHREAD_MUTEX_INITIALIZER;
static void *untracked_blocks[UNTRACKED_MAX];
static unsigned untracked_n;

void inj_arm(uint64_t n)
{
    atomic_store(&fail_at, 0);
    atomic_store(&fired, false);
    atomic_store(&fired_mark, 0);
    atomic_store(&fired_in, NULL);
    atomic_store(&seq, 0);
    atomic_store(&fail_at, n);
}

void inj_disarm(void)
{
    atomic_store(&fail_at, 0);
}

uint64_t inj_count(void)
{
    return atomic_load(&seq);
}

static _Atomic bool scarce;

void inj_scarce(bool on)
{
    atomic_store(&scarce, on);
}

bool inj_is_scarce(void)
{
    return atomic_load(&scarce);
}

bool inj_fired(void)
{
    return atomic_load(&fired) || atomic_load(&scarce);
}

const char *inj_fired_in(void)
{
    if (atomic_load(&scarce))
        return "(file descriptors ran out)";
    const char *w = atomic_load(&fired_in);
    return w ? w : "a progress thread";
}

long inj_live(void)
{
    return atomic_load(&live);
}

void inj_untracked(bool on)
{
    untracked = on;
}

unsigned inj_untracked_live(void)
{
    pthread_mutex_lock(&untracked_lock);
    unsigned n = untracked_n;
    pthread_mutex_unlock(&untracked_lock);
    return n;
}

/* A new block: counted live, or remembered as untracked. */
static void *born(void *p)
{
    if (!p)
        return NULL;
    if (!untracked) {
        atomic_fetch_add(&live, 1);
        return p;
    }
    pthread_mutex_lock(&untracked_lock);
    if (untracked_n == UNTRACKED_MAX)
        abort(); /* the tests make a handful at a time */
    untracked_blocks[untracked_n++] = p;
    pthread_mutex_unlock(&untracked_lock);
    return p;
}

/* A block going away: uncounted if it was untracked. */
static void dies(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&untracked_lock);
    for (unsigned i = 0; i < untracked_n; i++) {
        if (untracked_blocks[i] == p) {
            untracked_blocks[i] = untracked_blocks[--untracked_n];
            pthread_mutex_unlock(&untracked_lock);
            return;
        }
    }
    pthread_mutex_unlock(&untracked_lock);
    atomic_fetch_sub(&live, 1);
}

void inj_call(const char *what)
{
    cur_call = what;
    cur_mark = atomic_fetch_add(&marks, 1) + 1;
}

bool inj_hit_in_call(void)
{
    return atomic_load(&fired) && cur_mark && atomic_load(&fired_mark) == cur_mark;
}

/* Counts one allocation; true when it is the one to fail. */
static bool should_fail(void)
{
    if (untracked)
        return false;
    uint64_t n = atomic_fetch_add(&seq, 1) + 1;
    uint64_t at = atomic_load(&fail_at);
    if (!at || n != at)
        return false;
    /* On the test thread the mark names the call being made; a provider
     * thread has none (its mark is 0, which no call has). */
    atomic_store(&fired_mark, cur_mark);
    atomic_store(&fired_in, cur_call);
    atomic_store(&fired, true);
    return true;
}

void *ndk_inj_malloc(size_t n)
{
    return should_fail() ? NULL : born(malloc(n));
}

void *ndk_inj_calloc(size_t n, size_t size)
{
    return should_fail() ? NULL : born(calloc(n, size));
}

void *ndk_inj_realloc(void *p, size_t n)
{
    if (!p)
        return ndk_inj_malloc(n);
    /* A block that moves stays one live block (libndk calls no realloc
     * today; untracked blocks are never reallocated). */
    return should_fail() ? NULL : realloc(p, n);
}

char *ndk_inj_strdup(const char *s)
{
    return should_fail() ? NULL : born(strdup(s));
}

char *ndk_inj_strndup(const char *s, size_t n)
{
    return should_fail() ? NULL : born(strndup(s, n));
}

int ndk_inj_posix_memalign(void **out, size_t align, size_t n)
{
    if (should_fail())
        return ENOMEM;
    int r = posix_memalign(out, align, n);
    if (r == 0)
        born(*out);
    return r;
}

void *ndk_inj_aligned_alloc(size_t align, size_t n)
{
    return should_fail() ? NULL : born(aligned_alloc(align, n));
}

void ndk_inj_free(void *p)
{
    dies(p);
    free(p);
}

static _Atomic uint64_t accepts;

int ndk_inj_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
    atomic_fetch_add(&accepts, 1);
    return accept4(fd, sa, len, flags);
}

uint64_t inj_accepts(void)
{
    return atomic_load(&accepts);
}

/* ---- judging calls ---- */

static _Atomic unsigned problems;

void inj_report(const char *what, NTSTATUS got, const char *why)
{
    atomic_fetch_add(&problems, 1);
    tl_failures++;
    fprintf(stderr, "    %s: %s (%s; injected failure %s, in %s)\n", what, ndk_status_name(got), why,
            inj_fired() ? "fired" : "not fired", inj_fired() ? inj_fired_in() : "-");
}

unsigned inj_problems(void)
{
    return atomic_load(&problems);
}

NTSTATUS inj_judged(NTSTATUS st, const char *what, NTSTATUS ok, NTSTATUS ok2)
{
    if (inj_hit_in_call() || (atomic_load(&scarce) && st == STATUS_INSUFFICIENT_RESOURCES)) {
        if (st != STATUS_INSUFFICIENT_RESOURCES)
            inj_report(what, st, "its allocation failed: STATUS_INSUFFICIENT_RESOURCES expected");
    } else if (st != ok && st != ok2) {
        inj_report(what, st, "nothing failed inside it");
    }
    return st;
}

/* A PD made and closed at once, out of the books. */
static bool untracked_pd(NDK_ADAPTER *ad)
{
    NDK_PD *pd = NULL;
    inj_untracked(true);
    bool ok = ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &pd) == STATUS_SUCCESS &&
              pd->Dispatch->NdkClosePd(&pd->Header, NULL, NULL) == STATUS_SUCCESS;
    inj_untracked(false);
    return ok;
}

/*
 * The progress thread frees closed objects all in one go, holding the
 * adapter lock, between its loop iterations (src/obj.c ndk_free_deferred):
 * so once a PD closed after them is freed, and then the lock has been free
 * once more (making a PD takes it), they are gone too.
 */
bool inj_settle(NDK_ADAPTER *ad)
{
    if (!untracked_pd(ad))
        return false;
    uint64_t end = tl_now_ns() + 4000000000ull;
    while (inj_untracked_live() && tl_now_ns() < end)
        sched_yield();
    return inj_untracked_live() == 0 && untracked_pd(ad);
}

void inj_where_note(struct inj_where *w, const char *call)
{
    for (unsigned i = 0; i < w->count; i++) {
        if (strcmp(w->call[i], call) == 0) {
            w->n[i]++;
            return;
        }
    }
    if (w->count < 64) {
        w->call[w->count] = call;
        w->n[w->count++] = 1;
    }
}

void inj_where_print(const struct inj_where *w, const char *name, unsigned n)
{
    printf("[inject] %s: %u allocations, each made to fail once, in:", name, n);
    for (unsigned i = 0; i < w->count; i++) {
        printf("%s %s", i ? "," : "", w->call[i]);
        if (w->n[i] > 1)
            printf(" x%u", w->n[i]);
    }
    printf("\n");
}
