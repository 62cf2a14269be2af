/*
 * listener.h - a listener and the connection requests it hands out: its
 * connect events are queued by the provider's thread and taken, in order,
 * by the tool's own thread.
 */
#ifndef TC_LISTENER_H
#define TC_LISTENER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "lib/adapter.h"
#include "lib/calls.h"

struct tc_request;

struct tc_listener {
    struct tc_adapter *adapter;
    struct tc_calls calls;
    NDK_LISTENER *ln;
    NDK_SOCKADDR bound; /* where it listens; the port the provider picked for port 0 */
    /* The queue, under lock; owned by the calls (the connect event uses it). */
    struct tc_listen_queue *q;
};

/* NdkCreateListener and NdkListen on addr. limit: requests to take in
 * all (0: no limit); later ones are refused at once (their connectors
 * closed). False after saying why (the address and port, and what to
 * check); then nothing is left to close. */
bool tc_listen(struct tc_listener *l, struct tc_adapter *a, const NDK_SOCKADDR *addr, unsigned limit);

enum tc_next { TC_NEXT_GOT, TC_NEXT_STOPPED, TC_NEXT_TIMEOUT };
/* The next request: its connector (ours from the connect event on) and
 * the time of the event. ms: how long to wait, 0 for no limit (until
 * tc_listener_stop). */
enum tc_next tc_listener_next(struct tc_listener *l, unsigned ms, NDK_CONNECTOR **cn, uint64_t *t_event);
/* Refuses a request nobody will serve: closes its connector without
 * waiting (the adapter's close does). */
void tc_listener_refuse(NDK_CONNECTOR *cn);
/* Ends every wait in tc_listener_next, now and later; any thread. */
void tc_listener_stop(struct tc_listener *l);
/* Closes the listener, then refuses the requests not taken (closing their
 * connectors); false if a close misbehaved. */
bool tc_listener_close(struct tc_listener *l);

#endif
