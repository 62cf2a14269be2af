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
#include "shm_rendezvous.h"

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

/* Why the adapter's connections keep TCP, or NULL. */
static const char *refusal(struct ndk_adapter_impl *ad)
{
    const char *env = getenv("NDK_SHM");
    if (!ad)
        return "no such adapter";
    if (env && strcmp(env, "0") == 0)
        return "off: NDK_SHM=0";
    if (ad->opt.Flags & NDK_OPEN_FLAG_NO_SHM)
        return "off: NDK_OPEN_FLAG_NO_SHM";
    return kernel_refusal();
}

unsigned ndk_shm_rendezvous_ms(void)
{
    const char *env = getenv("NDK_SHM_WAIT_MS");
    char *end;
    unsigned long ms = env ? strtoul(env, &end, 10) : 0;
    if (!env || end == env || *end || ms == 0 || ms > 10000)
        return NDK_SHM_RENDEZVOUS_MS;
    return (unsigned)ms;
}

bool ndk_shm_allowed(struct ndk_adapter_impl *ad)
{
    return refusal(ad) == NULL;
}

NDK_API BOOLEAN ndk_shm_available(NDK_ADAPTER *pAdapter, const char **pDetail)
{
    const char *why = refusal(ndk_adapter_from_pub(pAdapter));
    if (pDetail) {
        const char *copy = why ? NULL : copy_reason();
        *pDetail = why ? why : copy ? copy : "single copy";
    }
    return why == NULL;
}
