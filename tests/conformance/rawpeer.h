/*
 * rawpeer.h - a raw TCP peer for the "bad input from the wire" tests, and the
 * small NDK harness those tests drive on the other end of the connection.
 *
 * The raw peer is a plain socket that speaks (or mis-speaks) MPA octet by
 * octet, so a test can put any byte sequence on the wire and watch exactly
 * what libndk answers: a Reply, nothing, a FIN or a RST. Frames are built
 * from the layouts of iwarp.md 1.1-1.4 and the siw captures in
 * shared/interop/captures, not from libndk's own encoder, so an encoder bug
 * cannot hide behind a matching decoder bug.
 *
 * Every wait is bounded: sockets are read through poll() with a deadline and
 * NDK completions through tl_event_wait. Nothing here sleeps to synchronise.
 *
 * Header-only: every helper is static inline, so a test that leaves one
 * unused still builds with -Werror -Wunused-function.
 */
#ifndef NDK_TESTS_RAWPEER_H
#define NDK_TESTS_RAWPEER_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ndk/ndk.h>

#include "testlib.h"

/* ======================================================================== */
/* Byte helpers, CRC32c and a seeded PRNG                                    */
/* ======================================================================== */

static inline void rp_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static inline void rp_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline uint16_t rp_get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rp_get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bit-wise CRC32c (iwarp.md 4.4). Deliberately the slow textbook form: the
 * tests must not share a table or SSE path with the code under test. */
static inline uint32_t rp_crc32c(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ ((crc & 1u) ? 0x82F63B78u : 0u);
    }
    return crc ^ 0xFFFFFFFFu;
}

/* splitmix64: small, seedable, and the same sequence on every platform, so
 * a printed seed reproduces a failing garbage case exactly. */
static inline uint64_t rp_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline void rp_hexdump(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "    %s (%zu octets):", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "%s%02x", i % 16 ? " " : "\n      ", p[i]);
    fprintf(stderr, "\n");
}

/* ======================================================================== */
/* MPA startup frames (iwarp.md 1.1-1.3)                                     */
/* ======================================================================== */

#define RP_KEY_REQ "MPA ID Req Frame"
#define RP_KEY_REP "MPA ID Rep Frame"
#define RP_KEY_LEN 16
#define RP_HDR_LEN 20

#define RP_F_M 0x80 /* markers wanted */
#define RP_F_C 0x40 /* CRC */
#define RP_F_R 0x20 /* reject */
#define RP_F_S 0x10 /* RFC 6581 word present */

/* RFC 6581 word bits (iwarp.md 1.2). */
#define RP_W0_A 0x8000u /* peer-to-peer */
#define RP_W0_B 0x4000u /* Send RTR */
#define RP_W1_C 0x8000u /* Write RTR */
#define RP_W1_D 0x4000u /* Read RTR */
#define RP_IRD_ORD_MASK 0x3FFFu

/* The Request Linux siw sends as an rping client (IRD 1, ORD 1, no ULP
 * data): captures/guest-to-host-mpa-request.txt, byte for byte. */
static const uint8_t rp_siw_request[24] = {
    0x4d, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52, 0x65, 0x71, 0x20, 0x46,
    0x72, 0x61, 0x6d, 0x65, 0x10, 0x02, 0x00, 0x04, 0x00, 0x01, 0x00, 0x01,
};

/*
 * Writes a startup frame: key, flags octet, Rev, PD_Length = pd_length (which
 * the caller may set to lie about the data), then the private data octets
 * (pd_len of them, copied from pd). Returns the octets written.
 */
static inline size_t rp_frame_raw(uint8_t *out, const char *key, uint8_t flags, uint8_t rev,
                                  uint16_t pd_length, const void *pd, size_t pd_len)
{
    memcpy(out, key, RP_KEY_LEN);
    out[16] = flags;
    out[17] = rev;
    rp_put16(out + 18, pd_length);
    if (pd_len)
        memcpy(out + RP_HDR_LEN, pd, pd_len);
    return RP_HDR_LEN + pd_len;
}

