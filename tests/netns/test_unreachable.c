/*
 * NdkConnect to destinations the routing table cannot reach, in a private
 * network namespace whose routes the test controls:
 *   - no route at all (only lo is up)      -> STATUS_NETWORK_UNREACHABLE
 *   - an "unreachable" route (RTN_UNREACHABLE) -> STATUS_HOST_UNREACHABLE
 * (NdkConnect; the kernel reports ENETUNREACH / EHOSTUNREACH at once,
 * so no timer is involved). Either status may come inline or through the
 * completion.
 *
 * Needs root (or CAP_SYS_ADMIN) for unshare(CLONE_NEWNET) and the ip tool;
 * without them the whole program reports itself skipped (exit 77).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The NDK harness of the wire tests (adapter, CQ, PD, QP, bounded waits). */
#include "rawpeer.h"
#include "testlib.h"

/* Connects from 127.0.0.1 (adapter "lo") to dst:5000 and returns the final
 * status, inline or from the completion. */
static NTSTATUS connect_to(const char *dst)
{
    NDK_OPEN_OPTIONS o = nk_options();
    nk_world *w = nk_open(&o);
    if (!w)
        return NK_NO_COMPLETION;
    NDK_CONNECTOR *c = nk_connector(w);
    NDK_QP *qp = nk_qp(w);
    NTSTATUS st = NK_NO_COMPLETION;
    if (c && qp) {
        struct sockaddr_in src = rp_loopback(0), to;
        memset(&to, 0, sizeof to);
        to.sin_family = AF_INET;
        to.sin_port = htons(5000);
        inet_pton(AF_INET, dst, &to.sin_addr);
        nk_req *r = nk_req_new();
        NTSTATUS ret = c->Dispatch->NdkConnect(c, qp, (PSOCKADDR)&src, sizeof src,
                                               (PSOCKADDR)&to, sizeof to, 1, 1, NULL, 0,
                                               nk_req_done, r);
        nk_op op = nk_op_begin(r, ret);
        /* TcpConnectTimeoutMs is 2000: a status after that would be a
         * timeout, not the routing answer this test is about. */
        st = nk_op_wait(&op, NK_WAIT_MS);
        fprintf(stderr, "    Connect to %s:5000: %s (%s)\n", dst, nk_st(st),
                ret == STATUS_PENDING ? "async" : "inline");
    }
    NK_CLOSE(c);
    NK_CLOSE(qp);
    nk_close_world(w);
    return st;
}

static void no_route_is_network_unreachable(void)
{
    CHECK_ST(connect_to("10.1.2.3"), STATUS_NETWORK_UNREACHABLE);
}

static void unreachable_route_is_host_unreachable(void)
{
    CHECK_ST(connect_to("10.9.1.1"), STATUS_HOST_UNREACHABLE);
}

int main(void)
{
    /* First, before any thread exists: a namespace applies to the calling
     * thread, and the adapter's progress thread must inherit it. */
    if (!tl_unshare_netns())
        return tl_finish();
    if (system("command -v ip >/dev/null 2>&1") != 0) {
        tl_skip_all("the ip tool (iproute2) is not installed");
        return tl_finish();
    }
    if (system("ip link set lo up") != 0) {
        tl_skip_all("'ip link set lo up' failed in the new namespace");
        return tl_finish();
    }
    if (system("ip route add unreachable 10.9.0.0/16") != 0) {
        tl_skip_all("'ip route add unreachable 10.9.0.0/16' failed in the new namespace");
        return tl_finish();
    }
    RUN(no_route_is_network_unreachable);
    RUN(unreachable_route_is_host_unreachable);
    return tl_finish();
}
