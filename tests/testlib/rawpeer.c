#include "rawpeer.h"

/* Where nk_pool_audit stopped in ndktest's pool of call records. */
static unsigned nk_audited;

const char *rp_end_name(int e)
{
    switch (e) {
    case RP_OPEN:
        return "still open";
    case RP_EOF:
        return "EOF";
    case RP_RESET:
        return "RST";
    default:
        return "socket error";
    }
}

int rp_ms_left(uint64_t deadline_ns)
{
    uint64_t now = tl_now_ns();
    if (now >= deadline_ns)
        return 0;
    return (int)((deadline_ns - now + 999999u) / 1000000u);
}

uint64_t rp_deadline(unsigned ms)
{
    return tl_now_ns() + (uint64_t)ms * 1000000u;
}

unsigned rp_ms_since(uint64_t t0_ns)
{
    return (unsigned)((tl_now_ns() - t0_ns) / 1000000u);
}

void rp_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

struct sockaddr_in rp_loopback(uint16_t port)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
}

int rp_connect_start_sa(const struct sockaddr *sa, socklen_t len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    rp_nodelay(fd);
    if (connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

int rp_connect_start(uint16_t port)
{
    struct sockaddr_in a = rp_loopback(port);
    return rp_connect_start_sa((struct sockaddr *)&a, sizeof a);
}

int rp_connect_sa(const struct sockaddr *sa, socklen_t salen, unsigned timeout_ms)
{
    int fd = rp_connect_start_sa(sa, salen);
    if (fd < 0)
        return -1;
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, (int)timeout_ms) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 ||
        err != 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

int rp_connect(uint16_t port, unsigned timeout_ms)
{
    struct sockaddr_in a = rp_loopback(port);
    return rp_connect_sa((struct sockaddr *)&a, sizeof a, timeout_ms);
}

bool rp_send(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return false;
        }
        p += n;
        len -= (size_t)n;
    }
    return true;
}

void rp_fin(int fd)
{
    (void)shutdown(fd, SHUT_WR);
}

void rp_reset(int fd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(fd);
}

size_t rp_read(int fd, uint8_t *buf, size_t want, unsigned timeout_ms, int *end)
{
    uint64_t dl = rp_deadline(timeout_ms);
    size_t got = 0;
    *end = RP_OPEN;
    while (got < want) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, rp_ms_left(dl));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *end = RP_ERROR;
            break;
        }
        if (r == 0)
            break;
        ssize_t n = recv(fd, buf + got, want - got, MSG_DONTWAIT);
        if (n > 0) {
            got += (size_t)n;
        } else if (n == 0) {
            *end = RP_EOF;
            break;
        } else if (errno != EINTR && errno != EAGAIN) {
            *end = errno == ECONNRESET ? RP_RESET : RP_ERROR;
            break;
        }
    }
    return got;
}

int rp_wait_end(int fd, unsigned timeout_ms, uint8_t *keep, size_t cap,
                size_t *nbytes)
{
    uint64_t dl = rp_deadline(timeout_ms);
    size_t total = 0;
    int end = RP_OPEN;
    for (;;) {
        uint8_t tmp[4096];
        int left = rp_ms_left(dl);
        if (left == 0)
            break;
        size_t n = rp_read(fd, tmp, sizeof tmp, (unsigned)left, &end);
        /* rp_read returns as soon as it has anything; keep going for more. */
        if (keep && total < cap)
            memcpy(keep + total, tmp, n < cap - total ? n : cap - total);
        total += n;
        if (end != RP_OPEN)
            break;
        if (n == 0)
            break; /* timed out with nothing */
    }
    if (nbytes)
        *nbytes = total;
    return end;
}

bool rp_quiet(int fd, unsigned ms, uint8_t *first, size_t *nfirst)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, (int)ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        if (nfirst)
            *nfirst = 0;
        return true;
    }
    if (first && nfirst) {
        ssize_t n = recv(fd, first, 64, MSG_DONTWAIT);
        *nfirst = n > 0 ? (size_t)n : 0;
    }
    return false;
}

bool rp_expect_quiet(int fd, const char *what)
{
    uint8_t got[64];
    size_t n = 0;
    if (rp_quiet(fd, RP_QUIET_MS, got, &n))
        return true;
    tl_failures++;
    fprintf(stderr, "[%s] %s\n", tl_current ? tl_current : "-", what);
    rp_hexdump("received", got, n);
    return false;
}

