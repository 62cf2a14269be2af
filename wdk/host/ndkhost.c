/*
 * ndkhost - loads an NDK consumer driver built with the WDK kit and runs it
 * as Windows would: DriverEntry with a DRIVER_OBJECT and a registry path,
 * the driver's work items, DPCs, timers and system threads until its work
 * ends (or for N seconds, or until a signal), then DriverUnload. Reports
 * DriverEntry's status by name, pool left allocated by tag, NDK objects
 * left open, work left pending, bug checks and verifier findings.
 *
 * Exit status: 0 when DriverEntry succeeded, the driver unloaded and
 * nothing was left behind; 1 when the driver failed or left something
 * behind (or could not be loaded); 2 on a bug check or a crash; 64 on a
 * usage error. Every wait of the host is bounded (docs/porting.md).
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <ntddk.h>
#include <ndkwdk/host.h>

#define EXIT_DRIVER_FAILED 1
#define EXIT_BUGCHECK 2
#define EXIT_USAGE 64

/* The work of a driver has ended when nothing is pending and no kit
 * routine has been called for this long (docs/porting.md, "ndkhost"). */
#define SETTLE_MS 250
#define POLL_MS 25

static const char *driver_name = "driver";

static void usage(FILE *out)
{
    fprintf(out,
            "usage: ndkhost [options] DRIVER.so [RegistryPath]\n"
            "  -t, --seconds N         run N seconds after DriverEntry, then unload\n"
            "  -s, --until-signal      run until SIGINT or SIGTERM, then unload\n"
            "  -T, --timeout N         wait at most N s for the driver's work to end (60)\n"
            "  -E, --entry-timeout N   wait at most N s for DriverEntry to return (60)\n"
            "  -U, --unload-timeout N  wait at most N s for DriverUnload to return (30)\n"
            "      --no-verify         do not run libndk's NDK verifier on the driver's calls\n"
            "  -h, --help\n"
            "Exit status: 0 clean; 1 the driver failed or left something behind;\n"
            "2 bug check or crash; 64 usage error.\n");
}

/* ---- verifier findings ----
 * libndk's NDK verifier (docs/verifier.md) is on for the driver's adapters
 * unless --no-verify: ndkhost sets NDK_VERIFY=1 before DriverEntry (an
 * NDK_VERIFY already set, such as "abort", is kept). Each finding is an
 * "ndk verifier:" line on stderr; they count as things left behind. ndk.h
 * cannot be included beside the kit's headers: its one declaration here. */
ULONG ndk_verifier_findings(VOID);

/* ---- crashes: reported as the bug check Windows would raise ---- */
static void on_fatal(void)
{
    fprintf(stderr, "ndkhost: FAIL: %s stopped by a bug check\n", driver_name);
}

static void on_crash(int sig, siginfo_t *si, void *ucv)
{
    const char *role = ndkwdk_thread_role();
    bool arbitrary = strncmp(role, "DPC", 3) == 0 || strncmp(role, "NDK callback", 12) == 0;
    unsigned code = arbitrary ? 0x1E : 0x7E;
    const char *name = arbitrary ? "KMODE_EXCEPTION_NOT_HANDLED" : "SYSTEM_THREAD_EXCEPTION_NOT_HANDLED";
    unsigned exc = sig == SIGILL ? 0xC000001Du : sig == SIGFPE ? 0xC0000094u : 0xC0000005u;
    const void *pc = NULL;
#if defined(__x86_64__)
    pc = (const void *)((ucontext_t *)ucv)->uc_mcontext.gregs[REG_RIP];
#else
    (void)ucv;
#endif
    char where[256];
    ndkwdk_describe_address(pc, where, sizeof where);
    fprintf(stderr,
            "ndkwdk: BUG CHECK 0x%08X %s (exception 0x%08X, address %p)\n"
            "ndkwdk:   %s at %s, touching %p\n"
            "ndkwdk:   in %s\n",
            code, name, exc, pc,
            exc == 0xC0000005u ? "STATUS_ACCESS_VIOLATION"
            : exc == 0xC000001Du ? "STATUS_ILLEGAL_INSTRUCTION"
                                 : "STATUS_INTEGER_DIVIDE_BY_ZERO",
            where, si->si_addr, role);
    on_fatal();
    fflush(stderr);
    _exit(EXIT_BUGCHECK);
}

static void install_crash_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_crash;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
}

