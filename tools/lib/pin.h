/*
 * pin.h - pins the calling process to one CPU. ndkperf and its raw TCP
 * anchors (bench/datapath) both place themselves with it, so an anchor is
 * pinned exactly as the program it is compared with. Header-only: the
 * anchors use the OS alone, never the tools library.
 */
#ifndef TC_PIN_H
#define TC_PIN_H

#include <errno.h>
#include <sched.h>

/* Call it before starting a thread (a new thread inherits the CPU). 0, or
 * the errno of sched_setaffinity; cpu < 0 leaves the process alone. */
static inline int tc_pin_process(int cpu)
{
    if (cpu < 0)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set) == 0 ? 0 : errno;
}

#endif
