#include "simnet.h"

const char *const sim_mode_name[] = {"whole", "byte", "random", "stall"};
NDK_ADAPTER *sim_adapters[2];
static const struct ndk_transport_ops sim_transport_ops = {
    .readv = sim_tr_readv,
    .writev = sim_tr_writev,
    .want_write = sim_tr_want_write,
    .shutdown_write = sim_tr_shutdown_write,
    .failed = sim_tr_failed,
    .mulpdu = sim_tr_mulpdu,
};

/* Like the connector: a QP waiting for a receive is not read until it is
 * resumed (no EPOLLIN). */
static void sim_tr_pause_input(struct ndk_transport *t, bool paused)
{
    __atomic_store_n(&sim_end_of(t)->paused, paused, __ATOMIC_SEQ_CST);
}

const struct ndk_transport_ops sim_transport_ops_pausable = {
    .readv = sim_tr_readv,
    .writev = sim_tr_writev,
    .want_write = sim_tr_want_write,
    .shutdown_write = sim_tr_shutdown_write,
    .failed = sim_tr_failed,
    .mulpdu = sim_tr_mulpdu,
    .pause_input = sim_tr_pause_input,
};
bool sim_null_sgl;

uint64_t sim_next(struct sim_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t sim_below(struct sim_rng *r, uint64_t n)
{
    return n ? sim_next(r) % n : 0;
}

uint64_t sim_mix(uint64_t a, uint64_t b)
{
    struct sim_rng r = {a ^ (b * 0xD6E8FEB86659FD93ull)};
    return sim_next(&r);
}

bool sim_seed_from_env(uint64_t *out)
{
    const char *s = getenv("NDK_SIM_SEED");
    if (!s || !*s)
        return false;
    char *end = NULL;
    *out = strtoull(s, &end, 0);
    return end && *end == '\0';
}

uint64_t sim_fresh_seed(void)
{
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        s = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec;
    }
    return s;
}

size_t sim_page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

bool sim_buf_new(struct sim_buf *b, size_t len, size_t lead, struct sim_rng *rng)
{
    size_t ps = sim_page();
    memset(b, 0, sizeof *b);
    size_t span = len ? len : 1;
    size_t pages = (span + (lead == SIZE_MAX ? 0 : lead) + ps - 1) / ps;
    if (lead == SIZE_MAX)
        lead = pages * ps - span;
    b->map_len = (pages + 2) * ps;
    void *m = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return false;
    b->map = m;
    mprotect(b->map, ps, PROT_NONE);
    mprotect(b->map + (pages + 1) * ps, ps, PROT_NONE);
    b->p = b->map + ps + lead;
    b->len = len;
    b->lead = lead;
    b->tail = pages * ps - lead - len;
    for (size_t i = 0; i < b->lead; i++)
        b->map[ps + i] = SIM_CANARY(i);
    for (size_t i = 0; i < b->tail; i++)
        b->p[len + i] = SIM_CANARY(i + 3);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = sim_next(rng);
        memcpy(b->p + i, &v, len - i < 8 ? len - i : 8);
    }
    b->init = malloc(len ? len : 1);
    b->want = malloc(len ? len : 1);
    b->target = calloc(len ? len : 1, 1);
    if (!b->init || !b->want || !b->target)
        return false;
    memcpy(b->init, b->p, len);
    memcpy(b->want, b->p, len);
    return true;
}

void sim_buf_free(struct sim_buf *b)
{
    if (b->map)
        munmap(b->map, b->map_len);
    free(b->init);
    free(b->want);
    free(b->target);
    memset(b, 0, sizeof *b);
}

bool sim_canaries_ok(const struct sim_buf *b)
{
    size_t ps = sim_page();
    for (size_t i = 0; i < b->lead; i++)
        if (b->map[ps + i] != SIM_CANARY(i))
            return false;
    for (size_t i = 0; i < b->tail; i++)
        if (b->p[b->len + i] != SIM_CANARY(i + 3))
            return false;
    return true;
}

void sim_buf_expect(struct sim_buf *b, size_t off, const uint8_t *src, size_t n)
{
    memcpy(b->want + off, src, n);
    memset(b->target + off, 1, n);
}

size_t sim_buf_bad_byte(const struct sim_buf *b, bool exact)
{
    for (size_t i = 0; i < b->len; i++) {
        uint8_t v = b->p[i];
        if (exact ? v != b->want[i] : (v != b->init[i] && !(b->target[i] && v == b->want[i])))
            return i;
    }
    return SIZE_MAX;
}

/* Staging configurations a run may pick; index 0 is the provider's own. */
static const size_t sim_stage_thresholds[8] = {SIZE_MAX, 0, 1, 16, 64, 200, 4096, 65535};
static const size_t sim_stage_sizes[8] = {SIZE_MAX, 0, 1, 17, 100, 1000, 4002, 65552};

void sim_cfg_stage(struct sim_cfg *c, unsigned thr, unsigned size)
{
    c->stage_threshold = sim_stage_thresholds[thr & 7];
    c->stage_size = sim_stage_sizes[size & 7];
}

void sim_cfg_from_seed(struct sim_cfg *c, uint64_t seed)
{
    /* 128 is the smallest MULPDU RFC 5044 allows, 65535 the largest ULPDU;
     * odd values make every pad length appear. */
    static const size_t mulpdus[8] = {256, 201, 1000, 8972, 128, 131, 4002, 65535};
    static const uint32_t depths[4] = {1, 2, 4, 16};
    memset(c, 0, sizeof *c);
    c->mode = (enum sim_mode)(seed & 3);
    c->crc = (seed >> 2) & 1;
    c->mulpdu = mulpdus[(seed >> 3) & 7];
    c->read_rtr = (seed >> 6) & 1;
    c->gate_b = !c->read_rtr && ((seed >> 7) & 1);
    c->ord[0] = depths[(seed >> 8) & 3];
    c->ord[1] = depths[(seed >> 10) & 3];
    /* Never more reads than the peer takes; sometimes more room. */
    c->ird[1] = c->ord[0] << ((seed >> 12) & 1);
    c->ird[0] = c->ord[1] << ((seed >> 13) & 1);
    sim_cfg_stage(c, (unsigned)(seed >> 14), (unsigned)(seed >> 17));
}

void sim_cfg_print(const char *tag, uint64_t seed, const struct sim_cfg *c)
{
    printf("%s seed=0x%016" PRIx64 " mode=%s crc=%d mulpdu=%zu ord=%u/%u ird=%u/%u gate_b=%d read_rtr=%d "
           "stage=%zd/%zd\n",
           tag, seed, sim_mode_name[c->mode], c->crc, c->mulpdu, c->ord[0], c->ord[1], c->ird[0], c->ird[1],
           c->gate_b, c->read_rtr, (ssize_t)c->stage_threshold, (ssize_t)c->stage_size);
    fflush(stdout);
}

