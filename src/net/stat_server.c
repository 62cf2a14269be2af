/*
 * The stat channel (stat.h, docs/tools.md "ndkstat"): an abstract UNIX
 * socket named "libndk-stat-PID" and a thread that answers each connection
 * with one snapshot and closes it.
 *
 * An abstract socket has no file anybody could open or leave behind; any
 * local process can connect to it, so every accepted connection is checked
 * with SO_PEERCRED: only the process's own effective uid gets the snapshot,
 * anyone else gets "refused" and the close. A reader that does not read
 * cannot hold the thread: sends time out after NDK_STAT_SEND_TIMEOUT_MS.
 * NDK_STAT=0 in the environment disables the channel.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net/stat_server.h"

#include "log.h"

#define NDK_STAT_SEND_TIMEOUT_MS 1000

struct ndk_stat_server {
    int fd;
    int stop[2]; /* a pipe: the write end closing ends the thread */
    ndk_stat_snapshot_fn snapshot;
    pthread_t thread;
};

static void answer(int fd, ndk_stat_snapshot_fn snapshot)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    struct timeval tv = {.tv_sec = 0, .tv_usec = NDK_STAT_SEND_TIMEOUT_MS * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != geteuid()) {
        NDK_LOG(NDK_LL_INFO, NDK_LC_STAT, NULL, "refused a reader with uid %ld (pid %ld)",
                len == sizeof cred ? (long)cred.uid : -1L, len == sizeof cred ? (long)cred.pid : -1L);
        static const char refused[] = "refused\n";
        ssize_t w = send(fd, refused, sizeof refused - 1, MSG_NOSIGNAL);
        (void)w;
        return;
    }
    size_t n = 0;
    char *snap = snapshot(&n);
    for (size_t off = 0; snap && off < n;) {
        ssize_t w = send(fd, snap + off, n - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* gone, or not reading within the timeout */
        off += (size_t)w;
    }
    free(snap);
}

static void *serve(void *arg)
{
    struct ndk_stat_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->fd, .events = POLLIN}, {.fd = s->stop[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int c = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        answer(c, s->snapshot);
        close(c);
    }
    return NULL;
}

struct ndk_stat_server *ndk_stat_server_start(ndk_stat_snapshot_fn snapshot)
{
    const char *env = getenv("NDK_STAT");
    if (env && strcmp(env, "0") == 0)
        return NULL;
    struct ndk_stat_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->snapshot = snapshot;
    s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    /* sun_path[0] == 0: the abstract namespace. */
    int n = snprintf(sa.sun_path + 1, sizeof sa.sun_path - 1, "libndk-stat-%ld", (long)getpid());
    socklen_t sl = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
    if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&sa, sl) < 0 || listen(s->fd, 8) < 0 ||
        pipe2(s->stop, O_CLOEXEC) < 0) {
        NDK_LOG(NDK_LL_WARN, NDK_LC_STAT, NULL, "no stat channel for ndkstat: %s", strerror(errno));
        if (s->fd >= 0)
            close(s->fd);
        free(s);
        return NULL;
    }
    if (pthread_create(&s->thread, NULL, serve, s) != 0) {
        NDK_LOG(NDK_LL_WARN, NDK_LC_STAT, NULL, "no stat channel for ndkstat: no thread");
        close(s->fd);
        close(s->stop[0]);
        close(s->stop[1]);
        free(s);
        return NULL;
    }
    return s;
}

void ndk_stat_server_stop(struct ndk_stat_server *s)
{
    close(s->stop[1]);
    pthread_join(s->thread, NULL);
    close(s->stop[0]);
    close(s->fd);
    free(s);
}
