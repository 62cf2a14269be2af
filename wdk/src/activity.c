/* The driver's activity (ndkwdk_activity, ndkwdk/host.h): every kit call
 * counts itself here. It stands apart from host.c, which asks the other
 * kit files what is pending, so that they count themselves without calling
 * back into host.c. */
#include "kit.h"

static uint64_t activity;

void kit_touch(void)
{
    __atomic_add_fetch(&activity, 1, __ATOMIC_RELAXED);
}

uint64_t ndkwdk_activity(void)
{
    return __atomic_load_n(&activity, __ATOMIC_RELAXED);
}
