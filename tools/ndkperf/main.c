/*
 * ndkperf - perftest for NDK: Send, RDMA Write and RDMA Read latency and
 * bandwidth between two NDK endpoints, with perftest's options and table.
 *
 * main.c: the command line, the roles and their CPU placement.
 *
 * --loopback runs both ends in one command as two processes (fork before
 * any NDK call, so each process has its own adapter instance and its own
 * provider threads), like two hosts and like the raw TCP ping-pong it is
 * compared with. Each process pins itself (--cpu-server, --cpu-client)
 * before it opens its adapter, so the provider's progress thread inherits
 * the placement of the process it serves. The server tells the client its
 * port through a pipe; the pipe's end-of-file later tells the client that
 * the server has exited, which keeps that wait bounded without polling.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ndkperf.h"
#include "perftest_compat.h"

#define DEFAULT_ITERS 1000
#define DEFAULT_ITERS_WRITE_BW 5000 /* perftest's defaults */
#define DEFAULT_WARMUP 100
#define DEFAULT_DEPTH 128
#define DEFAULT_RX_DEPTH 512
#define DEFAULT_OUTS 128
#define DEFAULT_POST_LIST 32
#define DEFAULT_TIMEOUT_MS 10000
#define DEFAULT_ACCEPT_TIMEOUT_S 60
#define MAX_MSG_SIZE (1u << 30)
/* The adapter cannot run the test (write_lat without in-order placement):
 * not an error of the run, so CTest can tell it apart (SKIP_RETURN_CODE). */
#define EXIT_UNSUPPORTED 3

/* ------------------------------------------------------------------------ */
/* Tests                                                                    */
/* ------------------------------------------------------------------------ */

static const struct {
    const char *name, *title;
    uint32_t default_inline; /* perftest's default -I */
} tests[T_COUNT] = {
    [T_SEND_LAT] = {"send_lat", "Send Latency", 236},
    [T_SEND_BW] = {"send_bw", "Send BW", 236},
    [T_WRITE_LAT] = {"write_lat", "RDMA_Write Latency", 220},
    [T_WRITE_BW] = {"write_bw", "RDMA_Write BW", 220},
    [T_READ_LAT] = {"read_lat", "RDMA_Read Latency", 0},
    [T_READ_BW] = {"read_bw", "RDMA_Read BW", 0},
};

const char *test_name(enum test_kind t)
{
    return tests[t].name;
}

const char *test_title(enum test_kind t)
{
    return tests[t].title;
}

bool test_is_lat(enum test_kind t)
{
    return t == T_SEND_LAT || t == T_WRITE_LAT || t == T_READ_LAT;
}

bool test_uses_send(enum test_kind t)
{
    return t == T_SEND_LAT || t == T_SEND_BW;
}

bool test_uses_read(enum test_kind t)
{
    return t == T_READ_LAT || t == T_READ_BW;
}

