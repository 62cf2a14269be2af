/* The verifier's PD, MR and MW tables: records for the objects a PD
 * creates, and the memory rules M1, M4 and M5 (docs/verifier.md). */
#include <stdlib.h>

#include "net/memprobe.h"
#include "verify/vcore.h"

#define PREAL(o) VREAL(o, NDK_PD_DISPATCH)
#define MREAL(o) VREAL(o, NDK_MR_DISPATCH)

/* ---- PD ---- */

static struct vobj *cq_rec(struct vobj *o, NDK_CQ *cq)
{
    struct ndk_obj *obj = cq ? ndk_obj_from_pub(cq, NdkObjectTypeCq) : NULL;
    struct vobj *c = obj ? obj->verify : NULL;
    return c && c->v == o->v ? c : NULL;
}

static NTSTATUS vp_create_mr(NDK_PD *pd, BOOLEAN fast, NDK_FN_CREATE_COMPLETION cc, PVOID ctx,
                             NDK_MR **pp)
{
    struct vobj *o = vobj_of(pd);
    if (!vobj_enter(o, "NdkCreateMr"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st = PREAL(o)->NdkCreateMr(pd, fast, cc, ctx, pp);
    struct vobj *m = st == STATUS_SUCCESS ? vobj_attach(o->v, *pp, &vmr_type) : NULL;
    if (m)
        m->u.mr.fast = fast;
    vobj_leave(o);
    return st;
}

static NTSTATUS vp_create_mw(NDK_PD *pd, NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_MW **pp)
{
    struct vobj *o = vobj_of(pd);
    if (!vobj_enter(o, "NdkCreateMw"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st = PREAL(o)->NdkCreateMw(pd, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        vobj_attach(o->v, *pp, &vmw_type);
    vobj_leave(o);
    return st;
}

static NTSTATUS vp_create_srq(NDK_PD *pd, ULONG depth, ULONG max_sge, ULONG threshold,
                              NDK_FN_SRQ_NOTIFICATION_CALLBACK fn, PVOID fctx, GROUP_AFFINITY *aff,
                              NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_SRQ **pp)
{
    struct vobj *o = vobj_of(pd);
    if (!vobj_enter(o, "NdkCreateSrq"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st = PREAL(o)->NdkCreateSrq(pd, depth, max_sge, threshold, fn, fctx, aff, cc, ctx, pp);
    struct vobj *s = st == STATUS_SUCCESS ? vobj_new(o->v, &vsrq_type) : NULL;
    if (s) {
        s->u.srq.q.depth = depth;
        s->u.srq.q.max_sge = max_sge;
        vobj_bind(s, *pp);
    }
    vobj_leave(o);
    return st;
}

static void qp_rec(struct vobj *pd, void *pub, NDK_CQ *rcq, NDK_CQ *icq, struct vobj *srq,
                   void *context, ULONG rqd, ULONG iqd, ULONG rsge, ULONG isge)
{
    struct vobj *q = vobj_new(pd->v, &vqp_type);
    if (!q)
        return;
    q->u.qp.rcq = cq_rec(pd, rcq);
    q->u.qp.icq = cq_rec(pd, icq);
    q->u.qp.srq = srq;
    q->u.qp.context = context;
    q->u.qp.rq.depth = rqd;
    q->u.qp.rq.max_sge = rsge;
    q->u.qp.iq.depth = iqd;
    q->u.qp.iq.max_sge = isge;
    vobj_bind(q, pub);
}

static NTSTATUS vp_create_qp(NDK_PD *pd, NDK_CQ *rcq, NDK_CQ *icq, PVOID qpctx, ULONG rqd,
                             ULONG iqd, ULONG rsge, ULONG isge, ULONG inl,
                             NDK_FN_CREATE_COMPLETION cc, PVOID ctx, NDK_QP **pp)
{
    struct vobj *o = vobj_of(pd);
    if (!vobj_enter(o, "NdkCreateQp"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st =
        PREAL(o)->NdkCreateQp(pd, rcq, icq, qpctx, rqd, iqd, rsge, isge, inl, cc, ctx, pp);
    if (st == STATUS_SUCCESS)
        qp_rec(o, *pp, rcq, icq, NULL, qpctx, rqd, iqd, rsge, isge);
    vobj_leave(o);
    return st;
}

static NTSTATUS vp_create_qp_srq(NDK_PD *pd, NDK_CQ *rcq, NDK_CQ *icq, NDK_SRQ *srq, PVOID qpctx,
                                 ULONG iqd, ULONG isge, ULONG inl, NDK_FN_CREATE_COMPLETION cc,
                                 PVOID ctx, NDK_QP **pp)
{
    struct vobj *o = vobj_of(pd);
    if (!vobj_enter(o, "NdkCreateQpWithSrq"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st =
        PREAL(o)->NdkCreateQpWithSrq(pd, rcq, icq, srq, qpctx, iqd, isge, inl, cc, ctx, pp);
    if (st == STATUS_SUCCESS) {
        struct ndk_obj *so = ndk_obj_from_pub(srq, NdkObjectTypeSrq);
        struct vobj *s = so ? so->verify : NULL;
        qp_rec(o, *pp, rcq, icq, s && s->v == o->v ? s : NULL, qpctx, 0, iqd, 0, isge);
    }
    vobj_leave(o);
    return st;
}

static VOID vp_privileged_token(NDK_PD *pd, UINT32 *token)
{
    struct vobj *o = vobj_of(pd);
    VFORWARD_VOID(o, "NdkGetPrivilegedMemoryRegionToken",
                  PREAL(o)->NdkGetPrivilegedMemoryRegionToken(pd, token));
}

const NDK_PD_DISPATCH vpd_dispatch = {
    .NdkClosePd = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkCreateMr = vp_create_mr,
    .NdkCreateMw = vp_create_mw,
    .NdkCreateSrq = vp_create_srq,
    .NdkCreateQp = vp_create_qp,
    .NdkCreateQpWithSrq = vp_create_qp_srq,
    .NdkGetPrivilegedMemoryRegionToken = vp_privileged_token,
};

/* ---- MR ---- */

/* Does an outstanding request of a connected QP name this MR? Silent
 * requests are left out: the verifier cannot know when they finished. */
static struct vreq *user_of(struct vobj *m, struct vobj **qp_out)
{
    for (struct vobj *q = m->v->objs; q; q = q->next) {
        if (q->type != NdkObjectTypeQp || !q->u.qp.conn)
            continue;
        enum vconn s = q->u.qp.conn->u.conn.state;
        if (s != VC_CONNECTED && s != VC_COMPLETING)
            continue;
        struct vqueue *queues[2] = {&q->u.qp.iq,
                                    q->u.qp.srq ? &q->u.qp.srq->u.srq.q : &q->u.qp.rq};
        for (int k = 0; k < 2; k++)
            for (struct vreq *r = queues[k]->head; r; r = r->next) {
                if (r->silent)
                    continue;
                bool named = r->mr == m->pub;
                for (ULONG i = 0; i < r->nsge && !named; i++)
                    named = m->u.mr.ltoken && r->sge[i].MemoryRegionToken == m->u.mr.ltoken;
                if (named) {
                    *qp_out = q;
                    return r;
                }
            }
    }
    return NULL;
}

static void vmr_closing(struct vobj *o, const char *call)
{
    struct vobj *q = NULL;
    struct vreq *r = o->u.mr.registered || o->u.mr.fast ? user_of(o, &q) : NULL;
    if (r)
        vreport(o, VR_M1, call,
                "wait for the completions of the requests that name the MR before deregistering "
                "or closing it",
                "a %s (RequestContext %p) on QP %p names it and has not completed", r->call,
                r->ctx, (void *)q->pub);
    for (struct vobj *w = o->v->objs; w; w = w->next)
        if (w->type == NdkObjectTypeMw && w->state == VS_OPEN && w->u.mw.bound_mr == o) {
            vreport(o, VR_M5, call,
                    "invalidate (NdkInvalidate) or close the windows bound over the MR first",
                    "MW %p is still bound over it; the window maps nothing from now on",
                    (void *)w->pub);
            break;
        }
    o->u.mr.registered = false;
}

static void vmr_watch(struct vobj *o, uint64_t now)
{
    (void)now;
    struct vmr *m = &o->u.mr;
    if (!m->registered || !m->len || ndk_mem_mapped(m->base, m->len))
        return;
    vreport(o, VR_M4, "(registered memory)",
            "keep the memory an MDL describes mapped and in place until NdkDeregisterMr "
            "(or the MR's close) returned",
            "[%p, +%zu) was unmapped while registered: the peer's or the QP's accesses to it "
            "fail or land elsewhere", (void *)m->base, m->len);
}

static NTSTATUS vm_register(NDK_MR *mr, MDL *mdl, SIZE_T len, ULONG flags,
                            NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    struct vobj *o = vobj_of(mr);
    if (!vobj_enter(o, "NdkRegisterMr"))
        return STATUS_INVALID_DEVICE_STATE;
    /* libndk registers inline (never STATUS_PENDING). */
    NTSTATUS st = MREAL(o)->NdkRegisterMr(mr, mdl, len, flags, fn, ctx);
    if (st == STATUS_SUCCESS) {
        uint32_t lt = MREAL(o)->NdkGetLocalTokenFromMr(mr);
        pthread_mutex_lock(&o->v->lock);
        o->u.mr.registered = true;
        o->u.mr.ltoken = lt;
        o->u.mr.base = (uintptr_t)MmGetMdlVirtualAddress(mdl);
        o->u.mr.len = len;
        pthread_mutex_unlock(&o->v->lock);
    }
    vobj_leave(o);
    return st;
}

static NTSTATUS vm_deregister(NDK_MR *mr, NDK_FN_REQUEST_COMPLETION fn, PVOID ctx)
{
    struct vobj *o = vobj_of(mr);
    if (!vobj_enter(o, "NdkDeregisterMr"))
        return STATUS_INVALID_DEVICE_STATE;
    pthread_mutex_lock(&o->v->lock);
    vmr_closing(o, "NdkDeregisterMr");
    pthread_mutex_unlock(&o->v->lock);
    NTSTATUS st = MREAL(o)->NdkDeregisterMr(mr, fn, ctx);
    vobj_leave(o);
    return st;
}

static NTSTATUS vm_init_fast(NDK_MR *mr, ULONG pages, BOOLEAN remote, NDK_FN_REQUEST_COMPLETION fn,
                             PVOID ctx)
{
    struct vobj *o = vobj_of(mr);
    if (!vobj_enter(o, "NdkInitializeFastRegisterMr"))
        return STATUS_INVALID_DEVICE_STATE;
    NTSTATUS st = MREAL(o)->NdkInitializeFastRegisterMr(mr, pages, remote, fn, ctx);
    if (st == STATUS_SUCCESS) {
        uint32_t lt = MREAL(o)->NdkGetLocalTokenFromMr(mr);
        pthread_mutex_lock(&o->v->lock);
        o->u.mr.ltoken = lt;
        pthread_mutex_unlock(&o->v->lock);
    }
    vobj_leave(o);
    return st;
}

static UINT32 vm_remote_token(NDK_MR *mr)
{
    struct vobj *o = vobj_of(mr);
    VFORWARD(o, "NdkGetRemoteTokenFromMr", 0, MREAL(o)->NdkGetRemoteTokenFromMr(mr));
}

static UINT32 vm_local_token(NDK_MR *mr)
{
    struct vobj *o = vobj_of(mr);
    VFORWARD(o, "NdkGetLocalTokenFromMr", 0, MREAL(o)->NdkGetLocalTokenFromMr(mr));
}

const NDK_MR_DISPATCH vmr_dispatch = {
    .NdkCloseMr = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkRegisterMr = vm_register,
    .NdkDeregisterMr = vm_deregister,
    .NdkInitializeFastRegisterMr = vm_init_fast,
    .NdkGetRemoteTokenFromMr = vm_remote_token,
    .NdkGetLocalTokenFromMr = vm_local_token,
};

/* ---- MW ---- */

static UINT32 vw_remote_token(NDK_MW *mw)
{
    struct vobj *o = vobj_of(mw);
    VFORWARD(o, "NdkGetRemoteTokenFromMw", 0,
             VREAL(o, NDK_MW_DISPATCH)->NdkGetRemoteTokenFromMw(mw));
}

const NDK_MW_DISPATCH vmw_dispatch = {
    .NdkCloseMw = vobj_close,
    .NdkQueryExtension = vobj_query_extension,
    .NdkGetRemoteTokenFromMw = vw_remote_token,
};

const struct vtype vpd_type = {NdkObjectTypePd, &vpd_dispatch, NULL, NULL, NULL};
const struct vtype vmr_type = {NdkObjectTypeMr, &vmr_dispatch, vmr_closing, NULL, vmr_watch};
const struct vtype vmw_type = {NdkObjectTypeMw, &vmw_dispatch, NULL, NULL, NULL};
