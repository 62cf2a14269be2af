/* The adapter: opening by interface or address, NDK_ADAPTER_INFO, the
 * device and its views (with its test hooks, core.h), and blocking close
 * (the engines: engine.c). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "net/linger.h"
#include "net/sys.h"
#include "objects.h"
#include "verify/verify.h"

static NTSTATUS adapter_query_info(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo,
                                   ULONG *pBufferSize);
static NTSTATUS adapter_create_connector_fwd(NDK_ADAPTER *a, NDK_FN_CREATE_COMPLETION cc, PVOID ctx,
                                             NDK_CONNECTOR **pp);
static const NDK_ADAPTER_DISPATCH adapter_dispatch = {
    .NdkQueryExtension = ndk_query_extension,
    .NdkQueryAdapterInfo = adapter_query_info,
    .NdkCreateCq = ndk_create_cq,
    .NdkCreatePd = ndk_create_pd,
    .NdkCreateSharedEndpoint = ndk_create_shared_endpoint,
    .NdkCreateConnector = adapter_create_connector_fwd,
    .NdkCreateListener = ndk_create_listener,
    .NdkBuildLAM = ndk_build_lam,
    .NdkReleaseLAM = ndk_release_lam,
};

static NTSTATUS adapter_create_connector_fwd(NDK_ADAPTER *a, NDK_FN_CREATE_COMPLETION cc, PVOID ctx,
                                             NDK_CONNECTOR **pp)
{
    return ndk_create_connector(a, cc, ctx, pp);
}

static NTSTATUS adapter_query_info(NDK_ADAPTER *pNdkAdapter, NDK_ADAPTER_INFO *pInfo,
                                   ULONG *pBufferSize)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !pBufferSize)
        return STATUS_INVALID_PARAMETER;
    /* Consumers built against an older ndkinfo.h, whose structure ends at
     * AdapterFlags, pass its size (0x60): they get that leading part, which
     * is laid out the same, and the size written back says how much it is
     * (NdkQueryAdapterInfo: *pBufferSize out = bytes written). Anything
     * shorter is too small. */
    const ULONG old_size = (ULONG)offsetof(NDK_ADAPTER_INFO, RdmaTechnology);
    if (!pInfo || *pBufferSize < old_size) {
        *pBufferSize = sizeof(NDK_ADAPTER_INFO);
        return STATUS_BUFFER_TOO_SMALL;
    }
    NDK_ADAPTER_INFO info;
    ndk_adapter_fill_info(ad, &info);
    ULONG n = *pBufferSize < sizeof info ? old_size : (ULONG)sizeof info;
    memcpy(pInfo, &info, n);
    *pBufferSize = n;
    return STATUS_SUCCESS;
}

/* ---- platform entry points ---- */

NDK_API NTSTATUS ndk_list_adapters(NDK_ADAPTER_DESCRIPTION *pList, ULONG *pCount)
{
    if (!pCount || (!pList && *pCount))
        return STATUS_INVALID_PARAMETER;
    int n = ndk_if_list(pList, *pCount);
    if (n < 0)
        return STATUS_INSUFFICIENT_RESOURCES;
    ULONG cap = *pCount;
    *pCount = (ULONG)n;
    return (ULONG)n > cap ? STATUS_BUFFER_TOO_SMALL : STATUS_SUCCESS;
}

static bool version_supported(NDK_VERSION req, NDK_VERSION *out)
{
    /* V1: the major must be ours, the requested (lowest acceptable) minor at
     * most our highest; the adapter then runs at our highest minor. */
    if (req.Major == 1 && req.Minor <= 2) {
        out->Major = 1;
        out->Minor = 2;
        return true;
    }
    if (req.Major == 2 && req.Minor <= NDK_PROVIDER_MINOR_VERSION) {
        out->Major = 2;
        out->Minor = NDK_PROVIDER_MINOR_VERSION;
        return true;
    }
    return false;
}

