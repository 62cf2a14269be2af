/*
 * Completion queues: NdkCreateCq, NdkArmCq, NdkGetCqResults[Ex],
 * NdkResizeCq, NdkCloseCq (docs/rules.md C1-C7).
 *
 * The notification state and the producers' side of the ring are guarded
 * by cq->lock: the data path pushes from any thread. The consumer's own
 * GetCqResults/GetCqResultsEx/ArmCq calls never overlap (C1, NDKPI 8.2 rule
 * 8), so the ring has one consumer, which takes completions without the
 * lock: the producers write an entry, then publish it with a release store
 * of `pushed`; the consumer reads `pushed` (acquire), copies the entries,
 * then gives their slots back with a release store of `taken`, which a
 * producer reads (acquire) before it writes a slot again. An empty poll
 * is two loads. NdkResizeCq may run while the consumer takes (nothing
 * orders the two): it copies the waiting entries into the new ring at the
 * same indexes (entry i at i % depth), publishes it, and leaves the old
 * one to the consumer to free at its next take (or the close), since the
 * consumer may be reading it; the consumer reads `pushed` before the ring,
 * so every entry it counts is in the ring it then reads. A consumer that
 * breaks C1 gets duplicates or gaps, never a read outside the ring (the
 * verifier reports it, src/verify/vcq.c).
 *
 * Notifications. Every notification of a CQ travels through one callback
 * item embedded in it (notify_cb), queued on the adapter's callback queue and
 * run by the progress thread without provider locks (so the consumer may
 * call back into the CQ, L5-L7). The item names a provider trampoline, not
 * the consumer's function: when the consumer's callback returns, the
 * trampoline looks again at an arm made while the item was queued or running
 * (typically from inside the callback, the loop of 8.2 rule 9) and, if that
 * arm is already satisfied, queues the item again. Calling the consumer
 * directly from the queue would leave such an arm waiting for the next
 * completion, which may never come (a lost wake-up, C4), because nothing may
 * queue the item while it is still in use. Re-queueing (at the tail) rather
 * than calling the consumer again in a loop keeps a busy CQ from starving
 * every other callback of the adapter.
 *
 * notify_cb.u.notify.fn is the "item in use" mark: set (under the CQ lock)
 * when the item is queued, cleared by the trampoline (under the CQ lock) when
 * it does not re-queue. notify_cb.queued cannot serve: the drain loop clears
 * it only after the callback returned, and without our lock. The drain loop
 * copies fn/ctx/status before the call and afterwards touches only `queued`,
 * so the trampoline may rewrite the item and queue it again from inside the
 * call (`queued` then reads false while the item waits again; nothing reads
 * it for this item). While the mark is set, a satisfied arm is left standing
 * for the trampoline, so there are never two callbacks of one CQ at once
 * (C5), and the satisfaction is remembered (owed): the consumer may take
 * the completion that satisfied it before the trampoline looks, and the
 * callback is owed all the same.
 *
 * The item is queued with the CQ lock held: the busy count taken by
 * ndk_cb_queue then becomes visible together with the decision to notify, so
 * a concurrent NdkCloseCq (whose close_start takes the CQ lock) either sees
 * the busy count and stays pending until the callback ran, or runs first and
 * leaves nothing armed to fire. Queueing after unlocking would let a close
 * finish in between and a callback run after its close completion (8.2 rule
 * 7). The callback-queue lock is a leaf, so this nests safely (cqsrq.h).
 *
 * Interrupt moderation (NdkControlCqInterruptModeration). In user space the
 * "interrupt" is the callback and the wake-up of whatever thread it signals,
 * which costs tens of microseconds across CPUs; moderation lets a consumer
 * take one for many completions. When an arm becomes satisfied by
 * completions (not by a CQ error, which is never held back), the callback
 * is held (mod_due) until ModerationCount unreported completions are in the
 * ring or ModerationInterval microseconds have passed since the arm became
 * satisfied, whichever comes first. The interval is a timer (net/timer.h) on the
 * device's loop, one per CQ, made the first time an interval is set (the
 * only moment it can fail: STATUS_INSUFFICIENT_RESOURCES): arming it is a
 * system call on the CQ's own descriptor, so the push path, which must not
 * take the engine's lock, can start it; it fires on the CQ's engine's
 * thread, which holds that engine's lock and takes ours after it. A close
 * removes the watch before the CQ is freed between loop iterations, so an
 * expiry that was already fetched is skipped.
 */
