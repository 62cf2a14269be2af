/*
 * ndkping - rping for NDK: connects, moves and verifies data, and reports
 * the time of each step. Three protocols, each a mode of its own with its
 * own command line: ndkping's own (the default), rdma-core's rping
 * (--rping) and rdma-core's ucmatose (--ucmatose), so that the real rping
 * and ucmatose can be the peer.
 *
 * Uses only the public headers. Every asynchronous call is finished the
 * way NDKPI allows (inline, or STATUS_PENDING and exactly one callback,
 * waited for with a bound).
 */
#include <stdbool.h>
#include <string.h>

#include "lib/args.h"
#include "lib/log.h"
#include "ndkping/native.h"
#include "ndkping/rping.h"
#include "ndkping/ucmatose.h"

/* The argument that names a mode ("--rping"), before any "--". */
static bool asks_for(int argc, char **argv, const char *mode)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (strcmp(argv[i], mode) == 0)
            return true;
    return false;
}

static int rping_main(int argc, char **argv)
{
    int rc = rping_parse_options(argc, argv);
    if (rc >= 0)
        return rc;
    return ro.server ? rping_run_server() : rping_run_client();
}

static int ucmatose_main(int argc, char **argv)
{
    int rc = ucmatose_parse_options(argc, argv);
    if (rc >= 0)
        return rc;
    unsigned connected = 0;
    bool ok = uo.dst ? ucmatose_run_client(&connected) : ucmatose_run_server(&connected);
    return ucmatose_finish(ok, connected);
}

int main(int argc, char **argv)
{
    tc_log_init("ndkping");
    /* --verify is taken: it checks the data. */
    tc_take_verifier_option(&argc, argv, "--verifier");
    if (asks_for(argc, argv, "--rping"))
        return rping_main(argc, argv);
    if (asks_for(argc, argv, "--ucmatose"))
        return ucmatose_main(argc, argv);
    return native_main(argc, argv);
}
