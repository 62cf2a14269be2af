/*
 * The data path with the smallest socket buffers Linux allows
 * (NDK_OPEN_OPTIONS SocketSendBufferBytes / SocketReceiveBufferBytes = 1,
 * which the kernel raises to its minimum: 4608 octets to send, 2304 to
 * receive), as an application, a container or memory pressure can impose:
 * on both ends, and on one side only each way. TCP itself moves megabytes
 * per second through such sockets; so must libndk. Every operation (RDMA
 * Write, RDMA Read, Send), at sizes from 1 octet to 8 MiB, in the pattern of
 * rping (a Write waited for, then a Read, then a Send; first 16 rounds of
 * 64 KiB as ndkping does, each after a 3-octet Send that moves the peer's
 * window off MSS multiples, then every size), arrives whole and exact
 * within 2 s plus 1 s per 256 KiB: generous for a loaded machine under the
 * sanitizers, and still a tenth of what one segment per 200 ms (a
 * zero-window probe per retransmission timeout, the stall of a window stuck
 * below one MSS) takes for 64 KiB. The bandwidth of each operation's
 * largest transfer is printed.
 */
#include "dptest.h"

enum op { OP_WRITE, OP_READ, OP_SEND, NOPS };
static const char *const op_name[] = {"write", "read", "send"};

/* How long len octets may take: 2 s + 1 s per 256 KiB. */
static unsigned bound_ms(size_t len)
{
    return 2000u + (unsigned)(len / 262u);
}

static bool open_side(dp_side *s, bool small_snd, bool small_rcv)
{
    memset(s, 0, sizeof *s);
    NDK_OPEN_OPTIONS o = dp_options();
    o.SocketSendBufferBytes = small_snd ? 1 : 0;
    o.SocketReceiveBufferBytes = small_rcv ? 1 : 0;
    return dp_side_open_as(s, "lo", &o);
}

/* One completion on c within ms: true when it came with STATUS_SUCCESS. */
static bool done_ok(dp_cq *c, unsigned ms, ULONG *bytes)
{
    NDK_RESULT_EX r;
    if (dp_wait_ex(c, &r, 1, ms) != 1)
        return false;
    if (bytes)
        *bytes = r.BytesTransferred;
    return r.Status == STATUS_SUCCESS;
}

/* One operation of len octets between the active side's buffer am and the
 * passive side's pm: a Write from am into pm, a Read of pm into am, a Send
 * from am into a receive over pm. True when it completed, exactly, in time;
 * *mbps is its rate. */
static bool one_op(dp_conn *c, enum op op, size_t len, dp_mr *am, dp_mr *pm, uint32_t seed, double *mbps)
{
    uint8_t *src = op == OP_READ ? pm->addr : am->addr;
    uint8_t *dst = op == OP_READ ? am->addr : pm->addr;
    dp_fill(src, len, seed, 0);
    dp_fill(dst, len, seed + 1, 0);
    NDK_SGE as = dp_sge(am, 0, (ULONG)len), ps = dp_sge(pm, 0, (ULONG)len);
    unsigned ms = bound_ms(len);
    uint64_t t0 = tl_now_ns();
    bool ok;
    ULONG got = 0;
    switch (op) {
    case OP_WRITE:
        /* Done when TCP took it; then a zero-length Read, which is
         * answered only after the Write's data was placed (RFC 5040). */
        DP_CHECK_ST(dp_write(c->qa, DP_CTX(1), &as, 1, pm->addr, pm->rtok, 0), STATUS_SUCCESS);
        ok = done_ok(c->cqa, ms, NULL);
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(2), dp_nosge(), 0, pm->addr, pm->rtok, 0), STATUS_SUCCESS);
        ok = done_ok(c->cqa, ms, NULL) && ok;
        break;
    case OP_READ:
        DP_CHECK_ST(dp_read(c->qa, DP_CTX(3), &as, 1, pm->addr, pm->rtok, 0), STATUS_SUCCESS);
        ok = done_ok(c->cqa, ms, NULL);
        break;
    default:
        DP_CHECK_ST(dp_recv(c->qp, DP_CTX(4), &ps, 1), STATUS_SUCCESS);
        DP_CHECK_ST(dp_send(c->qa, DP_CTX(5), &as, 1, 0), STATUS_SUCCESS);
        ok = done_ok(c->cqa, ms, NULL);
        ok = done_ok(c->cqp, ms, &got) && got == len && ok;
        break;
    }
    uint64_t ns = tl_now_ns() - t0;
    *mbps = (double)len / (1024.0 * 1024.0) / ((double)ns / 1e9);
    long bad = dp_diff(dst, len, seed, 0);
    if (!ok || bad >= 0 || ns > (uint64_t)ms * 1000000u) {
        tl_failures++;
        fprintf(stderr, "[%s] %s of %zu octets: %s after %.1f ms (bound %u ms)%s\n", tl_current, op_name[op], len,
                ok ? "completed" : "did not complete", (double)ns / 1e6, ms, bad >= 0 ? ", data differs" : "");
        return false;
    }
    return true;
}

