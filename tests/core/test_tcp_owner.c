/* net/tcp_owner.h: the socket of a TCP 4-tuple is found in this network
 * namespace with its inode and uid, a 4-tuple no socket has is not, and a
 * process is said to hold the socket exactly while it has a descriptor of
 * it (a forked child that closed its copy does not). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

static uint64_t inode_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

static void t_lookup(void)
{
    struct tcp_pair p;
    REQUIRE(tcp_pair_open(&p));
    uint64_t ino = 0;
    uid_t uid = (uid_t)-1;
    /* The client's view finds the client's socket. */
    CHECK_EQ(tcp_owner_lookup((struct sockaddr *)&p.c_local, (struct sockaddr *)&p.c_remote, &ino, &uid), 0);
    CHECK_EQ(ino, inode_of(p.client));
    CHECK_EQ(uid, getuid());
    /* The mirrored 4-tuple is the server's accepted socket. */
    CHECK_EQ(tcp_owner_lookup((struct sockaddr *)&p.c_remote, (struct sockaddr *)&p.c_local, &ino, &uid), 0);
    CHECK_EQ(ino, inode_of(p.server));
    /* A port nobody connected from. */
    struct sockaddr_storage other = p.c_local;
    if (other.ss_family == AF_INET)
        ((struct sockaddr_in *)&other)->sin_port ^= htons(1);
    else
        ((struct sockaddr_in6 *)&other)->sin6_port ^= htons(1);
    CHECK_EQ(tcp_owner_lookup((struct sockaddr *)&other, (struct sockaddr *)&p.c_remote, &ino, &uid), -ENOENT);
    /* Mixed families are refused before the kernel is asked. */
    struct sockaddr_in v4 = {.sin_family = AF_INET};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
    CHECK_EQ(tcp_owner_lookup((struct sockaddr *)&v4, (struct sockaddr *)&v6, &ino, &uid), -EAFNOSUPPORT);
    close(p.client);
    close(p.server);
}

static bool wait_readable(int fd)
{
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    return poll(&pf, 1, 10000) == 1;
}

static void t_holds(void)
{
    struct tcp_pair p;
    REQUIRE(tcp_pair_open(&p));
    uint64_t ino = inode_of(p.client);
    CHECK_EQ(tcp_owner_holds(getpid(), ino), 1);
    CHECK_EQ(tcp_owner_holds(getpid(), ino + 1000000), 0);
    int ready[2], done[2];
    REQUIRE(pipe(ready) == 0 && pipe(done) == 0);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        /* Keeps the server's socket, gives up the client's. */
        close(p.client);
        char c = 1;
        if (write(ready[1], &c, 1) != 1)
            _exit(1);
        _exit(wait_readable(done[0]) ? 0 : 1);
    }
    CHECK(wait_readable(ready[0]));
    CHECK_EQ(tcp_owner_holds(child, ino), 0);
    CHECK_EQ(tcp_owner_holds(child, inode_of(p.server)), 1);
    char c = 1;
    CHECK(write(done[1], &c, 1) == 1);
    int status = 0;
    CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* A process that ended has no descriptors to read. */
    CHECK(tcp_owner_holds(child, ino) < 0);
    close(ready[0]);
    close(ready[1]);
    close(done[0]);
    close(done[1]);
    close(p.client);
    close(p.server);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(t_lookup);
    RUN_FAM(t_holds);
    return tl_finish();
}
