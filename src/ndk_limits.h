/*
 * ndk_limits.h - every limit libndk reports or enforces, with its reason.
 * NdkQueryAdapterInfo reports these (adapter.c); the object files enforce
 * them. (The iWARP engine's own batch and buffer sizes are in qp.h.)
 */
#ifndef NDK_LIMITS_H
#define NDK_LIMITS_H

#include <stdint.h>

/* MaxRegistrationSize, MaxWindowSize: a registration is a range of the
 * process's virtual address space, which is 47 bits on x86-64 Linux. */
#define NDK_MAX_REGION ((uint64_t)1 << 47)

/* FRMRPageCount: page lists are plain arrays; 256 pages (1 MiB) costs 2 KiB
 * per FRMR and does not reduce how many can exist. */
#define NDK_FRMR_PAGE_COUNT 256u
/* NdkInitializeFastRegisterMr: more pages than this is
 * STATUS_IMPLEMENTATION_LIMIT (a page list of 512 KiB per MR is the most we
 * are willing to hold). */
#define NDK_MAX_FRMR_PAGES 65536u

/* SGEs per request (initiator, receive, Read sink): one gathering
 * sendmsg/readv per message, far below IOV_MAX. Posted receives and SRQ
 * entries carry this many SGEs inline. */
#define NDK_MAX_SGE 16

/* The most host-contiguous pieces the local SGEs of one request may map to.
 * An SGE in a fast-registered MR whose pages are not adjacent in memory
 * takes one piece per run of adjacent pages; a request that needs more
 * pieces than this is refused with STATUS_IMPLEMENTATION_LIMIT. The data
 * path sizes its per-message iovec arrays with it. */
#define MEM_LOCAL_IOV_MAX 64

/* MaxTransferLength: RDMA Read sizes are 32-bit on the wire; 1 GiB keeps
 * every length comfortably in range. */
#define NDK_MAX_TRANSFER (1u << 30)

/* MaxInlineDataSize: inline data is copied into the send slot at post time;
 * perftest asks for up to 236. */
#define NDK_MAX_INLINE 256u

/* MaxInboundReadLimit / MaxOutboundReadLimit: what Linux siw supports
 * (SIW_MAX_IRD_QP / SIW_MAX_ORD_QP); larger values would make a siw
 * initiator fail the connection. */
#define NDK_MAX_IRD 128
#define NDK_MAX_ORD 128

/* Queue depths: entries are small host structures; these bound the memory
 * one consumer can pin in the provider. A receive or initiator queue entry
 * is a few hundred octets; an SRQ entry 272 (16 SGEs), so an SRQ is at
 * most 4.25 MiB; a CQ entry 48, so a CQ is at most 3 MiB. */
#define NDK_MAX_QUEUE_DEPTH 16384u
#define NDK_MAX_SRQ_DEPTH 16384u
#define NDK_MAX_CQ_DEPTH 65536u

/* LargeRequestThreshold: above this a software copy into a posted receive
 * costs more than direct placement with Read/Write. */
#define NDK_LARGE_REQUEST_THRESHOLD 8192u

/* MaxCallerData / MaxCalleeData: MPA allows 512 octets including the
 * 4-octet RFC 6581 word, but siw drops frames with PD_Length > 256. */
#define NDK_MAX_PRIVATE_DATA 252

/* NDK_OPEN_FLAG_RELAXED_TX_GATE: a responder to a client/server initiator
 * may send first this long after its Reply (docs/behaviour.md, "The three
 * legs on the wire"): the delay keeps a siw initiator from seeing data
 * right behind the Reply. */
#define NDK_RELAXED_GATE_MS 100
/* How long NdkCompleteConnect waits for the same-host rendezvous once a
 * listener of this host answered (docs/shm.md, Selection): on loopback it
 * settles in well under a millisecond; past this the connection keeps TCP.
 * The environment variable NDK_SHM_WAIT_MS overrides it (at most 10 s). */
#define NDK_SHM_RENDEZVOUS_MS 20

/* Progress engines per device (docs/architecture.md, Engines): one per CPU
 * of the process's affinity mask, at most this many (a processor group's
 * worth, as one GROUP_AFFINITY mask names), and at most MaxEngines. */
#define NDK_MAX_ENGINES 64u

/* How long an engine that just handled socket input looks for more before
 * it sleeps (EngineSpinMicroseconds; net/loop.h, loop_set_spin). A reply
 * that comes within it is taken without a wake-up, which costs more than
 * this between CPUs of a virtual machine (30-45 us); bench/README.md,
 * Engine spin, has the curve this default was taken from. The cap keeps a
 * mistaken value from turning an engine into a busy poller. */
#define NDK_ENGINE_SPIN_US 50u
#define NDK_ENGINE_SPIN_MAX_US 1000u

#endif