void *sim_ctx(int idx)
{
    return (void *)(uintptr_t)(idx + 1);
}

bool sim_open_adapters(void)
{
    for (int i = 0; i < 2; i++) {
        NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &sim_adapters[i]);
        if (st != STATUS_SUCCESS) {
            fprintf(stderr, "ndk_open_adapter(lo): %s\n", ndk_status_name(st));
            return false;
        }
    }
    return true;
}

void sim_close_adapters(void)
{
    for (int i = 0; i < 2; i++)
        if (sim_adapters[i])
            ndk_close_adapter(sim_adapters[i]);
}

struct sim_end *sim_end_of(struct ndk_transport *t)
{
    return (struct sim_end *)(void *)t;
}

size_t sim_readable_limit(const struct sim_dir *d)
{
    return d->delivered < d->cut ? d->delivered : d->cut;
}

ssize_t sim_tr_readv(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct sim_end *e = sim_end_of(t);
    struct sim_dir *d = &e->net->dir[1 - e->id];
    CHECK(!e->stopped); /* ndk_qp_stop promised no more reads */
    size_t limit = sim_readable_limit(d);
    if (d->consumed < limit) {
        size_t got = 0;
        for (int i = 0; i < n && d->consumed < limit; i++) {
            size_t take = limit - d->consumed;
            if (take > iov[i].iov_len)
                take = iov[i].iov_len;
            memcpy(iov[i].iov_base, d->log + d->consumed, take);
            d->consumed += take;
            got += take;
        }
        return (ssize_t)got;
    }
    if (d->cut != SIZE_MAX && d->consumed >= d->cut)
        return d->cut_err ? -d->cut_err : 0;
    if (d->fin && d->consumed == d->len)
        return 0;
    if (e->failed_calls)
        return 0; /* the connector shut the socket down (SHUT_RDWR) */
    return -EAGAIN;
}

ssize_t sim_tr_writev(struct ndk_transport *t, const struct iovec *iov, int n)
{
    struct sim_end *e = sim_end_of(t);
    struct sim_dir *d = &e->net->dir[e->id];
    CHECK(!e->stopped); /* ndk_qp_stop promised no more writes */
    e->writev_calls++;
    if (e->failed_calls || d->fin)
        return -EPIPE;
    if (d->wcut != SIZE_MAX && d->len >= d->wcut)
        return -ECONNRESET;
    size_t room = e->wbudget;
    if (d->wcut != SIZE_MAX && d->wcut - d->len < room)
        room = d->wcut - d->len;
    if (room == 0)
        return -EAGAIN;
    size_t put = 0;
    for (int i = 0; i < n && put < room; i++) {
        size_t take = iov[i].iov_len < room - put ? iov[i].iov_len : room - put;
        if (d->len + take > d->cap) {
            size_t cap = d->cap ? d->cap : 65536;
            while (cap < d->len + take)
                cap *= 2;
            uint8_t *grown = realloc(d->log, cap);
            if (!grown)
                return -ENOMEM;
            d->log = grown;
            d->cap = cap;
        }
        memcpy(d->log + d->len, iov[i].iov_base, take);
        d->len += take;
        put += take;
    }
    if (e->wbudget != SIZE_MAX)
        e->wbudget -= put;
    if (put && e->net->after_write)
        e->net->after_write(e->net, e->id);
    return (ssize_t)put;
}

void sim_tr_want_write(struct ndk_transport *t, bool on)
{
    sim_end_of(t)->want_write = on;
}

void sim_tr_shutdown_write(struct ndk_transport *t)
{
    struct sim_end *e = sim_end_of(t);
    CHECK(!e->shut_wr); /* one FIN */
    e->shut_wr = true;
    e->net->dir[e->id].fin = true;
}

void sim_tr_failed(struct ndk_transport *t, bool peer_reset)
{
    /* Like the connector: shut the socket down (the peer reads what was
     * written, then the end of the stream) and tear down later, from the
     * scheduler (the progress thread's hang-up event). */
    struct sim_end *e = sim_end_of(t);
    e->failed_calls++;
    e->failed_reset |= peer_reset;
    e->net->dir[e->id].fin = true;
}

size_t sim_tr_mulpdu(struct ndk_transport *t)
{
    struct sim_end *e = sim_end_of(t);
    e->mulpdu_calls++;
    return e->mss_mulpdu;
}

bool sim_peer_closed(const struct sim_net *net, int i)
{
    const struct sim_dir *d = &net->dir[1 - i];
    return d->fin || (d->cut != SIZE_MAX && d->len >= d->cut);
}

void sim_settle(struct sim_net *net)
{
    for (int i = 0; i < 2; i++) {
        struct sim_end *e = &net->end[i];
        if (e->stopped)
            continue;
        struct ndk_qp_impl *qp = net->side[i].impl;
        struct ndk_qp_dp *dp = &qp->dp;
        bool bad_end = net->teardown_on_rx_end && e->rx_done && (dp->state == QP_ERROR || !dp->rx_eof);
        bool draining = bad_end && ndk_qp_sent_term(qp);
        if (e->failed_calls || (bad_end && !draining) || (draining && sim_peer_closed(net, i))) {
            ndk_qp_stop(qp);
            e->stopped = true;
            e->want_write = false;
        }
    }
}

void sim_stop(struct sim_net *net, int i)
{
    if (!net->end[i].stopped) {
        ndk_qp_stop(net->side[i].impl);
        net->end[i].stopped = true;
        net->end[i].want_write = false;
    }
}

void sim_refill(struct sim_net *net, struct sim_end *e)
{
    if (e->stall) {
        e->stall--;
        e->wbudget = e->stall_room;
        return;
    }
    if (e->roomy) {
        e->wbudget = SIZE_MAX;
        return;
    }
    switch (net->cfg.mode) {
    case SIM_WHOLE:
    case SIM_BYTE:
        e->wbudget = SIZE_MAX;
        break;
    case SIM_RANDOM:
        e->wbudget = 1 + sim_below(&net->rng, 3 * net->cfg.mulpdu);
        break;
    case SIM_STALL:
        if (sim_below(&net->rng, 6) == 0) {
            e->stall = 1 + (unsigned)sim_below(&net->rng, 8);
            e->wbudget = 0;
        } else {
            e->wbudget = 1 + sim_below(&net->rng, 4 * net->cfg.mulpdu);
        }
        break;
    }
}

size_t sim_chunk(struct sim_net *net)
{
    switch (net->cfg.mode) {
    case SIM_WHOLE:
        return SIZE_MAX;
    case SIM_BYTE:
        return 1;
    default:
        /* Mostly small pieces that split headers, sometimes large ones. */
        if (sim_below(&net->rng, 4) == 0)
            return 1 + sim_below(&net->rng, 8 * net->cfg.mulpdu);
        return 1 + sim_below(&net->rng, 48);
    }
}

