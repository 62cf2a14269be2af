/* Who owns a TCP connection of this host (net/tcp_owner.h). */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "net/tcp_owner.h"

/* Copies an address and port into an inet_diag socket id, in network
 * order as the kernel keeps them. */
static int put_end(const struct sockaddr *sa, __be16 *port, __be32 addr[4])
{
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        *port = in->sin_port;
        memcpy(addr, &in->sin_addr, 4);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        *port = in6->sin6_port;
        memcpy(addr, &in6->sin6_addr, 16);
        return 0;
    }
    return -EAFNOSUPPORT;
}

int tcp_owner_lookup(const struct sockaddr *local, const struct sockaddr *remote, uint64_t *inode, uid_t *uid)
{
    if (local->sa_family != remote->sa_family)
        return -EAFNOSUPPORT;
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 req;
    } q;
    memset(&q, 0, sizeof q);
    q.nh.nlmsg_len = sizeof q;
    q.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nh.nlmsg_flags = NLM_F_REQUEST; /* one socket, found by its 4-tuple */
    q.req.sdiag_family = (uint8_t)local->sa_family;
    q.req.sdiag_protocol = IPPROTO_TCP;
    q.req.idiag_states = ~0u;
    q.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    int r = put_end(local, &q.req.id.idiag_sport, q.req.id.idiag_src);
    if (r == 0)
        r = put_end(remote, &q.req.id.idiag_dport, q.req.id.idiag_dst);
    if (r < 0)
        return r;

    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -errno;
    /* The kernel answers at once; the bound only guards a broken one. */
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    if (sendto(fd, &q, sizeof q, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    union {
        struct nlmsghdr nh;
        char buf[1024];
    } a;
    ssize_t n = recv(fd, &a, sizeof a, 0);
    r = n < 0 ? -errno : 0;
    close(fd);
    if (r < 0)
        return r;
    if (n < (ssize_t)sizeof(struct nlmsghdr) || a.nh.nlmsg_len > (size_t)n)
        return -EPROTO;
    if (a.nh.nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(&a.nh);
        if (a.nh.nlmsg_len < NLMSG_LENGTH(sizeof *e))
            return -EPROTO;
        return e->error ? e->error : -ENOENT;
    }
    if (a.nh.nlmsg_type != SOCK_DIAG_BY_FAMILY || a.nh.nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return -EPROTO;
    const struct inet_diag_msg *m = NLMSG_DATA(&a.nh);
    *inode = m->idiag_inode;
    *uid = m->idiag_uid;
    return 0;
}

int tcp_owner_holds(pid_t pid, uint64_t inode)
{
    char path[64], want[64], link[64];
    snprintf(path, sizeof path, "/proc/%ld/fd", (long)pid);
    snprintf(want, sizeof want, "socket:[%" PRIu64 "]", inode);
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        ssize_t n = readlinkat(dirfd(d), e->d_name, link, sizeof link - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        found = strcmp(link, want) == 0;
    }
    closedir(d);
    return found;
}
