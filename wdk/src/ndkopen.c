/* The kit's only contact with libndk's platform entry points (ndk.h), in a
 * file of its own: ndk.h brings glibc's socket headers, which the kit's
 * Windows address types must not meet. */
#include <net/if.h>
#include <netinet/in.h>

#include <ndk/ndk.h>

#include "kit.h"

NTSTATUS kit_ndk_open(NET_IFINDEX ifindex, NDK_VERSION version, NDK_ADAPTER **adapter)
{
    char name[IF_NAMESIZE];
    if (ifindex == 0 || !if_indextoname(ifindex, name))
        return STATUS_NOT_FOUND;
    return ndk_open_adapter(name, version, NULL, adapter);
}

void kit_ndk_close(NDK_ADAPTER *adapter)
{
    ndk_close_adapter(adapter);
}

ULONG kit_ndk_objects(NDK_ADAPTER *adapter, NDK_OBJECT_TYPE type)
{
    return ndk_adapter_object_count(adapter, type);
}

const char *kit_ndk_status_name(NTSTATUS st)
{
    return ndk_status_name(st);
}
