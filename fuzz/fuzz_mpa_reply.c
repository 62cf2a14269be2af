/*
 * libFuzzer target for the initiator's MPA Reply path: NdkConnect over TCP
 * to a responder this file plays with a socket of its own, which answers
 * the Request with the input's octets. Everything between the socket and the
 * connect completion runs as in production: the connector's Reply reader
 * (wire/mpa.c) and its decisions (connector.c on_reply), on the adapter's
 * progress engine. TCP, the engine's thread and its clock are the fake
 * kernel's (fake_net/fake_kernel.h): the engine runs when this file calls
 * fake_net_run, and an input takes the same path every time.
 *
 * Input: [0] bits 0-1 the adapter: 0 default (MPA v2, peer-to-peer, offering
 * the Write and, with ORD >= 1, the Read RTR), 1 NDK_OPEN_FLAG_REQUEST_CRC,
 * 2 NDK_OPEN_FLAG_NO_P2P, 3 NDK_OPEN_FLAG_MPA_REV1; bits 2-4 the ORD and bits
 * 5-7 the IRD NdkConnect asks for, from {0, 1, 2, 4, 8, 16, 128, 300}. The
 * rest is what the responder sends, in one write. When those octets are not
 * a whole Reply (nor a wrong one), the responder then closes its side. In
 * the end the responder resets the connection and the connector is closed;
 * with an odd number of octets the engine sees the reset first (octets
 * after the Reply may still be in the receive engine then), with an even
 * number the close comes first (both orders happen with a real kernel).
 *
 * Checked for every input (abort() otherwise; ASan/UBSan/LSan watch too):
 *  - the Request on the wire fits the adapter (key, S, Rev, A, the RTR types
 *    offered, CRC, IRD/ORD capped at 128, the private data);
 *  - NdkConnect completes exactly once, by the time the engine is idle
 *    (no time passes), with the status the Reply calls for by the rules
 *    an independent reading of it gives (RFC 5044
 *    and RFC 6581 as the project follows them, docs/behaviour.md "Status
 *    codes"): a cut Reply STATUS_CONNECTION_REFUSED; a malformed one (key,
 *    revision, PD_Length, the S/Rev pair), markers, or S that does not
 *    answer ours STATUS_INVALID_NETWORK_RESPONSE; R=1 STATUS_CONNECTION_REFUSED
 *    with the private data readable; an ORD over 128 the same status after a
 *    Terminate (2,0,6), a peer-to-peer Reply with no RTR type we offered
 *    after (2,0,7), each the only octets after the Request; else success;
 *  - after success, NdkGetConnectionData gives the Reply's private data and
 *    the IRD/ORD of RFC 6581 negotiation (ours capped at 128, then at the
 *    peer's opposite value unless that is 0x3FFF); NdkCompleteConnect sends
 *    exactly the RTR chosen (Write preferred, with CRC when either side asked
 *    for it), or nothing when the Reply has A=0.
 *
 * Leak detection per input is off (see LLVMFuzzerInitialize in
 * loopback_setup.c); a leak still fails the run at exit (LSan).
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ndk/ndk.h>

#include "ensure.h"
#include "fake_kernel.h"
#include "loopback_setup.h"
#include "wire/mpa.h"

#define MAX_RW 128 /* the adapter's IRD/ORD maxima (NDK_ADAPTER_INFO) */
static const uint8_t caller_pd[5] = {'f', 'u', 'z', 'z', '!'};
static const ULONG depths[8] = {0, 1, 2, 4, 8, 16, 128, 300};

/* LLVMFuzzerInitialize (no leak scan per input): loopback_setup.c. */

/* ---- one-shot events signalled from provider callbacks ---- */

struct event {
    unsigned count;
    NTSTATUS status;
};

static void request_done(PVOID ctx, NTSTATUS st)
{
    struct event *e = ctx;
    e->count++;
    e->status = st;
}

static void close_done(PVOID ctx)
{
    request_done(ctx, STATUS_SUCCESS);
}

/* The first completion, once the engine has nothing left to do: one
 * still missing then is a lost completion (a finding). */
