/*
 * The same-host rendezvous (shm_rendezvous.h; docs/shm.md, Selection).
 *
 * Messages, each one SOCK_SEQPACKET message on the abstract socket, each
 * followed at once by the region set-up's own (xp_shm.c) where it says so:
 *   initiator -> listener   hello: a random secret, the TCP 4-tuple as the
 *                           initiator sees it, and its TCP socket itself
 *                           (SCM_RIGHTS: the proof that it holds it);
 *                           then the region (the initiator creates it)
 *   listener -> initiator   ok: the secret (the checks passed); then its
 *                           answer to the region
 *   initiator -> listener   its probe result, then go: the secret, once
 *                           the set-up is ready; sent before the RTR goes
 *                           on TCP, so the passive side finds both when
 *                           the RTR arrives
 * One round trip before the RTR. A side that refuses or fails closes the
 * socket; TCP carries on. No step waits: each takes what its socket holds
 * when the loop says it is readable.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>

#include "core.h"
#include "net/shm.h"
#include "net/shm_rv.h"
#include "net/sys.h"
#include "net/tcp.h"
#include "net/tcp_owner.h"
#include "net/watched.h"
#include "shm_rendezvous.h"
#include "xp_shm.h"

/* Accepted connections whose hello has not come: beyond this many, the
 * one that waited longest is closed. An initiator sends its hello as it
 * connects, so only processes that connect and stay silent lose theirs,
 * and they cannot hold the fast path from the others. */
#define RV_INCOMING_MAX 32

enum rv_state {
    RV_IDLE,
    RV_EXPECT,  /* passive: in its listener's list */
    RV_WAIT_OK, /* initiator: hello sent */
    RV_SETUP,   /* the region set-up (xp_shm.c) */
    RV_READY,   /* passive: set-up ready, waiting for go */
    RV_GO,      /* agreed: shm_rv_take has the set-up */
    RV_FAILED,
};

/* An accepted UNIX connection whose hello has not come yet. */
struct shm_rv_in {
    struct watched_fd w; /* first: in the listener's incoming set, the socket */
    struct shm_rv_listen *ls;
};

static bool send_msg(int fd, uint32_t kind, const uint8_t secret[16], const NDK_SOCKADDR *local,
                     const NDK_SOCKADDR *peer, int pass_fd)
{
    struct shm_rv_msg m;
    memset(&m, 0, sizeof m);
    m.magic = SHM_RV_MAGIC;
    m.version = SHM_RV_VERSION;
    m.kind = kind;
    memcpy(m.secret, secret, sizeof m.secret);
    if (local)
        m.local = *local;
    if (peer)
        m.peer = *peer;
    return shm_os_send(fd, &m, sizeof m, &pass_fd, pass_fd >= 0 ? 1 : 0) == 0;
}

/* One message of this kind: 1 it came, 0 none yet, -1 anything else. A
 * hello carries one descriptor (*passed, -1 when none came; the caller
 * closes it); any other message none. */
static int recv_msg(int fd, uint32_t kind, struct shm_rv_msg *m, int *passed)
{
    int got = -1, n = 0;
    int r = shm_os_recv(fd, m, sizeof *m, &got, passed ? 1 : 0, &n, 0);
    if (passed)
        *passed = n == 1 ? got : -1;
    if (r == -ETIMEDOUT)
        return 0;
    if (r || m->magic != SHM_RV_MAGIC || m->version != SHM_RV_VERSION || m->kind != kind)
        return -1;
    return 1;
}

/* ---- both roles ---- */

void shm_rv_init(struct shm_rv *rv)
{
    memset(rv, 0, sizeof *rv);
    rv->fd = -1;
}

static void unlink_expect(struct shm_rv *rv)
{
    if (!rv->pprev)
        return;
    *rv->pprev = rv->next;
    if (rv->next)
        rv->next->pprev = rv->pprev;
    rv->next = NULL;
    rv->pprev = NULL;
}

static void close_socket(struct shm_rv *rv)
{
    if (rv->fd < 0)
        return;
    loop_watch_del(rv->loop, &rv->watch); /* when there is one */
    shm_os_close(rv->fd);
    rv->fd = -1;
}

void shm_rv_stop(struct shm_rv *rv)
{
    unlink_expect(rv);
    close_socket(rv);
    ndk_shm_setup_abandon(rv->setup);
    rv->setup = NULL;
    if (rv->state != RV_IDLE)
        rv->state = RV_FAILED;
}

static void fail(struct shm_rv *rv)
{
    shm_rv_stop(rv);
    if (rv->settled)
        rv->settled(rv, false);
}

/* The peer's message of this kind carrying our secret: 1 it came, 0 none
 * yet, -1 anything else (the rendezvous has then failed). */
static int take_answer(struct shm_rv *rv, uint32_t kind)
{
    struct shm_rv_msg m;
    int r = recv_msg(rv->fd, kind, &m, NULL);
    if (r > 0 && memcmp(m.secret, rv->secret, sizeof m.secret) != 0)
        r = -1;
    if (r < 0)
        fail(rv);
    return r;
}

