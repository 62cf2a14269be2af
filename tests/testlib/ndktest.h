/*
 * ndktest.h - helpers shared by the conformance tests (compiled into
 * ndk_testlib: ndktest.c).
 *
 * What lives here and why:
 *  - nt_op: one record per asynchronous call or callback registration. Every
 *    provider callback (request, create and close completions, disconnect
 *    events) goes through an nt_op, which counts the calls, keeps the last
 *    status and a global sequence number. At the end of each case every op
 *    that a provider function returned for is checked: exactly one completion
 *    if the call returned STATUS_PENDING, none otherwise (rules L2 and C7,
 *    docs/rules.md). The check runs after the adapters are closed, so no
 *    late callback can slip past it.
 *  - nt_side / nt_lsn / nt_conn: the usual fixtures (an adapter with a CQ and
 *    a PD; a listener on a loopback address with port 0; one connection).
 *  - NT_CASE / NT_CASE_FAM: wrap a case so the checks above run, a watchdog
 *    turns a hang (for example a callback that deadlocks on a provider lock)
 *    into a failure, and connection cases run over the family of the run
 *    (IPv4, or IPv6 with --ipv6; see tl_init).
 *
 * Nothing here sleeps to synchronise: waits are tl_event waits with bounds.
 */
#ifndef NDK_CONFORMANCE_NDKTEST_H
#define NDK_CONFORMANCE_NDKTEST_H

#include <ndk/ndk.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "testlib.h"

/* ------------------------------------------------------------------------ */
/* Bounds                                                                   */
/* ------------------------------------------------------------------------ */

#define NT_WAIT_MS 5000u  /* anything that must happen: generous for ASan/CI */
#define NT_QUIET_MS 250u  /* "nothing happens" checks: short but not zero */
#define NT_PROMPT_MS 1000u /* a provider call made from a callback must return within this */
#define NT_CASE_TIMEOUT_S 40u /* watchdog per case; executables must stay under 60 s */

/* ------------------------------------------------------------------------ */
/* Status checks                                                            */
/* ------------------------------------------------------------------------ */

/* A status no provider returns: "the completion never came". */
#define NT_NO_COMPLETION ((NTSTATUS)0xE0DE0001L)

/* The status's name (ndk_status_name), NT_NO_COMPLETION's included. */
const char *nt_st(NTSTATUS s);

/* CHECK_EQ plus the status names, since 0xC0000236 says little. */
#define CHECK_STATUS(got, want)                                                              \
    do {                                                                                     \
        NTSTATUS nt_got_ = (got), nt_want_ = (want);                                         \
        CHECK_EQ(nt_got_, nt_want_);                                                         \
        if (nt_got_ != nt_want_) {                                                           \
            char nt_gb_[64], nt_wb_[64];                                                     \
            snprintf(nt_gb_, sizeof nt_gb_, "%s", nt_st(nt_got_));                             \
            snprintf(nt_wb_, sizeof nt_wb_, "%s", nt_st(nt_want_));                            \
            fprintf(stderr, "    got %s, expected %s\n", nt_gb_, nt_wb_);                    \
        }                                                                                    \
    } while (0)

#define REQUIRE_STATUS(got, want)                                                            \
    do {                                                                                     \
        NTSTATUS nt_rgot_ = (got);                                                           \
        CHECK_STATUS(nt_rgot_, (want));                                                      \
        if (nt_rgot_ != (want))                                                              \
            return;                                                                          \
    } while (0)

/* Checks made on provider threads (inside callbacks): tl_failures is not
 * atomic, so they count here and the case wrapper adds them up. */
extern _Atomic int nt_cb_failures;
#define NT_CB_CHECK(cond)                                                                    \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            atomic_fetch_add(&nt_cb_failures, 1);                                            \
            fprintf(stderr, "%s:%d: [callback] check failed: %s\n", __FILE__, __LINE__,      \
                    #cond);                                                                  \
        }                                                                                    \
    } while (0)