int rp_listen_sa(struct sockaddr *sa, socklen_t *len)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, sa, *len) != 0 || listen(fd, 64) != 0 || getsockname(fd, sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int rp_listen(uint16_t *port)
{
    struct sockaddr_in a = rp_loopback(0);
    socklen_t len = sizeof a;
    int fd = rp_listen_sa((struct sockaddr *)&a, &len);
    if (fd >= 0)
        *port = ntohs(a.sin_port);
    return fd;
}

int rp_accept(int lfd, unsigned timeout_ms)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, (int)timeout_ms) != 1)
        return -1;
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        rp_nodelay(fd);
    return fd;
}

size_t rp_read_frame(int fd, uint8_t *out /* >= 532 */, unsigned timeout_ms)
{
    int end;
    uint64_t dl = rp_deadline(timeout_ms);
    if (rp_read(fd, out, RP_HDR_LEN, timeout_ms, &end) != RP_HDR_LEN)
        return 0;
    size_t pd = rp_get16(out + 18);
    if (pd > 512)
        return 0;
    if (rp_read(fd, out + RP_HDR_LEN, pd, (unsigned)rp_ms_left(dl), &end) != pd)
        return 0;
    return RP_HDR_LEN + pd;
}

void rp_report_end(const char *what, int end, unsigned ms, const uint8_t *got, size_t n)
{
    fprintf(stderr, "    %s: %s after %u ms, %zu octets received\n", what, rp_end_name(end), ms,
            n);
    if (n)
        rp_hexdump("received", got, n < 64 ? n : 64);
}

bool rp_check_reply_header(const uint8_t *r, size_t n, uint8_t flags, uint8_t mask, uint8_t rev)
{
    bool ok = n >= RP_HDR_LEN && memcmp(r, RP_KEY_REP, RP_KEY_LEN) == 0 &&
              (r[16] & mask) == flags && r[17] == rev;
    if (!ok) {
        tl_failures++;
        fprintf(stderr,
                "[%s] Reply header: want key \"%s\", flags 0x%02x under mask 0x%02x, Rev %u\n",
                tl_current, RP_KEY_REP, flags, mask, rev);
        rp_hexdump("got", r, n < 64 ? n : 64);
    }
    return ok;
}

nk_op nk_op_begin(nk_req *r, NTSTATUS st)
{
    nt_started(r, st);
    nk_op op = {st, r};
    return op;
}

bool nk_op_done(nk_op *op)
{
    return op->st != STATUS_PENDING || nt_count(op->r) > 0;
}

NTSTATUS nk_op_wait(nk_op *op, unsigned ms)
{
    if (op->st != STATUS_PENDING)
        return op->st;
    if (!tl_event_wait(&op->r->ev, 1, ms))
        return NK_NO_COMPLETION;
    return atomic_load(&op->r->status);
}

void nk_pool_audit(void)
{
    nt_audit(&nk_audited, true);
}

void *nk_created(nk_req *r, NTSTATUS st, void *inline_obj)
{
    nk_op op = nk_op_begin(r, st);
    NTSTATUS fin = nk_op_wait(&op, NK_WAIT_MS);
    if (fin != STATUS_SUCCESS) {
        fprintf(stderr, "    create failed: %s\n", nk_st(fin));
        return NULL;
    }
    return st == STATUS_PENDING ? (void *)atomic_load(&r->obj) : inline_obj;
}

bool nk_close_obj(void *obj)
{
    return !obj || nt_close_wait(nt_close_start(obj), NK_WAIT_MS);
}

void nk_cq_notify(void *ctx, NTSTATUS status)
{
    (void)status;
    nk_world *w = ctx;
    tl_event_signal(&w->cq_ev);
}

NDK_OPEN_OPTIONS nk_options(void)
{
    NDK_OPEN_OPTIONS o = nt_opts_ms(500);
    o.TcpConnectTimeoutMs = 2000;
    o.RtrTimeoutMs = 2000;
    return o;
}

nk_world *nk_open(const NDK_OPEN_OPTIONS *opt)
{
    nk_world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    tl_event_init(&w->cq_ev);
    NDK_VERSION v = {2, 1};
    NTSTATUS st = nt_open("127.0.0.1", v, opt, &w->ad);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    ndk_open_adapter(127.0.0.1): %s\n", nk_st(st));
        tl_event_destroy(&w->cq_ev);
        free(w);
        return NULL;
    }
    nk_req *r = nk_req_new();
    NDK_CQ *cq = NULL;
    st = w->ad->Dispatch->NdkCreateCq(w->ad, 256, nk_cq_notify, w, NULL, nk_create_done, r, &cq);
    w->cq = nk_created(r, st, cq);
    r = nk_req_new();
    NDK_PD *pd = NULL;
    st = w->ad->Dispatch->NdkCreatePd(w->ad, nk_create_done, r, &pd);
    w->pd = nk_created(r, st, pd);
    if (!w->cq || !w->pd) {
        nt_close_adapter(w->ad);
        tl_event_destroy(&w->cq_ev);
        free(w);
        return NULL;
    }
    return w;
}

