/*
 * ndkping_rping.c - `ndkping --rping`: rdma-core's rping over NDK.
 *
 * The application protocol is rping's own (librdmacm/examples/rping.c,
 * reference iwarp.md 6.2), byte for byte, so that either end may be the
 * real rping on Linux siw or another `ndkping --rping`:
 *
 *   - the client connects with IRD = ORD = 1 and no private data; the
 *     server accepts with the IRD/ORD it reads from the request and no
 *     private data;
 *   - every Send is one 16-byte message, big-endian: buffer virtual address
 *     (8), rkey (4), size (4); a receiver takes exactly 16 bytes;
 *   - per ping: the client Sends its start_buf; the server RDMA-Reads it
 *     into its rdma_buf and Sends a zero "go ahead"; the client Sends its
 *     rdma_buf; the server RDMA-Writes strlen(rdma_buf) + 1 bytes into it
 *     and Sends another go-ahead; the client compares (-V) and prints (-v);
 *   - the client disconnects after the last ping; the server ends its
 *     connection on the disconnect (and with -P waits for the next one).
 *
 * The command line is rping's (-s/-c, -a, -I, -p, -C, -S, -v, -V, -d, -P,
 * -q) plus a few long options for what rping leaves to rdma_cm and the
 * device (--adapter, --no-p2p, --crc, --timeout), and --delay-first for
 * Linux siw 6.1 servers (see client_run). Output follows rping:
 * "ping data: ..." / "server ping data: ..." with -v, rping's debug lines
 * with -d, "... DISCONNECT EVENT..." on stderr.
 *
 * Where this mode is stricter than rping, it is so that a test can trust
 * its exit status: every wait is bounded (--timeout), a server given -C
 * checks that each connection made exactly that many pings (rping's server
 * ignores -C), and a client given -C fails when the server leaves early
 * (rping's exits 0). Sizes up to 1 MiB are allowed (rping: 65535), and the
 * server grows its rdma_buf to what a client advertises (rping's would
 * fail its RDMA Read when the client's -S is larger than its own).
 *
 * Only the public headers are used. Asynchronous calls are finished the
 * way reference section 4 allows (inline, or STATUS_PENDING and exactly
 * one callback, waited for with a bound); work requests complete into one
 * CQ that is polled, armed when empty, and slept on until its notification.
 */
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "ndkping_rping.h"
#include "ndkping_steps.h"
#include "toolcommon.h"

#define RPING_DEFAULT_PORT 7174
#define RPING_DEFAULT_SIZE 64u
/* rping's RPING_MIN_BUFSIZE: sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT),
 * which is 8 + 15 (the macro is stringified unexpanded). */
#define RPING_MIN_SIZE 23u
/* rping stops at 65535; the larger sizes are for ndkping-to-ndkping runs. */
#define RPING_RPING_MAX 65535u
#define RPING_MAX_SIZE (1u << 20)
#define RPING_MSG_FMT "rdma-ping-%lu: "
/* rping's queue sizes: send queue 16, receive queue 2, CQ twice the send
 * queue; one SGE per request. */
#define SQ_DEPTH 16u
#define RQ_DEPTH 2u
#define CQ_DEPTH (2u * SQ_DEPTH)
#define MSG_LEN 16u
#define DEFAULT_TIMEOUT_MS 10000u
/* Our own waits run this much longer than the provider's timeouts, so that
 * a provider timeout shows as its status, not as our giving up. */
#define GRACE_MS 2000u
#define ADDR_BUF (INET6_ADDRSTRLEN + IF_NAMESIZE + 16)

static const char *prog = "ndkping";

static struct ropts {
    bool server, client, persistent, verbose, validate;
    int debug;
    const char *addr;    /* -a */
    const char *source;  /* -I */
    const char *adapter; /* --adapter */
    unsigned port;
    unsigned long count; /* 0: until the peer leaves (rping's default) */
    bool count_given;
    ULONG size;
    bool no_p2p, crc;
    unsigned timeout_ms;
    unsigned delay_first_ms; /* --delay-first */
} ro;

static atomic_uint library_problems;

/* ------------------------------------------------------------------------ */
/* Output                                                                   */
/* ------------------------------------------------------------------------ */

/* Whole lines: with -P several connection threads print at once. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

static void out_line(FILE *f, const char *prefix, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&out_lock);
    if (f == stderr)
        fflush(stdout); /* errors after the lines that led to them */
    if (prefix)
        fputs(prefix, f);
    vfprintf(f, fmt, ap);
    fputc('\n', f);
    pthread_mutex_unlock(&out_lock);
}

/* rping's DEBUG_LOG (-d): plain lines on stdout. */
static void dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dbg(const char *fmt, ...)
{
    if (!ro.debug)
        return;
    va_list ap;
    va_start(ap, fmt);
    out_line(stdout, NULL, fmt, ap);
    va_end(ap);
}

/* What rping prints on stdout (-v), and our -d summary lines. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_line(stdout, NULL, fmt, ap);
    va_end(ap);
}

/* rping's own stderr lines ("data mismatch!", "... DISCONNECT EVENT..."),
 * exactly as rping prints them. */
static void rping_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void rping_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_line(stderr, NULL, fmt, ap);
    va_end(ap);
}

/* Our explanations: "ndkping: ..." on stderr. */
static void complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void complain(const char *fmt, ...)
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "%s: ", prog);
    va_list ap;
    va_start(ap, fmt);
    out_line(stderr, prefix, fmt, ap);
    va_end(ap);
}

/* The provider broke a rule of the reference: reported and counted; the
 * run fails even if the pings went through. */
