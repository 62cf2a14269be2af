/* C1: NdkArmCq while another thread is inside NdkGetCqResultsEx on the same
 * CQ is reported. The retrieval is held inside the verifier by its own
 * report (W9, a Send whose buffer changed) until the arm has been made. */
#include "vtest.h"

static dp_pair x;
static _Atomic ULONG got;

static void *poller(void *arg)
{
    (void)arg;
    NDK_RESULT_EX r;
    atomic_store(&got, dp_wait_ex(x.c->cqa, &r, 1, DP_WAIT_MS));
    return NULL;
}

DP_CASE(arm_while_polling)
{
    vt_begin();
    REQUIRE(vt_pair_open(&x, NULL));
    dp_mr rm, sm;
    REQUIRE(dp_buf_reg(&x.p, &rm, 64, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1));
    uint8_t *buf = dp_buf_reg(&x.a, &sm, 64, 0, 2);
    REQUIRE(buf);
    NDK_SGE rs = dp_sge(&rm, 0, 64), ss = dp_sge(&sm, 0, 64);
    DP_CHECK_ST(dp_recv(x.c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x.c->qa, DP_CTX(2), &ss, 1, 0), STATUS_SUCCESS);
    buf[0] ^= 0xFF;
    vt_hold("W9");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, poller, NULL) == 0);
    CHECK(tl_event_wait(&vt_held, 1, DP_WAIT_MS));
    x.c->cqa->cq->Dispatch->NdkArmCq(x.c->cqa->cq, NDK_CQ_NOTIFY_ANY);
    vt_release();
    pthread_join(t, NULL);
    CHECK(atomic_load(&got) == 1);
    char want[1024];
    VT_CHECK_LINE(vt_wait("C1", 0),
                  vt_line(want, sizeof want,
                          "C1 (GetCqResults, GetCqResultsEx and ArmCq never run at once on one CQ)",
                          "NdkArmCq", "CQ", x.c->cqa->cq, x.a.ad,
                          "another of them is running on this CQ in another thread",
                          "serialise NdkGetCqResults, NdkGetCqResultsEx and NdkArmCq of one CQ "
                          "(one thread, or a lock)"));
    NDK_RESULT_EX r;
    CHECK(dp_wait_ex(x.c->cqp, &r, 1, DP_WAIT_MS) == 1);
    dp_mr_close(&rm);
    dp_mr_close(&sm);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(arm_while_polling);
    return tl_finish();
}