/* ------------------------------------------------------------------------ */
/* Usage                                                                    */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "Usage:\n"
        "  ndkperf TEST -S [options]              server: waits for one client, follows its parameters\n"
        "  ndkperf TEST -c ADDRESS [options]      client: runs the test against a server\n"
        "  ndkperf TEST --loopback [options]      both ends, as two processes on 127.0.0.1\n"
        "\n"
        "TEST: send_lat, send_bw, write_lat, write_bw, read_lat, read_bw (perftest's ib_*).\n"
        "\n"
        "Test:\n"
        "  -s, --size=BYTES        message size (default 2 for latency, 65536 for bandwidth;\n"
        "                          K and M suffixes; send tests need at least 2)\n"
        "  -a, --all               every size 2 B .. 8 MiB, powers of two\n"
        "  -n, --iters=N           iterations per size (default 1000; write_bw 5000)\n"
        "  -D, --duration=SECONDS  run each size this long instead of -n\n"
        "      --warmup=N          latency tests: iterations run first and not counted (default %u)\n"
        "  -q, --depth=N           bandwidth tests: work requests in flight (default %u)\n"
        "  -r, --rx-depth=N        send_bw: receives the server keeps posted (default %u); the\n"
        "                          client stays within them using the server's credits\n"
        "  -I, --inline=BYTES      Sends and Writes up to this size are posted with\n"
        "                          NDK_OP_FLAG_INLINE (default: send 236, write 220, as\n"
        "                          perftest; capped at the adapter's MaxInlineDataSize; 0: never)\n"
        "  -o, --outs=N            read tests: outstanding RDMA Reads asked for (IRD/ORD,\n"
        "                          default %u, capped by the adapters)\n"
        "  -l, --post-list=N       bandwidth tests: post in chains of up to N requests, all but\n"
        "                          the last with NDK_OP_FLAG_DEFER, so one doorbell sends the\n"
        "                          chain (default %u; 1: a doorbell per request, as perftest)\n"
        "\n"
        "Connection:\n"
        "  -S, --server            be the server\n"
        "  -c, --client=ADDRESS    be the client of the server at ADDRESS\n"
        "      --loopback          run server and client as two processes on 127.0.0.1\n"
        "  -p, --port=PORT         server port (default %u; --loopback: one the provider picks)\n"
        "  -B, --bind=ADDRESS      server: listen on this address only (default: all)\n"
        "  -d, --adapter=ADAPTER   interface name or address of the adapter (default: the\n"
        "                          adapter of -B or of the route to -c, else lo)\n"
        "      --crc               ask for MPA CRC32c\n"
        "\n"
        "Placement and completions:\n"
        "      --cpu=N             pin this process (--loopback: both processes) to CPU N\n"
        "      --cpu-server=N      pin the server process to CPU N\n"
        "      --cpu-client=N      pin the client process to CPU N\n"
        "      --wait=MODE         yield (default): poll NdkGetCqResults, sched_yield() when\n"
        "                          empty, so a progress thread on the same CPU can run;\n"
        "                          spin: poll without yielding (perftest's way);\n"
        "                          events: NdkArmCq and sleep until the notification callback\n"
        "      --events            the same as --wait=events\n"
        "      --busy-poll         open the adapter in the provider's busy-poll mode (polling\n"
        "                          the CQ drives the connection), if this libndk has one\n"
        "      --signal-all        signal every work request (no NDK_OP_FLAG_SILENT_SUCCESS)\n"
        "      --timeout=MS        longest wait for any completion or event (default %u)\n"
        "      --accept-timeout=S  how long a server waits for its client (default %u)\n"
        "\n"
        "Output:\n"
        "      --progress, --no-progress  progress line on stderr for sizes running over 3 s\n"
        "                          (default: when stderr is a terminal)\n"
        "  -h, --help              this text\n"
        "\n"
        "  ndkperf --perftest TEST [perftest options] [SERVER]   talks perftest's own protocol\n"
        "                          (ib_write_bw -R ...) to perftest; 'ndkperf --perftest -h'\n"
        "\n"
        "Units as perftest: MB = 2^20 bytes. Latency: half the round trip for send_lat and\n"
        "write_lat, the whole round trip for read_lat. write_lat needs an adapter that sets\n"
        "NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED. Exit status: 0 success, 1 failure, 2 usage\n"
        "error, 3 the adapter cannot run the test.\n",
        DEFAULT_WARMUP, DEFAULT_DEPTH, DEFAULT_RX_DEPTH, DEFAULT_OUTS, DEFAULT_POST_LIST, NDKPERF_DEFAULT_PORT, DEFAULT_TIMEOUT_MS,
        DEFAULT_ACCEPT_TIMEOUT_S);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ndkperf: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'ndkperf --help'.\n");
    va_end(ap);
    return 2;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

