/* NDK_VERIFY=1 verifies an adapter opened without NDK_OPEN_FLAG_VERIFY. */
#include "vtest.h"

DP_CASE(env_turns_it_on)
{
    vt_begin();
    setenv("NDK_VERIFY", "1", 1);
    dp_side s;
    bool open = dp_side_open(&s); /* no flag: the environment alone */
    unsetenv("NDK_VERIFY");
    REQUIRE(open);
    NDK_CONNECTOR *c = dp_connector_new(&s);
    REQUIRE(c);
    ULONG len = 0;
    DP_CHECK_ST(c->Dispatch->NdkGetConnectionData(c, NULL, NULL, NULL, &len),
                STATUS_INVALID_DEVICE_STATE);
    CHECK(*vt_wait("N1", 0));
    dp_close(c);
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(env_turns_it_on);
    return tl_finish();
}