nk_world *nk_open_responder(ULONG request_timeout_ms, ULONG max_half_open)
{
    NDK_OPEN_OPTIONS o = nk_options();
    o.MpaRequestTimeoutMs = request_timeout_ms;
    o.MaxHalfOpen = max_half_open;
    return nk_open(&o);
}

void nk_close_world(nk_world *w)
{
    if (!w)
        return;
    nt_close_adapter(w->ad);
    nk_pool_audit();
    for (unsigned i = 0; i < w->nlisteners; i++) {
        nk_listener *l = w->listeners[i];
        pthread_mutex_destroy(&l->mu);
        tl_event_destroy(&l->ev);
        free(l);
    }
    tl_event_destroy(&w->cq_ev);
    free(w);
}

NDK_QP *nk_qp(nk_world *w)
{
    nk_req *r = nk_req_new();
    NDK_QP *qp = NULL;
    NTSTATUS st = w->pd->Dispatch->NdkCreateQp(w->pd, w->cq, w->cq, w, 16, 16, 1, 1, 0,
                                                nk_create_done, r, &qp);
    return nk_created(r, st, qp);
}

NDK_CONNECTOR *nk_connector(nk_world *w)
{
    nk_req *r = nk_req_new();
    NDK_CONNECTOR *c = NULL;
    NTSTATUS st = w->ad->Dispatch->NdkCreateConnector(w->ad, nk_create_done, r, &c);
    return nk_created(r, st, c);
}

void nk_on_connect(void *ctx, NDK_CONNECTOR *c)
{
    nk_listener *l = ctx;
    pthread_mutex_lock(&l->mu);
    if (l->pushed - l->popped < NK_MAXQ)
        l->q[l->pushed++ % NK_MAXQ] = c;
    pthread_mutex_unlock(&l->mu);
    tl_event_signal(&l->ev);
}