bool sim_step(struct sim_net *net)
{
    bool moved = false;
    int first = net->cfg.mode >= SIM_RANDOM ? (int)sim_below(&net->rng, 2) : 0;
    net->steps++;
    for (int j = 0; j < 2; j++) {
        int i = first ^ j;
        struct sim_end *e = &net->end[i];
        struct ndk_qp_impl *qp = net->side[i].impl;
        if (e->stopped)
            continue;
        sim_refill(net, e);
        if (e->want_write && e->wbudget) {
            size_t before = net->dir[i].len;
            ndk_qp_on_writable(qp);
            if (net->verbose)
                fprintf(stderr, "sim: %c writable: wrote %zu..%zu\n", "AB"[i], before, net->dir[i].len);
            moved |= net->dir[i].len != before || !e->want_write;
            sim_settle(net);
            if (e->stopped)
                continue;
        }
        if (e->rx_done || __atomic_load_n(&e->paused, __ATOMIC_SEQ_CST))
            continue;
        struct sim_dir *d = &net->dir[1 - i];
        bool call = false;
        if (d->delivered < d->len && d->delivered < d->cut) {
            size_t c = sim_chunk(net);
            size_t left = d->len - d->delivered;
            d->delivered += c < left ? c : left;
            call = true;
        }
        size_t limit = sim_readable_limit(d);
        bool at_end = (d->cut != SIZE_MAX && d->consumed >= d->cut && d->cut <= d->len) ||
                      (d->fin && d->consumed == d->len);
        if (d->consumed < limit || at_end)
            call = true;
        /* A resumed QP whose engine staged input before it paused: no new
         * byte will make it readable, so the owner hands it over (as the
         * connector does through input_pending). */
        if (__atomic_load_n(&qp->dp.rx_waiting, __ATOMIC_SEQ_CST) && rx_stage_held(&qp->dp.rx_stage))
            call = true;
        if (!call)
            continue;
        size_t before = d->consumed;
        bool alive = ndk_qp_on_readable(qp);
        moved |= d->consumed != before;
        if (net->verbose)
            fprintf(stderr, "sim: %c read %zu..%zu of %zu (delivered %zu)%s state %d\n", "AB"[i], before, d->consumed,
                    d->len, d->delivered, alive ? "" : " -> stream over", (int)qp->dp.state);
        if (net->verbose && !alive && qp->dp.term_len) {
            struct term_msg tm;
            term_decode(qp->dp.term_buf + 2, ddp_rd16(qp->dp.term_buf), &tm);
            fprintf(stderr, "sim: %c has a Terminate queued (sent %d): (%u,%u,0x%02x) %s\n", "AB"[i], qp->dp.term_sent,
                    tm.layer, tm.etype, tm.code, term_describe(tm.layer, tm.etype, tm.code));
            for (size_t k = 0; tm.ddp_hdr_copy && k < tm.ddp_hdr_copy_len; k++)
                fprintf(stderr, " %02x", tm.ddp_hdr_copy[k]);
            fprintf(stderr, "\n");
        }
        if (!alive) {
            e->rx_done = true;
            moved = true;
        }
        sim_settle(net);
    }
    return moved;
}

bool sim_run(struct sim_net *net)
{
    if (net->shm)
        return sim_shm_run(net);
    unsigned idle = 0;
    for (uint64_t n = 0; n < 50000000; n++) {
        bool moved = sim_step(net);
        bool wants = false;
        for (int i = 0; i < 2; i++)
            wants |= !net->end[i].stopped && net->end[i].want_write;
        if (moved) {
            idle = 0;
            continue;
        }
        if (!wants)
            return true;
        /* A wanted write waits for a stall to end; stalls are a few steps
         * long, so a long idle spell means the engine asks for the socket
         * and then writes nothing with it. */
        if (++idle > 1000) {
            fprintf(stderr, "sim: want_write set but nothing written (seed 0x%016" PRIx64 ")\n", net->seed);
            return false;
        }
    }
    fprintf(stderr, "sim: no quiescence after 50M steps (seed 0x%016" PRIx64 ")\n", net->seed);
    return false;
}

void sim_cq_notify(PVOID ctx, NTSTATUS st)
{
    (void)ctx, (void)st; /* never armed */
}

struct sim_buf *sim_new_buf(struct sim_net *net, size_t len, size_t lead)
{
    if (net->nbufs == SIM_MAX_BUF)
        return NULL;
    struct sim_buf *b = &net->bufs[net->nbufs];
    if (!sim_buf_new(b, len, lead, &net->rng))
        return NULL;
    net->nbufs++;
    return b;
}

NDK_MR *sim_reg_mr(struct sim_net *net, int s, NDK_PD *pd, struct sim_buf *b, size_t off,
                   size_t len, ULONG flags, uint32_t *token)
{
    struct sim_side *sd = &net->side[s];
    NDK_MR *mr = NULL;
    if (sd->nmrs == SIM_MAX_MR || pd->Dispatch->NdkCreateMr(pd, FALSE, NULL, NULL, &mr) != STATUS_SUCCESS)
        return NULL;
    sd->mrs[sd->nmrs++] = mr;
    MDL mdl = {.Next = NULL, .StartVa = b->p + off, .ByteOffset = 0, .ByteCount = (ULONG)len};
    if (mr->Dispatch->NdkRegisterMr(mr, &mdl, len, flags, NULL, NULL) != STATUS_SUCCESS)
        return NULL;
    if (token)
        *token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    return mr;
}

size_t sim_alloc(struct sim_net *net, int s, size_t len)
{
    struct sim_side *sd = &net->side[s];
    size_t off = sd->arena_next + 16 + sim_below(&net->rng, 48);
    sd->arena_next = off + len;
    if (sd->arena_next > sd->arena->len) {
        fprintf(stderr, "sim: arena of side %d too small\n", s);
        abort();
    }
    return off;
}

uint64_t sim_addr(const struct sim_buf *b, size_t off)
{
    return (uint64_t)(uintptr_t)(b->p + off);
}

