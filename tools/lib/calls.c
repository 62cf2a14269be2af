/*
 * calls.c - see calls.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/calls.h"
#include "lib/clock.h"
#include "lib/log.h"

static bool trace_calls;

struct tc_block {
    struct tc_block *next;
    max_align_t data[];
};

void tc_comp_signal(struct tc_completion *c, NTSTATUS st, NDK_OBJECT_HEADER *obj)
{
    uint64_t now = tc_now_us();
    pthread_mutex_lock(&c->lock);
    if (c->calls++ == 0) {
        c->status = st;
        c->object = obj;
        c->t_callback = now;
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

VOID tc_on_request(PVOID Context, NTSTATUS Status)
{
    tc_comp_signal(Context, Status, NULL);
}

VOID tc_on_create(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *pNdkObject)
{
    tc_comp_signal(Context, Status, pNdkObject);
}

VOID tc_on_close(PVOID Context)
{
    tc_comp_signal(Context, STATUS_SUCCESS, NULL);
}

bool tc_comp_wait(struct tc_completion *c, unsigned ms)
{
    struct timespec deadline;
    tc_deadline(&deadline, ms);
    pthread_mutex_lock(&c->lock);
    while (c->calls == 0)
        if (pthread_cond_timedwait(&c->cond, &c->lock, &deadline) == ETIMEDOUT)
            break;
    bool done = c->calls > 0;
    pthread_mutex_unlock(&c->lock);
    return done;
}

bool tc_comp_fired(struct tc_completion *c)
{
    pthread_mutex_lock(&c->lock);
    bool done = c->calls > 0;
    pthread_mutex_unlock(&c->lock);
    return done;
}

void *tc_comp_object(const struct tc_completion *c, void *inline_object)
{
    return c->pending ? (void *)c->object : inline_object;
}

uint64_t tc_comp_elapsed(const struct tc_completion *c, uint64_t start, uint64_t inline_end)
{
    uint64_t end = c->pending && c->calls ? c->t_callback : inline_end;
    return end > start ? end - start : 0;
}

void tc_calls_trace(bool on)
{
    trace_calls = on;
}

void tc_calls_init(struct tc_calls *k, const char *role, unsigned wait_ms)
{
    memset(k, 0, sizeof *k);
    k->role = role;
    k->wait_ms = wait_ms;
}

struct tc_completion *tc_call(struct tc_calls *k, const char *what)
{
    struct tc_completion *c = calloc(1, sizeof *c);
    if (!c) {
        tc_complain(k->role, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    tc_cond_init_mono(&c->cond);
    snprintf(c->what, sizeof c->what, "%s", what);
    c->next = k->head;
    k->head = c;
    return c;
}

void *tc_calls_alloc(struct tc_calls *k, size_t size)
{
    struct tc_block *b = calloc(1, sizeof *b + size);
    if (!b) {
        tc_complain(k->role, "out of memory");
        return NULL;
    }
    b->next = k->blocks;
    k->blocks = b;
    return b->data;
}

static void trace(const struct tc_calls *k, const struct tc_completion *c, NTSTATUS final)
{
    if (!trace_calls)
        return;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "%s: %s", k->role, k->label);
    if (c->pending)
        tc_say(prefix, "%s: STATUS_PENDING, then %s", c->what, tc_status_name(final));
    else
        tc_say(prefix, "%s: %s (inline)", c->what, tc_status_name(final));
}

NTSTATUS tc_call_end_ms(struct tc_calls *k, struct tc_completion *c, NTSTATUS returned, unsigned ms)
{
    pthread_mutex_lock(&c->lock);
    c->issued = true;
    c->returned = returned;
    c->pending = returned == STATUS_PENDING;
    pthread_mutex_unlock(&c->lock);
    NTSTATUS st = returned;
    if (returned == STATUS_PENDING)
        st = tc_comp_wait(c, ms) ? c->status : TC_STATUS_NO_CALLBACK;
    if (st == TC_STATUS_NO_CALLBACK)
        k->abandoned = true;
    trace(k, c, st);
    return st;
}

NTSTATUS tc_call_end(struct tc_calls *k, struct tc_completion *c, NTSTATUS returned)
{
    return tc_call_end_ms(k, c, returned, k->wait_ms);
}

void *tc_create_end(struct tc_calls *k, struct tc_completion *c, NTSTATUS st, void *inline_object)
{
    st = tc_call_end(k, c, st);
    if (st != STATUS_SUCCESS) {
        tc_complain(k->role, "%s%s failed: %s", k->label, c->what, tc_status_name(st));
        return NULL;
    }
    void *obj = tc_comp_object(c, inline_object);
    if (!obj)
        tc_library_problem(k->role, "%s succeeded without giving an object", c->what);
    return obj;
}

bool tc_close_object(struct tc_calls *k, NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj,
                     const char *what)
{
    struct tc_completion *c = tc_call(k, what);
    if (!c)
        return false;
    NTSTATUS st = fn(obj, tc_on_close, c);
    if (st != STATUS_SUCCESS && st != STATUS_PENDING) {
        tc_library_problem(k->role, "%s returned %s; closes return only STATUS_SUCCESS or STATUS_PENDING",
                           what, tc_status_name(st));
        return false;
    }
    st = tc_call_end(k, c, st);
    if (st == TC_STATUS_NO_CALLBACK) {
        tc_library_problem(k->role, "%s: no close completion within %u ms", what, k->wait_ms);
        return false;
    }
    return true;
}

/* The callback rules for one call; prints each violation. */
static unsigned audit(const struct tc_calls *k, struct tc_completion *c)
{
    unsigned problems = 0;
    pthread_mutex_lock(&c->lock);
    if (c->issued && !c->pending && c->calls > 0) {
        tc_library_problem(k->role, "%s returned %s inline, but its completion callback was called too (%u time%s)",
                           c->what, tc_status_name(c->returned), c->calls, c->calls == 1 ? "" : "s");
        problems++;
    } else if (c->calls > 1) {
        tc_library_problem(k->role, "%s: callback called %u times, expected once", c->what, c->calls);
        problems++;
    }
    pthread_mutex_unlock(&c->lock);
    return problems;
}

bool tc_calls_release(struct tc_calls *k, struct tc_calls *grave)
{
    if (k->abandoned) {
        struct tc_completion **tail = &grave->head;
        while (*tail)
            tail = &(*tail)->next;
        *tail = k->head;
        k->head = NULL;
        struct tc_block **btail = &grave->blocks;
        while (*btail)
            btail = &(*btail)->next;
        *btail = k->blocks;
        k->blocks = NULL;
        return false;
    }
    unsigned problems = 0;
    for (struct tc_completion *c = k->head; c; c = c->next)
        problems += audit(k, c);
    tc_calls_free(k);
    return problems == 0;
}

void tc_calls_free(struct tc_calls *k)
{
    for (struct tc_completion *c = k->head, *next; c; c = next) {
        next = c->next;
        pthread_cond_destroy(&c->cond);
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
    k->head = NULL;
    for (struct tc_block *b = k->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    k->blocks = NULL;
}
