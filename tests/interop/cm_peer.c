/*
 * cm_peer - the Linux side of the siw interop tests (tests/interop): a small
 * librdmacm program that runs inside the QEMU guest on top of the real siw
 * driver, and prints one machine-readable line per connection event so that
 * the test driver can compare it with what libndk saw on the host.
 *
 * It is compiled on the host against Debian bookworm's librdmacm-dev and
 * libibverbs-dev (rdma-core 44.0, the version the guest has) and copied into
 * the guest with run-guest.sh -f.
 *
 *   cm_peer server PORT [--pd TEXT] [--ird N] [--ord N] [--reject] [--count N]
 *                       [--addr A] [--timing] [--timeout S]
 *     Listens on A:PORT (default 0.0.0.0; siw limits a wildcard listen to its
 *     own netdev), prints "CM-LISTENING port=<n>", and handles COUNT
 *     connections, one after the other:
 *       CM-REQUEST pd=<hex> pd_len=<n> ird=<responder_resources> ord=<initiator_depth>
 *       CM-ESTABLISHED ird=<responder_resources> ord=<initiator_depth>
 *       CM-DISCONNECTED
 *     or, with --reject, rdma_reject() with the --pd text:
 *       CM-REJECT-SENT rc=<n>
 *     Without --ird/--ord, rdma_accept() takes the values of the request, as
 *     rping's server does. --timing adds, after each CM-ESTABLISHED,
 *       CM-ACCEPT-TO-ESTABLISHED us=<n>
 *     the time from rdma_accept() returning to the ESTABLISHED event: with a
 *     peer-to-peer initiator (siw reports ESTABLISHED once it processed the
 *     RTR), how long the initiator's first FPDU took to reach siw, plus one
 *     round trip for our Reply and the initiator's CompleteConnect.
 *
 *   cm_peer client HOST PORT [--pd TEXT] [--ird N] [--ord N] [--expect-reject]
 *                            [--timeout S]
 *       CM-REPLY pd=<hex> pd_len=<n> ird=<responder_resources> ord=<initiator_depth>
 *       CM-DISCONNECTED            (after our rdma_disconnect)
 *     or CM-REJECTED pd=<hex> pd_len=<n> status=<n>.
 *
 * ird/ord are printed exactly as librdmacm hands them over in
 * event->param.conn, i.e. ird = responder_resources and ord =
 * initiator_depth; docs/interop.md explains what iw_cm puts there.
 * Unexpected events print "CM-EVENT <name> status=<n>", a wait that timed out
 * "CM-NO-EVENT expected=<name>". Every wait is bounded
 * (poll() on the event channel, --timeout seconds, default 30). Exit status
 * 0 when everything went as expected, 1 otherwise, 2 for a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "peer_util.h"

struct options {
    bool server;
    const char *host;
    uint16_t port;
    const char *addr;
    const char *pd;
    bool have_ird, have_ord;
    unsigned ird, ord;
    bool reject;
    bool expect_reject;
    bool timing;
    unsigned count;
    unsigned timeout_s;
};

const char peer_name[] = "cm_peer";
static struct options opt;
static struct rdma_event_channel *channel;

/* Private data as the event shows it. The buffer behind it is librdmacm's
 * and valid only until rdma_ack_cm_event(), so it is formatted right away. */
struct pd_text {
    unsigned len;
    char hex[2 * 256 + 1];
};

static void event_pd(const struct rdma_cm_event *e, struct pd_text *t)
{
    t->len = e->param.conn.private_data_len;
    /* The ucma ABI carries at most 56 octets whatever the length says. */
    size_t n = t->len;
    if (n > 56)
        n = 56;
    if (!e->param.conn.private_data)
        n = 0;
    hex(t->hex, e->param.conn.private_data, n);
}

/* The next CM event, or NULL after the timeout (or on an error). */
static struct rdma_cm_event *get_event(void)
{
    struct pollfd p = {.fd = channel->fd, .events = POLLIN};
    for (;;) {
        int n = poll(&p, 1, (int)opt.timeout_s * 1000);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            diag("poll: %s", strerror(errno));
            return NULL;
        }
        if (n == 0) {
            diag("no CM event within %u s", opt.timeout_s);
            return NULL;
        }
        struct rdma_cm_event *e;
        if (rdma_get_cm_event(channel, &e) == 0)
            return e;
        if (errno != EAGAIN && errno != EINTR) {
            diag("rdma_get_cm_event: %s", strerror(errno));
            return NULL;
        }
    }
}