#include <stdlib.h>
#include <sys/epoll.h>

#include "net/timer.h"
#include "objects.h"

static struct ndk_cq_impl *cq_from(NDK_CQ *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeCq);
    return o ? container_of(o, struct ndk_cq_impl, obj) : NULL;
}

/* Entry i (counted from the CQ's creation) of ring r. */
static struct ndk_cqe *ring_at(struct ndk_cq_ring *r, uint64_t i)
{
    return &r->e[i % r->depth];
}

static struct ndk_cq_ring *ring_new(ULONG depth)
{
    struct ndk_cq_ring *r = calloc(1, sizeof *r + (size_t)depth * sizeof r->e[0]);
    if (r)
        r->depth = depth;
    return r;
}

/* Completions waiting (lock held: `pushed` is ours; the consumer may take
 * more at any moment). */
static ULONG cq_count(const struct ndk_cq_impl *cq)
{
    return (ULONG)(cq->pushed - __atomic_load_n(&cq->taken, __ATOMIC_ACQUIRE));
}

static bool is_receive(NDK_OPERATION_TYPE t)
{
    return t == NdkOperationTypeReceive || t == NdkOperationTypeReceiveAndInvalidate;
}

/* Does this completion meet an arm of the given (merged) type? 8.2 rule 6:
 * ANY takes any completion; SOLICITED a receive matched with a solicited
 * Send, or any completion with an error status; ERRORS only CQ errors, which
 * are not completions. */
static bool cqe_satisfies(int armed, const struct ndk_cqe *e)
{
    switch (armed) {
    case NDK_CQ_NOTIFY_ANY:
        return true;
    case NDK_CQ_NOTIFY_SOLICITED:
        return (e->solicited && is_receive(e->type)) || e->status != STATUS_SUCCESS;
    default:
        return false;
    }
}

/* The merge table of 8.2 rule 5 (C6): the broader condition wins,
 * ANY > SOLICITED > ERRORS. */
static int arm_merge(int cur, ULONG type)
{
    if (cur < 0)
        return (int)type;
    if (cur == NDK_CQ_NOTIFY_ANY || type == NDK_CQ_NOTIFY_ANY)
        return NDK_CQ_NOTIFY_ANY;
    if (cur == NDK_CQ_NOTIFY_SOLICITED || type == NDK_CQ_NOTIFY_SOLICITED)
        return NDK_CQ_NOTIFY_SOLICITED;
    return NDK_CQ_NOTIFY_ERRORS;
}

/* Is the current arm satisfied by what the CQ holds now (lock held)? A CQ
 * error satisfies every arm. Otherwise only entries pushed after the last
 * callback was queued count (C4 "must"); entries that were already there
 * then do not re-fire (C4 "may": we choose to wait for a new one, so a
 * consumer that re-arms without draining is not called in a loop). Those
 * newer entries are the youngest min(count, pushed - seen_at_cb) of the ring,
 * since the consumer removes from the old end. */
static bool cq_arm_satisfied(struct ndk_cq_impl *cq, NTSTATUS *status)
{
    if (cq->armed < 0)
        return false;
    if (cq->overflowed) {
        *status = STATUS_BUFFER_OVERFLOW;
        return true;
    }
    if (cq->armed == NDK_CQ_NOTIFY_ERRORS)
        return false;
    uint64_t fresh = cq->pushed - cq->seen_at_cb;
    ULONG count = cq_count(cq);
    ULONG n = fresh < count ? (ULONG)fresh : count;
    /* The consumer may take some of these meanwhile: their slots are not
     * written again before we unlock. */
    for (uint64_t i = cq->pushed - n; i < cq->pushed; i++) {
        if (cqe_satisfies(cq->armed, ring_at(cq->ring, i))) {
            *status = STATUS_SUCCESS;
            return true;
        }
    }
    return false;
}

