/* Copying between two scatter lists (iov_copy.h). */
#include "iov_copy.h"

#include <string.h>

void ndk_iov_copy(const struct iovec *dst, int nd, const struct iovec *src, int ns)
{
    size_t doff = 0, soff = 0;
    int i = 0, j = 0;
    while (i < nd && j < ns) {
        size_t n = dst[i].iov_len - doff;
        if (n > src[j].iov_len - soff)
            n = src[j].iov_len - soff;
        memcpy((char *)dst[i].iov_base + doff, (const char *)src[j].iov_base + soff, n);
        doff += n;
        soff += n;
        if (doff == dst[i].iov_len)
            i++, doff = 0;
        if (soff == src[j].iov_len)
            j++, soff = 0;
    }
}