static void library_problem(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void library_problem(const char *fmt, ...)
{
    char prefix[48];
    snprintf(prefix, sizeof prefix, "%s: library problem: ", prog);
    va_list ap;
    va_start(ap, fmt);
    out_line(stderr, prefix, fmt, ap);
    va_end(ap);
    atomic_fetch_add(&library_problems, 1);
}

static unsigned step_ms(void)
{
    return ro.timeout_ms + GRACE_MS;
}

/* NdkConnect may spend the TCP connect timeout and then the MPA Reply
 * timeout, each ro.timeout_ms. */
static unsigned connect_ms(void)
{
    return 2 * ro.timeout_ms + GRACE_MS;
}

/* ------------------------------------------------------------------------ */
/* rping's message and buffer contents                                      */
/* ------------------------------------------------------------------------ */

struct rmsg {
    uint64_t addr;
    uint32_t rkey, size;
};

static void msg_encode(uint8_t m[MSG_LEN], const struct rmsg *r)
{
    tc_put_be64(m, r->addr);
    tc_put_be32(m + 8, r->rkey);
    tc_put_be32(m + 12, r->size);
}

static void msg_decode(const uint8_t m[MSG_LEN], struct rmsg *r)
{
    r->addr = tc_get_be64(m);
    r->rkey = tc_get_be32(m + 8);
    r->size = tc_get_be32(m + 12);
}

/*
 * rping's start_buf for ping number `ping`: "rdma-ping-N: ", then ASCII
 * from *start upwards, wrapping from 'z' (122) to 'A' (65), and a NUL in
 * the last byte. *start advances by one per ping, with the same wrap.
 * (rping's snprintf may truncate the header in a small buffer: the run then
 * starts past the end and only the NUL is written, as here.)
 */
static void fill_ping(uint8_t *buf, size_t size, unsigned long ping, int *start)
{
    int cc = snprintf((char *)buf, size, RPING_MSG_FMT, ping);
    unsigned char ch = (unsigned char)*start;
    for (size_t i = cc < 0 ? size : (size_t)cc; i < size; i++) {
        buf[i] = ch;
        if (++ch > 122)
            ch = 65;
    }
    if (++*start > 122)
        *start = 65;
    buf[size - 1] = 0;
}

/* ------------------------------------------------------------------------ */
/* One connection                                                           */
/* ------------------------------------------------------------------------ */

/* rping's buffers: the receive and send messages, rdma_buf, and the
 * client's start_buf. Our receive and send buffers hold one message per
 * queue slot, so no posted request shares its bytes with another. */
enum { B_RECV, B_SEND, B_RDMA, B_START, B_COUNT };
enum { MK_CREATE, MK_REGISTER, MK_DEREGISTER, MK_CLOSE, MK_COUNT };

#define MR_NAMES(b)                                                                                \
    {                                                                                              \
        "NdkCreateMr (" b ")", "NdkRegisterMr (" b ")", "NdkDeregisterMr (" b ")",                 \
            "NdkCloseMr (" b ")"                                                                   \
    }
static const char *const mr_names[B_COUNT][MK_COUNT] = {
    [B_RECV] = MR_NAMES("recv_buf"),
    [B_SEND] = MR_NAMES("send_buf"),
    [B_RDMA] = MR_NAMES("rdma_buf"),
    [B_START] = MR_NAMES("start_buf"),
};
#undef MR_NAMES

struct rbuf {
    uint8_t *mem; /* page-aligned */
    size_t len;
    MDL mdl; /* must stay put while registered */
    NDK_MR *mr;
    bool registered, comps_live;
    UINT32 ltoken, rtoken;
    struct tc_completion k[MK_COUNT];
};

/* Work requests; RequestContext points at one of these. */
enum wr_kind { WR_RECV, WR_SEND, WR_READ, WR_WRITE };

static const struct {
    const char *name;
    NDK_OPERATION_TYPE type;
} wr_info[] = {
    [WR_RECV] = {"Receive", NdkOperationTypeReceive},
    [WR_SEND] = {"Send", NdkOperationTypeSend},
    [WR_READ] = {"RDMA Read", NdkOperationTypeRead},
    [WR_WRITE] = {"RDMA Write", NdkOperationTypeWrite},
};

struct wr {
    enum wr_kind kind;
    unsigned slot;
    bool posted;
};

struct rconn {
    unsigned num; /* 1-based, per server or client run */
    NDK_ADAPTER *ad;
    const NDK_ADAPTER_INFO *info;
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_CONNECTOR *cn;
    struct tc_completion k[K_COUNT];
    struct rbuf b[B_COUNT];

    struct wr recv_wr[RQ_DEPTH], send_wr[SQ_DEPTH], read_wr, write_wr;
    unsigned sq_out;    /* initiator requests posted and not completed */
    unsigned next_send; /* send slot to use next */
    /* Received messages, oldest first, taken by the ping loop. */
    struct rmsg q[RQ_DEPTH];
    unsigned q_head, q_len;
    bool read_done, write_done;
    bool failed;    /* a completion failed or a message was bogus */
    bool abandoned; /* a callback may still come: never free this */

    /* wait_for sleeps until wakes changes: the CQ notification and the
     * disconnect event count it up. */
    pthread_mutex_t wake_lock;
    pthread_cond_t wake_cond;
    unsigned wakes;
    NTSTATUS cq_status;

    char peer[ADDR_BUF];
    unsigned long pings; /* completed */
    uint32_t ping_size;  /* server: the size the client advertised last */
    uint64_t t_first, t_last;
};

static struct rconn *rconn_new(NDK_ADAPTER *ad, const NDK_ADAPTER_INFO *info, unsigned num)
{
    struct rconn *c = calloc(1, sizeof *c);
    if (!c) {
        complain("out of memory");
        return NULL;
    }
    c->num = num;
    c->ad = ad;
    c->info = info;
    pthread_mutex_init(&c->wake_lock, NULL);
    tc_cond_init_mono(&c->wake_cond);
    for (int i = 0; i < K_COUNT; i++)
        tc_comp_init(&c->k[i], k_names[i]);
    for (unsigned i = 0; i < RQ_DEPTH; i++)
        c->recv_wr[i] = (struct wr){.kind = WR_RECV, .slot = i};
    for (unsigned i = 0; i < SQ_DEPTH; i++)
        c->send_wr[i] = (struct wr){.kind = WR_SEND, .slot = i};
    c->read_wr.kind = WR_READ;
    c->write_wr.kind = WR_WRITE;
    return c;
}

static void conn_wake(struct rconn *c, NTSTATUS st)
{
    pthread_mutex_lock(&c->wake_lock);
    c->wakes++;
    if (st != STATUS_SUCCESS)
        c->cq_status = st;
    pthread_cond_broadcast(&c->wake_cond);
    pthread_mutex_unlock(&c->wake_lock);
}

static VOID cq_notification(PVOID Context, NTSTATUS CqStatus)
{
    conn_wake(Context, CqStatus);
}

static VOID on_disconnect_event(PVOID Context)
{
    struct rconn *c = Context;
    tc_comp_signal(&c->k[K_DISCONNECT_EVENT], STATUS_SUCCESS, NULL, 0);
    conn_wake(c, STATUS_SUCCESS);
}

/* Finishes an asynchronous call: its final status, waited for with a
 * bound. A missing callback leaves the connection abandoned (the callback
 * may still come, so its memory must stay). */
static NTSTATUS finish(struct rconn *c, struct tc_completion *k, NTSTATUS st, unsigned ms)
{
    st = tc_comp_finish(k, st, ms);
    if (st == TC_STATUS_NO_CALLBACK)
        c->abandoned = true;
    if (ro.debug > 1)
        dbg("%s: %s%s", k->what, k->pending ? "STATUS_PENDING, then " : "", tc_status_name(st));
    return st;
}

static void *finish_create(struct rconn *c, struct tc_completion *k, NTSTATUS st, void *inline_obj)
{
    st = finish(c, k, st, step_ms());
    if (st != STATUS_SUCCESS) {
        complain("%s failed: %s", k->what, tc_status_name(st));
        return NULL;
    }
    void *obj = tc_comp_object(k, inline_obj);
    if (!obj)
        library_problem("%s succeeded without giving an object", k->what);
    return obj;
}

/* rping_setup_qp: CQ (2 x 16), PD, and an RC QP with rping's depths. */
static bool conn_create(struct rconn *c, bool with_connector)
{
    NDK_ADAPTER *ad = c->ad;
    NDK_CQ *cq = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, CQ_DEPTH, cq_notification, c, NULL, tc_on_create,
                                            &c->k[K_CREATE_CQ], &cq);
    if (!(c->cq = finish_create(c, &c->k[K_CREATE_CQ], st, cq)))
        return false;
    NDK_PD *pd = NULL;
    st = ad->Dispatch->NdkCreatePd(ad, tc_on_create, &c->k[K_CREATE_PD], &pd);
    if (!(c->pd = finish_create(c, &c->k[K_CREATE_PD], st, pd)))
        return false;
    NDK_QP *qp = NULL;
    st = c->pd->Dispatch->NdkCreateQp(c->pd, c->cq, c->cq, c, RQ_DEPTH, SQ_DEPTH, 1, 1, 0,
                                      tc_on_create, &c->k[K_CREATE_QP], &qp);
    if (!(c->qp = finish_create(c, &c->k[K_CREATE_QP], st, qp)))
        return false;
    dbg("created cq %p, pd %p, qp %p", (void *)c->cq, (void *)c->pd, (void *)c->qp);
    if (with_connector) {
        NDK_CONNECTOR *cn = NULL;
        st = ad->Dispatch->NdkCreateConnector(ad, tc_on_create, &c->k[K_CREATE_CONNECTOR], &cn);
        if (!(c->cn = finish_create(c, &c->k[K_CREATE_CONNECTOR], st, cn)))
            return false;
    }
    return true;
}

/* A zeroed page-aligned buffer of len bytes, registered with flags. */
static bool buf_setup(struct rconn *c, int b, size_t len, ULONG flags)
{
    struct rbuf *B = &c->b[b];
    memset(B, 0, sizeof *B);
    for (int i = 0; i < MK_COUNT; i++)
        tc_comp_init(&B->k[i], mr_names[b][i]);
    B->comps_live = true;
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, len) != 0) {
        complain("cannot allocate %zu bytes", len);
        return false;
    }
    B->mem = mem;
    B->len = len;
    memset(B->mem, 0, len);

    NDK_MR *mr = NULL;
    NTSTATUS st = c->pd->Dispatch->NdkCreateMr(c->pd, FALSE, tc_on_create, &B->k[MK_CREATE], &mr);
    if (!(B->mr = finish_create(c, &B->k[MK_CREATE], st, mr)))
        return false;
    B->mdl = (MDL){.Next = NULL, .StartVa = B->mem, .ByteOffset = 0, .ByteCount = (ULONG)len};
    st = B->mr->Dispatch->NdkRegisterMr(B->mr, &B->mdl, len, flags, tc_on_request,
                                        &B->k[MK_REGISTER]);
    st = finish(c, &B->k[MK_REGISTER], st, step_ms());
    if (st != STATUS_SUCCESS) {
        complain("%s of %zu bytes, flags 0x%" PRIx32 ", failed: %s", B->k[MK_REGISTER].what, len,
                 flags, tc_status_name(st));
        return false;
    }
    B->registered = true;
    B->ltoken = B->mr->Dispatch->NdkGetLocalTokenFromMr(B->mr);
    B->rtoken = B->mr->Dispatch->NdkGetRemoteTokenFromMr(B->mr);
    if (ro.debug > 1)
        dbg("%s: %zu bytes at %p, flags 0x%" PRIx32 ", lkey %" PRIx32 " rkey %" PRIx32,
            B->k[MK_REGISTER].what, len, (void *)B->mem, flags, B->ltoken, B->rtoken);
    return true;
}

