/*
 * cqwait.c - see cqwait.h. The polling modes read the clock (and the
 * disconnect) only every POLLS_PER_CLOCK empty polls, to keep the loop
 * tight.
 */
#include <errno.h>
#include <sched.h>

#include "lib/clock.h"
#include "lib/cqwait.h"
#include "lib/log.h"

#define POLLS_PER_CLOCK 64

void tc_waker_init(struct tc_waker *w)
{
    pthread_mutex_init(&w->lock, NULL);
    tc_cond_init_mono(&w->cond);
    w->wakes = 0;
    w->cq_status = STATUS_SUCCESS;
    pthread_mutex_init(&w->cb_lock, NULL);
    w->on_notify = NULL;
    w->on_notify_arg = NULL;
    w->notified = 0;
}

void tc_waker_destroy(struct tc_waker *w)
{
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->cb_lock);
}

void tc_waker_wake(struct tc_waker *w, NTSTATUS cq_status)
{
    pthread_mutex_lock(&w->lock);
    w->wakes++;
    if (cq_status != STATUS_SUCCESS && w->cq_status == STATUS_SUCCESS)
        w->cq_status = cq_status;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

unsigned tc_waker_notified(struct tc_waker *w)
{
    pthread_mutex_lock(&w->cb_lock);
    unsigned n = w->notified;
    pthread_mutex_unlock(&w->cb_lock);
    return n;
}

VOID tc_cq_notification(PVOID Context, NTSTATUS CqStatus)
{
    struct tc_waker *w = Context;
    pthread_mutex_lock(&w->cb_lock);
    w->notified++;
    if (w->on_notify && CqStatus == STATUS_SUCCESS) {
        w->on_notify(w->on_notify_arg);
        pthread_mutex_unlock(&w->cb_lock);
        return;
    }
    /* An error ends the handler's work: the sleeping thread reports it. */
    w->on_notify = NULL;
    pthread_mutex_unlock(&w->cb_lock);
    tc_waker_wake(w, CqStatus);
}

static NTSTATUS cq_status(struct tc_waker *w)
{
    pthread_mutex_lock(&w->lock);
    NTSTATUS st = w->cq_status;
    pthread_mutex_unlock(&w->lock);
    return st;
}

static bool left(const struct tc_cq_wait *w)
{
    return w->peer_left && w->peer_left(w->peer);
}

/* Arms, takes once more, then sleeps until a wake-up or the deadline.
 * Returns what was taken (or -1); 0 with *expired when the time is up. */
static long sleep_once(const struct tc_cq_wait *w, const struct timespec *deadline, bool *expired)
{
    pthread_mutex_lock(&w->waker->lock);
    unsigned seen = w->waker->wakes;
    pthread_mutex_unlock(&w->waker->lock);
    for (int i = 0; i < 2; i++)
        if (w->cq[i])
            w->cq[i]->Dispatch->NdkArmCq(w->cq[i], NDK_CQ_NOTIFY_ANY);
    long n = w->take(w->arg);
    if (n != 0)
        return n;
    pthread_mutex_lock(&w->waker->lock);
    while (w->waker->wakes == seen && !*expired)
        *expired = pthread_cond_timedwait(&w->waker->cond, &w->waker->lock, deadline) == ETIMEDOUT;
    pthread_mutex_unlock(&w->waker->lock);
    return 0;
}

static enum tc_waited wait_events(const struct tc_cq_wait *w, unsigned ms)
{
    struct timespec deadline;
    tc_deadline(&deadline, ms);
    bool expired = false;
    for (;;) {
        bool gone = left(w);
        long n = w->take(w->arg);
        if (n == 0 && !gone && !expired && cq_status(w->waker) == STATUS_SUCCESS)
            n = sleep_once(w, &deadline, &expired);
        if (n > 0)
            return TC_WAITED_OK;
        if (n < 0)
            return TC_WAITED_FAILED;
        if (cq_status(w->waker) != STATUS_SUCCESS)
            return TC_WAITED_CQ_ERROR;
        if (gone)
            return TC_WAITED_LEFT;
        if (expired)
            return TC_WAITED_TIMEOUT;
    }
}

static enum tc_waited wait_polling(const struct tc_cq_wait *w, unsigned ms)
{
    uint64_t start = tc_now_ns(), limit = (uint64_t)ms * 1000000u;
    bool gone = false;
    for (unsigned polls = 1;; polls++) {
        long n = w->take(w->arg);
        if (n > 0)
            return TC_WAITED_OK;
        if (n < 0)
            return TC_WAITED_FAILED;
        if (w->mode == TC_WAIT_YIELD)
            sched_yield();
        if (polls % POLLS_PER_CLOCK)
            continue;
        /* Sampled before the next poll, which must come up empty too. */
        if (gone)
            return TC_WAITED_LEFT;
        if (cq_status(w->waker) != STATUS_SUCCESS)
            return TC_WAITED_CQ_ERROR;
        if (tc_now_ns() - start > limit)
            return TC_WAITED_TIMEOUT;
        gone = left(w);
    }
}

enum tc_waited tc_cq_stalled(const struct tc_cq_wait *w, uint64_t start_ns, unsigned ms)
{
    if (left(w))
        return TC_WAITED_LEFT;
    if (cq_status(w->waker) != STATUS_SUCCESS)
        return TC_WAITED_CQ_ERROR;
    return tc_now_ns() - start_ns > (uint64_t)ms * 1000000u ? TC_WAITED_TIMEOUT : TC_WAITED_OK;
}

enum tc_waited tc_cq_wait(const struct tc_cq_wait *w, unsigned ms)
{
    return w->mode == TC_WAIT_EVENTS ? wait_events(w, ms) : wait_polling(w, ms);
}

void tc_explain_wait(const char *role, enum tc_waited why, struct tc_waker *w, unsigned ms,
                     const char *what)
{
    switch (why) {
    case TC_WAITED_OK:
    case TC_WAITED_FAILED:
        break;
    case TC_WAITED_LEFT:
        tc_complain(role, "the peer disconnected while this side was waiting for %s", what);
        break;
    case TC_WAITED_TIMEOUT:
        tc_complain(role, "nothing came for %u ms while waiting for %s (--timeout)", ms, what);
        break;
    case TC_WAITED_CQ_ERROR:
    {
        NTSTATUS st = cq_status(w);
        tc_complain(role, "the CQ reported %s while waiting for %s%s", tc_status_name(st), what,
                    st == STATUS_BUFFER_OVERFLOW ? " (more completions than its depth)" : "");
        break;
    }
    }
}
