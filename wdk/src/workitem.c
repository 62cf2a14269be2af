/* IO work items: a pool of worker threads (grown on demand, so a work
 * item that waits for another one does not deadlock) runs them at
 * PASSIVE_LEVEL in queue order. A work item returning at a raised IRQL is
 * WORKER_THREAD_RETURNED_AT_BAD_IRQL; freeing or queueing one that is
 * still queued is WORKER_INVALID. */
#include <stdlib.h>
#include <string.h>

#include "kit.h"

#define MAX_WORKERS 32
#define ITEM_MAGIC 0x4B524F57u /* "WORK" */

struct _IO_WORKITEM {
    uint32_t magic;
    bool queued, running, pooled; /* pooled: from IoAllocateWorkItem */
    PVOID io_object;
    PIO_WORKITEM_ROUTINE routine;
    PIO_WORKITEM_ROUTINE_EX routine_ex;
    PVOID context;
    struct _IO_WORKITEM *next;
};

static pthread_mutex_t wq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wq_cond = PTHREAD_COND_INITIALIZER;
static struct _IO_WORKITEM *wq_head, *wq_tail;
static unsigned workers, idle_workers, running_items;

ULONG IoSizeofWorkItem(VOID)
{
    return sizeof(IO_WORKITEM);
}

VOID IoInitializeWorkItem(PVOID IoObject, PIO_WORKITEM IoWorkItem)
{
    memset(IoWorkItem, 0, sizeof *IoWorkItem);
    IoWorkItem->magic = ITEM_MAGIC;
    IoWorkItem->io_object = IoObject;
}

static void check_not_queued(PIO_WORKITEM w, const char *routine, const void *site)
{
    if (w->magic != ITEM_MAGIC)
        kit_bugcheck(BC_WORKER_INVALID, 0, (ULONG_PTR)w, 0, 0, site,
                     "%s of %p, which is not an initialized work item", routine, (void *)w);
    pthread_mutex_lock(&wq_lock);
    bool queued = w->queued;
    pthread_mutex_unlock(&wq_lock);
    if (queued)
        kit_bugcheck(BC_WORKER_INVALID, 1, (ULONG_PTR)w, 0, 0, site,
                     "%s of a work item that is still queued", routine);
}

VOID IoUninitializeWorkItem(PIO_WORKITEM IoWorkItem)
{
    check_not_queued(IoWorkItem, "IoUninitializeWorkItem", KIT_CALLER);
    IoWorkItem->magic = 0;
}

PIO_WORKITEM IoAllocateWorkItem(PDEVICE_OBJECT DeviceObject)
{
    /* Tracked as pool with tag 'IoWk' so a leaked one is reported. */
    PIO_WORKITEM w = kit_pool_alloc(false, sizeof *w, 0x6B576F49, true, KIT_CALLER);
    if (!w)
        return NULL;
    IoInitializeWorkItem(DeviceObject, w);
    w->pooled = true;
    return w;
}

VOID IoFreeWorkItem(PIO_WORKITEM IoWorkItem)
{
    check_not_queued(IoWorkItem, "IoFreeWorkItem", KIT_CALLER);
    IoWorkItem->magic = 0;
    kit_pool_free(IoWorkItem, 0, false, KIT_CALLER);
}

static void run_item(struct _IO_WORKITEM *w, PIO_WORKITEM_ROUTINE r, PIO_WORKITEM_ROUTINE_EX rx,
                     PVOID ctx)
{
    char where[160];
    const void *fn = r ? (const void *)r : (const void *)rx;
    ndkwdk_describe_address(fn, where, sizeof where);
    kit_set_role("work item %s", where);
    kit_tls.irql = PASSIVE_LEVEL;
    if (r)
        r((PDEVICE_OBJECT)w->io_object, ctx);
    else
        rx(w->io_object, ctx, w);
    if (kit_irql() != PASSIVE_LEVEL)
        kit_bugcheck(BC_WORKER_THREAD_RETURNED_AT_BAD_IRQL, (ULONG_PTR)fn, kit_irql(), 0, 0, fn,
                     "work item routine returned at IRQL %u", kit_irql());
    kit_set_role("worker thread (idle)");
}

