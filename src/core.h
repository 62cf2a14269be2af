/*
 * core.h - what every NDK object of the provider shares: the public header
 * and dispatch pointer, the owning adapter, successor counts (rules L8-L11),
 * the count of outstanding requests and callbacks that a close waits for
 * (L13), and the queue through which every consumer callback is delivered.
 *
 * Locking (docs/architecture.md, Threads and locks): each engine's lock
 * guards its loop and the connection management of the connectors and
 * listeners placed on it; the device lock (struct ndk_device: every
 * instance of one interface's adapter) guards what is device-wide, object
 * lifetimes among it, and is taken after an engine lock, never across a
 * system call on the connection path. Consumer callbacks are never called
 * with either held: they are queued on the engine the object is placed on
 * (struct ndk_engine) and run by that engine's progress thread, one at a
 * time, so a callback may call back into any provider function (L5-L7),
 * and callbacks of one object (e.g. CQ notifications, C5) never run
 * concurrently.
 */
#ifndef NDK_CORE_H
#define NDK_CORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "net/linger.h"
#include "log.h"
#include "ndk_limits.h"
#include "stat.h"
#include "net/loop.h"
#include "rx_stage.h"

#define NDK_OBJ_MAGIC 0x4E444B4Fu /* "NDKO" */

#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

struct ndk_adapter_impl;
struct ndk_obj;
struct mem_table;

struct ndk_device;

/* Every public NDK_xxx object is { NDK_OBJECT_HEADER; const void *Dispatch }. */
struct ndk_pub {
    NDK_OBJECT_HEADER Header;
    const void *Dispatch;
};

enum ndk_cb_kind {
    CB_REQUEST,      /* NDK_FN_REQUEST_COMPLETION(ctx, status) */
    CB_CLOSE,        /* NDK_FN_CLOSE_COMPLETION(ctx); then the object is destroyed */
    CB_CONNECT_EVENT,/* listener's NDK_FN_CONNECT_EVENT_CALLBACK(ctx, connector) */
    CB_DISCONNECT,   /* NDK_FN_DISCONNECT_EVENT_CALLBACK[_EX] */
    CB_CQ_NOTIFY,    /* NDK_FN_CQ_NOTIFICATION_CALLBACK / NDK_FN_SRQ_NOTIFICATION_CALLBACK */
};

/* One queued callback. Embedded in whatever owns it, so completing never
 * allocates. The object it names stays alive (busy) until it has run. */
struct ndk_cb {
    struct ndk_cb *next;
    enum ndk_cb_kind kind;
    bool queued;
    struct ndk_obj *obj;
    union {
        struct {
            NDK_FN_REQUEST_COMPLETION fn;
            void *ctx;
            NTSTATUS status;
        } req;
        struct {
            /* Registered by the object that queued the event (the
             * listener), so the callback queue knows no object type:
             * admit decides, the owner's engine lock held (not the
             * device lock), whether the event still goes out (false: it
             * is dropped); deliver runs the consumer's callback, no lock
             * held. */
            bool (*admit)(struct ndk_obj *owner, struct ndk_obj *connector);
            void (*deliver)(struct ndk_obj *owner, struct ndk_obj *connector);
            struct ndk_obj *connector;
        } connect;
        struct {
            NDK_FN_DISCONNECT_EVENT_CALLBACK fn;
            NDK_FN_DISCONNECT_EVENT_CALLBACK_EX fn_ex;
            void *ctx;
            ULONG reason;
        } disc;
        struct {
            void (*fn)(void *ctx, NTSTATUS status); /* CQ or SRQ notification */
            void *ctx;
            NTSTATUS status;
        } notify;
    } u;
};

/* A provider request that may pend: STATUS_PENDING was returned and exactly
 * one completion is owed (C7). */
struct ndk_req {
    struct ndk_cb cb;
    bool pending;
};

