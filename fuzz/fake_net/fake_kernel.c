/* The fake kernel's descriptors: TCP sockets, epoll sets, eventfds and
 * timerfds, and its clock and random source (fake_kernel.h says what is
 * modelled). Compiled without redirect.h: "close" here is the real one. */
#include "fake_kernel.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <unistd.h>

#define MAX_FILES 4096
#define MAX_WATCHES 256     /* per epoll set */
#define ACCEPT_QUEUE 64
#define SOCKET_BUFFER (4u << 20) /* octets a socket holds unread before its peer's send blocks */
#define LOOPBACK_MSS 65483  /* what Linux reports on lo */
#define EPHEMERAL_FIRST 40000

enum kind { F_FREE, F_TCP, F_EPOLL, F_EVENT, F_TIMER };
enum tcp_state { T_NEW, T_LISTEN, T_CONN, T_DEAD };

struct watch {
    int fd;
    uint32_t events;
    uint64_t data;
};

struct file {
    enum kind kind;
    /* TCP */
    enum tcp_state state;
    struct sockaddr_storage local, peer_addr;
    bool bound, reuse, linger0, wr_shut, rd_shut;
    int peer;           /* the other end's index, -1: none (closed, or never) */
    uint8_t *rx;        /* octets the peer sent, not yet read */
    size_t rx_len, rx_cap;
    bool rx_fin;        /* the peer's FIN came after rx */
    bool reset;         /* the peer reset: ECONNRESET once rx is read */
    int so_error;
    bool in_queue;      /* made by a connect, not yet accepted */
    int queue[ACCEPT_QUEUE];
    unsigned nqueue;
    /* epoll */
    struct watch *watches;
    unsigned nwatches;
    /* eventfd */
    uint64_t count;
    /* timerfd */
    uint64_t deadline_ns; /* 0: disarmed */
};

static struct file files[MAX_FILES];
static int nfiles; /* files[nfiles..] were never used: scans stop there */
static unsigned nopen;
static uint64_t now_ns = 1000000000ull; /* not 0: deadlines of 0 mean "none" somewhere */
static uint64_t rng = 1;
static uint16_t next_port = EPHEMERAL_FIRST;

static struct file *get(int fd, enum kind k)
{
    if (fd < FAKE_FD_BASE || fd >= FAKE_FD_BASE + MAX_FILES)
        return NULL;
    struct file *f = &files[fd - FAKE_FD_BASE];
    return f->kind == k ? f : NULL;
}

static bool ours(int fd)
{
    return fd >= FAKE_FD_BASE && fd < FAKE_FD_BASE + MAX_FILES && files[fd - FAKE_FD_BASE].kind != F_FREE;
}

static int fail(int e)
{
    errno = e;
    return -1;
}

/* Clears a slot but for its receive buffer, which stays for the slot's next
 * socket: one allocation per connection, and its release, were 3 to 6 % of
 * the run time of the targets on this fake under ASan. The fake is not under
 * test; octets past rx_len are never read. */
static void clear_file(struct file *f)
{
    uint8_t *rx = f->rx;
    size_t cap = f->rx_cap;
    memset(f, 0, sizeof *f);
    f->rx = rx;
    f->rx_cap = cap;
}

static int new_file(enum kind k)
{
    for (int i = 0; i < MAX_FILES; i++) {
        if (files[i].kind == F_FREE) {
            clear_file(&files[i]);
            files[i].kind = k;
            files[i].peer = -1;
            nopen++;
            if (i >= nfiles)
                nfiles = i + 1;
            return FAKE_FD_BASE + i;
        }
    }
    return fail(EMFILE);
}

unsigned fake_net_open_fds(void)
{
    return nopen;
}

void fake_net_seed(uint64_t seed)
{
    rng = seed | 1;
    next_port = EPHEMERAL_FIRST;
}

bool fake_net_advance(uint64_t ms)
{
    now_ns += ms * 1000000ull;
    return fake_net_run();
}

bool fake_net_wait(bool (*done)(void *), void *arg, uint64_t max_ms)
{
    uint64_t end = now_ns + max_ms * 1000000ull;
    for (;;) {
        if (!fake_net_run())
            return false;
        if (done(arg))
            return true;
        /* Nothing to do until the earliest deadline an engine waits for. */
        uint64_t next = fake_threads_next_deadline();
        if (next > end)
            return false;
        fake_net_advance(next > now_ns ? (next - now_ns + 999999) / 1000000 : 1);
    }
}