/* Every operation at every size up to max over one connection between a
 * side with (small_snd, small_rcv) buffers and one with the reverse. */
static void run(bool a_snd, bool a_rcv, bool p_snd, bool p_rcv, size_t max)
{
    static const size_t sizes[] = {1, 7, 100, 1000, 4095, 4096, 9000, 65536, 65537, 262144, MiB, 8 * MiB};
    dp_side a, p;
    REQUIRE(open_side(&a, a_snd, a_rcv) && open_side(&p, p_snd, p_rcv));
    dp_cfg cfg = dp_cfg_default();
    dp_conn *c = dp_conn_new(&a, &p, &cfg);
    REQUIRE(c && dp_conn_establish(c));
    dp_mr am, pm;
    REQUIRE(dp_buf_reg(&a, &am, max, DP_SINK_FLAGS, 0));
    REQUIRE(dp_buf_reg(&p, &pm, max,
                       NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                           NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                       0));
    double rate[NOPS] = {0};
    bool ok = true;
    uint32_t seed = 1;
    for (int round = 0; ok && round < 16; round++) {
        ok = one_op(c, OP_SEND, 3, &am, &pm, seed++, &rate[OP_SEND]);
        for (int op = 0; ok && op < NOPS; op++)
            ok = one_op(c, (enum op)op, 65536, &am, &pm, seed++, &rate[op]);
    }
    for (size_t i = 0; ok && i < sizeof sizes / sizeof sizes[0] && sizes[i] <= max; i++)
        for (int op = 0; ok && op < NOPS; op++)
            ok = one_op(c, (enum op)op, sizes[i], &am, &pm, seed++, &rate[op]);
    fprintf(stderr, "    %zu MiB: write %.1f MB/s, read %.1f MB/s, send %.1f MB/s\n", max / MiB, rate[OP_WRITE],
            rate[OP_READ], rate[OP_SEND]);
    /* And the connection still ends gracefully. */
    dp_req *d = dp_req_new("NdkDisconnect (active)");
    d->started = true;
    d->returned = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, d);
    DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(d, d->returned, DP_WAIT_MS), STATUS_SUCCESS);
    dp_mr_close(&am);
    dp_mr_close(&pm);
    dp_conn_close(c);
    dp_side_close(&a);
    dp_side_close(&p);
}

DP_CASE(minimum_buffers_both_ends)
{
    run(true, true, true, true, 8 * MiB);
}

/* The active side sends through a minimal buffer and receives through one
 * (its Read Responses), the passive side has the system's. */
DP_CASE(minimum_buffers_active_side)
{
    run(true, true, false, false, MiB);
}

DP_CASE(minimum_buffers_passive_side)
{
    run(false, false, true, true, MiB);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(minimum_buffers_both_ends);
    RUN_FAM(minimum_buffers_active_side);
    RUN_FAM(minimum_buffers_passive_side);
    return tl_finish();
}
