/* The in-memory loopback transport (src/xp_loopback.h), white box: two QPs
 * made through the public dispatch, each on its own adapter, joined with
 * ndk_lo_connect instead of a connector. Proves that a second transport
 * plugs under the QP object (transport.h) with the same operations, checks,
 * completions and errors as the iWARP transport: Send into a posted
 * receive, Write, Read, DEFER, a window bound and remotely invalidated, and
 * each way a peer's check ends the connection. Completions are in the CQs
 * when the post returns (the loopback runs requests in the posting thread). */
#include <string.h>

#include "testlib.h"
#include "xp_loopback.h"
#include "xp_side.h"

#define BUF 4096
#define DEPTH 16

static const struct side_shape SHAPE = {
    .buf_len = BUF,
    .cq_depth = 4 * DEPTH,
    .rq_depth = DEPTH,
    .sq_depth = DEPTH,
    .inline_len = 64,
    .mr_flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
};

static struct side A, B;
static struct ndk_lo_pair *g_pair;

/* Each case starts from a fresh pair of connected QPs. */
static bool pair_up(void)
{
    if (!side_up(&A, &SHAPE) || !side_up(&B, &SHAPE))
        return false;
    g_pair = ndk_lo_connect(impl(A.qp), impl(B.qp));
    return g_pair != NULL;
}

static void pair_down(void)
{
    if (g_pair)
        ndk_lo_disconnect(g_pair);
    g_pair = NULL;
    side_down(&A);
    side_down(&B);
}

/* Takes exactly one completion from s's CQ. */
static NDK_RESULT_EX next(struct side *s)
{
    NDK_RESULT_EX r;
    memset(&r, 0, sizeof r);
    CHECK_EQ(s->cq->Dispatch->NdkGetCqResultsEx(s->cq, &r, 1), 1);
    return r;
}

static void none_left(struct side *s)
{
    NDK_RESULT_EX r;
    CHECK_EQ(s->cq->Dispatch->NdkGetCqResultsEx(s->cq, &r, 1), 0);
}

static void fill(struct side *s, size_t off, size_t len, uint8_t seed)
{
    for (size_t i = 0; i < len; i++)
        s->buf[off + i] = (uint8_t)(seed + i * 13);
}

static void t_send_receive(void)
{
    REQUIRE(pair_up());
    NDK_SGE r = sge(&B, 1000, 600), s = sge(&A, 0, 500);
    fill(&A, 0, 500, 7);
    CHECK_EQ(B.qp->Dispatch->NdkReceive(B.qp, (void *)0xB1, &r, 1), STATUS_SUCCESS);
    CHECK_EQ(A.qp->Dispatch->NdkSend(A.qp, (void *)0xA1, &s, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX a = next(&A), b = next(&B);
    CHECK_EQ(a.Status, STATUS_SUCCESS);
    CHECK(a.RequestContext == (void *)0xA1 && a.Type == NdkOperationTypeSend);
    CHECK_EQ(b.Status, STATUS_SUCCESS);
    CHECK(b.RequestContext == (void *)0xB1 && b.Type == NdkOperationTypeReceive && b.QPContext == &B);
    CHECK_EQ(b.BytesTransferred, 500);
    CHECK(memcmp(B.buf + 1000, A.buf, 500) == 0);
    CHECK_EQ(B.buf[1500], 0);
    none_left(&A);
    none_left(&B);
    pair_down();
}

static void t_write_read(void)
{
    REQUIRE(pair_up());
    fill(&A, 0, 1000, 3);
    NDK_SGE w = sge(&A, 0, 1000);
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)1, &w, 1, (UINT64)(uintptr_t)(B.buf + 2000), B.rtok, 0),
             STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS);
    CHECK(memcmp(B.buf + 2000, A.buf, 1000) == 0);
    fill(&B, 100, 300, 99);
    NDK_SGE rd[2] = {sge(&A, 3000, 100), sge(&A, 3500, 200)};
    CHECK_EQ(A.qp->Dispatch->NdkRead(A.qp, (void *)2, rd, 2, (UINT64)(uintptr_t)(B.buf + 100), B.rtok, 0),
             STATUS_SUCCESS);
    NDK_RESULT_EX r = next(&A);
    CHECK_EQ(r.Status, STATUS_SUCCESS);
    CHECK(r.Type == NdkOperationTypeRead && r.RequestContext == (void *)2);
    CHECK(memcmp(A.buf + 3000, B.buf + 100, 100) == 0);
    CHECK(memcmp(A.buf + 3500, B.buf + 200, 200) == 0);
    none_left(&B);
    pair_down();
}