/* Closes one object; false (a library problem) if the close misbehaved. */
static bool close_one(struct rconn *c, NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj,
                      struct tc_completion *k)
{
    NTSTATUS st = tc_close(fn, obj, k, step_ms(), prog);
    if (st == STATUS_SUCCESS)
        return true;
    if (st == TC_STATUS_NO_CALLBACK)
        c->abandoned = true;
    atomic_fetch_add(&library_problems, 1);
    return false;
}

/* Deregisters and closes a buffer's MR, then checks the callback rules of
 * its calls and frees it, unless a callback may still come. */
static bool buf_teardown(struct rconn *c, int b)
{
    struct rbuf *B = &c->b[b];
    bool ok = true;
    if (B->mr) {
        if (B->registered) {
            NTSTATUS st =
                B->mr->Dispatch->NdkDeregisterMr(B->mr, tc_on_request, &B->k[MK_DEREGISTER]);
            st = finish(c, &B->k[MK_DEREGISTER], st, step_ms());
            if (st != STATUS_SUCCESS) {
                complain("%s failed: %s", B->k[MK_DEREGISTER].what, tc_status_name(st));
                ok = false;
            }
            B->registered = false;
        }
        if (!close_one(c, B->mr->Dispatch->NdkCloseMr, &B->mr->Header, &B->k[MK_CLOSE]))
            ok = false;
        B->mr = NULL;
    }
    if (c->abandoned || !B->comps_live)
        return ok;
    int problems = 0;
    for (int i = 0; i < MK_COUNT; i++) {
        problems += tc_comp_audit(&B->k[i], prog);
        tc_comp_destroy(&B->k[i]);
    }
    B->comps_live = false;
    free(B->mem);
    B->mem = NULL;
    if (problems) {
        atomic_fetch_add(&library_problems, (unsigned)problems);
        ok = false;
    }
    return ok;
}

/* Closes everything, successors first (connector, QP, MRs, PD, CQ), then
 * audits the callback rules and frees the connection, unless a callback
 * may still come (then it is left for the process exit). */
static bool conn_teardown(struct rconn *c)
{
    bool ok = true;
    if (c->cn &&
        !close_one(c, c->cn->Dispatch->NdkCloseConnector, &c->cn->Header, &c->k[K_CLOSE_CONNECTOR]))
        ok = false;
    if (c->qp && !close_one(c, c->qp->Dispatch->NdkCloseQp, &c->qp->Header, &c->k[K_CLOSE_QP]))
        ok = false;
    for (int b = 0; b < B_COUNT; b++)
        if (!buf_teardown(c, b))
            ok = false;
    if (c->pd && !close_one(c, c->pd->Dispatch->NdkClosePd, &c->pd->Header, &c->k[K_CLOSE_PD]))
        ok = false;
    if (c->cq && !close_one(c, c->cq->Dispatch->NdkCloseCq, &c->cq->Header, &c->k[K_CLOSE_CQ]))
        ok = false;
    c->cn = NULL, c->qp = NULL, c->pd = NULL, c->cq = NULL;
    if (c->abandoned)
        return false;
    int problems = 0;
    for (int i = 0; i < K_COUNT; i++) {
        problems += tc_comp_audit(&c->k[i], prog);
        tc_comp_destroy(&c->k[i]);
    }
    if (problems) {
        atomic_fetch_add(&library_problems, (unsigned)problems);
        ok = false;
    }
    pthread_cond_destroy(&c->wake_cond);
    pthread_mutex_destroy(&c->wake_lock);
    free(c);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Work requests and the CQ                                                 */
/* ------------------------------------------------------------------------ */

static NDK_SGE sge_of(const struct rbuf *B, size_t off, size_t len)
{
    return (NDK_SGE){
        .VirtualAddress = B->mem + off, .Length = (ULONG)len, .MemoryRegionToken = B->ltoken};
}

/* A posting call's result (4.5: SUCCESS queues it; anything else fails it
 * inline and no CQ entry follows). */
static bool posted(struct rconn *c, struct wr *w, const char *call, NTSTATUS st)
{
    if (st != STATUS_SUCCESS) {
        complain("post %s error: %s returned %s", wr_info[w->kind].name, call, ndk_status_name(st));
        if (st == STATUS_PENDING)
            library_problem("%s returned STATUS_PENDING, never valid for a post", call);
        return false;
    }
    w->posted = true;
    if (w->kind != WR_RECV)
        c->sq_out++;
    return true;
}

static bool post_recv(struct rconn *c, unsigned slot)
{
    NDK_SGE sge = sge_of(&c->b[B_RECV], slot * MSG_LEN, MSG_LEN);
    NTSTATUS st = c->qp->Dispatch->NdkReceive(c->qp, &c->recv_wr[slot], &sge, 1);
    return posted(c, &c->recv_wr[slot], "NdkReceive", st);
}

/* One CQ entry: bookkeeping, and for a receive rping's checks (exactly 16
 * bytes) and the re-post into the slot it freed. */
static void handle_result(struct rconn *c, const NDK_RESULT_EX *r)
{
    struct wr *w = r->RequestContext;
    bool ours = false;
    for (unsigned i = 0; i < RQ_DEPTH; i++)
        ours |= w == &c->recv_wr[i];
    for (unsigned i = 0; i < SQ_DEPTH; i++)
        ours |= w == &c->send_wr[i];
    ours |= w == &c->read_wr || w == &c->write_wr;
    if (!ours || !w->posted) {
        library_problem("a CQ entry (%s, type %d) for no outstanding request (context %p)",
                        ndk_status_name(r->Status), (int)r->Type, r->RequestContext);
        c->failed = true;
        return;
    }
    w->posted = false;
    if (w->kind != WR_RECV)
        c->sq_out--;
    if (r->QPContext != c)
        library_problem("%s completion with QPContext %p, not %p", wr_info[w->kind].name,
                        r->QPContext, (void *)c);
    if (r->Status == STATUS_CANCELLED) {
        /* Flushed: the connection is going away (rping skips these too). */
        dbg("%s flushed", wr_info[w->kind].name);
        return;
    }
    if (r->Status != STATUS_SUCCESS) {
        complain("cq completion failed status %s (ProviderErrorCode 0x%" PRIx32 ") on the %s",
                 ndk_status_name(r->Status), r->ProviderErrorCode, wr_info[w->kind].name);
        c->failed = true;
        return;
    }
    if (r->Type != wr_info[w->kind].type)
        library_problem("%s completion of type %d, expected %d", wr_info[w->kind].name,
                        (int)r->Type, (int)wr_info[w->kind].type);
    switch (w->kind) {
    case WR_SEND:
        dbg("send completion");
        break;
    case WR_READ:
        dbg("rdma read completion");
        c->read_done = true;
        break;
    case WR_WRITE:
        dbg("rdma write completion");
        c->write_done = true;
        break;
    case WR_RECV:
        dbg("recv completion");
        if (r->BytesTransferred != MSG_LEN) {
            rping_err("Received bogus data, size %" PRIu32, r->BytesTransferred);
            c->failed = true;
            return;
        }
        if (c->q_len == RQ_DEPTH) {
            /* Only a peer that sends ahead of rping's protocol gets here:
             * rping never has more than one message in flight. */
            complain("%u messages received and not yet taken: the peer does not wait for the "
                     "go-ahead",
                     RQ_DEPTH + 1);
            c->failed = true;
            return;
        }
        msg_decode(c->b[B_RECV].mem + w->slot * MSG_LEN, &c->q[(c->q_head + c->q_len) % RQ_DEPTH]);
        c->q_len++;
        if (!post_recv(c, w->slot))
            c->failed = true;
        break;
    }
}

static ULONG cq_drain(struct rconn *c)
{
    NDK_RESULT_EX r[CQ_DEPTH];
    ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, r, CQ_DEPTH);
    if (n > CQ_DEPTH) {
        library_problem("NdkGetCqResultsEx returned %" PRIu32 " of at most %u", n, CQ_DEPTH);
        n = CQ_DEPTH;
    }
    for (ULONG i = 0; i < n; i++)
        handle_result(c, &r[i]);
    return n;
}

enum wait_result { WAIT_OK, WAIT_LEFT, WAIT_FAILED, WAIT_TIMEOUT };

typedef bool (*ready_fn)(const struct rconn *c);

static bool have_msg(const struct rconn *c)
{
    return c->q_len > 0;
}

static bool have_read(const struct rconn *c)
{
    return c->read_done;
}

