/* Windows consumers include <ndkpi.h> and <ndkinfo.h> by their bare names. */
#include <ndkinfo.h>
#include <ndkpi.h>
#include <ndk/ndk.h>
#include <stdio.h>
int main(void)
{
    NDK_ADAPTER *ad;
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad);
    if (st != STATUS_SUCCESS) {
        printf("open: %s\n", ndk_status_name(st));
        return 1;
    }
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    st = ad->Dispatch->NdkQueryAdapterInfo(ad, &info, &size);
    ndk_close_adapter(ad);
    printf("installed libndk: NDK %u.%u, %s\n", info.Version.Major, info.Version.Minor, ndk_status_name(st));
    return st == STATUS_SUCCESS ? 0 : 1;
}
