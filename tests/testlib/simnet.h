/*
 * simnet.h - a deterministic in-memory network for the QP data path.
 *
 * Two adapters, PDs, CQs, MRs and QPs are made through the public NDKPI
 * dispatch tables, but no connector ever runs: ndk_qp_start() is called on
 * both QPs with a transport of ours (struct sim_end), a pair of byte logs we
 * control. Nothing moves unless the test thread moves it: sim_run() delivers
 * bytes to each side's reader in chunks chosen by the delivery mode, calls
 * ndk_qp_on_readable / ndk_qp_on_writable, and plays the connector's part
 * when the data path gives up (the `failed` op, an end of stream). The
 * adapters' progress threads stay idle because no socket exists, so a run is
 * a pure function of its seed (STag values are random per adapter, but only
 * their values change, never a length or an ordering).
 *
 * Every request is recorded (struct sim_req) with what it should do to memory:
 * every buffer lives in a guarded mapping (struct sim_buf: PROT_NONE pages
 * on both sides, canary bytes in the slack) with a shadow copy of its initial
 * and expected contents, so a run can check that each byte is either
 * untouched or holds what the exchange put there, and nothing else moved.
 *
 * When the data path gives up, the owner's teardown (ndk_qp_stop) follows
 * the connector by default (sim_settle): on `failed`, and when
 * ndk_qp_on_readable returns false on a QP in error, at once or, if the QP
 * sent a Terminate, once the peer closed (sim_net.teardown_on_rx_end). NDK_SIM_TRACE=1
 * prints every scheduler step, post and queued Terminate.
 *
 * NDK_SIM_TRANSPORT=shm selects the shared-memory model instead (simshm.c,
 * docs/shm.md): the QPs are joined by the same-host transport, whose own
 * threads move the data in real time; the scripts and checks stay, the
 * byte logs stay empty, and sim_run waits for the exchange to settle.
 *
 * The helpers are compiled once into ndk_testlib (simnet.c, simshm.c), over
 * the provider's internals: a test that uses them links ndk_core.
 */
#ifndef NDK_TESTS_SIMNET_H
#define NDK_TESTS_SIMNET_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"
#include "objects.h"
#include "testlib.h"
#include "wire/crc32c.h"
#include "wire/ddp.h"
#include "wire/mpa.h"
#include "wire/term.h"

/* ------------------------------------------------------------------------ */
/* Randomness and seeds                                                     */
/* ------------------------------------------------------------------------ */

struct sim_rng {
    uint64_t s;
};

/* splitmix64: good enough for chunk sizes, and every state is valid. */
uint64_t sim_next(struct sim_rng *r);

uint64_t sim_below(struct sim_rng *r, uint64_t n);

/* Mixes values into one seed (for seeds derived from a base). */
uint64_t sim_mix(uint64_t a, uint64_t b);

/* NDK_SIM_SEED replays one run: decimal or 0x-prefixed hex. */
bool sim_seed_from_env(uint64_t *out);

uint64_t sim_fresh_seed(void);

/* ------------------------------------------------------------------------ */
/* Guarded buffers with shadow contents                                     */
/* ------------------------------------------------------------------------ */

#define SIM_CANARY(i) ((uint8_t)(0x5A ^ (uint8_t)((i) * 7u)))

/*
 * [PROT_NONE page][lead canary][p: len bytes][tail canary][PROT_NONE page].
 * A write that runs off either end of the mapping faults at once; one that
 * lands in the slack changes a canary. init is what p held when the run
 * started, want what it must hold after every request succeeded, target
 * marks the bytes some request may write (the rest must never change).
 */
struct sim_buf {
    uint8_t *map;
    size_t map_len;
    uint8_t *p;
    size_t len;
    size_t lead, tail; /* canary bytes before and after p */
    uint8_t *init, *want, *target;
};

size_t sim_page(void);

/* lead: offset of p in its first page (SIZE_MAX: put p against the upper
 * guard, so an overrun faults). Contents are random from rng. */
bool sim_buf_new(struct sim_buf *b, size_t len, size_t lead, struct sim_rng *rng);

void sim_buf_free(struct sim_buf *b);

bool sim_canaries_ok(const struct sim_buf *b);

