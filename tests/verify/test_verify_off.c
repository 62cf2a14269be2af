/* Without NDK_OPEN_FLAG_VERIFY (and NDK_VERIFY unset) an adapter and its
 * objects keep the provider's own dispatch tables, shared by every
 * adapter, and a rule broken there is not reported; the same call on a
 * verified adapter goes through a checking table, is reported, and returns
 * the same status (docs/verifier.md). */
#include "vtest.h"

DP_CASE(off_is_untouched)
{
    unsetenv("NDK_VERIFY");
    vt_begin();
    dp_side a, b, v;
    REQUIRE(dp_side_open(&a) && dp_side_open(&b));
    if (!vt_side_open(&v, 0, 0))
        return;
    CHECK(a.ad->Dispatch == b.ad->Dispatch);
    CHECK(a.pd->Dispatch == b.pd->Dispatch);
    CHECK(v.ad->Dispatch != a.ad->Dispatch);
    CHECK(v.pd->Dispatch != a.pd->Dispatch);

    NDK_CONNECTOR *ca = dp_connector_new(&a), *cv = dp_connector_new(&v);
    REQUIRE(ca && cv);
    ULONG len = 0;
    NTSTATUS plain = ca->Dispatch->NdkGetConnectionData(ca, NULL, NULL, NULL, &len);
    CHECK(vt_count() == 0);
    len = 0;
    NTSTATUS checked = cv->Dispatch->NdkGetConnectionData(cv, NULL, NULL, NULL, &len);
    CHECK(plain == checked);
    CHECK(vt_count() == 1);
    dp_close(ca);
    dp_close(cv);
    dp_side_close(&a);
    dp_side_close(&b);
    dp_side_close(&v);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(off_is_untouched);
    return tl_finish();
}
