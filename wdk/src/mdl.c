/* MDLs. The page-frame array after an MDL holds virtual page numbers
 * (address >> PAGE_SHIFT): libndk's logical addresses are the buffers'
 * virtual addresses, so a PFN shifted back left is an address libndk
 * accepts in a fast-register page list (docs/porting.md). */
#include <string.h>

#include "kit.h"

SIZE_T MmSizeOfMdl(PVOID Base, SIZE_T Length)
{
    return sizeof(MDL) + ADDRESS_AND_SIZE_TO_SPAN_PAGES(Base, Length) * sizeof(PFN_NUMBER);
}

static void fill_pfns(PMDL Mdl)
{
    PPFN_NUMBER pfn = MmGetMdlPfnArray(Mdl);
    ULONG_PTR first = (ULONG_PTR)Mdl->StartVa >> PAGE_SHIFT;
    SIZE_T pages = ADDRESS_AND_SIZE_TO_SPAN_PAGES(MmGetMdlVirtualAddress(Mdl), Mdl->ByteCount);
    for (SIZE_T i = 0; i < pages; i++)
        pfn[i] = first + i;
}

PMDL IoAllocateMdl(PVOID VirtualAddress, ULONG Length, BOOLEAN SecondaryBuffer,
                   BOOLEAN ChargeQuota, PIRP Irp)
{
    (void)SecondaryBuffer, (void)ChargeQuota;
    kit_touch();
    if (Irp != NULL || Length == 0)
        return NULL; /* no IRPs in the kit; a zero-length MDL is refused on Windows too */
    SIZE_T size = MmSizeOfMdl(VirtualAddress, Length);
    if (size > 0x7FFF)
        return NULL; /* Size is a CSHORT */
    /* Tracked as pool with tag 'Mdl ' so a leaked MDL is reported. */
    PMDL m = kit_pool_alloc(false, size, 0x206C644D, true, KIT_CALLER);
    if (!m)
        return NULL;
    MmInitializeMdl(m, VirtualAddress, Length);
    m->MdlFlags = MDL_ALLOCATED_FIXED_SIZE;
    return m;
}

VOID IoFreeMdl(PMDL Mdl)
{
    kit_pool_free(Mdl, 0, false, KIT_CALLER);
}

VOID IoBuildPartialMdl(PMDL SourceMdl, PMDL TargetMdl, PVOID VirtualAddress, ULONG Length)
{
    char *src = MmGetMdlVirtualAddress(SourceMdl);
    if ((char *)VirtualAddress < src ||
        (char *)VirtualAddress + Length > src + SourceMdl->ByteCount)
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0, (ULONG_PTR)SourceMdl,
                     (ULONG_PTR)VirtualAddress, Length, KIT_CALLER,
                     "IoBuildPartialMdl outside its source MDL");
    if (Length == 0)
        Length = SourceMdl->ByteCount - (ULONG)((char *)VirtualAddress - src);
    CSHORT keep = TargetMdl->MdlFlags & MDL_ALLOCATED_FIXED_SIZE;
    MmInitializeMdl(TargetMdl, VirtualAddress, Length);
    TargetMdl->MdlFlags = keep | MDL_PARTIAL |
                          (SourceMdl->MdlFlags & (MDL_PAGES_LOCKED | MDL_SOURCE_IS_NONPAGED_POOL));
    if (TargetMdl->MdlFlags & MDL_SOURCE_IS_NONPAGED_POOL)
        TargetMdl->MappedSystemVa = VirtualAddress;
    fill_pfns(TargetMdl);
}

VOID MmBuildMdlForNonPagedPool(PMDL MemoryDescriptorList)
{
    kit_touch();
    fill_pfns(MemoryDescriptorList);
    MemoryDescriptorList->MdlFlags |= MDL_SOURCE_IS_NONPAGED_POOL;
    MemoryDescriptorList->MappedSystemVa = MmGetMdlVirtualAddress(MemoryDescriptorList);
}

VOID MmProbeAndLockPages(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode,
                         LOCK_OPERATION Operation)
{
    (void)AccessMode;
    kit_touch();
    kit_require_irql(DISPATCH_LEVEL, "MmProbeAndLockPages", KIT_CALLER);
    /* Memory is resident: locking records the pages and the operation. */
    fill_pfns(MemoryDescriptorList);
    MemoryDescriptorList->MdlFlags |= MDL_PAGES_LOCKED;
    if (Operation != IoReadAccess)
        MemoryDescriptorList->MdlFlags |= MDL_WRITE_OPERATION;
}

VOID MmUnlockPages(PMDL MemoryDescriptorList)
{
    kit_touch();
    if (!(MemoryDescriptorList->MdlFlags & MDL_PAGES_LOCKED))
        kit_bugcheck(BC_DRIVER_VERIFIER_DETECTED_VIOLATION, 0x7C, (ULONG_PTR)MemoryDescriptorList,
                     0, 0, KIT_CALLER, "MmUnlockPages of an MDL whose pages are not locked");
    MemoryDescriptorList->MdlFlags &=
        ~(MDL_PAGES_LOCKED | MDL_WRITE_OPERATION | MDL_MAPPED_TO_SYSTEM_VA);
}

PVOID MmMapLockedPagesSpecifyCache(PMDL MemoryDescriptorList, KPROCESSOR_MODE AccessMode,
                                   MEMORY_CACHING_TYPE CacheType, PVOID RequestedAddress,
                                   ULONG BugCheckOnFailure, ULONG Priority)
{
    (void)AccessMode, (void)CacheType, (void)RequestedAddress, (void)BugCheckOnFailure,
        (void)Priority;
    kit_touch();
    MemoryDescriptorList->MappedSystemVa = MmGetMdlVirtualAddress(MemoryDescriptorList);
    MemoryDescriptorList->MdlFlags |= MDL_MAPPED_TO_SYSTEM_VA;
    return MemoryDescriptorList->MappedSystemVa;
}

VOID MmUnmapLockedPages(PVOID BaseAddress, PMDL MemoryDescriptorList)
{
    (void)BaseAddress;
    MemoryDescriptorList->MdlFlags &= ~MDL_MAPPED_TO_SYSTEM_VA;
}

PHYSICAL_ADDRESS MmGetPhysicalAddress(PVOID BaseAddress)
{
    PHYSICAL_ADDRESS pa;
    pa.QuadPart = (LONGLONG)(uintptr_t)BaseAddress; /* the logical address libndk uses */
    return pa;
}
