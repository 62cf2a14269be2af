/*
 * Receiver not ready (docs/behaviour.md): a Send that finds no posted
 * receive does not end the connection at once. The receiver stops reading
 * that connection until a receive is posted (to the QP or its SRQ), or
 * until ReceiveGraceMs passed; only then does it send the Terminate of
 * RFC 5040 section 7.3 (DDP untagged, no buffer: (1,2,0x02)).
 * NDK_OPEN_FLAG_NO_RECEIVE_GRACE makes it terminate at once.
 *
 * The receives posted "late" are posted after a quiet check on the
 * receiver's CQ (DP_QUIET_MS): that wait is the delay under test, and it
 * also checks that nothing completed in the meantime.
 *
 * Every case runs over both transports (the label shm runs this suite over
 * the same-host fast path). What differs is when the sender's Sends
 * complete: on iWARP once TCP took them, before any receive; over shared
 * memory a Send larger than a slot completes once the receiver pulled it
 * (docs/shm.md, Messages), and when the Terminate comes, the Send it names
 * completes as handed over and those behind it are cancelled.
 */
#include "dptest.h"

#define MSG 3000u
#define NMSG 3
#define SHORT_GRACE_MS 300u
/* The Terminate's control word without the M/D/R bits (docs/rules.md). */
#define TERM_NO_BUFFER 0x12020000u
#define TERM_FLAGS_MASK 0x0000E000u

/* Opens "lo" with the suite's options, this grace and these flags. */
static bool side_open(dp_side *s, ULONG grace_ms, ULONG flags)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.ReceiveGraceMs = grace_ms;
    o.Flags = flags;
    return dp_side_open_as(s, "lo", &o);
}

struct world {
    dp_pair x;
    dp_conn *c;
    dp_mr src, dst;
    dp_mr ok, sink; /* a region the active side may read, and its sink */
    NDK_SRQ *srq;
    bool shm; /* the connection took the same-host fast path */
};

