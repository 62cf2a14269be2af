/*
 * After libndk sends a Terminate it keeps reading, and drops, what the peer
 * sent behind the offending FPDU, until the peer closes (docs/behaviour.md
 * "Terminates"). Otherwise a peer that had more in flight than our receive
 * window holds (here several MiB from a raw initiator that writes as fast
 * as the socket takes it) has its FIN stuck behind unread octets: our
 * socket sits in FIN-WAIT-2, NdkDisconnect waits for DisconnectTimeoutMs
 * and fails with STATUS_IO_TIMEOUT.
 *
 * Checked: the raw peer gets the Terminate and then our FIN; the disconnect
 * event says TERMINATE_SENT; once the peer closes (its FIN behind all it
 * sent), NdkDisconnect completes within a fraction of DisconnectTimeoutMs,
 * not by the timer; a peer that never closes is still cut off by the timer,
 * and one that keeps sending is reset once 64 MiB were dropped.
 */
#include "dptest.h"

#define JUNK_MAX (4u << 20)       /* what the raw peer sends behind the bad FPDU */
#define DISCARD_LIMIT (64u << 20) /* qp.h RX_DISCARD_MAX_OCTETS */
#define JUNK_STALL_MS 300u        /* no progress for this long: the window is shut */
#define PROMPT_MS 1000u           /* DisconnectTimeoutMs is 3000 (dp_options) */
/* peer_that_keeps_sending_is_reset: its timer, far beyond any flood of
 * 64 MiB on a loaded machine, so that only the discard limit can reset
 * the connection within the case. */
#define RESET_CASE_DISCONNECT_MS 30000u

static _Atomic ULONG disc_reason;
static tl_event disc_ev;

static void disc_ex(PVOID ctx, ULONG reason)
{
    (void)ctx;
    atomic_store(&disc_reason, reason);
    tl_event_signal(&disc_ev);
}

/* A raw client/server initiator accepted by p with NdkAcceptEx (so the
 * disconnect event carries its reason). */
