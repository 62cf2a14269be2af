/* IRQL per thread, thread roles, bug checks and the debug macros' entry
 * points. The IRQL model is docs/porting.md, "The IRQL model". */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kit.h"

__thread struct kit_tls kit_tls;
static void (*fatal_hook)(void);

KIRQL kit_irql(void)
{
    /* Threads the kit did not create run NDK callbacks: DISPATCH_LEVEL. */
    if (!kit_tls.known) {
        kit_tls.known = true;
        kit_tls.irql = DISPATCH_LEVEL;
    }
    return kit_tls.irql;
}

void kit_set_role(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kit_tls.role, sizeof kit_tls.role, fmt, ap);
    va_end(ap);
}

void kit_adopt_thread(struct kit_thread *t, const char *role)
{
    kit_tls.known = true;
    kit_tls.irql = PASSIVE_LEVEL;
    kit_tls.in_dpc = false;
    kit_tls.self = t;
    kit_set_role("%s", role);
}

const char *ndkwdk_thread_role(void)
{
    if (!kit_tls.known || !kit_tls.role[0])
        return kit_tls.known ? "kit thread" : "NDK callback (a thread libndk created)";
    return kit_tls.role;
}

void ndkwdk_set_fatal_hook(void (*hook)(void))
{
    fatal_hook = hook;
}

const char *kit_bugcheck_name(ULONG code)
{
    switch (code) {
    case BC_IRQL_NOT_GREATER_OR_EQUAL: return "IRQL_NOT_GREATER_OR_EQUAL";
    case BC_IRQL_NOT_LESS_OR_EQUAL: return "IRQL_NOT_LESS_OR_EQUAL";
    case BC_MAXIMUM_WAIT_OBJECTS_EXCEEDED: return "MAXIMUM_WAIT_OBJECTS_EXCEEDED";
    case BC_SPIN_LOCK_ALREADY_OWNED: return "SPIN_LOCK_ALREADY_OWNED";
    case BC_SPIN_LOCK_NOT_OWNED: return "SPIN_LOCK_NOT_OWNED";
    case BC_KMODE_EXCEPTION_NOT_HANDLED: return "KMODE_EXCEPTION_NOT_HANDLED";
    case BC_SYSTEM_THREAD_EXCEPTION_NOT_HANDLED: return "SYSTEM_THREAD_EXCEPTION_NOT_HANDLED";
    case BC_ATTEMPTED_SWITCH_FROM_DPC: return "ATTEMPTED_SWITCH_FROM_DPC";
    case BC_BAD_POOL_CALLER: return "BAD_POOL_CALLER";
    case BC_DRIVER_VERIFIER_DETECTED_VIOLATION: return "DRIVER_VERIFIER_DETECTED_VIOLATION";
    case BC_IRQL_UNEXPECTED_VALUE: return "IRQL_UNEXPECTED_VALUE";
    case BC_DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS:
        return "DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS";
    case BC_DRIVER_IRQL_NOT_LESS_OR_EQUAL: return "DRIVER_IRQL_NOT_LESS_OR_EQUAL";
    case BC_WORKER_THREAD_RETURNED_AT_BAD_IRQL: return "WORKER_THREAD_RETURNED_AT_BAD_IRQL";
    case BC_WORKER_INVALID: return "WORKER_INVALID";
    default: return "BUGCHECK";
    }
}

void ndkwdk_describe_address(const void *pc, char *buf, size_t len)
{
    Dl_info info;
    if (!pc || !dladdr(pc, &info) || !info.dli_fname) {
        snprintf(buf, len, "%p", pc);
        return;
    }
    const char *mod = strrchr(info.dli_fname, '/');
    mod = mod ? mod + 1 : info.dli_fname;
    uintptr_t off = (uintptr_t)pc - (uintptr_t)info.dli_fbase;
    if (info.dli_sname)
        snprintf(buf, len, "%s+0x%zx (%s+0x%zx)", mod, (size_t)off, info.dli_sname,
                 (size_t)((uintptr_t)pc - (uintptr_t)info.dli_saddr));
    else
        snprintf(buf, len, "%s+0x%zx", mod, (size_t)off);
}

__attribute__((noreturn)) static void report_fatal_end(void)
{
    fflush(stderr);
    if (fatal_hook)
        fatal_hook();
    fflush(stdout);
    fflush(stderr);
    _exit(2);
}

