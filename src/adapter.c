/* The adapter: opening by interface or address, NDK_ADAPTER_INFO, the
 * progress thread, and blocking close. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "net/linger.h"
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

struct ndk_adapter_impl *ndk_adapter_from_pub(NDK_ADAPTER *pub)
{
    struct ndk_obj *o = ndk_obj_from_pub(pub, NdkObjectTypeAdapter);
    return o ? container_of(o, struct ndk_adapter_impl, obj) : NULL;
}

/*
 * The limits, each honest for this software provider:
 * - VendorId 0: a software provider has no IEEE OUI; DeviceId 1 names
 *   "libndk software iWARP" so consumers can tell it from hardware.
 * - MaxRegistrationSize / MaxWindowSize: a registration is a range of the
 *   process's virtual address space, which is 47 bits on x86-64 Linux.
 * - FRMRPageCount 256: page lists are plain arrays; 256 pages (1 MiB) costs
 *   2 KiB per FRMR and does not reduce how many can exist.
 * - SGE limits 16: one gathering sendmsg/readv per message, far below IOV_MAX.
 * - MaxTransferLength 1 GiB: RDMA Read sizes are 32-bit on the wire; 1 GiB
 *   keeps every length comfortably in range.
 * - MaxInlineDataSize 256: inline data is copied into the send slot at post
 *   time; perftest asks for up to 236.
 * - IRD/ORD 128: what Linux siw supports (SIW_MAX_IRD_QP/ORD_QP); larger
 *   values would make a siw initiator fail the connection.
 * - Queue depths: entries are small host structures; 16384 per queue and
 *   65536 per CQ bound the memory one consumer can pin in the provider.
 * - LargeRequestThreshold 8192: above this a software copy into a posted
 *   receive costs more than direct placement with Read/Write.
 * - MaxCallerData / MaxCalleeData 252: MPA allows 512 octets including the
 *   4-octet RFC 6581 word, but siw drops frames with PD_Length > 256.
 * - AdapterFlags:
 *   IN_ORDER_DMA: payload is read from the TCP stream (or copied from the
 *     receive staging buffer) into place in stream order, so no byte lands
 *     before an earlier one.
 *   RDMA_READ_SINK_NOT_REQUIRED: a Read Response is matched against our own
 *     outstanding-read entry, not the STag table, so any locally writable
 *     buffer can be a sink; the sink flags are accepted and ignored.
 *   RDMA_READ_LOCAL_INVALIDATE: the first sink SGE's token is invalidated
 *     when the Read completes successfully.
 *   CQ_RESIZE: NdkResizeCq grows or shrinks the ring, keeping entries.
 *   LOOPBACK_CONNECTIONS: a connection to one of the adapter's own
 *     addresses works (covered by the conformance tests).
 *   CQ_INTERRUPT_MODERATION: NdkControlCqInterruptModeration holds a
 *     notification back in software (cq.c), saving the consumer wake-ups.
 *   Not set: MULTI_ENGINE (one progress thread per adapter: spreading
 *     connections does not add engines).
 * - RdmaTechnology: iWARP.
 */
