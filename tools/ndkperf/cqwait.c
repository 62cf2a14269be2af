/*
 * cqwait.c - waiting for completions, always with a bound.
 *
 * Three ways, chosen with --wait (reference 8.2 for the events):
 *
 *   yield  (default) poll NdkGetCqResults; after an empty poll call
 *          sched_yield(). When a process is pinned to one CPU, the
 *          provider's progress thread shares that CPU with the polling
 *          thread: without the yield it would only run when the scheduler
 *          preempts the poller (milliseconds), with it it runs at once.
 *   spin   poll without ever giving up the CPU (perftest's way); right
 *          when the provider makes progress inside NdkGetCqResults
 *          (--busy-poll) or the progress thread has a CPU of its own.
 *   events NdkArmCq(NDK_CQ_NOTIFY_ANY), then sleep on a condition variable
 *          until the notification callback: drain, arm, drain again, then
 *          wait (the loop of reference 8.2 rule 9), so no wake-up is lost.
 *
 * The clock is read only every POLLS_PER_CLOCK empty polls, to keep the
 * polling loop tight.
 */
#include <errno.h>
#include <sched.h>
#include <time.h>

#include "ndkperf.h"

#define POLLS_PER_CLOCK 64

unsigned cq_take(struct endpoint *e, NDK_RESULT *r, unsigned max)
{
    return e->cq->Dispatch->NdkGetCqResults(e->cq, r, max);
}

VOID cq_notification(PVOID ctx, NTSTATUS status)
{
    struct endpoint *e = ctx;
    pthread_mutex_lock(&e->lock);
    e->notified++;
    /* An error stays: the CQ is unusable from then on (reference 5.2.4). */
    if (e->cq_status == STATUS_SUCCESS)
        e->cq_status = status;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

static bool cq_error(struct endpoint *e, const char *what)
{
    pthread_mutex_lock(&e->lock);
    NTSTATUS st = e->cq_status;
    pthread_mutex_unlock(&e->lock);
    if (st == STATUS_SUCCESS)
        return false;
    complain(e->role, "the CQ reported %s while waiting for %s%s", ndk_status_name(st), what,
             st == STATUS_BUFFER_OVERFLOW ? " (more completions than its depth)" : "");
    return true;
}

static unsigned limit_ms(const struct endpoint *e)
{
    return e->wait_ms ? e->wait_ms : e->opt->timeout_ms;
}

bool wait_ok(struct endpoint *e, uint64_t start, const char *what)
{
    if (atomic_load(&e->disconnected)) {
        complain(e->role, "the peer disconnected while this side was waiting for %s", what);
        return false;
    }
    if (cq_error(e, what))
        return false;
    if (now_ns() - start > (uint64_t)limit_ms(e) * 1000000u) {
        complain(e->role, "nothing happened for %u ms while waiting for %s", limit_ms(e), what);
        return false;
    }
    return true;
}

static unsigned wait_events(struct endpoint *e, NDK_RESULT *r, unsigned max, const char *what)
{
    uint64_t deadline = now_ns() + (uint64_t)limit_ms(e) * 1000000u;
    struct timespec dl = {.tv_sec = (time_t)(deadline / 1000000000u), .tv_nsec = (long)(deadline % 1000000000u)};
    for (;;) {
        pthread_mutex_lock(&e->lock);
        unsigned seen = e->notified;
        pthread_mutex_unlock(&e->lock);
        e->cq->Dispatch->NdkArmCq(e->cq, NDK_CQ_NOTIFY_ANY);
        /* What arrived before the arm took effect: rule 3 would call us
         * back for it as well, but taking it now saves the wake-up. */
        unsigned n = cq_take(e, r, max);
        if (n)
            return n;
        pthread_mutex_lock(&e->lock);
        while (e->notified == seen && !atomic_load(&e->disconnected))
            if (pthread_cond_timedwait(&e->cond, &e->lock, &dl) == ETIMEDOUT)
                break;
        bool notified = e->notified != seen;
        pthread_mutex_unlock(&e->lock);
        n = cq_take(e, r, max);
        if (n)
            return n;
        if (cq_error(e, what))
            return 0;
        if (!notified) {
            wait_ok(e, 0, what); /* reports the disconnect or the timeout */
            return 0;
        }
        /* A notification for completions we had already taken (the arm
         * before the second drain): arm again. */
    }
}

unsigned cq_wait(struct endpoint *e, NDK_RESULT *r, unsigned max, const char *what)
{
    unsigned n = cq_take(e, r, max);
    if (n)
        return n;
    if (e->opt->wait == WAIT_EVENTS)
        return wait_events(e, r, max, what);
    bool yield = e->opt->wait == WAIT_YIELD;
    uint64_t start = now_ns();
    for (unsigned polls = 1;; polls++) {
        if (yield)
            sched_yield();
        n = cq_take(e, r, max);
        if (n)
            return n;
        if (polls % POLLS_PER_CLOCK == 0 && !wait_ok(e, start, what))
            return 0;
    }
}
