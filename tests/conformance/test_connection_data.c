/* NdkGetConnectionData: every rule of its NDKPI page, and its window (rule
 * N1, docs/rules.md) with libndk's choices (docs/behaviour.md: RDS is
 * the number of octets the peer sent; STATUS_INVALID_PARAMETER for a NULL
 * buffer with a length; STATUS_INVALID_DEVICE_STATE before the window;
 * reject private data readable after STATUS_CONNECTION_REFUSED). */
#include "ndktest.h"

static void fill(unsigned char *b, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(seed + i * 7u);
}

static bool all_are(const unsigned char *b, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (b[i] != v)
            return false;
    return true;
}

/* NdkGetConnectionData into a buffer of cap bytes (of 600, all set to 0xEE
 * first) on connector c whose peer sent `sent` (RDS bytes): the first
 * min(cap, RDS) bytes copied and nothing else touched; STATUS_SUCCESS when
 * cap >= RDS, else STATUS_BUFFER_TOO_SMALL; RDS stored either way. */
static void check_copy(NDK_CONNECTOR *c, const unsigned char *sent, ULONG rds, ULONG cap)
{
    unsigned char buf[600];
    memset(buf, 0xEE, sizeof buf);
    ULONG len = cap;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, buf, &len),
                 cap >= rds ? STATUS_SUCCESS : STATUS_BUFFER_TOO_SMALL);
    CHECK_EQ(len, rds);
    ULONG n = cap < rds ? cap : rds;
    CHECK(n == 0 || memcmp(buf, sent, n) == 0);
    if (!all_are(buf + n, sizeof buf - n, 0xEE)) {
        tl_failures++;
        fprintf(stderr, "[%s] a buffer of %lu for %lu bytes: written past them\n", tl_current,
                (unsigned long)cap, (unsigned long)rds);
    }
}

/*
 * Every private-data rule of the seed pages, checked on connector c whose
 * peer sent `sent` (RDS = its length, docs/behaviour.md):
 *  - (NULL, 0) -> STATUS_SUCCESS and RDS stored;
 *  - (NULL, > 0) -> STATUS_INVALID_PARAMETER (a consumer must never do it);
 *  - a buffer: min(len, RDS) bytes copied, nothing more; STATUS_SUCCESS if
 *    len >= RDS, else STATUS_BUFFER_TOO_SMALL; RDS stored in both cases;
 *  - the IRD / ORD outputs are optional, and the same with or without data.
 * Runs on the main thread (CHECK). */
