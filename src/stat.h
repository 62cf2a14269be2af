/*
 * stat.h - what ndkstat shows (docs/tools.md, "ndkstat"): counters kept by
 * the objects, and the snapshot a process serves on its stat channel
 * (net/stat_server.c).
 *
 * Counters cost nothing measurable: each data-path counter has one writer
 * at a time (the thread holding the QP lock it belongs to), which adds with
 * a relaxed load and store (plain moves, no locked instruction); the
 * snapshot reads them with relaxed loads, racy but never torn.
 */
#ifndef NDK_STAT_H
#define NDK_STAT_H

#include <stddef.h>
#include <stdint.h>

#define NDK_STAT_ADD(field, n)                                                                 \
    __atomic_store_n(&(field), __atomic_load_n(&(field), __ATOMIC_RELAXED) + (n), __ATOMIC_RELAXED)
#define NDK_STAT_GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* RDMAP opcodes 0..7 (RFC 5040 section 4.3): Write, Read Request, Read
 * Response, Send, Send with Invalidate, Send with SE, Send with SE and
 * Invalidate, Terminate. */
#define NDK_STAT_OPS 8

/* A QP's data path. tx_* under sq_lock, rx_* under rx_lock; completions
 * under whichever lock completes the request. */
struct ndk_dp_stats {
    uint64_t tx_fpdus[NDK_STAT_OPS], tx_bytes[NDK_STAT_OPS]; /* payload octets */
    uint64_t rx_fpdus[NDK_STAT_OPS], rx_bytes[NDK_STAT_OPS];
    uint64_t cqe_success, cqe_cancelled, cqe_error;
    /* Zero-length Writes libndk sends on its own (ndk_qp_nudge): not in
     * tx_fpdus, but a libndk peer counts them in its rx_fpdus of Writes. */
    uint64_t nudges;
    /* The Terminate sent / received: 1 << 24 | layer << 16 | etype << 8 | code, 0 if none. */
    uint32_t term_tx, term_rx;
};
#define NDK_STAT_TERM(layer, etype, code)                                                      \
    (1u << 24 | (uint32_t)(layer) << 16 | (uint32_t)(etype) << 8 | (uint32_t)(code))

/* An adapter's connection attempts by outcome (added atomically by the
 * engines' connection management, NDK_CM_STAT_INC in objects.h), and the
 * counters of its closed QPs, so the adapter's totals survive them. */
struct ndk_adapter_stats {
    uint64_t connect_ok, connect_refused, connect_failed;
    uint64_t requests, requests_refused, accept_ok, accept_failed, rejected;
    uint64_t setup_term_tx, setup_term_rx; /* Terminates while connecting */
    uint64_t term_tx, term_rx;             /* of closed QPs */
    struct ndk_dp_stats closed;
};

struct ndk_adapter_impl;
struct ndk_qp_impl;
/* ndk_open_adapter / ndk_close_adapter: the process's adapter list. The
 * first adapter starts the stat channel, the last one's close stops it. */
void ndk_stat_adapter_opened(struct ndk_adapter_impl *ad);
void ndk_stat_adapter_closing(struct ndk_adapter_impl *ad);
/* A QP is destroyed (device lock held): its counters go to the adapter's. */
void ndk_stat_qp_retire(struct ndk_qp_impl *qp);

/* The snapshot: one line per object, "TYPE id=N key=value ...", first a
 * "process" line (docs/tools.md). malloc'ed, NUL-terminated. */
char *ndk_stat_snapshot(size_t *len);

#endif