struct sim_net *sim_net_new(const struct sim_cfg *cfg, uint64_t seed, size_t arena_len)
{
    struct sim_net *net = calloc(1, sizeof *net);
    if (!net)
        return NULL;
    net->cfg = *cfg;
    net->seed = seed;
    net->verbose = getenv("NDK_SIM_TRACE") != NULL;
    net->teardown_on_rx_end = true;
    net->shm = sim_shm_wanted();
    net->cut_req = -1;
    net->rng.s = seed;
    for (int i = 0; i < 2; i++) {
        struct sim_side *sd = &net->side[i];
        struct sim_end *e = &net->end[i];
        e->tr.ops = &sim_transport_ops;
        e->tr.owner = net;
        e->net = net;
        e->id = i;
        e->wbudget = SIZE_MAX;
        net->dir[i].cut = SIZE_MAX;
        net->dir[i].wcut = SIZE_MAX;
        sd->ad = sim_adapters[i];
        sd->last_sq_cqe = sd->last_rq_cqe = -1;
        NDK_ADAPTER *ad = sd->ad;
        if (ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &sd->pd) != STATUS_SUCCESS ||
            ad->Dispatch->NdkCreatePd(ad, NULL, NULL, &sd->pd2) != STATUS_SUCCESS ||
            ad->Dispatch->NdkCreateCq(ad, 4096, sim_cq_notify, NULL, NULL, NULL, NULL, &sd->cq) !=
                STATUS_SUCCESS ||
            sd->pd->Dispatch->NdkCreateQp(sd->pd, sd->cq, sd->cq, sd, 256, 256, NDK_MAX_SGE, NDK_MAX_SGE, 256,
                                          NULL, NULL, &sd->qp) != STATUS_SUCCESS)
            goto fail;
        sd->impl = container_of(ndk_obj_from_pub(sd->qp, NdkObjectTypeQp), struct ndk_qp_impl, obj);
        sd->arena = sim_new_buf(net, arena_len, SIZE_MAX);
        if (!sd->arena)
            goto fail;
        sd->mr_main = sim_reg_mr(net, i, sd->pd, sd->arena, 0, arena_len,
                                 NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                                     NDK_MR_FLAG_ALLOW_REMOTE_WRITE,
                                 &sd->tok_main);
        if (!sd->mr_main)
            goto fail;
    }
    return net;
fail:
    sim_net_free(net);
    return NULL;
}

/* The staging configuration of c, for the data paths started next. */
static void sim_stage_apply(const struct sim_cfg *c)
{
    size_t threshold = c->stage_threshold == SIZE_MAX ? NDK_RX_STAGE_THRESHOLD : c->stage_threshold;
    size_t size = c->stage_size == SIZE_MAX ? NDK_RX_STAGE_SIZE : c->stage_size;
    for (int i = 0; i < 2; i++)
        ndk_test_rx_stage_set(sim_adapters[i], threshold, size);
}

void sim_net_start(struct sim_net *net)
{
    const struct sim_cfg *c = &net->cfg;
    if (net->shm) {
        CHECK(sim_shm_start(net));
        return;
    }
    sim_stage_apply(c);
    if (c->read_rtr) {
        /* B's connector answered A's Read RTR before B's data path started:
         * its zero-length Read Response leads B's stream. */
        uint8_t resp[20];
        size_t n = mpa_build_read_response0(0, 0, c->crc, resp);
        struct iovec v = {resp, n};
        net->end[1].tr.ops->writev(&net->end[1].tr, &v, 1);
    }
    ndk_qp_start(net->side[0].impl, &net->end[0].tr, c->crc, c->ird[0], c->ord[0], c->mulpdu, false);
    ndk_qp_start(net->side[1].impl, &net->end[1].tr, c->crc, c->ird[1], c->ord[1], c->mulpdu, c->gate_b);
    if (c->read_rtr) {
        ndk_qp_read_rtr_sent(net->side[0].impl);
        ndk_qp_read_rtr_received(net->side[1].impl);
    }
}

bool sim_close_obj(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    NTSTATUS st = fn(h, NULL, NULL);
    CHECK_EQ(st, STATUS_SUCCESS); /* nothing outstanding: the close is immediate */
    return st == STATUS_SUCCESS;
}

void sim_net_free(struct sim_net *net)
{
    if (!net)
        return;
    for (int i = 0; i < 2; i++) {
        struct sim_side *sd = &net->side[i];
        if (sd->qp) {
            sim_stop(net, i);
            sim_close_obj(&sd->qp->Header, sd->qp->Dispatch->NdkCloseQp);
        }
    }
    for (int i = 0; i < 2; i++) {
        struct sim_side *sd = &net->side[i];
        for (int k = 0; k < sd->nmws; k++)
            sim_close_obj(&sd->mws[k]->Header, sd->mws[k]->Dispatch->NdkCloseMw);
        for (int k = 0; k < sd->nmrs; k++)
            sim_close_obj(&sd->mrs[k]->Header, sd->mrs[k]->Dispatch->NdkCloseMr);
        for (int k = 0; k < sd->nlams; k++) {
            sd->ad->Dispatch->NdkReleaseLAM(sd->ad, sd->lams[k]);
            free(sd->lams[k]);
        }
        if (sd->cq)
            sim_close_obj(&sd->cq->Header, sd->cq->Dispatch->NdkCloseCq);
        if (sd->pd2)
            sim_close_obj(&sd->pd2->Header, sd->pd2->Dispatch->NdkClosePd);
        if (sd->pd)
            sim_close_obj(&sd->pd->Header, sd->pd->Dispatch->NdkClosePd);
    }
    for (int i = 0; i < net->nbufs; i++)
        sim_buf_free(&net->bufs[i]);
    free(net->dir[0].log);
    free(net->dir[1].log);
    free(net);
}

NDK_OPERATION_TYPE sim_kind_type(const struct sim_req *r)
{
    switch (r->kind) {
    case SK_SEND:
        return NdkOperationTypeSend;
    case SK_RECV:
        return r->inv ? NdkOperationTypeReceiveAndInvalidate : NdkOperationTypeReceive;
    case SK_WRITE:
        return NdkOperationTypeWrite;
    case SK_READ:
        return NdkOperationTypeRead;
    case SK_BIND:
        return NdkOperationTypeBind;
    case SK_FASTREG:
        return NdkOperationTypeFastRegister;
    default:
        return NdkOperationTypeInvalidate;
    }
}

void sim_drain(struct sim_net *net)
{
    for (int s = 0; s < 2; s++) {
        struct sim_side *sd = &net->side[s];
        NDK_RESULT_EX res[64];
        ULONG n;
        while ((n = sd->cq->Dispatch->NdkGetCqResultsEx(sd->cq, res, 64)) > 0) {
            for (ULONG k = 0; k < n; k++) {
                int idx = (int)((uintptr_t)res[k].RequestContext - 1);
                if (idx < 0 || idx >= net->nreq || net->req[idx].side != s || res[k].QPContext != sd) {
                    net->unknown_cqes++;
                    fprintf(stderr, "sim: completion for no request (ctx %p, side %d, status %s)\n",
                            res[k].RequestContext, s, ndk_status_name(res[k].Status));
                    continue;
                }
                struct sim_req *r = &net->req[idx];
                if (r->cqes++ == 0)
                    r->res = res[k];
                /* Exactly one completion per request, in posting order per
                 * queue (RFC 5040 rule 15; receives in posting order). */
                int *last = r->kind == SK_RECV ? &sd->last_rq_cqe : &sd->last_sq_cqe;
                if (idx <= *last) {
                    net->order_errors++;
                    fprintf(stderr, "sim: side %d completion of request %d after request %d\n", s, idx, *last);
                }
                *last = idx;
            }
        }
    }
}