static void cq_notify_run(void *ctx, NTSTATUS status);

/* Lock held, arm satisfied: clear it (C3) and queue the item. */
static void cq_queue_locked(struct ndk_cq_impl *cq, NTSTATUS status)
{
    /* armed is changed under the lock; busy polling reads it without
     * (sleeper_on in qp.c), hence the atomic stores. */
    __atomic_store_n(&cq->armed, -1, __ATOMIC_RELAXED);
    cq->mod_due = false;
    cq->seen_at_cb = cq->pushed;
    cq->owed = false;
    cq->notify_cb.u.notify.fn = cq_notify_run;
    cq->notify_cb.u.notify.ctx = cq;
    cq->notify_cb.u.notify.status = status;
    ndk_cb_queue(cq->obj.ad, &cq->notify_cb);
}

/* Lock held, arm satisfied: notify, unless the item is in use; then the arm
 * stays set and the trampoline delivers it when the running callback
 * returns. */
static void cq_fire_locked(struct ndk_cq_impl *cq, NTSTATUS status)
{
    if (!cq->notify_cb.u.notify.fn) {
        cq_queue_locked(cq, status);
    } else if (!cq->owed || status != STATUS_SUCCESS) {
        /* A CQ error outranks completions in what the owed callback says. */
        cq->owed = true;
        cq->owed_status = status;
    }
}

static bool mod_on(const struct ndk_cq_impl *cq)
{
    return cq->mod_interval_us != 0;
}

static bool mod_has_interval(const struct ndk_cq_impl *cq)
{
    return cq->mod_interval_us != 0 && cq->mod_interval_us != UINT32_MAX;
}

static uint64_t mod_deadline_ns(const struct ndk_cq_impl *cq)
{
    return cq->mod_since_ns + (uint64_t)cq->mod_interval_us * 1000u;
}

/* Lock held, mod_due: may the held-back callback go now? The count is of
 * unreported completions still in the ring (those the consumer will find),
 * capped at the depth so that a count beyond a ring shrunk by NdkResizeCq
 * cannot hold the callback back for ever. */
static bool mod_release(const struct ndk_cq_impl *cq)
{
    uint64_t fresh = cq->pushed - cq->seen_at_cb;
    ULONG count = cq_count(cq);
    ULONG n = fresh < count ? (ULONG)fresh : count;
    ULONG limit = cq->mod_count != 0 && cq->mod_count < cq->depth ? cq->mod_count : cq->depth;
    if (n >= limit)
        return true;
    return mod_has_interval(cq) && ndk_mono_ns() >= mod_deadline_ns(cq);
}

/* Lock held: the timer goes off at the deadline of the held-back callback. */
static void mod_timer_start(struct ndk_cq_impl *cq)
{
    if (!mod_has_interval(cq) || cq->mod_timerfd < 0)
        return;
    ndk_timer_arm(cq->mod_timerfd, mod_deadline_ns(cq));
}

/* Lock held, arm satisfied with `status`: notify now, or hold the callback
 * back under moderation. */
static void cq_due_locked(struct ndk_cq_impl *cq, NTSTATUS status)
{
    if (status == STATUS_SUCCESS && mod_on(cq)) {
        if (!cq->mod_due) {
            cq->mod_due = true;
            cq->mod_since_ns = ndk_mono_ns();
            if (!mod_release(cq)) {
                mod_timer_start(cq);
                return;
            }
        } else if (!mod_release(cq)) {
            return;
        }
    }
    cq_fire_locked(cq, status);
}

/* Runs on the progress thread, no provider lock held. */
static void cq_notify_run(void *ctx, NTSTATUS status)
{
    struct ndk_cq_impl *cq = ctx;
    cq->notify(cq->notify_ctx, status);
    pthread_mutex_lock(&cq->lock);
    cq->notify_cb.u.notify.fn = NULL;
    NTSTATUS next;
    if (cq->owed && cq->armed >= 0)
        cq_queue_locked(cq, cq->owed_status);
    else if (cq_arm_satisfied(cq, &next))
        cq_due_locked(cq, next);
    pthread_mutex_unlock(&cq->lock);
}

