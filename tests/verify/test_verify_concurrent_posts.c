/* W2: a post to a queue while another thread's post to the same queue is
 * still running is reported. The first post is held inside the verifier
 * by its own report (W8) until the second one has been made. */
#include "vtest.h"

static vt_sends v;

static void *first_poster(void *arg)
{
    (void)arg;
    /* The same context twice: the second post reports W8 and is held. */
    dp_send(v.x.c->qa, DP_CTX(5), &v.ss, 1, 0);
    dp_send(v.x.c->qa, DP_CTX(5), &v.ss, 1, 0);
    return NULL;
}

DP_CASE(posts_to_one_queue_at_once)
{
    vt_begin();
    REQUIRE(vt_sends_open(&v, 0));
    dp_pair *x = &v.x;
    for (uintptr_t i = 0; i < 3; i++)
        DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(1 + i), &v.rs, 1), STATUS_SUCCESS);
    vt_hold("W8");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, first_poster, NULL) == 0);
    CHECK(tl_event_wait(&vt_held, 1, DP_WAIT_MS));
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(6), &v.ss, 1, 0), STATUS_SUCCESS);
    vt_release();
    pthread_join(t, NULL);
    VT_CHECK_REPORT(0, "W2 (posts to one queue are serialised)", "NdkSend", "QP", x->c->qa, x->a.ad,
                    "another post to the same initiator queue is running in another thread",
                    "serialise the posts to one queue (one thread, or a lock)");
    vt_sends_close(&v, 3, 3);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(posts_to_one_queue_at_once);
    return tl_finish();
}