void kit_bugcheck(ULONG code, ULONG_PTR p1, ULONG_PTR p2, ULONG_PTR p3, ULONG_PTR p4,
                  const void *site, const char *fmt, ...)
{
    char what[512], where[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    fprintf(stderr,
            "ndkwdk: BUG CHECK 0x%08X %s (0x%zx, 0x%zx, 0x%zx, 0x%zx)\n"
            "ndkwdk:   %s\n",
            code, kit_bugcheck_name(code), (size_t)p1, (size_t)p2, (size_t)p3, (size_t)p4, what);
    if (site) {
        ndkwdk_describe_address(site, where, sizeof where);
        fprintf(stderr, "ndkwdk:   called at %s\n", where);
    }
    fprintf(stderr, "ndkwdk:   in %s, IRQL %u\n", ndkwdk_thread_role(), kit_irql());
    report_fatal_end();
}

static const char *irql_name(KIRQL irql)
{
    switch (irql) {
    case PASSIVE_LEVEL: return "PASSIVE_LEVEL";
    case APC_LEVEL: return "APC_LEVEL";
    case DISPATCH_LEVEL: return "DISPATCH_LEVEL";
    default: return "above DISPATCH_LEVEL";
    }
}

void kit_require_irql(KIRQL max, const char *routine, const void *site)
{
    KIRQL irql = kit_irql();
    if (irql <= max)
        return;
    kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, 0, irql, 0, (ULONG_PTR)site, site,
                 "%s called at %s; it needs IRQL <= %s", routine, irql_name(irql),
                 irql_name(max));
}

KIRQL KeGetCurrentIrql(VOID)
{
    return kit_irql();
}

KIRQL KfRaiseIrql(KIRQL NewIrql)
{
    kit_touch();
    KIRQL old = kit_irql();
    if (NewIrql < old)
        kit_bugcheck(BC_IRQL_NOT_GREATER_OR_EQUAL, old, NewIrql, 0, (ULONG_PTR)KIT_CALLER,
                     KIT_CALLER, "KeRaiseIrql to %u from the higher IRQL %u", NewIrql, old);
    kit_tls.irql = NewIrql;
    return old;
}

VOID KeLowerIrql(KIRQL NewIrql)
{
    kit_touch();
    KIRQL old = kit_irql();
    if (NewIrql > old)
        kit_bugcheck(BC_IRQL_NOT_LESS_OR_EQUAL, old, NewIrql, 0, (ULONG_PTR)KIT_CALLER,
                     KIT_CALLER, "KeLowerIrql to %u from the lower IRQL %u", NewIrql, old);
    kit_tls.irql = NewIrql;
}

KIRQL KeRaiseIrqlToDpcLevel(VOID)
{
    KIRQL old = kit_irql();
    if (old > DISPATCH_LEVEL)
        kit_bugcheck(BC_IRQL_NOT_GREATER_OR_EQUAL, old, DISPATCH_LEVEL, 0, 0, KIT_CALLER,
                     "KeRaiseIrqlToDpcLevel from IRQL %u", old);
    kit_tls.irql = DISPATCH_LEVEL;
    return old;
}

/* Critical and guarded regions hold off APCs; there are no APCs. */
VOID KeEnterCriticalRegion(VOID) {}
VOID KeLeaveCriticalRegion(VOID) {}
VOID KeEnterGuardedRegion(VOID) {}
VOID KeLeaveGuardedRegion(VOID) {}
BOOLEAN KeAreApcsDisabled(VOID)
{
    return kit_irql() >= APC_LEVEL;
}

VOID KeBugCheckEx(ULONG BugCheckCode, ULONG_PTR P1, ULONG_PTR P2, ULONG_PTR P3, ULONG_PTR P4)
{
    kit_bugcheck(BugCheckCode, P1, P2, P3, P4, KIT_CALLER, "KeBugCheckEx called by the driver");
}

VOID KeBugCheck(ULONG BugCheckCode)
{
    kit_bugcheck(BugCheckCode, 0, 0, 0, 0, KIT_CALLER, "KeBugCheck called by the driver");
}

void ndkwdk_assert_failed(const char *expression, const char *message, const char *file,
                          int line)
{
    fprintf(stderr, "ndkwdk: NT_ASSERT failed: %s%s%s\nndkwdk:   at %s:%d\n", expression,
            message ? " - " : "", message ? message : "", file, line);
    fprintf(stderr, "ndkwdk:   in %s, IRQL %u (STATUS_ASSERTION_FAILURE)\n",
            ndkwdk_thread_role(), kit_irql());
    report_fatal_end();
}

void ndkwdk_paged_code(const char *file, int line, const char *function)
{
    KIRQL irql = kit_irql();
    if (irql <= APC_LEVEL)
        return;
    kit_bugcheck(BC_DRIVER_IRQL_NOT_LESS_OR_EQUAL, 0, irql, 0, 0, NULL,
                 "pageable routine %s (PAGED_CODE at %s:%d) runs at %s", function, file, line,
                 irql_name(irql));
}

VOID DbgBreakPoint(VOID)
{
    /* Without a kernel debugger the break point is an unhandled exception. */
    kit_bugcheck(BC_KMODE_EXCEPTION_NOT_HANDLED, 0x80000003u, 0, 0, 0, KIT_CALLER,
                 "DbgBreakPoint without a kernel debugger (STATUS_BREAKPOINT)");
}
