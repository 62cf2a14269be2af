/*
 * NdkGetConnectionData keeps answering after NdkAccept (passive side) and
 * NdkCompleteConnect (active side), with the same IRD, ORD and private
 * data as in its window, while the connection is up and after it ended,
 * until the connector is closed (docs/behaviour.md, "Private data").
 * NDKPI says consumers do not call it then; consumers written for Windows
 * providers do, and a provider that refused them would break them.
 */
#include "ndktest.h"

typedef struct answer {
    NTSTATUS st;
    ULONG ird, ord, len;
    unsigned char data[300];
} answer;

static answer ask(NDK_CONNECTOR *c)
{
    answer a;
    memset(&a, 0, sizeof a);
    a.len = sizeof a.data;
    a.st = nt_gcd(c, &a.ird, &a.ord, a.data, &a.len);
    return a;
}

#define CHECK_SAME(got, want)                                                                \
    do {                                                                                     \
        CHECK_STATUS((got).st, (want).st);                                                   \
        CHECK_EQ((got).ird, (want).ird);                                                     \
        CHECK_EQ((got).ord, (want).ord);                                                     \
        CHECK_EQ((got).len, (want).len);                                                     \
        CHECK(memcmp((got).data, (want).data, sizeof (got).data) == 0);                      \
    } while (0)

/* The passive side accepts with limits below what it read, so "the same"
 * is told apart from "recomputed" on both sides. */
NT_CASE_FAM(same_answers_after_accept_and_complete)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    unsigned char req[17], rep[9];
    for (unsigned i = 0; i < sizeof req; i++)
        req[i] = (unsigned char)(0x40 + i);
    for (unsigned i = 0; i < sizeof rep; i++)
        rep[i] = (unsigned char)(0x90 + i);

    nt_conn_connect(&c, 12, 6, req, sizeof req);
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    REQUIRE(c.p);
    answer p0 = ask(c.p);
    CHECK_STATUS(p0.st, STATUS_SUCCESS);
    CHECK_EQ(p0.ird, 6);
    CHECK_EQ(p0.ord, 12);
    CHECK_EQ(p0.len, sizeof req);
    CHECK(memcmp(p0.data, req, sizeof req) == 0);

    nt_conn_accept(&c, 3, 2, rep, sizeof rep);
    answer p1 = ask(c.p);
    CHECK_SAME(p1, p0);

    CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
    answer a0 = ask(c.a);
    CHECK_STATUS(a0.st, STATUS_SUCCESS);
    CHECK_EQ(a0.ird, 2); /* min(12, the acceptor's ORD 2) */
    CHECK_EQ(a0.ord, 3); /* min(6, the acceptor's IRD 3) */
    CHECK_EQ(a0.len, sizeof rep);
    CHECK(memcmp(a0.data, rep, sizeof rep) == 0);

    nt_conn_complete(&c);
    answer a1 = ask(c.a);
    CHECK_SAME(a1, a0);
    CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);

    /* Established, then disconnected: still the same. */
    answer a2 = ask(c.a), p2 = ask(c.p);
    CHECK_SAME(a2, a0);
    CHECK_SAME(p2, p0);
    nt_op *da, *dp;
    nt_disconnect(c.a, &da);
    nt_disconnect(c.p, &dp);
    CHECK_STATUS(nt_finish(da, NT_WAIT_MS), STATUS_SUCCESS);
    CHECK_STATUS(nt_finish(dp, NT_WAIT_MS), STATUS_SUCCESS);
    answer a3 = ask(c.a), p3 = ask(c.p);
    CHECK_SAME(a3, a0);
    CHECK_SAME(p3, p0);

    /* The size probe too. */
    ULONG len = 0;
    CHECK_STATUS(nt_gcd(c.a, NULL, NULL, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, sizeof rep);
    len = 0;
    CHECK_STATUS(nt_gcd(c.p, NULL, NULL, NULL, &len), STATUS_SUCCESS);
    CHECK_EQ(len, sizeof req);

    nt_pair_conn_close(&as, &ps, L, &c);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(same_answers_after_accept_and_complete);
    return tl_finish();
}