struct ndk_obj_ops {
    /* Close started, the object's engine lock held and the device lock
     * not: what the close does on the object's engine (its sockets, its
     * loop), system calls included. Before close_start. */
    void (*close_engine)(struct ndk_obj *obj);
    /* Close started (the object's engine lock and the device lock held):
     * cancel or abort whatever is outstanding, so the object can finish. */
    void (*close_start)(struct ndk_obj *obj);
    /* Object finished (the device lock held, and the object's engine lock
     * unless its close already ran close_engine there): release sockets,
     * timers and antecedents. Memory is freed later by the progress
     * thread (ops->free). */
    void (*destroy)(struct ndk_obj *obj);
    void (*free)(struct ndk_obj *obj);
    /* The close is about to complete (device lock held; any engine's lock
     * may be, so it touches no engine state: close_engine already ran):
     * give back what the consumer may want to reuse at once, such as a
     * reserved port (E5/E14). Antecedents are released later, in destroy,
     * after the completion (L11). */
    void (*release)(struct ndk_obj *obj);
};

struct ndk_obj {
    struct ndk_pub pub; /* must be first: &obj->pub is the consumer's pointer */
    uint32_t magic;
    NDK_OBJECT_TYPE type;
    uint32_t id;         /* unique in the process: names it in logs and ndkstat */
    struct ndk_adapter_impl *ad;
    /* Runs its callbacks, watches its sockets and timers. Changes only for
     * a connector, in NdkConnect / NdkAccept, with both engines' locks
     * held (atomic: ndk_obj_engine_lock reads it, then re-checks). */
    struct ndk_engine *engine;
    const struct ndk_obj_ops *ops;
    unsigned successors; /* live objects that depend on this one (L8) */
    unsigned busy;       /* pending requests + queued or running callbacks (L13);
                            atomic: data-path threads queue CQ notifications
                            without the adapter lock */
    bool closing;        /* close called: no new events are delivered */
    bool close_pending;  /* close returned STATUS_PENDING; a close completion is owed */
    bool destroyed;
    struct ndk_cb close_cb;
    struct ndk_obj *all_prev, *all_next; /* adapter's list of live objects */
    struct ndk_obj *free_next;           /* deferred-free list */
    void *verify;                        /* the verifier's record (verify/vcore.h), or NULL */
};

/*
 * A progress engine: a thread standing for one CPU (pinned there once an
 * Affinity names it), with its own event loop and callback queue. An
 * object is placed on one engine for its life (a connector moves once,
 * when NdkConnect or NdkAccept gives it its QP):
 * its callbacks run on that engine's thread, its sockets and timers are
 * watched by that engine's loop (docs/architecture.md, Engines).
 */
struct ndk_engine {
    struct ndk_device *dev;
    unsigned index;
    /* Its loop (watches, timers, doorbell flag), the connection management
     * of the connectors and listeners placed on it (state machines,
     * half-open connections, timers) and its lingering sockets. Taken
     * before the device lock; two at once in ascending index
     * (docs/architecture.md, Threads and locks). The engine's thread holds
     * it except while waiting in epoll_wait, in unlocked handlers and
     * while callbacks run. */
    pthread_mutex_t lock;
    int cpu;                  /* the CPU it stands for (-1: a lone engine, none) */
    bool pinned;              /* runs only there: an Affinity named it (device lock) */
    /* The one CPU its thread may run on (pinned, or the process's mask
     * had one CPU when the engines started), else -1 (atomic: pollers
     * read it, qp_poll.c). */
    int only_cpu;
    struct loop loop;         /* its state: the engine's lock */
    unsigned spin_us;         /* looks for input this long before sleeping (loop_set_spin) */
    struct watched_set lingers; /* sockets closing after the peer, on this loop (net/linger.h; engine lock) */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t cbq_lock; /* leaf lock: only the callback queue */
    struct ndk_cb *cbq_head, *cbq_tail;
    unsigned load;            /* CQs, SRQs and listeners placed on it (device lock) */
    int tid;                  /* its thread's id, for ndkstat (atomic) */
    uint64_t callbacks_run;   /* callbacks it delivered, for ndkstat (atomic) */
};

/*
 * Test hooks: functions the tests that link the provider's internals
 * (tests/core) set on a device, through one of its adapters, to stand in a
 * race's other thread at a chosen point. Each is read with one atomic load
 * where it would run and is NULL in every consumer; there is no
 * process-wide hook (docs/architecture.md, Test hooks).
 */
