/*
 * Protection violations, one per run: A (the requester) does something B
 * (the victim) must refuse. Checked for each:
 *
 *  - the exact Terminate B puts on the wire (RFC 5040 section 7, docs/rules.md
 *    R1-R22): it is the only Terminate, the last FPDU B sends, with a
 *    correct pad and CRC; its
 *    own header is untagged, L=1, opcode 7, QN 2, MSN 1, MO 0; its control
 *    word has the expected (layer, etype, code), M/D/R and no reserved bit;
 *    the copied DDP header is octet for octet that of the offending FPDU as
 *    A sent it, after the offender's ULPDU_Length; a Read Request offender's
 *    28-octet RDMA header is copied too (R);
 *  - A never answers it with a Terminate of its own;
 *  - completions on both sides, each exactly once: A's offending Read fails
 *    with the status of its error, A's other outstanding requests and
 *    receives are flushed (STATUS_CANCELLED), B's receive that the offending
 *    Send took fails, B's other receives are flushed;
 *  - nothing of the offending message is placed: every victim region is
 *    unchanged, its canary neighbours too, and guard pages fault on a stray
 *    write beyond a buffer.
 *
 * Violations: remote Write / Read to an invalid STag, an invalidated STag,
 * a region of another PD, out of bounds (first byte before the region, last
 * byte one past its end), a wrapping TO, missing rights (Write to a
 * read-only region, Read from a write-only one), the token of a fast
 * registration of pages that lie in no LAM (its post refused, so it never
 * mapped them) and of one whose LAM was released after it executed; a Send
 * into a receive buffer that is too small, a Send with no receive posted, a
 * Send whose MO is not where its message stands (forged on the wire: the
 * receiver reads a Send's payload together with the end of its header, so
 * the MO is checked after the read, and the Terminate must still quote the
 * header as sent and nothing land outside the receive it took);
 * SendAndInvalidate of another PD's STag or of an already invalid one; more
 * Read Requests than the IRD. Each runs with whole delivery and CRC,
 * byte-at-a-time delivery without CRC, and random chunks (printed seed)
 * with CRC.
 *
 * Further cases look at who a Terminate is charged to, and at a victim
 * whose socket is full (or takes only part of the Terminate) when it finds
 * the violation, under both teardown policies of simnet.h.
 *
 * The random runs print their seeds; NDK_SIM_SEED=<base seed> (printed
 * first) replays the whole file.
 *
 * NDK_SIM_TRANSPORT=shm (CTest's shm.sim.test_sim_protection) runs every
 * violation and the charged-request cases once over the shared-memory
 * model (simnet.h), with the same checks of completions and memory; what
 * is the wire's (the Terminate's octets, delivery modes, a full socket, a
 * forged MO, Read Requests queued behind a stalled socket) is iWARP's
 * alone. There, both transports must end, and a Send with no receive
 * waits for one the grace period (docs/behaviour.md) before it is refused.
 */
#include "simnet.h"

enum scen {
    W_INVALID, W_INVALIDATED, W_OTHER_PD, W_BEFORE, W_PAST_END, W_WRAP, W_READ_ONLY, W_NO_LAM, W_LAM_GONE,
    R_INVALID, R_INVALIDATED, R_OTHER_PD, R_BEFORE, R_PAST_END, R_WRAP, R_WRITE_ONLY, R_LAM_GONE,
    S_TOO_SMALL, S_NO_RECV, S_BAD_MO, I_OTHER_PD, I_INVALID,
    NSCEN
};

/* What B must send and what A's offending request must complete with. */
struct expect {
    const char *name;
    uint8_t layer, etype, code;
    bool m, d, r;
    size_t term_len;     /* ULPDU_Length: 22, 38, 42 or 70 */
    NTSTATUS status;     /* the offending request's status when it is charged */
};

