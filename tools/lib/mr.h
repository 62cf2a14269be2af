/*
 * mr.h - registered memory: a page-aligned, zeroed buffer registered on a
 * PD (NdkCreateMr, then NdkRegisterMr over an MDL describing it), its
 * tokens, SGEs into it, and its deregistration and close.
 */
#ifndef TC_MR_H
#define TC_MR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "lib/calls.h"

struct tc_mr {
    uint8_t *mem;
    size_t len;
    MDL mdl; /* stays put while registered: the MR refers to it */
    NDK_MR *mr;
    bool registered;
    UINT32 ltoken, rtoken;
    char what[48]; /* "message buffer", for the calls' names */
};

/* Allocates, creates and registers with flags; false after saying why
 * (the naming `what`: "message buffer"). */
bool tc_mr_setup(struct tc_mr *m, struct tc_calls *k, NDK_PD *pd, const char *what, size_t len, ULONG flags);
/* Deregisters and closes (the QP using it is closed by then); false if
 * that failed. The memory stays until tc_mr_free. */
bool tc_mr_teardown(struct tc_mr *m, struct tc_calls *k);
/* Frees the memory: once no registration can use it. */
void tc_mr_free(struct tc_mr *m);
/* An SGE for len bytes at offset off. */
NDK_SGE tc_mr_sge(const struct tc_mr *m, size_t off, size_t len);

#endif