/* The moderation timer expired (the CQ's engine's thread, its lock held). */
static void cq_mod_expired(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct ndk_cq_impl *cq = container_of(w, struct ndk_cq_impl, mod_watch);
    ndk_timer_ack(cq->mod_timerfd);
    pthread_mutex_lock(&cq->lock);
    if (cq->mod_due) {
        if (mod_release(cq))
            cq_fire_locked(cq, STATUS_SUCCESS);
        else
            mod_timer_start(cq); /* settings changed: a later deadline */
    }
    pthread_mutex_unlock(&cq->lock);
}

/* Lock held. */
static bool cq_push_locked(struct ndk_cq_impl *cq, const struct ndk_cqe *e)
{
    if (cq->overflowed) {
        /* 8.1: after an overflow no further completions are reported. */
        return false;
    }
    if (cq_count(cq) >= cq->depth) {
        /* 8.1 / 5.2.4: the CQ is now unusable; an armed notification of any
         * type reports STATUS_BUFFER_OVERFLOW, and a later arm does too. */
        __atomic_store_n(&cq->overflowed, true, __ATOMIC_RELAXED);
        NDK_LOG(NDK_LL_ERROR, NDK_LC_CQ, &cq->obj,
                "overflowed (depth %lu): completions are lost, the QPs completing here fail",
                (unsigned long)cq->depth);
        if (cq->armed >= 0)
            cq_fire_locked(cq, STATUS_BUFFER_OVERFLOW);
        return false;
    }
    *ring_at(cq->ring, cq->pushed) = *e;
    __atomic_store_n(&cq->pushed, cq->pushed + 1, __ATOMIC_RELEASE);
    /* Older entries were already weighed against this arm when it was made
     * or when they arrived, so only the new one needs a look (O(1)); a
     * held-back callback only needs its count looked at again. */
    if (cq->mod_due)
        cq_due_locked(cq, STATUS_SUCCESS);
    else if (cq->armed >= 0 && cqe_satisfies(cq->armed, e))
        cq_due_locked(cq, STATUS_SUCCESS);
    return true;
}

bool ndk_cq_push(struct ndk_cq_impl *cq, const struct ndk_cqe *e)
{
    return ndk_cq_push_n(cq, e, 1) == 1;
}

size_t ndk_cq_push_n(struct ndk_cq_impl *cq, const struct ndk_cqe *e, size_t n)
{
    size_t done = 0;
    pthread_mutex_lock(&cq->lock);
    while (done < n && cq_push_locked(cq, &e[done]))
        done++;
    pthread_mutex_unlock(&cq->lock);
    return done;
}

bool ndk_cq_in_error(struct ndk_cq_impl *cq)
{
    pthread_mutex_lock(&cq->lock);
    bool err = cq->overflowed;
    pthread_mutex_unlock(&cq->lock);
    return err;
}

static VOID cq_arm(NDK_CQ *pNdkCq, ULONG Type)
{
    struct ndk_cq_impl *cq = cq_from(pNdkCq);
    /* ArmCq returns nothing; an unknown type can only be ignored. */
    if (!cq || Type > NDK_CQ_NOTIFY_SOLICITED)
        return;
    pthread_mutex_lock(&cq->lock);
    /* closing was set before close_start took this lock, so an arm ordered
     * after NdkCloseCq sees it: nothing is armed, nothing more is queued. */
    if (!cq->obj.closing) {
        __atomic_store_n(&cq->armed, arm_merge(cq->armed, Type), __ATOMIC_RELAXED);
        NTSTATUS st;
        if (cq_arm_satisfied(cq, &st))
            cq_due_locked(cq, st);
    }
    pthread_mutex_unlock(&cq->lock);
    /* After the arm, for completions: input read from now on can satisfy
     * it. (An arm for errors only is no sleep.) The hook takes QP locks,
     * which come before ours. */
    void (*hook)(struct ndk_cq_impl *) = __atomic_load_n(&cq->arm_hook, __ATOMIC_ACQUIRE);
    if (hook && Type != NDK_CQ_NOTIFY_ERRORS)
        hook(cq);
}

