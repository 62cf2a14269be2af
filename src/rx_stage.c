/* The receive engine's staging buffer (rx_stage.h). */
#include "rx_stage.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qp.h"

bool rx_stage_init(struct rx_stage *s, struct rx_stage_cfg cfg)
{
    memset(s, 0, sizeof *s);
    size_t cap = cfg.size;
    if (!cap)
        return true;
    /* The buffer itself comes with the first staged read (fill): an idle
     * connection, and one that only moves large payloads, costs no 64 KiB. */
    s->cap = cap;
    s->threshold = cfg.threshold;
    return true;
}

void rx_stage_fini(struct rx_stage *s)
{
    free(s->buf);
    memset(s, 0, sizeof *s);
}

size_t rx_stage_drop(struct rx_stage *s)
{
    size_t n = rx_stage_held(s);
    s->head = s->tail = 0;
    return n;
}

/* Copies what the stage holds into v, as far as it goes. */
static size_t serve(struct rx_stage *s, const struct iovec *v, int n)
{
    size_t moved = 0;
    for (int i = 0; i < n && s->head < s->tail; i++) {
        size_t k = v[i].iov_len < s->tail - s->head ? v[i].iov_len : s->tail - s->head;
        memcpy(v[i].iov_base, s->data + s->head, k);
        s->head += k;
        moved += k;
    }
    if (s->head == s->tail) {
        s->head = s->tail = 0;
        /* Drained, and the socket had no more: give the buffer back, so
         * that an idle connection holds none (the next burst takes one). */
        if (s->dry && s->buf) {
            free(s->buf);
            s->buf = NULL;
        }
    }
    return moved;
}

ssize_t rx_stage_readv(struct rx_stage *s, struct ndk_transport *tr, const struct iovec *v, int n,
                       enum rx_stage_how how)
{
    if (s->head < s->tail)
        return (ssize_t)serve(s, v, n);
    if (how == RX_STAGE_ONLY || s->dry)
        return -EAGAIN;
    if (how == RX_STAGE_DIRECT || !s->cap)
        return tr->ops->readv(tr, v, n);
    /* Never more at once than the configured size (the sim varies it). */
    size_t small = s->cap < sizeof s->small ? s->cap : sizeof s->small;
    uint8_t *into = s->small;
    size_t room = small;
    if (s->burst) {
        if (!s->buf && !(s->buf = malloc(s->cap)))
            return tr->ops->readv(tr, v, n); /* no memory: read straight, unstaged */
        into = s->buf;
        room = s->cap;
    }
    struct iovec all = {into, room};
    ssize_t got = tr->ops->readv(tr, &all, 1);
    if (got <= 0)
        return got;
    s->data = into;
    s->head = 0;
    s->tail = (size_t)got;
    s->dry = (size_t)got < room;
    /* Filled: a burst, whose rest the buffer takes; less than the small
     * area holds: a trickle again. */
    if (!s->burst)
        s->burst = !s->dry;
    else if ((size_t)got < small)
        s->burst = false;
    return (ssize_t)serve(s, v, n);
}