/* Waits for one event type on one id; anything else is reported and fails.
 * The caller acks the returned event. */
static struct rdma_cm_event *expect(struct rdma_cm_id *id, enum rdma_cm_event_type type)
{
    struct rdma_cm_event *e = get_event();
    if (!e) {
        out("CM-NO-EVENT expected=%s\n", rdma_event_str(type));
        return NULL;
    }
    if (e->event != type || (id && e->id != id)) {
        out("CM-EVENT %s status=%d\n", rdma_event_str(e->event), e->status);
        diag("expected %s", rdma_event_str(type));
        rdma_ack_cm_event(e);
        return NULL;
    }
    return e;
}

/* Verbs resources of one connection: siw needs a QP bound to the id before
 * rdma_accept()/rdma_connect(), and a QP needs a PD and a CQ. */
struct res {
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
};

static bool res_create(struct rdma_cm_id *id, struct res *r)
{
    memset(r, 0, sizeof *r);
    r->pd = ibv_alloc_pd(id->verbs);
    if (!r->pd) {
        diag("ibv_alloc_pd: %s", strerror(errno));
        return false;
    }
    r->cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
    if (!r->cq) {
        diag("ibv_create_cq: %s", strerror(errno));
        return false;
    }
    struct ibv_qp_init_attr a = {
        .send_cq = r->cq,
        .recv_cq = r->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
    };
    if (rdma_create_qp(id, r->pd, &a)) {
        diag("rdma_create_qp: %s", strerror(errno));
        return false;
    }
    r->qp = id->qp;
    return true;
}

/*
 * Destroys the id first and the QP after it, the reverse of rping's order.
 * It matters for a connection that siw never reported ESTABLISHED (a
 * peer-to-peer connection whose RTR siw left unread): destroying the QP
 * first makes siw report CLOSE to iw_cm, which in 6.1 hits BUG() (iwcm.c:969)
 * for a CLOSE in state CONN_RECV and takes the guest kernel down. Destroying
 * the id first instead blocks in iw_cm (it waits for that ESTABLISHED), which
 * the test scripts survive by powering the guest off.
 */
static void destroy_all(struct rdma_cm_id *id, struct res *r)
{
    if (id)
        rdma_destroy_id(id);
    if (r->qp)
        ibv_destroy_qp(r->qp);
    if (r->cq)
        ibv_destroy_cq(r->cq);
    if (r->pd)
        ibv_dealloc_pd(r->pd);
    memset(r, 0, sizeof *r);
}

static uint8_t pd_len(void)
{
    return opt.pd ? (uint8_t)strlen(opt.pd) : 0;
}

/* ------------------------------------------------------------------------ */

enum served { SERVED_OK, SERVED_FAILED, SERVED_NO_REQUEST };

static enum served serve_one(void)
{
    struct rdma_cm_event *e = expect(NULL, RDMA_CM_EVENT_CONNECT_REQUEST);
    if (!e)
        return SERVED_NO_REQUEST;
    struct rdma_cm_id *id = e->id;
    struct pd_text t;
    event_pd(e, &t);
    unsigned req_ird = e->param.conn.responder_resources;
    unsigned req_ord = e->param.conn.initiator_depth;
    out("CM-REQUEST pd=%s pd_len=%u ird=%u ord=%u\n", t.hex, t.len, req_ird, req_ord);
    rdma_ack_cm_event(e);

    if (opt.reject) {
        int rc = rdma_reject(id, opt.pd, pd_len());
        out("CM-REJECT-SENT rc=%d\n", rc ? -errno : 0);
        rdma_destroy_id(id);
        return rc == 0 ? SERVED_OK : SERVED_FAILED;
    }

