/*
 * dptest.h - helpers for the data-path conformance tests (test_dp_*.c).
 * Declarations; the helpers are compiled once into ndk_testlib (dptest.c).
 *
 * The tests drive libndk only through the public API (ndk.h, ndkpi.h), over
 * loopback on adapter "lo" (127.0.0.1, or ::1 in the IPv6 run: tl_init),
 * with two adapter instances so each side of a connection has its own
 * progress thread, PD and memory table.
 *
 * Why it is built this way:
 *  - Everything a provider callback writes to (request records, CQ records,
 *    connection records) lives in per-case static pools, never on a stack
 *    frame: a callback that arrives late (after a failed wait) must not
 *    scribble on a dead frame. The pools are reset after the case closed its
 *    adapters, when no callback can run any more (L12).
 *  - Every asynchronous call is checked for the 4.1 contract at the end of
 *    the case: exactly one completion when it returned STATUS_PENDING, none
 *    otherwise.
 *  - Waits are bounded: tl_event waits with a deadline, or polling the CQ
 *    with a deadline. Nothing sleeps to synchronise.
 *  - Buffers are mmap'ed between PROT_NONE guard pages, so a provider that
 *    places or gathers outside a buffer crashes the test instead of silently
 *    corrupting memory.
 *  - A case that stops early (REQUIRE) leaves objects open; the case wrapper
 *    closes its adapters (which tears down what is left), then unmaps the
 *    buffers and frees the helper allocations, so LSan stays quiet.
 */
#ifndef NDK_CONFORMANCE_DPTEST_H
#define NDK_CONFORMANCE_DPTEST_H

#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ndktest.h"
#include "testlib.h"

/* ------------------------------------------------------------------------ */
/* Bounds                                                                   */
/* ------------------------------------------------------------------------ */

#define DP_WAIT_MS 5000u       /* anything that must happen (generous for ASan) */
#define DP_QUIET_MS 200u       /* "nothing more happens": short, never zero */
#define DP_CASE_TIMEOUT_S NT_CASE_TIMEOUT_S /* watchdog per case: a hang becomes a failure */

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

/* The status checks and callback checks of ndktest.h. */
#define DP_CHECK_ST(got, want) CHECK_STATUS(got, want)
#define DP_REQUIRE_ST(got, want) REQUIRE_STATUS(got, want)
#define DP_CB_CHECK(cond) NT_CB_CHECK(cond)

#define KiB 1024u
#define MiB (1024u * 1024u)