static const struct expect expects[NSCEN] = {
    /* Rows 12-16 for a Write: DDP tagged errors with the DDP header (38
     * octets: + 2 + 14); access rights have no DDP code: RDMAP (0,1,2). */
    [W_INVALID] = {"write, invalid STag", 1, 1, 0x00, true, true, false, 38, STATUS_ACCESS_VIOLATION},
    [W_INVALIDATED] = {"write, invalidated STag", 1, 1, 0x00, true, true, false, 38, STATUS_ACCESS_VIOLATION},
    [W_OTHER_PD] = {"write, region of another PD", 1, 1, 0x02, true, true, false, 38, STATUS_ACCESS_VIOLATION},
    [W_BEFORE] = {"write, first byte before the region", 1, 1, 0x01, true, true, false, 38,
                  STATUS_REMOTE_RESOURCES},
    [W_PAST_END] = {"write, last byte one past the end", 1, 1, 0x01, true, true, false, 38,
                    STATUS_REMOTE_RESOURCES},
    [W_WRAP] = {"write, TO wraps 2^64", 1, 1, 0x03, true, true, false, 38, STATUS_REMOTE_RESOURCES},
    [W_READ_ONLY] = {"write to a read-only region", 0, 1, 0x02, true, true, false, 38, STATUS_ACCESS_VIOLATION},
    /* A fast registration of pages outside every LAM was refused; one
     * whose LAM went maps nothing: both tokens are invalid STags. */
    [W_NO_LAM] = {"write, fast registration of pages in no LAM", 1, 1, 0x00, true, true, false, 38,
                  STATUS_ACCESS_VIOLATION},
    [W_LAM_GONE] = {"write, fast registration whose LAM was released", 1, 1, 0x00, true, true, false, 38,
                    STATUS_ACCESS_VIOLATION},
    /* Row 19 for a Read Request source: RDMAP remote protection with the
     * DDP header and the RDMA header (70 octets: + 2 + 18 + 28). */
    [R_INVALID] = {"read, invalid STag", 0, 1, 0x00, true, true, true, 70, STATUS_ACCESS_VIOLATION},
    [R_INVALIDATED] = {"read, invalidated STag", 0, 1, 0x00, true, true, true, 70, STATUS_ACCESS_VIOLATION},
    [R_OTHER_PD] = {"read, region of another PD", 0, 1, 0x03, true, true, true, 70, STATUS_ACCESS_VIOLATION},
    [R_BEFORE] = {"read, first byte before the region", 0, 1, 0x01, true, true, true, 70, STATUS_REMOTE_RESOURCES},
    [R_PAST_END] = {"read, last byte one past the end", 0, 1, 0x01, true, true, true, 70, STATUS_REMOTE_RESOURCES},
    [R_WRAP] = {"read, TO wraps 2^64", 0, 1, 0x04, true, true, true, 70, STATUS_REMOTE_RESOURCES},
    [R_WRITE_ONLY] = {"read from a write-only region", 0, 1, 0x02, true, true, true, 70, STATUS_ACCESS_VIOLATION},
    [R_LAM_GONE] = {"read, fast registration whose LAM was released", 0, 1, 0x00, true, true, true, 70,
                    STATUS_ACCESS_VIOLATION},
    /* Rows 9 and 11: DDP untagged errors with the DDP header (42 octets). */
    [S_TOO_SMALL] = {"send into a receive that is too small", 1, 2, 0x05, true, true, false, 42,
                     STATUS_REMOTE_RESOURCES},
    [S_NO_RECV] = {"send with no receive posted", 1, 2, 0x02, true, true, false, 42, STATUS_REMOTE_RESOURCES},
    /* Row 10: (1,2,0x04), an MO other than the octets received so far. */
    [S_BAD_MO] = {"send with an MO not where its message stands", 1, 2, 0x04, true, true, false, 42,
                  STATUS_CONNECTION_ABORTED},
    /* Row 21: (0,1,9) for an STag of another stream, (0,2,9) for one that
     * does not exist (any more); DDP header, no RDMA header (a Send carries
     * none to copy). */
    [I_OTHER_PD] = {"send-and-invalidate, STag of another PD", 0, 1, 0x09, true, true, false, 42,
                    STATUS_ACCESS_VIOLATION},
    [I_INVALID] = {"send-and-invalidate, STag already invalid", 0, 2, 0x09, true, true, false, 42,
                   STATUS_ACCESS_VIOLATION},
};

/* The victim's regions, each with canary neighbours (lead 64). */
struct victim {
    struct sim_buf *bnd, *ro, *wo, *other, *fr, *loose, *gone;
    uint32_t t_bnd, t_ro, t_wo, t_other, t_dead, t_loose, t_gone;
    uint64_t fr_base, loose_base, gone_base;
};

/* The FPDU A sent that the Terminate must name. */
struct offender {
    uint8_t opcode;
    bool tagged;
    uint32_t stag;  /* tagged: the sink STag; Read Request: the source STag; SendInv: inv STag */
    uint64_t to;    /* tagged: the TO of the first segment; Read Request: the source TO */
    uint32_t msn, mo; /* untagged */
};

/* Options of a run. */
#define OPT_TRAILING_READ 0x1 /* a valid Read follows any offender: it must be flushed */
#define OPT_FULL_SOCKET 0x2   /* B's socket is full when it finds the violation */
#define OPT_FAILED_ONLY 0x4   /* tear down on `failed` only (not when the rx stream ends) */
#define OPT_SHORT_SOCKET 0x8  /* B's socket takes 10 octets per step when it finds the violation */

static bool setup_victim(struct sim_net *net, struct victim *v)
{
    struct sim_side *B = &net->side[SIM_B];
    v->bnd = sim_new_buf(net, 1000, 64);
    v->ro = sim_new_buf(net, 4096, 64);
    v->wo = sim_new_buf(net, 4096, 64);
    v->other = sim_new_buf(net, 4096, 64);
    v->fr = sim_new_buf(net, 4096, 64);
    v->loose = sim_new_buf(net, 4096, 64);
    v->gone = sim_new_buf(net, 4096, 64);
    if (!v->bnd || !v->ro || !v->wo || !v->other || !v->fr || !v->loose || !v->gone)
        return false;
    const ULONG all = NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ | NDK_MR_FLAG_ALLOW_REMOTE_WRITE;
    if (!sim_reg_mr(net, SIM_B, B->pd, v->bnd, 0, v->bnd->len, all, &v->t_bnd) ||
        !sim_reg_mr(net, SIM_B, B->pd, v->ro, 0, v->ro->len, NDK_MR_FLAG_ALLOW_REMOTE_READ, &v->t_ro) ||
        !sim_reg_mr(net, SIM_B, B->pd, v->wo, 0, v->wo->len, NDK_MR_FLAG_ALLOW_REMOTE_WRITE, &v->t_wo) ||
        !sim_reg_mr(net, SIM_B, B->pd2, v->other, 0, v->other->len, all, &v->t_other))
        return false;
    return true;
}