    bool ok = false;
    struct res r = {0};
    if (!res_create(id, &r))
        goto out;
    struct rdma_conn_param p = {
        .private_data = opt.pd,
        .private_data_len = pd_len(),
        .responder_resources = (uint8_t)(opt.have_ird ? opt.ird : req_ird),
        .initiator_depth = (uint8_t)(opt.have_ord ? opt.ord : req_ord),
    };
    if (rdma_accept(id, &p)) {
        diag("rdma_accept: %s", strerror(errno));
        goto out;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    e = expect(id, RDMA_CM_EVENT_ESTABLISHED);
    if (!e)
        goto out;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out("CM-ESTABLISHED ird=%u ord=%u\n", e->param.conn.responder_resources,
        e->param.conn.initiator_depth);
    if (opt.timing)
        out("CM-ACCEPT-TO-ESTABLISHED us=%ld\n",
            (long)((t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000L));
    rdma_ack_cm_event(e);
    /* The initiator (libndk) ends the connection; siw answers the FIN by
     * itself, so there is nothing to call before DISCONNECTED. */
    e = expect(id, RDMA_CM_EVENT_DISCONNECTED);
    if (!e)
        goto out;
    out("CM-DISCONNECTED\n");
    rdma_ack_cm_event(e);
    ok = true;
out:
    destroy_all(id, &r);
    return ok ? SERVED_OK : SERVED_FAILED;
}

/* A new rdma_cm id, and host:opt.port in *sin: 0, else the exit status
 * (1: no id; 2: host is not an IPv4 address), said on stderr. */
static int new_id(const char *host, struct rdma_cm_id **id, struct sockaddr_in *sin)
{
    if (rdma_create_id(channel, id, NULL, RDMA_PS_TCP)) {
        diag("rdma_create_id: %s", strerror(errno));
        return 1;
    }
    *sin = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = htons(opt.port)};
    if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) {
        diag("not an IPv4 address: %s", host);
        rdma_destroy_id(*id);
        return 2;
    }
    return 0;
}

static int run_server(void)
{
    struct rdma_cm_id *listen_id;
    struct sockaddr_in sin;
    int rc = new_id(opt.addr, &listen_id, &sin);
    if (rc)
        return rc;
    if (rdma_bind_addr(listen_id, (struct sockaddr *)&sin) || rdma_listen(listen_id, 8)) {
        diag("rdma_bind_addr/rdma_listen %s:%u: %s", opt.addr, opt.port, strerror(errno));
        rdma_destroy_id(listen_id);
        return 1;
    }
    out("CM-LISTENING port=%u\n", opt.port);
    /* A failed connection does not end the loop: the next request may come
     * from a different scenario of the same test. A request that never
     * comes does: nobody is left to connect. */
    bool ok = true;
    for (unsigned i = 0; i < opt.count; i++) {
        enum served r = serve_one();
        if (r != SERVED_OK)
            ok = false;
        if (r == SERVED_NO_REQUEST)
            break;
    }
    rdma_destroy_id(listen_id);
    return ok ? 0 : 1;
}

static int run_client(void)
{
    struct rdma_cm_id *id;
    struct res r = {0};
    bool ok = false;
    struct sockaddr_in dst;
    int rc = new_id(opt.host, &id, &dst);
    if (rc)
        return rc;
    struct rdma_cm_event *e;
    if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000)) {
        diag("rdma_resolve_addr: %s", strerror(errno));
        goto out;
    }
    if (!(e = expect(id, RDMA_CM_EVENT_ADDR_RESOLVED)))
        goto out;
    rdma_ack_cm_event(e);
    if (rdma_resolve_route(id, 2000)) {
        diag("rdma_resolve_route: %s", strerror(errno));
        goto out;
    }
    if (!(e = expect(id, RDMA_CM_EVENT_ROUTE_RESOLVED)))
        goto out;
    rdma_ack_cm_event(e);
    if (!res_create(id, &r))
        goto out;

    struct rdma_conn_param p = {
        .private_data = opt.pd,
        .private_data_len = pd_len(),
        .responder_resources = (uint8_t)(opt.have_ird ? opt.ird : 1),
        .initiator_depth = (uint8_t)(opt.have_ord ? opt.ord : 1),
        .retry_count = 7,
    };
    if (rdma_connect(id, &p)) {
        diag("rdma_connect: %s", strerror(errno));
        goto out;
    }
    if (!(e = get_event()))
        goto out;
    struct pd_text t;
    event_pd(e, &t);
    if (e->event == RDMA_CM_EVENT_REJECTED) {
        out("CM-REJECTED pd=%s pd_len=%u status=%d\n", t.hex, t.len, e->status);
        rdma_ack_cm_event(e);
        ok = opt.expect_reject;
        goto out;
    }
    if (e->event != RDMA_CM_EVENT_ESTABLISHED || e->id != id) {
        out("CM-EVENT %s status=%d\n", rdma_event_str(e->event), e->status);
        rdma_ack_cm_event(e);
        goto out;
    }
    out("CM-REPLY pd=%s pd_len=%u ird=%u ord=%u\n", t.hex, t.len,
        e->param.conn.responder_resources, e->param.conn.initiator_depth);
    rdma_ack_cm_event(e);

    if (rdma_disconnect(id)) {
        diag("rdma_disconnect: %s", strerror(errno));
        goto out;
    }
    if (!(e = expect(id, RDMA_CM_EVENT_DISCONNECTED)))
        goto out;
    out("CM-DISCONNECTED\n");
    rdma_ack_cm_event(e);
    ok = !opt.expect_reject;
