/*
 * cqfx.h - the fixture of the CQ notification tests (test_dp_cq.c,
 * test_cq_moderation_*.c): a connected pair whose passive CQ is poll-only,
 * so every notification counted is one the case armed for. Compiled once
 * into ndk_testlib (cqfx.c).
 */
#ifndef NDK_TESTS_CQFX_H
#define NDK_TESTS_CQFX_H

#include "dptest.h"

/* No notification beyond `n` within the quiet period. */
#define CHECK_NOTIFIED(c, n)                                                                 \
    do {                                                                                     \
        tl_event_wait(&(c)->notify, (n) + 1, DP_QUIET_MS);                                   \
        CHECK_EQ(dp_cq_notified(c), (n));                                                    \
    } while (0)

/* Waits for the n-th notification of c. */
#define WAIT_NOTIFIED(c, n)                                                                  \
    do {                                                                                     \
        if (!tl_event_wait(&(c)->notify, (n), DP_WAIT_MS)) {                                 \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] notification #%u of %s did not come\n", __FILE__,   \
                    __LINE__, tl_current, (unsigned)(n), #c);                                \
        }                                                                                    \
    } while (0)

/* The fixture: a connected pair whose passive CQ is poll-only, a source
 * buffer on the active side, receive buffers on the passive side, and a
 * small readable region on the passive side (see cqfx_sync_delivered). */
typedef struct cqfx {
    dp_pair x;
    dp_conn *c;
    dp_mr ms, rr, src, sink;
    unsigned next_rctx, next_sctx;
} cqfx;

bool cqfx_open(cqfx *f, const dp_cfg *cfg);

void cqfx_close(cqfx *f);

/* NdkControlCqInterruptModeration on c, which must accept it. */
void cqfx_moderate(dp_cq *c, ULONG interval, ULONG count);

/* Posts n receives on the passive QP. */
void cqfx_post_receives(cqfx *f, unsigned n);

/* Sends one 16-byte message from the active side. */
void cqfx_send(cqfx *f, ULONG flags);

/* Returns once every message sent so far has been delivered at the passive
 * side (its receive completion is in the passive CQ), without touching that
 * CQ; the active side's completions are drained here. */
void cqfx_sync_delivered(cqfx *f);

/* Drains exactly n receive completions from the passive CQ, checking they
 * are successful receives. */
void cqfx_drain_receives(cqfx *f, ULONG n);

#endif
