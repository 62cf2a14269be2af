/*
 * What a QP does with a Terminate it receives, for Terminates the peer's
 * QP would never build but its wire can carry (found by fuzz/fuzz_terminate):
 *
 *  - with CRC on, a Terminate whose CRC is wrong is not a Terminate (RFC
 *    5044 section 8: an FPDU that fails its CRC is not passed on): it may
 *    not decide a request's status; the QP fails as for any damaged FPDU,
 *    the Read is flushed and the Terminate (2,0,2) goes back;
 *  - ProviderErrorCode of a request a Terminate fails is its control word
 *    as on the wire (docs/behaviour.md), also when that word is 0.
 *
 * A posts a Read to B; B is stopped before it reads anything, so the Read
 * stays unanswered, and the test writes B's side of the wire itself: one
 * Terminate FPDU copying A's Read Request.
 */
#include "simnet.h"

/* Appends octets to what B "sent" (B itself is stopped). */
static bool b_sends(struct sim_net *net, const uint8_t *p, size_t n)
{
    struct sim_dir *d = &net->dir[SIM_B];
    if (d->len + n > d->cap) {
        size_t cap = d->len + n + 4096;
        uint8_t *grown = realloc(d->log, cap);
        if (!grown)
            return false;
        d->log = grown;
        d->cap = cap;
    }
    memcpy(d->log + d->len, p, n);
    d->len += n;
    return true;
}

/* A with one Read out to B, B stopped; *rr: A's Read Request ULPDU (46). */
static struct sim_net *read_out(int *req, uint8_t rr[46])
{
    struct sim_cfg cfg;
    sim_cfg_from_seed(&cfg, SIM_WHOLE | 1u << 2 | 2u << 8 | 2u << 10); /* CRC on */
    struct sim_net *net = sim_net_new(&cfg, 7, 64u << 10);
    if (!net)
        return NULL;
    sim_net_start(net);
    sim_stop(net, SIM_B);
    struct sim_side *B = &net->side[SIM_B];
    *req = sim_read1(net, SIM_A, 100, 0, NULL, 0, B->tok_main, sim_addr(B->arena, 0));
    CHECK(sim_run(net));
    size_t pos = 0;
    struct sim_fpdu f;
    if (!sim_next_fpdu(net->dir[SIM_A].log, net->dir[SIM_A].len, &pos, &f) || f.ulpdu_len != 46) {
        sim_net_free(net);
        return NULL;
    }
    memcpy(rr, f.ulpdu, 46);
    return net;
}

/* B's Terminate arrives; returns A's Read request for the checks. */
static const struct sim_req *deliver(struct sim_net *net, int req, const uint8_t *u, size_t len, bool bad_crc)
{
    uint8_t fpdu[2 + TERM_LEN_MAX + 3 + 4];
    size_t n = mpa_fpdu_build(u, len, true, fpdu, sizeof fpdu);
    if (bad_crc)
        fpdu[n - 1] ^= 0x40;
    CHECK(n && b_sends(net, fpdu, n));
    net->dir[SIM_B].fin = true;
    CHECK(sim_run(net));
    CHECK_EQ(net->side[SIM_A].impl->dp.state, QP_ERROR);
    sim_stop(net, SIM_A);
    sim_drain(net);
    CHECK_EQ(sim_check_requests(net, false, true), 0);
    return &net->req[req];
}

/* The Terminates A sent: *n of them, the last one's control word in *ctrl. */
static void a_terminates(const struct sim_net *net, unsigned *n, uint32_t *ctrl)
{
    *n = 0;
    size_t pos = 0;
    struct sim_fpdu f;
    while (sim_next_fpdu(net->dir[SIM_A].log, net->dir[SIM_A].len, &pos, &f)) {
        if (!sim_is_terminate(&f))
            continue;
        (*n)++;
        struct term_msg m;
        CHECK_EQ(term_decode(f.ulpdu, f.ulpdu_len, &m), TERM_DEC_OK);
        *ctrl = m.ctrl;
    }
}

