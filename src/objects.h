/* objects.h - the provider-side structures behind each NDK object, and the
 * entry points the object files call on each other. */
#ifndef NDK_OBJECTS_H
#define NDK_OBJECTS_H

#include "core.h"
#include "cqsrq.h"
#include "qp.h"
#include "shm_rendezvous.h"
#include "net/ports.h"
#include "net/tcp.h"
#include "wire/mpa.h"
#include "wire/mpa_negotiation.h"

/* ---- view.c: what the objects ask of the view they were created through ---- */
static inline struct ndk_adapter_impl *ndk_adapter_from_pub(NDK_ADAPTER *pub)
{
    struct ndk_obj *o = ndk_obj_from_pub(pub, NdkObjectTypeAdapter);
    return o ? container_of(o, struct ndk_adapter_impl, obj) : NULL;
}
/* Is addr one of the adapter's local addresses (or a wildcard)? Takes the
 * adapter lock: call without it. */
bool ndk_adapter_owns(struct ndk_adapter_impl *ad, const NDK_SOCKADDR *addr);
void ndk_adapter_fill_info(struct ndk_adapter_impl *ad, NDK_ADAPTER_INFO *info);
/* A closed view lost its last object: it is freed between loop
 * iterations. Device lock held. */
void ndk_view_retire(struct ndk_adapter_impl *view);

/* Counts a connection outcome in the view's stats (struct
 * ndk_adapter_stats): connectors and listeners on different engines count
 * at once, each under its own engine's lock. */
#define NDK_CM_STAT_INC(ad, field) __atomic_add_fetch(&(ad)->st.field, 1, __ATOMIC_RELAXED)

/* Engine internals (obj.c, engine.c). */
void ndk_drain_callbacks(struct ndk_engine *e);
void ndk_free_deferred(struct ndk_engine *e);
/* Frees what waits at once: when no engine can hold an event (obj.c). */
void ndk_free_all(struct ndk_device *dev);
/* Starts the device's engines: one per CPU of the calling thread's
 * affinity mask, at most max (0: no cap) and NDK_MAX_ENGINES, each looking
 * for input spin_us before it sleeps (net/loop.h, loop_set_spin). */
bool ndk_engines_start(struct ndk_device *dev, unsigned max, unsigned spin_us);
/* Stops and joins them (device lock not held). */
void ndk_engines_stop(struct ndk_device *dev);
void ndk_engines_free(struct ndk_device *dev);


/* ---- cq.c (struct ndk_cq_impl and the SRQ: cqsrq.h) ---- */
NTSTATUS ndk_create_cq(NDK_ADAPTER *pNdkAdapter, ULONG CqDepth,
                       NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification, PVOID CqNotificationContext,
                       GROUP_AFFINITY *Affinity, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_CQ **ppNdkCq);

/* ---- pd.c ---- */
struct ndk_pd_impl {
    struct ndk_obj obj;
    uint32_t privileged_token;
};
NTSTATUS ndk_create_pd(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                       PVOID RequestContext, NDK_PD **ppNdkPd);

/* ---- qp.c ---- */
struct ndk_connector_impl;
struct ndk_qp_impl {
    struct ndk_obj obj;
    struct ndk_pd_impl *pd;
    struct ndk_cq_impl *rcq, *icq;
    void *context;
    ULONG rq_depth, iq_depth, rq_sge, iq_sge, inline_size;
    ULONG iq_admit;                  /* InitiatorQueueDepth as asked (iq_depth, the
                                        ring, has at least one slot) */
    ULONG rq_ring;                   /* slots of the receive ring (rq_depth admits) */
    uint64_t serial;                 /* unique for the process: a window bound to this QP
                                        names it by pointer and serial, so a later QP at
                                        the same address cannot inherit it */
    struct ndk_connector_impl *conn; /* the connector using this QP, if any */
    bool used;                       /* once connected, never again (7.6 rule 7) */
    bool connected;
    struct ndk_qp_dp dp;             /* the data path (qp.h) */
};