bool parse_u64(const char *s, uint64_t min, uint64_t max, bool suffixes, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return false;
    if (suffixes && (*end == 'k' || *end == 'K'))
        v <<= 10, end++;
    else if (suffixes && (*end == 'm' || *end == 'M'))
        v <<= 20, end++;
    if (*end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

enum {
    OPT_LOOPBACK = 0x100,
    OPT_WARMUP,
    OPT_CPU,
    OPT_CPU_SERVER,
    OPT_CPU_CLIENT,
    OPT_WAIT,
    OPT_EVENTS,
    OPT_BUSY_POLL,
    OPT_SIGNAL_ALL,
    OPT_CRC,
    OPT_TIMEOUT,
    OPT_ACCEPT_TIMEOUT,
    OPT_PROGRESS,
    OPT_NO_PROGRESS,
};

/* Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, struct options *o)
{
    static const struct option longopts[] = {
        {"size", required_argument, NULL, 's'},
        {"all", no_argument, NULL, 'a'},
        {"iters", required_argument, NULL, 'n'},
        {"duration", required_argument, NULL, 'D'},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"depth", required_argument, NULL, 'q'},
        {"rx-depth", required_argument, NULL, 'r'},
        {"inline", required_argument, NULL, 'I'},
        {"outs", required_argument, NULL, 'o'},
        {"post-list", required_argument, NULL, 'l'},
        {"server", no_argument, NULL, 'S'},
        {"client", required_argument, NULL, 'c'},
        {"loopback", no_argument, NULL, OPT_LOOPBACK},
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'B'},
        {"adapter", required_argument, NULL, 'd'},
        {"crc", no_argument, NULL, OPT_CRC},
        {"cpu", required_argument, NULL, OPT_CPU},
        {"cpu-server", required_argument, NULL, OPT_CPU_SERVER},
        {"cpu-client", required_argument, NULL, OPT_CPU_CLIENT},
        {"wait", required_argument, NULL, OPT_WAIT},
        {"events", no_argument, NULL, OPT_EVENTS},
        {"busy-poll", no_argument, NULL, OPT_BUSY_POLL},
        {"signal-all", no_argument, NULL, OPT_SIGNAL_ALL},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"accept-timeout", required_argument, NULL, OPT_ACCEPT_TIMEOUT},
        {"progress", no_argument, NULL, OPT_PROGRESS},
        {"no-progress", no_argument, NULL, OPT_NO_PROGRESS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof *o);
    o->cpu_server = o->cpu_client = -1;
    o->wait = WAIT_YIELD;
    o->progress = -1;
    o->timeout_ms = DEFAULT_TIMEOUT_MS;
    o->accept_timeout_ms = DEFAULT_ACCEPT_TIMEOUT_S * 1000u;
    o->depth = DEFAULT_DEPTH;
    o->rx_depth = DEFAULT_RX_DEPTH;
    o->outs = DEFAULT_OUTS;
    o->post_list = DEFAULT_POST_LIST;
    o->port = NDKPERF_DEFAULT_PORT;
    bool server = false, loopback = false, size_given = false, inline_given = false, warmup_given = false;
    uint64_t v;
    int ch;
    while ((ch = getopt_long(argc, argv, "s:an:D:q:r:I:o:l:Sc:p:B:d:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (!parse_u64(optarg, 1, MAX_MSG_SIZE, true, &v))
                return usage_error("invalid size '%s' (1 byte to 1 GiB)", optarg);
            o->size = (uint32_t)v;
            size_given = true;
            break;
        case 'a':
            o->all_sizes = true;
            break;
        case 'n':
            if (!parse_u64(optarg, 1, UINT32_MAX, false, &v))
                return usage_error("invalid iteration count '%s'", optarg);
            o->iters = (uint32_t)v;
            break;
        case 'D':
            if (!parse_u64(optarg, 1, 86400, false, &v))
                return usage_error("invalid duration '%s' (1 to 86400 s)", optarg);
            o->duration_ms = (uint32_t)v * 1000u;
            break;
        case OPT_WARMUP:
            if (!parse_u64(optarg, 0, UINT32_MAX, false, &v))
                return usage_error("invalid warm-up count '%s'", optarg);
            o->warmup = (uint32_t)v;
            warmup_given = true;
            break;
        case 'q':
            if (!parse_u64(optarg, 1, 16383, false, &v))
                return usage_error("invalid depth '%s' (1 to 16383)", optarg);
            o->depth = (uint32_t)v;
            break;
        case 'r':
            if (!parse_u64(optarg, 4, 16384, false, &v))
                return usage_error("invalid receive depth '%s' (4 to 16384)", optarg);
            o->rx_depth = (uint32_t)v;
            break;
        case 'I':
            if (!parse_u64(optarg, 0, UINT32_MAX, false, &v))
                return usage_error("invalid inline size '%s'", optarg);
            o->inline_size = (uint32_t)v;
            inline_given = true;
            break;
        case 'o':
            if (!parse_u64(optarg, 1, UINT32_MAX, false, &v))
                return usage_error("invalid outstanding read count '%s'", optarg);
            o->outs = (uint32_t)v;
            break;
        case 'l':
            if (!parse_u64(optarg, 1, 16384, false, &v))
                return usage_error("invalid post list length '%s' (1 to 16384)", optarg);
            o->post_list = (uint32_t)v;
            break;
        case 'S':
            server = true;
            break;
        case 'c':
            o->address = optarg;
            break;
        case OPT_LOOPBACK:
            loopback = true;
            break;
        case 'p':
            if (!parse_u64(optarg, 1, 65535, false, &v))
                return usage_error("invalid port '%s'", optarg);
            o->port = (unsigned)v;
            o->port_given = true;
            break;
        case 'B':
            o->bind = optarg;
            break;
        case 'd':
            o->adapter = optarg;
            break;
        case OPT_CRC:
            o->crc = true;
            break;
        case OPT_CPU:
        case OPT_CPU_SERVER:
        case OPT_CPU_CLIENT:
            if (!parse_u64(optarg, 0, CPU_SETSIZE - 1, false, &v))
                return usage_error("invalid CPU '%s'", optarg);
            if (ch != OPT_CPU_CLIENT)
                o->cpu_server = (int)v;
            if (ch != OPT_CPU_SERVER)
                o->cpu_client = (int)v;
            break;
        case OPT_WAIT:
            if (strcmp(optarg, "yield") == 0)
                o->wait = WAIT_YIELD;
            else if (strcmp(optarg, "spin") == 0)
                o->wait = WAIT_SPIN;
            else if (strcmp(optarg, "events") == 0)
                o->wait = WAIT_EVENTS;
            else
                return usage_error("invalid --wait '%s' (yield, spin or events)", optarg);
            break;
        case OPT_EVENTS:
            o->wait = WAIT_EVENTS;
            break;
        case OPT_BUSY_POLL:
            o->busy_poll = true;
            break;
        case OPT_SIGNAL_ALL:
            o->signal_all = true;
            break;
        case OPT_TIMEOUT:
            if (!parse_u64(optarg, 100, 3600000, false, &v))
                return usage_error("invalid timeout '%s' (100 to 3600000 ms)", optarg);
            o->timeout_ms = (unsigned)v;
            break;
        case OPT_ACCEPT_TIMEOUT:
            if (!parse_u64(optarg, 1, 86400, false, &v))
                return usage_error("invalid accept timeout '%s' (1 to 86400 s)", optarg);
            o->accept_timeout_ms = (unsigned)v * 1000u;
            break;
        case OPT_PROGRESS:
            o->progress = 1;
            break;
        case OPT_NO_PROGRESS:
            o->progress = 0;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "Try 'ndkperf --help'.\n");
            return 2;
        }
    }
    if (optind >= argc)
        return usage_error("which test? (send_lat, send_bw, write_lat, write_bw, read_lat, read_bw)");
    if (optind + 1 < argc)
        return usage_error("unexpected argument '%s' (the server's address goes with -c)", argv[optind + 1]);
    int t;
    for (t = 0; t < T_COUNT; t++)
        if (strcmp(argv[optind], tests[t].name) == 0)
            break;
    if (t == T_COUNT)
        return usage_error("unknown test '%s'", argv[optind]);
    o->test = (enum test_kind)t;

    if (server + loopback + (o->address != NULL) != 1)
        return usage_error("choose one of -S (server), -c ADDRESS (client) and --loopback");
    o->mode = loopback ? MODE_LOOPBACK : server ? MODE_SERVER : MODE_CLIENT;
    if (o->all_sizes && size_given)
        return usage_error("-a and -s exclude each other");
    if (o->iters && o->duration_ms)
        return usage_error("-n and -D exclude each other");
    if (!o->iters && !o->duration_ms)
        o->iters = o->test == T_WRITE_BW ? DEFAULT_ITERS_WRITE_BW : DEFAULT_ITERS;
    if (!size_given)
        o->size = o->all_sizes ? NDKPERF_MAX_SIZE : test_is_lat(o->test) ? 2 : 65536;
    if (test_uses_send(o->test) && o->size < 2)
        return usage_error("send tests need messages of at least 2 bytes (1-byte Sends are their control messages)");
    if (!warmup_given)
        o->warmup = test_is_lat(o->test) ? DEFAULT_WARMUP : 0;
    if (!inline_given)
        o->inline_size = tests[o->test].default_inline;
    if (o->test == T_WRITE_LAT && o->wait == WAIT_EVENTS)
        return usage_error("write_lat polls memory, not the CQ: --wait=events does not apply");
    if (o->mode != MODE_SERVER && o->bind)
        return usage_error("-B is a server option");
#ifndef NDK_OPEN_FLAG_BUSY_POLL
    if (o->busy_poll)
        return usage_error("--busy-poll: this libndk has no busy-poll mode (no NDK_OPEN_FLAG_BUSY_POLL in ndk.h)");
#endif
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Placement                                                                */
/* ------------------------------------------------------------------------ */

/* Pins the whole process (it has one thread yet): the provider threads
 * that ndk_open_adapter starts later inherit the CPU. */
static bool pin_self(const char *role, int cpu)
{
    if (cpu < 0)
        return true;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        complain(role, "cannot pin to CPU %d: %s", cpu, strerror(errno));
        return false;
    }
    return true;
}

static const char *cpu_text(int cpu, char *buf, size_t size)
{
    if (cpu < 0)
        snprintf(buf, size, "not pinned");
    else
        snprintf(buf, size, "CPU %d", cpu);
    return buf;
}

/* ------------------------------------------------------------------------ */
/* Addresses                                                                */
/* ------------------------------------------------------------------------ */

bool resolve(const char *role, const char *text, NDK_SOCKADDR *out)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(text, NULL, &hints, &res);
    bool ok = false;
    for (struct addrinfo *ai = res; rc == 0 && ai && !ok; ai = ai->ai_next) {
        if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) && ai->ai_addrlen <= sizeof *out) {
            memset(out, 0, sizeof *out);
            memcpy(out, ai->ai_addr, ai->ai_addrlen);
            ok = true;
        }
    }
    if (res)
        freeaddrinfo(res);
    if (!ok)
        complain(role, "cannot resolve '%s'%s%s", text, rc ? ": " : "", rc ? gai_strerror(rc) : "");
    return ok;
}

