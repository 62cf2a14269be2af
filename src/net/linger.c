#include "net/linger.h"

#include <errno.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>


/* The record is the whole allocation: nothing but the socket lingers. */
static void linger_done(struct watched_fd *g)
{
    close(watched_fd_take(g));
}

static void linger_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct watched_fd *g = (struct watched_fd *)(void *)((char *)w - offsetof(struct watched_fd, watch));
    /* Discard whatever the peer still sends; its close ends the wait. */
    uint8_t buf[512];
    for (int i = 0; i < 8; i++) {
        ssize_t n = recv(g->fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        linger_done(g);
        return;
    }
}

static void linger_on_timer(struct loop_timer *t)
{
    linger_done((struct watched_fd *)(void *)((char *)t - offsetof(struct watched_fd, timer)));
}

static const struct watched_kind linger_kind = {
    .events = EPOLLIN | EPOLLRDHUP,
    .on_io = linger_on_io,
    .on_timer = linger_on_timer,
};

void ndk_linger_close(struct watched_set *set, struct loop *loop, int fd, unsigned timeout_ms)
{
    if (!watched_fd_new(set, sizeof(struct watched_fd), &linger_kind, loop, fd, timeout_ms))
        close(fd);
}

void ndk_linger_flush(struct watched_set *set)
{
    while (set->head)
        linger_done(set->head);
}
