/* The verifier's object records: attaching to an adapter and its objects,
 * the generic checks of every call (L5, L9), close, the watchdog of the
 * time-based checks, and the adapter's close (L17). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "net/loop.h"
#include "net/sys.h"
#include "net/timer.h"
#include "verify/vcore.h"
#include "wire/crc32c.h"

#define WATCHDOG_PERIOD_MS 100

bool vmapped(uintptr_t p, size_t len)
{
    if (len == 0)
        return true;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = p & ~(pg - 1), hi = (p + len + pg - 1) & ~(pg - 1);
    unsigned char vec[1024];
    while (lo < hi) {
        size_t n = (hi - lo) / pg < sizeof vec ? (size_t)((hi - lo) / pg) : sizeof vec;
        /* ENOMEM: part of the range is not mapped at all. */
        if (mincore((void *)lo, n * pg, vec) != 0 && errno == ENOMEM)
            return false;
        lo += n * pg;
    }
    return true;
}

/* Reads memory through the kernel, so a range that was unmapped or
 * protected behind our back is an error, not a crash. */
static bool read_self(uintptr_t p, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)p, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return true;
    if (n < 0 && (errno == ENOSYS || errno == EPERM) && vmapped(p, len)) {
        memcpy(buf, (const void *)p, len); /* the call is not allowed here */
        return true;
    }
    return false;
}

bool vsum(const NDK_SGE *sge, ULONG nsge, uint32_t *out)
{
    uint32_t reg = crc32c_init();
    unsigned char buf[16384];
    for (ULONG i = 0; i < nsge; i++) {
        uintptr_t p = (uintptr_t)sge[i].VirtualAddress;
        size_t left = sge[i].Length;
        while (left) {
            size_t n = left < sizeof buf ? left : sizeof buf;
            if (!read_self(p, buf, n))
                return false;
            reg = crc32c_update(reg, buf, n);
            p += n;
            left -= n;
        }
    }
    *out = crc32c_final(reg);
    return true;
}

static const void *checking_table(NDK_OBJECT_TYPE type)
{
#define T(tbl) return &tbl
    switch (type) {
    case NdkObjectTypeAdapter: T(vadapter_dispatch);
    case NdkObjectTypeCq: T(vcq_dispatch);
    case NdkObjectTypePd: T(vpd_dispatch);
    case NdkObjectTypeMr: T(vmr_dispatch);
    case NdkObjectTypeMw: T(vmw_dispatch);
    case NdkObjectTypeSrq: T(vsrq_dispatch);
    case NdkObjectTypeQp: T(vqp_dispatch);
    case NdkObjectTypeConnector: T(vconnector_dispatch);
    case NdkObjectTypeListener: T(vlistener_dispatch);
    case NdkObjectTypeSharedEndpoint: T(vsep_dispatch);
    default: return NULL;
    }
#undef T
}

struct vobj *vobj_new(struct ndk_verifier *v, NDK_OBJECT_TYPE type)
{
    const void *tbl = checking_table(type);
    struct vobj *o = tbl ? calloc(1, sizeof *o) : NULL;
    if (!o)
        return NULL;
    o->table = tbl;
    o->type = type;
    o->v = v;
    o->state = VS_OPEN;
    return o;
}

bool vobj_bind(struct vobj *o, void *pub)
{
    struct ndk_verifier *v = o->v;
    struct ndk_obj *obj = ndk_obj_from_pub(pub, o->type);
    if (!obj) {
        free(o);
        return false;
    }
    o->pub = pub;
    o->real = ((struct ndk_pub *)pub)->Dispatch;
    pthread_mutex_lock(&v->lock);
    o->next = v->objs;
    if (v->objs)
        v->objs->prev = o;
    v->objs = o;
    pthread_mutex_unlock(&v->lock);
    obj->verify = o;
    ((struct ndk_pub *)pub)->Dispatch = o->table;
    return true;
}

struct vobj *vobj_attach(struct ndk_verifier *v, void *pub, NDK_OBJECT_TYPE type)
{
    struct vobj *o = vobj_new(v, type);
    return o && vobj_bind(o, pub) ? o : NULL;
}

