/*
 * The services of a view (struct ndk_adapter_impl, core.h) to the objects
 * created through it: what NdkQueryAdapterInfo reports, whether an address
 * is the device's, and retiring a closed view. Below the adapter's entry
 * points (adapter.c), which create those objects: the objects call down
 * here, never up into adapter.c (docs/architecture.md, "The layers").
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "objects.h"

/*
 * What NdkQueryAdapterInfo reports. The limits and their reasons are in
 * ndk_limits.h; the rest:
 * - VendorId 0: a software provider has no IEEE OUI; DeviceId 1 names
 *   "libndk software iWARP" so consumers can tell it from hardware.
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
 *   MULTI_ENGINE: only with more than one progress engine (MaxEngines,
 *     engine.c): connections spread over QPs whose CQs sit on different
 *     engines are then processed concurrently.
 * - RdmaTechnology: iWARP.
 */
void ndk_adapter_fill_info(struct ndk_adapter_impl *ad, NDK_ADAPTER_INFO *info)
{
    memset(info, 0, sizeof *info);
    info->Version = ad->version;
    info->VendorId = 0;
    info->DeviceId = 1;
    info->MaxRegistrationSize = (SIZE_T)NDK_MAX_REGION;
    info->MaxWindowSize = (SIZE_T)NDK_MAX_REGION;
    info->FRMRPageCount = NDK_FRMR_PAGE_COUNT;
    info->MaxInitiatorRequestSge = NDK_MAX_SGE;
    info->MaxReceiveRequestSge = NDK_MAX_SGE;
    info->MaxReadRequestSge = NDK_MAX_SGE;
    info->MaxTransferLength = NDK_MAX_TRANSFER;
    info->MaxInlineDataSize = NDK_MAX_INLINE;
    info->MaxInboundReadLimit = NDK_MAX_IRD;
    info->MaxOutboundReadLimit = NDK_MAX_ORD;
    info->MaxReceiveQueueDepth = NDK_MAX_QUEUE_DEPTH;
    info->MaxInitiatorQueueDepth = NDK_MAX_QUEUE_DEPTH;
    info->MaxSrqDepth = NDK_MAX_SRQ_DEPTH;
    info->MaxCqDepth = NDK_MAX_CQ_DEPTH;
    info->LargeRequestThreshold = NDK_LARGE_REQUEST_THRESHOLD;
    info->MaxCallerData = NDK_MAX_PRIVATE_DATA;
    info->MaxCalleeData = NDK_MAX_PRIVATE_DATA;
    info->AdapterFlags = NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED |
                         NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED |
                         NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED |
                         NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED |
                         NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED;
    if (ad->dev->nengines > 1)
        info->AdapterFlags |= NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED;
    info->RdmaTechnology = NdkiWarp;
}

/* ---- local addresses ---- */

static void refresh_addrs(struct ndk_adapter_impl *ad)
{
    NDK_ADAPTER_DESCRIPTION *list = calloc(64, sizeof *list);
    if (!list)
        return;
    int n = ndk_if_list(list, 64);
    for (int i = 0; i < n && i < 64; i++) {
        if (strcmp(list[i].Name, ad->dev->name) == 0) {
            ad->dev->naddrs = list[i].AddressCount;
            memcpy(ad->dev->addrs, list[i].Addresses, sizeof(NDK_SOCKADDR) * list[i].AddressCount);
        }
    }
    free(list);
}

static bool owns_cached(struct ndk_adapter_impl *ad, const NDK_SOCKADDR *addr)
{
    if (ndk_sockaddr_is_any(addr))
        return true;
    if (ad->dev->loopback && addr->sa.sa_family == AF_INET &&
        (ntohl(addr->in4.sin_addr.s_addr) >> 24) == 127)
        return true;
    for (unsigned i = 0; i < ad->dev->naddrs; i++)
        if (ndk_sockaddr_same_ip(&ad->dev->addrs[i], addr))
            return true;
    return false;
}

bool ndk_adapter_owns(struct ndk_adapter_impl *ad, const NDK_SOCKADDR *addr)
{
    pthread_mutex_lock(&ad->dev->lock);
    bool yes = owns_cached(ad, addr);
    if (!yes) {
        refresh_addrs(ad); /* addresses can be added after the adapter was opened */
        yes = owns_cached(ad, addr);
    }
    pthread_mutex_unlock(&ad->dev->lock);
    return yes;
}

void ndk_view_retire(struct ndk_adapter_impl *ad)
{
    struct ndk_device *dev = ad->dev;
    for (struct ndk_adapter_impl **pp = &dev->views; *pp; pp = &(*pp)->view_next) {
        if (*pp == ad) {
            *pp = ad->view_next;
            break;
        }
    }
    ad->view_next = dev->dead_views;
    /* Stored atomically: engines look without the lock (ndk_free_deferred). */
    __atomic_store_n(&dev->dead_views, ad, __ATOMIC_RELEASE);
}