static bool have_write(const struct rconn *c)
{
    return c->write_done;
}

static bool sq_has_room(const struct rconn *c)
{
    return c->sq_out < SQ_DEPTH && !c->send_wr[c->next_send].posted;
}

/*
 * Polls the CQ until ready(c), a failure, the peer's disconnect (once the
 * CQ holds nothing more: what the peer sent before leaving counts), or
 * step_ms(). An empty CQ is armed and polled once more, which closes the
 * race with a completion that came before the arm, then slept on.
 */
static enum wait_result wait_for(struct rconn *c, ready_fn ready)
{
    struct timespec deadline;
    tc_deadline(&deadline, step_ms());
    bool expired = false;
    for (;;) {
        if (c->failed)
            return WAIT_FAILED;
        if (ready(c))
            return WAIT_OK;
        bool peer_left = tc_comp_fired(&c->k[K_DISCONNECT_EVENT]);
        if (cq_drain(c))
            continue;
        if (peer_left)
            return WAIT_LEFT;
        if (expired)
            return WAIT_TIMEOUT;
        pthread_mutex_lock(&c->wake_lock);
        unsigned seen = c->wakes;
        pthread_mutex_unlock(&c->wake_lock);
        c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
        if (cq_drain(c))
            continue;
        pthread_mutex_lock(&c->wake_lock);
        while (c->wakes == seen && !expired)
            expired = pthread_cond_timedwait(&c->wake_cond, &c->wake_lock, &deadline) == ETIMEDOUT;
        NTSTATUS cq_status = c->cq_status;
        pthread_mutex_unlock(&c->wake_lock);
        if (cq_status != STATUS_SUCCESS) {
            complain("the CQ notification reports %s", ndk_status_name(cq_status));
            return WAIT_FAILED;
        }
    }
}

/* Explains a wait that did not end in WAIT_OK; `what` is what was awaited. */
static void explain_wait(const struct rconn *c, enum wait_result w, const char *what)
{
    switch (w) {
    case WAIT_OK:
    case WAIT_FAILED: /* already reported where it happened */
        break;
    case WAIT_LEFT:
        complain("ping %lu: the peer %s disconnected while waiting for %s", c->pings, c->peer,
                 what);
        break;
    case WAIT_TIMEOUT:
        complain("ping %lu: nothing from %s within %u ms while waiting for %s (%u send queue "
                 "request%s outstanding)",
                 c->pings, c->peer, step_ms(), what, c->sq_out, c->sq_out == 1 ? "" : "s");
        break;
    }
}

/* Sends one 16-byte message (rping's send_buf, one slot per send). */
static bool send_msg(struct rconn *c, const struct rmsg *m)
{
    enum wait_result w = wait_for(c, sq_has_room);
    if (w != WAIT_OK) {
        explain_wait(c, w, "room in the send queue");
        return false;
    }
    unsigned slot = c->next_send;
    c->next_send = (slot + 1) % SQ_DEPTH;
    msg_encode(c->b[B_SEND].mem + slot * MSG_LEN, m);
    NDK_SGE sge = sge_of(&c->b[B_SEND], slot * MSG_LEN, MSG_LEN);
    NTSTATUS st = c->qp->Dispatch->NdkSend(c->qp, &c->send_wr[slot], &sge, 1, 0);
    return posted(c, &c->send_wr[slot], "NdkSend", st);
}

/* rping_format_send + post: advertises a buffer. */
static bool send_adv(struct rconn *c, const struct rbuf *B)
{
    struct rmsg m = {.addr = (uint64_t)(uintptr_t)B->mem, .rkey = B->rtoken, .size = ro.size};
    dbg("RDMA addr %" PRIx64 " rkey %" PRIx32 " len %" PRIu32, m.addr, m.rkey, m.size);
    return send_msg(c, &m);
}

static struct rmsg take_msg(struct rconn *c)
{
    struct rmsg m = c->q[c->q_head];
    c->q_head = (c->q_head + 1) % RQ_DEPTH;
    c->q_len--;
    return m;
}

/* Waits for the next message; false after explaining why none came. A
 * disconnect is reported through *left instead when left is not NULL. */
