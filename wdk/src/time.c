/* Time, timeouts and processors. System time counts 100 ns units since
 * 1601-01-01 (UTC), interrupt time and the performance counter 100 ns
 * units of CLOCK_MONOTONIC; the clock tick is 15.625 ms, as on Windows. */
#include <sched.h>
#include <unistd.h>

#include "kit.h"

#define UNIX_EPOCH_AS_SYSTEM_TIME 116444736000000000LL
#define TIME_INCREMENT 156250u /* 100 ns units per clock tick */

uint64_t kit_mono_100ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 10000000u + (uint64_t)ts.tv_nsec / 100u;
}

int64_t kit_system_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return UNIX_EPOCH_AS_SYSTEM_TIME + (int64_t)ts.tv_sec * 10000000 + ts.tv_nsec / 100;
}

static void deadline_after_100ns(uint64_t units, struct timespec *deadline)
{
    clock_gettime(CLOCK_MONOTONIC, deadline);
    uint64_t ns = (uint64_t)deadline->tv_nsec + (units % 10000000u) * 100u;
    deadline->tv_sec += (time_t)(units / 10000000u) + (time_t)(ns / 1000000000u);
    deadline->tv_nsec = (long)(ns % 1000000000u);
}

bool kit_deadline(const LARGE_INTEGER *timeout, struct timespec *deadline)
{
    if (!timeout)
        return false;
    LONGLONG t = timeout->QuadPart;
    uint64_t rel;
    if (t < 0)
        rel = (uint64_t)(-(t + 1)) + 1; /* relative */
    else {
        int64_t now = kit_system_time(); /* absolute system time */
        rel = t > now ? (uint64_t)(t - now) : 0;
    }
    deadline_after_100ns(rel, deadline);
    return true;
}

void kit_deadline_after_ms(unsigned ms, struct timespec *deadline)
{
    deadline_after_100ns((uint64_t)ms * 10000u, deadline);
}

VOID KeQuerySystemTime(PLARGE_INTEGER CurrentTime)
{
    CurrentTime->QuadPart = kit_system_time();
}

VOID KeQuerySystemTimePrecise(PLARGE_INTEGER CurrentTime)
{
    CurrentTime->QuadPart = kit_system_time();
}

VOID ExSystemTimeToLocalTime(PLARGE_INTEGER SystemTime, PLARGE_INTEGER LocalTime)
{
    /* The host's time zone is not consulted: local time is UTC. */
    LocalTime->QuadPart = SystemTime->QuadPart;
}

LARGE_INTEGER KeQueryPerformanceCounter(PLARGE_INTEGER PerformanceFrequency)
{
    if (PerformanceFrequency)
        PerformanceFrequency->QuadPart = 10000000;
    LARGE_INTEGER v;
    v.QuadPart = (LONGLONG)kit_mono_100ns();
    return v;
}

ULONGLONG KeQueryInterruptTime(VOID)
{
    return kit_mono_100ns();
}

ULONG64 KeQueryInterruptTimePrecise(PULONG64 QpcTimeStamp)
{
    uint64_t t = kit_mono_100ns();
    if (QpcTimeStamp)
        *QpcTimeStamp = t;
    return t;
}

ULONGLONG KeQueryUnbiasedInterruptTime(VOID)
{
    return kit_mono_100ns();
}

VOID KeQueryTickCount(PLARGE_INTEGER CurrentCount)
{
    CurrentCount->QuadPart = (LONGLONG)(kit_mono_100ns() / TIME_INCREMENT);
}

ULONG KeQueryTimeIncrement(VOID)
{
    return TIME_INCREMENT;
}

VOID KeStallExecutionProcessor(ULONG MicroSeconds)
{
    /* A busy wait, as on Windows: allowed at any IRQL. */
    uint64_t end = kit_mono_100ns() + (uint64_t)MicroSeconds * 10u;
    while (kit_mono_100ns() < end)
        __builtin_ia32_pause();
}

/* ---- processors: one group with the CPUs this process may use ---- */
static ULONG cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (ULONG)CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (ULONG)n : 1;
}

ULONG KeGetCurrentProcessorNumber(VOID)
{
    int c = sched_getcpu();
    return c < 0 ? 0 : (ULONG)c;
}

ULONG KeGetCurrentProcessorNumberEx(PPROCESSOR_NUMBER ProcNumber)
{
    ULONG c = KeGetCurrentProcessorNumber();
    if (ProcNumber) {
        ProcNumber->Group = 0;
        ProcNumber->Number = (UCHAR)c;
        ProcNumber->Reserved = 0;
    }
    return c;
}

ULONG KeQueryActiveProcessorCount(PKAFFINITY ActiveProcessors)
{
    ULONG n = cpu_count();
    if (ActiveProcessors)
        *ActiveProcessors = n >= 64 ? ~(KAFFINITY)0 : (((KAFFINITY)1 << n) - 1);
    return n;
}

ULONG KeQueryActiveProcessorCountEx(USHORT GroupNumber)
{
    return GroupNumber == 0 || GroupNumber == ALL_PROCESSOR_GROUPS ? cpu_count() : 0;
}

ULONG KeQueryMaximumProcessorCount(VOID)
{
    return cpu_count();
}

ULONG KeQueryMaximumProcessorCountEx(USHORT GroupNumber)
{
    return KeQueryActiveProcessorCountEx(GroupNumber);
}

USHORT KeQueryActiveGroupCount(VOID)
{
    return 1;
}
