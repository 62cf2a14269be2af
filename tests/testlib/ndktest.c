#include "ndktest.h"

#include "rawpeer.h"

_Atomic int nt_cb_failures;
static nt_op nt_ops_default[NT_MAX_OPS];
static nt_op *nt_ops = nt_ops_default;
static unsigned nt_ops_cap = NT_MAX_OPS;
/* Atomic: callbacks allocate ops too (calls made from inside callbacks). */
static _Atomic unsigned nt_nops;
static _Atomic unsigned nt_seq_ctr = 1;
NDK_ADAPTER *nt_adapters[NT_MAX_ADAPTERS];
static nt_lsn nt_lsns[NT_MAX_LSN];
static unsigned nt_nlsns;
static const char *nt_case_name;

const char *nt_st(NTSTATUS s)
{
    return s == NT_NO_COMPLETION ? "(no completion within the bound)" : ndk_status_name(s);
}

uint64_t nt_ms_since(uint64_t t0_ns)
{
    return (tl_now_ns() - t0_ns) / 1000000u;
}

unsigned nt_next_seq(void)
{
    return atomic_fetch_add(&nt_seq_ctr, 1);
}

void nt_ops_reserve(unsigned n)
{
    if (n <= nt_ops_cap)
        return;
    if (atomic_load(&nt_nops) != 0) {
        fprintf(stderr, "ndktest: nt_ops_reserve after the first call\n");
        abort();
    }
    nt_op *p = malloc((size_t)n * sizeof *p);
    if (!p) {
        fprintf(stderr, "ndktest: no memory for %u call records\n", n);
        abort();
    }
    /* Not a zero fill: the compiler may fold malloc and a zero memset into
     * calloc, whose fresh pages stay untouched. nt_op_new clears a record. */
    memset(p, 0xA5, (size_t)n * sizeof *p);
    nt_ops = p; /* kept until exit: a late callback may still name a record */
    nt_ops_cap = n;
}

unsigned nt_ops_left(void)
{
    unsigned used = atomic_load(&nt_nops);
    return used < nt_ops_cap ? nt_ops_cap - used : 0;
}

nt_op *nt_op_new(nt_kind kind, const char *what)
{
    unsigned i = atomic_fetch_add(&nt_nops, 1);
    if (i >= nt_ops_cap) {
        fprintf(stderr, "ndktest: out of ops\n");
        abort();
    }
    nt_op *op = &nt_ops[i];
    memset(op, 0, sizeof *op);
    tl_event_init(&op->ev);
    op->kind = kind;
    op->what = what;
    return op;
}

unsigned nt_count(nt_op *op)
{
    return tl_event_count(&op->ev);
}

void nt_op_fire(nt_op *op)
{
    unsigned zero = 0;
    unsigned s = nt_next_seq();
    atomic_compare_exchange_strong(&op->seq, &zero, s);
}

/* The last steps of every callback: the case's hook, then the signal its
 * waiters wait for (after what the callback stored, so a waiter sees it). */
static void nt_op_finish_cb(nt_op *op, NTSTATUS status)
{
    if (op->hook)
        op->hook(op, status);
    tl_event_signal(&op->ev);
}

void nt_req_cb(PVOID ctx, NTSTATUS status)
{
    nt_op *op = ctx;
    nt_op_fire(op);
    atomic_store(&op->status, status);
    nt_op_finish_cb(op, status);
}

void nt_create_cb(PVOID ctx, NTSTATUS status, NDK_OBJECT_HEADER *obj)
{
    nt_op *op = ctx;
    nt_op_fire(op);
    atomic_store(&op->status, status);
    atomic_store(&op->obj, obj);
    nt_op_finish_cb(op, status);
}

void nt_close_cb(PVOID ctx)
{
    nt_op *op = ctx;
    nt_op_fire(op);
    nt_op_finish_cb(op, STATUS_SUCCESS);
}

void nt_disc_cb(PVOID ctx)
{
    nt_op *op = ctx;
    nt_op_fire(op);
    nt_op_finish_cb(op, STATUS_SUCCESS);
}

void nt_disc_ex_cb(PVOID ctx, ULONG reason)
{
    nt_op *op = ctx;
    nt_op_fire(op);
    atomic_store(&op->reason, reason);
    atomic_store(&op->ex_called, 1);
    nt_op_finish_cb(op, STATUS_SUCCESS);
}

NTSTATUS nt_started(nt_op *op, NTSTATUS returned)
{
    op->started = true;
    op->returned = returned;
    return returned;
}

