/* A QP's queue counters wrap, white box: the initiator queue, the receive
 * queue and the outbound and inbound Read queues count their requests
 * with free-running 32-bit numbers, which wrap after 2^32 requests (nine
 * minutes of 64 B Sends at 8 Mmsg/s over shared memory). Here both QPs'
 * counters are set a few requests short of the wrap on a fresh
 * connection, with depths of 3 (no power of two: 2^32 is no multiple of
 * 3, so a slot taken as `counter % depth` jumps at the wrap and two
 * requests in flight share one), and rounds of Sends and Reads cross it:
 * every request completes once, in posting order, with its own context
 * and data (iWARP's MSNs cross their wrap too). Over iWARP (TCP); with NDK_SHM=1 (its run in the label shm,
 * tests/CMakeLists.txt) over the same-host fast path instead, skipped
 * where that is not available. */
#include <stdlib.h>
#include <string.h>

#include "dptest.h"
#include "objects.h"
#include "qp.h"

#define DEPTH 3
#define MSG 64
#define ROUNDS 8
#define BEFORE_WRAP 5u /* requests each queue takes before its counter wraps */

static struct ndk_qp_impl *qp_impl(NDK_QP *qp)
{
    return container_of(ndk_obj_from_pub(qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
}

/* Every queue counter of an idle QP moved to BEFORE_WRAP requests short
 * of the wrap (the queues are empty: head, tail and transmit point move
 * together), under the locks that guard them (qp.h), taken in the
 * library's order (rx_lock before sq_lock, ndk_qp_start) and rq_lock
 * alone. */
static void near_wrap(NDK_QP *pub)
{
    struct ndk_qp_dp *dp = &qp_impl(pub)->dp;
    const uint32_t at = UINT32_MAX - BEFORE_WRAP + 1;
    pthread_mutex_lock(&dp->rx_lock);
    pthread_mutex_lock(&dp->sq_lock);
    CHECK(dp->sq_count == 0 && dp->orq_count == 0 && dp->irq_count == 0);
    dp->sq_head = dp->sq_tx = dp->sq_tail = at;
    dp->orq_head = at;
    dp->irq_head = at;
    /* iWARP's MSNs (RFC 5041 section 5.1: modulo 2^32) wrap with them:
     * both QPs' next and expected numbers on both queues, equal. */
    dp->msn_send = dp->msn_read = dp->msn_send_expect = dp->msn_read_expect = at;
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_unlock(&dp->rx_lock);
    pthread_mutex_lock(&dp->rq_lock);
    CHECK(dp->rq_count == 0);
    dp->rq_head = at;
    pthread_mutex_unlock(&dp->rq_lock);
}

static bool g_shm;

DP_CASE(crosses_the_wrap)
{
    dp_cfg cfg = dp_cfg_default();
    cfg.rqd = cfg.iqd = DEPTH;
    cfg.ird = cfg.ord = DEPTH;
    dp_pair x;
    REQUIRE(dp_pair_open(&x, &cfg));
    dp_conn *c = x.c;
    CHECK_EQ(dp_over_shm(&x.a, &x.p), g_shm);
    const size_t n = (size_t)ROUNDS * DEPTH * MSG;
    dp_mr src, rsrc, sink, rcv;
    uint8_t *s = dp_buf_reg(&x.a, &src, n, 0, 11);
    uint8_t *rs = dp_buf_reg(&x.p, &rsrc, n, NDK_MR_FLAG_ALLOW_REMOTE_READ, 12);
    uint8_t *k = dp_buf_reg(&x.a, &sink, n, DP_SINK_FLAGS, 0);
    uint8_t *rb = dp_buf_reg(&x.p, &rcv, n, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 0);
    REQUIRE(s && rs && k && rb);
    near_wrap(c->qa);
    near_wrap(c->qp);
    for (unsigned r = 0; r < ROUNDS && !tl_failures; r++) {
        NDK_RESULT_EX res[DEPTH];
        for (unsigned i = 0; i < DEPTH; i++) {
            size_t at = ((size_t)r * DEPTH + i) * MSG;
            NDK_SGE g = dp_sge(&rcv, at, MSG);
            DP_CHECK_ST(dp_recv(c->qp, DP_CTX(0x1000 + r * DEPTH + i), &g, 1), STATUS_SUCCESS);
        }
        /* One doorbell for the round's Sends, then one for its Reads:
         * DEPTH requests in flight at once, so two of them would share a
         * slot if the counters mapped to slots wrongly at the wrap. */
        for (unsigned i = 0; i < DEPTH; i++) {
            NDK_SGE g = dp_sge(&src, ((size_t)r * DEPTH + i) * MSG, MSG);
            DP_CHECK_ST(dp_send(c->qa, DP_CTX(0x2000 + r * DEPTH + i), &g, 1, i + 1 < DEPTH ? NDK_OP_FLAG_DEFER : 0),
                        STATUS_SUCCESS);
        }
        DP_WAIT(c->cqa, res, DEPTH);
        for (unsigned i = 0; i < DEPTH; i++)
            DP_CHECK_CQE(res[i], STATUS_SUCCESS, NdkOperationTypeSend, dp_qpctx_a(c), DP_CTX(0x2000 + r * DEPTH + i),
                         -1);
        DP_WAIT(c->cqp, res, DEPTH);
        for (unsigned i = 0; i < DEPTH; i++)
            DP_CHECK_CQE(res[i], STATUS_SUCCESS, NdkOperationTypeReceive, dp_qpctx_p(c),
                         DP_CTX(0x1000 + r * DEPTH + i), MSG);
        for (unsigned i = 0; i < DEPTH; i++) {
            size_t at = ((size_t)r * DEPTH + i) * MSG;
            NDK_SGE g = dp_sge(&sink, at, MSG);
            DP_CHECK_ST(dp_read(c->qa, DP_CTX(0x3000 + r * DEPTH + i), &g, 1, rs + at, rsrc.rtok,
                                i + 1 < DEPTH ? NDK_OP_FLAG_DEFER : 0),
                        STATUS_SUCCESS);
        }
        DP_WAIT(c->cqa, res, DEPTH);
        for (unsigned i = 0; i < DEPTH; i++)
            DP_CHECK_CQE(res[i], STATUS_SUCCESS, NdkOperationTypeRead, dp_qpctx_a(c), DP_CTX(0x3000 + r * DEPTH + i),
                         -1);
    }
    DP_CHECK_DATA(rb, n, 11, 0);
    DP_CHECK_DATA(k, n, 12, 0);
    dp_mr_close(&src);
    dp_mr_close(&rsrc);
    dp_mr_close(&sink);
    dp_mr_close(&rcv);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    const char *env = getenv("NDK_SHM");
    g_shm = env && strcmp(env, "1") == 0;
    if (g_shm) {
        NDK_ADAPTER *ad = NULL;
        const char *why = "the adapter lo does not open";
        if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad) == STATUS_SUCCESS) {
            if (ndk_shm_available(ad, &why))
                why = NULL;
            ndk_close_adapter(ad);
        }
        if (why)
            tl_skip_all(why);
        setenv("NDK_SHM_WAIT_MS", "3000", 1);
    } else {
        setenv("NDK_SHM", "0", 1);
    }
    RUN_FAM(crosses_the_wrap);
    return tl_finish();
}
