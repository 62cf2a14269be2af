/*
 * libFuzzer target for the connection state machine (connector.c,
 * listener.c): the input is a sequence of events, in any order, on one
 * active and several passive connections of one adapter, each against a
 * peer this file plays with plain sockets. NDK calls: NdkConnect,
 * NdkCompleteConnect, NdkAccept, NdkReject, NdkDisconnect, closing a
 * connector; the peer: an MPA Request or Reply (accepting or rejecting),
 * an RTR, raw octets, a FIN or a reset; and time passing beyond the
 * adapter's timeouts (all 10 ms here), so that every timer can fire between
 * any two events. TCP, the progress engines' threads and their clock are
 * the fake kernel's (fake_net/fake_kernel.h): the engines run between two
 * events unless the input holds them, time passes only when the input says
 * so, and an input takes the same path every time.
 *
 * Input: [0] bits 0-1 the adapter's flags: 0 default, 1
 * NDK_OPEN_FLAG_REQUEST_CRC, 2 NDK_OPEN_FLAG_NO_P2P, 3
 * NDK_OPEN_FLAG_RELAXED_TX_GATE. Then one octet per event (at most 64):
 * bits 0-3 the event, bits 4-7 its argument (see `enum ev`); raw peer
 * octets come from the input after their event octet.
 *
 * Checked for every input (abort() otherwise; ASan/UBSan/LSan watch too):
 *  - every call returns a status and never crashes, whatever the state
 *    (calls on a connector the consumer closed are never made: NDKPI
 *    forbids them);
 *  - no completion or disconnect event comes twice, and none after the
 *    close of its connector completed; no connect event after the
 *    listener's close completed;
 *  - once everything is closed, every call that returned STATUS_PENDING
 *    completed exactly once (flushed ones included) and no other did
 *    (bounded wait, 5 s of the fake clock: a lost completion is a finding);
 *  - no connector, QP or listener is left on the adapter, and within 5 s
 *    of the fake clock no socket is left open.
 *
 * FUZZ_CM_TRACE=1 prints every event, what each call returned and every
 * completion (replay: BUILD/fuzz/fuzz_cm_events FILE).
 *
 * Races between the consumer's calls, the peer and the timers are chosen
 * by the input: EV_YIELD with an argument holds the engines for that many
 * events, so calls and peer octets pile up before the engines see any.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <ndk/ndk.h>

#include "ensure.h"
#include "fake_kernel.h"
#include "loopback_setup.h"
#include "wire/mpa.h"

#define TIMEOUT_MS 10   /* every MPA, RTR and disconnect timeout of the adapters */
#define WAIT_MS 5000    /* bound of every wait for the provider (fake clock) */
#define MAX_EVENTS 64
#define MAX_PASSIVE 4   /* peer clients, hence passive connectors, per input */
#define MAX_QPS 16
/* Requests of one input: NdkListen, one per event, then the closes of
 * teardown (active connector, listener, passive connectors, QPs). */
#define MAX_REQS (1 + MAX_EVENTS + 2 + MAX_PASSIVE + MAX_QPS)

enum ev {
    EV_CONNECT,          /* NdkConnect on the active connector; arg bits 0-1: IRD/ORD */
    EV_COMPLETE_CONNECT, /* NdkCompleteConnect on it */
    EV_A_DISCONNECT,     /* NdkDisconnect on it */
    EV_A_CLOSE,          /* close it */
    EV_A_PEER_REPLY,     /* the peer's Reply; arg bit 0 A, 1 C, 2 R, 3 Read RTR */
    EV_A_PEER_BYTES,     /* the next octet's low 6 bits say how many input octets follow */
    EV_A_PEER_END,       /* arg bit 0: reset, else FIN */
    EV_P_PEER_CONNECT,   /* a peer client and its Request; arg bit 0 A, 1 C, 2 rev 1 */
    EV_ACCEPT,           /* NdkAccept on passive connector arg & 3; arg bits 2-3: IRD/ORD */
    EV_REJECT,           /* NdkReject on passive connector arg & 3 */
    EV_P_DISCONNECT,     /* NdkDisconnect on passive connector arg & 3 */
    EV_P_CLOSE,          /* close passive connector arg & 3 */
    EV_P_PEER_BYTES,     /* peer client arg & 3: bit 2 a Write RTR, else as EV_A_PEER_BYTES */
    EV_P_PEER_END,       /* peer client arg & 3; bit 2: reset, else FIN */
    EV_TIMER,            /* time passes beyond the adapter's timeouts */
    EV_YIELD,            /* arg 0: 1 ms passes; else the engines are held for the next arg events */
};

