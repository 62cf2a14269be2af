/* Memory protection over real TCP. One side (A) attacks memory of the other
 * (T) with remote Writes and Reads through an invalid STag, a deregistered
 * one, an invalidated fast-registered one, one of another PD, one byte
 * before the region, one byte past its end, and without the access right,
 * and through the token of a fast registration whose pages lie in no LAM
 * (refused when posted) or whose LAM was released after it executed;
 * with a Send into a receive buffer that is too small and a Send with no
 * receive posted; and with SendAndInvalidate of foreign, unknown and already
 * invalid STags. Every buffer sits between PROT_NONE guard pages, and the
 * region under attack is flush against a guard page on the side the access
 * oversteps, so a provider that places or reads outside a region crashes
 * the test.
 *
 * For each attack: the right completion status on both sides; every request
 * outstanding on either side completes exactly once (counted by
 * RequestContext); the disconnect event fires on both sides; the bytes
 * around (and, where nothing may be placed, inside) the region are
 * unchanged; and a new connection between the same two adapters works.
 *
 * Contract: NdkRead, NdkWrite, NdkSend, NdkSendAndInvalidate, NDK_RESULT_EX;
 * the receive checks of docs/rules.md (R9-R21) and their Terminates (RFC 5040
 * section 7, RFC 5041 section 7).
 * libndk decisions relied on: a Write/Send completes locally once handed to
 * TCP (RFC 5040 rule 14), so a remote protection error on a Write shows as
 * the connection failing: later and outstanding requests complete with
 * STATUS_CANCELLED and the disconnect event fires; a Read whose source is
 * invalid completes with STATUS_ACCESS_VIOLATION (bounds:
 * STATUS_REMOTE_RESOURCES) and ProviderErrorCode = the Terminate control
 * word; a receive whose buffer is too small completes with
 * STATUS_BUFFER_TOO_SMALL. */
#include "dptest.h"

#define REGION 8192u  /* bytes of the region under attack */
#define CANARY 512u   /* bytes checked on the side of the region away from the guard */
#define CANARY_BYTE 0xC5
#define SINK_BYTE 0x5C

/* Terminate control words without the M/D/R flag bits (RFC 5040 section 4.8). */
#define TERM_RP(code) (0x01000000u | ((unsigned)(code) << 16)) /* RDMAP remote protection */
#define TERM_FLAGS_MASK 0x0000E000u

typedef enum { K_WRITE, K_READ, K_SEND, K_SEND_INV } kind;
typedef enum {
    T_INVALID_STAG,     /* a token nobody issued (valid index, wrong key) */
    T_DEREG,            /* deregistered before the attack */
    T_INVALIDATED_FRMR, /* fast-registered, then invalidated by its owner */
    T_OTHER_PD,         /* registered in another PD of the target */
    T_BEFORE,           /* the access starts one byte before the region */
    T_PAST_END,         /* the access ends one byte past the region */
    T_NO_RIGHT,         /* registered without the right the access needs */
    T_FRMR_NO_LAM,      /* NdkFastRegister of pages no LAM covers: refused, the token maps nothing */
    T_FRMR_LAM_GONE,    /* fast-registered, then its LAM released */
    T_SMALL_RECV,       /* Send: 64 bytes into a 16-byte receive */
    T_NO_RECV,          /* Send: nothing posted */
} target;

static const char *target_name[] = {"invalid STag",   "deregistered STag", "invalidated FRMR",
                                    "another PD",     "first byte before", "one byte past the end",
                                    "no access right", "FRMR pages in no LAM", "FRMR whose LAM was released",
                                    "receive too small", "no receive posted"};

typedef struct world {
    dp_side a, t;
    NDK_PD *pd2;     /* T's second PD */
    dp_mr ok;        /* T: a region A may read, for the follow-up Read */
    dp_mr src;       /* A: source of Writes and Sends */
    dp_mr sink;      /* A: sinks of the attacking Read (first half) and the follow-up */
} world;