/* After start: a fast registration B hands out and then invalidates
 * itself, whose token is therefore dead. */
static bool kill_fast_registration(struct sim_net *net, struct victim *v)
{
    struct sim_side *B = &net->side[SIM_B];
    NDK_MR *frmr = sim_frmr(net, SIM_B, B->pd, 4);
    ULONG fbo = 0;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = frmr ? sim_lam(net, SIM_B, v->fr, &fbo) : NULL;
    if (!lam)
        return false;
    int fr = sim_fastreg(net, SIM_B, frmr, lam, fbo, v->fr, SIM_FR_VA,
                         NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE, &v->t_dead, &v->fr_base);
    int inv = sim_inv(net, SIM_B, &frmr->Header, 0);
    sim_run(net);
    sim_drain(net);
    return net->req[fr].cqes == 1 && net->req[fr].res.Status == STATUS_SUCCESS && net->req[inv].cqes == 1 &&
           net->req[inv].res.Status == STATUS_SUCCESS;
}

/*
 * After start: two fast registrations whose tokens must map nothing. One
 * names the pages of `loose`, which no LAM covers: NdkFastRegister must
 * refuse it inline (STATUS_INVALID_PARAMETER), leaving the token it had.
 * The other maps `gone` through its LAM and succeeds; then the LAM is
 * released, which unmaps it.
 */
static bool unmapped_registrations(struct sim_net *net, struct victim *v)
{
    struct sim_side *B = &net->side[SIM_B];
    const ULONG rw = NDK_OP_FLAG_ALLOW_REMOTE_READ | NDK_OP_FLAG_ALLOW_REMOTE_WRITE;
    NDK_MR *m1 = sim_frmr(net, SIM_B, B->pd, 4), *m2 = sim_frmr(net, SIM_B, B->pd, 4);
    ULONG fbo = 0;
    NDK_LOGICAL_ADDRESS_MAPPING *lam = m1 && m2 ? sim_lam(net, SIM_B, v->gone, &fbo) : NULL;
    if (!lam)
        return false;
    /* The pages of `loose`, as a LAM would list them. */
    size_t ps = sim_page();
    NDK_LOGICAL_ADDRESS pages[2];
    uint64_t first = sim_addr(v->loose, 0) - v->loose->lead;
    for (int i = 0; i < 2; i++)
        pages[i].QuadPart = (LONGLONG)(first + (uint64_t)i * ps);
    v->loose_base = SIM_FR_VA + 0x100000 + v->loose->lead;
    int refused = sim_fastreg_pages(net, SIM_B, m1, pages, 2, (ULONG)v->loose->lead, v->loose->len, v->loose_base,
                                    rw, &v->t_loose);
    int fr = sim_fastreg(net, SIM_B, m2, lam, fbo, v->gone, SIM_FR_VA + 0x200000, rw, &v->t_gone, &v->gone_base);
    sim_run(net);
    sim_drain(net);
    B->ad->Dispatch->NdkReleaseLAM(B->ad, lam);
    CHECK_EQ(net->req[refused].post_status, STATUS_INVALID_PARAMETER);
    return net->req[fr].cqes == 1 && net->req[fr].res.Status == STATUS_SUCCESS;
}

/* The first FPDU of A's stream that matches o. Only its header needs to be
 * there: A may have been torn down while writing the offender's payload. */
static bool find_offender(const struct sim_net *net, const struct offender *o, struct sim_fpdu *out)
{
    const struct sim_dir *dir = &net->dir[SIM_A];
    size_t pos = 0;
    while (dir->len - pos >= 4) {
        struct sim_fpdu f = {.off = pos, .ulpdu_len = ddp_rd16(dir->log + pos), .ulpdu = dir->log + pos + 2};
        f.total = mpa_fpdu_len(f.ulpdu_len);
        size_t have = dir->len - pos - 2;
        size_t hlen = ddp_hdr_len(f.ulpdu[0], f.ulpdu[1]);
        if (have < hlen)
            break;
        pos += f.total < dir->len - pos ? f.total : dir->len - pos;
        struct ddp_hdr h;
        if (!ddp_parse(f.ulpdu, have, &h) || h.tagged != o->tagged || h.opcode != o->opcode)
            continue;
        bool match;
        if (o->tagged) {
            match = h.stag == o->stag && h.to == o->to;
        } else if (o->opcode == RDMAP_OP_READ_REQ) {
            struct rdmap_rreq rr;
            match = rdmap_rreq_decode(f.ulpdu + DDP_UNTAGGED_HDR_LEN, have - DDP_UNTAGGED_HDR_LEN, &rr) &&
                    rr.src_stag == o->stag && rr.src_to == o->to && h.msn == o->msn;
        } else {
            match = h.msn == o->msn && h.mo == o->mo && (o->opcode != RDMAP_OP_SEND_INV || h.inv_stag == o->stag);
        }
        if (match) {
            *out = f;
            return true;
        }
    }
    return false;
}