const NDK_SGE *sim_sgl(const NDK_SGE *sge, int n)
{
    return n || !sim_null_sgl ? sge : NULL;
}

int sim_new_req(struct sim_net *net, int s, enum sim_kind kind, ULONG flags)
{
    if (net->nreq == SIM_MAX_REQ) {
        fprintf(stderr, "sim: too many requests\n");
        abort();
    }
    int idx = net->nreq++;
    sim_shm_cut_due(net, idx);
    struct sim_req *r = &net->req[idx];
    memset(r, 0, sizeof *r);
    r->side = s;
    r->kind = kind;
    r->flags = flags;
    r->peer = -1;
    r->signalled = !(flags & NDK_OP_FLAG_SILENT_SUCCESS);
    if (net->verbose)
        fprintf(stderr, "sim: %c posts request %d (kind %d)\n", "AB"[s], idx, (int)kind);
    return idx;
}

ULONG sim_sges(struct sim_net *net, int s, const size_t *lens, int n, NDK_SGE *sge,
               struct sim_span *spans)
{
    struct sim_side *sd = &net->side[s];
    for (int i = 0; i < n; i++) {
        size_t off = sim_alloc(net, s, lens[i]);
        sge[i].VirtualAddress = sd->arena->p + off;
        sge[i].Length = (ULONG)lens[i];
        sge[i].MemoryRegionToken = sd->tok_main;
        spans[i] = (struct sim_span){sd->arena, off, lens[i]};
    }
    return (ULONG)n;
}

uint8_t *sim_gather(const struct sim_span *sp, int n, size_t *total)
{
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += sp[i].len;
    uint8_t *out = malloc(t ? t : 1);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + o, sp[i].buf->want + sp[i].off, sp[i].len);
        o += sp[i].len;
    }
    *total = t;
    return out;
}

void sim_scatter_expect(const struct sim_span *sp, int n, const uint8_t *payload, size_t len)
{
    size_t o = 0;
    for (int i = 0; i < n && o < len; i++) {
        size_t take = sp[i].len < len - o ? sp[i].len : len - o;
        sim_buf_expect(sp[i].buf, sp[i].off, payload + o, take);
        o += take;
    }
}

int sim_recv_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *dst,
                  int ndst)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_RECV, 0);
    struct sim_req *r = &net->req[idx];
    r->ndst = ndst;
    memcpy(r->dst, dst, (size_t)ndst * sizeof *dst);
    r->post_status = sd->qp->Dispatch->NdkReceive(sd->qp, sim_ctx(idx), sim_sgl(sge, n), (ULONG)n);
    r->accepted = r->post_status == STATUS_SUCCESS;
    r->signalled = true;
    if (r->accepted)
        sd->rq[sd->rq_tail++ % SIM_RQ_FIFO] = idx;
    return idx;
}

int sim_recv(struct sim_net *net, int s, const size_t *lens, int n)
{
    NDK_SGE sge[NDK_MAX_SGE];
    struct sim_span dst[NDK_MAX_SGE];
    sim_sges(net, s, lens, n, sge, dst);
    return sim_recv_sges(net, s, sge, n, dst, n);
}

int sim_recv1(struct sim_net *net, int s, size_t len)
{
    return sim_recv(net, s, &len, 1);
}

int sim_send_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *src,
                  int nsrc, ULONG flags, bool inv, uint32_t token)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_SEND, flags);
    struct sim_req *r = &net->req[idx];
    size_t len;
    uint8_t *payload = sim_gather(src, nsrc, &len);
    r->len = len;
    r->inv = inv;
    r->inv_token = token;
    NDK_QP *qp = sd->qp;
    r->post_status = inv ? qp->Dispatch->NdkSendAndInvalidate(qp, sim_ctx(idx), sim_sgl(sge, n), (ULONG)n, flags, token)
                         : qp->Dispatch->NdkSend(qp, sim_ctx(idx), sim_sgl(sge, n), (ULONG)n, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    if (r->accepted && (flags & NDK_OP_FLAG_INLINE)) {
        /* Inline data was copied by the call: scribbling over the source
         * now must not change what the peer receives. */
        for (int i = 0; i < nsrc; i++) {
            memset(src[i].buf->p + src[i].off, 0xEE, src[i].len);
            memset(src[i].buf->init + src[i].off, 0xEE, src[i].len);
            memset(src[i].buf->want + src[i].off, 0xEE, src[i].len);
        }
    }
    struct sim_side *peer = &net->side[1 - s];
    if (r->accepted && peer->rq_head != peer->rq_tail) {
        int ridx = peer->rq[peer->rq_head++ % SIM_RQ_FIFO];
        struct sim_req *rr = &net->req[ridx];
        r->peer = ridx;
        rr->peer = idx;
        rr->inv = inv;
        rr->inv_token = token;
        rr->len = len;
        size_t room = 0;
        for (int i = 0; i < rr->ndst; i++)
            room += rr->dst[i].len;
        /* Only what fits is expected; a longer message is a protection
         * test's business, and nothing of it may be placed beyond room. */
        sim_scatter_expect(rr->dst, rr->ndst, payload, len < room ? len : room);
    }
    free(payload);
    return idx;
}

int sim_send(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags, bool inv,
             uint32_t token)
{
    NDK_SGE sge[NDK_MAX_SGE];
    struct sim_span src[NDK_MAX_SGE];
    sim_sges(net, s, lens, n, sge, src);
    return sim_send_sges(net, s, sge, n, src, n, flags, inv, token);
}

int sim_send1(struct sim_net *net, int s, size_t len, ULONG flags)
{
    return sim_send(net, s, &len, 1, flags, false, 0);
}

int sim_write_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *src,
                   int nsrc, ULONG flags, struct sim_buf *tbuf, size_t toff, uint32_t token,
                   uint64_t raddr)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_WRITE, flags);
    struct sim_req *r = &net->req[idx];
    size_t len;
    uint8_t *payload = sim_gather(src, nsrc, &len);
    r->len = len;
    r->post_status = sd->qp->Dispatch->NdkWrite(sd->qp, sim_ctx(idx), sim_sgl(sge, n), (ULONG)n, raddr, token, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    if (r->accepted && tbuf)
        sim_buf_expect(tbuf, toff, payload, len);
    free(payload);
    return idx;
}

int sim_write(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags,
              struct sim_buf *tbuf, size_t toff, uint32_t token, uint64_t raddr)
{
    NDK_SGE sge[NDK_MAX_SGE];
    struct sim_span src[NDK_MAX_SGE];
    sim_sges(net, s, lens, n, sge, src);
    return sim_write_sges(net, s, sge, n, src, n, flags, tbuf, toff, token, raddr);
}

