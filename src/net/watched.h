/*
 * watched.h - a set of descriptors a loop watches, each until its owner
 * takes it out or its deadline passes: a listener's half-open connections,
 * the lingering sockets.
 *
 * A record begins its owner's allocation, which the set makes and frees:
 * taking the record out stops the watch and the deadline and hands the
 * descriptor back, and the allocation goes between the loop's iterations,
 * since an event the loop already fetched may still name the watch
 * (loop_defer_free).
 * Like the loop, a set is protected by the loop owner's lock.
 */
#ifndef NDK_NET_WATCHED_H
#define NDK_NET_WATCHED_H

#include <stddef.h>
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

/* What the records of one kind are watched for, and who hears of it. */
struct watched_kind {
    uint32_t events;      /* epoll events, level-triggered (loop_watch_add) */
    loop_watch_fn on_io;  /* gets &rec->watch */
    loop_timer_fn on_timer; /* gets &rec->timer once the deadline passed; NULL: none */
};

/* Zero-initialised: empty. */
struct watched_set {
    struct watched_fd *head;
    unsigned count;
};

/* Allocates size zero-filled octets that begin with a struct watched_fd,
 * and puts that record in set: fd is watched on loop as kind says, and
 * kind->on_timer is called timeout_ms from now unless the record left the
 * set by then. Returns the record, or NULL (no memory, or epoll refused fd)
 * with fd still the caller's. Loop owner's lock held. */
void *watched_fd_new(struct watched_set *set, size_t size, const struct watched_kind *kind,
                     struct loop *loop, int fd, uint64_t timeout_ms);
/* Takes rec out of its set, stops its watch and deadline, and frees its
 * allocation at the loop's next loop_free_deferred: until then the
 * caller may still read the owner's other members. Returns the
 * descriptor, now the caller's to close the way it needs. */
int watched_fd_take(struct watched_fd *rec);
/* As watched_fd_take, but the descriptor stays registered in rec->loop
 * with &rec->watch: the new owner's loop_watch_take_over, in the same
 * handler, makes that registration its own (one epoll_ctl where a take
 * and a new watch make two). */
int watched_fd_hand_over(struct watched_fd *rec);
/* The record that has been in set longest; NULL when set is empty. */
struct watched_fd *watched_fd_oldest(const struct watched_set *set);

#endif
