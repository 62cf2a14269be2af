/*
 * vcore.h - the verifier's own records (docs/verifier.md).
 *
 * Every object of a verified adapter has a struct vobj, which the
 * provider's object points at (obj->verify), and its Dispatch points at the
 * checking table of its type. The record keeps the provider's own table
 * (real), which the checking functions call.
 *
 * Locking: v->lock guards every record of the adapter. It is never held
 * while the provider or a consumer callback is called, so it orders after
 * every provider lock; reports take only the leaf report lock (report.c).
 * Records of closed objects are kept (quarantine) so that a later call
 * through a stale pointer is still recognised (rule L9), and are freed
 * with the adapter or once VOBJ_QUARANTINE newer ones closed.
 */
#ifndef NDK_VCORE_H
#define NDK_VCORE_H

#include "objects.h"
#include "verify/verify.h"

#define VOBJ_QUARANTINE 4096
#define VREQ_SUM_MAX (1u << 20) /* bytes of a Send or Write whose checksum is kept (W9) */

/* The rules the verifier reports; their words are in report.c. */
enum vrule {
    VR_L5, VR_L9, VR_L17,
    VR_C1, VR_C8,
    VR_D5,
    VR_W2, VR_W6, VR_W7, VR_W8, VR_W9, VR_W10,
    VR_N1, VR_N2, VR_N3, VR_N4, VR_X6,
    VR_M1, VR_M2, VR_M3, VR_M4, VR_M5,
    VR_COUNT
};

enum vstate { VS_OPEN, VS_CLOSING, VS_CLOSED };

/* Connector states, as derived in docs/verifier.md (NDKPI's own state
 * machine, seen from the consumer's calls and their completions). */
enum vconn {
    VC_IDLE,       /* created */
    VC_CONNECTING, /* Connect* pending */
    VC_REPLIED,    /* Connect* succeeded: GetConnectionData, CompleteConnect or Reject */
    VC_REFUSED,    /* Connect* failed: GetConnectionData still allowed (the reject's data) */
    VC_INCOMING,   /* delivered by a connect event: GetConnectionData, Accept or Reject */
    VC_COMPLETING, /* CompleteConnect or Accept pending */
    VC_CONNECTED,
    VC_REJECTED,
    VC_DISCONNECTED, /* disconnected, aborted or failed: never again (X6) */
};

struct vobj;

/* An outstanding work request, as posted. */
struct vreq {
    struct vreq *next;
    void *ctx;
    const char *call;  /* "NdkSend", ... */
    bool silent;       /* SILENT_SUCCESS: no entry when it succeeds */
    bool summed;       /* sum covers its SGEs (W9) */
    uint32_t sum;
    ULONG nsge;
    NDK_SGE sge[NDK_MAX_SGE];
    void *mr;          /* Bind, FastRegister, Invalidate: the MR (or MW) named */
    void *mw;
    struct vlam *lam;  /* FastRegister: the LAM of its pages (M2) */
};

struct vqueue {
    struct vreq *head, *tail;
    unsigned count;
    unsigned depth;
    unsigned max_sge;
    int in_call; /* atomic: posting calls running (W2) */
};

struct vqp {
    struct vobj *rcq, *icq, *srq;
    void *context;
    struct vqueue iq, rq; /* rq unused with an SRQ (the SRQ's queue) */
    struct vobj *conn;    /* the connector using it (N4) */
    bool was_connected;   /* X6 */
    uint64_t defer_since; /* first DEFER post not yet followed by one without (D5); 0: none */
    unsigned defer_count;
};

struct vconnr {
    enum vconn state;
    bool passive;
    struct vobj *qp;
    uint64_t event_ms;  /* passive: when the connect event was delivered (N3) */
    bool answered;
    /* Pending request completions, wrapped. */
    NDK_FN_REQUEST_COMPLETION connect_fn, complete_fn, disconnect_fn;
    void *connect_ctx, *complete_ctx, *disconnect_ctx;
    NDK_FN_DISCONNECT_EVENT_CALLBACK disc_fn;
    NDK_FN_DISCONNECT_EVENT_CALLBACK_EX disc_fn_ex;
    void *disc_ctx;
};

struct vcq {
    NDK_FN_CQ_NOTIFICATION_CALLBACK notify_fn;
    void *notify_ctx;
    ULONG depth;
    int in_call; /* atomic: GetCqResults[Ex] or ArmCq running (C1) */
};

struct vmr {
    bool registered;
    bool fast;
    uint32_t ltoken;          /* local token while registered */
    uintptr_t base;           /* registered range, as the MDL described it (M4) */
    size_t len;
    NDK_FN_REQUEST_COMPLETION reg_fn;
    void *reg_ctx;
};

struct vmw {
    struct vobj *bound_mr; /* MR of the latest bind not invalidated (M5) */
};

struct vlistener {
    NDK_FN_CONNECT_EVENT_CALLBACK event_fn;
    void *event_ctx;
};

struct vsrq {
    struct vqueue q;
};

struct vtype;
struct vobj {
    const struct vtype *vt;     /* its type's checking table and hooks */
    NDK_OBJECT_TYPE type;
    const void *real;           /* the provider's dispatch table */
    struct ndk_verifier *v;
    NDK_OBJECT_HEADER *pub;
    enum vstate state;
    uint32_t reported;          /* atomic: bit per enum vrule already reported */
    int calls;                  /* atomic: checking calls running on it (L5) */
    NDK_FN_CLOSE_COMPLETION close_fn;
    void *close_ctx;
    struct vobj *prev, *next;   /* v->objs (open and closing), then v->closed_* (closed) */
    union {
        struct vqp qp;
        struct vconnr conn;
        struct vcq cq;
        struct vmr mr;
        struct vmw mw;
        struct vlistener listener;
        struct vsrq srq;
    } u;
};

