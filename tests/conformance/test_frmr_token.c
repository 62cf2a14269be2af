/*
 * Which remote token a fast-register MR has (docs/behaviour.md, "Memory").
 * By default it keeps the token NdkGetRemoteTokenFromMr gave once
 * NdkInitializeFastRegisterMr completed: a consumer that caches it hands
 * it out for every fast registration, and each registration takes effect
 * under it. While the MR is invalidated that token maps nothing, until the
 * next fast registration. With NDK_OPEN_FLAG_FRMR_NEW_TOKEN every fast
 * registration gives a new token, and an older one is refused for good.
 */
#include "dptest.h"

#define ROUNDS 3
#define RW_FLAGS (NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ)

/* Each round registers the region at its own base address, so an access
 * that lands proves which registration the token named. */
static void *round_base(unsigned i)
{
    return (void *)(uintptr_t)(0x40000000u + 0x100000u * i);
}

struct world {
    dp_pair x;
    dp_conn *c;
    uint8_t *tgt;  /* the fast-registered buffer (passive side) */
    size_t len;
    dp_frmr f;
    dp_mr src, sink; /* active side */
};

static bool world_open(struct world *w, ULONG passive_flags)
{
    memset(w, 0, sizeof *w);
    if (!dp_side_open(&w->x.a) || !dp_side_open_flags(&w->x.p, passive_flags))
        return false;
    w->c = w->x.c = dp_conn_new(&w->x.a, &w->x.p, NULL);
    if (!w->c || !dp_conn_establish(w->c))
        return false;
    w->len = 2 * dp_page();
    w->tgt = dp_guarded(w->len, false, 0);
    uint8_t *s = dp_buf_reg(&w->x.a, &w->src, 4096, 0, 7);
    uint8_t *k = dp_buf_reg(&w->x.a, &w->sink, 4096, DP_SINK_FLAGS, 0);
    return w->tgt && s && k && dp_frmr_init(&w->x.p, &w->f, w->tgt, w->len, TRUE);
}

static void world_close(struct world *w)
{
    dp_mr_close(&w->src);
    dp_mr_close(&w->sink);
    dp_frmr_close(&w->f);
    dp_pair_close(&w->x);
}

static void expect_one(dp_cq *cq, NTSTATUS st, NDK_OPERATION_TYPE type, void *ctx)
{
    NDK_RESULT_EX r;
    ULONG got = dp_wait_ex(cq, &r, 1, DP_WAIT_MS);
    CHECK_EQ(got, 1);
    if (got == 1) {
        DP_CHECK_ST(r.Status, st);
        CHECK_EQ(r.Type, type);
        CHECK(r.RequestContext == ctx);
    }
}

/* Fast-registers the region at round i's base on the passive QP. */
static void fast_register(struct world *w, unsigned i)
{
    DP_CHECK_ST(dp_frmr_post(w->c->qp, DP_CTX(0x100 + i), &w->f, round_base(i), RW_FLAGS),
                STATUS_SUCCESS);
    expect_one(w->c->cqp, STATUS_SUCCESS, NdkOperationTypeFastRegister, DP_CTX(0x100 + i));
}

/* The peer Writes 64 octets at offset off of round i's region under tok;
 * they land at tgt + off. */
static void write_lands(struct world *w, unsigned i, UINT32 tok, size_t off)
{
    NDK_SGE s = dp_sge(&w->src, 0, 64);
    uint8_t *raddr = (uint8_t *)round_base(i) + off;
    DP_CHECK_ST(dp_write(w->c->qa, DP_CTX(0x200 + i), &s, 1, raddr, tok, 0), STATUS_SUCCESS);
    expect_one(w->c->cqa, STATUS_SUCCESS, NdkOperationTypeWrite, DP_CTX(0x200 + i));
    /* A Read behind the Write returns once the Write was placed (RFC 5040
     * ordering), and must bring the same octets back. */
    NDK_SGE k = dp_sge(&w->sink, 0, 64);
    DP_CHECK_ST(dp_read(w->c->qa, DP_CTX(0x300 + i), &k, 1, raddr, tok, 0), STATUS_SUCCESS);
    expect_one(w->c->cqa, STATUS_SUCCESS, NdkOperationTypeRead, DP_CTX(0x300 + i));
    DP_CHECK_DATA(w->tgt + off, 64, 7, 0);
    DP_CHECK_DATA(w->sink.addr, 64, 7, 0);
}

