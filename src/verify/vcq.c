/* The verifier's CQ table: C1 (no two of GetCqResults, GetCqResultsEx and
 * ArmCq at once on one CQ), and every retrieved completion ends the record
 * of its request (vqp.c). */
#include "verify/vcore.h"

#define CQREAL(o) VREAL(o, NDK_CQ_DISPATCH)

static bool cq_enter(struct vobj *o, const char *call)
{
    if (!vobj_enter(o, call))
        return false;
    if (__atomic_add_fetch(&o->u.cq.in_call, 1, __ATOMIC_ACQ_REL) > 1)
        vreport(o, VR_C1, call,
                "serialise NdkGetCqResults, NdkGetCqResultsEx and NdkArmCq of one CQ (one "
                "thread, or a lock)",
                "another of them is running on this CQ in another thread");
    return true;
}

static void cq_leave(struct vobj *o)
{
    __atomic_sub_fetch(&o->u.cq.in_call, 1, __ATOMIC_ACQ_REL);
    vobj_leave(o);
}

static NTSTATUS vcq_resize(NDK_CQ *cq, ULONG depth, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    struct vobj *o = vobj_of(cq);
    if (!vobj_enter(o, "NdkResizeCq"))
        return STATUS_INVALID_DEVICE_STATE;
    /* libndk resizes inline (never STATUS_PENDING). */
    NTSTATUS st = CQREAL(o)->NdkResizeCq(cq, depth, fn, ctx);
    if (st == STATUS_SUCCESS)
        __atomic_store_n(&o->u.cq.depth, depth, __ATOMIC_RELAXED);
    vobj_leave(o);
    return st;
}

static VOID vcq_arm(NDK_CQ *cq, ULONG type)
{
    struct vobj *o = vobj_of(cq);
    if (!cq_enter(o, "NdkArmCq"))
        return;
    CQREAL(o)->NdkArmCq(cq, type);
    cq_leave(o);
}

/* Completions retrieved: each ends the record of its request. Lock held. */
static void completed(struct vobj *o, const NDK_RESULT_EX *res, ULONG n)
{
    for (ULONG i = 0; i < n; i++)
        vqp_completed(o, &res[i]);
}

/* Read with NdkGetCqResultsEx, so the verifier knows each completion's
 * type (and a remote invalidation, whose notice NdkGetCqResults drops: C2),
 * then handed out as NDK_RESULTs. */
static ULONG vcq_results(NDK_CQ *cq, NDK_RESULT *res, ULONG n)
{
    struct vobj *o = vobj_of(cq);
    if (!cq_enter(o, "NdkGetCqResults"))
        return 0;
    ULONG got = 0;
    while (got < n) {
        NDK_RESULT_EX ex[64];
        ULONG want = n - got < 64 ? n - got : 64;
        ULONG k = CQREAL(o)->NdkGetCqResultsEx(cq, ex, want);
        for (ULONG i = 0; i < k; i++)
            res[got + i] = (NDK_RESULT){.Status = ex[i].Status,
                                        .BytesTransferred = ex[i].BytesTransferred,
                                        .QPContext = ex[i].QPContext,
                                        .RequestContext = ex[i].RequestContext};
        pthread_mutex_lock(&o->v->lock);
        completed(o, ex, k);
        pthread_mutex_unlock(&o->v->lock);
        got += k;
        if (k < want)
            break;
    }
    cq_leave(o);
    return got;
}

static ULONG vcq_results_ex(NDK_CQ *cq, NDK_RESULT_EX *res, ULONG n)
{
    struct vobj *o = vobj_of(cq);
    if (!cq_enter(o, "NdkGetCqResultsEx"))
        return 0;
    ULONG got = CQREAL(o)->NdkGetCqResultsEx(cq, res, n);
    if (got) {
        pthread_mutex_lock(&o->v->lock);
        completed(o, res, got);
        pthread_mutex_unlock(&o->v->lock);
    }
    cq_leave(o);
    return got;
}

static NTSTATUS vcq_moderation(NDK_CQ *cq, ULONG interval, ULONG count)
{
    struct vobj *o = vobj_of(cq);
    VFORWARD(o, "NdkControlCqInterruptModeration", STATUS_INVALID_DEVICE_STATE,
             CQREAL(o)->NdkControlCqInterruptModeration(cq, interval, count));
}

const NDK_CQ_DISPATCH vcq_dispatch = {
    .NdkCloseCq = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkResizeCq = vcq_resize,
    .NdkArmCq = vcq_arm,
    .NdkGetCqResults = vcq_results,
    .NdkControlCqInterruptModeration = vcq_moderation,
    .NdkGetCqResultsEx = vcq_results_ex,
};

const struct vtype vcq_type = {NdkObjectTypeCq, &vcq_dispatch, NULL, NULL, NULL};