static void resolve_options(NDK_OPEN_OPTIONS *o, const NDK_OPEN_OPTIONS *in)
{
    memset(o, 0, sizeof *o);
    if (in)
        memcpy(o, in, in->Size < sizeof *o ? in->Size : sizeof *o);
    o->Size = sizeof *o;
#define DEFAULT(field, v)                                                                    \
    if (!o->field)                                                                           \
    o->field = (v)
    DEFAULT(TcpConnectTimeoutMs, 20000);
    DEFAULT(MpaReplyTimeoutMs, 10000);
    DEFAULT(MpaRequestTimeoutMs, 5000);
    DEFAULT(RtrTimeoutMs, 10000);
    DEFAULT(DisconnectTimeoutMs, 10000);
    DEFAULT(ListenBacklog, 128);
    DEFAULT(MaxHalfOpen, 1024);
    DEFAULT(ReceiveGraceMs, 1000);
    DEFAULT(TcpUserTimeoutMs, 30000);
    DEFAULT(KeepAliveIdleSeconds, 10);
    DEFAULT(KeepAliveIntervalSeconds, 5);
    DEFAULT(KeepAliveProbes, 3);
    DEFAULT(VerifyConnectEventMs, 5000);
    DEFAULT(VerifyDeferMs, 1000);
    DEFAULT(EngineSpinMicroseconds, NDK_ENGINE_SPIN_US);
#undef DEFAULT
    if (o->Flags & NDK_OPEN_FLAG_NO_RECEIVE_GRACE)
        o->ReceiveGraceMs = 0;
    if (o->Flags & NDK_OPEN_FLAG_NO_ENGINE_SPIN)
        o->EngineSpinMicroseconds = 0;
    else if (o->EngineSpinMicroseconds > NDK_ENGINE_SPIN_MAX_US)
        o->EngineSpinMicroseconds = NDK_ENGINE_SPIN_MAX_US;
}

static void adapter_free(struct ndk_obj *obj)
{
    (void)obj;
}

static const struct ndk_obj_ops adapter_ops = {.free = adapter_free};

/* ---- the devices: one per interface, found by its index ---- */

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ndk_device *registry;

static struct ndk_device *registry_find(uint64_t netns, unsigned ifindex)
{
    for (struct ndk_device *d = registry; d; d = d->registry_next)
        if (d->netns == netns && d->ifindex == ifindex)
            return d;
    return NULL;
}

static void registry_remove(struct ndk_device *dev)
{
    for (struct ndk_device **pp = &registry; *pp; pp = &(*pp)->registry_next) {
        if (*pp == dev) {
            *pp = dev->registry_next;
            return;
        }
    }
}

static void device_free(struct ndk_device *dev)
{
    ndk_engines_free(dev);
    mem_table_free(dev->mem);
    pthread_cond_destroy(&dev->cb_done);
    pthread_mutex_destroy(&dev->live_lock);
    pthread_mutex_destroy(&dev->lock);
    free(dev);
}

/* A new device for the interface d, in the registry (registry lock held);
 * NULL when out of memory or threads. */
static struct ndk_device *device_new(const NDK_ADAPTER_DESCRIPTION *d, uint64_t netns,
                                     const NDK_OPEN_OPTIONS *opt)
{
    struct ndk_device *dev = calloc(1, sizeof *dev);
    if (!dev)
        return NULL;
    memcpy(dev->name, d->Name, sizeof dev->name);
    dev->ifindex = d->IfIndex;
    dev->netns = netns;
    dev->loopback = (d->Flags & NDK_ADAPTER_DESC_LOOPBACK) != 0;
    dev->naddrs = d->AddressCount;
    memcpy(dev->addrs, d->Addresses, sizeof(NDK_SOCKADDR) * d->AddressCount);
    pthread_mutex_init(&dev->lock, NULL);
    pthread_mutex_init(&dev->live_lock, NULL);
    pthread_cond_init(&dev->cb_done, NULL);
    dev->age_leases = ndk_qp_age_leases;
    dev->check_rx_waits = ndk_qp_check_rx_waits;
    dev->rx_stage = (struct rx_stage_cfg){NDK_RX_STAGE_THRESHOLD, NDK_RX_STAGE_SIZE};
    dev->mem = mem_table_new();
    if (!dev->mem || !ndk_engines_start(dev, opt->MaxEngines, opt->EngineSpinMicroseconds)) {
        device_free(dev);
        return NULL;
    }
    dev->registry_next = registry;
    registry = dev;
    return dev;
}

