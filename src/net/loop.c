#include "net/loop.h"

#include <stdlib.h>

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define LOOP_BATCH 64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t loop_now_ms(void)
{
    return now_ns() / 1000000u;
}

int loop_init(struct loop *l)
{
    l->timers_head = l->timers_tail = NULL;
    l->kicked = false;
    l->fetch_gen = 0;
    l->spin_ns = 0;
    l->had_input = false;
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (l->epfd < 0)
        return -errno;
    l->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (l->evfd < 0) {
        int e = -errno;
        close(l->epfd);
        return e;
    }
    /* The doorbell is identified by a NULL data pointer. */
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->evfd, &ev) < 0) {
        int e = -errno;
        close(l->evfd);
        close(l->epfd);
        return e;
    }
    return 0;
}

void loop_fini(struct loop *l)
{
    close(l->evfd);
    close(l->epfd);
}

/* What epoll hands back for w: its address, with the low bit set when it
 * may have an unlocked handler (watches are pointer-aligned). */
static uint64_t watch_data(const struct loop_watch *w)
{
    return (uint64_t)(uintptr_t)w | (w->may_unlock ? 1u : 0u);
}

static struct loop_watch *watch_of(uint64_t data)
{
    return (struct loop_watch *)(uintptr_t)(data & ~(uint64_t)1);
}

void loop_watch_allow_unlocked(struct loop_watch *w)
{
    w->may_unlock = true;
    /* Stored before epoll can hand out the tagged pointer, so the loop's
     * unlocked load always reads a store that came after the watch's
     * memory was set up. */
    __atomic_store_n(&w->unlocked, NULL, __ATOMIC_RELEASE);
}

void loop_watch_set_unlocked(struct loop_watch *w, loop_unlocked_fn fn)
{
    __atomic_store_n(&w->unlocked, fn, __ATOMIC_SEQ_CST);
}

int loop_watch_add(struct loop *l, struct loop_watch *w, int fd, uint32_t events, loop_watch_fn fn)
{
    w->fd = fd;
    w->events = events;
    w->fn = fn;
    struct epoll_event ev = {.events = events, .data.u64 = watch_data(w)};
    if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    w->added = true;
    w->loop = l;
    return 0;
}

int loop_watch_mod(struct loop *l, struct loop_watch *w, uint32_t events)
{
    if (!w->added)
        return -EINVAL;
    if (w->events == events)
        return 0;
    struct epoll_event ev = {.events = events, .data.u64 = watch_data(w)};
    if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) < 0)
        return -errno;
    w->events = events;
    return 0;
}

void loop_watch_del(struct loop *l, struct loop_watch *w)
{
    if (!w->added)
        return;
    epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->added = false;
}

int loop_watch_move(struct loop *to, struct loop_watch *w)
{
    if (!w->added || w->loop == to)
        return 0;
    /* Into the new loop first: should epoll refuse (ENOMEM, the per-user
     * watch limit), the socket stays watched where it was instead of by
     * no loop at all. */
    struct epoll_event ev = {.events = w->events, .data.u64 = watch_data(w)};
    if (epoll_ctl(to->epfd, EPOLL_CTL_ADD, w->fd, &ev) < 0)
        return -errno;
    epoll_ctl(w->loop->epfd, EPOLL_CTL_DEL, w->fd, NULL);
    w->loop = to;
    return 0;
}

int loop_watch_take_over(struct loop *l, struct loop_watch *from, struct loop_watch *w, uint32_t events,
                         loop_watch_fn fn)
{
    int fd = from->fd;
    if (from->added && from->loop == l) {
        from->added = false;
        w->fd = fd;
        w->events = events;
        w->fn = fn;
        struct epoll_event ev = {.events = events, .data.u64 = watch_data(w)};
        if (epoll_ctl(l->epfd, EPOLL_CTL_MOD, fd, &ev) == 0) {
            w->added = true;
            w->loop = l;
            return 0;
        }
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
    } else if (from->added) {
        loop_watch_del(from->loop, from);
    }
    return loop_watch_add(l, w, fd, events, fn);
}

void loop_timer_init(struct loop_timer *t, loop_timer_fn fn)
{
    t->fn = fn;
    t->prev = t->next = NULL;
    t->armed = false;
    t->deadline_ms = 0;
}

static void timer_unlink(struct loop *l, struct loop_timer *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        l->timers_head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        l->timers_tail = t->prev;
    t->prev = t->next = NULL;
    t->armed = false;
}

void loop_timer_cancel(struct loop *l, struct loop_timer *t)
{
    if (t->armed)
        timer_unlink(l, t);
}

static void timer_insert(struct loop *l, struct loop_timer *t)
{
    /* Timeouts are mostly equal per kind, so new deadlines land at the tail:
     * scanning backwards keeps insertion O(1) in the common case. */
    struct loop_timer *after = l->timers_tail;
    while (after && after->deadline_ms > t->deadline_ms)
        after = after->prev;
    t->prev = after;
    t->next = after ? after->next : l->timers_head;
    if (t->next)
        t->next->prev = t;
    else
        l->timers_tail = t;
    if (after)
        after->next = t;
    else
        l->timers_head = t;
    t->armed = true;
    if (l->timers_head == t)
        loop_kick(l); /* an earlier deadline than the one being waited for */
}

void loop_timer_arm(struct loop *l, struct loop_timer *t, uint64_t ms)
{
    loop_timer_cancel(l, t);
    t->deadline_ms = loop_now_ms() + ms;
    timer_insert(l, t);
}

void loop_timer_move(struct loop *from, struct loop *to, struct loop_timer *t)
{
    if (!t->armed || from == to)
        return;
    timer_unlink(from, t);
    timer_insert(to, t);
}