/* ---- the driver object and the calls into the driver ---- */
static DRIVER_OBJECT driver_object;
static DRIVER_EXTENSION driver_extension;
static WCHAR driver_name_w[128], registry_path_w[512];
static UNICODE_STRING registry_path;

static void widen(const char *s, WCHAR *w, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++)
        w[i] = (unsigned char)s[i];
    w[i] = 0;
}

struct entry_call {
    PDRIVER_INITIALIZE entry;
    NTSTATUS status;
};

static void call_entry(void *arg)
{
    struct entry_call *c = arg;
    c->status = c->entry(&driver_object, &registry_path);
}

static void call_unload(void *arg)
{
    (void)arg;
    driver_object.DriverUnload(&driver_object);
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Waits until no work is pending and the kit has been quiet for
 * SETTLE_MS, at most timeout_s. Returns false on timeout. */
static bool wait_work_ended(unsigned timeout_s)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_s * 1000u, quiet_since = now_ms();
    uint64_t seen = ndkwdk_activity();
    while (now_ms() < deadline) {
        sleep_ms(POLL_MS);
        uint64_t a = ndkwdk_activity();
        if (ndkwdk_busy(NULL, 0) != 0 || a != seen) {
            seen = a;
            quiet_since = now_ms();
        } else if (now_ms() - quiet_since >= SETTLE_MS) {
            return true;
        }
    }
    return false;
}

