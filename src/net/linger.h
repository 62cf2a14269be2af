/*
 * linger.h - closing a socket only after the peer has closed its side.
 *
 * A rejecting MPA Reply must be read by the initiator before our FIN
 * arrives: Linux siw ignores data once its socket has seen the FIN, so a
 * reject followed at once by our close loses the reject's private data.
 * The socket is kept (with no FIN) until the peer closes or a timer ends it,
 * independently of the NDK object that used it. Like the loop it runs on,
 * a set is protected by the loop owner's lock.
 */
#ifndef NDK_NET_LINGER_H
#define NDK_NET_LINGER_H

#include "net/watched.h"

/* How long a rejecting socket waits for the initiator to close first: far
 * longer than a peer needs to read the Reply, short enough that a peer that
 * never closes is not kept waiting. */
#define NDK_REJECT_LINGER_MS 500

/* Takes ownership of fd, watched on loop, and keeps it in set (the
 * lingering sockets of one owner). Loop owner's lock held. */
void ndk_linger_close(struct watched_set *set, struct loop *loop, int fd, unsigned timeout_ms);
/* Closes every lingering socket at once (adapter close). */
void ndk_linger_flush(struct watched_set *set);

#endif
