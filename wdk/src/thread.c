/* System threads and the thread registry: PsCreateSystemThread,
 * PsTerminateSystemThread, thread objects and handles (Ob references,
 * ZwClose), and the host's way to run code on a kit thread. A thread
 * object is signalled when its thread ends, so drivers can wait for it. */
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kit.h"

pthread_mutex_t kit_threads_lock = PTHREAD_MUTEX_INITIALIZER;
struct kit_thread *kit_threads;
static char process_object, thread_type, event_type;
static POBJECT_TYPE thread_type_ptr = (POBJECT_TYPE)(void *)&thread_type;
static POBJECT_TYPE event_type_ptr = (POBJECT_TYPE)(void *)&event_type;
POBJECT_TYPE *PsThreadType = &thread_type_ptr;
POBJECT_TYPE *ExEventObjectType = &event_type_ptr;

struct kit_thread *kit_thread_new(const char *role)
{
    struct kit_thread *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->Header.Type = NDKWDK_OBJ_THREAD;
    InitializeListHead(&t->Header.WaitListHead);
    t->refs = 1;
    snprintf(t->role, sizeof t->role, "%s", role);
    pthread_mutex_lock(&kit_threads_lock);
    t->next = kit_threads;
    kit_threads = t;
    pthread_mutex_unlock(&kit_threads_lock);
    return t;
}

void kit_thread_release(struct kit_thread *t)
{
    if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    pthread_mutex_lock(&kit_threads_lock);
    for (struct kit_thread **pp = &kit_threads; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    pthread_mutex_unlock(&kit_threads_lock);
    free(t);
}

static struct kit_thread *find_thread(const void *p)
{
    struct kit_thread *found = NULL;
    pthread_mutex_lock(&kit_threads_lock);
    for (struct kit_thread *t = kit_threads; t; t = t->next)
        if ((const void *)t == p)
            found = t;
    pthread_mutex_unlock(&kit_threads_lock);
    return found;
}

/* The thread whose handle is open, with a reference taken (and the handle
 * closed when close is set), under the registry lock so that a handle is
 * closed once. */
static struct kit_thread *take_handle(HANDLE h, bool close)
{
    struct kit_thread *found = NULL;
    pthread_mutex_lock(&kit_threads_lock);
    for (struct kit_thread *t = kit_threads; t; t = t->next)
        if ((HANDLE)t == h && t->handle_open) {
            found = t;
            if (close)
                t->handle_open = false; /* its reference passes to the caller */
            else
                __atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
        }
    pthread_mutex_unlock(&kit_threads_lock);
    return found;
}

static void thread_end(struct kit_thread *t)
{
    pthread_mutex_lock(&kit_disp_lock);
    t->exited = true;
    t->Header.SignalState = 1;
    kit_disp_changed();
    pthread_mutex_unlock(&kit_disp_lock);
    kit_thread_release(t);
}

/* A thread nobody joins: its end is signalled through the kit_thread. */
static int start_detached(pthread_t *tid, void *(*fn)(void *), void *arg)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(tid, &a, fn, arg);
    pthread_attr_destroy(&a);
    return rc;
}

static void *system_thread_main(void *arg)
{
    struct kit_thread *t = arg;
    kit_adopt_thread(t, t->role);
    t->start(t->context);
    thread_end(t);
    return NULL;
}

