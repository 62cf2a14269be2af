/*
 * endpoint.c - one end of an ndkperf connection: the adapter and the NDK
 * objects of the test (CQ, PD, MR, QP, connector, listener), the
 * connection phase with the out-of-band exchange in the private data, the
 * disconnect, and closing everything.
 *
 * Every asynchronous call is finished the way reference section 4 allows:
 * an inline result is final; STATUS_PENDING is followed by exactly one
 * callback on the provider's thread, which we wait for with a bound. A
 * callback that never comes means the library hung: that is reported and
 * the process exits at once, since closing objects would hang as well.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ndkperf.h"

/* ndkperf waits this much longer than the provider's own timeouts, so that
 * a provider timeout shows up as the provider's status. */
#define GRACE_MS 2000

/* ------------------------------------------------------------------------ */
/* Waiting for one asynchronous call                                        */
/* ------------------------------------------------------------------------ */

/*
 * One asynchronous call: a tc_completion (toolcommon.h) that is never
 * reused and stays allocated until the adapter is closed (after which no
 * callback can run, rule L12), so a late or duplicate callback from a
 * misbehaving provider cannot write into memory given to something else.
 */
struct waiter {
    struct waiter *next;
    struct tc_completion c;
};

/* The completion for one call (NULL after saying why); callbacks are
 * toolcommon's tc_on_*, with the completion as their context. */
static struct tc_completion *waiter_new(struct endpoint *e)
{
    struct waiter *w = calloc(1, sizeof *w);
    if (!w) {
        complain(e->role, "out of memory");
        return NULL;
    }
    tc_comp_init(&w->c, NULL);
    w->next = e->waiters;
    e->waiters = w;
    return &w->c;
}

/* Closes of connectors we refuse from inside the connect event: nobody
 * waits for them; ndk_close_adapter does. */
static VOID on_close_ignored(PVOID ctx)
{
    (void)ctx;
}

/* The final status of a call that returned st. */
static NTSTATUS finish(struct endpoint *e, struct tc_completion *w, NTSTATUS st, const char *call, unsigned ms)
{
    st = tc_comp_finish(w, st, ms);
    if (st == TC_STATUS_NO_CALLBACK) {
        library_problem(e->role, "%s returned STATUS_PENDING and its completion callback did not come "
                                 "within %u ms; exiting without closing (closes would hang too)",
                        call, ms);
        fflush(NULL);
        _exit(1);
    }
    return st;
}

/* A create that returned st: the new object, or NULL after saying why. */
static void *finish_create(struct endpoint *e, struct tc_completion *w, NTSTATUS st, void *inline_obj,
                           const char *call)
{
    st = finish(e, w, st, call, e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, call, st, NULL);
        return NULL;
    }
    void *obj = tc_comp_object(w, inline_obj);
    if (!obj)
        library_problem(e->role, "%s succeeded without giving an object", call);
    return obj;
}