/* The interface NameOrAddress names (ndk.h): by name, or by one of its
 * addresses, every 127.0.0.0/8 address being the loopback interface's. On
 * success *d is its entry in *list, which the caller frees. */
static NTSTATUS find_interface(const char *NameOrAddress, NDK_ADAPTER_DESCRIPTION **listp,
                               NDK_ADAPTER_DESCRIPTION **dp)
{
    NDK_ADAPTER_DESCRIPTION *list = calloc(64, sizeof *list);
    if (!list)
        return STATUS_INSUFFICIENT_RESOURCES;
    int n = ndk_if_list(list, 64);
    if (n < 0) {
        /* No memory or no descriptor to list them: no "not found". */
        free(list);
        return ndk_status_from_errno(-n, NDK_PHASE_BIND);
    }
    NDK_SOCKADDR want;
    bool by_addr = ndk_sockaddr_parse(NameOrAddress, 0, &want);
    int found = -1;
    for (int i = 0; i < n && i < 64 && found < 0; i++) {
        if (!by_addr) {
            if (strcmp(list[i].Name, NameOrAddress) == 0)
                found = i;
            continue;
        }
        for (ULONG k = 0; k < list[i].AddressCount; k++)
            if (ndk_sockaddr_same_ip(&list[i].Addresses[k], &want))
                found = i;
        if ((list[i].Flags & NDK_ADAPTER_DESC_LOOPBACK) && want.sa.sa_family == AF_INET &&
            (ntohl(want.in4.sin_addr.s_addr) >> 24) == 127)
            found = i;
    }
    if (found < 0) {
        free(list);
        return STATUS_NOT_FOUND;
    }
    NDK_ADAPTER_DESCRIPTION *d = &list[found];
    if (!(d->Flags & NDK_ADAPTER_DESC_UP) || d->AddressCount == 0) {
        free(list);
        return NDIS_STATUS_ADAPTER_NOT_READY;
    }
    *listp = list;
    *dp = d;
    return STATUS_SUCCESS;
}

NDK_API NTSTATUS ndk_open_adapter(const char *NameOrAddress, NDK_VERSION Version,
                                const NDK_OPEN_OPTIONS *pOptions, NDK_ADAPTER **ppAdapter)
{
    if (!NameOrAddress || !ppAdapter)
        return STATUS_INVALID_PARAMETER;
    if (pOptions && pOptions->Size < offsetof(NDK_OPEN_OPTIONS, Flags) + sizeof(ULONG))
        return STATUS_INVALID_PARAMETER;
    ndk_log_init();

    NDK_VERSION ver;
    if (!version_supported(Version, &ver))
        return NDIS_STATUS_BAD_VERSION;

    NDK_ADAPTER_DESCRIPTION *list = NULL, *d = NULL;
    NTSTATUS st = find_interface(NameOrAddress, &list, &d);
    if (st != STATUS_SUCCESS)
        return st;

    struct ndk_adapter_impl *ad = calloc(1, sizeof *ad);
    if (!ad) {
        free(list);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    ad->version = ver;
    resolve_options(&ad->opt, pOptions);
    ad->busy_poll = (ad->opt.Flags & NDK_OPEN_FLAG_BUSY_POLL) != 0;
    pthread_mutex_lock(&registry_lock);
    uint64_t netns = ndk_netns_id();
    struct ndk_device *dev = registry_find(netns, d->IfIndex);
    if (!dev)
        dev = device_new(d, netns, &ad->opt);
    free(list);
    if (!dev) {
        pthread_mutex_unlock(&registry_lock);
        free(ad);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    dev->open_views++;
    ad->dev = dev;
    pthread_mutex_lock(&dev->lock);
    ndk_obj_init(&ad->obj, ad, NdkObjectTypeAdapter, &adapter_dispatch, &adapter_ops);
    ad->view_next = dev->views;
    dev->views = ad;
    pthread_mutex_unlock(&dev->lock);
    pthread_mutex_unlock(&registry_lock);
    /* Without memory for the verifier the view still works, unchecked. */
    if (ndk_verify_wanted(&ad->opt) && !ndk_verify_attach(ad))
        NDK_LOG(NDK_LL_ERROR, NDK_LC_VERIFIER, &ad->obj,
                "no memory for the NDK verifier: adapter %s is not verified", dev->name);
    ndk_stat_adapter_opened(ad);
    *ppAdapter = (NDK_ADAPTER *)&ad->obj.pub;
    return STATUS_SUCCESS;
}

bool ndk_test_hooks_set(NDK_ADAPTER *pAdapter, const struct ndk_test_hooks *hooks)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return false;
    const struct ndk_test_hooks none = {0};
    const struct ndk_test_hooks *h = hooks ? hooks : &none;
    struct ndk_test_hooks *to = &ad->dev->test_hooks;
    __atomic_store_n(&to->qp_input, h->qp_input, __ATOMIC_RELEASE);
    __atomic_store_n(&to->shm_failing, h->shm_failing, __ATOMIC_RELEASE);
    __atomic_store_n(&to->shm_posted, h->shm_posted, __ATOMIC_RELEASE);
    __atomic_store_n(&to->shm_answered, h->shm_answered, __ATOMIC_RELEASE);
    __atomic_store_n(&to->shm_pass, h->shm_pass, __ATOMIC_RELEASE);
    __atomic_store_n(&to->shm_peer_ended, h->shm_peer_ended, __ATOMIC_RELEASE);
    return true;
}

bool ndk_test_rx_stage_set(NDK_ADAPTER *pAdapter, size_t threshold, size_t size)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return false;
    __atomic_store_n(&ad->dev->rx_stage.threshold, threshold, __ATOMIC_RELAXED);
    __atomic_store_n(&ad->dev->rx_stage.size, size, __ATOMIC_RELAXED);
    return true;
}

