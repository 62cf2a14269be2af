/* The listener as an MPA responder, driven by a plain TCP socket playing the
 * initiator: docs/behaviour.md "Listeners" and "The three legs" (MaxHalfOpen,
 * MpaRequestTimeoutMs, malformed Requests, marker Requests, client/server and
 * revision 1 Requests, the RTR type a peer-to-peer Reply picks), with the
 * frame layouts of RFC 5044 / RFC 6581. */
#include "ndktest.h"

#include <sys/socket.h>

static const char req_key[16] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e'};
static const char rep_key[16] = {'M', 'P', 'A', ' ', 'I', 'D', ' ', 'R',
                                 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e'};

#define MPA_M 0x80
#define MPA_C 0x40
#define MPA_R 0x20
#define MPA_S 0x10
#define W0_A 0x8000 /* peer-to-peer */
#define W0_B 0x4000 /* zero-length Send RTR */
#define W1_C 0x8000 /* zero-length RDMA Write RTR */
#define W1_D 0x4000 /* zero-length RDMA Read RTR */

/* An MPA Request: key, flags, revision, PD_Length, then (S) the IRD/ORD
 * words and the private data. Returns its length. */
static size_t mpa_request(unsigned char *b, unsigned flags, unsigned rev, bool s, unsigned w0,
                          unsigned w1, const void *pd, size_t pdlen)
{
    memcpy(b, req_key, 16);
    b[16] = (unsigned char)(flags | (s ? MPA_S : 0));
    b[17] = (unsigned char)rev;
    size_t n = pdlen + (s ? 4 : 0);
    b[18] = (unsigned char)(n >> 8);
    b[19] = (unsigned char)n;
    size_t off = 20;
    if (s) {
        b[20] = (unsigned char)(w0 >> 8);
        b[21] = (unsigned char)w0;
        b[22] = (unsigned char)(w1 >> 8);
        b[23] = (unsigned char)w1;
        off = 24;
    }
    if (pdlen)
        memcpy(b + off, pd, pdlen);
    return off + pdlen;
}

/* A TCP connection to the listener, as a raw initiator. */
static int raw_connect(nt_lsn *L)
{
    int fd = socket(L->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, &L->addr.sa, L->addrlen) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads exactly n bytes within ms; false on EOF, reset or timeout. */
static bool read_n(int fd, unsigned char *b, size_t n, unsigned ms)
{
    uint64_t t0 = tl_now_ns();
    size_t got = 0;
    while (got < n) {
        uint64_t el = nt_ms_since(t0);
        if (el >= ms)
            return false;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(ms - el)) != 1)
            return false;
        ssize_t r = recv(fd, b + got, n - got, 0);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    return true;
}

/* Waits up to ms for the connection to end (EOF or reset) with no data;
 * returns the time it took, or UINT64_MAX if it did not end or data came. */
static uint64_t wait_closed(int fd, unsigned ms, bool *got_data)
{
    uint64_t t0 = tl_now_ns();
    *got_data = false;
    for (;;) {
        uint64_t el = nt_ms_since(t0);
        if (el >= ms)
            return UINT64_MAX;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(ms - el)) != 1)
            return UINT64_MAX;
        unsigned char b[64];
        ssize_t r = recv(fd, b, sizeof b, 0);
        if (r > 0) {
            *got_data = true;
            continue;
        }
        return nt_ms_since(t0);
    }
}

/* A Reply read from fd: header checks, then its private data. */
typedef struct reply {
    unsigned flags, rev, pdlen;
    unsigned w0, w1;
    unsigned char pd[600];
} reply;

static bool read_reply(int fd, reply *r)
{
    unsigned char h[20];
    memset(r, 0, sizeof *r);
    if (!read_n(fd, h, 20, NT_WAIT_MS))
        return false;
    CHECK(memcmp(h, rep_key, 16) == 0);
    r->flags = h[16];
    r->rev = h[17];
    r->pdlen = (unsigned)h[18] << 8 | h[19];
    if (r->pdlen > sizeof r->pd)
        return false;
    if (r->pdlen && !read_n(fd, r->pd, r->pdlen, NT_WAIT_MS))
        return false;
    if ((r->flags & MPA_S) && r->pdlen >= 4) {
        r->w0 = (unsigned)r->pd[0] << 8 | r->pd[1];
        r->w1 = (unsigned)r->pd[2] << 8 | r->pd[3];
    }
    return true;
}

/* The passive side (opened with *po, or nt_opts() when po is NULL) and a
 * listener on it; NULL, with nothing left open, when either failed. */
static nt_lsn *open_listener(nt_side *ps, const NDK_OPEN_OPTIONS *po, int fam)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    if (!nt_side_open(ps, po ? po : &o))
        return NULL;
    nt_lsn *L = nt_listen(ps, fam);
    if (!L)
        nt_side_close(ps);
    return L;
}

