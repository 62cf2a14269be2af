#include "cqfx.h"

bool cqfx_open(cqfx *f, const dp_cfg *cfg)
{
    memset(f, 0, sizeof *f);
    if (!dp_pair_open(&f->x, cfg))
        return false;
    f->c = f->x.c;
    f->c->cqp->poll_only = true;
    if (f->c->rcqp != f->c->cqp)
        f->c->rcqp->poll_only = true;
    f->next_rctx = 1000;
    f->next_sctx = 1;
    return dp_buf_reg(&f->x.a, &f->ms, 4096, 0, 1) &&
           dp_buf_reg(&f->x.p, &f->rr, 64 * 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) &&
           dp_buf_reg(&f->x.p, &f->src, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 2) &&
           dp_buf_reg(&f->x.a, &f->sink, 64, DP_SINK_FLAGS, 0);
}

void cqfx_close(cqfx *f)
{
    dp_mr_close(&f->ms);
    dp_mr_close(&f->rr);
    dp_mr_close(&f->src);
    dp_mr_close(&f->sink);
    dp_pair_close(&f->x);
}

void cqfx_moderate(dp_cq *c, ULONG interval, ULONG count)
{
    DP_CHECK_ST(c->cq->Dispatch->NdkControlCqInterruptModeration(c->cq, interval, count),
                STATUS_SUCCESS);
}

void cqfx_post_receives(cqfx *f, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        unsigned k = f->next_rctx++;
        NDK_SGE r = dp_sge(&f->rr, (size_t)(k % 64) * 64, 64);
        DP_CHECK_ST(dp_recv(f->c->qp, DP_CTX(k), &r, 1), STATUS_SUCCESS);
    }
}

void cqfx_send(cqfx *f, ULONG flags)
{
    NDK_SGE g = dp_sge(&f->ms, 0, 16);
    DP_CHECK_ST(dp_send(f->c->qa, DP_CTX(f->next_sctx++), &g, 1, flags), STATUS_SUCCESS);
}

/*
 * An inbound Read Request is served only after all earlier inbound messages
 * were delivered (RFC 5040 section 5.5), so when a Read posted after the
 * messages completes, their receive completions exist.
 */
void cqfx_sync_delivered(cqfx *f)
{
    NDK_SGE k = dp_sge(&f->sink, 0, 64);
    DP_CHECK_ST(dp_read(f->c->qa, DP_CTX(9999), &k, 1, f->src.addr, f->src.rtok, 0),
                STATUS_SUCCESS);
    NDK_RESULT_EX e[64];
    for (;;) {
        ULONG n = dp_wait_ex(f->c->cqa, e, 1, DP_WAIT_MS);
        if (n != 1) {
            tl_failures++;
            fprintf(stderr, "[%s] the synchronising Read did not complete\n", tl_current);
            return;
        }
        DP_CHECK_ST(e[0].Status, STATUS_SUCCESS);
        if (e[0].RequestContext == DP_CTX(9999))
            return;
    }
}

void cqfx_drain_receives(cqfx *f, ULONG n)
{
    NDK_RESULT_EX e[64];
    ULONG got = dp_wait_ex(f->c->rcqp, e, n, DP_WAIT_MS);
    CHECK_EQ(got, n);
    for (ULONG i = 0; i < got; i++) {
        DP_CHECK_ST(e[i].Status, STATUS_SUCCESS);
        CHECK(e[i].Type == NdkOperationTypeReceive);
    }
}
