/*
 * Our LISTENER against a raw TCP initiator (rawpeer.h) sending bad MPA
 * Requests (docs/behaviour.md "Listeners"):
 *  - a malformed Request (key, revision, PD_Length, bytes after the Request,
 *    a truncated frame, random garbage) closes the TCP connection without a
 *    Reply and without a connect event;
 *  - a Request asking for markers gets a rejecting Reply (R=1), no event;
 *  - whatever one connection did, the listener keeps serving the next one.
 *
 * Timing: these cases run with MpaRequestTimeoutMs = 4000 and demand the
 * close within RP_PROMPT_MS, so a close caused by the request timer (i.e. the
 * bad input was not noticed) fails the test instead of passing it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rawpeer.h"
#include "testlib.h"

/* The passive side of every case here: the request timer long enough that
 * only the bad input itself can make libndk close promptly. */
static bool open_passive(nk_passive *p)
{
    return nk_passive_open(p, nk_open_responder(RP_BAD_INPUT_REQ_TIMEOUT, 0));
}

/* Waits RP_PROMPT_MS for our side to close fd (FIN or RST) without sending
 * anything; otherwise reports `what` and counts a failure. */
static bool expect_silent_close(int fd, const char *what)
{
    uint64_t t0 = tl_now_ns();
    uint8_t got[64];
    size_t nb = 0;
    int end = rp_wait_end(fd, RP_PROMPT_MS, got, sizeof got, &nb);
    if ((end == RP_EOF || end == RP_RESET) && nb == 0)
        return true;
    tl_failures++;
    fprintf(stderr, "[%s] %s: expected a close with no Reply\n", tl_current, what);
    rp_report_end(what, end, rp_ms_since(t0), got, nb);
    return false;
}

/* After a bad connection: no connect event came for it, and the listener
 * still serves a normal NDK connection. */
static void expect_still_serving(nk_passive *p, const char *what)
{
    (void)nk_no_event(p->l, RP_NO_EVENT_MS, what);
    char tag[96];
    snprintf(tag, sizeof tag, "after %.80s", what);
    if (!nk_roundtrip(p->w, p->l, tag)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: the listener no longer serves\n", tl_current, what);
    }
}

/* Accepts p's connector on a fresh QP, for a connection that may already be
 * broken; false (a failure counted) when there is no QP, else *st is how
 * Accept ended (NK_NO_COMPLETION when it did not). */
static bool accept_on_new_qp(nk_passive *p, NTSTATUS *st)
{
    p->qp = nk_qp(p->w);
    CHECK(p->qp != NULL);
    if (!p->qp)
        return false;
    nk_op a = nk_accept(p->c, p->qp, 1, 1, NULL, 0);
    *st = nk_op_wait(&a, NK_WAIT_MS);
    return true;
}

/*
 * One bad input: connect, send `bytes`, half-close if `fin`, then assert that
 * libndk closes within RP_PROMPT_MS without sending anything, that no connect
 * event comes, and that a normal NDK connection to the same listener works.
 */
static void expect_dropped(nk_passive *p, const uint8_t *bytes, size_t n, bool fin,
                           const char *what)
{
    int fd = rp_connect(p->l->port, NK_WAIT_MS);
    if (fd < 0) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: cannot connect to the listener\n", tl_current, what);
        return;
    }
    /* A send may fail once libndk reset the connection mid-way: fine. */
    (void)rp_send(fd, bytes, n);
    if (fin)
        rp_fin(fd);
    (void)expect_silent_close(fd, what);
    close(fd);
    expect_still_serving(p, what);
}

/* ndk_close_adapter right after NdkReject still keeps our FIN off the
 * reject (docs/interop.md: siw drops a reject's data once it has seen a
 * FIN): the close waits until the initiator closes, at most 500 ms. */
static void *close_adapter_thread(void *arg)
{
    ndk_close_adapter(arg);
    return NULL;
}

