/*
 * Our LISTENER against raw TCP initiators that are slow to send their MPA
 * Request (docs/behaviour.md "Listeners"): a Request trickling in within
 * MpaRequestTimeoutMs is accepted, one that does not arrive in time is
 * closed silently, and at most MaxHalfOpen connections may wait for their
 * Request while the listener keeps serving complete ones.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

/*
 * Sends the siw Request one octet per 100 ms. The pause is a poll() on the
 * socket, so a close by libndk ends it at once. Returns the octets sent
 * before the connection ended (all 24 if it did not); *end and *t_end tell
 * how and when (ms since the connect).
 */
static size_t send_slowly(int fd, uint64_t t0, int *end, unsigned *t_end, uint8_t *got, size_t *nb)
{
    *end = RP_OPEN;
    *nb = 0;
    *t_end = 0;
    for (size_t i = 0; i < sizeof rp_siw_request; i++) {
        if (!rp_send(fd, rp_siw_request + i, 1)) {
            *end = RP_RESET; /* EPIPE/ECONNRESET: libndk is gone */
            *t_end = rp_ms_since(t0);
            return i;
        }
        if (!rp_quiet(fd, 100, NULL, NULL)) {
            /* Something came: octets, a FIN or a RST. Collect it. */
            *end = rp_wait_end(fd, 50, got, 64, nb);
            *t_end = rp_ms_since(t0);
            return i + 1;
        }
    }
    return sizeof rp_siw_request;
}

/* With a 5000 ms request timer a 2.4 s Request is still in time. */
static void slow_request_accepted(void)
{
    nk_passive p;
    if (!nk_passive_open(&p, nk_open_responder(5000, 0)) || !nk_passive_connect(&p))
        goto out;
    int end;
    unsigned t_end = 0;
    uint8_t got[64];
    size_t nb;
    size_t sent = send_slowly(p.fd, tl_now_ns(), &end, &t_end, got, &nb);
    if (sent != sizeof rp_siw_request || end != RP_OPEN || nb) {
        tl_failures++;
        fprintf(stderr, "[%s] the slow Request was cut off after %zu octets\n", tl_current, sent);
        rp_report_end("slow Request", end, t_end, got, nb);
        goto out;
    }
    p.c = nk_next_event(p.l, NK_WAIT_MS);
    CHECK(p.c != NULL);
    if (!p.c)
        goto out;
    p.qp = nk_qp(p.w);
    CHECK(p.qp != NULL);
    if (!p.qp)
        goto out;
    nk_op a = nk_accept(p.c, p.qp, 1, 1, NULL, 0);
    CHECK_ST(nk_op_wait(&a, NK_WAIT_MS), STATUS_SUCCESS);
    uint8_t rep[64];
    size_t n = rp_read(p.fd, rep, 24, NK_WAIT_MS, &end);
    CHECK_EQ(n, 24);
    if (n == 24)
        rp_check_reply_header(rep, n, RP_F_S, 0xF0, 2);
out:
    nk_passive_close(&p);
}

/* With a 500 ms request timer the same initiator is closed silently after
 * about 500 ms: not at once (each octet is fine so far), not never (the
 * timer runs from the accept, not from the last octet). */
static void slow_request_times_out(void)
{
    nk_passive p;
    if (!nk_passive_open(&p, nk_open_responder(500, 0)) || !nk_passive_connect(&p))
        goto out;
    uint64_t t0 = tl_now_ns();
    int end;
    unsigned t_end = 0;
    uint8_t got[64];
    size_t nb = 0;
    size_t sent = send_slowly(p.fd, t0, &end, &t_end, got, &nb);
    if (end == RP_OPEN) {
        /* Still open (all 24 octets sent, or octets came back): wait. */
        size_t more = 0;
        end = rp_wait_end(p.fd, NK_WAIT_MS, got + nb, sizeof got - nb, &more);
        nb += more;
        t_end = rp_ms_since(t0);
    }
    fprintf(stderr, "    slow initiator: %zu octets sent, %s at %u ms\n", sent, rp_end_name(end),
            t_end);
    CHECK(end == RP_EOF || end == RP_RESET);
    CHECK_EQ(nb, 0);
    CHECK(t_end >= 400);  /* not before the timer (some scheduling slack) */
    CHECK(t_end <= 2000); /* and not long after it */
    CHECK(sent < sizeof rp_siw_request);
    nk_no_event(p.l, RP_NO_EVENT_MS, "slow Request after the timer");
    CHECK(nk_roundtrip(p.w, p.l, "after the slow initiator"));
out:
    nk_passive_close(&p);
}

/*
 * 200 TCP connections that never send anything against MaxHalfOpen = 32 and
 * MpaRequestTimeoutMs = 3000: at most 32 may be held waiting, the rest are
 * reset at once; a real NDK connection still gets through during the flood;
 * every held one is closed by its request timer.
 */
#define FLOOD 200
#define FLOOD_HALF_OPEN 32
#define FLOOD_REQ_MS 3000u
#define FLOOD_QUICK_MS 1000u

struct flood {
    int fd[FLOOD];
    bool connected[FLOOD], ended[FLOOD];
    int how[FLOOD];
    unsigned t_end[FLOOD]; /* ms since the flood started */
    size_t bytes;          /* octets received: there must be none */
};

