/*
 * rawpeer.h - a raw TCP peer for the "bad input from the wire" tests, and the
 * small NDK harness those tests drive on the other end of the connection.
 *
 * The raw peer is a plain socket that speaks (or mis-speaks) MPA octet by
 * octet, so a test can put any byte sequence on the wire and watch exactly
 * what libndk answers: a Reply, nothing, a FIN or a RST. Frames are built
 * from the layouts of RFC 5044 and RFC 6581 (rawframe.h) and the siw captures in
 * shared/interop/captures, not from libndk's own encoder, so an encoder bug
 * cannot hide behind a matching decoder bug.
 *
 * Every wait is bounded: sockets are read through poll() with a deadline and
 * NDK completions through tl_event_wait. Nothing here sleeps to synchronise.
 *
 * The helpers are compiled once into ndk_testlib (rawpeer.c).
 */
#ifndef NDK_TESTS_RAWPEER_H
#define NDK_TESTS_RAWPEER_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ndk/ndk.h>

#include "ndktest.h"
#include "rawframe.h"
#include "testlib.h"

/* ======================================================================== */
/* Sockets                                                                   */
/* ======================================================================== */

/* How a read ended. */
enum rp_end {
    RP_OPEN = 0,  /* still open: the wait ran out (or the wanted octets came) */
    RP_EOF = 1,   /* the other side closed gracefully (FIN) */
    RP_RESET = 2, /* the other side reset the connection (RST) */
    RP_ERROR = 3, /* any other socket error */
};

const char *rp_end_name(int e);

/* Milliseconds left until an absolute tl_now_ns() deadline, rounded up. */
int rp_ms_left(uint64_t deadline_ns);

uint64_t rp_deadline(unsigned ms);

unsigned rp_ms_since(uint64_t t0_ns);

void rp_nodelay(int fd);

struct sockaddr_in rp_loopback(uint16_t port);

/* Starts a non-blocking connect to 127.0.0.1:port; returns the fd (the
 * handshake may still be in progress) or -1. */
int rp_connect_start(uint16_t port);

/* The same to any address (IPv4 or IPv6). */
int rp_connect_start_sa(const struct sockaddr *sa, socklen_t len);

/* Connects to 127.0.0.1:port within timeout_ms; returns a blocking fd or -1.
 * The handshake is finished by the kernel's listen queue, so this succeeds
 * whether or not libndk has accepted yet. */
int rp_connect(uint16_t port, unsigned timeout_ms);

/* The same to any address (IPv4 or IPv6). */
int rp_connect_sa(const struct sockaddr *sa, socklen_t len, unsigned timeout_ms);

/* Sends everything; a peer that already closed is not an error worth a
 * signal (MSG_NOSIGNAL), the caller sees it in the result instead. */
bool rp_send(int fd, const void *buf, size_t len);

/* Half-close: our FIN goes out but we can still see how the other side
 * reacts (its FIN or RST), which a plain close() would hide. */
void rp_fin(int fd);

/* Closes with a RST instead of a FIN. */
void rp_reset(int fd);

/*
 * Reads until `want` octets arrived, the connection ended, or timeout_ms ran
 * out. Returns the octets read; *end says whether and how it ended.
 */
size_t rp_read(int fd, uint8_t *buf, size_t want, unsigned timeout_ms, int *end);

/*
 * Waits up to timeout_ms for the other side to close, counting (and keeping
 * the first `cap` of) any octets that come first. Returns how it ended:
 * RP_OPEN means it was still open when the time ran out.
 */
int rp_wait_end(int fd, unsigned timeout_ms, uint8_t *keep, size_t cap,
                size_t *nbytes);

/* True if nothing at all (no octet, no FIN, no RST) arrives for ms. */
bool rp_quiet(int fd, unsigned ms, uint8_t *first, size_t *nfirst);

/* Asserts rp_quiet for RP_QUIET_MS; otherwise a failure, reported with
 * `what` (what should not have happened) and the octets that came. */
bool rp_expect_quiet(int fd, const char *what);

/* A plain listening socket on 127.0.0.1 with a kernel-chosen port. */
int rp_listen(uint16_t *port);

/* A listening socket bound to *sa (port 0: the kernel chooses); *sa and
 * *len become the address it got. */
int rp_listen_sa(struct sockaddr *sa, socklen_t *len);

/* Accepts one connection within timeout_ms; -1 if none came. */
int rp_accept(int lfd, unsigned timeout_ms);

/*
 * Reads one startup frame the way an MPA responder must (RFC 5044, the
 * Request's fixed header gives PD_Length):
 * exactly 20 octets, then exactly PD_Length octets, never more. Returns the
 * frame length, or 0 when it did not arrive whole within timeout_ms or its
 * PD_Length is over 512 (then the header is still in out).
 */
