/*
 * shm_ring.h - the rings of the shared-memory transport (docs/shm.md):
 * one producer and one consumer, in two processes, over memory both map.
 * Sans-IO: no system call; a ring is a control block and a unit array at
 * an address the caller gives, and the caller decides what a full or an
 * empty ring means (wait, wake the peer).
 *
 * The producer alone writes `head`, the consumer alone writes `tail`, each
 * on its own cache line; each side keeps its own copy of the other's index
 * and reads the shared one only when that copy says full (producer) or
 * empty (consumer). Publishing is a store of head after the units are
 * written; releasing is a store of tail after they were read, once for
 * every unit taken since the last release (a drained batch costs one
 * store, and one cache-line transfer to the producer). Both, and the loads
 * of the other side's index, are sequentially consistent: the owner's
 * wake-up flags (a consumer that arms, then looks at head; a producer
 * that publishes, then looks at the flag) need one total order so that no
 * wake-up is lost.
 */
#ifndef NDK_SHM_RING_H
#define NDK_SHM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_LINE 64
/* A ring is SHM_UNITS units of SHM_UNIT octets; a message (a 64-octet
 * header, then its payload) takes whole contiguous units, so a small one
 * takes one unit and the ring holds thousands of them (docs/shm.md). */
#define SHM_UNIT 128u
#define SHM_UNITS 2048u   /* a power of two */
#define SHM_MSG_MAX 1024u /* octets of the largest message, header included */
_Static_assert((SHM_UNITS & (SHM_UNITS - 1)) == 0, "unit indexes wrap by masking");
/* A batch of messages (what one publish makes visible) ends on a boundary
 * of SHM_MSG_MAX octets when the ring has room: its last message spans
 * the units up to it (struct shm_msg.units). Messages published one at a
 * time sit as far apart as the largest message, since a 64-octet round
 * trip measured 1.2x slower with each message in the units right after
 * the last one, while messages published together (a DEFER chain) are
 * packed. */
#define SHM_BATCH_ALIGN (SHM_MSG_MAX / SHM_UNIT)
_Static_assert(SHM_MSG_MAX % SHM_UNIT == 0 && SHM_UNITS % SHM_BATCH_ALIGN == 0,
               "the largest messages tile the ring");

/* Message types (struct shm_msg.type). */
enum shm_msg_type {
    SHM_REQ_SEND = 1,  /* a Send (or a piece of one) */
    SHM_REQ_WRITE,     /* an RDMA Write (or a piece of one) */
    SHM_REQ_READ,      /* an RDMA Read Request */
    SHM_RESP_ACK,      /* a single-copy or SHM_F_ACK request was carried out */
    SHM_RESP_READ,     /* a piece of a Read's data (or, with no payload and
                          SHM_F_PULLED, the end of a single-copy Read) */
    SHM_RESP_TERM,     /* the target refused request `id`: the connection ends */
    SHM_PAD,           /* no message: fills the ring's last units when the next
                          message would cross its end (the consumer skips it) */
    SHM_RESP_GRANT,    /* single-copy Write or Read `id` split: the initiator moves
                          the octets from off on itself, at these target iovecs */
};

/* Flags (struct shm_msg.flags). */
#define SHM_F_LAST 0x01   /* the message's last piece */
#define SHM_F_IOV 0x02    /* payload: struct shm_iov of the initiator's memory (single copy) */
#define SHM_F_SOLICIT 0x04
#define SHM_F_INVALIDATE 0x08 /* Send with Invalidate: stag is the one to invalidate */
#define SHM_F_NAMED 0x10  /* SHM_RESP_TERM names a request (id); else the connection broke */
/* A Send or Write carried in pieces through the ring (larger than one
 * message): the target acknowledges it after its last piece, and the
 * initiator completes it then, as a single-copy one (docs/shm.md). */
#define SHM_F_ACK 0x20

/* The header of every message: 64 octets, then the payload. */
struct shm_msg {
    uint8_t type;
    uint8_t flags;
    uint8_t term_layer, term_etype, term_code;
    uint8_t units;     /* units the message spans, up to the next batch; 0: shm_msg_units(len) */
    uint8_t pad0[2];
    uint32_t id;       /* the initiator's request number (its queue index) */
    uint32_t len;      /* payload octets in this message (it takes shm_msg_units(len) units) */
    uint32_t stag;     /* Write, Read: the target's STag; Send: the STag to invalidate */
    uint32_t niov;     /* SHM_F_IOV: pairs in the payload */
    uint64_t to;       /* Write, Read: the target's TO */
    uint64_t total;    /* the whole message's length */
    uint64_t off;      /* where this piece starts in the message */
    uint8_t pad1[16];
};
_Static_assert(sizeof(struct shm_msg) == SHM_LINE, "one cache line of header");
#define SHM_PAYLOAD (SHM_MSG_MAX - sizeof(struct shm_msg))

/* Units a message with len octets of payload takes (len <= SHM_PAYLOAD). */
static inline uint32_t shm_msg_units(uint32_t len)
{
    return (uint32_t)((sizeof(struct shm_msg) + len + SHM_UNIT - 1) / SHM_UNIT);
}