NDK_API ULONG ndk_adapter_object_count(NDK_ADAPTER *pAdapter, NDK_OBJECT_TYPE Type)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return 0;
    ULONG n = 0;
    pthread_mutex_lock(&ad->dev->lock);
    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        /* A pending close whose completion is queued or running (nothing
         * holds the object any more) counts as closed. */
        bool closed = o->destroyed || (o->close_pending && o->successors == 0 &&
                                       __atomic_load_n(&o->busy, __ATOMIC_ACQUIRE) == 0);
        n += !closed && (Type == NdkObjectTypeUndefined || o->type == Type);
    }
    pthread_mutex_unlock(&ad->dev->lock);
    return n;
}

/* Tears down, without callbacks, every object of the view (newest first:
 * successors go before what they depend on). An object another view's
 * objects still depend on stays until they let go of it, then finishes
 * silently; the view is freed with its last object. Every engine's lock
 * and the device lock held. */
static void view_teardown(struct ndk_adapter_impl *ad)
{
    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        o->closing = true;
        o->close_pending = false; /* no close completion from now on */
    }
    bool progress = true;
    while (progress) {
        progress = false;
        for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
            if (o->successors == 0) {
                ndk_obj_destroy(o); /* unlinks it; may release others */
                progress = true;
                break;
            }
        }
    }
    /* What is left is held by another view's objects: closed as by its
     * own close (no more events), finishing silently once let go. */
    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        if (o->ops->close_engine)
            o->ops->close_engine(o);
        if (o->ops->close_start)
            o->ops->close_start(o);
        o->close_pending = true;
        o->close_cb.u.req.fn = NULL;
    }
}

/* Drops the callbacks still queued on engine e for objects of the view (a
 * teardown may have queued some). Device lock held. */
static void view_purge_callbacks(struct ndk_engine *e, struct ndk_adapter_impl *ad)
{
    pthread_mutex_lock(&e->cbq_lock);
    struct ndk_cb **pp = &e->cbq_head, *last = NULL;
    while (*pp) {
        struct ndk_cb *cb = *pp;
        if (cb->obj->ad == ad && cb != &cb->obj->close_cb) {
            *pp = cb->next;
            cb->next = NULL;
            cb->queued = false;
            __atomic_sub_fetch(&ad->callbacks, 1, __ATOMIC_ACQ_REL);
            if (!cb->obj->destroyed) /* one another view still holds */
                __atomic_sub_fetch(&cb->obj->busy, 1, __ATOMIC_ACQ_REL);
        } else {
            last = cb;
            pp = &cb->next;
        }
    }
    e->cbq_tail = last;
    pthread_mutex_unlock(&e->cbq_lock);
}

