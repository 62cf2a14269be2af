/* The rings of the shared-memory transport (src/shm_ring.h), sans IO: one
 * producer view and one consumer view of the same memory, as the two
 * processes hold them. Order, fullness in units, units given back in
 * batches, batches that end on a boundary, messages of several units with
 * a pad at the ring's end, wrap-around of the free-running indexes, a
 * corrupt peer's index, lengths or spans, and the look ahead over a run of
 * like messages. */
#include <stdlib.h>
#include <string.h>

#include "shm_ring.h"
#include "testlib.h"

static void *g_mem;
static struct shm_ring P, C;

/* Both views with every index at start (free running: any value). */
static void rings_at(uint32_t start)
{
    g_mem = aligned_alloc(SHM_LINE, SHM_RING_BYTES);
    shm_ring_attach(&P, g_mem, true);
    shm_ring_attach(&C, g_mem, false);
    P.mine = P.theirs = C.mine = C.theirs = C.freed = start;
    P.ctl->head = P.ctl->tail = start;
}

/* Writes a message of len octets (at least 4) at head + *used: its
 * payload is id, then its octets' offsets. */
static void write_msg(uint32_t *used, uint32_t id, uint32_t len)
{
    struct shm_msg *m = shm_ring_put(&P, used, len);
    m->id = id;
    uint8_t *p = (uint8_t *)(m + 1);
    memcpy(p, &id, 4);
    for (uint32_t i = 4; i < len; i++)
        p[i] = (uint8_t)i;
}

/* A message published alone (a batch of its own). */
static void put_len(uint32_t id, uint32_t len)
{
    uint32_t used = 0;
    write_msg(&used, id, len);
    shm_ring_publish(&P, used);
}

static void put(uint32_t id)
{
    put_len(id, 4);
}

/* n small messages, ids first.., published in batches of 32 (as a DEFER
 * chain is). */
static void put_many(uint32_t first, uint32_t n)
{
    for (uint32_t done = 0; done < n;) {
        uint32_t used = 0;
        for (uint32_t k = 0; k < 32 && done < n; k++, done++)
            write_msg(&used, first + done, 4);
        shm_ring_publish(&P, used);
    }
}

/* Takes and releases the next message, checking its payload. */
static bool take_len(uint32_t *id, uint32_t *len)
{
    bool corrupt = false;
    struct shm_msg h;
    const uint8_t *p = shm_ring_peek(&C, &h, &corrupt);
    CHECK(!corrupt);
    if (!p)
        return false;
    uint32_t body;
    memcpy(&body, p, 4);
    CHECK_EQ(body, h.id);
    for (uint32_t i = 4; i < h.len; i++)
        if (p[i] != (uint8_t)i)
            CHECK(!"payload");
    *id = h.id;
    if (len)
        *len = h.len;
    shm_ring_take(&C);
    shm_ring_release(&C);
    return true;
}

static bool take(uint32_t *id)
{
    return take_len(id, NULL);
}

