/* Adapter instances as views of one device (docs/behaviour.md, "Adapter
 * instances"): every ndk_open_adapter of the same interface returns a new
 * instance of the same device. Objects of one instance work with objects
 * of another (a QP with another instance's connector and CQ; NdkAccept
 * with a QP of one instance and a connector of another; memory tokens of
 * one instance honoured by a QP of another), and closing one instance
 * leaves the others and their connections working. */
#include "dptest.h"

#define LEN 4096u

/* Sends LEN bytes from the active QP into a receive on the passive QP,
 * then writes them into an MR of `target`, an instance other than the
 * passive QP's (same PD): the token of one instance works through a QP of
 * another. */
static void exchange(dp_conn *c, dp_side *a, dp_side *p, uint32_t seed)
{
    dp_mr ms, mr;
    uint8_t *src = dp_buf_reg(a, &ms, LEN, 0, seed);
    uint8_t *dst = dp_buf_reg(p, &mr, LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                              seed + 1);
    REQUIRE(src && dst);
    NDK_SGE rs = dp_sge(&mr, 0, LEN), ss = dp_sge(&ms, 0, LEN);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &rs, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(2), &ss, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX r;
    REQUIRE(dp_wait_ex(c->cqa, &r, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(r, STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(2), -1);
    REQUIRE(dp_wait_ex(c->rcqp, &r, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(r, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(1), LEN);
    DP_CHECK_DATA(dst, LEN, seed, 0);
    /* The Write lands through the remote token of the MR. */
    dp_fill(src, LEN, seed + 2, 0);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(3), &ss, 1, dst, mr.rtok, 0), STATUS_SUCCESS);
    REQUIRE(dp_wait_ex(c->cqa, &r, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(r, STATUS_SUCCESS, NdkOperationTypeWrite, dp_qpctx_a(c), DP_CTX(3), -1);
    /* Written before the Send that follows it completes (RFC 5040 ordering). */
    NDK_SGE none = dp_sge(&mr, 0, 0);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(4), &none, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), dp_nosge(), 0, 0), STATUS_SUCCESS);
    REQUIRE(dp_wait_ex(c->rcqp, &r, 1, DP_WAIT_MS) == 1);
    DP_CHECK_CQE(r, STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c), DP_CTX(4), 0);
    REQUIRE(dp_wait_ex(c->cqa, &r, 1, DP_WAIT_MS) == 1);
    DP_CHECK_DATA(dst, LEN, seed + 2, 0);
    dp_mr_close(&ms);
    dp_mr_close(&mr);
}

/* NdkAccept with a QP of instance P1 and a connector (and listener) of
 * instance P2; NdkConnect with a QP of instance A1 through a connector of
 * A2. Both used to be STATUS_INVALID_PARAMETER. */
DP_CASE(accept_and_connect_across_instances)
{
    dp_side a1, a2, p1, p2;
    REQUIRE(dp_side_open(&a1) && dp_side_open(&a2) && dp_side_open(&p1) && dp_side_open(&p2));
    dp_conn *c = dp_conn_new(&a1, &p1, NULL);
    REQUIRE(c);
    c->a = &a2; /* the connector comes from A2 */
    c->p = &p2; /* the listener, hence the passive connector, from P2 */
    REQUIRE(dp_conn_establish(c));
    exchange(c, &a1, &p1, 10);
    dp_conn_close(c);
    dp_side_close(&a1);
    dp_side_close(&a2);
    dp_side_close(&p1);
    dp_side_close(&p2);
}

/* A QP whose PD is of one instance and whose CQs are of another. */
DP_CASE(qp_with_cq_of_another_instance)
{
    dp_side a, p1, p2;
    REQUIRE(dp_side_open(&a) && dp_side_open(&p1) && dp_side_open(&p2));
    dp_cfg cfg = dp_cfg_default();
    dp_conn *c = dp_conn_new(&a, &p2, &cfg); /* CQs of P2 */
    REQUIRE(c);
    NDK_QP *made_with_p2 = c->qp;
    c->qp = dp_qp_create(&p1, c->rcqp, c->cqp, NULL, dp_qpctx_p(c), &cfg, NULL); /* PD of P1 */
    REQUIRE(c->qp);
    dp_close(made_with_p2);
    REQUIRE(dp_conn_establish(c));
    exchange(c, &a, &p1, 20);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p1);
    dp_side_close(&p2);
}

/* Closing an instance tears down what was created through it and nothing
 * else: the other instance's connection and objects keep working, and its
 * object count does not change. */
DP_CASE(closing_one_instance_leaves_the_others)
{
    dp_side a, p, gone;
    REQUIRE(dp_side_open(&a) && dp_side_open(&p) && dp_side_open(&gone));
    dp_conn *c = dp_conn_new(&a, &p, NULL);
    REQUIRE(c && dp_conn_establish(c));
    /* Objects of the instance about to close, left open on purpose: its
     * close tears them down without callbacks. */
    dp_cq *cq = dp_cq_new(&gone, 16);
    REQUIRE(cq);
    NDK_CONNECTOR *k = dp_connector_new(&gone);
    REQUIRE(k);
    ULONG before = ndk_adapter_object_count(p.ad, NdkObjectTypeUndefined);
    CHECK(before > 0);
    CHECK_EQ(ndk_adapter_object_count(gone.ad, NdkObjectTypeUndefined), 3); /* PD, CQ, connector */
    dp_side_close(&gone);
    CHECK_EQ(ndk_adapter_object_count(p.ad, NdkObjectTypeUndefined), before);
    exchange(c, &a, &p, 30);
    /* A new instance of the same interface works beside the others. */
    dp_side again;
    REQUIRE(dp_side_open(&again));
    dp_cq *cq2 = dp_cq_new(&again, 16);
    CHECK(cq2 != NULL);
    if (cq2)
        dp_cq_close(cq2);
    dp_side_close(&again);
    exchange(c, &a, &p, 40);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(accept_and_connect_across_instances);
    RUN_FAM(qp_with_cq_of_another_instance);
    RUN_FAM(closing_one_instance_leaves_the_others);
    return tl_finish();
}