/* B's stream ends with exactly the Terminate e describes, naming o. */
static void check_terminate(const struct sim_net *net, const struct expect *e, const struct offender *o)
{
    const struct sim_dir *dir = &net->dir[SIM_B];
    size_t pos = 0;
    struct sim_fpdu f, term;
    unsigned terms = 0, after = 0;
    while (sim_next_fpdu(dir->log, dir->len, &pos, &f)) {
        if (terms)
            after++;
        if (sim_is_terminate(&f)) {
            terms++;
            term = f;
        }
    }
    CHECK_EQ(pos, dir->len); /* no partial FPDU (nothing after the Terminate either) */
    CHECK_EQ(terms, 1);
    CHECK_EQ(after, 0);
    if (terms != 1)
        return;
    CHECK(sim_fpdu_trailer_ok(&term, net->cfg.crc));
    CHECK_EQ(term.ulpdu_len, e->term_len);
    /* The Terminate's own header (RFC 5040 section 4.8): 41 47, 0, QN 2,
     * MSN 1, MO 0. */
    CHECK_EQ(term.ulpdu[0], 0x41);
    CHECK_EQ(term.ulpdu[1], 0x47);
    CHECK_EQ(ddp_rd32(term.ulpdu + 2), 0);
    CHECK_EQ(ddp_rd32(term.ulpdu + 6), DDP_QN_TERMINATE);
    CHECK_EQ(ddp_rd32(term.ulpdu + 10), 1);
    CHECK_EQ(ddp_rd32(term.ulpdu + 14), 0);
    struct term_msg tm;
    CHECK_EQ(term_decode(term.ulpdu, term.ulpdu_len, &tm), TERM_DEC_OK);
    CHECK_EQ(tm.anomalies, 0);
    CHECK_EQ(tm.layer, e->layer);
    CHECK_EQ(tm.etype, e->etype);
    CHECK_EQ(tm.code, e->code);
    CHECK_EQ(tm.m, e->m);
    CHECK_EQ(tm.d, e->d);
    CHECK_EQ(tm.r, e->r);
    CHECK_EQ(tm.ctrl & TERM_CTRL_RSVD, 0);
    CHECK_EQ(tm.ctrl, term_ctrl_pack(e->layer, e->etype, e->code, e->m, e->d, e->r));
    struct sim_fpdu off;
    bool found = find_offender(net, o, &off);
    CHECK(found);
    if (!found || !e->d)
        return;
    size_t hlen = o->tagged ? DDP_TAGGED_HDR_LEN : DDP_UNTAGGED_HDR_LEN;
    CHECK(tm.ddp_hdr_copy != NULL);
    CHECK_EQ(tm.ddp_hdr_copy_len, hlen);
    if (tm.ddp_hdr_copy && tm.ddp_hdr_copy_len == hlen)
        CHECK(memcmp(tm.ddp_hdr_copy, off.ulpdu, hlen) == 0);
    /* DDP Segment Length: the offender's ULPDU_Length (src/wire/term.h). */
    CHECK_EQ(tm.seg_len, off.ulpdu_len);
    if (e->r) {
        CHECK(tm.rdma_hdr_copy != NULL);
        if (tm.rdma_hdr_copy)
            CHECK(memcmp(tm.rdma_hdr_copy, off.ulpdu + DDP_UNTAGGED_HDR_LEN, RDMAP_READ_REQ_HDR_LEN) == 0);
    } else {
        CHECK(tm.rdma_hdr_copy == NULL);
    }
}

/* A never sends a Terminate (one is never answered: rule R24). */
static void check_requester_silent(const struct sim_net *net)
{
    size_t pos = 0;
    struct sim_fpdu f;
    while (sim_next_fpdu(net->dir[SIM_A].log, net->dir[SIM_A].len, &pos, &f))
        CHECK(!sim_is_terminate(&f));
}

static void check_status(const struct sim_net *net, int idx, NTSTATUS want, const char *what)
{
    const struct sim_req *r = &net->req[idx];
    CHECK(r->accepted);
    CHECK_EQ(r->cqes, 1);
    if (r->cqes && r->res.Status != want) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: %s, want %s\n", tl_current, what, ndk_status_name(r->res.Status),
                ndk_status_name(want));
    }
}

static void check_status3(const struct sim_net *net, int idx, NTSTATUS a, NTSTATUS b, NTSTATUS c,
                          const char *what)
{
    const struct sim_req *r = &net->req[idx];
    CHECK(r->accepted);
    CHECK_EQ(r->cqes, 1);
    if (r->cqes && r->res.Status != a && r->res.Status != b && r->res.Status != c) {
        tl_failures++;
        fprintf(stderr, "[%s] %s: %s, want %s, %s or %s\n", tl_current, what, ndk_status_name(r->res.Status),
                ndk_status_name(a), ndk_status_name(b), ndk_status_name(c));
    }
}

