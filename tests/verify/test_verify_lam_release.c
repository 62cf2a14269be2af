/* M2: releasing the LAM of a fast registration whose completion was not
 * retrieved yet is reported on the QP. */
#include "vtest.h"

DP_CASE(lam_released_under_registration)
{
    vt_begin();
    dp_pair x;
    REQUIRE(vt_pair_open(&x, NULL));
    size_t pg = dp_page();
    uint8_t *buf = dp_malloc(2 * pg);
    REQUIRE(buf);
    dp_frmr f;
    REQUIRE(dp_frmr_init(&x.a, &f, buf, 2 * pg, TRUE));
    DP_CHECK_ST(dp_frmr_post(x.c->qa, DP_CTX(1), &f, buf, NDK_OP_FLAG_ALLOW_REMOTE_READ),
                STATUS_SUCCESS);
    NDK_LOGICAL_ADDRESS_MAPPING *lam = f.lam;
    x.a.ad->Dispatch->NdkReleaseLAM(x.a.ad, lam);
    f.lam = NULL;
    char detail[256];
    snprintf(detail, sizeof detail,
             "LAM %p released while a NdkFastRegister (RequestContext %p) that uses its pages has "
             "not completed; the fast registrations over it map nothing from now on",
             (void *)lam, DP_CTX(1));
    VT_CHECK_REPORT(0, "M2 (no release of a LAM that a fast registration uses)", "NdkReleaseLAM",
                    "QP", x.c->qa, x.a.ad, detail,
                    "retrieve the completions of the requests that use a LAM's pages before "
                    "releasing it");
    NDK_RESULT_EX r;
    CHECK(dp_wait_ex(x.c->cqa, &r, 1, DP_WAIT_MS) == 1);
    dp_frmr_close(&f);
    dp_pair_close(&x);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(lam_released_under_registration);
    return tl_finish();
}