static void *worker_main(void *arg)
{
    struct kit_thread *t = arg;
    kit_adopt_thread(t, "worker thread (idle)");
    pthread_mutex_lock(&wq_lock);
    for (;;) {
        while (!wq_head) {
            idle_workers++;
            pthread_cond_wait(&wq_cond, &wq_lock);
            idle_workers--;
        }
        struct _IO_WORKITEM *w = wq_head;
        wq_head = w->next;
        if (!wq_head)
            wq_tail = NULL;
        PIO_WORKITEM_ROUTINE r = w->routine;
        PIO_WORKITEM_ROUTINE_EX rx = w->routine_ex;
        PVOID ctx = w->context;
        /* Dequeued before it runs: the routine may free or requeue it. */
        w->queued = false;
        running_items++;
        pthread_mutex_unlock(&wq_lock);
        run_item(w, r, rx, ctx);
        pthread_mutex_lock(&wq_lock);
        running_items--;
    }
    return NULL;
}

static void queue_item(PIO_WORKITEM w, PIO_WORKITEM_ROUTINE r, PIO_WORKITEM_ROUTINE_EX rx,
                       PVOID ctx, const char *routine, const void *site)
{
    kit_touch();
    if (kit_irql() > DISPATCH_LEVEL)
        kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, 0, kit_irql(), 0, (ULONG_PTR)site, site,
                     "%s above DISPATCH_LEVEL", routine);
    check_not_queued(w, routine, site);
    pthread_mutex_lock(&wq_lock);
    w->routine = r;
    w->routine_ex = rx;
    w->context = ctx;
    w->queued = true;
    w->next = NULL;
    if (wq_tail)
        wq_tail->next = w;
    else
        wq_head = w;
    wq_tail = w;
    bool grow = idle_workers == 0 && workers < MAX_WORKERS;
    if (grow)
        workers++;
    pthread_cond_signal(&wq_cond);
    pthread_mutex_unlock(&wq_lock);
    if (grow) {
        struct kit_thread *t = kit_thread_new("worker thread");
        pthread_t tid;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (!t || pthread_create(&tid, &a, worker_main, t) != 0) {
            pthread_mutex_lock(&wq_lock);
            workers--;
            pthread_mutex_unlock(&wq_lock);
            if (t)
                kit_thread_release(t);
        }
        pthread_attr_destroy(&a);
    }
}

VOID IoQueueWorkItem(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE WorkerRoutine,
                     WORK_QUEUE_TYPE QueueType, PVOID Context)
{
    (void)QueueType;
    queue_item(IoWorkItem, WorkerRoutine, NULL, Context, "IoQueueWorkItem", KIT_CALLER);
}

VOID IoQueueWorkItemEx(PIO_WORKITEM IoWorkItem, PIO_WORKITEM_ROUTINE_EX WorkerRoutine,
                       WORK_QUEUE_TYPE QueueType, PVOID Context)
{
    (void)QueueType;
    queue_item(IoWorkItem, NULL, WorkerRoutine, Context, "IoQueueWorkItemEx", KIT_CALLER);
}

unsigned kit_workitems_busy(char *why, size_t len)
{
    pthread_mutex_lock(&wq_lock);
    unsigned n = running_items;
    for (struct _IO_WORKITEM *w = wq_head; w; w = w->next)
        n++;
    pthread_mutex_unlock(&wq_lock);
    if (n && why && len)
        snprintf(why, len, "%u work item(s) queued or running", n);
    return n;
}

unsigned kit_workitems_report(FILE *out)
{
    unsigned n = 0;
    pthread_mutex_lock(&wq_lock);
    for (struct _IO_WORKITEM *w = wq_head; w; w = w->next, n++) {
        char where[160];
        const void *fn = w->routine ? (const void *)w->routine : (const void *)w->routine_ex;
        ndkwdk_describe_address(fn, where, sizeof where);
        fprintf(out, "  work item still queued: %s\n", where);
    }
    if (running_items) {
        fprintf(out, "  %u work item(s) still running\n", running_items);
        n += running_items;
    }
    pthread_mutex_unlock(&wq_lock);
    return n;
}
