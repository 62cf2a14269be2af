/*
 * modes.h - ndkping's modes: its own protocol (native.h) and rdma-core's
 * rping (--rping, rping.h). Each takes the whole command line and returns
 * the exit status.
 */
#ifndef NDKPING_MODES_H
#define NDKPING_MODES_H

int native_main(int argc, char **argv);
int rping_main(int argc, char **argv);

#endif