/* A request will put src (n bytes) at off: the expected contents change. */
void sim_buf_expect(struct sim_buf *b, size_t off, const uint8_t *src, size_t n);

/* Index of the first byte that is neither untouched nor (where a request
 * targets it) its expected value; SIZE_MAX when every byte is acceptable.
 * exact: every byte must be its expected value (all requests succeeded). */
size_t sim_buf_bad_byte(const struct sim_buf *b, bool exact);

/* ------------------------------------------------------------------------ */
/* The transport: two byte logs                                             */
/* ------------------------------------------------------------------------ */

/* Bytes one end wrote. Everything is kept, so the test can read back the
 * exact wire image (a Terminate, the offending FPDU) afterwards. */
struct sim_dir {
    uint8_t *log;
    size_t len, cap;
    size_t delivered; /* made readable by the scheduler */
    size_t consumed;  /* taken by the reader */
    size_t cut;       /* the reader never gets past this (SIZE_MAX: no cut) */
    int cut_err;      /* at the cut the reader sees 0 (FIN) or -cut_err */
    size_t wcut;      /* the writer's writev fails with -ECONNRESET past this */
    bool fin;         /* the writer shut down after len bytes */
};

struct sim_net;

struct sim_end {
    struct ndk_transport tr; /* first: the engine hands us &tr */
    struct sim_net *net;
    int id;
    size_t wbudget;    /* bytes writev may take before it says EAGAIN */
    unsigned stall;    /* scheduler steps the socket stays full ... */
    size_t stall_room; /* ... or takes only this many octets per step */
    bool roomy;        /* writes never partial (unless stalled by hand) */
    bool want_write;
    bool shut_wr;
    bool stopped;      /* ndk_qp_stop was called (the connector's teardown) */
    bool rx_done;      /* ndk_qp_on_readable returned false */
    bool paused;       /* pause_input (sim_transport_ops_pausable): not read; atomic, as
                          the adapter's progress thread may resume it (a deadline) */
    unsigned failed_calls;
    bool failed_reset;
    unsigned writev_calls;
    size_t mss_mulpdu; /* what the transport's mulpdu op says (0: unknown) */
    unsigned mulpdu_calls;
};

enum sim_mode {
    SIM_WHOLE = 0,  /* everything written is readable at once */
    SIM_BYTE = 1,   /* one byte per readable event */
    SIM_RANDOM = 2, /* random chunks, random partial writes */
    SIM_STALL = 3,  /* as RANDOM, and the socket is full now and then */
};

extern const char *const sim_mode_name[];

struct sim_cfg {
    enum sim_mode mode;
    bool crc;
    size_t mulpdu;
    uint32_t ord[2], ird[2];
    bool gate_b;   /* B is a client/server responder: sends nothing before A's first FPDU */
    bool read_rtr; /* set-up used a Read RTR: B's zero-length response leads B's stream */
    /* The receive engine's staging buffer (src/rx_stage.h): payloads up to
     * the threshold are staged, in a buffer of this size (0: none).
     * SIZE_MAX: the provider's default. */
    size_t stage_threshold, stage_size;
};

/* Picks one of eight staging thresholds and one of eight buffer sizes
 * (index 0 of each: the provider's own). */
void sim_cfg_stage(struct sim_cfg *c, unsigned thr, unsigned size);

/* Derives a whole configuration from a run seed: its low 20 bits pick the
 * mode and the options, so a printed seed replays the same run. */
#define SIM_CFG_BITS 0xFFFFFull
void sim_cfg_from_seed(struct sim_cfg *c, uint64_t seed);

void sim_cfg_print(const char *tag, uint64_t seed, const struct sim_cfg *c);

/* ------------------------------------------------------------------------ */
/* Requests                                                                 */
/* ------------------------------------------------------------------------ */

enum sim_kind { SK_SEND, SK_RECV, SK_WRITE, SK_READ, SK_BIND, SK_FASTREG, SK_INV };

#define SIM_MAX_REQ 512
#define SIM_MAX_BUF 24
#define SIM_MAX_MR 16
#define SIM_RQ_FIFO 256

/* A stretch of a guarded buffer that a request reads or writes. */
struct sim_span {
    struct sim_buf *buf;
    size_t off, len;
};

