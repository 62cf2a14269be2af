/*
 * native.h - ndkping's own protocol (the default mode): what its files
 * share.
 *
 * The client connects with private data and requested IRD/ORD; the server
 * reads them from its connect event, accepts with its own private data and
 * limits; both sides print what they see and how long each leg took. Then,
 * unless --no-data, the data phase: each side has advertised a registered
 * buffer in its private data; the client RDMA-writes a pattern into the
 * server's buffer, RDMA-reads it back, and sends a message into the
 * server's posted receive; the server checks it and its buffer and answers
 * with a Send. Last the client disconnects, the server answers, and
 * everything is closed. --loopback runs both ends in one process on two
 * instances of the adapter, as two hosts would, and checks every byte.
 *
 * The files, one concern each:
 *   native_opts.c    command line, defaults, output levels
 *   native_pdata.c   what travels: private data with the buffer
 *                    advertisement, the Send/Receive messages
 *   native_conn.c    one connection: its buffers, work requests, CQ
 *   native_server.c  the passive side of one connection
 *   native_client.c  the active side of one connection
 *   native_run.c     the three roles (-s, -c, --loopback) and summaries
 */
#ifndef NDKPING_NATIVE_H
#define NDKPING_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/adapter.h"
#include "lib/conn.h"
#include "lib/mr.h"
#include "lib/stats.h"

#define NATIVE_DEFAULT_PORT 7174 /* rping's */
#define NATIVE_DEFAULT_READ_LIMIT 16
#define NATIVE_DEFAULT_TIMEOUT_MS 10000
/* Data phase: the default and largest -S, and the Send/Receive message. */
#define NATIVE_DEFAULT_SIZE 65536u
#define NATIVE_MAX_SIZE (1u << 30)
#define MSG_SIZE 64u
/* Private data is shown up to this many bytes. */
#define PDATA_SHOWN 256
#define PDATA_BUF (PDATA_SHOWN * 4 + 128)

/* ------------------------------------------------------------------------ */
/* Options and output (native_opts.c)                                       */
/* ------------------------------------------------------------------------ */

enum native_mode { MODE_UNSET, MODE_SERVER, MODE_CLIENT, MODE_LOOPBACK };

/* Levels for native_say: 0 even with -q, 1 normal, 2 with -v. */
enum { LVL_SUMMARY = 0, LVL_NORMAL = 1, LVL_VERBOSE = 2 };

struct native_opts {
    enum native_mode mode;
    const char *address; /* -a */
    const char *adapter; /* -d */
    unsigned port;
    bool port_given;
    unsigned long count; /* 0: the server runs until interrupted */
    ULONG ird, ord;
    const char *data, *reply;
    size_t data_len, reply_len;
    bool reject, crc, no_p2p, ipv6;
    bool data_phase; /* the data phase; --no-data turns it off */
    bool verify;     /* compare every byte (--verify; always with --loopback) */
    ULONG size;      /* -S: this side's buffer */
    int verbosity;
    unsigned timeout_ms;
};

extern struct native_opts opt;