static bool close_object(struct endpoint *e, NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj, const char *call)
{
    struct tc_completion *w = waiter_new(e);
    if (!w)
        return false;
    NTSTATUS st = fn(obj, tc_on_close, w);
    if (st != STATUS_SUCCESS && st != STATUS_PENDING) {
        library_problem(e->role, "%s returned %s; a close returns only STATUS_SUCCESS or STATUS_PENDING",
                        call, ndk_status_name(st));
        return false;
    }
    finish(e, w, st, call, e->opt->timeout_ms + GRACE_MS);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Private data: the out-of-band exchange                                   */
/* ------------------------------------------------------------------------ */

/*
 * Big-endian, as perftest sends its pingpong_dest:
 *   0  VA of the buffer the peer may write to / read from (8)
 *   8  its remote token (4)
 *  12  its size in bytes (4)
 *  16  "NDKP", version 1, then (request only) the test, flags (bit 0: -a),
 *      one reserved byte, -s, -n, -D in ms, the receive depth, the warm-up.
 * NDK private data is made for this: it arrives with the connect request
 * and the accept, before either side can post anything, so no extra
 * message exchange is needed.
 */
#define PDATA_MAGIC 0x4e444b50u /* "NDKP" */
#define PDATA_VERSION 1

static void put_buf(uint8_t *p, const struct remote_buf *b)
{
    tc_put_be64(p, b->va);
    tc_put_be32(p + 8, b->token);
    tc_put_be32(p + 12, b->size);
    tc_put_be32(p + 16, PDATA_MAGIC);
    p[20] = PDATA_VERSION;
}

static bool get_buf(const uint8_t *p, uint32_t len, uint32_t need, struct remote_buf *b, const char **why)
{
    if (len < need) {
        *why = "private data too short for ndkperf";
        return false;
    }
    if (tc_get_be32(p + 16) != PDATA_MAGIC) {
        *why = "private data is not from ndkperf";
        return false;
    }
    if (p[20] != PDATA_VERSION) {
        *why = "private data from another ndkperf version";
        return false;
    }
    b->va = tc_get_be64(p);
    b->token = tc_get_be32(p + 8);
    b->size = tc_get_be32(p + 12);
    return true;
}

void pdata_put_request(uint8_t *p, const struct remote_buf *b, const struct test_params *tp)
{
    memset(p, 0, PDATA_REQ_LEN);
    put_buf(p, b);
    p[21] = (uint8_t)tp->test;
    p[22] = tp->all_sizes ? 1 : 0;
    tc_put_be32(p + 24, tp->size);
    tc_put_be32(p + 28, tp->iters);
    tc_put_be32(p + 32, tp->duration_ms);
    tc_put_be32(p + 36, tp->rx_depth);
    tc_put_be32(p + 40, tp->warmup);
}

bool pdata_get_request(const uint8_t *p, uint32_t len, struct remote_buf *b, struct test_params *tp,
                       const char **why)
{
    if (!get_buf(p, len, PDATA_REQ_LEN, b, why))
        return false;
    if (p[21] >= T_COUNT) {
        *why = "unknown test in the request";
        return false;
    }
    tp->test = (enum test_kind)p[21];
    tp->all_sizes = p[22] & 1;
    tp->size = tc_get_be32(p + 24);
    tp->iters = tc_get_be32(p + 28);
    tp->duration_ms = tc_get_be32(p + 32);
    tp->rx_depth = tc_get_be32(p + 36);
    tp->warmup = tc_get_be32(p + 40);
    if (tp->size == 0 || tp->size > NDKPERF_MAX_SIZE || (tp->iters == 0) == (tp->duration_ms == 0) ||
        tp->rx_depth == 0) {
        *why = "invalid test parameters in the request";
        return false;
    }
    return true;
}

void pdata_put_reply(uint8_t *p, const struct remote_buf *b)
{
    memset(p, 0, PDATA_REP_LEN);
    put_buf(p, b);
}

bool pdata_get_reply(const uint8_t *p, uint32_t len, struct remote_buf *b, const char **why)
{
    return get_buf(p, len, PDATA_REP_LEN, b, why);
}

/* ------------------------------------------------------------------------ */
/* Adapter                                                                  */
/* ------------------------------------------------------------------------ */

bool ep_init(struct endpoint *e, const char *role, const struct options *o)
{
    memset(e, 0, sizeof *e);
    e->role = role;
    e->opt = o;
    pthread_mutex_init(&e->lock, NULL);
    tc_cond_init_mono(&e->cond);
    atomic_init(&e->disconnected, false);
    return true;
}

/* The interface behind spec (a name or an address), for the header line. */
static void describe_adapter(struct endpoint *e, const char *spec)
{
    snprintf(e->adapter_name, sizeof e->adapter_name, "%s", spec);
    ULONG n = 0;
    if (ndk_list_adapters(NULL, &n) != STATUS_BUFFER_TOO_SMALL && n == 0)
        return;
    n += 4; /* room for an interface that appears meanwhile */
    NDK_ADAPTER_DESCRIPTION *list = calloc(n, sizeof *list);
    if (!list)
        return;
    NDK_SOCKADDR a;
    memset(&a, 0, sizeof a);
    bool is_v4 = inet_pton(AF_INET, spec, &a.in4.sin_addr) == 1;
    bool is_v6 = !is_v4 && inet_pton(AF_INET6, spec, &a.in6.sin6_addr) == 1;
    a.sa.sa_family = is_v4 ? AF_INET : AF_INET6;
    if (ndk_list_adapters(list, &n) == STATUS_SUCCESS) {
        for (ULONG i = 0; i < n; i++) {
            bool match = strcmp(list[i].Name, spec) == 0;
            for (ULONG k = 0; !match && (is_v4 || is_v6) && k < list[i].AddressCount &&
                              k < NDK_MAX_ADAPTER_ADDRESSES;
                 k++)
                match = tc_same_ip(&list[i].Addresses[k], &a);
            /* Every 127.0.0.0/8 address belongs to the loopback adapter. */
            if (!match && is_v4 && (ntohl(a.in4.sin_addr.s_addr) >> 24) == 127)
                match = (list[i].Flags & NDK_ADAPTER_DESC_LOOPBACK) != 0;
            if (match) {
                if (strcmp(list[i].Name, spec) != 0)
                    snprintf(e->adapter_name, sizeof e->adapter_name, "%s (%s)", list[i].Name, spec);
                break;
            }
        }
    }
    free(list);
}

bool ep_open(struct endpoint *e, const char *spec)
{
    const struct options *o = e->opt;
    /* The provider's own timeouts follow --timeout, so that a slow step is
     * reported by the provider (STATUS_IO_TIMEOUT) before ndkperf gives up. */
    NDK_OPEN_OPTIONS oo = {
        .Size = sizeof oo,
        .Flags = o->crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0,
        .TcpConnectTimeoutMs = o->timeout_ms,
        .MpaReplyTimeoutMs = o->timeout_ms,
        .RtrTimeoutMs = o->timeout_ms,
        .DisconnectTimeoutMs = o->timeout_ms,
    };
#ifdef NDK_OPEN_FLAG_BUSY_POLL
    if (o->busy_poll)
        oo.Flags |= NDK_OPEN_FLAG_BUSY_POLL;
#endif
#ifdef NDK_OPEN_FLAG_RELAXED_TX_GATE
    /* perftest's write_lat server writes first; a client/server initiator
     * (siw) sends nothing until it has, so a server must not wait for it. */
    if (strcmp(e->role, "server") == 0)
        oo.Flags |= NDK_OPEN_FLAG_RELAXED_TX_GATE;
#endif
    NDK_VERSION v = {NDK_PROVIDER_MAJOR_VERSION, NDK_PROVIDER_MINOR_VERSION};
    NTSTATUS st = ndk_open_adapter(spec, v, &oo, &e->ad);
    if (st != STATUS_SUCCESS) {
        e->ad = NULL;
        ndk_failed(e->role, "ndk_open_adapter", st, "adapter '%s'", spec);
        return false;
    }
    /* The documented way: probe the size, then query into that much. */
    ULONG need = 0;
    st = e->ad->Dispatch->NdkQueryAdapterInfo(e->ad, NULL, &need);
    if (st != STATUS_BUFFER_TOO_SMALL && st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkQueryAdapterInfo", st, "size probe");
        return false;
    }
    ULONG cap = need > sizeof e->info ? need : (ULONG)sizeof e->info;
    void *buf = calloc(1, cap);
    if (!buf) {
        complain(e->role, "out of memory");
        return false;
    }
    st = e->ad->Dispatch->NdkQueryAdapterInfo(e->ad, buf, &cap);
    if (st == STATUS_SUCCESS)
        memcpy(&e->info, buf, sizeof e->info);
    free(buf);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkQueryAdapterInfo", st, NULL);
        return false;
    }
    describe_adapter(e, spec);
    return true;
}

