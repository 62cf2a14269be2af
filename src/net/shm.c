/* The operating system under the shared-memory transport (net/shm.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "net/shm.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

int shm_os_region_create(size_t len, void **map)
{
    int fd = memfd_create("ndk-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return -errno;
    if (ftruncate(fd, (off_t)len) < 0 || fcntl(fd, F_ADD_SEALS, SEALS) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        int e = -errno;
        close(fd);
        return e;
    }
    *map = p;
    return fd;
}

int shm_os_region_map(int fd, size_t len, void **map)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    int seals = fcntl(fd, F_GET_SEALS);
    /* Only a sealed region of the agreed size: a peer that could shrink it
     * would make our accesses fault. */
    if (seals < 0 || (seals & SEALS) != SEALS || (size_t)st.st_size != len)
        return -EINVAL;
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -errno;
    *map = p;
    return 0;
}

void shm_os_region_unmap(void *map, size_t len)
{
    if (map)
        munmap(map, len);
}

int shm_os_doorbell_new(void)
{
    int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

void shm_os_doorbell_ring(int fd)
{
    uint64_t one = 1;
    /* EAGAIN: the counter is saturated, the peer will wake anyway. */
    ssize_t n = write(fd, &one, sizeof one);
    (void)n;
}

void shm_os_doorbell_drain(int fd)
{
    uint64_t v;
    ssize_t n = read(fd, &v, sizeof v);
    (void)n;
}

int shm_os_ticker_new(void)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

void shm_os_ticker_set(int fd, int period_ms)
{
    struct timespec p = {period_ms / 1000, (long)(period_ms % 1000) * 1000000};
    struct itimerspec t = {.it_interval = p, .it_value = p};
    timerfd_settime(fd, 0, &t, NULL);
}

int shm_os_pidfd(pid_t pid)
{
    long fd = syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : (int)fd;
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* include/uapi/asm-generic/socket.h, Linux 6.5 */
#endif

int shm_os_peer_pidfd(int sock, pid_t pid)
{
    int fd = -1;
    socklen_t l = sizeof fd;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &fd, &l) == 0)
        return fd;
    /* Only a kernel that does not know the option falls back: any other
     * error (the peer is gone) is the answer. pidfd_open(pid) names
     * whoever holds pid now: the peer, unless it ended and was reaped
     * since it connected, and then the set-up's probe does not find the
     * peer's random word in that process's memory, so no process_vm_*
     * call ever follows (copy mode; xp_shm.c, probe_peer). */
    if (errno != ENOPROTOOPT)
        return -errno;
    return shm_os_pidfd(pid);
}

bool shm_os_ended(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    int n;
    if (pidfd < 0)
        return true; /* no pidfd, no way to tell: as ended */
    while ((n = poll(&p, 1, 0)) < 0 && errno == EINTR)
        ;
    return n != 0; /* readable, or an error: nothing says it lives */
}

void shm_os_close(int fd)
{
    if (fd >= 0)
        close(fd);
}

pid_t shm_os_self(void)
{
    return getpid();
}

#define FDS_MAX 4

int shm_os_send(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {(void *)buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > FDS_MAX)
        return -EINVAL;
    if (nfds > 0) {
        memset(&u, 0, sizeof u);
        m.msg_control = u.buf;
        m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    ssize_t n;
    do
        n = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -EMSGSIZE;
}

int shm_os_recv(int sock, void *buf, size_t len, int *fds, int maxfds, int *nfds, int timeout_ms)
{
    union {
        char buf[CMSG_SPACE(FDS_MAX * sizeof(int))];
        struct cmsghdr align;
    } u;
    /* Without a wait (the set-up steps of a progress loop): one
     * non-blocking receive, no poll before it. */
    if (timeout_ms > 0) {
        struct pollfd p = {.fd = sock, .events = POLLIN};
        int r;
        do
            r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
    }
    struct iovec iov = {buf, len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t n;
    do
        n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? -ETIMEDOUT : -errno;
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int got[FDS_MAX + 8];
        if (k > (int)(sizeof got / sizeof got[0]))
            k = (int)(sizeof got / sizeof got[0]);
        memcpy(got, CMSG_DATA(c), k * sizeof(int));
        for (int i = 0; i < k; i++) {
            if (*nfds < maxfds)
                fds[(*nfds)++] = got[i];
            else
                close(got[i]); /* more than asked for: never leak them */
        }
    }
    if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC) || (size_t)n != len) {
        for (int i = 0; i < *nfds; i++)
            close(fds[i]);
        *nfds = 0;
        return n == 0 ? -ECONNRESET : -EPROTO;
    }
    return 0;
}

int shm_os_peer(int sock, pid_t *pid, bool *same_user)
{
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0)
        return -errno;
    *pid = cr.pid;
    *same_user = cr.uid == geteuid();
    return 0;
}

/* Advances an iovec array past n octets (in place). */
static void iov_advance(struct iovec **iov, int *n, size_t done)
{
    while (*n > 0 && done >= (*iov)->iov_len) {
        done -= (*iov)->iov_len;
        (*iov)++;
        (*n)--;
    }
    if (*n > 0 && done) {
        (*iov)->iov_base = (char *)(*iov)->iov_base + done;
        (*iov)->iov_len -= done;
    }
}

#define XFER_IOV 64

static int transfer(pid_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr, bool push)
{
    struct iovec lbuf[XFER_IOV], rbuf[XFER_IOV];
    if (nl > XFER_IOV || nr > XFER_IOV)
        return -EINVAL;
    memcpy(lbuf, local, nl * sizeof *local);
    memcpy(rbuf, remote, nr * sizeof *remote);
    struct iovec *l = lbuf, *r = rbuf;
    while (nl > 0 && nr > 0) {
        ssize_t n = push ? process_vm_writev(pid, l, nl, r, nr, 0) : process_vm_readv(pid, l, nl, r, nr, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -EFAULT;
        /* A partial transfer stops at an iovec of the remote side that
         * could not be reached, or in the middle of one: go on from there. */
        iov_advance(&l, &nl, (size_t)n);
        iov_advance(&r, &nr, (size_t)n);
    }
    return 0;
}

int shm_os_pull(pid_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr)
{
    return transfer(pid, local, nl, remote, nr, false);
}

int shm_os_push(pid_t pid, const struct iovec *local, int nl, const struct iovec *remote, int nr)
{
    return transfer(pid, local, nl, remote, nr, true);
}

int shm_os_wait_while(const uint64_t *word, uint64_t value, int pidfd, int timeout_ms)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    for (int waited = 0; __atomic_load_n(word, __ATOMIC_ACQUIRE) == value; waited++) {
        if (waited >= timeout_ms)
            return -ETIMEDOUT;
        /* A millisecond at a time: the peer's system call ends, or the
         * peer process does (its pidfd becomes readable). */
        if (poll(&p, pidfd >= 0 ? 1 : 0, 1) > 0)
            return -ESRCH;
    }
    return 0;
}
