/*
 * verify.h - the NDK verifier's entry points for the rest of the provider
 * (docs/verifier.md). The verifier checks a consumer's calls against the
 * rules of docs/rules.md. It is attached per adapter: it swaps the Dispatch
 * pointer of the adapter and of every object created under it for checking
 * tables that call the provider's own (rule L16: the provider never reads
 * Dispatch back), and wraps the consumer's callbacks. Objects of an adapter
 * opened without it are untouched, so it costs them nothing; the provider
 * reaches it only through obj->verify, on paths that are no fast path.
 */
#ifndef NDK_VERIFY_H
#define NDK_VERIFY_H

#include <stdint.h>

#include "core.h"

struct ndk_qp_impl;

/* Should this adapter be verified (its open options, or NDK_VERIFY)? */
bool ndk_verify_wanted(const NDK_OPEN_OPTIONS *opt);
/* Attaches the verifier to a newly opened adapter (before it is handed
 * out); false when out of memory. */
bool ndk_verify_attach(struct ndk_adapter_impl *ad);
/* ndk_close_adapter is starting: reports objects still open (rule L17) and
 * stops the verifier's watchdog. */
void ndk_verify_adapter_closing(struct ndk_adapter_impl *ad);
/* The adapter is gone: frees the verifier's records. */
void ndk_verify_detach(struct ndk_adapter_impl *ad);

/* A peer's Send found no receive posted (rule W10) and waited waited_ms:
 * until a receive came, or (terminated) until the grace period ended and
 * the connection is terminated. Any thread, any locks held: only reports. */
void ndk_verify_send_without_receive(struct ndk_qp_impl *qp, uint64_t waited_ms, bool terminated);

#endif