static NTSTATUS event_wait(struct event *e)
{
    ENSURE(fake_net_run());
    ENSURE(e->count > 0);
    return e->status;
}

/* ---- the adapters and the responder's listening socket ---- */

struct side {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *cq;
    ULONG flags;
};

static struct side sides[4];
static int g_lfd = -1;
static struct sockaddr_in g_dst;

static bool init_once(void)
{
    static bool done;
    if (done)
        return true;
    static const ULONG flags[4] = {0, NDK_OPEN_FLAG_REQUEST_CRC, NDK_OPEN_FLAG_NO_P2P, NDK_OPEN_FLAG_MPA_REV1};
    for (int i = 0; i < 4; i++) {
        NDK_OPEN_OPTIONS o;
        memset(&o, 0, sizeof o);
        o.Size = sizeof o;
        /* The fake kernel (fuzz/fake_net) has no AF_UNIX sockets: the
         * same-host rendezvous (docs/shm.md) would call the real one. */
        o.Flags = flags[i] | NDK_OPEN_FLAG_NO_SHM;
        sides[i].flags = flags[i];
        if (!fuzz_open_lo_adapter(&o, 16, &sides[i].ad, &sides[i].pd, &sides[i].cq))
            return false;
    }
    g_lfd = fuzz_lo_listen(&g_dst);
    done = true;
    return true;
}

/* ---- the responder's socket ---- */

/* Reads exactly n octets, once the engine has sent what it will; false on
 * EOF or error, a shortfall is a finding. */
static bool read_exact(int fd, uint8_t *buf, size_t n)
{
    ENSURE(fake_net_run());
    size_t have = 0;
    while (have < n) {
        ssize_t r = fake_recv(fd, buf + have, n - have, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN))
            return false;
        ENSURE(r > 0);
        have += (size_t)r;
    }
    return true;
}

/* Everything until the connector's side ends (FIN or reset), at most cap. */
static size_t read_to_end(int fd, uint8_t *buf, size_t cap)
{
    ENSURE(fake_net_run());
    size_t have = 0;
    for (;;) {
        ssize_t r = fake_recv(fd, buf + have, cap - have, 0);
        if (r == 0 || (r < 0 && errno != EAGAIN))
            return have;
        ENSURE(r > 0); /* EAGAIN: the side did not end */
        have += (size_t)r;
        ENSURE(have < cap);
    }
}

static void abort_socket(int fd)
{
    struct linger l = {1, 0}; /* RST: no TIME_WAIT left behind per input */
    fake_setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    fake_close(fd);
}

/* The Request as the wire has it must fit the adapter. */
static void check_request(const struct mpa_frame *q, ULONG flags, ULONG ird, ULONG ord)
{
    bool rev1 = flags & NDK_OPEN_FLAG_MPA_REV1;
    bool p2p = !rev1 && !(flags & NDK_OPEN_FLAG_NO_P2P);
    ENSURE(!q->reply && !q->markers && !q->reject);
    ENSURE(q->crc == !!(flags & NDK_OPEN_FLAG_REQUEST_CRC));
    ENSURE(q->enhanced == !rev1 && q->rev == (rev1 ? 1 : 2));
    if (!rev1) {
        ENSURE(q->p2p == p2p);
        ENSURE(q->rtr == (p2p ? (MPA_RTR_WRITE | (ord >= 1 ? MPA_RTR_READ : 0)) : 0));
        ENSURE(q->ird == (ird < MAX_RW ? ird : MAX_RW) && q->ord == (ord < MAX_RW ? ord : MAX_RW));
    }
    ENSURE(q->pd_len == sizeof caller_pd && memcmp(q->pd, caller_pd, sizeof caller_pd) == 0);
}

/* ---- what the Reply calls for ---- */

struct verdict {
    NTSTATUS status;
    uint8_t term_code; /* (2,0,code) sent before the reset; 0: none */
    bool frame;        /* a whole, well-formed Reply was read */
    bool close_after;  /* the responder closes: its octets are not a whole Reply */
    struct mpa_frame f;
    bool crc;
    uint8_t rtr;       /* the RTR NdkCompleteConnect sends; 0: none */
    ULONG ird, ord;    /* effective values */
};