/* The peer Reads under tok at round i's base: refused (the Read completes
 * with STATUS_ACCESS_VIOLATION and the connection ends), nothing placed. */
static void read_refused(struct world *w, unsigned i, UINT32 tok)
{
    memset(w->sink.addr, 0x5C, 64);
    NDK_SGE k = dp_sge(&w->sink, 0, 64);
    DP_CHECK_ST(dp_read(w->c->qa, DP_CTX(0x400 + i), &k, 1, round_base(i), tok, 0),
                STATUS_SUCCESS);
    expect_one(w->c->cqa, STATUS_ACCESS_VIOLATION, NdkOperationTypeRead, DP_CTX(0x400 + i));
    DP_CHECK_BYTES(w->sink.addr, 64, 0x5C);
}

DP_CASE(cached_token_names_every_fast_registration)
{
    struct world w;
    REQUIRE(world_open(&w, 0));
    /* Read once, right after NdkInitializeFastRegisterMr, and cached. */
    UINT32 tok = w.f.mr->Dispatch->NdkGetRemoteTokenFromMr(w.f.mr);
    CHECK(tok != 0);
    int f0 = tl_failures;
    for (unsigned i = 0; i < ROUNDS && tl_failures == f0; i++) {
        fast_register(&w, i);
        CHECK_EQ(w.f.tok, tok);
        write_lands(&w, i, tok, 128 * (i + 1));
        /* Invalidated: the token names nothing locally... */
        DP_CHECK_ST(w.c->qp->Dispatch->NdkInvalidate(w.c->qp, DP_CTX(0x500 + i), &w.f.mr->Header,
                                                     0),
                    STATUS_SUCCESS);
        expect_one(w.c->cqp, STATUS_SUCCESS, NdkOperationTypeInvalidate, DP_CTX(0x500 + i));
        NDK_SGE dead = {.VirtualAddress = round_base(i), .Length = 8, .MemoryRegionToken = tok};
        DP_CHECK_ST(dp_recv(w.c->qp, DP_CTX(0x600 + i), &dead, 1), STATUS_ACCESS_VIOLATION);
        CHECK_EQ(w.f.mr->Dispatch->NdkGetRemoteTokenFromMr(w.f.mr), tok);
    }
    /* ... nor remotely, until the next fast registration. */
    read_refused(&w, ROUNDS - 1, tok);
    world_close(&w);
}

DP_CASE(new_token_flag_refuses_older_tokens)
{
    struct world w;
    REQUIRE(world_open(&w, NDK_OPEN_FLAG_FRMR_NEW_TOKEN));
    UINT32 tok0 = w.f.mr->Dispatch->NdkGetRemoteTokenFromMr(w.f.mr);
    UINT32 prev = tok0;
    int f0 = tl_failures;
    for (unsigned i = 0; i < ROUNDS && tl_failures == f0; i++) {
        fast_register(&w, i);
        CHECK(w.f.tok != prev);
        CHECK(w.f.tok != tok0);
        write_lands(&w, i, w.f.tok, 64);
        prev = w.f.tok;
    }
    /* The region is registered at the last round's base; the token of the
     * round before names nothing any more, although the MR is valid. */
    fast_register(&w, ROUNDS);
    read_refused(&w, ROUNDS, prev);
    world_close(&w);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(cached_token_names_every_fast_registration);
    RUN_FAM(new_token_flag_refuses_older_tokens);
    return tl_finish();
}