/* A well-formed enhanced (S=1, Rev 2) frame: the word, then ULP data. */
static inline size_t rp_frame_v2(uint8_t *out, const char *key, uint8_t flags, uint16_t w0,
                                 uint16_t w1, const void *ulp, size_t ulp_len)
{
    uint8_t pd[4 + 512];
    rp_put16(pd, w0);
    rp_put16(pd + 2, w1);
    if (ulp_len)
        memcpy(pd + 4, ulp, ulp_len);
    return rp_frame_raw(out, key, (uint8_t)(flags | RP_F_S), 2, (uint16_t)(4 + ulp_len), pd,
                        4 + ulp_len);
}

/* ======================================================================== */
/* FPDUs the raw peer sends or expects (iwarp.md 1.4, 1.9, 2.1, 4.3)         */
/* ======================================================================== */

/* Frames a ULPDU: length, ULPDU, zero pad, CRC (0 when crc is off). */
static inline size_t rp_fpdu(uint8_t *out, const uint8_t *ulpdu, size_t ulpdu_len, bool crc)
{
    size_t pad = (4 - ((2 + ulpdu_len) & 3)) & 3;
    rp_put16(out, (uint16_t)ulpdu_len);
    memcpy(out + 2, ulpdu, ulpdu_len);
    memset(out + 2 + ulpdu_len, 0, pad);
    size_t n = 2 + ulpdu_len + pad;
    uint32_t c = crc ? rp_crc32c(out, n) : 0;
    /* The CRC travels least-significant octet first (iwarp.md 4.1). */
    out[n] = (uint8_t)c;
    out[n + 1] = (uint8_t)(c >> 8);
    out[n + 2] = (uint8_t)(c >> 16);
    out[n + 3] = (uint8_t)(c >> 24);
    return n + 4;
}

/* Zero-length RDMA Write, STag 1, TO 0: the Write RTR siw sends
 * (00 0E C1 40 00000001 0000000000000000 + CRC). 20 octets. */
static inline size_t rp_write_rtr(uint8_t out[20], bool crc)
{
    uint8_t u[14] = {0xC1, 0x40};
    rp_put32(u + 2, 1);
    return rp_fpdu(out, u, sizeof u, crc);
}

/* Untagged Send (opcode 3), QN 0, the given MSN, MO 0, with payload. */
static inline size_t rp_send_fpdu(uint8_t *out, uint32_t msn, const void *payload, size_t len,
                                  bool crc)
{
    uint8_t u[18 + 256];
    memset(u, 0, 18);
    u[0] = 0x41; /* DDP: T=0 L=1 DV=1 */
    u[1] = 0x43; /* RDMAP: RV=1, Send */
    rp_put32(u + 6, 0);   /* QN 0 */
    rp_put32(u + 10, msn);
    rp_put32(u + 14, 0);  /* MO 0 */
    memcpy(u + 18, payload, len);
    return rp_fpdu(out, u, 18 + len, crc);
}

/* ======================================================================== */
/* Sockets                                                                   */
/* ======================================================================== */

/* How a read ended. */
enum rp_end {
    RP_OPEN = 0,  /* still open: the wait ran out (or the wanted octets came) */
    RP_EOF = 1,   /* the other side closed gracefully (FIN) */
    RP_RESET = 2, /* the other side reset the connection (RST) */
    RP_ERROR = 3, /* any other socket error */
};

static inline const char *rp_end_name(int e)
{
    switch (e) {
    case RP_OPEN:
        return "still open";
    case RP_EOF:
        return "EOF";
    case RP_RESET:
        return "RST";
    default:
        return "socket error";
    }
}

/* Milliseconds left until an absolute tl_now_ns() deadline, rounded up. */
static inline int rp_ms_left(uint64_t deadline_ns)
{
    uint64_t now = tl_now_ns();
    if (now >= deadline_ns)
        return 0;
    return (int)((deadline_ns - now + 999999u) / 1000000u);
}

static inline uint64_t rp_deadline(unsigned ms)
{
    return tl_now_ns() + (uint64_t)ms * 1000000u;
}

static inline unsigned rp_ms_since(uint64_t t0_ns)
{
    return (unsigned)((tl_now_ns() - t0_ns) / 1000000u);
}

