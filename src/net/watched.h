/*
 * watched.h - a set of descriptors a loop watches, each until its owner
 * takes it out or its deadline passes: a listener's half-open connections,
 * the lingering sockets.
 *
 * A record is the first member of its owner's allocation. Taking it out of
 * its set stops the watch and the deadline and hands the descriptor back;
 * the allocation is freed between the loop's iterations, since an event
 * the loop already fetched may still name the watch (loop_defer_free).
 * Like the loop, a set is protected by the loop owner's lock.
 */
#ifndef NDK_NET_WATCHED_H
#define NDK_NET_WATCHED_H

#include <stdint.h>

#include "net/loop.h"

struct watched_set;

struct watched_fd {
    struct loop_dfree dfree; /* first: freed between loop iterations */
    struct watched_set *set;
    struct loop *loop; /* records of one set may sit on different loops */
    struct watched_fd *next, **pprev; /* newest first; pprev: what points at it */
    int fd;
    struct loop_watch watch;
    struct loop_timer timer;
};

/* Zero-initialised: empty. */
struct watched_set {
    struct watched_fd *head;
    unsigned count;
};

/* Adds rec (zero-filled, the first member of its allocation) to set: fd is
 * watched on loop for events, which go to on_io, and on_timer is called
 * timeout_ms from now unless the record left the set by then (on_timer
 * NULL: no deadline). Returns 0, or -errno with rec in no set and fd still
 * the caller's. Loop owner's lock held. */
int watched_fd_add(struct watched_set *set, struct watched_fd *rec, struct loop *loop, int fd,
                   uint32_t events, loop_watch_fn on_io, loop_timer_fn on_timer,
                   uint64_t timeout_ms);
/* Takes rec out of its set, stops its watch and deadline, and frees its
 * allocation at the loop's next loop_free_deferred: until then the
 * caller may still read the owner's other members. Returns the
 * descriptor, now the caller's to close the way it needs. */
int watched_fd_take(struct watched_fd *rec);
/* The record that has been in set longest; NULL when set is empty. */
struct watched_fd *watched_fd_oldest(const struct watched_set *set);

#endif
