/*
 * shm_rendezvous.h - the same-host rendezvous (docs/shm.md, Selection): how
 * the two ends of an established iWARP connection find out, without an
 * octet on the TCP stream, that they are processes of one user on one
 * host, and set the shared-memory transport up (xp_shm.h) instead.
 *
 * A listener whose adapter allows the fast path listens on an abstract
 * UNIX socket named after its TCP endpoint (shm_rv_listen_*). An accepted
 * connection that may be joined waits in its listener's list
 * (shm_rv_expect) until its RTR arrives. The initiator, at NdkCompleteConnect,
 * connects to its peer's name and says who it is (shm_rv_connect); it is
 * told once through settled() whether the fast path is set up. Everything
 * runs on the progress loops, under the lock of the loop's engine (a
 * passive connection's rendezvous on its listener's, whose engine the
 * connector then stays on: connector.c, rv_expected), without waiting.
 */
#ifndef NDK_SHM_RENDEZVOUS_H
#define NDK_SHM_RENDEZVOUS_H

#include <stdbool.h>
#include <stdint.h>

#include <ndk/ndk.h>

#include "net/loop.h"
#include "net/watched.h"

/* The messages on the abstract socket (shm_rendezvous.c), here for the
 * tests that play an initiator. */
#define SHM_RV_MAGIC 0x4E444B52u /* "NDKR" */
#define SHM_RV_VERSION 2u
enum { SHM_RV_HELLO = 1, SHM_RV_OK, SHM_RV_GO };
struct shm_rv_msg {
    uint32_t magic, version, kind, pad;
    uint8_t secret[16];
    NDK_SOCKADDR local, peer; /* hello: the initiator's TCP 4-tuple */
};
/* A hello carries the initiator's TCP socket (SCM_RIGHTS) as its proof. */

struct ndk_qp_impl;
struct ndk_adapter_impl;
struct shm_conn;
struct shm_rv;

struct shm_rv_listen {
    int fd; /* -1: this listener offers no fast path */
    struct loop *loop;
    struct loop_watch watch;
    struct watched_set incoming; /* struct shm_rv_in: accepted, their first message not read yet */
    struct shm_rv *expect;      /* connections that may be joined */
    uint64_t netns;             /* our network namespace (tcp_owner_netns) */
};

struct shm_rv {
    int state;
    int fd;
    struct loop *loop;
    struct loop_watch watch;
    struct shm_conn *setup;
    struct ndk_qp_impl *qp;
    NDK_SOCKADDR local, peer; /* the TCP connection's, as this side sees it */
    uint8_t secret[16];
    struct shm_rv_listen *ls; /* passive: the list it waits in */
    struct shm_rv *next, **pprev;
    /* initiator: called once, from the loop, when it settled (shm: the
     * set-up is ready, shm_rv_take has it) */
    void (*settled)(struct shm_rv *rv, bool shm);
};

/* Whether the adapter's connections may use shared memory (shm_select.c:
 * NDK_SHM, NDK_OPEN_FLAG_NO_SHM, what the kernel offers). */
bool ndk_shm_allowed(struct ndk_adapter_impl *ad);
/* NdkCompleteConnect's bound on the rendezvous (NDK_SHM_RENDEZVOUS_MS, or
 * NDK_SHM_WAIT_MS). */
unsigned ndk_shm_rendezvous_ms(void);

void shm_rv_listen_init(struct shm_rv_listen *ls);
/* Offers the fast path on the listener's TCP endpoint local; silently none
 * when the name is taken or the socket cannot be made. */
void shm_rv_listen_start(struct shm_rv_listen *ls, struct loop *loop, const NDK_SOCKADDR *local);
void shm_rv_listen_stop(struct shm_rv_listen *ls);

void shm_rv_init(struct shm_rv *rv);
/* Passive: the accepted connection (local, peer) of qp may be joined. */
void shm_rv_expect(struct shm_rv *rv, struct shm_rv_listen *ls, struct ndk_qp_impl *qp, const NDK_SOCKADDR *local,
                   const NDK_SOCKADDR *peer);
/* Initiator: starts the rendezvous for qp's connection, whose TCP socket
 * is tcp_fd (passed to the listener as the proof that we hold it); false
 * when there is nobody to ask (no listener of that name), and nothing was
 * started. */
bool shm_rv_connect(struct shm_rv *rv, struct loop *loop, struct ndk_qp_impl *qp, int tcp_fd,
                    const NDK_SOCKADDR *local, const NDK_SOCKADDR *peer,
                    void (*settled)(struct shm_rv *rv, bool shm));
/* The set-up both sides agreed on, ready to attach (ndk_shm_setup_attach),
 * or NULL; the rendezvous is over either way. The passive side calls it
 * when the RTR arrived: the initiator's go-ahead was sent before its RTR. */
struct shm_conn *shm_rv_take(struct shm_rv *rv);
/* Ends the rendezvous, silently (settled is not called). Idempotent. */
void shm_rv_stop(struct shm_rv *rv);

#endif
