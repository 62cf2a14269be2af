/* ndk_open_adapter: by name and by address, an unknown name is
 * STATUS_NOT_FOUND, invalid parameters and unsupported versions are refused,
 * and two adapters opened at once are independent (docs/behaviour.md
 * "Adapters"). */
#include "ndktest.h"

static const NDK_VERSION v21 = {2, 1};

/* An adapter serves a listener on fam's loopback address: shows that an
 * adapter opened by address is the loopback interface's adapter. */
static void check_serves(NDK_ADAPTER *ad, int fam)
{
    nt_lsn *L = nt_lsn_new();
    NTSTATUS st = nt_create_listener(ad, nt_connect_event, L, &L->l);
    CHECK_STATUS(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return;
    NDK_SOCKADDR sa;
    ULONG len = nt_sa_loop(fam, 0, &sa);
    CHECK_STATUS(nt_listen_at(L->l, &sa, len), STATUS_SUCCESS);
    nt_close(L->l);
}

/* lo, opened by name or by 127.0.0.1, serves the run's loopback address
 * (127.0.0.1, or ::1 in the IPv6 run); opened by ::1 it serves both: one
 * interface owns both addresses. */
NT_CASE_FAM(open_by_name_and_address)
{
    NDK_OPEN_OPTIONS o = nt_opts();
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(nt_open("lo", v21, &o, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    check_serves(ad, fam);
    nt_close_adapter(ad);

    /* pOptions may be NULL (defaults). */
    CHECK_STATUS(nt_open("lo", v21, NULL, &ad), STATUS_SUCCESS);
    nt_close_adapter(ad);

    CHECK_STATUS(nt_open("127.0.0.1", v21, &o, &ad), STATUS_SUCCESS);
    REQUIRE(ad);
    check_serves(ad, fam);
    nt_close_adapter(ad);
    if (fam == AF_INET6) {
        /* Opened by ::1 it is the same interface: it serves 127.0.0.1 too. */
        CHECK_STATUS(nt_open("::1", v21, &o, &ad), STATUS_SUCCESS);
        REQUIRE(ad);
        check_serves(ad, AF_INET6);
        check_serves(ad, AF_INET);
        nt_close_adapter(ad);
    }

    /* ndk_list_adapters names the address among lo's. */
    ULONG n = 0;
    CHECK_STATUS(ndk_list_adapters(NULL, &n), STATUS_BUFFER_TOO_SMALL);
    REQUIRE(n >= 1 && n < 1000);
    NDK_ADAPTER_DESCRIPTION *all = calloc(n, sizeof *all);
    REQUIRE(all);
    CHECK_STATUS(ndk_list_adapters(all, &n), STATUS_SUCCESS);
    bool found = false;
    for (ULONG i = 0; i < n; i++)
        if (strcmp(all[i].Name, "lo") == 0)
            found = nt_desc_has_loop(&all[i], fam);
    CHECK(found);
    free(all);
}

NT_CASE(open_unknown_is_not_found)
{
    NDK_ADAPTER *ad = (NDK_ADAPTER *)(uintptr_t)1;
    CHECK_STATUS(nt_open("nosuchif0", v21, NULL, &ad), STATUS_NOT_FOUND);
    CHECK(ad == NULL);
    /* Documentation addresses (RFC 5737 / RFC 3849): no interface has them. */
    CHECK_STATUS(nt_open("192.0.2.1", v21, NULL, &ad), STATUS_NOT_FOUND);
    CHECK_STATUS(nt_open("2001:db8::1", v21, NULL, &ad), STATUS_NOT_FOUND);
}

NT_CASE(open_invalid_parameters)
{
    NDK_ADAPTER *ad = NULL;
    CHECK_STATUS(ndk_open_adapter(NULL, v21, NULL, &ad), STATUS_INVALID_PARAMETER);
    CHECK_STATUS(ndk_open_adapter("lo", v21, NULL, NULL), STATUS_INVALID_PARAMETER);
    NDK_OPEN_OPTIONS o = nt_opts();
    o.Size = 3; /* not sizeof(NDK_OPEN_OPTIONS) */
    NTSTATUS st = ndk_open_adapter("lo", v21, &o, &ad);
    CHECK_STATUS(st, STATUS_INVALID_PARAMETER);
    if (st == STATUS_SUCCESS)
        ndk_close_adapter(ad);
}

NT_CASE(open_bad_version)
{
    /* V1: unknown major, or a lowest-acceptable minor above the provider's
     * highest (1.2, 2.1). */
    static const NDK_VERSION bad[] = {{3, 0}, {1, 3}, {2, 2}, {0, 0}, {0, 1}, {4, 1}, {1, 0xFFFF}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        NDK_ADAPTER *ad = NULL;
        NTSTATUS st = nt_open("lo", bad[i], NULL, &ad);
        if (st != NDIS_STATUS_BAD_VERSION)
            fprintf(stderr, "    version {%u,%u}\n", bad[i].Major, bad[i].Minor);
        CHECK_STATUS(st, NDIS_STATUS_BAD_VERSION);
        if (st == STATUS_SUCCESS)
            nt_close_adapter(ad);
    }
}

NT_CASE(two_adapters)
{
    /* V4: several instances open at once on one interface, each usable on
     * its own, even talking to each other; closing one leaves the other. */
    nt_side a, b;
    NDK_OPEN_OPTIONS o = nt_opts();
    REQUIRE(nt_side_open(&a, &o));
    REQUIRE(nt_side_open(&b, &o));
    CHECK(a.ad != b.ad);
    CHECK(a.ad->Dispatch != NULL && b.ad->Dispatch != NULL);

    nt_lsn *L = nt_listen(&b, AF_INET);
    REQUIRE(L);
    nt_conn c;
    REQUIRE(nt_conn_init(&c, AF_INET, &a, &b, L));
    CHECK(nt_establish(&c));
    nt_conn_close(&c);
    nt_lsn_close(L);

    nt_side_close(&a);
    NDK_CQ *cq = NULL;
    CHECK_STATUS(nt_create_cq(b.ad, 4, &cq), STATUS_SUCCESS);
    nt_close(cq);
    nt_side_close(&b);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(open_by_name_and_address);
    RUN(open_unknown_is_not_found);
    RUN(open_invalid_parameters);
    RUN(open_bad_version);
    RUN(two_adapters);
    return tl_finish();
}
