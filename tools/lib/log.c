/*
 * log.c - see log.h. Lines on stderr are formatted first and written with
 * one write(), the only way two processes sharing the terminal cannot cut
 * into each other's lines.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "lib/log.h"

#define LINE_MAX_LEN 2048

static const char *prog_name = "ndktool";
static bool show_roles;
static atomic_uint problems;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

const char *tc_status_name(NTSTATUS st)
{
    if (st == TC_STATUS_NO_CALLBACK)
        return "no completion callback within the timeout";
    return ndk_status_name(st);
}

void tc_log_init(const char *prog)
{
    prog_name = prog;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

const char *tc_prog(void)
{
    return prog_name;
}

void tc_log_show_roles(bool on)
{
    show_roles = on;
}

void tc_out_lock(void)
{
    pthread_mutex_lock(&out_lock);
}

void tc_out_unlock(void)
{
    pthread_mutex_unlock(&out_lock);
}

void tc_vsay(const char *prefix, const char *fmt, va_list ap)
{
    tc_out_lock();
    if (prefix)
        fputs(prefix, stdout);
    vprintf(fmt, ap);
    putchar('\n');
    tc_out_unlock();
}

void tc_say(const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tc_vsay(prefix, fmt, ap);
    va_end(ap);
}

/* head, then fmt, as one write on stderr; a line unless in_place. */
static void err_write(const char *head, bool in_place, const char *fmt, va_list ap)
{
    char line[LINE_MAX_LEN];
    int n = snprintf(line, sizeof line, "%s", head);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        n += m > 0 ? m : 0;
    }
    if ((size_t)n > sizeof line - 2)
        n = (int)sizeof line - 2;
    if (!in_place)
        line[n++] = '\n';
    tc_out_lock();
    fflush(stdout); /* errors after the lines that led to them */
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
    tc_out_unlock();
}

void tc_err(const char *prefix, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_write(prefix ? prefix : "", false, fmt, ap);
    va_end(ap);
}

void tc_err_in_place(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_write("\r", true, fmt, ap);
    va_end(ap);
}

static void vcomplain(const char *role, const char *what, const char *fmt, va_list ap)
{
    char head[256];
    bool named = role && show_roles;
    snprintf(head, sizeof head, "%s: %s%s%s", prog_name, named ? role : "", named ? ": " : "",
             what ? what : "");
    err_write(head, false, fmt, ap);
}

void tc_complain(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vcomplain(role, NULL, fmt, ap);
    va_end(ap);
}

void tc_library_problem(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vcomplain(role, "library problem: ", fmt, ap);
    va_end(ap);
    atomic_fetch_add(&problems, 1);
}

void tc_count_library_problems(unsigned n)
{
    atomic_fetch_add(&problems, n);
}

unsigned tc_library_problems(void)
{
    return atomic_load(&problems);
}

void tc_ndk_failed(const char *role, const char *call, NTSTATUS st, const char *fmt, ...)
{
    char context[512] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(context, sizeof context, fmt, ap);
        va_end(ap);
    }
    tc_complain(role, "%s failed: %s%s%s%s", call, tc_status_name(st), context[0] ? " (" : "",
                context, context[0] ? ")" : "");
}