static bool world_open(world *w)
{
    memset(w, 0, sizeof *w);
    if (!dp_side_open(&w->a) || !dp_side_open(&w->t))
        return false;
    w->pd2 = dp_pd_new(&w->t);
    return w->pd2 && dp_buf_reg(&w->t, &w->ok, 4096, NDK_MR_FLAG_ALLOW_REMOTE_READ, 7) &&
           dp_buf_reg(&w->a, &w->src, 4096, 0, 8) &&
           dp_buf_reg(&w->a, &w->sink, 8192, DP_SINK_FLAGS, 0);
}

static void world_close(world *w)
{
    dp_mr_close(&w->ok);
    dp_mr_close(&w->src);
    dp_mr_close(&w->sink);
    dp_close(w->pd2);
    dp_side_close(&w->a);
    dp_side_close(&w->t);
}

/* A fresh connection between the same adapters carries a Send and a Read:
 * the failures left nothing behind that breaks the adapters. */
static void fresh_connection_works(world *w)
{
    dp_conn *c = dp_conn_new(&w->a, &w->t, NULL);
    if (!c || !dp_conn_establish(c)) {
        tl_failures++;
        fprintf(stderr, "[%s] no new connection after the attack\n", tl_current);
        dp_conn_close(c);
        return;
    }
    CHECK(dp_roundtrip(c, 200, 99));
    NDK_SGE k = dp_sge(&w->sink, 4096, 64);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(0x7100), &k, 1, w->ok.addr, w->ok.rtok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX e;
    DP_WAIT(c->cqa, &e, 1);
    DP_CHECK_CQE(e, STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(0x7100), -1);
    DP_CHECK_DATA(w->sink.addr + 4096, 64, 7, 0);
    dp_conn_close(c);
}

/* Expected completion of one request. */
typedef struct expect {
    void *ctx;
    NTSTATUS st;      /* 0 with any_error: any status but STATUS_SUCCESS */
    NTSTATUS alt;     /* another acceptable status, when not 0 */
    bool any_error;
    ULONG pec;        /* expected ProviderErrorCode without the M/D/R bits; 0: none checked */
    bool seen;
} expect;

/*
 * Collects n completions from c (fewer if they do not come), then checks
 * that each expected request completed exactly once with its status and
 * nothing else completed.
 */
static void check_side(const char *side, dp_cq *c, expect *x, unsigned n)
{
    NDK_RESULT_EX r[16];
    ULONG got = dp_wait_ex(c, r, n, DP_WAIT_MS);
    got += dp_quiet(c, r + got, 16 - got, DP_QUIET_MS);
    if (got != n) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: %lu completions, expected %u\n", tl_current, side,
                (unsigned long)got, n);
    }
    for (ULONG i = 0; i < got && i < 16; i++) {
        expect *e = NULL;
        for (unsigned j = 0; j < n; j++)
            if (x[j].ctx == r[i].RequestContext)
                e = &x[j];
        if (!e) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: unexpected completion ctx %p %s\n", tl_current, side,
                    r[i].RequestContext, ndk_status_name(r[i].Status));
            continue;
        }
        if (e->seen) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: ctx %p completed twice\n", tl_current, side, e->ctx);
        }
        e->seen = true;
        bool ok = e->any_error ? r[i].Status != STATUS_SUCCESS
                               : r[i].Status == e->st || (e->alt && r[i].Status == e->alt);
        if (!ok || e->alt) {
            fprintf(stderr, "    %s: ctx %p completed with %s (ProviderErrorCode 0x%08x)\n", side,
                    e->ctx, ndk_status_name(r[i].Status), r[i].ProviderErrorCode);
        }
        if (!ok) {
            char gb[64];
            snprintf(gb, sizeof gb, "%s", ndk_status_name(r[i].Status));
            tl_failures++;
            fprintf(stderr, "[%s] %s: ctx %p completed with %s, expected %s\n", tl_current, side,
                    e->ctx, gb, e->any_error ? "an error" : ndk_status_name(e->st));
        } else if (e->any_error) {
            fprintf(stderr, "    %s: ctx %p completed with %s\n", side, e->ctx,
                    ndk_status_name(r[i].Status));
        }
        if (r[i].Status == STATUS_SUCCESS)
            CHECK_EQ(r[i].ProviderErrorCode, 0);
        if (e->pec && r[i].Status == e->st &&
            (r[i].ProviderErrorCode & ~TERM_FLAGS_MASK) != e->pec) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: ctx %p ProviderErrorCode 0x%08x, expected the Terminate "
                            "control word 0x%08x (M/D/R bits aside)\n",
                    tl_current, side, e->ctx, r[i].ProviderErrorCode, e->pec);
        }
    }
    for (unsigned j = 0; j < n; j++) {
        if (!x[j].seen) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: ctx %p never completed\n", tl_current, side, x[j].ctx);
        }
    }
}