static void close_listener(nt_side *ps, nt_lsn *L)
{
    nt_lsn_close(L);
    nt_side_close(ps);
}

/* A raw initiator's connection to L that has sent the n octets of b; -1,
 * and a failure counted, when the connection could not be made. */
static int send_request(nt_lsn *L, const unsigned char *b, size_t n)
{
    int fd = raw_connect(L);
    CHECK(fd >= 0);
    if (fd >= 0)
        CHECK_EQ(send(fd, b, n, MSG_NOSIGNAL), (ssize_t)n);
    return fd;
}

/* A case with one raw initiator: the passive side, its listener, and the
 * initiator's socket, which has sent its Request. */
struct raw_case {
    nt_side ps;
    nt_lsn *L;
    int fd;
};

/* False, and a failure counted, when the listener or the connection could
 * not be made; raw_case_close is due either way. */
static bool raw_case_open(struct raw_case *rc, int fam, const unsigned char *req, size_t n)
{
    rc->fd = -1;
    rc->L = open_listener(&rc->ps, NULL, fam);
    CHECK(rc->L != NULL);
    if (rc->L)
        rc->fd = send_request(rc->L, req, n);
    return rc->fd >= 0;
}

static void raw_case_close(struct raw_case *rc)
{
    if (rc->fd >= 0)
        close(rc->fd);
    if (rc->L)
        close_listener(&rc->ps, rc->L);
}

/* What the connect event shows: the Request's ULP private data (pd, len
 * octets) and the IRD/ORD for our side. */
static void expect_offer(NDK_CONNECTOR *p, const char *pd, ULONG len, ULONG want_ird,
                         ULONG want_ord)
{
    ULONG ird = 0, ord = 0;
    unsigned char got[16];
    ULONG got_len = sizeof got;
    CHECK_STATUS(nt_gcd(p, &ird, &ord, got, &got_len), STATUS_SUCCESS);
    CHECK_EQ(got_len, len);
    CHECK(got_len != len || memcmp(got, pd, len) == 0);
    CHECK_EQ(ird, want_ird);
    CHECK_EQ(ord, want_ord);
}

/* NdkAccept of p on qp, IRD/ORD 2/2 or as given, with private data pd and,
 * when dev is not NULL, the disconnect event into dev. */
static nt_op *start_accept(NDK_CONNECTOR *p, NDK_QP *qp, ULONG ird_ord, const char *pd, ULONG len,
                           nt_op *dev)
{
    nt_op *acc = nt_op_new(NT_REQ, "NdkAccept");
    nt_started(acc, p->Dispatch->NdkAccept(p, qp, ird_ord, ird_ord, (PVOID)pd, len,
                                           dev ? nt_disc_cb : NULL, dev, nt_req_cb, acc));
    return acc;
}

/* MaxHalfOpen = 2: at most two TCP connections wait for their Request; a
 * third resets the one that has waited longest, at once; the others are
 * closed after MpaRequestTimeoutMs (300 ms). No connect event for any. */
NT_CASE_FAM(half_open_limit_and_request_timeout)
{
    NDK_OPEN_OPTIONS po = nt_opts();
    po.MaxHalfOpen = 2;
    po.MpaRequestTimeoutMs = 300;
    nt_side ps;
    nt_lsn *L = open_listener(&ps, &po, fam);
    REQUIRE(L);
    int fd[3];
    bool data;
    for (int i = 0; i < 2; i++) {
        fd[i] = raw_connect(L);
        REQUIRE(fd[i] >= 0);
    }
    /* Both held (none is closed before the third arrives). */
    struct pollfd pf[2] = {{.fd = fd[0], .events = POLLIN}, {.fd = fd[1], .events = POLLIN}};
    CHECK_EQ(poll(pf, 2, 100), 0);
    uint64_t t0 = tl_now_ns();
    fd[2] = raw_connect(L);
    REQUIRE(fd[2] >= 0);
    uint64_t ms = wait_closed(fd[0], 250, &data);
    CHECK(ms != UINT64_MAX); /* the oldest: reset at once, well before 300 ms */
    CHECK(!data);
    for (int i = 1; i < 3; i++) {
        ms = wait_closed(fd[i], NT_WAIT_MS, &data);
        CHECK(ms != UINT64_MAX);
        CHECK(!data);
    }
    uint64_t total = nt_ms_since(t0);
    CHECK(total >= 250); /* the newest was held for MpaRequestTimeoutMs */
    CHECK(total < 3000);
    for (int i = 0; i < 3; i++)
        close(fd[i]);
    CHECK_EQ(nt_lsn_count(L), 0);
    close_listener(&ps, L);
}

