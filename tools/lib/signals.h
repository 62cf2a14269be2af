/*
 * signals.h - SIGINT and SIGTERM for a server that waits for clients: the
 * first stops it between connections, a second ends the process at once
 * (exit status 130). They are taken by a thread of their own with
 * sigwait (every other thread blocks them), so nothing runs in a signal
 * handler.
 */
#ifndef TC_SIGNALS_H
#define TC_SIGNALS_H

#include <stdbool.h>

/* Call before any other thread exists (the provider's too: opening an
 * adapter starts them), so that every thread inherits the blocked set.
 * on_stop(arg) runs on the signal thread at the first signal. */
bool tc_signals_start(void (*on_stop)(void *arg), void *arg);
/* Ends the signal thread. */
void tc_signals_end(void);

#endif
