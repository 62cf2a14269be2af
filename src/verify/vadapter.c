/* The verifier's adapter table: creates attach a record to each new object
 * (and wrap the callbacks given to them); LAMs are recorded for the memory
 * checks (M2, M3). Attaching the verifier to a view, and its watchdog of the
 * time-based checks. */
#include <stdlib.h>
#include <unistd.h>

#include "net/loop.h"
#include "net/sys.h"
#include "net/timer.h"
#include "verify/vcore.h"

#define WATCHDOG_PERIOD_MS 100

#define ADREAL(o) VREAL(o, NDK_ADAPTER_DISPATCH)

static NTSTATUS va_query_extension(NDK_OBJECT_HEADER *h, GUID *id, NDK_VERSION ver,
                                   NDK_EXTENSION_INTERFACE *out)
{
    return ADREAL(vobj_of(h))->NdkQueryExtension(h, id, ver, out);
}

static NTSTATUS va_query_info(NDK_ADAPTER *a, NDK_ADAPTER_INFO *info, ULONG *size)
{
    return ADREAL(vobj_of(a))->NdkQueryAdapterInfo(a, info, size);
}

/* CQ notifications: an overflow is reported with the sizes (C8). */
static void vcq_notify(void *ctx, NTSTATUS status)
{
    struct vobj *o = ctx;
    if (status == STATUS_BUFFER_OVERFLOW) {
        struct ndk_verifier *v = o->v;
        unsigned owed = 0;
        pthread_mutex_lock(&v->lock);
        for (struct vobj *q = v->objs; q; q = q->next) {
            if (q->type != NdkObjectTypeQp)
                continue;
            if (q->u.qp.icq == o)
                owed += q->u.qp.iq.count;
            if (q->u.qp.rcq == o)
                owed += q->u.qp.srq ? 0 : q->u.qp.rq.count;
        }
        pthread_mutex_unlock(&v->lock);
        vreport(o, VR_C8, "NdkCqNotificationCallback",
                "create the CQ (or NdkResizeCq it) at least as deep as the queues that complete "
                "into it, and retrieve its completions before they pile up",
                "the CQ overflowed: depth %lu, %u request(s) outstanding on its queues "
                "(signalled or not); its QPs fail with a local error",
                (unsigned long)__atomic_load_n(&o->u.cq.depth, __ATOMIC_RELAXED), owed);
    }
    if (o->u.cq.notify_fn)
        o->u.cq.notify_fn(o->u.cq.notify_ctx, status);
}