struct sim_req {
    int side;
    enum sim_kind kind;
    ULONG flags;
    NTSTATUS post_status; /* what the posting call returned */
    bool accepted;        /* STATUS_SUCCESS: exactly one completion is owed (or none if silent) */
    bool signalled;
    unsigned cqes;
    NDK_RESULT_EX res;    /* the first completion */
    struct sim_span dst[NDK_MAX_SGE]; /* receive: its SGEs; read: its sink */
    int ndst;
    size_t len;           /* payload bytes */
    int peer;             /* send -> the receive it lands in; receive -> its send (-1: none) */
    bool inv;             /* send with invalidate / receive of one */
    uint32_t inv_token;
};

void *sim_ctx(int idx);

/* ------------------------------------------------------------------------ */
/* The network: two sides                                                   */
/* ------------------------------------------------------------------------ */

struct sim_side {
    NDK_ADAPTER *ad;
    NDK_PD *pd, *pd2;  /* pd2: a second PD, for "another PD" regions */
    NDK_CQ *cq;        /* receive and initiator completions */
    NDK_QP *qp;
    struct ndk_qp_impl *impl;
    struct sim_buf *arena;  /* every right, registered as mr_main */
    NDK_MR *mr_main;
    uint32_t tok_main;
    size_t arena_next;
    NDK_MR *mrs[SIM_MAX_MR]; /* every MR of the side, closed at the end */
    int nmrs;
    NDK_MW *mws[4];
    int nmws;
    NDK_LOGICAL_ADDRESS_MAPPING *lams[4];
    int nlams;
    int rq[SIM_RQ_FIFO];     /* accepted receives not yet matched to a send */
    unsigned rq_head, rq_tail;
    int last_sq_cqe, last_rq_cqe; /* for the posting-order check */
};

struct sim_net {
    struct sim_cfg cfg;
    struct sim_rng rng;
    uint64_t seed;
    struct sim_end end[2];
    struct sim_dir dir[2]; /* dir[i]: written by end i */
    struct sim_side side[2];
    struct sim_buf bufs[SIM_MAX_BUF];
    int nbufs;
    struct sim_req req[SIM_MAX_REQ];
    int nreq;
    unsigned unknown_cqes; /* completions naming no request we posted */
    unsigned order_errors; /* completions out of posting order */
    bool verbose;
    uint64_t steps;
    /* How the owner reacts when ndk_qp_on_readable returns false on a QP in
     * error: true as connector.c does (conn_dp_io: tear down, or with a
     * Terminate of ours wait for the peer to close); false only on the
     * `failed` op, the teardown signal qp.h's transport contract names. */
    bool teardown_on_rx_end;
    /* Called after every write that put octets in dir[id], before any of
     * them can be delivered: a test may rewrite them (a forged field). */
    void (*after_write)(struct sim_net *net, int id);
    /* The shared-memory model (simshm.c, NDK_SIM_TRANSPORT=shm): the QPs
     * are joined by the same-host transport, not the byte logs, which stay
     * empty. shm_ended[i]: side i's transport ended on its own. */
    bool shm;
    bool shm_copy; /* payloads go through the rings (copy mode) */
    bool shm_ended[2];
    /* A connection lost over it (sim_shm_cut_at): side cut_side leaves
     * (abortively with cut_abort) as request cut_req is about to be posted;
     * -1: never. */
    int cut_req, cut_side;
    bool cut_abort;
};

extern NDK_ADAPTER *sim_adapters[2];

/* Opens the two adapters every test of the process uses. */
bool sim_open_adapters(void);

void sim_close_adapters(void);

/* ---- transport ops ---- */

struct sim_end *sim_end_of(struct ndk_transport *t);

size_t sim_readable_limit(const struct sim_dir *d);

ssize_t sim_tr_readv(struct ndk_transport *t, const struct iovec *iov, int n);

ssize_t sim_tr_writev(struct ndk_transport *t, const struct iovec *iov, int n);

void sim_tr_want_write(struct ndk_transport *t, bool on);

void sim_tr_shutdown_write(struct ndk_transport *t);

void sim_tr_failed(struct ndk_transport *t, bool peer_reset);

/* The MSS as TCP would report it now: a test changes mss_mulpdu. */
size_t sim_tr_mulpdu(struct ndk_transport *t);

