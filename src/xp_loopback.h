/*
 * xp_loopback.h - the in-memory loopback transport (transport.h): two QPs
 * of this process, of the same adapter or of two, joined without a
 * connector or a socket. Each operation executes against the peer QP's
 * memory table as soon as it is posted, with the checks, completions and
 * errors of the iWARP transport (a refused access fails both QPs with the
 * statuses the same Terminate would give them).
 *
 * For tests of the QP object and the memory table without the wire, and the
 * model for a shared-memory transport. Every consumer rule holds except
 * what needs a network: there is no connector (so no disconnect events) and
 * no RDMA Read limit other than the QP's (ORD and IRD are the adapter's
 * maxima).
 */
#ifndef NDK_XP_LOOPBACK_H
#define NDK_XP_LOOPBACK_H

struct ndk_qp_impl;
struct ndk_lo_pair;

/* Joins two idle QPs (created, never connected); both go to RTS. Returns
 * NULL when out of memory or when either QP is not idle. */
struct ndk_lo_pair *ndk_lo_connect(struct ndk_qp_impl *a, struct ndk_qp_impl *b);
/* Ends the connection: each QP still joined leaves it (ndk_qp_stop: its
 * outstanding requests complete as STATUS_CANCELLED), and the pair is
 * freed. Posts to either QP may run at the same time: one that finds its
 * QP stopped fails as a post to a QP in error does, one that found it
 * joined keeps the pair until it returns. Closing a QP first is fine: it
 * leaves the pair, and its peer's later requests find no peer (Sends and
 * Writes complete unplaced, Reads stay outstanding until the peer's
 * disconnect flushes them, as over a wire whose far end stopped placing). */
void ndk_lo_disconnect(struct ndk_lo_pair *p);

#endif