/* Polls every live connection until deadline; records how each one ends. */
static void flood_poll(struct flood *f, uint64_t t0, uint64_t deadline)
{
    for (;;) {
        struct pollfd p[FLOOD];
        int idx[FLOOD], np = 0;
        for (int i = 0; i < FLOOD; i++) {
            if (f->ended[i])
                continue;
            p[np].fd = f->fd[i];
            p[np].events = (short)(f->connected[i] ? POLLIN : (POLLOUT | POLLIN));
            p[np].revents = 0;
            idx[np++] = i;
        }
        int left = rp_ms_left(deadline);
        if (np == 0 || left == 0)
            return;
        int r = poll(p, (nfds_t)np, left);
        if (r <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            int i = idx[k];
            if (!p[k].revents)
                continue;
            if (!f->connected[i]) {
                int err = 0;
                socklen_t el = sizeof err;
                getsockopt(f->fd[i], SOL_SOCKET, SO_ERROR, &err, &el);
                if (err == 0 && (p[k].revents & POLLOUT)) {
                    f->connected[i] = true;
                } else if (err != 0) {
                    /* Refused or reset during the handshake: closed at once. */
                    f->ended[i] = true;
                    f->how[i] = RP_RESET;
                    f->t_end[i] = rp_ms_since(t0);
                    continue;
                }
                if (!(p[k].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
            }
            uint8_t b[256];
            ssize_t n = recv(f->fd[i], b, sizeof b, MSG_DONTWAIT);
            if (n > 0) {
                f->bytes += (size_t)n;
                continue;
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            f->ended[i] = true;
            f->how[i] = n == 0 ? RP_EOF : errno == ECONNRESET ? RP_RESET : RP_ERROR;
            f->t_end[i] = rp_ms_since(t0);
        }
    }
}

struct flood_rt {
    nk_world *w;
    nk_listener *l;
    uint64_t t_start;
    bool ok;
};

static void *flood_roundtrip(void *arg)
{
    struct flood_rt *rt = arg;
    rt->t_start = tl_now_ns();
    rt->ok = nk_roundtrip(rt->w, rt->l, "during the half-open flood");
    return NULL;
}

static void half_open_flood(void)
{
    nk_world *w = nk_open_responder(FLOOD_REQ_MS, FLOOD_HALF_OPEN);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    struct flood *f = calloc(1, sizeof *f);
    if (!l || !f)
        goto out;
    uint64_t t0 = tl_now_ns();
    int started = 0;
    for (int i = 0; i < FLOOD; i++) {
        f->fd[i] = rp_connect_start(l->port);
        if (f->fd[i] < 0) {
            f->ended[i] = true; /* could not even start: counts as refused */
            f->how[i] = RP_ERROR;
            f->t_end[i] = 0;
        } else {
            started++;
        }
    }
    CHECK_EQ(started, FLOOD);

    /* The "quick" window: everything over the limit must be gone by now. */
    flood_poll(f, t0, t0 + (uint64_t)FLOOD_QUICK_MS * 1000000u);
    int quick = 0, rst = 0;
    for (int i = 0; i < FLOOD; i++) {
        quick += f->ended[i];
        rst += f->ended[i] && f->how[i] == RP_RESET;
    }
    fprintf(stderr, "    flood: %d of %d closed within %u ms (%d by RST)\n", quick, FLOOD,
            FLOOD_QUICK_MS, rst);
    /* "Most beyond 32": allow a little slack for connections the kernel had
     * not handed over yet. */
    CHECK(quick >= FLOOD - FLOOD_HALF_OPEN - 16);
    CHECK(FLOOD - quick <= FLOOD_HALF_OPEN); /* at most MaxHalfOpen held */
    CHECK(FLOOD - quick >= FLOOD_HALF_OPEN - 8); /* and the held ones are really held */

    /* During the flood (the held ones are still waiting): a real client,
     * from another thread so that the close times below stay exact. */
    struct flood_rt rt = {.w = w, .l = l};
    pthread_t th;
    bool started_rt = pthread_create(&th, NULL, flood_roundtrip, &rt) == 0;
    CHECK(started_rt);

    /* Every held connection is closed by its request timer. */
    flood_poll(f, t0, t0 + (uint64_t)(FLOOD_REQ_MS + 2500) * 1000000u);
    if (started_rt) {
        pthread_join(th, NULL);
        fprintf(stderr, "    NDK connection during the flood: %s (%u ms after the flood began)\n",
                rt.ok ? "ok" : "FAILED", (unsigned)((rt.t_start - t0) / 1000000u));
        CHECK(rt.ok);
    }
    int open_left = 0, early_late = 0;
    unsigned last = 0, first_held = ~0u;
    for (int i = 0; i < FLOOD; i++) {
        if (!f->ended[i]) {
            open_left++;
            continue;
        }
        if (f->t_end[i] > last)
            last = f->t_end[i];
        if (f->t_end[i] > FLOOD_QUICK_MS && f->t_end[i] < first_held)
            first_held = f->t_end[i];
        /* A held one ends at its timer (~3000 ms), unless the real client's
         * connection evicted it: the listener then resets the oldest. */
        if (f->t_end[i] > FLOOD_QUICK_MS && f->t_end[i] + 500 < FLOOD_REQ_MS)
            early_late++;
    }
    fprintf(stderr, "    flood: held ones closed from %u to %u ms, %d still open, %d closed "
                    "between the quick window and the timer\n",
            first_held, last, open_left, early_late);
    /* MpaRequestTimeoutMs bounds each one (plus scheduling slack). */
    CHECK(last <= FLOOD_REQ_MS + 1000);
    CHECK_EQ(open_left, 0);
    CHECK(early_late <= 1); /* at most the one the real connection displaced */
    CHECK_EQ(f->bytes, 0);
    CHECK(nk_roundtrip(w, l, "after the half-open flood"));
out:
    if (f) {
        for (int i = 0; i < FLOOD; i++)
            if (f->fd[i] > 0)
                close(f->fd[i]);
        free(f);
    }
    CHECK(l != NULL);
    nk_close_world(w);
}

int main(void)
{
    RUN(slow_request_accepted);
    RUN(slow_request_times_out);
    RUN(half_open_flood);
    return tl_finish();
}
