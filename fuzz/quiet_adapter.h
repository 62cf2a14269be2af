/*
 * quiet_adapter.h - set-up shared by the fuzz targets that drive a QP on an
 * in-memory transport (fuzz_fpdu_stream.c, fuzz_terminate.c): one adapter
 * per process whose progress thread is parked, so an input runs on the
 * fuzzing thread alone.
 *
 * No socket exists in these targets, so the progress thread has nothing to
 * do but free closed objects, and each close woke it (loop_kick): the two
 * threads then took turns on the device lock, a quarter of the run time on
 * two CPUs, and which thread freed what varied from run to run. Parked in a
 * close callback of an object made for the purpose, it never takes the lock
 * again; the fuzzing thread frees closed objects itself (quiet_free_closed)
 * before the input ends, or libFuzzer runs a leak scan after every input.
 * Its one other duty here, looking at QPs that wait for a receive every
 * 10 ms, depended on the clock, which what an input does must not.
 *
 * Everything is static inline: each target is one translation unit.
 */
#ifndef NDK_FUZZ_QUIET_ADAPTER_H
#define NDK_FUZZ_QUIET_ADAPTER_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "objects.h"

static pthread_mutex_t quiet_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t quiet_cv = PTHREAD_COND_INITIALIZER;
static bool quiet_parked;

/* Runs on the progress thread (a close callback, with no provider lock
 * held, rules L5-L7 of docs/rules.md) and stays there for the life of the
 * process, with every signal blocked: libFuzzer's (its -timeout alarm, an
 * interrupt) go to the fuzzing thread, whose stack a report should show. */
static inline void quiet_park(PVOID ctx)
{
    (void)ctx;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    pthread_mutex_lock(&quiet_mu);
    quiet_parked = true;
    pthread_cond_signal(&quiet_cv);
    pthread_mutex_unlock(&quiet_mu);
    for (;;)
        pause();
}

/* Opens the adapter on "lo" and parks its progress thread; false if the
 * adapter cannot be opened. The PD whose close callback parks it stays,
 * closing, for the life of the process. */
static inline bool quiet_adapter_open(NDK_ADAPTER **out)
{
    /* One progress engine (docs/architecture.md, Engines), so that one
     * parked thread is all of them. */
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.Size = sizeof o;
    o.MaxEngines = 1;
    NDK_ADAPTER *ad = NULL;
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &ad) != STATUS_SUCCESS)
        return false;
    /* A PD closes only after its MR: the PD's close completes on the
     * progress thread once the MR is gone. */
    NDK_PD *pd = NULL;
    NDK_MR *mr = NULL;
    if (ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &pd) != STATUS_SUCCESS ||
        pd->Dispatch->NdkCreateMr(pd, FALSE, NULL, NULL, &mr) != STATUS_SUCCESS ||
        pd->Dispatch->NdkClosePd(&pd->Header, quiet_park, NULL) != STATUS_PENDING ||
        mr->Dispatch->NdkCloseMr(&mr->Header, NULL, NULL) != STATUS_SUCCESS)
        abort();
    /* The callback is queued already; a progress thread that does not run
     * it within 10 s is a broken provider. */
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += 10;
    pthread_mutex_lock(&quiet_mu);
    while (!quiet_parked)
        if (pthread_cond_timedwait(&quiet_cv, &quiet_mu, &end) != 0)
            abort();
    pthread_mutex_unlock(&quiet_mu);
    *out = ad;
    return true;
}

/* Frees what the input closed (the parked progress thread no longer does). */
static inline void quiet_free_closed(NDK_ADAPTER *pub)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pub);
    pthread_mutex_lock(&ad->dev->lock);
    ndk_free_all(ad->dev);
    pthread_mutex_unlock(&ad->dev->lock);
}

/* Whether p[0..n) all hold v, read a word at a time. Neither traced nor
 * checked by ASan (the callers' buffers are theirs and in bounds): a traced
 * compare per octet took a fifth of the run time. */
__attribute__((no_sanitize("coverage", "address"), noinline, unused))
static bool all_octets(const uint8_t *p, size_t n, uint8_t v)
{
    uint64_t acc = 0, pattern = 0x0101010101010101ull * v;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        acc |= w ^ pattern;
    }
    for (; i < n; i++)
        acc |= (uint8_t)(p[i] ^ v);
    return acc == 0;
}

#endif
