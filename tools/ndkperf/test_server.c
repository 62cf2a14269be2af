/*
 * test_server.c - the server's side of the six tests (test_run.h): it
 * follows the client's parameters and answers.
 */
#include <stdlib.h>

#include "lib/clock.h"
#include "lib/polled.h"
#include "ndkperf/test_run.h"

/* Answers every Send that came; done once the end marker came. */
static int server_lat_step(struct run *x)
{
    while (x->answered < x->data_in) {
        if (!sq_room(x->e))
            return STEP_MORE; /* a signaled completion makes room */
        if (!post_send(x->e, OP_SEND, x->e->source, x->size, POST_PLAIN))
            return STEP_FAILED;
        x->answered++;
    }
    return x->got_end ? STEP_DONE : STEP_MORE;
}

static bool server_send_lat(struct run *x)
{
    x->answered = 0;
    return run_steps(x, server_lat_step, "the client's next Send") && wait_room(x) &&
           send_mark(x->e, MARK_ACK);
}

static bool server_send_bw(struct run *x)
{
    struct endpoint *e = x->e;
    for (;;) {
        if (!pump(x, true, "the client's next Send"))
            return false;
        if (!x->credit_owed && !x->got_end)
            continue;
        if (!wait_room(x))
            return false;
        /* The count is cumulative: one credit stands for all owed. */
        bool final = x->got_end;
        x->credit_owed = false;
        if (!send_ctrl(e, CTRL_CREDIT, x->size, x->recv_total, final))
            return false;
        if (final)
            return true;
    }
}

static bool server_write_lat(struct run *x)
{
    struct endpoint *e = x->e;
    uint8_t *out = e->source + x->size - 1;
    uint8_t seq = 0;
    for (;;) {
        seq = (uint8_t)(seq % 255 + 1);
        if (!wait_byte(x, seq, tc_now_ns(), "the client's next RDMA Write"))
            return false;
        if (x->got_end)
            break;
        tc_polled_store(out, seq);
        if (!wait_room(x) || !post_rdma(e, OP_WRITE, x->size, POST_PLAIN))
            return false;
    }
    return wait_room(x) && send_ctrl(e, CTRL_ACK, x->size, 0, true);
}

/*
 * write_bw, read_bw, read_lat: the client's requests complete nothing
 * here; only its control messages do. Its keep-alive travels behind up
 * to -q messages of data in its send queue (128 MiB with 1 MiB messages),
 * so on a slow or busy machine it may take a while: the bound here is
 * three times --timeout.
 */
static bool server_passive(struct run *x)
{
    x->e->wait_ms = 3 * x->e->opt->timeout_ms;
    while (!x->got_end)
        if (!pump(x, true, "the client's end of the size (or its keep-alive)"))
            return false;
    x->e->wait_ms = 0;
    return wait_room(x) && send_ctrl(x->e, CTRL_ACK, x->size, 0, true);
}

bool run_server_tests(struct endpoint *e, const struct test_params *tp)
{
    uint32_t sizes[32];
    unsigned n = size_list(tp, sizes, 32);
    struct run x;
    run_begin(&x, e, tp, true, n);
    x.credit_every = tp->rx_depth / 4 ? tp->rx_depth / 4 : 1;
    for (unsigned i = 0; i < n; i++) {
        size_begin(&x, sizes[i]);
        bool ok;
        switch (tp->test) {
        case T_SEND_LAT:
            ok = server_send_lat(&x);
            break;
        case T_SEND_BW:
            ok = server_send_bw(&x);
            break;
        case T_WRITE_LAT:
            ok = server_write_lat(&x);
            break;
        default:
            ok = server_passive(&x);
            break;
        }
        if (!ok)
            return false;
    }
    /* The last answer must be on its way before the client's disconnect. */
    if (!drain_sq(&x, "the completion of the last answer"))
        return false;
    report_notifications(&x);
    return true;
}