/* MaxHalfOpen = 2: a real initiator still gets in while two silent
 * connections fill the slots, and the oldest of them goes at once. With
 * the usual MpaRequestTimeoutMs (nt_opts, 4 s): the case above's 300 ms
 * would also bound the initiator's own Request, which on a loaded machine
 * the listener did not read in time (no connect event, then NT_WAIT_MS
 * in vain), and would close the silent ones by the timer, not by the
 * initiator's arrival. */
NT_CASE_FAM(half_open_limit_lets_an_initiator_in)
{
    NDK_OPEN_OPTIONS po = nt_opts();
    po.MaxHalfOpen = 2;
    nt_side ps;
    nt_lsn *L = open_listener(&ps, &po, fam);
    REQUIRE(L);
    int fd[2];
    bool data;
    uint64_t ms;
    /* Two silent connections fill the slots; an NDK initiator connects. */
    for (int i = 0; i < 2; i++) {
        fd[i] = raw_connect(L);
        REQUIRE(fd[i] >= 0);
    }
    nt_side as;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&as, &o));
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    CHECK(nt_establish(&c));
    /* Its connection arrived after the two silent ones: the oldest went. */
    ms = wait_closed(fd[0], 250, &data);
    CHECK(ms != UINT64_MAX);
    for (int i = 0; i < 2; i++)
        close(fd[i]);
    nt_conn_close(&c);
    nt_pair_close(&as, &ps, L);
}

/* Malformed Requests (bad key, bad revision, PD_Length > 512, bytes after
 * the Request): the TCP connection is closed without a Reply, and the
 * consumer sees no connect event. */
NT_CASE_FAM(malformed_requests)
{
    nt_side ps;
    nt_lsn *L = open_listener(&ps, NULL, fam);
    REQUIRE(L);
    unsigned char b[1200];
    for (int k = 0; k < 4; k++) {
        size_t n;
        if (k == 0) {
            n = mpa_request(b, 0, 2, true, 1, 1, NULL, 0);
            b[8] = 'X'; /* "MPA ID Xeq Frame" */
        } else if (k == 1) {
            n = mpa_request(b, 0, 0, false, 0, 0, NULL, 0); /* revision 0 */
        } else if (k == 2) {
            memset(b + 20, 0, 600);
            n = mpa_request(b, 0, 1, false, 0, 0, b + 20, 600); /* PD_Length 600 */
        } else {
            n = mpa_request(b, 0, 2, true, 1, 1, NULL, 0);
            memset(b + n, 0xAB, 8); /* trailing bytes before any Reply */
            n += 8;
        }
        int fd = send_request(L, b, n);
        REQUIRE(fd >= 0);
        bool data;
        uint64_t ms = wait_closed(fd, NT_WAIT_MS, &data);
        if (ms == UINT64_MAX || data)
            fprintf(stderr, "    malformed Request kind %d\n", k);
        CHECK(ms != UINT64_MAX);
        CHECK(!data);
        close(fd);
    }
    CHECK(!tl_event_wait(&L->ev, 1, NT_QUIET_MS));
    close_listener(&ps, L);
}

/* A Request asking for markers (M=1) gets a rejecting Reply (R=1) and no
 * connect event. */
NT_CASE_FAM(markers_rejected)
{
    unsigned char b[64];
    struct raw_case rc;
    if (raw_case_open(&rc, fam, b, mpa_request(b, MPA_M, 2, true, 1, 1, NULL, 0))) {
        reply r;
        CHECK(read_reply(rc.fd, &r));
        CHECK(r.flags & MPA_R);
        CHECK(!(r.flags & MPA_M));
        close(rc.fd);
        rc.fd = -1;
        CHECK(!tl_event_wait(&rc.L->ev, 1, NT_QUIET_MS));
    }
    raw_case_close(&rc);
}

/* A client/server Request (S=1, revision 2, A=0, as Linux siw sends): the
 * connect event carries the private data after the RFC 6581 word and the
 * requester's IRD/ORD; NdkAccept completes once the Reply is written (no
 * third leg), and nothing follows the Reply until the initiator speaks. */