/* ------------------------------------------------------------------------ */
/* Objects of the test                                                      */
/* ------------------------------------------------------------------------ */

static size_t round_up(size_t v, size_t to)
{
    return (v + to - 1) / to * to;
}

bool ep_create(struct endpoint *e, const struct layout *l)
{
    NDK_ADAPTER *ad = e->ad;
    const NDK_ADAPTER_INFO *in = &e->info;
    if (l->cq_depth > in->MaxCqDepth || l->sq_depth > in->MaxInitiatorQueueDepth ||
        l->rq_depth > in->MaxReceiveQueueDepth) {
        complain(e->role, "the test needs a CQ of %" PRIu32 ", %" PRIu32 " initiator and %" PRIu32
                          " receive entries; the adapter allows %" PRIu32 ", %" PRIu32 " and %" PRIu32
                          " (lower -q or -r)",
                 l->cq_depth, l->sq_depth, l->rq_depth, in->MaxCqDepth, in->MaxInitiatorQueueDepth,
                 in->MaxReceiveQueueDepth);
        return false;
    }
    if (l->region > in->MaxTransferLength) {
        complain(e->role, "messages of %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32,
                 l->region, in->MaxTransferLength);
        return false;
    }

    struct tc_completion *w;
    NDK_CQ *cq = NULL;
    if (!(w = waiter_new(e)))
        return false;
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, l->cq_depth, cq_notification, e, NULL, tc_on_create, w, &cq);
    if (!(e->cq = finish_create(e, w, st, cq, "NdkCreateCq")))
        return false;

    NDK_PD *pd = NULL;
    if (!(w = waiter_new(e)))
        return false;
    st = ad->Dispatch->NdkCreatePd(ad, tc_on_create, w, &pd);
    if (!(e->pd = finish_create(e, w, st, pd, "NdkCreatePd")))
        return false;

    /* One allocation, page aligned, cache-line aligned parts; touched once
     * so the first messages do not pay for page faults. */
    e->region = l->region;
    e->ctrl_tx_slots = l->ctrl_tx_slots;
    e->ctrl_rx_slots = l->ctrl_rx_slots;
    size_t part = round_up(l->region, 64);
    e->mem_size = round_up(2 * part + (size_t)(l->ctrl_tx_slots + l->ctrl_rx_slots) * CTRL_SLOT, 4096);
    e->mem = aligned_alloc(4096, e->mem_size);
    if (!e->mem) {
        complain(e->role, "cannot allocate %zu bytes of buffer", e->mem_size);
        return false;
    }
    memset(e->mem, 0, e->mem_size);
    e->target = e->mem;
    e->source = e->mem + part;
    e->ctrl_tx = e->source + part;
    e->ctrl_rx = e->ctrl_tx + (size_t)l->ctrl_tx_slots * CTRL_SLOT;
    /* Recognizable payload; write_lat overwrites the last byte each time. */
    memset(e->source, 0xa5, l->region);

    NDK_MR *mr = NULL;
    if (!(w = waiter_new(e)))
        return false;
    st = e->pd->Dispatch->NdkCreateMr(e->pd, FALSE, tc_on_create, w, &mr);
    if (!(e->mr = finish_create(e, w, st, mr, "NdkCreateMr")))
        return false;
    /* The Linux stand-in for an MDL: one virtually contiguous range. */
    MDL mdl = {.Next = NULL, .StartVa = e->mem, .ByteOffset = 0, .ByteCount = (ULONG)e->mem_size};
    ULONG flags = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                  NDK_MR_FLAG_ALLOW_REMOTE_WRITE | NDK_MR_FLAG_RDMA_READ_SINK;
    if (!(w = waiter_new(e)))
        return false;
    st = e->mr->Dispatch->NdkRegisterMr(e->mr, &mdl, e->mem_size, flags, tc_on_request, w);
    st = finish(e, w, st, "NdkRegisterMr", e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkRegisterMr", st, "%zu bytes", e->mem_size);
        return false;
    }
    e->mr_registered = true;
    e->ltoken = e->mr->Dispatch->NdkGetLocalTokenFromMr(e->mr);
    e->local.va = (uint64_t)(uintptr_t)e->target;
    e->local.token = e->mr->Dispatch->NdkGetRemoteTokenFromMr(e->mr);
    e->local.size = l->region;

    NDK_QP *qp = NULL;
    if (!(w = waiter_new(e)))
        return false;
    st = e->pd->Dispatch->NdkCreateQp(e->pd, e->cq, e->cq, e, l->rq_depth, l->sq_depth, 1, 1,
                                      l->inline_size, tc_on_create, w, &qp);
    if (!(e->qp = finish_create(e, w, st, qp, "NdkCreateQp")))
        return false;
    e->qp_inline = l->inline_size;
    e->rq_depth = l->rq_depth;
    e->sq_limit = l->sq_depth;
    e->signal_every = l->signal_every ? l->signal_every : 1;
    e->sq_op = calloc(l->ctrl_tx_slots, 1);
    if (!e->sq_op) {
        complain(e->role, "out of memory");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* Connection                                                               */
/* ------------------------------------------------------------------------ */

/* A server serves one client (as perftest does); a second request while
 * the first is being served is refused by closing its connector. */
static VOID on_connect_event(PVOID ctx, NDK_CONNECTOR *cn)
{
    struct endpoint *e = ctx;
    pthread_mutex_lock(&e->lock);
    bool take = e->incoming == NULL && e->requests < (e->max_requests ? e->max_requests : 1u);
    if (take)
        e->incoming = cn;
    e->requests++;
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
    if (!take)
        cn->Dispatch->NdkCloseConnector(&cn->Header, on_close_ignored, NULL);
}

VOID disconnect_event(PVOID ctx)
{
    struct endpoint *e = ctx;
    pthread_mutex_lock(&e->lock);
    atomic_store(&e->disconnected, true);
    pthread_cond_broadcast(&e->cond);
    pthread_mutex_unlock(&e->lock);
}

bool ep_listen(struct endpoint *e, const NDK_SOCKADDR *addr, NDK_SOCKADDR *bound)
{
    struct tc_completion *w = waiter_new(e);
    if (!w)
        return false;
    NDK_LISTENER *ln = NULL;
    NTSTATUS st = e->ad->Dispatch->NdkCreateListener(e->ad, on_connect_event, e, tc_on_create, w, &ln);
    if (!(e->ln = finish_create(e, w, st, ln, "NdkCreateListener")))
        return false;
    if (!(w = waiter_new(e)))
        return false;
    NDK_SOCKADDR a = *addr;
    st = e->ln->Dispatch->NdkListen(e->ln, &a.sa, tc_sockaddr_len(&a), tc_on_request, w);
    st = finish(e, w, st, "NdkListen", e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS) {
        char ip[INET6_ADDRSTRLEN] = "?";
        inet_ntop(a.sa.sa_family, a.sa.sa_family == AF_INET6 ? (void *)&a.in6.sin6_addr : (void *)&a.in4.sin_addr,
                  ip, sizeof ip);
        ndk_failed(e->role, "NdkListen", st, "%s port %u", ip,
                   ntohs(a.sa.sa_family == AF_INET6 ? a.in6.sin6_port : a.in4.sin_port));
        return false;
    }
    /* With port 0 the provider chose the port: the listener tells which. */
    ULONG len = sizeof *bound;
    memset(bound, 0, sizeof *bound);
    st = e->ln->Dispatch->NdkGetLocalAddress(e->ln, &bound->sa, &len);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkGetLocalAddress", st, "listener");
        return false;
    }
    return true;
}

