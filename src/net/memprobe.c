#include "net/memprobe.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

bool ndk_mem_mapped(uintptr_t p, size_t len)
{
    if (len == 0)
        return true;
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = p & ~(pg - 1), hi = (p + len + pg - 1) & ~(pg - 1);
    unsigned char vec[1024];
    while (lo < hi) {
        size_t n = (hi - lo) / pg < sizeof vec ? (size_t)((hi - lo) / pg) : sizeof vec;
        /* ENOMEM: part of the range is not mapped at all. */
        if (mincore((void *)lo, n * pg, vec) != 0 && errno == ENOMEM)
            return false;
        lo += n * pg;
    }
    return true;
}

bool ndk_mem_read(uintptr_t p, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)p, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n == (ssize_t)len)
        return true;
    if (n < 0 && (errno == ENOSYS || errno == EPERM) && ndk_mem_mapped(p, len)) {
        memcpy(buf, (const void *)p, len); /* the call is not allowed here */
        return true;
    }
    return false;
}