static inline void rp_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static inline struct sockaddr_in rp_loopback(uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

/* Starts a non-blocking connect to 127.0.0.1:port; returns the fd (the
 * handshake may still be in progress) or -1. */
static inline int rp_connect_start(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    rp_nodelay(fd);
    struct sockaddr_in a = rp_loopback(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Connects to 127.0.0.1:port within timeout_ms; returns a blocking fd or -1.
 * The handshake is finished by the kernel's listen queue, so this succeeds
 * whether or not libndk has accepted yet. */
static inline int rp_connect(uint16_t port, unsigned timeout_ms)
{
    int fd = rp_connect_start(port);
    if (fd < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, (int)timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* Sends everything; a peer that already closed is not an error worth a
 * signal (MSG_NOSIGNAL), the caller sees it in the result instead. */
static inline bool rp_send(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* Half-close: our FIN goes out but we can still see how the other side
 * reacts (its FIN or RST), which a plain close() would hide. */
static inline void rp_fin(int fd)
{
    (void)shutdown(fd, SHUT_WR);
}

/* Closes with a RST instead of a FIN. */
static inline void rp_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

/*
 * Reads until `want` octets arrived, the connection ended, or timeout_ms ran
 * out. Returns the octets read; *end says whether and how it ended.
 */
static inline size_t rp_read(int fd, uint8_t *buf, size_t want, unsigned timeout_ms, int *end)
{
    uint64_t dl = rp_deadline(timeout_ms);
    size_t got = 0;
    *end = RP_OPEN;
    while (got < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, rp_ms_left(dl));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *end = RP_ERROR;
            break;
        }
        if (r == 0)
            break;
        ssize_t n = recv(fd, buf + got, want - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            *end = RP_EOF;
            break;
        } else if (errno != EINTR && errno != EAGAIN) {
            *end = errno == ECONNRESET ? RP_RESET : RP_ERROR;
            break;
        }
    }
    return got;
}

/*
 * Waits up to timeout_ms for the other side to close, counting (and keeping
 * the first `cap` of) any octets that come first. Returns how it ended:
 * RP_OPEN means it was still open when the time ran out.
 */
static inline int rp_wait_end(int fd, unsigned timeout_ms, uint8_t *keep, size_t cap,
                              size_t *nbytes)
{
    uint64_t dl = rp_deadline(timeout_ms);
    size_t total = 0;
    int end = RP_OPEN;
    for (;;) {
        uint8_t tmp[4096];
        int left = rp_ms_left(dl);
        if (left == 0)
            break;
        size_t n = rp_read(fd, tmp, sizeof tmp, (unsigned)left, &end);
        /* rp_read returns as soon as it has anything; keep going for more. */
        if (keep && total < cap)
            memcpy(keep + total, tmp, n < cap - total ? n : cap - total);
        total += n;
        if (end != RP_OPEN)
            break;
        if (n == 0)
            break; /* timed out with nothing */
    }
    if (nbytes)
        *nbytes = total;
    return end;
}

/* True if nothing at all (no octet, no FIN, no RST) arrives for ms. */
static inline bool rp_quiet(int fd, unsigned ms, uint8_t *first, size_t *nfirst)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, (int)ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        if (nfirst)
            *nfirst = 0;
        return true;
    }
    if (first && nfirst) {
        ssize_t n = recv(fd, first, 64, MSG_DONTWAIT);
        *nfirst = n > 0 ? (size_t)n : 0;
    }
    return false;
}

/* A plain listening socket on 127.0.0.1 with a kernel-chosen port. */
static inline int rp_listen(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = rp_loopback(0);
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

/* Accepts one connection within timeout_ms; -1 if none came. */
static inline int rp_accept(int lfd, unsigned timeout_ms)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, (int)timeout_ms) != 1)
        return -1;
    int fd = accept(lfd, NULL, NULL);
    if (fd >= 0)
        rp_nodelay(fd);
    return fd;
}

/*
 * Reads one startup frame the way a responder must (iwarp.md 2.3 step 2):
 * exactly 20 octets, then exactly PD_Length octets, never more. Returns the
 * frame length, or 0 when it did not arrive whole within timeout_ms or its
 * PD_Length is over 512 (then the header is still in out).
 */