bool ep_wait_request(struct endpoint *e, unsigned ms)
{
    struct timespec dl;
    tc_deadline(&dl, ms);
    pthread_mutex_lock(&e->lock);
    while (!e->incoming)
        if (pthread_cond_timedwait(&e->cond, &e->lock, &dl) == ETIMEDOUT)
            break;
    e->cn = e->incoming;
    e->incoming = NULL;
    pthread_mutex_unlock(&e->lock);
    if (!e->cn) {
        complain(e->role, "no client connected within %u s", ms / 1000);
        return false;
    }
    /* One client per run: further requests are refused at once from now
     * on, once the last connection wanted has come (perftest's mode wants
     * two). (The listener itself stays open until the connector is closed:
     * it is the connector's antecedent, reference 2.2, so its close would
     * wait for the connector's.) */
    pthread_mutex_lock(&e->lock);
    bool last = e->requests >= (e->max_requests ? e->max_requests : 1u);
    pthread_mutex_unlock(&e->lock);
    if (last)
        e->ln->Dispatch->NdkControlConnectEvents(e->ln, TRUE);
    return true;
}

bool ep_request_data(struct endpoint *e, uint8_t *buf, uint32_t cap, uint32_t *len, ULONG *ird, ULONG *ord)
{
    /* Size probe first (reference 5.10.6 rule 1), then the read. */
    ULONG rds = 0;
    NTSTATUS st = e->cn->Dispatch->NdkGetConnectionData(e->cn, ird, ord, NULL, &rds);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkGetConnectionData", st, "size probe");
        return false;
    }
    if (rds > cap) {
        complain(e->role, "the peer sent %" PRIu32 " bytes of private data, more than ndkperf's %" PRIu32,
                 rds, cap);
        *len = rds;
        return true; /* the caller rejects it as foreign */
    }
    ULONG got = rds;
    st = e->cn->Dispatch->NdkGetConnectionData(e->cn, ird, ord, rds ? buf : NULL, &got);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkGetConnectionData", st, NULL);
        return false;
    }
    *len = got < rds ? got : rds;
    return true;
}

