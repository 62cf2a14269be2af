/* D5: a request posted with NDK_OP_FLAG_DEFER and never followed by a post
 * without it on that queue is reported once VerifyDeferMs passed. The
 * chain is ended afterwards: DEFER is a hint (D2), and whether a provider
 * starts such a request on its own differs by transport (the iWARP
 * transport does, the same-host one waits for the doorbell). */
#include "vtest.h"

DP_CASE(deferred_chain_never_ended)
{
    vt_begin();
    vt_sends v;
    REQUIRE(vt_sends_open(&v, 100));
    dp_pair *x = &v.x;
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(1), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(x->c->qp, DP_CTX(3), &v.rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(2), &v.ss, 1, NDK_OP_FLAG_DEFER), STATUS_SUCCESS);
    char head[512], tail[512];
    snprintf(head, sizeof head,
             "ndk verifier: D5 (every chain of deferred requests ends with one without DEFER): "
             "NdkSend/NdkWrite/... with NDK_OP_FLAG_DEFER on QP %p (adapter lo %p): 1 request(s) "
             "posted with NDK_OP_FLAG_DEFER, the first ",
             (void *)x->c->qa, (void *)x->a.ad);
    snprintf(tail, sizeof tail,
             " ms ago, and no post without it followed on this initiator queue: a provider may "
             "never start them; instead: end every chain of deferred requests with a post "
             "without NDK_OP_FLAG_DEFER");
    VT_CHECK_AROUND(vt_wait("D5", DP_WAIT_MS), head, tail);
    DP_CHECK_ST(dp_send(x->c->qa, DP_CTX(4), &v.ss, 1, 0), STATUS_SUCCESS);
    vt_sends_close(&v, 2, 2);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(deferred_chain_never_ended);
    return tl_finish();
}
