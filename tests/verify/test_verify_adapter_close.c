/* L17: closing an adapter whose objects were never closed is reported with
 * the count of each type; the adapter is still torn down (ndk.h). */
#include "vtest.h"

DP_CASE(adapter_closed_with_objects_open)
{
    vt_begin();
    dp_side s;
    REQUIRE(vt_side_open(&s, 0, 0));
    REQUIRE(dp_cq_new(&s, 16));
    NDK_ADAPTER *ad = s.ad;
    dp_close_adapter(ad);
    VT_CHECK_REPORT(0, "L17 (every object is closed before its adapter)", "ndk_close_adapter",
                    "adapter", ad, ad,
                    "2 object(s) never closed (1 CQ, 1 PD): torn down without callbacks",
                    "close every object (and wait for its close completion) before "
                    "closing the adapter");
    CHECK(vt_count() == 1);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(adapter_closed_with_objects_open);
    return tl_finish();
}
