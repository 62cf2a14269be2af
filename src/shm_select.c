/*
 * shm_select.c - whether an adapter's connections may use the shared-memory
 * transport (docs/shm.md, Selection): the off switches (NDK_SHM=0,
 * NDK_OPEN_FLAG_NO_SHM) and what the kernel offers, checked locally.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/shm.h"
#include "objects.h"

/* What this kernel lets the transport do, looked at once per process:
 * NULL when it has what the transport needs, else why not. */
static const char *kernel_refusal(void)
{
    /* Two first callers may both look; they find the same. */
    static const char *verdict;
    static bool known;
    if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
        return __atomic_load_n(&verdict, __ATOMIC_RELAXED);
    const char *why = NULL;
    void *map = NULL;
    int fd = shm_os_region_create(4096, &map);
    if (fd < 0) {
        why = "memfd_create or its seals are not available";
    } else {
        shm_os_region_unmap(map, 4096);
        shm_os_close(fd);
        int pfd = shm_os_pidfd(shm_os_self());
        if (pfd < 0)
            why = "pidfd_open is not available (Linux 5.3 or later)";
        else
            shm_os_close(pfd);
    }
    __atomic_store_n(&verdict, why, __ATOMIC_RELAXED);
    __atomic_store_n(&known, true, __ATOMIC_RELEASE);
    return why;
}

/* Why payloads would be copied through the rings rather than moved with
 * process_vm_readv/writev between unrelated processes, or NULL. The
 * connection's own probe decides (xp_shm.c); this is the likely outcome. */
static const char *copy_reason(void)
{
    const char *env = getenv("NDK_SHM_COPY");
    if (env && strcmp(env, "1") == 0)
        return "copy mode: NDK_SHM_COPY=1";
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int scope = 0;
    if (f) {
        if (fscanf(f, "%d", &scope) != 1)
            scope = 0;
        fclose(f);
    }
    return scope > 0 ? "copy mode: Yama ptrace_scope is not 0" : NULL;
}

NDK_API BOOLEAN ndk_shm_available(NDK_ADAPTER *pAdapter, const char **pDetail)
{
    struct ndk_adapter_impl *ad = ndk_adapter_from_pub(pAdapter);
    const char *env = getenv("NDK_SHM");
    const char *why = NULL;
    if (!ad)
        why = "no such adapter";
    else if (env && strcmp(env, "0") == 0)
        why = "off: NDK_SHM=0";
    else if (ad->opt.Flags & NDK_OPEN_FLAG_NO_SHM)
        why = "off: NDK_OPEN_FLAG_NO_SHM";
    else
        why = kernel_refusal();
    if (pDetail) {
        const char *copy = why ? NULL : copy_reason();
        *pDetail = why ? why : copy ? copy : "single copy";
    }
    return why == NULL;
}
