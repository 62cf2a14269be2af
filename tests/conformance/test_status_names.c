/* ndk_status_name: the name of a status, and an unknown one as its value. */
#include "ndktest.h"

NT_CASE(status_names)
{
    CHECK(strcmp(ndk_status_name(STATUS_CONNECTION_REFUSED), "STATUS_CONNECTION_REFUSED") == 0);
    CHECK(strcmp(ndk_status_name(STATUS_SUCCESS), "STATUS_SUCCESS") == 0);
    CHECK(strcmp(ndk_status_name(STATUS_PENDING), "STATUS_PENDING") == 0);
    CHECK(strcmp(ndk_status_name(NDIS_STATUS_BAD_VERSION), "NDIS_STATUS_BAD_VERSION") == 0);
    CHECK(strcmp(ndk_status_name((NTSTATUS)0xC0FFEE01), "0xC0FFEE01") == 0 ||
          strcmp(ndk_status_name((NTSTATUS)0xC0FFEE01), "0xc0ffee01") == 0);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(status_names);
    return tl_finish();
}
