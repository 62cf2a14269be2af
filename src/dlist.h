/*
 * dlist.h - unlinking a node from an intrusive doubly linked list whose
 * head pointer is head and whose links are the members prev and next (the
 * list's own names, e.g. fr_prev and fr_next), for lists that keep no tail.
 * Object layer and above: src/net keeps its own lists (docs/architecture.md,
 * The layers).
 */
#ifndef NDK_DLIST_H
#define NDK_DLIST_H

#define DLIST_UNLINK(head, node, prev, next)                                                       \
    do {                                                                                           \
        if ((node)->prev)                                                                          \
            (node)->prev->next = (node)->next;                                                     \
        else                                                                                       \
            (head) = (node)->next;                                                                 \
        if ((node)->next)                                                                          \
            (node)->next->prev = (node)->prev;                                                     \
    } while (0)

#endif