NTSTATUS nt_finish(nt_op *op, unsigned ms)
{
    if (op->returned != STATUS_PENDING) {
        if (nt_count(op) != 0) {
            tl_failures++;
            fprintf(stderr, "[%s] %s returned %s but its completion callback ran\n",
                    tl_current ? tl_current : "-", op->what, ndk_status_name(op->returned));
        }
        return op->returned;
    }
    if (!tl_event_wait(&op->ev, 1, ms)) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: no completion within %u ms\n", tl_current ? tl_current : "-",
                op->what, ms);
        return STATUS_PENDING;
    }
    return atomic_load(&op->status);
}

bool nt_done(nt_op *op)
{
    return op->started && (op->returned != STATUS_PENDING || nt_count(op) > 0);
}

NDK_OPEN_OPTIONS nt_opts_ms(ULONG ms)
{
    NDK_OPEN_OPTIONS o;
    memset(&o, 0, sizeof o);
    o.Size = sizeof o;
    o.TcpConnectTimeoutMs = ms;
    o.MpaReplyTimeoutMs = ms;
    o.MpaRequestTimeoutMs = ms;
    o.RtrTimeoutMs = ms;
    o.DisconnectTimeoutMs = ms;
    return o;
}

NDK_OPEN_OPTIONS nt_opts(void)
{
    return nt_opts_ms(4000);
}

NTSTATUS nt_open(const char *name, NDK_VERSION v, const NDK_OPEN_OPTIONS *o,
                 NDK_ADAPTER **out)
{
    NDK_ADAPTER *ad = NULL;
    NTSTATUS st = ndk_open_adapter(name, v, o, &ad);
    if (st == STATUS_SUCCESS) {
        for (unsigned i = 0; i < NT_MAX_ADAPTERS; i++) {
            if (!nt_adapters[i]) {
                nt_adapters[i] = ad;
                break;
            }
        }
    }
    *out = st == STATUS_SUCCESS ? ad : NULL;
    return st;
}

void nt_close_adapter(NDK_ADAPTER *ad)
{
    if (!ad)
        return;
    for (unsigned i = 0; i < NT_MAX_ADAPTERS; i++)
        if (nt_adapters[i] == ad)
            nt_adapters[i] = NULL;
    ndk_close_adapter(ad);
}

NTSTATUS nt_query_info(NDK_ADAPTER *ad, NDK_ADAPTER_INFO *info)
{
    ULONG size = sizeof *info;
    memset(info, 0, sizeof *info);
    return ad->Dispatch->NdkQueryAdapterInfo(ad, info, &size);
}

NTSTATUS nt_created(nt_op *op, NTSTATUS st, void **pp, void *inline_obj)
{
    nt_started(op, st);
    if (st == STATUS_PENDING) {
        NTSTATUS fin = nt_finish(op, NT_WAIT_MS);
        *pp = fin == STATUS_SUCCESS ? (void *)atomic_load(&op->obj) : NULL;
        if (fin == STATUS_SUCCESS && !*pp) {
            tl_failures++;
            fprintf(stderr, "[%s] %s: create completion without an object\n",
                    tl_current ? tl_current : "-", op->what);
        }
        return fin;
    }
    nt_finish(op, 0); /* checks that the completion did not run */
    *pp = st == STATUS_SUCCESS ? inline_obj : NULL;
    if (st == STATUS_SUCCESS && !inline_obj) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: STATUS_SUCCESS without an object\n", tl_current ? tl_current : "-",
                op->what);
    }
    return st;
}

/* The end of each nt_create_* function: the object (made inline, or
 * delivered by the completion) into *out, and the final status returned.
 * A macro because *out has the object's own pointer type. */
#define NT_RETURN_CREATED(op, st, inline_obj, out)                                           \
    do {                                                                                     \
        void *created_ = NULL;                                                               \
        NTSTATUS final_ = nt_created((op), (st), &created_, (inline_obj));                   \
        *(out) = created_;                                                                   \
        return final_;                                                                       \
    } while (0)

void nt_cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx;
    (void)st;
}

NTSTATUS nt_create_cq(NDK_ADAPTER *ad, ULONG depth, NDK_CQ **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateCq");
    NDK_CQ *cq = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, depth, nt_cq_notify, NULL, NULL, nt_create_cb, op,
                                            &cq);
    NT_RETURN_CREATED(op, st, cq, out);
}

NTSTATUS nt_create_pd(NDK_ADAPTER *ad, NDK_PD **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreatePd");
    NDK_PD *pd = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreatePd(ad, nt_create_cb, op, &pd);
    NT_RETURN_CREATED(op, st, pd, out);
}