NTSTATUS PsCreateSystemThread(PHANDLE ThreadHandle, ULONG DesiredAccess,
                              POBJECT_ATTRIBUTES ObjectAttributes, HANDLE ProcessHandle,
                              PCLIENT_ID ClientId, PKSTART_ROUTINE StartRoutine,
                              PVOID StartContext)
{
    (void)DesiredAccess, (void)ObjectAttributes, (void)ProcessHandle;
    kit_touch();
    kit_require_irql(PASSIVE_LEVEL, "PsCreateSystemThread", KIT_CALLER);
    if (!ThreadHandle || !StartRoutine)
        return STATUS_INVALID_PARAMETER;
    char where[80], role[96];
    ndkwdk_describe_address((const void *)StartRoutine, where, sizeof where);
    snprintf(role, sizeof role, "system thread %s", where);
    struct kit_thread *t = kit_thread_new(role);
    if (!t)
        return STATUS_INSUFFICIENT_RESOURCES;
    t->system = true;
    t->start = StartRoutine;
    t->context = StartContext;
    t->refs = 2; /* the thread itself and the handle */
    t->handle_open = true;
    int rc = start_detached(&t->tid, system_thread_main, t);
    if (rc != 0) {
        t->refs = 1;
        kit_thread_release(t);
        return STATUS_INSUFFICIENT_RESOURCES;
    }
    *ThreadHandle = (HANDLE)t;
    if (ClientId) {
        ClientId->UniqueProcess = (HANDLE)(uintptr_t)getpid();
        ClientId->UniqueThread = (HANDLE)t;
    }
    return STATUS_SUCCESS;
}

NTSTATUS PsTerminateSystemThread(NTSTATUS ExitStatus)
{
    (void)ExitStatus;
    kit_touch();
    struct kit_thread *t = kit_tls.self;
    if (!t || !t->system)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, 0, 0, 0, KIT_CALLER,
                     "PsTerminateSystemThread outside a system thread (in %s)",
                     ndkwdk_thread_role());
    if (kit_irql() != PASSIVE_LEVEL)
        kit_bugcheck(BC_IRQL_UNEXPECTED_VALUE, (ULONG_PTR)kit_irql() << 16, 0, 0, 0, KIT_CALLER,
                     "PsTerminateSystemThread at IRQL %u", kit_irql());
    thread_end(t);
    pthread_exit(NULL);
}

PETHREAD PsGetCurrentThread(VOID)
{
    return kit_tls.self ? (PETHREAD)kit_tls.self : (PETHREAD)(void *)&kit_tls;
}

PKTHREAD KeGetCurrentThread(VOID)
{
    return PsGetCurrentThread();
}

HANDLE PsGetCurrentThreadId(VOID)
{
    return (HANDLE)(uintptr_t)syscall(SYS_gettid);
}

HANDLE PsGetCurrentProcessId(VOID)
{
    return (HANDLE)(uintptr_t)getpid();
}

PEPROCESS PsGetCurrentProcess(VOID)
{
    return (PEPROCESS)(void *)&process_object;
}

BOOLEAN PsIsSystemThread(PETHREAD Thread)
{
    (void)Thread;
    return TRUE;
}

KPRIORITY KeSetPriorityThread(PKTHREAD Thread, KPRIORITY Priority)
{
    (void)Thread, (void)Priority;
    return 8; /* priorities have no effect */
}

KPRIORITY KeQueryPriorityThread(PKTHREAD Thread)
{
    (void)Thread;
    return 8;
}

/* ---- objects and handles ---- */
NTSTATUS ObReferenceObjectByHandle(HANDLE Handle, ACCESS_MASK DesiredAccess,
                                   POBJECT_TYPE ObjectType, KPROCESSOR_MODE AccessMode,
                                   PVOID *Object, POBJECT_HANDLE_INFORMATION HandleInformation)
{
    (void)DesiredAccess, (void)ObjectType, (void)AccessMode;
    kit_touch();
    if (!Object)
        return STATUS_INVALID_PARAMETER;
    struct kit_thread *t = take_handle(Handle, false);
    if (!t)
        return STATUS_INVALID_HANDLE;
    *Object = t;
    if (HandleInformation) {
        HandleInformation->HandleAttributes = 0;
        HandleInformation->GrantedAccess = THREAD_ALL_ACCESS;
    }
    return STATUS_SUCCESS;
}

LONG_PTR ObfReferenceObject(PVOID Object)
{
    struct kit_thread *t = find_thread(Object);
    return t ? __atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL) : 1;
}

