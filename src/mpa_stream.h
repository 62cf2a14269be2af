/* mpa_stream.h - an MPA negotiation (wire/mpa_negotiation.h) fed from a
 * socket: the one read loop the listener (the Request) and the connector
 * (the Reply, the RTR) share. */
#ifndef NDK_MPA_STREAM_H
#define NDK_MPA_STREAM_H

#include <sys/types.h>

#include "wire/mpa_negotiation.h"

/* Reads what the negotiation wants, step by step, until it decides
 * something or the socket has nothing more. Returns the event, or
 * MPA_NEG_MORE with *io set to what the last read returned: -EAGAIN (come
 * back when readable), 0 (the peer closed) or another -errno. Never reads
 * an octet the negotiation did not ask for. */
enum mpa_neg_event ndk_mpa_stream_read(int fd, struct mpa_neg *n, ssize_t *io);

/* The responder's read of the Request. Nothing may follow a Request before
 * our Reply (RFC 5044 section 7.1: the initiator sends nothing more until
 * it has the Reply), so each read asks for more than the largest frame: one
 * read takes the whole Request where the other takes its header, then its
 * private data, and *after says whether octets came behind it (the rule
 * broken), which a peek looked for before. */
enum mpa_neg_event ndk_mpa_stream_read_request(int fd, struct mpa_neg *n, ssize_t *io, bool *after);

#endif
