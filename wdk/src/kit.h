/* kit.h - libndk-wdk's internals shared between its files (one concern
 * each): per-thread IRQL and roles, bug checks, the dispatcher lock, the
 * thread registry, pool, time and formatting helpers. */
#ifndef NDKWDK_KIT_H
#define NDKWDK_KIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include <ndis.h>
#include <ndkwdk/host.h>

/* ---- threads: the kit's own, with IRQL and role (irql.c, thread.c) ---- */
enum kit_wait_state { KIT_RUNNING, KIT_WAIT_TIMED, KIT_WAIT_FOREVER };

/* A thread the kit created or adopted. Starts with a DISPATCHER_HEADER, so
 * it is the thread object drivers wait on (signalled when it ends). */
struct kit_thread {
    DISPATCHER_HEADER Header;
    struct kit_thread *next;
    pthread_t tid;
    bool system;           /* PsCreateSystemThread: counted as driver work */
    bool exited;
    bool handle_open;      /* the handle PsCreateSystemThread returned, until ZwClose */
    LONG refs;             /* handle + object references + the thread itself */
    enum kit_wait_state wait;
    const void *wait_site; /* the driver code that waits */
    const char *wait_what;
    PKSTART_ROUTINE start;
    PVOID context;
    char role[96];
};

struct kit_tls {
    bool known;   /* IRQL initialised (threads the kit did not create: DISPATCH) */
    bool in_dpc;  /* running a DPC routine */
    KIRQL irql;
    struct kit_thread *self;
    char role[96];
};
extern __thread struct kit_tls kit_tls;

KIRQL kit_irql(void);
void kit_set_role(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void kit_adopt_thread(struct kit_thread *t, const char *role);

/* Every kit routine bumps the activity counter (host.c). */
void kit_touch(void);

/* ---- bug checks (irql.c) ---- */
__attribute__((noreturn)) void kit_bugcheck(ULONG code, ULONG_PTR p1, ULONG_PTR p2, ULONG_PTR p3,
                                            ULONG_PTR p4, const void *site, const char *fmt,
                                            ...) __attribute__((format(printf, 7, 8)));
/* A routine that may run at most at max (PASSIVE_LEVEL or APC_LEVEL). */
void kit_require_irql(KIRQL max, const char *routine, const void *site);
/* The bug check codes the kit raises. */
#define BC_IRQL_NOT_GREATER_OR_EQUAL 0x09
#define BC_IRQL_NOT_LESS_OR_EQUAL 0x0A
#define BC_MAXIMUM_WAIT_OBJECTS_EXCEEDED 0x0C
#define BC_SPIN_LOCK_ALREADY_OWNED 0x0F
#define BC_SPIN_LOCK_NOT_OWNED 0x10
#define BC_KMODE_EXCEPTION_NOT_HANDLED 0x1E
#define BC_SYSTEM_THREAD_EXCEPTION_NOT_HANDLED 0x7E
#define BC_ATTEMPTED_SWITCH_FROM_DPC 0xB8
#define BC_BAD_POOL_CALLER 0xC2
#define BC_DRIVER_VERIFIER_DETECTED_VIOLATION 0xC4
#define BC_IRQL_UNEXPECTED_VALUE 0xC8
#define BC_DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS 0xCE
#define BC_DRIVER_IRQL_NOT_LESS_OR_EQUAL 0xD1
#define BC_WORKER_THREAD_RETURNED_AT_BAD_IRQL 0xE1
#define BC_WORKER_INVALID 0xE4
const char *kit_bugcheck_name(ULONG code);
#define KIT_CALLER __builtin_return_address(0)

/* ---- dispatcher objects (dispatcher.c) ---- */
extern pthread_mutex_t kit_disp_lock;
/* Wakes every waiter; call with kit_disp_lock held after a state change. */
void kit_disp_changed(void);
/* Waits under kit_disp_lock until pred(arg) or the deadline (NULL: none).
 * Returns false on timeout. Records the wait for busy/blocked reports. */
bool kit_disp_wait(bool (*pred)(void *), void *arg, const struct timespec *deadline,
                   const void *site, const char *what);

/* ---- thread registry (thread.c) ---- */
extern pthread_mutex_t kit_threads_lock;
extern struct kit_thread *kit_threads;
struct kit_thread *kit_thread_new(const char *role);
/* System threads that are running or in a wait with a timeout (one
 * waiting without a timeout waits for the driver: idle). */
unsigned kit_threads_busy(char *why, size_t len);
void kit_thread_release(struct kit_thread *t);

/* ---- time (time.c) ---- */
uint64_t kit_mono_100ns(void);
int64_t kit_system_time(void);
/* A KeWaitXxx timeout as a CLOCK_MONOTONIC deadline; false for NULL. */
bool kit_deadline(const LARGE_INTEGER *timeout, struct timespec *deadline);
void kit_deadline_after_ms(unsigned ms, struct timespec *deadline);

/* ---- pool (pool.c) ---- */
void *kit_pool_alloc(bool paged, SIZE_T size, ULONG tag, bool zero, const void *site);
void kit_pool_free(void *p, ULONG tag, bool check_tag, const void *site);

/* ---- work and DPC counters (workitem.c, dpc.c) ---- */
unsigned kit_workitems_busy(char *why, size_t len);
unsigned kit_dpcs_busy(char *why, size_t len);
unsigned kit_workitems_report(FILE *out);
unsigned kit_dpcs_report(FILE *out);
/* Freeing memory that holds a set timer is a bug check (Driver Verifier). */
void kit_dpc_check_free(const void *p, size_t size, const void *site);

/* ---- NDK adapters opened through WSK (wsk.c, ndkopen.c) ---- */
NTSTATUS kit_ndk_open(NET_IFINDEX ifindex, NDK_VERSION version, NDK_ADAPTER **adapter);
void kit_ndk_close(NDK_ADAPTER *adapter);
ULONG kit_ndk_objects(NDK_ADAPTER *adapter, NDK_OBJECT_TYPE type);
const char *kit_ndk_status_name(NTSTATUS st);

/* ---- formatting with the Windows conventions (format.c) ---- */
/* Formats into out (cap bytes, NUL-terminated when cap > 0); wide: the
 * format is WCHAR. Returns the length the whole result needs. */
size_t kit_vformat(char *out, size_t cap, bool wide, const void *fmt, va_list ap);
/* WCHAR <-> char, ASCII; others become '?'. */
size_t kit_wcslen(const WCHAR *s);

#endif