LONG_PTR ObfDereferenceObject(PVOID Object)
{
    struct kit_thread *t = find_thread(Object);
    if (!t)
        return 0;
    LONG left = __atomic_load_n(&t->refs, __ATOMIC_ACQUIRE) - 1;
    kit_thread_release(t);
    return left;
}

NTSTATUS ZwClose(HANDLE Handle)
{
    kit_touch();
    struct kit_thread *t = take_handle(Handle, true);
    if (!t)
        return STATUS_INVALID_HANDLE;
    kit_thread_release(t);
    return STATUS_SUCCESS;
}

/* ---- the host's side ---- */
void ndkwdk_thread_enter(const char *role)
{
    struct kit_thread *t = kit_thread_new(role);
    if (t)
        t->tid = pthread_self();
    kit_adopt_thread(t, role);
}

struct host_call {
    struct kit_thread *t;
    void (*fn)(void *);
    void *arg;
};

static void *host_thread_main(void *arg)
{
    struct host_call *c = arg;
    struct kit_thread *t = c->t;
    kit_adopt_thread(t, t->role);
    c->fn(c->arg);
    free(c);
    thread_end(t);
    return NULL;
}

static bool thread_exited(void *arg)
{
    return ((struct kit_thread *)arg)->exited;
}

int ndkwdk_run_on_thread(const char *role, void (*fn)(void *), void *arg, unsigned timeout_ms)
{
    struct host_call *c = malloc(sizeof *c);
    struct kit_thread *t = c ? kit_thread_new(role) : NULL;
    if (!t) {
        free(c);
        return -2;
    }
    t->refs = 2; /* the thread and us */
    c->t = t;
    c->fn = fn;
    c->arg = arg;
    int rc = start_detached(&t->tid, host_thread_main, c);
    if (rc != 0) {
        free(c);
        t->refs = 1;
        kit_thread_release(t);
        return -2;
    }
    struct timespec deadline;
    kit_deadline_after_ms(timeout_ms, &deadline);
    pthread_mutex_lock(&kit_disp_lock);
    bool done = kit_disp_wait(thread_exited, t, &deadline, NULL, "host");
    pthread_mutex_unlock(&kit_disp_lock);
    kit_thread_release(t);
    return done ? 0 : -1;
}

/* The registry lock, then the dispatcher lock (which guards exited, wait,
 * wait_site and wait_what): never the other way round. */
void ndkwdk_report_blocked(FILE *out)
{
    pthread_mutex_lock(&kit_threads_lock);
    pthread_mutex_lock(&kit_disp_lock);
    for (struct kit_thread *t = kit_threads; t; t = t->next) {
        if (t->exited)
            continue;
        char where[256] = "";
        if (t->wait != KIT_RUNNING)
            ndkwdk_describe_address(t->wait_site, where, sizeof where);
        if (t->wait == KIT_RUNNING)
            fprintf(out, "  %s: running\n", t->role);
        else
            fprintf(out, "  %s: blocked in %s%s called at %s\n", t->role, t->wait_what,
                    t->wait == KIT_WAIT_FOREVER ? " without a timeout," : "", where);
    }
    pthread_mutex_unlock(&kit_disp_lock);
    pthread_mutex_unlock(&kit_threads_lock);
}

unsigned kit_threads_busy(char *why, size_t len)
{
    unsigned n = 0;
    pthread_mutex_lock(&kit_threads_lock);
    pthread_mutex_lock(&kit_disp_lock);
    for (struct kit_thread *t = kit_threads; t; t = t->next) {
        if (!t->system || t->exited || t->wait == KIT_WAIT_FOREVER)
            continue;
        if (n++ == 0 && why && len)
            snprintf(why, len, "%s", t->role);
    }
    pthread_mutex_unlock(&kit_disp_lock);
    pthread_mutex_unlock(&kit_threads_lock);
    return n;
}