/* The reason goes back in the reject's private data, so the client can
 * print it (the active side can read it after the refused connect). */
bool ep_reject(struct endpoint *e, const char *why)
{
    complain(e->role, "rejecting the connection: %s", why);
    ULONG len = (ULONG)strlen(why);
    if (len > e->info.MaxCalleeData)
        len = e->info.MaxCalleeData;
    NTSTATUS st = e->cn->Dispatch->NdkReject(e->cn, (PVOID)why, len);
    if (st != STATUS_SUCCESS)
        ndk_failed(e->role, "NdkReject", st, NULL);
    return false;
}

bool ep_accept(struct endpoint *e, const uint8_t *pdata, uint32_t len, ULONG ird, ULONG ord)
{
    struct tc_completion *w = waiter_new(e);
    if (!w)
        return false;
    NTSTATUS st = e->cn->Dispatch->NdkAccept(e->cn, e->qp, ird, ord, (PVOID)pdata, len, disconnect_event, e,
                                             tc_on_request, w);
    st = finish(e, w, st, "NdkAccept", e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkAccept", st, NULL);
        return false;
    }
    /* What reference 7.4 makes of both requests; the passive side cannot
     * ask GetConnectionData after the accept. */
    e->ird = ird;
    e->ord = ord;
    e->connected = true;
    return true;
}