/* Closes one view of a device that stays open for others. */
static void view_close(struct ndk_adapter_impl *ad)
{
    struct ndk_device *dev = ad->dev;
    pthread_mutex_lock(&dev->lock);
    ad->obj.magic = 0; /* no new use through this view */
    for (;;) {
        /* Every callback already queued for its objects is delivered
         * first, as when the last view closes (ndk_close_adapter in
         * ndk.h); the engines settle them under their own lock, so none
         * is held while waiting. */
        while (__atomic_load_n(&ad->callbacks, __ATOMIC_ACQUIRE))
            pthread_cond_wait(&dev->cb_done, &dev->lock);
        /* The teardown ends connectors and listeners on every engine:
         * their engines' locks come first (docs/architecture.md, Threads
         * and locks). */
        pthread_mutex_unlock(&dev->lock);
        ndk_engines_lock_from(dev, 0);
        pthread_mutex_lock(&dev->lock);
        if (!__atomic_load_n(&ad->callbacks, __ATOMIC_ACQUIRE))
            break;
        ndk_engines_unlock_from(dev, 0);
    }
    view_teardown(ad);
    for (unsigned i = 0; i < dev->nengines; i++)
        view_purge_callbacks(&dev->engines[i], ad);
    ad->closed = true;
    if (!ad->objects)
        ndk_view_retire(ad);
    ndk_kick(ndk_dev_engine0(dev));
    pthread_mutex_unlock(&dev->lock);
    ndk_engines_unlock_from(dev, 0);
}

/* The last view closed: the engines end, and every object left (the
 * view's, and those of closed views that others held) goes. */
static void device_close(struct ndk_device *dev)
{
    ndk_engines_stop(dev);

    /* Single-threaded from here. Objects the consumer never closed are torn
     * down without callbacks. */
    pthread_mutex_lock(&dev->lock);
    for (struct ndk_adapter_impl *ad = dev->views; ad; ad = ad->view_next) {
        while (ad->objects) {
            struct ndk_obj *o = ad->objects;
            ad->objects = o->all_next;
            if (ad->objects)
                ad->objects->all_prev = NULL;
            o->all_next = o->all_prev = NULL;
            if (!o->destroyed) {
                o->destroyed = true;
                if (o->ops->destroy)
                    o->ops->destroy(o);
            }
            o->free_next = dev->free_list;
            __atomic_store_n(&dev->free_list, o, __ATOMIC_RELAXED); /* engines stopped */
        }
    }
    while (dev->views) {
        struct ndk_adapter_impl *ad = dev->views;
        dev->views = ad->view_next;
        ad->obj.magic = 0;
        ad->view_next = dev->dead_views;
        __atomic_store_n(&dev->dead_views, ad, __ATOMIC_RELAXED);
    }
    for (unsigned i = 0; i < dev->nengines; i++)
        dev->engines[i].cbq_head = dev->engines[i].cbq_tail = NULL;
    for (unsigned i = 0; i < dev->nengines; i++)
        ndk_linger_flush(&dev->engines[i].lingers);
    ndk_free_all(dev);
    pthread_mutex_unlock(&dev->lock);
    device_free(dev);
}

NDK_API VOID ndk_close_adapter(NDK_ADAPTER *pAdapter)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return;
    struct ndk_device *dev = ad->dev;
    if (ndk_on_progress_thread(ad)) {
        /* L12: never from a callback; joining ourselves would deadlock. */
        NDK_LOG(NDK_LL_ERROR, NDK_LC_API, &ad->obj, "ndk_close_adapter called from a callback: ignored");
        return;
    }
    /* The verifier reports what this view left open (rule L17); its
     * records go when the view is freed (obj.c, ndk_free_deferred). */
    if (ad->verifier)
        ndk_verify_adapter_closing(ad);
    ndk_stat_adapter_closing(ad);
    /* The last view takes the device out of the registry: a later open
     * of the interface makes a new one. */
    pthread_mutex_lock(&registry_lock);
    bool last = --dev->open_views == 0;
    if (last)
        registry_remove(dev);
    pthread_mutex_unlock(&registry_lock);
    if (last)
        device_close(dev);
    else
        view_close(ad);
}
