/*
 * Busy polling (NDK_OPEN_FLAG_BUSY_POLL, ndk.h): polling an empty CQ reads
 * the sockets of the QPs completing into it, and while consumers poll, the
 * progress thread stops waking for their input (an input lease), so that
 * poller and progress thread do not take turns on one CPU per message.
 * What a consumer relies on, whatever the leases do:
 *  - data moves both ways when both sides only ever poll;
 *  - a side that polled once and then neither polls nor arms still answers
 *    inbound RDMA Reads and places inbound Writes (a lease nobody renews
 *    ends on its own within milliseconds);
 *  - a side that polled and then arms its CQ and sleeps is notified;
 *  - a consumer sleeping on a QP's receive CQ is notified while another
 *    thread busy-polls the same QP's initiator CQ;
 *  - a connection disconnected while its input is leased ends cleanly;
 *  - a QP closed while another thread busy-polls its CQ goes without the
 *    poller reading what it freed (the poll walks the CQ's QPs without a
 *    lock: qp_poll.c), and its posted receive completes once, flushed.
 * Every wait is bounded (DP_WAIT_MS); none of these would finish if input
 * stayed unread.
 */
#include "dptest.h"

#define ROUNDS 50
#define MSG 256
#define BLOCK 4096

/* Two busy-polling adapters and a connection between them. */
typedef struct fx {
    dp_side a, p;
    dp_conn *c;
    dp_mr src, dst, region, sink;
} fx;

static bool fx_open(fx *f, bool split_cq)
{
    memset(f, 0, sizeof *f);
    if (!dp_side_open_flags(&f->a, NDK_OPEN_FLAG_BUSY_POLL) ||
        !dp_side_open_flags(&f->p, NDK_OPEN_FLAG_BUSY_POLL))
        return false;
    dp_cfg cfg = dp_cfg_default();
    cfg.split_cq = split_cq;
    f->c = dp_conn_new(&f->a, &f->p, &cfg);
    if (!f->c || !dp_conn_establish(f->c))
        return false;
    /* Waits poll (with sched_yield) and never arm, unless a case arms. */
    f->c->cqa->poll_only = f->c->rcqa->poll_only = true;
    f->c->cqp->poll_only = f->c->rcqp->poll_only = true;
    return dp_buf_reg(&f->a, &f->src, BLOCK, 0, 1) &&
           dp_buf_reg(&f->p, &f->dst, BLOCK, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0) &&
           dp_buf_reg(&f->p, &f->region, BLOCK,
                      NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                          NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                      2) &&
           dp_buf_reg(&f->a, &f->sink, BLOCK, DP_SINK_FLAGS, 0);
}

static void fx_close(fx *f)
{
    dp_mr_close(&f->src);
    dp_mr_close(&f->dst);
    dp_mr_close(&f->region);
    dp_mr_close(&f->sink);
    if (f->c)
        dp_conn_close(f->c);
    dp_side_close(&f->a);
    dp_side_close(&f->p);
}

/* Takes the passive side's input lease: a poll of its empty CQ. */
static void p_polls_once(fx *f)
{
    NDK_RESULT_EX e;
    CHECK_EQ(dp_get(f->c->rcqp, &e, 1), 0);
}

/* One completion on c: the expected request, successful. */
static void expect_one(dp_cq *c, void *ctx, NDK_OPERATION_TYPE type, long long bytes)
{
    NDK_RESULT_EX e;
    ULONG got = dp_wait_ex(c, &e, 1, DP_WAIT_MS);
    CHECK_EQ(got, 1);
    if (got == 1)
        DP_CHECK_CQE(e, STATUS_SUCCESS, type, e.QPContext, ctx, bytes);
}

/* An RDMA Write then an RDMA Read of the same bytes, seen from the active
 * side only: the passive side has to answer without its consumer. */