static void check_data_rules(NDK_CONNECTOR *c, const unsigned char *sent, ULONG rds)
{
    ULONG len = 0;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, rds);

    len = 1;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, NULL, &len), STATUS_INVALID_PARAMETER);
    len = 300;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, NULL, &len), STATUS_INVALID_PARAMETER);

    /* Larger than RDS, exactly RDS, and shorter than RDS. */
    check_copy(c, sent, rds, 600);
    if (rds > 0)
        check_copy(c, sent, rds, rds);
    static const ULONG shorts[] = {1, 3, 251};
    for (size_t i = 0; i < sizeof shorts / sizeof shorts[0]; i++)
        if (shorts[i] < rds)
            check_copy(c, sent, rds, shorts[i]);
    if (rds > 1)
        check_copy(c, sent, rds, rds - 1);

    /* IRD / ORD outputs: optional, and stable across calls and variants. */
    unsigned char buf[600];
    ULONG ird = 0xDEAD, ord = 0xBEEF, ird2 = 0xDEAD, ord2 = 0xBEEF;
    len = 0;
    CHECK_STATUS(nt_gcd(c, &ird, &ord, NULL, &len), STATUS_SUCCESS);
    CHECK(ird != 0xDEAD && ord != 0xBEEF);
    len = 0;
    CHECK_STATUS(nt_gcd(c, &ird2, NULL, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(ird2, ird);
    len = 0;
    CHECK_STATUS(nt_gcd(c, NULL, &ord2, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(ord2, ord);
    len = sizeof buf;
    ird2 = ord2 = 0xDEAD;
    CHECK_STATUS(nt_gcd(c, &ird2, &ord2, buf, &len), STATUS_SUCCESS);
    CHECK_EQ(ird2, ird);
    CHECK_EQ(ord2, ord);
    ird2 = ord2 = 0xDEAD;
    if (rds > 1) {
        len = 1;
        CHECK_STATUS(nt_gcd(c, &ird2, &ord2, buf, &len), STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ(len, rds);
    }
}

/* What the connect-event hook saw, calling from inside the callback. */
typedef struct in_event {
    NTSTATUS probe, bad, copy;
    ULONG probe_len, copy_len;
    unsigned char data[300];
    uint64_t slowest_ms;
} in_event;

static void gcd_in_event(nt_lsn *L, NDK_CONNECTOR *c, unsigned idx)
{
    (void)idx;
    in_event *r = L->user;
    uint64_t t0 = tl_now_ns();
    ULONG len = 0;
    r->probe = nt_gcd(c, NULL, NULL, NULL, &len);
    r->probe_len = len;
    len = 4;
    r->bad = nt_gcd(c, NULL, NULL, NULL, &len);
    len = sizeof r->data;
    r->copy = nt_gcd(c, NULL, NULL, r->data, &len);
    r->copy_len = len;
    r->slowest_ms = nt_ms_since(t0);
}

/* Inside the Connect completion (active side, Connect succeeded). */
static void gcd_in_connect_completion(nt_op *op, NTSTATUS st)
{
    NDK_CONNECTOR *c = ((nt_conn *)op->u1)->a;
    if (st != STATUS_SUCCESS)
        return;
    op->v[7] = 1; /* ran */
    ULONG len = 0;
    op->r[0] = nt_gcd(c, NULL, NULL, NULL, &len);
    op->v[0] = len;
    ULONG ird = 0, ord = 0;
    len = 0;
    op->r[1] = nt_gcd(c, &ird, &ord, NULL, &len);
}

/* The window, all the rules inside it, and the refusal before it. */
NT_CASE_FAM(rules_and_window)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    in_event ie;
    memset(&ie, 0, sizeof ie);
    nt_lsn_set_hook(L, gcd_in_event, &ie);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    unsigned char req[10], rep[7];
    fill(req, sizeof req, 1);
    fill(rep, sizeof rep, 50);

    /* Before any connect: outside the window. */
    ULONG len = 0;
    CHECK_STATUS(nt_gcd(c.a, NULL, NULL, NULL, &len), STATUS_INVALID_DEVICE_STATE);

    c.h_connect = gcd_in_connect_completion;
    nt_conn_connect(&c, 8, 8, req, sizeof req);
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(c.p);

    /* Passive side, from inside the connect event. */
    CHECK_STATUS(ie.probe, STATUS_SUCCESS);
    CHECK_EQ(ie.probe_len, sizeof req);
    CHECK_STATUS(ie.bad, STATUS_INVALID_PARAMETER);
    CHECK_STATUS(ie.copy, STATUS_SUCCESS);
    CHECK_EQ(ie.copy_len, sizeof req);
    CHECK(memcmp(ie.data, req, sizeof req) == 0);
    CHECK(ie.slowest_ms < NT_PROMPT_MS);

    /* Passive side after the event, before Accept: all rules, twice (the
     * data stays until Accept). */
    check_data_rules(c.p, req, sizeof req);
    check_data_rules(c.p, req, sizeof req);

    /* After Accept and CompleteConnect the answers stay the same
     * (test_connection_data_kept). */
    nt_conn_accept(&c, 8, 8, rep, sizeof rep);

    /* Active side once Connect succeeded, before CompleteConnect. */
    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    if (c.connect->v[7]) {
        /* From inside the Connect completion: in the window too. */
        CHECK_STATUS(c.connect->r[0], STATUS_SUCCESS);
        CHECK_EQ(c.connect->v[0], sizeof rep);
        CHECK_STATUS(c.connect->r[1], STATUS_SUCCESS);
    }
    check_data_rules(c.a, rep, sizeof rep);
    check_data_rules(c.a, rep, sizeof rep);

    nt_conn_complete(&c);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);

    nt_conn_close(&c);
    nt_pair_close(&as, &ps, L);
}

/* Private data arrives exactly as sent, for 0, 1 and the maximum number of
 * bytes each way (MaxCallerData with the connect, MaxCalleeData with the
 * accept), with the connector's RDS equal to the count sent. */
NT_CASE_FAM(private_data_sizes)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &o));
    const ULONG maxr = as.info.MaxCallerData, maxa = ps.info.MaxCalleeData;
    REQUIRE(maxr >= 1 && maxr <= 512 && maxa >= 1 && maxa <= 512);
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);

    struct {
        ULONG req, rep;
        bool null_when_empty;
    } cases[] = {
        {0, 0, true}, {0, 0, false}, {1, 1, true}, {maxr, maxa, true}, {maxr, 0, true},
        {0, maxa, true}, {2, 200, true},
    };
    unsigned char req[512], rep[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ULONG nreq = cases[i].req, nrep = cases[i].rep;
        fill(req, sizeof req, 11 + (unsigned)i);
        fill(rep, sizeof rep, 97 + (unsigned)i);
        const void *preq = nreq == 0 && cases[i].null_when_empty ? NULL : req;
        const void *prep = nrep == 0 && cases[i].null_when_empty ? NULL : rep;

        int f0 = tl_failures;
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        nt_conn_connect(&c, 4, 4, preq, nreq);
        c.p = nt_incoming(L, (unsigned)i, NT_WAIT_MS);
        if (!c.p) {
            nt_conn_close(&c);
            break;
        }
        check_data_rules(c.p, req, nreq);
        nt_conn_accept(&c, 4, 4, prep, nrep);
        NTSTATUS st = nt_finish(c.connect, NT_WAIT_MS);
        CHECK_STATUS(st, STATUS_SUCCESS);
        if (st == STATUS_SUCCESS) {
            check_data_rules(c.a, rep, nrep);
            nt_conn_complete(&c);
            CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
            CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
        }
        if (tl_failures != f0)
            fprintf(stderr, "    after private data case %zu (%u / %u bytes)\n", i, nreq, nrep);
        nt_conn_close(&c);
    }
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* Reject private data reaches the active side: its Connect fails with
 * STATUS_CONNECTION_REFUSED and NdkGetConnectionData still returns the
 * data (NdkReject, docs/behaviour.md). Sizes 0, 20 and MaxCalleeData.
 * After its NdkReject the passive connector is out of its window. */
