/* The host's view of the driver: pending work, what is left at unload,
 * and status names (the activity count: activity.c). */
#include "kit.h"

unsigned ndkwdk_busy(char *why, size_t len)
{
    if (why && len)
        why[0] = 0;
    unsigned n = kit_workitems_busy(why, len);
    unsigned d = kit_dpcs_busy(n ? NULL : why, len);
    unsigned t = kit_threads_busy(n + d ? NULL : why, len);
    return n + d + t;
}

unsigned ndkwdk_report_pending(FILE *out)
{
    unsigned n = kit_workitems_report(out) + kit_dpcs_report(out);
    pthread_mutex_lock(&kit_threads_lock);
    pthread_mutex_lock(&kit_disp_lock);
    for (struct kit_thread *t = kit_threads; t; t = t->next)
        if (t->system && !t->exited) {
            fprintf(out, "  %s still running\n", t->role);
            n++;
        }
    pthread_mutex_unlock(&kit_disp_lock);
    pthread_mutex_unlock(&kit_threads_lock);
    return n;
}

const char *ndkwdk_status_name(NTSTATUS Status)
{
    static const struct {
        NTSTATUS st;
        const char *name;
    } names[] = {
#define N(s) {s, #s}
        N(STATUS_TIMEOUT), N(STATUS_ALERTED), N(STATUS_USER_APC), N(STATUS_NO_MORE_ENTRIES),
        N(STATUS_NOT_IMPLEMENTED), N(STATUS_INVALID_HANDLE), N(STATUS_NO_SUCH_DEVICE),
        N(STATUS_ACCESS_DENIED), N(STATUS_OBJECT_NAME_NOT_FOUND),
        N(STATUS_OBJECT_NAME_COLLISION), N(STATUS_DEVICE_NOT_READY), N(STATUS_NOT_FOUND),
        N(STATUS_FAILED_DRIVER_ENTRY), N(STATUS_ASSERTION_FAILURE), N(STATUS_NOINTERFACE),
        N(STATUS_DEVICE_REMOVED), N(STATUS_INVALID_PARAMETER_1), N(STATUS_INVALID_PARAMETER_2),
        N(STATUS_INVALID_PARAMETER_3), N(STATUS_RETRY), N(STATUS_DATA_ERROR),
#undef N
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].st == Status)
            return names[i].name;
    return kit_ndk_status_name(Status); /* libndk names the NDKPI statuses */
}