static void check_status2(const struct sim_net *net, int idx, NTSTATUS a, NTSTATUS b, const char *what)
{
    check_status3(net, idx, a, b, b, what);
}

/* A request posted after the offender: over shared memory, whose threads
 * run while the test posts, the Terminate may have failed the QP first,
 * and the post is refused inline then (docs/behaviour.md: a request on a
 * QP after an error, STATUS_CONNECTION_INVALID) with no completion. False
 * when it was, so there is no completion to check. */
static bool posted_before_failure(const struct sim_net *net, int idx)
{
    const struct sim_req *r = &net->req[idx];
    if (!net->shm || r->post_status != STATUS_CONNECTION_INVALID)
        return true;
    CHECK_EQ(r->cqes, 0);
    return false;
}

/* S_BAD_MO: A's Send with this MSN claims this MO. The MO octets are
 * rewritten as soon as A writes them, so B never sees the original. The
 * CRC is left as it was: the MO check comes first. */
#define FORGED_MSN 2u
#define FORGED_MO 8u
static void forge_mo(struct sim_net *net, int id)
{
    if (id != SIM_A)
        return;
    struct sim_dir *d = &net->dir[SIM_A];
    size_t pos = 0;
    while (d->len - pos >= 2 + DDP_UNTAGGED_HDR_LEN) {
        uint8_t *u = d->log + pos + 2;
        if (!(u[0] & DDP_CTRL_T) && (u[1] & RDMAP_CTRL_OP_MASK) == RDMAP_OP_SEND &&
            ddp_rd32(u + 6) == DDP_QN_SEND && ddp_rd32(u + 10) == FORGED_MSN && ddp_rd32(u + 14) == 0)
            ddp_wr32(u + 14, FORGED_MO);
        size_t total = mpa_fpdu_len(ddp_rd16(d->log + pos));
        if (total > d->len - pos)
            break; /* its header was the last thing written */
        pos += total;
    }
}