int sim_write1(struct sim_net *net, int s, size_t len, ULONG flags, struct sim_buf *tbuf,
               size_t toff, uint32_t token, uint64_t raddr)
{
    return sim_write(net, s, &len, 1, flags, tbuf, toff, token, raddr);
}

int sim_read_sges(struct sim_net *net, int s, const NDK_SGE *sge, int n, const struct sim_span *dst,
                  int ndst, ULONG flags, struct sim_buf *sbuf, size_t soff, uint32_t token,
                  uint64_t raddr)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_READ, flags);
    struct sim_req *r = &net->req[idx];
    r->ndst = ndst;
    memcpy(r->dst, dst, (size_t)ndst * sizeof *dst);
    size_t len = 0;
    for (int i = 0; i < ndst; i++)
        len += dst[i].len;
    r->len = len;
    r->post_status = sd->qp->Dispatch->NdkRead(sd->qp, sim_ctx(idx), sim_sgl(sge, n), (ULONG)n, raddr, token, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    if (r->accepted && sbuf)
        sim_scatter_expect(r->dst, ndst, sbuf->want + soff, len);
    return idx;
}

int sim_read(struct sim_net *net, int s, const size_t *lens, int n, ULONG flags,
             struct sim_buf *sbuf, size_t soff, uint32_t token, uint64_t raddr)
{
    NDK_SGE sge[NDK_MAX_SGE];
    struct sim_span dst[NDK_MAX_SGE];
    sim_sges(net, s, lens, n, sge, dst);
    return sim_read_sges(net, s, sge, n, dst, n, flags, sbuf, soff, token, raddr);
}

int sim_read1(struct sim_net *net, int s, size_t len, ULONG flags, struct sim_buf *sbuf,
              size_t soff, uint32_t token, uint64_t raddr)
{
    return sim_read(net, s, &len, 1, flags, sbuf, soff, token, raddr);
}

NDK_MR *sim_frmr(struct sim_net *net, int s, NDK_PD *pd, ULONG max_pages)
{
    struct sim_side *sd = &net->side[s];
    NDK_MR *mr = NULL;
    if (sd->nmrs == SIM_MAX_MR || pd->Dispatch->NdkCreateMr(pd, TRUE, NULL, NULL, &mr) != STATUS_SUCCESS)
        return NULL;
    sd->mrs[sd->nmrs++] = mr;
    if (mr->Dispatch->NdkInitializeFastRegisterMr(mr, max_pages, TRUE, NULL, NULL) != STATUS_SUCCESS)
        return NULL;
    return mr;
}

NDK_LOGICAL_ADDRESS_MAPPING *sim_lam(struct sim_net *net, int s, struct sim_buf *b, ULONG *fbo)
{
    struct sim_side *sd = &net->side[s];
    MDL mdl = {.Next = NULL, .StartVa = b->p, .ByteOffset = 0, .ByteCount = (ULONG)b->len};
    ULONG size = 0;
    NDK_ADAPTER *ad = sd->ad;
    if (ad->Dispatch->NdkBuildLAM(ad, &mdl, b->len, NULL, NULL, NULL, &size, fbo) != STATUS_BUFFER_TOO_SMALL)
        return NULL;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = calloc(1, size);
    if (!lam || sd->nlams == 4)
        return NULL;
    if (ad->Dispatch->NdkBuildLAM(ad, &mdl, b->len, NULL, NULL, lam, &size, fbo) != STATUS_SUCCESS) {
        free(lam);
        return NULL;
    }
    sd->lams[sd->nlams++] = lam;
    return lam;
}

int sim_fastreg_pages(struct sim_net *net, int s, NDK_MR *mr, const NDK_LOGICAL_ADDRESS *pages,
                      ULONG npages, ULONG fbo, size_t len, uint64_t base, ULONG flags, uint32_t *token)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_FASTREG, flags);
    struct sim_req *r = &net->req[idx];
    r->post_status = sd->qp->Dispatch->NdkFastRegister(sd->qp, sim_ctx(idx), mr, npages, pages, fbo, len,
                                                       (PVOID)(uintptr_t)base, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    *token = mr->Dispatch->NdkGetRemoteTokenFromMr(mr);
    return idx;
}

int sim_fastreg(struct sim_net *net, int s, NDK_MR *mr, NDK_LOGICAL_ADDRESS_MAPPING *lam, ULONG fbo,
                struct sim_buf *b, uint64_t va_page, ULONG flags, uint32_t *token, uint64_t *base)
{
    *base = va_page + fbo;
    return sim_fastreg_pages(net, s, mr, lam->AdapterPageArray, lam->AdapterPageCount, fbo, b->len, *base, flags,
                             token);
}

NDK_MW *sim_mw(struct sim_net *net, int s, NDK_PD *pd)
{
    struct sim_side *sd = &net->side[s];
    NDK_MW *mw = NULL;
    if (sd->nmws == 4 || pd->Dispatch->NdkCreateMw(pd, NULL, NULL, &mw) != STATUS_SUCCESS)
        return NULL;
    sd->mws[sd->nmws++] = mw;
    return mw;
}

int sim_bind(struct sim_net *net, int s, NDK_MR *mr, NDK_MW *mw, void *va, size_t len, ULONG flags,
             uint32_t *token)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_BIND, flags);
    struct sim_req *r = &net->req[idx];
    r->post_status = sd->qp->Dispatch->NdkBind(sd->qp, sim_ctx(idx), mr, mw, va, len, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    *token = mw->Dispatch->NdkGetRemoteTokenFromMw(mw);
    return idx;
}

int sim_inv(struct sim_net *net, int s, NDK_OBJECT_HEADER *obj, ULONG flags)
{
    struct sim_side *sd = &net->side[s];
    int idx = sim_new_req(net, s, SK_INV, flags);
    struct sim_req *r = &net->req[idx];
    r->post_status = sd->qp->Dispatch->NdkInvalidate(sd->qp, sim_ctx(idx), obj, flags);
    r->accepted = r->post_status == STATUS_SUCCESS;
    return idx;
}

bool sim_span_exact(const struct sim_span *sp)
{
    return memcmp(sp->buf->p + sp->off, sp->buf->want + sp->off, sp->len) == 0;
}

