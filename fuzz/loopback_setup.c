/* The set-up the loopback fuzz targets share (loopback_setup.h). */
#include "loopback_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "ensure.h"
#include "fake_kernel.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char *args[64];
    int n = *argc < 62 ? *argc : 62;
    for (int i = 0; i < n; i++)
        args[i] = (*argv)[i];
    args[n++] = "-detect_leaks=0";
    args[n] = NULL;
    *argc = n;
    *argv = args;
    /* No engine spin (net/loop.h, loop_set_spin), unless the environment
     * asks for one: the fake network's clock moves only when every engine
     * waits, so a spin would only add looks to each input. */
    setenv("NDK_ENGINE_SPIN_US", "0", 0);
    return 0;
}

static void cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st; /* never armed */
}

bool fuzz_open_lo_adapter(const NDK_OPEN_OPTIONS *o, ULONG cq_depth, NDK_ADAPTER **ad, NDK_PD **pd,
                          NDK_CQ **cq)
{
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, o, ad) != STATUS_SUCCESS)
        return false;
    ENSURE((*ad)->Dispatch->NdkCreatePd(*ad, NULL, NULL, pd) == STATUS_SUCCESS);
    ENSURE((*ad)->Dispatch->NdkCreateCq(*ad, cq_depth, cq_notify, NULL, NULL, NULL, NULL, cq) ==
           STATUS_SUCCESS);
    return true;
}

void fuzz_seed_from_input(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 0x100000001b3ull;
    fake_net_seed(h);
}

int fuzz_lo_listen(struct sockaddr_in *addr)
{
    int fd = fake_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ENSURE(fd >= 0);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    ENSURE(fake_bind(fd, (struct sockaddr *)addr, sizeof *addr) == 0 && fake_listen(fd, 16) == 0 &&
           fake_getsockname(fd, (struct sockaddr *)addr, &len) == 0);
    return fd;
}
