/* Object lifetimes and callback delivery shared by all NDK objects. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "verify/verify.h"

void ndk_obj_init(struct ndk_obj *obj, struct ndk_adapter_impl *ad, NDK_OBJECT_TYPE type,
                  const void *dispatch, const struct ndk_obj_ops *ops)
{
    /* Rule L16: header set, reserved block zero, dispatch set before the
     * object is handed out; the provider never reads Dispatch again. */
    memset(&obj->pub, 0, sizeof obj->pub);
    obj->pub.Header.Version = ad->version;
    obj->pub.Header.ObjectType = type;
    obj->pub.Dispatch = dispatch;
    obj->magic = NDK_OBJ_MAGIC;
    obj->type = type;
    static uint32_t last_id;
    obj->id = __atomic_add_fetch(&last_id, 1, __ATOMIC_RELAXED);
    obj->ad = ad;
    /* Objects with nothing to place (PDs, memory, endpoints) deliver their
     * few callbacks on the first engine; cq.c, srq.c, qp.c, listener.c and
     * connector.c place theirs. */
    obj->engine = ndk_dev_engine0(ad->dev);
    obj->ops = ops;
    obj->close_cb.kind = CB_CLOSE;
    obj->close_cb.obj = obj;
    if (&ad->obj != obj) {
        obj->all_next = ad->objects;
        obj->all_prev = NULL;
        if (ad->objects)
            ad->objects->all_prev = obj;
        ad->objects = obj;
    }
}

struct ndk_obj *ndk_obj_from_pub(const void *pub, NDK_OBJECT_TYPE type)
{
    if (!pub)
        return NULL;
    struct ndk_obj *obj = (struct ndk_obj *)(uintptr_t)pub;
    if (obj->magic != NDK_OBJ_MAGIC || obj->type != type || obj->destroyed)
        return NULL;
    return obj;
}

bool ndk_on_progress_thread(struct ndk_adapter_impl *ad)
{
    struct ndk_device *dev = ad->dev;
    for (unsigned i = 0; i < dev->nengines; i++)
        if (loop_in_owner(&dev->engines[i].loop))
            return true;
    return false;
}

/* Appends the chain first..last (linked by next) to the list whose ends
 * are *head and *tail: an engine's callback queue, or the callbacks a
 * post holds back. */
static inline void cb_chain_append(struct ndk_cb **head, struct ndk_cb **tail, struct ndk_cb *first,
                                   struct ndk_cb *last)
{
    last->next = NULL;
    if (*tail)
        (*tail)->next = first;
    else
        *head = first;
    *tail = last;
}

/* Queues the chain first..last, callbacks of objects on engine e, under one
 * hold of its lock and with one wake-up. */
static void cbq_link(struct ndk_engine *e, struct ndk_cb *first, struct ndk_cb *last)
{
    pthread_mutex_lock(&e->cbq_lock);
    for (struct ndk_cb *cb = first;; cb = cb->next) {
        /* Counted for the object's view: closing it waits for these. */
        __atomic_add_fetch(&cb->obj->ad->callbacks, 1, __ATOMIC_ACQ_REL);
        cb->queued = true;
        if (cb == last)
            break;
    }
    cb_chain_append(&e->cbq_head, &e->cbq_tail, first, last);
    pthread_mutex_unlock(&e->cbq_lock);
    ndk_kick(e);
}

static struct ndk_engine *cb_engine(const struct ndk_cb *cb)
{
    return __atomic_load_n(&cb->obj->engine, __ATOMIC_ACQUIRE);
}

/* Queues cb on the engine of its object: one object's callbacks all run on
 * one thread, so never concurrently (C5). */
static void cbq_append(struct ndk_cb *cb)
{
    cbq_link(cb_engine(cb), cb, cb);
}

void ndk_kick(struct ndk_engine *e)
{
    if (loop_in_owner(&e->loop))
        return; /* the engine drains its queue before it waits */
    /* The doorbell needs no lock, and a redundant wake-up only costs an
     * empty loop iteration. */
    loop_wake(&e->loop);
}