bool vobj_enter(struct vobj *o, const char *call)
{
    __atomic_add_fetch(&o->calls, 1, __ATOMIC_ACQ_REL);
    enum vstate st = __atomic_load_n(&o->state, __ATOMIC_ACQUIRE);
    if (st == VS_OPEN)
        return true;
    __atomic_sub_fetch(&o->calls, 1, __ATOMIC_ACQ_REL);
    vreport(o, VR_L9, call, "make no call on an object once its close was called",
            "its close %s; the call fails with STATUS_INVALID_DEVICE_STATE",
            st == VS_CLOSING ? "is pending" : "completed");
    return false;
}

void vobj_leave(struct vobj *o)
{
    __atomic_sub_fetch(&o->calls, 1, __ATOMIC_ACQ_REL);
}

NTSTATUS vobj_query_extension(NDK_OBJECT_HEADER *h, GUID *id, NDK_VERSION ver,
                              NDK_EXTENSION_INTERFACE *out)
{
    struct vobj *o = vobj_of(h);
    if (!vobj_enter(o, "NdkQueryExtension"))
        return STATUS_INVALID_DEVICE_STATE;
    /* Every table has NdkQueryExtension second, except the adapter's. */
    NTSTATUS st = ((const NDK_FN_QUERY_EXTENSION_INTERFACE *)o->real)[1](h, id, ver, out);
    vobj_leave(o);
    return st;
}

/* Lock held: the object is gone; its record goes to the quarantine. */
static void vobj_closed(struct vobj *o)
{
    struct ndk_verifier *v = o->v;
    if (o->state == VS_CLOSED)
        return;
    __atomic_store_n(&o->state, VS_CLOSED, __ATOMIC_RELEASE);
    if (o->type == NdkObjectTypeQp)
        vqp_closed(o);
    else if (o->type == NdkObjectTypeConnector)
        vconn_closed(o);
    if (o->prev)
        o->prev->next = o->next;
    else
        v->objs = o->next;
    if (o->next)
        o->next->prev = o->prev;
    o->next = NULL;
    o->prev = v->closed_tail;
    if (v->closed_tail)
        v->closed_tail->next = o;
    else
        v->closed_head = o;
    v->closed_tail = o;
    if (++v->closed > VOBJ_QUARANTINE) {
        struct vobj *old = v->closed_head;
        v->closed_head = old->next;
        v->closed_head->prev = NULL;
        v->closed--;
        free(old);
    }
}

static void vclose_done(void *ctx)
{
    struct vobj *o = ctx;
    NDK_FN_CLOSE_COMPLETION fn = o->close_fn;
    void *c = o->close_ctx;
    pthread_mutex_lock(&o->v->lock);
    vobj_closed(o);
    pthread_mutex_unlock(&o->v->lock);
    if (fn)
        fn(c);
}

NTSTATUS vobj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION fn, void *ctx)
{
    struct vobj *o = vobj_of(hdr);
    const char *call = "NdkCloseObject";
    struct ndk_verifier *v = o->v;
    pthread_mutex_lock(&v->lock);
    enum vstate state = o->state;
    if (state != VS_OPEN) {
        pthread_mutex_unlock(&v->lock);
        vreport(o, VR_L9, call, "close an object once",
                "a second close (the first %s); it fails with STATUS_INVALID_DEVICE_STATE",
                state == VS_CLOSING ? "is pending" : "completed");
        return STATUS_INVALID_DEVICE_STATE;
    }
    /* L5's exception: from inside a completion of a call still running
     * (libndk runs callbacks on the adapter's progress thread). */
    int running = ndk_on_progress_thread(v->ad) ? 0 : __atomic_load_n(&o->calls, __ATOMIC_ACQUIRE);
    if (running)
        vreport(o, VR_L5, call,
                "wait until the object's other calls returned before closing it",
                "%d call(s) on it still running in other threads", running);
    __atomic_store_n(&o->state, VS_CLOSING, __ATOMIC_RELEASE);
    o->close_fn = fn;
    o->close_ctx = ctx;
    if (o->type == NdkObjectTypeMr)
        vmr_closing(o, call);
    pthread_mutex_unlock(&v->lock);
    /* Every table has its close first (ndkpi.h). */
    NDK_FN_CLOSE_OBJECT real = *(const NDK_FN_CLOSE_OBJECT *)o->real;
    NTSTATUS st = real(hdr, vclose_done, o);
    if (st != STATUS_PENDING) {
        pthread_mutex_lock(&v->lock);
        vobj_closed(o);
        pthread_mutex_unlock(&v->lock);
    }
    return st;
}