static void write_then_read(fx *f, uint32_t seed)
{
    dp_fill(f->src.addr, BLOCK, seed, 0);
    NDK_SGE w = dp_sge(&f->src, 0, BLOCK), r = dp_sge(&f->sink, 0, BLOCK);
    DP_CHECK_ST(dp_write(f->c->qa, DP_CTX(1), &w, 1, f->region.addr, f->region.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(f->c->qa, DP_CTX(2), &r, 1, f->region.addr, f->region.rtok, 0), STATUS_SUCCESS);
    expect_one(f->c->cqa, DP_CTX(1), NdkOperationTypeWrite, -1);
    expect_one(f->c->cqa, DP_CTX(2), NdkOperationTypeRead, -1);
    DP_CHECK_DATA(f->sink.addr, BLOCK, seed, 0);
    DP_CHECK_DATA(f->region.addr, BLOCK, seed, 0);
}

/* Both sides only poll: Sends, Writes and Reads, data checked. */
DP_CASE(polling_alone_moves_data)
{
    fx f;
    REQUIRE(fx_open(&f, false));
    for (uint32_t i = 0; i < ROUNDS; i++) {
        NDK_SGE rs = dp_sge(&f.dst, 0, MSG), ss = dp_sge(&f.src, 0, MSG);
        dp_fill(f.src.addr, MSG, 100 + i, 0);
        DP_CHECK_ST(dp_recv(f.c->qp, DP_CTX(10), &rs, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_send(f.c->qa, DP_CTX(11), &ss, 1, 0), STATUS_SUCCESS);
        expect_one(f.c->rcqp, DP_CTX(10), NdkOperationTypeReceive, MSG);
        expect_one(f.c->cqa, DP_CTX(11), NdkOperationTypeSend, -1);
        DP_CHECK_DATA(f.dst.addr, MSG, 100 + i, 0);
        write_then_read(&f, 1000 + i);
    }
    fx_close(&f);
}

/* The passive consumer polls once, then goes quiet (no poll, no arm): the
 * Reads and Writes aimed at it still complete, round after round. */
DP_CASE(quiet_poller_still_serves_reads)
{
    fx f;
    REQUIRE(fx_open(&f, false));
    for (uint32_t i = 0; i < 10; i++) {
        p_polls_once(&f);
        write_then_read(&f, 2000 + i);
    }
    fx_close(&f);
}

/* Polls, then arms and sleeps: the Send that follows is notified. */
DP_CASE(arm_after_polling_notifies)
{
    fx f;
    REQUIRE(fx_open(&f, false));
    for (uint32_t i = 0; i < 10; i++) {
        NDK_SGE rs = dp_sge(&f.dst, 0, MSG), ss = dp_sge(&f.src, 0, MSG);
        DP_CHECK_ST(dp_recv(f.c->qp, DP_CTX(20), &rs, 1), STATUS_SUCCESS);
        p_polls_once(&f);
        unsigned before = dp_cq_notified(f.c->rcqp);
        dp_arm(f.c->rcqp, NDK_CQ_NOTIFY_ANY);
        DP_CHECK_ST(dp_send(f.c->qa, DP_CTX(21), &ss, 1, 0), STATUS_SUCCESS);
        CHECK(tl_event_wait(&f.c->rcqp->notify, before + 1, DP_WAIT_MS));
        expect_one(f.c->rcqp, DP_CTX(20), NdkOperationTypeReceive, MSG);
        expect_one(f.c->cqa, DP_CTX(21), NdkOperationTypeSend, -1);
    }
    fx_close(&f);
}

/* Separate CQs: a thread sleeps on the receive CQ (armed) while the
 * consumer keeps polling the initiator CQ of the same QP. */
typedef struct sleeper {
    dp_cq *cq;
    unsigned want;
    bool woke;
} sleeper;

static void *sleep_on_cq(void *arg)
{
    sleeper *s = arg;
    s->woke = tl_event_wait(&s->cq->notify, s->want, DP_WAIT_MS);
    return NULL;
}

DP_CASE(sleeper_on_other_cq_is_notified)
{
    fx f;
    REQUIRE(fx_open(&f, true));
    for (uint32_t i = 0; i < 10; i++) {
        NDK_SGE rs = dp_sge(&f.dst, 0, MSG), ss = dp_sge(&f.src, 0, MSG);
        DP_CHECK_ST(dp_recv(f.c->qp, DP_CTX(30), &rs, 1), STATUS_SUCCESS);
        sleeper s = {.cq = f.c->rcqp, .want = dp_cq_notified(f.c->rcqp) + 1};
        dp_arm(f.c->rcqp, NDK_CQ_NOTIFY_ANY);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, sleep_on_cq, &s) == 0);
        /* The passive side's initiator CQ is polled the whole time. */
        NDK_RESULT_EX e;
        CHECK_EQ(dp_get(f.c->cqp, &e, 1), 0);
        DP_CHECK_ST(dp_send(f.c->qa, DP_CTX(31), &ss, 1, 0), STATUS_SUCCESS);
        uint64_t deadline = tl_now_ns() + (uint64_t)DP_WAIT_MS * 1000000u;
        while (dp_cq_notified(f.c->rcqp) < s.want && tl_now_ns() < deadline) {
            CHECK_EQ(dp_get(f.c->cqp, &e, 1), 0);
            sched_yield();
        }
        pthread_join(t, NULL);
        CHECK(s.woke);
        expect_one(f.c->rcqp, DP_CTX(30), NdkOperationTypeReceive, MSG);
        expect_one(f.c->cqa, DP_CTX(31), NdkOperationTypeSend, -1);
    }
    fx_close(&f);
}