NTSTATUS nt_create_qp(NDK_PD *pd, NDK_CQ *cq, ULONG rq, ULONG iq, ULONG rsge,
                      ULONG isge, ULONG inl, NDK_QP **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateQp");
    NDK_QP *qp = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateQp(pd, cq, cq, NULL, rq, iq, rsge, isge, inl,
                                            nt_create_cb, op, &qp);
    NT_RETURN_CREATED(op, st, qp, out);
}

NTSTATUS nt_create_mr(NDK_PD *pd, BOOLEAN fast, NDK_MR **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateMr");
    NDK_MR *mr = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateMr(pd, fast, nt_create_cb, op, &mr);
    NT_RETURN_CREATED(op, st, mr, out);
}

NTSTATUS nt_create_mw(NDK_PD *pd, NDK_MW **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateMw");
    NDK_MW *mw = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateMw(pd, nt_create_cb, op, &mw);
    NT_RETURN_CREATED(op, st, mw, out);
}

NTSTATUS nt_create_srq(NDK_PD *pd, ULONG depth, NDK_SRQ **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateSrq");
    NDK_SRQ *srq = NULL;
    NTSTATUS st = pd->Dispatch->NdkCreateSrq(pd, depth, 1, 0, NULL, NULL, NULL, nt_create_cb, op,
                                             &srq);
    NT_RETURN_CREATED(op, st, srq, out);
}

NTSTATUS nt_create_connector(NDK_ADAPTER *ad, NDK_CONNECTOR **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateConnector");
    NDK_CONNECTOR *c = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateConnector(ad, nt_create_cb, op, &c);
    NT_RETURN_CREATED(op, st, c, out);
}

NTSTATUS nt_create_listener(NDK_ADAPTER *ad, NDK_FN_CONNECT_EVENT_CALLBACK ev,
                            void *ctx, NDK_LISTENER **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateListener");
    NDK_LISTENER *l = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateListener(ad, ev, ctx, nt_create_cb, op, &l);
    NT_RETURN_CREATED(op, st, l, out);
}

NTSTATUS nt_create_sep(NDK_ADAPTER *ad, const NDK_SOCKADDR *sa, ULONG len,
                       NDK_SHARED_ENDPOINT **out)
{
    nt_op *op = nt_op_new(NT_CREATE, "NdkCreateSharedEndpoint");
    NDK_SHARED_ENDPOINT *e = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateSharedEndpoint(ad, (PSOCKADDR)&sa->sa, len, nt_create_cb,
                                                        op, &e);
    NT_RETURN_CREATED(op, st, e, out);
}

NDK_FN_CLOSE_OBJECT nt_close_fn(void *obj)
{
    NDK_OBJECT_HEADER *h = obj;
    switch (h->ObjectType) {
    case NdkObjectTypeQp: return ((NDK_QP *)obj)->Dispatch->NdkCloseQp;
    case NdkObjectTypeCq: return ((NDK_CQ *)obj)->Dispatch->NdkCloseCq;
    case NdkObjectTypeMr: return ((NDK_MR *)obj)->Dispatch->NdkCloseMr;
    case NdkObjectTypeMw: return ((NDK_MW *)obj)->Dispatch->NdkCloseMw;
    case NdkObjectTypePd: return ((NDK_PD *)obj)->Dispatch->NdkClosePd;
    case NdkObjectTypeSharedEndpoint:
        return ((NDK_SHARED_ENDPOINT *)obj)->Dispatch->NdkCloseSharedEndpoint;
    case NdkObjectTypeConnector: return ((NDK_CONNECTOR *)obj)->Dispatch->NdkCloseConnector;
    case NdkObjectTypeListener: return ((NDK_LISTENER *)obj)->Dispatch->NdkCloseListener;
    case NdkObjectTypeSrq: return ((NDK_SRQ *)obj)->Dispatch->NdkCloseSrq;
    default: return NULL;
    }
}

nt_op *nt_close_start_hook(void *obj, nt_hook hook, void *u1)
{
    nt_op *op = nt_op_new(NT_CLOSE, "NdkCloseXxx");
    op->hook = hook;
    op->u1 = u1;
    NDK_FN_CLOSE_OBJECT fn = nt_close_fn(obj);
    if (!fn) {
        tl_failures++;
        fprintf(stderr, "[%s] no close function for object type %d\n",
                tl_current ? tl_current : "-", (int)((NDK_OBJECT_HEADER *)obj)->ObjectType);
        return op;
    }
    NTSTATUS st = fn((NDK_OBJECT_HEADER *)obj, nt_close_cb, op);
    nt_started(op, st);
    /* A close never fails (L15). */
    if (st != STATUS_SUCCESS && st != STATUS_PENDING) {
        tl_failures++;
        fprintf(stderr, "[%s] close returned %s (only SUCCESS or PENDING allowed)\n",
                tl_current ? tl_current : "-", ndk_status_name(st));
    }
    return op;
}