#define NT_CB_CHECK_STATUS(got, want)                                                        \
    do {                                                                                     \
        NTSTATUS nt_cg_ = (got), nt_cw_ = (want);                                            \
        if (nt_cg_ != nt_cw_) {                                                              \
            char nt_gb_[64], nt_wb_[64];                                                     \
            snprintf(nt_gb_, sizeof nt_gb_, "%s", ndk_status_name(nt_cg_));                    \
            snprintf(nt_wb_, sizeof nt_wb_, "%s", ndk_status_name(nt_cw_));                    \
            atomic_fetch_add(&nt_cb_failures, 1);                                            \
            fprintf(stderr, "%s:%d: [callback] %s: got %s, expected %s\n", __FILE__,         \
                    __LINE__, #got, nt_gb_, nt_wb_);                                         \
        }                                                                                    \
    } while (0)

uint64_t nt_ms_since(uint64_t t0_ns);

/* ------------------------------------------------------------------------ */
/* nt_op: one asynchronous call or one callback registration                */
/* ------------------------------------------------------------------------ */

typedef enum nt_kind { NT_REQ = 1, NT_CREATE, NT_CLOSE, NT_DISC } nt_kind;

typedef struct nt_op nt_op;
/* Runs inside the provider's callback, before the op is signalled, so the
 * main thread sees what it recorded once its wait returns. */
typedef void (*nt_hook)(nt_op *op, NTSTATUS status);

struct nt_op {
    tl_event ev; /* one signal per callback */
    nt_kind kind;
    const char *what;
    bool started;      /* a provider function returned for it */
    NTSTATUS returned; /* what that function returned */
    _Atomic NTSTATUS status;          /* status of the last completion */
    _Atomic(NDK_OBJECT_HEADER *) obj; /* object of a create completion */
    _Atomic unsigned seq;             /* global order of the first callback */
    _Atomic ULONG reason;             /* disconnect event Ex reason */
    _Atomic int ex_called;            /* the Ex form of the disconnect event ran */
    nt_hook hook;
    void *u1, *u2, *u3;  /* hook arguments */
    NTSTATUS r[8];       /* hook results */
    ULONG v[8];
    uint64_t hook_ms;    /* slowest provider call the hook timed */
};

/* Per program run: the pool is reset by each case wrapper; the raw peer
 * (nk_*), which has none, never reuses a record. */
#define NT_MAX_OPS 6144

/* A long-running program that makes more calls than NT_MAX_OPS (the soak
 * tests on the raw peer) asks for a pool of n records before its first
 * call. The pool's pages are touched at once, so a memory baseline taken
 * afterwards already holds them. */
void nt_ops_reserve(unsigned n);

/* Records the pool still has. */
unsigned nt_ops_left(void);

unsigned nt_next_seq(void);

nt_op *nt_op_new(nt_kind kind, const char *what);

unsigned nt_count(nt_op *op);

void nt_op_fire(nt_op *op);

void nt_req_cb(PVOID ctx, NTSTATUS status);

void nt_create_cb(PVOID ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj);

void nt_close_cb(PVOID ctx);

void nt_disc_cb(PVOID ctx);

void nt_disc_ex_cb(PVOID ctx, ULONG reason);

/* Records what the provider function returned for op. */
NTSTATUS nt_started(nt_op *op, NTSTATUS returned);

/*
 * The final status of an asynchronous call: the return value when it
 * completed inline (then the callback must not have run), otherwise the
 * status of its single completion. STATUS_PENDING if it did not complete
 * within ms (counted as a failure).
 */
NTSTATUS nt_finish(nt_op *op, unsigned ms);

/* Has the call finished (inline, or its completion ran)? */
bool nt_done(nt_op *op);

/* ------------------------------------------------------------------------ */
/* Adapters                                                                 */
/* ------------------------------------------------------------------------ */

#define NT_MAX_ADAPTERS 16
extern NDK_ADAPTER *nt_adapters[NT_MAX_ADAPTERS];

/* Fast provider timeouts for the suite; cases that test a timeout lower
 * the one they need. Long enough that a loaded CI machine never hits them
 * by accident. */
NDK_OPEN_OPTIONS nt_opts(void);

/* The same with every provider timeout at ms. */
NDK_OPEN_OPTIONS nt_opts_ms(ULONG ms);

/* Opens an adapter and records it in nt_adapters, so a case that stops
 * early still closes it (nt_case_end). The one place the harnesses over the
 * public API (ndktest, dptest, vtest, the raw peer's NDK side) open an
 * adapter: an option every suite should run with goes here. */
NTSTATUS nt_open(const char *name, NDK_VERSION v, const NDK_OPEN_OPTIONS *o,
                 NDK_ADAPTER **out);

void nt_close_adapter(NDK_ADAPTER *ad);

NTSTATUS nt_query_info(NDK_ADAPTER *ad, NDK_ADAPTER_INFO *info);

/* ------------------------------------------------------------------------ */
/* Creating and closing objects                                             */
/* ------------------------------------------------------------------------ */

/* Final status of a create; *pp is the object on success. */
NTSTATUS nt_created(nt_op *op, NTSTATUS st, void **pp, void *inline_obj);

void nt_cq_notify(PVOID ctx, NTSTATUS st);

NTSTATUS nt_create_cq(NDK_ADAPTER *ad, ULONG depth, NDK_CQ **out);

NTSTATUS nt_create_pd(NDK_ADAPTER *ad, NDK_PD **out);

NTSTATUS nt_create_qp(NDK_PD *pd, NDK_CQ *cq, ULONG rq, ULONG iq, ULONG rsge,
                      ULONG isge, ULONG inl, NDK_QP **out);

NTSTATUS nt_create_mr(NDK_PD *pd, BOOLEAN fast, NDK_MR **out);

NTSTATUS nt_create_mw(NDK_PD *pd, NDK_MW **out);

NTSTATUS nt_create_srq(NDK_PD *pd, ULONG depth, NDK_SRQ **out);

NTSTATUS nt_create_connector(NDK_ADAPTER *ad, NDK_CONNECTOR **out);

NTSTATUS nt_create_listener(NDK_ADAPTER *ad, NDK_FN_CONNECT_EVENT_CALLBACK ev,
                            void *ctx, NDK_LISTENER **out);

NTSTATUS nt_create_sep(NDK_ADAPTER *ad, const NDK_SOCKADDR *sa, ULONG len,
                       NDK_SHARED_ENDPOINT **out);

/* Each dispatch table's close member (the adapter has none). */
NDK_FN_CLOSE_OBJECT nt_close_fn(void *obj);

/* Starts a close; the op records its return and its completion. */
nt_op *nt_close_start_hook(void *obj, nt_hook hook, void *u1);

nt_op *nt_close_start(void *obj);

/* Waits for a started close to finish; false (and a failure) if it did not. */
bool nt_close_wait(nt_op *op, unsigned ms);

/* Closes obj (if not NULL) and waits for the close to finish. */
void nt_close(void *obj);

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */
/* ------------------------------------------------------------------------ */

ULONG nt_sa_len(int fam);

/* 127.0.0.1 or ::1 with the given port (host order). */
ULONG nt_sa_loop(int fam, unsigned port, NDK_SOCKADDR *sa);

unsigned nt_sa_port(const NDK_SOCKADDR *sa);

void nt_sa_set_port(NDK_SOCKADDR *sa, unsigned port);

/* Whether an adapter description lists the loopback address of fam. */
bool nt_desc_has_loop(const NDK_ADAPTER_DESCRIPTION *d, int fam);

/* Same family, address and port. */
bool nt_sa_eq(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b);

const char *nt_sa_str(const NDK_SOCKADDR *sa, char *buf, size_t n);

#define CHECK_SA_EQ(a, b)                                                                    \
    do {                                                                                     \
        if (!nt_sa_eq((a), (b))) {                                                           \
            char nt_b1_[96], nt_b2_[96];                                                     \
            tl_failures++;                                                                   \
            fprintf(stderr, "%s:%d: [%s] address %s != %s: %s vs %s\n", __FILE__, __LINE__,   \
                    tl_current ? tl_current : "-", #a, #b, nt_sa_str((a), nt_b1_, 96),      \
                    nt_sa_str((b), nt_b2_, 96));                                             \
        }                                                                                    \
    } while (0)

const char *nt_fam_name(int fam);

/* ------------------------------------------------------------------------ */
/* Plain sockets standing in for misbehaving peers                          */
/* ------------------------------------------------------------------------ */

typedef struct nt_raw {
    int lfd, cfd;
    NDK_SOCKADDR addr;
    ULONG len;
} nt_raw;

/* A listening TCP socket on loopback port 0 that never speaks MPA. */
bool nt_raw_listen(nt_raw *r, int fam);

/* Accepts one connection within ms. */
bool nt_raw_accept(nt_raw *r, unsigned ms);

/* Reads whatever arrives within ms (the MPA Request); returns bytes read. */
ssize_t nt_raw_read(nt_raw *r, void *buf, size_t n, unsigned ms);

void nt_raw_close(nt_raw *r);

/* A port bound but not listening: a SYN to it gets a RST at once. */
int nt_dead_port(int fam, NDK_SOCKADDR *sa, ULONG *len);

/* ------------------------------------------------------------------------ */
/* Fixtures: a side (adapter + CQ + PD), a listener, a connection           */
/* ------------------------------------------------------------------------ */

typedef struct nt_side {
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    NDK_CQ *cq;
    NDK_PD *pd;
} nt_side;

bool nt_side_open(nt_side *s, const NDK_OPEN_OPTIONS *o);

void nt_side_close(nt_side *s);

NDK_QP *nt_qp(nt_side *s);

NDK_CONNECTOR *nt_connector(nt_side *s);

/* A listener and the connectors its connect events delivered, in order. */
#define NT_MAX_INCOMING 32
typedef struct nt_lsn nt_lsn;
typedef void (*nt_lsn_hook)(nt_lsn *L, NDK_CONNECTOR *c, unsigned idx);
struct nt_lsn {
    NDK_LISTENER *l;
    NDK_SOCKADDR addr;
    ULONG addrlen;
    pthread_mutex_t mu;
    tl_event ev;
    NDK_CONNECTOR *conn[NT_MAX_INCOMING];
    unsigned seq[NT_MAX_INCOMING];
    unsigned n;
    _Atomic int in_event; /* a connect event is running */
    nt_lsn_hook hook;     /* runs inside the connect event */
    void *user;
};

#define NT_MAX_LSN 64

void nt_connect_event(PVOID ctx, NDK_CONNECTOR *c);

void nt_lsn_set_hook(nt_lsn *L, nt_lsn_hook hook, void *user);

unsigned nt_lsn_count(nt_lsn *L);

/* The idx-th delivered connector (0-based), waiting up to ms for it. */
NDK_CONNECTOR *nt_incoming(nt_lsn *L, unsigned idx, unsigned ms);

nt_lsn *nt_lsn_new(void);

/* NdkListen on sa; returns the final status (inline or completion). */
NTSTATUS nt_listen_at(NDK_LISTENER *l, const NDK_SOCKADDR *sa, ULONG len);

/* Creates a listener on s and calls NdkListen on fam's loopback address at
 * port; returns NdkListen's status (a failed create is a failure of the
 * case) and, when it listens, the listener in *out with its bound address
 * read back into L->addr. A listener that does not listen is closed. */
NTSTATUS nt_listen_try(nt_side *s, int fam, unsigned port, nt_lsn **out);

/* A listener created on s and listening on fam's loopback address, with
 * the port the provider picked read back into L->addr. */
nt_lsn *nt_listen_on(nt_side *s, int fam, unsigned port);

nt_lsn *nt_listen(nt_side *s, int fam);

/* The usual fixture of a connection case: an active and a passive side
 * opened with nt_opts(), and a listener on the passive side (fam's loopback
 * address, port picked by the provider). On failure what was opened is
 * closed and *L is NULL. */
bool nt_pair_open(nt_side *as, nt_side *ps, nt_lsn **L, int fam);

/* Closes what nt_pair_open opened: the listener, then both sides. */
void nt_pair_close(nt_side *as, nt_side *ps, nt_lsn *L);

void nt_lsn_close(nt_lsn *L);

/* One connection between an active side and a listener's side. */
typedef struct nt_conn {
    int fam;
    nt_side *as, *ps;
    nt_lsn *L;
    NDK_QP *qa, *qp;
    NDK_CONNECTOR *a, *p;
    nt_op *connect, *accept, *complete;
    nt_op *dev_a, *dev_p; /* disconnect event contexts */
    bool ex;              /* AcceptEx / CompleteConnectEx */
    /* Hooks run inside the completions (op->u1 is the nt_conn); set before
     * the call so that they are in place however early it completes. */
    nt_hook h_connect, h_accept, h_complete;
} nt_conn;

bool nt_conn_init(nt_conn *c, int fam, nt_side *as, nt_side *ps, nt_lsn *L);

/* NdkConnect from fam's loopback address, port 0, to the listener. */
NTSTATUS nt_conn_connect_to(nt_conn *c, const NDK_SOCKADDR *dst, ULONG dstlen,
                            ULONG ird, ULONG ord, const void *pd, ULONG pdlen);

NTSTATUS nt_conn_connect(nt_conn *c, ULONG ird, ULONG ord, const void *pd,
                         ULONG pdlen);

/* NdkConnectWithSharedEndpoint from sep to dst. */
NTSTATUS nt_conn_connect_sep_to(nt_conn *c, NDK_SHARED_ENDPOINT *sep,
                                const NDK_SOCKADDR *dst, ULONG dstlen, ULONG ird,
                                ULONG ord, const void *pd, ULONG pdlen);

NTSTATUS nt_conn_connect_sep(nt_conn *c, NDK_SHARED_ENDPOINT *sep, ULONG ird,
                             ULONG ord, const void *pd, ULONG pdlen);

/* NdkConnect with ird/ord and no private data, then the connector the
 * listener delivers for it as c->p; false when none comes within
 * NT_WAIT_MS. */
bool nt_conn_deliver(nt_conn *c, ULONG ird, ULONG ord);

NTSTATUS nt_conn_accept(nt_conn *c, ULONG ird, ULONG ord, const void *pd,
                        ULONG pdlen);

NTSTATUS nt_conn_complete(nt_conn *c);

/* The three legs with default limits and no private data; over a shared
 * endpoint when sep is not NULL. */
bool nt_establish_via(nt_conn *c, NDK_SHARED_ENDPOINT *sep);

bool nt_establish(nt_conn *c);

/*
 * Closes obj and checks that the close completion is its last callback
 * (L13, L14): every callback op in ops[] (requests on obj, its disconnect
 * event) ran before the close completion - or, when the close returned
 * STATUS_SUCCESS, every pending request had completed by then.
 */
void nt_close_last(void *obj, nt_op *const *ops, unsigned n);

/* Closes both connectors (checking that each close completion is the
 * connector's last callback), then both QPs (their antecedents). */
void nt_conn_close(nt_conn *c);

/* nt_pair_open and one connection record over it (nt_conn_init): the
 * fixture of a one-connection case. On failure what was opened is closed
 * and *L is NULL. */
bool nt_pair_conn_open(nt_side *as, nt_side *ps, nt_lsn **L, nt_conn *c, int fam);

/* nt_conn_close, then nt_pair_close. */
void nt_pair_conn_close(nt_side *as, nt_side *ps, nt_lsn *L, nt_conn *c);

NTSTATUS nt_gcd(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, void *buf, ULONG *len);

NTSTATUS nt_disconnect(NDK_CONNECTOR *c, nt_op **out);

/* A graceful disconnect: first calls NdkDisconnect, the other side sees its
 * disconnect event (into other_ev), then calls NdkDisconnect too; both
 * complete STATUS_SUCCESS (rule X1: the first only after the second). */
void nt_graceful_disconnect(NDK_CONNECTOR *first, NDK_CONNECTOR *other, nt_op *other_ev);

/* ------------------------------------------------------------------------ */
/* Case wrappers                                                            */
/* ------------------------------------------------------------------------ */

void nt_watchdog(int sig);

void nt_case_begin(const char *name);

/*
 * The completion contract (rules L2, C7) over the ops made since *from, which
 * moves to the end: exactly one completion for a call that returned
 * STATUS_PENDING (or none, when pending_may_stay: the caller gave up
 * waiting), none for any other return, at most one disconnect indication.
 * Call it only once no callback can come any more (after
 * ndk_close_adapter, L12).
 */
void nt_audit(unsigned *from, bool pending_may_stay);

void nt_case_end(void);

/* A case with no address family. */
#define NT_CASE(name) TL_CASE_BETWEEN(name, nt_case_begin, nt_case_end, (void), ())

/* A connection case, over 127.0.0.1 or ::1: the family of the run
 * (tl_family(): IPv4, or IPv6 when the program was started with --ipv6).
 * main runs it with RUN_FAM and calls tl_init first. */
#define NT_CASE_FAM(name)                                                                    \
    TL_CASE_BETWEEN(name, nt_case_begin, nt_case_end, (int fam), (tl_family()))

#endif
