/*
 * rping.h - `ndkping --rping`: rdma-core's rping over NDK, what its files
 * share.
 *
 * The application protocol is rping's own (librdmacm/examples/rping.c),
 * byte for byte, so that either end may be the real rping on Linux siw or
 * another `ndkping --rping`:
 *
 *   - the client connects with IRD = ORD = 1 and no private data; the
 *     server accepts with the IRD/ORD it reads from the request and no
 *     private data;
 *   - every Send is one 16-byte message, big-endian: buffer virtual address
 *     (8), rkey (4), size (4); a receiver takes exactly 16 bytes;
 *   - per ping: the client Sends its start_buf; the server RDMA-Reads it
 *     into its rdma_buf and Sends a zero "go ahead"; the client Sends its
 *     rdma_buf; the server RDMA-Writes strlen(rdma_buf) + 1 bytes into it
 *     and Sends another go-ahead; the client compares (-V) and prints (-v);
 *   - the client disconnects after the last ping; the server ends its
 *     connection on the disconnect (and with -P waits for the next one).
 *
 * The command line is rping's (-s/-c, -a, -I, -p, -C, -S, -v, -V, -d, -P,
 * -q) plus the NDK options every peer mode has (peer.h). Output follows
 * rping: "ping data: ..." / "server ping data: ..." with -v, rping's debug
 * lines with -d, "... DISCONNECT EVENT..." on stderr.
 *
 * Where this mode is stricter than rping, it is so that a test can trust
 * its exit status: every wait is bounded (--timeout), a server given -C
 * checks that each connection made exactly that many pings (rping's server
 * ignores -C), and a client given -C fails when the server leaves early
 * (rping's exits 0). Sizes up to 1 MiB are allowed (rping: 65535), and the
 * server grows its rdma_buf to what a client advertises (rping's would
 * fail its RDMA Read when the client's -S is larger than its own).
 *
 * The files: rping_opts.c (command line), rping_conn.c (one connection:
 * buffers, messages, the CQ), rping_server.c, rping_client.c.
 */
#ifndef NDKPING_RPING_H
#define NDKPING_RPING_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/conn.h"
#include "lib/mr.h"
#include "ndkping/peer.h"

#define RPING_DEFAULT_PORT 7174
#define RPING_DEFAULT_SIZE 64u
/* rping's RPING_MIN_BUFSIZE: sizeof(stringify(INT_MAX)) + sizeof(RPING_MSG_FMT),
 * which is 8 + 15 (the macro is stringified unexpanded). */
#define RPING_MIN_SIZE 23u
/* rping stops at 65535; the larger sizes are for ndkping-to-ndkping runs. */
#define RPING_RPING_MAX 65535u
#define RPING_MAX_SIZE (1u << 20)
/* rping's queue sizes: send queue 16, receive queue 2, CQ twice the send
 * queue; one SGE per request. */
#define RPING_SQ_DEPTH 16u
#define RPING_RQ_DEPTH 2u
#define RPING_MSG_LEN 16u

struct rping_opts {
    bool server, client, persistent, verbose, validate;
    int debug;
    const char *addr;   /* -a */
    const char *source; /* -I */
    unsigned port;
    unsigned long count; /* 0: until the peer leaves (rping's default) */
    bool count_given;
    ULONG size;
    struct peer_opts peer;
};

extern struct rping_opts ro;

int rping_parse_options(int argc, char **argv);
/* rping's DEBUG_LOG (-d): a plain line on stdout. */
void rping_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------------ */
/* One connection (rping_conn.c)                                            */
/* ------------------------------------------------------------------------ */

struct rmsg {
    uint64_t addr;
    uint32_t rkey, size;
};

/* rping's buffers: the receive and send messages, rdma_buf, and the
 * client's start_buf. The receive and send buffers hold one message per
 * queue slot, so no posted request shares its bytes with another. */
enum { RB_RECV, RB_SEND, RB_RDMA, RB_START, RB_COUNT };

enum wr_kind { WR_RECV, WR_SEND, WR_READ, WR_WRITE };

struct wr {
    enum wr_kind kind;
    unsigned slot;
    bool posted;
};

struct rconn {
    struct tc_conn c;
    struct tc_mr b[RB_COUNT];
    struct wr recv_wr[RPING_RQ_DEPTH], send_wr[RPING_SQ_DEPTH], read_wr, write_wr;
    unsigned sq_out;    /* initiator requests posted and not completed */
    unsigned next_send; /* send slot to use next */
    /* Received messages, oldest first, taken by the ping loop. */
    struct rmsg q[RPING_RQ_DEPTH];
    unsigned q_head, q_len;
    bool read_done, write_done;
    bool failed; /* a completion failed or a message was bogus */
    unsigned long pings; /* completed */
    uint32_t ping_size;  /* server: the size the client advertised last */
    uint64_t t_first, t_last;
};

/* A connection on adapter a: CQ, PD, QP with rping's depths (and the
 * connector for the client). NULL after saying why. */
struct rconn *rconn_new(struct tc_adapter *a, bool client);
/* rping's buffers: the messages, rdma_buf (and start_buf for the client),
 * registered, and the receives posted. */
bool rconn_setup(struct rconn *r, bool client);
/* The server's rdma_buf, registered anew and larger when a client
 * advertises more than it holds. */
bool rconn_fit_rdma_buf(struct rconn *r, uint32_t need);
/* Waits (bounded) for room in the send queue and posts one message. */
bool rconn_send(struct rconn *r, const struct rmsg *m);
/* rping_format_send: advertises buffer b. */
bool rconn_send_adv(struct rconn *r, int b);
/* The next message; a disconnect sets *left (when not NULL) instead of
 * being explained. */
bool rconn_recv(struct rconn *r, const char *what, struct rmsg *m, bool *left);
/* Posts an RDMA Read (into rdma_buf) or Write (from it) of len bytes and
 * waits for its completion. */
bool rconn_rdma(struct rconn *r, enum wr_kind kind, size_t len, const struct rmsg *remote, const char *what);
/* rping_disconnect: NdkDisconnect. ok: the pings went well, so that a
 * failed disconnect fails the connection (after a failure the peer may be
 * gone in any way). */
bool rconn_disconnect(struct rconn *r, bool ok);
/* -d: "ROLE: PEER: N pings of SIZE bytes in ..., connection ..." (t0:
 * when the connection began). */
void rconn_summary(const struct rconn *r, const char *role, uint32_t size, uint64_t t0);
/* Closes and frees; false if a close misbehaved. */
bool rconn_end(struct rconn *r);

/* rping's start_buf for ping number `ping` ("rdma-ping-N: " and a run of
 * letters, a NUL last); *start advances by one per ping. */
void rping_fill(uint8_t *buf, size_t size, unsigned long ping, int *start);

/* ------------------------------------------------------------------------ */
/* The roles (rping_server.c, rping_client.c)                               */
/* ------------------------------------------------------------------------ */

int rping_run_server(void);
int rping_run_client(void);

#endif
