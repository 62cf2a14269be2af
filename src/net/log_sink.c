/* Where log lines go (log.h): standard error, one write(2) per line so
 * lines of several threads or processes never interleave, or syslog(3),
 * which journald also reads. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

void ndk_log_sink_write(enum ndk_log_target to, enum ndk_log_level lvl, const char *line)
{
    if (to == NDK_LOG_TO_SYSLOG) {
        static const int prio[] = {LOG_ERR, LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG, LOG_DEBUG};
        /* No openlog(): the process's own ident and options stay its own. */
        syslog(LOG_USER | prio[lvl], "%s", line);
        return;
    }
    char buf[1024];
    size_t n = strlen(line);
    if (n > sizeof buf - 1)
        n = sizeof buf - 1;
    memcpy(buf, line, n);
    buf[n++] = '\n';
    int saved = errno; /* a log line never changes what the caller sees in errno */
    ssize_t r;
    do
        r = write(STDERR_FILENO, buf, n);
    while (r < 0 && errno == EINTR);
    errno = saved;
}

void ndk_log_sink_time(char *buf, unsigned len)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

uint64_t ndk_log_sink_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}