static void reject_then_close_adapter(void)
{
    nk_passive p;
    if (!open_passive(&p) ||
        !(p.c = nk_deliver(p.l, rp_siw_request, sizeof rp_siw_request, &p.fd)))
        goto out;
    static const char no[] = "no-thanks";
    uint64_t t0 = tl_now_ns();
    CHECK_ST(p.c->Dispatch->NdkReject(p.c, (PVOID)no, sizeof no - 1), STATUS_SUCCESS);
    NK_CLOSE(p.c);
    p.c = NULL;
    pthread_t th;
    bool started = pthread_create(&th, NULL, close_adapter_thread, p.w->ad) == 0;
    CHECK(started);
    if (!started)
        goto out;
    uint8_t rep[600];
    size_t n = rp_read_frame(p.fd, rep, NK_WAIT_MS);
    CHECK(n == RP_HDR_LEN + 4 + sizeof no - 1 && rp_check_reply_header(rep, n, RP_F_R, RP_F_R, 2));
    (void)expect_silent_close(p.fd, "after the reject");
    unsigned ms = rp_ms_since(t0);
    if (ms < 490) {
        tl_failures++;
        fprintf(stderr, "[%s] the close came %u ms after NdkReject, expected 500\n", tl_current,
                ms);
    }
    pthread_join(th, NULL);
    p.w->ad = NULL; /* closed by the thread */
out:
    nk_passive_close(&p);
}

static void markers_rejected(void)
{
    nk_passive p;
    bool ok = open_passive(&p);
    for (int v = 0; ok && v < 2; v++) {
        uint8_t req[64];
        size_t rl;
        const char *what;
        if (v == 0) {
            /* captures/host-to-guest-markers-rejected: 90 02 00 04 00 01 00 01 */
            rl = rp_frame_v2(req, RP_KEY_REQ, RP_F_M, 1, 1, NULL, 0);
            what = "M=1 Rev 2";
        } else {
            rl = rp_frame_raw(req, RP_KEY_REQ, RP_F_M, 1, 0, NULL, 0);
            what = "M=1 Rev 1";
        }
        int fd = rp_connect(p.l->port, NK_WAIT_MS);
        CHECK(fd >= 0);
        if (fd < 0)
            continue;
        uint64_t t_req = tl_now_ns();
        CHECK(rp_send(fd, req, rl));
        uint8_t rep[600];
        size_t n = rp_read_frame(fd, rep, NK_WAIT_MS);
        if (n == 0) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: no rejecting Reply\n", tl_current, what);
        } else {
            /* R=1, and the Reply must not ask for markers itself. */
            rp_check_reply_header(rep, n, RP_F_R, RP_F_R | RP_F_M, (uint8_t)(v == 0 ? 2 : 1));
        }
        /* No FIN right behind the reject (docs/interop.md: siw drops data
         * once it has seen a FIN): libndk waits for the initiator to close,
         * at most NDK_REJECT_LINGER_MS (500 ms, a timer started after our
         * Request arrived, so never sooner than that after t_req; the loop
         * counts whole milliseconds), then closes by itself. */
        (void)expect_silent_close(fd, what);
        unsigned after_req = rp_ms_since(t_req);
        if (after_req < 490) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: the close came %u ms after the Request, expected 500\n",
                    tl_current, what, after_req);
        }
        close(fd);
        expect_still_serving(&p, what);
    }
    nk_passive_close(&p);
}

/* The siw Request with `key` in place of the real one. */
static void wrong_key(void)
{
    nk_passive p;
    if (open_passive(&p)) {
        /* NULL stands for 16 zero octets. */
        static const char *keys[] = {
            RP_KEY_REP,         /* a Reply sent as a Request */
            "mpa id req frame", /* case matters */
            NULL,
            "MPA ID Req Fram_", /* only the last octet wrong */
        };
        for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++) {
            uint8_t req[24];
            memcpy(req, rp_siw_request, sizeof req);
            if (keys[i])
                memcpy(req, keys[i], RP_KEY_LEN);
            else
                memset(req, 0, RP_KEY_LEN);
            char what[64];
            snprintf(what, sizeof what, "wrong key #%u", i);
            expect_dropped(&p, req, sizeof req, false, what);
        }
    }
    nk_passive_close(&p);
}

