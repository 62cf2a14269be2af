/*
 * cqsrq.h - completion queues and shared receive queues as the data path
 * sees them. Both are fed and drained from any thread: each has its own
 * mutex, taken after a QP's locks and before nothing else except the
 * adapter's leaf callback-queue lock (for notifications).
 */
#ifndef NDK_CQSRQ_H
#define NDK_CQSRQ_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core.h"
#include "ndk_limits.h"

/* One completion as the QP produces it. */
struct ndk_cqe {
    NTSTATUS status;
    ULONG bytes;              /* receives: bytes received; else undefined (0) */
    void *qp_ctx;
    void *req_ctx;
    NDK_OPERATION_TYPE type;
    ULONG provider_error;     /* 0 on success; else the Terminate control word or 0 */
    ULONG_PTR type_specific;  /* ReceiveAndInvalidate: the invalidated token */
    bool solicited;           /* a receive matched with a Send carrying SE */
};

/* A QP's place in a CQ's list of running QPs (circular, with the CQ's
 * entry as head): changed under the device's live_lock, walked by the
 * CQ's busy poller without it (qp_poll.c: `next` is atomic). */
struct ndk_qp_link {
    struct ndk_qp_link *next, *prev;
    struct ndk_qp_impl *qp;
};

/* A CQ's ring of completions: entry i (counted from the CQ's creation)
 * is e[i % depth]. One allocation, so that the consumer, which reads it
 * without the CQ's lock, finds a ring and its depth together. */
struct ndk_cq_ring {
    ULONG depth;
    struct ndk_cq_ring *retired_next; /* in the CQ's list of rings a resize replaced */
    struct ndk_cqe e[];
};

struct ndk_cq_impl {
    struct ndk_obj obj;
    /* QPs with a running data path that complete here: what a busy poll
     * of this CQ reads, without walking every QP of the adapter. */
    struct ndk_qp_link live_qps;
    /* Busy polls walking live_qps now, counted by the parity of
     * walk_epoch when each began (qp_poll.c, walks_pass). Atomic. */
    unsigned walk_epoch;
    unsigned walkers[2];
    pthread_mutex_t lock;
    NDK_FN_CQ_NOTIFICATION_CALLBACK notify;
    void *notify_ctx;
    /* The ring (cq.c says who reads what without the lock): the
     * producers append under the lock and publish `pushed`; the one
     * consumer (NdkGetCqResults[Ex], never two at once: C1) takes from
     * `taken` on without it. Entries pushed - taken are waiting. */
    struct ndk_cq_ring *ring;
    ULONG depth;          /* capacity asked for (entries): ring->depth, read under the lock */
    uint64_t pushed;      /* completions ever pushed (the producers' index; atomic) */
    uint64_t taken;       /* completions ever taken (the consumer's index; atomic) */
    struct ndk_cq_ring *retired; /* rings a resize replaced, for the consumer to free (atomic) */
    /* Notification state (NdkArmCq; docs/rules.md C3-C6). */
    int armed;            /* -1 = not armed, else NDK_CQ_NOTIFY_* (merged) */
    uint64_t seen_at_cb;  /* value of `pushed` when the last callback was queued */
    /* An arm was satisfied while the notification item was in use (its
     * callback queued or running): the trampoline owes that callback even
     * when the consumer has taken the entries since ("the next completion
     * placed in the CQ", NdkArmCq), so the decision is kept, not re-derived
     * from the ring. */
    bool owed;
    NTSTATUS owed_status;
    /* Overflowed: unusable, no further completions. The only CQ error a
     * software provider has (the ring is allocated when the CQ is created or
     * resized; nothing can fail later), so notifications report
     * STATUS_BUFFER_OVERFLOW and never STATUS_INTERNAL_ERROR (5.2.4). */
    bool overflowed;
    struct ndk_cb notify_cb;
    /* Busy polling, when the CQ's adapter was opened with
     * NDK_OPEN_FLAG_BUSY_POLL or a QP's engine runs on one CPU only: set
     * (atomically) by the first such QP that starts its data path on this
     * CQ (qp_poll.c); NULL = none. poll_hook: GetCqResults
     * [Ex] calls it (without the CQ lock) before reading an empty ring, so
     * a polling consumer drives receive progress itself. arm_hook: called
     * after an ArmCq (the consumer is about to sleep). */
    void (*poll_hook)(struct ndk_cq_impl *cq);
    void (*arm_hook)(struct ndk_cq_impl *cq);
    /* Interrupt moderation (NdkControlCqInterruptModeration; cq.c says
     * how). mod_interval_us 0 = no moderation, UINT32_MAX = only the count;
     * mod_count 0 = only the interval. */
    ULONG mod_interval_us, mod_count;
    bool mod_due;           /* an arm is satisfied, its callback held back */
    uint64_t mod_since_ns;  /* when it became satisfied (CLOCK_MONOTONIC) */
    int mod_timerfd;        /* -1 until an interval is first set */
    struct loop_watch mod_watch;
};