/*
 * Callbacks a post produced, held on the posting thread until the post
 * returns: a completion's notification (or a disconnect event its failure
 * caused) then cannot run on the progress thread while the post is still
 * inside the provider, as on hardware, where the DPC comes after the
 * doorbell (docs/behaviour.md, "Completions"). Their busy count is taken at
 * once, so a close still waits for them.
 */
/* initial-exec: read on every post and queued callback; the default model
 * of a shared library makes every read a call to __tls_get_addr (about 100
 * instructions per 64 B ping-pong message). */
#define POST_TLS __thread __attribute__((tls_model("initial-exec")))
static POST_TLS unsigned post_depth;
static POST_TLS struct ndk_cb *post_held_head, *post_held_tail;

void ndk_post_enter(void)
{
    post_depth++;
}

void ndk_post_leave(void)
{
    if (--post_depth)
        return;
    /* Held callbacks of objects on one engine, in a row, are queued
     * together: one lock hold and one wake-up for the post, not one each. */
    struct ndk_cb *first;
    while ((first = post_held_head)) {
        struct ndk_engine *e = cb_engine(first);
        struct ndk_cb *last = first;
        while (last->next && cb_engine(last->next) == e)
            last = last->next;
        post_held_head = last->next;
        cbq_link(e, first, last);
    }
    post_held_tail = NULL;
}

void ndk_cb_queue(struct ndk_adapter_impl *ad, struct ndk_cb *cb)
{
    __atomic_add_fetch(&cb->obj->busy, 1, __ATOMIC_ACQ_REL);
    (void)ad; /* the item goes to its object's engine (cbq_append) */
    if (!post_depth) {
        cbq_append(cb);
        return;
    }
    cb->queued = true;
    cb_chain_append(&post_held_head, &post_held_tail, cb, cb);
}

void ndk_req_begin(struct ndk_req *req, struct ndk_obj *obj, NDK_FN_REQUEST_COMPLETION fn, void *ctx)
{
    req->pending = true;
    req->cb.kind = CB_REQUEST;
    req->cb.obj = obj;
    req->cb.u.req.fn = fn;
    req->cb.u.req.ctx = ctx;
    req->cb.u.req.status = STATUS_PENDING;
    /* The object cannot finish closing until this completion has run. */
    __atomic_add_fetch(&obj->busy, 1, __ATOMIC_ACQ_REL);
}

void ndk_req_complete(struct ndk_req *req, NTSTATUS status)
{
    if (!req->pending)
        return;
    req->pending = false;
    req->cb.u.req.status = status;
    /* ndk_req_begin already counted this completion in obj->busy. */
    cbq_append(&req->cb);
}

void ndk_obj_destroy(struct ndk_obj *obj)
{
    struct ndk_adapter_impl *ad = obj->ad;
    obj->destroyed = true;
    if (obj->ops->destroy)
        obj->ops->destroy(obj);
    if (obj->all_prev)
        obj->all_prev->all_next = obj->all_next;
    else if (ad->objects == obj)
        ad->objects = obj->all_next;
    if (obj->all_next)
        obj->all_next->all_prev = obj->all_prev;
    obj->all_prev = obj->all_next = NULL;
    /* Freed once every engine has been between loop iterations, so a
     * socket event already fetched for this object never touches freed
     * memory (ndk_free_deferred). */
    obj->free_next = ad->dev->free_list;
    __atomic_store_n(&ad->dev->free_list, obj, __ATOMIC_RELEASE);
    if (ad->closed && !ad->objects)
        ndk_view_retire(ad);
    /* The doorbell, not loop_kick: the caller need not hold the object's
     * engine lock. */
    ndk_kick(obj->engine);
}

void ndk_obj_maybe_finish(struct ndk_obj *obj)
{
    if (obj->close_pending && !obj->destroyed && !obj->close_cb.queued && obj->successors == 0 &&
        __atomic_load_n(&obj->busy, __ATOMIC_ACQUIRE) == 0) {
        /* A close completion is not counted in busy; running it ends with
         * ndk_obj_destroy. */
        if (obj->ops->release)
            obj->ops->release(obj);
        cbq_append(&obj->close_cb);
    }
}

