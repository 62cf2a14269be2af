/* Copying between two scatter lists. */
#ifndef NDK_IOV_COPY_H
#define NDK_IOV_COPY_H

#include <sys/uio.h>

/* Copies from the ns iovecs at src into the nd iovecs at dst, in order,
 * until either list ends; the transports that place a message with one
 * memcpy per piece (xp_loopback.c, xp_shm.c) use it. */
void ndk_iov_copy(const struct iovec *dst, int nd, const struct iovec *src, int ns);

#endif