/* With pause_input: a Send that finds no receive waits for one (qp_rx.c,
 * "receiver not ready"). Without it (the default ops), the engine
 * terminates at once, which the protection tests expect. A test sets it on
 * both ends' tr.ops before sim_net_start. */
extern const struct ndk_transport_ops sim_transport_ops_pausable;

/* ---- the scheduler ---- */

/* Has the peer closed its side (its FIN or a reset is on the way to us)?
 * Like EPOLLRDHUP: known when it arrives, whether or not everything before
 * it was read. */
bool sim_peer_closed(const struct sim_net *net, int i);

/* The connector's reactions (conn_dp_io), after any engine call returned:
 * a transport the data path declared failed is torn down (ndk_qp_stop);
 * so is one whose stream ended badly, except that a QP which sent (or
 * still queues) its own Terminate keeps the connection until the peer
 * closes, so the Terminate is read before any reset. Only a FIN at an FPDU
 * boundary on a healthy QP is a graceful end: the QP keeps sending until
 * the consumer disconnects. */
void sim_settle(struct sim_net *net);

void sim_stop(struct sim_net *net, int i);

/* The socket's room for this step. */
void sim_refill(struct sim_net *net, struct sim_end *e);

size_t sim_chunk(struct sim_net *net);

/* One scheduler step over both ends; true when anything moved. */
bool sim_step(struct sim_net *net);

/* Runs the scheduler until nothing can move (every byte delivered and
 * consumed, every wanted write done, no stall pending). A bound catches an
 * engine that keeps asking for work without making progress. */
bool sim_run(struct sim_net *net);

/* ---- the shared-memory model (simshm.c) ---- */

/* NDK_SIM_TRANSPORT=shm: sim_net_new makes networks of the shared-memory
 * model. Its service threads move the data in real time, so runs over it
 * are not replayed by their seed; sim_run waits for them, bounded. */
bool sim_shm_wanted(void);

/* Copy mode (payloads through the rings) for the networks started next:
 * NDK_SHM_COPY=1, read at set-up (docs/shm.md, Messages). */
void sim_shm_force_copy(bool on);

/* Joins the two QPs through the shared-memory transport (sim_net_start). */
bool sim_shm_start(struct sim_net *net);

/* sim_run over it: true once no completion is owed and nothing is in
 * flight; a side whose transport ended is stopped, as the connector does. */
bool sim_shm_run(struct sim_net *net);

/* Both sides disconnect gracefully: each takes what the peer published,
 * then both QPs are stopped. */
void sim_shm_close(struct sim_net *net);

/* Waits (bounded) until both sides' transports ended on their own, then
 * settles as sim_shm_run does. A side ends on its engine's thread once it
 * took the peer's Terminate, after it released the message: sim_run may
 * find everything settled just before that. */
bool sim_shm_wait_ended(struct sim_net *net);

/* The connection is lost as request `req` is about to be posted: side
 * `side` leaves (its QP stopped, as when its process ends; abort: reset,
 * the peer's reason is NDK_DISCONNECT_REASON_ABORTED). The script goes on
 * posting; the peer's transport sees it and ends. */
void sim_shm_cut_at(struct sim_net *net, int req, int side, bool abort);

/* Called by sim_new_req: cuts when request idx is the one. */
void sim_shm_cut_due(struct sim_net *net, int idx);

/* ------------------------------------------------------------------------ */
/* Set-up and teardown                                                      */
/* ------------------------------------------------------------------------ */

void sim_cq_notify(PVOID ctx, NTSTATUS st);

struct sim_buf *sim_new_buf(struct sim_net *net, size_t len, size_t lead);

/* Registers [off, off+len) of b as a normal MR of pd with NDK_MR_FLAG_* flags. */
NDK_MR *sim_reg_mr(struct sim_net *net, int s, NDK_PD *pd, struct sim_buf *b, size_t off,
                   size_t len, ULONG flags, uint32_t *token);

/* Bytes of the side's arena for one buffer: a little misaligned and apart
 * from the previous one, so placement off by a few bytes shows. */
size_t sim_alloc(struct sim_net *net, int s, size_t len);

uint64_t sim_addr(const struct sim_buf *b, size_t off);

/* NULL when an object cannot be made (what was made is closed again). */
struct sim_net *sim_net_new(const struct sim_cfg *cfg, uint64_t seed, size_t arena_len);

