/*
 * simshm.c - the sim's shared-memory model (simnet.h): the two QPs of a
 * sim_net joined by the same-host transport (src/xp_shm.c, docs/shm.md)
 * instead of the byte logs, so that the same scripts run over both.
 *
 * That transport moves data on each side's progress engine, woken through
 * eventfds, and copies with process_vm_readv/writev: nothing here can
 * schedule it step by step. A run is therefore real time, not a function
 * of its seed: sim_run waits (bounded) until the exchange has settled, and
 * plays the connector's part when a side's transport ends on its own.
 */
#include "simnet.h"

#include <poll.h>
#include <sys/socket.h>

#include "shm_ring.h"
#include "xp_shm.h"

/* Set-up, and each sim_run: generous for ASan on a loaded machine. */
#define SIM_SHM_WAIT_MS 10000u

bool sim_shm_wanted(void)
{
    const char *t = getenv("NDK_SIM_TRANSPORT");
    return t && !strcmp(t, "shm");
}

void sim_shm_force_copy(bool on)
{
    if (on)
        setenv("NDK_SHM_COPY", "1", 1);
    else
        unsetenv("NDK_SHM_COPY");
}

static bool past(uint64_t t0, unsigned ms)
{
    return tl_now_ns() - t0 > (uint64_t)ms * 1000000u;
}

/* The transport ended on its own (the peer left, a Terminate): called
 * from its progress engine; sim_run stops the QP, as the connector does. */
static void shm_ended(void *arg)
{
    __atomic_store_n((bool *)arg, true, __ATOMIC_RELEASE);
}

/* The set-up of xp_shm.h over a socket pair, both sides on this thread,
 * A creating the region; then both attached with the configuration's
 * IRD and ORD. */
bool sim_shm_start(struct sim_net *net)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
        perror("sim: socketpair");
        return false;
    }
    struct shm_conn *s[2] = {NULL, NULL};
    int err = 0, waiting[2] = {1, 1};
    for (int i = 0; i < 2 && !err; i++)
        s[i] = ndk_shm_setup_start(net->side[i].impl, sv[i], i == SIM_A, &err);
    uint64_t t0 = tl_now_ns();
    while (!err && (waiting[0] || waiting[1])) {
        for (int i = 0; i < 2 && !err; i++)
            if (waiting[i] && (waiting[i] = ndk_shm_setup_step(s[i])) < 0)
                err = waiting[i];
        if (past(t0, SIM_SHM_WAIT_MS))
            err = -ETIMEDOUT;
        struct pollfd p[2] = {{.fd = sv[0], .events = POLLIN}, {.fd = sv[1], .events = POLLIN}};
        if (!err && (waiting[0] || waiting[1]))
            poll(p, 2, 10);
    }
    bool ok = !err;
    for (int i = 0; i < 2; i++) {
        bool copy = false;
        if (ok && ndk_shm_setup_attach(s[i], net->cfg.ird[i], net->cfg.ord[i], shm_ended, &net->shm_ended[i],
                                       &copy) != STATUS_SUCCESS)
            ok = false; /* an attach that fails frees its set-up */
        else if (!ok)
            ndk_shm_setup_abandon(s[i]);
        net->shm_copy |= copy;
    }
    if (err)
        fprintf(stderr, "sim: shared-memory set-up failed: %s\n", strerror(-err));
    close(sv[0]);
    close(sv[1]);
    return ok;
}

/* The connector's part: a side whose transport ended is stopped, which
 * flushes what it still owes. */
static void shm_settle(struct sim_net *net)
{
    for (int i = 0; i < 2; i++)
        if (__atomic_load_n(&net->shm_ended[i], __ATOMIC_ACQUIRE))
            sim_stop(net, i);
}

/* A completion the request is still owed: every accepted signalled one,
 * but a receive no Send was posted for while its QP runs. */
static bool owed(const struct sim_net *net, const struct sim_req *r)
{
    if (!r->accepted || !r->signalled || r->cqes)
        return false;
    return r->kind != SK_RECV || r->peer >= 0 || net->end[r->side].stopped;
}

/* Nothing moves any more: no completion owed, no request of either side
 * outstanding, and no message published that its consumer has not
 * released (a silent Write is done once published). */
static bool shm_settled(struct sim_net *net, bool report)
{
    for (int i = 0; i < net->nreq; i++) {
        if (owed(net, &net->req[i])) {
            if (report)
                fprintf(stderr, "sim: request %d (side %d, kind %d) has not completed\n", i, net->req[i].side,
                        (int)net->req[i].kind);
            return false;
        }
    }
    for (int i = 0; i < 2; i++) {
        if (net->end[i].stopped)
            continue;
        struct ndk_qp_impl *qp = net->side[i].impl;
        int me = 0;
        uint8_t *region = ndk_shm_region(qp, &me);
        bool busy = !ndk_shm_quiescent(qp);
        for (int k = 0; region && k < 2 && !busy; k++) {
            struct shm_ring in;
            shm_ring_attach(&in, region + shm_ring_offset(1 - me, k), false);
            busy = shm_ring_pending(&in);
        }
        if (busy) {
            if (report)
                fprintf(stderr, "sim: side %c still has requests or messages in flight\n", "AB"[i]);
            return false;
        }
    }
    return true;
}

bool sim_shm_run(struct sim_net *net)
{
    uint64_t t0 = tl_now_ns();
    for (;;) {
        shm_settle(net);
        sim_drain(net);
        if (shm_settled(net, false))
            return true;
        if (past(t0, SIM_SHM_WAIT_MS)) {
            shm_settled(net, true);
            fprintf(stderr, "sim: the shared-memory exchange did not settle within %u ms\n", SIM_SHM_WAIT_MS);
            return false;
        }
        poll(NULL, 0, 1); /* the engines work meanwhile */
    }
}

bool sim_shm_wait_ended(struct sim_net *net)
{
    uint64_t t0 = tl_now_ns();
    while (!__atomic_load_n(&net->shm_ended[SIM_A], __ATOMIC_ACQUIRE) ||
           !__atomic_load_n(&net->shm_ended[SIM_B], __ATOMIC_ACQUIRE)) {
        if (past(t0, SIM_SHM_WAIT_MS)) {
            fprintf(stderr, "sim: a shared-memory transport did not end within %u ms\n", SIM_SHM_WAIT_MS);
            return false;
        }
        poll(NULL, 0, 1); /* the engines work meanwhile */
    }
    return sim_shm_run(net);
}

/* Both sides disconnect gracefully (NdkDisconnect over shared memory,
 * docs/shm.md, Selection): each, on the peer's FIN, takes what the peer
 * published before it; then the connector ends the connection. */
void sim_shm_close(struct sim_net *net)
{
    for (int i = 0; i < 2; i++)
        if (!net->end[i].stopped)
            ndk_shm_drain(net->side[i].impl);
    sim_stop(net, SIM_A);
    sim_stop(net, SIM_B);
}

void sim_shm_cut_at(struct sim_net *net, int req, int side, bool abort)
{
    net->cut_req = req;
    net->cut_side = side;
    net->cut_abort = abort;
}

void sim_shm_cut_due(struct sim_net *net, int idx)
{
    if (!net->shm || idx != net->cut_req || net->end[net->cut_side].stopped)
        return;
    if (net->cut_abort)
        ndk_shm_abort(net->side[net->cut_side].impl);
    sim_stop(net, net->cut_side);
}
