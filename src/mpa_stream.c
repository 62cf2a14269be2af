/* An MPA negotiation fed from a socket (mpa_stream.h). */
#include "mpa_stream.h"

#include <errno.h>

#include "net/stream.h"

/* The loop both share; with greedy, each read asks for one octet more
 * than the largest frame, and *after says whether octets followed the one
 * that decided. */
static enum mpa_neg_event read_frames(int fd, struct mpa_neg *n, ssize_t *io, bool greedy, bool *after)
{
    /* Header, then private data (or the RTR's first octets, then the rest):
     * both usually wait in the socket already, so keep reading instead of
     * going back to epoll in between. */
    *io = -EAGAIN;
    for (size_t want; (want = mpa_neg_want(n)) != 0;) {
        uint8_t buf[MPA_FRAME_MAX + 1];
        size_t ask = greedy ? sizeof buf : want < MPA_FRAME_MAX ? want : MPA_FRAME_MAX;
        ssize_t got = ndk_stream_recv(fd, buf, ask);
        if (got <= 0) {
            *io = got;
            return MPA_NEG_MORE;
        }
        size_t used;
        enum mpa_neg_event ev = mpa_neg_feed(n, buf, (size_t)got, &used);
        if (ev != MPA_NEG_MORE) {
            if (after)
                *after = used < (size_t)got;
            return ev;
        }
    }
    return MPA_NEG_MORE;
}

enum mpa_neg_event ndk_mpa_stream_read(int fd, struct mpa_neg *n, ssize_t *io)
{
    return read_frames(fd, n, io, false, NULL);
}

enum mpa_neg_event ndk_mpa_stream_read_request(int fd, struct mpa_neg *n, ssize_t *io, bool *after)
{
    *after = false;
    return read_frames(fd, n, io, true, after);
}
