/* net/tcp.h: the options every connection's socket carries, on both ends.
 * The connecting socket gets them from ndk_tcp_socket and
 * ndk_tcp_set_liveness, the accepted one from its listener (nothing sets
 * them again per accepted connection): TCP_NODELAY, the user timeout and
 * keepalive with its idle time and interval. The probe count is set only
 * without a user timeout, which decides in its place (docs/behaviour.md,
 * "Dead peers"). */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tcp.h"
#include "testlib.h"

static NDK_OPEN_OPTIONS liveness(ULONG user_timeout_ms)
{
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.TcpUserTimeoutMs = user_timeout_ms;
    o.KeepAliveIdleSeconds = 11;
    o.KeepAliveIntervalSeconds = 4;
    o.KeepAliveProbes = 2;
    return o;
}

static int opt(int fd, int level, int name)
{
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
}

static NDK_SOCKADDR loopback(void)
{
    const char *s = tl_family() == AF_INET ? "127.0.0.1" : "::1";
    NDK_SOCKADDR a;
    memset(&a, 0, sizeof a);
    ndk_sockaddr_parse(s, 0, &a);
    return a;
}

/* A connected pair made as the connector and the listener make theirs
 * (both -1 and *missing set when loopback of this family is missing). */
static void pair_open(const NDK_OPEN_OPTIONS *o, int *client, int *server, bool *missing)
{
    *client = *server = -1;
    *missing = false;
    NDK_SOCKADDR a = loopback();
    int l = ndk_tcp_socket(a.sa.sa_family);
    if (l >= 0)
        ndk_tcp_set_liveness(l, o);
    if (l < 0 || ndk_tcp_bind(l, &a, true) < 0 || ndk_tcp_listen(l, 4) < 0) {
        if (l >= 0)
            close(l);
        *missing = true;
        return;
    }
    ndk_tcp_local_addr(l, &a);
    *client = ndk_tcp_socket(a.sa.sa_family);
    REQUIRE(*client >= 0);
    ndk_tcp_set_liveness(*client, o);
    REQUIRE(ndk_tcp_connect(*client, &a) == 0);
    struct pollfd p = {.fd = l, .events = POLLIN};
    REQUIRE(poll(&p, 1, 5000) == 1);
    NDK_SOCKADDR peer;
    *server = ndk_tcp_accept(l, &peer);
    close(l);
    REQUIRE(*server >= 0);
}

static void check_common(int fd)
{
    CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_NODELAY), 1);
    CHECK_EQ(opt(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_KEEPIDLE), 11);
    CHECK_EQ(opt(fd, IPPROTO_TCP, TCP_KEEPINTVL), 4);
}

/* Both ends of a pair made with the given user timeout carry the common
 * options, TCP_USER_TIMEOUT want_uto and, when want_cnt >= 0, that probe
 * count. */
static void check_pair(ULONG user_timeout, int want_uto, int want_cnt)
{
    NDK_OPEN_OPTIONS o = liveness(user_timeout);
    int c, s;
    bool missing;
    pair_open(&o, &c, &s, &missing);
    if (missing) {
        tl_skip_all("no loopback address of this family");
        return;
    }
    int fds[2] = {c, s};
    for (int i = 0; i < 2; i++) {
        check_common(fds[i]);
        CHECK_EQ(opt(fds[i], IPPROTO_TCP, TCP_USER_TIMEOUT), want_uto);
        if (want_cnt >= 0)
            CHECK_EQ(opt(fds[i], IPPROTO_TCP, TCP_KEEPCNT), want_cnt);
    }
    close(c);
    close(s);
}

static void t_with_user_timeout(void)
{
    check_pair(25000, 25000, -1);
}

/* Nothing else bounds the probes: the count does. */
static void t_without_user_timeout(void)
{
    check_pair(NDK_OPEN_OPTION_SYSTEM, 0, 2);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(t_with_user_timeout);
    RUN_FAM(t_without_user_timeout);
    return tl_finish();
}
