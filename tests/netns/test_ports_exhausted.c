/*
 * Port 0 when no ephemeral port is free: NdkListen, NdkCreateSharedEndpoint
 * and NdkConnect each fail with STATUS_TOO_MANY_ADDRESSES (NDKPI: "port 0
 * and no free ephemeral port 49152-65535"), and once one port is free again
 * port 0 gets exactly that port.
 *
 * In a private network namespace, so that the ports this test holds (every
 * one of 49152-65535 on 127.0.0.1, by plain bound sockets) are taken from
 * nothing else on the host and nothing else can free one meanwhile. Needs
 * root (or CAP_SYS_ADMIN) for unshare(CLONE_NEWNET) and room for 16384 more
 * descriptors (RLIMIT_NOFILE); without them the program reports itself
 * skipped (exit 77).
 */
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include "ndktest.h"

#define FIRST 49152u
#define LAST 65535u
#define NPORTS (LAST - FIRST + 1)

static int holders[NPORTS]; /* holders[i] holds port FIRST + i */

/* A listener with its own port: the destination of the connect case. */
#define FIXED_PORT 5000u

static bool lo_up(void)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    bool ok = ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP;
    ok = ok && ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    close(fd);
    return ok;
}

/* Binds a socket to 127.0.0.1:port (no SO_REUSEADDR, so libndk's bind with
 * SO_REUSEADDR fails on it); -1 on failure. */
static int hold_port(unsigned port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, port, &sa);
    if (bind(fd, &sa.sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static NTSTATUS listen_port0(nt_side *s, unsigned *port)
{
    nt_lsn *L;
    NTSTATUS st = nt_listen_try(s, AF_INET, 0, &L);
    if (L) {
        if (port)
            *port = nt_sa_port(&L->addr);
        nt_close(L->l);
        L->l = NULL;
    }
    return st;
}

NT_CASE(listen_port_0)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    CHECK_STATUS(listen_port0(&s, NULL), STATUS_TOO_MANY_ADDRESSES);
    nt_side_close(&s);
}

NT_CASE(shared_endpoint_port_0)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, 0, &sa);
    NDK_SHARED_ENDPOINT *sep = NULL;
    CHECK_STATUS(nt_create_sep(s.ad, &sa, len, &sep), STATUS_TOO_MANY_ADDRESSES);
    CHECK(sep == NULL);
    nt_close(sep);
    nt_side_close(&s);
}

/* NdkConnect from 127.0.0.1:0 to a listener on a fixed port: the local
 * port cannot be picked, so the connect fails before any packet. */
NT_CASE(connect_port_0)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &o));
    nt_lsn *L = nt_listen_on(&ps, AF_INET, FIXED_PORT);
    REQUIRE(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, AF_INET, &as, &ps, L));
    nt_conn_connect(&c, 1, 1, NULL, 0);
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_TOO_MANY_ADDRESSES);
    /* Nothing reached the listener. */
    CHECK(!tl_event_wait(&L->ev, 1, NT_QUIET_MS));
    nt_close(c.a);
    nt_close(c.qa);
    nt_close(c.qp);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* With one port of the range free again, port 0 gets exactly that one: the
 * failures above were the range running out, not something else. */
NT_CASE(freed_port_is_picked)
{
    unsigned i = (unsigned)(tl_now_ns() % NPORTS);
    close(holders[i]);
    holders[i] = -1;
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    unsigned port = 0;
    CHECK_STATUS(listen_port0(&s, &port), STATUS_SUCCESS);
    CHECK_EQ(port, FIRST + i);
    nt_side_close(&s);
}

int main(void)
{
    /* First, before any thread exists: a namespace applies to the calling
     * thread, and the adapters' progress threads must inherit it. */
    if (!tl_unshare_netns())
        return tl_finish();
    if (!lo_up()) {
        tl_skip_all("cannot bring lo up in the new namespace");
        return tl_finish();
    }
    struct rlimit rl;
    const rlim_t need = NPORTS + 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < need) {
        rl.rlim_cur = need;
        if (rl.rlim_max < need)
            rl.rlim_max = need;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            tl_skip_all("cannot raise RLIMIT_NOFILE to 17408 descriptors (one per port held)");
            return tl_finish();
        }
    }
    for (unsigned i = 0; i < NPORTS; i++) {
        holders[i] = hold_port(FIRST + i);
        if (holders[i] < 0) {
            /* The namespace is new and empty: every port must be free. */
            fprintf(stderr, "FAIL: cannot hold 127.0.0.1:%u in the new namespace: %s\n",
                    FIRST + i, strerror(errno));
            return 1;
        }
    }
    RUN(listen_port_0);
    RUN(shared_endpoint_port_0);
    RUN(connect_port_0);
    RUN(freed_port_is_picked);
    for (unsigned i = 0; i < NPORTS; i++)
        if (holders[i] >= 0)
            close(holders[i]);
    return tl_finish();
}