/* The connection is established: the data path starts on our transport, as
 * the connector would start it (A active, B passive); over the
 * shared-memory model, the two QPs are joined (a failure is a test failure). */
void sim_net_start(struct sim_net *net);

bool sim_close_obj(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn);

/* Closes every object (QPs first: they depend on the rest) and frees the
 * buffers. Both QPs must be stopped by now. */
void sim_net_free(struct sim_net *net);

/* ------------------------------------------------------------------------ */
/* Completions                                                              */
/* ------------------------------------------------------------------------ */

NDK_OPERATION_TYPE sim_kind_type(const struct sim_req *r);

/* Takes every completion the CQs hold and books it to its request. */
void sim_drain(struct sim_net *net);

/* ------------------------------------------------------------------------ */
/* Posting                                                                  */
/* ------------------------------------------------------------------------ */

/* What a post passes as pSgl when nSge is 0: a valid pointer to no SGE by
 * default; NULL when a test sets this (an empty list may be NULL, and the
 * provider must not pass it on to memcpy, which is undefined even for 0). */
extern bool sim_null_sgl;
const NDK_SGE *sim_sgl(const NDK_SGE *sge, int n);

int sim_new_req(struct sim_net *net, int s, enum sim_kind kind, ULONG flags);

/* SGEs over fresh arena bytes of the given lengths. */
ULONG sim_sges(struct sim_net *net, int s, const size_t *lens, int n, NDK_SGE *sge,
               struct sim_span *spans);

/* The bytes the spans hold now (the payload a request takes from them). */
uint8_t *sim_gather(const struct sim_span *sp, int n, size_t *total);

/* Expects payload to be scattered over the spans. */
void sim_scatter_expect(const struct sim_span *sp, int n, const uint8_t *payload, size_t len);

/* A receive into the given SGEs, whose bytes are the spans, in order (an
 * SGE of a fast registration may cover several). */
int sim_recv_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *dst,
                  int ndst);

int sim_recv(struct sim_net *net, int s, const size_t *lens, int n);

int sim_recv1(struct sim_net *net, int s, size_t len);

/* Send, Send with SE (flags), or SendAndInvalidate (inv) of the bytes of
 * the given SGEs, which are the spans src, in order. The payload lands in
 * the peer's oldest unmatched receive. */
int sim_send_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *src,
                  int nsrc, ULONG flags, bool inv, uint32_t token);

/* sim_send_sges of fresh arena bytes of the given lengths. */
int sim_send(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags, bool inv,
             uint32_t token);

int sim_send1(struct sim_net *net, int s, size_t len, ULONG flags);

/* RDMA Write of the bytes of the given SGEs (the spans src, in order) to
 * (token, raddr), which the test knows maps to tbuf at toff (tbuf NULL:
 * nothing may change, e.g. a violation). */
int sim_write_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *src,
                   int nsrc, ULONG flags, struct sim_buf *tbuf, size_t toff, uint32_t token,
                   uint64_t raddr);

/* sim_write_sges of fresh arena bytes of the given lengths. */
int sim_write(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags,
              struct sim_buf *tbuf, size_t toff, uint32_t token, uint64_t raddr);

int sim_write1(struct sim_net *net, int s, size_t len, ULONG flags, struct sim_buf *tbuf,
               size_t toff, uint32_t token, uint64_t raddr);

/* RDMA Read from (token, raddr), which maps to sbuf at soff (sbuf NULL:
 * the read must fail, its sink must not change), into the given SGEs,
 * whose bytes are the spans dst, in order. */
int sim_read_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *dst,
                  int ndst, ULONG flags, struct sim_buf *sbuf, size_t soff, uint32_t token,
                  uint64_t raddr);

/* sim_read_sges into fresh arena bytes of the given lengths. */
int sim_read(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags,
             struct sim_buf *sbuf, size_t soff, uint32_t token, uint64_t raddr);

int sim_read1(struct sim_net *net, int s, size_t len, ULONG flags, struct sim_buf *sbuf,
              size_t soff, uint32_t token, uint64_t raddr);

/* A fast-register MR of side s in pd with room for max_pages pages. */
NDK_MR *sim_frmr(struct sim_net *net, int s, NDK_PD *pd, ULONG max_pages);