nt_op *nt_close_start(void *obj)
{
    return nt_close_start_hook(obj, NULL, NULL);
}

bool nt_close_wait(nt_op *op, unsigned ms)
{
    if (!op->started)
        return false;
    NTSTATUS st = nt_finish(op, ms);
    return st == STATUS_SUCCESS;
}

void nt_close(void *obj)
{
    if (!obj)
        return;
    nt_op *op = nt_close_start(obj);
    nt_close_wait(op, NT_WAIT_MS);
}

ULONG nt_sa_len(int fam)
{
    return fam == AF_INET6 ? (ULONG)sizeof(struct sockaddr_in6) : (ULONG)sizeof(struct sockaddr_in);
}

ULONG nt_sa_loop(int fam, unsigned port, NDK_SOCKADDR *sa)
{
    memset(sa, 0, sizeof *sa);
    if (fam == AF_INET6) {
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_addr = in6addr_loopback;
        sa->in6.sin6_port = htons((uint16_t)port);
    } else {
        sa->in4.sin_family = AF_INET;
        sa->in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sa->in4.sin_port = htons((uint16_t)port);
    }
    return nt_sa_len(fam);
}

unsigned nt_sa_port(const NDK_SOCKADDR *sa)
{
    return sa->sa.sa_family == AF_INET6 ? ntohs(sa->in6.sin6_port) : ntohs(sa->in4.sin_port);
}

void nt_sa_set_port(NDK_SOCKADDR *sa, unsigned port)
{
    if (sa->sa.sa_family == AF_INET6)
        sa->in6.sin6_port = htons((uint16_t)port);
    else
        sa->in4.sin_port = htons((uint16_t)port);
}

bool nt_desc_has_loop(const NDK_ADAPTER_DESCRIPTION *d, int fam)
{
    NDK_SOCKADDR want;
    nt_sa_loop(fam, 0, &want);
    for (ULONG i = 0; i < d->AddressCount && i < NDK_MAX_ADAPTER_ADDRESSES; i++)
        if (nt_sa_eq(&d->Addresses[i], &want))
            return true;
    return false;
}

bool nt_sa_eq(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
{
    if (a->sa.sa_family != b->sa.sa_family)
        return false;
    if (a->sa.sa_family == AF_INET6)
        return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr, 16) == 0 &&
               a->in6.sin6_port == b->in6.sin6_port;
    if (a->sa.sa_family == AF_INET)
        return a->in4.sin_addr.s_addr == b->in4.sin_addr.s_addr &&
               a->in4.sin_port == b->in4.sin_port;
    return false;
}

const char *nt_sa_str(const NDK_SOCKADDR *sa, char *buf, size_t n)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa.sa_family == AF_INET6)
        inet_ntop(AF_INET6, &sa->in6.sin6_addr, ip, sizeof ip);
    else if (sa->sa.sa_family == AF_INET)
        inet_ntop(AF_INET, &sa->in4.sin_addr, ip, sizeof ip);
    snprintf(buf, n, "[%s]:%u (family %d)", ip, nt_sa_port(sa), sa->sa.sa_family);
    return buf;
}

const char *nt_fam_name(int fam)
{
    return fam == AF_INET6 ? "IPv6" : "IPv4";
}

bool nt_raw_listen(nt_raw *r, int fam)
{
    r->cfd = -1;
    r->len = nt_sa_loop(fam, 0, &r->addr);
    socklen_t sl = r->len;
    r->lfd = rp_listen_sa(&r->addr.sa, &sl);
    return r->lfd >= 0;
}

bool nt_raw_accept(nt_raw *r, unsigned ms)
{
    r->cfd = rp_accept(r->lfd, ms);
    return r->cfd >= 0;
}

ssize_t nt_raw_read(nt_raw *r, void *buf, size_t n, unsigned ms)
{
    struct pollfd p = {.fd = r->cfd, .events = POLLIN};
    if (poll(&p, 1, (int)ms) != 1)
        return -1;
    return recv(r->cfd, buf, n, 0);
}

void nt_raw_close(nt_raw *r)
{
    if (r->cfd >= 0)
        close(r->cfd);
    if (r->lfd >= 0)
        close(r->lfd);
    r->cfd = r->lfd = -1;
}

