/*
 * A consumer that defines the names Windows NDK consumers define for their
 * own wrappers (NdkOpenAdapter, NdkCloseAdapter, NdkListAdapters,
 * NdkStatusName) and, for good measure, names that libndk uses internally
 * (crc32c, ndk_log, mpa_build_read_rtr). Linked statically (libndk.a) or
 * dynamically (libndk.so) it must link without a clash and work: libndk
 * exports only ndk.h's entry points.
 */
#include <ndk/ndk.h>
#include <stdio.h>
#include <string.h>

/* The consumer's own wrappers, as a Windows driver names them. */
NTSTATUS NdkOpenAdapter(const char *Name, NDK_ADAPTER **ppAdapter);
VOID NdkCloseAdapter(NDK_ADAPTER *pAdapter);
ULONG NdkListAdapters(void);
const char *NdkStatusName(NTSTATUS Status);
/* Names of libndk internals, with other meanings here. */
unsigned crc32c(unsigned x);
void ndk_log(const char *what);
int mpa_build_read_rtr(void);

NTSTATUS NdkOpenAdapter(const char *Name, NDK_ADAPTER **ppAdapter)
{
    return ndk_open_adapter(Name, (NDK_VERSION){2, 1}, NULL, ppAdapter);
}

VOID NdkCloseAdapter(NDK_ADAPTER *pAdapter)
{
    ndk_close_adapter(pAdapter);
}

ULONG NdkListAdapters(void)
{
    ULONG n = 0;
    (void)ndk_list_adapters(NULL, &n);
    return n;
}

const char *NdkStatusName(NTSTATUS Status)
{
    return ndk_status_name(Status);
}

unsigned crc32c(unsigned x)
{
    return x + 1;
}

void ndk_log(const char *what)
{
    printf("consumer log: %s\n", what);
}

int mpa_build_read_rtr(void)
{
    return 42;
}

static void pd_created(PVOID Context, NTSTATUS Status, NDK_OBJECT_HEADER *pObject)
{
    (void)Context, (void)Status, (void)pObject;
}

int main(void)
{
    int bad = 0;
    if (crc32c(1) != 2 || mpa_build_read_rtr() != 42) {
        printf("FAIL: the consumer's own crc32c/mpa_build_read_rtr were not called\n");
        bad = 1;
    }
    if (NdkListAdapters() == 0) {
        printf("FAIL: no adapter listed\n");
        return 1;
    }
    NDK_ADAPTER *ad = NULL;
    NTSTATUS st = NdkOpenAdapter("lo", &ad);
    if (st != STATUS_SUCCESS) {
        printf("FAIL: NdkOpenAdapter(lo): %s\n", NdkStatusName(st));
        return 1;
    }
    NDK_PD *pd = NULL;
    st = ad->Dispatch->NdkCreatePd(ad, pd_created, NULL, &pd);
    if (!NT_SUCCESS(st) || ndk_adapter_object_count(ad, NdkObjectTypePd) != 1 ||
        ndk_adapter_object_count(ad, NdkObjectTypeUndefined) != 1 ||
        ndk_adapter_object_count(ad, NdkObjectTypeCq) != 0) {
        printf("FAIL: NdkCreatePd %s, %u PDs open\n", NdkStatusName(st),
               ndk_adapter_object_count(ad, NdkObjectTypePd));
        bad = 1;
    }
    NdkCloseAdapter(ad);
    ndk_log("own names linked and ran");
    if (strcmp(NdkStatusName(STATUS_CONNECTION_REFUSED), "STATUS_CONNECTION_REFUSED") != 0) {
        printf("FAIL: NdkStatusName\n");
        bad = 1;
    }
    printf("%s\n", bad ? "FAIL" : "ok: own NdkOpenAdapter, NdkCloseAdapter, NdkListAdapters, NdkStatusName");
    return bad;
}
