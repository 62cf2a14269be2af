/*
 * Out of file descriptors at every point: RLIMIT_NOFILE is lowered so that
 * only k more descriptors can be opened, for k = 0, 1, 2, ... until the
 * scenario needs no more than k, through
 *   - ndk_open_adapter and ndk_close_adapter (interface list, epoll,
 *     eventfd);
 *   - a connection's life and a data exchange between two adapters
 *     (injconn.h: the listening socket, the connecting one, the one the
 *     listener accepts).
 * Each call that cannot get a descriptor answers STATUS_INSUFFICIENT_RESOURCES
 * (a connection leg may instead fail as the refused, aborted or timed-out
 * connection it is); no leg hangs; a listener that cannot accept does not
 * spin on its readable socket; afterwards, with the limit back, no
 * descriptor or block is left behind and the same adapters connect and move
 * data.
 */
#include "injconn.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>

static struct inj_side A, B;
static struct rlimit g_nofile;

/* Allows exactly k more descriptors: the soft limit just above the k-th
 * free descriptor number (a new descriptor takes the lowest free one). */
static bool allow_fds(unsigned k)
{
    int fd = 0;
    for (unsigned free_seen = 0;; fd++) {
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            if (free_seen == k)
                break;
            free_seen++;
        }
    }
    struct rlimit r = {(rlim_t)fd, g_nofile.rlim_max};
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

static void restore_fds(void)
{
    setrlimit(RLIMIT_NOFILE, &g_nofile);
}

static bool settled(void)
{
    return inj_settle(A.ad) && inj_settle(B.ad);
}

/* Runs fn (true: it ran through) with k descriptors to spare, for every k
 * until fn needs no more than that; returns that k. */
static unsigned sweep(const char *name, bool (*fn)(void))
{
    CHECK(settled());
    long base = inj_live();
    unsigned fds = tl_open_fds();
    unsigned k;
    for (k = 0; k < 32; k++) {
        int before = tl_failures;
        unsigned problems = inj_problems();
        uint64_t accepts = inj_accepts();
        inj_scarce(true);
        bool through = allow_fds(k) && fn();
        restore_fds();
        inj_scarce(false);
        /* A connection the listener could not accept stays queued in the
         * kernel until then: a few attempts, not a spin. */
        uint64_t tries = inj_accepts() - accepts;
        if (tries > 1)
            printf("[inject] %s, %u descriptors to spare: the listener tried accept4 %llu times\n", name, k,
                   (unsigned long long)tries);
        CHECK(tries <= 100); /* a listener out of descriptors does not spin */
        CHECK(settled());
        CHECK_EQ(inj_live(), base);
        CHECK_EQ(tl_open_fds(), fds);
        CHECK(inj_conn_life(&A, &B));
        CHECK(settled());
        CHECK_EQ(inj_live(), base);
        CHECK_EQ(tl_open_fds(), fds);
        if (tl_failures != before)
            fprintf(stderr, "  [%s] with %u descriptors to spare\n", name, k);
        if (through && inj_problems() == problems)
            break;
    }
    printf("[inject] %s: needs %u descriptors; with each count below, one call ran out\n", name, k);
    return k;
}

static bool open_close(void)
{
    NDK_OPEN_OPTIONS o = inj_opts();
    NDK_ADAPTER *ad = NULL;
    if (CALL("ndk_open_adapter", STATUS_SUCCESS, ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &ad)) !=
        STATUS_SUCCESS)
        return false;
    ndk_close_adapter(ad);
    return true;
}

static bool connection(void)
{
    return inj_conn_life(&A, &B);
}

static void test_open_adapter(void)
{
    CHECK(sweep("ndk_open_adapter + ndk_close_adapter", open_close) > 0);
}

static void test_connection(void)
{
    CHECK(sweep("a connection's life and a data exchange", connection) > 0);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (getrlimit(RLIMIT_NOFILE, &g_nofile) != 0)
        return 1;
    NDK_OPEN_OPTIONS o = inj_opts();
    if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &A.ad) != STATUS_SUCCESS ||
        ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &B.ad) != STATUS_SUCCESS) {
        fprintf(stderr, "cannot open the loopback adapter\n");
        return 1;
    }
    if (!inj_conn_life(&A, &B)) {
        fprintf(stderr, "the connection scenario fails with descriptors to spare\n");
        return 1;
    }
    RUN(test_open_adapter);
    RUN(test_connection);
    ndk_close_adapter(A.ad);
    ndk_close_adapter(B.ad);
    return tl_finish();
}