void loop_set_owner(struct loop *l)
{
    l->owner = pthread_self();
    /* Posting threads ask loop_in_owner at any time, also before the
     * progress thread got here: owner is published by this store. */
    __atomic_store_n(&l->owner_set, true, __ATOMIC_RELEASE);
}

bool loop_in_owner(const struct loop *l)
{
    return __atomic_load_n(&l->owner_set, __ATOMIC_ACQUIRE) && pthread_equal(pthread_self(), l->owner);
}

void loop_kick(struct loop *l)
{
    /* The loop's own thread recomputes its wait and drains its queues
     * before waiting again: waking itself would only cost a round. */
    if (l->kicked || loop_in_owner(l))
        return;
    l->kicked = true;
    uint64_t one = 1;
    ssize_t n = write(l->evfd, &one, sizeof one);
    (void)n; /* EAGAIN means the counter is already non-zero: awake anyway */
}

void loop_wake(struct loop *l)
{
    uint64_t one = 1;
    ssize_t n = write(l->evfd, &one, sizeof one);
    (void)n; /* EAGAIN means the counter is already non-zero: awake anyway */
}

void loop_set_spin(struct loop *l, unsigned us)
{
    l->spin_ns = (uint64_t)us * 1000u;
}

/* A look (epoll_wait and sched_yield, two system calls) takes longer than
 * this: the spin also ends after spin_ns / SPIN_LOOK_NS looks, so that it
 * ends even where the clock stands still (the fuzzers' virtual clock,
 * fuzz/fake_net). */
#define SPIN_LOOK_NS 250u

/* Looks for events without sleeping for up to spin_ns (loop_set_spin):
 * the number fetched, 0 when none came. */
static int spin_wait(struct loop *l, struct epoll_event *evs)
{
    uint64_t end = now_ns() + l->spin_ns;
    for (uint64_t looks = l->spin_ns / SPIN_LOOK_NS + 1;; looks--) {
        int n = epoll_wait(l->epfd, evs, LOOP_BATCH, 0);
        if (n != 0 || looks == 1 || now_ns() >= end)
            return n;
        sched_yield();
    }
}

void loop_poll(struct loop *l, pthread_mutex_t *lock, int max_wait_ms)
{
    int wait = max_wait_ms;
    if (l->timers_head) {
        uint64_t now = loop_now_ms();
        uint64_t d = l->timers_head->deadline_ms;
        int until = d <= now ? 0 : (d - now > 60000 ? 60000 : (int)(d - now));
        if (wait < 0 || until < wait)
            wait = until;
    }
    if (l->kicked)
        wait = 0;

    struct epoll_event evs[LOOP_BATCH];
    pthread_mutex_unlock(lock);
    __atomic_add_fetch(&l->fetch_gen, 1, __ATOMIC_SEQ_CST); /* odd: events may be fetched */
    int n = wait != 0 && l->spin_ns && l->had_input ? spin_wait(l, evs) : 0;
    if (n == 0)
        n = epoll_wait(l->epfd, evs, LOOP_BATCH, wait);
    /* Still unlocked: the events whose owners take them without the lock
     * (a connection's data path on its QP's own locks) go first, and are
     * marked done (no events left). */
    for (int i = 0; i < n; i++) {
        if (!(evs[i].data.u64 & 1))
            continue;
        struct loop_watch *w = watch_of(evs[i].data.u64);
        loop_unlocked_fn fn = __atomic_load_n(&w->unlocked, __ATOMIC_ACQUIRE);
        if (fn && fn(w, evs[i].events))
            evs[i].events = 0;
    }
    /* Even: the unlocked handlers are out (loop_unlocked_barrier); what
     * they did happens before a barrier that reads this. */
    __atomic_add_fetch(&l->fetch_gen, 1, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(lock);

    l->had_input = false;
    for (int i = 0; i < n; i++) {
        struct loop_watch *w = watch_of(evs[i].data.u64);
        if (w)
            l->had_input = true; /* handled here or by its unlocked handler */
        if (!evs[i].events)
            continue;
        if (!w) {
            uint64_t v;
            ssize_t r = read(l->evfd, &v, sizeof v);
            (void)r;
            l->kicked = false;
            continue;
        }
        /* A watch removed by an earlier handler of this batch is skipped;
         * its memory stays valid because owners are freed only between
         * iterations (see obj.c, deferred frees). One moved to another
         * loop (loop_watch_move) is that loop's now. */
        if (w->added && w->loop == l)
            w->fn(w, evs[i].events);
    }

    uint64_t now = loop_now_ms();
    while (l->timers_head && l->timers_head->deadline_ms <= now) {
        struct loop_timer *t = l->timers_head;
        timer_unlink(l, t);
        t->fn(t);
    }
}

void loop_unlocked_barrier(struct loop *l)
{
    uint64_t g = __atomic_load_n(&l->fetch_gen, __ATOMIC_SEQ_CST);
    if (!(g & 1))
        return; /* between iterations: the next epoll_wait fetches no deleted watch */
    loop_wake(l);
    /* Bounded by the handlers running now, which never wait for the
     * caller (loop.h). */
    while (__atomic_load_n(&l->fetch_gen, __ATOMIC_SEQ_CST) == g)
        sched_yield();
}

void loop_defer_free(struct loop *l, struct loop_dfree *node)
{
    node->next = l->dfree_list;
    l->dfree_list = node;
}

void loop_free_deferred(struct loop *l)
{
    struct loop_dfree *d;
    while ((d = l->dfree_list)) {
        l->dfree_list = d->next;
        free(d);
    }
}