static NTSTATUS va_create_cq(NDK_ADAPTER *a, ULONG depth, NDK_FN_CQ_NOTIFICATION_CALLBACK fn,
                             PVOID fctx, GROUP_AFFINITY *aff, NDK_FN_CREATE_COMPLETION cc,
                             PVOID ctx, NDK_CQ **pp)
{
    struct vobj *ao = vobj_of(a);
    struct vobj *o = vobj_new(ao->v, &vcq_type);
    if (!o)
        return ADREAL(ao)->NdkCreateCq(a, depth, fn, fctx, aff, cc, ctx, pp);
    o->u.cq.notify_fn = fn;
    o->u.cq.notify_ctx = fctx;
    o->u.cq.depth = depth;
    NTSTATUS st = ADREAL(ao)->NdkCreateCq(a, depth, fn ? vcq_notify : NULL, o, aff, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_bind(o, *pp);
    else
        free(o);
    return st;
}

static NTSTATUS va_create_pd(NDK_ADAPTER *a, NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_PD **pp)
{
    struct vobj *ao = vobj_of(a);
    NTSTATUS st = ADREAL(ao)->NdkCreatePd(a, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_attach(ao->v, *pp, &vpd_type);
    return st;
}

static NTSTATUS va_create_sep(NDK_ADAPTER *a, CONST PSOCKADDR addr, ULONG len,
                              NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_SHARED_ENDPOINT **pp)
{
    struct vobj *ao = vobj_of(a);
    NTSTATUS st = ADREAL(ao)->NdkCreateSharedEndpoint(a, addr, len, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_attach(ao->v, *pp, &vsep_type);
    return st;
}

static NTSTATUS va_create_connector(NDK_ADAPTER *a, NDK_FN_CREATE_COMPLETION cc, PVOID ctx,
                                    NDK_CONNECTOR **pp)
{
    struct vobj *ao = vobj_of(a);
    NTSTATUS st = ADREAL(ao)->NdkCreateConnector(a, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_attach(ao->v, *pp, &vconnector_type);
    return st;
}

static NTSTATUS va_create_listener(NDK_ADAPTER *a, NDK_FN_CONNECT_EVENT_CALLBACK fn, PVOID fctx,
                                   NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_LISTENER **pp)
{
    struct vobj *ao = vobj_of(a);
    struct vobj *o = vobj_new(ao->v, &vlistener_type);
    if (!o)
        return ADREAL(ao)->NdkCreateListener(a, fn, fctx, cc, ctx, pp);
    o->u.listener.event_fn = fn;
    o->u.listener.event_ctx = fctx;
    NTSTATUS st = ADREAL(ao)->NdkCreateListener(a, fn ? vlistener_event : NULL, o, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_bind(o, *pp);
    else
        free(o);
    return st;
}

static NTSTATUS va_build_lam(NDK_ADAPTER *a, MDL *mdl, SIZE_T len, NDK_FN_REQUEST_COMPLETION fn,
                             PVOID ctx, NDK_LOGICAL_ADDRESS_MAPPING *lam, ULONG *size, ULONG *fbo)
{
    struct vobj *ao = vobj_of(a);
    NTSTATUS st = ADREAL(ao)->NdkBuildLAM(a, mdl, len, fn, ctx, lam, size, fbo);
    /* libndk builds LAMs inline (never STATUS_PENDING). */
    if (st != STATUS_SUCCESS || !lam || lam->AdapterPageCount == 0)
        return st;
    struct vlam *l = calloc(1, sizeof *l);
    if (!l)
        return st; /* unchecked */
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    l->lam = lam;
    l->lo = (uintptr_t)lam->AdapterPageArray[0].QuadPart;
    l->hi = (uintptr_t)lam->AdapterPageArray[lam->AdapterPageCount - 1].QuadPart + pg;
    pthread_mutex_lock(&ao->v->lock);
    l->next = ao->v->lams;
    ao->v->lams = l;
    pthread_mutex_unlock(&ao->v->lock);
    return st;
}

/* An outstanding fast registration of the pages of l (not silent: the
 * verifier cannot know when a silent one finished). Lock held. */
static struct vreq *lam_user(struct ndk_verifier *v, const struct vlam *l, struct vobj **qp_out)
{
    for (struct vobj *q = v->objs; q; q = q->next) {
        if (q->type != NdkObjectTypeQp)
            continue;
        for (struct vreq *r = q->u.qp.iq.head; r; r = r->next) {
            if (r->silent)
                continue;
            if (r->lam == l) {
                *qp_out = q;
                return r;
            }
        }
    }
    return NULL;
}

static VOID va_release_lam(NDK_ADAPTER *a, NDK_LOGICAL_ADDRESS_MAPPING *lam)
{
    struct vobj *ao = vobj_of(a);
    struct ndk_verifier *v = ao->v;
    pthread_mutex_lock(&v->lock);
    struct vlam **pl = &v->lams;
    while (*pl && (*pl)->lam != lam)
        pl = &(*pl)->next;
    struct vlam *l = *pl;
    struct vobj *q = NULL;
    struct vreq *r = NULL;
    if (l) {
        *pl = l->next;
        r = lam_user(v, l, &q);
        if (r)
            vreport(q, VR_M2, "NdkReleaseLAM",
                    "retrieve the completions of the requests that use a LAM's pages before "
                    "releasing it",
                    "LAM %p released while a %s (RequestContext %p) that uses its pages has not "
                    "completed; the fast registrations over it map nothing from now on",
                    (void *)lam, r->call, r->ctx);
        for (struct vobj *q2 = v->objs; q2; q2 = q2->next)
            if (q2->type == NdkObjectTypeQp)
                for (struct vreq *x = q2->u.qp.iq.head; x; x = x->next)
                    if (x->lam == l)
                        x->lam = NULL;
    }
    pthread_mutex_unlock(&v->lock);
    free(l);
    ADREAL(ao)->NdkReleaseLAM(a, lam);
}

const NDK_ADAPTER_DISPATCH vadapter_dispatch = {
    .NdkQueryExtension = va_query_extension,
    .NdkQueryAdapterInfo = va_query_info,
    .NdkCreateCq = va_create_cq,
    .NdkCreatePd = va_create_pd,
    .NdkCreateSharedEndpoint = va_create_sep,
    .NdkCreateConnector = va_create_connector,
    .NdkCreateListener = va_create_listener,
    .NdkBuildLAM = va_build_lam,
    .NdkReleaseLAM = va_release_lam,
};

const struct vtype vadapter_type = {NdkObjectTypeAdapter, &vadapter_dispatch, NULL, NULL, NULL};

static void *watchdog_main(void *arg)
{
    struct ndk_verifier *v = arg;
    pthread_mutex_lock(&v->lock);
    while (!v->stop) {
        ndk_cond_wait_until(&v->cond, &v->lock, ndk_mono_ns() + WATCHDOG_PERIOD_MS * 1000000u);
        if (v->stop)
            break;
        uint64_t now = loop_now_ms();
        for (struct vobj *o = v->objs; o; o = o->next) {
            if (o->state != VS_OPEN)
                continue;
            if (o->vt->watch)
                o->vt->watch(o, now);
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
    ndk_cond_init_monotonic(&v->cond);
    ndk_adapter_fill_info(ad, &v->info);
    v->connect_event_ms = ad->opt.VerifyConnectEventMs;
    v->defer_ms = ad->opt.VerifyDeferMs;
    v->abort_on_report = vabort_wanted(&ad->opt);
    v->adapter = vobj_attach(v, &ad->obj.pub, &vadapter_type);
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
