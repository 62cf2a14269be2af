/*
 * ndkstat_target - a libndk process for tools/tests/ndkstat.py to look at:
 * two adapters on lo, a listener, a connected QP pair and a known exchange
 * from the active side (two 1000-octet Sends, a 4096-octet RDMA Write, a
 * 512-octet RDMA Read) over MRs that stay registered. Prints "ready" and the exchange's state, then holds everything
 * until standard input closes (at most 120 s).
 */
#include "dptest.h"

static dp_pair x;
static dp_mr rs, src, dst, rd;

static void exchange(void)
{
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    uint8_t *sb = dp_buf_reg(&x.a, &src, 8192, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 1);
    uint8_t *rb = dp_buf_reg(&x.p, &rs, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, 2);
    uint8_t *wb = dp_buf_reg(&x.p, &dst, 4096, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, 3);
    uint8_t *db = dp_buf_reg(&x.p, &rd, 512, NDK_MR_FLAG_ALLOW_REMOTE_READ, 4);
    REQUIRE(sb && rb && wb && db);

    NDK_SGE r0 = dp_sge(&rs, 0, 1000), r1 = dp_sge(&rs, 1000, 1000);
    NDK_SGE s0 = dp_sge(&src, 0, 1000), w = dp_sge(&src, 0, 4096), rr = dp_sge(&src, 4096, 512);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(1), &r0, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(2), &r1, 1), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(3), &s0, 1, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_send(c->qa, DP_CTX(4), &s0, 1, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_write(c->qa, DP_CTX(5), &w, 1, wb, dst.rtok, 0), STATUS_SUCCESS);
    DP_CHECK_ST(dp_read(c->qa, DP_CTX(6), &rr, 1, db, rd.rtok, 0), STATUS_SUCCESS);
    NDK_RESULT_EX ra[4], rp[2];
    CHECK_EQ(dp_wait_ex(c->cqa, ra, 4, DP_WAIT_MS), 4u);
    CHECK_EQ(dp_wait_ex(c->rcqp, rp, 2, DP_WAIT_MS), 2u);
    /* One receive posted and waiting, for the queue counts. */
    DP_CHECK_ST(dp_recv(c->qp, DP_CTX(7), &r0, 1), STATUS_SUCCESS);
}

int main(void)
{
    dp_case_begin("ndkstat_target");
    alarm(120);
    exchange();
    if (tl_failures) {
        fprintf(stderr, "ndkstat_target: the exchange failed\n");
        return 1;
    }
    printf("ready %ld\n", (long)getpid());
    fflush(stdout);
    char b;
    while (read(0, &b, 1) > 0)
        ;
    dp_mr_close(&src);
    dp_mr_close(&rs);
    dp_mr_close(&dst);
    dp_mr_close(&rd);
    dp_pair_close(&x);
    dp_case_end();
    return tl_failures ? 1 : 0;
}
