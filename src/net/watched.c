#include "net/watched.h"

#include <stddef.h>

int watched_fd_add(struct watched_set *set, struct watched_fd *rec, struct loop *loop, int fd,
                   uint32_t events, loop_watch_fn on_io, loop_timer_fn on_timer,
                   uint64_t timeout_ms)
{
    rec->set = set;
    rec->loop = loop;
    rec->fd = fd;
    loop_timer_init(&rec->timer, on_timer);
    int err = loop_watch_add(loop, &rec->watch, fd, events, on_io);
    if (err < 0)
        return err;
    rec->next = set->head;
    if (set->head)
        set->head->pprev = &rec->next;
    rec->pprev = &set->head;
    set->head = rec;
    set->count++;
    if (on_timer)
        loop_timer_arm(loop, &rec->timer, timeout_ms);
    return 0;
}

int watched_fd_take(struct watched_fd *rec)
{
    loop_watch_del(rec->loop, &rec->watch);
    loop_timer_cancel(rec->loop, &rec->timer);
    *rec->pprev = rec->next;
    if (rec->next)
        rec->next->pprev = rec->pprev;
    rec->set->count--;
    rec->next = NULL;
    rec->pprev = NULL;
    int fd = rec->fd;
    rec->fd = -1;
    loop_defer_free(rec->loop, &rec->dfree);
    return fd;
}

struct watched_fd *watched_fd_oldest(const struct watched_set *set)
{
    struct watched_fd *rec = set->head;
    while (rec && rec->next)
        rec = rec->next;
    return rec;
}