#define CTX_X DP_CTX(0x100)  /* the attack */
#define CTX_F DP_CTX(0x101)  /* A's follow-up Read, outstanding behind it */
#define CTX_A1 DP_CTX(0x102) /* A's posted receive */
#define CTX_T1 DP_CTX(0x201) /* T's receives */
#define CTX_T2 DP_CTX(0x202)

/* One attack on a new connection; see the file comment for what is checked. */
static void attack(world *w, kind k, target t)
{
    static const char *kind_name[] = {"Write", "Read", "Send", "SendAndInvalidate"};
    fprintf(stderr, "  %s: %s\n", kind_name[k], target_name[t]);
    dp_conn *c = dp_conn_new(&w->a, &w->t, NULL);
    if (!c || !dp_conn_establish(c)) {
        tl_failures++;
        dp_conn_close(c);
        return;
    }
    /* The region: flush against the lower guard page when the access
     * oversteps its start, against the upper one otherwise; CANARY bytes on
     * the other side. */
    bool low = t == T_BEFORE;
    uint8_t *area = dp_guarded(REGION + CANARY, !low, CANARY_BYTE);
    uint8_t *base = low ? area : area + CANARY;
    uint8_t *canary = low ? area + REGION : area;
    dp_fill(base, REGION, 50 + t, 0);

    /* Register it the way the target kind asks for. */
    ULONG rw = NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ;
    dp_mr mr;
    memset(&mr, 0, sizeof mr);
    dp_frmr f;
    memset(&f, 0, sizeof f);
    UINT32 tok = 0;
    uint8_t *raddr = base + 100;
    ULONG alen = 64;
    bool ok = true;
    switch (t) {
    case T_INVALIDATED_FRMR:
        ok = dp_frmr_init(&w->t, &f, base, REGION, TRUE);
        if (ok) {
            ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
            DP_CHECK_ST(dp_frmr_post(c->qp, DP_CTX(0x300), &f, base, fl), STATUS_SUCCESS);
            DP_CHECK_ST(c->qp->Dispatch->NdkInvalidate(c->qp, DP_CTX(0x301), &f.mr->Header, 0),
                        STATUS_SUCCESS);
            NDK_RESULT_EX e[2];
            DP_WAIT(c->cqp, e, 2);
            DP_CHECK_ST(e[0].Status, STATUS_SUCCESS);
            DP_CHECK_ST(e[1].Status, STATUS_SUCCESS);
            tok = f.tok;
        }
        break;
    case T_FRMR_NO_LAM:
    case T_FRMR_LAM_GONE:
        ok = dp_frmr_init(&w->t, &f, base, REGION, TRUE);
        if (ok) {
            ULONG fl = NDK_OP_FLAG_ALLOW_REMOTE_WRITE | NDK_OP_FLAG_ALLOW_REMOTE_READ;
            if (t == T_FRMR_LAM_GONE) {
                DP_CHECK_ST(dp_frmr_post(c->qp, DP_CTX(0x300), &f, base, fl), STATUS_SUCCESS);
                NDK_RESULT_EX e;
                DP_WAIT(c->cqp, &e, 1);
                DP_CHECK_ST(e.Status, STATUS_SUCCESS);
            }
            /* The consumer keeps its copy of the page array; the adapter
             * no longer maps those pages. */
            f.ad->Dispatch->NdkReleaseLAM(f.ad, f.lam);
            if (t == T_FRMR_NO_LAM)
                DP_CHECK_ST(dp_frmr_post(c->qp, DP_CTX(0x300), &f, base, fl), STATUS_INVALID_PARAMETER);
            f.lam = NULL;
            tok = f.mr->Dispatch->NdkGetRemoteTokenFromMr(f.mr);
        }
        break;
    case T_OTHER_PD:
        DP_CHECK_ST(dp_mr_reg_pd(w->pd2, &mr, base, REGION, rw), STATUS_SUCCESS);
        tok = mr.rtok;
        break;
    case T_NO_RIGHT:
        /* The other remote right only. */
        ok = dp_mr_reg(&w->t, &mr, base, REGION,
                       k == K_WRITE ? NDK_MR_FLAG_ALLOW_REMOTE_READ
                                    : NDK_MR_FLAG_ALLOW_REMOTE_WRITE);
        tok = mr.rtok;
        break;
    case T_SMALL_RECV:
    case T_NO_RECV:
        break;
    default:
        ok = dp_mr_reg(&w->t, &mr, base, REGION, rw);
        tok = mr.rtok;
        if (t == T_INVALID_STAG)
            tok ^= 0xA5u;
        if (t == T_DEREG && ok)
            DP_CHECK_ST(dp_mr_dereg(&mr), STATUS_SUCCESS);
        if (t == T_BEFORE) {
            raddr = base - 1;
            alen = 16;
        }
        if (t == T_PAST_END) {
            raddr = base + REGION - 15;
            alen = 16;
        }
        break;
    }
    if (!ok) {
        tl_failures++;
        dp_conn_close(c);
        dp_mr_close(&mr);
        dp_frmr_close(&f);
        return;
    }

    /* T's receives. For a too-small receive the first buffer is 16 bytes
     * ending at a guard page. */
    dp_mr rr;
    uint8_t *rarea = dp_guarded(4096 + 16, true, CANARY_BYTE);
    REQUIRE(dp_mr_reg(&w->t, &rr, rarea, 4096 + 16, NDK_MR_FLAG_ALLOW_LOCAL_WRITE));
    uint8_t *small = rarea + 4096;
    unsigned nt = 0;
    if (t != T_NO_RECV) {
        NDK_SGE r1 = t == T_SMALL_RECV ? dp_sge(&rr, 4096, 16) : dp_sge(&rr, 0, 1024);
        NDK_SGE r2 = dp_sge(&rr, 2048, 1024);
        DP_CHECK_ST(dp_recv(c->qp, CTX_T1, &r1, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_recv(c->qp, CTX_T2, &r2, 1), STATUS_SUCCESS);
        nt = 2;
    }
    /* A's receive, never matched. */
    dp_mr ar;
    uint8_t *ab = dp_buf_reg(&w->a, &ar, 1024, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(ab);
    NDK_SGE ars = dp_sge(&ar, 0, 1024);
    DP_CHECK_ST(dp_recv(c->qa, CTX_A1, &ars, 1), STATUS_SUCCESS);

    /* The attack, then the follow-up Read of a valid region. The attack is
     * posted with DEFER (rules D1-D5), so both reach the engine together when the
     * Read is posted: the Read is certain to be outstanding behind the
     * attack, never posted after the connection already failed. */
    memset(w->sink.addr, SINK_BYTE, 8192);
    NDK_SGE g = dp_sge(&w->src, 0, k == K_SEND ? 64 : alen);
    NDK_SGE ks = dp_sge(&w->sink, 0, alen);
    NDK_SGE fs = dp_sge(&w->sink, 4096, 64);
    NTSTATUS st = STATUS_UNSUCCESSFUL;
    switch (k) {
    case K_WRITE: st = dp_write(c->qa, CTX_X, &g, 1, raddr, tok, NDK_OP_FLAG_DEFER); break;
    case K_READ: st = dp_read(c->qa, CTX_X, &ks, 1, raddr, tok, NDK_OP_FLAG_DEFER); break;
    case K_SEND: st = dp_send(c->qa, CTX_X, &g, 1, NDK_OP_FLAG_DEFER); break;
    case K_SEND_INV:
        st = c->qa->Dispatch->NdkSendAndInvalidate(c->qa, CTX_X, &g, 1, NDK_OP_FLAG_DEFER, tok);
        break;
    }
    DP_CHECK_ST(st, STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, CTX_F, &fs, 1, w->ok.addr, w->ok.rtok, 0), STATUS_SUCCESS);

    /* A's side. */
    expect ea[3] = {{.ctx = CTX_X, .st = STATUS_SUCCESS},
                    {.ctx = CTX_F, .st = STATUS_CANCELLED},
                    {.ctx = CTX_A1, .st = STATUS_CANCELLED}};
    if (k == K_READ) {
        bool bounds = t == T_BEFORE || t == T_PAST_END;
        ea[0].st = bounds ? STATUS_REMOTE_RESOURCES : STATUS_ACCESS_VIOLATION;
        /* RDMAP remote protection codes (rule R19). */
        ea[0].pec = TERM_RP(bounds ? 0x01 : t == T_NO_RIGHT ? 0x02 : t == T_OTHER_PD ? 0x03 : 0x00);
    }
    check_side("A", c->cqa, ea, 3);
    /* T's side. */
    expect et[2] = {{.ctx = CTX_T1, .st = STATUS_CANCELLED},
                    {.ctx = CTX_T2, .st = STATUS_CANCELLED}};
    if (t == T_SMALL_RECV)
        et[0].st = STATUS_BUFFER_TOO_SMALL;
    if (k == K_SEND_INV) {
        et[0].any_error = true; /* the receive the bad Send matched */
        et[0].st = 0;
    }
    check_side("T", c->cqp, et, nt);

    /* Both sides learn that the connection is gone. */
    if (!tl_event_wait(&c->disc_a, 1, DP_WAIT_MS)) {
        tl_failures++;
        fprintf(stderr, "[%s] no disconnect event on the attacking side\n", tl_current);
    }
    if (!tl_event_wait(&c->disc_p, 1, DP_WAIT_MS)) {
        tl_failures++;
        fprintf(stderr, "[%s] no disconnect event on the attacked side\n", tl_current);
    }

    /* Memory: nothing outside the region moved; nothing inside it either,
     * since every access was refused as a whole. */
    DP_CHECK_BYTES(canary, CANARY, CANARY_BYTE);
    DP_CHECK_DATA(base, REGION, 50 + t, 0);
    if (k == K_READ)
        DP_CHECK_BYTES(w->sink.addr, 4096, SINK_BYTE);
    /* A receive buffer keeps its surroundings: what precedes the small
     * buffer, and T's second receive area (cancelled, never matched). */
    DP_CHECK_BYTES(rarea + 1024, 1024, CANARY_BYTE);
    DP_CHECK_BYTES(rarea + 3072, 1024, CANARY_BYTE);
    if (t == T_SMALL_RECV)
        DP_CHECK_BYTES(rarea, 1024, CANARY_BYTE);
    (void)small;

    dp_conn_close(c);
    dp_mr_close(&mr);
    dp_frmr_close(&f);
    dp_mr_close(&rr);
    dp_mr_close(&ar);
    fresh_connection_works(w);
}

static void run_targets(kind k, const target *ts, unsigned n)
{
    world w;
    if (!world_open(&w)) {
        tl_failures++;
        return;
    }
    for (unsigned i = 0; i < n; i++)
        attack(&w, k, ts[i]);
    world_close(&w);
}

static const target memory_targets[] = {T_INVALID_STAG, T_DEREG,      T_INVALIDATED_FRMR,
                                        T_OTHER_PD,     T_BEFORE,     T_PAST_END,
                                        T_NO_RIGHT,     T_FRMR_NO_LAM, T_FRMR_LAM_GONE};

/* Remote Writes (rules R12-R16): refused by the target, which
 * ends the connection with a Terminate. */
DP_CASE(remote_write_violations)
{
    run_targets(K_WRITE, memory_targets, sizeof memory_targets / sizeof memory_targets[0]);
}

/* Remote Reads (row 19): the Read completes with the status the Terminate
 * implies and its control word as ProviderErrorCode. */
DP_CASE(remote_read_violations)
{
    run_targets(K_READ, memory_targets, sizeof memory_targets / sizeof memory_targets[0]);
}

/* Sends (rules R9 and R11): a message longer than the receive
 * buffer, and a message with no receive posted, are fatal to the stream. */
DP_CASE(send_violations)
{
    static const target ts[] = {T_SMALL_RECV, T_NO_RECV};
    run_targets(K_SEND, ts, 2);
}

/* SendAndInvalidate of an STag the receiver may not invalidate (row 21,
 * 5.9.9: "the receiving provider must abort the connection"): one of another
 * PD, one nobody issued, and one already invalidated. */
DP_CASE(send_invalidate_violations)
{
    static const target ts[] = {T_OTHER_PD, T_INVALID_STAG, T_INVALIDATED_FRMR};
    run_targets(K_SEND_INV, ts, 3);
}

/*
 * Which Read the Terminate names (RFC 5040 section 7: a Terminate for a
 * Read Request carries that request's RDMA header): a valid 4 MiB Read is
 * still being answered when the Read behind it turns out invalid. The invalid one
 * completes with STATUS_ACCESS_VIOLATION and the Terminate's control word;
 * the valid one either got its whole answer (STATUS_SUCCESS) or was cut off
 * (STATUS_CANCELLED), but is never blamed for the other's fault; the Read
 * behind both is cancelled.
 */
DP_CASE(bad_read_behind_large_read)
{
    world w;
    REQUIRE(world_open(&w));
    for (int round = 0; round < 3; round++) {
        dp_conn *c = dp_conn_new(&w.a, &w.t, NULL);
        REQUIRE(c && dp_conn_establish(c));
        dp_mr big, bsink;
        uint8_t *b = dp_buf_reg(&w.t, &big, 4 * 1024 * 1024, NDK_MR_FLAG_ALLOW_REMOTE_READ, 60);
        uint8_t *k = dp_buf_reg(&w.a, &bsink, 4 * 1024 * 1024, DP_SINK_FLAGS, 0);
        REQUIRE(b && k);
        NDK_SGE all = dp_sge(&bsink, 0, 4 * 1024 * 1024);
        NDK_SGE ks = dp_sge(&w.sink, 0, 64), fs = dp_sge(&w.sink, 4096, 64);
        ULONG D = NDK_OP_FLAG_DEFER;
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(0x110), &all, 1, b, big.rtok, D), STATUS_SUCCESS);
        DP_CHECK_ST(dp_read(c->qa, CTX_X, &ks, 1, w.ok.addr, w.ok.rtok ^ 0xA5u, D), STATUS_SUCCESS);
        DP_CHECK_ST(dp_read(c->qa, CTX_F, &fs, 1, w.ok.addr, w.ok.rtok, 0), STATUS_SUCCESS);
        expect ea[3] = {{.ctx = DP_CTX(0x110), .st = STATUS_SUCCESS, .alt = STATUS_CANCELLED},
                        {.ctx = CTX_X, .st = STATUS_ACCESS_VIOLATION, .pec = TERM_RP(0x00)},
                        {.ctx = CTX_F, .st = STATUS_CANCELLED}};
        check_side("A", c->cqa, ea, 3);
        CHECK(tl_event_wait(&c->disc_a, 1, DP_WAIT_MS));
        CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
        dp_conn_close(c);
        dp_mr_close(&big);
        dp_mr_close(&bsink);
    }
    fresh_connection_works(&w);
    world_close(&w);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(remote_write_violations);
    RUN_FAM(remote_read_violations);
    RUN_FAM(send_violations);
    RUN_FAM(send_invalidate_violations);
    RUN_FAM(bad_read_behind_large_read);
    return tl_finish();
}