/* NDK_OP_FLAG_DEFER holds a request until one without it is posted. */
static void t_defer(void)
{
    REQUIRE(pair_up());
    fill(&A, 0, 64, 1);
    NDK_SGE w = sge(&A, 0, 64);
    UINT64 at = (UINT64)(uintptr_t)B.buf;
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)1, &w, 1, at, B.rtok, NDK_OP_FLAG_DEFER), STATUS_SUCCESS);
    none_left(&A);
    CHECK_EQ(B.buf[1], 0);
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)2, &w, 1, at + 64, B.rtok, 0), STATUS_SUCCESS);
    CHECK(next(&A).RequestContext == (void *)1);
    CHECK(next(&A).RequestContext == (void *)2);
    CHECK(memcmp(B.buf, A.buf, 64) == 0 && memcmp(B.buf + 64, A.buf, 64) == 0);
    pair_down();
}

/* A window bound on B (a local operation, in queue order), written through
 * by A, then invalidated by A's Send with Invalidate. */
static void t_window_send_invalidate(void)
{
    REQUIRE(pair_up());
    NDK_MW *mw = NULL;
    REQUIRE(B.pd->Dispatch->NdkCreateMw(B.pd, NULL, NULL, &mw) == STATUS_SUCCESS);
    CHECK_EQ(B.qp->Dispatch->NdkBind(B.qp, (void *)0xB0, B.mr, mw, B.buf + 512, 256,
                                     NDK_OP_FLAG_ALLOW_REMOTE_WRITE),
             STATUS_SUCCESS);
    CHECK_EQ(next(&B).Status, STATUS_SUCCESS);
    UINT32 wtok = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    fill(&A, 0, 256, 42);
    NDK_SGE w = sge(&A, 0, 256);
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)1, &w, 1, (UINT64)(uintptr_t)(B.buf + 512), wtok, 0),
             STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS);
    CHECK(memcmp(B.buf + 512, A.buf, 256) == 0);
    NDK_SGE r = sge(&B, 0, 16);
    CHECK_EQ(B.qp->Dispatch->NdkReceive(B.qp, (void *)0xB1, &r, 1), STATUS_SUCCESS);
    CHECK_EQ(A.qp->Dispatch->NdkSendAndInvalidate(A.qp, (void *)2, NULL, 0, 0, wtok), STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS);
    NDK_RESULT_EX b = next(&B);
    CHECK_EQ(b.Status, STATUS_SUCCESS);
    CHECK(b.Type == NdkOperationTypeReceiveAndInvalidate);
    CHECK_EQ(b.TypeSpecificCompletionOutput, wtok);
    /* The window is invalid now: a Write through it ends the connection. */
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)3, &w, 1, (UINT64)(uintptr_t)(B.buf + 512), wtok, 0),
             STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS); /* handed over, as over TCP */
    CHECK_EQ(ndk_qp_end_reason(impl(B.qp)), NDK_DISCONNECT_REASON_TERMINATE_SENT);
    CHECK_EQ(ndk_qp_end_reason(impl(A.qp)), NDK_DISCONNECT_REASON_TERMINATE_RECEIVED);
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)4, &w, 1, 0, wtok, 0), STATUS_CONNECTION_INVALID);
    nt_close(mw);
    pair_down();
}

/* A Read of memory the peer does not expose fails with the status the
 * peer's Terminate gives it; later requests are flushed; both QPs fail. */