/* An (address, length) pair of the initiator's memory (SHM_F_IOV). */
struct shm_iov {
    uint64_t addr;
    uint64_t len;
};
#define SHM_IOV_MAX (SHM_PAYLOAD / sizeof(struct shm_iov))

/* The shared part of a ring. */
struct shm_ring_ctl {
    _Alignas(SHM_LINE) uint32_t head;
    _Alignas(SHM_LINE) uint32_t tail;
    /* The producer found the ring full and waits for room: the consumer
     * wakes it after freeing units. */
    _Alignas(SHM_LINE) uint32_t space_wanted;
};
#define SHM_RING_BYTES (sizeof(struct shm_ring_ctl) + (size_t)SHM_UNITS * SHM_UNIT)

/* The shared region (docs/shm.md): a page of header, then four rings;
 * side s (0: the side that made the region) produces its requests into
 * ring 2s and its responses into ring 2s + 1. */
#define SHM_HDR_BYTES 4096u
#define SHM_REGION_BYTES (SHM_HDR_BYTES + 4 * SHM_RING_BYTES)
static inline size_t shm_ring_offset(int side, bool responses)
{
    return SHM_HDR_BYTES + (size_t)(2 * side + responses) * SHM_RING_BYTES;
}

/* One side's view of a ring: the shared part and its private copies. */
struct shm_ring {
    struct shm_ring_ctl *ctl;
    uint8_t *units;
    uint32_t mine;   /* producer: next head; consumer: the unit of the next message to take */
    uint32_t theirs; /* last value of the other side's index we read */
    uint32_t freed;  /* consumer: the tail last stored (taken units up to mine are still ours) */
    uint32_t cur;    /* consumer: units of the message shm_ring_peek returned */
    struct shm_msg *last; /* producer: the message shm_ring_put wrote last */
    uint32_t last_units;  /* producer: its own units (the ring's copy is not read back) */
};

/* Views the ring at mem (SHM_RING_BYTES octets, 64-aligned). init: zero the
 * control block (the side that creates the region). */
void shm_ring_attach(struct shm_ring *r, void *mem, bool init);

/* ---- producer ---- */
/* Free units, reading the consumer's tail when the private copy says
 * fewer than need (1..SHM_UNITS). */
uint32_t shm_ring_room(struct shm_ring *r, uint32_t need);
/* Units a message with len octets of payload costs written at head + at:
 * its own, and a pad before it when it would cross the ring's end. */
uint32_t shm_ring_cost(const struct shm_ring *r, uint32_t at, uint32_t len);
/* The message at head + *at (the caller checked its cost against the
 * room), its header zeroed and its len set, to fill; a pad is written
 * before it when needed; *at advances past both. */
struct shm_msg *shm_ring_put(struct shm_ring *r, uint32_t *at, uint32_t len);
/* The same with the header *h (its len included) written at once: a
 * producer that builds the header aside writes the unit, which the
 * consumer read last, with a few wide stores instead of a field at a
 * time. */
struct shm_msg *shm_ring_put_msg(struct shm_ring *r, uint32_t *at, const struct shm_msg *h);
/* Makes the next n filled units visible to the consumer; the last message
 * spans on to the batch boundary when the ring has room for that and a
 * unit more. */
void shm_ring_publish(struct shm_ring *r, uint32_t n);

/* ---- consumer ---- */
/* The oldest published message not yet taken (pads skipped): its header
 * copied to *h, read once since the peer may still write it, and its
 * payload returned; NULL when there is none. *corrupt is set (and NULL
 * returned) when the producer's index is impossible or the header's
 * length or span is: a length past SHM_PAYLOAD, a span shorter than the
 * length, past what was published, or across the ring's end. The payload's h->len octets are then inside the ring. */
const uint8_t *shm_ring_peek(struct shm_ring *r, struct shm_msg *h, bool *corrupt);
/* How many published messages, from the one shm_ring_peek returned on
 * (that one included; pads skipped), are whole (off 0) messages of this
 * type with (flags & mask) == want, one after another, at most max; one
 * with a flag of `last` is the run's last. A look ahead, for a consumer
 * that prepares a run of like messages at once (xp_shm.c takes their
 * receives together): shm_ring_peek still checks each message as it
 * comes to it. */
uint32_t shm_ring_run(const struct shm_ring *r, uint32_t max, uint8_t type, uint8_t mask, uint8_t want,
                      uint8_t last);
/* The consumer is done with the message shm_ring_peek returned and goes on
 * to the next; its units stay out of the producer's reach until released. */
void shm_ring_take(struct shm_ring *r);
/* Gives every unit taken since the last release back to the producer, with
 * one store; false when there was none. */
bool shm_ring_release(struct shm_ring *r);
/* Is anything published and not released (fresh reads of both shared
 * indexes; safe from a thread that is not the consumer)? Inline: a busy
 * poller's empty look is little more than two of these. */
static inline bool shm_ring_pending(const struct shm_ring *r)
{
    return __atomic_load_n(&r->ctl->head, __ATOMIC_SEQ_CST) != __atomic_load_n(&r->ctl->tail, __ATOMIC_SEQ_CST);
}

#endif