/* LLVMFuzzerInitialize (no leak scan per input): loopback_setup.c. */

/* ---- completions, counted per call ---- */

static bool g_trace;

struct req {
    const char *what;
    NTSTATUS ret;          /* what the call returned */
    unsigned done;         /* completions seen */
    unsigned disc_events;  /* disconnect events (NdkAccept, NdkCompleteConnect) */
    const bool *owner_closed;
};

static struct req g_reqs[MAX_REQS];
static unsigned g_nreqs;

static void completed(PVOID ctx, NTSTATUS st)
{
    struct req *r = ctx;
    if (g_trace)
        fprintf(stderr, "  %s completed: %s\n", r->what, ndk_status_name(st));
    ENSURE(r->done == 0);
    ENSURE(!r->owner_closed || !*r->owner_closed);
    r->done++;
}

static void disconnect_event(PVOID ctx)
{
    struct req *r = ctx;
    if (g_trace)
        fprintf(stderr, "  disconnect event (%s)\n", r->what);
    ENSURE(r->disc_events == 0);
    ENSURE(!r->owner_closed || !*r->owner_closed);
    r->disc_events++;
}

static void close_done(PVOID ctx)
{
    completed(ctx, STATUS_SUCCESS);
}

static struct req *new_req(const char *what, const bool *owner_closed)
{
    ENSURE(g_nreqs < MAX_REQS);
    struct req *r = &g_reqs[g_nreqs++];
    memset(r, 0, sizeof *r);
    r->what = what;
    r->owner_closed = owner_closed;
    return r;
}

static void traced(const struct req *r)
{
    if (g_trace)
        fprintf(stderr, "  %s returned %s\n", r->what, ndk_status_name(r->ret));
}

static bool req_done(void *r)
{
    return ((struct req *)r)->done > 0;
}

/* Waits (bounded) until r completed; a hang is a finding. */
static void wait_done(struct req *r)
{
    ENSURE(fake_net_wait(req_done, r, WAIT_MS));
}

static void close_object(NDK_OBJECT_HEADER *h, NDK_FN_CLOSE_OBJECT fn)
{
    struct req *r = new_req("close", NULL);
    r->ret = fn(h, close_done, r);
    ENSURE(r->ret == STATUS_SUCCESS || r->ret == STATUS_PENDING);
    if (r->ret == STATUS_PENDING)
        wait_done(r);
}

/* ---- the adapters and the active side's peer listening socket ---- */

struct adapter {
    NDK_ADAPTER *ad;
    NDK_PD *pd;
    NDK_CQ *cq;
    ULONG flags;
};

static struct adapter g_ads[4];
static unsigned g_idle_fds; /* descriptors of the fake kernel between inputs */
static int g_lfd = -1;
static struct sockaddr_in g_dst;

static void init_once(void)
{
    static bool done;
    if (done)
        return;
    static const ULONG flags[4] = {0, NDK_OPEN_FLAG_REQUEST_CRC, NDK_OPEN_FLAG_NO_P2P,
                                   NDK_OPEN_FLAG_RELAXED_TX_GATE};
    for (int i = 0; i < 4; i++) {
        NDK_OPEN_OPTIONS o;
        memset(&o, 0, sizeof o);
        o.Size = sizeof o;
        /* The fake kernel (fuzz/fake_net) has no AF_UNIX sockets: the
         * same-host rendezvous (docs/shm.md) would call the real one. */
        o.Flags = flags[i] | NDK_OPEN_FLAG_NO_SHM;
        o.TcpConnectTimeoutMs = WAIT_MS;
        o.MpaReplyTimeoutMs = o.MpaRequestTimeoutMs = o.RtrTimeoutMs = o.DisconnectTimeoutMs = TIMEOUT_MS;
        g_ads[i].flags = flags[i];
        ENSURE(fuzz_open_lo_adapter(&o, 64, &g_ads[i].ad, &g_ads[i].pd, &g_ads[i].cq));
    }
    g_lfd = fuzz_lo_listen(&g_dst);
    ENSURE(fake_net_run());
    g_idle_fds = fake_net_open_fds();
    done = true;
}