void ndk_obj_add_successor(struct ndk_obj *ante)
{
    ante->successors++;
}

void ndk_obj_release_successor(struct ndk_obj *ante)
{
    ante->successors--;
    ndk_obj_maybe_finish(ante);
}

NTSTATUS ndk_obj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION cb, void *ctx)
{
    if (!hdr)
        return STATUS_INVALID_PARAMETER;
    struct ndk_obj *obj = ndk_obj_from_pub(hdr, hdr->ObjectType);
    if (!obj || obj->type == NdkObjectTypeAdapter)
        return STATUS_INVALID_PARAMETER;
    struct ndk_adapter_impl *ad = obj->ad;
    /* The object's engine lock first: a connector's or listener's close
     * ends its sockets and timers there, and the device lock comes after
     * (docs/architecture.md, Threads and locks). */
    struct ndk_engine *e = ndk_obj_engine_lock(obj);
    pthread_mutex_lock(&ad->dev->lock);
    if (obj->closing) {
        /* A second close of the same object is a consumer bug (L9); it must
         * not produce a second completion. */
        pthread_mutex_unlock(&ad->dev->lock);
        ndk_engine_unlock(e);
        return STATUS_INVALID_DEVICE_STATE;
    }
    obj->closing = true;
    obj->close_cb.u.req.ctx = ctx;
    obj->close_cb.u.req.fn = (NDK_FN_REQUEST_COMPLETION)(void (*)(void))cb;
    if (obj->ops->close_engine) {
        /* Its system calls (closing, resetting sockets) go without the
         * device lock. Nothing can finish the object meanwhile: its close
         * is not pending yet, and its callbacks settle on this engine. */
        pthread_mutex_unlock(&ad->dev->lock);
        obj->ops->close_engine(obj);
        pthread_mutex_lock(&ad->dev->lock);
    }
    if (obj->ops->close_start)
        obj->ops->close_start(obj);
    NTSTATUS st = STATUS_PENDING;
    if (obj->successors == 0 && __atomic_load_n(&obj->busy, __ATOMIC_ACQUIRE) == 0) {
        ndk_obj_destroy(obj);
        st = STATUS_SUCCESS;
    } else {
        obj->close_pending = true;
    }
    pthread_mutex_unlock(&ad->dev->lock);
    ndk_engine_unlock(e);
    return st;
}

NTSTATUS ndk_query_extension(NDK_OBJECT_HEADER *obj, GUID *id, NDK_VERSION ver,
                             NDK_EXTENSION_INTERFACE *out)
{
    (void)ver;
    if (!obj || !id || !out)
        return STATUS_INVALID_PARAMETER;
    return STATUS_NOT_SUPPORTED;
}

/* A callback of an object of `view` ran (or was dropped): a view being
 * closed waits until none is queued or running. Device lock held. */
static void cb_ran(struct ndk_device *dev, struct ndk_adapter_impl *view)
{
    if (__atomic_sub_fetch(&view->callbacks, 1, __ATOMIC_ACQ_REL) == 0)
        pthread_cond_broadcast(&dev->cb_done);
}

/* A callback that ran, its bookkeeping still owed (ndk_drain_callbacks). */
struct cb_ran_rec {
    struct ndk_obj *obj;
    enum ndk_cb_kind kind;
};

/* How many callbacks an engine runs back to back before it takes its
 * lock and the device lock for their bookkeeping: bounded, so a queue that
 * never empties (a busy CQ re-queueing its notification) still lets closes
 * finish. */
#define DRAIN_BATCH 32

/* The bookkeeping of callbacks that ran: each object's busy count (a close
 * that waited for them may finish, L13), a close completion's destroy, and
 * the view's count. The engine's lock (the objects are on it) and the
 * device lock held. */
static void cb_settle(struct ndk_device *dev, const struct cb_ran_rec *ran, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct ndk_obj *obj = ran[i].obj;
        struct ndk_adapter_impl *view = obj->ad;
        if (ran[i].kind == CB_CLOSE) {
            obj->close_cb.queued = false;
            ndk_obj_destroy(obj);
        } else {
            __atomic_sub_fetch(&obj->busy, 1, __ATOMIC_ACQ_REL);
            ndk_obj_maybe_finish(obj);
        }
        cb_ran(dev, view);
    }
}

