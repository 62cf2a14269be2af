/*
 * ucmatose_server.c - the server of `ndkping --ucmatose` (see
 * ucmatose.h): cmatose's run_server.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "lib/listener.h"
#include "lib/log.h"
#include "lib/signals.h"
#include "ndkping/ucmatose.h"

static struct tc_listener listener;
static atomic_bool interrupted, listening;

/* SIGINT/SIGTERM while waiting for the connections. */
static void on_interrupt(void *arg)
{
    (void)arg;
    atomic_store(&interrupted, true);
    if (atomic_load(&listening))
        tc_listener_stop(&listener);
}

/* One request: the node, its receives, and the accept begun with the
 * request's IRD/ORD (rdma_accept with no parameters). */
static bool take_request(struct node *n, struct tc_adapter *a, NDK_CONNECTOR *cn, unsigned id)
{
    bool ok = node_init(n, a, id, false);
    n->c.cn = cn; /* ours from the connect event on, set up or not */
    if (!ok)
        return false;
    tc_conn_name_peer(&n->c);
    ULONG ird = 0, ord = 0, rds = 0;
    NTSTATUS st = cn->Dispatch->NdkGetConnectionData(cn, &ird, &ord, NULL, &rds);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(a->role, "NdkGetConnectionData", st, "%sthe request from %s", n->c.calls.label, n->c.peer);
        return false;
    }
    return tc_conn_accept_begin(&n->c, ird, ord, NULL, 0);
}

/* connect_events: every request accepted and established. *taken: the
 * nodes set up (each to be ended). */
static bool connect_events(struct node *nodes, struct tc_adapter *a, unsigned *taken)
{
    bool ok = true;
    for (unsigned i = 0; i < uo.connections && ok; i++) {
        NDK_CONNECTOR *cn;
        if (tc_listener_next(&listener, 0, &cn, NULL) != TC_NEXT_GOT) {
            tc_complain(a->role, "interrupted after %u of %u connections (-c)", i, uo.connections);
            return false;
        }
        ok = take_request(&nodes[i], a, cn, i + 1);
        *taken = i + 1;
    }
    /* The accepts complete as the initiators' first FPDUs (or RTRs) come. */
    for (unsigned i = 0; i < *taken; i++)
        if (nodes[i].c.step && !tc_conn_accept_end(&nodes[i].c))
            ok = false;
    return ok;
}

static bool data_transfers(struct node *nodes)
{
    tc_say(NULL, "initiating data transfers");
    if (!nodes_post_sends(nodes, uo.connections))
        return false;
    tc_say(NULL, "completing sends");
    if (!nodes_wait(nodes, uo.connections, true, "the completions of its Sends"))
        return false;
    tc_say(NULL, "receiving data transfers");
    if (!nodes_wait(nodes, uo.connections, false, "the client's messages"))
        return false;
    tc_say(NULL, "data transfers complete");
    return true;
}

/* The server disconnects each connection, then waits for every answer. */
static bool disconnect_all(struct node *nodes, unsigned n)
{
    tc_say(NULL, "cmatose: disconnecting");
    bool ok = true;
    for (unsigned i = 0; i < n; i++)
        ok &= tc_conn_disconnect_begin(&nodes[i].c);
    for (unsigned i = 0; i < n; i++) {
        NTSTATUS st = tc_conn_disconnect_end(&nodes[i].c);
        if (st != STATUS_SUCCESS) {
            tc_complain(nodes[i].c.role, "%sdisconnect from %s failed: %s", nodes[i].c.calls.label, nodes[i].c.peer,
                        tc_status_name(st));
            ok = false;
        }
    }
    tc_say(NULL, "disconnected");
    return ok;
}

static bool listen_on(struct tc_adapter *a)
{
    NDK_SOCKADDR addr;
    if (!peer_open_server(a, &uo.peer, (struct peer_addr){uo.src, "-b"}, uo.port, &addr) ||
        !tc_listen(&listener, a, &addr, uo.connections))
        return false;
    char at[TC_ADDR_BUF];
    tc_say(NULL, "cmatose: listening on %s", tc_format_addr(&listener.bound, true, at, sizeof at));
    atomic_store(&listening, true);
    if (atomic_load(&interrupted))
        tc_listener_stop(&listener);
    return true;
}

bool ucmatose_run_server(unsigned *connected)
{
    tc_say(NULL, "cmatose: starting server");
    /* Before any thread exists (the provider's start with the adapter). */
    tc_signals_start(on_interrupt, NULL);
    struct tc_adapter a = {0};
    struct node *nodes = calloc(uo.connections, sizeof *nodes);
    unsigned taken = 0;
    bool ok = nodes && listen_on(&a);
    if (ok) {
        ok = connect_events(nodes, &a, &taken);
        if (ok && uo.count)
            ok = data_transfers(nodes);
        ok = disconnect_all(nodes, taken) && ok;
    }
    /* The connectors first: the listener is their antecedent, and its
     * close completes only after theirs. */
    for (unsigned i = 0; i < taken; i++)
        ok = node_end(&nodes[i]) && ok;
    if (atomic_load(&listening)) {
        atomic_store(&listening, false);
        ok = tc_listener_close(&listener) && ok;
    }
    tc_adapter_close(&a);
    tc_signals_end();
    free(nodes);
    *connected = taken;
    return ok;
}