static void *watchdog_main(void *arg)
{
    struct ndk_verifier *v = arg;
    pthread_mutex_lock(&v->lock);
    while (!v->stop) {
        uint64_t wake = ndk_mono_ns() + WATCHDOG_PERIOD_MS * 1000000u;
        struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000u), .tv_nsec = (long)(wake % 1000000000u)};
        pthread_cond_timedwait(&v->cond, &v->lock, &ts);
        if (v->stop)
            break;
        uint64_t now = loop_now_ms();
        for (struct vobj *o = v->objs; o; o = o->next) {
            if (o->state != VS_OPEN)
                continue;
            if (o->type == NdkObjectTypeQp)
                vqp_watch(o, now);
            else if (o->type == NdkObjectTypeConnector)
                vconn_watch(o, now);
            else if (o->type == NdkObjectTypeMr)
                vmr_watch(o);
        }
    }
    pthread_mutex_unlock(&v->lock);
    return NULL;
}

bool ndk_verify_attach(struct ndk_adapter_impl *ad)
{
    struct ndk_verifier *v = calloc(1, sizeof *v);
    if (!v)
        return false;
    v->ad = ad;
    ad->verifier = v;
    pthread_mutex_init(&v->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&v->cond, &ca);
    pthread_condattr_destroy(&ca);
    ndk_adapter_fill_info(ad, &v->info);
    v->connect_event_ms = ad->opt.VerifyConnectEventMs;
    v->defer_ms = ad->opt.VerifyDeferMs;
    v->abort_on_report = vabort_wanted(&ad->opt);
    v->adapter = vobj_attach(v, &ad->obj.pub, NdkObjectTypeAdapter);
    if (!v->adapter || !ndk_thread_start(&v->watchdog, watchdog_main, v)) {
        if (v->adapter)
            ad->obj.pub.Dispatch = v->adapter->real;
        ad->obj.verify = NULL;
        ndk_verify_detach(ad);
        return false;
    }
    v->watchdog_started = true;
    return true;
}

void ndk_verify_adapter_closing(struct ndk_adapter_impl *ad)
{
    struct ndk_verifier *v = ad->verifier;
    pthread_mutex_lock(&v->lock);
    v->stop = true;
    pthread_cond_signal(&v->cond);
    unsigned open[NdkObjectTypeMax] = {0}, total = 0;
    for (struct vobj *o = v->objs; o; o = o->next)
        if (o->state == VS_OPEN && o->type != NdkObjectTypeAdapter && o->type < NdkObjectTypeMax) {
            open[o->type]++;
            total++;
        }
    pthread_mutex_unlock(&v->lock);
    if (v->watchdog_started)
        ndk_thread_join(v->watchdog);
    v->watchdog_started = false;
    if (!total)
        return;
    char list[256] = "";
    size_t len = 0;
    for (int t = 0; t < NdkObjectTypeMax; t++)
        if (open[t] && len < sizeof list)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%u %s", len ? ", " : "",
                                    open[t], vtype_name((NDK_OBJECT_TYPE)t));
    vreport(v->adapter, VR_L17, "ndk_close_adapter",
            "close every object (and wait for its close completion) before closing the adapter",
            "%u object(s) never closed (%s): torn down without callbacks", total, list);
}

void ndk_verify_detach(struct ndk_adapter_impl *ad)
{
    struct ndk_verifier *v = ad->verifier;
    if (!v)
        return;
    if (v->watchdog_started)
        ndk_verify_adapter_closing(ad);
    /* The QPs' records first, while every record they point at exists. */
    struct vobj *lists[2] = {v->objs, v->closed_head};
    for (int i = 0; i < 2; i++)
        for (struct vobj *o = lists[i]; o; o = o->next)
            if (o->type == NdkObjectTypeQp)
                vqp_closed(o);
    for (int i = 0; i < 2; i++)
        while (lists[i]) {
            struct vobj *o = lists[i];
            lists[i] = o->next;
            free(o);
        }
    while (v->lams) {
        struct vlam *l = v->lams;
        v->lams = l->next;
        free(l);
    }
    pthread_cond_destroy(&v->cond);
    pthread_mutex_destroy(&v->lock);
    free(v);
    ad->verifier = NULL;
}
