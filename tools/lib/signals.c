/*
 * signals.c - see signals.h. SIGUSR1 is our own "quit" for the signal
 * thread.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "lib/args.h"
#include "lib/log.h"
#include "lib/signals.h"

static pthread_t thread;
static bool running;
static void (*stop_fn)(void *);
static void *stop_arg;

static void signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

static void *signal_main(void *unused)
{
    (void)unused;
    sigset_t set;
    signal_set(&set);
    for (bool again = false;; again = true) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
            return NULL;
        if (again) {
            tc_err(NULL, "%s: interrupted again, exiting", tc_prog());
            _exit(TC_EXIT_INTERRUPTED);
        }
        stop_fn(stop_arg);
    }
}

bool tc_signals_start(void (*on_stop)(void *arg), void *arg)
{
    sigset_t set;
    signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    stop_fn = on_stop;
    stop_arg = arg;
    running = pthread_create(&thread, NULL, signal_main, NULL) == 0;
    return running;
}

void tc_signals_end(void)
{
    if (!running)
        return;
    pthread_kill(thread, SIGUSR1);
    pthread_join(thread, NULL);
    running = false;
}
