/*
 * ucmatose.h - `ndkping --ucmatose`: rdma-core's ucmatose (cmatose) over
 * NDK, what its files share.
 *
 * ucmatose's protocol (librdmacm/examples/cmatose.c), so that either end
 * may be the real ucmatose on Linux siw or another `ndkping --ucmatose`:
 *
 *   - the client opens -c connections at once, each with IRD = ORD = 1 and
 *     no private data, each with -C receives of -S bytes posted before it
 *     connects; the server accepts each request with the IRD/ORD it
 *     carries (rdma_accept with no parameters) and -C receives posted
 *     before; requests beyond -c are refused;
 *   - once every connection is up, the server Sends -C messages of -S
 *     bytes on each, waits for their completions, then for -C messages
 *     back on each; the client waits for the server's messages on every
 *     connection, then Sends its -C replies on each;
 *   - the server then disconnects every connection; the client answers
 *     each disconnect with its own.
 * The messages carry nothing ucmatose looks at; this mode checks that each
 * is exactly -S bytes, and with --verify that it holds ndkping's pattern
 * (when the peer is ndkping too).
 *
 * The command line is ucmatose's (-s, -b, -c, -C, -S, -p; -f, -P, -t, -m
 * accepted as far as NDK can follow them) plus the NDK options of every
 * peer mode (peer.h). Output: ucmatose's own lines, then a summary.
 *
 * The files: ucmatose_opts.c (command line), ucmatose_node.c (one
 * connection), ucmatose_server.c, ucmatose_client.c.
 */
#ifndef NDKPING_UCMATOSE_H
#define NDKPING_UCMATOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/conn.h"
#include "lib/mr.h"
#include "ndkping/peer.h"

#define UC_DEFAULT_PORT 7471
#define UC_DEFAULT_CONNECTIONS 1u
#define UC_DEFAULT_COUNT 10u
#define UC_DEFAULT_SIZE 100u
#define UC_MAX_CONNECTIONS 1024u
#define UC_MAX_SIZE (16u << 20)
/* What the receives of one connection may take in all (-C x -S). */
#define UC_MAX_RECV_BYTES (256u << 20)

struct ucmatose_opts {
    const char *dst; /* -s: the server's address (client mode) */
    const char *src; /* -b: bind (source or listen) address */
    unsigned port;
    unsigned connections; /* -c */
    unsigned count;       /* -C: messages each way on each connection */
    unsigned size;        /* -S */
    bool verify;
    struct peer_opts peer;
};

extern struct ucmatose_opts uo;

int ucmatose_parse_options(int argc, char **argv);

/* One connection ("node"): a send and a receive CQ of -C entries each, a
 * QP of -C on each queue, a send buffer and a receive slot per message. */
struct node {
    struct tc_conn c;
    bool client;
    struct tc_mr send_buf, recv_buf;
    uint64_t sent, received; /* completions so far */
    bool failed;
};

/* Sets up node id (connector too on the client) and posts its receives;
 * false after saying why. */
bool node_init(struct node *n, struct tc_adapter *a, unsigned id, bool client);
/* Posts -C Sends of -S bytes on each of n nodes. */
bool nodes_post_sends(struct node *nodes, unsigned n);
/* Waits, node after node, until -C Sends (sends) or -C receives (!sends)
 * have completed on each. */
bool nodes_wait(struct node *nodes, unsigned n, bool sends, const char *what);
/* Closes; false if a close misbehaved. */
bool node_end(struct node *n);

/* The roles: true if every connection did what was asked; *connected:
 * the connections made. */
bool ucmatose_run_server(unsigned *connected);
bool ucmatose_run_client(unsigned *connected);
/* The last lines: our summary, then ucmatose's "test complete" and
 * "return status N". Returns the exit status. */
int ucmatose_finish(bool ok, unsigned connected);

#endif