void ndk_adapter_fill_info(struct ndk_adapter_impl *ad, NDK_ADAPTER_INFO *info)
{
    memset(info, 0, sizeof *info);
    info->Version = ad->version;
    info->VendorId = 0;
    info->DeviceId = 1;
    info->MaxRegistrationSize = (SIZE_T)1 << 47;
    info->MaxWindowSize = (SIZE_T)1 << 47;
    info->FRMRPageCount = 256;
    info->MaxInitiatorRequestSge = 16;
    info->MaxReceiveRequestSge = 16;
    info->MaxReadRequestSge = 16;
    info->MaxTransferLength = 1u << 30;
    info->MaxInlineDataSize = 256;
    info->MaxInboundReadLimit = NDK_MAX_IRD;
    info->MaxOutboundReadLimit = NDK_MAX_ORD;
    info->MaxReceiveQueueDepth = 16384;
    info->MaxInitiatorQueueDepth = 16384;
    /* SRQ ring entries are 272-byte host structures (16 SGEs): 16384 bounds one SRQ to 4.25 MiB. */
    info->MaxSrqDepth = 16384;
    /* CQ ring entries are 48-byte host structures: 65536 bounds one CQ to 3 MiB. */
    info->MaxCqDepth = 65536;
    info->LargeRequestThreshold = 8192;
    info->MaxCallerData = NDK_MAX_PRIVATE_DATA;
    info->MaxCalleeData = NDK_MAX_PRIVATE_DATA;
    info->AdapterFlags = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                         NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                         NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                         NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    info->RdmaTechnology = NdkiWarp;
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

/* ---- local addresses ---- */

static void refresh_addrs(struct ndk_adapter_impl *ad)
{
    NDK_ADAPTER_DESCRIPTION *list = calloc(64, sizeof *list);
    if (!list)
        return;
    int n = ndk_if_list(list, 64);
    for (int i = 0; i < n && i < 64; i++) {
        if (strcmp(list[i].Name, ad->name) == 0) {
            ad->naddrs = list[i].AddressCount;
            memcpy(ad->addrs, list[i].Addresses, sizeof(NDK_SOCKADDR) * list[i].AddressCount);
        }
    }
    free(list);
}

static bool owns_cached(struct ndk_adapter_impl *ad, const NDK_SOCKADDR *addr)
{
    if (ndk_sockaddr_is_any(addr))
        return true;
    if (ad->loopback && addr->sa.sa_family == AF_INET &&
        (ntohl(addr->in4.sin_addr.s_addr) >> 24) == 127)
        return true;
    for (unsigned i = 0; i < ad->naddrs; i++)
        if (ndk_sockaddr_same_ip(&ad->addrs[i], addr))
            return true;
    return false;
}

bool ndk_adapter_owns(struct ndk_adapter_impl *ad, const NDK_SOCKADDR *addr)
{
    pthread_mutex_lock(&ad->lock);
    bool yes = owns_cached(ad, addr);
    if (!yes) {
        refresh_addrs(ad); /* addresses can be added after the adapter was opened */
        yes = owns_cached(ad, addr);
    }
    pthread_mutex_unlock(&ad->lock);
    return yes;
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
#undef DEFAULT
    if (o->Flags & NDK_OPEN_FLAG_NO_RECEIVE_GRACE)
        o->ReceiveGraceMs = 0;
}

static void *progress_main(void *arg)
{
    struct ndk_adapter_impl *ad = arg;
    uint64_t leases_aged_ms = 0;
    pthread_mutex_lock(&ad->lock);
    loop_set_owner(&ad->loop);
    __atomic_store_n(&ad->progress_tid, (int)gettid(), __ATOMIC_RELAXED);
    for (;;) {
        ndk_drain_callbacks(ad);
        ndk_free_deferred(ad);
        pthread_mutex_lock(&ad->cbq_lock);
        bool idle = !ad->cbq_head;
        pthread_mutex_unlock(&ad->cbq_lock);
        /* A rejecting socket still lingering (net/linger.h) is waited for:
         * closing it now would put our FIN right behind the reject. */
        if (ad->stopping && idle && !ad->lingers)
            break;
        /* While busy pollers hold input leases, look at them every
         * millisecond: one that nobody renewed ends (ndk_qp_age_leases). */
        bool leases = __atomic_load_n(&ad->input_leases, __ATOMIC_RELAXED) > 0;
        /* While QPs wait for a receive, look at their deadlines (and SRQs)
         * every 10 ms (ndk_qp_check_rx_waits). */
        bool waits = __atomic_load_n(&ad->rx_waits, __ATOMIC_RELAXED) > 0;
        loop_poll(&ad->loop, &ad->lock, leases ? 1 : waits ? 10 : -1);
        uint64_t now = loop_now_ms();
        if (leases && now != leases_aged_ms) {
            leases_aged_ms = now;
            ndk_qp_age_leases(ad);
        }
        if (waits)
            ndk_qp_check_rx_waits(ad);
    }
    pthread_mutex_unlock(&ad->lock);
    return NULL;
}

static void adapter_free(struct ndk_obj *obj)
{
    (void)obj;
}

static const struct ndk_obj_ops adapter_ops = {.free = adapter_free};

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
        /* Every 127.0.0.0/8 address is the loopback interface's (ndk.h). */
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

    struct ndk_adapter_impl *ad = calloc(1, sizeof *ad);
    if (!ad) {
        free(list);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    memcpy(ad->name, d->Name, sizeof ad->name);
    ad->ifindex = d->IfIndex;
    ad->loopback = (d->Flags & NDK_ADAPTER_DESC_LOOPBACK) != 0;
    ad->naddrs = d->AddressCount;
    memcpy(ad->addrs, d->Addresses, sizeof(NDK_SOCKADDR) * d->AddressCount);
    free(list);
    ad->version = ver;
    resolve_options(&ad->opt, pOptions);
    ndk_obj_init(&ad->obj, ad, NdkObjectTypeAdapter, &adapter_dispatch, &adapter_ops);

    pthread_mutex_init(&ad->lock, NULL);
    pthread_mutex_init(&ad->cbq_lock, NULL);
    pthread_mutex_init(&ad->live_lock, NULL);
    ad->busy_poll = (ad->opt.Flags & NDK_OPEN_FLAG_BUSY_POLL) != 0;
    if (ad->busy_poll) {
        ndk_cq_poll_hook = ndk_qp_busy_poll;
        ndk_cq_arm_hook = ndk_qp_end_leases;
    }
    ad->mem = mem_table_new();
    if (!ad->mem || loop_init(&ad->loop) < 0) {
        mem_table_free(ad->mem);
        pthread_mutex_destroy(&ad->lock);
        free(ad);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    if (pthread_create(&ad->thread, NULL, progress_main, ad) != 0) {
        mem_table_free(ad->mem);
        loop_fini(&ad->loop);
        pthread_mutex_destroy(&ad->lock);
        free(ad);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    ad->thread_started = true;
    /* Without memory for the verifier the adapter still works, unchecked. */
    if (ndk_verify_wanted(&ad->opt) && !ndk_verify_attach(ad))
        NDK_LOG(NDK_LL_ERROR, NDK_LC_VERIFIER, &ad->obj,
                "no memory for the NDK verifier: adapter %s is not verified", ad->name);
    ndk_stat_adapter_opened(ad);
    *ppAdapter = (NDK_ADAPTER *)&ad->obj.pub;
    return STATUS_SUCCESS;
}

NDK_API ULONG ndk_adapter_object_count(NDK_ADAPTER *pAdapter, NDK_OBJECT_TYPE Type)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return 0;
    ULONG n = 0;
    pthread_mutex_lock(&ad->lock);
    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        /* A pending close whose completion is queued or running (nothing
         * holds the object any more) counts as closed. */
        bool closed = o->destroyed || (o->close_pending && o->successors == 0 &&
                                       __atomic_load_n(&o->busy, __ATOMIC_ACQUIRE) == 0);
        n += !closed && (Type == NdkObjectTypeUndefined || o->type == Type);
    }
    pthread_mutex_unlock(&ad->lock);
    return n;
}

NDK_API VOID ndk_close_adapter(NDK_ADAPTER *pAdapter)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    if (!ad)
        return;
    if (ndk_on_progress_thread(ad)) {
        /* L12: never from a callback; joining ourselves would deadlock. */
        NDK_LOG(NDK_LL_ERROR, NDK_LC_API, &ad->obj, "ndk_close_adapter called from a callback: ignored");
        return;
    }
    if (ad->verifier)
        ndk_verify_adapter_closing(ad);
    ndk_stat_adapter_closing(ad);
    pthread_mutex_lock(&ad->lock);
    ad->stopping = true;
    loop_kick(&ad->loop);
    pthread_mutex_unlock(&ad->lock);
    pthread_join(ad->thread, NULL);

    /* Single-threaded from here. Objects the consumer never closed are torn
     * down without callbacks. */
    pthread_mutex_lock(&ad->lock);
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
        o->free_next = ad->free_list;
        ad->free_list = o;
    }
    ad->cbq_head = ad->cbq_tail = NULL;
    ndk_linger_flush(ad);
    ndk_free_deferred(ad);
    pthread_mutex_unlock(&ad->lock);
    loop_fini(&ad->loop);
    mem_table_free(ad->mem);
    pthread_mutex_destroy(&ad->cbq_lock);
    pthread_mutex_destroy(&ad->live_lock);
    pthread_mutex_destroy(&ad->lock);
    ndk_verify_detach(ad);
    ad->obj.magic = 0;
    free(ad);
}