static dp_conn *raw_accept_ex(dp_side *p, int *fd)
{
    dp_cfg cfg = dp_cfg_default();
    *fd = -1;
    dp_conn *c = dp_conn_new(NULL, p, &cfg);
    if (!c || !dp_conn_listen(c))
        return NULL;
    *fd = dp_raw_connect(&c->laddr, c->laddrlen, DP_WAIT_MS);
    if (*fd < 0 || !dp_raw_mpa_request(*fd, 4, 4) || !(c->cp = dp_conn_incoming(c, DP_WAIT_MS)))
        return NULL;
    dp_req *ra = dp_req_new("NdkAcceptEx");
    NTSTATUS st = dp_finish(ra,
                            c->cp->Dispatch->NdkAcceptEx(c->cp, c->qp, 4, 4, NULL, 0, disc_ex, NULL, dp_req_cb,
                                                         ra),
                            DP_WAIT_MS);
    DP_CHECK_ST(st, STATUS_SUCCESS);
    /* The MPA Reply (24 octets) is the raw peer's to read. */
    uint8_t rep[24];
    size_t got = 0;
    while (got < sizeof rep) {
        struct pollfd q = {.fd = *fd, .events = POLLIN};
        if (poll(&q, 1, (int)DP_WAIT_MS) != 1)
            break;
        ssize_t n = recv(*fd, rep + got, sizeof rep - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    CHECK_EQ(got, sizeof rep);
    return st == STATUS_SUCCESS && got == sizeof rep ? c : NULL;
}

/* An RDMA Write of 64 octets to an STag nobody issued: untagged CRC off,
 * tagged header (T=1 L=1 DV=1, RV=1 opcode 0), then the payload. */
static size_t bad_write(uint8_t out[84])
{
    memset(out, 0, 84);
    out[0] = 0;
    out[1] = 14 + 64; /* ULPDU_Length 78: 2 + 78 is a multiple of 4, no pad */
    out[2] = 0xC1;
    out[3] = 0x40;
    out[4] = 0x12, out[5] = 0x34, out[6] = 0x56, out[7] = 0x00; /* STag */
    out[15] = 0x40;                                            /* TO */
    return 84; /* + CRC field 0 */
}

/* Sends the bad FPDU, then junk as fast as the socket takes it, until max
 * octets, an error (*err), or nothing moved for stall_ms. Returns the
 * junk sent. */
static size_t flood(int fd, size_t max, unsigned stall_ms, int *err)
{
    uint8_t f[84];
    size_t n = bad_write(f);
    CHECK(send(fd, f, n, MSG_NOSIGNAL) == (ssize_t)n);
    static uint8_t junk[65536];
    size_t total = 0;
    *err = 0;
    while (total < max) {
        ssize_t w = send(fd, junk, sizeof junk, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            total += (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) {
            *err = errno;
            break;
        }
        struct pollfd q = {.fd = fd, .events = POLLOUT};
        if (poll(&q, 1, (int)stall_ms) != 1)
            break;
    }
    return total;
}

/* Reads what libndk sends until its FIN: the first FPDU must be a
 * Terminate; returns true when the FIN came within ms. */
static bool read_terminate_then_fin(int fd, unsigned ms)
{
    uint8_t buf[256];
    size_t got = 0;
    uint64_t deadline = tl_now_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        uint64_t now = tl_now_ns();
        if (now >= deadline)
            return false;
        struct pollfd q = {.fd = fd, .events = POLLIN};
        if (poll(&q, 1, (int)((deadline - now) / 1000000u) + 1) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
            CHECK(got < sizeof buf);
            continue;
        }
        if (n == 0)
            break;
        if (errno != EAGAIN && errno != EINTR)
            return false;
    }
    CHECK(got >= 28);
    /* Untagged (T=0), RDMAP opcode 7, and nothing but that one FPDU. */
    CHECK(got >= 4 && !(buf[2] & 0x80) && (buf[3] & 0x0F) == 7);
    size_t ulpdu = (size_t)buf[0] << 8 | buf[1];
    CHECK_EQ(got, 2 + ulpdu + ((4 - ((2 + ulpdu) & 3)) & 3) + 4);
    return true;
}

/*
 * The raw peer floods, reads our Terminate and FIN, then closes its side.
 * peer_closes false: it never does, and the timer must end the wait.
 */
static void run(bool peer_closes)
{
    dp_side p;
    REQUIRE(dp_side_open(&p));
    tl_event_init(&disc_ev);
    atomic_store(&disc_reason, 0);
    int fd;
    dp_conn *c = raw_accept_ex(&p, &fd);
    REQUIRE(c);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    int err;
    size_t junk = flood(fd, JUNK_MAX, JUNK_STALL_MS, &err);
    fprintf(stderr, "    %zu octets behind the bad FPDU\n", junk);
    CHECK(junk > 128u << 10); /* more than an untouched receive window holds */
    CHECK(tl_event_wait(&disc_ev, 1, DP_WAIT_MS));
    CHECK_EQ(atomic_load(&disc_reason), NDK_DISCONNECT_REASON_TERMINATE_SENT);
    CHECK(read_terminate_then_fin(fd, DP_WAIT_MS));

    dp_req *d = dp_req_new("NdkDisconnect");
    d->started = true;
    d->returned = c->cp->Dispatch->NdkDisconnect(c->cp, dp_req_cb, d);
    uint64_t t0 = tl_now_ns();
    if (peer_closes)
        shutdown(fd, SHUT_WR);
    NTSTATUS st = dp_finish(d, d->returned, DP_WAIT_MS);
    unsigned ms = (unsigned)((tl_now_ns() - t0) / 1000000u);
    fprintf(stderr, "    NdkDisconnect: %s after %u ms\n", ndk_status_name(st), ms);
    if (peer_closes) {
        /* The connection was ended by the Terminate: aborted, but at once. */
        DP_CHECK_ST(st, STATUS_CONNECTION_ABORTED);
        CHECK(ms < PROMPT_MS);
    } else {
        DP_CHECK_ST(st, STATUS_IO_TIMEOUT);
        CHECK(ms >= 2500);
    }
    close(fd);
    dp_conn_close(c);
    dp_side_close(&p);
    tl_event_destroy(&disc_ev);
}

DP_CASE(fin_behind_megabytes_completes_at_once)
{
    run(true);
}

DP_CASE(peer_that_never_closes_times_out)
{
    run(false);
}

/* A peer that goes on sending after our Terminate: reset once the discard
 * limit is reached, not by DisconnectTimeoutMs. The flood goes on until
 * that reset (or 4 x the limit): a pause of the engine that reads and
 * drops it is no shut window on a loaded machine (JUNK_STALL_MS ended
 * floods there after 8 to 63 MiB), so only DP_WAIT_MS without progress
 * ends it early; and the timer is set far beyond the flood, so the reset
 * the case sees is the limit's (64 MiB took 2.7 s at the slowest rate
 * seen, against a timer of 3000 ms). */
DP_CASE(peer_that_keeps_sending_is_reset)
{
    dp_side p;
    memset(&p, 0, sizeof p);
    NDK_OPEN_OPTIONS o = dp_options();
    o.DisconnectTimeoutMs = RESET_CASE_DISCONNECT_MS;
    REQUIRE(dp_side_open_as(&p, "lo", &o));
    tl_event_init(&disc_ev);
    int fd;
    dp_conn *c = raw_accept_ex(&p, &fd);
    REQUIRE(c);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    uint64_t t0 = tl_now_ns();
    int err;
    size_t junk = flood(fd, 4u * DISCARD_LIMIT, DP_WAIT_MS, &err);
    unsigned ms = (unsigned)((tl_now_ns() - t0) / 1000000u);
    fprintf(stderr, "    %zu octets sent, then %s after %u ms\n", junk, strerror(err), ms);
    CHECK(err == ECONNRESET || err == EPIPE);
    CHECK(junk >= DISCARD_LIMIT && junk < 2u * DISCARD_LIMIT);
    CHECK(ms < RESET_CASE_DISCONNECT_MS);
    close(fd);
    dp_conn_close(c);
    dp_side_close(&p);
    tl_event_destroy(&disc_ev);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(fin_behind_megabytes_completes_at_once);
    RUN_FAM(peer_that_never_closes_times_out);
    RUN_FAM(peer_that_keeps_sending_is_reset);
    return tl_finish();
}
