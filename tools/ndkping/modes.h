/*
 * modes.h - ndkping's modes: its own protocol (native.h), rdma-core's
 * rping (--rping, rping.h) and rdma-core's ucmatose (--ucmatose,
 * ucmatose.h). Each takes the whole command line and returns the exit
 * status.
 */
#ifndef NDKPING_MODES_H
#define NDKPING_MODES_H

int native_main(int argc, char **argv);
int rping_main(int argc, char **argv);
int ucmatose_main(int argc, char **argv);

#endif
