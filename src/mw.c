/*
 * mw.c - memory windows: NdkCreateMw and NDK_MW_DISPATCH
 * (NdkGetRemoteTokenFromMw, NdkBind, NdkInvalidate). Binding and invalidation are work requests of a QP (qp.c calls
 * mem_check_bind / mem_exec_bind in mem.c); the object owns one entry of the
 * adapter's STag table from creation to destruction.
 *
 * The MR of the window's latest bind is its antecedent: that MR's close
 * pends until the window is closed (9.4). Closing the window frees its STag
 * and releases that MR.
 */

#include "mem.h"
#include "objects.h"

#include "mem_internal.h"

/* The token of the latest NdkBind that returned (5.7.1); 0 before any. */
static UINT32 mw_token(NDK_MW *pNdkMw)
{
    return mem_object_token(pNdkMw, NdkObjectTypeMw);
}

static const NDK_MW_DISPATCH mw_dispatch = {
    .NdkCloseMw = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkGetRemoteTokenFromMw = mw_token,
};

static void mw_close_start(struct ndk_obj *obj)
{
    struct mem_object *mw = container_of(obj, struct mem_object, obj);
    mem_entry_close_start(obj->ad->dev->mem, mw->entry); /* no new bind from now */
}

static void mw_destroy(struct ndk_obj *obj)
{
    struct mem_object *mw = container_of(obj, struct mem_object, obj);
    /* The STag fails from here on; the MR it was bound to may finish a
     * close that waited for this window. */
    struct ndk_obj *ante = mem_entry_free(obj->ad->dev->mem, mw->entry);
    mw->entry = NULL;
    if (ante)
        ndk_obj_release_successor(ante);
    ndk_obj_release_successor(&mw->pd->obj);
}

static const struct ndk_obj_ops mw_ops = {
    .close_start = mw_close_start,
    .destroy = mw_destroy,
    .free = mem_object_free,
};

NTSTATUS ndk_create_mw(NDK_PD *pNdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                       NDK_MW **ppNdkMw)
{
    (void)CreateCompletion, (void)RequestContext; /* completes inline */
    struct ndk_obj *pdo = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    if (!pdo || !ppNdkMw)
        return STATUS_INVALID_PARAMETER;
    struct mem_object *mw;
    NTSTATUS st = mem_object_create(pdo, MEM_KIND_MW, NdkObjectTypeMw, &mw_dispatch, &mw_ops, &mw);
    if (st != STATUS_SUCCESS)
        return st;
    *ppNdkMw = (NDK_MW *)&mw->obj.pub;
    return STATUS_SUCCESS;
}
