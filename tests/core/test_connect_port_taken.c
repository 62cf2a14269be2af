/* NdkConnect from port 0 when the port libndk picks cannot reach the peer,
 * white box: another socket already holds a connection from that port to
 * the same listener (as a TIME_WAIT the kernel may not reuse yet does), so
 * the kernel refuses the 4-tuple (connect: EADDRNOTAVAIL). The port was
 * libndk's choice, not the consumer's: NdkConnect tries another one and the
 * connection is made, from a port other than the taken one. Before, the
 * call failed with STATUS_ADDRESS_ALREADY_EXISTS (bench/run.sh met it as
 * "port exhaustion" under heavy connection churn). The first search is
 * steered onto the taken port (ports_start_next_search_at); a consumer's
 * own port, which cannot be changed, still fails as before. */
#include "ndktest.h"

#include "net/ports.h"

/* A plain TCP connection to `to` from a port of libndk's ephemeral range,
 * bound with SO_REUSEADDR as libndk binds its own: libndk can bind the
 * same port beside it, and the kernel then refuses a connect from it to
 * `to`. The socket, or -1; *port its local port. */
static int hold_port(int fam, const NDK_SOCKADDR *to, ULONG tolen, uint16_t *port)
{
    for (unsigned p = 61000; p < 61000 + 512; p++) {
        int fd = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        NDK_SOCKADDR a;
        ULONG len = nt_sa_loop(fam, p, &a);
        if (bind(fd, (struct sockaddr *)&a, len) == 0 && connect(fd, (const struct sockaddr *)to, tolen) == 0) {
            *port = (uint16_t)p;
            return fd;
        }
        close(fd);
    }
    return -1;
}

static unsigned local_port(NDK_CONNECTOR *c)
{
    NDK_SOCKADDR a;
    ULONG len = sizeof a;
    if (c->Dispatch->NdkGetLocalAddress(c, (PSOCKADDR)&a, &len) != STATUS_SUCCESS)
        return 0;
    return nt_sa_port(&a);
}

NT_CASE_FAM(picked_port_taken)
{
    nt_side as, ps;
    nt_lsn *L;
    nt_conn c;
    REQUIRE(nt_pair_conn_open(&as, &ps, &L, &c, fam));
    uint16_t taken = 0;
    int fd = hold_port(fam, &L->addr, L->addrlen, &taken);
    REQUIRE(fd >= 0);
    ports_start_next_search_at(taken);
    CHECK(nt_establish(&c));
    unsigned got = local_port(c.a);
    CHECK(got != 0 && got != taken);
    CHECK(got >= NDK_EPHEMERAL_FIRST && got <= NDK_EPHEMERAL_LAST);
    nt_conn_close(&c);

    /* The consumer's own port is the consumer's: refused as the kernel
     * refuses it, and nothing else is tried. */
    REQUIRE(nt_conn_init(&c, fam, &as, &ps, L));
    NDK_SOCKADDR src, dst = L->addr;
    ULONG slen = nt_sa_loop(fam, taken, &src);
    CHECK_STATUS(c.a->Dispatch->NdkConnect(c.a, c.qa, (PSOCKADDR)&src, slen, (PSOCKADDR)&dst, L->addrlen, 1,
                                           1, NULL, 0, nt_req_cb, NULL),
                 STATUS_ADDRESS_ALREADY_EXISTS);
    nt_conn_close(&c);
    close(fd);
    nt_pair_close(&as, &ps, L);
}

int main(int argc, char **argv)
{
    tl_init(argc, argv);
    RUN_FAM(picked_port_taken);
    return tl_finish();
}