int nt_dead_port(int fam, NDK_SOCKADDR *sa, ULONG *len)
{
    int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    *len = nt_sa_loop(fam, 0, sa);
    socklen_t sl = *len;
    if (bind(fd, &sa->sa, *len) != 0 || getsockname(fd, &sa->sa, &sl) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

bool nt_side_open(nt_side *s, const NDK_OPEN_OPTIONS *o)
{
    memset(s, 0, sizeof *s);
    NTSTATUS st = nt_open("lo", (NDK_VERSION){2, 1}, o, &s->ad);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    st = nt_query_info(s->ad, &s->info);
    CHECK_STATUS(st, STATUS_SUCCESS);
    st = nt_create_cq(s->ad, 64, &s->cq);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    st = nt_create_pd(s->ad, &s->pd);
    CHECK_STATUS(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

void nt_side_close(nt_side *s)
{
    nt_close(s->pd);
    nt_close(s->cq);
    nt_close_adapter(s->ad);
    s->pd = NULL;
    s->cq = NULL;
    s->ad = NULL;
}

NDK_QP *nt_qp(nt_side *s)
{
    NDK_QP *qp = NULL;
    NTSTATUS st = nt_create_qp(s->pd, s->cq, 8, 8, 1, 1, 0, &qp);
    CHECK_STATUS(st, STATUS_SUCCESS);
    return qp;
}

NDK_CONNECTOR *nt_connector(nt_side *s)
{
    NDK_CONNECTOR *c = NULL;
    NTSTATUS st = nt_create_connector(s->ad, &c);
    CHECK_STATUS(st, STATUS_SUCCESS);
    return c;
}

void nt_connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    nt_lsn *L = ctx;
    unsigned s = nt_next_seq();
    atomic_fetch_add(&L->in_event, 1);
    pthread_mutex_lock(&L->mu);
    unsigned idx = L->n;
    if (idx < NT_MAX_INCOMING) {
        L->conn[idx] = c;
        L->seq[idx] = s;
        L->n++;
    }
    nt_lsn_hook hook = L->hook;
    pthread_mutex_unlock(&L->mu);
    NT_CB_CHECK(c != NULL);
    NT_CB_CHECK(idx < NT_MAX_INCOMING);
    if (hook && idx < NT_MAX_INCOMING)
        hook(L, c, idx);
    atomic_fetch_sub(&L->in_event, 1);
    tl_event_signal(&L->ev);
}

void nt_lsn_set_hook(nt_lsn *L, nt_lsn_hook hook, void *user)
{
    pthread_mutex_lock(&L->mu);
    L->hook = hook;
    L->user = user;
    pthread_mutex_unlock(&L->mu);
}

unsigned nt_lsn_count(nt_lsn *L)
{
    pthread_mutex_lock(&L->mu);
    unsigned n = L->n;
    pthread_mutex_unlock(&L->mu);
    return n;
}

NDK_CONNECTOR *nt_incoming(nt_lsn *L, unsigned idx, unsigned ms)
{
    if (!tl_event_wait(&L->ev, idx + 1, ms)) {
        tl_failures++;
        fprintf(stderr, "[%s] connect event #%u not delivered within %u ms\n",
                tl_current ? tl_current : "-", idx + 1, ms);
        return NULL;
    }
    pthread_mutex_lock(&L->mu);
    NDK_CONNECTOR *c = L->conn[idx];
    pthread_mutex_unlock(&L->mu);
    return c;
}

nt_lsn *nt_lsn_new(void)
{
    nt_lsn *L = tl_take_record(nt_lsns, sizeof *L, &nt_nlsns, NT_MAX_LSN, "ndktest's listener records");
    pthread_mutex_init(&L->mu, NULL);
    tl_event_init(&L->ev);
    return L;
}

NTSTATUS nt_listen_at(NDK_LISTENER *l, const NDK_SOCKADDR *sa, ULONG len)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkListen");
    nt_started(op, l->Dispatch->NdkListen(l, (PSOCKADDR)&sa->sa, len, nt_req_cb, op));
    return nt_finish(op, NT_WAIT_MS);
}

NTSTATUS nt_listen_try(nt_side *s, int fam, unsigned port, nt_lsn **out)
{
    *out = NULL;
    nt_lsn *L = nt_lsn_new();
    NTSTATUS st = nt_create_listener(s->ad, nt_connect_event, L, &L->l);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return st;
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(fam, port, &sa);
    st = nt_listen_at(L->l, &sa, len);
    if (st != STATUS_SUCCESS) {
        nt_close(L->l);
        L->l = NULL;
        return st;
    }
    L->addrlen = sizeof L->addr;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, &L->addr.sa, &L->addrlen),
                 STATUS_SUCCESS);
    *out = L;
    return st;
}