static void wait_for_signal(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    struct timespec slice = {1, 0};
    while (sigtimedwait(&set, NULL, &slice) < 0)
        ; /* one-second slices: a signal ends the wait */
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"seconds", required_argument, NULL, 't'},
        {"until-signal", no_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 'T'},
        {"entry-timeout", required_argument, NULL, 'E'},
        {"unload-timeout", required_argument, NULL, 'U'},
        {"help", no_argument, NULL, 'h'},
        {"no-verify", no_argument, NULL, 'N'},
        {NULL, 0, NULL, 0},
    };
    long seconds = -1, timeout_s = 60, entry_s = 60, unload_s = 30;
    bool until_signal = false, verify = true;
    int c;
    while ((c = getopt_long(argc, argv, "t:sT:E:U:h", opts, NULL)) != -1) {
        char *end = NULL;
        long v = optarg ? strtol(optarg, &end, 10) : 0;
        if (optarg && (*end || v < 0 || v > 86400)) {
            fprintf(stderr, "ndkhost: bad number '%s' for -%c\n", optarg, c);
            return EXIT_USAGE;
        }
        switch (c) {
        case 't': seconds = v; break;
        case 's': until_signal = true; break;
        case 'T': timeout_s = v; break;
        case 'E': entry_s = v; break;
        case 'U': unload_s = v; break;
        case 'N': verify = false; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return EXIT_USAGE;
        }
    }
    if (optind >= argc || argc - optind > 2 || (until_signal && seconds >= 0)) {
        usage(stderr);
        return EXIT_USAGE;
    }
    /* Before DriverEntry: the driver's adapters are opened with NDK_VERIFY
     * as it is then. */
    if (verify)
        setenv("NDK_VERIFY", "1", 0);
    else
        setenv("NDK_VERIFY", "0", 1);
    const char *path = argv[optind];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(base, "."), base);
    driver_name = name;

    if (until_signal) {
        /* Blocked before any thread starts, so sigtimedwait receives them. */
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &set, NULL);
    }
    install_crash_handlers();
    ndkwdk_set_fatal_hook(on_fatal);
    ndkwdk_start();

    void *image = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!image) {
        fprintf(stderr, "ndkhost: FAIL: cannot load %s: %s\n", path, dlerror());
        return EXIT_DRIVER_FAILED;
    }
    PDRIVER_INITIALIZE entry = (PDRIVER_INITIALIZE)dlsym(image, "DriverEntry");
    if (!entry) {
        fprintf(stderr, "ndkhost: FAIL: %s has no DriverEntry\n", path);
        return EXIT_DRIVER_FAILED;
    }

    char text[512];
    snprintf(text, sizeof text, "\\Driver\\%s", name);
    widen(text, driver_name_w, sizeof driver_name_w / sizeof driver_name_w[0]);
    if (argc - optind == 2)
        snprintf(text, sizeof text, "%s", argv[optind + 1]);
    else
        snprintf(text, sizeof text, "\\Registry\\Machine\\System\\CurrentControlSet\\Services\\%s",
                 name);
    widen(text, registry_path_w, sizeof registry_path_w / sizeof registry_path_w[0]);
    RtlInitUnicodeString(&registry_path, registry_path_w);
    driver_object.Type = 4; /* IO_TYPE_DRIVER */
    driver_object.Size = sizeof driver_object;
    driver_object.DriverExtension = &driver_extension;
    driver_object.DriverInit = entry;
    driver_object.DriverStart = image;
    RtlInitUnicodeString(&driver_object.DriverName, driver_name_w);
    driver_extension.DriverObject = &driver_object;
    driver_extension.ServiceKeyName = driver_object.DriverName;

    /* DriverEntry, on a kit thread at PASSIVE_LEVEL. */
    struct entry_call call = {entry, STATUS_UNSUCCESSFUL};
    int rc = ndkwdk_run_on_thread("DriverEntry", call_entry, &call, (unsigned)entry_s * 1000u);
    if (rc != 0) {
        fprintf(stderr, "ndkhost: FAIL: DriverEntry of %s did not return within %ld s\n", name,
                entry_s);
        ndkwdk_report_blocked(stderr);
        fflush(stderr);
        _exit(EXIT_DRIVER_FAILED); /* its threads cannot be stopped */
    }
    fprintf(stderr, "ndkhost: DriverEntry returned %s (0x%08X)\n",
            ndkwdk_status_name(call.status), (unsigned)call.status);
    bool failed = !NT_SUCCESS(call.status);

    if (!failed) {
        if (until_signal) {
            fprintf(stderr, "ndkhost: running until SIGINT or SIGTERM\n");
            wait_for_signal();
        } else if (seconds >= 0) {
            sleep_ms((unsigned)seconds * 1000u);
        } else if (!wait_work_ended((unsigned)timeout_s)) {
            char why[256];
            ndkwdk_busy(why, sizeof why);
            fprintf(stderr, "ndkhost: FAIL: the driver's work did not end within %ld s (%s)\n",
                    timeout_s, why);
            ndkwdk_report_blocked(stderr);
            failed = true;
        }
        if (!driver_object.DriverUnload) {
            fprintf(stderr, "ndkhost: FAIL: %s set no DriverUnload: it cannot be unloaded\n",
                    name);
            failed = true;
        } else {
            rc = ndkwdk_run_on_thread("DriverUnload", call_unload, NULL,
                                      (unsigned)unload_s * 1000u);
            if (rc != 0) {
                fprintf(stderr, "ndkhost: FAIL: DriverUnload of %s did not return within %ld s\n",
                        name, unload_s);
                ndkwdk_report_blocked(stderr);
                fflush(stderr);
                _exit(EXIT_DRIVER_FAILED);
            }
            fprintf(stderr, "ndkhost: DriverUnload returned\n");
        }
    }

    /* What the driver left behind. Windows cannot unload a driver with
     * work pending: a short grace for threads that are on their way out. */
    unsigned problems = 0;
    FILE *null = fopen("/dev/null", "w");
    for (int i = 0; i < 2000 / POLL_MS && null && ndkwdk_report_pending(null); i++)
        sleep_ms(POLL_MS);
    if (null)
        fclose(null);
    unsigned n = ndkwdk_report_pending(stderr);
    if (n)
        fprintf(stderr, "ndkhost: %u operation(s) still pending after the driver was done "
                        "(Windows: DRIVER_UNLOADED_WITHOUT_CANCELLING_PENDING_OPERATIONS)\n", n);
    problems += n;
    n = ndkwdk_report_pool(stderr);
    if (n)
        fprintf(stderr, "ndkhost: %u pool block(s) left allocated\n", n);
    problems += n;
    n = ndkwdk_report_ndk(stderr);
    if (n)
        fprintf(stderr, "ndkhost: %u NDK adapter(s) and object(s) left open\n", n);
    problems += n;
    unsigned findings = (unsigned)ndk_verifier_findings();
    fprintf(stderr, "ndkhost: %u verifier finding(s)\n", findings);
    problems += findings;

    if (failed || problems) {
        fprintf(stderr, "ndkhost: FAIL: %s: DriverEntry %s, %u thing(s) left behind\n", name,
                ndkwdk_status_name(call.status), problems);
        return EXIT_DRIVER_FAILED;
    }
    fprintf(stderr, "ndkhost: PASS: %s: DriverEntry %s, unloaded, nothing left behind\n", name,
            ndkwdk_status_name(call.status));
    return 0;
}