struct ndk_qp_impl;
struct ndk_test_hooks {
    /* As ndk_qp_on_readable begins (entering) and ends, none of the QP's
     * locks held (qp_rx.c; tests/core/test_engine_input.c). */
    void (*qp_input)(struct ndk_qp_impl *qp, bool entering);
    /* A pass of the same-host rings found what ends the connection, all
     * locks released, not applied yet (xp_shm.c). */
    void (*shm_failing)(struct ndk_qp_impl *qp);
    /* A receive was posted for a Send that waited, and the posting thread
     * released the QP's locks (xp_shm.c). */
    void (*shm_posted)(struct ndk_qp_impl *qp);
    /* The target published a response, rx_lock held (xp_shm.c). */
    void (*shm_answered)(struct ndk_qp_impl *qp);
    /* The engine ran pass `pass` (0: the first) of a wake-up of a
     * same-host connection, no QP lock held (xp_shm.c, serve). */
    void (*shm_pass)(struct ndk_qp_impl *qp, int pass);
    /* Asked before a single-copy transfer looks at the peer's pidfd;
     * true: the peer is taken as ended (xp_shm.c, peer_move). */
    bool (*shm_peer_ended)(struct ndk_qp_impl *qp);
};
/* Sets the hooks of the adapter's device, every view of it included, to
 * *hooks (NULL: none); a hook already entered may still run. Each field is
 * stored on its own. False if ad is not an open adapter. Tests only
 * (adapter.c). */
bool ndk_test_hooks_set(NDK_ADAPTER *ad, const struct ndk_test_hooks *hooks);

/* Sets the receive staging (rx_stage.h) that the data paths of the
 * adapter's device start with from now on, every view included; the sim
 * and the FPDU-stream fuzzer vary it. False when ad is not an adapter. */
bool ndk_test_rx_stage_set(NDK_ADAPTER *ad, size_t threshold, size_t size);

/*
 * The device: one per network interface, shared by every adapter instance
 * (view) opened on it (docs/architecture.md). It owns what must be one per
 * interface: the memory table (tokens are valid across views), the lock,
 * the progress engines (each with its loop, thread and callback queue),
 * and the list of QPs with a running data path. It lives while a view of
 * it is open.
 */
struct ndk_device {
    char name[IF_NAMESIZE];
    unsigned ifindex;
    uint64_t netns;  /* the network namespace ifindex is in (ndk_netns_id) */
    bool loopback;
    unsigned open_views;             /* device registry lock (adapter.c) */
    struct ndk_device *registry_next;
    struct ndk_adapter_impl *views;  /* open and closed-but-not-empty views (lock) */

    /* Device-wide state only: the views and their counts, object
     * lifetimes (successors, closing, the views' object lists), the free
     * lists, placement loads, shared endpoints' connections, which QP a
     * connector claimed, the address cache. After the engine locks. */
    pthread_mutex_t lock;
    struct ndk_engine *engines; /* engines[0] also ages leases and receive waits */
    unsigned nengines;
    bool stopping;            /* set under the lock, read atomically by the engines */
    pthread_cond_t cb_done;   /* a callback ran (lock): a closing view waits on it */
    /* Objects and views to free once every engine has been between two
     * loop iterations since (an event another engine fetched may still
     * name them): listed on free_list, moved to free_waiting when every
     * engine has passed (`passed`, a bit per engine), freed at the next
     * such point. Device lock (the list heads are stored atomically, so an
     * engine with nothing to free need not take it: ndk_free_deferred). */
    struct ndk_obj *free_list, *free_waiting;
    struct ndk_adapter_impl *dead_views, *dead_waiting; /* closed views whose last object went */
    uint64_t passed;

    struct mem_table *mem; /* STags of every MR, FRMR and MW (mem.h) */
    /* QPs with a running data path, for busy polling: live_lock comes after
     * the engine locks and the device lock, and before every QP lock. */
    pthread_mutex_t live_lock;
    struct ndk_qp_impl *live_qps;
    unsigned input_leases; /* QPs whose input a busy poller reads (changed under live_lock, atomically) */
    unsigned rx_waits;     /* QPs whose input waits for a receive (atomic; qp.h rx_waiting) */
    /* The engine's periodic chores, registered by the device's creator
     * (adapter.c) so that engine.c, below the QP, names no QP file:
     * ending unrenewed input leases (qp_poll.c) and receive-wait deadlines
     * (qp_rx.c). */
    void (*age_leases)(struct ndk_device *dev);
    void (*check_rx_waits)(struct ndk_device *dev);

