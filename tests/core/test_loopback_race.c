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
#include <stdlib.h>
#include <string.h>

#include "objects.h"
#include "ndktest.h"
#include "testlib.h"
#include "xp_loopback.h"

#define BUF 4096
#define DEPTH 16
#define ROUNDS 20
#define POST_FOR_MS 10000 /* a poster's bound per round (it stops at the disconnect) */
#define POSTS_BEFORE 8   /* each poster's posts before the disconnect starts */

struct side {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *cq;
    NDK_QP *qp;
    NDK_MR *mr;
    UINT32 ltok, rtok;
    uint8_t *buf;
};

static struct side A, B;

static struct ndk_qp_impl *impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st;
}

static bool side_up(struct side *s)
{
    MDL mdl = {0};
    s->buf = aligned_alloc(4096, BUF);
    if (!s->buf)
        return false;
    memset(s->buf, 0, BUF);
    mdl.StartVa = s->buf;
    mdl.ByteCount = BUF;
    return ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &s->ad) == STATUS_SUCCESS &&
           s->ad->Dispatch->NdkCreatePd(s->ad, NULL, NULL, &s->pd) == STATUS_SUCCESS &&
           s->ad->Dispatch->NdkCreateCq(s->ad, 4 * DEPTH, cq_notify, NULL, NULL, NULL, NULL, &s->cq) ==
               STATUS_SUCCESS &&
           s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, NULL, NULL, &s->mr) == STATUS_SUCCESS &&
           s->mr->Dispatch->NdkRegisterMr(s->mr, &mdl, BUF,
                                          NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                          NULL, NULL) == STATUS_SUCCESS &&
           (s->ltok = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr), true) &&
           (s->rtok = s->mr->Dispatch->NdkGetRemoteTokenFromMr(s->mr), true);
}

static bool qp_up(struct side *s)
{
    return s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, s, DEPTH, DEPTH, 4, 4, 0, NULL, NULL,
                                        &s->qp) == STATUS_SUCCESS;
}

static void side_down(struct side *s)
{
    nt_close(s->mr);
    nt_close(s->cq);
    nt_close(s->pd);
    ndk_close_adapter(s->ad);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

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
    NDK_SGE s = {.VirtualAddress = p->from->buf, .Length = 8, .MemoryRegionToken = p->from->ltok};
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
    REQUIRE(side_up(&A) && side_up(&B));
    int rounds = 0, cut = 0;
    for (; rounds < ROUNDS; rounds++) {
        REQUIRE(qp_up(&A) && qp_up(&B));
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
