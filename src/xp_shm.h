/*
 * xp_shm.h - the shared-memory transport (transport.h, docs/shm.md): a QP
 * of this process and one of a peer process on the same host, of the same
 * user, joined through rings in memory both map. Operations keep every
 * check, completion and status of the iWARP transport; what differs is
 * speed.
 */
#ifndef NDK_XP_SHM_H
#define NDK_XP_SHM_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

struct ndk_qp_impl;
struct shm_conn;

/* Joins an idle QP (created, never connected) to the QP of the process at
 * the other end of sock, a connected UNIX stream socket; exactly one side
 * passes creator (it makes the shared region). Waits at most timeout_ms for
 * the peer. Single-copy placement is used when process_vm_readv works both
 * ways and neither side sets NDK_SHM_COPY=1; otherwise payloads are copied
 * through the rings (*copy_mode true, logged once). On success the QP is in
 * RTS with ird/ord; the connection ends with ndk_qp_stop (or the QP's
 * close), with the peer's end, or with the peer process's. Returns
 * STATUS_SUCCESS, STATUS_INVALID_DEVICE_STATE (the QP is not idle),
 * STATUS_IO_TIMEOUT, STATUS_INSUFFICIENT_RESOURCES or
 * STATUS_CONNECTION_REFUSED (the peer runs as another user, or broke the
 * exchange off). */
NTSTATUS ndk_shm_connect(struct ndk_qp_impl *qp, int sock, bool creator, uint32_t ird, uint32_t ord,
                         int timeout_ms, bool *copy_mode);

/* The same set-up without waiting, for a QP its connector owns (the
 * same-host selection, docs/shm.md): start checks that the peer on sock
 * runs as our user and, as creator, offers the region; step takes what
 * sock holds (never waiting for it: call it when sock is readable) and
 * returns 1 while the peer's next message is awaited, 0 once ready,
 * -errno when the set-up failed. A ready set-up is attached
 * (the QP in RTS with ird/ord; ended(arg) is called, from any thread, when
 * the connection ends on its own: the peer left, its process ended, a
 * Terminate); any other is abandoned. sock stays the caller's. */
struct shm_conn *ndk_shm_setup_start(struct ndk_qp_impl *qp, int sock, bool creator, int *err);
int ndk_shm_setup_step(struct shm_conn *s);
/* Whether this side sent all it will: what is left is the peer's last
 * word, which may wait in sock until the owner needs it. */
bool ndk_shm_setup_said_all(const struct shm_conn *s);
NTSTATUS ndk_shm_setup_attach(struct shm_conn *s, uint32_t ird, uint32_t ord, void (*ended)(void *arg),
                              void *arg, bool *copy_mode);
void ndk_shm_setup_abandon(struct shm_conn *s);
/* Takes every request and response the peer published so far (its FIN on
 * the control channel follows what it sent before). No-op on another
 * transport. */
void ndk_shm_drain(struct ndk_qp_impl *qp);
/* The connection is reset, not closed: the peer ends with
 * NDK_DISCONNECT_REASON_ABORTED, as a TCP reset gives (call before
 * ndk_qp_stop). No-op on another transport. */
void ndk_shm_abort(struct ndk_qp_impl *qp);
/* No request of the QP is outstanding (NdkDisconnect's "DMA finished"). */
bool ndk_shm_quiescent(struct ndk_qp_impl *qp);

/* For tests that play a broken peer: the shared region of a QP joined
 * with ndk_shm_connect (SHM_REGION_BYTES, shm_ring.h) and which side this
 * process is; NULL when the QP has no such connection. */
void *ndk_shm_region(struct ndk_qp_impl *qp, int *side);
/* ...and what a libndk side does at its first publish: says in the header
 * that it published, without which the peer reads none of its rings. */
void ndk_shm_mark_published(struct ndk_qp_impl *qp);
/* For tests: whether the QP's connection holds the block of receives
 * taken ahead (allocated by the first run of small Sends that takes
 * them, freed with the connection); false without such a connection. */
bool ndk_shm_holds_ahead(struct ndk_qp_impl *qp);

#endif