NT_CASE_FAM(reject_data_on_active)
{
    nt_side as, ps;
    nt_lsn *L;
    REQUIRE(nt_pair_open(&as, &ps, &L, fam));
    const ULONG sizes[] = {20, 0, ps.info.MaxCalleeData};
    unsigned char rej[512];
    for (unsigned i = 0; i < 3; i++) {
        ULONG n = sizes[i];
        fill(rej, sizeof rej, 200 + i);
        nt_conn c;
        REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
        nt_conn_connect(&c, 2, 2, "hello", 5);
        c.p = nt_incoming(L, i, NT_WAIT_MS);
        if (!c.p) {
            nt_conn_close(&c);
            break;
        }
        CHECK_STATUS(c.p->Dispatch->NdkReject(c.p, n ? rej : NULL, n), STATUS_SUCCESS);
        ULONG len = 0;
        CHECK_STATUS(nt_gcd(c.p, NULL, NULL, NULL, &len), STATUS_INVALID_DEVICE_STATE);

        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_CONNECTION_REFUSED);
        len = 0;
        CHECK_STATUS(nt_gcd(c.a, NULL, NULL, NULL, &len), STATUS_SUCCESS);
        CHECK_EQ(len, n);
        unsigned char buf[600];
        memset(buf, 0xEE, sizeof buf);
        len = sizeof buf;
        CHECK_STATUS(nt_gcd(c.a, NULL, NULL, buf, &len), STATUS_SUCCESS);
        CHECK_EQ(len, n);
        CHECK(n == 0 || memcmp(buf, rej, n) == 0);
        CHECK(all_are(buf + n, sizeof buf - n, 0xEE));
        if (n > 2) {
            len = 2;
            CHECK_STATUS(nt_gcd(c.a, NULL, NULL, buf, &len), STATUS_BUFFER_TOO_SMALL);
            CHECK_EQ(len, n);
        }
        len = 3;
        CHECK_STATUS(nt_gcd(c.a, NULL, NULL, NULL, &len), STATUS_INVALID_PARAMETER);
        nt_conn_close(&c);
    }
    nt_pair_close(&as, &ps, L);
}

/* A connector that never connected, and one whose Connect is still
 * pending, are outside the window. */
NT_CASE_FAM(outside_window_before_connect)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as;
    REQUIRE(nt_side_open(&as, &o));
    NDK_CONNECTOR *c = nt_connector(&as);
    NDK_QP *qp = nt_qp(&as);
    REQUIRE(c && qp);
    ULONG len = 0, ird = 0, ord = 0;
    CHECK_STATUS(nt_gcd(c, &ird, &ord, NULL, &len), STATUS_INVALID_DEVICE_STATE);
    unsigned char buf[16];
    len = sizeof buf;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, buf, &len), STATUS_INVALID_DEVICE_STATE);

    /* Pending Connect: a peer that accepts TCP and never answers MPA. */
    nt_raw raw;
    REQUIRE(nt_raw_listen(&raw, fam));
    NDK_SOCKADDR src;
    ULONG srclen = nt_sa_loop(fam, 0, &src);
    nt_op *cop = nt_op_new(NT_REQ, "NdkConnect");
    nt_started(cop, c->Dispatch->NdkConnect(c, qp, &src.sa, srclen, &raw.addr.sa, raw.len, 1, 1,
                                            NULL, 0, nt_req_cb, cop));
    CHECK_STATUS(cop->returned, STATUS_PENDING);
    CHECK(nt_raw_accept(&raw, NT_WAIT_MS));
    len = 0;
    CHECK_STATUS(nt_gcd(c, NULL, NULL, NULL, &len), STATUS_INVALID_DEVICE_STATE);
    /* Closing cancels the Connect (docs/behaviour.md). */
    nt_op *cl = nt_close_start(c);
    CHECK_STATUS(nt_finish(cop, NT_WAIT_MS), STATUS_CANCELLED);
    CHECK(nt_close_wait(cl, NT_WAIT_MS));
    nt_raw_close(&raw);
    nt_close(qp);
    nt_side_close(&as);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(rules_and_window);
    RUN_FAM(private_data_sizes);
    RUN_FAM(reject_data_on_active);
    RUN_FAM(outside_window_before_connect);
    return tl_finish();
}