bool ep_connect(struct endpoint *e, const NDK_SOCKADDR *src, const NDK_SOCKADDR *dst, const uint8_t *pdata,
                uint32_t len, ULONG ird, ULONG ord, uint8_t *reply, uint32_t cap, uint32_t *reply_len)
{
    struct tc_completion *w = waiter_new(e);
    if (!w)
        return false;
    NDK_CONNECTOR *cn = NULL;
    NTSTATUS st = e->ad->Dispatch->NdkCreateConnector(e->ad, tc_on_create, w, &cn);
    if (!(e->cn = finish_create(e, w, st, cn, "NdkCreateConnector")))
        return false;

    if (!(w = waiter_new(e)))
        return false;
    NDK_SOCKADDR from = *src, to = *dst;
    st = e->cn->Dispatch->NdkConnect(e->cn, e->qp, &from.sa, tc_sockaddr_len(&from), &to.sa, tc_sockaddr_len(&to), ird, ord,
                                     (PVOID)pdata, len, tc_on_request, w);
    /* The TCP handshake and the MPA Reply may each take the timeout. */
    st = finish(e, w, st, "NdkConnect", 2 * e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS && e->quiet_connect)
        return false; /* the caller tries again, and reports the last failure */
    if (st == STATUS_CONNECTION_REFUSED) {
        /* A server that rejected us said why in its private data. */
        char why[256];
        ULONG n = sizeof why - 1;
        if (e->cn->Dispatch->NdkGetConnectionData(e->cn, NULL, NULL, why, &n) == STATUS_SUCCESS && n > 0) {
            why[n < sizeof why ? n : sizeof why - 1] = '\0';
            complain(e->role, "the server refused the connection: %s", why);
            return false;
        }
    }
    if (st != STATUS_SUCCESS) {
        char ip[INET6_ADDRSTRLEN] = "?";
        inet_ntop(to.sa.sa_family, to.sa.sa_family == AF_INET6 ? (void *)&to.in6.sin6_addr : (void *)&to.in4.sin_addr,
                  ip, sizeof ip);
        ndk_failed(e->role, "NdkConnect", st, "to %s port %u%s", ip,
                   ntohs(to.sa.sa_family == AF_INET6 ? to.in6.sin6_port : to.in4.sin_port),
                   st == STATUS_CONNECTION_REFUSED ? ": is the server running (ndkperf TEST -S)?" : "");
        return false;
    }

    ULONG eird = 0, eord = 0;
    if (!ep_request_data(e, reply, cap, reply_len, &eird, &eord))
        return false;
    e->ird = eird;
    e->ord = eord;

    if (!(w = waiter_new(e)))
        return false;
    st = e->cn->Dispatch->NdkCompleteConnect(e->cn, disconnect_event, e, tc_on_request, w);
    st = finish(e, w, st, "NdkCompleteConnect", e->opt->timeout_ms + GRACE_MS);
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkCompleteConnect", st, NULL);
        return false;
    }
    e->connected = true;
    return true;
}

