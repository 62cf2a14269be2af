/* Status names (ndk_status_name, ndk/ndkstatus.h): every NTSTATUS value
 * NDKPI documents has its name and the number Windows' ntstatus.h / ndis.h
 * give it (the NDK pages name the codes without numbers), and so do the
 * two codes libndk's entry points add; every entry of the list is named by
 * its own name; an unknown value is shown as its number. */
#include <string.h>

#include <ndk/ndk.h>
#include <ndk/ndkstatus.h>

#include "testlib.h"

/* The documented codes: the macro, the number it must have, its name. */
#define DOC(name, value) {name, (NTSTATUS)(value), #name}
static const struct {
    NTSTATUS macro, number;
    const char *name;
} documented[] = {
    DOC(STATUS_SUCCESS, 0x00000000),
    DOC(STATUS_PENDING, 0x00000103),
    DOC(STATUS_BUFFER_OVERFLOW, 0x80000005),
    DOC(STATUS_UNSUCCESSFUL, 0xC0000001),
    DOC(STATUS_ACCESS_VIOLATION, 0xC0000005),
    DOC(STATUS_INVALID_PARAMETER, 0xC000000D),
    DOC(STATUS_INVALID_DEVICE_REQUEST, 0xC0000010),
    DOC(STATUS_NO_MEMORY, 0xC0000017),
    DOC(STATUS_BUFFER_TOO_SMALL, 0xC0000023),
    DOC(STATUS_INVALID_PARAMETER_MIX, 0xC0000030),
    DOC(STATUS_SHARING_VIOLATION, 0xC0000043),
    DOC(STATUS_INSUFFICIENT_RESOURCES, 0xC000009A),
    DOC(STATUS_IO_TIMEOUT, 0xC00000B5),
    DOC(STATUS_NOT_SUPPORTED, 0xC00000BB),
    DOC(STATUS_INTERNAL_ERROR, 0xC00000E5),
    DOC(STATUS_CANCELLED, 0xC0000120),
    DOC(STATUS_REMOTE_RESOURCES, 0xC000013D),
    DOC(STATUS_INVALID_ADDRESS, 0xC0000141),
    DOC(STATUS_INVALID_DEVICE_STATE, 0xC0000184),
    DOC(STATUS_INVALID_BUFFER_SIZE, 0xC0000206),
    DOC(STATUS_TOO_MANY_ADDRESSES, 0xC0000209),
    DOC(STATUS_ADDRESS_ALREADY_EXISTS, 0xC000020A),
    DOC(STATUS_CONNECTION_DISCONNECTED, 0xC000020C),
    DOC(STATUS_CONNECTION_RESET, 0xC000020D),
    DOC(STATUS_CONNECTION_REFUSED, 0xC0000236),
    DOC(STATUS_CONNECTION_INVALID, 0xC000023A),
    DOC(STATUS_NETWORK_UNREACHABLE, 0xC000023C),
    DOC(STATUS_HOST_UNREACHABLE, 0xC000023D),
    DOC(STATUS_REQUEST_ABORTED, 0xC0000240),
    DOC(STATUS_CONNECTION_ABORTED, 0xC0000241),
    DOC(STATUS_IMPLEMENTATION_LIMIT, 0xC000042B),
    DOC(NDIS_STATUS_BAD_VERSION, 0xC0010004),
    DOC(NDIS_STATUS_ADAPTER_NOT_READY, 0xC0010011),
    /* ndk.h's own: the platform entry points' and the MPA Reply's. */
    DOC(STATUS_NOT_FOUND, 0xC0000225),
    DOC(STATUS_INVALID_NETWORK_RESPONSE, 0xC00000C3),
};

static void documented_codes_have_their_numbers_and_names(void)
{
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++) {
        CHECK_EQ(documented[i].macro, documented[i].number);
        CHECK(strcmp(ndk_status_name(documented[i].number), documented[i].name) == 0);
    }
}

/* The NDIS aliases share a number with a STATUS_ code, whose name they get. */
static void ndis_aliases(void)
{
    CHECK_EQ(NDIS_STATUS_SUCCESS, (NTSTATUS)0x00000000);
    CHECK_EQ(NDIS_STATUS_RESOURCES, (NTSTATUS)0xC000009A);
    CHECK(strcmp(ndk_status_name(NDIS_STATUS_RESOURCES), "STATUS_INSUFFICIENT_RESOURCES") == 0);
}

/* The list holds each documented code once and nothing else. */
static void list_is_the_documented_set(void)
{
#define COUNT(name, value) +1
    const size_t entries = 0 NDK_STATUS_LIST(COUNT);
#undef COUNT
    CHECK_EQ(entries, sizeof documented / sizeof documented[0]);
#define NAMED(name, value) CHECK(strcmp(ndk_status_name((NTSTATUS)(value)), #name) == 0);
    NDK_STATUS_LIST(NAMED)
#undef NAMED
}

static void unknown_value_is_its_number(void)
{
    CHECK(strcmp(ndk_status_name((NTSTATUS)0xC0001234), "0xC0001234") == 0);
}

int main(void)
{
    RUN(documented_codes_have_their_numbers_and_names);
    RUN(ndis_aliases);
    RUN(list_is_the_documented_set);
    RUN(unknown_value_is_its_number);
    return tl_finish();
}
