/* The rings of the shared-memory transport (src/shm_ring.h), sans IO: one
 * producer view and one consumer view of the same memory, as the two
 * processes hold them. Order, fullness, slots given back in batches,
 * wrap-around of the free-running indexes, and an impossible head from a
 * corrupt peer. */
#include <stdlib.h>
#include <string.h>

#include "shm_ring.h"
#include "testlib.h"

static void *g_mem;
static struct shm_ring P, C;

static void rings_up(void)
{
    g_mem = aligned_alloc(SHM_LINE, SHM_RING_BYTES);
    shm_ring_attach(&P, g_mem, true);
    shm_ring_attach(&C, g_mem, false);
}

static void put(uint32_t id)
{
    struct shm_msg *m = shm_ring_slot(&P, 0);
    memset(m, 0, sizeof *m);
    m->id = id;
    m->len = 4;
    memcpy(m + 1, &id, 4);
    shm_ring_publish(&P, 1);
}

static bool take(uint32_t *id)
{
    bool corrupt = false;
    const struct shm_msg *m = shm_ring_peek(&C, &corrupt);
    CHECK(!corrupt);
    if (!m)
        return false;
    uint32_t body;
    memcpy(&body, m + 1, 4);
    CHECK_EQ(body, m->id);
    *id = m->id;
    shm_ring_take(&C);
    shm_ring_release(&C);
    return true;
}

static void t_order_and_empty(void)
{
    rings_up();
    uint32_t id;
    CHECK(!take(&id));
    CHECK(!shm_ring_pending(&C));
    put(1);
    put(2);
    CHECK(shm_ring_pending(&C));
    CHECK(take(&id) && id == 1);
    CHECK(take(&id) && id == 2);
    CHECK(!take(&id));
    CHECK(!shm_ring_pending(&C));
    free(g_mem);
}

/* A ring holds SHM_SLOTS messages; room comes back as they are released. */
static void t_full(void)
{
    rings_up();
    for (uint32_t i = 0; i < SHM_SLOTS; i++) {
        REQUIRE(shm_ring_room(&P, 1) == SHM_SLOTS - i);
        put(i);
    }
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    uint32_t id;
    CHECK(take(&id) && id == 0);
    CHECK_EQ(shm_ring_room(&P, 1), 1);
    put(SHM_SLOTS);
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    for (uint32_t i = 1; i <= SHM_SLOTS; i++)
        CHECK(take(&id) && id == i);
    CHECK(!take(&id));
    free(g_mem);
}

/* Slots taken go back to the producer only at the release, all with one
 * store of tail: until then the producer sees no room from them. */
static void t_batch_release(void)
{
    rings_up();
    for (uint32_t i = 0; i < SHM_SLOTS; i++)
        put(i);
    bool corrupt = false;
    for (uint32_t i = 0; i < 10; i++) {
        const struct shm_msg *m = shm_ring_peek(&C, &corrupt);
        REQUIRE(m != NULL);
        CHECK_EQ(m->id, i);
        shm_ring_take(&C);
    }
    CHECK(!corrupt);
    CHECK_EQ(__atomic_load_n(&C.ctl->tail, __ATOMIC_SEQ_CST), 0);
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    CHECK(shm_ring_release(&C));
    CHECK_EQ(__atomic_load_n(&C.ctl->tail, __ATOMIC_SEQ_CST), 10);
    CHECK_EQ(shm_ring_room(&P, 1), 10);
    CHECK(!shm_ring_release(&C)); /* nothing taken since */
    uint32_t id;
    CHECK(take(&id) && id == 10);
    free(g_mem);
}

/* Batches of several slots published at once, across the 32-bit wrap of
 * the indexes (started just below it). */
static void t_wrap(void)
{
    rings_up();
    uint32_t start = UINT32_MAX - 100;
    P.mine = P.theirs = C.mine = C.theirs = C.freed = start;
    P.ctl->head = P.ctl->tail = start;
    uint32_t next_put = 0, next_take = 0;
    for (int round = 0; round < 40; round++) {
        uint32_t n = shm_ring_room(&P, 1) < 7 ? shm_ring_room(&P, 1) : 7;
        for (uint32_t i = 0; i < n; i++) {
            struct shm_msg *m = shm_ring_slot(&P, i);
            m->id = next_put;
            memcpy(m + 1, &next_put, 4);
            next_put++;
        }
        shm_ring_publish(&P, n);
        uint32_t id;
        for (int i = 0; i < 5 && take(&id); i++)
            CHECK_EQ(id, next_take++);
    }
    uint32_t id;
    while (take(&id))
        CHECK_EQ(id, next_take++);
    CHECK_EQ(next_take, next_put);
    CHECK(next_put > 200);
    CHECK(C.mine < start); /* the indexes wrapped */
    free(g_mem);
}

/* A head more than a ring ahead of the consumer is a corrupt peer: nothing
 * is handed out, the caller is told. */
static void t_corrupt_head(void)
{
    rings_up();
    __atomic_store_n(&P.ctl->head, SHM_SLOTS + 1, __ATOMIC_RELEASE);
    bool corrupt = false;
    CHECK(shm_ring_peek(&C, &corrupt) == NULL);
    CHECK(corrupt);
    free(g_mem);
    /* A tail past the producer's head leaves no room. */
    rings_up();
    for (uint32_t i = 0; i < SHM_SLOTS; i++)
        put(i);
    __atomic_store_n(&P.ctl->tail, UINT32_MAX - 10, __ATOMIC_RELEASE);
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    free(g_mem);
}

int main(void)
{
    RUN(t_order_and_empty);
    RUN(t_full);
    RUN(t_batch_release);
    RUN(t_wrap);
    RUN(t_corrupt_head);
    return tl_finish();
}
