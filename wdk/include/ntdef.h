/*
 * ntdef.h (libndk WDK kit) - the Windows base types and macros of kernel
 * code, with the sizes and signedness they have on Windows x64.
 *
 * Windows is LLP64 (long is 32 bits), Linux is LP64: every type is mapped to
 * a fixed-width C type, never to C long. The types NDKPI itself uses come
 * from libndk's ndk/ndkwintypes.h, the one definition both share, so this
 * header and libndk's may be included in either order; ndkinfo.h checks the
 * sizes and signedness.
 */
#ifndef NDKWDK_NTDEF_H
#define NDKWDK_NTDEF_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndkwdk/msvc.h>
/* The types NDKPI is written in: one definition, shared with libndk. */
#include <ndk/ndkwintypes.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the rest of the scalar types ---- */
typedef int16_t SHORT;
typedef int32_t INT;
typedef uint32_t UINT;
typedef int8_t INT8;
typedef uint8_t UINT8;
typedef int16_t INT16;
typedef uint16_t UINT16;
typedef int32_t INT32;
typedef int64_t INT64;
typedef int32_t LONG32;
typedef uint32_t ULONG32;
typedef int64_t LONG64;
typedef uint64_t ULONG64;
typedef uint64_t ULONGLONG;
typedef uint64_t DWORD64;
typedef uint32_t DWORD;
typedef uint16_t WORD;
typedef uint8_t BYTE;
typedef intptr_t LONG_PTR;
typedef intptr_t INT_PTR;
typedef uintptr_t UINT_PTR;
typedef uintptr_t DWORD_PTR;
typedef intptr_t SSIZE_T;
typedef int BOOL;
typedef ULONG LOGICAL;
typedef int16_t CSHORT;
typedef char CCHAR;
typedef ULONG ACCESS_MASK;
typedef ACCESS_MASK *PACCESS_MASK;
typedef LONG KPRIORITY;
typedef void *HANDLE;
typedef HANDLE *PHANDLE;

/* WCHAR is 16 bits, so L"..." needs -fshort-wchar (in the pkg-config flags). */
typedef uint16_t WCHAR;
#ifdef __cplusplus
static_assert(sizeof(L'x') == 2, "compile with $(pkg-config --cflags libndk-wdk): -fshort-wchar");
#else
_Static_assert(sizeof(L'x') == 2, "compile with $(pkg-config --cflags libndk-wdk): -fshort-wchar");
#endif

typedef VOID *LPVOID;
typedef CONST VOID *PCVOID;
typedef CONST VOID *LPCVOID;
typedef CHAR *PCHAR, *PCH, *PSTR, *LPSTR, *PSZ, *NPSTR;
typedef CONST CHAR *PCCH, *PCSTR, *LPCSTR, *PCSZ;
typedef UCHAR *PUCHAR;
typedef CONST UCHAR *PCUCHAR;
typedef WCHAR *PWCHAR, *PWCH, *PWSTR, *LPWSTR, *NWPSTR;
typedef CONST WCHAR *PCWCH, *PCWSTR, *LPCWSTR;
typedef SHORT *PSHORT;
typedef USHORT *PUSHORT;
typedef INT *PINT;
typedef UINT *PUINT;
typedef LONG *PLONG;
typedef ULONG *PULONG;
typedef LONG64 *PLONG64;
typedef ULONG64 *PULONG64;
typedef LONGLONG *PLONGLONG;
typedef ULONGLONG *PULONGLONG;
typedef DWORD *PDWORD, *LPDWORD;
typedef BOOLEAN *PBOOLEAN;
typedef SIZE_T *PSIZE_T;
typedef ULONG_PTR *PULONG_PTR;
typedef LONG_PTR *PLONG_PTR;
typedef NTSTATUS *PNTSTATUS;
typedef LARGE_INTEGER *PLARGE_INTEGER;
typedef PHYSICAL_ADDRESS *PPHYSICAL_ADDRESS;
typedef GUID *PGUID, *LPGUID;
typedef CONST GUID *LPCGUID;
typedef KAFFINITY *PKAFFINITY;
typedef GROUP_AFFINITY *PGROUP_AFFINITY;

typedef union _ULARGE_INTEGER {
    NDK_ANON_STRUCT struct {
        ULONG LowPart;
        ULONG HighPart;
    };
    struct {
        ULONG LowPart;
        ULONG HighPart;
    } u;
    ULONGLONG QuadPart;
} ULARGE_INTEGER, *PULARGE_INTEGER;

typedef struct _LUID {
    ULONG LowPart;
    LONG HighPart;
} LUID, *PLUID;