static bool recv_msg(struct rconn *c, const char *what, struct rmsg *m, bool *left)
{
    enum wait_result w = wait_for(c, have_msg);
    if (w == WAIT_LEFT && left) {
        *left = true;
        return false;
    }
    if (w != WAIT_OK) {
        explain_wait(c, w, what);
        return false;
    }
    *m = take_msg(c);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

/* The RDMA Read sink needs NDK_MR_FLAG_RDMA_READ_SINK unless the adapter
 * says otherwise (5.6.1); rping's own flags are what goes on the wire. */
static ULONG rdma_buf_flags(const struct rconn *c, bool read_sink)
{
    ULONG f = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
              NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    if (read_sink && !(c->info->AdapterFlags & NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED))
        f |= NDK_MR_FLAG_RDMA_READ_SINK;
    return f;
}

/* The server's rdma_buf must hold what the client advertises: registered
 * anew, larger, when a client's -S exceeds ours (nothing uses it between
 * pings). */
static bool server_fit_rdma_buf(struct rconn *c, uint32_t need)
{
    if (need <= c->b[B_RDMA].len)
        return true;
    dbg("growing rdma_buf from %zu to %" PRIu32 " bytes for the client's size", c->b[B_RDMA].len,
        need);
    if (!buf_teardown(c, B_RDMA))
        return false;
    return buf_setup(c, B_RDMA, need, rdma_buf_flags(c, true));
}

/* rping_test_server: one connection's pings, until the client leaves.
 * True if they all worked (and, with -C, there were exactly that many). */
static bool server_pings(struct rconn *c)
{
    struct rbuf *R = &c->b[B_RDMA];
    const struct rmsg go_ahead = {0};
    bool left = false;
    for (;;) {
        struct rmsg src;
        if (!recv_msg(c, "the client's start_buf advertisement (RDMA_READ_ADV)", &src, &left))
            break;
        dbg("Received rkey %" PRIx32 " addr %" PRIx64 " len %" PRIu32 " from peer", src.rkey,
            src.addr, src.size);
        dbg("server received sink adv");
        if (src.size == 0 || src.size > RPING_MAX_SIZE) {
            complain("ping %lu: the client advertises %" PRIu32 " bytes (1 to %u allowed)",
                     c->pings, src.size, RPING_MAX_SIZE);
            return false;
        }
        if (src.size > c->info->MaxTransferLength) {
            complain("ping %lu: %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32,
                     c->pings, src.size, c->info->MaxTransferLength);
            return false;
        }
        if (!server_fit_rdma_buf(c, src.size))
            return false;
        c->ping_size = src.size;
        if (c->pings == 0)
            c->t_first = tc_now_us();

        /* The RDMA Read of the client's start_buf into our rdma_buf. */
        memset(R->mem, 0, src.size);
        c->read_done = false;
        NDK_SGE sge = sge_of(R, 0, src.size);
        NTSTATUS st = c->qp->Dispatch->NdkRead(c->qp, &c->read_wr, &sge, 1, src.addr, src.rkey, 0);
        if (!posted(c, &c->read_wr, "NdkRead", st))
            return false;
        dbg("server posted rdma read req");
        enum wait_result w = wait_for(c, have_read);
        if (w != WAIT_OK) {
            explain_wait(c, w, "the RDMA Read of the client's start_buf (RDMA_READ_COMPLETE)");
            return false;
        }
        dbg("server received read complete");
        if (ro.verbose)
            say("server ping data: %.*s", (int)strnlen((const char *)R->mem, src.size),
                (const char *)R->mem);
        if (!send_msg(c, &go_ahead))
            return false;
        dbg("server posted go ahead");

        struct rmsg sink;
        if (!recv_msg(c, "the client's rdma_buf advertisement (RDMA_WRITE_ADV)", &sink, NULL))
            return false;
        dbg("Received rkey %" PRIx32 " addr %" PRIx64 " len %" PRIu32 " from peer", sink.rkey,
            sink.addr, sink.size);
        dbg("server received sink adv");
        /* rping echoes strlen(rdma_buf) + 1 bytes: the string and its NUL
         * (all of what was read when it holds no NUL). */
        size_t n = strnlen((const char *)R->mem, src.size);
        n = n < src.size ? n + 1 : n;
        if (n > sink.size) {
            complain("ping %lu: the client's rdma_buf (%" PRIu32
                     " bytes) cannot take the %zu bytes to echo",
                     c->pings, sink.size, n);
            return false;
        }
        c->write_done = false;
        sge = sge_of(R, 0, n);
        dbg("rdma write from lkey %" PRIx32 " laddr %" PRIx64 " len %zu", R->ltoken,
            (uint64_t)(uintptr_t)R->mem, n);
        st = c->qp->Dispatch->NdkWrite(c->qp, &c->write_wr, &sge, 1, sink.addr, sink.rkey, 0);
        if (!posted(c, &c->write_wr, "NdkWrite", st))
            return false;
        w = wait_for(c, have_write);
        if (w != WAIT_OK) {
            explain_wait(c, w, "the RDMA Write into the client's rdma_buf (RDMA_WRITE_COMPLETE)");
            return false;
        }
        dbg("server rdma write complete");
        if (!send_msg(c, &go_ahead))
            return false;
        dbg("server posted go ahead");
        c->pings++;
        c->t_last = tc_now_us();
    }
    if (!left)
        return false;
    rping_err("server DISCONNECT EVENT...");
    if (ro.count_given && c->pings != ro.count) {
        complain("the client %s made %lu ping%s, expected %lu (-C)", c->peer, c->pings,
                 c->pings == 1 ? "" : "s", ro.count);
        return false;
    }
    return true;
}

/* Connect events, queued by the provider's thread for the server loop. */
struct pending {
    NDK_CONNECTOR *cn;
    struct pending *next;
};

static struct listen_state {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct pending *head, *tail;
    bool stop;
} ls = {.lock = PTHREAD_MUTEX_INITIALIZER};

static VOID dropped_connector_closed(PVOID Context)
{
    (void)Context;
}

static VOID on_connect_event(PVOID Context, NDK_CONNECTOR *pNdkConnector)
{
    (void)Context;
    struct pending *p = malloc(sizeof *p);
    if (!p) {
        /* Closing an undelivered request rejects it; closes may be
         * started from a callback. */
        pNdkConnector->Dispatch->NdkCloseConnector(&pNdkConnector->Header, dropped_connector_closed,
                                                   NULL);
        return;
    }
    p->cn = pNdkConnector;
    p->next = NULL;
    pthread_mutex_lock(&ls.lock);
    if (ls.tail)
        ls.tail->next = p;
    else
        ls.head = p;
    ls.tail = p;
    pthread_cond_broadcast(&ls.cond);
    pthread_mutex_unlock(&ls.lock);
}

/* The next request, or NULL once stopped. Waits without a limit, as rping
 * does, in slices so that a stop is seen. */
static NDK_CONNECTOR *next_request(void)
{
    NDK_CONNECTOR *cn = NULL;
    pthread_mutex_lock(&ls.lock);
    while (!ls.head && !ls.stop) {
        struct timespec deadline;
        tc_deadline(&deadline, 1000);
        pthread_cond_timedwait(&ls.cond, &ls.lock, &deadline);
    }
    if (ls.head) {
        struct pending *p = ls.head;
        ls.head = p->next;
        if (!ls.head)
            ls.tail = NULL;
        cn = p->cn;
        free(p);
    }
    pthread_mutex_unlock(&ls.lock);
    return cn;
}

struct server_ctx {
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    atomic_uint ok, failed;
};

/* One connection, passive side: rping_setup_qp, rping_setup_buffers, post
 * the receives, rping_accept, rping_test_server, rping_disconnect. */
static bool server_connection(struct server_ctx *s, NDK_CONNECTOR *cn, unsigned num)
{
    struct rconn *c = rconn_new(s->ad, &s->info, num);
    if (!c) {
        cn->Dispatch->NdkCloseConnector(&cn->Header, dropped_connector_closed, NULL);
        return false;
    }
    c->cn = cn; /* ours from the connect event on (5.2.6) */
    bool ok = false;
    uint64_t t0 = tc_now_us();

    NDK_SOCKADDR peer;
    memset(&peer, 0, sizeof peer);
    ULONG alen = sizeof peer;
    NTSTATUS st = cn->Dispatch->NdkGetPeerAddress(cn, &peer.sa, &alen);
    if (st == STATUS_SUCCESS)
        tc_format_addr(&peer, true, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "? (NdkGetPeerAddress: %s)", ndk_status_name(st));

    /* rdma_accept(id, NULL) answers with the request's IRD/ORD: the
     * passive side's view of them (behaviour.md, IRD / ORD). */
    ULONG ird = 0, ord = 0, rds = 0;
    st = cn->Dispatch->NdkGetConnectionData(cn, &ird, &ord, NULL, &rds);
    if (st != STATUS_SUCCESS) {
        complain("NdkGetConnectionData on the request from %s failed: %s", c->peer,
                 ndk_status_name(st));
        goto out;
    }
    dbg("cma_event type RDMA_CM_EVENT_CONNECT_REQUEST from %s: IRD %" PRIu32 " ORD %" PRIu32
        ", %" PRIu32 " bytes of private data",
        c->peer, ird, ord, rds);
    if (ord == 0)
        complain("the client %s allows no RDMA Read (its IRD is 0): the server's reads will fail",
                 c->peer);

    if (!conn_create(c, false))
        goto out;
    if (!buf_setup(c, B_RECV, RQ_DEPTH * MSG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE) ||
        !buf_setup(c, B_SEND, SQ_DEPTH * MSG_LEN, 0) ||
        !buf_setup(c, B_RDMA, ro.size, rdma_buf_flags(c, true)))
        goto out;
    dbg("allocated & registered buffers...");
    for (unsigned i = 0; i < RQ_DEPTH; i++)
        if (!post_recv(c, i))
            goto out;

    dbg("accepting client connection request");
    st = cn->Dispatch->NdkAccept(cn, c->qp, ird, ord, NULL, 0, on_disconnect_event, c,
                                 tc_on_request, &c->k[K_ACCEPT]);
    st = finish(c, &c->k[K_ACCEPT], st, step_ms());
    if (st != STATUS_SUCCESS) {
        complain("rdma_accept: NdkAccept of %s failed: %s", c->peer, tc_status_name(st));
        goto out;
    }
    dbg("cma_event type RDMA_CM_EVENT_ESTABLISHED (accepted %s with IRD %" PRIu32 " ORD %" PRIu32
        ")",
        c->peer, ird, ord);

    /* A failed ping loop still disconnects. */
    bool pings_ok = server_pings(c);
    uint64_t t_pings = c->t_last > c->t_first ? c->t_last - c->t_first : 0;

    st = cn->Dispatch->NdkDisconnect(cn, tc_on_request, &c->k[K_DISCONNECT]);
    st = finish(c, &c->k[K_DISCONNECT], st, step_ms());
    /* After the client's FIN, our own disconnect has nothing to wait for;
     * after a failure the client may be gone in any way. */
    if (st != STATUS_SUCCESS && pings_ok) {
        complain("rdma_disconnect: NdkDisconnect from %s failed: %s", c->peer, tc_status_name(st));
        pings_ok = false;
    }
    if (ro.debug)
        say("server: %s: %lu ping%s of %" PRIu32 " bytes in %" PRIu64 " us (%" PRIu64
            " us each), connection %" PRIu64 " us",
            c->peer, c->pings, c->pings == 1 ? "" : "s", c->ping_size, t_pings,
            c->pings ? t_pings / c->pings : 0, tc_now_us() - t0);
    ok = pings_ok;
out:
    if (!conn_teardown(c))
        ok = false;
    return ok;
}

struct worker {
    pthread_t tid;
    struct server_ctx *s;
    NDK_CONNECTOR *cn;
    unsigned num;
    struct worker *next;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    if (server_connection(w->s, w->cn, w->num))
        atomic_fetch_add(&w->s->ok, 1);
    else
        atomic_fetch_add(&w->s->failed, 1);
    return NULL;
}

/* SIGINT/SIGTERM stop the server between connections (a second one exits
 * at once). All threads block them, the provider's included, and this one
 * takes them with sigwait, so nothing runs in a signal handler. SIGUSR1 is
 * our own "quit" for this thread. */
static void *signal_main(void *arg)
{
    (void)arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
            return NULL;
        pthread_mutex_lock(&ls.lock);
        bool again = ls.stop;
        ls.stop = true;
        pthread_cond_broadcast(&ls.cond);
        pthread_mutex_unlock(&ls.lock);
        if (again) {
            fprintf(stderr, "%s: interrupted again, exiting\n", prog);
            _exit(130);
        }
        dbg("interrupted: no further connections");
    }
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

/* rping_test_client: the pings. True if they all worked; without -C they
 * run until the server leaves, which then counts as success (as rping). */
static bool client_pings(struct rconn *c)
{
    struct rbuf *S = &c->b[B_START], *R = &c->b[B_RDMA];
    int start = 65;
    c->t_first = tc_now_us();
    for (unsigned long ping = 0; !ro.count || ping < ro.count; ping++) {
        fill_ping(S->mem, ro.size, ping, &start);
        /* Cleared first, so that -V can only pass on what the server wrote
         * this time (the server writes only after our Send below). */
        memset(R->mem, 0, ro.size);
        if (!send_adv(c, S))
            return false;
        struct rmsg m;
        bool left = false;
        if (!recv_msg(c, "the server's go-ahead after its RDMA Read (RDMA_WRITE_ADV)", &m, &left) ||
            !send_adv(c, R) ||
            !recv_msg(c, "the server's go-ahead after its RDMA Write (RDMA_WRITE_COMPLETE)", &m,
                      &left)) {
            if (!left)
                return false;
            rping_err("client DISCONNECT EVENT...");
            if (!ro.count)
                return true;
            complain("the server %s left after %lu of %lu pings", c->peer, c->pings, ro.count);
            return false;
        }
        if (ro.validate && memcmp(S->mem, R->mem, ro.size) != 0) {
            size_t i = 0;
            while (S->mem[i] == R->mem[i])
                i++;
            rping_err("data mismatch!");
            complain("ping %lu: rdma_buf differs from start_buf first at offset %zu of %" PRIu32
                     ": 0x%02x, expected 0x%02x",
                     ping, i, ro.size, R->mem[i], S->mem[i]);
            return false;
        }
        if (ro.verbose)
            say("ping data: %.*s", (int)strnlen((const char *)R->mem, ro.size),
                (const char *)R->mem);
        c->pings++;
        c->t_last = tc_now_us();
    }
    return true;
}

struct client_ctx {
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    NDK_SOCKADDR src, dst;
};

/* rping_run_client: resources, receives, connect (IRD = ORD = 1, no
 * private data), the pings, disconnect. */
static bool client_run(struct client_ctx *cl)
{
    struct rconn *c = rconn_new(cl->ad, &cl->info, 1);
    if (!c)
        return false;
    bool ok = false;
    uint64_t t0 = tc_now_us();
    char src[ADDR_BUF];
    tc_format_addr(&cl->dst, true, c->peer, sizeof c->peer);
    tc_format_addr(&cl->src, false, src, sizeof src);

    if (!conn_create(c, true))
        goto out;
    if (!buf_setup(c, B_RECV, RQ_DEPTH * MSG_LEN, NDK_MR_FLAG_ALLOW_LOCAL_WRITE) ||
        !buf_setup(c, B_SEND, SQ_DEPTH * MSG_LEN, 0) ||
        !buf_setup(c, B_RDMA, ro.size, rdma_buf_flags(c, false)) ||
        !buf_setup(c, B_START, ro.size, rdma_buf_flags(c, false)))
        goto out;
    dbg("allocated & registered buffers...");
    for (unsigned i = 0; i < RQ_DEPTH; i++)
        if (!post_recv(c, i))
            goto out;

    NDK_CONNECTOR *cn = c->cn;
    NDK_SOCKADDR from = cl->src, to = cl->dst;
    dbg("connecting to %s from %s: IRD 1 ORD 1, no private data, %s MPA%s", c->peer, src,
        ro.no_p2p ? "client/server" : "peer-to-peer", ro.crc ? ", CRC requested" : "");
    NTSTATUS st = cn->Dispatch->NdkConnect(cn, c->qp, &from.sa, tc_sockaddr_len(&from), &to.sa,
                                           tc_sockaddr_len(&to), 1, 1, NULL, 0, tc_on_request,
                                           &c->k[K_CONNECT]);
    st = finish(c, &c->k[K_CONNECT], st, connect_ms());
    if (st != STATUS_SUCCESS) {
        /* rping's "cma event RDMA_CM_EVENT_..., error N" has no NDK twin. */
        complain("connect to %s failed: %s", c->peer, tc_status_name(st));
        goto out;
    }
    ULONG ird = 0, ord = 0, rds = 0;
    st = cn->Dispatch->NdkGetConnectionData(cn, &ird, &ord, NULL, &rds);
    if (st == STATUS_SUCCESS)
        dbg("cma_event type RDMA_CM_EVENT_CONNECT_RESPONSE: effective IRD %" PRIu32 " ORD %" PRIu32
            ", %" PRIu32 " bytes of private data",
            ird, ord, rds);
    else
        complain("NdkGetConnectionData after the connect failed: %s", ndk_status_name(st));
    /* Linux siw 6.1 as responder sends its MPA Reply before it installs
     * the socket callbacks that read FPDUs; an FPDU arriving in between
     * sits unread until more bytes come, which rping's protocol never
     * sends (the harness README, "accept race"). Pausing here delays our
     * first FPDU: the RTR that NdkCompleteConnect sends in peer-to-peer
     * mode, or else our first Send. */
    if (ro.delay_first_ms) {
        dbg("waiting %u ms before the first FPDU (--delay-first)", ro.delay_first_ms);
        struct timespec pause = {.tv_sec = ro.delay_first_ms / 1000,
                                 .tv_nsec = (long)(ro.delay_first_ms % 1000) * 1000000L};
        while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
            ;
    }
    st = cn->Dispatch->NdkCompleteConnect(cn, on_disconnect_event, c, tc_on_request,
                                          &c->k[K_COMPLETE_CONNECT]);
    st = finish(c, &c->k[K_COMPLETE_CONNECT], st, step_ms());
    if (st != STATUS_SUCCESS) {
        complain("NdkCompleteConnect to %s failed: %s", c->peer, tc_status_name(st));
        goto out;
    }
    dbg("rdma_connect successful");

    bool pings_ok = client_pings(c);
    uint64_t t_pings = c->t_last > c->t_first ? c->t_last - c->t_first : 0;

    /* rping_disconnect: our FIN; it completes on the server's. */
    st = c->cn->Dispatch->NdkDisconnect(c->cn, tc_on_request, &c->k[K_DISCONNECT]);
    st = finish(c, &c->k[K_DISCONNECT], st, step_ms());
    if (st == STATUS_SUCCESS && pings_ok && !tc_comp_fired(&c->k[K_DISCONNECT_EVENT]))
        rping_err("client DISCONNECT EVENT...");
    if (st != STATUS_SUCCESS && pings_ok) {
        complain("rdma_disconnect: NdkDisconnect from %s failed: %s", c->peer, tc_status_name(st));
        pings_ok = false;
    }
    if (ro.debug)
        say("client: %s: %lu ping%s of %" PRIu32 " bytes in %" PRIu64 " us (%" PRIu64
            " us each), connection %" PRIu64 " us",
            c->peer, c->pings, c->pings == 1 ? "" : "s", ro.size, t_pings,
            c->pings ? t_pings / c->pings : 0, tc_now_us() - t0);
    ok = pings_ok;
out:
    if (!conn_teardown(c))
        ok = false;
    if (!ok)
        rping_err("rping client failed");
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

static bool open_adapter(const char *spec, ULONG flags, NDK_ADAPTER **ad, NDK_ADAPTER_INFO *info)
{
    NDK_OPEN_OPTIONS o = {
        .Size = sizeof o,
        .Flags = flags,
        .TcpConnectTimeoutMs = ro.timeout_ms,
        .MpaReplyTimeoutMs = ro.timeout_ms,
        .RtrTimeoutMs = ro.timeout_ms,
        .DisconnectTimeoutMs = ro.timeout_ms,
    };
    pthread_mutex_lock(&out_lock);
    fflush(stdout);
    NTSTATUS st = tc_open_adapter(prog, spec, &o, ad);
    pthread_mutex_unlock(&out_lock);
    if (st != STATUS_SUCCESS)
        return false;
    st = tc_query_info(*ad, info, NULL);
    if (st != STATUS_SUCCESS) {
        complain("NdkQueryAdapterInfo on '%s' failed: %s", spec, ndk_status_name(st));
        return false;
    }
    dbg("opened adapter '%s' at NDK %u.%u, flags 0x%" PRIx32, spec, info->Version.Major,
        info->Version.Minor, flags);
    return true;
}

struct closer {
    NDK_ADAPTER *ad;
    struct tc_completion done;
};

static void *closer_main(void *arg)
{
    struct closer *k = arg;
    ndk_close_adapter(k->ad);
    tc_comp_signal(&k->done, STATUS_SUCCESS, NULL, 0);
    return NULL;
}

/* ndk_close_adapter blocks until every callback has returned; it runs on a
 * helper thread so that our wait stays bounded: if it does not return,
 * that is reported and the process exits at once. */
static void close_adapter(NDK_ADAPTER *ad)
{
    if (!ad)
        return;
    struct closer *k = calloc(1, sizeof *k);
    pthread_t t;
    if (!k) {
        ndk_close_adapter(ad);
        return;
    }
    k->ad = ad;
    tc_comp_init(&k->done, "ndk_close_adapter");
    if (pthread_create(&t, NULL, closer_main, k) != 0) {
        ndk_close_adapter(ad);
    } else if (!tc_comp_wait(&k->done, step_ms())) {
        library_problem("ndk_close_adapter did not return within %u ms", step_ms());
        fflush(NULL);
        _exit(1);
    } else {
        pthread_join(t, NULL);
    }
    tc_comp_destroy(&k->done);
    free(k);
}

/* The adapter list entry for spec (NULL if none); *list must be freed. */
static const NDK_ADAPTER_DESCRIPTION *describe(const char *spec, NDK_ADAPTER_DESCRIPTION **list)
{
    ULONG n = 0;
    *list = NULL;
    if (tc_list_adapters(list, &n) != STATUS_SUCCESS)
        return NULL;
    int i = tc_find_adapter(*list, n, spec);
    return i >= 0 ? &(*list)[i] : NULL;
}

static bool parse_addr(const char *what, const char *text, NDK_SOCKADDR *out)
{
    if (tc_parse_addr(text, AF_UNSPEC, false, out))
        return true;
    /* rping's get_addr() words it like this. */
    complain("getaddrinfo failed - invalid hostname or IP address: %s '%s'", what, text);
    return false;
}

/* ------------------------------------------------------------------------ */
/* Modes                                                                    */
/* ------------------------------------------------------------------------ */

static int run_client(void)
{
    struct client_ctx cl;
    memset(&cl, 0, sizeof cl);
    if (!parse_addr("-a", ro.addr, &cl.dst))
        return 1;
    tc_sockaddr_set_port(&cl.dst, ro.port);

    /* Source: -I, else the one the route to the server leaves from; the
     * adapter: --adapter, else the one owning that source, else lo. */
    NDK_SOCKADDR src;
    memset(&src, 0, sizeof src);
    bool have_src = false;
    if (ro.source) {
        if (!parse_addr("-I", ro.source, &src))
            return 1;
        have_src = true;
    } else {
        have_src = tc_route_source(&cl.dst, &src);
    }
    char spec_buf[ADDR_BUF];
    const char *spec = ro.adapter;
    if (!spec)
        spec = have_src ? tc_format_addr(&src, false, spec_buf, sizeof spec_buf) : "lo";

    NDK_ADAPTER_DESCRIPTION *list = NULL;
    const NDK_ADAPTER_DESCRIPTION *d = describe(spec, &list);
    int rc = 1;
    ULONG flags = (ro.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0) | (ro.no_p2p ? NDK_OPEN_FLAG_NO_P2P : 0);
    /* By interface name when known: ndk_open_adapter knows only the listed
     * addresses, while all of 127.0.0.0/8 is the loopback adapter's. */
    if (!open_adapter(ro.adapter || !d ? spec : d->Name, flags, &cl.ad, &cl.info))
        goto out;
    if (have_src && (ro.source || (d && tc_desc_owns(d, &src)))) {
        cl.src = src;
    } else {
        const NDK_SOCKADDR *a =
            d ? tc_desc_pick_addr(d, cl.dst.sa.sa_family, tc_is_link_local(&cl.dst)) : NULL;
        if (!a) {
            complain("adapter %s has no %s address to connect from", spec,
                     cl.dst.sa.sa_family == AF_INET6 ? "IPv6" : "IPv4");
            goto out;
        }
        cl.src = *a;
    }
    tc_sockaddr_set_port(&cl.src, 0);
    rc = client_run(&cl) && !atomic_load(&library_problems) ? 0 : 1;
out:
    close_adapter(cl.ad);
    free(list);
    return rc;
}

static int run_server(void)
{
    struct server_ctx s;
    memset(&s, 0, sizeof s);
    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    if (ro.addr) {
        if (!parse_addr("-a", ro.addr, &addr))
            return 1;
    } else {
        addr.sa.sa_family = AF_INET; /* rping: INADDR_ANY without -a */
    }
    tc_sockaddr_set_port(&addr, ro.port);
    bool wildcard = addr.sa.sa_family == AF_INET6 ? IN6_IS_ADDR_UNSPECIFIED(&addr.in6.sin6_addr)
                                                  : addr.in4.sin_addr.s_addr == htonl(INADDR_ANY);
    char spec_buf[ADDR_BUF];
    const char *spec = ro.adapter;
    /* A wildcard names no adapter: lo, whose listener takes any address. */
    if (!spec)
        spec = wildcard ? "lo" : tc_format_addr(&addr, false, spec_buf, sizeof spec_buf);

    tc_cond_init_mono(&ls.cond);

    /* Blocked before any thread exists, so that every thread inherits it
     * and only signal_main takes the signals. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t sig_thread;
    bool have_sig_thread = pthread_create(&sig_thread, NULL, signal_main, NULL) == 0;

    int rc = 1;
    NDK_LISTENER *listener = NULL;
    struct tc_completion k_create, k_listen, k_close;
    tc_comp_init(&k_create, "NdkCreateListener");
    tc_comp_init(&k_listen, "NdkListen");
    tc_comp_init(&k_close, "NdkCloseListener");
    struct worker *workers = NULL;
    unsigned handled = 0;
    NDK_ADAPTER_DESCRIPTION *list = NULL;
    const NDK_ADAPTER_DESCRIPTION *d = describe(spec, &list);
    if (!open_adapter(ro.adapter || !d ? spec : d->Name, ro.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0,
                      &s.ad, &s.info))
        goto out;

    NDK_LISTENER *l = NULL;
    NTSTATUS st = s.ad->Dispatch->NdkCreateListener(s.ad, on_connect_event, NULL, tc_on_create,
                                                    &k_create, &l);
    st = tc_comp_finish(&k_create, st, step_ms());
    if (st != STATUS_SUCCESS) {
        complain("NdkCreateListener failed: %s", tc_status_name(st));
        goto out;
    }
    listener = tc_comp_object(&k_create, l);
    if (!listener) {
        library_problem("NdkCreateListener succeeded without giving an object");
        goto out;
    }
    char a[ADDR_BUF];
    st = listener->Dispatch->NdkListen(listener, &addr.sa, tc_sockaddr_len(&addr), tc_on_request,
                                       &k_listen);
    st = tc_comp_finish(&k_listen, st, step_ms());
    if (st != STATUS_SUCCESS) {
        /* rping: "rdma_bind_addr: Address already in use" and the like. */
        complain("rdma_bind_addr: listen on %s failed: %s",
                 tc_format_addr(&addr, true, a, sizeof a), tc_status_name(st));
        goto out;
    }
    dbg("rdma_bind_addr successful");
    /* With -p 0 the provider picks the port: the listener tells which. The
     * line comes after the listen has completed, so that a script may
     * connect as soon as it sees it. */
    NDK_SOCKADDR bound = addr;
    ULONG blen = sizeof bound;
    st = listener->Dispatch->NdkGetLocalAddress(listener, &bound.sa, &blen);
    if (st != STATUS_SUCCESS) {
        complain("NdkGetLocalAddress on the listener failed: %s", ndk_status_name(st));
        bound = addr;
    }
    dbg("rdma_listen on %s", tc_format_addr(&bound, true, a, sizeof a));

    NDK_CONNECTOR *cn;
    while ((ro.persistent || handled == 0) && (cn = next_request()) != NULL) {
        handled++;
        if (!ro.persistent) {
            /* rping_run_server: one connection, on this thread. */
            if (server_connection(&s, cn, handled))
                atomic_fetch_add(&s.ok, 1);
            else
                atomic_fetch_add(&s.failed, 1);
            break;
        }
        /* rping_run_persistent_server: a thread per connection. */
        struct worker *w = calloc(1, sizeof *w);
        if (!w) {
            complain("out of memory");
            cn->Dispatch->NdkCloseConnector(&cn->Header, dropped_connector_closed, NULL);
            atomic_fetch_add(&s.failed, 1);
            continue;
        }
        *w = (struct worker){.s = &s, .cn = cn, .num = handled, .next = workers};
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) {
            complain("pthread_create: cannot start a connection thread");
            cn->Dispatch->NdkCloseConnector(&cn->Header, dropped_connector_closed, NULL);
            atomic_fetch_add(&s.failed, 1);
            free(w);
            continue;
        }
        workers = w;
    }
    /* Each connection thread ends within its own bounded waits. */
    while (workers) {
        struct worker *w = workers;
        workers = w->next;
        pthread_join(w->tid, NULL);
        free(w);
    }
    if (ro.persistent && ro.debug)
        say("server: %u connection%s, %u ok, %u failed", handled, handled == 1 ? "" : "s",
            atomic_load(&s.ok), atomic_load(&s.failed));
    rc = handled > 0 && atomic_load(&s.failed) == 0 && !atomic_load(&library_problems) ? 0 : 1;
    /* A persistent server stopped before any client came has done all it
     * was asked. */
    if (ro.persistent && handled == 0 && !atomic_load(&library_problems))
        rc = 0;
out:
    if (listener) {
        st = tc_close(listener->Dispatch->NdkCloseListener, &listener->Header, &k_close, step_ms(),
                      prog);
        if (st != STATUS_SUCCESS) {
            atomic_fetch_add(&library_problems, 1);
            rc = 1;
        }
    }
    /* Requests that came but were not served: closing rejects them. */
    pthread_mutex_lock(&ls.lock);
    ls.stop = true;
    pthread_mutex_unlock(&ls.lock);
    for (NDK_CONNECTOR *left; (left = next_request()) != NULL;) {
        struct tc_completion k;
        tc_comp_init(&k, "NdkCloseConnector (unserved request)");
        tc_close(left->Dispatch->NdkCloseConnector, &left->Header, &k, step_ms(), prog);
        tc_comp_destroy(&k);
    }
    close_adapter(s.ad);
    if (have_sig_thread) {
        pthread_kill(sig_thread, SIGUSR1);
        pthread_join(sig_thread, NULL);
    }
    tc_comp_destroy(&k_create);
    tc_comp_destroy(&k_listen);
    tc_comp_destroy(&k_close);
    free(list);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  %1$s --rping -s [-vVd] [-S size] [-C count] [-a addr] [-p port] [-P]\n"
            "  %1$s --rping -c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]\n"
            "\n"
            "rdma-core's rping over NDK: the same protocol, byte for byte, so that the peer\n"
            "may be the real rping (e.g. on Linux siw) or another ndkping --rping.\n"
            "\n"
            "rping's options:\n"
            "  -s             server side\n"
            "  -c             client side\n"
            "  -a addr        client: the server's address (required); server: the address\n"
            "                 to listen on (default: any IPv4 address)\n"
            "  -I addr        client: source address to bind to\n"
            "  -p port        port (default %2$u)\n"
            "  -C count       ping count (default: until the peer leaves). Unlike rping, a\n"
            "                 server given -C fails a connection that does not make exactly\n"
            "                 that many pings, and a client fails if the server leaves early\n"
            "  -S size        ping data size, %3$u to %4$u (default %5$u; rping itself takes at\n"
            "                 most %6$u); the server grows its buffer to the client's size\n"
            "  -v             display ping data to stdout\n"
            "  -V             validate ping data (client)\n"
            "  -d             debug printfs (-dd: also every NDK call and registration)\n"
            "  -P             persistent server: a thread per connection, until SIGINT/SIGTERM\n"
            "  -q             accepted for compatibility (rping's self-created QP); no effect\n"
            "\n"
            "NDK options:\n"
            "      --adapter=ADAPTER  interface name or address of the adapter (default: the\n"
            "                         adapter owning the source / listen address, else lo)\n"
            "      --no-p2p           client: client/server MPA (A=0), no RTR, as siw's\n"
            "                         initiator (NDK_OPEN_FLAG_NO_P2P); default peer-to-peer\n"
            "      --crc              ask for MPA CRC32c (NDK_OPEN_FLAG_REQUEST_CRC)\n"
            "      --delay-first=MS   client: pause MS between the MPA Reply and the first\n"
            "                         FPDU (peer-to-peer: the RTR, else the first Send), for\n"
            "                         Linux siw 6.1 servers, which may leave an FPDU that\n"
            "                         comes right after their Reply unread (default 0)\n"
            "      --timeout=MS       limit for every wait within a connection, and the\n"
            "                         provider's connect, MPA, RTR and disconnect timeouts\n"
            "                         (default %7$u; ndkping waits MS + %8$u)\n"
            "  -h, --help             this text\n"
            "\n"
            "Exit status: 0 success, 1 failure, 2 usage error.\n",
            prog, RPING_DEFAULT_PORT, RPING_MIN_SIZE, RPING_MAX_SIZE, RPING_DEFAULT_SIZE,
            RPING_RPING_MAX, DEFAULT_TIMEOUT_MS, GRACE_MS);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --rping --help'.\n", prog);
    va_end(ap);
    return 2;
}

