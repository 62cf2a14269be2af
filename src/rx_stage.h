/*
 * rx_stage.h - the receive engine's staging buffer: one system call takes
 * as many octets as the socket holds (up to the buffer's size) when the
 * FPDUs coming are small, and the engine then takes its reads (header,
 * payload, trailer) from the buffer by copying. Large payloads still go
 * from the socket straight into registered memory: a read is served from
 * the buffer only while it holds octets, and refills it only when the
 * engine says the read is small (qp_rx.c decides).
 *
 * The buffer is provider memory, never the consumer's: staging changes how
 * octets leave the socket, not when or where the engine places them, so
 * every check still comes before a byte is placed.
 */
#ifndef NDK_RX_STAGE_H
#define NDK_RX_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct ndk_transport;

/* Payloads of at most `threshold` octets are staged; `size` octets of
 * buffer per connection, held only while a burst is being read: taken at a
 * staged read, given back when drained and the socket had no more (0: no
 * staging). Each device keeps the configuration its new data paths start
 * with (struct ndk_device.rx_stage, the defaults below); the sim and the
 * FPDU-stream fuzzer vary it through ndk_test_rx_stage_set (core.h). */
struct rx_stage_cfg {
    size_t threshold;
    size_t size;
};

/* Chosen by measurement with bench/datapath (README there, "Staging");
 * a build may set others (-DNDK_RX_STAGE_THRESHOLD=..., e.g. to measure). */
#ifndef NDK_RX_STAGE_THRESHOLD
#define NDK_RX_STAGE_THRESHOLD 8192
#endif
/* One read then takes hundreds of small FPDUs, and one whole FPDU of the
 * largest size MPA allows (a 16-bit ULPDU length, 2 + 65535 + pad + CRC)
 * fits. 0 turns staging off. */
#ifndef NDK_RX_STAGE_SIZE
#define NDK_RX_STAGE_SIZE (65536 + 16)
#endif

/* A refill while the input trickles (the last one took less than this)
 * goes into a small area inside the stage, not the buffer: a ping-pong's
 * FPDU at a time then costs no allocation of the buffer and no giving it
 * back. One that fills the area makes the next refill take the buffer:
 * a burst costs at most one more read, as it starts. */
#define RX_STAGE_SMALL 256

struct rx_stage {
    uint8_t *buf;      /* the buffer, while a burst is read; else NULL */
    uint8_t *data;     /* what the unread octets lie in: buf or small */
    size_t cap;        /* 0: no staging, every read goes to the transport */
    size_t threshold;
    size_t head, tail; /* unread octets are data[head, tail) */
    bool dry;          /* the last refill emptied the socket (rx_stage_wake) */
    bool burst;        /* the last refill filled what it read into: the next takes the buffer */
    uint8_t small[RX_STAGE_SMALL];
};

/* How a read may use the transport when the buffer is empty. */
enum rx_stage_how {
    RX_STAGE_FILL,   /* the read is small: refill the buffer, serve from it */
    RX_STAGE_DIRECT, /* read straight into the caller's iovecs */
    RX_STAGE_ONLY,   /* not at all (-EAGAIN): the engine's budget is spent */
};

/* A stage configured by cfg; its buffer comes with the first staged read
 * of a burst. False without memory. A stage may be copied while it holds
 * nothing (data is set by each refill). */
bool rx_stage_init(struct rx_stage *s, struct rx_stage_cfg cfg);
void rx_stage_fini(struct rx_stage *s);
static inline size_t rx_stage_held(const struct rx_stage *s)
{
    return s->tail - s->head;
}
/* The engine was called for input: the socket may hold octets again. A
 * refill that takes fewer octets than the buffer holds has emptied the
 * socket, and until this call every read that finds the buffer empty says
 * -EAGAIN without a system call: the socket's readiness calls the engine
 * again when more arrives, and the read that would only have said EAGAIN
 * is saved (one per wake-up of a ping-pong). */
static inline void rx_stage_wake(struct rx_stage *s)
{
    s->dry = false;
}
/* Drops what the buffer holds (the stream is being discarded); returns
 * how many octets that was. */
size_t rx_stage_drop(struct rx_stage *s);
/* Reads into v as the transport's readv would (octets moved, 0 at the end
 * of the stream, -errno): from the buffer while it holds octets (possibly
 * fewer than asked), else as `how` says. */
ssize_t rx_stage_readv(struct rx_stage *s, struct ndk_transport *tr, const struct iovec *v, int n,
                       enum rx_stage_how how);

#endif
