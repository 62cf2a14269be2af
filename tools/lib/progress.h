/*
 * progress.h - the live line of a long run: on stderr, drawn in place on a
 * terminal only (nothing extra when stderr is a pipe or a file), first
 * after a second, then a few times a second, and cleared at the end.
 */
#ifndef TC_PROGRESS_H
#define TC_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct tc_progress {
    bool enabled, shown;
    uint64_t next; /* tc_now_ns() of the next update */
};

/* mode: 1 always, 0 never, -1 when stderr is a terminal (the default). */
void tc_progress_init(struct tc_progress *p, int mode);
/* Cheap: is it time for the next update? */
static inline bool tc_progress_due(const struct tc_progress *p, uint64_t now_ns)
{
    return p->enabled && now_ns >= p->next;
}
/* Draws the line (call when due). */
void tc_progress_show(struct tc_progress *p, uint64_t now_ns, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Removes the line, so that what follows starts on a clean line. */
void tc_progress_clear(struct tc_progress *p);

#endif