unsigned sim_check_requests(struct sim_net *net, bool strict, bool allow_errors)
{
    unsigned bad = 0;
    for (int i = 0; i < net->nreq; i++) {
        struct sim_req *r = &net->req[i];
        const char *why = NULL;
        if (!r->accepted) {
            if (r->cqes)
                why = "completion for a request refused inline";
        } else if (r->cqes > 1) {
            why = "more than one completion";
        } else if (r->cqes == 0) {
            if (r->signalled)
                why = "no completion";
        } else if (r->res.Status == STATUS_SUCCESS && !r->signalled) {
            why = "a completion for a silent success";
        } else if (strict && r->res.Status != STATUS_SUCCESS) {
            why = "failed in a clean exchange";
        } else if (!allow_errors && r->res.Status != STATUS_SUCCESS && r->res.Status != STATUS_CANCELLED) {
            why = "an error status where only success or a flush may happen";
        } else if (r->res.Type != sim_kind_type(r) &&
                   !(r->kind == SK_RECV && r->res.Status != STATUS_SUCCESS &&
                     r->res.Type == NdkOperationTypeReceive)) {
            why = "wrong operation type";
        } else if (r->res.Status == STATUS_SUCCESS) {
            if (r->res.ProviderErrorCode != 0)
                why = "provider error code on success";
            if (r->kind == SK_RECV) {
                if (r->peer < 0)
                    why = "a receive completed with no send for it";
                else if (r->res.BytesTransferred != r->len)
                    why = "receive byte count differs from the send";
                else if (r->inv && r->res.TypeSpecificCompletionOutput != r->inv_token)
                    why = "wrong invalidated token";
            }
            if (r->kind == SK_RECV || r->kind == SK_READ) {
                for (int k = 0; k < r->ndst && !why; k++)
                    if (!sim_span_exact(&r->dst[k]))
                        why = "data differs from what was sent";
            }
        }
        if (why) {
            bad++;
            fprintf(stderr, "sim: request %d (side %d, kind %d, len %zu): %s [cqes %u status %s type %d]\n", i,
                    r->side, (int)r->kind, r->len, why, r->cqes, ndk_status_name(r->res.Status), (int)r->res.Type);
        }
    }
    if (net->unknown_cqes || net->order_errors)
        bad++;
    return bad;
}

void sim_check_posts_ok(const struct sim_net *net)
{
    for (int i = 0; i < net->nreq; i++)
        CHECK_EQ(net->req[i].post_status, STATUS_SUCCESS);
}

void sim_check_clean(struct sim_net *net)
{
    sim_drain(net);
    CHECK_EQ(sim_check_requests(net, true, false), 0);
    CHECK_EQ(sim_check_memory(net, true), 0);
}

unsigned sim_check_memory(struct sim_net *net, bool exact)
{
    unsigned bad = 0;
    for (int i = 0; i < net->nbufs; i++) {
        struct sim_buf *b = &net->bufs[i];
        if (!sim_canaries_ok(b)) {
            bad++;
            fprintf(stderr, "sim: buffer %d: a byte outside it changed\n", i);
        }
        size_t at = sim_buf_bad_byte(b, exact);
        if (at != SIZE_MAX) {
            bad++;
            fprintf(stderr, "sim: buffer %d byte %zu is 0x%02x (initially 0x%02x, expected 0x%02x, %s)\n", i, at,
                    b->p[at], b->init[at], b->want[at], b->target[at] ? "a target" : "no target");
        }
    }
    return bad;
}

bool sim_next_fpdu(const uint8_t *log, size_t len, size_t *pos, struct sim_fpdu *f)
{
    if (len - *pos < 2)
        return false;
    size_t ul = ddp_rd16(log + *pos);
    size_t total = mpa_fpdu_len(ul);
    if (len - *pos < total)
        return false;
    f->off = *pos;
    f->ulpdu_len = ul;
    f->ulpdu = log + *pos + 2;
    f->total = total;
    *pos += total;
    return true;
}

bool sim_is_terminate(const struct sim_fpdu *f)
{
    return f->ulpdu_len >= 2 && !(f->ulpdu[0] & DDP_CTRL_T) &&
           (f->ulpdu[1] & RDMAP_CTRL_OP_MASK) == RDMAP_OP_TERMINATE;
}

bool sim_fpdu_trailer_ok(const struct sim_fpdu *f, bool crc)
{
    const uint8_t *start = f->ulpdu - 2;
    size_t pad = mpa_pad_len(f->ulpdu_len);
    for (size_t i = 0; i < pad; i++)
        if (f->ulpdu[f->ulpdu_len + i])
            return false;
    uint8_t want[4] = {0, 0, 0, 0};
    if (crc)
        mpa_crc_store(crc32c_update(crc32c_init(), start, 2 + f->ulpdu_len + pad), want);
    return memcmp(f->ulpdu + f->ulpdu_len + pad, want, 4) == 0;
}

void sim_dump_terminates(const struct sim_net *net)
{
    for (int d = 0; d < 2; d++) {
        const struct sim_dir *dir = &net->dir[d];
        size_t pos = 0;
        struct sim_fpdu f;
        while (sim_next_fpdu(dir->log, dir->len, &pos, &f)) {
            if (!sim_is_terminate(&f))
                continue;
            struct term_msg tm;
            enum term_dec_result r = term_decode(f.ulpdu, f.ulpdu_len, &tm);
            fprintf(stderr,
                    "sim: %c sent a Terminate at stream offset %zu: (%u,%u,0x%02x) %s M%d D%d R%d len %zu dec %d\n",
                    "AB"[d], f.off, tm.layer, tm.etype, tm.code, term_describe(tm.layer, tm.etype, tm.code), tm.m,
                    tm.d, tm.r, f.ulpdu_len, (int)r);
            if (tm.ddp_hdr_copy) {
                fprintf(stderr, "sim:   offender (seg_len %u):", tm.seg_len);
                for (size_t i = 0; i < tm.ddp_hdr_copy_len; i++)
                    fprintf(stderr, " %02x", tm.ddp_hdr_copy[i]);
                fprintf(stderr, "\n");
            }
        }
    }
}

bool sim_token_dead(struct sim_net *net, int s, uint32_t token)
{
    struct sim_side *sd = &net->side[s];
    struct ndk_qp_impl *qp = sd->impl;
    return mem_map_remote(qp->obj.ad->dev->mem, qp->pd, qp, token, 0, 1, MEM_REMOTE_READ, NULL, 0, NULL) ==
           MEM_INVALID_STAG;
}