int fake_clock_gettime(clockid_t clk, struct timespec *ts)
{
    if (clk != CLOCK_MONOTONIC)
        return clock_gettime(clk, ts);
    ts->tv_sec = (time_t)(now_ns / 1000000000ull);
    ts->tv_nsec = (long)(now_ns % 1000000000ull);
    return 0;
}

ssize_t fake_getrandom(void *buf, size_t len, unsigned flags)
{
    (void)flags;
    uint8_t *p = buf;
    for (size_t i = 0; i < len; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17; /* xorshift64 */
        p[i] = (uint8_t)(rng >> 24);
    }
    return (ssize_t)len;
}

/* ---- TCP ---- */

static uint16_t port_of(const struct sockaddr_storage *a)
{
    return a->ss_family == AF_INET ? ntohs(((const struct sockaddr_in *)a)->sin_port)
                                   : ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
}

static void set_port(struct sockaddr_storage *a, uint16_t port)
{
    if (a->ss_family == AF_INET)
        ((struct sockaddr_in *)a)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)a)->sin6_port = htons(port);
}

static bool is_any(const struct sockaddr_storage *a)
{
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &in6addr_any, sizeof in6addr_any) == 0;
}

static bool same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                  sizeof(struct in6_addr)) == 0;
}

static bool overlap(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    return a->ss_family == b->ss_family && port_of(a) == port_of(b) && (is_any(a) || is_any(b) || same_ip(a, b));
}

static socklen_t addr_len(int family)
{
    return family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
}

static void copy_addr(const struct sockaddr_storage *s, struct sockaddr *a, socklen_t *len)
{
    socklen_t n = addr_len(s->ss_family);
    memcpy(a, s, *len < n ? *len : n);
    *len = n;
}

int fake_socket(int domain, int type, int protocol)
{
    if ((domain != AF_INET && domain != AF_INET6) || (type & 0xf) != SOCK_STREAM)
        return socket(domain, type, protocol);
    int fd = new_file(F_TCP);
    if (fd >= 0)
        files[fd - FAKE_FD_BASE].local.ss_family = (sa_family_t)domain;
    return fd;
}

/* Binding conflicts as Linux has them for the cases the provider makes:
 * a listener's port is its own; other sockets share a port when both
 * asked for SO_REUSEADDR. */
static bool port_taken(const struct file *self, const struct sockaddr_storage *a)
{
    for (int i = 0; i < nfiles; i++) {
        const struct file *f = &files[i];
        if (f == self || f->kind != F_TCP || !f->bound || f->in_queue || !overlap(&f->local, a))
            continue;
        if (f->state == T_LISTEN || !f->reuse || !self->reuse)
            return true;
    }
    return false;
}

/* Ports held by other processes of the host (a real kernel always has
 * some): binding one fails, as it would, so the provider's retry over
 * ports (net/ports.c) runs too. */
static bool held_elsewhere(uint16_t port)
{
    return port % 61 == 0;
}

static int do_bind(struct file *f, const struct sockaddr_storage *a)
{
    struct sockaddr_storage want = *a;
    if (port_of(&want) == 0) {
        for (unsigned tries = 0;; tries++) {
            if (tries == 20000)
                return fail(EADDRINUSE);
            set_port(&want, next_port);
            next_port = next_port == 60999 ? EPHEMERAL_FIRST : next_port + 1;
            if (!held_elsewhere(port_of(&want)) && !port_taken(f, &want))
                break;
        }
    } else if (held_elsewhere(port_of(&want)) || port_taken(f, &want)) {
        return fail(EADDRINUSE);
    }
    f->local = want;
    f->bound = true;
    return 0;
}

