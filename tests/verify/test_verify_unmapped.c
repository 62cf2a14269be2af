/* M4: memory unmapped while it is registered is found by the verifier's
 * watchdog (mincore) and reported on the MR. */
#include <sys/mman.h>

#include "vtest.h"

DP_CASE(registered_memory_unmapped)
{
    vt_begin();
    dp_side s;
    REQUIRE(vt_side_open(&s, 0, 0));
    /* Two pages inside a mapping of 16: once unmapped, the hole is too
     * small for the larger mappings other threads (the sanitizers' too)
     * make meanwhile, so it stays a hole until the watchdog looks. */
    size_t pg = dp_page(), len = 2 * pg;
    uint8_t *area = mmap(NULL, 16 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(area != MAP_FAILED);
    void *p = area + 7 * pg;
    dp_mr m;
    DP_CHECK_ST(dp_mr_reg_pd(s.pd, &m, p, len, NDK_MR_FLAG_ALLOW_LOCAL_WRITE), STATUS_SUCCESS);
    CHECK(munmap(p, len) == 0);
    char detail[256];
    snprintf(detail, sizeof detail,
             "[%p, +%zu) was unmapped while registered: the peer's or the QP's accesses to it "
             "fail or land elsewhere", p, len);
    VT_CHECK_REPORT(DP_WAIT_MS, "M4 (registered memory stays mapped while registered)",
                    "(registered memory)", "MR", m.mr, s.ad, detail,
                    "keep the memory an MDL describes mapped and in place until "
                    "NdkDeregisterMr (or the MR's close) returned");
    dp_mr_close(&m);
    munmap(area, 16 * pg);
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(registered_memory_unmapped);
    return tl_finish();
}