/* Moves the rendezvous on with what its socket holds. */
static void progress(struct shm_rv *rv)
{
    int r;
    switch (rv->state) {
    case RV_WAIT_OK:
        if (take_answer(rv, SHM_RV_OK) <= 0)
            return;
        rv->state = RV_SETUP;
        __attribute__((fallthrough));
    case RV_SETUP:
        r = ndk_shm_setup_step(rv->setup);
        if (r > 0)
            return;
        if (r < 0) {
            fail(rv);
            return;
        }
        if (rv->settled) {
            /* The initiator decides: from the go on, shared memory. */
            if (!send_msg(rv->fd, SHM_RV_GO, rv->secret, NULL, NULL, -1)) {
                fail(rv);
                return;
            }
            rv->state = RV_GO;
            close_socket(rv);
            rv->settled(rv, true);
            return;
        }
        rv->state = RV_READY;
        __attribute__((fallthrough));
    case RV_READY:
        if (take_answer(rv, SHM_RV_GO) <= 0)
            return;
        rv->state = RV_GO;
        close_socket(rv);
        return;
    default:
        return;
    }
}

static void rv_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    progress(container_of(w, struct shm_rv, watch));
}

struct shm_conn *shm_rv_take(struct shm_rv *rv)
{
    if (rv->state == RV_SETUP || rv->state == RV_READY)
        progress(rv);
    struct shm_conn *s = NULL;
    if (rv->state == RV_GO) {
        s = rv->setup;
        rv->setup = NULL;
    }
    shm_rv_stop(rv);
    return s;
}

/* ---- initiator ---- */

bool shm_rv_connect(struct shm_rv *rv, struct loop *loop, struct ndk_qp_impl *qp, int tcp_fd,
                    const NDK_SOCKADDR *local, const NDK_SOCKADDR *peer,
                    void (*settled)(struct shm_rv *rv, bool shm))
{
    int fd = shm_rv_os_connect(&peer->sa);
    if (fd < 0)
        return false;
    shm_rv_init(rv);
    rv->fd = fd;
    rv->loop = loop;
    rv->qp = qp;
    rv->local = *local;
    rv->peer = *peer;
    rv->settled = settled;
    int err = 0;
    /* The hello, then at once the region (we create it): the listener
     * answers both in one turn of its loop. */
    if (!ndk_random(rv->secret, sizeof rv->secret) ||
        !send_msg(fd, SHM_RV_HELLO, rv->secret, local, peer, tcp_fd) ||
        !(rv->setup = ndk_shm_setup_start(qp, fd, true, &err)) ||
        loop_watch_add(loop, &rv->watch, fd, EPOLLIN, rv_on_io) < 0) {
        ndk_shm_setup_abandon(rv->setup);
        shm_os_close(fd);
        shm_rv_init(rv);
        return false;
    }
    rv->state = RV_WAIT_OK;
    return true;
}

/* ---- listener ---- */

void shm_rv_expect(struct shm_rv *rv, struct shm_rv_listen *ls, struct ndk_qp_impl *qp, const NDK_SOCKADDR *local,
                   const NDK_SOCKADDR *peer)
{
    shm_rv_init(rv);
    if (ls->fd < 0)
        return;
    rv->qp = qp;
    rv->local = *local;
    rv->peer = *peer;
    rv->ls = ls;
    rv->loop = ls->loop;
    rv->state = RV_EXPECT;
    rv->next = ls->expect;
    if (ls->expect)
        ls->expect->pprev = &rv->next;
    rv->pprev = &ls->expect;
    ls->expect = rv;
}

/* The connection waiting for this initiator: same user, the mirrored
 * 4-tuple of a connection of ours, and the descriptor it passed is the TCP
 * socket at the other end of that connection (net/tcp_owner.h): only a
 * process that holds a socket can pass it. NULL: refused. */
static struct shm_rv *admit(struct shm_rv_listen *ls, int fd, const struct shm_rv_msg *h, int tcp_fd)
{
    pid_t pid;
    bool same_user = false;
    if (tcp_fd < 0 || shm_os_peer(fd, &pid, &same_user) != 0 || !same_user)
        return NULL;
    struct shm_rv *rv = ls->expect;
    while (rv && !(ndk_sockaddr_equal(&rv->local, &h->peer) && ndk_sockaddr_equal(&rv->peer, &h->local)))
        rv = rv->next;
    if (!rv || tcp_owner_is(tcp_fd, &rv->peer.sa, &rv->local.sa, ls->netns) != 1)
        return NULL;
    return rv;
}

/* Takes the connection out of the incoming set; returns its socket, now
 * the caller's (net/watched.h). */
static int in_take(struct shm_rv_in *in)
{
    return watched_fd_take(&in->w);
}

/* A hello came on fd (its passed descriptor tcp_fd, or -1): the checks,
 * then the answer and the region's; the rest comes when the loop says fd
 * is readable, or when the RTR arrives. fd is ours to keep or close. */