static void run_scenario(enum scen sc, enum sim_mode mode, bool crc, uint64_t seed, unsigned opts)
{
    const struct expect *e = &expects[sc];
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, 0);
    cfg.mode = mode;
    cfg.crc = crc;
    cfg.mulpdu = 256;
    cfg.ord[0] = cfg.ord[1] = cfg.ird[0] = cfg.ird[1] = 4;
    if (mode == SIM_RANDOM) {
        /* Random chunks also meet every staging of the receive engine. */
        sim_cfg_stage(&cfg, (unsigned)seed, (unsigned)(seed >> 3));
        printf("[protection] %s, random chunks, seed=0x%016" PRIx64 " stage=%zd/%zd\n", e->name, seed,
               (ssize_t)cfg.stage_threshold, (ssize_t)cfg.stage_size);
    }
    int failures_before = tl_failures;
    struct sim_net *net = sim_net_new(&cfg, seed, 256u << 10);
    REQUIRE(net);
    /* The victim's Terminate goes out at once, unless the point is a full
     * socket. */
    net->end[SIM_B].roomy = !(opts & (OPT_FULL_SOCKET | OPT_SHORT_SOCKET));
    net->teardown_on_rx_end = !(opts & OPT_FAILED_ONLY);
    struct victim v;
    REQUIRE(setup_victim(net, &v));
    sim_net_start(net);
    REQUIRE(kill_fast_registration(net, &v));
    REQUIRE(unmapped_registrations(net, &v));
    struct sim_side *A = &net->side[SIM_A], *B = &net->side[SIM_B];

    /* B: a receive for A's first Send, then (unless the point is that
     * there is none) one the offending Send takes and spares. */
    int b_ok = sim_recv1(net, SIM_B, 200);
    int b_taken = -1, b_spare[2] = {-1, -1};
    if (sc == S_TOO_SMALL)
        b_taken = sim_recv1(net, SIM_B, 300);
    if (sc != S_NO_RECV) {
        b_spare[0] = sim_recv1(net, SIM_B, 100);
        b_spare[1] = sim_recv1(net, SIM_B, 100);
    }
    int a_recv[2] = {sim_recv1(net, SIM_A, 64), sim_recv1(net, SIM_A, 64)};
    int good_send = sim_send1(net, SIM_A, 100, 0);

    struct offender o = {0};
    int bad = -1;
    const size_t len = 16;
    struct sim_buf *main_b = B->arena;
    size_t moff = sim_alloc(net, SIM_B, 64);
    uint32_t bogus = (B->tok_main & ~0xFFu) | ((B->tok_main + 0x55) & 0xFF); /* a key never issued */
    switch (sc) {
    case W_INVALID:
    case R_INVALID:
        o.stag = bogus, o.to = sim_addr(main_b, moff);
        break;
    case W_INVALIDATED:
    case R_INVALIDATED:
        o.stag = v.t_dead, o.to = v.fr_base + 8;
        break;
    case W_OTHER_PD:
    case R_OTHER_PD:
        o.stag = v.t_other, o.to = sim_addr(v.other, 8);
        break;
    case W_BEFORE:
    case R_BEFORE:
        o.stag = v.t_bnd, o.to = sim_addr(v.bnd, 0) - 1;
        break;
    case W_PAST_END:
    case R_PAST_END:
        o.stag = v.t_bnd, o.to = sim_addr(v.bnd, v.bnd->len - len + 1);
        break;
    case W_WRAP:
    case R_WRAP:
        o.stag = v.t_bnd, o.to = UINT64_MAX - len + 2;
        break;
    case W_READ_ONLY:
        o.stag = v.t_ro, o.to = sim_addr(v.ro, 8);
        break;
    case W_NO_LAM:
        o.stag = v.t_loose, o.to = v.loose_base + 8;
        break;
    case W_LAM_GONE:
    case R_LAM_GONE:
        o.stag = v.t_gone, o.to = v.gone_base + 8;
        break;
    case R_WRITE_ONLY:
        o.stag = v.t_wo, o.to = sim_addr(v.wo, 8);
        break;
    default:
        break;
    }
    int trailing_read = -1;
    if (opts & (OPT_FULL_SOCKET | OPT_SHORT_SOCKET)) {
        /* Full (or nearly) from before the offender arrives until well
         * after: the Terminate cannot leave in one piece at once. */
        net->end[SIM_B].stall = 20;
        net->end[SIM_B].stall_room = (opts & OPT_SHORT_SOCKET) ? 10 : 0;
        net->end[SIM_B].wbudget = net->end[SIM_B].stall_room;
    }
    if (sc <= W_LAM_GONE) {
        o.opcode = RDMAP_OP_WRITE, o.tagged = true;
        bad = sim_write1(net, SIM_A, len, 0, NULL, 0, o.stag, o.to);
    } else if (sc <= R_LAM_GONE) {
        o.opcode = RDMAP_OP_READ_REQ, o.msn = 1;
        bad = sim_read1(net, SIM_A, len, 0, NULL, 0, o.stag, o.to);
        trailing_read = sim_read1(net, SIM_A, 64, 0, main_b, moff, B->tok_main, sim_addr(main_b, moff));
    } else if (sc == S_TOO_SMALL) {
        /* 600 octets in 238-octet segments into 300: the second segment
         * (MO 238) is the first that does not fit. */
        o.opcode = RDMAP_OP_SEND, o.msn = 2, o.mo = 238;
        bad = sim_send1(net, SIM_A, 600, 0);
    } else if (sc == S_NO_RECV) {
        o.opcode = RDMAP_OP_SEND, o.msn = 2, o.mo = 0;
        bad = sim_send1(net, SIM_A, 50, 0);
    } else if (sc == S_BAD_MO) {
        o.opcode = RDMAP_OP_SEND, o.msn = FORGED_MSN, o.mo = FORGED_MO;
        net->after_write = forge_mo;
        bad = sim_send1(net, SIM_A, 50, 0);
        b_taken = b_spare[0];
    } else {
        o.opcode = RDMAP_OP_SEND_INV, o.msn = 2, o.mo = 0;
        o.stag = sc == I_OTHER_PD ? v.t_other : v.t_dead;
        size_t l = 50;
        bad = sim_send(net, SIM_A, &l, 1, 0, true, o.stag);
        b_taken = net->req[bad].peer;
    }
    if ((opts & OPT_TRAILING_READ) && trailing_read < 0)
        trailing_read = sim_read1(net, SIM_A, 64, 0, main_b, moff, B->tok_main, sim_addr(main_b, moff));
    int trailing_send = sim_send1(net, SIM_A, 10, 0);
    CHECK(sim_run(net));
    if (net->shm) {
        /* B refused, A took the Terminate message: both transports end. */
        CHECK(sim_shm_wait_ended(net));
    } else {
        /* B's FIN follows its Terminate (nothing else may); A, having read
         * the Terminate, gives the connection up. */
        CHECK(net->end[SIM_B].shut_wr);
        CHECK(net->end[SIM_A].failed_calls > 0);
    }
    sim_stop(net, SIM_A);
    sim_stop(net, SIM_B);
    sim_drain(net);

    if (!net->shm) {
        check_terminate(net, e, &o);
        check_requester_silent(net);
    }

    /* Requester: the offending Read is charged with its error; a Write or
     * Send completed when it was handed over (iWARP has no acks), and if
     * the Terminate overtook it, it is flushed or charged with the error;
     * everything else outstanding is flushed. With partial writes the
     * Terminate can overtake even the Send before the offender: then that
     * one is flushed, never charged. */
    check_status2(net, good_send, STATUS_SUCCESS, STATUS_CANCELLED, "A's Send before the offender");
    if (o.opcode == RDMAP_OP_READ_REQ)
        check_status(net, bad, e->status, "A's offending Read");
    else
        check_status3(net, bad, STATUS_SUCCESS, STATUS_CANCELLED, e->status, "A's offending request");
    if (trailing_read >= 0 && posted_before_failure(net, trailing_read))
        check_status(net, trailing_read, STATUS_CANCELLED, "A's Read after the offender");
    if (posted_before_failure(net, trailing_send))
        check_status2(net, trailing_send, STATUS_SUCCESS, STATUS_CANCELLED, "A's Send after the offender");
    check_status(net, a_recv[0], STATUS_CANCELLED, "A's receive");
    check_status(net, a_recv[1], STATUS_CANCELLED, "A's receive");

    /* Victim: the first receive holds A's first Send; one the offending
     * Send took fails; the rest are flushed. */
    check_status(net, b_ok, STATUS_SUCCESS, "B's receive of the good Send");
    if (b_taken >= 0) {
        const struct sim_req *r = &net->req[b_taken];
        CHECK_EQ(r->cqes, 1);
        CHECK(r->res.Status != STATUS_SUCCESS);
    }
    for (int i = 0; i < 2; i++)
        if (b_spare[i] >= 0 && b_spare[i] != b_taken)
            check_status(net, b_spare[i], STATUS_CANCELLED, "B's spare receive");
    /* Exactly once for everything, in posting order; no stray byte. */
    CHECK_EQ(sim_check_requests(net, false, true), 0);
    CHECK_EQ(sim_check_memory(net, false), 0);
    for (int i = 0; i < net->nbufs; i++) {
        struct sim_buf *b = &net->bufs[i];
        if (b != main_b && b != A->arena)
            CHECK(memcmp(b->p, b->init, b->len) == 0); /* no victim region changed */
    }
    if (tl_failures != failures_before) {
        sim_dump_terminates(net);
        fprintf(stderr, "[%s] failed: %s, %s, crc %d, seed 0x%016" PRIx64 "\n", tl_current, e->name,
                net->shm ? "over shared memory" : sim_mode_name[mode], crc, seed);
    }
    sim_net_free(net);
}

