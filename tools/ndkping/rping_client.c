/*
 * rping_client.c - the client of `ndkping --rping` (see rping.h):
 * rping_run_client and rping_test_client.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/args.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "ndkping/rping.h"

/* -V: rdma_buf against start_buf. */
static bool validate(struct rconn *r, unsigned long ping)
{
    const uint8_t *s = r->b[RB_START].mem, *d = r->b[RB_RDMA].mem;
    if (memcmp(s, d, ro.size) == 0)
        return true;
    size_t i = 0;
    while (s[i] == d[i])
        i++;
    tc_err(NULL, "data mismatch!");
    tc_complain(NULL, "ping %lu: rdma_buf differs from start_buf first at offset %zu of %" PRIu32 ": 0x%02x, expected 0x%02x",
                ping, i, ro.size, d[i], s[i]);
    return false;
}

/* The messages of one ping; *left when the server has gone. */
static bool one_ping(struct rconn *r, bool *left)
{
    struct rmsg m;
    return rconn_send_adv(r, RB_START) &&
           rconn_recv(r, "the server's go-ahead after its RDMA Read (RDMA_WRITE_ADV)", &m, left) &&
           rconn_send_adv(r, RB_RDMA) &&
           rconn_recv(r, "the server's go-ahead after its RDMA Write (RDMA_WRITE_COMPLETE)", &m, left);
}

/* rping_test_client: the pings. True if they all worked; without -C they
 * run until the server leaves, which then counts as success (as rping). */
static bool client_pings(struct rconn *r)
{
    int start = 65;
    r->t_first = tc_now_us();
    for (unsigned long ping = 0; !ro.count || ping < ro.count; ping++) {
        rping_fill(r->b[RB_START].mem, ro.size, ping, &start);
        /* Cleared first, so that -V can only pass on what the server wrote
         * this time (the server writes only after our advertisement). */
        memset(r->b[RB_RDMA].mem, 0, ro.size);
        bool left = false;
        if (!one_ping(r, &left)) {
            if (!left)
                return false;
            tc_err(NULL, "client DISCONNECT EVENT...");
            if (!ro.count)
                return true;
            tc_complain(NULL, "the server %s left after %lu of %lu pings", r->c.peer, r->pings, ro.count);
            return false;
        }
        if (ro.validate && !validate(r, ping))
            return false;
        const char *data = (const char *)r->b[RB_RDMA].mem;
        if (ro.verbose)
            tc_say(NULL, "ping data: %.*s", (int)strnlen(data, ro.size), data);
        r->pings++;
        r->t_last = tc_now_us();
    }
    return true;
}

/* rping_connect: IRD = ORD = 1, no private data. */
static bool connect_server(struct rconn *r, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst)
{
    char from[TC_ADDR_BUF], to[TC_ADDR_BUF];
    rping_dbg("connecting to %s from %s: IRD 1 ORD 1, no private data, %s MPA%s",
              tc_format_addr(dst, true, to, sizeof to), tc_format_addr(src, false, from, sizeof from),
              ro.peer.no_p2p ? "client/server" : "peer-to-peer", ro.peer.crc ? ", CRC requested" : "");
    NTSTATUS st = tc_conn_connect(&r->c, src, dst, 1, 1, NULL, 0);
    if (st != STATUS_SUCCESS) {
        tc_conn_explain_connect(&r->c, st);
        return false;
    }
    ULONG ird = 0, ord = 0, rds = 0;
    st = r->c.cn->Dispatch->NdkGetConnectionData(r->c.cn, &ird, &ord, NULL, &rds);
    if (st == STATUS_SUCCESS)
        rping_dbg("cma_event type RDMA_CM_EVENT_CONNECT_RESPONSE: effective IRD %" PRIu32 " ORD %" PRIu32
                  ", %" PRIu32 " bytes of private data",
                  ird, ord, rds);
    else
        tc_complain(NULL, "NdkGetConnectionData after the connect failed: %s", tc_status_name(st));
    if (ro.peer.delay_first_ms)
        rping_dbg("waiting %u ms before the first FPDU (--delay-first)", ro.peer.delay_first_ms);
    peer_delay_first(&ro.peer);
    if (!tc_conn_complete(&r->c))
        return false;
    rping_dbg("rdma_connect successful");
    return true;
}

/* rping_run_client: resources, receives, connect, the pings, disconnect. */
static bool client_run(struct tc_adapter *a, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst)
{
    struct rconn *r = rconn_new(a, true);
    if (!r)
        return false;
    uint64_t t0 = tc_now_us();
    bool ok = rconn_setup(r, true) && connect_server(r, src, dst);
    if (ok) {
        ok = client_pings(r);
        /* Our FIN; it completes on the server's. */
        bool raced = tc_conn_peer_left(&r->c, 0);
        ok = rconn_disconnect(r, ok);
        if (ok && !raced)
            tc_err(NULL, "client DISCONNECT EVENT...");
        rconn_summary(r, "client", ro.size, t0);
    }
    ok = rconn_end(r) && ok;
    if (!ok)
        tc_err(NULL, "rping client failed");
    return ok;
}

int rping_run_client(void)
{
    struct tc_adapter a = {0};
    NDK_SOCKADDR dst, src;
    bool ok = peer_open_client(&a, &ro.peer, (struct peer_addr){ro.addr, "-a"}, ro.port,
                               (struct peer_addr){ro.source, "-I"}, &dst, &src) &&
              client_run(&a, &src, &dst);
    tc_adapter_close(&a);
    return ok && !tc_library_problems() ? TC_EXIT_OK : TC_EXIT_FAILED;
}
