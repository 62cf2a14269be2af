/*
 * log.h - what the tools print: whole lines, so that the threads of one
 * tool (ndkping --loopback, rping's -P) and the two processes of ndkperf
 * --loopback never mix their output, errors on stderr after the stdout
 * lines that led to them, and the count of library problems (the provider
 * broke a documented rule), which fails a run even when it worked.
 */
#ifndef TC_LOG_H
#define TC_LOG_H

#include <stdarg.h>
#include <stdbool.h>

#include <ndk/ndk.h>

/* Our own status for "the call returned STATUS_PENDING and its completion
 * callback did not come within the tool's timeout". It must not collide
 * with a provider status (the provider reports its own timeouts as
 * STATUS_IO_TIMEOUT), so it has the customer bit (0x20000000), which no
 * Microsoft-defined NTSTATUS sets. */
#define TC_STATUS_NO_CALLBACK ((NTSTATUS)0xE0DE0001L)

/* ndk_status_name, and a name for TC_STATUS_NO_CALLBACK. */
const char *tc_status_name(NTSTATUS st);

/* The program's name ("ndkping") that starts every error line; stdout is
 * made line-buffered, so whole lines reach a pipe in order. */
void tc_log_init(const char *prog);
const char *tc_prog(void);
/* Where two ends share one output (--loopback), errors name their role. */
void tc_log_show_roles(bool on);

/* One line on stdout: prefix (may be NULL), then the text. */
void tc_say(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tc_vsay(const char *prefix, const char *fmt, va_list ap);
/* One line on stderr exactly as given: prefix (may be NULL), then the text. */
void tc_err(const char *prefix, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line drawn in place on stderr: a carriage return, the text, no newline. */
void tc_err_in_place(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* "PROG: [ROLE: ]message" on stderr. */
void tc_complain(const char *role, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "PROG: [ROLE: ]CALL failed: STATUS[ (context)]" on stderr. */
void tc_ndk_failed(const char *role, const char *call, NTSTATUS st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "PROG: [ROLE: ]library problem: message", counted. */
void tc_library_problem(const char *role, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tc_count_library_problems(unsigned n);
unsigned tc_library_problems(void);

/* Several stdout lines that belong together (a table) under one hold. */
void tc_out_lock(void);
void tc_out_unlock(void);

#endif