static uint64_t g_base;

static void run_all(enum sim_mode mode, bool crc)
{
    for (int sc = 0; sc < NSCEN; sc++)
        run_scenario((enum scen)sc, mode, crc, sim_mix(g_base, (uint64_t)sc * 8 + mode), 0);
}

/* Over the shared-memory model: every violation but the forged MO (a
 * wire forgery) once, as there is no delivery mode. */
static void test_shm_violations(void)
{
    for (int sc = 0; sc < NSCEN; sc++)
        if (sc != S_BAD_MO)
            run_scenario((enum scen)sc, SIM_WHOLE, true, sim_mix(g_base, (uint64_t)sc * 8), 0);
}

static void test_whole_crc(void)
{
    run_all(SIM_WHOLE, true);
}

static void test_bytewise(void)
{
    run_all(SIM_BYTE, false);
}

static void test_random_chunks(void)
{
    run_all(SIM_RANDOM, true);
}

/*
 * A Terminate names its offender (the copied DDP header, and for a Read
 * Request its MSN and RDMA header): only that request may be charged with
 * the error (qp.h: "the request a received Terminate names gets st"). A
 * Write or Send already completed when it was handed over, so a valid Read
 * posted after it and still waiting for its response was not named and must
 * be flushed like everything else.
 */
static void test_charged_request(void)
{
    static const enum scen which[] = {W_INVALID, W_PAST_END, S_TOO_SMALL, I_INVALID};
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++)
        run_scenario(which[i], SIM_WHOLE, true, sim_mix(g_base, 500 + i), OPT_TRAILING_READ);
}

/* The victim's socket is full when it finds the violation: the Terminate
 * must still go out once the socket drains, before the connection goes. */
static void test_full_socket_connector_teardown(void)
{
    run_scenario(W_INVALID, SIM_WHOLE, true, sim_mix(g_base, 600), OPT_FULL_SOCKET);
    run_scenario(R_INVALID, SIM_WHOLE, true, sim_mix(g_base, 601), OPT_FULL_SOCKET);
}

static void test_full_socket_failed_only(void)
{
    run_scenario(W_INVALID, SIM_WHOLE, true, sim_mix(g_base, 610), OPT_FULL_SOCKET | OPT_FAILED_ONLY);
    run_scenario(R_INVALID, SIM_WHOLE, true, sim_mix(g_base, 611), OPT_FULL_SOCKET | OPT_FAILED_ONLY);
}

/* The socket takes only part of the Terminate at first: the rest must
 * follow before the connection goes (a torn FPDU is a lost stream). */
static void test_short_socket_failed_only(void)
{
    run_scenario(W_INVALID, SIM_WHOLE, true, sim_mix(g_base, 620), OPT_SHORT_SOCKET | OPT_FAILED_ONLY);
    run_scenario(S_NO_RECV, SIM_WHOLE, true, sim_mix(g_base, 621), OPT_SHORT_SOCKET | OPT_FAILED_ONLY);
}

