/* The rings of the shared-memory transport (shm_ring.h, docs/shm.md). */
#include <stddef.h>
#include <string.h>

#include "shm_ring.h"

void shm_ring_attach(struct shm_ring *r, void *mem, bool init)
{
    r->ctl = mem;
    r->units = (uint8_t *)mem + sizeof(struct shm_ring_ctl);
    if (init)
        memset(r->ctl, 0, sizeof *r->ctl);
    r->mine = r->theirs = r->freed = r->cur = 0;
    r->last = NULL;
}

static uint8_t *unit_at(const struct shm_ring *r, uint32_t index)
{
    return r->units + (size_t)(index & (SHM_UNITS - 1)) * SHM_UNIT;
}

uint32_t shm_ring_room(struct shm_ring *r, uint32_t need)
{
    uint32_t used = r->mine - r->theirs;
    if (used > SHM_UNITS - need) {
        r->theirs = __atomic_load_n(&r->ctl->tail, __ATOMIC_SEQ_CST);
        used = r->mine - r->theirs;
        /* A tail past our head is the peer's corruption: report no room,
         * and the owner's consumer-side checks end the connection. */
        if (used > SHM_UNITS)
            return 0;
    }
    return SHM_UNITS - used;
}

/* Units of pad before a message of n units at head + at: a message never
 * wraps (the units up to the ring's end carry the pad). */
static uint32_t pad_before(const struct shm_ring *r, uint32_t at, uint32_t n)
{
    uint32_t left = SHM_UNITS - ((r->mine + at) & (SHM_UNITS - 1));
    return n <= left ? 0 : left;
}

uint32_t shm_ring_cost(const struct shm_ring *r, uint32_t at, uint32_t len)
{
    uint32_t n = shm_msg_units(len);
    return pad_before(r, at, n) + n;
}

struct shm_msg *shm_ring_put(struct shm_ring *r, uint32_t *at, uint32_t len)
{
    struct shm_msg h = {.len = len};
    return shm_ring_put_msg(r, at, &h);
}

struct shm_msg *shm_ring_put_msg(struct shm_ring *r, uint32_t *at, const struct shm_msg *h)
{
    uint32_t n = shm_msg_units(h->len), skip = pad_before(r, *at, n);
    if (skip) {
        struct shm_msg *pad = (struct shm_msg *)(void *)unit_at(r, r->mine + *at);
        memset(pad, 0, sizeof *pad);
        pad->type = SHM_PAD;
        pad->len = skip * SHM_UNIT - (uint32_t)sizeof *pad;
        *at += skip;
    }
    struct shm_msg *m = (struct shm_msg *)(void *)unit_at(r, r->mine + *at);
    memcpy(m, h, sizeof *m);
    *at += n;
    r->last = m;
    r->last_units = n;
    return m;
}

void shm_ring_publish(struct shm_ring *r, uint32_t n)
{
    uint32_t end = r->mine + n, gap = (SHM_BATCH_ALIGN - end % SHM_BATCH_ALIGN) % SHM_BATCH_ALIGN;
    if (gap && n && r->last) {
        /* The room less a unit (the consumer's reserve for a Terminate
         * stays, xp_shm.c); tail is read when our copy says too little,
         * or a stale copy would pack messages published one by one. */
        if (end - r->theirs > SHM_UNITS - gap - 1)
            r->theirs = __atomic_load_n(&r->ctl->tail, __ATOMIC_SEQ_CST);
        if (end - r->theirs <= SHM_UNITS - gap - 1) {
            r->last->units = (uint8_t)(r->last_units + gap);
            n += gap;
        }
    }
    r->last = NULL;
    r->mine += n;
    __atomic_store_n(&r->ctl->head, r->mine, __ATOMIC_SEQ_CST);
}

const uint8_t *shm_ring_peek(struct shm_ring *r, struct shm_msg *h, bool *corrupt)
{
    for (;;) {
        if (r->theirs == r->mine) {
            r->theirs = __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST);
            if (r->theirs - r->mine > SHM_UNITS) {
                *corrupt = true;
                r->theirs = r->mine;
                return NULL;
            }
            if (r->theirs == r->mine)
                return NULL;
        }
        const uint8_t *at = unit_at(r, r->mine);
        memcpy(h, at, sizeof *h);
        /* The producer publishes whole messages, so theirs (a value of
         * head) ends on a message's end; and none crosses the ring's end. */
        uint32_t own = h->len <= SHM_PAYLOAD ? shm_msg_units(h->len) : UINT32_MAX, n = h->units ? h->units : own;
        if (own == UINT32_MAX || n < own || n > r->theirs - r->mine || n > SHM_UNITS - (r->mine & (SHM_UNITS - 1))) {
            *corrupt = true;
            return NULL;
        }
        if (h->type != SHM_PAD) {
            r->cur = n;
            return at + sizeof *h;
        }
        r->mine += n;
    }
}

uint32_t shm_ring_run(const struct shm_ring *r, uint32_t max, uint8_t type, uint8_t mask, uint8_t want,
                      uint8_t last)
{
    uint32_t n = 0;
    for (uint32_t at = r->mine; n < max && at != r->theirs;) {
        /* The fields looked at, each read once (the peer may still write). */
        struct shm_msg h;
        const uint8_t *u = unit_at(r, at);
        memcpy(&h, u, offsetof(struct shm_msg, len) + sizeof h.len);
        memcpy(&h.off, u + offsetof(struct shm_msg, off), sizeof h.off);
        uint32_t own = h.len <= SHM_PAYLOAD ? shm_msg_units(h.len) : 0, span = h.units ? h.units : own;
        /* What shm_ring_peek would call corrupt ends the look. */
        if (!own || span < own || span > r->theirs - at || span > SHM_UNITS - (at & (SHM_UNITS - 1)))
            break;
        at += span;
        if (h.type == SHM_PAD)
            continue;
        if (h.type != type || (h.flags & mask) != want || h.off)
            break;
        n++;
        if (h.flags & last)
            break;
    }
    return n;
}

void shm_ring_take(struct shm_ring *r)
{
    r->mine += r->cur;
    r->cur = 0;
}

bool shm_ring_release(struct shm_ring *r)
{
    if (r->freed == r->mine)
        return false;
    r->freed = r->mine;
    __atomic_store_n(&r->ctl->tail, r->mine, __ATOMIC_SEQ_CST);
    return true;
}