static void take_hello(struct shm_rv_listen *ls, int fd, const struct shm_rv_msg *h, int tcp_fd)
{
    struct shm_rv *rv = admit(ls, fd, h, tcp_fd);
    shm_os_close(tcp_fd); /* the proof is made: we never use it */
    if (!rv) {
        shm_os_close(fd);
        return;
    }
    /* One attempt per connection: it leaves the list whatever comes. */
    unlink_expect(rv);
    rv->fd = fd;
    memcpy(rv->secret, h->secret, sizeof rv->secret);
    int err = 0;
    if (!send_msg(fd, SHM_RV_OK, rv->secret, NULL, NULL, -1) ||
        !(rv->setup = ndk_shm_setup_start(rv->qp, fd, false, &err))) {
        shm_rv_stop(rv);
        return;
    }
    rv->state = RV_SETUP;
    /* The initiator sent its region right behind the hello: usually we
     * answer it now, and what is left (its probe result and go) comes
     * right before its RTR, which takes it (shm_rv_take): no watch, no
     * turn of the loop for it. Else the loop says when the region came. */
    progress(rv);
    if (rv->state == RV_SETUP && !ndk_shm_setup_said_all(rv->setup) &&
        loop_watch_add(rv->loop, &rv->watch, fd, EPOLLIN, rv_on_io) < 0)
        shm_rv_stop(rv);
}

/* The hello on fd: 1 it came (*h, and *tcp_fd its descriptor or -1), 0
 * not there yet, -1 anything else. */
static int recv_hello(int fd, struct shm_rv_msg *h, int *tcp_fd)
{
    int r = recv_msg(fd, SHM_RV_HELLO, h, tcp_fd);
    if (r <= 0) {
        shm_os_close(*tcp_fd);
        *tcp_fd = -1;
    }
    return r;
}

static void in_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_rv_in *in = container_of(w, struct shm_rv_in, w.watch);
    struct shm_rv_listen *ls = in->ls;
    int tcp_fd;
    struct shm_rv_msg h;
    int r = recv_hello(in->w.fd, &h, &tcp_fd);
    if (r == 0)
        return;
    /* Its watch goes before fd gets the rendezvous' own. */
    int fd = in_take(in);
    if (r > 0)
        take_hello(ls, fd, &h, tcp_fd);
    else
        shm_os_close(fd);
}

static const struct watched_kind in_kind = {
    .events = EPOLLIN,
    .on_io = in_on_io,
};

/* An accepted connection whose hello has not come: waits in the list. */
static void wait_for_hello(struct shm_rv_listen *ls, int fd)
{
    if (ls->incoming.count >= RV_INCOMING_MAX) {
        struct watched_fd *oldest = watched_fd_oldest(&ls->incoming);
        if (oldest)
            shm_os_close(in_take(container_of(oldest, struct shm_rv_in, w)));
    }
    /* No deadline: the set's bound is what keeps silent connections few. */
    struct shm_rv_in *in = watched_fd_new(&ls->incoming, sizeof *in, &in_kind, ls->loop, fd, 0);
    if (!in) {
        shm_os_close(fd);
        return;
    }
    in->ls = ls;
}

static void ls_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_rv_listen *ls = container_of(w, struct shm_rv_listen, watch);
    for (int i = 0; i < 16; i++) {
        int fd = shm_rv_os_accept(ls->fd);
        if (fd < 0)
            return;
        /* An initiator sends its hello as it connects: it is usually
         * there already, and only a silent connection waits in the list. */
        int tcp_fd;
        struct shm_rv_msg h;
        int r = recv_hello(fd, &h, &tcp_fd);
        if (r > 0)
            take_hello(ls, fd, &h, tcp_fd);
        else if (r == 0)
            wait_for_hello(ls, fd);
        else
            shm_os_close(fd);
    }
}

void shm_rv_listen_init(struct shm_rv_listen *ls)
{
    memset(ls, 0, sizeof *ls);
    ls->fd = -1;
}

void shm_rv_listen_start(struct shm_rv_listen *ls, struct loop *loop, const NDK_SOCKADDR *local)
{
    int fd = shm_rv_os_listen(&local->sa);
    if (fd < 0)
        return;
    /* The namespace whose TCP sockets initiators prove they hold; a kernel
     * that cannot tell it (before Linux 5.14) gets no fast path. */
    if (tcp_owner_netns(fd, &ls->netns) != 0) {
        shm_os_close(fd);
        return;
    }
    ls->loop = loop;
    if (loop_watch_add(loop, &ls->watch, fd, EPOLLIN, ls_on_io) < 0) {
        shm_os_close(fd);
        return;
    }
    ls->fd = fd;
}

void shm_rv_listen_stop(struct shm_rv_listen *ls)
{
    if (ls->fd >= 0) {
        loop_watch_del(ls->loop, &ls->watch);
        shm_os_close(ls->fd);
        ls->fd = -1;
    }
    struct watched_fd *in;
    while ((in = watched_fd_oldest(&ls->incoming)))
        shm_os_close(watched_fd_take(in));
    /* The connections still listed leave the list as they end. */
}
