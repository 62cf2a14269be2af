/*
 * injconn.h - the connection scenario the injection tests drive: objects,
 * NdkConnect/NdkAccept/NdkCompleteConnect between two adapters over
 * loopback, a data exchange (Send both ways, RDMA Write into a fast
 * registration, RDMA Read), NdkDisconnect, and every object closed.
 *
 * Written to survive a failure anywhere: each call either does its job or
 * fails, and the scenario goes on with what still exists, closing
 * everything at the end. What a failure may look like:
 *   - a call in which the injected allocation failure happened (inject.h)
 *     returns STATUS_INSUFFICIENT_RESOURCES (as may any call while file
 *     descriptors run out);
 *   - any other call succeeds, unless the failure hit elsewhere (on a
 *     progress thread, or in an earlier call), and then the connection
 *     fails with a status that says so (refused, aborted, out of resources,
 *     a flush; a timeout only for a request a listener out of descriptors
 *     could not accept); each wait is bounded by WAIT_MS, and one that runs
 *     out is a failure (a hang);
 *   - when all three legs report success, the connection moves data.
 * Compiled once into ndk_inject (injconn.c).
 */
#ifndef NDK_TESTS_INJCONN_H
#define NDK_TESTS_INJCONN_H

#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "inject.h"
#include "testlib.h"

struct inj_op {
    tl_event ev;
    _Atomic NTSTATUS st;
    tl_event *also; /* signalled too, if set */
};

void inj_op_init(struct inj_op *o);

/* A completion callback: its context is a struct inj_op. */
void inj_op_cb(PVOID ctx, NTSTATUS st);

/* The final status of a call that returned `returned`: its completion's
 * when pending (bounded; STATUS_PENDING and a failure if it never came). */
NTSTATUS inj_op_finish(struct inj_op *o, NTSTATUS returned, const char *what);

/* One of the two adapters the scenario connects. */
struct inj_side {
    NDK_ADAPTER *ad;
};

/* Provider timeouts short enough that a lost leg shows as a timeout
 * failure quickly, long enough never to fire on a loaded machine. */
NDK_OPEN_OPTIONS inj_opts(void);

/* Closes any object (NULL: nothing) and waits for its close completion. */
void inj_close_obj(void *obj);

/* The connection's whole life between the adapters of sa and sb; true when
 * everything worked (no failure hit). */
bool inj_conn_life(struct inj_side *sa, struct inj_side *sb);

#endif
