/* NDK_VERIFY=abort: every adapter of the process is verified and the first
 * report ends the process with abort(), after the report line, as a bug
 * check would. */
#include <sys/resource.h>
#include <sys/wait.h>

#include "vtest.h"

DP_CASE(abort_on_report)
{
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none); /* no core file from the test */
        setenv("NDK_VERIFY", "abort", 1);
        NDK_ADAPTER *ad = NULL;
        if (ndk_open_adapter("lo", (NDK_VERSION){2, 1}, NULL, &ad) != STATUS_SUCCESS)
            _exit(3);
        NDK_CONNECTOR *c = NULL;
        if (ad->Dispatch->NdkCreateConnector(ad, NULL, NULL, &c) != STATUS_SUCCESS)
            _exit(4);
        ULONG len = 0;
        c->Dispatch->NdkGetConnectionData(c, NULL, NULL, NULL, &len);
        _exit(0); /* not reached when the report aborts */
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN(abort_on_report);
    return tl_finish();
}
