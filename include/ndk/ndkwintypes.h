/*
 * ndkwintypes.h - the Windows scalar types that NDKPI is written in, with
 * the sizes and signedness they have on Windows x64. One definition, shared
 * by ndkinfo.h (which consumers reach through ndkpi.h and ndk.h) and by the
 * WDK kit's ntdef.h, which adds the rest of the Windows base types.
 *
 * NDKPI was designed for LLP64 Windows, where `long` is 32 bits; Linux is
 * LP64. Every type below is therefore mapped to a fixed-width C type so that
 * structure layouts match the x64 Windows ones.
 *
 * Guard: a platform header that defines these names first defines
 * NDK_WINTYPES_DEFINED, and this block is skipped. It must then define every
 * name of the block (the scalar types, LARGE_INTEGER, PHYSICAL_ADDRESS,
 * GUID, KAFFINITY, GROUP_AFFINITY, SOCKADDR, PSOCKADDR, VOID, CONST, TRUE,
 * FALSE and NDK_ANON_STRUCT). The assertions at the end of ndkinfo.h check,
 * whoever defined them, that each type has the size and signedness it has
 * on Windows x64.
 */
#ifndef NDK_WINTYPES_DEFINED
#define NDK_WINTYPES_DEFINED

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* ISO C++ has no anonymous structs; GCC/Clang accept them as an extension. */
#if defined(__cplusplus) && defined(__GNUC__)
#define NDK_ANON_STRUCT __extension__
#else
#define NDK_ANON_STRUCT
#endif

#ifndef VOID
#define VOID void
#endif
#ifndef CONST
#define CONST const
#endif
#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif

/* Never C `long`: it is 64 bits on LP64 Linux but 32 bits on Windows. */
typedef uint32_t ULONG;
typedef int32_t LONG;
typedef int32_t NTSTATUS;
typedef uint16_t USHORT;
typedef uint8_t UCHAR;
typedef char CHAR;
typedef uint8_t BOOLEAN; /* Windows: UCHAR; only TRUE (1) and FALSE (0) */
typedef uint32_t UINT32;
typedef uint64_t UINT64;
typedef int64_t LONGLONG;
typedef size_t SIZE_T;       /* pointer-sized, 8 bytes on x64 */
typedef uintptr_t ULONG_PTR; /* pointer-sized, despite the name */
typedef void *PVOID;

/* LARGE_INTEGER: a 64-bit signed value that Windows code also reaches as two
 * 32-bit halves (x.LowPart, x.u.LowPart) or as a whole (x.QuadPart). */
typedef union _LARGE_INTEGER {
    NDK_ANON_STRUCT struct {
        ULONG LowPart;
        LONG HighPart;
    };
    struct {
        ULONG LowPart;
        LONG HighPart;
    } u;
    LONGLONG QuadPart;
} LARGE_INTEGER;
typedef LARGE_INTEGER PHYSICAL_ADDRESS;

typedef struct _GUID {
    uint32_t Data1;
    uint16_t Data2;
    uint16_t Data3;
    uint8_t Data4[8];
} GUID;

typedef ULONG_PTR KAFFINITY;

/* A processor group and a mask of processors within it (CQ/SRQ affinity). */
typedef struct _GROUP_AFFINITY {
    KAFFINITY Mask;
    USHORT Group;
    USHORT Reserved[3];
} GROUP_AFFINITY;

/* NDKPI passes plain socket addresses; on Linux they are the native ones
 * (AF_INET 2, AF_INET6 10; Winsock's AF_INET6 is 23). */
typedef struct sockaddr SOCKADDR;
typedef struct sockaddr *PSOCKADDR;

#endif /* NDK_WINTYPES_DEFINED */
