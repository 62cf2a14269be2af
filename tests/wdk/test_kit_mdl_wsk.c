/* MDLs (layout, page-frame array, mapping, partial MDLs), netioapi's
 * interface conversions on lo (index 1), and WSK with its NDK extension:
 * an adapter opened by interface index. */
#include <netioapi.h>
#include <wskndk.h>

#include "kittest.h"

#define TAG 'tseT'

static void test_mdl(void)
{
    SIZE_T len = 3 * PAGE_SIZE;
    UCHAR *buf = ExAllocatePool2(POOL_FLAG_NON_PAGED, len + 100, TAG);
    REQUIRE(buf != NULL);
    UCHAR *va = buf + 100;
    PMDL m = IoAllocateMdl(va, (ULONG)len, FALSE, FALSE, NULL);
    REQUIRE(m != NULL);
    CHECK(m->StartVa == PAGE_ALIGN(va));
    CHECK_EQ(m->ByteOffset, BYTE_OFFSET(va));
    CHECK_EQ(m->ByteCount, len);
    CHECK(MmGetMdlVirtualAddress(m) == va);
    CHECK_EQ(m->Size, MmSizeOfMdl(va, len));
    CHECK_EQ(MmSizeOfMdl(va, len), sizeof(MDL) + ADDRESS_AND_SIZE_TO_SPAN_PAGES(va, len) * sizeof(PFN_NUMBER));
    MmBuildMdlForNonPagedPool(m);
    CHECK(m->MdlFlags & MDL_SOURCE_IS_NONPAGED_POOL);
    CHECK(MmGetSystemAddressForMdlSafe(m, NormalPagePriority) == va);
    /* Page-frame numbers are virtual page numbers here. */
    PPFN_NUMBER pfn = MmGetMdlPfnArray(m);
    CHECK_EQ(pfn[0], (ULONG_PTR)va >> PAGE_SHIFT);
    CHECK_EQ(pfn[1], ((ULONG_PTR)va >> PAGE_SHIFT) + 1);
    CHECK_EQ(MmGetPhysicalAddress(va).QuadPart, (LONGLONG)(ULONG_PTR)va);
    /* A partial MDL over the second page. */
    PMDL part = IoAllocateMdl(va + PAGE_SIZE, PAGE_SIZE, FALSE, FALSE, NULL);
    REQUIRE(part != NULL);
    IoBuildPartialMdl(m, part, va + PAGE_SIZE, PAGE_SIZE);
    CHECK(part->MdlFlags & MDL_PARTIAL);
    CHECK(MmGetMdlVirtualAddress(part) == va + PAGE_SIZE);
    IoFreeMdl(part);
    /* Probe and lock, then map on first use. */
    PMDL p2 = IoAllocateMdl(va, 64, FALSE, FALSE, NULL);
    REQUIRE(p2 != NULL);
    MmProbeAndLockPages(p2, KernelMode, IoWriteAccess);
    CHECK(p2->MdlFlags & MDL_PAGES_LOCKED);
    CHECK(!(p2->MdlFlags & MDL_MAPPED_TO_SYSTEM_VA));
    CHECK(MmGetSystemAddressForMdlSafe(p2, NormalPagePriority) == va);
    CHECK(p2->MdlFlags & MDL_MAPPED_TO_SYSTEM_VA);
    MmUnlockPages(p2);
    IoFreeMdl(p2);
    CHECK(IoAllocateMdl(va, 0, FALSE, FALSE, NULL) == NULL);
    IoFreeMdl(m);
    ExFreePoolWithTag(buf, TAG);
}