/* Rev 0 and Rev > 2: the revision cannot be handled, close (docs/behaviour.md,
 * Listeners). */
static void unknown_revision(void)
{
    nk_passive p;
    if (open_passive(&p)) {
        static const uint8_t revs[] = {0, 3, 255};
        for (unsigned i = 0; i < sizeof revs; i++) {
            uint8_t req[24];
            memcpy(req, rp_siw_request, sizeof req);
            req[17] = revs[i];
            char what[64];
            snprintf(what, sizeof what, "Rev %u with S=1", revs[i]);
            expect_dropped(&p, req, sizeof req, false, what);
            /* And the non-enhanced form, in case only S=1 frames are checked. */
            size_t n = rp_frame_raw(req, RP_KEY_REQ, 0, revs[i], 0, NULL, 0);
            snprintf(what, sizeof what, "Rev %u with S=0", revs[i]);
            expect_dropped(&p, req, n, false, what);
        }
    }
    nk_passive_close(&p);
}

/* PD_Length over the RFC limit of 512: judged from the header alone, so the
 * connection stays open on our side of the test. */
static void pd_length_over_limit(void)
{
    nk_passive p;
    if (open_passive(&p)) {
        uint8_t req[RP_HDR_LEN + 600];
        memset(req, 0, sizeof req);
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 513, NULL, 0);
        expect_dropped(&p, req, n, false, "PD_Length 513, header only");
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 0xFFFF, NULL, 0);
        expect_dropped(&p, req, n, false, "PD_Length 65535, header only");
        uint8_t pd[513];
        memset(pd, 0x5A, sizeof pd);
        pd[0] = 0, pd[1] = 1, pd[2] = 0, pd[3] = 1;
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 513, pd, sizeof pd);
        expect_dropped(&p, req, n, false, "PD_Length 513 with 513 octets");
        n = rp_frame_raw(req, RP_KEY_REQ, 0, 1, 513, pd, sizeof pd);
        expect_dropped(&p, req, n, false, "Rev 1 PD_Length 513 with 513 octets");
    }
    nk_passive_close(&p);
}

/* PD_Length promises more than the initiator sends before its FIN. */
static void pd_length_beyond_data(void)
{
    nk_passive p;
    if (open_passive(&p)) {
        uint8_t req[RP_HDR_LEN + 16];
        static const uint8_t pd[10] = {0, 1, 0, 1, 'a', 'b', 'c', 'd', 'e', 'f'};
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 100, pd, sizeof pd);
        expect_dropped(&p, req, n, true, "PD_Length 100 with 10 octets, then FIN");
        n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, 512, NULL, 0);
        expect_dropped(&p, req, n, true, "PD_Length 512 with none, then FIN");
        n = rp_frame_raw(req, RP_KEY_REQ, 0, 1, 7, pd, 3);
        expect_dropped(&p, req, n, true, "Rev 1 PD_Length 7 with 3 octets, then FIN");
    }
    nk_passive_close(&p);
}

/*
 * S=1 with PD_Length < 4: the RFC 6581 word cannot be there. siw answers
 * with a rejecting Reply, behaviour.md's list of malformed frames closes
 * without one; both are accepted here, nothing else is (no connect event, no
 * accepting Reply, no hanging connection).
 */
