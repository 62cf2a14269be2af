/*
 * The diagnostic log on a healthy run (docs/behaviour.md "Logging"): a
 * connection, a Send/Receive and a graceful disconnect write nothing at the
 * default level, and the connection events (and only those) at
 * NDK_LOG=info,cm.
 *
 * libndk reads its log configuration once per process, so each case runs
 * the exchange in a child (this program again, with LOG_QUIET_CHILD set)
 * under the environment it tests and reads the child's standard error.
 */
#include <spawn.h>
#include <sys/wait.h>

#include "dptest.h"

extern char **environ;

DP_CASE(exchange)
{
    dp_pair x;
    REQUIRE(dp_pair_open(&x, NULL));
    dp_conn *c = x.c;
    CHECK(dp_roundtrip(c, 4096, 77));
    dp_req *ra = dp_req_new("NdkDisconnect (active)");
    NTSTATUS st = c->ca->Dispatch->NdkDisconnect(c->ca, dp_req_cb, ra);
    CHECK(tl_event_wait(&c->disc_p, 1, DP_WAIT_MS));
    DP_CHECK_ST(dp_disconnect(c->cp), STATUS_SUCCESS);
    DP_CHECK_ST(dp_finish(ra, st, DP_WAIT_MS), STATUS_SUCCESS);
    dp_pair_close(&x);
}

/* Runs the exchange in a child with NDK_LOG set to spec (NULL: unset) and
 * returns its standard error (malloc'ed), or NULL. */
static char *run_child(const char *spec)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    /* The child's environment: ours without NDK_LOG / NDK_DEBUG /
     * NDK_LOG_TARGET (a developer's setting must not change the result). */
    char *env[256], logvar[64];
    unsigned ne = 0;
    for (char **e = environ; *e && ne < 250; e++)
        if (strncmp(*e, "NDK_LOG", 7) != 0 && strncmp(*e, "NDK_DEBUG=", 10) != 0)
            env[ne++] = *e;
    env[ne++] = "LOG_QUIET_CHILD=1";
    if (spec) {
        snprintf(logvar, sizeof logvar, "NDK_LOG=%s", spec);
        env[ne++] = logvar;
    }
    env[ne] = NULL;
    char *argv[] = {self, tl_family() == AF_INET6 ? "--ipv6" : NULL, NULL};

    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 2);
    pid_t pid;
    int rc = posix_spawn(&pid, self, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        return NULL;
    }
    size_t cap = 1 << 16, len = 0;
    char *out = calloc(1, cap + 1);
    uint64_t deadline = tl_now_ns() + 60ull * 1000000000ull;
    while (out && len < cap) {
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int64_t left_ms = (int64_t)(deadline - tl_now_ns()) / 1000000;
        if (left_ms <= 0 || poll(&pfd, 1, (int)left_ms) <= 0)
            break;
        ssize_t r = read(p[0], out + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(p[0]);
    kill(pid, SIGKILL); /* a no-op unless the child hung past the deadline */
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child (NDK_LOG=%s) failed:\n%s\n", spec ? spec : "unset", out ? out : "");
        free(out);
        return NULL;
    }
    return out;
}

static unsigned count_lines(const char *text, const char *needle)
{
    unsigned n = 0;
    for (const char *l = text; l && *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        n += strstr(line, needle) != NULL;
        l = end ? end + 1 : NULL;
    }
    return n;
}

static void silent_by_default(void)
{
    char *err = run_child(NULL);
    REQUIRE(err);
    CHECK_EQ(count_lines(err, "libndk["), 0u);
    if (count_lines(err, "libndk["))
        fprintf(stderr, "logged on a healthy run:\n%s", err);
    free(err);
}

static void cm_lines_at_info(void)
{
    char *err = run_child("info,cm");
    REQUIRE(err);
    /* Both ends: the request, the establishment, the local disconnect and
     * the peer's, each with the local and peer addresses. */
    CHECK_EQ(count_lines(err, " info cm "), count_lines(err, "libndk["));
    CHECK_EQ(count_lines(err, ": request from "), 1u);
    CHECK_EQ(count_lines(err, ": accepted, qp#"), 1u);
    CHECK_EQ(count_lines(err, ": connected, qp#"), 1u);
    CHECK_EQ(count_lines(err, ": disconnecting (NdkDisconnect)"), 2u);
    CHECK_EQ(count_lines(err, ": disconnected: peer closed"), 1u);
    const char *lo = tl_family() == AF_INET6 ? " [::1]:" : " 127.0.0.1:";
    CHECK_EQ(count_lines(err, lo), count_lines(err, "libndk["));
    CHECK(count_lines(err, " lo conn#") >= 5u);
    CHECK_EQ(count_lines(err, " mpa "), 0u); /* another category: still at warn */
    free(err);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    if (getenv("LOG_QUIET_CHILD")) {
        RUN_FAM(exchange);
        return tl_finish();
    }
    RUN_FAM(silent_by_default);
    RUN_FAM(cm_lines_at_info);
    return tl_finish();
}