nt_lsn *nt_listen_on(nt_side *s, int fam, unsigned port)
{
    nt_lsn *L;
    CHECK_STATUS(nt_listen_try(s, fam, port, &L), STATUS_SUCCESS);
    if (!L)
        return NULL;
    CHECK_EQ(L->addrlen, nt_sa_len(fam));
    CHECK_EQ(L->addr.sa.sa_family, fam);
    CHECK(nt_sa_port(&L->addr) != 0);
    return L;
}

nt_lsn *nt_listen(nt_side *s, int fam)
{
    return nt_listen_on(s, fam, 0);
}

bool nt_pair_open(nt_side *as, nt_side *ps, nt_lsn **L, int fam)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    *L = NULL;
    if (!nt_side_open(as, &o))
        return false;
    if (!nt_side_open(ps, &o)) {
        nt_side_close(as);
        return false;
    }
    *L = nt_listen(ps, fam);
    if (!*L) {
        nt_side_close(ps);
        nt_side_close(as);
        return false;
    }
    return true;
}

void nt_pair_close(nt_side *as, nt_side *ps, nt_lsn *L)
{
    nt_lsn_close(L);
    nt_side_close(as);
    nt_side_close(ps);
}

void nt_lsn_close(nt_lsn *L)
{
    if (L && L->l) {
        nt_close(L->l);
        L->l = NULL;
    }
}

bool nt_conn_init(nt_conn *c, int fam, nt_side *as, nt_side *ps, nt_lsn *L)
{
    memset(c, 0, sizeof *c);
    c->fam = fam;
    c->as = as;
    c->ps = ps;
    c->L = L;
    c->dev_a = nt_op_new(NT_DISC, "active disconnect event");
    c->dev_p = nt_op_new(NT_DISC, "passive disconnect event");
    c->qa = nt_qp(as);
    c->qp = nt_qp(ps);
    c->a = nt_connector(as);
    return c->qa && c->qp && c->a;
}

NTSTATUS nt_conn_connect_to(nt_conn *c, const NDK_SOCKADDR *dst, ULONG dstlen,
                            ULONG ird, ULONG ord, const void *pd, ULONG pdlen)
{
    NDK_SOCKADDR src;
    ULONG srclen = nt_sa_loop(c->fam, 0, &src);
    c->connect = nt_op_new(NT_REQ, "NdkConnect");
    c->connect->hook = c->h_connect;
    c->connect->u1 = c;
    return nt_started(c->connect,
                      c->a->Dispatch->NdkConnect(c->a, c->qa, &src.sa, srclen, (PSOCKADDR)&dst->sa,
                                                 dstlen, ird, ord, (PVOID)pd, pdlen, nt_req_cb,
                                                 c->connect));
}

NTSTATUS nt_conn_connect(nt_conn *c, ULONG ird, ULONG ord, const void *pd,
                         ULONG pdlen)
{
    return nt_conn_connect_to(c, &c->L->addr, c->L->addrlen, ird, ord, pd, pdlen);
}

NTSTATUS nt_conn_connect_sep_to(nt_conn *c, NDK_SHARED_ENDPOINT *sep,
                                const NDK_SOCKADDR *dst, ULONG dstlen, ULONG ird,
                                ULONG ord, const void *pd, ULONG pdlen)
{
    c->connect = nt_op_new(NT_REQ, "NdkConnectWithSharedEndpoint");
    c->connect->hook = c->h_connect;
    c->connect->u1 = c;
    return nt_started(c->connect, c->a->Dispatch->NdkConnectWithSharedEndpoint(
                                      c->a, c->qa, sep, (PSOCKADDR)&dst->sa, dstlen, ird, ord,
                                      (PVOID)pd, pdlen, nt_req_cb, c->connect));
}

NTSTATUS nt_conn_connect_sep(nt_conn *c, NDK_SHARED_ENDPOINT *sep, ULONG ird,
                             ULONG ord, const void *pd, ULONG pdlen)
{
    return nt_conn_connect_sep_to(c, sep, &c->L->addr, c->L->addrlen, ird, ord, pd, pdlen);
}