/* The Terminate of the reference in u: RDMAP protection error, invalid
 * STag, with the offending Read Request's DDP and RDMAP headers (its 46
 * octets in rr). Returns its length. */
static size_t invalid_stag_terminate(uint8_t u[TERM_LEN_MAX], const uint8_t rr[46])
{
    struct ddp_term t;
    ddp_term_set(&t, TERM_LAYER_RDMAP, TERM_ETYPE_RDMAP_PROTECTION, TERM_RP_INVALID_STAG, true);
    t.ddp_hdr = true;
    return term_encode(u, TERM_LEN_MAX, &t, 46, rr, 46, rr + 18);
}

/* The reference: a good Terminate naming the Read decides its status. */
static void test_terminate_names_read(void)
{
    int req;
    uint8_t rr[46];
    struct sim_net *net = read_out(&req, rr);
    REQUIRE(net);
    uint8_t u[TERM_LEN_MAX];
    size_t len = invalid_stag_terminate(u, rr);
    CHECK_EQ(len, 70);
    const struct sim_req *r = deliver(net, req, u, len, false);
    CHECK_EQ(r->cqes, 1);
    CHECK_EQ(r->res.Status, STATUS_ACCESS_VIOLATION);
    CHECK_EQ(r->res.ProviderErrorCode, ddp_rd32(u + 18));
    unsigned nterm;
    uint32_t ctrl;
    a_terminates(net, &nterm, &ctrl);
    CHECK_EQ(nterm, 0); /* never answered */
    sim_net_free(net);
}

static void test_terminate_with_bad_crc(void)
{
    int req;
    uint8_t rr[46];
    struct sim_net *net = read_out(&req, rr);
    REQUIRE(net);
    uint8_t u[TERM_LEN_MAX];
    size_t len = invalid_stag_terminate(u, rr);
    const struct sim_req *r = deliver(net, req, u, len, true);
    CHECK_EQ(r->cqes, 1);
    CHECK_EQ(r->res.Status, STATUS_CANCELLED);
    unsigned nterm;
    uint32_t ctrl = 0;
    a_terminates(net, &nterm, &ctrl);
    CHECK_EQ(nterm, 1);
    CHECK_EQ(ctrl, term_ctrl_pack(TERM_LAYER_LLP, TERM_ETYPE_LLP_MPA, TERM_LLP_CRC, false, false, false));
    sim_net_free(net);
}

/* Control word 0 ((0,0,0): RDMAP local catastrophic, no flags) with a
 * copy of A's Read Request header whose MSN names no Read: the oldest Read
 * takes the blame and reports 0, the word on the wire. */
static void test_terminate_with_zero_control_word(void)
{
    int req;
    uint8_t rr[46];
    struct sim_net *net = read_out(&req, rr);
    REQUIRE(net);
    struct ddp_term t;
    ddp_term_set(&t, 0, 0, 0, true);
    t.ddp_hdr = true;
    uint8_t u[TERM_LEN_MAX];
    size_t len = term_encode(u, sizeof u, &t, 46, rr, sizeof rr, NULL);
    CHECK_EQ(len, 42);
    ddp_wr32(u + 18, 0);                          /* no M, no D either */
    ddp_wr32(u + 24 + 10, ddp_rd32(rr + 10) + 7); /* an MSN A never used */
    const struct sim_req *r = deliver(net, req, u, len, false);
    CHECK_EQ(r->cqes, 1);
    CHECK_EQ(r->res.Status, STATUS_CONNECTION_ABORTED);
    CHECK_EQ(r->res.ProviderErrorCode, 0);
    sim_net_free(net);
}

int main(void)
{
    if (!sim_open_adapters()) {
        tl_skip_all("cannot open the loopback adapter");
        return tl_finish();
    }
    RUN(test_terminate_names_read);
    RUN(test_terminate_with_bad_crc);
    RUN(test_terminate_with_zero_control_word);
    sim_close_adapters();
    return tl_finish();
}
