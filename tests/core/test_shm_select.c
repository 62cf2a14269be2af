/* ndk_shm_available: the off switches (NDK_SHM=0 for the process,
 * NDK_OPEN_FLAG_NO_SHM for one adapter) are each enough to refuse, say so
 * in the detail, and leave other adapters alone; NDK_SHM_COPY=1 is shown
 * as copy mode; a NULL adapter is refused. */
#include <stdlib.h>
#include <string.h>

#include <ndk/ndk.h>

#include "testlib.h"

static NDK_ADAPTER *open_lo(ULONG flags)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .Flags = flags};
    NDK_ADAPTER *ad = NULL;
    return ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &ad) == STATUS_SUCCESS ? ad : NULL;
}

static void t_switches(void)
{
    NDK_ADAPTER *on = open_lo(0), *off = open_lo(NDK_OPEN_FLAG_NO_SHM);
    REQUIRE(on && off);
    const char *d = NULL;
    unsetenv("NDK_SHM");
    unsetenv("NDK_SHM_COPY");
    if (!ndk_shm_available(on, &d)) {
        /* Only the kernel may refuse an adapter with no switch off. */
        CHECK(d && strstr(d, "available"));
        tl_skip_all("this kernel has no shared-memory transport");
    } else {
        CHECK(d && (strcmp(d, "single copy") == 0 || strstr(d, "ptrace_scope")));
        CHECK(!ndk_shm_available(off, &d));
        CHECK(d && strcmp(d, "off: NDK_OPEN_FLAG_NO_SHM") == 0);

        setenv("NDK_SHM", "0", 1);
        CHECK(!ndk_shm_available(on, &d));
        CHECK(d && strcmp(d, "off: NDK_SHM=0") == 0);
        setenv("NDK_SHM", "1", 1);
        CHECK(ndk_shm_available(on, NULL));
        unsetenv("NDK_SHM");

        setenv("NDK_SHM_COPY", "1", 1);
        CHECK(ndk_shm_available(on, &d));
        CHECK(d && strcmp(d, "copy mode: NDK_SHM_COPY=1") == 0);
        unsetenv("NDK_SHM_COPY");
    }
    CHECK(!ndk_shm_available(NULL, &d));
    ndk_close_adapter(on);
    ndk_close_adapter(off);
}

int main(void)
{
    RUN(t_switches);
    return tl_finish();
}
