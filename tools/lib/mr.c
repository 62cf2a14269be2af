/*
 * mr.c - see mr.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/mr.h"

/* "NdkRegisterMr (message buffer)" */
static const char *call_name(const struct tc_mr *m, const char *call, char *buf, size_t size)
{
    snprintf(buf, size, "%s (%s)", call, m->what);
    return buf;
}

bool tc_mr_setup(struct tc_mr *m, struct tc_calls *k, NDK_PD *pd, const char *what, size_t len, ULONG flags)
{
    memset(m, 0, sizeof *m);
    snprintf(m->what, sizeof m->what, "%s", what);
    char name[96];
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, len ? len : 1) != 0) {
        tc_complain(k->role, "%scannot allocate %zu bytes for the %s", k->label, len, what);
        return false;
    }
    m->mem = mem;
    m->len = len;
    memset(m->mem, 0, len);

    struct tc_completion *c = tc_call(k, call_name(m, "NdkCreateMr", name, sizeof name));
    if (!c)
        return false;
    NDK_MR *mr = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateMr(pd, FALSE, tc_on_create, c, &mr);
    if (!(m->mr = tc_create_end(k, c, st, mr)))
        return false;
    if (!(c = tc_call(k, call_name(m, "NdkRegisterMr", name, sizeof name))))
        return false;
    m->mdl = (MDL){.Next = NULL, .StartVa = m->mem, .ByteOffset = 0, .ByteCount = (ULONG)len};
    st = m->mr->Dispatch->NdkRegisterMr(m->mr, &m->mdl, len, flags, tc_on_request, c);
    st = tc_call_end(k, c, st);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(k->role, name, st, "%s%zu bytes, flags 0x%" PRIx32, k->label, len, flags);
        return false;
    }
    m->registered = true;
    m->ltoken = m->mr->Dispatch->NdkGetLocalTokenFromMr(m->mr);
    m->rtoken = m->mr->Dispatch->NdkGetRemoteTokenFromMr(m->mr);
    return true;
}

bool tc_mr_teardown(struct tc_mr *m, struct tc_calls *k)
{
    bool ok = true;
    char name[96];
    if (!m->mr)
        return true;
    if (m->registered) {
        struct tc_completion *c = tc_call(k, call_name(m, "NdkDeregisterMr", name, sizeof name));
        NTSTATUS st = c ? tc_call_end(k, c, m->mr->Dispatch->NdkDeregisterMr(m->mr, tc_on_request, c))
                        : STATUS_NO_MEMORY;
        if (st != STATUS_SUCCESS) {
            tc_ndk_failed(k->role, name, st, NULL);
            ok = false;
        }
        m->registered = false;
    }
    if (!tc_close_object(k, m->mr->Dispatch->NdkCloseMr, &m->mr->Header, call_name(m, "NdkCloseMr", name, sizeof name)))
        ok = false;
    m->mr = NULL;
    return ok;
}

void tc_mr_free(struct tc_mr *m)
{
    free(m->mem);
    m->mem = NULL;
}

NDK_SGE tc_mr_sge(const struct tc_mr *m, size_t off, size_t len)
{
    return (NDK_SGE){.VirtualAddress = m->mem + off, .Length = (ULONG)len, .MemoryRegionToken = m->ltoken};
}