int fake_bind(int fd, const struct sockaddr *a, socklen_t len)
{
    if (!ours(fd))
        return bind(fd, a, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (f->bound || f->state != T_NEW)
        return fail(EINVAL);
    if (a->sa_family != f->local.ss_family || len < addr_len(a->sa_family))
        return fail(EINVAL);
    struct sockaddr_storage s;
    memset(&s, 0, sizeof s);
    memcpy(&s, a, addr_len(a->sa_family));
    return do_bind(f, &s);
}

int fake_listen(int fd, int backlog)
{
    (void)backlog;
    if (!ours(fd))
        return listen(fd, backlog);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (f->state == T_LISTEN)
        return 0;
    if (f->state != T_NEW)
        return fail(EINVAL);
    if (!f->bound) {
        struct sockaddr_storage any;
        memset(&any, 0, sizeof any);
        any.ss_family = f->local.ss_family;
        if (do_bind(f, &any) < 0)
            return -1;
    }
    /* Two listeners on one port: Linux refuses the second listen. */
    for (int i = 0; i < nfiles; i++)
        if (&files[i] != f && files[i].kind == F_TCP && files[i].state == T_LISTEN &&
            overlap(&files[i].local, &f->local))
            return fail(EADDRINUSE);
    f->state = T_LISTEN;
    return 0;
}

static struct file *find_listener(const struct sockaddr_storage *dst)
{
    for (int i = 0; i < nfiles; i++)
        if (files[i].kind == F_TCP && files[i].state == T_LISTEN && overlap(&files[i].local, dst))
            return &files[i];
    return NULL;
}

int fake_connect(int fd, const struct sockaddr *a, socklen_t len)
{
    if (!ours(fd))
        return connect(fd, a, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (f->state == T_CONN)
        return fail(EISCONN);
    if (f->state != T_NEW)
        return fail(EINVAL);
    if (a->sa_family != f->local.ss_family || len < addr_len(a->sa_family))
        return fail(EINVAL);
    struct sockaddr_storage dst;
    memset(&dst, 0, sizeof dst);
    memcpy(&dst, a, addr_len(a->sa_family));
    if (!f->bound) {
        struct sockaddr_storage src = dst;
        set_port(&src, 0);
        if (do_bind(f, &src) < 0)
            return -1;
    }
    f->peer_addr = dst;
    struct file *l = find_listener(&dst);
    if (!l || l->nqueue == ACCEPT_QUEUE) {
        f->state = T_DEAD;
        f->so_error = ECONNREFUSED;
        return fail(EINPROGRESS);
    }
    int cfd = new_file(F_TCP);
    if (cfd < 0) {
        f->state = T_DEAD;
        f->so_error = ECONNREFUSED;
        return fail(EINPROGRESS);
    }
    struct file *c = &files[cfd - FAKE_FD_BASE];
    c->state = T_CONN;
    /* The accepted end has the address connected to, port included. */
    c->local = f->peer_addr;
    c->bound = true;
    c->peer_addr = f->local;
    c->in_queue = true;
    c->peer = (int)(f - files);
    f->peer = cfd - FAKE_FD_BASE;
    f->state = T_CONN;
    l->queue[l->nqueue++] = cfd;
    return fail(EINPROGRESS);
}

int fake_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags)
{
    (void)flags;
    if (!ours(fd))
        return accept4(fd, a, len, flags);
    struct file *l = get(fd, F_TCP);
    if (!l || l->state != T_LISTEN)
        return fail(EINVAL);
    if (l->nqueue == 0)
        return fail(EAGAIN);
    int cfd = l->queue[0];
    memmove(l->queue, l->queue + 1, --l->nqueue * sizeof l->queue[0]);
    struct file *c = &files[cfd - FAKE_FD_BASE];
    c->in_queue = false;
    if (a && len)
        copy_addr(&c->peer_addr, a, len);
    return cfd;
}

int fake_getsockname(int fd, struct sockaddr *a, socklen_t *len)
{
    if (!ours(fd))
        return getsockname(fd, a, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    copy_addr(&f->local, a, len);
    return 0;
}

int fake_getpeername(int fd, struct sockaddr *a, socklen_t *len)
{
    if (!ours(fd))
        return getpeername(fd, a, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (f->state != T_CONN)
        return fail(ENOTCONN);
    copy_addr(&f->peer_addr, a, len);
    return 0;
}

int fake_setsockopt(int fd, int level, int name, const void *v, socklen_t len)
{
    if (!ours(fd))
        return setsockopt(fd, level, name, v, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (level == SOL_SOCKET && name == SO_LINGER && len >= sizeof(struct linger)) {
        const struct linger *l = v;
        f->linger0 = l->l_onoff && l->l_linger == 0;
    } else if (level == SOL_SOCKET && name == SO_REUSEADDR && len >= sizeof(int)) {
        f->reuse = *(const int *)v != 0;
    }
    return 0; /* buffer sizes, TCP_NODELAY, keepalive: nothing to model */
}

int fake_getsockopt(int fd, int level, int name, void *v, socklen_t *len)
{
    if (!ours(fd))
        return getsockopt(fd, level, name, v, len);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    int val = 0;
    if (level == SOL_SOCKET && name == SO_ERROR) {
        val = f->so_error;
        f->so_error = 0;
    } else if (level == SOL_SOCKET && (name == SO_RCVBUF || name == SO_SNDBUF)) {
        val = (int)SOCKET_BUFFER;
    } else if (level == IPPROTO_TCP && name == TCP_MAXSEG) {
        val = LOOPBACK_MSS;
    }
    if (*len < sizeof val)
        return fail(EINVAL);
    memcpy(v, &val, sizeof val);
    *len = sizeof val;
    return 0;
}

static struct file *peer_of(struct file *f)
{
    return f->peer >= 0 ? &files[f->peer] : NULL;
}

/* The peer learns that f is gone: a reset, or a FIN after its data. */
static void hang_up(struct file *f, bool reset)
{
    struct file *p = peer_of(f);
    if (!p)
        return;
    if (reset) {
        p->reset = true;
        p->so_error = ECONNRESET;
    } else {
        p->rx_fin = true;
    }
    p->peer = -1;
    f->peer = -1;
}

int fake_shutdown(int fd, int how)
{
    if (!ours(fd))
        return shutdown(fd, how);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    if (f->state != T_CONN)
        return fail(ENOTCONN);
    if ((how == SHUT_WR || how == SHUT_RDWR) && !f->wr_shut) {
        f->wr_shut = true;
        struct file *p = peer_of(f);
        if (p)
            p->rx_fin = true;
    }
    if (how == SHUT_RD || how == SHUT_RDWR)
        f->rd_shut = true;
    return 0;
}

static void free_file(struct file *f)
{
    int fd = FAKE_FD_BASE + (int)(f - files);
    /* Closing a descriptor takes it out of every epoll set. */
    for (int i = 0; i < nfiles; i++) {
        struct file *e = &files[i];
        if (e->kind != F_EPOLL)
            continue;
        for (unsigned w = 0; w < e->nwatches; w++)
            if (e->watches[w].fd == fd) {
                e->watches[w] = e->watches[--e->nwatches];
                break;
            }
    }
    free(f->watches);
    clear_file(f);
    f->kind = F_FREE;
    nopen--;
}

static void close_tcp(struct file *f)
{
    if (f->state == T_LISTEN) {
        /* Connections never accepted are reset. */
        for (unsigned i = 0; i < f->nqueue; i++) {
            struct file *c = &files[f->queue[i] - FAKE_FD_BASE];
            hang_up(c, true);
            free_file(c);
        }
    }
    hang_up(f, f->linger0 || f->rx_len > 0);
}

int fake_close(int fd)
{
    if (!ours(fd))
        return close(fd);
    struct file *f = &files[fd - FAKE_FD_BASE];
    if (f->kind == F_TCP)
        close_tcp(f);
    free_file(f);
    return 0;
}

static ssize_t tcp_recv(struct file *f, void *buf, size_t len, int flags)
{
    if (f->state == T_LISTEN || f->state == T_NEW)
        return fail(ENOTCONN);
    if (f->rd_shut)
        return 0;
    if (f->rx_len) {
        size_t n = len < f->rx_len ? len : f->rx_len;
        memcpy(buf, f->rx, n);
        if (!(flags & MSG_PEEK)) {
            memmove(f->rx, f->rx + n, f->rx_len - n);
            f->rx_len -= n;
        }
        return (ssize_t)n;
    }
    if (f->so_error) {
        /* A reset is read after the data that came before it, then the
         * stream ends. */
        int e = f->so_error;
        f->so_error = 0;
        f->reset = false;
        f->rx_fin = true;
        f->state = T_DEAD;
        return fail(e);
    }
    if (f->rx_fin || f->state == T_DEAD)
        return 0;
    return fail(EAGAIN);
}

static ssize_t tcp_send(struct file *f, const struct iovec *iov, int n)
{
    if (f->state == T_NEW || f->state == T_LISTEN)
        return fail(ENOTCONN);
    if (f->wr_shut)
        return fail(EPIPE);
    if (f->so_error || f->state == T_DEAD) {
        int e = f->so_error ? f->so_error : EPIPE;
        f->so_error = 0;
        f->reset = false;
        f->rx_fin = true;
        f->state = T_DEAD;
        return fail(e);
    }
    struct file *p = peer_of(f);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += iov[i].iov_len;
    if (!p) {
        /* The peer closed: its stack answers with a reset, the octets are
         * lost. */
        f->reset = true;
        f->so_error = ECONNRESET;
        return (ssize_t)total;
    }
    size_t room = SOCKET_BUFFER - p->rx_len;
    if (room == 0)
        return fail(EAGAIN);
    if (total > room)
        total = room;
    if (p->rx_cap < p->rx_len + total) {
        size_t cap = p->rx_cap ? p->rx_cap : 4096;
        while (cap < p->rx_len + total)
            cap *= 2;
        uint8_t *rx = realloc(p->rx, cap);
        if (!rx)
            return fail(ENOBUFS);
        p->rx = rx;
        p->rx_cap = cap;
    }
    size_t left = total;
    for (int i = 0; i < n && left; i++) {
        size_t k = iov[i].iov_len < left ? iov[i].iov_len : left;
        memcpy(p->rx + p->rx_len, iov[i].iov_base, k);
        p->rx_len += k;
        left -= k;
    }
    return (ssize_t)total;
}

ssize_t fake_recv(int fd, void *buf, size_t len, int flags)
{
    if (!ours(fd))
        return recv(fd, buf, len, flags);
    struct file *f = get(fd, F_TCP);
    return f ? tcp_recv(f, buf, len, flags) : fail(ENOTSOCK);
}

ssize_t fake_send(int fd, const void *buf, size_t len, int flags)
{
    if (!ours(fd))
        return send(fd, buf, len, flags);
    struct file *f = get(fd, F_TCP);
    struct iovec v = {(void *)(uintptr_t)buf, len};
    return f ? tcp_send(f, &v, 1) : fail(ENOTSOCK);
}

ssize_t fake_sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (!ours(fd))
        return sendmsg(fd, m, flags);
    struct file *f = get(fd, F_TCP);
    return f ? tcp_send(f, m->msg_iov, (int)m->msg_iovlen) : fail(ENOTSOCK);
}

ssize_t fake_readv(int fd, const struct iovec *iov, int n)
{
    if (!ours(fd))
        return readv(fd, iov, n);
    struct file *f = get(fd, F_TCP);
    if (!f)
        return fail(ENOTSOCK);
    ssize_t total = 0;
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len == 0)
            continue;
        ssize_t r = tcp_recv(f, iov[i].iov_base, iov[i].iov_len, 0);
        if (r < 0)
            return total ? total : r;
        total += r;
        if ((size_t)r < iov[i].iov_len)
            break;
    }
    return total;
}

/* ---- eventfd, timerfd ---- */

int fake_eventfd(unsigned initval, int flags)
{
    (void)flags;
    int fd = new_file(F_EVENT);
    if (fd >= 0)
        files[fd - FAKE_FD_BASE].count = initval;
    return fd;
}

int fake_timerfd_create(int clockid, int flags)
{
    (void)clockid, (void)flags;
    return new_file(F_TIMER);
}

int fake_timerfd_settime(int fd, int flags, const struct itimerspec *n, struct itimerspec *old)
{
    struct file *f = get(fd, F_TIMER);
    if (!f)
        return timerfd_settime(fd, flags, n, old);
    uint64_t at = (uint64_t)n->it_value.tv_sec * 1000000000ull + (uint64_t)n->it_value.tv_nsec;
    if (at && !(flags & TFD_TIMER_ABSTIME))
        at += now_ns;
    f->deadline_ns = at;
    f->count = 0;
    return 0;
}

ssize_t fake_read(int fd, void *buf, size_t len)
{
    if (!ours(fd))
        return read(fd, buf, len);
    struct file *f = &files[fd - FAKE_FD_BASE];
    if (f->kind == F_TCP)
        return tcp_recv(f, buf, len, 0);
    if (len < 8 || (f->kind != F_EVENT && f->kind != F_TIMER))
        return fail(EINVAL);
    if (f->kind == F_TIMER && f->deadline_ns && f->deadline_ns <= now_ns) {
        f->count++;
        f->deadline_ns = 0;
    }
    if (f->count == 0)
        return fail(EAGAIN);
    memcpy(buf, &f->count, 8);
    f->count = 0;
    return 8;
}

ssize_t fake_write(int fd, const void *buf, size_t len)
{
    if (!ours(fd))
        return write(fd, buf, len);
    struct file *f = &files[fd - FAKE_FD_BASE];
    if (f->kind == F_TCP) {
        struct iovec v = {(void *)(uintptr_t)buf, len};
        return tcp_send(f, &v, 1);
    }
    if (f->kind != F_EVENT || len < 8)
        return fail(EINVAL);
    uint64_t add;
    memcpy(&add, buf, 8);
    f->count += add;
    return 8;
}

/* ---- epoll (level-triggered, as src/net/loop.c uses it) ---- */

int fake_epoll_create1(int flags)
{
    (void)flags;
    return new_file(F_EPOLL);
}

int fake_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    struct file *e = get(epfd, F_EPOLL);
    if (!e)
        return epoll_ctl(epfd, op, fd, ev);
    if (!ours(fd))
        return fail(EPERM); /* a real descriptor in a fake set could never be seen */
    unsigned i = 0;
    while (i < e->nwatches && e->watches[i].fd != fd)
        i++;
    switch (op) {
    case EPOLL_CTL_ADD:
        if (i < e->nwatches)
            return fail(EEXIST);
        if (e->nwatches == MAX_WATCHES)
            return fail(ENOSPC);
        if (!e->watches && !(e->watches = calloc(MAX_WATCHES, sizeof *e->watches)))
            return fail(ENOMEM);
        e->watches[e->nwatches++] = (struct watch){fd, ev->events, ev->data.u64};
        return 0;
    case EPOLL_CTL_MOD:
        if (i == e->nwatches)
            return fail(ENOENT);
        e->watches[i].events = ev->events;
        e->watches[i].data = ev->data.u64;
        return 0;
    case EPOLL_CTL_DEL:
        if (i == e->nwatches)
            return fail(ENOENT);
        e->watches[i] = e->watches[--e->nwatches];
        return 0;
    }
    return fail(EINVAL);
}