static void test_netioapi(void)
{
    NET_LUID luid;
    NET_IFINDEX index = 0;
    char name[32];
    WCHAR alias[32];
    MIB_IF_ROW2 row;
    CHECK_EQ(ConvertInterfaceIndexToLuid(1, &luid), STATUS_SUCCESS);
    CHECK_EQ(luid.Info.IfType, IF_TYPE_SOFTWARE_LOOPBACK);
    CHECK_EQ(luid.Info.NetLuidIndex, 1);
    CHECK_EQ(ConvertInterfaceLuidToIndex(&luid, &index), STATUS_SUCCESS);
    CHECK_EQ(index, 1);
    CHECK_EQ(ConvertInterfaceLuidToNameA(&luid, name, sizeof name), STATUS_SUCCESS);
    CHECK(strcmp(name, "lo") == 0);
    CHECK_EQ(ConvertInterfaceLuidToNameA(&luid, name, 2), STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(ConvertInterfaceLuidToAlias(&luid, alias, RTL_NUMBER_OF(alias)), STATUS_SUCCESS);
    CHECK(alias[0] == 'l' && alias[1] == 'o' && alias[2] == 0);
    CHECK_EQ(ConvertInterfaceNameToLuidA("lo", &luid), STATUS_SUCCESS);
    CHECK_EQ(luid.Info.NetLuidIndex, 1);
    CHECK_EQ(ConvertInterfaceAliasToLuid(L"lo", &luid), STATUS_SUCCESS);
    RtlZeroMemory(&row, sizeof row);
    row.InterfaceIndex = 1;
    CHECK_EQ(GetIfEntry2(&row), STATUS_SUCCESS);
    CHECK_EQ(row.Type, IF_TYPE_SOFTWARE_LOOPBACK);
    CHECK_EQ(row.InterfaceLuid.Value, luid.Value);
    CHECK(row.Mtu > 0);
    CHECK_EQ(row.AccessType, NET_IF_ACCESS_LOOPBACK);
    CHECK(row.Alias[0] == 'l');
    CHECK_EQ(ConvertInterfaceIndexToLuid(0, &luid), STATUS_NOT_FOUND);
    CHECK_EQ(ConvertInterfaceNameToLuidA("no-such-if0", &luid), STATUS_NOT_FOUND);
    RtlZeroMemory(&row, sizeof row);
    row.InterfaceIndex = 0x7FFFFFF0;
    CHECK_EQ(GetIfEntry2(&row), STATUS_NOT_FOUND);
}

static const WSK_CLIENT_DISPATCH app = {MAKE_WSK_VERSION(1, 0), 0, NULL};

static void test_wsk_ndk(void)
{
    WSK_CLIENT_NPI npi = {NULL, &app};
    WSK_REGISTRATION reg;
    WSK_PROVIDER_NPI prov;
    WSK_PROVIDER_NDK_DISPATCH ndk;
    SIZE_T got = 0;
    NDK_ADAPTER *ad = NULL;
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    NDK_VERSION v21 = {2, 1}, v9 = {9, 0};

    REQUIRE(WskRegister(&npi, &reg) == STATUS_SUCCESS);
    REQUIRE(WskCaptureProviderNPI(&reg, WSK_INFINITE_WAIT, &prov) == STATUS_SUCCESS);
    CHECK_EQ(WSK_MAJOR_VERSION(prov.Dispatch->Version), 1);
    /* Only the NDK extension; no IRPs; the whole table or nothing. */
    CHECK_EQ(prov.Dispatch->WskControlClient(prov.Client, 2, 0, NULL, 0, NULL, NULL, NULL),
             STATUS_NOT_SUPPORTED);
    CHECK_EQ(prov.Dispatch->WskControlClient(prov.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0,
                                             NULL, sizeof(PVOID), &ndk, &got, NULL),
             STATUS_INVALID_PARAMETER);
    CHECK_EQ(prov.Dispatch->WskControlClient(prov.Client, WSKNDK_GET_WSK_PROVIDER_NDK_DISPATCH, 0,
                                             NULL, sizeof ndk, &ndk, &got, NULL),
             STATUS_SUCCESS);
    CHECK_EQ(got, sizeof ndk);
    CHECK_EQ(prov.Dispatch->WskSocket(prov.Client, AF_INET, 1, 6, 0, NULL, NULL, NULL, NULL, NULL, NULL),
             STATUS_NOT_SUPPORTED);
    /* Interface index 1 is lo. */
    CHECK_EQ(ndk.WskOpenNdkAdapter(prov.Client, v21, 0, &ad), STATUS_NOT_FOUND);
    CHECK_EQ(ndk.WskOpenNdkAdapter(prov.Client, v9, 1, &ad), NDIS_STATUS_BAD_VERSION);
    REQUIRE(ndk.WskOpenNdkAdapter(prov.Client, v21, 1, &ad) == STATUS_SUCCESS);
    CHECK_EQ(ad->Dispatch->NdkQueryAdapterInfo(ad, &info, &size), STATUS_SUCCESS);
    CHECK_EQ(info.Version.Major, 2);
    CHECK_EQ(info.RdmaTechnology, NdkiWarp);
    ndk.WskCloseNdkAdapter(prov.Client, ad);
    WskReleaseProviderNPI(&reg);
    WskDeregister(&reg);
    /* Nothing left: no adapter, no registration. */
    CHECK_EQ(ndkwdk_report_ndk(stderr), 0);
}

int main(void)
{
    kt_start();
    RUN(test_mdl);
    RUN(test_netioapi);
    RUN(test_wsk_ndk);
    return tl_finish();
}