bool ep_wait_peer_disconnect(struct endpoint *e, unsigned ms)
{
    struct timespec dl;
    tc_deadline(&dl, ms);
    pthread_mutex_lock(&e->lock);
    while (!atomic_load(&e->disconnected))
        if (pthread_cond_timedwait(&e->cond, &e->lock, &dl) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&e->lock);
    return atomic_load(&e->disconnected);
}

bool ep_disconnect_begin(struct endpoint *e)
{
    if (!e->connected || e->disconnecting)
        return true;
    if (!(e->disconnecting = waiter_new(e)))
        return false;
    e->disconnect_returned = e->cn->Dispatch->NdkDisconnect(e->cn, tc_on_request, e->disconnecting);
    return true;
}

bool ep_disconnect_end(struct endpoint *e)
{
    if (!e->disconnecting)
        return true;
    NTSTATUS st = finish(e, e->disconnecting, e->disconnect_returned, "NdkDisconnect",
                         e->opt->timeout_ms + GRACE_MS);
    e->disconnecting = NULL;
    e->connected = false;
    if (e->peer_may_abort && (st == STATUS_CONNECTION_ABORTED || st == STATUS_CONNECTION_RESET))
        return true;
    if (st != STATUS_SUCCESS) {
        ndk_failed(e->role, "NdkDisconnect", st, NULL);
        return false;
    }
    return true;
}

/*
 * Graceful disconnect (reference 7.6). The client disconnects first; the
 * server waits for that (bounded) and answers with its own NdkDisconnect,
 * so that neither side resets a connection whose last messages are still
 * on the way.
 */
bool ep_disconnect(struct endpoint *e, bool wait_for_peer_first)
{
    if (!e->connected)
        return true;
    if (wait_for_peer_first && !e->disconnecting && !ep_wait_peer_disconnect(e, e->opt->timeout_ms))
        complain(e->role, "the client did not disconnect within %u ms; disconnecting", e->opt->timeout_ms);
    return ep_disconnect_begin(e) && ep_disconnect_end(e);
}

void ep_drop_connector(struct endpoint *e)
{
    if (e->cn) {
        close_object(e, e->cn->Dispatch->NdkCloseConnector, &e->cn->Header, "NdkCloseConnector");
        e->cn = NULL;
    }
    e->connected = false;
}

/* ------------------------------------------------------------------------ */
/* Closing                                                                  */
/* ------------------------------------------------------------------------ */

struct closer {
    NDK_ADAPTER *ad;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
};

static void *closer_main(void *arg)
{
    struct closer *c = arg;
    ndk_close_adapter(c->ad);
    pthread_mutex_lock(&c->lock);
    c->done = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    return NULL;
}

/*
 * ndk_close_adapter blocks until every callback has returned. It runs on a
 * helper thread so that our wait stays bounded: if it does not return,
 * that is reported and the process exits.
 */