/* ---- limits ---- */
#define MINCHAR 0x80
#define MAXCHAR 0x7f
#define MINSHORT 0x8000
#define MAXSHORT 0x7fff
#define MINLONG ((LONG)0x80000000)
#define MAXLONG 0x7fffffff
#define MAXUCHAR 0xff
#define MAXUSHORT 0xffff
#ifndef MAXULONG
#define MAXULONG 0xffffffffu
#endif
#define MAXLONGLONG ((LONGLONG)0x7fffffffffffffffLL)
#define MAXULONGLONG ((ULONGLONG)~(ULONGLONG)0)
#define MAXULONG_PTR (~(ULONG_PTR)0)
#define MAXLONG_PTR ((LONG_PTR)(MAXULONG_PTR >> 1))
#define MAXSIZE_T ((SIZE_T)~(SIZE_T)0)
#define MAXSSIZE_T ((SSIZE_T)(MAXSIZE_T >> 1))
#define MAXUINT32 ((UINT32)~(UINT32)0)
#define MAXUINT64 ((UINT64)~(UINT64)0)
#define MAXINT32 ((INT32)(MAXUINT32 >> 1))
#define MAXUINT16 ((UINT16)~(UINT16)0)
#define MAXUINT8 ((UINT8)~(UINT8)0)
#define MAXDWORD 0xffffffffu

/* ---- statuses (NT_SUCCESS: ndk/ndkstatus.h, through ntstatus.h) ---- */
#define NT_INFORMATION(s) ((((ULONG)(s)) >> 30) == 1)
#define NT_WARNING(s) ((((ULONG)(s)) >> 30) == 2)
#define NT_ERROR(s) ((((ULONG)(s)) >> 30) == 3)

/* ---- structure helpers ---- */
#define FIELD_OFFSET(type, field) ((LONG)offsetof(type, field))
#define UFIELD_OFFSET(type, field) ((ULONG)offsetof(type, field))
#define RTL_FIELD_SIZE(type, field) (sizeof(((type *)0)->field))
#define RTL_SIZEOF_THROUGH_FIELD(type, field)                                              \
    (FIELD_OFFSET(type, field) + RTL_FIELD_SIZE(type, field))
#define RTL_CONTAINS_FIELD(Struct, Size, Field)                                            \
    ((((PCHAR)(&(Struct)->Field)) + sizeof((Struct)->Field)) <= (((PCHAR)(Struct)) + (Size)))
#define CONTAINING_RECORD(address, type, field)                                            \
    ((type *)((PCHAR)(address) - (ULONG_PTR)offsetof(type, field)))
#define RTL_NUMBER_OF(a) (sizeof(a) / sizeof((a)[0]))
#define RTL_NUMBER_OF_V1(a) RTL_NUMBER_OF(a)
#define RTL_NUMBER_OF_V2(a) RTL_NUMBER_OF(a)
#define ARRAYSIZE(a) RTL_NUMBER_OF(a)
#define _ARRAYSIZE(a) RTL_NUMBER_OF(a)
#define RTL_NUMBER_OF_FIELD(type, field) (RTL_NUMBER_OF(RTL_FIELD_TYPE(type, field)))
#define RTL_FIELD_TYPE(type, field) (((type *)0)->field)
#define ALIGN_DOWN_BY(length, alignment) ((ULONG_PTR)(length) & ~((ULONG_PTR)(alignment) - 1))
#define ALIGN_UP_BY(length, alignment)                                                     \
    (ALIGN_DOWN_BY(((ULONG_PTR)(length) + (alignment) - 1), alignment))
#define ALIGN_DOWN_POINTER_BY(address, alignment) ((PVOID)ALIGN_DOWN_BY(address, alignment))
#define ALIGN_UP_POINTER_BY(address, alignment) ((PVOID)ALIGN_UP_BY(address, alignment))
#define ALIGN_DOWN(length, type) ALIGN_DOWN_BY(length, sizeof(type))
#define ALIGN_UP(length, type) ALIGN_UP_BY(length, sizeof(type))
#define FlagOn(_F, _SF) ((_F) & (_SF))
#define BooleanFlagOn(F, SF) ((BOOLEAN)(((F) & (SF)) != 0))
#define SetFlag(_F, _SF) ((_F) |= (_SF))
#define ClearFlag(_F, _SF) ((_F) &= ~(_SF))
#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif
#define ARGUMENT_PRESENT(ArgumentPointer) ((CHAR *)((ULONG_PTR)(ArgumentPointer)) != (CHAR *)NULL)
#define MAKELONG(a, b) ((LONG)(((WORD)(a)) | ((DWORD)((WORD)(b))) << 16))
#define LOWORD(l) ((WORD)((DWORD_PTR)(l)&0xffff))
#define HIWORD(l) ((WORD)((DWORD_PTR)(l) >> 16))
#define LOBYTE(w) ((BYTE)((DWORD_PTR)(w)&0xff))
#define HIBYTE(w) ((BYTE)((DWORD_PTR)(w) >> 8))