/* The engine's next queued callback, taken off its queue; NULL when the
 * queue is empty. */
static struct ndk_cb *cbq_pop(struct ndk_engine *e)
{
    pthread_mutex_lock(&e->cbq_lock);
    struct ndk_cb *cb = e->cbq_head;
    if (cb) {
        e->cbq_head = cb->next;
        if (!e->cbq_head)
            e->cbq_tail = NULL;
        cb->next = NULL;
        /* The item may be queued again the moment its callback starts
         * (a CQ/SRQ notification by a data-path thread, a request the
         * callback begins anew): its flag is owned by the queue lock.
         * Only a close completion's is read (ndk_obj_maybe_finish):
         * it stays set until the object is destroyed. */
        if (cb->kind != CB_CLOSE)
            cb->queued = false;
    }
    pthread_mutex_unlock(&e->cbq_lock);
    return cb;
}

/* Calls the consumer's function of one queued callback of obj (kind read
 * before: the item may be queued again while it runs). No lock held. */
static void cb_invoke(struct ndk_cb *cb, struct ndk_obj *obj, enum ndk_cb_kind kind)
{
    switch (kind) {
    case CB_REQUEST:
        if (cb->u.req.fn)
            cb->u.req.fn(cb->u.req.ctx, cb->u.req.status);
        break;
    case CB_CLOSE: {
        NDK_FN_CLOSE_COMPLETION fn = (NDK_FN_CLOSE_COMPLETION)(void (*)(void))cb->u.req.fn;
        if (fn)
            fn(cb->u.req.ctx);
        break;
    }
    case CB_CONNECT_EVENT:
        cb->u.connect.deliver(obj, cb->u.connect.connector);
        break;
    case CB_DISCONNECT:
        if (cb->u.disc.fn_ex)
            cb->u.disc.fn_ex(cb->u.disc.ctx, cb->u.disc.reason);
        else if (cb->u.disc.fn)
            cb->u.disc.fn(cb->u.disc.ctx);
        break;
    case CB_CQ_NOTIFY:
        cb->u.notify.fn(cb->u.notify.ctx, cb->u.notify.status);
        break;
    }
}

/*
 * Runs the engine's queued callbacks with its lock released. Called by the
 * engine's thread with its lock held; returns with it held. Callbacks run
 * back to back, and the locks are taken again only when the queue is empty
 * (or DRAIN_BATCH ran) to settle them all at once, the device lock only
 * for that: taking it after every callback cost a hand-off each with
 * several engines. A callback's object stays busy until its settlement, so
 * it cannot be destroyed in between (L13), and its close completion, the
 * last callback it has, is settled by the destroy.
 */
void ndk_drain_callbacks(struct ndk_engine *e)
{
    struct ndk_device *dev = e->dev;
    struct cb_ran_rec ran[DRAIN_BATCH];
    unsigned nran = 0;
    bool locked = true; /* the engine's lock */
    for (;;) {
        struct ndk_cb *cb = cbq_pop(e);
        if (!cb) {
            if (!locked) {
                ndk_engine_lock(e);
                locked = true;
            }
            if (!nran)
                break;
            /* Settling may queue more (a close that can finish now). */
            pthread_mutex_lock(&dev->lock);
            cb_settle(dev, ran, nran);
            pthread_mutex_unlock(&dev->lock);
            nran = 0;
            continue;
        }
        __atomic_add_fetch(&e->callbacks_run, 1, __ATOMIC_RELAXED);
        struct ndk_obj *obj = cb->obj;
        enum ndk_cb_kind kind = cb->kind;

        if (kind == CB_CONNECT_EVENT) {
            /* Decided under the engine's lock, the listener's (its
             * callbacks run here), by the hook of the object that queued
             * it (a listener that is closing or paused must not see the
             * request, 5.2.6). */
            if (!locked) {
                ndk_engine_lock(e);
                locked = true;
            }
            if (!cb->u.connect.admit(obj, cb->u.connect.connector)) {
                pthread_mutex_lock(&dev->lock);
                __atomic_sub_fetch(&obj->busy, 1, __ATOMIC_ACQ_REL);
                ndk_obj_maybe_finish(obj);
                cb_ran(dev, obj->ad);
                pthread_mutex_unlock(&dev->lock);
                continue;
            }
        }

        if (locked) {
            ndk_engine_unlock(e);
            locked = false;
        }
        cb_invoke(cb, obj, kind);
        ran[nran++] = (struct cb_ran_rec){obj, kind};
        if (nran == DRAIN_BATCH) {
            ndk_engine_lock(e);
            locked = true;
            pthread_mutex_lock(&dev->lock);
            cb_settle(dev, ran, nran);
            pthread_mutex_unlock(&dev->lock);
            nran = 0;
        }
    }
}