    struct ndk_test_hooks test_hooks; /* each field atomic; all NULL but in tests */
    /* The receive staging new data paths start with (rx_stage.h): the
     * defaults, or what ndk_test_rx_stage_set chose; fields atomic. */
    struct rx_stage_cfg rx_stage;

    /* Local addresses, cached; re-read when an address is not found. */
    NDK_SOCKADDR addrs[NDK_MAX_ADAPTER_ADDRESSES];
    unsigned naddrs;
};

/* An adapter instance (NDK_ADAPTER): a view of its device with its own
 * version, options and objects. Objects created through a view may be used
 * with objects of any view of the same device; closing a view tears down
 * only the objects created through it. */
struct ndk_adapter_impl {
    struct ndk_obj obj;
    struct ndk_device *dev;
    struct ndk_adapter_impl *view_next; /* device's views (device lock) */
    NDK_VERSION version;
    NDK_OPEN_OPTIONS opt; /* every field resolved to its effective value */
    struct ndk_verifier *verifier; /* NDK_OPEN_FLAG_VERIFY (verify/verify.h), or NULL */
    bool busy_poll;       /* NDK_OPEN_FLAG_BUSY_POLL: its CQs' pollers read input */
    bool closed;          /* ndk_close_adapter returned; kept while objects remain */
    struct ndk_obj *objects; /* every live object created through this view */
    unsigned callbacks;   /* queued or running callbacks of its objects (device lock) */
    /* The engine of the newest CQ created through this view, where its
     * listeners go (ndk_engine_place_listener; device lock), or NULL. */
    struct ndk_engine *cq_engine;
    /* Per engine (by index), the CQs, SRQs and listeners of this view on
     * it (ndk_engine_place; device lock). */
    unsigned engine_load[NDK_MAX_ENGINES];
    /* What ndkstat shows of this view (stat.h; device lock, the
     * connection counters atomic): its own objects' counters, apart from
     * other views of the device. */
    struct ndk_adapter_stats st;
    struct ndk_adapter_impl *stat_next; /* the process's adapter list (stat.c) */
};

/* ---- objects ---- */

void ndk_obj_init(struct ndk_obj *obj, struct ndk_adapter_impl *ad, NDK_OBJECT_TYPE type,
                  const void *dispatch, const struct ndk_obj_ops *ops);
/* Returns the provider object behind a consumer pointer, or NULL if it is
 * not a live provider object of that type. */
struct ndk_obj *ndk_obj_from_pub(const void *pub, NDK_OBJECT_TYPE type);
/* The generic NDK_FN_CLOSE_OBJECT behaviour (rules L1-L16). */
NTSTATUS ndk_obj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION cb, void *ctx);
/* Records that succ depends on ante (ante->successors++). */
void ndk_obj_add_successor(struct ndk_obj *ante);
/* Drops that dependency; may let ante's pending close finish. Lock held. */
void ndk_obj_release_successor(struct ndk_obj *ante);
/* Tears an object down at once, without callbacks (lock held; busy == 0):
 * for objects the consumer never saw. */
void ndk_obj_destroy(struct ndk_obj *obj);
/* Re-checks whether a closing object can finish now. Lock held. */
void ndk_obj_maybe_finish(struct ndk_obj *obj);

/* NDK_FN_QUERY_EXTENSION_INTERFACE: libndk has no extension interfaces. */
NTSTATUS ndk_query_extension(NDK_OBJECT_HEADER *obj, GUID *id, NDK_VERSION ver,
                             NDK_EXTENSION_INTERFACE *out);

/* ---- callbacks ---- */

/* Marks req pending (the caller returns STATUS_PENDING); obj stays busy. */
void ndk_req_begin(struct ndk_req *req, struct ndk_obj *obj, NDK_FN_REQUEST_COMPLETION fn, void *ctx);
/* Completes a pending request exactly once: queues its completion callback. */
void ndk_req_complete(struct ndk_req *req, NTSTATUS status);
/* Queues a callback item prepared by the caller; obj->busy++ until it ran.
 * Needs no lock (takes only the leaf callback-queue lock), so the data path
 * may queue CQ notifications from any thread. Requests: the lock that
 * guards the request's object held (its engine's, or the device lock). */
