/*
 * ndkmdl.h - the memory descriptor list (MDL) that NdkRegisterMr and
 * NdkBuildLAM take, and its accessors.
 */
#ifndef NDK_NDKMDL_H
#define NDK_NDKMDL_H

#include <stdint.h>

#include <ndk/ndkwintypes.h>

/*
 * A memory descriptor list, laid out as the Windows x64 MDL (wdm.h): the
 * kit's WDK headers and libndk share one layout, because libndk is compiled
 * once and reads the MDLs that consumers build.
 *
 * libndk reads four members, through the accessors below: Next (further
 * MDLs of a chain), StartVa and ByteOffset (MmGetMdlVirtualAddress: the
 * buffer's first byte is StartVa + ByteOffset) and ByteCount
 * (MmGetMdlByteCount). Windows keeps StartVa page-aligned and ByteOffset
 * below PAGE_SIZE; libndk accepts any StartVa, so a Linux consumer may set
 * StartVa to the buffer and leave ByteOffset 0. The buffer must stay mapped
 * (and, for RDMA, in place) while it is registered; only its virtual range
 * is used, never the pages behind it. Size, MdlFlags, Process,
 * MappedSystemVa and the page-frame array that follows the MDL on Windows
 * are the platform's: libndk never reads them.
 *
 * One definition, shared by ndkpi.h and the WDK kit's wdm.h (ndkwdk/io.h),
 * which adds the rest of the MDL routines. Guard: a platform header that
 * defines MDL first defines NDK_MDL_DEFINED, and this header then uses its
 * MDL; the layout assertions at the end of ndkpi.h still check the members
 * libndk reads.
 */
#ifndef NDK_MDL_DEFINED
#define NDK_MDL_DEFINED
typedef struct _MDL {
    struct _MDL *Next;
    int16_t Size;     /* CSHORT: bytes of the MDL and its page-frame array */
    int16_t MdlFlags; /* CSHORT */
    USHORT AllocationProcessorNumber;
    USHORT Reserved;
    struct _EPROCESS *Process;
    PVOID MappedSystemVa;
    PVOID StartVa;    /* start of the buffer (Windows: its first page) */
    ULONG ByteCount;  /* bytes described, starting at StartVa + ByteOffset */
    ULONG ByteOffset; /* offset of the first byte from StartVa */
} MDL, *PMDL;
#endif

/* Macros, as on Windows. MmGetMdlVirtualAddress is the buffer's first
 * byte: the base VA of a registration. */
#ifndef MmGetMdlVirtualAddress
#define MmGetMdlVirtualAddress(Mdl) ((PVOID)((char *)((Mdl)->StartVa) + (Mdl)->ByteOffset))
#endif
#ifndef MmGetMdlByteCount
#define MmGetMdlByteCount(Mdl) ((Mdl)->ByteCount)
#endif
#ifndef MmGetMdlByteOffset
#define MmGetMdlByteOffset(Mdl) ((Mdl)->ByteOffset)
#endif

#endif /* NDK_NDKMDL_H */