out:
    destroy_all(id, &r);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------------------ */

void usage(void)
{
    fputs("usage: cm_peer server PORT [--pd TEXT] [--ird N] [--ord N] [--reject] [--count N]\n"
          "                           [--addr A] [--timing] [--timeout S]\n"
          "       cm_peer client HOST PORT [--pd TEXT] [--ird N] [--ord N] [--expect-reject]\n"
          "                           [--timeout S]\n",
          stderr);
    exit(2);
}

static void parse(int argc, char **argv)
{
    int i = 0;
    opt.count = 1;
    opt.timeout_s = 30;
    opt.addr = "0.0.0.0";
    if (argc >= 3 && !strcmp(argv[1], "server")) {
        opt.server = true;
        opt.port = (uint16_t)number(argv[2], 65535);
        i = 3;
    } else if (argc >= 4 && !strcmp(argv[1], "client")) {
        opt.host = argv[2];
        opt.port = (uint16_t)number(argv[3], 65535);
        i = 4;
    } else {
        usage();
    }
    for (; i < argc; i++) {
        const char *a = argv[i];
        bool has_arg = i + 1 < argc;
        if (!strcmp(a, "--pd") && has_arg) {
            opt.pd = argv[++i];
            /* The ucma ABI's limit for connect, accept and reject. */
            if (strlen(opt.pd) > 56) {
                diag("--pd: at most 56 octets through librdmacm");
                usage();
            }
        } else if (!strcmp(a, "--ird") && has_arg) {
            opt.ird = (unsigned)number(argv[++i], 255);
            opt.have_ird = true;
        } else if (!strcmp(a, "--ord") && has_arg) {
            opt.ord = (unsigned)number(argv[++i], 255);
            opt.have_ord = true;
        } else if (!strcmp(a, "--timeout") && has_arg) {
            opt.timeout_s = (unsigned)number(argv[++i], 3600);
        } else if (!strcmp(a, "--count") && has_arg && opt.server) {
            opt.count = (unsigned)number(argv[++i], 100000);
        } else if (!strcmp(a, "--addr") && has_arg && opt.server) {
            opt.addr = argv[++i];
        } else if (!strcmp(a, "--reject") && opt.server) {
            opt.reject = true;
        } else if (!strcmp(a, "--timing") && opt.server) {
            opt.timing = true;
        } else if (!strcmp(a, "--expect-reject") && !opt.server) {
            opt.expect_reject = true;
        } else {
            diag("unknown or incomplete option: %s", a);
            usage();
        }
    }
    if (opt.timeout_s == 0 || opt.count == 0)
        usage();
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    channel = rdma_create_event_channel();
    if (!channel) {
        diag("rdma_create_event_channel: %s (is an RDMA device up?)", strerror(errno));
        return 1;
    }
    /* Non-blocking, so that a poll() wake-up without an event cannot hang
     * rdma_get_cm_event(). */
    int fl = fcntl(channel->fd, F_GETFL);
    if (fl < 0 || fcntl(channel->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        diag("fcntl: %s", strerror(errno));
        return 1;
    }
    int rc = opt.server ? run_server() : run_client();
    rdma_destroy_event_channel(channel);
    return rc;
}