NTSTATUS nt_conn_accept(nt_conn *c, ULONG ird, ULONG ord, const void *pd,
                        ULONG pdlen)
{
    c->accept = nt_op_new(NT_REQ, c->ex ? "NdkAcceptEx" : "NdkAccept");
    c->accept->hook = c->h_accept;
    c->accept->u1 = c;
    NTSTATUS st;
    if (c->ex)
        st = c->p->Dispatch->NdkAcceptEx(c->p, c->qp, ird, ord, (PVOID)pd, pdlen, nt_disc_ex_cb,
                                         c->dev_p, nt_req_cb, c->accept);
    else
        st = c->p->Dispatch->NdkAccept(c->p, c->qp, ird, ord, (PVOID)pd, pdlen, nt_disc_cb,
                                       c->dev_p, nt_req_cb, c->accept);
    return nt_started(c->accept, st);
}

NTSTATUS nt_conn_complete(nt_conn *c)
{
    c->complete = nt_op_new(NT_REQ, c->ex ? "NdkCompleteConnectEx" : "NdkCompleteConnect");
    c->complete->hook = c->h_complete;
    c->complete->u1 = c;
    NTSTATUS st;
    if (c->ex)
        st = c->a->Dispatch->NdkCompleteConnectEx(c->a, nt_disc_ex_cb, c->dev_a, nt_req_cb,
                                                  c->complete);
    else
        st = c->a->Dispatch->NdkCompleteConnect(c->a, nt_disc_cb, c->dev_a, nt_req_cb,
                                                c->complete);
    return nt_started(c->complete, st);
}

bool nt_establish_via(nt_conn *c, NDK_SHARED_ENDPOINT *sep)
{
    unsigned idx = nt_lsn_count(c->L);
    if (sep)
        nt_conn_connect_sep(c, sep, 8, 8, NULL, 0);
    else
        nt_conn_connect(c, 8, 8, NULL, 0);
    if (nt_done(c->connect)) {
        CHECK_STATUS(nt_finish(c->connect, 0), STATUS_PENDING);
        return false;
    }
    c->p = nt_incoming(c->L, idx, NT_WAIT_MS);
    if (!c->p)
        return false;
    nt_conn_accept(c, 8, 8, NULL, 0);
    NTSTATUS st = nt_finish(c->connect, NT_WAIT_MS);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    nt_conn_complete(c);
    st = nt_finish(c->complete, NT_WAIT_MS);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return false;
    st = nt_finish(c->accept, NT_WAIT_MS);
    CHECK_STATUS(st, STATUS_SUCCESS);
    return st == STATUS_SUCCESS;
}

bool nt_conn_deliver(nt_conn *c, ULONG ird, ULONG ord)
{
    nt_conn_connect(c, ird, ord, NULL, 0);
    c->p = nt_incoming(c->L, 0, NT_WAIT_MS);
    return c->p != NULL;
}

bool nt_establish(nt_conn *c)
{
    return nt_establish_via(c, NULL);
}

void nt_close_last(void *obj, nt_op *const *ops, unsigned n)
{
    if (!obj)
        return;
    nt_op *cl = nt_close_start(obj);
    unsigned before[8] = {0};
    for (unsigned i = 0; i < n && i < 8; i++)
        before[i] = ops[i] ? nt_count(ops[i]) : 0;
    nt_close_wait(cl, NT_WAIT_MS);
    for (unsigned i = 0; i < n && i < 8; i++) {
        nt_op *op = ops[i];
        if (!op)
            continue;
        if (cl->returned == STATUS_SUCCESS) {
            if (op->kind == NT_REQ && op->started && op->returned == STATUS_PENDING &&
                before[i] == 0) {
                tl_failures++;
                fprintf(stderr, "[%s] close returned STATUS_SUCCESS before %s completed\n",
                        tl_current ? tl_current : "-", op->what);
            }
            if (nt_count(op) != before[i]) {
                tl_failures++;
                fprintf(stderr, "[%s] %s ran after the close returned STATUS_SUCCESS\n",
                        tl_current ? tl_current : "-", op->what);
            }
        } else if (cl->returned == STATUS_PENDING && nt_count(cl) == 1) {
            unsigned s_op = atomic_load(&op->seq), s_cl = atomic_load(&cl->seq);
            if (s_op && s_op > s_cl) {
                tl_failures++;
                fprintf(stderr, "[%s] %s ran after the close completion\n",
                        tl_current ? tl_current : "-", op->what);
            }
        }
    }
}

void nt_conn_close(nt_conn *c)
{
    nt_op *aops[] = {c->connect, c->complete, c->dev_a};
    nt_op *pops[] = {c->accept, c->dev_p};
    nt_close_last(c->a, aops, 3);
    nt_close_last(c->p, pops, 2);
    nt_close(c->qa);
    nt_close(c->qp);
    c->a = c->p = NULL;
    c->qa = c->qp = NULL;
}

