/* The in-memory loopback transport (src/xp_loopback.h) while one thread
 * posts to each QP of a pair and another disconnects the pair: every post
 * either ran or found its QP stopped (STATUS_CONNECTION_INVALID), and
 * nothing is touched after the pair is gone. A post that found its QP
 * joined runs the pair after letting go of the QP's lock (transport.h,
 * after_post), so the disconnect can stop both QPs and free the pair
 * meanwhile unless that post holds it (src/xp_loopback.c, lo_after_post).
 * The window is narrow and no hook widens it, so this is a stress case:
 * short bounded rounds, in which the sanitizer builds see the use after
 * free when it happens (ThreadSanitizer did in the first rounds of every
 * run before the pair was held). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>

#include "testlib.h"
#include "xp_loopback.h"
#include "xp_side.h"

#define BUF 4096
#define DEPTH 16
#define ROUNDS 20
#define POST_FOR_MS 10000 /* a poster's bound per round (it stops at the disconnect) */
#define POSTS_BEFORE 8   /* each poster's posts before the disconnect starts */

/* A fresh pair of QPs each round, on the same sides. */
static const struct side_shape SHAPE = {
    .buf_len = BUF,
    .cq_depth = 4 * DEPTH,
    .rq_depth = DEPTH,
    .sq_depth = DEPTH,
    .mr_flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
    .qp_apart = true,
};

static struct side A, B;

struct poster {
    struct side *from, *to;
    int posted; /* Writes accepted (atomic: the main thread waits for a few) */
    NTSTATUS last;
};

/* Posts silent 8-octet Writes from one side into the other until a post
 * finds the QP stopped (or the time bound: not a count, which a poster
 * can finish while the thread that disconnects waits for a CPU). */
static void *post_loop(void *arg)
{
    struct poster *p = arg;
    NDK_SGE s = sge(p->from, 0, 8);
    NDK_QP *qp = p->from->qp;
    uint64_t end = tl_now_ns() + (uint64_t)POST_FOR_MS * 1000000;
    for (unsigned i = 0; (i & 1023) || tl_now_ns() < end; i++) {
        p->last = qp->Dispatch->NdkWrite(qp, NULL, &s, 1, (UINT64)(uintptr_t)p->to->buf, p->to->rtok,
                                         NDK_OP_FLAG_SILENT_SUCCESS);
        if (p->last != STATUS_SUCCESS)
            break;
        __atomic_add_fetch(&p->posted, 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Waits (bounded) until the poster got POSTS_BEFORE Writes accepted. */
static bool started(struct poster *p)
{
    for (long spins = 0; spins < 100000000L; spins++) {
        if (__atomic_load_n(&p->posted, __ATOMIC_ACQUIRE) >= POSTS_BEFORE)
            return true;
        sched_yield();
    }
    return false;
}

/* Takes what the CQ holds: the Writes a stop cancelled, if any. */
static int drain(struct side *s)
{
    NDK_RESULT_EX r[8];
    int n = 0, k;
    while ((k = (int)s->cq->Dispatch->NdkGetCqResultsEx(s->cq, r, 8)) > 0) {
        for (int i = 0; i < k; i++)
            CHECK_EQ(r[i].Status, STATUS_CANCELLED);
        n += k;
    }
    return n;
}

static void t_post_while_disconnecting(void)
{
    REQUIRE(side_up(&A, &SHAPE) && side_up(&B, &SHAPE));
    int rounds = 0, cut = 0;
    for (; rounds < ROUNDS; rounds++) {
        REQUIRE(side_qp_up(&A, &SHAPE) && side_qp_up(&B, &SHAPE));
        struct ndk_lo_pair *pair = ndk_lo_connect(impl(A.qp), impl(B.qp));
        REQUIRE(pair != NULL);
        struct poster pa = {.from = &A, .to = &B}, pb = {.from = &B, .to = &A};
        pthread_t ta, tb;
        REQUIRE(pthread_create(&ta, NULL, post_loop, &pa) == 0);
        REQUIRE(pthread_create(&tb, NULL, post_loop, &pb) == 0);
        bool go = started(&pa) && started(&pb);
        ndk_lo_disconnect(pair); /* while both still post */
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        CHECK(go);
        /* Each poster stopped because its QP had left the pair. */
        CHECK_EQ(pa.last, STATUS_CONNECTION_INVALID);
        CHECK_EQ(pb.last, STATUS_CONNECTION_INVALID);
        cut += drain(&A) + drain(&B);
        nt_close(A.qp);
        nt_close(B.qp);
        A.qp = B.qp = NULL;
        if (tl_failures)
            break; /* the rest would only repeat it */
    }
    printf("# %d rounds, %d Writes cancelled by the disconnect\n", rounds, cut);
    side_down(&A);
    side_down(&B);
}

int main(void)
{
    RUN(t_post_while_disconnecting);
    return tl_finish();
}
