/*
 * ucmatose_client.c - the client of `ndkping --ucmatose` (see
 * ucmatose.h): cmatose's run_client, every connection opened at once.
 */
#include <stdlib.h>

#include "lib/log.h"
#include "ndkping/ucmatose.h"

/* The connects of every node in flight together, then each finished:
 * NdkConnect's completion, then NdkCompleteConnect. *set_up: the nodes
 * to end. */
static bool connect_all(struct node *nodes, struct tc_adapter *a, const NDK_SOCKADDR *src,
                        const NDK_SOCKADDR *dst, unsigned *set_up)
{
    tc_say(NULL, "cmatose: connecting");
    bool ok = true;
    for (unsigned i = 0; i < uo.connections && ok; i++) {
        *set_up = i + 1;
        ok = node_init(&nodes[i], a, i + 1, true) &&
             tc_conn_connect_begin(&nodes[i].c, src, dst, 1, 1, NULL, 0);
    }
    for (unsigned i = 0; i < *set_up; i++) {
        struct tc_conn *c = &nodes[i].c;
        if (!c->step)
            continue;
        NTSTATUS st = tc_conn_connect_end(c);
        if (st != STATUS_SUCCESS) {
            tc_conn_explain_connect(c, st);
            ok = false;
            continue;
        }
        peer_delay_first(&uo.peer);
        if (!tc_conn_complete(c))
            ok = false;
    }
    return ok;
}

static bool data_transfers(struct node *nodes)
{
    tc_say(NULL, "receiving data transfers");
    if (!nodes_wait(nodes, uo.connections, false, "the server's messages"))
        return false;
    tc_say(NULL, "sending replies");
    /* Beyond ucmatose, which leaves them: every reply has completed. */
    if (!nodes_post_sends(nodes, uo.connections) ||
        !nodes_wait(nodes, uo.connections, true, "the completions of its replies"))
        return false;
    tc_say(NULL, "data transfers complete");
    return true;
}

/* disconnect_events: the server disconnects each connection; each is
 * answered. After a failure this side goes first. */
static bool disconnect_events(struct node *nodes, unsigned n, bool wait_for_server)
{
    bool ok = true;
    for (unsigned i = 0; i < n; i++) {
        struct tc_conn *c = &nodes[i].c;
        if (!c->connected)
            continue;
        unsigned ms = tc_adapter_wait_ms(c->adapter);
        if (wait_for_server && !tc_conn_peer_left(c, ms)) {
            tc_complain(c->role, "%sthe server %s did not disconnect within %u ms; disconnecting", c->calls.label,
                        c->peer, ms);
            ok = false;
        }
        NTSTATUS st = tc_conn_disconnect_begin(c) ? tc_conn_disconnect_end(c) : STATUS_NO_MEMORY;
        if (st != STATUS_SUCCESS && wait_for_server) {
            tc_complain(c->role, "%sdisconnect from %s failed: %s", c->calls.label, c->peer, tc_status_name(st));
            ok = false;
        }
    }
    return ok;
}

bool ucmatose_run_client(unsigned *connected)
{
    tc_say(NULL, "cmatose: starting client");
    struct tc_adapter a = {0};
    struct node *nodes = calloc(uo.connections, sizeof *nodes);
    NDK_SOCKADDR dst, src;
    unsigned set_up = 0;
    bool ok = nodes && peer_open_client(&a, &uo.peer, (struct peer_addr){uo.dst, "-s"}, uo.port,
                                        (struct peer_addr){uo.src, "-b"}, &dst, &src);
    if (ok) {
        ok = connect_all(nodes, &a, &src, &dst, &set_up);
        if (ok && uo.count)
            ok = data_transfers(nodes);
        ok = disconnect_events(nodes, set_up, ok) && ok;
    }
    for (unsigned i = 0; i < set_up; i++)
        ok = node_end(&nodes[i]) && ok;
    tc_adapter_close(&a);
    free(nodes);
    *connected = set_up;
    return ok;
}
