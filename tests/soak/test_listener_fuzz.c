/*
 * A listener under a mutation fuzzer while well-behaved clients connect in a
 * loop. A raw-socket thread attacks the listener as fast as it can, cycling
 * through:
 *   - mutated MPA Requests: a valid Request with random octets changed,
 *     cut short or followed by garbage, then a FIN or a RST;
 *   - a valid handshake (client/server, no RTR), then mutated FPDUs: valid
 *     Sends with random octets changed, a few in a row, then a FIN or RST;
 *   - half-open connections: TCP connected, nothing sent, thousands held
 *     at once (beyond MaxHalfOpen, so the listener resets the oldest).
 * Meanwhile the test thread accepts every connect event (the fuzzer's
 * valid-looking Requests too, so its FPDUs reach a QP) and runs complete
 * NDK connections, three legs, on the same listener: every one of them must
 * succeed. The process's RSS after a warm-up and at the end of the attack
 * must stay within a small slack (not under the sanitizers, whose
 * allocators hold freed memory), its descriptors bounded during the attack
 * and back to their count before it once it ended. Bad input gets a clear
 * end, never a crash, hang or leak (docs/behaviour.md "Listeners").
 *   FUZZ_SECONDS (environment; default 12) sets the attack's length: the
 * CTest run is the short version, tests/soak/listener_fuzz.sh the long one.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "rawpeer.h"

/* The sanitizers' allocators keep freed memory (quarantine, history): no
 * RSS check there; LeakSanitizer's check at exit covers leaks instead. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RSS_CHECKED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RSS_CHECKED 0
#endif
#endif
#ifndef RSS_CHECKED
#define RSS_CHECKED 1
#endif

#define HALF_OPEN_HELD 2000 /* twice the default MaxHalfOpen */
#define GOOD_TAG "good-client"
#define FUZZ_TAG "fz"

static uint16_t port;
static _Atomic bool stop;
static _Atomic unsigned n_requests, n_handshakes, n_fpdus, n_half_open;

static void mutate(uint8_t *p, size_t len, uint64_t *rng)
{
    unsigned flips = 1 + (unsigned)(rp_rand(rng) % 4);
    for (unsigned i = 0; i < flips && len; i++) {
        size_t at = (size_t)(rp_rand(rng) % len);
        if (rp_rand(rng) & 1)
            p[at] ^= (uint8_t)(1u << (rp_rand(rng) % 8));
        else
            p[at] = (uint8_t)rp_rand(rng);
    }
}

static void end_socket(int fd, uint64_t *rng)
{
    if (rp_rand(rng) & 1)
        rp_reset(fd);
    else
        close(fd);
}

/* The mutated Request: cut short, garbage behind it, or whole. */
static void attack_request(int fd, uint8_t *f, size_t n, uint64_t *rng)
{
    mutate(f, n, rng);
    switch (rp_rand(rng) % 3) {
    case 0: /* cut short */
        n = (size_t)(rp_rand(rng) % n);
        break;
    case 1: /* garbage behind it */
        for (size_t k = rp_rand(rng) % 64; k; k--)
            f[n++] = (uint8_t)rp_rand(rng);
        break;
    default:
        break;
    }
    rp_send(fd, f, n);
    atomic_fetch_add(&n_requests, 1);
}

/* The Request as it is, then, once the Reply accepts it, mutated FPDUs. */
static void attack_fpdus(int fd, uint8_t *f, size_t n, uint64_t *rng)
{
    if (!rp_send(fd, f, n) || rp_read_frame(fd, f, 3000) == 0 || memcmp(f, RP_KEY_REP, RP_KEY_LEN) != 0 ||
        (f[16] & RP_F_R))
        return;
    atomic_fetch_add(&n_handshakes, 1);
    unsigned count = 1 + (unsigned)(rp_rand(rng) % 6);
    for (unsigned i = 0; i < count; i++) {
        uint8_t payload[64];
        size_t plen = (size_t)(rp_rand(rng) % sizeof payload);
        for (size_t k = 0; k < plen; k++)
            payload[k] = (uint8_t)rp_rand(rng);
        n = rp_send_fpdu(f, i, payload, plen, false);
        mutate(f, n, rng);
        if (!rp_send(fd, f, n))
            break;
        atomic_fetch_add(&n_fpdus, 1);
    }
}