static inline size_t rp_read_frame(int fd, uint8_t *out /* >= 532 */, unsigned timeout_ms)
{
    int end;
    uint64_t dl = rp_deadline(timeout_ms);
    if (rp_read(fd, out, RP_HDR_LEN, timeout_ms, &end) != RP_HDR_LEN)
        return 0;
    size_t pd = rp_get16(out + 18);
    if (pd > 512)
        return 0;
    if (rp_read(fd, out + RP_HDR_LEN, pd, (unsigned)rp_ms_left(dl), &end) != pd)
        return 0;
    return RP_HDR_LEN + pd;
}

/* ======================================================================== */
/* The NDK side                                                              */
/* ======================================================================== */

/* Bound for anything that should happen "at once" on loopback. Generous,
 * because CI runs these under ASan on busy machines; a passing run never
 * waits this long. */
#define NK_WAIT_MS 3000u
/* A status no provider returns: "the completion never came". */
#define NK_NO_COMPLETION ((NTSTATUS)0xE0DE0001L)

static inline const char *nk_st(NTSTATUS s)
{
    return s == NK_NO_COMPLETION ? "(no completion within the bound)" : ndk_status_name(s);
}

/* Checks a status and, on mismatch, prints both by name. */
#define CHECK_ST(got, want)                                                                  \
    do {                                                                                     \
        NTSTATUS nk_g_ = (got), nk_w_ = (want);                                              \
        if (nk_g_ != nk_w_) {                                                                \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] %s: got %s, expected %s\n", __FILE__, __LINE__,     \
                    tl_current ? tl_current : "-", #got, nk_st(nk_g_), nk_st(nk_w_));          \
        }                                                                                    \
    } while (0)

/*
 * One asynchronous request. Slots come from a static pool and are never
 * reused: if libndk calls back late (after a wait gave up) the callback
 * still lands in valid memory, and the audit below can see it.
 */
typedef struct nk_req {
    tl_event ev;
    NTSTATUS status;
    NDK_OBJECT_HEADER *obj; /* for create completions */
    bool used;
    bool pended; /* the call returned STATUS_PENDING */
} nk_req;

#ifndef NK_POOL /* a long-running test may ask for more */
#define NK_POOL 6144
#endif
static nk_req nk_pool[NK_POOL];
static unsigned nk_pool_used, nk_pool_audited;

static inline nk_req *nk_req_new(void)
{
    if (nk_pool_used == NK_POOL) {
        fprintf(stderr, "rawpeer.h: request pool exhausted\n");
        abort();
    }
    nk_req *r = &nk_pool[nk_pool_used++];
    tl_event_init(&r->ev);
    r->used = true;
    return r;
}

static inline void nk_req_done(void *ctx, NTSTATUS status)
{
    nk_req *r = ctx;
    r->status = status;
    tl_event_signal(&r->ev);
}

static inline void nk_create_done(void *ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    nk_req *r = ctx;
    r->status = status;
    r->obj = obj;
    tl_event_signal(&r->ev);
}

static inline void nk_close_done(void *ctx)
{
    nk_req *r = ctx;
    r->status = STATUS_SUCCESS;
    tl_event_signal(&r->ev);
}

/* An operation in flight: the inline return plus its request slot. */
typedef struct nk_op {
    NTSTATUS st; /* what the call returned */
    nk_req *r;
} nk_op;

static inline nk_op nk_op_begin(nk_req *r, NTSTATUS st)
{
    r->pended = st == STATUS_PENDING;
    nk_op op = {st, r};
    return op;
}

/* True once the final status is known. */
static inline bool nk_op_done(nk_op *op)
{
    return op->st != STATUS_PENDING || tl_event_count(&op->r->ev) > 0;
}

/* The final status: inline, or from the completion within ms. */
static inline NTSTATUS nk_op_wait(nk_op *op, unsigned ms)
{
    if (op->st != STATUS_PENDING)
        return op->st;
    if (!tl_event_wait(&op->r->ev, 1, ms))
        return NK_NO_COMPLETION;
    return op->r->status;
}

/*
 * Rule C7 (reference 4.1): exactly one completion for a request that
 * returned STATUS_PENDING, none for any other return. Called after
 * ndk_close_adapter, which guarantees no callback is still to come.
 */
static inline void nk_pool_audit(void)
{
    for (; nk_pool_audited < nk_pool_used; nk_pool_audited++) {
        nk_req *r = &nk_pool[nk_pool_audited];
        unsigned n = tl_event_count(&r->ev);
        if (r->pended && n > 1) {
            tl_failures++;
            fprintf(stderr, "[%s] request %u completed %u times\n", tl_current ? tl_current : "-",
                    nk_pool_audited, n);
        }
        if (!r->pended && n != 0) {
            tl_failures++;
            fprintf(stderr, "[%s] request %u did not pend but was called back %u times\n",
                    tl_current ? tl_current : "-", nk_pool_audited, n);
        }
    }
}

/* Finishes a create call: the object, inline or from its completion. */
static inline void *nk_created(nk_req *r, NTSTATUS st, void *inline_obj)
{
    nk_op op = nk_op_begin(r, st);
    NTSTATUS fin = nk_op_wait(&op, NK_WAIT_MS);
    if (fin != STATUS_SUCCESS) {
        fprintf(stderr, "    create failed: %s\n", nk_st(fin));
        return NULL;
    }
    return st == STATUS_PENDING ? (void *)r->obj : inline_obj;
}

/* Closes any object and waits for its close completion. */
static inline bool nk_close(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    if (!h)
        return true;
    nk_req *r = nk_req_new();
    NTSTATUS st = fn(h, nk_close_done, r);
    nk_op op = nk_op_begin(r, st);
    NTSTATUS fin = nk_op_wait(&op, NK_WAIT_MS);
    if (fin != STATUS_SUCCESS) {
        tl_failures++;
        fprintf(stderr, "[%s] close of object type %d: %s\n", tl_current ? tl_current : "-",
                (int)h->ObjectType, nk_st(fin));
        return false;
    }
    return true;
}

/* Per-type closes (the close member's name differs per table), and one
 * macro over them; a NULL object is already closed. */
static inline bool nk_close_connector(NDK_CONNECTOR *o)
{
    return !o || nk_close(&o->Header, o->Dispatch->NdkCloseConnector);
}
static inline bool nk_close_qp(NDK_QP *o)
{
    return !o || nk_close(&o->Header, o->Dispatch->NdkCloseQp);
}
static inline bool nk_close_listener(NDK_LISTENER *o)
{
    return !o || nk_close(&o->Header, o->Dispatch->NdkCloseListener);
}
static inline bool nk_close_mr(NDK_MR *o)
{
    return !o || nk_close(&o->Header, o->Dispatch->NdkCloseMr);
}
#define NK_CLOSE(o)                                                                          \
    _Generic((o), NDK_CONNECTOR *: nk_close_connector, NDK_QP *: nk_close_qp,                \
             NDK_LISTENER *: nk_close_listener, NDK_MR *: nk_close_mr)(o)

/* A listener with a queue of the connectors its connect events delivered. */
#define NK_MAXQ 512
typedef struct nk_listener {
    NDK_LISTENER *l;
    uint16_t port;
    pthread_mutex_t mu;
    NDK_CONNECTOR *q[NK_MAXQ];
    unsigned pushed, popped;
    tl_event ev; /* one count per connect event */
} nk_listener;

/* An adapter with a CQ and a PD: what every test needs for its QPs. */
#define NK_MAX_LISTENERS 4
typedef struct nk_world {
    NDK_ADAPTER *ad;
    NDK_CQ *cq;
    NDK_PD *pd;
    tl_event cq_ev; /* CQ notifications */
    nk_listener *listeners[NK_MAX_LISTENERS];
    unsigned nlisteners;
} nk_world;

static inline void nk_cq_notify(void *ctx, NTSTATUS status)
{
    (void)status;
    nk_world *w = ctx;
    tl_event_signal(&w->cq_ev);
}

/* Options with short timeouts; a test overrides what it is about. */
static inline NDK_OPEN_OPTIONS nk_options(void)
{
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.Size = sizeof o;
    o.TcpConnectTimeoutMs = 2000;
    o.MpaReplyTimeoutMs = 500;
    o.MpaRequestTimeoutMs = 500;
    o.RtrTimeoutMs = 2000;
    o.DisconnectTimeoutMs = 500;
    return o;
}

static inline nk_world *nk_open(const NDK_OPEN_OPTIONS *opt)
{
    nk_world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    tl_event_init(&w->cq_ev);
    NDK_VERSION v = {2, 1};
    NTSTATUS st = ndk_open_adapter("127.0.0.1", v, opt, &w->ad);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    ndk_open_adapter(127.0.0.1): %s\n", nk_st(st));
        tl_event_destroy(&w->cq_ev);
        free(w);
        return NULL;
    }
    nk_req *r = nk_req_new();
    NDK_CQ *cq = NULL;
    st = w->ad->Dispatch->NdkCreateCq(w->ad, 256, nk_cq_notify, w, NULL, nk_create_done, r, &cq);
    w->cq = nk_created(r, st, cq);
    r = nk_req_new();
    NDK_PD *pd = NULL;
    st = w->ad->Dispatch->NdkCreatePd(w->ad, nk_create_done, r, &pd);
    w->pd = nk_created(r, st, pd);
    if (!w->cq || !w->pd) {
        ndk_close_adapter(w->ad);
        tl_event_destroy(&w->cq_ev);
        free(w);
        return NULL;
    }
    return w;
}