/* The pages of b for a fast registration (NdkBuildLAM). */
NDK_LOGICAL_ADDRESS_MAPPING *sim_lam(struct sim_net *net, int s, struct sim_buf *b, ULONG *fbo);

/* Fast-registers len bytes of the page list from fbo at TO base; *token:
 * the remote token current once the post returned. */
int sim_fastreg_pages(struct sim_net *net, int s, NDK_MR *mr, const NDK_LOGICAL_ADDRESS *pages,
                      ULONG npages, ULONG fbo, size_t len, uint64_t base, ULONG flags, uint32_t *token);

/* Fast-registers all of b (through its LAM) at virtual base va_page + fbo.
 * *token: the new remote token; *base: the TO of b's first byte. */
int sim_fastreg(struct sim_net *net, int s, NDK_MR *mr, NDK_LOGICAL_ADDRESS_MAPPING *lam, ULONG fbo,
                struct sim_buf *b, uint64_t va_page, ULONG flags, uint32_t *token, uint64_t *base);

NDK_MW *sim_mw(struct sim_net *net, int s, NDK_PD *pd);

int sim_bind(struct sim_net *net, int s, NDK_MR *mr, NDK_MW *mw, void *va, size_t len, ULONG flags,
             uint32_t *token);

int sim_inv(struct sim_net *net, int s, NDK_OBJECT_HEADER *obj, ULONG flags);

/* ------------------------------------------------------------------------ */
/* Checks                                                                   */
/* ------------------------------------------------------------------------ */

/* A span holds exactly its expected bytes. */
bool sim_span_exact(const struct sim_span *sp);

/* Requests whose completion broke a rule; each is printed. strict: every
 * request succeeded (a clean exchange); otherwise a request may also have
 * been flushed (STATUS_CANCELLED) or, if allow_errors, failed otherwise. */
unsigned sim_check_requests(struct sim_net *net, bool strict, bool allow_errors);

/* Every buffer: canaries intact, and each byte untouched or (where a
 * request targets it) its expected value; exact: everything expected. */
unsigned sim_check_memory(struct sim_net *net, bool exact);

/* Every post returned STATUS_SUCCESS (checked). */
void sim_check_posts_ok(const struct sim_net *net);

/* A clean exchange, checked: takes the completions left (sim_drain), then
 * every request succeeded (strict) and every buffer holds exactly what it
 * should. */
void sim_check_clean(struct sim_net *net);

/* ------------------------------------------------------------------------ */
/* Wire images                                                              */
/* ------------------------------------------------------------------------ */

struct sim_fpdu {
    size_t off;          /* of its first octet in the log */
    size_t ulpdu_len;
    const uint8_t *ulpdu; /* from the DDP control octet */
    size_t total;        /* octets on the wire */
};

/* The next whole FPDU of a log at *pos; false at the end or a partial one. */
bool sim_next_fpdu(const uint8_t *log, size_t len, size_t *pos, struct sim_fpdu *f);

bool sim_is_terminate(const struct sim_fpdu *f);

/* The FPDU's pad is zero and its CRC right (or zero without CRC). */
bool sim_fpdu_trailer_ok(const struct sim_fpdu *f, bool crc);

/* Prints every Terminate on the wire, decoded: for failure reports. */
void sim_dump_terminates(const struct sim_net *net);

/* ------------------------------------------------------------------------ */
/* The scripted exchange                                                    */
/* ------------------------------------------------------------------------ */

#define SIM_A 0
#define SIM_B 1
#define SIM_FR_VA 0x40000000000ull /* fast registrations live at made-up TOs */

/* Is the remote token now refused at the side that owns it? */
bool sim_token_dead(struct sim_net *net, int s, uint32_t token);

/*
 * Every operation type, A mostly as requester and B as responder, with some
 * traffic the other way so Read Responses interleave with requests.
 * Payloads run from 0 bytes to many MULPDUs (compact: at most a few, so a
 * fault sweep can afford every byte offset). Phases end with sim_run(): like
 * a consumer that waits for a Bind's completion before handing out its
 * token. white_box: also check that invalidated tokens are dead.
 */
void sim_exchange_script(struct sim_net *net, bool compact, bool white_box);

#endif
