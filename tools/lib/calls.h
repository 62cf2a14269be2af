/*
 * calls.h - asynchronous NDK calls (creates, requests, closes) and events
 * (disconnect), each with a completion of its own.
 *
 * A completion is never reused and stays allocated until no callback can
 * come for it any more, so that a callback arriving late (after we gave up
 * waiting) cannot be taken for another call's, nor write into memory given
 * to something else; afterwards the callback rules are checked: exactly one
 * callback after STATUS_PENDING, none after an inline result (NDKPI's
 * asynchronous completion rules). The completions of one owner (a
 * connection) live in a struct tc_calls; when a callback may still come,
 * they move to the adapter's graveyard, freed once the adapter is closed.
 */
#ifndef TC_CALLS_H
#define TC_CALLS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndk/ndk.h>

struct tc_completion {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    char what[80];             /* the call's name, for messages */
    unsigned calls;            /* callbacks received so far */
    bool issued;               /* the call has returned */
    bool pending;              /* ... with STATUS_PENDING */
    NTSTATUS returned;         /* what the call returned */
    NTSTATUS status;           /* status of the first callback */
    NDK_OBJECT_HEADER *object; /* object of a create completion */
    uint64_t t_callback;       /* tc_now_us() at the first callback */
    struct tc_completion *next;
};

/* The callbacks, with NDKPI's signatures; Context is the completion. */
VOID tc_on_request(PVOID Context, NTSTATUS Status);
VOID tc_on_create(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *pNdkObject);
VOID tc_on_close(PVOID Context);
/* What they do; also for events a tool handles itself. */
void tc_comp_signal(struct tc_completion *c, NTSTATUS st, NDK_OBJECT_HEADER *obj);

/* Waits at most ms for the first callback; true if it came. */
bool tc_comp_wait(struct tc_completion *c, unsigned ms);
bool tc_comp_fired(struct tc_completion *c);
/* The object of a successful create: from the callback when it pended,
 * else what the create stored through its output pointer. */
void *tc_comp_object(const struct tc_completion *c, void *inline_object);
/* Microseconds from start to the completion: the callback's own time when
 * the call pended, else inline_end (when the call returned). */
uint64_t tc_comp_elapsed(const struct tc_completion *c, uint64_t start, uint64_t inline_end);

struct tc_calls {
    const char *role;     /* for messages */
    char label[16];       /* "[3] ": the connection, in messages; or "" */
    unsigned wait_ms;     /* how long a pending call is waited for */
    bool abandoned;       /* a callback may still come */
    struct tc_completion *head;
    struct tc_block *blocks; /* tc_calls_alloc */
};

/* Print how every call finished ("NdkCreateCq: STATUS_PENDING, then
 * STATUS_SUCCESS") on stdout: ndkping -v, rping's -dd. */
void tc_calls_trace(bool on);

void tc_calls_init(struct tc_calls *k, const char *role, unsigned wait_ms);
/* A new completion for the call `what`; NULL (after saying so) without memory. */
struct tc_completion *tc_call(struct tc_calls *k, const char *what);
/* The final status of a call that returned `returned`: an inline result
 * is final; STATUS_PENDING waits at most k->wait_ms (or ms) for the
 * callback, else TC_STATUS_NO_CALLBACK and the calls are abandoned. */
NTSTATUS tc_call_end(struct tc_calls *k, struct tc_completion *c, NTSTATUS returned);
NTSTATUS tc_call_end_ms(struct tc_calls *k, struct tc_completion *c, NTSTATUS returned, unsigned ms);
/* A create that returned st: the object, or NULL after saying why. */
void *tc_create_end(struct tc_calls *k, struct tc_completion *c, NTSTATUS st, void *inline_object);
/* Closes obj and waits for the close; a close that fails or does not
 * complete is a library problem (closes return only SUCCESS or PENDING). */
bool tc_close_object(struct tc_calls *k, NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj,
                     const char *what);

/* Zeroed memory that callbacks use (a callback context): freed with the
 * completions, so that it outlives any late callback. NULL after saying
 * so when out of memory. */
void *tc_calls_alloc(struct tc_calls *k, size_t size);

/* Once every object of the owner is closed: checks the callback rules of
 * every call (each violation a library problem) and frees the
 * completions; abandoned ones move to *grave instead. False if a rule was
 * broken. */
bool tc_calls_release(struct tc_calls *k, struct tc_calls *grave);
/* Frees every completion: only once no callback can come (the adapter is
 * closed). */
void tc_calls_free(struct tc_calls *k);

#endif
