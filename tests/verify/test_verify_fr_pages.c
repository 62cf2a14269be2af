/* M3: a fast-register page array with a page in no live LAM is reported;
 * the provider refuses the post as it does without the verifier. */
#include "vtest.h"

DP_CASE(fast_register_pages_outside_lams)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    size_t pg = dp_page();
    uint8_t *buf = dp_malloc(2 * pg);
    REQUIRE(buf);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.a, &f, buf, pg, TRUE));
    /* A page the consumer made up: the one after the buffer's first. */
    NDK_LOGICAL_ADDRESS page;
    page.QuadPart = f.lam->AdapterPageArray[0].QuadPart + (LONGLONG)(4 * pg);
    NTSTATUS st = x.c->qa->Dispatch->NdkFastRegister(x.c->qa, DP_CTX(1), f.mr, 1, &page, 0, pg,
                                                     (void *)(uintptr_t)page.QuadPart, 0);
    CHECK(st != STATUS_SUCCESS);
    char detail[256];
    snprintf(detail, sizeof detail, "page 0 of 1 (0x%llx) lies in no live LAM of this adapter",
             (unsigned long long)page.QuadPart);
    VT_CHECK_REPORT(0, "M3 (fast-registration pages come from live LAMs)", "NdkFastRegister", "QP",
                    x.c->qa, x.a.ad, detail,
                    "take the page array from a LAM of NdkBuildLAM that is not released");
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(fast_register_pages_outside_lams);
    return tl_finish();
}