/* Slots of a queue ring that holds depth requests: a power of two, so that
 * request i of a free-running 32-bit count sits in slot i & (size - 1)
 * across the count's wrap (2^32 is a multiple of the size; with i % depth
 * for a depth of 3, request 2^32 - 1 and request 0 of the next lap would
 * share slot 0), and the index costs no division. create_qp_common
 * admits depths up to NDK_MAX_QUEUE_DEPTH (ndk_limits.h); the bound on n
 * keeps the loop finite whatever it is given. */
static inline ULONG qp_ring_slots(ULONG depth)
{
    ULONG n = 1;
    while (n < depth && n < 0x80000000u)
        n <<= 1;
    return n;
}

/* The initiator-queue slot of the i-th request ever posted (the counters
 * run free and wrap at 2^32; iq_depth is qp_ring_slots'). Here beside the
 * QP, not in a .c file: the statistics reader (stat.c) and every posting
 * and completing file use it. */
static inline uint32_t qp_sq_idx(const struct ndk_qp_impl *qp, uint32_t i)
{
    return i & (qp->iq_depth - 1);
}

/* The slot of receive i (rq_ring is qp_ring_slots'). */
static inline uint32_t qp_rq_idx(const struct ndk_qp_impl *qp, uint32_t i)
{
    return i & (qp->rq_ring - 1);
}

NTSTATUS ndk_create_qp(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq, PVOID QPContext,
                       ULONG ReceiveQueueDepth, ULONG InitiatorQueueDepth, ULONG MaxReceiveRequestSge,
                       ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                       NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                       NDK_QP **ppNdkQp);
NTSTATUS ndk_create_qp_with_srq(NDK_PD *pNdkPd, NDK_CQ *pReceiveCq, NDK_CQ *pInitiatorCq,
                                NDK_SRQ *pSrq, PVOID QPContext, ULONG InitiatorQueueDepth,
                                ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                NDK_FN_CREATE_COMPLETION CreateCompletion, PVOID RequestContext,
                                NDK_QP **ppNdkQp);

/* ---- endpoint.c (shared endpoints) ---- */
struct ndk_sep_impl {
    struct ndk_obj obj;
    struct port_res *port;
    NDK_SOCKADDR local;
    int holder_fd; /* keeps the port bound against other sockets */
    struct ndk_connector_impl *conns; /* connectors over it, for 4-tuple checks */
};
NTSTATUS ndk_create_shared_endpoint(NDK_ADAPTER *pNdkAdapter, CONST PSOCKADDR pAddress,
                                    ULONG AddressLength, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                    PVOID RequestContext, NDK_SHARED_ENDPOINT **ppNdkSharedEndpoint);

/* ---- listener.c ---- */
struct ndk_listener_impl {
    struct ndk_obj obj;
    NDK_FN_CONNECT_EVENT_CALLBACK connect_event;
    void *connect_ctx;
    int fd;
    struct loop_watch watch;
    struct loop_timer accept_retry; /* accepting paused: out of descriptors */
    struct port_res *port;
    NDK_SOCKADDR local;
    bool listening;
    bool paused;
    unsigned backlog_used; /* delivered, not yet accepted/rejected/closed */
    struct watched_set halfopen; /* accepted, their MPA Request not read yet */
    struct shm_rv_listen shm; /* the same-host rendezvous (shm_rendezvous.h) */
};
NTSTATUS ndk_create_listener(NDK_ADAPTER *pNdkAdapter, NDK_FN_CONNECT_EVENT_CALLBACK ConnectEvent,
                             PVOID ConnectEventContext, NDK_FN_CREATE_COMPLETION CreateCompletion,
                             PVOID RequestContext, NDK_LISTENER **ppNdkListener);

/* ---- connector.c ---- */
enum conn_state {
    CONN_IDLE,        /* created, nothing done */
    CONN_TCP,         /* active: TCP handshake in progress */
    CONN_MPA_REPLY,   /* active: Request sent, waiting for the Reply */
    CONN_REPLIED,     /* active: Connect succeeded, CompleteConnect/Reject next */
    CONN_SHM_RV,      /* active: CompleteConnect pends on the same-host rendezvous */
    CONN_INCOMING,    /* passive: delivered by the connect event */
    CONN_ACCEPTING,   /* passive: Reply sent, waiting for the RTR */
    CONN_CONNECTED,   /* established */
    CONN_DISCONNECTING,
    CONN_DEAD,        /* terminal: disconnected, refused, rejected, aborted */
};

