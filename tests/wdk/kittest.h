/* kittest.h - the kit's unit tests run their cases on a kit thread at
 * PASSIVE_LEVEL, as driver code would (tests/wdk/test_*.c). */
#ifndef NDKWDK_KITTEST_H
#define NDKWDK_KITTEST_H

#include <ntddk.h>
#include <ndkwdk/host.h>

#include "testlib.h"

/* Relative timeouts in milliseconds, as KeWaitXxx takes them. */
static inline LARGE_INTEGER kt_ms(LONGLONG ms)
{
    LARGE_INTEGER t;
    t.QuadPart = -ms * 10000;
    return t;
}

static inline void kt_start(void)
{
    ndkwdk_start();
    ndkwdk_thread_enter("test");
}

#endif