NT_CASE_FAM(client_server_request)
{
    unsigned char b[64];
    struct raw_case rc;
    NDK_CONNECTOR *p = NULL;
    /* IRD 3, ORD 5 */
    if (raw_case_open(&rc, fam, b, mpa_request(b, 0, 2, true, 3, 5, "siw", 3)))
        p = nt_incoming(rc.L, 0, NT_WAIT_MS);
    if (p) {
        /* IRD min(128, requester ORD), ORD min(128, requester IRD) */
        expect_offer(p, "siw", 3, 5, 3);
        NDK_QP *qp = nt_qp(&rc.ps);
        nt_op *dev = nt_op_new(NT_DISC, "disconnect event");
        nt_op *acc = start_accept(p, qp, 2, "ok", 2, dev);
        reply r;
        CHECK(read_reply(rc.fd, &r));
        CHECK_STATUS(nt_finish(acc, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK(!(r.flags & MPA_R));
        CHECK(r.flags & MPA_S);
        CHECK_EQ(r.rev, 2);
        CHECK_EQ(r.pdlen, 6);
        CHECK_EQ(r.w0 & W0_A, 0); /* client/server answered in kind */
        CHECK_EQ(r.w0 & 0x3FFF, 2);
        CHECK_EQ(r.w1 & 0x3FFF, 2);
        CHECK(memcmp(r.pd + 4, "ok", 2) == 0);
        /* Nothing more until the initiator's first FPDU. */
        struct pollfd pf = {.fd = rc.fd, .events = POLLIN};
        CHECK_EQ(poll(&pf, 1, (int)NT_QUIET_MS), 0);
        close(rc.fd);
        rc.fd = -1;
        CHECK(tl_event_wait(&dev->ev, 1, NT_WAIT_MS)); /* the peer went away */
        nt_close(p);
        nt_close(qp);
    }
    raw_case_close(&rc);
}

/* An MPA revision 1 Request (no RFC 6581 word): private data as is, the
 * requester's IRD/ORD count as the maxima; answered with a revision 1
 * Reply, and Accept completes without a third leg. */
NT_CASE_FAM(revision1_request)
{
    unsigned char b[64];
    struct raw_case rc;
    NDK_CONNECTOR *p = NULL;
    if (raw_case_open(&rc, fam, b, mpa_request(b, 0, 1, false, 0, 0, "abc", 3)))
        p = nt_incoming(rc.L, 0, NT_WAIT_MS);
    if (p) {
        expect_offer(p, "abc", 3, rc.ps.info.MaxInboundReadLimit,
                     rc.ps.info.MaxOutboundReadLimit);
        NDK_QP *qp = nt_qp(&rc.ps);
        nt_op *acc = start_accept(p, qp, 2, "v1", 2, NULL);
        reply r;
        CHECK(read_reply(rc.fd, &r));
        CHECK_STATUS(nt_finish(acc, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK(!(r.flags & MPA_R));
        CHECK(!(r.flags & MPA_S));
        CHECK_EQ(r.rev, 1);
        CHECK_EQ(r.pdlen, 2);
        CHECK(memcmp(r.pd, "v1", 2) == 0);
        close(rc.fd);
        rc.fd = -1;
        nt_close(p);
        nt_close(qp);
    }
    raw_case_close(&rc);
}

/* A peer-to-peer Request: the Reply picks the Write RTR when offered, else
 * the Read RTR; the Accept then waits for the RTR, and fails with
 * STATUS_CONNECTION_ABORTED when the initiator goes away first. */
NT_CASE_FAM(peer_to_peer_rtr_choice)
{
    nt_side ps;
    nt_lsn *L = open_listener(&ps, NULL, fam);
    REQUIRE(L);
    static const struct {
        unsigned w0, w1;  /* offered */
        unsigned want_w1; /* chosen */
    } offers[] = {
        {W0_A | 4, W1_C | W1_D | 4, W1_C},
        {W0_A | W0_B | 4, W1_C | 4, W1_C},
        {W0_A | 4, W1_D | 4, W1_D},
    };
    for (unsigned i = 0; i < 3; i++) {
        unsigned char b[64];
        size_t n = mpa_request(b, 0, 2, true, offers[i].w0, offers[i].w1, NULL, 0);
        int fd = send_request(L, b, n);
        REQUIRE(fd >= 0);
        NDK_CONNECTOR *p = nt_incoming(L, i, NT_WAIT_MS);
        if (!p) {
            close(fd);
            break;
        }
        NDK_QP *qp = nt_qp(&ps);
        nt_op *acc = start_accept(p, qp, 4, NULL, 0, NULL);
        reply r;
        CHECK(read_reply(fd, &r));
        CHECK(!(r.flags & MPA_R));
        CHECK(r.w0 & W0_A);
        CHECK_EQ(r.w1 & (W1_C | W1_D), offers[i].want_w1);
        CHECK_EQ(r.w0 & W0_B, 0);
        /* Waiting for the RTR. */
        CHECK(!tl_event_wait(&acc->ev, 1, NT_QUIET_MS));
        CHECK(!nt_done(acc));
        close(fd);
        CHECK_STATUS(nt_finish(acc, NT_WAIT_MS), STATUS_CONNECTION_ABORTED);
        nt_close(p);
        nt_close(qp);
    }
    close_listener(&ps, L);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(half_open_limit_and_request_timeout);
    RUN_FAM(half_open_limit_lets_an_initiator_in);
    RUN_FAM(malformed_requests);
    RUN_FAM(markers_rejected);
    RUN_FAM(client_server_request);
    RUN_FAM(revision1_request);
    RUN_FAM(peer_to_peer_rtr_choice);
    return tl_finish();
}
