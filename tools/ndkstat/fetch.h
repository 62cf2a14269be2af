/* fetch.h - finding libndk processes and reading their stat channel
 * (docs/tools.md, "ndkstat"; the server is libndk's net/stat_server.c). */
#ifndef NDKSTAT_FETCH_H
#define NDKSTAT_FETCH_H

#include <stddef.h>
#include <sys/types.h>

/* The pids of the current user's processes that serve a stat channel in
 * this network namespace, ascending; at most max. Returns how many, or -1
 * (errno) when /proc/net/unix cannot be read. */
int ns_list_pids(pid_t *out, int max);

/* Reads pid's snapshot within timeout_ms. Returns the text (malloc'ed),
 * or NULL with *why saying why the process is skipped. */
char *ns_fetch(pid_t pid, unsigned timeout_ms, char *why, size_t why_len);

#endif
