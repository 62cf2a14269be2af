/* Shared endpoints: one local address:port for many outgoing connections
 * with distinct destinations (NdkCreateSharedEndpoint; docs/rules.md
 * E10-E15). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/stream.h"
#include "objects.h"

static struct ndk_sep_impl *sep_from(NDK_SHARED_ENDPOINT *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeSharedEndpoint);
    return o ? container_of(o, struct ndk_sep_impl, obj) : NULL;
}

static NTSTATUS sep_get_local_address(NDK_SHARED_ENDPOINT *p, PSOCKADDR pAddress, ULONG *pAddressLength)
{
    struct ndk_sep_impl *sep = sep_from(p);
    if (!sep)
        return STATUS_INVALID_PARAMETER;
    return ndk_sockaddr_copy_out(&sep->local, pAddress, pAddressLength);
}

static const NDK_SHARED_ENDPOINT_DISPATCH sep_dispatch = {
    .NdkCloseSharedEndpoint = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkGetLocalAddress = sep_get_local_address,
};

static void sep_destroy(struct ndk_obj *obj)
{
    struct ndk_sep_impl *sep = container_of(obj, struct ndk_sep_impl, obj);
    if (sep->holder_fd >= 0)
        ndk_stream_close(sep->holder_fd);
    sep->holder_fd = -1;
    ports_unref(sep->port);
    sep->port = NULL;
}

static void sep_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct ndk_sep_impl, obj));
}

static const struct ndk_obj_ops sep_ops = {.destroy = sep_destroy, .free = sep_free, .release = sep_destroy};

NTSTATUS ndk_create_shared_endpoint(NDK_ADAPTER *pNdkAdapter, CONST PSOCKADDR pAddress,
                                    ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                    PVOID RequestContext, NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint)
{
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    NDK_SOCKADDR local;
    if (!ad || !ppNdkSharedEndpoint || !ndk_sockaddr_import(pAddress, AddressLength, &local))
        return STATUS_INVALID_PARAMETER;
    if (!ndk_adapter_owns(ad, &local))
        return STATUS_INVALID_ADDRESS;
    struct ndk_sep_impl *sep = calloc(1, sizeof *sep);
    if (!sep)
        return STATUS_INSUFFICIENT_RESOURCES;
    /* A bound, never-listening socket holds the port against the kernel's
     * own ephemeral allocations; connections bind beside it (SO_REUSEADDR). */
    sep->holder_fd = ndk_tcp_holder_socket(local.sa.sa_family);
    if (sep->holder_fd < 0) {
        int err = -sep->holder_fd;
        free(sep);
        return ndk_status_from_errno(err, NDK_PHASE_BIND);
    }
    NTSTATUS st = ports_reserve(&local, PORT_SHARED, sep->holder_fd, true, &sep->port);
    if (st != STATUS_SUCCESS) {
        ndk_stream_close(sep->holder_fd);
        free(sep);
        return st;
    }
    sep->local = local;
    pthread_mutex_lock(&ad->dev->lock);
    ndk_obj_init(&sep->obj, ad, NdkObjectTypeSharedEndpoint, &sep_dispatch, &sep_ops);
    pthread_mutex_unlock(&ad->dev->lock);
    *ppNdkSharedEndpoint = (NDK_SHARED_ENDPOINT *)&sep->obj.pub;
    return STATUS_SUCCESS;
}
