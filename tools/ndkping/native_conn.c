/*
 * native_conn.c - one connection of ndkping's own protocol (see native.h):
 * its objects, its registered buffers, the work requests of the data
 * phase, and the CQ they complete into. At most one work request is
 * outstanding on each queue (each step waits for its completion), and one
 * CQ serves both queues, so it holds both depths and never overflows.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "lib/ops.h"
#include "ndkping/native.h"

#define QUEUE_DEPTH 4
#define CQ_DEPTH (2 * QUEUE_DEPTH)

static pthread_mutex_t adv_lock = PTHREAD_MUTEX_INITIALIZER;

void side_record_adv(struct side *s, const struct adv *a)
{
    pthread_mutex_lock(&adv_lock);
    adv_encode(s->adv, a);
    s->adv_set = true;
    pthread_mutex_unlock(&adv_lock);
}

bool adv_matches(const char *role, const char *whose, const struct side *peer, const uint8_t *got)
{
    pthread_mutex_lock(&adv_lock);
    bool same = peer->adv_set && memcmp(peer->adv, got, ADV_LEN) == 0;
    uint8_t sent[ADV_LEN];
    memcpy(sent, peer->adv, ADV_LEN);
    pthread_mutex_unlock(&adv_lock);
    if (!same) {
        struct adv a, b;
        adv_decode(got, &a);
        adv_decode(sent, &b);
        tc_complain(role,
                    "%s buffer advertisement differs from what was sent: got 0x%" PRIx64 " token 0x%08" PRIx32
                    " %" PRIu32 " bytes, sent 0x%" PRIx64 " token 0x%08" PRIx32 " %" PRIu32 " bytes",
                    whose, a.addr, a.token, a.size, b.addr, b.token, b.size);
    }
    return same;
}

NTSTATUS peer_data_read(struct nconn *n, struct peer_data *r)
{
    NTSTATUS st = tc_conn_data(&n->c, &r->ird, &r->ord, &r->pd, &r->pd_len);
    if (st == STATUS_SUCCESS)
        r->well_formed = pdata_split(r->pd, r->pd_len, &r->text_len, &r->adv_bytes);
    return st;
}

bool peer_data_exact(const char *role, const char *shows, const struct peer_data *r, ULONG want_ird, ULONG want_ord,
                     const struct side *peer, const char *sent, size_t sent_len)
{
    bool ok = true;
    const char *whose = strcmp(peer->role, "server") == 0 ? "server" : "client";
    if (r->ird != want_ird || r->ord != want_ord) {
        tc_complain(role,
                    "%s IRD %" PRIu32 " ORD %" PRIu32 ", expected IRD %" PRIu32 " ORD %" PRIu32
                    " (both sides asked IRD %" PRIu32 " ORD %" PRIu32 ")",
                    shows, r->ird, r->ord, want_ird, want_ord, opt.ird, opt.ord);
        ok = false;
    }
    if (!pdata_matches(role, whose, r->pd, r->text_len, sent, sent_len))
        ok = false;
    if (r->adv_bytes && !adv_matches(role, whose, peer, r->adv_bytes))
        ok = false;
    return ok;
}

static const NDK_OPERATION_TYPE op_type[OP_COUNT] = {
    [OP_WRITE] = NdkOperationTypeWrite,
    [OP_READ] = NdkOperationTypeRead,
    [OP_SEND] = NdkOperationTypeSend,
    [OP_RECV] = NdkOperationTypeReceive,
};

static const char *const buf_names[B_COUNT] = {
    [B_SOURCE] = "source buffer",
    [B_SINK] = "read sink",
    [B_TARGET] = "target buffer",
    [B_MSG] = "message buffer",
};

struct nconn *nconn_new(struct side *s, unsigned num, bool with_connector)
{
    struct nconn *n = calloc(1, sizeof *n);
    if (!n) {
        tc_complain(s->role, "out of memory");
        return NULL;
    }
    n->side = s;
    const struct tc_qp_shape shape = {
        .cq_depth = CQ_DEPTH, .rq_depth = QUEUE_DEPTH, .sq_depth = QUEUE_DEPTH};
    if (!tc_conn_init(&n->c, &s->a, num) || !tc_conn_create(&n->c, &shape, n) ||
        (with_connector && !tc_conn_create_connector(&n->c))) {
        nconn_end(n);
        return NULL;
    }
    return n;
}

bool nconn_buf(struct nconn *n, int b, size_t len, ULONG flags)
{
    struct tc_mr *m = &n->bufs[b];
    if (!tc_conn_add_mr(&n->c, m, buf_names[b], len, flags))
        return false;
    native_say(LVL_VERBOSE, n->side->role,
               "%s%s: %zu bytes at %p, flags 0x%" PRIx32 ", local token 0x%08" PRIx32 ", remote token 0x%08" PRIx32,
               n->c.calls.label, buf_names[b], len, (void *)m->mem, flags, m->ltoken, m->rtoken);
    return true;
}

struct adv nconn_adv(const struct nconn *n, int b)
{
    const struct tc_mr *m = &n->bufs[b];
    return (struct adv){.addr = (uint64_t)(uintptr_t)m->mem, .token = m->rtoken, .size = (uint32_t)m->len};
}

/* Marks op posted; st is what the posting call returned (SUCCESS queues
 * it; anything else fails it inline and no CQ entry follows). */