static void t_order_and_empty(void)
{
    rings_at(0);
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

/* A message takes whole units: a header and up to 64 octets one, the
 * largest SHM_MSG_MAX / SHM_UNIT. */
static void t_units(void)
{
    CHECK_EQ(shm_msg_units(0), 1);
    CHECK_EQ(shm_msg_units(SHM_UNIT - sizeof(struct shm_msg)), 1);
    CHECK_EQ(shm_msg_units(SHM_UNIT - sizeof(struct shm_msg) + 1), 2);
    CHECK_EQ(shm_msg_units(SHM_PAYLOAD), SHM_MSG_MAX / SHM_UNIT);
}

/* A ring holds SHM_UNITS small messages published in batches; room comes
 * back as they are released. */
static void t_full(void)
{
    rings_at(0);
    for (uint32_t i = 0; i < SHM_UNITS; i += 32) {
        REQUIRE(shm_ring_room(&P, 1) == SHM_UNITS - i);
        put_many(i, 32);
    }
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    uint32_t id;
    CHECK(take(&id) && id == 0);
    CHECK_EQ(shm_ring_room(&P, 1), 1);
    put(SHM_UNITS);
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    for (uint32_t i = 1; i <= SHM_UNITS; i++)
        CHECK(take(&id) && id == i);
    CHECK(!take(&id));
    free(g_mem);
}

/* Units taken go back to the producer only at the release, all with one
 * store of tail: until then the producer sees no room from them. */
static void t_batch_release(void)
{
    rings_at(0);
    put_many(0, SHM_UNITS);
    bool corrupt = false;
    struct shm_msg h;
    for (uint32_t i = 0; i < 10; i++) {
        REQUIRE(shm_ring_peek(&C, &h, &corrupt) != NULL);
        CHECK_EQ(h.id, i);
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

/* A batch ends on a boundary of SHM_BATCH_ALIGN units: its last message
 * spans the units up to it, when the ring has room for them. */
static void t_batch_aligned(void)
{
    rings_at(0);
    put(1);
    CHECK_EQ(P.mine, SHM_BATCH_ALIGN);
    const struct shm_msg *first = (const struct shm_msg *)(const void *)C.units;
    CHECK_EQ(first->units, SHM_BATCH_ALIGN);
    put(2);
    CHECK_EQ(P.mine, 2 * SHM_BATCH_ALIGN);
    uint32_t id;
    CHECK(take(&id) && id == 1);
    CHECK(take(&id) && id == 2);
    CHECK(!take(&id));
    CHECK_EQ(__atomic_load_n(&C.ctl->tail, __ATOMIC_SEQ_CST), 2 * SHM_BATCH_ALIGN);
    free(g_mem);
    /* Laps of single messages, each taken at once: every one spans its
     * batch, though the producer's copy of tail goes stale in between. */
    rings_at(0);
    for (uint32_t i = 0; i < 3 * SHM_UNITS / SHM_BATCH_ALIGN; i++) {
        put(i);
        CHECK(take(&id) && id == i);
    }
    CHECK_EQ(P.mine, 3 * SHM_UNITS);
    free(g_mem);
    /* Without the room, the batch ends where its last message does. */
    rings_at(5);
    uint32_t used = 0;
    for (uint32_t i = 0; i < SHM_UNITS - 1; i++)
        write_msg(&used, i, 4);
    shm_ring_publish(&P, used);
    CHECK_EQ(P.mine, 5 + SHM_UNITS - 1);
    CHECK_EQ(shm_ring_room(&P, 1), 1);
    free(g_mem);
}

/* Within a batch, a message that would cross the ring's end goes to its
 * start, behind a pad the consumer skips; its cost counts the pad, and the
 * pad's units come back with the message's. */
static void t_pad_at_end(void)
{
    rings_at(SHM_UNITS - SHM_BATCH_ALIGN);
    uint32_t used = 0;
    write_msg(&used, 6, 200); /* 264 octets: three units */
    CHECK_EQ(used, 3);
    uint32_t left = SHM_BATCH_ALIGN - 3;
    CHECK_EQ(shm_ring_cost(&P, used, SHM_PAYLOAD), left + SHM_BATCH_ALIGN);
    CHECK_EQ(shm_ring_cost(&P, used, (left - 1) * SHM_UNIT), left); /* fits exactly: no pad */
    write_msg(&used, 7, SHM_PAYLOAD);
    shm_ring_publish(&P, used);
    CHECK_EQ(P.mine, SHM_UNITS + SHM_BATCH_ALIGN);
    const struct shm_msg *pad = (const struct shm_msg *)(const void *)(C.units + (SHM_UNITS - left) * SHM_UNIT);
    CHECK_EQ(pad->type, SHM_PAD);
    CHECK_EQ(shm_msg_units(pad->len), left);
    uint32_t id, len;
    CHECK(take_len(&id, &len) && id == 6 && len == 200);
    CHECK(take_len(&id, &len) && id == 7 && len == SHM_PAYLOAD);
    CHECK_EQ(C.mine, P.mine);
    CHECK_EQ(__atomic_load_n(&C.ctl->tail, __ATOMIC_SEQ_CST), P.mine);
    CHECK(!take(&id));
    free(g_mem);
}

/* A message that exactly fills the ring's last units needs no pad; the
 * next one of the batch starts at unit 0. */
static void t_exact_tail(void)
{
    rings_at(SHM_UNITS - SHM_BATCH_ALIGN);
    uint32_t used = 0, fill = (SHM_BATCH_ALIGN - 3) * SHM_UNIT - (uint32_t)sizeof(struct shm_msg);
    write_msg(&used, 1, 200); /* three units */
    CHECK_EQ(shm_ring_cost(&P, used, fill), SHM_BATCH_ALIGN - 3);
    write_msg(&used, 2, fill);
    CHECK_EQ(used, SHM_BATCH_ALIGN);
    CHECK_EQ(shm_ring_cost(&P, used, 100), 2);
    write_msg(&used, 3, 100);
    shm_ring_publish(&P, used);
    const struct shm_msg *first = (const struct shm_msg *)(const void *)C.units;
    CHECK_EQ(first->id, 3);
    uint32_t id, len;
    CHECK(take_len(&id, &len) && id == 1 && len == 200);
    CHECK(take_len(&id, &len) && id == 2 && len == fill);
    CHECK(take_len(&id, &len) && id == 3 && len == 100);
    CHECK(!take(&id));
    free(g_mem);
}

/* Batches of messages of mixed sizes published at once, with pads, across
 * the 32-bit wrap of the indexes (started just below it). */
static void t_wrap(void)
{
    rings_at(UINT32_MAX - 100);
    static const uint32_t sizes[] = {4, 64, 65, 300, SHM_PAYLOAD, 500, 4, 900};
    uint32_t next_put = 0, next_take = 0, pads = 0;
    for (int round = 0; round < 2000; round++) {
        uint32_t room = shm_ring_room(&P, 1), used = 0;
        for (int i = 0; i < 1 + round % 7; i++) {
            uint32_t len = sizes[next_put % 8];
            uint32_t cost = shm_ring_cost(&P, used, len);
            if (cost > room - used)
                break;
            pads += cost != shm_msg_units(len);
            struct shm_msg *m = shm_ring_put(&P, &used, len);
            m->id = next_put;
            uint8_t *p = (uint8_t *)(m + 1);
            memcpy(p, &next_put, 4);
            for (uint32_t k = 4; k < len; k++)
                p[k] = (uint8_t)k;
            next_put++;
        }
        shm_ring_publish(&P, used);
        uint32_t id, len;
        for (int i = 0; i < 5 && take_len(&id, &len); i++) {
            CHECK_EQ(len, sizes[next_take % 8]);
            CHECK_EQ(id, next_take++);
        }
    }
    uint32_t id;
    while (take(&id))
        CHECK_EQ(id, next_take++);
    CHECK_EQ(next_take, next_put);
    CHECK(pads > 0);
    CHECK(C.mine < 0x80000000u); /* the indexes wrapped */
    free(g_mem);
}

/* A head more than a ring ahead of the consumer is a corrupt peer: nothing
 * is handed out, the caller is told. */
static void t_corrupt_head(void)
{
    rings_at(0);
    __atomic_store_n(&P.ctl->head, SHM_UNITS + 1, __ATOMIC_RELEASE);
    bool corrupt = false;
    struct shm_msg h;
    CHECK(shm_ring_peek(&C, &h, &corrupt) == NULL);
    CHECK(corrupt);
    free(g_mem);
    /* A tail past the producer's head leaves no room. */
    rings_at(0);
    put_many(0, SHM_UNITS);
    __atomic_store_n(&P.ctl->tail, UINT32_MAX - 10, __ATOMIC_RELEASE);
    CHECK_EQ(shm_ring_room(&P, 1), 0);
    free(g_mem);
}

/* The peer writes a header at unit `at` with type, len and span `units`
 * (struct shm_msg.units; 0: the message's own size), and publishes
 * `published` units from there; the consumer must refuse it without
 * reading outside the ring (ASan watches the allocation's end). */
static bool refused_msg(uint32_t at, uint8_t type, uint32_t len, uint8_t units, uint32_t published)
{
    rings_at(at);
    struct shm_msg *m = (struct shm_msg *)(void *)(P.units + (size_t)at * SHM_UNIT);
    memset(m, 0, sizeof *m);
    m->type = type;
    m->len = len;
    m->units = units;
    __atomic_store_n(&P.ctl->head, at + published, __ATOMIC_SEQ_CST);
    bool corrupt = false;
    struct shm_msg h;
    const uint8_t *p = shm_ring_peek(&C, &h, &corrupt);
    free(g_mem);
    return !p && corrupt;
}

static bool refused(uint32_t at, uint8_t type, uint32_t len, uint32_t published)
{
    return refused_msg(at, type, len, 0, published);
}

static bool refused_span(uint32_t at, uint32_t len, uint8_t units, uint32_t published)
{
    return refused_msg(at, SHM_REQ_SEND, len, units, published);
}

/* Lengths from a corrupt peer: past the largest payload, past what was
 * published, across the ring's end (a message or a pad), a huge one; and
 * spans shorter than the length, past what was published or the end. */
static void t_corrupt_len(void)
{
    CHECK(refused(0, SHM_REQ_SEND, SHM_PAYLOAD + 1, 64));
    CHECK(refused(0, SHM_REQ_SEND, UINT32_MAX, 64));
    CHECK(refused(0, SHM_REQ_SEND, 300, 2));                        /* three units, two published */
    CHECK(refused(SHM_UNITS - 1, SHM_REQ_SEND, 100, 2));            /* two units from the last */
    CHECK(refused(SHM_UNITS - 2, SHM_PAD, SHM_PAYLOAD, 10));        /* a pad past the end */
    CHECK(refused(SHM_UNITS - 2, SHM_PAD, SHM_UNIT + 64 + 1, 10)); /* three units of pad from two */
    CHECK(refused_span(0, 300, 2, 64));               /* three units of length in a span of two */
    CHECK(refused_span(0, 4, 9, 8));                  /* a span past what was published */
    CHECK(refused_span(SHM_UNITS - 4, 4, 8, 64));     /* a span across the end */
    CHECK(!refused_span(SHM_UNITS - 4, 4, 4, 64));    /* to the end: taken */
    /* The same lengths where they fit are taken. */
    CHECK(!refused(0, SHM_REQ_SEND, SHM_PAYLOAD, 8));
    CHECK(!refused(SHM_UNITS - 2, SHM_REQ_SEND, 100, 2));
}

/* One message of a batch being written: type, flags and offset. */
static void write_kind(uint32_t *used, uint8_t type, uint8_t flags, uint64_t off)
{
    struct shm_msg *m = shm_ring_put(&P, used, 8);
    m->type = type;
    m->flags = flags;
    m->off = off;
}

static uint32_t run_of_sends(uint32_t max)
{
    bool corrupt = false;
    struct shm_msg h;
    if (!shm_ring_peek(&C, &h, &corrupt))
        return UINT32_MAX;
    return shm_ring_run(&C, max, SHM_REQ_SEND, SHM_F_IOV | SHM_F_LAST, SHM_F_LAST, SHM_F_INVALIDATE);
}

/* Takes the next n messages. */
static void skip(int n)
{
    bool corrupt = false;
    struct shm_msg h;
    for (int i = 0; i < n; i++) {
        REQUIRE(shm_ring_peek(&C, &h, &corrupt));
        shm_ring_take(&C);
    }
}

/* The look ahead over a run of like messages (whole Sends, here): it
 * counts from the message peeked on, skips a pad, stops before one of
 * another kind (a Write, a piece, single copy) and after one flagged
 * last (Invalidate), at max, and at what was published. */
static void t_run(void)
{
    rings_at(SHM_UNITS - 3); /* the third message goes behind a pad */
    uint32_t used = 0;
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST | SHM_F_SOLICIT, 0);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    CHECK_EQ(shm_ring_cost(&P, used, 8), 1);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST | SHM_F_INVALIDATE, 0);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    write_kind(&used, SHM_REQ_WRITE, SHM_F_LAST, 0);
    write_kind(&used, SHM_REQ_SEND, 0, 0);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 960);
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST | SHM_F_IOV, 0);
    shm_ring_publish(&P, used);
    CHECK_EQ(run_of_sends(32), 4); /* up to the Invalidate, the pad skipped */
    CHECK_EQ(run_of_sends(2), 2);
    skip(4);
    CHECK_EQ(run_of_sends(32), 2); /* up to the Write */
    skip(2);
    for (int i = 0; i < 4; i++) {
        CHECK_EQ(run_of_sends(32), 0); /* a Write, a first piece, a last piece, single copy */
        skip(1);
    }
    /* What is written but not published is not counted. */
    used = 0;
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    shm_ring_publish(&P, used);
    used = 0;
    write_kind(&used, SHM_REQ_SEND, SHM_F_LAST, 0);
    CHECK_EQ(run_of_sends(32), 1);
    free(g_mem);
}

int main(void)
{
    RUN(t_order_and_empty);
    RUN(t_units);
    RUN(t_full);
    RUN(t_batch_release);
    RUN(t_batch_aligned);
    RUN(t_pad_at_end);
    RUN(t_exact_tail);
    RUN(t_wrap);
    RUN(t_corrupt_head);
    RUN(t_corrupt_len);
    RUN(t_run);
    return tl_finish();
}