static ULONG negotiated(ULONG mine, uint16_t peers)
{
    return peers == MPA_IRD_ORD_MASK || mine <= peers ? mine : peers;
}

static void judge(struct mpa_reader *r, const uint8_t *s, size_t n, const struct mpa_frame *q, ULONG flags,
                  ULONG ird, ULONG ord, struct verdict *v)
{
    memset(v, 0, sizeof *v);
    mpa_reader_init(r, true, MPA_PD_MAX);
    size_t used = 0;
    enum mpa_result res = mpa_reader_feed(r, s, n, &used, &v->f);
    if (res == MPA_NEED_MORE) {
        v->close_after = true;
        v->status = STATUS_CONNECTION_REFUSED; /* closed before a Reply */
        return;
    }
    if (res != MPA_DONE) {
        v->status = STATUS_INVALID_NETWORK_RESPONSE;
        return;
    }
    const struct mpa_frame *f = &v->f;
    v->frame = true;
    v->crc = f->crc || (flags & NDK_OPEN_FLAG_REQUEST_CRC);
    /* We cannot insert markers; our S=1 needs an S=1 Rev 2 answer, and an
     * S=1 answer needs our S=1. */
    if (f->markers || f->enhanced != q->enhanced) {
        v->status = STATUS_INVALID_NETWORK_RESPONSE;
        return;
    }
    ULONG want_ird = ird < MAX_RW ? ird : MAX_RW, want_ord = ord < MAX_RW ? ord : MAX_RW;
    v->ird = f->enhanced ? negotiated(want_ird, f->ord) : want_ird;
    v->ord = f->enhanced ? negotiated(want_ord, f->ird) : want_ord;
    if (f->reject) {
        v->status = STATUS_CONNECTION_REFUSED;
        return;
    }
    if (f->enhanced && f->ord != MPA_IRD_ORD_MASK && f->ord > MAX_RW) {
        v->status = STATUS_INVALID_NETWORK_RESPONSE;
        v->term_code = 0x06; /* more inbound Reads than we can hold */
        return;
    }
    if (f->enhanced && f->p2p) {
        /* What we offered: the Request's RTR types (or, to an A=0 Request,
         * the ones the adapter would offer). */
        uint8_t offered = q->p2p ? q->rtr : (uint8_t)(MPA_RTR_WRITE | (want_ord >= 1 ? MPA_RTR_READ : 0));
        uint8_t common = f->rtr & offered;
        if (!common) {
            v->status = STATUS_INVALID_NETWORK_RESPONSE;
            v->term_code = 0x07; /* no matching RTR option */
            return;
        }
        v->rtr = (common & MPA_RTR_WRITE) ? MPA_RTR_WRITE : MPA_RTR_READ;
    }
    v->status = STATUS_SUCCESS;
}

/* ---- one connection ---- */

static void check_connection_data(NDK_CONNECTOR *c, const struct verdict *v)
{
    ULONG ird = 0, ord = 0, len = 0;
    uint8_t pd[MPA_PD_MAX];
    ENSURE(c->Dispatch->NdkGetConnectionData(c, &ird, &ord, NULL, &len) == STATUS_SUCCESS);
    ENSURE(len == v->f.pd_len);
    len = sizeof pd;
    ENSURE(c->Dispatch->NdkGetConnectionData(c, &ird, &ord, pd, &len) == STATUS_SUCCESS);
    ENSURE(len == v->f.pd_len && memcmp(pd, v->f.pd, len) == 0);
    if (v->status == STATUS_SUCCESS)
        ENSURE(ird == v->ird && ord == v->ord);
}

