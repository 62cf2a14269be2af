#include "net/linger.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/loop.h"

struct ndk_linger {
    struct loop_dfree dfree; /* first: freed between loop iterations */
    struct linger_set *set;
    struct loop *loop;
    int fd;
    struct loop_watch watch;
    struct loop_timer timer;
    struct ndk_linger *prev, *next;
};

static void linger_done(struct ndk_linger *g)
{
    loop_watch_del(g->loop, &g->watch);
    loop_timer_cancel(g->loop, &g->timer);
    close(g->fd);
    if (g->prev)
        g->prev->next = g->next;
    else
        g->set->head = g->next;
    if (g->next)
        g->next->prev = g->prev;
    loop_defer_free(g->loop, &g->dfree);
}

static void linger_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct ndk_linger *g = (struct ndk_linger *)(void *)((char *)w - offsetof(struct ndk_linger, watch));
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
    linger_done((struct ndk_linger *)(void *)((char *)t - offsetof(struct ndk_linger, timer)));
}

void ndk_linger_close(struct linger_set *set, struct loop *loop, int fd, unsigned timeout_ms)
{
    struct ndk_linger *g = calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return;
    }
    g->set = set;
    g->loop = loop;
    g->fd = fd;
    loop_timer_init(&g->timer, linger_on_timer);
    if (loop_watch_add(loop, &g->watch, fd, EPOLLIN | EPOLLRDHUP, linger_on_io) < 0) {
        close(fd);
        free(g);
        return;
    }
    g->next = set->head;
    if (set->head)
        set->head->prev = g;
    set->head = g;
    loop_timer_arm(loop, &g->timer, timeout_ms);
}

void ndk_linger_flush(struct linger_set *set)
{
    while (set->head)
        linger_done(set->head);
}