size_t rp_read_frame(int fd, uint8_t *out /* >= 532 */, unsigned timeout_ms);

/* How the raw peer saw a connection end (rp_end_name), after ms, with the
 * first of the n octets it received, for a failure message. */
void rp_report_end(const char *what, int end, unsigned ms, const uint8_t *got, size_t n);

/* Checks the fixed part of a Reply: key, flags (compared under mask), Rev;
 * counts a failure and prints the octets if it is not that. */
bool rp_check_reply_header(const uint8_t *r, size_t n, uint8_t flags, uint8_t mask, uint8_t rev);

/* Bounds of the listener cases against a raw initiator. */
#define RP_PROMPT_MS 1500u  /* our side must react to a complete bad input within this */
#define RP_NO_EVENT_MS 100u /* after the close, a connect event would already be queued */
#define RP_QUIET_MS 300u    /* "nothing is sent" windows */
/* MpaRequestTimeoutMs for bad-input cases: well above RP_PROMPT_MS, so a
 * close by the request timer (the bad input went unnoticed) fails them. */
#define RP_BAD_INPUT_REQ_TIMEOUT 4000u

/* ======================================================================== */
/* The NDK side                                                              */
/* ======================================================================== */

/* Bound for anything that should happen "at once" on loopback. Generous,
 * because CI runs these under ASan on busy machines; a passing run never
 * waits this long. */
#define NK_WAIT_MS 3000u
/* A status no provider returns: "the completion never came". */
#define NK_NO_COMPLETION NT_NO_COMPLETION
#define nk_st nt_st
#define CHECK_ST(got, want) CHECK_STATUS(got, want)

/*
 * One asynchronous request: ndktest.h's record. Records are not reused
 * within a program here (no case wrapper resets the pool): if libndk calls
 * back late (after a wait gave up) the callback still lands in valid memory,
 * and nk_pool_audit can see it.
 */
typedef nt_op nk_req;
#define nk_req_new() nt_op_new(NT_REQ, "request")
#define nk_req_done nt_req_cb
#define nk_create_done nt_create_cb
#define nk_close_done nt_close_cb

/* An operation in flight: the inline return plus its request record. */
typedef struct nk_op {
    NTSTATUS st; /* what the call returned */
    nk_req *r;
} nk_op;

nk_op nk_op_begin(nk_req *r, NTSTATUS st);

/* True once the final status is known. */
bool nk_op_done(nk_op *op);

/* The final status: inline, or from the completion within ms;
 * NK_NO_COMPLETION (not a failure by itself) when none came. */
NTSTATUS nk_op_wait(nk_op *op, unsigned ms);

/*
 * Rule C7 (docs/rules.md) over the requests made since the last audit:
 * at most one completion for a request that returned STATUS_PENDING, none
 * for any other return (nt_audit). Called after ndk_close_adapter, which
 * guarantees no callback is still to come.
 */
void nk_pool_audit(void);

/* Finishes a create call: the object, inline or from its completion. */
void *nk_created(nk_req *r, NTSTATUS st, void *inline_obj);

/* Closes any object (NULL: already closed) and waits for its close
 * completion; false, and a failure, if it did not finish. */
bool nk_close_obj(void *obj);
#define NK_CLOSE(o) nk_close_obj(o)
/* The per-type names of earlier tests; the object's own table gives the
 * close function, so fn is not needed any more. */
#define nk_close(h, fn) nk_close_obj(h)
#define nk_close_connector(o) nk_close_obj(o)
#define nk_close_qp(o) nk_close_obj(o)
#define nk_close_listener(o) nk_close_obj(o)
#define nk_close_mr(o) nk_close_obj(o)

/* A listener with a queue of the connectors its connect events delivered. */
#define NK_MAXQ 512
typedef struct nk_listener {
    NDK_LISTENER *l;
    uint16_t port;
    pthread_mutex_t mu;
    NDK_CONNECTOR *q[NK_MAXQ];
    unsigned pushed, popped;
    tl_event ev; /* one count per connect event */
} nk_listener;

/* An adapter with a CQ and a PD: what every test needs for its QPs. */
#define NK_MAX_LISTENERS 4
typedef struct nk_world {
    NDK_ADAPTER *ad;
    NDK_CQ *cq;
    NDK_PD *pd;
    tl_event cq_ev; /* CQ notifications */
    nk_listener *listeners[NK_MAX_LISTENERS];
    unsigned nlisteners;
} nk_world;

void nk_cq_notify(void *ctx, NTSTATUS status);

/* Options with short timeouts; a test overrides what it is about. */
NDK_OPEN_OPTIONS nk_options(void);

nk_world *nk_open(const NDK_OPEN_OPTIONS *opt);

/* A world whose listeners wait request_timeout_ms for an MPA Request and
 * keep at most max_half_open connections waiting for one (nk_options
 * otherwise). */