/*
 * Removes up to n entries, oldest first, into r (NDK_RESULT) or rx
 * (NDK_RESULT_EX). A CQ that overflowed still hands out the entries it held
 * before the overflow: those requests did complete and were placed, and the
 * consumer needs them to reclaim their buffers; what 8.1 forbids is reporting
 * anything further, and the push path guarantees that. Once those are gone
 * the CQ stays empty (5.4.3 suggests 0 for a CQ in error).
 */
static ULONG cq_drain(NDK_CQ *pNdkCq, NDK_RESULT *r, NDK_RESULT_EX *rx, ULONG n)
{
    struct ndk_cq_impl *cq = cq_from(pNdkCq);
    if (!cq || n == 0 || (!r && !rx))
        return 0;
    /* No lock (the head of this file). A completion pushed while we look
     * is found by the next poll, as if this one had come a moment
     * earlier; one the caller knows of (its callback ran) happened before,
     * and is seen. */
    uint64_t taken = __atomic_load_n(&cq->taken, __ATOMIC_RELAXED);
    uint64_t pushed = __atomic_load_n(&cq->pushed, __ATOMIC_ACQUIRE);
    if (pushed == taken) {
        void (*hook)(struct ndk_cq_impl *) = __atomic_load_n(&cq->poll_hook, __ATOMIC_ACQUIRE);
        /* The hook may take QP and adapter locks, which come before ours. */
        if (hook && !__atomic_load_n(&cq->overflowed, __ATOMIC_RELAXED))
            hook(cq);
        pushed = __atomic_load_n(&cq->pushed, __ATOMIC_ACQUIRE);
        if (pushed == taken)
            return 0;
    }
    /* Rings a resize replaced before we read the ring below: we no longer
     * read them. */
    if (__atomic_load_n(&cq->retired, __ATOMIC_RELAXED)) {
        struct ndk_cq_ring *old = __atomic_exchange_n(&cq->retired, NULL, __ATOMIC_ACQ_REL);
        while (old) {
            struct ndk_cq_ring *next = old->retired_next;
            free(old);
            old = next;
        }
    }
    struct ndk_cq_ring *ring = __atomic_load_n(&cq->ring, __ATOMIC_ACQUIRE);
    ULONG got = pushed - taken < n ? (ULONG)(pushed - taken) : n;
    for (ULONG i = 0; i < got; i++) {
        const struct ndk_cqe *e = ring_at(ring, taken + i);
        /* 6.5: ProviderErrorCode must be 0 when Status is STATUS_SUCCESS. */
        ULONG perr = e->status == STATUS_SUCCESS ? 0 : e->provider_error;
        if (rx) {
            rx[i].Status = e->status;
            rx[i].BytesTransferred = e->bytes;
            rx[i].QPContext = e->qp_ctx;
            rx[i].RequestContext = e->req_ctx;
            rx[i].Type = e->type;
            rx[i].ProviderErrorCode = perr;
            rx[i].TypeSpecificCompletionOutput = e->type_specific;
        } else {
            /* C2: a ReceiveAndInvalidate is returned here too; only the
             * notice of the invalidation is lost. */
            r[i].Status = e->status;
            r[i].BytesTransferred = e->bytes;
            r[i].QPContext = e->qp_ctx;
            r[i].RequestContext = e->req_ctx;
        }
    }
    /* The slots go back to the producers only after they were read. */
    __atomic_store_n(&cq->taken, taken + got, __ATOMIC_RELEASE);
    return got;
}

static ULONG cq_get_results(NDK_CQ *pNdkCq, NDK_RESULT Results[], ULONG nResults)
{
    return cq_drain(pNdkCq, Results, NULL, nResults);
}

static ULONG cq_get_results_ex(NDK_CQ *pNdkCq, NDK_RESULT_EX Results[], ULONG nResults)
{
    return cq_drain(pNdkCq, NULL, Results, nResults);
}