/* ---- one input's state ---- */

struct conn {
    NDK_CONNECTOR *c; /* NULL once closed (or never made) */
    bool closed;      /* its close completed: no callback may follow */
};

static struct {
    struct adapter *ad;
    NDK_LISTENER *l;
    bool listener_closed;
    struct sockaddr_in laddr; /* the listener's address */
    struct sockaddr_in src;   /* 127.0.0.1, any port: where NdkListen and NdkConnect bind */
    struct conn active;
    int active_peer;                 /* the accepted socket of the active side's peer */
    struct conn passive[MAX_PASSIVE]; /* delivered by connect events, in order */
    unsigned npassive;
    int peer_clients[MAX_PASSIVE];
    unsigned nclients;
    NDK_QP *qps[MAX_QPS];
    unsigned nqps;
} S;

static void connect_event(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    ENSURE(!S.listener_closed);
    ENSURE(S.npassive < MAX_PASSIVE); /* one per peer client at most */
    S.passive[S.npassive++].c = c;
}

static NDK_QP *new_qp(void)
{
    if (S.nqps == MAX_QPS)
        return NULL;
    NDK_QP *qp = NULL;
    struct adapter *a = S.ad;
    ENSURE(a->pd->Dispatch->NdkCreateQp(a->pd, a->cq, a->cq, NULL, 4, 4, 1, 1, 0, NULL, NULL, &qp) ==
           STATUS_SUCCESS);
    S.qps[S.nqps++] = qp;
    return qp;
}

static const ULONG depths[4] = {0, 1, 4, 200};

/* The passive connector an event names, if it is still open. */
static struct conn *passive_conn(unsigned arg)
{
    unsigned n = S.npassive;
    if (n == 0)
        return NULL;
    struct conn *k = &S.passive[(arg & 3) % n];
    return k->c ? k : NULL;
}

static void conn_close(struct conn *k)
{
    if (!k->c)
        return;
    close_object(&k->c->Header, k->c->Dispatch->NdkCloseConnector);
    k->c = NULL;
    k->closed = true;
}

/* ---- the peer's side ---- */