nk_world *nk_open_responder(ULONG request_timeout_ms, ULONG max_half_open);

/* ndk_close_adapter tears down whatever a failed test left open and returns
 * only when no callback can come any more; after it the pool can be audited
 * and the listener queues freed. */
void nk_close_world(nk_world *w);

NDK_QP *nk_qp(nk_world *w);

NDK_CONNECTOR *nk_connector(nk_world *w);

void nk_on_connect(void *ctx, NDK_CONNECTOR *c);

/* Creates a listener listening on 127.0.0.1 with a provider-chosen port. */
nk_listener *nk_listen(nk_world *w);

/* The next connector a connect event delivered, waiting up to ms; NULL if
 * none came. */
NDK_CONNECTOR *nk_next_event(nk_listener *l, unsigned ms);

/* The opening of a raw-peer case: connects a raw peer to l, sends the MPA
 * request req and returns the connector libndk delivered for it (checked
 * as a failure when missing). NULL when the connect, the send or the
 * delivery fails; *fd is the peer's socket, or -1. */
NDK_CONNECTOR *nk_deliver(nk_listener *l, const void *req, size_t len, int *fd);

/*
 * The passive side of a raw-initiator case: a world, its listener, and the
 * connector, QP and raw socket of the connection under test (NULL, NULL and
 * -1 until the case makes them).
 */
typedef struct nk_passive {
    nk_world *w;
    nk_listener *l;
    NDK_CONNECTOR *c;
    NDK_QP *qp;
    int fd;
} nk_passive;

/* Takes w (NULL when opening it failed) and listens on it; false, and a
 * failure counted, without a world or a listener. nk_passive_close is due
 * either way. */
bool nk_passive_open(nk_passive *p, nk_world *w);

/* A raw connection to p's listener in p->fd; false (a failure counted)
 * when it could not be made. */
bool nk_passive_connect(nk_passive *p);

/* nk_deliver of req on p's listener, then a QP for the connector; false
 * when either is missing (a failure counted). */
bool nk_passive_deliver(nk_passive *p, const void *req, size_t len);

/* Closes whichever of *c, *qp and the socket *fd is open, and clears them
 * (NULL, NULL, -1). */
void nk_close_conn(NDK_CONNECTOR **c, NDK_QP **qp, int *fd);

/* Closes whatever of the connector, the QP and the socket is open; the
 * world and its listener stay for the next connection. */
void nk_passive_drop(nk_passive *p);

/* nk_passive_drop, then the world. */
void nk_passive_close(nk_passive *p);

/*
 * Asserts that no connect event comes within ms. A stray connector is
 * reported with what it carries, then closed.
 */
bool nk_no_event(nk_listener *l, unsigned ms, const char *why);

nk_op nk_connect(NDK_CONNECTOR *c, NDK_QP *qp, uint16_t port, ULONG ird, ULONG ord,
                 const void *pd, ULONG pd_len);

nk_op nk_accept(NDK_CONNECTOR *c, NDK_QP *qp, ULONG ird, ULONG ord, const void *pd,
                ULONG pd_len);

nk_op nk_complete(NDK_CONNECTOR *c);

/* Private data of a connector (passive before Accept, active after its
 * Connect ended): RDS in *len, the octets in buf. */
NTSTATUS nk_conn_data(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, void *buf,
                      ULONG *len);

/*
 * The listener still serves: a complete NDK connection from a fresh
 * connector on the same adapter, three legs, then both sides closed. The
 * connect event must be this connection's (its private data carries `tag`),
 * so a stray event left by an earlier bad input is caught here too.
 */
bool nk_roundtrip(nk_world *w, nk_listener *l, const char *tag);
/* The same among other connect events (a fuzzer's): each event that is not
 * ours goes to stray, which takes it over, and ours is awaited up to
 * wait_ms. Without stray, as nk_roundtrip: a foreign event fails it. */
bool nk_roundtrip_among(nk_world *w, nk_listener *l, const char *tag, unsigned wait_ms,
                        void (*stray)(nk_world *w, NDK_CONNECTOR *c));

/* A registered buffer for Send/Receive payloads. */
typedef struct nk_mr {
    NDK_MR *mr;
    MDL mdl;
    UINT32 token;
    uint8_t buf[256];
} nk_mr;

bool nk_mr_register(nk_world *w, nk_mr *m);

void nk_mr_release(nk_mr *m);

/* One SGE over [off, off+len) of the registered buffer. */
NDK_SGE nk_sge(nk_mr *m, size_t off, ULONG len);

/* The next CQ entry within ms: polls, arms, polls again, then waits for the
 * notification, so a completion that lands between poll and arm is not
 * missed. */
bool nk_cq_next(nk_world *w, NDK_RESULT *res, unsigned ms);

#endif
