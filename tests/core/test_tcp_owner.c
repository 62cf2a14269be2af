/* net/tcp_owner.h: a descriptor is recognised as the TCP socket of a
 * 4-tuple of our network namespace exactly when it is one: the client's
 * socket is its own 4-tuple's, not the mirrored one's (the server's), not
 * another connection's; a UNIX socket, a pipe, a listening or unconnected
 * TCP socket and a UDP socket "connected" to the same addresses are not,
 * nor is the right socket said to be of another namespace. */
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/tcp_owner.h"
#include "testlib.h"

struct tcp_pair {
    int client, server;
    struct sockaddr_storage c_local, c_remote;
};

static bool tcp_pair_open(struct tcp_pair *p)
{
    int fam = tl_family();
    struct sockaddr_storage any;
    memset(&any, 0, sizeof any);
    socklen_t len;
    if (fam == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&any;
        in->sin_family = AF_INET;
        in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *in;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&any;
        in6->sin6_family = AF_INET6;
        in6->sin6_addr = in6addr_loopback;
        len = sizeof *in6;
    }
    int l = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (l < 0 || bind(l, (struct sockaddr *)&any, len) < 0 || listen(l, 1) < 0)
        return false;
    socklen_t sl = sizeof any;
    getsockname(l, (struct sockaddr *)&any, &sl);
    p->client = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    bool ok = connect(p->client, (struct sockaddr *)&any, len) == 0;
    p->server = ok ? accept4(l, NULL, NULL, SOCK_CLOEXEC) : -1;
    close(l);
    sl = sizeof p->c_local;
    getsockname(p->client, (struct sockaddr *)&p->c_local, &sl);
    sl = sizeof p->c_remote;
    getpeername(p->client, (struct sockaddr *)&p->c_remote, &sl);
    return ok && p->server >= 0;
}

#define SA(x) ((struct sockaddr *)&(x))

static void t_is(void)
{
    struct tcp_pair p, q;
    REQUIRE(tcp_pair_open(&p) && tcp_pair_open(&q));
    uint64_t ns = 0;
    REQUIRE(tcp_owner_netns(p.client, &ns) == 0);
    /* Our other sockets are of the same namespace. */
    uint64_t ns2 = 1;
    CHECK(tcp_owner_netns(q.server, &ns2) == 0 && ns2 == ns);
    /* The client's socket is its 4-tuple's; the server's is the mirrored. */
    CHECK_EQ(tcp_owner_is(p.client, SA(p.c_local), SA(p.c_remote), ns), 1);
    CHECK_EQ(tcp_owner_is(p.server, SA(p.c_remote), SA(p.c_local), ns), 1);
    CHECK_EQ(tcp_owner_is(p.server, SA(p.c_local), SA(p.c_remote), ns), 0);
    /* Another connection's socket, between the same addresses. */
    CHECK_EQ(tcp_owner_is(q.client, SA(p.c_local), SA(p.c_remote), ns), 0);
    /* The right socket, said to be of another namespace. */
    CHECK_EQ(tcp_owner_is(p.client, SA(p.c_local), SA(p.c_remote), ns + 1), 0);
    /* Descriptors that are no TCP connection at all. */
    int un[2], pp[2];
    REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, un) == 0 && pipe(pp) == 0);
    CHECK_EQ(tcp_owner_is(un[0], SA(p.c_local), SA(p.c_remote), ns), 0);
    CHECK_EQ(tcp_owner_is(pp[0], SA(p.c_local), SA(p.c_remote), ns), 0);
    int fam = p.c_local.ss_family;
    socklen_t len = fam == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int udp = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int fresh = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(udp >= 0 && fresh >= 0);
    /* A UDP socket with the very names: bound to an address of the
     * 4-tuple's (the client's own port is taken by TCP, not by UDP). */
    CHECK(bind(udp, SA(p.c_local), len) == 0 && connect(udp, SA(p.c_remote), len) == 0);
    CHECK_EQ(tcp_owner_is(udp, SA(p.c_local), SA(p.c_remote), ns), 0);
    CHECK_EQ(tcp_owner_is(fresh, SA(p.c_local), SA(p.c_remote), ns), 0);
    /* Mixed families are nobody's. */
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    CHECK_EQ(tcp_owner_is(p.client, SA(v4), SA(v6), ns), 0);
    int fds[] = {un[0], un[1], pp[0], pp[1], udp, fresh, p.client, p.server, q.client, q.server};
    for (unsigned i = 0; i < sizeof fds / sizeof fds[0]; i++)
        close(fds[i]);
}

/* A connection the peer reset: the socket is no longer connected. */
static void t_reset(void)
{
    struct tcp_pair p;
    REQUIRE(tcp_pair_open(&p));
    uint64_t ns = 0;
    REQUIRE(tcp_owner_netns(p.client, &ns) == 0);
    struct linger lg = {1, 0};
    REQUIRE(setsockopt(p.server, SOL_SOCKET, SO_LINGER, &lg, sizeof lg) == 0);
    close(p.server); /* a reset */
    char c;
    /* The reset arrived once a read says so (loopback: at once). */
    CHECK(recv(p.client, &c, 1, 0) < 0 && errno == ECONNRESET);
    CHECK_EQ(tcp_owner_is(p.client, SA(p.c_local), SA(p.c_remote), ns), 0);
    close(p.client);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    int probe = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint64_t ns;
    if (probe >= 0 && tcp_owner_netns(probe, &ns) == -ENOPROTOOPT)
        tl_skip_all("SO_NETNS_COOKIE is not available (Linux 5.14 or later)");
    if (probe >= 0)
        close(probe);
    RUN_FAM(t_is);
    RUN_FAM(t_reset);
    return tl_finish();
}