nk_listener *nk_listen(nk_world *w)
{
    if (w->nlisteners == NK_MAX_LISTENERS)
        return NULL;
    nk_listener *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    pthread_mutex_init(&l->mu, NULL);
    tl_event_init(&l->ev);
    w->listeners[w->nlisteners++] = l; /* freed by nk_close_world */
    nk_req *r = nk_req_new();
    NDK_LISTENER *lst = NULL;
    NTSTATUS st = w->ad->Dispatch->NdkCreateListener(w->ad, nk_on_connect, l, nk_create_done, r,
                                                      &lst);
    l->l = nk_created(r, st, lst);
    if (!l->l)
        return NULL;
    struct sockaddr_in a = rp_loopback(0);
    r = nk_req_new();
    st = l->l->Dispatch->NdkListen(l->l, (PSOCKADDR)&a, sizeof a, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    st = nk_op_wait(&op, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    NdkListen: %s\n", nk_st(st));
        return NULL;
    }
    struct sockaddr_in got;
    ULONG len = sizeof got;
    st = l->l->Dispatch->NdkGetLocalAddress(l->l, (PSOCKADDR)&got, &len);
    if (st != STATUS_SUCCESS || got.sin_family != AF_INET || got.sin_port == 0) {
        fprintf(stderr, "    listener NdkGetLocalAddress: %s\n", nk_st(st));
        return NULL;
    }
    l->port = ntohs(got.sin_port);
    return l;
}

NDK_CONNECTOR *nk_next_event(nk_listener *l, unsigned ms)
{
    pthread_mutex_lock(&l->mu);
    unsigned want = l->popped + 1;
    pthread_mutex_unlock(&l->mu);
    if (!tl_event_wait(&l->ev, want, ms))
        return NULL;
    pthread_mutex_lock(&l->mu);
    NDK_CONNECTOR *c = NULL;
    if (l->popped < l->pushed)
        c = l->q[l->popped++ % NK_MAXQ];
    pthread_mutex_unlock(&l->mu);
    return c;
}

NDK_CONNECTOR *nk_deliver(nk_listener *l, const void *req, size_t len, int *fd)
{
    *fd = rp_connect(l->port, NK_WAIT_MS);
    CHECK(*fd >= 0);
    if (*fd < 0)
        return NULL;
    bool sent = rp_send(*fd, req, len);
    CHECK(sent);
    if (!sent)
        return NULL;
    NDK_CONNECTOR *c = nk_next_event(l, NK_WAIT_MS);
    CHECK(c != NULL);
    return c;
}

bool nk_passive_open(nk_passive *p, nk_world *w)
{
    *p = (nk_passive){.w = w, .fd = -1};
    p->l = w ? nk_listen(w) : NULL;
    CHECK(p->l != NULL);
    return p->l != NULL;
}

bool nk_passive_connect(nk_passive *p)
{
    p->fd = rp_connect(p->l->port, NK_WAIT_MS);
    CHECK(p->fd >= 0);
    return p->fd >= 0;
}

bool nk_passive_deliver(nk_passive *p, const void *req, size_t len)
{
    p->c = nk_deliver(p->l, req, len, &p->fd);
    if (!p->c)
        return false;
    p->qp = nk_qp(p->w);
    CHECK(p->qp != NULL);
    return p->qp != NULL;
}

void nk_close_conn(NDK_CONNECTOR **c, NDK_QP **qp, int *fd)
{
    NK_CLOSE(*c);
    NK_CLOSE(*qp);
    if (*fd >= 0)
        close(*fd);
    *c = NULL;
    *qp = NULL;
    *fd = -1;
}

void nk_passive_drop(nk_passive *p)
{
    nk_close_conn(&p->c, &p->qp, &p->fd);
}

void nk_passive_close(nk_passive *p)
{
    nk_passive_drop(p);
    nk_close_world(p->w);
    *p = (nk_passive){.fd = -1};
}

bool nk_no_event(nk_listener *l, unsigned ms, const char *why)
{
    NDK_CONNECTOR *c = nk_next_event(l, ms);
    if (!c)
        return true;
    tl_failures++;
    fprintf(stderr, "[%s] unexpected connect event (%s)\n", tl_current ? tl_current : "-", why);
    NK_CLOSE(c);
    return false;
}

nk_op nk_connect(NDK_CONNECTOR *c, NDK_QP *qp, uint16_t port, ULONG ird, ULONG ord,
                 const void *pd, ULONG pd_len)
{
    struct sockaddr_in src = rp_loopback(0), dst = rp_loopback(port);
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkConnect(c, qp, (PSOCKADDR)&src, sizeof src, (PSOCKADDR)&dst,
                                          sizeof dst, ird, ord, (PVOID)pd, pd_len, nk_req_done, r);
    return nk_op_begin(r, st);
}

nk_op nk_accept(NDK_CONNECTOR *c, NDK_QP *qp, ULONG ird, ULONG ord, const void *pd,
                ULONG pd_len)
{
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkAccept(c, qp, ird, ord, (PVOID)pd, pd_len, NULL, NULL,
                                         nk_req_done, r);
    return nk_op_begin(r, st);
}

nk_op nk_complete(NDK_CONNECTOR *c)
{
    nk_req *r = nk_req_new();
    NTSTATUS st = c->Dispatch->NdkCompleteConnect(c, NULL, NULL, nk_req_done, r);
    return nk_op_begin(r, st);
}

NTSTATUS nk_conn_data(NDK_CONNECTOR *c, ULONG *ird, ULONG *ord, void *buf,
                      ULONG *len)
{
    return c->Dispatch->NdkGetConnectionData(c, ird, ord, buf, len);
}

/* Whether the connect event e carries tag as its private data; *glen and
 * the status say what it carried. */
static NTSTATUS carries_tag(NDK_CONNECTOR *e, const char *tag, ULONG tlen, ULONG *glen)
{
    uint8_t got[256];
    *glen = sizeof got;
    NTSTATUS st = nk_conn_data(e, NULL, NULL, got, glen);
    if (st == STATUS_SUCCESS && (*glen != tlen || memcmp(got, tag, tlen) != 0))
        st = STATUS_UNSUCCESSFUL;
    return st;
}

bool nk_roundtrip_among(nk_world *w, nk_listener *l, const char *tag, unsigned wait_ms,
                        void (*stray)(nk_world *w, NDK_CONNECTOR *c))
{
    bool ok = false;
    NDK_CONNECTOR *act = nk_connector(w), *pas = NULL;
    NDK_QP *qa = nk_qp(w), *qb = nk_qp(w);
    if (!act || !qa || !qb) {
        fprintf(stderr, "    roundtrip %s: could not create objects\n", tag);
        goto out;
    }
    ULONG tlen = (ULONG)strlen(tag);
    nk_op c = nk_connect(act, qa, l->port, 4, 4, tag, tlen);
    /* Wait for our connect event, but stop early once Connect has already
     * failed: then no event is coming. */
    uint64_t dl = rp_deadline(wait_ms);
    while (!pas && rp_ms_left(dl) > 0) {
        NDK_CONNECTOR *e = nk_next_event(l, 20);
        if (!e) {
            if (nk_op_done(&c) && nk_op_wait(&c, 0) != STATUS_SUCCESS)
                break;
            continue;
        }
        ULONG glen;
        NTSTATUS st = carries_tag(e, tag, tlen, &glen);
        if (st == STATUS_SUCCESS) {
            pas = e;
        } else if (stray) {
            stray(w, e);
        } else {
            fprintf(stderr, "    roundtrip %s: the connect event is not ours (%s, %u octets)\n", tag,
                    nk_st(st), (unsigned)glen);
            NK_CLOSE(e);
            goto out;
        }
    }
    if (!pas) {
        fprintf(stderr, "    roundtrip %s: no connect event (Connect: %s)\n", tag,
                nk_st(nk_op_wait(&c, 0)));
        (void)nk_op_wait(&c, NK_WAIT_MS);
        goto out;
    }
    nk_op a = nk_accept(pas, qb, 4, 4, NULL, 0);
    NTSTATUS st = nk_op_wait(&c, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    roundtrip %s: Connect: %s\n", tag, nk_st(st));
        (void)nk_op_wait(&a, NK_WAIT_MS);
        goto out;
    }
    nk_op cc = nk_complete(act);
    st = nk_op_wait(&cc, NK_WAIT_MS);
    NTSTATUS sa = nk_op_wait(&a, NK_WAIT_MS);
    if (st != STATUS_SUCCESS || sa != STATUS_SUCCESS) {
        fprintf(stderr, "    roundtrip %s: CompleteConnect %s, Accept %s\n", tag, nk_st(st),
                nk_st(sa));
        goto out;
    }
    ok = true;
out:
    NK_CLOSE(act);
    NK_CLOSE(pas);
    NK_CLOSE(qa);
    NK_CLOSE(qb);
    return ok;
}

bool nk_roundtrip(nk_world *w, nk_listener *l, const char *tag)
{
    return nk_roundtrip_among(w, l, tag, NK_WAIT_MS, NULL);
}

bool nk_mr_register(nk_world *w, nk_mr *m)
{
    nk_req *r = nk_req_new();
    NDK_MR *mr = NULL;
    NTSTATUS st = w->pd->Dispatch->NdkCreateMr(w->pd, FALSE, nk_create_done, r, &mr);
    m->mr = nk_created(r, st, mr);
    if (!m->mr)
        return false;
    memset(&m->mdl, 0, sizeof m->mdl);
    m->mdl.StartVa = m->buf;
    m->mdl.ByteCount = sizeof m->buf;
    r = nk_req_new();
    st = m->mr->Dispatch->NdkRegisterMr(m->mr, &m->mdl, sizeof m->buf,
                                        NDK_MR_FLAG_ALLOW_LOCAL_WRITE, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    st = nk_op_wait(&op, NK_WAIT_MS);
    if (st != STATUS_SUCCESS) {
        fprintf(stderr, "    NdkRegisterMr: %s\n", nk_st(st));
        return false;
    }
    m->token = m->mr->Dispatch->NdkGetLocalTokenFromMr(m->mr);
    return true;
}

void nk_mr_release(nk_mr *m)
{
    if (!m->mr)
        return;
    nk_req *r = nk_req_new();
    NTSTATUS st = m->mr->Dispatch->NdkDeregisterMr(m->mr, nk_req_done, r);
    nk_op op = nk_op_begin(r, st);
    (void)nk_op_wait(&op, NK_WAIT_MS);
    NK_CLOSE(m->mr);
    m->mr = NULL;
}

NDK_SGE nk_sge(nk_mr *m, size_t off, ULONG len)
{
    return (NDK_SGE){.VirtualAddress = m->buf + off, .Length = len, .MemoryRegionToken = m->token};
}

bool nk_cq_next(nk_world *w, NDK_RESULT *res, unsigned ms)
{
    uint64_t dl = rp_deadline(ms);
    for (;;) {
        if (w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1)
            return true;
        unsigned seen = tl_event_count(&w->cq_ev);
        w->cq->Dispatch->NdkArmCq(w->cq, NDK_CQ_NOTIFY_ANY);
        if (w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1)
            return true;
        int left = rp_ms_left(dl);
        if (left == 0 || !tl_event_wait(&w->cq_ev, seen + 1, (unsigned)left))
            return w->cq->Dispatch->NdkGetCqResults(w->cq, res, 1) == 1;
    }
}