static void free_objects(struct ndk_obj *obj)
{
    while (obj) {
        struct ndk_obj *next = obj->free_next;
        obj->magic = 0;
        obj->ops->free(obj);
        obj = next;
    }
}

static void free_views(struct ndk_adapter_impl *v)
{
    while (v) {
        struct ndk_adapter_impl *next = v->view_next;
        ndk_verify_detach(v);
        free(v);
        v = next;
    }
}

/* Anything listed for freeing (read without the device lock: the heads
 * are stored atomically under it). */
static bool frees_listed(struct ndk_device *dev)
{
    return __atomic_load_n(&dev->free_list, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&dev->free_waiting, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&dev->dead_views, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&dev->dead_waiting, __ATOMIC_ACQUIRE);
}

/*
 * Called by each engine between loop iterations (its own lock held): the
 * engine's loop holds no fetched event now. What ndk_obj_destroy listed is
 * freed once every engine has been at this point after it was listed (two
 * rounds: listed, then waiting), so no engine can still hold an event
 * fetched for it. Engines that have not passed are woken, so an idle one
 * does not hold memory back. With nothing listed the device lock is not
 * taken and the pass not recorded: a pass counts only from after a
 * listing, so recording fewer is never wrong.
 */
void ndk_free_deferred(struct ndk_engine *e)
{
    struct ndk_device *dev = e->dev;
    loop_free_deferred(&e->loop);
    if (!frees_listed(dev))
        return;
    pthread_mutex_lock(&dev->lock);
    uint64_t all = dev->nengines >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << dev->nengines) - 1;
    dev->passed |= (uint64_t)1 << e->index;
    while (dev->passed == all && frees_listed(dev)) {
        free_objects(dev->free_waiting);
        free_views(dev->dead_waiting);
        __atomic_store_n(&dev->free_waiting, dev->free_list, __ATOMIC_RELEASE);
        __atomic_store_n(&dev->dead_waiting, dev->dead_views, __ATOMIC_RELEASE);
        __atomic_store_n(&dev->free_list, NULL, __ATOMIC_RELEASE);
        __atomic_store_n(&dev->dead_views, NULL, __ATOMIC_RELEASE);
        /* This engine holds no event now: it has passed the new round. */
        dev->passed = (uint64_t)1 << e->index;
    }
    if (dev->passed != all && frees_listed(dev)) {
        for (unsigned i = 0; i < dev->nengines; i++)
            if (!(dev->passed >> i & 1))
                loop_wake(&dev->engines[i].loop);
    }
    pthread_mutex_unlock(&dev->lock);
}

/* Frees every object and view waiting, at once (device lock held): only
 * where no engine can hold an event naming one, as when the device closes
 * after its engines stopped, or in the fuzzers, which open no socket. */
void ndk_free_all(struct ndk_device *dev)
{
    for (unsigned i = 0; i < dev->nengines; i++)
        loop_free_deferred(&dev->engines[i].loop);
    free_objects(dev->free_waiting);
    free_objects(dev->free_list);
    free_views(dev->dead_waiting);
    free_views(dev->dead_views);
    __atomic_store_n(&dev->free_waiting, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&dev->free_list, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&dev->dead_waiting, NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&dev->dead_views, NULL, __ATOMIC_RELEASE);
}