void ndk_cb_queue(struct ndk_adapter_impl *ad, struct ndk_cb *cb);
/* Brackets a data-path post (NdkSend, NdkReceive, NdkFlush, ...): what
 * ndk_cb_queue is asked to queue in between is queued when the outermost
 * post leaves, so no callback it caused runs before it returns. */
void ndk_post_enter(void);
void ndk_post_leave(void);
/* Wakes an engine's progress thread (no lock needed). */
void ndk_kick(struct ndk_engine *e);
/* True when the calling thread is one of the device's progress threads. */
bool ndk_on_progress_thread(struct ndk_adapter_impl *ad);

/* ---- engines (engine.c) ---- */

/* The engine that runs device-wide chores: leases, receive waits. */
static inline struct ndk_engine *ndk_dev_engine0(struct ndk_device *dev)
{
    return &dev->engines[0];
}
/* Places a CQ or SRQ created through ad (affinity: the consumer's
 * GROUP_AFFINITY, or NULL): an engine on one of the affinity's CPUs, else
 * one with the fewest of the view's objects, the least loaded of those;
 * its load and the view's count there grow by one. Device lock held. */
struct ndk_engine *ndk_engine_place(struct ndk_adapter_impl *ad, const GROUP_AFFINITY *affinity);
/* Places a listener created through ad: on the engine of the view's newest
 * CQ, else as ndk_engine_place does without an affinity. Device lock held. */
struct ndk_engine *ndk_engine_place_listener(struct ndk_adapter_impl *ad);
/* Gives back what placing obj counted. Device lock held. */
void ndk_engine_unplace(struct ndk_obj *obj);
/* Is the calling thread a progress engine's (of any device)? */
bool ndk_on_engine_thread(void);

/* ---- engine locks (docs/architecture.md, Threads and locks) ---- */

static inline void ndk_engine_lock(struct ndk_engine *e)
{
    pthread_mutex_lock(&e->lock);
}

static inline void ndk_engine_unlock(struct ndk_engine *e)
{
    pthread_mutex_unlock(&e->lock);
}

/* Locks the engine obj is placed on and returns it: locks, re-checks that
 * obj did not move meanwhile (a connector in NdkConnect / NdkAccept, which
 * moves it with both engines' locks held), and retries if it did. */
static inline struct ndk_engine *ndk_obj_engine_lock(struct ndk_obj *obj)
{
    for (;;) {
        struct ndk_engine *e = __atomic_load_n(&obj->engine, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&e->lock);
        if (__atomic_load_n(&obj->engine, __ATOMIC_RELAXED) == e)
            return e;
        pthread_mutex_unlock(&e->lock);
    }
}

/* Locks a and b (the same or two engines of one device) in ascending
 * index; ndk_engines_unlock2 releases them. */
static inline void ndk_engines_lock2(struct ndk_engine *a, struct ndk_engine *b)
{
    if (a != b && a->index > b->index) {
        struct ndk_engine *t = a;
        a = b;
        b = t;
    }
    pthread_mutex_lock(&a->lock);
    if (a != b)
        pthread_mutex_lock(&b->lock);
}

static inline void ndk_engines_unlock2(struct ndk_engine *a, struct ndk_engine *b)
{
    pthread_mutex_unlock(&a->lock);
    if (a != b)
        pthread_mutex_unlock(&b->lock);
}

/* Every engine's lock of the device from index `from` on, ascending (0:
 * all, for a view's teardown or the stat snapshot; 1: the first engine,
 * which holds its own, for its chores). */
static inline void ndk_engines_lock_from(struct ndk_device *dev, unsigned from)
{
    for (unsigned i = from; i < dev->nengines; i++)
        pthread_mutex_lock(&dev->engines[i].lock);
}

static inline void ndk_engines_unlock_from(struct ndk_device *dev, unsigned from)
{
    for (unsigned i = dev->nengines; i-- > from;)
        pthread_mutex_unlock(&dev->engines[i].lock);
}

#endif
