/* An MPA negotiation fed from a socket (mpa_stream.h). */
#include "mpa_stream.h"

#include <errno.h>

#include "net/stream.h"

enum mpa_neg_event ndk_mpa_stream_read(int fd, struct mpa_neg *n, ssize_t *io)
{
    /* Header, then private data (or the RTR's first octets, then the rest):
     * both usually wait in the socket already, so keep reading instead of
     * going back to epoll in between. */
    *io = -EAGAIN;
    for (size_t want; (want = mpa_neg_want(n)) != 0;) {
        uint8_t buf[MPA_FRAME_MAX];
        ssize_t got = ndk_stream_recv(fd, buf, want < sizeof buf ? want : sizeof buf);
        if (got <= 0) {
            *io = got;
            return MPA_NEG_MORE;
        }
        size_t used;
        enum mpa_neg_event ev = mpa_neg_feed(n, buf, (size_t)got, &used);
        if (ev != MPA_NEG_MORE)
            return ev;
    }
    return MPA_NEG_MORE;
}