/* ---- counted strings ---- */
typedef struct _UNICODE_STRING {
    USHORT Length;        /* bytes, without a terminating NUL */
    USHORT MaximumLength; /* bytes of Buffer */
    PWCH Buffer;
} UNICODE_STRING, *PUNICODE_STRING;
typedef CONST UNICODE_STRING *PCUNICODE_STRING;

typedef struct _STRING {
    USHORT Length;
    USHORT MaximumLength;
    PCHAR Buffer;
} STRING, *PSTRING, ANSI_STRING, *PANSI_STRING, OEM_STRING, *POEM_STRING;
typedef CONST STRING *PCSTRING, *PCANSI_STRING, *PCOEM_STRING;

#define UNICODE_NULL ((WCHAR)0)
#define ANSI_NULL ((CHAR)0)
#define UNICODE_STRING_MAX_BYTES ((USHORT)65534)
#define UNICODE_STRING_MAX_CHARS (32767)

/* Constant strings from literals (the literal must be an array). */
#define RTL_CONSTANT_STRING(s)                                                             \
    { (USHORT)(sizeof(s) - sizeof((s)[0])), (USHORT)sizeof(s), (PVOID)(s) }
#define DECLARE_CONST_UNICODE_STRING(_var, _string)                                        \
    const WCHAR _var##_buffer[] = _string;                                                 \
    const UNICODE_STRING _var = {sizeof(_string) - sizeof(WCHAR), sizeof(_string),         \
                                 (PWCH)_var##_buffer}
#define DECLARE_GLOBAL_CONST_UNICODE_STRING(_var, _str)                                    \
    extern const DECLSPEC_SELECTANY UNICODE_STRING _var = RTL_CONSTANT_STRING(_str)
#define DECLARE_UNICODE_STRING_SIZE(_var, _size)                                           \
    WCHAR _var##_buffer[_size];                                                            \
    UNICODE_STRING _var = {0, (_size) * sizeof(WCHAR), _var##_buffer}

/* ---- doubly and singly linked lists (helpers in wdm.h) ---- */
typedef struct _LIST_ENTRY {
    struct _LIST_ENTRY *Flink;
    struct _LIST_ENTRY *Blink;
} LIST_ENTRY, *PLIST_ENTRY;

typedef struct _SINGLE_LIST_ENTRY {
    struct _SINGLE_LIST_ENTRY *Next;
} SINGLE_LIST_ENTRY, *PSINGLE_LIST_ENTRY;

/* ---- object attributes (for PsCreateSystemThread and ZwXxx) ---- */
#define OBJ_INHERIT 0x00000002L
#define OBJ_PERMANENT 0x00000010L
#define OBJ_EXCLUSIVE 0x00000020L
#define OBJ_CASE_INSENSITIVE 0x00000040L
#define OBJ_OPENIF 0x00000080L
#define OBJ_OPENLINK 0x00000100L
#define OBJ_KERNEL_HANDLE 0x00000200L
#define OBJ_FORCE_ACCESS_CHECK 0x00000400L

typedef struct _OBJECT_ATTRIBUTES {
    ULONG Length;
    HANDLE RootDirectory;
    PUNICODE_STRING ObjectName;
    ULONG Attributes;
    PVOID SecurityDescriptor;
    PVOID SecurityQualityOfService;
} OBJECT_ATTRIBUTES, *POBJECT_ATTRIBUTES;
typedef CONST OBJECT_ATTRIBUTES *PCOBJECT_ATTRIBUTES;

#define InitializeObjectAttributes(p, n, a, r, s)                                          \
    do {                                                                                   \
        (p)->Length = sizeof(OBJECT_ATTRIBUTES);                                           \
        (p)->RootDirectory = (r);                                                          \
        (p)->Attributes = (a);                                                             \
        (p)->ObjectName = (n);                                                             \
        (p)->SecurityDescriptor = (s);                                                     \
        (p)->SecurityQualityOfService = NULL;                                              \
    } while (0)

typedef struct _CLIENT_ID {
    HANDLE UniqueProcess;
    HANDLE UniqueThread;
} CLIENT_ID, *PCLIENT_ID;

typedef enum _MODE { KernelMode, UserMode, MaximumMode } MODE;
typedef CCHAR KPROCESSOR_MODE;

typedef enum _EVENT_TYPE { NotificationEvent, SynchronizationEvent } EVENT_TYPE;
typedef enum _TIMER_TYPE { NotificationTimer, SynchronizationTimer } TIMER_TYPE;
typedef enum _WAIT_TYPE { WaitAll, WaitAny, WaitNotification, WaitDequeue, WaitDpc } WAIT_TYPE;

#ifdef __cplusplus
}
#endif

#include <ntstatus.h>

#endif /* NDKWDK_NTDEF_H */