/* ndk_close_adapter tears down whatever a failed test left open and returns
 * only when no callback can come any more; after it the pool can be audited
 * and the listener queues freed. */
static inline void nk_close_world(nk_world *w)
{
    if (!w)
        return;
    ndk_close_adapter(w->ad);
    nk_pool_audit();
    for (unsigned i = 0; i < w->nlisteners; i++) {
        nk_listener *l = w->listeners[i];
        pthread_mutex_destroy(&l->mu);
        tl_event_destroy(&l->ev);
        free(l);
    }
    tl_event_destroy(&w->cq_ev);
    free(w);
}

static inline NDK_QP *nk_qp(nk_world *w)
{
    nk_req *r = nk_req_new();
    NDK_QP *qp = NULL;
    NTSTATUS st = w->pd->Dispatch->NdkCreateQp(w->pd, w->cq, w->cq, w, 16, 16, 1, 1, 0,
                                                nk_create_done, r, &qp);
    return nk_created(r, st, qp);
}

static inline NDK_CONNECTOR *nk_connector(nk_world *w)
{
    nk_req *r = nk_req_new();
    NDK_CONNECTOR *c = NULL;
    NTSTATUS st = w->ad->Dispatch->NdkCreateConnector(w->ad, nk_create_done, r, &c);
    return nk_created(r, st, c);
}

