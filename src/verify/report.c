/* The verifier's reports: one line per object and rule, on stderr and
 * through the callback of ndk_verifier_set_report_callback (ndk.h); with
 * NDK_OPEN_FLAG_VERIFY_ABORT (or NDK_VERIFY=abort), abort() after it. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify/vcore.h"

/* Identifiers and words as docs/rules.md defines them. */
static const struct {
    const char *id;
    const char *words;
} rules[VR_COUNT] = {
    [VR_L5] = {"L5", "no close while a call on the object is running"},
    [VR_L9] = {"L9", "no use of an object after its close"},
    [VR_L17] = {"L17", "every object is closed before its adapter"},
    [VR_C1] = {"C1", "GetCqResults, GetCqResultsEx and ArmCq never run at once on one CQ"},
    [VR_C8] = {"C8", "a CQ is deep enough for every completion it is owed"},
    [VR_D5] = {"D5", "every chain of deferred requests ends with one without DEFER"},
    [VR_W2] = {"W2", "posts to one queue are serialised"},
    [VR_W6] = {"W6", "at most queue-depth requests outstanding on a queue"},
    [VR_W7] = {"W7", "SGE count and lengths within the queue's and adapter's limits"},
    [VR_W8] = {"W8", "a request context names one outstanding request"},
    [VR_W9] = {"W9", "the buffers of a Send or Write are left alone until it completed"},
    [VR_W10] = {"W10", "a receive is posted before the peer's Send arrives"},
    [VR_N1] = {"N1", "NdkGetConnectionData only inside its window"},
    [VR_N2] = {"N2", "Accept, Reject and CompleteConnect once each, on the right side"},
    [VR_N3] = {"N3", "a connect event is answered with Accept, Reject or close"},
    [VR_N4] = {"N4", "a QP backs one connector at a time"},
    [VR_X6] = {"X6", "disconnected connectors and QPs are not reused"},
    [VR_M1] = {"M1", "no deregistration of memory that outstanding requests name"},
    [VR_M2] = {"M2", "no release of a LAM that a fast registration uses"},
    [VR_M3] = {"M3", "fast-registration pages come from live LAMs"},
    [VR_M4] = {"M4", "registered memory stays mapped while registered"},
    [VR_M5] = {"M5", "no deregistration of an MR under a bound window"},
};

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static NDK_FN_VERIFIER_REPORT report_fn;
static void *report_ctx;
static ULONG findings;

const char *vtype_name(NDK_OBJECT_TYPE t)
{
    switch (t) {
    case NdkObjectTypeAdapter: return "adapter";
    case NdkObjectTypeQp: return "QP";
    case NdkObjectTypeCq: return "CQ";
    case NdkObjectTypeMr: return "MR";
    case NdkObjectTypeMw: return "MW";
    case NdkObjectTypePd: return "PD";
    case NdkObjectTypeSharedEndpoint: return "shared endpoint";
    case NdkObjectTypeConnector: return "connector";
    case NdkObjectTypeListener: return "listener";
    case NdkObjectTypeSrq: return "SRQ";
    default: return "object";
    }
}

void vreport(struct vobj *o, enum vrule r, const char *call, const char *advice, const char *fmt,
             ...)
{
    uint32_t bit = 1u << r;
    if (__atomic_fetch_or(&o->reported, bit, __ATOMIC_ACQ_REL) & bit)
        return;
    struct ndk_verifier *v = o->v;
    char detail[512], line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    snprintf(line, sizeof line, "ndk verifier: %s (%s): %s on %s %p (adapter %s %p): %s; instead: %s",
             rules[r].id, rules[r].words, call, vtype_name(o->type), (void *)o->pub, v->ad->dev->name,
             (void *)&v->ad->obj.pub, detail, advice);
    pthread_mutex_lock(&report_lock);
    findings++;
    fprintf(stderr, "%s\n", line);
    fflush(stderr);
    NDK_FN_VERIFIER_REPORT fn = report_fn;
    void *ctx = report_ctx;
    pthread_mutex_unlock(&report_lock);
    /* Outside the lock: reports of other threads are not held up by it. */
    if (fn)
        fn(ctx, (NDK_ADAPTER *)&v->ad->obj.pub, rules[r].id, line);
    if (v->abort_on_report)
        abort(); /* a bug check: the core dump shows the consumer's stack */
}

void vfind(struct vfinding *f, struct vobj *o, enum vrule r, const char *call, const char *advice,
           const char *fmt, ...)
{
    f->o = o;
    f->rule = r;
    f->call = call;
    f->advice = advice;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->detail, sizeof f->detail, fmt, ap);
    va_end(ap);
}

void vfind_emit(const struct vfinding *f, NTSTATUS st)
{
    if (f->o)
        vreport(f->o, f->rule, f->call, f->advice, "%s; the call returned %s", f->detail,
                ndk_status_name(st));
}

bool ndk_verify_wanted(const NDK_OPEN_OPTIONS *opt)
{
    if (opt->Flags & (NDK_OPEN_FLAG_VERIFY | NDK_OPEN_FLAG_VERIFY_ABORT))
        return true;
    const char *e = getenv("NDK_VERIFY");
    return e && *e && strcmp(e, "0") != 0;
}

bool vabort_wanted(const NDK_OPEN_OPTIONS *opt)
{
    if (opt->Flags & NDK_OPEN_FLAG_VERIFY_ABORT)
        return true;
    const char *e = getenv("NDK_VERIFY");
    return e && strcmp(e, "abort") == 0;
}

NDK_API VOID ndk_verifier_set_report_callback(NDK_FN_VERIFIER_REPORT Report, PVOID Context)
{
    pthread_mutex_lock(&report_lock);
    report_fn = Report;
    report_ctx = Context;
    pthread_mutex_unlock(&report_lock);
}

NDK_API ULONG ndk_verifier_findings(VOID)
{
    pthread_mutex_lock(&report_lock);
    ULONG n = findings;
    pthread_mutex_unlock(&report_lock);
    return n;
}
