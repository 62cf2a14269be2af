/* Protection domains: the parent of QPs (and, with the data path, of MRs,
 * MWs and SRQs). */
#include <stdlib.h>

#include "mem.h"
#include "net/sys.h"
#include "objects.h"

static VOID pd_privileged_token(NDK_PD *pNdkPd, UINT32 *pToken)
{
    struct ndk_obj *o = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    if (o && pToken)
        *pToken = container_of(o, struct ndk_pd_impl, obj)->privileged_token;
}

static const NDK_PD_DISPATCH pd_dispatch = {
    .NdkClosePd = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkCreateMr = ndk_create_mr,
    .NdkCreateMw = ndk_create_mw,
    .NdkCreateSrq = ndk_create_srq,
    .NdkCreateQp = ndk_create_qp,
    .NdkCreateQpWithSrq = ndk_create_qp_with_srq,
    .NdkGetPrivilegedMemoryRegionToken = pd_privileged_token,
};

static void pd_free(struct ndk_obj *obj)
{
    free(container_of(obj, struct ndk_pd_impl, obj));
}

static const struct ndk_obj_ops pd_ops = {.free = pd_free};

NTSTATUS ndk_create_pd(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_PD **ppNdkPd)
{
    (void)CreateCompletion, (void)RequestContext;
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pNdkAdapter);
    if (!ad || !ppNdkPd)
        return STATUS_INVALID_PARAMETER;
    struct ndk_pd_impl *pd = calloc(1, sizeof *pd);
    if (!pd)
        return STATUS_INSUFFICIENT_RESOURCES;
    /* The privileged token is never valid on the wire; it only needs to be
     * unguessable and distinct from STags, which are never 0. */
    if (!ndk_random(&pd->privileged_token, sizeof pd->privileged_token))
        pd->privileged_token = 0xFFFFFF00u;
    pthread_mutex_lock(&ad->dev->lock);
    ndk_obj_init(&pd->obj, ad, NdkObjectTypePd, &pd_dispatch, &pd_ops);
    pthread_mutex_unlock(&ad->dev->lock);
    *ppNdkPd = (NDK_PD *)&pd->obj.pub;
    return STATUS_SUCCESS;
}