static inline void nk_on_connect(void *ctx, NDK_CONNECTOR *c)
{
    nk_listener *l = ctx;
    pthread_mutex_lock(&l->mu);
    if (l->pushed - l->popped < NK_MAXQ)
        l->q[l->pushed++ % NK_MAXQ] = c;
    pthread_mutex_unlock(&l->mu);
    tl_event_signal(&l->ev);
}

/* Creates a listener listening on 127.0.0.1 with a provider-chosen port. */
static inline nk_listener *nk_listen(nk_world *w)
{
    if (w->nlisteners == NK_MAX_LISTENERS)
        return NULL;
    nk_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    tl_event_init(&l->ev);
    w->listeners[w->nlisteners++] = l; /* freed by nk_close_world */
    nk_req *r = nk_req_new();
    NDK_LISTENER *lst = NULL;
    NTSTATUS st = w->ad->Dispatch->NdkCreateListener(w->ad, nk_on_connect, l, nk_create_done, r,
                                                      &lst);
    l->l = nk_created(r, st, lst);
    if (!l->l)
        return NULL;
    struct sockaddr_in a = rp_loopback(0);
    r = nk_req_new();
    st = l->l->Dispatch->NdkListen(l->l, (PSOCKADDR)&a, sizeof a, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    st = nk_op_wait(&op, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    NdkListen: %s\n", nk_st(st));
        return NULL;
    }
    struct sockaddr_in got;
    ULONG len = sizeof got;
    st = l->l->Dispatch->NdkGetLocalAddress(l->l, (PSOCKADDR)&got, &len);
    if (st != STATUS_SUCCESS || got.sin_family != AF_INET || got.sin_port == 0) {
        fprintf(stderr, "    listener NdkGetLocalAddress: %s\n", nk_st(st));
        return NULL;
    }
    l->port = ntohs(got.sin_port);
    return l;
}

/* The next connector a connect event delivered, waiting up to ms; NULL if
 * none came. */
static inline NDK_CONNECTOR *nk_next_event(nk_listener *l, unsigned ms)
{
    pthread_mutex_lock(&l->mu);
    unsigned want = l->popped + 1;
    pthread_mutex_unlock(&l->mu);
    if (!tl_event_wait(&l->ev, want, ms))
        return NULL;
    pthread_mutex_lock(&l->mu);
    NDK_CONNECTOR *c = NULL;
    if (l->popped < l->pushed)
        c = l->q[l->popped++ % NK_MAXQ];
    pthread_mutex_unlock(&l->mu);
    return c;
}

/*
 * Asserts that no connect event comes within ms. A stray connector is
 * reported with what it carries, then closed.
 */
static inline bool nk_no_event(nk_listener *l, unsigned ms, const char *why)
{
    NDK_CONNECTOR *c = nk_next_event(l, ms);
    if (!c)
        return true;
    tl_failures++;
    fprintf(stderr, "[%s] unexpected connect event (%s)\n", tl_current ? tl_current : "-", why);
    NK_CLOSE(c);
    return false;
}

static inline nk_op nk_connect(NDK_CONNECTOR *c, NDK_QP *qp, uint16_t port, ULONG ird, ULONG ord,
                               const void *pd, ULONG pd_len)
{
    struct sockaddr_in src = rp_loopback(0), dst = rp_loopback(port);
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkConnect(c, qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&dst,
                                          sizeof dst, ird, ord, (PVOID)pd, pd_len, nk_req_done, r);
    return nk_op_begin(r, st);
}

static inline nk_op nk_accept(NDK_CONNECTOR *c, NDK_QP *qp, ULONG ird, ULONG ord, const void *pd,
                              ULONG pd_len)
{
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkAccept(c, qp, ird, ord, (PVOID)pd, pd_len, NULL, NULL,
                                         nk_req_done, r);
    return nk_op_begin(r, st);
}

static inline nk_op nk_complete(NDK_CONNECTOR *c)
{
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkCompleteConnect(c, NULL, NULL, nk_req_done, r);
    return nk_op_begin(r, st);
}

/* Private data of a connector (passive before Accept, active after its
 * Connect ended): RDS in *len, the octets in buf. */
static inline NTSTATUS nk_conn_data(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, void *buf,
                                    ULONG *len)
{
    return c->Dispatch->NdkGetConnectionData(c, ird, ord, buf, len);
}

/*
 * The listener still serves: a complete NDK connection from a fresh
 * connector on the same adapter, three legs, then both sides closed. The
 * connect event must be this connection's (its private data carries `tag`),
 * so a stray event left by an earlier bad input is caught here too.
 */
static inline bool nk_roundtrip(nk_world *w, nk_listener *l, const char *tag)
{
    bool ok = false;
    NDK_CONNECTOR *act = nk_connector(w), *pas = NULL;
    NDK_QP *qa = nk_qp(w), *qb = nk_qp(w);
    if (!act || !qa || !qb) {
        fprintf(stderr, "    roundtrip %s: could not create objects\n", tag);
        goto out;
    }
    ULONG tlen = (ULONG)strlen(tag);
    nk_op c = nk_connect(act, qa, l->port, 4, 4, tag, tlen);
    /* Wait for the connect event, but stop early once Connect has already
     * failed: then no event is coming. */
    uint64_t dl = rp_deadline(NK_WAIT_MS);
    while (!(pas = nk_next_event(l, 20)) && rp_ms_left(dl) > 0)
        if (nk_op_done(&c) && nk_op_wait(&c, 0) != STATUS_SUCCESS)
            break;
    if (!pas) {
        fprintf(stderr, "    roundtrip %s: no connect event (Connect: %s)\n", tag,
                nk_st(nk_op_wait(&c, 0)));
        (void)nk_op_wait(&c, NK_WAIT_MS);
        goto out;
    }
    uint8_t got[256];
    ULONG glen = sizeof got;
    NTSTATUS st = nk_conn_data(pas, NULL, NULL, got, &glen);
    if (st != STATUS_SUCCESS || glen != tlen || memcmp(got, tag, tlen) != 0) {
        fprintf(stderr, "    roundtrip %s: the connect event is not ours (%s, %u octets)\n", tag,
                nk_st(st), (unsigned)glen);
        goto out;
    }
    nk_op a = nk_accept(pas, qb, 4, 4, NULL, 0);
    st = nk_op_wait(&c, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    roundtrip %s: Connect: %s\n", tag, nk_st(st));
        (void)nk_op_wait(&a, NK_WAIT_MS);
        goto out;
    }
    nk_op cc = nk_complete(act);
    st = nk_op_wait(&cc, NK_WAIT_MS);
    NTSTATUS sa = nk_op_wait(&a, NK_WAIT_MS);
    if (st != STATUS_SUCCESS || sa != STATUS_SUCCESS) {
        fprintf(stderr, "    roundtrip %s: CompleteConnect %s, Accept %s\n", tag, nk_st(st),
                nk_st(sa));
        goto out;
    }
    ok = true;
out:
    NK_CLOSE(act);
    NK_CLOSE(pas);
    NK_CLOSE(qa);
    NK_CLOSE(qb);
    return ok;
}

/* A registered buffer for Send/Receive payloads. */
typedef struct nk_mr {
    NDK_MR *mr;
    MDL mdl;
    UINT32 token;
    uint8_t buf[256];
} nk_mr;

static inline bool nk_mr_register(nk_world *w, nk_mr *m)
{
    nk_req *r = nk_req_new();
    NDK_MR *mr = NULL;
    NTSTATUS st = w->pd->Dispatch->NdkCreateMr(w->pd, FALSE, nk_create_done, r, &mr);
    m->mr = nk_created(r, st, mr);
    if (!m->mr)
        return false;
    memset(&m->mdl, 0, sizeof m->mdl);
    m->mdl.StartVa = m->buf;
    m->mdl.ByteCount = sizeof m->buf;
    r = nk_req_new();
    st = m->mr->Dispatch->NdkRegisterMr(m->mr, &m->mdl, sizeof m->buf,
                                        NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    st = nk_op_wait(&op, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    NdkRegisterMr: %s\n", nk_st(st));
        return false;
    }
    m->token = m->mr->Dispatch->NdkGetLocalTokenFromMr(m->mr);
    return true;
}

static inline void nk_mr_release(nk_mr *m)
{
    if (!m->mr)
        return;
    nk_req *r = nk_req_new();
    NTSTATUS st = m->mr->Dispatch->NdkDeregisterMr(m->mr, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    (void)nk_op_wait(&op, NK_WAIT_MS);
    NK_CLOSE(m->mr);
    m->mr = NULL;
}

/* One SGE over [off, off+len) of the registered buffer. */
static inline NDK_SGE nk_sge(nk_mr *m, size_t off, ULONG len)
{
    NDK_SGE s;
    memset(&s, 0, sizeof s);
    s.VirtualAddress = m->buf + off;
    s.Length = len;
    s.MemoryRegionToken = m->token;
    return s;
}

/* The next CQ entry within ms: polls, arms, polls again, then waits for the
 * notification, so a completion that lands between poll and arm is not
 * missed. */
static inline bool nk_cq_next(nk_world *w, NDK_RESULT *res, unsigned ms)
{
    uint64_t dl = rp_deadline(ms);
    for (;;) {
        if (w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1)
            return true;
        unsigned seen = tl_event_count(&w->cq_ev);
        w->cq->Dispatch->NdkArmCq(w->cq, NDK_CQ_NOTIFY_ANY);
        if (w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1)
            return true;
        int left = rp_ms_left(dl);
        if (left == 0 || !tl_event_wait(&w->cq_ev, seen + 1, (unsigned)left))
            return w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1;
    }
}

#endif