bool nt_pair_conn_open(nt_side *as, nt_side *ps, nt_lsn **L, nt_conn *c, int fam)
{
    if (!nt_pair_open(as, ps, L, fam))
        return false;
    if (!nt_conn_init(c, fam, as, ps, *L)) {
        nt_pair_conn_close(as, ps, *L, c);
        *L = NULL;
        return false;
    }
    return true;
}

void nt_pair_conn_close(nt_side *as, nt_side *ps, nt_lsn *L, nt_conn *c)
{
    nt_conn_close(c);
    nt_pair_close(as, ps, L);
}

NTSTATUS nt_gcd(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, void *buf, ULONG *len)
{
    return c->Dispatch->NdkGetConnectionData(c, ird, ord, buf, len);
}

NTSTATUS nt_disconnect(NDK_CONNECTOR *c, nt_op **out)
{
    nt_op *op = nt_op_new(NT_REQ, "NdkDisconnect");
    *out = op;
    return nt_started(op, c->Dispatch->NdkDisconnect(c, nt_req_cb, op));
}

void nt_graceful_disconnect(NDK_CONNECTOR *first, NDK_CONNECTOR *other, nt_op *other_ev)
{
    nt_op *d1, *d2;
    nt_disconnect(first, &d1);
    CHECK(tl_event_wait(&other_ev->ev, 1, NT_WAIT_MS));
    nt_disconnect(other, &d2);
    CHECK_STATUS(nt_finish(d1, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(d2, NT_WAIT_MS), STATUS_SUCCESS);
}

void nt_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "\nndktest: case timed out (hang, probably a deadlock): ";
    ssize_t w = write(2, msg, sizeof msg - 1);
    if (nt_case_name)
        w = write(2, nt_case_name, strlen(nt_case_name));
    w = write(2, "\n", 1);
    (void)w;
    _exit(1);
}

void nt_case_begin(const char *name)
{
    nt_case_name = name;
    atomic_store(&nt_nops, 0);
    nt_nlsns = 0;
    atomic_store(&nt_cb_failures, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGALRM, nt_watchdog);
    alarm(NT_CASE_TIMEOUT_S);
}

void nt_audit(unsigned *from, bool pending_may_stay)
{
    unsigned nops = atomic_load(&nt_nops);
    if (nops > nt_ops_cap)
        nops = nt_ops_cap;
    const char *name = tl_current ? tl_current : "-";
    for (; *from < nops; (*from)++) {
        nt_op *op = &nt_ops[*from];
        unsigned n = nt_count(op);
        if (op->kind == NT_DISC) {
            /* At most one disconnect indication per connection (X3). */
            if (n > 1) {
                tl_failures++;
                fprintf(stderr, "[%s] %s delivered %u times (at most once)\n", name, op->what, n);
            }
            continue;
        }
        if (!op->started)
            continue;
        unsigned want = op->returned == STATUS_PENDING ? 1u : 0u;
        if (n != want && !(pending_may_stay && want == 1 && n == 0)) {
            tl_failures++;
            fprintf(stderr, "[%s] %s returned %s and its completion ran %u times (expected %u)\n",
                    name, op->what, ndk_status_name(op->returned), n, want);
        }
    }
}

void nt_case_end(void)
{
    /* A case that stopped early (REQUIRE) left adapters open: close them so
     * nothing leaks and no callback outlives the case. Its ops are not
     * checked: requests it left pending may legitimately never complete. */
    bool left_open = false;
    for (unsigned i = 0; i < NT_MAX_ADAPTERS; i++) {
        if (nt_adapters[i]) {
            left_open = true;
            ndk_close_adapter(nt_adapters[i]);
            nt_adapters[i] = NULL;
        }
    }
    unsigned nops = atomic_load(&nt_nops);
    if (nops > nt_ops_cap)
        nops = nt_ops_cap;
    if (!left_open) {
        unsigned from = 0;
        nt_audit(&from, false);
    }
    for (unsigned i = 0; i < nops; i++)
        tl_event_destroy(&nt_ops[i].ev);
    for (unsigned i = 0; i < nt_nlsns; i++) {
        tl_event_destroy(&nt_lsns[i].ev);
        pthread_mutex_destroy(&nt_lsns[i].mu);
    }
    atomic_store(&nt_nops, 0);
    nt_nlsns = 0;
    tl_failures += atomic_exchange(&nt_cb_failures, 0);
    alarm(0);
    nt_case_name = NULL;
}
