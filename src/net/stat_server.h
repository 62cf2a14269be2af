/*
 * stat_server.h - the stat channel ndkstat reads (docs/tools.md, "ndkstat"):
 * the abstract UNIX socket "libndk-stat-PID" and its thread. What it serves
 * comes from above through a function the caller passes (stat.c's
 * ndk_stat_snapshot), so net/ never calls up.
 */
#ifndef NDK_NET_STAT_SERVER_H
#define NDK_NET_STAT_SERVER_H

#include <stddef.h>

/* Makes one snapshot for one reader, on the channel's thread: a malloc'ed
 * buffer of *len octets, or NULL. */
typedef char *(*ndk_stat_snapshot_fn)(size_t *len);

/* NULL when disabled (NDK_STAT=0) or it cannot be created (logged,
 * category stat). */
struct ndk_stat_server;
struct ndk_stat_server *ndk_stat_server_start(ndk_stat_snapshot_fn snapshot);
void ndk_stat_server_stop(struct ndk_stat_server *s);

#endif
