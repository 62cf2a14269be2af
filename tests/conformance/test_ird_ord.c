/* IRD / ORD negotiation (the NdkConnect, NdkAccept and
 * NdkConnectWithSharedEndpoint parameter texts): each side caps its request
 * at the adapter maxima, then at the peer's opposite value, and
 * NdkGetConnectionData returns the effective values - on the active side
 * after Connect, on the passive side before Accept (docs/behaviour.md:
 * IRD = min(max, requester's ORD), ORD = min(max, requester's IRD)). */
#include "ndktest.h"

static ULONG min_u(ULONG a, ULONG b)
{
    return a < b ? a : b;
}

typedef struct limits {
    ULONG a_ird, a_ord; /* active request (Connect) */
    ULONG p_ird, p_ord; /* passive request (Accept) */
} limits;

/* One connection with the given requests; checks both sides' views. Peer
 * maxima count as 128 when the peer sent none (MPA revision 1 active side:
 * rev1_active). */
static void run_limits(int fam, nt_side *as, nt_side *ps, nt_lsn *L, limits q, bool use_sep,
                       bool rev1_active)
{
    const ULONG amax_i = as->info.MaxInboundReadLimit, amax_o = as->info.MaxOutboundReadLimit;
    const ULONG pmax_i = ps->info.MaxInboundReadLimit, pmax_o = ps->info.MaxOutboundReadLimit;
    /* Step 1: each side's request capped by its adapter. */
    ULONG a_ird = min_u(q.a_ird, amax_i), a_ord = min_u(q.a_ord, amax_o);
    ULONG p_ird = min_u(q.p_ird, pmax_i), p_ord = min_u(q.p_ord, pmax_o);
    /* No IRD/ORD on the wire: the peer's values count as the maxima. */
    ULONG a_ird_wire = rev1_active ? pmax_o : a_ird, a_ord_wire = rev1_active ? pmax_i : a_ord;
    ULONG p_ird_wire = rev1_active ? amax_o : p_ird, p_ord_wire = rev1_active ? amax_i : p_ord;
    /* Passive before Accept: its maxima capped by the requester's values. */
    const ULONG want_p_ird = min_u(pmax_i, a_ord_wire), want_p_ord = min_u(pmax_o, a_ird_wire);
    /* Active after Connect: its capped request capped by the acceptor's. */
    const ULONG want_a_ird = min_u(a_ird, p_ord_wire), want_a_ord = min_u(a_ord, p_ird_wire);

    int f0 = tl_failures;
    nt_conn c;
    REQUIRE(nt_conn_init(&c, fam, as, ps, L));
    NDK_SHARED_ENDPOINT *sep = NULL;
    unsigned idx = nt_lsn_count(L);
    if (use_sep) {
        NDK_SOCKADDR sa;
        ULONG len = nt_sa_loop(fam, 0, &sa);
        CHECK_STATUS(nt_create_sep(as->ad, &sa, len, &sep), STATUS_SUCCESS);
        REQUIRE(sep);
        nt_conn_connect_sep(&c, sep, q.a_ird, q.a_ord, NULL, 0);
    } else {
        nt_conn_connect(&c, q.a_ird, q.a_ord, NULL, 0);
    }
    c.p = nt_incoming(L, idx, NT_WAIT_MS);
    if (c.p) {
        ULONG ird = 0xDEAD, ord = 0xDEAD, len = 0;
        CHECK_STATUS(nt_gcd(c.p, &ird, &ord, NULL, &len), STATUS_SUCCESS);
        CHECK_EQ(ird, want_p_ird);
        CHECK_EQ(ord, want_p_ord);
        nt_conn_accept(&c, q.p_ird, q.p_ord, NULL, 0);
        NTSTATUS st = nt_finish(c.connect, NT_WAIT_MS);
        CHECK_STATUS(st, STATUS_SUCCESS);
        if (st == STATUS_SUCCESS) {
            ird = ord = 0xDEAD;
            len = 0;
            CHECK_STATUS(nt_gcd(c.a, &ird, &ord, NULL, &len), STATUS_SUCCESS);
            CHECK_EQ(ird, want_a_ird);
            CHECK_EQ(ord, want_a_ord);
            /* The connection completes with any negotiated values. */
            nt_conn_complete(&c);
            CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
            CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
        }
    }
    if (tl_failures != f0)
        fprintf(stderr, "    active asked IRD %u ORD %u, passive IRD %u ORD %u%s%s\n", q.a_ird,
                q.a_ord, q.p_ird, q.p_ord, use_sep ? " (shared endpoint)" : "",
                rev1_active ? " (MPA rev 1)" : "");
    nt_conn_close(&c);
    nt_close(sep);
}

