/* W2: a post to a queue while another thread's post to the same queue is
 * still running is reported. The first post is held inside the verifier
 * by its own report (W8) until the second one has been made. */
#include "vtest.h"

static dp_pair x;
static NDK_SGE ss;

static void *first_poster(void *arg)
{
    (void)arg;
    /* The same context twice: the second post reports W8 and is held. */
    dp_send(x.c->qa, DP_CTX(5), &ss, 1, 0);
    dp_send(x.c->qa, DP_CTX(5), &ss, 1, 0);
    return NULL;
}

DP_CASE(posts_to_one_queue_at_once)
{
    vt_begin();
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr rm, sm;
    REQUIRE(dp_buf_reg(&x.p, &rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    REQUIRE(dp_buf_reg(&x.a, &sm, 64, 0, 2));
    NDK_SGE rs = dp_sge(&rm, 0, 64);
    ss = dp_sge(&sm, 0, 64);
    for (uintptr_t i = 0; i < 3; i++)
        DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(1 + i), &rs, 1), STATUS_SUCCESS);
    vt_hold("W8");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, first_poster, NULL) == 0);
    CHECK(tl_event_wait(&vt_held, 1, DP_WAIT_MS));
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(6), &ss, 1, 0), STATUS_SUCCESS);
    vt_release();
    pthread_join(t, NULL);
    char want[1024];
    VT_CHECK_LINE(vt_wait("W2", 0),
                  vt_line(want, sizeof want, "W2 (posts to one queue are serialised)", "NdkSend",
                          "QP", x.c->qa, x.a.ad,
                          "another post to the same initiator queue is running in another thread",
                          "serialise the posts to one queue (one thread, or a lock)"));
    NDK_RESULT_EX r[3];
    CHECK(dp_wait_ex(x.c->cqa, r, 3, DP_WAIT_MS) == 3);
    CHECK(dp_wait_ex(x.c->cqp, r, 3, DP_WAIT_MS) == 3);
    dp_mr_close(&rm);
    dp_mr_close(&sm);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(posts_to_one_queue_at_once);
    return tl_finish();
}
