/*
 * mr.c - memory regions: NdkCreateMr and NDK_MR_DISPATCH
 * (NdkRegisterMr, NdkDeregisterMr, NdkInitializeFastRegisterMr, the token
 * getters). The registration itself lives in the adapter's STag table
 * (mem.c); the object owns one entry of it from creation to destruction.
 *
 * Register, deregister and initialize complete inline (STATUS_SUCCESS, no
 * callback): a software adapter has nothing to wait for, and 4.1 allows it.
 * Closing an MR is a plain dereference while windows bound to it live (L8,
 * L10, 9.4): the close pends until they are closed, and the registration
 * stays usable until then. When the close finishes, the STag is freed and
 * every token of the MR (and of windows over it) fails.
 */

#include "mem.h"
#include "objects.h"

#include "mem_internal.h"

/* Every NDK_MR_FLAG_* bit (6.10); anything else is refused. */
#define MR_FLAGS_KNOWN                                                                       \
    (NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |                         \
     NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_RDMA_READ_SINK)
/* NDK_MR_FLAG_ALLOW_REMOTE_WRITE is 0x5 = 0x4 | ALLOW_LOCAL_WRITE: the 0x4
 * bit is what asks for remote write. */
#define MR_FLAG_REMOTE_WRITE_BIT 0x4u

static struct mem_object *mr_from(const NDK_MR *p)
{
    struct ndk_obj *o = ndk_obj_from_pub(p, NdkObjectTypeMr);
    return o ? container_of(o, struct mem_object, obj) : NULL;
}

static NTSTATUS mr_register(NDK_MR *pNdkMr, MDL *Mdl, SIZE_T Length, ULONG Flags,
                            NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext; /* completes inline */
    struct mem_object *mr = mr_from(pNdkMr);
    if (!mr || Length == 0 || Length > NDK_MAX_REGION || (Flags & ~MR_FLAGS_KNOWN))
        return STATUS_INVALID_PARAMETER;
    /* Local read is always granted. RDMA_READ_SINK is accepted and
     * ignored (5.6.1): Read Responses are placed into the sink SGEs as
     * local writes, so local write is all a sink needs here. */
    unsigned access = 0;
    if (Flags & NDK_MR_FLAG_ALLOW_LOCAL_WRITE)
        access |= MEM_LOCAL_WRITE;
    if (Flags & NDK_MR_FLAG_ALLOW_REMOTE_READ)
        access |= MEM_REMOTE_READ;
    if (Flags & MR_FLAG_REMOTE_WRITE_BIT)
        access |= MEM_REMOTE_WRITE | MEM_LOCAL_WRITE;
    uint64_t va = 0;
    NTSTATUS st = mem_mdl_span(Mdl, Length, &va);
    if (st == STATUS_SUCCESS)
        st = mem_mr_register(mr->obj.ad->dev->mem, mr->entry, va, Length, access);
    if (st != STATUS_SUCCESS)
        NDK_LOG(NDK_LL_WARN, NDK_LC_MEM, &mr->obj, "NdkRegisterMr of %zu octets at 0x%llx failed: %s",
                (size_t)Length, (unsigned long long)va, ndk_status_name(st));
    return st;
}

static NTSTATUS mr_deregister(NDK_MR *pNdkMr, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                              PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext; /* completes inline */
    struct mem_object *mr = mr_from(pNdkMr);
    if (!mr)
        return STATUS_INVALID_PARAMETER;
    return mem_mr_deregister(mr->obj.ad->dev->mem, mr->entry);
}

static NTSTATUS mr_init_fast_register(NDK_MR *pNdkMr, ULONG AdapterPageCount, BOOLEAN RemoteAccess,
                                      NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      PVOID RequestContext)
{
    (void)RequestCompletion, (void)RequestContext; /* completes inline */
    struct mem_object *mr = mr_from(pNdkMr);
    if (!mr)
        return STATUS_INVALID_PARAMETER;
    NTSTATUS st = mem_frmr_init(mr->obj.ad->dev->mem, mr->entry, AdapterPageCount, RemoteAccess != FALSE);
    if (st != STATUS_SUCCESS)
        NDK_LOG(NDK_LL_WARN, NDK_LC_MEM, &mr->obj, "NdkInitializeFastRegisterMr of %lu pages failed: %s",
                (unsigned long)AdapterPageCount, ndk_status_name(st));
    return st;
}

/* Local and remote tokens are one STag (mem.h); 0 until the MR is
 * registered or initialized (5.6.4, 5.6.5). */
static UINT32 mr_token(NDK_MR *pNdkMr)
{
    return mem_object_token(pNdkMr, NdkObjectTypeMr);
}

static const NDK_MR_DISPATCH mr_dispatch = {
    .NdkCloseMr = ndk_obj_close,
    .NdkQueryExtension = ndk_query_extension,
    .NdkRegisterMr = mr_register,
    .NdkDeregisterMr = mr_deregister,
    .NdkInitializeFastRegisterMr = mr_init_fast_register,
    .NdkGetRemoteTokenFromMr = mr_token,
    .NdkGetLocalTokenFromMr = mr_token,
};

static void mr_close_start(struct ndk_obj *obj)
{
    struct mem_object *mr = container_of(obj, struct mem_object, obj);
    /* Windows bound to this MR become its successors now (the adapter lock
     * is held here, never on the posting path that binds them). */
    unsigned n = mem_entry_close_start(obj->ad->dev->mem, mr->entry);
    while (n--)
        ndk_obj_add_successor(obj);
}

static void mr_destroy(struct ndk_obj *obj)
{
    struct mem_object *mr = container_of(obj, struct mem_object, obj);
    mem_entry_free(obj->ad->dev->mem, mr->entry); /* an MR depends on no window */
    mr->entry = NULL;
    ndk_obj_release_successor(&mr->pd->obj);
}

static const struct ndk_obj_ops mr_ops = {
    .close_start = mr_close_start,
    .destroy = mr_destroy,
    .free = mem_object_free,
};

NTSTATUS ndk_create_mr(NDK_PD *pNdkPd, BOOLEAN FastRegister, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_MR **ppNdkMr)
{
    (void)CreateCompletion, (void)RequestContext; /* completes inline */
    struct ndk_obj *pdo = ndk_obj_from_pub(pNdkPd, NdkObjectTypePd);
    if (!pdo || !ppNdkMr)
        return STATUS_INVALID_PARAMETER;
    /* The STag index is the MR's for its whole life: re-registration only
     * moves the key, so a full table fails here, never at registration. */
    struct mem_object *mr;
    NTSTATUS st = mem_object_create(pdo, FastRegister ? MEM_KIND_FRMR : MEM_KIND_MR,
                                    NdkObjectTypeMr, &mr_dispatch, &mr_ops, &mr);
    if (st != STATUS_SUCCESS)
        return st;
    *ppNdkMr = (NDK_MR *)&mr->obj.pub;
    return STATUS_SUCCESS;
}
