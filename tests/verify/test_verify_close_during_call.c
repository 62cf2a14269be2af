/* L5: closing an object while another thread is inside a call on it is
 * reported. The call is held inside the verifier by its own report (N1)
 * until the close has been made. */
#include "vtest.h"

static NDK_CONNECTOR *conn;

static void *caller(void *arg)
{
    (void)arg;
    ULONG len = 0;
    conn->Dispatch->NdkGetConnectionData(conn, NULL, NULL, NULL, &len);
    return NULL;
}

DP_CASE(close_while_call_runs)
{
    vt_begin();
    dp_side s;
    REQUIRE(vt_side_open(&s, 0, 0));
    conn = dp_connector_new(&s);
    REQUIRE(conn);
    NDK_CONNECTOR *c = conn;
    vt_hold("N1");
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, caller, NULL) == 0);
    CHECK(tl_event_wait(&vt_held, 1, DP_WAIT_MS));
    dp_req *close = dp_close_start(c);
    vt_release();
    pthread_join(t, NULL);
    CHECK(dp_close_wait(close));
    VT_CHECK_REPORT(0, "L5 (no close while a call on the object is running)", "NdkCloseObject",
                    "connector", c, s.ad, "1 call(s) on it still running in other threads",
                    "wait until the object's other calls returned before closing it");
    dp_side_close(&s);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(close_while_call_runs);
    return tl_finish();
}
