/*
 * ndkwdk/dbg.h - debug output, assertions and PAGED_CODE.
 *
 * DbgPrint and DbgPrintEx write to standard error with the Windows format
 * conventions (%ld is a 32-bit LONG, %I64d, %Iu, %ws, %S, %wZ, %Z).
 * NT_ASSERT and NT_VERIFY report the expression with file:line and end the
 * run; ASSERT is active only when DBG is non-zero, as on Windows. PAGED_CODE
 * reports a pageable routine running above APC_LEVEL as the bug check
 * DRIVER_IRQL_NOT_LESS_OR_EQUAL, with file:line, and ends the run.
 */
#ifndef NDKWDK_DBG_H
#define NDKWDK_DBG_H

#include <stdarg.h>

#include <ndkwdk/ke.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef DBG
#define DBG 0
#endif

#define DPFLTR_ERROR_LEVEL 0
#define DPFLTR_WARNING_LEVEL 1
#define DPFLTR_TRACE_LEVEL 2
#define DPFLTR_INFO_LEVEL 3
#define DPFLTR_MASK 0x80000000
#define DPFLTR_SYSTEM_ID 0
#define DPFLTR_DEFAULT_ID 101
#define DPFLTR_IHVNETWORK_ID 79
#define DPFLTR_IHVSTREAMING_ID 80
#define DPFLTR_IHVAUDIO_ID 81
#define DPFLTR_IHVVIDEO_ID 82
#define DPFLTR_IHVBUS_ID 83
#define DPFLTR_IHVDRIVER_ID 77

ULONG DbgPrint(PCSTR Format, ...);
ULONG DbgPrintEx(ULONG ComponentId, ULONG Level, PCSTR Format, ...);
ULONG vDbgPrintEx(ULONG ComponentId, ULONG Level, PCCH Format, va_list arglist);
VOID DbgBreakPoint(VOID);
#define KdPrint(_x_) DbgPrint _x_
#define KdPrintEx(_x_) DbgPrintEx _x_
#define KdBreakPoint() DbgBreakPoint()
#define KD_DEBUGGER_NOT_PRESENT TRUE
#define KD_DEBUGGER_ENABLED FALSE

/* The kit's reporting entry points behind the macros (not Windows names). */
__attribute__((noreturn)) void ndkwdk_assert_failed(const char *expression, const char *message,
                                                    const char *file, int line);
void ndkwdk_paged_code(const char *file, int line, const char *function);

#define NT_ASSERT(e) ((e) ? (void)0 : ndkwdk_assert_failed(#e, NULL, __FILE__, __LINE__))
#define NT_ASSERTMSG(m, e) ((e) ? (void)0 : ndkwdk_assert_failed(#e, (m), __FILE__, __LINE__))
#define NT_ASSERTMSGW(m, e) ((e) ? (void)0 : ndkwdk_assert_failed(#e, NULL, __FILE__, __LINE__))
#define NT_ASSERT_ASSUME(e) NT_ASSERT(e)
#define NT_ANALYSIS_ASSUME(e) ((void)0)
#define NT_FRE_ASSERT(e) NT_ASSERT(e)
#define NT_VERIFY(e) ((e) ? TRUE : (ndkwdk_assert_failed(#e, NULL, __FILE__, __LINE__), FALSE))
#define NT_VERIFYMSG(m, e)                                                                 \
    ((e) ? TRUE : (ndkwdk_assert_failed(#e, (m), __FILE__, __LINE__), FALSE))
#if DBG
#define ASSERT(e) NT_ASSERT(e)
#define ASSERTMSG(m, e) NT_ASSERTMSG(m, e)
#else
#define ASSERT(e) ((void)0)
#define ASSERTMSG(m, e) ((void)0)
#endif

#define PAGED_CODE() ndkwdk_paged_code(__FILE__, __LINE__, __func__)
#define PAGED_CODE_LOCKED() ((void)0)
#define PAGED_ASSERT(e) NT_ASSERT(e)

#ifdef __cplusplus
}
#endif

#endif /* NDKWDK_DBG_H */
