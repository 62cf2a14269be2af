/*
 * test_shape.c - the shape of a test: its sizes, the queue depths and
 * memory both ends use, its read limits, and the completion signalling
 * that fits what may be in flight.
 */
#include <string.h>

#include "ndkperf/test_run.h"

#define LAT_SQ_DEPTH 16
#define LAT_SIGNAL_EVERY 8
#define SERVER_SQ_DEPTH 16
#define SEND_LAT_RECVS 4
#define CTRL_RECVS 4
/* Credits in flight toward the client: at most -r / (-r/4) + 1 = 5. */
#define CREDIT_RECVS 16

unsigned size_list(const struct test_params *tp, uint32_t *sizes, unsigned cap)
{
    if (!tp->all_sizes) {
        sizes[0] = tp->size;
        return 1;
    }
    unsigned n = 0;
    for (uint32_t s = NDKPERF_MIN_ALL_SIZE; s <= NDKPERF_MAX_SIZE && n < cap; s <<= 1)
        sizes[n++] = s;
    return n;
}

void test_layout(const struct test_params *tp, const struct options *o, bool server, struct layout *l)
{
    memset(l, 0, sizeof *l);
    l->region = tp->all_sizes ? NDKPERF_MAX_SIZE : tp->size;
    if (server) {
        /* A server posts only answers, credits and write_lat pongs. */
        l->sq_depth = SERVER_SQ_DEPTH;
        l->signal_every = LAT_SIGNAL_EVERY;
    } else if (test_is_lat(tp->test)) {
        /* One message at a time; the depth only lets silent requests
         * accumulate between two signaled ones. */
        l->sq_depth = LAT_SQ_DEPTH;
        l->signal_every = LAT_SIGNAL_EVERY;
    } else {
        /* -q data requests, plus one slot kept for control messages. */
        l->sq_depth = o->depth + 1;
        l->signal_every = o->depth / 4 ? o->depth / 4 : 1;
    }
    switch (tp->test) {
    case T_SEND_LAT:
        l->rq_depth = SEND_LAT_RECVS;
        break;
    case T_SEND_BW:
        l->rq_depth = server ? tp->rx_depth : CREDIT_RECVS;
        l->ctrl_rx_slots = server ? 0 : CREDIT_RECVS;
        break;
    default:
        l->rq_depth = CTRL_RECVS;
        l->ctrl_rx_slots = CTRL_RECVS;
        break;
    }
    /* A slot per initiator request in flight, plus one: see send_ctrl(). */
    l->ctrl_tx_slots = l->sq_depth + 1;
    /* Every signaled request and every receive, and the flush of all of
     * them at the disconnect, with room to spare. */
    l->cq_depth = l->sq_depth + l->rq_depth + 16;
    l->inline_size = o->inline_size;
}

void test_read_limits(const struct test_params *tp, const struct options *o, ULONG *ird, ULONG *ord)
{
    /* As perftest: IRD = ORD = the outstanding reads for read tests, else 0. */
    *ird = *ord = test_uses_read(tp->test) ? o->outs : 0;
}

/* ------------------------------------------------------------------------ */
/* Posting                                                                  */
uint64_t rdma_window(const struct endpoint *e, bool reads)
{
    uint64_t limit = e->sq_limit - 1;
    return reads && e->ord < limit ? e->ord : limit;
}

void test_connected(struct endpoint *e, const struct test_params *tp)
{
    if (tp->test != T_WRITE_BW && tp->test != T_READ_BW)
        return;
    /* Only a signaled completion frees room: a full window must hold one,
     * or its completions never come (read_bw with -o below -q / 4). */
    uint64_t window = rdma_window(e, tp->test == T_READ_BW);
    if (window && e->signal_every > window)
        e->signal_every = (uint32_t)window;
}