static bool parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

enum { OPT_RPING = 0x100, OPT_ADAPTER, OPT_NO_P2P, OPT_CRC, OPT_TIMEOUT, OPT_DELAY_FIRST };

bool ndkping_rping_requested(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--rping") == 0)
            return true;
    }
    return false;
}

/* -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"rping", no_argument, NULL, OPT_RPING},
        {"adapter", required_argument, NULL, OPT_ADAPTER},
        {"no-p2p", no_argument, NULL, OPT_NO_P2P},
        {"crc", no_argument, NULL, OPT_CRC},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"delay-first", required_argument, NULL, OPT_DELAY_FIRST},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned long v;
    int ch;
    ro.port = RPING_DEFAULT_PORT;
    ro.size = RPING_DEFAULT_SIZE;
    ro.timeout_ms = DEFAULT_TIMEOUT_MS;
    /* "+": a stray argument is reported instead of being moved past the
     * options. */
    while ((ch = getopt_long(argc, argv, "+a:I:Pp:C:S:scvVdqh", longopts, NULL)) != -1) {
        switch (ch) {
        case OPT_RPING:
            break;
        case 'a':
            ro.addr = optarg;
            break;
        case 'I':
            ro.source = optarg;
            break;
        case 'P':
            ro.persistent = true;
            break;
        case 'p':
            if (!parse_ulong(optarg, 0, 65535, &v))
                return usage_error("invalid port '%s'", optarg);
            ro.port = (unsigned)v;
            break;
        case 'C':
            if (!parse_ulong(optarg, 0, ULONG_MAX, &v))
                return usage_error("Invalid count %s", optarg);
            ro.count = v;
            ro.count_given = v > 0;
            break;
        case 'S':
            if (!parse_ulong(optarg, 0, ULONG_MAX, &v) || v < RPING_MIN_SIZE || v > RPING_MAX_SIZE)
                return usage_error("Invalid size %s (valid range is %u to %u)", optarg,
                                   RPING_MIN_SIZE, RPING_MAX_SIZE);
            ro.size = (ULONG)v;
            break;
        case 's':
            ro.server = true;
            break;
        case 'c':
            ro.client = true;
            break;
        case 'v':
            ro.verbose = true;
            break;
        case 'V':
            ro.validate = true;
            break;
        case 'd':
            ro.debug++;
            break;
        case 'q':
            break;
        case OPT_ADAPTER:
            ro.adapter = optarg;
            break;
        case OPT_NO_P2P:
            ro.no_p2p = true;
            break;
        case OPT_CRC:
            ro.crc = true;
            break;
        case OPT_TIMEOUT:
            if (!parse_ulong(optarg, 1, 3600000, &v))
                return usage_error("invalid timeout '%s' (1 to 3600000 ms)", optarg);
            ro.timeout_ms = (unsigned)v;
            break;
        case OPT_DELAY_FIRST:
            if (!parse_ulong(optarg, 0, 60000, &v))
                return usage_error("invalid delay '%s' (0 to 60000 ms)", optarg);
            ro.delay_first_ms = (unsigned)v;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "Try '%s --rping --help'.\n", prog);
            return 2;
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (ro.server == ro.client)
        return usage_error("choose -s (server) or -c (client)");
    if (ro.client && !ro.addr)
        return usage_error("the client needs the server's address (-a)");
    if (ro.client && ro.port == 0)
        return usage_error("the client needs the server's port (-p)");
    if (ro.client && ro.persistent)
        return usage_error("-P is a server option");
    if (ro.server && ro.source)
        return usage_error("-I is a client option");
    if (ro.server && (ro.no_p2p || ro.delay_first_ms))
        return usage_error("%s is a client option (the server answers what it is asked)",
                           ro.no_p2p ? "--no-p2p" : "--delay-first");
    return -1;
}

int ndkping_rping_main(int argc, char **argv)
{
    int rc = parse_options(argc, argv);
    if (rc >= 0)
        return rc;
    /* Whole lines in order even through a pipe (CTest, tee, a script). */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (ro.debug) {
        dbg("%s", ro.server ? "server" : "client");
        dbg("port %u", ro.port);
        dbg("size %" PRIu32, ro.size);
        if (ro.count)
            dbg("count %lu", ro.count);
        if (ro.verbose)
            dbg("verbose");
        if (ro.validate)
            dbg("validate data");
    }
    return ro.server ? run_server() : run_client();
}
