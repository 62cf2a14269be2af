/*
 * memprobe.h - asking the kernel about the process's own memory, for the
 * verifier's checks of consumer buffers (docs/verifier.md, rules M4, W9):
 * whether a range is mapped, and reading one that may have been unmapped
 * or protected behind our back without crashing.
 */
#ifndef NDK_NET_MEMPROBE_H
#define NDK_NET_MEMPROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when every page of [p, p+len) is mapped (true for len 0). */
bool ndk_mem_mapped(uintptr_t p, size_t len);
/* Copies [p, p+len) into buf through the kernel; false when part of it is
 * not readable. */
bool ndk_mem_read(uintptr_t p, void *buf, size_t len);

#endif
