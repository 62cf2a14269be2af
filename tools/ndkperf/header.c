/*
 * header.c - what ndkperf prints above its table: the test, the adapter,
 * the placement, how completions are waited for, and everything that
 * shapes the numbers (sizes, depths, doorbells, credits, inline data, read
 * limits, the buffers).
 */
#include <inttypes.h>
#include <stdio.h>

#include "lib/log.h"
#include "lib/table.h"
#include "ndkperf/ndkperf.h"

static const char *wait_text(const struct options *o)
{
    switch (o->wait) {
    case TC_WAIT_SPIN:
        return "busy-polling NdkGetCqResults (--wait=spin)";
    case TC_WAIT_EVENTS:
        return "NdkArmCq + notification callback (--wait=events)";
    default:
        return "polling NdkGetCqResults, sched_yield() when empty (--wait=yield)";
    }
}

/* The lines about the queues and the requests. */
static void print_queues(const struct endpoint *e, const struct test_params *tp)
{
    const struct options *o = e->opt;
    bool lat = test_is_lat(tp->test);
    printf(" Queue depths    : initiator %" PRIu32 " (%s), receive %" PRIu32 ", CQ signaled every %" PRIu32 "%s\n",
           e->sq_limit, lat ? "latency test: one message in flight" : "-q plus one for control", e->rq_depth,
           e->signal_every, o->signal_all ? " (--signal-all: every request)" : "");
    if (!lat && o->post_list > 1)
        printf(" Doorbells       : one per chain of up to %" PRIu32
               " requests (-l; NDK_OP_FLAG_DEFER on all but the last)\n",
               o->post_list);
    else if (!lat)
        printf(" Doorbells       : one per request (-l 1)\n");
    if (tp->test == T_SEND_BW)
        printf(" Send credits    : receiver keeps %" PRIu32 " receives posted, credits every %" PRIu32 "\n",
               tp->rx_depth, tp->rx_depth / 4 ? tp->rx_depth / 4 : 1);
    printf(" Inline data     : up to %" PRIu32 " bytes (adapter max %" PRIu32 ")\n", e->qp_inline,
           e->a->info.MaxInlineDataSize);
    if (test_uses_read(tp->test))
        printf(" Read limits     : effective IRD %" PRIu32 ", ORD %" PRIu32 "\n", e->ird, e->ord);
}

void report_header(const struct endpoint *e, const struct test_params *tp, const char *placement)
{
    const struct options *o = e->opt;
    const NDK_ADAPTER_INFO *in = &e->a->info;
    tc_out_lock();
    printf("%s\n", TC_TABLE_RULE);
    printf("                    NDK %s Test\n", test_title(tp->test));
    printf(" Adapter         : %s, NDK %u.%u, %s\n", e->a->name, in->Version.Major, in->Version.Minor,
           in->RdmaTechnology == NdkiWarp ? "iWARP" : "not iWARP");
    printf(" Placement       : %s\n", placement);
    printf(" Completions     : %s%s\n", wait_text(o), o->busy_poll ? ", provider busy-poll mode" : "");
    if (o->moderation)
        printf(" CQ moderation   : %" PRIu32 " us, %" PRIu32 " completions (--moderation)\n", o->mod_interval_us,
               o->mod_count);
    if (tp->all_sizes)
        printf(" Message sizes   : %u .. %u bytes (-a)\n", NDKPERF_MIN_ALL_SIZE, NDKPERF_MAX_SIZE);
    else
        printf(" Message size    : %" PRIu32 " bytes\n", tp->size);
    if (tp->iters)
        printf(" Iterations      : %" PRIu32, tp->iters);
    else
        printf(" Duration        : %.1f s", tp->duration_ms / 1000.0);
    if (test_is_lat(tp->test))
        printf(" per size, after %" PRIu32 " warm-up iterations\n", tp->warmup);
    else
        printf(" per size\n");
    print_queues(e, tp);
    printf(" local buffer    : VA 0x%016" PRIx64 " remote token 0x%08" PRIx32 " size %" PRIu32 "\n", e->local.va,
           e->local.token, e->local.size);
    printf(" remote buffer   : VA 0x%016" PRIx64 " remote token 0x%08" PRIx32 " size %" PRIu32 "\n", e->peer.va,
           e->peer.token, e->peer.size);
    printf("%s\n", TC_TABLE_RULE);
    fflush(stdout);
    tc_out_unlock();
}