/* A LAM the consumer built and has not released. */
struct vlam {
    struct vlam *next;
    NDK_LOGICAL_ADDRESS_MAPPING *lam;
    uintptr_t lo, hi; /* the pages it maps: [lo, hi) */
};

struct ndk_verifier {
    struct ndk_adapter_impl *ad;
    pthread_mutex_t lock;
    struct vobj *adapter;
    struct vobj *objs;
    struct vobj *closed_head, *closed_tail; /* quarantine, oldest first */
    unsigned closed;                         /* records in it */
    struct vlam *lams;
    NDK_ADAPTER_INFO info;
    ULONG connect_event_ms, defer_ms;
    bool abort_on_report;
    /* The watchdog: time-based checks (N3, D5, M4). */
    pthread_t watchdog;
    bool watchdog_started, stop;
    pthread_cond_t cond;
};

/* The record of an object of a verified adapter: the consumer called one
 * of the checking tables, so the object is one (it may have overwritten
 * Dispatch since, which NDKPI allows: the provider's field is used). */
static inline struct vobj *vobj_of(const void *pub)
{
    return ((const struct ndk_obj *)pub)->verify;
}

/* vobj.c */
/* A record not yet bound to its object (so that callbacks given to the
 * create can be wrapped); vobj_bind frees it when pub is no live object. */
struct vobj *vobj_new(struct ndk_verifier *v, const struct vtype *t);
bool vobj_bind(struct vobj *o, void *pub);
struct vobj *vobj_attach(struct ndk_verifier *v, void *pub, const struct vtype *t);
/* Checks a call on o (rule L9); counts it running (L5). Returns false,
 * after reporting, when o was closed: the caller fails the call. */
bool vobj_enter(struct vobj *o, const char *call);
void vobj_leave(struct vobj *o);
/* NDK_FN_CLOSE_OBJECT of every checked table. */
NTSTATUS vobj_close(NDK_OBJECT_HEADER *hdr, NDK_FN_CLOSE_COMPLETION fn, void *ctx);
/* NDK_FN_QUERY_EXTENSION_INTERFACE of every checked table but the adapter's. */
NTSTATUS vobj_query_extension(NDK_OBJECT_HEADER *h, GUID *id, NDK_VERSION ver,
                              NDK_EXTENSION_INTERFACE *out);
/* The listener's connect event, wrapped: the new connector gets a record. */
void vlistener_event(void *ctx, NDK_CONNECTOR *pc);
/* Reads [p, p+len) safely into a checksum; false when it is not mapped. */
bool vsum(const NDK_SGE *sge, ULONG nsge, uint32_t *out);

/* report.c */
/* Reports rule r once per object: "ndk verifier: ID (words): CALL on TYPE
 * ADDR (adapter NAME ADDR): detail; instead: advice". */
void vreport(struct vobj *o, enum vrule r, const char *call, const char *advice, const char *fmt,
             ...) __attribute__((format(printf, 5, 6)));
/* A violation the provider answers itself: found before the call, reported
 * after it with the status the provider returned. */
struct vfinding {
    struct vobj *o; /* NULL: nothing found */
    enum vrule rule;
    const char *call, *advice;
    char detail[384];
};
void vfind(struct vfinding *f, struct vobj *o, enum vrule r, const char *call, const char *advice,
           const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void vfind_emit(const struct vfinding *f, NTSTATUS st);
const char *vtype_name(NDK_OBJECT_TYPE t);
bool vabort_wanted(const NDK_OPEN_OPTIONS *opt);

/*
 * An object type as the verifier checks it: the checking table its
 * objects' Dispatch points at, and the hooks the generic code (vobj.c,
 * vclose.c, the watchdog in vadapter.c) calls for it, each NULL when the
 * type has none (lock held for all three). Each type's file defines its
 * own, so the generic code never calls a type's file by name.
 */
struct vtype {
    NDK_OBJECT_TYPE type;
    const void *table;
    void (*closing)(struct vobj *o, const char *call); /* its close was called */
    void (*closed)(struct vobj *o);                     /* the object is gone */
    void (*watch)(struct vobj *o, uint64_t now);        /* the watchdog's look */
};
extern const struct vtype vadapter_type;                     /* vadapter.c */
extern const struct vtype vcq_type;                          /* vcq.c */
extern const struct vtype vpd_type, vmr_type, vmw_type;      /* vmem.c */
extern const struct vtype vqp_type, vsrq_type;               /* vqp.c */
extern const struct vtype vconnector_type, vlistener_type, vsep_type; /* vconn.c */

/* vqp.c: a completion retrieved from a CQ (lock held). */
void vqp_completed(struct vobj *cq, const NDK_RESULT_EX *r);
/* The real provider table of o, as type T. */
#define VREAL(o, T) ((const T *)(o)->real)

/* The body of a call the verifier only admits (vobj_enter) and hands on:
 * the real provider's answer, or `closed` when o was closed. */
#define VFORWARD(o, call, closed, expr)                                                            \
    do {                                                                                           \
        if (!vobj_enter(o, call))                                                                  \
            return closed;                                                                         \
        __typeof__(expr) r_ = (expr);                                                              \
        vobj_leave(o);                                                                             \
        return r_;                                                                                 \
    } while (0)
#define VFORWARD_VOID(o, call, expr)                                                               \
    do {                                                                                           \
        if (!vobj_enter(o, call))                                                                  \
            return;                                                                                \
        expr;                                                                                      \
        vobj_leave(o);                                                                             \
    } while (0)

#endif
