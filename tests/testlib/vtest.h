/*
 * vtest.h - helpers for the NDK verifier's tests (docs/verifier.md): each
 * test is a consumer that breaks one rule on a verified adapter and checks
 * the exact report line (ndk_verifier_set_report_callback) and the status
 * of the offending call. Built on the data-path helpers (dptest.h) and
 * compiled once into ndk_testlib (vtest.c).
 */
#ifndef NDK_TESTS_VTEST_H
#define NDK_TESTS_VTEST_H

#include "dptest.h"

/* Signalled when a held report arrived (vt_hold). */
extern tl_event vt_held;

/* The next report of rule holds its thread (inside its NDK call) until
 * vt_release(): the races of W2, C1 and L5 made deterministic. */
void vt_hold(const char *rule);

void vt_release(void);

/* Installs the report callback and forgets earlier reports. */
void vt_begin(void);

unsigned vt_count(void);

/* The first report of rule, waiting at most ms for it; "" when none came. */
const char *vt_wait(const char *rule, unsigned ms);

/* The exact line the verifier prints for rule on obj. */
const char *vt_line(char *buf, size_t n, const char *id_words, const char *call, const char *type,
                    const void *obj, const NDK_ADAPTER *ad, const char *detail,
                    const char *advice);

#define VT_CHECK_LINE(got, want)                                                               \
    do {                                                                                       \
        const char *g_ = (got), *w_ = (want);                                                  \
        if (strcmp(g_, w_) != 0) {                                                             \
            tl_failures++;                                                                     \
            fprintf(stderr, "%s:%d: report\n  got:  %s\n  want: %s\n", __FILE__, __LINE__, g_,  \
                    w_);                                                                       \
        }                                                                                      \
    } while (0)

/* A line with a time in it: the part before and the part after. */
#define VT_CHECK_AROUND(got, head, tail)                                                       \
    do {                                                                                       \
        const char *g_ = (got), *h_ = (head), *t_ = (tail);                                    \
        size_t gl_ = strlen(g_), hl_ = strlen(h_), tl_ = strlen(t_);                           \
        if (gl_ < hl_ + tl_ || strncmp(g_, h_, hl_) != 0 || strcmp(g_ + gl_ - tl_, t_) != 0) {  \
            tl_failures++;                                                                     \
            fprintf(stderr, "%s:%d: report\n  got:  %s\n  want: %s...%s\n", __FILE__,         \
                    __LINE__, g_, h_, t_);                                                     \
        }                                                                                      \
    } while (0)

/* Opens "lo" with the verifier on (and the suite's short timeouts). */
bool vt_side_open(dp_side *s, ULONG connect_event_ms, ULONG defer_ms);

/* Two verified adapters (with these verifier timeouts, 0: the defaults)
 * and an established connection between them. */
bool vt_pair_open_ms(dp_pair *x, const dp_cfg *cfg, ULONG connect_event_ms, ULONG defer_ms);

bool vt_pair_open(dp_pair *x, const dp_cfg *cfg);

#endif