/*
 * More Read Requests than the IRD (RFC 5040: the IRD is how many inbound
 * Read Requests the responder holds; docs/behaviour.md): A may have 8
 * outstanding, B takes `ird`, exactly that many, a power of two or not. B's
 * socket is full, so its answer to the first Read cannot leave: a Read
 * Request holds its slot until its response is all written, not merely
 * framed, so Read ird + 1 overflows the queue. B must send (0,2,0x07) with
 * the DDP header of that Read Request (MSN ird + 1; a Remote Operation error
 * carries no RDMA header), as the first FPDU it sends (nothing else had
 * started), and A must charge that Read only. connector_teardown: the owner
 * tears down as connector.c does, when ndk_qp_on_readable returns false on a
 * QP in error.
 */
static void run_ird(bool connector_teardown, uint32_t ird)
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, 0);
    cfg.mode = SIM_WHOLE;
    cfg.crc = true;
    cfg.mulpdu = 256;
    cfg.ord[0] = 8, cfg.ird[1] = ird;
    cfg.ord[1] = cfg.ird[0] = 1;
    int failures_before = tl_failures;
    struct sim_net *net = sim_net_new(&cfg, sim_mix(g_base, 700 + ird), 256u << 10);
    REQUIRE(net);
    net->teardown_on_rx_end = connector_teardown;
    sim_net_start(net);
    struct sim_side *B = &net->side[SIM_B];
    int b_recv = sim_recv1(net, SIM_B, 100);
    int a_recv = sim_recv1(net, SIM_A, 100);
    net->end[SIM_B].stall = 50;
    net->end[SIM_B].wbudget = 0;
    const uint32_t nrd = ird + 1;
    int rd[8];
    size_t off[8];
    for (uint32_t i = 0; i < nrd; i++) {
        off[i] = sim_alloc(net, SIM_B, 64);
        rd[i] = sim_read1(net, SIM_A, 64, 0, B->arena, off[i], B->tok_main, sim_addr(B->arena, off[i]));
    }
    CHECK(sim_run(net));
    sim_stop(net, SIM_A);
    sim_stop(net, SIM_B);
    sim_drain(net);
    struct offender o = {.opcode = RDMAP_OP_READ_REQ, .stag = B->tok_main, .to = sim_addr(B->arena, off[ird]),
                         .msn = nrd};
    static const struct expect e = {"read requests beyond the IRD", 0, 2, 0x07, true, true, false, 42,
                                    STATUS_CONNECTION_ABORTED};
    check_terminate(net, &e, &o);
    check_requester_silent(net);
    /* The first FPDU B ever sends is the Terminate: no Read Response had
     * started, so none may go ahead of it (docs/behaviour.md, Terminates:
     * at the next FPDU boundary). */
    struct sim_fpdu f;
    size_t pos = 0;
    bool first = sim_next_fpdu(net->dir[SIM_B].log, net->dir[SIM_B].len, &pos, &f);
    CHECK(first && sim_is_terminate(&f));
    /* The Read beyond the IRD is charged (any error but a flush); the ones
     * after the first are flushed; the first is flushed, or complete if its
     * response went out after all. */
    const struct sim_req *last = &net->req[rd[ird]];
    CHECK_EQ(last->cqes, 1);
    CHECK(last->res.Status != STATUS_SUCCESS && last->res.Status != STATUS_CANCELLED);
    for (uint32_t i = 1; i < ird; i++)
        check_status(net, rd[i], STATUS_CANCELLED, "A's Read within the IRD");
    check_status2(net, rd[0], STATUS_SUCCESS, STATUS_CANCELLED, "A's first Read");
    check_status(net, a_recv, STATUS_CANCELLED, "A's receive");
    check_status(net, b_recv, STATUS_CANCELLED, "B's receive");
    CHECK_EQ(sim_check_requests(net, false, true), 0);
    CHECK_EQ(sim_check_memory(net, false), 0);
    if (tl_failures != failures_before) {
        sim_dump_terminates(net);
        for (uint32_t i = 0; i < nrd; i++)
            fprintf(stderr, "[%s] IRD %u, read %u: %u completion(s), %s\n", tl_current, ird, i + 1,
                    net->req[rd[i]].cqes, ndk_status_name(net->req[rd[i]].res.Status));
    }
    sim_net_free(net);
}

static void test_ird_exceeded(void)
{
    run_ird(false, 1);
    run_ird(false, 3); /* not a power of two: exactly 3, not 4 */
}

static void test_ird_exceeded_connector_teardown(void)
{
    run_ird(true, 1);
    run_ird(true, 3);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!sim_open_adapters())
        return 1; /* lo always exists: failing to open it is a failure, not a skip */
    if (!sim_seed_from_env(&g_base))
        g_base = sim_fresh_seed();
    printf("[protection] base seed 0x%016" PRIx64 " (NDK_SIM_SEED replays it)\n", g_base);
    if (sim_shm_wanted()) {
        RUN(test_shm_violations);
        RUN(test_charged_request);
        sim_close_adapters();
        return tl_finish();
    }
    RUN(test_whole_crc);
    RUN(test_bytewise);
    RUN(test_random_chunks);
    RUN(test_charged_request);
    RUN(test_ird_exceeded);
    RUN(test_ird_exceeded_connector_teardown);
    RUN(test_full_socket_connector_teardown);
    RUN(test_full_socket_failed_only);
    RUN(test_short_socket_failed_only);
    sim_close_adapters();
    return tl_finish();
}