static uint32_t readiness(const struct file *f)
{
    switch (f->kind) {
    case F_EVENT:
        return f->count ? EPOLLIN : 0;
    case F_TIMER:
        return f->count || (f->deadline_ns && f->deadline_ns <= now_ns) ? EPOLLIN : 0;
    case F_TCP:
        break;
    default:
        return 0;
    }
    switch (f->state) {
    case T_NEW:
        return EPOLLOUT | EPOLLHUP;
    case T_LISTEN:
        return f->nqueue ? EPOLLIN : 0;
    case T_DEAD:
        return EPOLLIN | EPOLLOUT | EPOLLHUP | EPOLLRDHUP | (f->so_error || f->reset ? EPOLLERR : 0);
    case T_CONN:
        break;
    }
    uint32_t ev = 0;
    const struct file *p = f->peer >= 0 ? &files[f->peer] : NULL;
    if (f->rx_len || f->rx_fin || f->reset || f->rd_shut)
        ev |= EPOLLIN;
    if (f->rx_fin || f->rd_shut)
        ev |= EPOLLRDHUP;
    if (f->reset)
        ev |= EPOLLHUP;
    if (f->so_error)
        ev |= EPOLLERR;
    if (!p || p->rx_len < SOCKET_BUFFER)
        ev |= EPOLLOUT;
    if (f->rx_fin && f->wr_shut)
        ev |= EPOLLHUP;
    return ev;
}

static int ready_events(struct file *e, struct epoll_event *evs, int max)
{
    int n = 0;
    for (unsigned i = 0; i < e->nwatches && n < max; i++) {
        const struct watch *w = &e->watches[i];
        uint32_t r = readiness(&files[w->fd - FAKE_FD_BASE]) & (w->events | EPOLLERR | EPOLLHUP);
        if (r) {
            evs[n].events = r;
            evs[n].data.u64 = w->data;
            n++;
        }
    }
    return n;
}

/* A blocked engine's wait is over (fake_thread_block). */
static bool fake_epoll_ready(int epfd, uint64_t until)
{
    struct epoll_event ev;
    return now_ns >= until || ready_events(&files[epfd - FAKE_FD_BASE], &ev, 1) > 0;
}

int fake_epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout_ms)
{
    struct file *e = get(epfd, F_EPOLL);
    if (!e)
        return epoll_wait(epfd, evs, max, timeout_ms);
    uint64_t until = timeout_ms < 0 ? UINT64_MAX : now_ns + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        int n = ready_events(e, evs, max);
        if (n || now_ns >= until || !fake_thread_block(fake_epoll_ready, epfd, until)) {
            fake_thread_worked();
            return n;
        }
    }
}