/*
 * Resizing completes inline (never STATUS_PENDING, so no request completion
 * is owed: C7). The new ring is allocated before taking the lock so producers
 * are held up only for the copy. 5.4.1 leaves shrinking below the queued
 * count open and suggests STATUS_INVALID_PARAMETER without losing entries;
 * shrinking below the total depth of the attached queues is not checked (the
 * consumer's sizing duty, 8.1), an overflow then reports it.
 */
static NTSTATUS cq_resize(NDK_CQ *pNdkCq, ULONG CqDepth, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                          PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext;
    struct ndk_cq_impl *cq = cq_from(pNdkCq);
    if (!cq)
        return STATUS_INVALID_PARAMETER;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(cq->obj.ad, &info);
    if (CqDepth == 0 || CqDepth > info.MaxCqDepth)
        return STATUS_INVALID_PARAMETER;
    struct ndk_cq_ring *ring = ring_new(CqDepth);
    if (!ring)
        return STATUS_INSUFFICIENT_RESOURCES;
    pthread_mutex_lock(&cq->lock);
    /* The consumer may take entries while we copy: those it takes are
     * copied for nothing (it never reads below its index again). */
    uint64_t from = __atomic_load_n(&cq->taken, __ATOMIC_ACQUIRE);
    if (CqDepth < cq->pushed - from) {
        pthread_mutex_unlock(&cq->lock);
        free(ring);
        return STATUS_INVALID_PARAMETER;
    }
    struct ndk_cq_ring *old = cq->ring;
    for (uint64_t i = from; i < cq->pushed; i++)
        *ring_at(ring, i) = *ring_at(old, i);
    __atomic_store_n(&cq->ring, ring, __ATOMIC_RELEASE);
    cq->depth = CqDepth;
    /* The consumer may be reading the old ring: it frees it at its next
     * take (cq_drain), or the close does. */
    old->retired_next = __atomic_load_n(&cq->retired, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(&cq->retired, &old->retired_next, old, true, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
        ;
    pthread_mutex_unlock(&cq->lock);
    return STATUS_SUCCESS;
}

/* Lock held: the timerfd of the interval, made and watched on first use. */
static NTSTATUS mod_timer_open(struct ndk_cq_impl *cq)
{
    if (cq->mod_timerfd >= 0)
        return STATUS_SUCCESS;
    int fd = ndk_timer_open();
    if (fd < 0)
        return STATUS_INSUFFICIENT_RESOURCES;
    if (loop_watch_add(&cq->obj.engine->loop, &cq->mod_watch, fd, EPOLLIN, cq_mod_expired) != 0) {
        ndk_timer_close(fd);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    cq->mod_timerfd = fd;
    return STATUS_SUCCESS;
}

/*
 * NdkControlCqInterruptModeration (5.4.4). An interval of 0 or a count of 0
 * or 1 turns moderation off; MAXULONG as the interval leaves only the count,
 * MAXULONG (or more than the depth) as the count leaves only the interval;
 * both at once could hold a callback back for ever and are refused. New
 * settings apply at once, also to a callback already held back.
 */
static NTSTATUS cq_moderation(NDK_CQ *pNdkCq, ULONG ModerationInterval, ULONG ModerationCount)
{
    struct ndk_cq_impl *cq = cq_from(pNdkCq);
    if (!cq)
        return STATUS_INVALID_PARAMETER;
    bool off = ModerationInterval == 0 || ModerationCount <= 1;
    /* The timer's watch is on the CQ's engine's loop (mod_timer_open). */
    struct ndk_engine *e = ndk_obj_engine_lock(&cq->obj);
    pthread_mutex_lock(&cq->lock);
    NTSTATUS st = STATUS_SUCCESS;
    if (!off && ModerationInterval == UINT32_MAX &&
        (ModerationCount == UINT32_MAX || ModerationCount > cq->depth))
        st = STATUS_INVALID_PARAMETER_MIX;
    else if (!off && ModerationInterval != UINT32_MAX)
        st = mod_timer_open(cq);
    if (st == STATUS_SUCCESS) {
        cq->mod_interval_us = off ? 0 : ModerationInterval;
        cq->mod_count = off ? 0 : ModerationCount;
        if (cq->mod_due) {
            if (!mod_on(cq) || mod_release(cq))
                cq_fire_locked(cq, STATUS_SUCCESS);
            else
                mod_timer_start(cq);
        }
    }
    pthread_mutex_unlock(&cq->lock);
    ndk_engine_unlock(e);
    return st;
}

static const NDK_CQ_DISPATCH cq_dispatch = {
    .NdkCloseCq = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkResizeCq = cq_resize,
    .NdkArmCq = cq_arm,
    .NdkGetCqResults = cq_get_results,
    .NdkControlCqInterruptModeration = cq_moderation,
    .NdkGetCqResultsEx = cq_get_results_ex,
};

/* Device lock held. Disarming under the CQ lock means no notification can
 * be queued from now on; one already queued holds a busy count, so the close
 * stays pending until it has run (8.2 rule 7). */
static void cq_close_start(struct ndk_obj *obj)
{
    struct ndk_cq_impl *cq = container_of(obj, struct ndk_cq_impl, obj);
    pthread_mutex_lock(&cq->lock);
    __atomic_store_n(&cq->armed, -1, __ATOMIC_RELAXED);
    cq->mod_due = false;
    pthread_mutex_unlock(&cq->lock);
}

/* The CQ's engine lock and the device lock held: the timer's watch goes
 * before its descriptor. */
static void cq_destroy(struct ndk_obj *obj)
{
    struct ndk_cq_impl *cq = container_of(obj, struct ndk_cq_impl, obj);
    if (cq->mod_timerfd >= 0) {
        loop_watch_del(&obj->engine->loop, &cq->mod_watch);
        ndk_timer_close(cq->mod_timerfd);
        cq->mod_timerfd = -1;
    }
    ndk_engine_unplace(obj);
}

static void cq_free(struct ndk_obj *obj)
{
    struct ndk_cq_impl *cq = container_of(obj, struct ndk_cq_impl, obj);
    free(cq->ring);
    for (struct ndk_cq_ring *r = cq->retired, *next; r; r = next) {
        next = r->retired_next;
        free(r);
    }
    pthread_mutex_destroy(&cq->lock);
    free(cq);
}

static const struct ndk_obj_ops cq_ops = {
    .close_start = cq_close_start, .destroy = cq_destroy, .free = cq_free};

NTSTATUS ndk_create_cq(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth,
                       NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                       GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_CQ **ppNdkCq)
{
    /* Affinity is a preference the consumer may not rely on (5.3.2): the
     * CQ's notifications run on the engine of one of its CPUs when there is
     * one, else on another engine (ndk_engine_place). Creation
     * completes inline, so CreateCompletion is never called (C7). */
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !ppNdkCq || !CqNotification)
        return STATUS_INVALID_PARAMETER;
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    /* 5.3.2: beyond MaxCqDepth is invalid; 0 is not discussed and rejected. */
    if (CqDepth == 0 || CqDepth > info.MaxCqDepth)
        return STATUS_INVALID_PARAMETER;
    struct ndk_cq_impl *cq = calloc(1, sizeof *cq);
    struct ndk_cq_ring *ring = ring_new(CqDepth);
    if (!cq || !ring) {
        free(cq);
        free(ring);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    pthread_mutex_init(&cq->lock, NULL);
    cq->live_qps.next = cq->live_qps.prev = &cq->live_qps;
    cq->ring = ring;
    cq->depth = CqDepth;
    cq->armed = -1;
    cq->mod_timerfd = -1;
    cq->notify = CqNotification;
    cq->notify_ctx = CqNotificationContext;
    cq->notify_cb.kind = CB_CQ_NOTIFY;
    cq->notify_cb.obj = &cq->obj;
    pthread_mutex_lock(&ad->dev->lock);
    ndk_obj_init(&cq->obj, ad, NdkObjectTypeCq, &cq_dispatch, &cq_ops);
    cq->obj.engine = ndk_engine_place(ad, Affinity);
    ad->cq_engine = cq->obj.engine;
    pthread_mutex_unlock(&ad->dev->lock);
    *ppNdkCq = (NDK_CQ *)&cq->obj.pub;
    return STATUS_SUCCESS;
}
