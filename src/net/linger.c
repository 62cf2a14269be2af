#include "net/linger.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core.h"

struct ndk_linger {
    struct ndk_dfree dfree; /* first: freed between loop iterations */
    struct ndk_adapter_impl *ad;
    int fd;
    struct loop_watch watch;
    struct loop_timer timer;
    struct ndk_linger *prev, *next;
};

static void linger_done(struct ndk_linger *g)
{
    struct ndk_adapter_impl *ad = g->ad;
    loop_watch_del(&ad->loop, &g->watch);
    loop_timer_cancel(&ad->loop, &g->timer);
    close(g->fd);
    if (g->prev)
        g->prev->next = g->next;
    else
        ad->lingers = g->next;
    if (g->next)
        g->next->prev = g->prev;
    ndk_defer_free(ad, &g->dfree);
}

static void linger_on_io(struct loop_watch *w, uint32_t events)
{
    (void)events;
    struct ndk_linger *g = container_of(w, struct ndk_linger, watch);
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
    linger_done(container_of(t, struct ndk_linger, timer));
}

void ndk_linger_close(struct ndk_adapter_impl *ad, int fd, unsigned timeout_ms)
{
    struct ndk_linger *g = calloc(1, sizeof *g);
    if (!g) {
        close(fd);
        return;
    }
    g->ad = ad;
    g->fd = fd;
    loop_timer_init(&g->timer, linger_on_timer);
    if (loop_watch_add(&ad->loop, &g->watch, fd, EPOLLIN | EPOLLRDHUP, linger_on_io) < 0) {
        close(fd);
        free(g);
        return;
    }
    g->next = ad->lingers;
    if (ad->lingers)
        ad->lingers->prev = g;
    ad->lingers = g;
    loop_timer_arm(&ad->loop, &g->timer, timeout_ms);
}

void ndk_linger_flush(struct ndk_adapter_impl *ad)
{
    while (ad->lingers)
        linger_done(ad->lingers);
}