static void run_table(int fam, const limits *t, size_t n, bool use_sep)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o));
    REQUIRE(nt_side_open(&ps, &o));
    /* docs/behaviour.md: both maxima are 128 on every libndk adapter. */
    CHECK_EQ(as.info.MaxInboundReadLimit, 128);
    CHECK_EQ(as.info.MaxOutboundReadLimit, 128);
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    for (size_t i = 0; i < n; i++)
        run_limits(fam, &as, &ps, L, t[i], use_sep, false);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

/* Different values on every side and direction: active IRD 3 ORD 7,
 * passive IRD 5 ORD 2 -> passive sees IRD 7 ORD 3, active IRD 2 ORD 5. */
NT_CASE_FAM(asymmetric)
{
    static const limits t[] = {
        {3, 7, 5, 2},
        {7, 3, 2, 5},
        {1, 16, 16, 1},
        {9, 9, 9, 9},
    };
    run_table(fam, t, sizeof t / sizeof t[0], false);
}

/* Requests above MaxInboundReadLimit / MaxOutboundReadLimit are capped
 * (1000 -> 128), on either side, with the other side's values still
 * applying. */
NT_CASE_FAM(above_maxima)
{
    static const limits t[] = {
        {1000, 1000, 1000, 1000},
        {1000, 5, 2, 1000},
        {MAXULONG, MAXULONG, 129, 128},
        {128, 128, MAXULONG, 4},
    };
    run_table(fam, t, sizeof t / sizeof t[0], false);
}

/* Zero is a valid request (no RDMA reads that way) and wins every min. */
NT_CASE_FAM(zero)
{
    static const limits t[] = {
        {0, 0, 5, 5},
        {4, 4, 0, 0},
        {0, 3, 3, 0},
        {0, 0, 0, 0},
        {1000, 0, 0, 1000},
    };
    run_table(fam, t, sizeof t / sizeof t[0], false);
}

/* Seed 002: NdkConnectWithSharedEndpoint negotiates the same way. */
NT_CASE_FAM(shared_endpoint)
{
    static const limits t[] = {
        {3, 7, 5, 2},
        {1000, 1000, 6, 1000},
        {0, 2, 2, 0},
    };
    run_table(fam, t, sizeof t / sizeof t[0], true);
}

/* docs/behaviour.md: from an MPA revision 1 peer (no IRD/ORD on the wire)
 * the peer's values count as the adapter maxima - seen by the passive side
 * of a revision 1 Request and by the active side of the revision 1 Reply. */
NT_CASE_FAM(mpa_rev1_peer)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_OPEN_OPTIONS o1 = nt_opts();
    o1.Flags = NDK_OPEN_FLAG_MPA_REV1;
    nt_side as, ps;
    REQUIRE(nt_side_open(&as, &o1));
    REQUIRE(nt_side_open(&ps, &o));
    nt_lsn *L = nt_listen(&ps, fam);
    REQUIRE(L);
    static const limits t[] = {{3, 7, 5, 2}, {1000, 0, 0, 1000}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        run_limits(fam, &as, &ps, L, t[i], false, true);
    nt_lsn_close(L);
    nt_side_close(&as);
    nt_side_close(&ps);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(asymmetric);
    RUN_FAM(above_maxima);
    RUN_FAM(zero);
    RUN_FAM(shared_endpoint);
    RUN_FAM(mpa_rev1_peer);
    return tl_finish();
}