void sim_exchange_script(struct sim_net *net, bool compact, bool white_box)
{
    const size_t m = net->cfg.mulpdu;
    const size_t big = compact ? 700 : 20000;
    const size_t mid = compact ? 300 : 5000;
    struct sim_side *A = &net->side[SIM_A], *B = &net->side[SIM_B];

    /* Receives first: iWARP has no RNR, a Send without one is fatal. */
    size_t b_recv[][3] = {{0}, {1}, {m - 18}, {m - 17}, {3 * m + 5}, {big / 2, big / 2 + 64}, {100}, {50},
                          {m}, {compact ? 64 : 4096}};
    int b_nsge[] = {1, 1, 1, 1, 1, 2, 1, 1, 1, 1};
    for (size_t i = 0; i < sizeof b_nsge / sizeof b_nsge[0]; i++)
        sim_recv(net, SIM_B, b_recv[i], b_nsge[i]);
    sim_recv1(net, SIM_A, 700);
    sim_recv1(net, SIM_A, 0);
    sim_recv1(net, SIM_A, 333);

    /* Phase 1: everything pipelined, no waiting. */
    sim_send(net, SIM_A, NULL, 0, 0, false, 0);                          /* zero-length, no SGE */
    sim_send1(net, SIM_A, 1, 0);
    sim_send1(net, SIM_A, m - 18, 0);                                    /* exactly one FPDU */
    sim_send1(net, SIM_A, m - 17, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);   /* one octet more */
    sim_send1(net, SIM_A, 3 * m + 5, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);
    size_t gather[3] = {big / 3, big / 3 + 7, big / 3 + 11};
    sim_send(net, SIM_A, gather, 3, 0, false, 0);                        /* 3 SGEs into 2 */
    sim_send1(net, SIM_A, 100, NDK_OP_FLAG_INLINE);
    sim_send1(net, SIM_A, 50, NDK_OP_FLAG_SILENT_SUCCESS);
    sim_send1(net, SIM_B, 700, 0);
    sim_send1(net, SIM_B, 0, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT);

    size_t toff = sim_alloc(net, SIM_B, big + 64);
    sim_write(net, SIM_A, NULL, 0, 0, B->arena, toff, B->tok_main, sim_addr(B->arena, toff)); /* zero-length */
    sim_write1(net, SIM_A, 1, 0, B->arena, toff + 3, B->tok_main, sim_addr(B->arena, toff + 3));
    size_t wsg[2] = {big / 2 - 13, big / 2 + 13};
    sim_write(net, SIM_A, wsg, 2, NDK_OP_FLAG_SILENT_SUCCESS, B->arena, toff + 40, B->tok_main,
              sim_addr(B->arena, toff + 40));

    size_t soff = sim_alloc(net, SIM_B, mid + big);
    sim_read1(net, SIM_A, mid, 0, B->arena, soff, B->tok_main, sim_addr(B->arena, soff));
    size_t rsg[3] = {mid / 3, 17, mid / 2};
    sim_read(net, SIM_A, rsg, 3, 0, B->arena, soff + 100, B->tok_main, sim_addr(B->arena, soff + 100));
    sim_read(net, SIM_A, NULL, 0, 0, NULL, 0, B->tok_main, sim_addr(B->arena, soff)); /* zero-length, no SGE */
    sim_read1(net, SIM_A, 0, 0, NULL, 0, B->tok_main, sim_addr(B->arena, soff));     /* one empty SGE */
    sim_send1(net, SIM_A, m - 18, NDK_OP_FLAG_READ_FENCE);
    size_t aoff = sim_alloc(net, SIM_A, big);
    sim_read1(net, SIM_B, big, 0, A->arena, aoff, A->tok_main, sim_addr(A->arena, aoff));
    size_t awoff = sim_alloc(net, SIM_A, 400);
    sim_write1(net, SIM_B, 400, 0, A->arena, awoff, A->tok_main, sim_addr(A->arena, awoff));
    sim_send1(net, SIM_B, 333, 0);
    sim_run(net);

    /* Phase 2: a fast registration B hands out, used, then invalidated by
     * A's SendAndInvalidate. */
    NDK_MR *frmr = sim_frmr(net, SIM_B, B->pd, 8);
    struct sim_buf *fr1 = sim_new_buf(net, compact ? 2 * sim_page() + 100 : 5 * sim_page() + 100, 200);
    struct sim_buf *fr2 = sim_new_buf(net, compact ? 900 : 3 * sim_page(), 3000);
    if (!frmr || !fr1 || !fr2) {
        CHECK(!"fast-register set-up");
        return;
    }
    ULONG fbo1 = 0, fbo2 = 0;
    NDK_LOGICAL_ADDRESS_MAPPING *lam1 = sim_lam(net, SIM_B, fr1, &fbo1);
    NDK_LOGICAL_ADDRESS_MAPPING *lam2 = sim_lam(net, SIM_B, fr2, &fbo2);
    if (!lam1 || !lam2) {
        CHECK(!"NdkBuildLAM");
        return;
    }
    uint32_t t1 = 0;
    uint64_t base1 = 0;
    sim_fastreg(net, SIM_B, frmr, lam1, fbo1, fr1, SIM_FR_VA,
                NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE, &t1, &base1);
    sim_run(net);
    size_t ps = sim_page();
    /* The Write crosses the boundary of the registration's first page
     * (fbo1 octets into it), the Read comes from bytes nothing writes. */
    size_t w1off = ps - fbo1 - 150, w1 = compact ? 300 : 2 * ps + 77;
    sim_write1(net, SIM_A, w1, 0, fr1, w1off, t1, base1 + w1off);
    size_t r1off = compact ? ps + 200 : 3 * ps, r1 = compact ? 200 : 2 * ps;
    sim_read1(net, SIM_A, r1, 0, fr1, r1off, t1, base1 + r1off);
    sim_run(net);
    size_t inv_len = 64;
    sim_send(net, SIM_A, &inv_len, 1, NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT, true, t1);
    sim_run(net);
    if (white_box)
        CHECK(sim_token_dead(net, SIM_B, t1));

    /* Phase 3: a window over part of B's arena. */
    NDK_MW *mw = sim_mw(net, SIM_B, B->pd);
    size_t woff = sim_alloc(net, SIM_B, compact ? 1200 : 8192);
    size_t wlen = compact ? 1200 : 8192;
    uint32_t wt = 0;
    if (!mw) {
        CHECK(!"NdkCreateMw");
        return;
    }
    sim_bind(net, SIM_B, B->mr_main, mw, B->arena->p + woff, wlen,
             NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE, &wt);
    sim_run(net);
    sim_write1(net, SIM_A, compact ? 500 : 4000, 0, B->arena, woff + 10, wt, sim_addr(B->arena, woff + 10));
    sim_read1(net, SIM_A, compact ? 300 : 3000, 0, B->arena, woff + wlen - (compact ? 300 : 3000), wt,
              sim_addr(B->arena, woff + wlen - (compact ? 300 : 3000)));
    sim_run(net);
    sim_inv(net, SIM_B, &mw->Header, 0);
    sim_run(net);
    if (white_box)
        CHECK(sim_token_dead(net, SIM_B, wt));

    /* Phase 4: the same FRMR registered again (read only), read remotely,
     * then invalidated locally. */
    uint32_t t2 = 0;
    uint64_t base2 = 0;
    sim_fastreg(net, SIM_B, frmr, lam2, fbo2, fr2, SIM_FR_VA + 0x100000000ull, NDK_OP_FLAG_ALLOW_REMOTE_READ, &t2,
                &base2);
    sim_run(net);
    sim_read1(net, SIM_A, fr2->len - 1, 0, fr2, 1, t2, base2 + 1);
    sim_run(net);
    sim_inv(net, SIM_B, &frmr->Header, NDK_OP_FLAG_SILENT_SUCCESS);
    sim_run(net);
    if (white_box)
        CHECK(sim_token_dead(net, SIM_B, t2));
}
