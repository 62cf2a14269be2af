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

/* The rule a report's id words name: their first word ("W6 (at most ...)" -> "W6"). */
const char *vt_rule(char *buf, size_t n, const char *id_words);

/* The first report of the rule id_words names came within ms and is
 * exactly the line vt_line makes of these words. */
#define VT_CHECK_REPORT(ms, id_words, call, type, obj, ad, detail, advice)                      \
    do {                                                                                       \
        char rule_[16], want_[1024];                                                           \
        VT_CHECK_LINE(vt_wait(vt_rule(rule_, sizeof rule_, (id_words)), (ms)),                 \
                      vt_line(want_, sizeof want_, (id_words), (call), (type), (obj), (ad),     \
                              (detail), (advice)));                                            \
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

/* The set-up of the tests that post Sends and watch what the verifier
 * says of them: a verified connection (with this VerifyDeferMs, 0: the
 * default), a 64-byte receive buffer registered on the passive side (rs
 * covers it) and a 64-byte send buffer on the active side (ss covers it,
 * sbuf is its memory). */
typedef struct vt_sends {
    dp_pair x;
    dp_mr rm, sm;
    uint8_t *sbuf;
    NDK_SGE rs, ss;
} vt_sends;

bool vt_sends_open(vt_sends *v, ULONG defer_ms);

/* Retrieves the completions of the test's posts still in the CQs (na on
 * the active side's, np on the passive side's; checked), then closes it
 * all. */
void vt_sends_close(vt_sends *v, ULONG na, ULONG np);

/* One verified adapter with a CQ of depth 16 and an unconnected QP on it
 * made with cfg: the set-up of the tests of a post's own arguments. */
typedef struct vt_lone_qp {
    dp_side s;
    dp_cq *cq;
    NDK_QP *qp;
} vt_lone_qp;

bool vt_lone_qp_open(vt_lone_qp *l, const dp_cfg *cfg);

void vt_lone_qp_close(vt_lone_qp *l);

#endif