/* One connection to the listener: `how` is given it and, in f, a valid
 * client/server Request carrying FUZZ_TAG (not sent yet); then the socket
 * ends (end_socket). */
static void attack(uint64_t *rng, void (*how)(int fd, uint8_t *f, size_t n, uint64_t *rng))
{
    int fd = rp_connect(port, 2000);
    if (fd < 0)
        return;
    uint8_t f[600];
    how(fd, f, rp_frame_v2(f, RP_KEY_REQ, 0, 4, 4, FUZZ_TAG, sizeof FUZZ_TAG - 1), rng);
    end_socket(fd, rng);
}

static void *fuzzer_main(void *arg)
{
    (void)arg;
    uint64_t rng = 0x5eedf00du ^ (uint64_t)time(NULL);
    static int held[HALF_OPEN_HELD];
    unsigned nheld = 0, next = 0;
    for (unsigned i = 0; i < HALF_OPEN_HELD; i++)
        held[i] = -1;
    while (!atomic_load(&stop)) {
        unsigned r = (unsigned)(rp_rand(&rng) % 16);
        if (r < 8) {
            attack(&rng, attack_request);
        } else if (r < 10) {
            attack(&rng, attack_fpdus);
        } else {
            /* Half-open: the kernel completes the handshake; the oldest
             * held socket makes room. */
            int fd = rp_connect_start(port);
            if (fd < 0)
                continue;
            if (held[next] >= 0)
                close(held[next]);
            else
                nheld++;
            held[next] = fd;
            next = (next + 1) % HALF_OPEN_HELD;
            atomic_fetch_add(&n_half_open, 1);
        }
    }
    for (unsigned i = 0; i < HALF_OPEN_HELD; i++)
        if (held[i] >= 0)
            close(held[i]);
    (void)nheld;
    return NULL;
}

/* Connections the fuzzer's valid-looking Requests produced, accepted so
 * that its FPDUs reach a QP, closed once their Accept ended. */
#define FUZZ_ACCEPTED_MAX 256
static struct accepted {
    NDK_CONNECTOR *c;
    NDK_QP *qp;
    nk_op op;
} acc[FUZZ_ACCEPTED_MAX];
static unsigned nacc;

static void reap_accepted(bool all)
{
    for (unsigned i = 0; i < nacc;) {
        if (!all && !nk_op_done(&acc[i].op)) {
            i++;
            continue;
        }
        (void)nk_op_wait(&acc[i].op, NK_WAIT_MS);
        NK_CLOSE(acc[i].c);
        NK_CLOSE(acc[i].qp);
        acc[i] = acc[--nacc];
    }
}

/* A connect event that is not the good client's: accept it with a QP of
 * its own (if there is room), or close it. */
static void take_stray(nk_world *w, NDK_CONNECTOR *c)
{
    NDK_QP *qp = nacc < FUZZ_ACCEPTED_MAX ? nk_qp(w) : NULL;
    if (!qp) {
        NK_CLOSE(c);
        return;
    }
    acc[nacc].c = c;
    acc[nacc].qp = qp;
    acc[nacc].op = nk_accept(c, qp, 4, 4, NULL, 0);
    nacc++;
}

/* One complete good connection on the fuzzed listener; other connect
 * events met meanwhile are the fuzzer's. */
static bool good_client(nk_world *w, nk_listener *l)
{
    return nk_roundtrip_among(w, l, GOOD_TAG, 2 * NK_WAIT_MS, take_stray);
}

