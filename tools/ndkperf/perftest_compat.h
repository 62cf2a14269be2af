/*
 * perftest_compat.h - ndkperf --perftest: perftest's own protocol over the
 * rdma_cm exchange (ib_*_bw -R / ib_*_lat -R), so that ndkperf on libndk
 * and perftest on any verbs device (Linux siw) run against each other.
 */
#ifndef NDKPERF_PERFTEST_COMPAT_H
#define NDKPERF_PERFTEST_COMPAT_H

/* argv[0] is "--perftest"; returns the exit status. */
int perftest_main(int argc, char **argv);

#endif
