/*
 * listener.c - see listener.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/addr.h"
#include "lib/clock.h"
#include "lib/listener.h"
#include "lib/log.h"

struct tc_request {
    NDK_CONNECTOR *cn;
    uint64_t t_event;
    struct tc_request *next;
};

struct tc_listen_queue {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct tc_request *head, *tail;
    bool stop;
    unsigned limit, seen; /* requests to take, and seen so far */
};

static VOID refused_closed(PVOID Context)
{
    (void)Context;
}

/* A request beyond the limit, or one we cannot queue: closing an
 * undelivered request refuses it, and a close may be started from a
 * callback. Nobody waits for that close; the adapter's close does. */
void tc_listener_refuse(NDK_CONNECTOR *cn)
{
    cn->Dispatch->NdkCloseConnector(&cn->Header, refused_closed, NULL);
}

static VOID on_connect_event(PVOID Context, NDK_CONNECTOR *pNdkConnector)
{
    struct tc_listen_queue *q = Context;
    pthread_mutex_lock(&q->lock);
    bool take = !q->limit || q->seen < q->limit;
    q->seen++;
    struct tc_request *r = take ? malloc(sizeof *r) : NULL;
    if (r) {
        *r = (struct tc_request){.cn = pNdkConnector, .t_event = tc_now_us()};
        if (q->tail)
            q->tail->next = r;
        else
            q->head = r;
        q->tail = r;
        pthread_cond_broadcast(&q->cond);
    }
    pthread_mutex_unlock(&q->lock);
    if (!r)
        tc_listener_refuse(pNdkConnector);
}

static bool create(struct tc_listener *l, unsigned limit)
{
    if (!(l->q = tc_calls_alloc(&l->calls, sizeof *l->q)))
        return false;
    pthread_mutex_init(&l->q->lock, NULL);
    tc_cond_init_mono(&l->q->cond);
    l->q->limit = limit;
    struct tc_completion *k = tc_call(&l->calls, "NdkCreateListener");
    if (!k)
        return false;
    NDK_ADAPTER *ad = l->adapter->ad;
    NDK_LISTENER *ln = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateListener(ad, on_connect_event, l->q, tc_on_create, k, &ln);
    return (l->ln = tc_create_end(&l->calls, k, st, ln)) != NULL;
}

/* NdkListen on addr, and where it listens (l->bound); false after saying
 * why. */
static bool listen_on(struct tc_listener *l, const NDK_SOCKADDR *addr)
{
    const char *role = l->adapter->role;
    struct tc_completion *k = tc_call(&l->calls, "NdkListen");
    if (!k)
        return false;
    NDK_SOCKADDR at = *addr;
    NTSTATUS st = l->ln->Dispatch->NdkListen(l->ln, &at.sa, tc_sockaddr_len(&at), tc_on_request, k);
    st = tc_call_end(&l->calls, k, st);
    char where[TC_ADDR_BUF];
    tc_format_addr(addr, true, where, sizeof where);
    if (st != STATUS_SUCCESS) {
        tc_complain(role, "cannot listen on %s: %s%s", where, tc_status_name(st),
                    st == STATUS_SHARING_VIOLATION ? " (is another server using that port? -p picks another)"
                    : st == STATUS_INVALID_ADDRESS ? " (is that address one of the adapter's?)"
                                                   : "");
        return false;
    }
    ULONG len = sizeof l->bound;
    st = l->ln->Dispatch->NdkGetLocalAddress(l->ln, &l->bound.sa, &len);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(role, "NdkGetLocalAddress", st, "the listener on %s", where);
        return false;
    }
    if (tc_sockaddr_port(&l->bound) == 0)
        tc_library_problem(role, "the listener's NdkGetLocalAddress gave port 0");
    return true;
}

bool tc_listen(struct tc_listener *l, struct tc_adapter *a, const NDK_SOCKADDR *addr, unsigned limit)
{
    memset(l, 0, sizeof *l);
    l->adapter = a;
    tc_calls_init(&l->calls, a->role, tc_adapter_wait_ms(a));
    if (create(l, limit) && listen_on(l, addr))
        return true;
    tc_listener_close(l);
    return false;
}

enum tc_next tc_listener_next(struct tc_listener *l, unsigned ms, NDK_CONNECTOR **cn, uint64_t *t_event)
{
    struct tc_listen_queue *q = l->q;
    struct timespec deadline;
    tc_deadline(&deadline, ms ? ms : 1000);
    enum tc_next got = TC_NEXT_TIMEOUT;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        if (q->head) {
            struct tc_request *r = q->head;
            if (!(q->head = r->next))
                q->tail = NULL;
            *cn = r->cn;
            if (t_event)
                *t_event = r->t_event;
            free(r);
            got = TC_NEXT_GOT;
            break;
        }
        if (q->stop) {
            got = TC_NEXT_STOPPED;
            break;
        }
        /* Without a limit the wait goes on in slices, until a stop. */
        if (pthread_cond_timedwait(&q->cond, &q->lock, &deadline) == ETIMEDOUT) {
            if (ms)
                break;
            tc_deadline(&deadline, 1000);
        }
    }
    pthread_mutex_unlock(&q->lock);
    return got;
}

void tc_listener_stop(struct tc_listener *l)
{
    pthread_mutex_lock(&l->q->lock);
    l->q->stop = true;
    pthread_cond_broadcast(&l->q->cond);
    pthread_mutex_unlock(&l->q->lock);
}

bool tc_listener_close(struct tc_listener *l)
{
    bool ok = true;
    if (l->ln)
        ok = tc_close_object(&l->calls, l->ln->Dispatch->NdkCloseListener, &l->ln->Header, "NdkCloseListener");
    l->ln = NULL;
    /* No connect event comes once the close has completed: what is
     * queued is all there is. */
    if (l->q) {
        tc_listener_stop(l);
        NDK_CONNECTOR *cn;
        while (tc_listener_next(l, 1, &cn, NULL) == TC_NEXT_GOT)
            ok &= tc_close_object(&l->calls, cn->Dispatch->NdkCloseConnector, &cn->Header,
                                  "NdkCloseConnector (a request not taken)");
    }
    bool abandoned = l->calls.abandoned;
    if (l->q && !abandoned) {
        pthread_cond_destroy(&l->q->cond);
        pthread_mutex_destroy(&l->q->lock);
    }
    ok &= tc_calls_release(&l->calls, &l->adapter->grave);
    l->q = NULL;
    return ok && !abandoned;
}