static void close_adapter(struct endpoint *e)
{
    static struct closer c; /* outlives a hung close: the thread still uses it */
    c.ad = e->ad;
    c.done = false;
    pthread_mutex_init(&c.lock, NULL);
    tc_cond_init_mono(&c.cond);
    pthread_t t;
    if (pthread_create(&t, NULL, closer_main, &c) != 0) {
        ndk_close_adapter(e->ad);
    } else {
        unsigned ms = e->opt->timeout_ms + GRACE_MS;
        struct timespec dl;
        tc_deadline(&dl, ms);
        pthread_mutex_lock(&c.lock);
        while (!c.done)
            if (pthread_cond_timedwait(&c.cond, &c.lock, &dl) == ETIMEDOUT)
                break;
        bool done = c.done;
        pthread_mutex_unlock(&c.lock);
        if (!done) {
            library_problem(e->role, "ndk_close_adapter did not return within %u ms", ms);
            fflush(NULL);
            _exit(1);
        }
        pthread_join(t, NULL);
    }
    pthread_cond_destroy(&c.cond);
    pthread_mutex_destroy(&c.lock);
    e->ad = NULL;
}

/* Successors before antecedents: the connector relies on the QP and the
 * listener, the QP on the PD and CQ, the MR on the PD. */
void ep_close(struct endpoint *e)
{
    /* A request that arrived but was never taken: closing it refuses it. */
    pthread_mutex_lock(&e->lock);
    NDK_CONNECTOR *stray = e->incoming;
    e->incoming = NULL;
    pthread_mutex_unlock(&e->lock);
    if (stray)
        close_object(e, stray->Dispatch->NdkCloseConnector, &stray->Header, "NdkCloseConnector");
    if (e->cn) {
        close_object(e, e->cn->Dispatch->NdkCloseConnector, &e->cn->Header, "NdkCloseConnector");
        e->cn = NULL;
    }
    /* After its connectors (L8-L11). */
    if (e->ln) {
        close_object(e, e->ln->Dispatch->NdkCloseListener, &e->ln->Header, "NdkCloseListener");
        e->ln = NULL;
    }
    if (e->qp) {
        close_object(e, e->qp->Dispatch->NdkCloseQp, &e->qp->Header, "NdkCloseQp");
        e->qp = NULL;
    }
    if (e->mr) {
        if (e->mr_registered) {
            struct tc_completion *w = waiter_new(e);
            if (w) {
                NTSTATUS st = e->mr->Dispatch->NdkDeregisterMr(e->mr, tc_on_request, w);
                st = finish(e, w, st, "NdkDeregisterMr", e->opt->timeout_ms + GRACE_MS);
                if (st != STATUS_SUCCESS)
                    ndk_failed(e->role, "NdkDeregisterMr", st, NULL);
            }
            e->mr_registered = false;
        }
        close_object(e, e->mr->Dispatch->NdkCloseMr, &e->mr->Header, "NdkCloseMr");
        e->mr = NULL;
    }
    if (e->pd) {
        close_object(e, e->pd->Dispatch->NdkClosePd, &e->pd->Header, "NdkClosePd");
        e->pd = NULL;
    }
    if (e->cq) {
        close_object(e, e->cq->Dispatch->NdkCloseCq, &e->cq->Header, "NdkCloseCq");
        e->cq = NULL;
    }
    if (e->owner) {
        /* The adapter is the owner's and stays open: so must our waiters,
         * until the owner closes it. */
        struct waiter **tail = &e->owner->waiters;
        while (*tail)
            tail = &(*tail)->next;
        *tail = e->waiters;
        e->waiters = NULL;
        e->ad = NULL;
    }
    if (e->ad)
        close_adapter(e);
    /* The adapter is closed: no callback can run any more. */
    for (struct waiter *w = e->waiters, *next; w; w = next) {
        next = w->next;
        tc_comp_destroy(&w->c);
        free(w);
    }
    e->waiters = NULL;
    free(e->mem);
    e->mem = NULL;
    free(e->sq_op);
    e->sq_op = NULL;
    pthread_cond_destroy(&e->cond);
    pthread_mutex_destroy(&e->lock);
}
