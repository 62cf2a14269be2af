/*
 * cqwait.h - waiting for completions, always with a bound.
 *
 * Three ways (ndkperf --wait):
 *   events  NdkArmCq(NDK_CQ_NOTIFY_ANY), take once more (what came before
 *           the arm), then sleep until the notification callback or the
 *           disconnect event: the arm-then-poll loop of NdkArmCq's rules,
 *           so no wake-up is lost;
 *   yield   poll, and sched_yield() after an empty poll, so that the
 *           provider's progress thread can run when it shares the CPU;
 *   spin    poll without ever giving up the CPU.
 * The peer's disconnect ends a wait only once a poll after it has brought
 * nothing: what the peer sent before it left is taken first.
 */
#ifndef TC_CQWAIT_H
#define TC_CQWAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

/* The wake-ups of a thread that sleeps on completions: each CQ
 * notification and the disconnect event count them. */
struct tc_waker {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    unsigned wakes;
    NTSTATUS cq_status; /* an error a notification reported; it stays */
    /* Work done in the notification callback itself, on the provider's
     * thread, instead of waking a sleeping thread to do it: a tool that
     * answers there saves the wake-up of another thread (NdkGetCqResults,
     * the answer's post and NdkArmCq are all allowed in the callback). Set
     * and called under cb_lock, which the owner also holds whenever it
     * touches the CQ itself while a handler may be set (one CQ is never
     * polled or armed by two threads at once). The handler wakes the
     * waker when the sleeping thread is wanted. NULL: every notification
     * wakes. */
    pthread_mutex_t cb_lock;
    void (*on_notify)(void *arg);
    void *on_notify_arg;
    unsigned notified; /* notifications that came (under cb_lock) */
};

void tc_waker_init(struct tc_waker *w);
void tc_waker_destroy(struct tc_waker *w);
void tc_waker_wake(struct tc_waker *w, NTSTATUS cq_status);
unsigned tc_waker_notified(struct tc_waker *w);
/* NDK_FN_CQ_NOTIFICATION_CALLBACK; the context is the waker. */
VOID tc_cq_notification(PVOID Context, NTSTATUS CqStatus);

enum tc_wait_mode { TC_WAIT_EVENTS, TC_WAIT_YIELD, TC_WAIT_SPIN };
enum tc_waited { TC_WAITED_OK, TC_WAITED_FAILED, TC_WAITED_LEFT, TC_WAITED_TIMEOUT, TC_WAITED_CQ_ERROR };

struct tc_cq_wait {
    enum tc_wait_mode mode;
    struct tc_waker *waker;
    NDK_CQ *cq[2]; /* armed before sleeping; cq[1] may be NULL */
    /* Takes what the CQs hold and handles it: how many, or -1 when
     * handling one failed (already reported). */
    long (*take)(void *arg);
    void *arg;
    /* Has the peer disconnected? NULL: a disconnect never ends the wait. */
    bool (*peer_left)(void *peer);
    void *peer;
};

/* Takes until take() brings something (TC_WAITED_OK), fails, the peer has
 * left, the CQ reports an error, or ms pass without a completion. */
enum tc_waited tc_cq_wait(const struct tc_cq_wait *w, unsigned ms);
/* For a loop that waits on something else than the CQ (memory): whether
 * it may go on (TC_WAITED_OK), or the peer has left, the CQ reported an
 * error, or ms have passed since start_ns. */
enum tc_waited tc_cq_stalled(const struct tc_cq_wait *w, uint64_t start_ns, unsigned ms);
/* "PROG: [ROLE: ]..." for a wait that did not end in TC_WAITED_OK (FAILED
 * was reported where it happened): what was awaited, and why it ended. */
void tc_explain_wait(const char *role, enum tc_waited why, struct tc_waker *w, unsigned ms,
                     const char *what);

#endif
