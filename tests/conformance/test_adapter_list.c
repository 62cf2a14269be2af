/* ndk_list_adapters: every adapter with its addresses, "lo" among them, and
 * the loopback adapter owning all of 127.0.0.0/8 (docs/behaviour.md
 * "Adapters"). */
#include "ndktest.h"

#include <net/if.h>

NT_CASE(list_adapters)
{
    /* Size probe: no list, room for 0 -> too small, count = adapters. */
    ULONG n = 0;
    NTSTATUS st = ndk_list_adapters(NULL, &n);
    CHECK_STATUS(st, STATUS_BUFFER_TOO_SMALL);
    REQUIRE(n >= 1 && n < 1000);

    /* A roomier list than needed: success, count = adapters. */
    ULONG cap = n + 2;
    NDK_ADAPTER_DESCRIPTION *all = calloc(cap, sizeof *all);
    REQUIRE(all);
    ULONG m = cap;
    st = ndk_list_adapters(all, &m);
    CHECK_STATUS(st, STATUS_SUCCESS);
    CHECK_EQ(m, n);

    const NDK_ADAPTER_DESCRIPTION *lo = NULL;
    for (ULONG i = 0; i < m && i < cap; i++) {
        const NDK_ADAPTER_DESCRIPTION *d = &all[i];
        CHECK(d->Name[0] != '\0');
        CHECK(memchr(d->Name, '\0', sizeof d->Name) != NULL);
        /* Only interfaces with an address are adapters. */
        CHECK(d->AddressCount >= 1 && d->AddressCount <= NDK_MAX_ADAPTER_ADDRESSES);
        for (ULONG k = 0; k < d->AddressCount && k < NDK_MAX_ADAPTER_ADDRESSES; k++) {
            int f = d->Addresses[k].sa.sa_family;
            CHECK(f == AF_INET || f == AF_INET6);
            CHECK_EQ(nt_sa_port(&d->Addresses[k]), 0);
        }
        if (strcmp(d->Name, "lo") == 0)
            lo = d;
    }
    REQUIRE(lo != NULL);
    CHECK(lo->Flags & NDK_ADAPTER_DESC_LOOPBACK);
    CHECK(lo->Flags & NDK_ADAPTER_DESC_UP);
    CHECK_EQ(lo->IfIndex, if_nametoindex("lo"));
    CHECK(lo->Mtu > 0);
    CHECK(nt_desc_has_loop(lo, AF_INET));

    /* Too small a list: the entries that fit are filled, nothing beyond
     * them is written, the count says how many exist. */
    if (n >= 2) {
        NDK_ADAPTER_DESCRIPTION *part = calloc(n, sizeof *part);
        REQUIRE(part);
        memset(part, 0xA5, n * sizeof *part);
        NDK_ADAPTER_DESCRIPTION canary;
        memset(&canary, 0xA5, sizeof canary);
        ULONG k = n - 1;
        st = ndk_list_adapters(part, &k);
        CHECK_STATUS(st, STATUS_BUFFER_TOO_SMALL);
        CHECK_EQ(k, n);
        for (ULONG i = 0; i + 1 < n; i++) {
            bool known = false;
            for (ULONG j = 0; j < n; j++)
                if (strncmp(part[i].Name, all[j].Name, sizeof part[i].Name) == 0)
                    known = true;
            CHECK(known);
        }
        CHECK(memcmp(&part[n - 1], &canary, sizeof canary) == 0);
        free(part);
    }
    /* Room for one when more exist: same pattern. */
    NDK_ADAPTER_DESCRIPTION one[2];
    memset(one, 0xA5, sizeof one);
    NDK_ADAPTER_DESCRIPTION canary;
    memset(&canary, 0xA5, sizeof canary);
    ULONG k = 1;
    st = ndk_list_adapters(one, &k);
    CHECK_STATUS(st, n > 1 ? STATUS_BUFFER_TOO_SMALL : STATUS_SUCCESS);
    CHECK_EQ(k, n);
    CHECK(one[0].Name[0] != '\0');
    CHECK(memcmp(&one[1], &canary, sizeof canary) == 0);
    free(all);
}

/* docs/behaviour.md: on a loopback interface every address of 127.0.0.0/8
 * is local - a listener on 127.0.0.2 takes a connection from 127.0.0.3. */
NT_CASE(loopback_owns_127_8)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    nt_side s;
    REQUIRE(nt_side_open(&s, &o));
    nt_lsn *L = nt_lsn_new();
    CHECK_STATUS(nt_create_listener(s.ad, nt_connect_event, L, &L->l), STATUS_SUCCESS);
    REQUIRE(L->l);
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(AF_INET, 0, &sa);
    sa.in4.sin_addr.s_addr = htonl(0x7F000002);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    L->addrlen = sizeof L->addr;
    CHECK_STATUS(L->l->Dispatch->NdkGetLocalAddress(L->l, &L->addr.sa, &L->addrlen),
                 STATUS_SUCCESS);
    CHECK_EQ(ntohl(L->addr.in4.sin_addr.s_addr), 0x7F000002);

    nt_conn c;
    REQUIRE(nt_conn_init(&c, AF_INET, &s, &s, L));
    NDK_SOCKADDR src;
    ULONG srclen = nt_sa_loop(AF_INET, 0, &src);
    src.in4.sin_addr.s_addr = htonl(0x7F000003);
    c.connect = nt_op_new(NT_REQ, "NdkConnect");
    nt_started(c.connect, c.a->Dispatch->NdkConnect(c.a, c.qa, &src.sa, srclen, &L->addr.sa,
                                                    L->addrlen, 1, 1, NULL, 0, nt_req_cb,
                                                    c.connect));
    c.p = nt_incoming(L, 0, NT_WAIT_MS);
    if (c.p) {
        NDK_SOCKADDR peer;
        ULONG plen = sizeof peer;
        CHECK_STATUS(c.p->Dispatch->NdkGetPeerAddress(c.p, &peer.sa, &plen), STATUS_SUCCESS);
        CHECK_EQ(ntohl(peer.in4.sin_addr.s_addr), 0x7F000003);
        nt_conn_accept(&c, 1, 1, NULL, 0);
        CHECK_STATUS(nt_finish(c.connect, NT_WAIT_MS), STATUS_SUCCESS);
        nt_conn_complete(&c);
        CHECK_STATUS(nt_finish(c.complete, NT_WAIT_MS), STATUS_SUCCESS);
        CHECK_STATUS(nt_finish(c.accept, NT_WAIT_MS), STATUS_SUCCESS);
    }
    nt_conn_close(&c);
    nt_lsn_close(L);
    nt_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(list_adapters);
    RUN(loopback_owns_127_8);
    return tl_finish();
}
