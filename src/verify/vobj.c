/* The verifier's object records: attaching to an object, the generic
 * checks of every call (L5, L9), and close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlist.h"
#include "net/memprobe.h"
#include "verify/vcore.h"
#include "wire/crc32c.h"

bool vsum(const NDK_SGE *sge, ULONG nsge, uint32_t *out)
{
    uint32_t reg = crc32c_init();
    unsigned char buf[16384];
    for (ULONG i = 0; i < nsge; i++) {
        uintptr_t p = (uintptr_t)sge[i].VirtualAddress;
        size_t left = sge[i].Length;
        while (left) {
            size_t n = left < sizeof buf ? left : sizeof buf;
            if (!ndk_mem_read(p, buf, n))
                return false;
            reg = crc32c_update(reg, buf, n);
            p += n;
            left -= n;
        }
    }
    *out = crc32c_final(reg);
    return true;
}

struct vobj *vobj_new(struct ndk_verifier *v, const struct vtype *t)
{
    struct vobj *o = calloc(1, sizeof *o);
    if (!o)
        return NULL;
    o->vt = t;
    o->type = t->type;
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
    ((struct ndk_pub *)pub)->Dispatch = o->vt->table;
    return true;
}

struct vobj *vobj_attach(struct ndk_verifier *v, void *pub, const struct vtype *t)
{
    struct vobj *o = vobj_new(v, t);
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
    /* Every table has NdkQueryExtension second, except the adapter's. */
    VFORWARD(o, "NdkQueryExtension", STATUS_INVALID_DEVICE_STATE,
             ((const NDK_FN_QUERY_EXTENSION_INTERFACE *)o->real)[1](h, id, ver, out));
}

/* Lock held: the object is gone; its record goes to the quarantine. */
static void vobj_closed(struct vobj *o)
{
    struct ndk_verifier *v = o->v;
    if (o->state == VS_CLOSED)
        return;
    __atomic_store_n(&o->state, VS_CLOSED, __ATOMIC_RELEASE);
    if (o->vt->closed)
        o->vt->closed(o);
    DLIST_UNLINK(v->objs, o, prev, next);
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
    if (o->vt->closing)
        o->vt->closing(o, call);
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
