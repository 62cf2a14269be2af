/*
 * loop.h - the progress engine's event loop: epoll for sockets, a sorted
 * timer list, and an eventfd doorbell so other threads can wake it.
 *
 * All loop state is protected by the caller's lock (the lock of the
 * engine whose loop it is, core.h); the lock is released only while
 * waiting in epoll_wait, and while a watch's unlocked handler runs
 * (loop_watch_set_unlocked). Watches and timers are embedded in their
 * owners, so arming never allocates.
 */
#ifndef NDK_NET_LOOP_H
#define NDK_NET_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct loop_watch;
typedef void (*loop_watch_fn)(struct loop_watch *w, uint32_t events);
/* Runs without the loop's lock; returns false to have the events handed to
 * the watch's fn under the lock, as if it were not there. */
typedef bool (*loop_unlocked_fn)(struct loop_watch *w, uint32_t events);

struct loop;

struct loop_watch {
    int fd;
    uint32_t events;
    loop_watch_fn fn;
    bool added;
    struct loop *loop; /* the loop it was added to: another loop's stale event is skipped */
    /* loop_watch_allow_unlocked was called: epoll hands the loop a tagged
     * pointer, the only sign by which it looks at `unlocked` unlocked. */
    bool may_unlock;
    loop_unlocked_fn unlocked; /* atomic: any thread sets it, the loop reads it unlocked */
};

struct loop_timer;
typedef void (*loop_timer_fn)(struct loop_timer *t);

struct loop_timer {
    uint64_t deadline_ms;
    loop_timer_fn fn;
    struct loop_timer *prev, *next;
    bool armed;
};

/* First member of any allocation that must be freed only between loop
 * iterations (it embeds a loop_watch that a fetched event may still name). */
struct loop_dfree {
    struct loop_dfree *next;
};

struct loop {
    int epfd;
    int evfd;
    pthread_t owner;  /* the thread that runs loop_poll: it needs no doorbell */
    bool owner_set;
    struct loop_timer *timers_head, *timers_tail; /* sorted by deadline */
    bool kicked;
    struct loop_dfree *dfree_list;
    /* Odd from just before epoll_wait until the unlocked handlers of what
     * it fetched have run (atomic; loop_unlocked_barrier). */
    uint64_t fetch_gen;
    /* Before sleeping in epoll_wait after an iteration that had socket
     * events (`had_input`), look again for up to spin_ns, yielding the
     * CPU between looks (loop_set_spin; 0: sleep at once). */
    uint64_t spin_ns;
    bool had_input;
};

int loop_init(struct loop *l);
void loop_fini(struct loop *l);

/* Registers fd (level-triggered). Returns 0 or -errno. */
int loop_watch_add(struct loop *l, struct loop_watch *w, int fd, uint32_t events, loop_watch_fn fn);
int loop_watch_mod(struct loop *l, struct loop_watch *w, uint32_t events);
/* Safe on a watch that was never added. */
void loop_watch_del(struct loop *l, struct loop_watch *w);
/* Before loop_watch_add: the watch's owner may later hand its events to an
 * unlocked handler (loop_watch_set_unlocked). */
void loop_watch_allow_unlocked(struct loop_watch *w);
/* From now on (any thread, no lock needed), events of the watch go first to
 * fn, without the loop's lock; NULL: back to fn under the lock only. fn
 * must not touch the loop's state (watches, timers, loop_kick: it may call
 * loop_wake), and may run for an event fetched before the watch was
 * deleted or moved to another loop: the owner knows, under its own locks,
 * whether the event still means anything. Memory it reaches stays valid
 * until the loop's next iteration, as for fn. */
void loop_watch_set_unlocked(struct loop_watch *w, loop_unlocked_fn fn);
/* A watch whose unlocked handler is set before loop_watch_add and always
 * takes its events (returns true) is never looked at under the loop's
 * lock: its owner adds and deletes it without that lock, from any thread
 * (the epoll set is the kernel's to guard), and after deleting it waits
 * with loop_unlocked_barrier before freeing it. */
/* Returns once every unlocked handler that had started, or whose event
 * had been fetched, when it was called has returned: a watch deleted
 * before the call is not named by the loop any more. Wakes the loop if it
 * waits in epoll_wait. Any thread, with or without the loop's lock, that
 * holds nothing such a handler waits for (so never one inside an unlocked
 * handler of this loop). */
void loop_unlocked_barrier(struct loop *l);
/* Moves an added watch, with its events, from its loop to `to` (both
 * loops' lock held). An event the old loop already fetched is dropped.
 * Returns 0, or -errno with the watch still on its old loop. */
int loop_watch_move(struct loop *to, struct loop_watch *w);
/* w takes over from's registration of its descriptor in l, for events and
 * fn: one EPOLL_CTL_MOD that changes what epoll hands back, instead of a
 * DEL and an ADD. from is no longer added, so an event of it the loop
 * already fetched is skipped. When from is not added in l, or epoll
 * refuses the change, w is added anew (from's registration removed first).
 * Returns as loop_watch_add. */
int loop_watch_take_over(struct loop *l, struct loop_watch *from, struct loop_watch *w, uint32_t events,
                         loop_watch_fn fn);

void loop_timer_init(struct loop_timer *t, loop_timer_fn fn);
/* (Re)arms t to fire ms from now. */
void loop_timer_arm(struct loop *l, struct loop_timer *t, uint64_t ms);
void loop_timer_cancel(struct loop *l, struct loop_timer *t);
/* Moves an armed timer from `from` to `to`, keeping its deadline. */
void loop_timer_move(struct loop *from, struct loop *to, struct loop_timer *t);

/* Wakes the loop from another thread (or from inside it: the next wait then
 * returns at once). Called with the lock held. */
void loop_kick(struct loop *l);
/* Wakes the loop from any thread without the lock: a bare doorbell, for
 * callers that must not take the adapter lock. */
void loop_wake(struct loop *l);
/*
 * A message that arrives while the loop sleeps costs a wake-up, and one
 * sent from another CPU costs a cross-CPU wake-up (tens of microseconds on
 * a virtual machine, more than the rest of a small message's path). After
 * an iteration that handled socket events, the loop first looks at its
 * sockets without sleeping for up to us microseconds: a reply that comes
 * within that time finds it awake. Between looks it yields the CPU, so a
 * thread that shares the CPU (the peer of a same-CPU exchange) runs; an
 * idle loop, or one woken only by its doorbell or timers, sleeps at once.
 * Set by the loop's owner before its first loop_poll.
 */
void loop_set_spin(struct loop *l, unsigned us);
/* Records the calling thread as the one running the loop. */
void loop_set_owner(struct loop *l);
bool loop_in_owner(const struct loop *l);

/* One iteration: releases *lock while waiting (at most max_wait_ms, -1 = no
 * limit other than timers) and while it offers the events to the unlocked
 * handlers, re-takes it, then dispatches the other socket events and the
 * expired timers. Returns after dispatching. */
void loop_poll(struct loop *l, pthread_mutex_t *lock, int max_wait_ms);

uint64_t loop_now_ms(void);

/* Frees node (the first member of its allocation) at the next
 * loop_free_deferred, which the loop's owner calls between iterations. */
void loop_defer_free(struct loop *l, struct loop_dfree *node);
void loop_free_deferred(struct loop *l);

#endif