/* Appends one completion. Returns false if the CQ is (or just became)
 * overflowed because it was full: the entry is dropped and the consumer is
 * told STATUS_BUFFER_OVERFLOW through the notification (any arm type).
 * Queues the notification callback when an arm is satisfied. */
bool ndk_cq_push(struct ndk_cq_impl *cq, const struct ndk_cqe *e);
/* Appends e[0..n) in order under one lock; returns how many went in (fewer
 * than n only when the CQ is or became overflowed: the rest are dropped). */
size_t ndk_cq_push_n(struct ndk_cq_impl *cq, const struct ndk_cqe *e, size_t n);
/* True once the CQ overflowed. */
bool ndk_cq_in_error(struct ndk_cq_impl *cq);
/* Completions waiting in the CQ (a look from any thread). */
static inline ULONG ndk_cq_waiting(const struct ndk_cq_impl *cq)
{
    uint64_t taken = __atomic_load_n(&cq->taken, __ATOMIC_ACQUIRE);
    return (ULONG)(__atomic_load_n(&cq->pushed, __ATOMIC_ACQUIRE) - taken);
}

/* A posted receive: the consumer's SGEs are copied at post time and mapped
 * at placement time (a later deregistration must still be honoured). */
struct ndk_rwqe {
    void *ctx;
    ULONG nsge;
    ULONG total;          /* sum of SGE lengths */
    uint64_t sge_gen;     /* what the post's SGE check gave (mem_check_posted); 0: map again */
    NDK_SGE sge[NDK_MAX_SGE];
};

/* Fills a receive queue's (or an SRQ's) free slot with a checked receive:
 * its context, its n SGEs and their total length. */
static inline void ndk_rwqe_set(struct ndk_rwqe *r, void *ctx, const NDK_SGE *sgl, ULONG n, uint64_t total)
{
    r->ctx = ctx;
    r->nsge = n;
    r->total = (ULONG)total;
    r->sge_gen = 0;
    if (n)
        memcpy(r->sge, sgl, n * sizeof *sgl);
}

struct ndk_srq_impl {
    struct ndk_obj obj;
    pthread_mutex_t lock;
    struct ndk_pd_impl *pd;
    struct ndk_rwqe *ring;
    ULONG depth, max_sge;
    ULONG head, count;
    ULONG threshold;      /* notify when count < threshold */
    bool armed;
    bool owed;            /* the threshold was met (and the arm spent) while the
                             notification item was in use: the trampoline
                             owes the callback even if receives were posted
                             since (as cq.c's owed) */
    NDK_FN_SRQ_NOTIFICATION_CALLBACK notify;
    void *notify_ctx;
    struct ndk_cb notify_cb;
};

/* Takes the oldest posted receive for an inbound Send. Returns false when
 * none is posted. Fires the limit notification when the count drops below
 * an armed threshold. An SRQ has no error state of its own: its ring is
 * allocated when it is created or modified, so nothing can make it unusable
 * later, and its notification reports STATUS_SUCCESS only (never
 * STATUS_INTERNAL_ERROR, 5.2.5). */
bool ndk_srq_take(struct ndk_srq_impl *srq, struct ndk_rwqe *out);

NTSTATUS ndk_create_srq(NDK_PD *pNdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge, ULONG NotifyThreshold,
                        NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification, PVOID SrqNotificationContext,
                        GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                        PVOID RequestContext, NDK_SRQ **ppNdkSrq);

#endif
