/*
 * ndkwdk/host.h - what a driver host (ndkhost, the kit's tests) calls in
 * libndk-wdk: start the kit, run code on kit threads, learn whether the
 * driver still has work, and report what it left behind. These are not
 * Windows names; drivers never call them.
 */
#ifndef NDKWDK_HOST_H
#define NDKWDK_HOST_H

#include <stdint.h>
#include <stdio.h>

#include <wdm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Starts the DPC/timer thread. Idempotent. */
void ndkwdk_start(void);

/* Makes the calling thread a kit thread at PASSIVE_LEVEL with this role
 * ("test", "DriverEntry", ...), as if the kit had created it. */
void ndkwdk_thread_enter(const char *role);

/* Runs fn(arg) on a new kit thread at PASSIVE_LEVEL and waits for it at
 * most timeout_ms. Returns 0 when fn returned, -1 when it did not in time
 * (the thread is left running), -2 when no thread could be created. */
int ndkwdk_run_on_thread(const char *role, void (*fn)(void *), void *arg, unsigned timeout_ms);

/* Called after a bug check or failed assertion has been reported, just
 * before the process exits with status 2. */
void ndkwdk_set_fatal_hook(void (*hook)(void));

/* The role of the calling thread ("work item ...", "DPC ...", "NDK
 * callback"), for crash reports; a static string or thread-local buffer. */
const char *ndkwdk_thread_role(void);

/* "module+0xOFFSET (symbol+0xOFFSET)" for a code address. */
void ndkwdk_describe_address(const void *pc, char *buf, size_t len);

/* The driver's pending work: queued or running work items, queued DPCs,
 * set timers and system threads that are running or in a wait with a
 * timeout (a thread in a wait without timeout is idle). Returns how many;
 * describes the first ones in why. */
unsigned ndkwdk_busy(char *why, size_t len);

/* Bumped by every kit routine: a host sees whether the driver is active. */
uint64_t ndkwdk_activity(void);

/* Reports to out, returning how many items were found:
 * pool blocks left allocated, grouped by tag; */
unsigned ndkwdk_report_pool(FILE *out);
/* NDK adapters opened through WskOpenNdkAdapter and not closed, with their
 * open objects by type, and WSK registrations left; closes the adapters; */
unsigned ndkwdk_report_ndk(FILE *out);
/* system threads still running, work items queued, DPCs queued, timers
 * set (what Windows reports as DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS); */
unsigned ndkwdk_report_pending(FILE *out);
/* where each kit thread is blocked (for a driver that does not return). */
void ndkwdk_report_blocked(FILE *out);

/* "STATUS_INVALID_PARAMETER" or "0xC00000xx". */
const char *ndkwdk_status_name(NTSTATUS Status);

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_HOST_H */
