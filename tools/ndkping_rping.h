/*
 * ndkping_rping.h - `ndkping --rping`: rdma-core's rping protocol over NDK,
 * so that ndkping and the real rping (on Linux siw or any verbs device) can
 * be each other's peer. ndkping.c only decides whether the mode was asked
 * for and hands the whole command line over.
 */
#ifndef NDKPING_RPING_H
#define NDKPING_RPING_H

#include <stdbool.h>

/* True if the command line asks for the rping mode (an argument "--rping"
 * before any "--"). */
bool ndkping_rping_requested(int argc, char **argv);

/* Runs the rping mode with the whole command line (argv[0] included);
 * returns the exit status: 0 success, 1 failure, 2 usage error. */
int ndkping_rping_main(int argc, char **argv);

#endif