void set_port(NDK_SOCKADDR *a, unsigned port)
{
    if (a->sa.sa_family == AF_INET6)
        a->in6.sin6_port = htons((uint16_t)port);
    else
        a->in4.sin_port = htons((uint16_t)port);
}

unsigned get_port(const NDK_SOCKADDR *a)
{
    return ntohs(a->sa.sa_family == AF_INET6 ? a->in6.sin6_port : a->in4.sin_port);
}

const char *ip_text(const NDK_SOCKADDR *a, char *buf, size_t size)
{
    const void *src = a->sa.sa_family == AF_INET6 ? (const void *)&a->in6.sin6_addr : (const void *)&a->in4.sin_addr;
    if (!inet_ntop(a->sa.sa_family, src, buf, (socklen_t)size))
        snprintf(buf, size, "?");
    return buf;
}

/* The local address the kernel would use toward dst: a connected UDP
 * socket picks route and source without sending anything. */
bool route_source(const NDK_SOCKADDR *dst, NDK_SOCKADDR *src)
{
    NDK_SOCKADDR to = *dst;
    set_port(&to, 9);
    int fd = socket(to.sa.sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    socklen_t len = sizeof *src;
    socklen_t tolen = to.sa.sa_family == AF_INET6 ? sizeof to.in6 : sizeof to.in4;
    bool ok = connect(fd, &to.sa, tolen) == 0 && getsockname(fd, &src->sa, &len) == 0;
    close(fd);
    if (ok)
        set_port(src, 0);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Both ends                                                                */
/* ------------------------------------------------------------------------ */

/* write_lat reads the last byte of a message as the sign that all of it
 * has arrived; only in-order placement makes that valid. */
static bool check_in_order(const struct endpoint *e, enum test_kind t)
{
    if (t != T_WRITE_LAT || (e->info.AdapterFlags & NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED))
        return true;
    complain(e->role, "adapter %s does not set NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED: write_lat's "
                      "polling of the last byte would not prove that the message arrived; refusing",
             e->adapter_name);
    return false;
}

static void cap_inline(const struct endpoint *e, struct layout *l)
{
    if (l->inline_size > e->info.MaxInlineDataSize)
        l->inline_size = e->info.MaxInlineDataSize;
}

static void params_from_options(const struct options *o, struct test_params *tp)
{
    tp->test = o->test;
    tp->all_sizes = o->all_sizes;
    tp->size = o->size;
    tp->iters = o->iters;
    tp->duration_ms = o->duration_ms;
    tp->warmup = o->warmup;
    tp->rx_depth = o->rx_depth;
}

/*
 * The server: one client, then exit (as perftest). notify_fd >= 0
 * (--loopback): the bound port goes there, and the header is left to the
 * client, which prints the table.
 */
static int server_main(const struct options *o, int notify_fd)
{
    bool loopback = notify_fd >= 0;
    if (!pin_self("server", o->cpu_server))
        return 1;
    struct endpoint e;
    ep_init(&e, "server", o);
    int rc = 1;
    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    const char *bind_text = loopback ? "127.0.0.1" : o->bind;
    if (bind_text) {
        if (!resolve("server", bind_text, &addr))
            goto out;
    } else {
        addr.in4.sin_family = AF_INET; /* every address */
    }
    set_port(&addr, o->port_given || !loopback ? o->port : 0);
    if (!ep_open(&e, o->adapter ? o->adapter : bind_text ? bind_text : "lo"))
        goto out;
    NDK_SOCKADDR bound;
    if (!ep_listen(&e, &addr, &bound))
        goto out;
    char ip[INET6_ADDRSTRLEN];
    if (loopback) {
        uint8_t port[2] = {(uint8_t)(get_port(&bound) >> 8), (uint8_t)get_port(&bound)};
        if (write(notify_fd, port, sizeof port) != (ssize_t)sizeof port) {
            complain("server", "cannot tell the client the port: %s", strerror(errno));
            goto out;
        }
    } else {
        printf("ndkperf %s server: listening on %s port %u (adapter %s), waiting up to %u s for a client\n",
               test_name(o->test), ip_text(&bound, ip, sizeof ip), get_port(&bound), e.adapter_name,
               o->accept_timeout_ms / 1000);
        fflush(stdout);
    }
    if (!ep_wait_request(&e, o->accept_timeout_ms))
        goto out;

    uint8_t req[PDATA_REQ_LEN];
    uint32_t len = 0;
    ULONG ird = 0, ord = 0;
    if (!ep_request_data(&e, req, sizeof req, &len, &ird, &ord))
        goto out;
    struct test_params tp;
    const char *why = NULL;
    char reason[160];
    if (len > sizeof req || !pdata_get_request(req, len, &e.peer, &tp, &why)) {
        ep_reject(&e, why ? why : "private data too long for ndkperf");
        goto out;
    }
    if (tp.test != o->test) {
        snprintf(reason, sizeof reason, "the client runs %s, this server %s", test_name(tp.test), test_name(o->test));
        ep_reject(&e, reason);
        goto out;
    }
    if (!check_in_order(&e, tp.test)) {
        ep_reject(&e, "no in-order placement for write_lat");
        goto out;
    }
    struct layout l;
    test_layout(&tp, o, true, &l);
    cap_inline(&e, &l);
    if (e.peer.size < l.region) {
        snprintf(reason, sizeof reason, "the client's buffer (%" PRIu32 " bytes) is smaller than its messages",
                 e.peer.size);
        ep_reject(&e, reason);
        goto out;
    }
    if (!ep_create(&e, &l) || !test_prepost(&e, &tp, true))
        goto out;
    uint8_t rep[PDATA_REP_LEN];
    pdata_put_reply(rep, &e.local);
    ULONG my_ird, my_ord;
    test_read_limits(&tp, o, &my_ird, &my_ord);
    /* Our requests capped by the client's (reference 7.4). */
    if (!ep_accept(&e, rep, sizeof rep, my_ird < ird ? my_ird : ird, my_ord < ord ? my_ord : ord))
        goto out;
    if (!loopback) {
        char place[64], cpu[32];
        snprintf(place, sizeof place, "server process, %s", cpu_text(o->cpu_server, cpu, sizeof cpu));
        report_header(&e, &tp, place);
    }
    if (!run_server_tests(&e, &tp))
        goto out;
    if (!ep_disconnect(&e, true))
        goto out;
    if (!loopback) {
        printf("ndkperf %s server: done\n", test_name(tp.test));
        fflush(stdout);
    }
    rc = 0;
out:
    ep_close(&e);
    return rc;
}

static int client_main(const struct options *o, const char *address, unsigned port, const char *placement)
{
    if (!pin_self("client", o->cpu_client))
        return 1;
    struct endpoint e;
    ep_init(&e, "client", o);
    int rc = 1;
    NDK_SOCKADDR dst, src;
    char ip[INET6_ADDRSTRLEN];
    if (!resolve("client", address, &dst))
        goto out;
    set_port(&dst, port);
    /* Default adapter: the one the route to the server leaves from. */
    if (!route_source(&dst, &src)) {
        complain("client", "no route to %s", address);
        goto out;
    }
    if (!ep_open(&e, o->adapter ? o->adapter : ip_text(&src, ip, sizeof ip)))
        goto out;
    struct test_params tp;
    params_from_options(o, &tp);
    if (!check_in_order(&e, tp.test)) {
        rc = EXIT_UNSUPPORTED;
        goto out;
    }
    struct layout l;
    test_layout(&tp, o, false, &l);
    cap_inline(&e, &l);
    if (!ep_create(&e, &l) || !test_prepost(&e, &tp, false))
        goto out;
    uint8_t req[PDATA_REQ_LEN], rep[PDATA_REP_LEN + 64];
    pdata_put_request(req, &e.local, &tp);
    ULONG ird, ord;
    test_read_limits(&tp, o, &ird, &ord);
    uint32_t rep_len = 0;
    if (!ep_connect(&e, &src, &dst, req, sizeof req, ird, ord, rep, sizeof rep, &rep_len))
        goto out;
    const char *why = NULL;
    if (rep_len > sizeof rep || !pdata_get_reply(rep, rep_len, &e.peer, &why)) {
        complain("client", "the server's accept: %s", why ? why : "private data too long for ndkperf");
        goto out;
    }
    if (e.peer.size < l.region) {
        complain("client", "the server's buffer (%" PRIu32 " bytes) is smaller than the messages", e.peer.size);
        goto out;
    }
    test_connected(&e, &tp);
    report_header(&e, &tp, placement);
    if (!run_client_tests(&e, &tp))
        goto out;
    if (!ep_disconnect(&e, false))
        goto out;
    rc = 0;
out:
    ep_close(&e);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --loopback                                                               */
/* ------------------------------------------------------------------------ */

/* Waits at most ms for fd to have data or end-of-file. */
static bool wait_readable(int fd, unsigned ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int rc;
    do
        rc = poll(&p, 1, (int)ms);
    while (rc < 0 && errno == EINTR);
    return rc > 0;
}

static int run_loopback(const struct options *o)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        complain(NULL, "pipe: %s", strerror(errno));
        return 1;
    }
    show_role = true;
    fflush(NULL); /* nothing buffered may be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        complain(NULL, "fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(fds[0]);
        int rc = server_main(o, fds[1]);
        fflush(NULL);
        _exit(rc);
    }
    close(fds[1]);

    int rc = 1;
    uint8_t port[2];
    unsigned grace = o->timeout_ms + 2000;
    if (!wait_readable(fds[0], grace) || read(fds[0], port, sizeof port) != (ssize_t)sizeof port) {
        complain(NULL, "the server process did not start listening");
    } else {
        char place[160], a[32], b[32];
        snprintf(place, sizeof place, "--loopback: two processes over 127.0.0.1, server pid %ld on %s, client pid %ld on %s",
                 (long)pid, cpu_text(o->cpu_server, a, sizeof a), (long)getpid(), cpu_text(o->cpu_client, b, sizeof b));
        rc = client_main(o, "127.0.0.1", (unsigned)port[0] << 8 | port[1], place);
    }
    /* A failed client leaves the server waiting: stop it (it is our child). */
    if (rc != 0)
        kill(pid, SIGTERM);
    /* The pipe reaches end-of-file when the server process has exited. */
    char c;
    if (!wait_readable(fds[0], 2 * grace) || read(fds[0], &c, 1) != 0) {
        complain(NULL, "the server process (pid %ld) did not exit; killing it", (long)pid);
        kill(pid, SIGKILL);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        complain(NULL, "the server process failed (%s %d)", WIFEXITED(status) ? "exit status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        rc = 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    /* The perftest-compatible mode has perftest's command line, not ours. */
    if (argc > 1 && strcmp(argv[1], "--perftest") == 0)
        return perftest_main(argc - 1, argv + 1);
    struct options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* Whole lines, in order, even through a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    switch (o.mode) {
    case MODE_SERVER:
        return server_main(&o, -1);
    case MODE_CLIENT: {
        char place[64], cpu[32];
        snprintf(place, sizeof place, "client process, %s", cpu_text(o.cpu_client, cpu, sizeof cpu));
        return client_main(&o, o.address, o.port, place);
    }
    default:
        return run_loopback(&o);
    }
}
