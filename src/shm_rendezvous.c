/*
 * The same-host rendezvous (shm_rendezvous.h; docs/shm.md, Selection).
 *
 * Messages, each one SOCK_SEQPACKET message on the abstract socket:
 *   initiator -> listener   hello: a random secret, the TCP 4-tuple as the
 *                           initiator sees it
 *   listener -> initiator   ok: the secret (the checks passed); then the
 *                           region set-up of xp_shm.c, the listener as its
 *                           creator
 *   initiator -> listener   go: the secret, once the set-up is ready; sent
 *                           before the RTR goes on TCP, so the passive side
 *                           finds it when the RTR arrives
 * A side that refuses or fails closes the socket; TCP carries on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core.h"
#include "net/shm.h"
#include "net/shm_rv.h"
#include "net/sys.h"
#include "net/tcp.h"
#include "net/tcp_owner.h"
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
    struct loop_dfree dfree; /* first: freed between loop iterations */
    struct shm_rv_listen *ls;
    struct shm_rv_in *next, **pprev;
    int fd;
    struct loop_watch watch;
};

static bool send_msg(int fd, uint32_t kind, const uint8_t secret[16], const NDK_SOCKADDR *local,
                     const NDK_SOCKADDR *peer)
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
    return shm_os_send(fd, &m, sizeof m, NULL, 0) == 0;
}

/* One message of this kind: 1 it came, 0 none yet, -1 anything else. */
static int recv_msg(int fd, uint32_t kind, struct shm_rv_msg *m)
{
    int stray = -1, n = 0;
    int r = shm_os_recv(fd, m, sizeof *m, &stray, 0, &n, 0);
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
    loop_watch_del(rv->loop, &rv->watch);
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
    int r = recv_msg(rv->fd, kind, &m);
    if (r > 0 && memcmp(m.secret, rv->secret, sizeof m.secret) != 0)
        r = -1;
    if (r < 0)
        fail(rv);
    return r;
}

/* Moves the rendezvous on with what its socket holds. */
static void progress(struct shm_rv *rv)
{
    int r, err = 0;
    switch (rv->state) {
    case RV_WAIT_OK:
        if (take_answer(rv, SHM_RV_OK) <= 0)
            return;
        rv->setup = ndk_shm_setup_start(rv->qp, rv->fd, false, &err);
        if (!rv->setup) {
            fail(rv);
            return;
        }
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
            if (!send_msg(rv->fd, SHM_RV_GO, rv->secret, NULL, NULL)) {
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

bool shm_rv_connect(struct shm_rv *rv, struct loop *loop, struct ndk_qp_impl *qp, const NDK_SOCKADDR *local,
                    const NDK_SOCKADDR *peer, void (*settled)(struct shm_rv *rv, bool shm))
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
    if (!ndk_random(rv->secret, sizeof rv->secret) ||
        !send_msg(fd, SHM_RV_HELLO, rv->secret, local, peer) ||
        loop_watch_add(loop, &rv->watch, fd, EPOLLIN, rv_on_io) < 0) {
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
 * 4-tuple of a connection of ours, and the initiator's process holds the
 * TCP socket of its side (net/tcp_owner.h). NULL: refused. */
static struct shm_rv *admit(struct shm_rv_listen *ls, int fd, const struct shm_rv_msg *h)
{
    pid_t pid;
    bool same_user = false;
    if (shm_os_peer(fd, &pid, &same_user) != 0 || !same_user)
        return NULL;
    struct shm_rv *rv = ls->expect;
    while (rv && !(ndk_sockaddr_equal(&rv->local, &h->peer) && ndk_sockaddr_equal(&rv->peer, &h->local)))
        rv = rv->next;
    if (!rv)
        return NULL;
    uint64_t inode;
    uid_t uid;
    if (tcp_owner_lookup(&h->local.sa, &h->peer.sa, &inode, &uid) != 0 || tcp_owner_holds(pid, inode) != 1)
        return NULL;
    return rv;
}

static void in_free(struct shm_rv_in *in, bool close_fd)
{
    loop_watch_del(in->ls->loop, &in->watch);
    if (close_fd)
        shm_os_close(in->fd);
    *in->pprev = in->next;
    if (in->next)
        in->next->pprev = in->pprev;
    in->ls->nincoming--;
    loop_defer_free(in->ls->loop, &in->dfree);
}

static void in_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_rv_in *in = container_of(w, struct shm_rv_in, watch);
    struct shm_rv_listen *ls = in->ls;
    struct shm_rv_msg h;
    int r = recv_msg(in->fd, SHM_RV_HELLO, &h);
    if (r == 0)
        return;
    struct shm_rv *rv = r > 0 ? admit(ls, in->fd, &h) : NULL;
    int fd = in->fd;
    in_free(in, rv == NULL);
    if (!rv)
        return;
    /* One attempt per connection: it leaves the list whatever comes. */
    unlink_expect(rv);
    rv->fd = fd;
    memcpy(rv->secret, h.secret, sizeof rv->secret);
    int err = 0;
    if (loop_watch_add(rv->loop, &rv->watch, fd, EPOLLIN, rv_on_io) < 0) {
        shm_os_close(fd);
        rv->fd = -1;
        shm_rv_stop(rv);
        return;
    }
    if (!send_msg(fd, SHM_RV_OK, rv->secret, NULL, NULL) ||
        !(rv->setup = ndk_shm_setup_start(rv->qp, fd, true, &err))) {
        shm_rv_stop(rv);
        return;
    }
    rv->state = RV_SETUP;
}

static void ls_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct shm_rv_listen *ls = container_of(w, struct shm_rv_listen, watch);
    for (int i = 0; i < 16; i++) {
        int fd = shm_rv_os_accept(ls->fd);
        if (fd < 0)
            return;
        if (ls->nincoming >= RV_INCOMING_MAX) {
            struct shm_rv_in *oldest = ls->incoming;
            while (oldest->next)
                oldest = oldest->next;
            in_free(oldest, true);
        }
        struct shm_rv_in *in = calloc(1, sizeof *in);
        if (!in) {
            shm_os_close(fd);
            continue;
        }
        in->ls = ls;
        in->fd = fd;
        if (loop_watch_add(ls->loop, &in->watch, fd, EPOLLIN, in_on_io) < 0) {
            shm_os_close(fd);
            free(in);
            continue;
        }
        in->next = ls->incoming;
        if (ls->incoming)
            ls->incoming->pprev = &in->next;
        in->pprev = &ls->incoming;
        ls->incoming = in;
        ls->nincoming++;
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
    while (ls->incoming)
        in_free(ls->incoming, true);
    /* The connections still listed leave the list as they end. */
}
