/* C1: NdkArmCq while another thread is inside NdkGetCqResultsEx on the same
 * CQ is reported. The retrieval is held inside the verifier by its own
 * report (W9, a Send whose buffer changed) until the arm has been made. */
#include "vtest.h"

static vt_sends v;
static _Atomic ULONG got;

static void *poller(void *arg)
{
    (void)arg;
    NDK_RESULT_EX r;
    atomic_store(&got, dp_wait_ex(v.x.c->cqa, &r, 1, DP_WAIT_MS));
    return NULL;
}

DP_CASE(arm_while_polling)
{
    vt_begin();
    REQUIRE(vt_sends_open(&v, 0));
    dp_pair *x = &v.x;
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(1), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(2), &v.ss, 1, 0), STATUS_SUCCESS);
    v.sbuf[0] ^= 0xFF;
    vt_hold("W9");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, poller, NULL) == 0);
    CHECK(tl_event_wait(&vt_held, 1, DP_WAIT_MS));
    x->c->cqa->cq->Dispatch->NdkArmCq(x->c->cqa->cq, NDK_CQ_NOTIFY_ANY);
    vt_release();
    pthread_join(t, NULL);
    CHECK(atomic_load(&got) == 1);
    VT_CHECK_REPORT(0, "C1 (GetCqResults, GetCqResultsEx and ArmCq never run at once on one CQ)",
                    "NdkArmCq", "CQ", x->c->cqa->cq, x->a.ad,
                    "another of them is running on this CQ in another thread",
                    "serialise NdkGetCqResults, NdkGetCqResultsEx and NdkArmCq of one CQ "
                    "(one thread, or a lock)");
    vt_sends_close(&v, 0, 1);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(arm_while_polling);
    return tl_finish();
}
