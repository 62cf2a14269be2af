#include "net/watched.h"

#include <stdbool.h>
#include <stdlib.h>

void *watched_fd_new(struct watched_set *set, size_t size, const struct watched_kind *kind,
                     struct loop *loop, int fd, uint64_t timeout_ms)
{
    struct watched_fd *rec = size >= sizeof *rec ? calloc(1, size) : NULL;
    if (!rec)
        return NULL;
    rec->set = set;
    rec->loop = loop;
    rec->fd = fd;
    loop_timer_init(&rec->timer, kind->on_timer);
    if (loop_watch_add(loop, &rec->watch, fd, kind->events, kind->on_io) < 0) {
        free(rec);
        return NULL;
    }
    rec->next = set->head;
    if (set->head)
        set->head->pprev = &rec->next;
    rec->pprev = &set->head;
    set->head = rec;
    set->count++;
    if (kind->on_timer)
        loop_timer_arm(loop, &rec->timer, timeout_ms);
    return rec;
}

static int leave_set(struct watched_fd *rec, bool keep_watch)
{
    if (!keep_watch)
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

int watched_fd_take(struct watched_fd *rec)
{
    return leave_set(rec, false);
}

int watched_fd_hand_over(struct watched_fd *rec)
{
    return leave_set(rec, true);
}

struct watched_fd *watched_fd_oldest(const struct watched_set *set)
{
    struct watched_fd *rec = set->head;
    while (rec && rec->next)
        rec = rec->next;
    return rec;
}