/* Disconnected mid-lease, started from either end: the other consumer is
 * told (its progress thread sees the FIN although its input was leased),
 * both NdkDisconnect calls succeed, the posted receive is flushed once, and
 * nothing leaks (sanitizer builds). */
DP_CASE(disconnect_while_leased)
{
    for (int active_starts = 0; active_starts < 2; active_starts++) {
        fx f;
        REQUIRE(fx_open(&f, false));
        NDK_SGE rs = dp_sge(&f.dst, 0, MSG);
        DP_CHECK_ST(dp_recv(f.c->qp, DP_CTX(40), &rs, 1), STATUS_SUCCESS);
        p_polls_once(&f);
        NDK_RESULT_EX e;
        CHECK_EQ(dp_get(f.c->cqa, &e, 1), 0);
        NDK_CONNECTOR *first = active_starts ? f.c->ca : f.c->cp;
        NDK_CONNECTOR *second = active_starts ? f.c->cp : f.c->ca;
        dp_req *d = dp_req_new("NdkDisconnect (first)");
        d->started = true;
        d->returned = first->Dispatch->NdkDisconnect(first, dp_req_cb, d);
        CHECK(tl_event_wait(active_starts ? &f.c->disc_p : &f.c->disc_a, 1, DP_WAIT_MS));
        DP_CHECK_ST(dp_disconnect(second), STATUS_SUCCESS);
        DP_CHECK_ST(dp_finish(d, d->returned, DP_WAIT_MS), STATUS_SUCCESS);
        ULONG got = dp_wait_ex(f.c->rcqp, &e, 1, DP_WAIT_MS);
        CHECK_EQ(got, 1);
        if (got == 1)
            DP_CHECK_CQE(e, STATUS_CANCELLED, NdkOperationTypeReceive, dp_qpctx_p(f.c), DP_CTX(40), -1);
        fx_close(&f);
    }
}

/* A thread that polls one CQ until told to stop (the CQ's one consumer
 * meanwhile, C1), keeping the last completion it got. */
typedef struct poller {
    dp_cq *cq;
    bool stop;      /* atomic */
    unsigned polls; /* atomic */
    unsigned got;
    NDK_RESULT_EX last;
} poller;

static void *poll_until_stopped(void *arg)
{
    poller *p = arg;
    while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        NDK_RESULT_EX e;
        if (dp_get(p->cq, &e, 1) == 1) {
            p->last = e;
            __atomic_fetch_add(&p->got, 1, __ATOMIC_RELAXED);
        }
        __atomic_fetch_add(&p->polls, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

DP_CASE(qp_closed_while_polled)
{
    for (int round = 0; round < 3; round++) {
        fx f;
        REQUIRE(fx_open(&f, false));
        NDK_SGE rs = dp_sge(&f.dst, 0, MSG);
        DP_CHECK_ST(dp_recv(f.c->qp, DP_CTX(50), &rs, 1), STATUS_SUCCESS);
        void *qpctx = dp_qpctx_p(f.c);
        poller pl = {.cq = f.c->cqp};
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, poll_until_stopped, &pl) == 0);
        /* The close comes while the poller polls (walks the CQ's QPs). */
        uint64_t deadline = tl_now_ns() + (uint64_t)DP_WAIT_MS * 1000000u;
        while (__atomic_load_n(&pl.polls, __ATOMIC_RELAXED) < 100 && tl_now_ns() < deadline)
            sched_yield();
        dp_close(f.c->cp);
        f.c->cp = NULL;
        dp_close(f.c->qp);
        f.c->qp = NULL;
        /* The flushed receive may reach the CQ as the close returns. */
        deadline = tl_now_ns() + (uint64_t)DP_WAIT_MS * 1000000u;
        while (!__atomic_load_n(&pl.got, __ATOMIC_RELAXED) && tl_now_ns() < deadline)
            sched_yield();
        __atomic_store_n(&pl.stop, true, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        CHECK_EQ(pl.got, 1);
        if (pl.got == 1)
            DP_CHECK_CQE(pl.last, STATUS_CANCELLED, NdkOperationTypeReceive, qpctx, DP_CTX(50), -1);
        fx_close(&f);
    }
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(polling_alone_moves_data);
    RUN_FAM(quiet_poller_still_serves_reads);
    RUN_FAM(arm_after_polling_notifies);
    RUN_FAM(sleeper_on_other_cq_is_notified);
    RUN_FAM(disconnect_while_leased);
    RUN_FAM(qp_closed_while_polled);
    return tl_finish();
}
