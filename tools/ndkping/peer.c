/*
 * peer.c - see peer.h.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "lib/addr.h"
#include "lib/args.h"
#include "lib/log.h"
#include "ndkping/peer.h"

void peer_defaults(struct peer_opts *p)
{
    memset(p, 0, sizeof *p);
    p->timeout_ms = PEER_DEFAULT_TIMEOUT_MS;
}

int peer_check_server(const struct peer_opts *p, const char *help_cmd)
{
    if (p->no_p2p || p->delay_first_ms)
        return tc_usage_error(help_cmd, "%s is a client option (the server answers what it is asked)",
                              p->no_p2p ? "--no-p2p" : "--delay-first");
    return -1;
}

void peer_usage(FILE *f, const char *note)
{
    fprintf(f,
            "NDK options:\n"
            "      --adapter=ADAPTER  interface name or address of the adapter (default: the\n"
            "                         adapter owning the source / listen address, else lo)\n"
            "      --no-p2p           client: client/server MPA (A=0), no RTR, as siw's\n"
            "                         initiator (NDK_OPEN_FLAG_NO_P2P); default peer-to-peer\n"
            "      --crc              ask for MPA CRC32c (NDK_OPEN_FLAG_REQUEST_CRC)\n"
            "      --verifier         run libndk's NDK verifier on ndkping's own calls\n"
            "      --delay-first=MS   client: pause MS between the MPA Reply and the first\n"
            "                         FPDU (peer-to-peer: the RTR, else the first Send), for\n"
            "                         Linux siw 6.1 servers, which may leave an FPDU that\n"
            "                         comes right after their Reply unread (default 0)\n"
            "      --timeout=MS       limit for every wait within a connection, and the\n"
            "                         provider's connect, MPA, RTR and disconnect timeouts\n"
            "                         (default %u; ndkping waits MS + %u)\n"
            "  -h, --help             this text\n"
            "      --version          ndkping's version\n"
            "\n"
            "%s",
            PEER_DEFAULT_TIMEOUT_MS, TC_GRACE_MS, note);
    tc_print_exit_statuses(f, false);
}

static bool resolve(struct peer_addr at, NDK_SOCKADDR *out)
{
    char what[64];
    snprintf(what, sizeof what, "%s", at.option);
    return tc_resolve(NULL, what, at.text, AF_UNSPEC, out);
}

bool peer_open_server(struct tc_adapter *a, const struct peer_opts *p, struct peer_addr at, unsigned port,
                      NDK_SOCKADDR *addr)
{
    memset(addr, 0, sizeof *addr);
    if (at.text && !resolve(at, addr))
        return false;
    if (!at.text)
        addr->sa.sa_family = AF_INET; /* rdma_cm's tools: INADDR_ANY */
    tc_sockaddr_set_port(addr, port);
    char what[64];
    snprintf(what, sizeof what, "the listen address (%s)", at.option);
    ULONG flags = (p->crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0) | (p->relaxed_tx_gate ? NDK_OPEN_FLAG_RELAXED_TX_GATE : 0);
    return tc_adapter_open(a, "server", p->adapter, addr, what, flags, p->timeout_ms);
}

bool peer_open_client(struct tc_adapter *a, const struct peer_opts *p, struct peer_addr to, unsigned port,
                      struct peer_addr from, NDK_SOCKADDR *dst, NDK_SOCKADDR *src)
{
    if (!resolve(to, dst))
        return false;
    tc_sockaddr_set_port(dst, port);
    NDK_SOCKADDR routed;
    memset(&routed, 0, sizeof routed);
    bool have_src = from.text ? resolve(from, &routed) : tc_route_source(dst, &routed);
    if (from.text && !have_src)
        return false;
    char what[96];
    if (from.text)
        snprintf(what, sizeof what, "the source address (%s)", from.option);
    else
        snprintf(what, sizeof what, "where the route to %s leaves from", to.text);
    ULONG flags = (p->crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0) | (p->no_p2p ? NDK_OPEN_FLAG_NO_P2P : 0);
    if (!tc_adapter_open(a, "client", p->adapter, have_src ? &routed : NULL, what, flags, p->timeout_ms))
        return false;
    if (from.text) {
        *src = routed;
        tc_sockaddr_set_port(src, 0);
        return true;
    }
    return tc_adapter_source(a, dst, have_src ? &routed : NULL, src);
}

/*
 * Linux siw 6.1 as responder sends its MPA Reply before it installs the
 * socket callbacks that read FPDUs; an FPDU arriving in between sits
 * unread until more bytes come, which a protocol that then waits never
 * sends. Pausing here delays our first FPDU: the RTR that
 * NdkCompleteConnect sends in peer-to-peer mode, or else our first Send.
 */
void peer_delay_first(const struct peer_opts *p)
{
    if (!p->delay_first_ms)
        return;
    struct timespec pause = {.tv_sec = p->delay_first_ms / 1000, .tv_nsec = (long)(p->delay_first_ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
        ;
}
