/* ndk_status_name: readable names for the NTSTATUS values libndk returns,
 * made from the one list of them (ndk/ndkstatus.h). */
#include <stdio.h>

#include <ndk/ndk.h>
#include <ndk/ndkstatus.h>

/* Every STATUS_* macro of ndkpi.h and ndk.h is the number its entry in the
 * list gives: a macro that drifted from the list fails the build. */
#define STATUS_MATCHES_LIST(name, value)                                                       \
    _Static_assert(name == (NTSTATUS)(value), #name " differs from ndk/ndkstatus.h");
NDK_STATUS_LIST(STATUS_MATCHES_LIST)
#undef STATUS_MATCHES_LIST

#define STATUS_ENTRY(name, value) {(NTSTATUS)(value), #name},
static const struct {
    NTSTATUS status;
    const char *name;
} names[] = {NDK_STATUS_LIST(STATUS_ENTRY)};
#undef STATUS_ENTRY

NDK_API const char *ndk_status_name(NTSTATUS Status)
{
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].status == Status)
            return names[i].name;
    static __thread char buf[16];
    snprintf(buf, sizeof buf, "0x%08X", (unsigned)Status);
    return buf;
}