static void enhanced_pd_too_short(void)
{
    nk_passive p;
    bool ok = open_passive(&p);
    for (unsigned pdl = 0; ok && pdl < 4; pdl++) {
        char what[64];
        snprintf(what, sizeof what, "S=1 with PD_Length %u", pdl);
        uint8_t req[32];
        static const uint8_t pd[3] = {0, 1, 0};
        size_t n = rp_frame_raw(req, RP_KEY_REQ, RP_F_S, 2, (uint16_t)pdl, pd, pdl);
        int fd = rp_connect(p.l->port, NK_WAIT_MS);
        CHECK(fd >= 0);
        if (fd < 0)
            continue;
        CHECK(rp_send(fd, req, n));
        uint8_t got[600];
        size_t nb = 0;
        uint64_t t0 = tl_now_ns();
        int end = rp_wait_end(fd, RP_PROMPT_MS, got, sizeof got, &nb);
        bool closed = end == RP_EOF || end == RP_RESET;
        bool reject_reply = nb >= RP_HDR_LEN && memcmp(got, RP_KEY_REP, RP_KEY_LEN) == 0 &&
                            (got[16] & RP_F_R) && nb == (size_t)RP_HDR_LEN + rp_get16(got + 18);
        if (!closed || (nb && !reject_reply)) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: expected a close (optionally after an R=1 Reply)\n",
                    tl_current, what);
            rp_report_end(what, end, rp_ms_since(t0), got, nb);
        }
        close(fd);
        expect_still_serving(&p, what);
    }
    nk_passive_close(&p);
}

/*
 * Every prefix of a valid Request, then FIN: k = 0 .. len-1 must all be
 * dropped (truncated in the key, the flags, PD_Length, the word and the ULP
 * data). At k = len the Request is whole: a connect event may come, and then
 * the connector must be acceptable or at least closable.
 */
static void truncated_request(void)
{
    nk_passive p;
    if (!open_passive(&p)) {
        nk_passive_close(&p);
        return;
    }
    uint8_t req[64];
    size_t len = rp_frame_v2(req, RP_KEY_REQ, 0, 1, 1, "trunc-pd", 8);
    for (size_t k = 0; k < len; k++) {
        char what[96];
        snprintf(what, sizeof what, "first %zu of %zu octets, then FIN", k, len);
        expect_dropped(&p, req, k, true, what);
    }

    if (nk_passive_connect(&p)) {
        CHECK(rp_send(p.fd, req, len));
        rp_fin(p.fd);
        p.c = nk_next_event(p.l, 1000);
        NTSTATUS st;
        if (!p.c) {
            fprintf(stderr, "    whole Request then FIN: no connect event\n");
        } else {
            uint8_t pd[16];
            ULONG pl = sizeof pd;
            CHECK_ST(nk_conn_data(p.c, NULL, NULL, pd, &pl), STATUS_SUCCESS);
            CHECK(pl == 8 && memcmp(pd, "trunc-pd", 8) == 0);
            if (accept_on_new_qp(&p, &st)) {
                fprintf(stderr, "    whole Request then FIN: connect event, Accept %s\n",
                        nk_st(st));
                CHECK(st != NK_NO_COMPLETION);
            }
        }
        nk_passive_drop(&p);
    }
    CHECK(nk_roundtrip(p.w, p.l, "after the whole Request + FIN"));
    nk_passive_close(&p);
}

/*
 * Random octets from a seeded PRNG (seed printed; NDK_TEST_SEED reproduces a
 * run). 20 octets or more hold a whole header with a wrong key, which must be
 * judged without a FIN; shorter ones are followed by a FIN.
 */
static uint64_t garbage_seed;