/* Parses the command line into opt: -1 to go on, else the exit status. */
int native_parse_options(int argc, char **argv);
/* "role: message" on stdout when opt.verbosity is at least level. */
void native_say(int level, const char *role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------------ */
/* What travels (native_pdata.c)                                            */
/* ------------------------------------------------------------------------ */

/*
 * Private data. With the data phase on, each side appends to its text
 * (--data / --reply) a NUL byte and a 16-byte buffer advertisement, as
 * rping's message, all fields big-endian:
 *
 *     TEXT  0x00  | virtual address (8) | remote token (4) | size (4) |
 *
 * The text cannot hold a NUL (it is a C string), so the first NUL ends it
 * and exactly 16 bytes must follow; private data without a NUL is text
 * alone (--no-data, or a reject, which never advertises a buffer).
 */
#define ADV_LEN 16u

struct adv {
    uint64_t addr;  /* the buffer's virtual address: the RemoteAddress to use */
    uint32_t token; /* its remote token */
    uint32_t size;  /* its size in bytes */
};

void adv_encode(uint8_t out[ADV_LEN], const struct adv *a);
void adv_decode(const uint8_t in[ADV_LEN], struct adv *a);
/* TEXT [NUL ADV] into a malloc'ed buffer; NULL when out of memory. */
uint8_t *pdata_build(const char *text, size_t text_len, const struct adv *a, ULONG *len);
/* Splits received private data into its text and its advertisement
 * (*adv_bytes NULL when there is none). False if a NUL is not followed by
 * exactly ADV_LEN bytes. */
bool pdata_split(const uint8_t *p, ULONG len, ULONG *text_len, const uint8_t **adv_bytes);
/* Private data as text: printable ASCII as is, the rest as \xNN. */
const char *fmt_pdata(const uint8_t *p, size_t n, char *buf, size_t size);
/* The text, then " + buffer 0x... token 0x... N bytes" when advertised. */
const char *fmt_pdata_adv(const uint8_t *text, size_t text_len, const uint8_t *adv_bytes, char *buf, size_t size);
/* Byte-exact private data; false after saying how it differs. */
bool pdata_matches(const char *role, const char *whose, const uint8_t *got, ULONG got_len, const char *sent,
                   size_t sent_len);

/* The pattern streams of one connection (seeded by the client). */
enum { STREAM_BUFFER = 1, STREAM_CLIENT_MSG = 2, STREAM_SERVER_MSG = 3 };

/*
 * The Send/Receive messages, MSG_SIZE bytes, big-endian:
 *
 *      0  "NDKP"
 *      4  kind: MSG_CLIENT (the client's Send), MSG_REPLY (the server's)
 *      8  seed of the connection's streams
 *     12  bytes of the RDMA Write / Read (the smaller of the two buffers)
 *     16  reply only: the server's verdict (VERDICT_*)
 *     20  reply only: microseconds from the server's Receive completion to
 *         its reply, spent checking; the client leaves them out of the
 *         Send/Receive round trip
 *     24  stream bytes up to MSG_SIZE (STREAM_CLIENT_MSG / STREAM_SERVER_MSG)
 */
#define MSG_HEADER 24u
enum { MSG_CLIENT = 1, MSG_REPLY = 2 };
enum {
    VERDICT_OK = 0,         /* the message and the buffer held what was sent */
    VERDICT_BAD_MSG = 1,    /* the client's message was not as sent */
    VERDICT_BAD_BUFFER = 2, /* the buffer did not hold the written pattern */
    VERDICT_UNCHECKED = 3,  /* the server runs without --verify */
};

struct msg {
    uint32_t kind, seed, len, verdict, held_us;
};

const char *verdict_name(uint32_t v);
void msg_build(uint8_t *m, const struct msg *h);
/* Checks a received message of `got` bytes of `kind` announcing `len`
 * bytes written (and, with --verify, its stream bytes): NULL if it is as
 * expected (*h filled), else what is wrong (in why). */
const char *msg_check(const uint8_t *m, ULONG got, uint32_t kind, uint32_t len, struct msg *h, char *why,
                      size_t size);

/* ------------------------------------------------------------------------ */
/* One connection (native_conn.c)                                           */
/* ------------------------------------------------------------------------ */

/* One end: an adapter instance. */
struct side {
    const char *role; /* "server" / "client" */
    struct tc_adapter a;
    NDK_SOCKADDR addr; /* server: listen address; client: source address (port 0) */
    /* --loopback: the advertisement this side sent last, which the peer
     * must have received byte for byte (under a lock: the other end's
     * thread reads it). */
    uint8_t adv[ADV_LEN];
    bool adv_set;
};

void side_record_adv(struct side *s, const struct adv *a);
/* --loopback: did the peer's advertisement arrive byte for byte? */
bool adv_matches(const char *role, const char *whose, const struct side *peer, const uint8_t *got);

/* The registered buffers of the data phase; a connection uses some. */
enum {
    B_SOURCE, /* client: the pattern it writes; advertised, remote read */
    B_SINK,   /* client: where the RDMA Read puts the pattern back */
    B_TARGET, /* server: advertised, the client writes and reads it */
    B_MSG,    /* both: the outgoing message, then the receive buffer */
    B_COUNT
};

/* The work requests of the data phase; RequestContext is the struct op. */
enum { OP_WRITE, OP_READ, OP_SEND, OP_RECV, OP_COUNT };

struct op {
    bool posted, done;
    uint64_t t_post, t_done; /* tc_now_us() before posting / when polled */
    NDK_RESULT_EX res;
};

struct nconn {
    struct tc_conn c;
    struct side *side;
    struct tc_mr bufs[B_COUNT];
    struct op ops[OP_COUNT];
    uint8_t *pdata_out; /* the private data this side sends (text [NUL adv]) */
    ULONG pdata_out_len;
    uint32_t seed;         /* of the connection's pattern streams (the client's) */
    enum tc_waited waited; /* how the last wait for completions ended */
};

/* The peer's side of the connection phase, as NdkGetConnectionData gives
 * it: its IRD/ORD and its private data, split into text and
 * advertisement. */
struct peer_data {
    uint64_t t_event; /* the connect event (the passive side) */
    ULONG ird, ord;
    uint8_t *pd; /* malloc'ed */
    ULONG pd_len, text_len;
    const uint8_t *adv_bytes; /* in pd, or NULL */
    bool well_formed;
};

/* Reads it; its status (then said by the caller). */
NTSTATUS peer_data_read(struct nconn *n, struct peer_data *r);
/* --loopback: the IRD/ORD the peer's adapter and ours make (want_*), and
 * the private data and advertisement `peer` sent, byte for byte. `shows`
 * names what carries the values ("request shows"). */
bool peer_data_exact(const char *role, const char *shows, const struct peer_data *r, ULONG want_ird, ULONG want_ord,
                     const struct side *peer, const char *sent, size_t sent_len);

/* A connection of side s numbered num: CQ, PD and a small QP, and the
 * connector when the active side asks for it. NULL after saying why (the
 * connection is then ended already). */
struct nconn *nconn_new(struct side *s, unsigned num, bool with_connector);
/* A registered buffer of the data phase. */
bool nconn_buf(struct nconn *n, int b, size_t len, ULONG flags);
struct adv nconn_adv(const struct nconn *n, int b);
/* Posts the receive for the peer's message into the second half of the
 * message buffer, and builds the private data to send: the ULP's text and
 * the advertisement of bufs[adv_buf]. */
bool nconn_recv_and_advertise(struct nconn *n, int adv_buf, const char *text, size_t text_len);
/* Posts op (NdkWrite, NdkRead or NdkSend; remote is NULL for a Send). */
bool nconn_post(struct nconn *n, int op, int b, size_t off, size_t len, const struct adv *remote);
/* Waits until every op of mask has completed, one failed, the peer left,
 * or the timeout; then whether op completed successfully (saying why not). */
void nconn_wait(struct nconn *n, unsigned mask);
bool nconn_op_ok(struct nconn *n, int op);
uint64_t nconn_op_us(const struct nconn *n, int op);
/* Closes and frees the connection; false if a close misbehaved. */
bool nconn_end(struct nconn *n);

/* ------------------------------------------------------------------------ */
/* The two sides of a connection (native_server.c, native_client.c)         */
/* ------------------------------------------------------------------------ */

struct server {
    struct side side;
    const struct side *peer; /* --loopback: the client's adapter, for exact checks */
    struct tc_listener *listener;
    bool bounded_wait;   /* --loopback: a request must come within the timeout */
    unsigned long limit; /* connections to serve; 0 = until interrupted */
    unsigned handled, ok;
    bool failed;
    struct tc_stats accept_stats; /* accepted connections: the accept leg */
    struct tc_stats reject_stats; /* --reject: rejected requests (no leg to time) */
    struct tc_stats reply_stats;  /* data phases: the reply Send */
};

struct client {
    struct side side;
    const struct side *peer; /* --loopback: the server's adapter, for exact checks */
    NDK_SOCKADDR dst;
    struct tc_stats connect_stats;
    unsigned ok;
    /* Data phases that went well: microseconds of each step, and bytes
     * moved by each RDMA Write (the same for the Read). */
    struct tc_stats write_stats, read_stats, sr_stats;
    uint64_t data_bytes;
};

/* Serves requests until the limit, a stop, or (bounded_wait) none comes. */
void server_serve(struct server *s);
/* One connection, active side: true if it went as asked. */
bool client_once(struct client *cl, unsigned num);

/* ------------------------------------------------------------------------ */
/* Roles (native_run.c)                                                     */
/* ------------------------------------------------------------------------ */

int native_main(int argc, char **argv);

#endif
