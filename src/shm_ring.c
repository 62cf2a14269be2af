/* The rings of the shared-memory transport (shm_ring.h, docs/shm.md). */
#include <string.h>

#include "shm_ring.h"

void shm_ring_attach(struct shm_ring *r, void *mem, bool init)
{
    r->ctl = mem;
    r->slots = (uint8_t *)mem + sizeof(struct shm_ring_ctl);
    if (init)
        memset(r->ctl, 0, sizeof *r->ctl);
    r->mine = r->theirs = r->freed = 0;
}

uint32_t shm_ring_room(struct shm_ring *r, uint32_t need)
{
    uint32_t used = r->mine - r->theirs;
    if (used > SHM_SLOTS - need) {
        r->theirs = __atomic_load_n(&r->ctl->tail, __ATOMIC_SEQ_CST);
        used = r->mine - r->theirs;
        /* A tail past our head is the peer's corruption: report no room,
         * and the owner's consumer-side checks end the connection. */
        if (used > SHM_SLOTS)
            return 0;
    }
    return SHM_SLOTS - used;
}

struct shm_msg *shm_ring_slot(struct shm_ring *r, uint32_t i)
{
    return (struct shm_msg *)(void *)(r->slots + (size_t)((r->mine + i) & (SHM_SLOTS - 1)) * SHM_SLOT);
}

void shm_ring_publish(struct shm_ring *r, uint32_t n)
{
    r->mine += n;
    __atomic_store_n(&r->ctl->head, r->mine, __ATOMIC_SEQ_CST);
}

const struct shm_msg *shm_ring_peek(struct shm_ring *r, bool *corrupt)
{
    if (r->theirs == r->mine) {
        r->theirs = __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST);
        if (r->theirs - r->mine > SHM_SLOTS) {
            *corrupt = true;
            r->theirs = r->mine;
            return NULL;
        }
        if (r->theirs == r->mine)
            return NULL;
    }
    return (const struct shm_msg *)(const void *)(r->slots + (size_t)(r->mine & (SHM_SLOTS - 1)) * SHM_SLOT);
}

void shm_ring_take(struct shm_ring *r)
{
    r->mine++;
}

bool shm_ring_release(struct shm_ring *r)
{
    if (r->freed == r->mine)
        return false;
    r->freed = r->mine;
    __atomic_store_n(&r->ctl->tail, r->mine, __ATOMIC_SEQ_CST);
    return true;
}

bool shm_ring_pending(const struct shm_ring *r)
{
    /* The shared indexes only: any thread may ask, whoever consumes. */
    return __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST) != __atomic_load_n(&r->ctl->tail, __ATOMIC_SEQ_CST);
}