static void random_garbage(void)
{
    nk_passive p;
    if (!open_passive(&p)) {
        nk_passive_close(&p);
        return;
    }
    fprintf(stderr, "    garbage seed %llu (set NDK_TEST_SEED to repeat)\n",
            (unsigned long long)garbage_seed);
    uint64_t s = garbage_seed;
    static const size_t sizes[] = {1, 3, 15, 16, 19, 20, 21, 24, 64, 511, 532, 533, 1500, 4096};
    static uint8_t buf[4096];
    for (int round = 0; round < 2; round++) {
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint8_t)rp_rand(&s);
            if (round == 1 && n >= RP_HDR_LEN) {
                /* Round 2: the key is right and only what follows is random,
                 * which reaches the flag, revision and length checks. Valid
                 * combinations are ruled out: the Rev is forced to 3..255. */
                memcpy(buf, RP_KEY_REQ, RP_KEY_LEN);
                if (buf[17] <= 2)
                    buf[17] = (uint8_t)(buf[17] + 3);
            }
            char what[96];
            snprintf(what, sizeof what, "%s garbage of %zu octets (seed %llu, round %d)",
                     round ? "keyed" : "random", n, (unsigned long long)garbage_seed, round);
            expect_dropped(&p, buf, n, n < RP_HDR_LEN, what);
        }
    }
    nk_passive_close(&p);
}

/*
 * Octets after a valid Request: the initiator sent before the Reply, a
 * protocol violation (RFC 5044: nothing before the Reply). Our side must
 * close. If a connect event was delivered before the violation was seen,
 * Accept must then fail.
 *   later = false: Request and extra octets in one send();
 *   later = true:  the extra octets come after the connect event.
 */
static void extra_after_request(bool later)
{
    nk_passive p;
    if (!open_passive(&p) || !nk_passive_connect(&p))
        goto out;
    /* The extra octets look like the start of an FPDU (a Write RTR). */
    uint8_t buf[64];
    memcpy(buf, rp_siw_request, sizeof rp_siw_request);
    size_t n = sizeof rp_siw_request;
    n += rp_write_rtr(buf + n, false);
    if (later) {
        CHECK(rp_send(p.fd, buf, sizeof rp_siw_request));
        p.c = nk_next_event(p.l, NK_WAIT_MS);
        CHECK(p.c != NULL); /* the Request alone is valid */
        CHECK(rp_send(p.fd, buf + sizeof rp_siw_request, n - sizeof rp_siw_request));
    } else {
        CHECK(rp_send(p.fd, buf, n));
    }
    (void)expect_silent_close(p.fd, "octets after the Request");
    if (!p.c) {
        p.c = nk_next_event(p.l, RP_NO_EVENT_MS);
        if (p.c)
            fprintf(stderr, "    note: a connect event came although the extra octets were in "
                            "the same segment\n");
    }
    NTSTATUS st;
    if (p.c && accept_on_new_qp(&p, &st)) {
        if (st == STATUS_SUCCESS || st == NK_NO_COMPLETION) {
            tl_failures++;
            fprintf(stderr, "[%s] Accept of the violated connection: %s, expected a failure "
                            "(e.g. STATUS_CONNECTION_ABORTED)\n",
                    tl_current, nk_st(st));
        } else {
            fprintf(stderr, "    Accept of the violated connection: %s\n", nk_st(st));
        }
    }
    NK_CLOSE(p.c);
    p.c = NULL;
    NK_CLOSE(p.qp);
    p.qp = NULL;
    CHECK(nk_roundtrip(p.w, p.l, "after extra octets"));
out:
    nk_passive_close(&p);
}

static void extra_after_request_same_segment(void)
{
    extra_after_request(false);
}

static void extra_after_request_after_event(void)
{
    extra_after_request(true);
}

int main(void)
{
    const char *seed = getenv("NDK_TEST_SEED");
    garbage_seed = seed ? strtoull(seed, NULL, 0) : (uint64_t)tl_now_ns();

    RUN(markers_rejected);
    RUN(reject_then_close_adapter);
    RUN(wrong_key);
    RUN(unknown_revision);
    RUN(pd_length_over_limit);
    RUN(pd_length_beyond_data);
    RUN(enhanced_pd_too_short);
    RUN(truncated_request);
    if (!RUN(random_garbage))
        fprintf(stderr, "random_garbage failed with seed %llu\n",
                (unsigned long long)garbage_seed);
    RUN(extra_after_request_same_segment);
    RUN(extra_after_request_after_event);
    return tl_finish();
}
