/*
 * ndkwdk/msvc.h - the Microsoft C extensions that Windows driver sources
 * use, mapped onto GCC/Clang so those sources compile unchanged.
 *
 * The pkg-config flags of libndk-wdk add what a header cannot do:
 * -fms-extensions (unnamed structure members of a typedef'd type),
 * -fshort-wchar (WCHAR and L"..." are 16 bits, as on Windows),
 * -Wno-multichar (pool tags such as 'kdnS' are multi-character constants,
 * with MSVC's value) and -Wno-unknown-pragmas (#pragma alloc_text,
 * code_seg, warning, prefast are accepted and ignored).
 */
#ifndef NDKWDK_MSVC_H
#define NDKWDK_MSVC_H

#include <ndkwdk/sal.h>

/* MSVC's pragmas (alloc_text, code_seg, warning, prefast) mean nothing
 * here; the flags say so too (-Wno-unknown-pragmas), but a later -Wall
 * would turn the warning back on. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-pragmas"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunknown-pragmas"
#endif

/* Calling conventions: one ABI on Linux. */
#define __stdcall
#define __cdecl
#define __fastcall
#define NTAPI
#define NTAPI_INLINE
#define WINAPI
#define CALLBACK
#define FASTCALL
#define NTSYSAPI
#define NTSYSCALLAPI
#define NTKERNELAPI
#define NTHALAPI
#define WSKAPI
#define DECLSPEC_IMPORT
#define DECLSPEC_EXPORT __attribute__((visibility("default")))

/* Inline and storage keywords. */
#define __inline inline
#define __forceinline inline __attribute__((always_inline))
#define FORCEINLINE __forceinline
#define DECLSPEC_NOINLINE __attribute__((noinline))
#define DECLSPEC_NORETURN __attribute__((noreturn))
#define DECLSPEC_ALIGN(x) __attribute__((aligned(x)))
#define DECLSPEC_CACHEALIGN DECLSPEC_ALIGN(64)
#define DECLSPEC_NOTHROW
#define DECLSPEC_SELECTANY __attribute__((weak))
#define DECLSPEC_DEPRECATED
#define DECLSPEC_GUARDNOCF
#define DECLSPEC_NOSANITIZEADDRESS
/* __declspec(x): no effect; the common uses have DECLSPEC_* spellings above. */
#define __declspec(...)
#ifndef __clang__ /* clang has __pragma with -fms-extensions */
#define __pragma(...)
#endif
#define __unaligned
#define __ptr64
#define __ptr32
#define __w64
#define __int8 char
#define __int16 short
#define __int32 int
#define __int64 long long
#define __noop(...) ((void)0)
#define __assume(e) ((void)0)
#define __analysis_assume(e) ((void)0)

#ifdef __cplusplus
#define EXTERN_C extern "C"
#define EXTERN_C_START extern "C" {
#define EXTERN_C_END }
#else
#define EXTERN_C extern
#define EXTERN_C_START
#define EXTERN_C_END
#endif

/* Parameter direction words of old headers. */
#ifndef IN
#define IN
#endif
#ifndef OUT
#define OUT
#endif
#ifndef OPTIONAL
#define OPTIONAL
#endif
#ifndef UNALIGNED
#define UNALIGNED
#endif

/*
 * Structured exception handling: the kit's routines never raise, so the
 * __try body always runs and an __except block never does; a __finally
 * block runs after the body unless the body leaves by return or goto.
 */
#define __try if (1)
#define __except(filter) else if (0)
#define __finally if (1)
#define __leave ((void)0)
#define _SEH2_TRY __try
#define EXCEPTION_EXECUTE_HANDLER 1
#define EXCEPTION_CONTINUE_SEARCH 0
#define EXCEPTION_CONTINUE_EXECUTION (-1)
#define GetExceptionCode() ((NTSTATUS)0)

/* Compile-time checks and unused parameters. */
#ifdef __cplusplus
#define C_ASSERT(e) static_assert(e, #e)
#else
#define C_ASSERT(e) _Static_assert(e, #e)
#endif
#define UNREFERENCED_PARAMETER(P) ((void)(P))
#define DBG_UNREFERENCED_PARAMETER(P) ((void)(P))
#define DBG_UNREFERENCED_LOCAL_VARIABLE(V) ((void)(V))
#define UNREFERENCED_LOCAL_VARIABLE(V) ((void)(V))

#endif /* NDKWDK_MSVC_H */
