/*
 * linger.h - closing a socket only after the peer has closed its side.
 *
 * A rejecting MPA Reply must be read by the initiator before our FIN
 * arrives: Linux siw ignores data once its socket has seen the FIN, so a
 * reject followed at once by our close loses the reject's private data.
 * The socket is kept (with no FIN) until the peer closes or a timer ends it,
 * independently of the NDK object that used it.
 */
#ifndef NDK_NET_LINGER_H
#define NDK_NET_LINGER_H

struct ndk_adapter_impl;

/* How long a rejecting socket waits for the initiator to close first: far
 * longer than a peer needs to read the Reply, short enough that a peer that
 * never closes is not kept waiting. */
#define NDK_REJECT_LINGER_MS 500

/* Takes ownership of fd. Adapter lock held. */
void ndk_linger_close(struct ndk_adapter_impl *ad, int fd, unsigned timeout_ms);
/* Closes every lingering socket at once (adapter close). */
void ndk_linger_flush(struct ndk_adapter_impl *ad);

#endif