static bool world_open(struct world *w, ULONG grace_ms, ULONG flags, bool srq)
{
    memset(w, 0, sizeof *w);
    if (!dp_side_open(&w->x.a) || !side_open(&w->x.p, grace_ms, flags))
        return false;
    dp_cfg cfg = dp_cfg_default();
    if (srq) {
        dp_req *r = dp_req_new("NdkCreateSrq");
        NDK_SRQ *q = NULL;
        NTSTATUS st;
        NTSTATUS ret = w->x.p.pd->Dispatch->NdkCreateSrq(w->x.p.pd, 16, 2, 0, NULL, NULL, NULL,
                                                         dp_create_cb, r, &q);
        w->srq = dp_created(r, ret, q, &st);
        DP_CHECK_ST(st, STATUS_SUCCESS);
        if (!w->srq)
            return false;
        cfg.srq_p = w->srq;
    }
    w->c = w->x.c = dp_conn_new(&w->x.a, &w->x.p, &cfg);
    w->shm = dp_over_shm(&w->x.a, &w->x.p);
    return w->c && dp_conn_establish(w->c) &&
           dp_buf_reg(&w->x.a, &w->src, NMSG * MSG, 0, 41) &&
           dp_buf_reg(&w->x.p, &w->dst, NMSG * MSG, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
}

static void world_close(struct world *w)
{
    dp_mr_close(&w->src);
    dp_mr_close(&w->dst);
    dp_conn_close(w->c);
    w->x.c = NULL;
    dp_close(w->srq);
    dp_pair_close(&w->x);
}

/* NMSG Sends from the active side, each MSG octets of src, in one
 * doorbell (the last post without NDK_OP_FLAG_DEFER, which with `last` is
 * that Read), so none can be refused because a Terminate came back before
 * it was posted. */
static void send_all(struct world *w, void (*last)(struct world *))
{
    for (unsigned i = 0; i < NMSG; i++) {
        NDK_SGE s = dp_sge(&w->src, i * MSG, MSG);
        ULONG fl = i + 1 < NMSG || last ? NDK_OP_FLAG_DEFER : 0;
        DP_CHECK_ST(dp_send(w->c->qa, DP_CTX(0x100 + i), &s, 1, fl), STATUS_SUCCESS);
    }
    if (last)
        last(w);
}

/* The NMSG Sends' completions: the first `done` succeeded, the rest were
 * cancelled. */
static void sends_done(struct world *w, unsigned done)
{
    NDK_RESULT_EX r[NMSG];
    DP_WAIT(w->c->cqa, r, NMSG);
    for (unsigned i = 0; i < NMSG; i++)
        DP_CHECK_CQE(r[i], i < done ? STATUS_SUCCESS : STATUS_CANCELLED, NdkOperationTypeSend,
                     dp_qpctx_a(w->c), DP_CTX(0x100 + i), -1);
}

/* On iWARP the Sends complete now, whether or not a receive waits for
 * them: TCP took them. */
static void sends_done_if_iwarp(struct world *w)
{
    if (!w->shm)
        sends_done(w, NMSG);
}

/* Posts the NMSG receives (to the QP, or its SRQ) and checks that every
 * message lands in order, whole. */
static void receive_all(struct world *w)
{
    for (unsigned i = 0; i < NMSG; i++) {
        NDK_SGE s = dp_sge(&w->dst, i * MSG, MSG);
        NTSTATUS st = w->srq ? w->srq->Dispatch->NdkSrqReceive(w->srq, DP_CTX(0x200 + i), &s, 1)
                             : dp_recv(w->c->qp, DP_CTX(0x200 + i), &s, 1);
        DP_CHECK_ST(st, STATUS_SUCCESS);
    }
    NDK_RESULT_EX r[NMSG];
    DP_WAIT(w->c->rcqp, r, NMSG);
    for (unsigned i = 0; i < NMSG; i++)
        DP_CHECK_CQE(r[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(w->c),
                     DP_CTX(0x200 + i), MSG);
    DP_CHECK_DATA(w->dst.addr, NMSG * MSG, 41, 0);
}

/* The default grace: receives posted after the Sends arrived, and after a
 * quiet spell, are in time; the connection stays up and keeps working. */
static void late_receive(bool srq)
{
    struct world w;
    REQUIRE(world_open(&w, 0, 0, srq));
    send_all(&w, NULL);
    sends_done_if_iwarp(&w);
    DP_CHECK_QUIET(w.c->rcqp);
    receive_all(&w);
    if (w.shm)
        sends_done(&w, NMSG);
    CHECK_EQ(tl_event_count(&w.c->disc_a), 0);
    CHECK_EQ(tl_event_count(&w.c->disc_p), 0);
    if (!srq)
        CHECK(dp_roundtrip(w.c, 500, 77));
    world_close(&w);
}

DP_CASE(receive_posted_late_is_in_time)
{
    late_receive(false);
}

DP_CASE(srq_receive_posted_late_is_in_time)
{
    late_receive(true);
}

/* No receive within the grace: the receiver sends the Terminate then, not
 * before. The sender's Sends completed (over shared memory: the one the
 * Terminate names; the rest were cancelled); its Read behind them, which
 * the paused receiver never read, completes with STATUS_CANCELLED and the
 * Terminate's control word; both sides get their disconnect event. */
/* The Read behind the Sends: a 64-octet Read of ok into sink. */
static void read_behind(struct world *w)
{
    NDK_SGE k = dp_sge(&w->sink, 0, 64);
    DP_CHECK_ST(dp_read(w->c->qa, DP_CTX(0x300), &k, 1, w->ok.addr, w->ok.rtok, 0),
                STATUS_SUCCESS);
}

static void no_receive(ULONG grace_ms, ULONG flags, unsigned min_ms, unsigned max_ms)
{
    struct world w;
    REQUIRE(world_open(&w, grace_ms, flags, false));
    dp_conn *c = w.c;
    uint8_t *okb = dp_buf_reg(&w.x.p, &w.ok, 64, NDK_MR_FLAG_ALLOW_REMOTE_READ, 5);
    uint8_t *snk = dp_buf_reg(&w.x.a, &w.sink, 64, DP_SINK_FLAGS, 0);
    REQUIRE(okb && snk);
    memset(snk, 0x5C, 64);
    uint64_t t0 = tl_now_ns();
    send_all(&w, read_behind);
    sends_done_if_iwarp(&w);
    CHECK(tl_event_wait(&c->disc_a, 1, DP_WAIT_MS));
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    if (w.shm)
        sends_done(&w, 1); /* the Terminate names the first */
    uint64_t ms = (tl_now_ns() - t0) / 1000000u;
    if (ms < min_ms || ms > max_ms) {
        tl_failures++;
        fprintf(stderr, "[%s] the Terminate came after %llu ms, not within [%u, %u]\n",
                tl_current, (unsigned long long)ms, min_ms, max_ms);
    }
    NDK_RESULT_EX r;
    DP_WAIT(c->cqa, &r, 1);
    DP_CHECK_CQE(r, STATUS_CANCELLED, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(0x300), -1);
    CHECK_EQ(r.ProviderErrorCode & ~TERM_FLAGS_MASK, TERM_NO_BUFFER);
    DP_CHECK_BYTES(snk, 64, 0x5C);
    /* The receiver's QP is in error: a receive posted now is flushed. */
    NDK_SGE s = dp_sge(&w.dst, 0, MSG);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x400), &s, 1), STATUS_SUCCESS);
    DP_WAIT(c->rcqp, &r, 1);
    DP_CHECK_CQE(r, STATUS_CANCELLED, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(0x400), -1);
    dp_mr_close(&w.ok);
    dp_mr_close(&w.sink);
    world_close(&w);
}

DP_CASE(no_receive_within_grace_terminates)
{
    no_receive(SHORT_GRACE_MS, 0, SHORT_GRACE_MS - 5, SHORT_GRACE_MS + 2000);
}

/* NDK_OPEN_FLAG_NO_RECEIVE_GRACE: at once, as RFC 5040 has it (well
 * before the default grace of 1 s would end). */
DP_CASE(no_grace_terminates_at_once)
{
    no_receive(0, NDK_OPEN_FLAG_NO_RECEIVE_GRACE, 0, 900);
}

/* NdkDisconnect on the waiting side: no receive will come, so the wait
 * ends at once with the Terminate, well before the grace (1 s) would, and
 * the disconnect completes as after any Terminate of ours
 * (docs/behaviour.md, "Terminates"): STATUS_CONNECTION_ABORTED. */
DP_CASE(disconnect_ends_the_wait)
{
    struct world w;
    REQUIRE(world_open(&w, 0, 0, false));
    send_all(&w, NULL);
    sends_done_if_iwarp(&w);
    uint64_t t0 = tl_now_ns();
    NTSTATUS st = dp_disconnect(w.c->cp);
    uint64_t ms = (tl_now_ns() - t0) / 1000000u;
    DP_CHECK_ST(st, STATUS_CONNECTION_ABORTED);
    CHECK(ms < 900);
    CHECK(tl_event_wait(&w.c->disc_a, 1, DP_WAIT_MS));
    if (w.shm)
        sends_done(&w, 1);
    world_close(&w);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(receive_posted_late_is_in_time);
    RUN_FAM(srq_receive_posted_late_is_in_time);
    RUN_FAM(no_receive_within_grace_terminates);
    RUN_FAM(no_grace_terminates_at_once);
    RUN_FAM(disconnect_ends_the_wait);
    return tl_finish();
}