struct ndk_connector_impl {
    struct ndk_obj obj;
    enum conn_state state;
    bool passive;
    int fd;
    struct loop_watch watch;
    struct loop_timer timer;
    struct ndk_qp_impl *qp;             /* antecedent once associated */
    struct ndk_listener_impl *listener; /* passive: antecedent */
    struct ndk_sep_impl *sep;           /* shared endpoint: antecedent */
    struct ndk_connector_impl *sep_next;
    struct port_res *port;              /* local endpoint reference */
    NDK_SOCKADDR local, peer;
    bool in_backlog;
    /* passive: registered by the listener, called once when the connector
     * leaves its backlog (accepted, rejected or closed) */
    void (*backlog_left)(struct ndk_listener_impl *l);

    /* MPA negotiation (wire/mpa_negotiation.h) */
    struct mpa_neg neg;
    uint8_t *peer_pd;            /* private data the peer sent (connect/accept/reject) */
    ULONG peer_pd_len;
    bool pd_window_open;         /* GetConnectionData allowed */
    const uint8_t *tx;           /* startup frame not yet fully written (in neg's output) */
    size_t tx_len, tx_off;

    /* requests and events */
    struct ndk_req connect_req, complete_req, accept_req, disconnect_req;
    NDK_FN_DISCONNECT_EVENT_CALLBACK disc_fn;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disc_fn_ex;
    void *disc_ctx;
    struct ndk_cb disc_event;
    struct ndk_cb connect_event; /* passive: the listener's connect event */
    bool disc_event_done;       /* delivered or suppressed: at most once (X3) */
    bool local_disconnect;      /* NdkDisconnect called */
    bool peer_fin, peer_gone;   /* FIN seen / RST or error seen */
    bool fin_sent;

    /* The data path's view of the socket (qp.h), once established. */
    struct ndk_transport tr;
    bool dp_started;
    /* The QP the data path started on: set once, before socket events go
     * to conn_dp_unlocked (unlike qp, never cleared while one may run). */
    struct ndk_qp_impl *dp_qp;
    bool qp_start_failed;       /* no memory for the QP's read queues: reset at once */
    bool term_draining;         /* the QP failed; its Terminate is still going out */
    unsigned nudge_next;        /* index of the next nudge (ndk_qp_nudge) in connector.c's schedule */
    pthread_mutex_t mask_lock;  /* leaf: the epoll mask, changed by posting threads too */
    uint32_t base_events;
    bool want_out;
    bool input_leased; /* a busy poller reads the socket: no EPOLLIN */
    bool input_paused; /* the QP waits for a receive: no EPOLLIN, no EPOLLRDHUP */

    /* The same-host fast path (docs/shm.md, Selection): the rendezvous,
     * and whether the QP runs over shared memory, TCP staying the control
     * channel (its FIN, its reset). */
    struct shm_rv rv;
    bool shm;
};

NTSTATUS ndk_create_connector(NDK_ADAPTER *pNdkAdapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                              PVOID RequestContext, NDK_CONNECTOR **ppNdkConnector);
/* Listener hands over an accepted TCP socket whose MPA Request neg read;
 * registered is the socket's watch in the listener's loop, which the
 * connector takes over (watched_fd_hand_over). On NULL the registration
 * is still there: the caller closes fd. */
struct ndk_connector_impl *ndk_connector_new_passive(struct ndk_listener_impl *l, int fd,
                                                     struct loop_watch *registered,
                                                     const NDK_SOCKADDR *local,
                                                     const NDK_SOCKADDR *peer,
                                                     const struct mpa_neg *neg);
/* Destroys a passive connector the consumer never saw (listener closing or
 * paused when its event came up). */
void ndk_connector_drop_undelivered(struct ndk_connector_impl *c);

extern const NDK_CONNECTOR_DISPATCH ndk_connector_dispatch;

#endif