static void close_obj(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    struct event e = {0};
    NTSTATUS st = fn(h, close_done, &e);
    ENSURE(st == STATUS_SUCCESS || st == STATUS_PENDING);
    if (st == STATUS_PENDING)
        event_wait(&e);
    else
        ENSURE(e.count == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || !init_once())
        return 0;
    fuzz_seed_from_input(data, size);
    struct side *sd = &sides[data[0] & 3];
    ULONG ord = depths[(data[0] >> 2) & 7], ird = depths[data[0] >> 5];
    const uint8_t *reply = data + 1;
    size_t reply_len = size - 1;
    NDK_ADAPTER *ad = sd->ad;

    NDK_QP *qp = NULL;
    NDK_CONNECTOR *c = NULL;
    ENSURE(sd->pd->Dispatch->NdkCreateQp(sd->pd, sd->cq, sd->cq, NULL, 4, 4, 1, 1, 0, NULL, NULL, &qp) ==
           STATUS_SUCCESS);
    ENSURE(ad->Dispatch->NdkCreateConnector(ad, NULL, NULL, &c) == STATUS_SUCCESS);
    struct sockaddr_in src = g_dst;
    src.sin_port = 0;
    struct event conn = {0}, complete = {0}, disc = {0};
    NTSTATUS st = c->Dispatch->NdkConnect(c, qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&g_dst, sizeof g_dst, ird,
                                          ord, (PVOID)caller_pd, sizeof caller_pd, request_done, &conn);
    ENSURE(st == STATUS_PENDING);

    /* The responder: take the connection, read the Request, answer. */
    int fd = fake_accept4(g_lfd, NULL, NULL, SOCK_CLOEXEC);
    ENSURE(fd >= 0);
    uint8_t qbuf[MPA_FRAME_MAX];
    ENSURE(read_exact(fd, qbuf, MPA_HDR_LEN));
    size_t qlen = MPA_HDR_LEN + (size_t)(qbuf[18] << 8 | qbuf[19]);
    ENSURE(qlen <= sizeof qbuf && read_exact(fd, qbuf + MPA_HDR_LEN, qlen - MPA_HDR_LEN));
    static struct mpa_reader qr, rr;
    struct mpa_frame q;
    mpa_reader_init(&qr, false, MPA_PD_MAX);
    size_t used = 0;
    ENSURE(mpa_reader_feed(&qr, qbuf, qlen, &used, &q) == MPA_DONE && used == qlen);
    check_request(&q, sd->flags, ird, ord);

    struct verdict v;
    judge(&rr, reply, reply_len, &q, sd->flags, ird, ord, &v);
    if (reply_len)
        ENSURE(fake_send(fd, reply, reply_len, MSG_NOSIGNAL) == (ssize_t)reply_len);
    if (v.close_after)
        fake_shutdown(fd, SHUT_WR);

    st = event_wait(&conn);
    if (st != v.status) {
        fprintf(stderr, "fuzz_mpa_reply: Connect completed with %s, the Reply calls for %s\n", ndk_status_name(st),
                ndk_status_name(v.status));
        abort();
    }
    if (v.term_code) {
        uint8_t got[64], want[28];
        size_t n = read_to_end(fd, got, sizeof got);
        ENSURE(n == mpa_build_term_simple(2, 0, v.term_code, v.crc, want) && memcmp(got, want, n) == 0);
    }
    /* docs/behaviour.md: the reject's private data stays readable after the refusal. */
    if (v.status == STATUS_SUCCESS || (v.frame && v.status == STATUS_CONNECTION_REFUSED))
        check_connection_data(c, &v);
    if (st == STATUS_SUCCESS) {
        ENSURE(c->Dispatch->NdkCompleteConnect(c, close_done, &disc, request_done, &complete) == STATUS_SUCCESS);
        if (v.rtr) {
            uint8_t got[52], want[52];
            size_t n = v.rtr == MPA_RTR_WRITE ? mpa_build_write_rtr(v.crc, want) : mpa_build_read_rtr(v.crc, want);
            ENSURE(read_exact(fd, got, n) && memcmp(got, want, n) == 0);
        }
    }
    abort_socket(fd);
    if (reply_len & 1)
        ENSURE(fake_net_run());
    close_obj(&c->Header, c->Dispatch->NdkCloseConnector);
    close_obj(&qp->Header, qp->Dispatch->NdkCloseQp);
    ENSURE(fake_net_run());
    ENSURE(conn.count == 1 && complete.count == 0);
    return 0;
}