/* Waits for one completion on c and checks it (DP_CHECK_CQE). */
#define EXPECT_ONE(c, st, type, qpctx, reqctx, bytes)                                        \
    do {                                                                                     \
        NDK_RESULT_EX e1_;                                                                   \
        if (dp_wait_ex((c), &e1_, 1, DP_WAIT_MS) != 1) {                                     \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] no completion for %s\n", __FILE__, __LINE__,         \
                    tl_current, #reqctx);                                                    \
        } else {                                                                             \
            DP_CHECK_CQE(e1_, (st), (type), (qpctx), (reqctx), (bytes));                     \
        }                                                                                    \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Per-case allocations (freed by the case wrapper)                          */
/* ------------------------------------------------------------------------ */

#define DP_MAX_MAPS 256

size_t dp_page(void);

size_t dp_round_page(size_t n);

void dp_track(void *p, size_t len, bool mapped);

/* Zeroed heap memory that lives until the end of the case. */
void *dp_malloc(size_t n);

/*
 * `len` usable bytes between two PROT_NONE guard pages. With at_end the
 * buffer ends exactly at the upper guard page (a byte placed one past the end
 * faults); otherwise it starts right after the lower guard page. The whole
 * accessible span is filled with `fill`.
 */
uint8_t *dp_guarded(size_t len, bool at_end, uint8_t fill);

void dp_free_all(void);

/* ------------------------------------------------------------------------ */
/* Data patterns                                                            */
/* ------------------------------------------------------------------------ */

/* Byte i of stream `seed`: neighbouring bytes and neighbouring streams all
 * differ, so a misplaced, duplicated or shifted byte shows. */
uint8_t dp_pat(uint32_t seed, size_t i);

/* Writes stream bytes [from, from+len) to p. */
void dp_fill(void *p, size_t len, uint32_t seed, size_t from);

/* Index of the first byte of p that is not stream byte from+i, or -1. */
long dp_diff(const void *p, size_t len, uint32_t seed, size_t from);

/* Index of the first byte that is not `v`, or -1. */
long dp_diff_byte(const void *p, size_t len, uint8_t v);

#define DP_CHECK_DATA(p, len, seed, from)                                                    \
    do {                                                                                     \
        long dp_d_ = dp_diff((p), (len), (seed), (from));                                    \
        if (dp_d_ >= 0) {                                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] data of %s differs at byte %ld of %zu\n", __FILE__,  \
                    __LINE__, tl_current ? tl_current : "-", #p, dp_d_, (size_t)(len));      \
        }                                                                                    \
    } while (0)

#define DP_CHECK_BYTES(p, len, v)                                                            \
    do {                                                                                     \
        long dp_b_ = dp_diff_byte((p), (len), (v));                                          \
        if (dp_b_ >= 0) {                                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %s changed at byte %ld of %zu (0x%02x, expected "   \
                            "0x%02x)\n",                                                     \
                    __FILE__, __LINE__, tl_current ? tl_current : "-", #p, dp_b_,            \
                    (size_t)(len), ((const uint8_t *)(p))[dp_b_], (unsigned)(v));            \
        }                                                                                    \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Asynchronous calls                                                       */
/* ------------------------------------------------------------------------ */

/* One asynchronous provider call (request, create or close): ndktest.h's
 * record, in the pool its case wrapper audits. */
typedef nt_op dp_req;
#define dp_req_new(what) nt_op_new(NT_REQ, (what))
#define dp_req_cb nt_req_cb
#define dp_create_cb nt_create_cb
#define dp_close_cb nt_close_cb
#define DP_MAX_REQS NT_MAX_OPS

/* The final status: the return value if the call finished inline (its
 * callback must then not run), else its one completion's status. */
NTSTATUS dp_finish(dp_req *r, NTSTATUS returned, unsigned ms);

/* Created object: the inline one, or the one the completion delivered. */
void *dp_created(dp_req *r, NTSTATUS returned, void *inline_obj, NTSTATUS *st);

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

/* The adapters a case opened (closed by the case wrapper if still open). */
#define DP_MAX_ADAPTERS NT_MAX_ADAPTERS
#define dp_adapters nt_adapters

typedef struct dp_side {
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    NDK_PD *pd;
    /* A side on another host (tests/netns): the address its listeners and
     * connects use (family 0: the run's loopback address), and a call that
     * moves the calling thread into its network namespace before it
     * creates a socket there (NULL: stay), which netns is for. */
    NDK_SOCKADDR host;
    void (*enter)(const struct dp_side *s);
    int netns;
} dp_side;

/* Short provider timeouts keep every failure path well inside a case. */
NDK_OPEN_OPTIONS dp_options(void);

NDK_PD *dp_pd_new(dp_side *s);

/* Opens an adapter (NDKPI 2.1) with these options, reads its limits and
 * creates a PD; host, enter and netns of *s are kept. */
bool dp_side_open_as(dp_side *s, const char *adapter, const NDK_OPEN_OPTIONS *o);

/* Opens "lo" with the suite's options and these open flags. */
bool dp_side_open_flags(dp_side *s, ULONG flags);

/* Do connections between the two sides' adapters (same host) take the
 * same-host fast path (docs/shm.md, Selection: both allow it)? For the few
 * cases whose expectations depend on the transport; the label shm fails a
 * run whose connection fell back to TCP, so this is what carried it. */
bool dp_over_shm(const dp_side *a, const dp_side *b);

bool dp_side_open(dp_side *s);

#define dp_close_fn nt_close_fn

/* Starts closing obj (NULL: nothing); the record tells when it is done. */
dp_req *dp_close_start(void *obj);

bool dp_close_wait(dp_req *r);

#define dp_close nt_close

#define dp_close_adapter nt_close_adapter

void dp_side_close(dp_side *s);

/* ------------------------------------------------------------------------ */
/* Completion queues                                                        */
/* ------------------------------------------------------------------------ */

typedef struct dp_cq dp_cq;
typedef void (*dp_cq_hook)(dp_cq *c, NTSTATUS status);

struct dp_cq {
    NDK_CQ *cq;
    tl_event notify;          /* one signal per notification callback */
    _Atomic NTSTATUS last;    /* CqStatus of the latest callback */
    _Atomic int in_cb;        /* callbacks running now */
    _Atomic int overlapped;   /* a callback started while another ran (C5) */
    bool poll_only;           /* waits never arm: the case counts notifications itself */
    dp_cq_hook hook;          /* runs inside the callback, before the signal */
    void *user;
};

#define DP_MAX_CQS 128 /* two per connection of DP_MAX_CONNS */

void dp_cq_cb(PVOID ctx, NTSTATUS status);

unsigned dp_cq_notified(dp_cq *c);

/* A CQ of `depth` entries whose notifications are counted. */
/* A zeroed CQ record from the case's pool (freed by dp_case_end), for a
 * test that creates the CQ itself (with an Affinity, say). */
dp_cq *dp_cq_record(void);
dp_cq *dp_cq_new(dp_side *s, ULONG depth);

void dp_cq_close(dp_cq *c);

void dp_arm(dp_cq *c, ULONG type);

ULONG dp_get(dp_cq *c, NDK_RESULT_EX *out, ULONG n);

/*
 * Collects exactly `want` completions (fewer if they do not come within ms;
 * never more, so later ones stay queued). Between polls it arms the CQ for
 * any completion and waits for the notification, draining once more after
 * arming so a completion that slipped in before the arm is not missed (8.2
 * rule 9). poll_only CQs are polled with sched_yield between attempts, so
 * the case's own count of notifications stays exact.
 */
ULONG dp_wait_ex(dp_cq *c, NDK_RESULT_EX *out, ULONG want, unsigned ms);

/* As dp_wait_ex, through NdkGetCqResults (NDK_RESULT). */
ULONG dp_wait_plain(dp_cq *c, NDK_RESULT *out, ULONG want, unsigned ms);

/* Exactly `want` completions or a failure naming how many came. The
 * entries that never arrived read as DP_MISSING (all bits set), so the
 * case's later checks of them fail plainly instead of reading whatever
 * the array held. */
#define DP_MISSING ((NTSTATUS)0xFFFFFFFFu)
#define DP_WAIT(c, out, want)                                                                \
    do {                                                                                     \
        ULONG dp_w_got_ = dp_wait_ex((c), (out), (want), DP_WAIT_MS);                        \
        if (dp_w_got_ != (ULONG)(want)) {                                                    \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %lu of %lu completions arrived on %s\n", __FILE__,   \
                    __LINE__, tl_current ? tl_current : "-", (unsigned long)dp_w_got_,       \
                    (unsigned long)(want), #c);                                              \
            for (ULONG dp_w_i_ = dp_w_got_; dp_w_i_ < (ULONG)(want); dp_w_i_++) {            \
                memset(&(out)[dp_w_i_], 0, sizeof (out)[dp_w_i_]);                          \
                (out)[dp_w_i_].Status = DP_MISSING;                                          \
            }                                                                                \
        }                                                                                    \
    } while (0)

/* Completions that arrive within ms (they are consumed; up to max kept). */
ULONG dp_quiet(dp_cq *c, NDK_RESULT_EX *out, ULONG max, unsigned ms);

/* No completion within DP_QUIET_MS. */
#define DP_CHECK_QUIET(c)                                                                    \
    do {                                                                                     \
        NDK_RESULT_EX dp_q_[4];                                                              \
        ULONG dp_qn_ = dp_quiet((c), dp_q_, 4, DP_QUIET_MS);                                 \
        if (dp_qn_) {                                                                        \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %lu unexpected completion(s) on %s, first: ctx %p "  \
                            "%s type %d\n",                                                  \
                    __FILE__, __LINE__, tl_current ? tl_current : "-",                       \
                    (unsigned long)dp_qn_, #c, dp_q_[0].RequestContext,                      \
                    ndk_status_name(dp_q_[0].Status), (int)dp_q_[0].Type);                     \
        }                                                                                    \
    } while (0)

/* Checks one completion's fields. bytes < 0: BytesTransferred not checked
 * (NDK_RESULT defines it for receives only). */
#define DP_CHECK_CQE(r, st, type, qpctx, reqctx, bytes)                                      \
    do {                                                                                     \
        const NDK_RESULT_EX *dp_r_ = &(r);                                                   \
        DP_CHECK_ST(dp_r_->Status, (st));                                                    \
        CHECK_EQ(dp_r_->Type, (type));                                                       \
        CHECK(dp_r_->QPContext == (void *)(qpctx));                                          \
        CHECK(dp_r_->RequestContext == (void *)(reqctx));                                    \
        if ((long long)(bytes) >= 0)                                                         \
            CHECK_EQ(dp_r_->BytesTransferred, (bytes));                                      \
        if (dp_r_->Status == STATUS_SUCCESS)                                                 \
            CHECK_EQ(dp_r_->ProviderErrorCode, 0);                                           \
    } while (0)

/* A request context that is just a number. */
#define DP_CTX(n) ((void *)(uintptr_t)(n))

/* How many of the n results carry request context ctx. */
unsigned dp_count_ctx(const NDK_RESULT_EX *r, ULONG n, void *ctx);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct dp_mr {
    NDK_MR *mr;
    MDL mdl;
    uint8_t *addr;
    size_t len;
    UINT32 ltok, rtok;
    bool registered;
} dp_mr;

NDK_MR *dp_mr_create(NDK_PD *pd, BOOLEAN fast);

/* Registers [addr, addr+len) with NdkRegisterMr; the final status (inline,
 * or its completion). The tokens are read on success. */
NTSTATUS dp_mr_reg_pd(NDK_PD *pd, dp_mr *m, void *addr, size_t len, ULONG flags);

/* As dp_mr_reg_pd in the side's PD; a failure is a test failure. */
bool dp_mr_reg(dp_side *s, dp_mr *m, void *addr, size_t len, ULONG flags);

NTSTATUS dp_mr_dereg(dp_mr *m);

/* Deregisters (if registered) and closes. */
void dp_mr_close(dp_mr *m);

/* A guarded buffer of len bytes filled with stream `seed`, registered. */
uint8_t *dp_buf_reg(dp_side *s, dp_mr *m, size_t len, ULONG flags, uint32_t seed);

NDK_SGE dp_sge(const dp_mr *m, size_t off, ULONG len);

/* A fast-register MR over a buffer, with the LAM NdkBuildLAM gave for it. */
typedef struct dp_frmr {
    NDK_MR *mr;
    NDK_ADAPTER *ad;
    MDL mdl;
    uint8_t *addr;
    size_t len;
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    ULONG fbo;
    UINT32 tok; /* remote token current after the last NdkFastRegister */
} dp_frmr;

/* Creates the MR, initializes it for the pages of [addr, addr+len) and
 * builds their LAM (asking its size first: STATUS_BUFFER_TOO_SMALL). */
bool dp_frmr_init(dp_side *s, dp_frmr *f, void *addr, size_t len, BOOLEAN remote);

/* Posts NdkFastRegister of the whole buffer at base_va; reads the new token
 * once the call returned (NdkGetRemoteTokenFromMr). */
NTSTATUS dp_frmr_post(NDK_QP *qp, void *ctx, dp_frmr *f, void *base_va, ULONG flags);

void dp_frmr_close(dp_frmr *f);

NDK_MW *dp_mw_new(dp_side *s);

/* ------------------------------------------------------------------------ */
/* Queue pairs and connections                                              */
/* ------------------------------------------------------------------------ */

struct dp_conn;
typedef struct dp_cfg {
    ULONG rqd, iqd;     /* receive / initiator queue depth */
    ULONG rsge, isge;   /* SGE limits */
    ULONG inl;          /* InlineDataSize */
    ULONG ird, ord;     /* asked for by both sides... */
    ULONG p_ird, p_ord; /* ...unless these are set for the passive side */
    ULONG cqd;          /* depth of each CQ (0: rqd + iqd + 16) */
    bool split_cq;      /* separate receive and initiator CQs */
    bool disc_ex;       /* NdkAcceptEx / NdkCompleteConnectEx: the disconnect
                           reasons land in reason_a / reason_p of dp_conn */
    NDK_SRQ *srq_a, *srq_p; /* CreateQpWithSrq on that side */
    /* dp_conn_establish: called once Connect completed, before
     * CompleteConnect (the passive side waits for the RTR then). */
    void (*before_complete)(struct dp_conn *c);
} dp_cfg;

dp_cfg dp_cfg_default(void);

typedef struct dp_conn {
    dp_side *a, *p;             /* active (connecting) and passive sides */
    dp_cfg cfg;
    dp_cq *cqa, *cqp;           /* initiator CQ (and receive CQ unless split) */
    dp_cq *rcqa, *rcqp;         /* receive CQs (== cqa / cqp unless split) */
    NDK_QP *qa, *qp;
    NDK_LISTENER *l;
    NDK_SOCKADDR laddr;
    ULONG laddrlen;
    NDK_CONNECTOR *ca, *cp;
    tl_event lev;               /* connect events */
    _Atomic(NDK_CONNECTOR *) incoming;
    tl_event disc_a, disc_p;    /* disconnect events of each side */
    _Atomic ULONG reason_a, reason_p; /* their ProviderDisconnectReason (cfg.disc_ex) */
    ULONG ird_a, ord_a, ird_p, ord_p; /* effective limits (NdkGetConnectionData) */
    uint8_t ctx_a, ctx_p;       /* their addresses are the QPContexts */
} dp_conn;

#define DP_MAX_CONNS 64

void *dp_qpctx_a(dp_conn *c);

void *dp_qpctx_p(dp_conn *c);

void dp_disc_cb(PVOID ctx);

void dp_connect_event(PVOID ctx, NDK_CONNECTOR *c);

NDK_QP *dp_qp_create(dp_side *s, dp_cq *rcq, dp_cq *icq, NDK_SRQ *srq, void *qpctx,
                     const dp_cfg *cfg, NTSTATUS *pst);

/* CQs and QPs for a connection from a to p; nothing is connected yet, so
 * receives may be pre-posted before dp_conn_establish. */
/* A zeroed connection record from the case's pool, for a test that
 * builds the connection from its own CQs. */
dp_conn *dp_conn_record(void);
dp_conn *dp_conn_new(dp_side *a, dp_side *p, const dp_cfg *cfg);

NDK_CONNECTOR *dp_connector_new(dp_side *s);

/* The loopback address of the run's family (tl_family(): 127.0.0.1, or ::1
 * when the program was started with --ipv6) with the given port. */
ULONG dp_loop(NDK_SOCKADDR *sa, unsigned port);

/* A side's own address (dp_side host) with the given port; the calling
 * thread enters its namespace, so a socket made next is made there. */
ULONG dp_side_addr(const dp_side *s, NDK_SOCKADDR *sa, unsigned port);

/* A listener on p's side for this connection, on its address (the run's
 * loopback address) with a port the provider picks (read back into laddr). */
bool dp_conn_listen(dp_conn *c);

/* The passive connector the listener delivered, within ms. */
NDK_CONNECTOR *dp_conn_incoming(dp_conn *c, unsigned ms);

/* Connect, Accept, CompleteConnect (the three legs), then the effective
 * IRD/ORD of both sides. */
bool dp_conn_establish(dp_conn *c);
/* The same to the listener c->l already listening at c->laddr. */
bool dp_conn_connect(dp_conn *c);

/* The first step of dp_conn_connect: a new connector on the active side
 * and its NdkConnect to the listener started; the request's record (its
 * returned status as NdkConnect gave it), or NULL when no connector. */
dp_req *dp_conn_connect_start(dp_conn *c);

/* NdkDisconnect on one connector; the final status. */
NTSTATUS dp_disconnect(NDK_CONNECTOR *k);

/* Closes the connectors, QPs, listener and CQs of a connection, and checks
 * that neither side saw more than one disconnect event (X3). */
void dp_conn_close(dp_conn *c);

/* A valid SGE list pointer for calls with nSge 0 (a NULL list with nSge 0
 * is checked on its own in test_dp_send_receive). */
const NDK_SGE *dp_nosge(void);

/* Posting shorthands. */
NTSTATUS dp_recv(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n);

NTSTATUS dp_send(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n, ULONG flags);

NTSTATUS dp_write(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                  const void *raddr, UINT32 rtok, ULONG flags);

NTSTATUS dp_read(NDK_QP *qp, void *ctx, const NDK_SGE *sgl, ULONG n,
                 const void *raddr, UINT32 rtok, ULONG flags);

/* Sink flags for NdkRead targets: the read-sink right is needed unless the
 * adapter says otherwise (NdkRegisterMr,
 * NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED). */
#define DP_SINK_FLAGS (NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK)

/* One Send/Receive round trip of `len` bytes a -> p with data check: a
 * connection still carries traffic. */
bool dp_roundtrip(dp_conn *c, size_t len, uint32_t seed);

/* The n requests posted on c's active QP with contexts DP_CTX(1) to
 * DP_CTX(n) completed successfully in posting order, request i of
 * types[i] (n at most 32). */
void dp_check_posted_in_order(dp_conn *c, const NDK_OPERATION_TYPE *types, ULONG n);

/* An RDMA Write of g to raddr under rtok (context DP_CTX(2)), then a
 * zero-length Send (DP_CTX(4)) into a receive of rr's first 64 bytes
 * (DP_CTX(3)): once that receive completed the Write was placed (RFC 5040
 * section 5.5, in order). All three completions checked. */
void dp_write_placed(dp_conn *c, const NDK_SGE *g, const void *raddr, UINT32 rtok, const dp_mr *rr);

/* The Send posted on c's active QP with context DP_CTX(sctx) completed,
 * and so did the receive it landed in (context DP_CTX(rctx)), with the len
 * bytes of stream seed at rb. */
void dp_check_send_landed(dp_conn *c, uintptr_t sctx, uintptr_t rctx, const uint8_t *rb, size_t len,
                          uint32_t seed);

/* n Sends arrived in order on c's passive QP: Send i carried 100 + i
 * bytes of stream seed from offset 1024 * i into the receive posted with
 * DP_CTX(ctx0 + i) at rb + i * stride (n at most 32). */
void dp_check_sends_in_order(dp_conn *c, ULONG n, uintptr_t ctx0, const uint8_t *rb, size_t stride,
                             uint32_t seed);

/* Two adapters and one established connection between them. */
typedef struct dp_pair {
    dp_side a, p;
    dp_conn *c;
} dp_pair;

bool dp_pair_open(dp_pair *x, const dp_cfg *cfg);

/* The caller closed its MRs, MWs and SRQs first (they hold the PD). */
void dp_pair_close(dp_pair *x);

/*
 * The buffers of a case that sends, writes and reads over a pair: the Send
 * source on the active side (stream `seed`), the Read source on the
 * passive side (stream seed + 1, remote read), the Read sink on the active
 * side, the receive buffers and the Write target (remote write) on the
 * passive side; the sizes in that order.
 */
typedef struct dp_bufs {
    dp_mr ms, src, sink, rr, wr;
    uint8_t *a, *s, *k, *rb, *wb;
} dp_bufs;

typedef struct dp_buf_sizes {
    size_t send, src, sink, recv, write;
} dp_buf_sizes;

/* False when any of the five could not be registered; dp_bufs_close is due
 * either way, before dp_pair_close. */
bool dp_bufs_reg(dp_pair *x, dp_bufs *b, dp_buf_sizes len, uint32_t seed);

void dp_bufs_close(dp_bufs *b);

/* ------------------------------------------------------------------------ */
/* A raw MPA initiator that never sends an FPDU and never reads: a peer that */
/* is "slow" for ever, so requests stay outstanding on the NDK side.        */
/* ------------------------------------------------------------------------ */

/* TCP connect to dst within ms; -1 on failure. */
int dp_raw_connect(const NDK_SOCKADDR *dst, ULONG len, unsigned ms);

/*
 * An MPA revision 2 Request (RFC 5044 + RFC 6581): key,
 * flags S only (no markers, no CRC), Rev 2, PD_Length 4, then the IRD/ORD
 * words with the peer-to-peer bit clear, i.e. the client/server model that
 * Linux siw uses: no RTR follows.
 */
bool dp_raw_mpa_request(int fd, uint16_t ird, uint16_t ord);

/* Closes with a RST (SO_LINGER 0): the NDK side sees the connection abort. */
void dp_raw_reset(int fd);

/* Waits for the end of the raw peer's stream (FIN or RST), discarding what
 * arrives first; true if it ended within ms. */
bool dp_raw_wait_end(int fd, unsigned ms);

/*
 * A connection whose active side is a raw socket: the passive side (p) gets
 * a QP per cfg, listens, and accepts the raw peer's client/server MPA
 * Request. *fd is the raw socket; the NDK side's connector is c->cp. Nothing
 * is ever read from the socket, so the NDK side's outbound data backs up.
 */
dp_conn *dp_raw_accept(dp_side *p, const dp_cfg *cfg, int *fd);

/* ------------------------------------------------------------------------ */
/* Case wrapper                                                             */
/* ------------------------------------------------------------------------ */

/* ndktest.h's case wrapper (watchdog, audit of every asynchronous call,
 * adapters left open closed), plus the data-path pools: CQ records (whose
 * notification callbacks must never overlap, C5), connection records and
 * the per-case buffers. */
void dp_case_begin(const char *name);

void dp_case_end(void);

#define DP_CASE(name) TL_CASE_BETWEEN(name, dp_case_begin, dp_case_end, (void), ())

#endif