static void peer_send(int fd, const uint8_t *p, size_t n)
{
    if (fd >= 0 && n)
        (void)fake_send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void peer_end(int *fd, bool reset)
{
    if (*fd < 0)
        return;
    if (reset) {
        struct linger l = {1, 0};
        fake_setsockopt(*fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        fake_close(*fd);
        *fd = -1;
    } else {
        fake_shutdown(*fd, SHUT_WR);
    }
}

static void peer_frame(int fd, bool reply, unsigned arg, bool rev1)
{
    static const uint8_t pd[3] = {'p', 'd', '!'};
    struct mpa_frame f = {
        .reply = reply,
        .crc = arg & 2,
        .reject = reply && (arg & 4),
        .enhanced = !rev1,
        .rev = rev1 ? 1 : 2,
        .p2p = !rev1 && (arg & 1),
        .ird = 4,
        .ord = 4,
        .pd = pd,
        .pd_len = sizeof pd,
    };
    if (f.p2p)
        f.rtr = reply ? ((arg & 8) ? MPA_RTR_READ : MPA_RTR_WRITE) : (MPA_RTR_WRITE | MPA_RTR_READ);
    uint8_t buf[64];
    size_t n = mpa_frame_encode(&f, buf, sizeof buf);
    ENSURE(n > 0);
    peer_send(fd, buf, n);
}

/* Sends the octets an EV_*_PEER_BYTES event names (a length octet, then
 * that many); returns where the next event starts. */
static size_t peer_bytes(int fd, const uint8_t *data, size_t size, size_t at)
{
    if (at == size)
        return at;
    size_t n = data[at++] & 63;
    if (n > size - at)
        n = size - at;
    peer_send(fd, data + at, n);
    return at + n;
}

/* Accepts the active side's TCP connection after an NdkConnect that went
 * pending (the provider connects at once: a connection still missing once
 * the engines are idle is a finding). */
static void peer_accept(void)
{
    ENSURE(fake_net_run());
    int fd = fake_accept4(g_lfd, NULL, NULL, SOCK_CLOEXEC);
    ENSURE(fd >= 0);
    peer_end(&S.active_peer, true);
    S.active_peer = fd;
}

static void peer_connect(unsigned arg)
{
    if (S.nclients == MAX_PASSIVE)
        return;
    int fd = fake_socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ENSURE(fd >= 0);
    ENSURE(fake_connect(fd, (struct sockaddr *)&S.laddr, sizeof S.laddr) == 0 || errno == EINPROGRESS);
    int err = 0;
    socklen_t len = sizeof err;
    ENSURE(fake_getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
    S.peer_clients[S.nclients++] = fd;
    peer_frame(fd, false, arg, arg & 4);
}

/* ---- one input ---- */

static void setup(const uint8_t flags)
{
    memset(&S, 0, sizeof S);
    S.active_peer = -1;
    g_nreqs = 0;
    S.ad = &g_ads[flags & 3];
    NDK_ADAPTER *ad = S.ad->ad;
    ENSURE(ad->Dispatch->NdkCreateConnector(ad, NULL, NULL, &S.active.c) == STATUS_SUCCESS);
    ENSURE(ad->Dispatch->NdkCreateListener(ad, connect_event, NULL, NULL, NULL, &S.l) == STATUS_SUCCESS);
    S.src = g_dst;
    S.src.sin_port = 0;
    struct req *r = new_req("NdkListen", NULL);
    r->ret = S.l->Dispatch->NdkListen(S.l, (PSOCKADDR)&S.src, sizeof S.src, completed, r);
    ENSURE(r->ret == STATUS_SUCCESS || r->ret == STATUS_PENDING);
    if (r->ret == STATUS_PENDING)
        wait_done(r);
    ULONG len = sizeof S.laddr;
    ENSURE(S.l->Dispatch->NdkGetLocalAddress(S.l, (PSOCKADDR)&S.laddr, &len) == STATUS_SUCCESS);
}

static bool back_to_idle_fds(void *arg)
{
    (void)arg;
    return fake_net_open_fds() == g_idle_fds;
}

struct listener_closing {
    struct req *close;
    unsigned closed; /* passive connectors closed so far */
};

static bool listener_closed_or_new_connector(void *arg)
{
    struct listener_closing *w = arg;
    return w->close->ret != STATUS_PENDING || w->close->done || w->closed < S.npassive;
}

static void teardown(void)
{
    peer_end(&S.active_peer, true);
    for (unsigned i = 0; i < S.nclients; i++)
        peer_end(&S.peer_clients[i], true);
    conn_close(&S.active);
    /* The listener's close stays pending until every connector it
     * delivered is closed (NDKPI's antecedent rule), connectors delivered
     * meanwhile included. */
    struct req *lc = new_req("close listener", NULL);
    lc->ret = S.l->Dispatch->NdkCloseListener(&S.l->Header, close_done, lc);
    ENSURE(lc->ret == STATUS_SUCCESS || lc->ret == STATUS_PENDING);
    struct listener_closing w = {lc, 0};
    for (;;) {
        ENSURE(fake_net_wait(listener_closed_or_new_connector, &w, WAIT_MS));
        S.listener_closed = lc->ret != STATUS_PENDING || lc->done;
        for (; w.closed < S.npassive; w.closed++)
            conn_close(&S.passive[w.closed]);
        if (S.listener_closed)
            break;
    }
    for (unsigned i = 0; i < S.nqps; i++)
        close_object(&S.qps[i]->Header, S.qps[i]->Dispatch->NdkCloseQp);

    /* Every pending call completed exactly once (completed() catches a
     * second), no other did. */
    for (unsigned i = 0; i < g_nreqs; i++) {
        struct req *r = &g_reqs[i];
        if (r->ret == STATUS_PENDING)
            wait_done(r);
        else
            ENSURE(r->done == 0);
    }
    NDK_ADAPTER *ad = S.ad->ad;
    ENSURE(ndk_adapter_object_count(ad, NdkObjectTypeConnector) == 0);
    ENSURE(ndk_adapter_object_count(ad, NdkObjectTypeQp) == 0);
    ENSURE(ndk_adapter_object_count(ad, NdkObjectTypeListener) == 0);
    /* Every socket closed, a rejected one's lingering close included. */
    ENSURE(fake_net_wait(back_to_idle_fds, NULL, WAIT_MS));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    init_once();
    g_trace = getenv("FUZZ_CM_TRACE") != NULL;
    fuzz_seed_from_input(data, size);
    setup(data[0]);
    size_t at = 1;
    unsigned hold = 0; /* events to go before the engines run again */
    for (unsigned nev = 0; at < size && nev < MAX_EVENTS; nev++) {
        unsigned ev = data[at] & 15, arg = data[at] >> 4;
        at++;
        if (g_trace)
            fprintf(stderr, "event %u arg %u\n", ev, arg);
        struct req *r = NULL;
        struct conn *k;
        NDK_QP *qp;
        switch ((enum ev)ev) {
        case EV_CONNECT:
            if (!S.active.c || !(qp = new_qp()))
                break;
            r = new_req("NdkConnect", &S.active.closed);
            r->ret = S.active.c->Dispatch->NdkConnect(S.active.c, qp, (PSOCKADDR)&S.src, sizeof S.src,
                                                      (PSOCKADDR)&g_dst, sizeof g_dst,
                                                      depths[arg & 3], depths[(arg >> 2) & 3], NULL, 0,
                                                      completed, r);
            if (r->ret == STATUS_PENDING)
                peer_accept();
            break;
        case EV_COMPLETE_CONNECT:
            if (!S.active.c)
                break;
            r = new_req("NdkCompleteConnect", &S.active.closed);
            r->ret = S.active.c->Dispatch->NdkCompleteConnect(S.active.c, disconnect_event, r, completed, r);
            break;
        case EV_A_DISCONNECT:
            if (!S.active.c)
                break;
            r = new_req("NdkDisconnect (active)", &S.active.closed);
            r->ret = S.active.c->Dispatch->NdkDisconnect(S.active.c, completed, r);
            break;
        case EV_A_CLOSE:
            conn_close(&S.active);
            break;
        case EV_A_PEER_REPLY:
            if (S.active_peer >= 0)
                peer_frame(S.active_peer, true, arg, false);
            break;
        case EV_A_PEER_BYTES:
            at = peer_bytes(S.active_peer, data, size, at);
            break;
        case EV_A_PEER_END:
            peer_end(&S.active_peer, arg & 1);
            break;
        case EV_P_PEER_CONNECT:
            peer_connect(arg);
            break;
        case EV_ACCEPT:
            if (!(k = passive_conn(arg)) || !(qp = new_qp()))
                break;
            r = new_req("NdkAccept", &k->closed);
            r->ret = k->c->Dispatch->NdkAccept(k->c, qp, depths[(arg >> 2) & 3], depths[(arg >> 2) & 3], NULL, 0,
                                               disconnect_event, r, completed, r);
            break;
        case EV_REJECT:
            if ((k = passive_conn(arg))) {
                NTSTATUS st = k->c->Dispatch->NdkReject(k->c, NULL, 0);
                if (g_trace)
                    fprintf(stderr, "  NdkReject returned %s\n", ndk_status_name(st));
            }
            break;
        case EV_P_DISCONNECT:
            if (!(k = passive_conn(arg)))
                break;
            r = new_req("NdkDisconnect (passive)", &k->closed);
            r->ret = k->c->Dispatch->NdkDisconnect(k->c, completed, r);
            break;
        case EV_P_CLOSE:
            if ((k = passive_conn(arg)))
                conn_close(k);
            break;
        case EV_P_PEER_BYTES: {
            int fd = S.nclients ? S.peer_clients[(arg & 3) % S.nclients] : -1;
            if (arg & 4) {
                uint8_t rtr[20];
                peer_send(fd, rtr, mpa_build_write_rtr(S.ad->flags & NDK_OPEN_FLAG_REQUEST_CRC, rtr));
            } else {
                at = peer_bytes(fd, data, size, at);
            }
            break;
        }
        case EV_P_PEER_END:
            if (S.nclients)
                peer_end(&S.peer_clients[(arg & 3) % S.nclients], arg & 4);
            break;
        case EV_TIMER:
            ENSURE(fake_net_advance(TIMEOUT_MS + 2));
            break;
        case EV_YIELD:
            if (arg)
                hold = arg + 1; /* this event and the next arg */
            else
                ENSURE(fake_net_advance(1));
            break;
        }
        if (r)
            traced(r);
        if (hold)
            hold--;
        else
            ENSURE(fake_net_run());
    }
    teardown();
    return 0;
}