static void t_read_refused(void)
{
    REQUIRE(pair_up());
    NDK_SGE r = sge(&B, 0, 16);
    CHECK_EQ(B.qp->Dispatch->NdkReceive(B.qp, (void *)0xB1, &r, 1), STATUS_SUCCESS);
    NDK_SGE rd = sge(&A, 0, 100);
    CHECK_EQ(A.qp->Dispatch->NdkRead(A.qp, (void *)1, &rd, 1, (UINT64)(uintptr_t)B.buf, B.rtok ^ 0x100, 0),
             STATUS_SUCCESS);
    NDK_RESULT_EX a = next(&A);
    CHECK_EQ(a.Status, STATUS_ACCESS_VIOLATION);
    CHECK(a.Type == NdkOperationTypeRead);
    NDK_RESULT_EX b = next(&B);
    CHECK_EQ(b.Status, STATUS_CANCELLED);
    CHECK(b.RequestContext == (void *)0xB1);
    /* Beyond the region: a bounds fault is the peer's resources. */
    pair_down();
    REQUIRE(pair_up());
    rd = sge(&A, 0, 100);
    CHECK_EQ(A.qp->Dispatch->NdkRead(A.qp, (void *)2, &rd, 1, (UINT64)(uintptr_t)(B.buf + BUF - 50), B.rtok, 0),
             STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_REMOTE_RESOURCES);
    pair_down();
}

/* A Send the peer cannot take: no receive posted, or one too small. */
static void t_send_refused(void)
{
    REQUIRE(pair_up());
    NDK_SGE s = sge(&A, 0, 100);
    NDK_SGE ar = sge(&A, 200, 16);
    CHECK_EQ(A.qp->Dispatch->NdkReceive(A.qp, (void *)0xA0, &ar, 1), STATUS_SUCCESS);
    CHECK_EQ(A.qp->Dispatch->NdkSend(A.qp, (void *)1, &s, 1, 0), STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS);
    NDK_RESULT_EX f = next(&A); /* our own receive, flushed */
    CHECK_EQ(f.Status, STATUS_CANCELLED);
    CHECK(f.RequestContext == (void *)0xA0);
    CHECK_EQ(impl(B.qp)->dp.state, QP_ERROR);
    pair_down();

    REQUIRE(pair_up());
    s = sge(&A, 0, 100);
    NDK_SGE small = sge(&B, 0, 50);
    CHECK_EQ(B.qp->Dispatch->NdkReceive(B.qp, (void *)0xB1, &small, 1), STATUS_SUCCESS);
    CHECK_EQ(A.qp->Dispatch->NdkSend(A.qp, (void *)1, &s, 1, 0), STATUS_SUCCESS);
    NDK_RESULT_EX b = next(&B);
    CHECK_EQ(b.Status, STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(B.buf[0], 0);
    pair_down();
}

/* A QP closed while joined leaves the pair: its peer's Writes complete
 * unplaced, its Reads stay outstanding until the disconnect flushes them. */
static void t_peer_closed(void)
{
    REQUIRE(pair_up());
    nt_close(B.qp);
    B.qp = NULL;
    NDK_SGE w = sge(&A, 0, 64);
    CHECK_EQ(A.qp->Dispatch->NdkWrite(A.qp, (void *)1, &w, 1, (UINT64)(uintptr_t)B.buf, B.rtok, 0),
             STATUS_SUCCESS);
    CHECK_EQ(next(&A).Status, STATUS_SUCCESS);
    CHECK_EQ(A.qp->Dispatch->NdkRead(A.qp, (void *)2, &w, 1, (UINT64)(uintptr_t)B.buf, B.rtok, 0),
             STATUS_SUCCESS);
    none_left(&A);
    ndk_lo_disconnect(g_pair);
    g_pair = NULL;
    NDK_RESULT_EX r = next(&A);
    CHECK_EQ(r.Status, STATUS_CANCELLED);
    CHECK(r.RequestContext == (void *)2);
    pair_down();
}

/* ndk_lo_connect takes idle QPs only. */
static void t_connect_once(void)
{
    REQUIRE(pair_up());
    CHECK(ndk_lo_connect(impl(A.qp), impl(B.qp)) == NULL);
    pair_down();
}

int main(void)
{
    RUN(t_send_receive);
    RUN(t_write_read);
    RUN(t_defer);
    RUN(t_window_send_invalidate);
    RUN(t_read_refused);
    RUN(t_send_refused);
    RUN(t_peer_closed);
    RUN(t_connect_once);
    return tl_finish();
}