static bool posted(struct nconn *n, int op, NTSTATUS st)
{
    const char *role = n->side->role;
    if (st != STATUS_SUCCESS) {
        tc_complain(role, "%s%s failed: %s returned %s", n->c.calls.label, tc_op_name(op_type[op]),
                    tc_op_call(op_type[op]), tc_status_name(st));
        tc_check_post_not_pending(role, op_type[op], st);
        return false;
    }
    n->ops[op].posted = true;
    native_say(LVL_VERBOSE, role, "%s%s: STATUS_SUCCESS (posted)", n->c.calls.label, tc_op_call(op_type[op]));
    return true;
}

bool nconn_recv_and_advertise(struct nconn *n, int adv_buf, const char *text, size_t text_len)
{
    NDK_SGE sge = tc_mr_sge(&n->bufs[B_MSG], MSG_SIZE, MSG_SIZE);
    n->ops[OP_RECV].t_post = tc_now_us();
    if (!posted(n, OP_RECV, n->c.qp->Dispatch->NdkReceive(n->c.qp, &n->ops[OP_RECV], &sge, 1)))
        return false;
    struct adv a = nconn_adv(n, adv_buf);
    if (!(n->pdata_out = pdata_build(text, text_len, &a, &n->pdata_out_len))) {
        tc_complain(n->side->role, "out of memory");
        return false;
    }
    side_record_adv(n->side, &a);
    return true;
}

bool nconn_post(struct nconn *n, int op, int b, size_t off, size_t len, const struct adv *remote)
{
    NDK_QP *qp = n->c.qp;
    NDK_SGE sge = tc_mr_sge(&n->bufs[b], off, len);
    struct op *o = &n->ops[op];
    o->t_post = tc_now_us();
    NTSTATUS st;
    if (op == OP_WRITE)
        st = qp->Dispatch->NdkWrite(qp, o, &sge, 1, remote->addr, remote->token, 0);
    else if (op == OP_READ)
        st = qp->Dispatch->NdkRead(qp, o, &sge, 1, remote->addr, remote->token, 0);
    else
        st = qp->Dispatch->NdkSend(qp, o, &sge, 1, 0);
    return posted(n, op, st);
}

/* One CQ entry, filed with its op. */
static void file_result(struct nconn *n, const NDK_RESULT_EX *r, uint64_t now)
{
    const char *role = n->side->role, *label = n->c.calls.label;
    int op = -1;
    for (int k = 0; k < OP_COUNT; k++)
        if (r->RequestContext == &n->ops[k])
            op = k;
    if (op < 0 || !n->ops[op].posted || n->ops[op].done) {
        tc_library_problem(role, "%sa CQ entry (%s, type %d) for no outstanding request (context %p)", label,
                           tc_status_name(r->Status), (int)r->Type, r->RequestContext);
        return;
    }
    struct op *o = &n->ops[op];
    o->done = true;
    o->t_done = now;
    o->res = *r;
    native_say(LVL_VERBOSE, role, "%sCQ: %s %s, %" PRIu32 " bytes, ProviderErrorCode 0x%" PRIx32, label,
               tc_op_name(op_type[op]), tc_status_name(r->Status), r->BytesTransferred, r->ProviderErrorCode);
    tc_check_completion(role, label, op_type[op], r, n);
}

static long take(void *arg)
{
    struct nconn *n = arg;
    NDK_RESULT_EX r[CQ_DEPTH];
    ULONG got = n->c.cq->Dispatch->NdkGetCqResultsEx(n->c.cq, r, CQ_DEPTH);
    uint64_t now = tc_now_us();
    if (got > CQ_DEPTH) {
        tc_library_problem(n->side->role, "NdkGetCqResultsEx returned %" PRIu32 " of at most %u", got, CQ_DEPTH);
        got = CQ_DEPTH;
    }
    for (ULONG i = 0; i < got; i++)
        file_result(n, &r[i], now);
    return (long)got;
}

/* Every op of mask done, or one of them failed. */
static bool settled(const struct nconn *n, unsigned mask)
{
    bool all = true;
    for (int k = 0; k < OP_COUNT; k++) {
        if (!(mask & (1u << k)))
            continue;
        if (!n->ops[k].done)
            all = false;
        else if (n->ops[k].res.Status != STATUS_SUCCESS)
            return true;
    }
    return all;
}

void nconn_wait(struct nconn *n, unsigned mask)
{
    struct tc_cq_wait w;
    tc_conn_waiter(&n->c, &w, TC_WAIT_EVENTS, take, n);
    n->waited = TC_WAITED_OK;
    while (!settled(n, mask) && n->waited == TC_WAITED_OK)
        n->waited = tc_cq_wait(&w, tc_adapter_wait_ms(n->c.adapter));
}

bool nconn_op_ok(struct nconn *n, int op)
{
    const char *role = n->side->role, *label = n->c.calls.label;
    const struct op *o = &n->ops[op];
    if (!o->done) {
        char what[64];
        snprintf(what, sizeof what, "%sits %s to complete", label, tc_op_name(op_type[op]));
        tc_explain_wait(role, n->waited, &n->c.ev->waker, tc_adapter_wait_ms(n->c.adapter), what);
        return false;
    }
    if (o->res.Status != STATUS_SUCCESS) {
        tc_complain(role, "%s%s failed: completion status %s, ProviderErrorCode 0x%" PRIx32, label,
                    tc_op_name(op_type[op]), tc_status_name(o->res.Status), o->res.ProviderErrorCode);
        return false;
    }
    return true;
}

uint64_t nconn_op_us(const struct nconn *n, int op)
{
    const struct op *o = &n->ops[op];
    return o->t_done > o->t_post ? o->t_done - o->t_post : 0;
}

bool nconn_end(struct nconn *n)
{
    bool ok = tc_conn_teardown(&n->c);
    free(n->pdata_out);
    free(n);
    return ok;
}