static bool good_clients_for(nk_world *w, nk_listener *l, unsigned seconds, unsigned *done)
{
    uint64_t dl = rp_deadline(seconds * 1000u);
    while (rp_ms_left(dl) > 0) {
        if (nt_ops_left() <= 64 + 4 * FUZZ_ACCEPTED_MAX) {
            fprintf(stderr, "    request pool used up: the attack ends early\n");
            break;
        }
        if (!good_client(w, l))
            return false;
        (*done)++;
        reap_accepted(false);
    }
    return true;
}

static void listener_under_fuzz(void)
{
    const char *env = getenv("FUZZ_SECONDS");
    unsigned secs = env && atoi(env) > 0 ? (unsigned)atoi(env) : 12;
    NDK_OPEN_OPTIONS o = nk_options();
    o.MpaRequestTimeoutMs = 2000; /* thousands stay half-open at once */
    o.MpaReplyTimeoutMs = 2000;
    nk_world *w = nk_open(&o);
    REQUIRE(w);
    nk_listener *l = nk_listen(w);
    REQUIRE(l);
    port = l->port;
    unsigned good = 0;
    CHECK(good_client(w, l));
    unsigned fds_start = tl_open_fds();
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, fuzzer_main, NULL) == 0);
    uint64_t t_attack = tl_now_ns();
    /* Warm-up: the allocator's arenas fill; then the RSS baseline. */
    bool ok = good_clients_for(w, l, 2, &good);
    long rss0 = tl_rss_kib();
    unsigned fds0 = tl_open_fds();
    ok = ok && good_clients_for(w, l, secs, &good);
    long rss1 = tl_rss_kib();
    unsigned fds1 = tl_open_fds();
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    double attack_s = (double)(tl_now_ns() - t_attack) / 1e9;
    reap_accepted(true);
    CHECK(ok);
    fprintf(stderr,
            "    %.1f s: %u good connections; fuzzer: %u mutated Requests, %u handshakes with %u mutated FPDUs, "
            "%u half-open\n    RSS %ld -> %ld KiB, descriptors %u -> %u\n",
            attack_s, good, atomic_load(&n_requests), atomic_load(&n_handshakes), atomic_load(&n_fpdus),
            atomic_load(&n_half_open), rss0, rss1, fds0, fds1);
    CHECK(good >= 10);
    CHECK(atomic_load(&n_requests) >= 100);
    CHECK(atomic_load(&n_handshakes) >= 5);
    CHECK(atomic_load(&n_half_open) >= HALF_OPEN_HELD);
    /* Under attack the descriptors stay within what is bounded: the
     * fuzzer's held sockets, the listener's half-open ones (MaxHalfOpen),
     * the accepted fuzz connections. */
    CHECK(fds1 <= fds_start + HALF_OPEN_HELD + 1024 + FUZZ_ACCEPTED_MAX + 64);
    if (RSS_CHECKED)
        CHECK(rss1 <= rss0 + 16 * 1024);
    /* Once the fuzzer is gone its leftovers end (the half-open ones by
     * MpaRequestTimeoutMs): the descriptors come back to where they were
     * before the attack. Stray connect events still queued are closed. */
    uint64_t dl = rp_deadline(3 * o.MpaRequestTimeoutMs + NK_WAIT_MS);
    unsigned fds2 = tl_open_fds();
    while (fds2 > fds_start && rp_ms_left(dl) > 0) {
        NDK_CONNECTOR *e = nk_next_event(l, 100); /* a bounded pause */
        if (e)
            NK_CLOSE(e);
        fds2 = tl_open_fds();
    }
    fprintf(stderr, "    descriptors before the attack %u, after it ended %u\n", fds_start, fds2);
    CHECK(fds2 <= fds_start);
    /* And the listener still serves. */
    for (NDK_CONNECTOR *e; (e = nk_next_event(l, 0)) != NULL;)
        NK_CLOSE(e);
    CHECK(nk_roundtrip(w, l, "after-fuzz"));
    NK_CLOSE(l->l);
    nk_close_world(w);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    /* Call records are never reused (rawpeer.h): enough for a long run,
     * touched now, so that their pages are in the RSS baseline. */
    nt_ops_reserve(1u << 18);
    RUN(listener_under_fuzz);
    return tl_finish();
}
