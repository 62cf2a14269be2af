/*
 * ndkping - rdma-core's rping over NDK: the connection phase, then a data
 * phase.
 *
 * The client connects with private data and requested IRD/ORD; the server
 * reads them from its connect event, accepts with its own private data and
 * limits; both sides print what they see and how long each leg took. Then,
 * unless --no-data, the client moves data (see "Data phase" below); last the
 * client disconnects, the server answers the disconnect, and everything is
 * closed. --loopback runs both ends in one process on two instances of the
 * loopback adapter, as two hosts would, and checks that each side received
 * the other's private data byte for byte, consistent IRD/ORD, and every
 * byte of the data phase.
 *
 * Uses only the public headers. Every asynchronous call is handled the way
 * reference section 4 allows it to finish: inline (STATUS_SUCCESS or an
 * error) or STATUS_PENDING followed by exactly one callback from the
 * provider's thread, which we wait for with a bound. Work requests complete
 * into the CQ, which ndkping polls, sleeping on its notification while it
 * is empty, each wait with a deadline.
 */
#include <ctype.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>

#include "ndkping_rping.h"
#include "ndkping_steps.h"
#include "toolcommon.h"

#define DEFAULT_PORT 7174 /* rping's */
#define DEFAULT_READ_LIMIT 16
#define DEFAULT_TIMEOUT_MS 10000
/* ndkping waits this much longer than the provider's own timeouts, so that
 * a provider timeout is reported as the provider's status, and a missing
 * callback as such. */
#define GRACE_MS 2000
/* The data phase keeps at most one work request outstanding on each queue
 * (each step waits for its completion); one CQ serves both queues, so it
 * holds both depths and can never overflow. */
#define QUEUE_DEPTH 4
#define CQ_DEPTH (2 * QUEUE_DEPTH)
/* Data phase: the default and largest -S, and the Send/Receive message. */
#define DEFAULT_SIZE 65536u
#define MAX_SIZE (1u << 30)
#define MSG_SIZE 64u
/* Private data is shown up to this many bytes. */
#define PDATA_SHOWN 256
#define PDATA_BUF (PDATA_SHOWN * 4 + 64)
#define ADDR_BUF (INET6_ADDRSTRLEN + IF_NAMESIZE + 16)

static const char *prog = "ndkping";

enum mode { MODE_UNSET, MODE_SERVER, MODE_CLIENT, MODE_LOOPBACK };

/* Levels for say(): 0 even with -q, 1 normal, 2 with -v. */
enum { LVL_SUMMARY = 0, LVL_NORMAL = 1, LVL_VERBOSE = 2 };

static struct options {
    enum mode mode;
    const char *address; /* -a */
    const char *adapter; /* -d */
    unsigned port;
    bool port_given;
    unsigned long count; /* 0: the server runs until interrupted */
    ULONG ird, ord;
    char *data, *reply;
    size_t data_len, reply_len;
    bool reject, crc, no_p2p, ipv6;
    bool data_phase; /* the data phase; --no-data turns it off */
    bool verify;     /* compare every byte (--verify; always with --loopback) */
    ULONG size;      /* -S: this side's buffer */
    int verbosity;
    unsigned timeout_ms;
} opt;

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_uint library_problems;

/* ------------------------------------------------------------------------ */
/* Output                                                                   */
/* ------------------------------------------------------------------------ */

/* "role: message" on stdout, one whole line at a time: in --loopback mode
 * the server thread and the client print concurrently. */
static void say(int level, const char *role, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(int level, const char *role, const char *fmt, ...)
{
    if (opt.verbosity < level)
        return;
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&out_lock);
    if (role)
        printf("%s: ", role);
    vprintf(fmt, ap);
    putchar('\n');
    pthread_mutex_unlock(&out_lock);
    va_end(ap);
}

static void vcomplain(const char *role, const char *what, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&out_lock);
    fflush(stdout); /* keep errors after the lines that led to them */
    fprintf(stderr, "%s: ", prog);
    /* Only --loopback has two sides in one output. */
    if (role && opt.mode == MODE_LOOPBACK)
        fprintf(stderr, "%s: ", role);
    if (what)
        fprintf(stderr, "%s", what);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&out_lock);
}

/* "ndkping: [role: ]message" on stderr. */
static void complain(const char *role, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void complain(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vcomplain(role, NULL, fmt, ap);
    va_end(ap);
}

/* The provider broke a rule of the reference: reported, counted, and the
 * run fails, even when the connection itself worked. */
static void library_problem(const char *role, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void library_problem(const char *role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vcomplain(role, "library problem: ", fmt, ap);
    va_end(ap);
    atomic_fetch_add(&library_problems, 1);
}

/* Private data as text: printable ASCII as is, the rest as \xNN. */
static const char *fmt_pdata(const uint8_t *p, size_t n, char *buf, size_t size)
{
    if (n == 0) {
        snprintf(buf, size, "none (0 bytes)");
        return buf;
    }
    size_t o = 0, shown = n > PDATA_SHOWN ? PDATA_SHOWN : n;
    buf[o++] = '"';
    for (size_t i = 0; i < shown && o + 48 < size; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\')
            o += (size_t)snprintf(buf + o, size - o, "\\%c", ch);
        else if (ch >= 0x20 && ch < 0x7f)
            buf[o++] = (char)ch;
        else
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", ch);
    }
    snprintf(buf + o, size - o, "\"%s (%zu byte%s)", shown < n ? "..." : "", n, n == 1 ? "" : "s");
    return buf;
}

static ULONG min_ul(ULONG a, ULONG b)
{
    return a < b ? a : b;
}

static unsigned step_wait_ms(void)
{
    return opt.timeout_ms + GRACE_MS;
}

/* NdkConnect may spend the TCP handshake timeout and then the MPA Reply
 * timeout, each of them opt.timeout_ms. */
static unsigned connect_wait_ms(void)
{
    return 2 * opt.timeout_ms + GRACE_MS;
}

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

struct stats {
    unsigned n;
    uint64_t sum, min, max;
};

static void stats_add(struct stats *s, uint64_t v)
{
    if (s->n == 0 || v < s->min)
        s->min = v;
    if (s->n == 0 || v > s->max)
        s->max = v;
    s->n++;
    s->sum += v;
}

/* "N connections, avg connect X us, min Y, max Z", or "K of N connections
 * ok, ..." when only K of the N attempts went as asked. suffix qualifies
 * the noun (" refused"). */
static void stats_print(const char *role, const char *noun, const char *suffix, const char *leg,
                        const struct stats *s, unsigned long attempted)
{
    bool partial = s->n < attempted;
    unsigned long total = partial ? attempted : s->n;
    char head[160];
    char of[32] = "";
    if (partial)
        snprintf(of, sizeof of, "%u of ", s->n);
    snprintf(head, sizeof head, "%s%lu %s%s%s%s", of, total, noun, total == 1 ? "" : "s", suffix,
             partial ? (suffix[0] ? " as asked" : " ok") : "");
    if (s->n == 0 || !leg)
        say(LVL_SUMMARY, role, "%s", head);
    else
        say(LVL_SUMMARY, role, "%s, avg %s %" PRIu64 " us, min %" PRIu64 ", max %" PRIu64, head,
            leg, s->sum / s->n, s->min, s->max);
}

/* ------------------------------------------------------------------------ */
/* Data phase: what travels                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Private data. With the data phase on, each side appends to its text
 * (--data / --reply) a NUL byte and a 16-byte buffer advertisement, as
 * rping's message, all fields big-endian:
 *
 *     TEXT  0x00  | virtual address (8) | remote token (4) | size (4) |
 *
 * The text cannot hold a NUL (it is a C string), so the first NUL ends it
 * and exactly 16 bytes must follow; private data without a NUL is text
 * alone (--no-data, or a reject, which never advertises a buffer).
 */
#define ADV_LEN 16u

struct adv {
    uint64_t addr;  /* the buffer's virtual address: the RemoteAddress to use */
    uint32_t token; /* its remote token */
    uint32_t size;  /* its size in bytes */
};

static void adv_encode(uint8_t out[ADV_LEN], const struct adv *a)
{
    tc_put_be64(out, a->addr);
    tc_put_be32(out + 8, a->token);
    tc_put_be32(out + 12, a->size);
}

static void adv_decode(const uint8_t in[ADV_LEN], struct adv *a)
{
    a->addr = tc_get_be64(in);
    a->token = tc_get_be32(in + 8);
    a->size = tc_get_be32(in + 12);
}

/* TEXT [NUL ADV] into a malloc'ed buffer; NULL when out of memory. */
static uint8_t *pdata_build(const char *text, size_t text_len, const struct adv *a, ULONG *len)
{
    size_t n = text_len + (a ? 1 + ADV_LEN : 0);
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        return NULL;
    memcpy(p, text, text_len);
    if (a) {
        p[text_len] = 0;
        adv_encode(p + text_len + 1, a);
    }
    *len = (ULONG)n;
    return p;
}

/* Splits received private data into its text and its advertisement
 * (*adv_bytes NULL when there is none). False if a NUL is not followed by
 * exactly ADV_LEN bytes. */
static bool pdata_split(const uint8_t *p, ULONG len, ULONG *text_len, const uint8_t **adv_bytes)
{
    const uint8_t *nul = len ? memchr(p, 0, len) : NULL;
    *adv_bytes = NULL;
    if (!nul) {
        *text_len = len;
        return true;
    }
    *text_len = (ULONG)(nul - p);
    if (len - *text_len - 1 != ADV_LEN)
        return false;
    *adv_bytes = nul + 1;
    return true;
}

/* "TEXT" (N bytes) + buffer 0x... token 0x... N bytes */
static const char *fmt_pdata_adv(const uint8_t *text, size_t text_len, const uint8_t *adv_bytes,
                                 char *buf, size_t size)
{
    fmt_pdata(text, text_len, buf, size);
    if (adv_bytes) {
        struct adv a;
        adv_decode(adv_bytes, &a);
        size_t used = strlen(buf);
        snprintf(buf + used, size - used,
                 " + buffer 0x%" PRIx64 " token 0x%08" PRIx32 " %" PRIu32 " bytes", a.addr, a.token,
                 a.size);
    }
    return buf;
}

/*
 * The bytes moved: xorshift32 streams from a seed the client picks per
 * connection, so that no two connections write the same bytes and the
 * server, which learns the seed from the client's message, can check its
 * buffer. Bytes are taken big-endian from each word: the same on every host.
 */
enum { STREAM_BUFFER = 1, STREAM_CLIENT_MSG = 2, STREAM_SERVER_MSG = 3 };

static uint32_t pattern_start(uint32_t seed, uint32_t stream)
{
    uint32_t s = seed ^ (stream * 0x9E3779B9u);
    return s ? s : 0x6D2B79F5u; /* xorshift never leaves 0 */
}

static uint32_t pattern_next(uint32_t *s)
{
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

/* The next up to PATTERN_CHUNK bytes of a stream. */
#define PATTERN_CHUNK 1024u
static size_t pattern_chunk(uint32_t *s, uint8_t *out, size_t left)
{
    size_t k = left < PATTERN_CHUNK ? left : PATTERN_CHUNK;
    for (size_t i = 0; i < k; i += 4) {
        uint8_t w[4];
        tc_put_be32(w, pattern_next(s));
        memcpy(out + i, w, k - i < 4 ? k - i : 4);
    }
    return k;
}

static void pattern_fill(uint8_t *p, size_t n, uint32_t seed, uint32_t stream)
{
    uint32_t s = pattern_start(seed, stream);
    for (size_t i = 0; i < n;)
        i += pattern_chunk(&s, p + i, n - i);
}

/* Compares p[0..n) with the stream: the number of differing bytes, the
 * first of them at *first (got *got, expected *want). */
static size_t pattern_check(const uint8_t *p, size_t n, uint32_t seed, uint32_t stream,
                            size_t *first, uint8_t *got, uint8_t *want)
{
    uint32_t s = pattern_start(seed, stream);
    size_t bad = 0;
    uint8_t chunk[PATTERN_CHUNK];
    for (size_t i = 0; i < n;) {
        size_t k = pattern_chunk(&s, chunk, n - i);
        if (memcmp(p + i, chunk, k) != 0) {
            for (size_t j = 0; j < k; j++) {
                if (p[i + j] == chunk[j])
                    continue;
                if (bad++ == 0)
                    *first = i + j, *got = p[i + j], *want = chunk[j];
            }
        }
        i += k;
    }
    return bad;
}

/*
 * The Send/Receive messages, MSG_SIZE bytes, big-endian:
 *
 *      0  "NDKP"
 *      4  kind: MSG_CLIENT (the client's Send), MSG_REPLY (the server's)
 *      8  seed of the connection's streams
 *     12  bytes of the RDMA Write / Read (the smaller of the two buffers)
 *     16  reply only: the server's verdict (VERDICT_*)
 *     20  reply only: microseconds from the server's Receive completion to
 *         its reply, spent checking; the client leaves them out of the
 *         Send/Receive round trip
 *     24  stream bytes up to MSG_SIZE (STREAM_CLIENT_MSG / STREAM_SERVER_MSG)
 */
#define MSG_HEADER 24u
enum { MSG_CLIENT = 1, MSG_REPLY = 2 };
enum {
    VERDICT_OK = 0,         /* the message and the buffer held what was sent */
    VERDICT_BAD_MSG = 1,    /* the client's message was not as sent */
    VERDICT_BAD_BUFFER = 2, /* the buffer did not hold the written pattern */
    VERDICT_UNCHECKED = 3,  /* the server runs without --verify */
};

static const char *verdict_name(uint32_t v)
{
    switch (v) {
    case VERDICT_OK:
        return "ok";
    case VERDICT_BAD_MSG:
        return "the client's message was not what was sent";
    case VERDICT_BAD_BUFFER:
        return "its buffer did not hold the written pattern";
    case VERDICT_UNCHECKED:
        return "not checked (the server runs without --verify)";
    default:
        return "an unknown verdict";
    }
}

static void msg_build(uint8_t *m, uint32_t kind, uint32_t seed, uint32_t len, uint32_t verdict,
                      uint32_t held_us)
{
    memcpy(m, "NDKP", 4);
    tc_put_be32(m + 4, kind);
    tc_put_be32(m + 8, seed);
    tc_put_be32(m + 12, len);
    tc_put_be32(m + 16, verdict);
    tc_put_be32(m + 20, held_us);
    pattern_fill(m + MSG_HEADER, MSG_SIZE - MSG_HEADER, seed,
                 kind == MSG_CLIENT ? STREAM_CLIENT_MSG : STREAM_SERVER_MSG);
}

/*
 * Checks a received message of `got` bytes: magic, kind, length of the
 * transfer, and with --verify the stream bytes. Returns NULL if it is as
 * expected (*seed, *verdict, *held_us filled), else what is wrong.
 */
static const char *msg_check(const uint8_t *m, ULONG got, uint32_t kind, uint32_t len,
                             uint32_t *seed, uint32_t *verdict, uint32_t *held_us, char *why,
                             size_t size)
{
    if (got != MSG_SIZE) {
        snprintf(why, size, "%" PRIu32 " bytes instead of %u", got, MSG_SIZE);
        return why;
    }
    if (memcmp(m, "NDKP", 4) != 0 || tc_get_be32(m + 4) != kind) {
        snprintf(why, size, "not an ndkping %s message", kind == MSG_CLIENT ? "client" : "reply");
        return why;
    }
    *seed = tc_get_be32(m + 8);
    *verdict = tc_get_be32(m + 16);
    *held_us = tc_get_be32(m + 20);
    if (tc_get_be32(m + 12) != len) {
        snprintf(why, size, "announces %" PRIu32 " bytes written, expected %" PRIu32,
                 tc_get_be32(m + 12), len);
        return why;
    }
    size_t first = 0, bad;
    uint8_t g = 0, w = 0;
    if (opt.verify &&
        (bad = pattern_check(m + MSG_HEADER, MSG_SIZE - MSG_HEADER, *seed,
                             kind == MSG_CLIENT ? STREAM_CLIENT_MSG : STREAM_SERVER_MSG, &first, &g,
                             &w))) {
        snprintf(why, size, "%zu byte%s differ, the first at offset %zu: 0x%02x, expected 0x%02x",
                 bad, bad == 1 ? "" : "s", MSG_HEADER + first, g, w);
        return why;
    }
    return NULL;
}

/* Bytes per microsecond are MB/s (10^6 bytes per second). */
static double mb_per_s(uint64_t bytes, uint64_t us)
{
    return (double)bytes / (double)(us ? us : 1);
}

/* Decimals for a rate printed with "%.*f": small rates keep three. */
static int rate_prec(double mb_s)
{
    return mb_s < 1.0 ? 3 : 1;
}

/* The two arguments of "%.*f MB/s" for bytes in us. */
#define RATE(bytes, us) rate_prec(mb_per_s((bytes), (us))), mb_per_s((bytes), (us))

/* ------------------------------------------------------------------------ */
/* One end: an adapter instance                                              */
/* ------------------------------------------------------------------------ */

struct conn;

struct side {
    const char *role; /* "server" / "client" */
    NDK_ADAPTER *ad;
    NDK_ADAPTER_INFO info;
    char name[IF_NAMESIZE];
    NDK_SOCKADDR addr;      /* server: listen address; client: source address (port 0) */
    struct conn *graveyard; /* connections whose callbacks may still come */
    /* The advertisement in the private data this side sent last, under
     * adv_lock: --loopback compares what the peer received with it. */
    uint8_t adv[ADV_LEN];
    bool adv_set;
};

static pthread_mutex_t adv_lock = PTHREAD_MUTEX_INITIALIZER;

static void side_record_adv(struct side *s, const struct adv *a)
{
    pthread_mutex_lock(&adv_lock);
    adv_encode(s->adv, a);
    s->adv_set = true;
    pthread_mutex_unlock(&adv_lock);
}

/* --loopback: did the peer's advertisement arrive byte for byte? */
static bool adv_matches(const char *role, const char *whose, const struct side *peer,
                        const uint8_t *got)
{
    pthread_mutex_lock(&adv_lock);
    bool same = peer->adv_set && memcmp(peer->adv, got, ADV_LEN) == 0;
    uint8_t sent[ADV_LEN];
    memcpy(sent, peer->adv, ADV_LEN);
    pthread_mutex_unlock(&adv_lock);
    if (!same) {
        struct adv a, b;
        adv_decode(got, &a);
        adv_decode(sent, &b);
        complain(role,
                 "%s buffer advertisement differs from what was sent: got 0x%" PRIx64
                 " token 0x%08" PRIx32 " %" PRIu32 " bytes, sent 0x%" PRIx64 " token 0x%08" PRIx32
                 " %" PRIu32 " bytes",
                 whose, a.addr, a.token, a.size, b.addr, b.token, b.size);
    }
    return same;
}

static bool side_open(struct side *s, const char *role, const char *spec, const char *name,
                      ULONG flags)
{
    memset(s, 0, sizeof *s);
    s->role = role;
    snprintf(s->name, sizeof s->name, "%s", name);
    /* The provider's own timeouts follow --timeout, so that a slow step is
     * reported by the provider (STATUS_IO_TIMEOUT) before ndkping gives up. */
    NDK_OPEN_OPTIONS o = {
        .Size = sizeof o,
        .Flags = flags,
        .TcpConnectTimeoutMs = opt.timeout_ms,
        .MpaReplyTimeoutMs = opt.timeout_ms,
        .RtrTimeoutMs = opt.timeout_ms,
        .DisconnectTimeoutMs = opt.timeout_ms,
    };
    pthread_mutex_lock(&out_lock);
    fflush(stdout);
    NTSTATUS st = tc_open_adapter(prog, spec, &o, &s->ad);
    pthread_mutex_unlock(&out_lock);
    if (st != STATUS_SUCCESS)
        return false;
    st = tc_query_info(s->ad, &s->info, NULL);
    if (st != STATUS_SUCCESS) {
        complain(role, "NdkQueryAdapterInfo on '%s' failed: %s", spec, ndk_status_name(st));
        return false;
    }
    say(LVL_VERBOSE, role, "opened adapter '%s' (%s) at NDK %u.%u, flags 0x%" PRIx32, spec, s->name,
        s->info.Version.Major, s->info.Version.Minor, flags);
    return true;
}

static void print_adapter_summary(const struct side *s, const NDK_ADAPTER_DESCRIPTION *d,
                                  const char *how)
{
    char addrs[NDK_MAX_ADAPTER_ADDRESSES * ADDR_BUF];
    const NDK_ADAPTER_INFO *in = &s->info;
    say(LVL_NORMAL, NULL,
        "adapter %s (%s)%s: NDK %u.%u, %s, MaxCallerData %" PRIu32 ", MaxCalleeData %" PRIu32
        ", max IRD %" PRIu32 " ORD %" PRIu32,
        s->name, d ? tc_format_desc_addrs(d, addrs, sizeof addrs) : "?", how, in->Version.Major,
        in->Version.Minor, tc_technology_name(in->RdmaTechnology), in->MaxCallerData,
        in->MaxCalleeData, in->MaxInboundReadLimit, in->MaxOutboundReadLimit);
}

/* ------------------------------------------------------------------------ */
/* One connection's objects and completions                                 */
/* ------------------------------------------------------------------------ */

/* The registered buffers of the data phase; a connection uses some. */
enum {
    B_SOURCE, /* client: the pattern it writes; advertised, remote read */
    B_SINK,   /* client: where the RDMA Read puts the pattern back */
    B_TARGET, /* server: advertised, the client writes and reads it */
    B_MSG,    /* both: the outgoing message, then the receive buffer */
    B_COUNT
};

/* The calls made on each buffer's MR, each with its own completion. */
enum { MK_CREATE, MK_REGISTER, MK_DEREGISTER, MK_CLOSE, MK_COUNT };

#define MR_CALLS(what)                                                                             \
    {                                                                                              \
        "NdkCreateMr (" what ")", "NdkRegisterMr (" what ")", "NdkDeregisterMr (" what ")",        \
            "NdkCloseMr (" what ")"                                                                \
    }
static const char *const mr_call_names[B_COUNT][MK_COUNT] = {
    [B_SOURCE] = MR_CALLS("source buffer"),
    [B_SINK] = MR_CALLS("read sink"),
    [B_TARGET] = MR_CALLS("target buffer"),
    [B_MSG] = MR_CALLS("message buffer"),
};
#undef MR_CALLS

struct buf {
    uint8_t *mem; /* page-aligned; freed with the connection */
    size_t len;
    MDL mdl; /* left alone while a registration is pending (5.6.1) */
    NDK_MR *mr;
    bool registered;
    UINT32 ltoken, rtoken;
    struct tc_completion k[MK_COUNT];
};

/* The work requests of the data phase; RequestContext is the struct op. */
enum { OP_WRITE, OP_READ, OP_SEND, OP_RECV, OP_COUNT };

static const struct {
    const char *name;
    NDK_OPERATION_TYPE type;
} op_info[OP_COUNT] = {
    [OP_WRITE] = {"RDMA Write", NdkOperationTypeWrite},
    [OP_READ] = {"RDMA Read", NdkOperationTypeRead},
    [OP_SEND] = {"Send", NdkOperationTypeSend},
    [OP_RECV] = {"Receive", NdkOperationTypeReceive},
};

struct op {
    bool posted, done;
    uint64_t t_post, t_done; /* tc_now_us() before posting / when polled */
    NDK_RESULT_EX res;
};

struct conn {
    struct side *side;
    unsigned num; /* 1-based, as printed */
    struct tc_completion k[K_COUNT];
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_CONNECTOR *cn;
    struct buf bufs[B_COUNT];
    struct op ops[OP_COUNT];
    uint8_t *pdata_out; /* the private data this side sends (text [NUL adv]) */
    ULONG pdata_out_len;
    uint32_t seed; /* client: of the connection's pattern streams */
    /* ops_wait sleeps on wake_cond until wakes changes: the CQ's
     * notification and the disconnect event count it up. */
    pthread_mutex_t wake_lock;
    pthread_cond_t wake_cond;
    unsigned wakes;
    NTSTATUS cq_status; /* of the last CQ notification */
    /* A callback may still arrive (we stopped waiting for one): the
     * completions must outlive the adapter, whose close is the last point
     * a callback can run (rule L12). */
    bool abandoned;
    struct conn *next;
};

static struct conn *conn_new(struct side *s, unsigned num)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        complain(s->role, "out of memory");
        return NULL;
    }
    c->side = s;
    c->num = num;
    pthread_mutex_init(&c->wake_lock, NULL);
    tc_cond_init_mono(&c->wake_cond);
    for (int i = 0; i < K_COUNT; i++)
        tc_comp_init(&c->k[i], k_names[i]);
    for (int b = 0; b < B_COUNT; b++)
        for (int i = 0; i < MK_COUNT; i++)
            tc_comp_init(&c->bufs[b].k[i], mr_call_names[b][i]);
    return c;
}

/* Also frees the buffers: only once no registration can use them. */
static void conn_free(struct conn *c)
{
    for (int i = 0; i < K_COUNT; i++)
        tc_comp_destroy(&c->k[i]);
    for (int b = 0; b < B_COUNT; b++) {
        for (int i = 0; i < MK_COUNT; i++)
            tc_comp_destroy(&c->bufs[b].k[i]);
        free(c->bufs[b].mem);
    }
    free(c->pdata_out);
    pthread_cond_destroy(&c->wake_cond);
    pthread_mutex_destroy(&c->wake_lock);
    free(c);
}

/* -v: how a call finished. */
static void note_comp(struct conn *c, struct tc_completion *p, NTSTATUS final)
{
    if (p->pending)
        say(LVL_VERBOSE, c->side->role, "[%u] %s: STATUS_PENDING, then %s", c->num, p->what,
            tc_status_name(final));
    else
        say(LVL_VERBOSE, c->side->role, "[%u] %s: %s (inline)", c->num, p->what,
            tc_status_name(final));
}

static void note_step(struct conn *c, int k, NTSTATUS final)
{
    note_comp(c, &c->k[k], final);
}

/* Finishes a create: the object, or NULL after printing why. */
static void *finish_create_comp(struct conn *c, struct tc_completion *p, NTSTATUS st,
                                void *inline_obj)
{
    st = tc_comp_finish(p, st, step_wait_ms());
    note_comp(c, p, st);
    if (st == TC_STATUS_NO_CALLBACK)
        c->abandoned = true; /* the object may still be created later */
    if (st != STATUS_SUCCESS) {
        complain(c->side->role, "%s failed: %s", p->what, tc_status_name(st));
        return NULL;
    }
    void *obj = tc_comp_object(p, inline_obj);
    if (!obj)
        library_problem(c->side->role, "%s succeeded without giving an object", p->what);
    return obj;
}

static void *finish_create(struct conn *c, int k, NTSTATUS st, void *inline_obj)
{
    return finish_create_comp(c, &c->k[k], st, inline_obj);
}

static void conn_wake(struct conn *c, NTSTATUS st)
{
    pthread_mutex_lock(&c->wake_lock);
    c->wakes++;
    if (st != STATUS_SUCCESS)
        c->cq_status = st;
    pthread_cond_broadcast(&c->wake_cond);
    pthread_mutex_unlock(&c->wake_lock);
}

/* Called once per NdkArmCq that is satisfied (8.2); Context is the conn. */
static VOID cq_notification(PVOID Context, NTSTATUS CqStatus)
{
    conn_wake(Context, CqStatus);
}

/* The peer's disconnect (5.2.7): recorded, and a data phase waiting for
 * completions stops waiting. Context is the conn. */
static VOID on_disconnect_event(PVOID Context)
{
    struct conn *c = Context;
    tc_comp_signal(&c->k[K_DISCONNECT_EVENT], STATUS_SUCCESS, NULL, 0);
    conn_wake(c, STATUS_SUCCESS);
}

/* CQ, PD and a small QP; the client also creates its connector. */
static bool conn_create(struct conn *c, bool with_connector)
{
    NDK_ADAPTER *ad = c->side->ad;
    NDK_CQ *cq = NULL;
    NTSTATUS st = ad->Dispatch->NdkCreateCq(ad, CQ_DEPTH, cq_notification, c, NULL, tc_on_create,
                                            &c->k[K_CREATE_CQ], &cq);
    if (!(c->cq = finish_create(c, K_CREATE_CQ, st, cq)))
        return false;

    NDK_PD *pd = NULL;
    st = ad->Dispatch->NdkCreatePd(ad, tc_on_create, &c->k[K_CREATE_PD], &pd);
    if (!(c->pd = finish_create(c, K_CREATE_PD, st, pd)))
        return false;

    NDK_QP *qp = NULL;
    st = c->pd->Dispatch->NdkCreateQp(c->pd, c->cq, c->cq, c, QUEUE_DEPTH, QUEUE_DEPTH, 1, 1, 0,
                                      tc_on_create, &c->k[K_CREATE_QP], &qp);
    if (!(c->qp = finish_create(c, K_CREATE_QP, st, qp)))
        return false;

    if (with_connector) {
        NDK_CONNECTOR *cn = NULL;
        st = ad->Dispatch->NdkCreateConnector(ad, tc_on_create, &c->k[K_CREATE_CONNECTOR], &cn);
        if (!(c->cn = finish_create(c, K_CREATE_CONNECTOR, st, cn)))
            return false;
    }
    return true;
}

/*
 * A page-aligned, zeroed buffer of len bytes, registered on the
 * connection's PD with flags (NdkCreateMr(pd, FALSE) + NdkRegisterMr over
 * an MDL describing it); its tokens are read once the registration is done.
 */
static bool buf_setup(struct conn *c, int b, size_t len, ULONG flags)
{
    struct buf *B = &c->bufs[b];
    const char *role = c->side->role;
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, len) != 0) {
        complain(role, "[%u] cannot allocate %zu bytes", c->num, len);
        return false;
    }
    B->mem = mem;
    B->len = len;
    memset(B->mem, 0, len);

    NDK_MR *mr = NULL;
    NTSTATUS st = c->pd->Dispatch->NdkCreateMr(c->pd, FALSE, tc_on_create, &B->k[MK_CREATE], &mr);
    if (!(B->mr = finish_create_comp(c, &B->k[MK_CREATE], st, mr)))
        return false;

    B->mdl = (MDL){.Next = NULL, .StartVa = B->mem, .ByteOffset = 0, .ByteCount = (ULONG)len};
    st = B->mr->Dispatch->NdkRegisterMr(B->mr, &B->mdl, len, flags, tc_on_request,
                                        &B->k[MK_REGISTER]);
    st = tc_comp_finish(&B->k[MK_REGISTER], st, step_wait_ms());
    note_comp(c, &B->k[MK_REGISTER], st);
    if (st == TC_STATUS_NO_CALLBACK)
        c->abandoned = true; /* the registration may still complete */
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] %s of %zu bytes, flags 0x%" PRIx32 ", failed: %s", c->num,
                 B->k[MK_REGISTER].what, len, flags, tc_status_name(st));
        return false;
    }
    B->registered = true;
    B->ltoken = B->mr->Dispatch->NdkGetLocalTokenFromMr(B->mr);
    B->rtoken = B->mr->Dispatch->NdkGetRemoteTokenFromMr(B->mr);
    say(LVL_VERBOSE, role,
        "[%u] %s: %zu bytes at %p, flags 0x%" PRIx32 ", local token 0x%08" PRIx32
        ", remote token 0x%08" PRIx32,
        c->num, B->k[MK_REGISTER].what, len, (void *)B->mem, flags, B->ltoken, B->rtoken);
    return true;
}

/* The advertisement of a registered buffer. */
static struct adv buf_adv(const struct buf *B)
{
    return (struct adv){
        .addr = (uint64_t)(uintptr_t)B->mem, .token = B->rtoken, .size = (uint32_t)B->len};
}

/* An SGE for len bytes at offset off of a registered buffer. */
static NDK_SGE buf_sge(const struct buf *B, size_t off, size_t len)
{
    return (NDK_SGE){
        .VirtualAddress = B->mem + off, .Length = (ULONG)len, .MemoryRegionToken = B->ltoken};
}

/* Closes one object and waits (bounded) for the close; false if it
 * misbehaved (counted as a library problem). */
static bool conn_close_one(struct conn *c, NDK_FN_CLOSE_OBJECT fn, NDK_OBJECT_HEADER *obj,
                           struct tc_completion *p)
{
    NTSTATUS st = tc_close(fn, obj, p, step_wait_ms(), prog);
    note_comp(c, p, st);
    if (st == STATUS_SUCCESS)
        return true;
    if (st == TC_STATUS_NO_CALLBACK)
        c->abandoned = true;
    atomic_fetch_add(&library_problems, 1);
    return false;
}

/* Deregisters and closes the buffers' MRs. The QP is closed by then, so no
 * work request can still use them. */
static bool bufs_teardown(struct conn *c)
{
    bool ok = true;
    for (int b = 0; b < B_COUNT; b++) {
        struct buf *B = &c->bufs[b];
        if (!B->mr)
            continue;
        if (B->registered) {
            NTSTATUS st =
                B->mr->Dispatch->NdkDeregisterMr(B->mr, tc_on_request, &B->k[MK_DEREGISTER]);
            st = tc_comp_finish(&B->k[MK_DEREGISTER], st, step_wait_ms());
            note_comp(c, &B->k[MK_DEREGISTER], st);
            if (st == TC_STATUS_NO_CALLBACK)
                c->abandoned = true;
            if (st != STATUS_SUCCESS) {
                complain(c->side->role, "[%u] %s failed: %s", c->num, B->k[MK_DEREGISTER].what,
                         tc_status_name(st));
                ok = false;
            }
            B->registered = false;
        }
        if (!conn_close_one(c, B->mr->Dispatch->NdkCloseMr, &B->mr->Header, &B->k[MK_CLOSE]))
            ok = false;
        B->mr = NULL;
    }
    return ok;
}

/*
 * Closes the connection's objects, successors first (the connector relies
 * on the QP; the QP and the MRs on the PD; the QP on the CQ), each close
 * waited for with a bound, then checks the callback rules on every call it
 * made. Returns false if a close misbehaved.
 */
static bool conn_teardown(struct conn *c)
{
    bool ok = true;
    if (c->cn && !conn_close_one(c, c->cn->Dispatch->NdkCloseConnector, &c->cn->Header,
                                 &c->k[K_CLOSE_CONNECTOR]))
        ok = false;
    if (c->qp && !conn_close_one(c, c->qp->Dispatch->NdkCloseQp, &c->qp->Header, &c->k[K_CLOSE_QP]))
        ok = false;
    if (!bufs_teardown(c))
        ok = false;
    if (c->pd && !conn_close_one(c, c->pd->Dispatch->NdkClosePd, &c->pd->Header, &c->k[K_CLOSE_PD]))
        ok = false;
    if (c->cq && !conn_close_one(c, c->cq->Dispatch->NdkCloseCq, &c->cq->Header, &c->k[K_CLOSE_CQ]))
        ok = false;
    c->cn = NULL, c->qp = NULL, c->pd = NULL, c->cq = NULL;

    if (c->abandoned) {
        c->next = c->side->graveyard;
        c->side->graveyard = c;
        return ok;
    }
    /* Every object is closed: no callback can come any more (L14). */
    int problems = 0;
    pthread_mutex_lock(&out_lock);
    fflush(stdout);
    for (int i = 0; i < K_COUNT; i++)
        problems += tc_comp_audit(&c->k[i], prog);
    for (int b = 0; b < B_COUNT; b++)
        for (int i = 0; i < MK_COUNT; i++)
            problems += tc_comp_audit(&c->bufs[b].k[i], prog);
    pthread_mutex_unlock(&out_lock);
    if (problems) {
        atomic_fetch_add(&library_problems, (unsigned)problems);
        ok = false;
    }
    conn_free(c);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Data phase: work requests and the CQ                                     */
/* ------------------------------------------------------------------------ */

/* Marks op as posted; st is what the posting call returned (4.5: SUCCESS
 * queues it, anything else fails it inline and no CQ entry follows). */
static bool op_posted(struct conn *c, int op, const char *call, NTSTATUS st)
{
    if (st != STATUS_SUCCESS) {
        complain(c->side->role, "[%u] %s failed: %s returned %s", c->num, op_info[op].name, call,
                 ndk_status_name(st));
        if (st == STATUS_PENDING)
            library_problem(c->side->role, "%s returned STATUS_PENDING, never valid for a post",
                            call);
        return false;
    }
    c->ops[op].posted = true;
    say(LVL_VERBOSE, c->side->role, "[%u] %s: STATUS_SUCCESS (posted)", c->num, call);
    return true;
}

/* Takes what the CQ holds and files each entry with its op. */
static ULONG cq_drain(struct conn *c)
{
    NDK_RESULT_EX r[CQ_DEPTH];
    ULONG n = c->cq->Dispatch->NdkGetCqResultsEx(c->cq, r, CQ_DEPTH);
    uint64_t now = tc_now_us();
    if (n > CQ_DEPTH) {
        library_problem(c->side->role, "NdkGetCqResultsEx returned %" PRIu32 " of at most %u", n,
                        CQ_DEPTH);
        n = CQ_DEPTH;
    }
    for (ULONG i = 0; i < n; i++) {
        int op = -1;
        for (int k = 0; k < OP_COUNT; k++)
            if (r[i].RequestContext == &c->ops[k])
                op = k;
        if (op < 0 || !c->ops[op].posted || c->ops[op].done) {
            library_problem(c->side->role,
                            "[%u] a CQ entry (%s, type %d) for no outstanding request (context %p)",
                            c->num, ndk_status_name(r[i].Status), (int)r[i].Type,
                            r[i].RequestContext);
            continue;
        }
        struct op *o = &c->ops[op];
        o->done = true;
        o->t_done = now;
        o->res = r[i];
        say(LVL_VERBOSE, c->side->role,
            "[%u] CQ: %s %s, %" PRIu32 " bytes, ProviderErrorCode 0x%" PRIx32, c->num,
            op_info[op].name, ndk_status_name(r[i].Status), r[i].BytesTransferred,
            r[i].ProviderErrorCode);
        if (r[i].QPContext != c)
            library_problem(c->side->role, "[%u] %s completion with QPContext %p, not %p", c->num,
                            op_info[op].name, r[i].QPContext, (void *)c);
        if (r[i].Status == STATUS_SUCCESS && r[i].Type != op_info[op].type)
            library_problem(c->side->role, "[%u] %s completion of type %d, expected %d", c->num,
                            op_info[op].name, (int)r[i].Type, (int)op_info[op].type);
    }
    return n;
}

/*
 * Waits until every op in mask has completed, one of them failed, the
 * deadline passed, or the peer disconnected (once its disconnect event is
 * registered). The CQ is polled; when it is empty, armed for the next
 * completion (8.2) and polled once more, which closes the race with a
 * completion that came before the arm, then the wait sleeps until the
 * notification or the disconnect event (or the deadline). True if all came.
 */
static bool ops_wait(struct conn *c, unsigned mask)
{
    struct timespec deadline;
    tc_deadline(&deadline, step_wait_ms());
    bool expired = false;
    for (;;) {
        bool all = true;
        for (int k = 0; k < OP_COUNT; k++) {
            if (!(mask & (1u << k)))
                continue;
            if (!c->ops[k].done)
                all = false;
            else if (c->ops[k].res.Status != STATUS_SUCCESS)
                return false;
        }
        if (all)
            return true;
        /* Seen before the drain: what the peer sent before leaving has
         * been taken by then. */
        bool peer_left = tc_comp_fired(&c->k[K_DISCONNECT_EVENT]);
        if (cq_drain(c))
            continue;
        if (peer_left || expired)
            return false;
        pthread_mutex_lock(&c->wake_lock);
        unsigned seen = c->wakes;
        pthread_mutex_unlock(&c->wake_lock);
        c->cq->Dispatch->NdkArmCq(c->cq, NDK_CQ_NOTIFY_ANY);
        if (cq_drain(c))
            continue;
        pthread_mutex_lock(&c->wake_lock);
        while (c->wakes == seen && !expired)
            expired = pthread_cond_timedwait(&c->wake_cond, &c->wake_lock, &deadline) == ETIMEDOUT;
        NTSTATUS cq_status = c->cq_status;
        pthread_mutex_unlock(&c->wake_lock);
        if (cq_status != STATUS_SUCCESS) {
            complain(c->side->role, "[%u] the CQ notification reports %s", c->num,
                     ndk_status_name(cq_status));
            return false;
        }
    }
}

/* Did op complete successfully? Prints why not: the operation, the
 * completion's status and ProviderErrorCode. */
static bool op_ok(struct conn *c, int op)
{
    const char *role = c->side->role;
    const struct op *o = &c->ops[op];
    if (!o->done) {
        if (tc_comp_fired(&c->k[K_DISCONNECT_EVENT]))
            complain(role, "[%u] %s failed: the peer disconnected before it completed", c->num,
                     op_info[op].name);
        else
            complain(role, "[%u] %s failed: no completion within %u ms", c->num, op_info[op].name,
                     step_wait_ms());
        return false;
    }
    if (o->res.Status != STATUS_SUCCESS) {
        complain(role, "[%u] %s failed: completion status %s, ProviderErrorCode 0x%" PRIx32, c->num,
                 op_info[op].name, ndk_status_name(o->res.Status), o->res.ProviderErrorCode);
        return false;
    }
    return true;
}

static uint64_t op_us(const struct op *o)
{
    return o->t_done > o->t_post ? o->t_done - o->t_post : 0;
}

/*
 * NdkGetConnectionData as the reference describes it (5.10.6): a size probe
 * with no buffer gives the RDS, then a read into a buffer of that size.
 * *data is malloc'ed (NULL when the RDS is 0).
 */
static NTSTATUS get_connection_data(struct conn *c, NDK_CONNECTOR *cn, ULONG *ird, ULONG *ord,
                                    uint8_t **data, ULONG *len)
{
    const char *role = c->side->role;
    *data = NULL;
    *len = 0;
    ULONG rds = 0;
    NTSTATUS st = cn->Dispatch->NdkGetConnectionData(cn, ird, ord, NULL, &rds);
    say(LVL_VERBOSE, role, "[%u] NdkGetConnectionData(NULL, 0): %s, RDS %" PRIu32, c->num,
        ndk_status_name(st), rds);
    if (st != STATUS_SUCCESS)
        return st;
    if (rds == 0)
        return STATUS_SUCCESS;
    uint8_t *buf = malloc(rds);
    if (!buf)
        return STATUS_NO_MEMORY;
    ULONG got = rds, ird2 = 0, ord2 = 0;
    st = cn->Dispatch->NdkGetConnectionData(cn, &ird2, &ord2, buf, &got);
    if (st != STATUS_SUCCESS) {
        free(buf);
        return st;
    }
    if (got != rds)
        library_problem(role, "NdkGetConnectionData: RDS %" PRIu32 " after the probe said %" PRIu32,
                        got, rds);
    if ((ird && ird2 != *ird) || (ord && ord2 != *ord))
        library_problem(role, "NdkGetConnectionData: IRD/ORD changed between two calls");
    *data = buf;
    *len = got < rds ? got : rds;
    return STATUS_SUCCESS;
}

/* Byte-exact private data (behaviour.md: the RDS is the number of octets
 * the peer sent). */
static bool pdata_matches(const char *role, const char *whose, const uint8_t *got, ULONG got_len,
                          const char *sent, size_t sent_len)
{
    if (got_len == sent_len && (sent_len == 0 || memcmp(got, sent, sent_len) == 0))
        return true;
    char a[PDATA_BUF], b[PDATA_BUF];
    complain(role, "%s private data differs from what was sent: got %s, sent %s", whose,
             fmt_pdata(got, got_len, a, sizeof a),
             fmt_pdata((const uint8_t *)sent, sent_len, b, sizeof b));
    return false;
}

/* ------------------------------------------------------------------------ */
/* Server                                                                   */
/* ------------------------------------------------------------------------ */

/* A connect event, queued by the provider's thread for the server loop. */
struct request {
    NDK_CONNECTOR *cn;
    uint64_t t_event;
    struct request *next;
};

struct server {
    struct side side;
    const struct side *peer; /* --loopback: the client's adapter, for exact checks */
    NDK_LISTENER *listener;
    struct tc_completion k_create, k_listen, k_close;
    NDK_SOCKADDR bound;

    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct request *head, *tail;
    bool stop;

    bool bounded_wait;   /* --loopback: a request must come within the timeout */
    unsigned long limit; /* connections to serve; 0 = until interrupted */
    unsigned handled, ok;
    bool failed;
    struct stats accept_stats; /* accepted connections: the accept leg */
    struct stats reject_stats; /* --reject: rejected requests (no leg to time) */
    struct stats reply_stats;  /* data phases: the reply Send */
};

static VOID dropped_connector_closed(PVOID Context)
{
    (void)Context;
}

static VOID on_connect_event(PVOID ConnectEventContext, NDK_CONNECTOR *pNdkConnector)
{
    struct server *s = ConnectEventContext;
    struct request *r = malloc(sizeof *r);
    if (!r) {
        /* Cannot queue it: closing an undelivered request rejects it, and a
         * close may be started from a callback (it is DISPATCH_LEVEL). */
        pNdkConnector->Dispatch->NdkCloseConnector(&pNdkConnector->Header, dropped_connector_closed,
                                                   NULL);
        return;
    }
    r->cn = pNdkConnector;
    r->t_event = tc_now_us();
    r->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

static void server_wake(struct server *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Next queued request: 1, or 0 when stopped, or -1 when none came within
 * the timeout (--loopback only: a standalone server waits in bounded
 * slices until it is interrupted). */
static int server_next(struct server *s, struct request *out)
{
    struct timespec deadline;
    unsigned slice = s->bounded_wait ? step_wait_ms() : opt.timeout_ms;
    tc_deadline(&deadline, slice);
    pthread_mutex_lock(&s->lock);
    int got;
    for (;;) {
        if (s->head) {
            struct request *r = s->head;
            s->head = r->next;
            if (!s->head)
                s->tail = NULL;
            *out = *r;
            free(r);
            got = 1;
            break;
        }
        if (s->stop) {
            got = 0;
            break;
        }
        if (pthread_cond_timedwait(&s->cond, &s->lock, &deadline) == ETIMEDOUT) {
            if (s->bounded_wait) {
                got = -1;
                break;
            }
            tc_deadline(&deadline, slice);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return got;
}

static bool server_start(struct server *s)
{
    const char *role = s->side.role;
    NDK_ADAPTER *ad = s->side.ad;
    tc_comp_init(&s->k_create, "NdkCreateListener");
    tc_comp_init(&s->k_listen, "NdkListen");
    tc_comp_init(&s->k_close, "NdkCloseListener");

    NDK_LISTENER *l = NULL;
    NTSTATUS st =
        ad->Dispatch->NdkCreateListener(ad, on_connect_event, s, tc_on_create, &s->k_create, &l);
    st = tc_comp_finish(&s->k_create, st, step_wait_ms());
    if (st != STATUS_SUCCESS) {
        complain(role, "NdkCreateListener failed: %s", tc_status_name(st));
        return false;
    }
    s->listener = tc_comp_object(&s->k_create, l);
    if (!s->listener) {
        library_problem(role, "NdkCreateListener succeeded without giving an object");
        return false;
    }

    char a[ADDR_BUF];
    NDK_SOCKADDR addr = s->side.addr;
    st = s->listener->Dispatch->NdkListen(s->listener, &addr.sa, tc_sockaddr_len(&addr),
                                          tc_on_request, &s->k_listen);
    st = tc_comp_finish(&s->k_listen, st, step_wait_ms());
    if (st != STATUS_SUCCESS) {
        complain(role, "listen on %s failed: %s", tc_format_addr(&addr, true, a, sizeof a),
                 tc_status_name(st));
        return false;
    }

    /* With port 0 the provider chose the port: the listener tells which. */
    ULONG len = sizeof s->bound;
    st = s->listener->Dispatch->NdkGetLocalAddress(s->listener, &s->bound.sa, &len);
    if (st != STATUS_SUCCESS) {
        complain(role, "NdkGetLocalAddress on the listener failed: %s", ndk_status_name(st));
        return false;
    }
    if (tc_sockaddr_port(&s->bound) == 0)
        library_problem(role, "the listener's NdkGetLocalAddress gave port 0");
    say(LVL_NORMAL, role, "listening on %s (adapter %s)%s",
        tc_format_addr(&s->bound, true, a, sizeof a), s->side.name,
        opt.reject ? ", rejecting every request" : "");
    return true;
}

/* Checks what the passive side sees before accepting (behaviour.md, IRD/ORD:
 * IRD = min(max, requester's ORD), ORD = min(max, requester's IRD)). */
static bool server_check_request(struct server *s, ULONG ird, ULONG ord, const uint8_t *text,
                                 ULONG text_len, const uint8_t *adv_bytes)
{
    const char *role = s->side.role;
    const NDK_ADAPTER_INFO *in = &s->side.info;
    bool ok = true;
    if (s->peer) {
        const NDK_ADAPTER_INFO *pi = &s->peer->info;
        ULONG want_ird = min_ul(in->MaxInboundReadLimit, min_ul(opt.ord, pi->MaxOutboundReadLimit));
        ULONG want_ord = min_ul(in->MaxOutboundReadLimit, min_ul(opt.ird, pi->MaxInboundReadLimit));
        if (ird != want_ird || ord != want_ord) {
            complain(role,
                     "request shows IRD %" PRIu32 " ORD %" PRIu32 ", expected IRD %" PRIu32
                     " ORD %" PRIu32 " (client asked IRD %" PRIu32 " ORD %" PRIu32 ")",
                     ird, ord, want_ird, want_ord, opt.ird, opt.ord);
            ok = false;
        }
        if (!pdata_matches(role, "client", text, text_len, opt.data, opt.data_len))
            ok = false;
        if (adv_bytes && !adv_matches(role, "client", s->peer, adv_bytes))
            ok = false;
    } else if (ird > in->MaxInboundReadLimit || ord > in->MaxOutboundReadLimit) {
        complain(role,
                 "request shows IRD %" PRIu32 " ORD %" PRIu32
                 ", above the adapter's maxima %" PRIu32 "/%" PRIu32,
                 ird, ord, in->MaxInboundReadLimit, in->MaxOutboundReadLimit);
        ok = false;
    }
    return ok;
}

/*
 * The end of either side's set-up before the connection: the receive for
 * the peer's message goes into the second half of the message buffer, and
 * the private data to send is the ULP's bytes followed by the advertisement
 * of the buffer the peer may access (bufs[adv_buf]).
 */
static bool post_msg_recv_and_advertise(struct side *side, struct conn *c, int adv_buf, const char *ulp,
                                        size_t ulp_len)
{
    NDK_SGE sge = buf_sge(&c->bufs[B_MSG], MSG_SIZE, MSG_SIZE);
    c->ops[OP_RECV].t_post = tc_now_us();
    NTSTATUS st = c->qp->Dispatch->NdkReceive(c->qp, &c->ops[OP_RECV], &sge, 1);
    if (!op_posted(c, OP_RECV, "NdkReceive", st))
        return false;
    struct adv a = buf_adv(&c->bufs[adv_buf]);
    c->pdata_out = pdata_build(ulp, ulp_len, &a, &c->pdata_out_len);
    if (!c->pdata_out) {
        complain(side->role, "out of memory");
        return false;
    }
    side_record_adv(side, &a);
    return true;
}

/*
 * Before the accept: the target buffer the client writes and reads (its
 * advertisement goes into the accept's private data), the message buffer,
 * and the receive for the client's Send, posted now because the Send may
 * follow the accept at once.
 */
static bool server_data_setup(struct server *s, struct conn *c)
{
    if (!buf_setup(c, B_TARGET, opt.size,
                   NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_ALLOW_REMOTE_READ |
                       NDK_MR_FLAG_ALLOW_REMOTE_WRITE))
        return false;
    /* [0, MSG_SIZE): the reply; [MSG_SIZE, 2 MSG_SIZE): the receive. */
    if (!buf_setup(c, B_MSG, 2 * MSG_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE))
        return false;
    return post_msg_recv_and_advertise(&s->side, c, B_TARGET, opt.reply, opt.reply_len);
}

/*
 * The server's part of the data phase, after the accept: the client's
 * Send arrives in the posted receive; it names the seed of the pattern the
 * client wrote before it, so the buffer must hold that pattern now (an
 * RDMA Write is placed before a later Send on the same connection
 * completes). The reply Send carries the verdict. True if all went well.
 */
static bool server_data(struct server *s, struct conn *c, const struct adv *peer)
{
    const char *role = s->side.role;
    unsigned num = c->num;
    struct buf *T = &c->bufs[B_TARGET], *M = &c->bufs[B_MSG];
    uint32_t n = opt.size < peer->size ? opt.size : peer->size;

    ops_wait(c, 1u << OP_RECV);
    if (!op_ok(c, OP_RECV))
        return false;
    ULONG got = c->ops[OP_RECV].res.BytesTransferred;
    char why[160];
    uint32_t seed = 0, ignored = 0, verdict = opt.verify ? VERDICT_OK : VERDICT_UNCHECKED;
    bool ok = true;
    const char *bad = msg_check(M->mem + MSG_SIZE, got, MSG_CLIENT, n, &seed, &ignored, &ignored,
                                why, sizeof why);
    if (bad) {
        complain(role, "[%u] Receive: the client's message is not as sent: %s", num, bad);
        verdict = VERDICT_BAD_MSG;
        ok = false;
    } else if (opt.verify) {
        size_t first = 0, nbad;
        uint8_t g = 0, w = 0;
        if ((nbad = pattern_check(T->mem, n, seed, STREAM_BUFFER, &first, &g, &w))) {
            complain(role,
                     "[%u] after the client's Send, %zu of the %" PRIu32
                     " bytes it wrote differ in the buffer, the first at offset %zu: 0x%02x, "
                     "expected 0x%02x",
                     num, nbad, n, first, g, w);
            verdict = VERDICT_BAD_BUFFER;
            ok = false;
        }
    }

    /* The reply goes out even when a check failed: it tells the client. */
    uint64_t now = tc_now_us(), t_recv = c->ops[OP_RECV].t_done;
    uint64_t held = now > t_recv ? now - t_recv : 0;
    msg_build(M->mem, MSG_REPLY, seed, n, verdict, held > UINT32_MAX ? UINT32_MAX : (uint32_t)held);
    NDK_SGE sge = buf_sge(M, 0, MSG_SIZE);
    c->ops[OP_SEND].t_post = tc_now_us();
    NTSTATUS st = c->qp->Dispatch->NdkSend(c->qp, &c->ops[OP_SEND], &sge, 1, 0);
    if (!op_posted(c, OP_SEND, "NdkSend", st))
        return false;
    ops_wait(c, 1u << OP_SEND);
    if (!op_ok(c, OP_SEND))
        return false;
    uint64_t t_send = op_us(&c->ops[OP_SEND]);
    char what[128];
    if (!ok)
        snprintf(what, sizeof what, "verification FAILED");
    else if (opt.verify)
        snprintf(what, sizeof what, "message and the %" PRIu32 " written bytes verified", n);
    else
        snprintf(what, sizeof what, "%" PRIu32 " bytes written, not verified (no --verify)", n);
    say(LVL_NORMAL, role,
        "[%u] Receive %" PRIu32 " bytes: %s; reply Send %u bytes %" PRIu64 " us (%.*f MB/s)", num,
        got, what, MSG_SIZE, t_send, RATE(MSG_SIZE, t_send));
    if (ok)
        stats_add(&s->reply_stats, t_send);
    return ok;
}

/* One connection, passive side. Returns true if it went as asked. */
static bool server_handle(struct server *s, NDK_CONNECTOR *cn, uint64_t t_event, unsigned num)
{
    const char *role = s->side.role;
    struct conn *c = conn_new(&s->side, num);
    if (!c) {
        cn->Dispatch->NdkCloseConnector(&cn->Header, dropped_connector_closed, NULL);
        return false;
    }
    c->cn = cn; /* ours from the connect event on (reference 5.2.6) */
    bool ok = false;
    char a[ADDR_BUF], p1[PDATA_BUF], p2[PDATA_BUF];
    uint8_t *pd = NULL;

    NDK_SOCKADDR peer;
    memset(&peer, 0, sizeof peer);
    ULONG alen = sizeof peer;
    NTSTATUS st = cn->Dispatch->NdkGetPeerAddress(cn, &peer.sa, &alen);
    if (st != STATUS_SUCCESS)
        complain(role, "[%u] NdkGetPeerAddress failed: %s", num, ndk_status_name(st));
    const char *from = st == STATUS_SUCCESS ? tc_format_addr(&peer, true, a, sizeof a) : "?";

    ULONG ird = 0, ord = 0, pd_len = 0;
    st = get_connection_data(c, cn, &ird, &ord, &pd, &pd_len);
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] NdkGetConnectionData on the request from %s failed: %s", num, from,
                 ndk_status_name(st));
        goto out;
    }
    ULONG text_len = 0;
    const uint8_t *adv_bytes = NULL;
    bool well_formed = pdata_split(pd, pd_len, &text_len, &adv_bytes);
    say(LVL_NORMAL, role,
        "[%u] request from %s: requested IRD %" PRIu32 " ORD %" PRIu32 ", client private data %s",
        num, from, ird, ord, fmt_pdata_adv(pd, text_len, adv_bytes, p1, sizeof p1));
    bool request_ok = server_check_request(s, ird, ord, pd, text_len, adv_bytes);
    if (!well_formed) {
        complain(role,
                 "[%u] the client's private data has a NUL not followed by a %u-byte buffer "
                 "advertisement",
                 num, ADV_LEN);
        request_ok = false;
    }

    /* Both sides must agree on the data phase: a mismatch is refused
     * with a reject, so the client learns it at once. */
    const char *refuse = NULL;
    if (!opt.reject && !well_formed)
        refuse = "malformed private data";
    else if (!opt.reject && opt.data_phase && !adv_bytes)
        refuse = "the client advertises no buffer for the data phase (does it run with "
                 "--no-data?)";
    else if (!opt.reject && !opt.data_phase && adv_bytes)
        refuse = "the client advertises a buffer for a data phase, but this server runs with "
                 "--no-data";
    if (refuse) {
        complain(role, "[%u] rejecting %s: %s", num, from, refuse);
        request_ok = false;
    }

    if (opt.reject || refuse) {
        /* A refusal tells the client why, in as much as fits. */
        char why[PDATA_SHOWN];
        const char *rtext = opt.reply;
        size_t rtext_len = opt.reply_len;
        if (refuse) {
            snprintf(why, sizeof why, "%s: refused: %s", opt.reply, refuse);
            rtext = why;
            rtext_len = min_ul((ULONG)strlen(why), s->side.info.MaxCalleeData);
        }
        st = cn->Dispatch->NdkReject(cn, rtext_len ? (void *)rtext : NULL, (ULONG)rtext_len);
        if (st != STATUS_SUCCESS) {
            complain(role, "[%u] NdkReject failed: %s", num, ndk_status_name(st));
            goto out;
        }
        say(LVL_NORMAL, role, "[%u] rejected, private data %s", num,
            fmt_pdata((const uint8_t *)rtext, rtext_len, p2, sizeof p2));
        ok = request_ok;
        if (ok)
            stats_add(&s->reject_stats, 0);
        goto out;
    }

    if (!conn_create(c, false))
        goto out;
    struct adv peer_adv = {0};
    void *reply = opt.reply_len ? opt.reply : NULL;
    ULONG reply_len = (ULONG)opt.reply_len;
    if (opt.data_phase) {
        adv_decode(adv_bytes, &peer_adv);
        if (!server_data_setup(s, c))
            goto out;
        reply = c->pdata_out;
        reply_len = c->pdata_out_len;
    }

    uint64_t t0 = tc_now_us();
    st = cn->Dispatch->NdkAccept(cn, c->qp, opt.ird, opt.ord, reply, reply_len, on_disconnect_event,
                                 c, tc_on_request, &c->k[K_ACCEPT]);
    uint64_t t_ret = tc_now_us();
    st = tc_comp_finish(&c->k[K_ACCEPT], st, step_wait_ms());
    note_step(c, K_ACCEPT, st);
    if (st != STATUS_SUCCESS) {
        if (st == STATUS_INVALID_BUFFER_SIZE)
            complain(role,
                     "[%u] accept of %s failed: %s (private data %" PRIu32
                     " bytes%s, MaxCalleeData %" PRIu32 ")",
                     num, from, tc_status_name(st), reply_len,
                     opt.data_phase ? " with the NUL and the 16-byte buffer advertisement" : "",
                     s->side.info.MaxCalleeData);
        else
            complain(role, "[%u] accept of %s failed: %s", num, from, tc_status_name(st));
        goto out;
    }
    uint64_t t_accept = tc_comp_elapsed(&c->k[K_ACCEPT], t0, t_ret);
    /* GetConnectionData is not allowed after Accept (5.10.6): the effective
     * values follow from the request and our own limits (7.4). */
    ULONG eff_ird = min_ul(min_ul(opt.ird, s->side.info.MaxInboundReadLimit), ird);
    ULONG eff_ord = min_ul(min_ul(opt.ord, s->side.info.MaxOutboundReadLimit), ord);
    say(LVL_NORMAL, role,
        "[%u] accepted with IRD %" PRIu32 " ORD %" PRIu32 " (effective IRD %" PRIu32 " ORD %" PRIu32
        "), private data %s",
        num, opt.ird, opt.ord, eff_ird, eff_ord,
        fmt_pdata_adv((const uint8_t *)opt.reply, opt.reply_len,
                      opt.data_phase ? c->pdata_out + opt.reply_len + 1 : NULL, p2, sizeof p2));

    /* A failed data phase still ends with the disconnect below. */
    bool data_ok = !opt.data_phase || server_data(s, c, &peer_adv);

    /* The client disconnects first; answer its disconnect (reference 7.6).
     * After a failed data phase the client may still be waiting for the
     * reply: disconnecting first ends its wait. */
    bool peer_left = false;
    if (!data_ok) {
        say(LVL_VERBOSE, role, "[%u] the data phase failed: disconnecting first", num);
    } else if (!(peer_left = tc_comp_wait(&c->k[K_DISCONNECT_EVENT], step_wait_ms()))) {
        complain(role, "[%u] no disconnect event from %s within %u ms; disconnecting", num, from,
                 step_wait_ms());
    } else {
        say(LVL_VERBOSE, role, "[%u] disconnect event", num);
    }
    t0 = tc_now_us();
    st = cn->Dispatch->NdkDisconnect(cn, tc_on_request, &c->k[K_DISCONNECT]);
    t_ret = tc_now_us();
    st = tc_comp_finish(&c->k[K_DISCONNECT], st, step_wait_ms());
    note_step(c, K_DISCONNECT, st);
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] disconnect from %s failed: %s", num, from, tc_status_name(st));
        goto out;
    }
    uint64_t t_disc = tc_comp_elapsed(&c->k[K_DISCONNECT], t0, t_ret);
    uint64_t t_end = c->k[K_DISCONNECT].pending ? c->k[K_DISCONNECT].t_callback : t_ret;
    say(LVL_NORMAL, role,
        "[%u] accept (reply -> RTR) %" PRIu64 " us, disconnect %" PRIu64 " us, total %" PRIu64
        " us",
        num, t_accept, t_disc, t_end > t_event ? t_end - t_event : 0);
    ok = request_ok && peer_left && data_ok;
    /* The connection phase went as asked even if the data phase did not
     * (then we did not wait for the client's disconnect). */
    if (request_ok && (peer_left || !data_ok))
        stats_add(&s->accept_stats, t_accept);

out:
    free(pd);
    if (!conn_teardown(c))
        ok = false;
    return ok;
}

static void server_serve(struct server *s)
{
    while (!s->limit || s->handled < s->limit) {
        struct request r;
        int got = server_next(s, &r);
        if (got == 0)
            break;
        if (got < 0) {
            complain(s->side.role, "no connection request within %u ms", step_wait_ms());
            s->failed = true;
            break;
        }
        s->handled++;
        if (server_handle(s, r.cn, r.t_event, s->handled))
            s->ok++;
        else
            s->failed = true;
    }
}

static void server_summary(const struct server *s, unsigned long attempted)
{
    if (opt.reject)
        stats_print(s->side.role, "request", " rejected", NULL, &s->reject_stats, attempted);
    else
        stats_print(s->side.role, "connection", "", "accept", &s->accept_stats, attempted);
    if (opt.data_phase && !opt.reject)
        stats_print(s->side.role, "data phase", "", "reply Send", &s->reply_stats, attempted);
}

static void *server_thread(void *arg)
{
    server_serve(arg);
    return NULL;
}

/* Closes the listener, then any request that was queued but not served
 * (closing it rejects it). No connect event can come once the listener's
 * close has completed (L14). */
static void server_finish(struct server *s)
{
    if (s->listener) {
        NTSTATUS st = tc_close(s->listener->Dispatch->NdkCloseListener, &s->listener->Header,
                               &s->k_close, step_wait_ms(), prog);
        if (st != STATUS_SUCCESS) {
            atomic_fetch_add(&library_problems, 1);
            s->failed = true;
        }
        s->listener = NULL;
    }
    for (struct request *r = s->head, *next; r; r = next) {
        next = r->next;
        struct conn *c = conn_new(&s->side, 0);
        if (c) {
            c->cn = r->cn;
            conn_teardown(c);
        }
        free(r);
    }
    s->head = s->tail = NULL;
}

static void server_init(struct server *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    tc_cond_init_mono(&s->cond);
}

static void server_destroy(struct server *s)
{
    if (s->k_create.what) {
        tc_comp_destroy(&s->k_create);
        tc_comp_destroy(&s->k_listen);
        tc_comp_destroy(&s->k_close);
    }
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
}

/* ------------------------------------------------------------------------ */
/* Client                                                                   */
/* ------------------------------------------------------------------------ */

struct client {
    struct side side;
    const struct side *peer; /* --loopback: the server's adapter, for exact checks */
    NDK_SOCKADDR dst;
    struct stats connect_stats;
    unsigned ok;
    /* Data phases that went well: microseconds of each step, and bytes
     * moved by each RDMA Write (the same for the Read). */
    struct stats write_stats, read_stats, sr_stats;
    uint64_t data_bytes;
};

/* The effective limits the client reads after the server accepted (7.4). */
static bool client_check(struct client *cl, ULONG ird, ULONG ord, const uint8_t *text,
                         ULONG text_len, const uint8_t *adv_bytes)
{
    const char *role = cl->side.role;
    const NDK_ADAPTER_INFO *in = &cl->side.info;
    ULONG my_ird = min_ul(opt.ird, in->MaxInboundReadLimit);
    ULONG my_ord = min_ul(opt.ord, in->MaxOutboundReadLimit);
    bool ok = true;
    if (cl->peer) {
        const NDK_ADAPTER_INFO *pi = &cl->peer->info;
        ULONG want_ird = min_ul(my_ird, min_ul(opt.ord, pi->MaxOutboundReadLimit));
        ULONG want_ord = min_ul(my_ord, min_ul(opt.ird, pi->MaxInboundReadLimit));
        if (ird != want_ird || ord != want_ord) {
            complain(role,
                     "effective IRD %" PRIu32 " ORD %" PRIu32 ", expected IRD %" PRIu32
                     " ORD %" PRIu32 " (both sides asked IRD %" PRIu32 " ORD %" PRIu32 ")",
                     ird, ord, want_ird, want_ord, opt.ird, opt.ord);
            ok = false;
        }
        if (!pdata_matches(role, "server", text, text_len, opt.reply, opt.reply_len))
            ok = false;
        if (adv_bytes && !adv_matches(role, "server", cl->peer, adv_bytes))
            ok = false;
    } else if (ird > my_ird || ord > my_ord) {
        complain(role,
                 "effective IRD %" PRIu32 " ORD %" PRIu32 " exceed what was asked (IRD %" PRIu32
                 " ORD %" PRIu32 ")",
                 ird, ord, my_ird, my_ord);
        ok = false;
    }
    return ok;
}

/* A refused connect: the reject's private data stays readable
 * (behaviour.md). --loopback --reject expects exactly this. */
static bool client_refused(struct client *cl, struct conn *c, const char *dst)
{
    const char *role = cl->side.role;
    char p[PDATA_BUF];
    ULONG ird = 0, ord = 0, pd_len = 0;
    uint8_t *pd = NULL;
    NTSTATUS st = get_connection_data(c, c->cn, &ird, &ord, &pd, &pd_len);
    bool ok = false;
    if (opt.mode == MODE_LOOPBACK && opt.reject) {
        if (st != STATUS_SUCCESS) {
            complain(role, "[%u] refused as asked, but NdkGetConnectionData failed: %s", c->num,
                     ndk_status_name(st));
        } else {
            say(LVL_NORMAL, role, "[%u] refused by %s as asked, server private data %s", c->num,
                dst, fmt_pdata(pd, pd_len, p, sizeof p));
            ok = pdata_matches(role, "server", pd, pd_len, opt.reply, opt.reply_len);
        }
    } else if (st == STATUS_SUCCESS && pd_len) {
        complain(
            role,
            "connect to %s failed: STATUS_CONNECTION_REFUSED (rejected, server private data %s)",
            dst, fmt_pdata(pd, pd_len, p, sizeof p));
    } else {
        complain(role, "connect to %s failed: STATUS_CONNECTION_REFUSED", dst);
    }
    free(pd);
    return ok;
}

/*
 * Before the connect: the source buffer (the pattern, advertised in the
 * connect's private data), the read sink, the message buffer, and the
 * receive for the server's reply.
 */
static bool client_data_setup(struct client *cl, struct conn *c)
{
    if (!buf_setup(c, B_SOURCE, opt.size, NDK_MR_FLAG_ALLOW_REMOTE_READ))
        return false;
    /* The read sink flag is required unless the adapter says otherwise, and
     * always allowed (5.6.1). */
    if (!buf_setup(c, B_SINK, opt.size, NDK_MR_FLAG_ALLOW_LOCAL_WRITE | NDK_MR_FLAG_RDMA_READ_SINK))
        return false;
    /* [0, MSG_SIZE): the client's message; [MSG_SIZE, 2 MSG_SIZE): the reply. */
    if (!buf_setup(c, B_MSG, 2 * MSG_SIZE, NDK_MR_FLAG_ALLOW_LOCAL_WRITE))
        return false;
    c->seed = (uint32_t)(tc_now_us() * 2654435761u) ^ (uint32_t)getpid() ^ (c->num << 16);
    pattern_fill(c->bufs[B_SOURCE].mem, opt.size, c->seed, STREAM_BUFFER);

    return post_msg_recv_and_advertise(&cl->side, c, B_SOURCE, opt.data, opt.data_len);
}

/*
 * The client's data phase, once connected: (a) RDMA Write of the pattern
 * into the server's buffer, (b) RDMA Read of it back into the sink,
 * (c) Send of a message into the server's posted receive, whose reply
 * lands in ours. Each step waits for its completion; the Send/Receive time
 * is the round trip. True if every step worked and every byte checked out.
 */
static bool client_data(struct client *cl, struct conn *c, const struct adv *peer)
{
    const char *role = cl->side.role;
    unsigned num = c->num;
    NDK_QP *qp = c->qp;
    struct buf *S = &c->bufs[B_SOURCE], *K = &c->bufs[B_SINK], *M = &c->bufs[B_MSG];
    uint32_t n = opt.size < peer->size ? opt.size : peer->size;
    if (n == 0) {
        complain(role, "[%u] the server advertises an empty buffer", num);
        return false;
    }
    if (n > cl->side.info.MaxTransferLength) {
        complain(role, "[%u] %" PRIu32 " bytes exceed the adapter's MaxTransferLength %" PRIu32,
                 num, n, cl->side.info.MaxTransferLength);
        return false;
    }

    /* (a) */
    NDK_SGE sge = buf_sge(S, 0, n);
    c->ops[OP_WRITE].t_post = tc_now_us();
    NTSTATUS st =
        qp->Dispatch->NdkWrite(qp, &c->ops[OP_WRITE], &sge, 1, peer->addr, peer->token, 0);
    if (!op_posted(c, OP_WRITE, "NdkWrite", st))
        return false;
    ops_wait(c, 1u << OP_WRITE);
    if (!op_ok(c, OP_WRITE))
        return false;

    /* (b) The sink holds the complement first: every byte must change. */
    for (uint32_t i = 0; i < n; i++)
        K->mem[i] = (uint8_t)~S->mem[i];
    sge = buf_sge(K, 0, n);
    c->ops[OP_READ].t_post = tc_now_us();
    st = qp->Dispatch->NdkRead(qp, &c->ops[OP_READ], &sge, 1, peer->addr, peer->token, 0);
    if (!op_posted(c, OP_READ, "NdkRead", st))
        return false;
    ops_wait(c, 1u << OP_READ);
    if (!op_ok(c, OP_READ))
        return false;
    if (opt.verify) {
        size_t first = 0, nbad;
        uint8_t g = 0, w = 0;
        if ((nbad = pattern_check(K->mem, n, c->seed, STREAM_BUFFER, &first, &g, &w))) {
            complain(role,
                     "[%u] RDMA Read: %zu of the %" PRIu32
                     " bytes read back differ from those written, the first at offset %zu: "
                     "0x%02x, expected 0x%02x",
                     num, nbad, n, first, g, w);
            return false;
        }
    }

    /* (c) */
    msg_build(M->mem, MSG_CLIENT, c->seed, n, 0, 0);
    sge = buf_sge(M, 0, MSG_SIZE);
    c->ops[OP_SEND].t_post = tc_now_us();
    st = qp->Dispatch->NdkSend(qp, &c->ops[OP_SEND], &sge, 1, 0);
    if (!op_posted(c, OP_SEND, "NdkSend", st))
        return false;
    ops_wait(c, 1u << OP_SEND | 1u << OP_RECV);
    if (!op_ok(c, OP_SEND) || !op_ok(c, OP_RECV))
        return false;
    char why[160];
    uint32_t seed = 0, verdict = 0, held = 0;
    const char *bad = msg_check(M->mem + MSG_SIZE, c->ops[OP_RECV].res.BytesTransferred, MSG_REPLY,
                                n, &seed, &verdict, &held, why, sizeof why);
    if (!bad && seed != c->seed) {
        snprintf(why, sizeof why, "seed 0x%08" PRIx32 ", expected 0x%08" PRIx32, seed, c->seed);
        bad = why;
    }
    if (bad) {
        complain(role, "[%u] Receive: the server's reply is not as sent: %s", num, bad);
        return false;
    }
    if (verdict != VERDICT_OK && verdict != VERDICT_UNCHECKED) {
        complain(role, "[%u] the server reports: %s", num, verdict_name(verdict));
        return false;
    }

    uint64_t t_write = op_us(&c->ops[OP_WRITE]), t_read = op_us(&c->ops[OP_READ]);
    const struct op *sent = &c->ops[OP_SEND], *back = &c->ops[OP_RECV];
    /* The round trip, less the time the server spent checking. */
    uint64_t t_rtt = back->t_done > sent->t_post ? back->t_done - sent->t_post : 0;
    uint64_t t_sr = t_rtt > held ? t_rtt - held : 0;
    say(LVL_VERBOSE, role,
        "[%u] Send/Receive: round trip %" PRIu64
        " us, of which the server held the message %" PRIu32 " us",
        num, t_rtt, held);
    const char *checked;
    if (opt.verify)
        checked = verdict == VERDICT_OK ? ", every byte verified"
                                        : ", verified here (the server runs without --verify)";
    else
        checked = verdict == VERDICT_OK ? ", verified by the server (not here: no --verify)"
                                        : ", not verified (no --verify)";
    say(LVL_NORMAL, role,
        "[%u] RDMA Write %" PRIu32 " bytes %" PRIu64 " us (%.*f MB/s), RDMA Read %" PRIu32
        " bytes %" PRIu64 " us (%.*f MB/s), Send/Receive %u bytes %" PRIu64
        " us round trip (%.*f MB/s)%s",
        num, n, t_write, RATE(n, t_write), n, t_read, RATE(n, t_read), MSG_SIZE, t_sr,
        RATE(2 * MSG_SIZE, t_sr), checked);
    stats_add(&cl->write_stats, t_write);
    stats_add(&cl->read_stats, t_read);
    stats_add(&cl->sr_stats, t_sr);
    cl->data_bytes += n;
    return true;
}

/* "client: 3 data phases, 65536 bytes each: RDMA Write avg ... (MB/s), ..." */
static void client_data_summary(const struct client *cl, unsigned long attempted)
{
    if (!opt.data_phase || opt.reject)
        return;
    const struct stats *w = &cl->write_stats, *r = &cl->read_stats, *sr = &cl->sr_stats;
    char of[32] = "";
    if (w->n < attempted)
        snprintf(of, sizeof of, "%u of ", w->n);
    unsigned long total = w->n < attempted ? attempted : w->n;
    if (w->n == 0) {
        say(LVL_SUMMARY, "client", "%s%lu data phase%s ok", of, total, total == 1 ? "" : "s");
        return;
    }
    say(LVL_SUMMARY, "client",
        "%s%lu data phase%s%s, %" PRIu64 " bytes each: RDMA Write avg %" PRIu64
        " us (%.*f MB/s), RDMA Read avg %" PRIu64 " us (%.*f MB/s), Send/Receive avg %" PRIu64
        " us round trip%s",
        of, total, total == 1 ? "" : "s", of[0] ? " ok" : "", cl->data_bytes / w->n, w->sum / w->n,
        RATE(cl->data_bytes, w->sum), r->sum / r->n, RATE(cl->data_bytes, r->sum), sr->sum / sr->n,
        opt.verify ? "; every byte verified" : "");
}

/* One connection, active side. Returns true if it went as asked. */
static bool client_once(struct client *cl, unsigned num)
{
    const char *role = cl->side.role;
    struct conn *c = conn_new(&cl->side, num);
    if (!c)
        return false;
    bool ok = false;
    char dst[ADDR_BUF], src[ADDR_BUF], p[PDATA_BUF];
    uint8_t *pd = NULL;
    tc_format_addr(&cl->dst, true, dst, sizeof dst);

    if (!conn_create(c, true))
        goto out;
    void *data = opt.data_len ? opt.data : NULL;
    ULONG data_len = (ULONG)opt.data_len;
    if (opt.data_phase) {
        if (!client_data_setup(cl, c))
            goto out;
        data = c->pdata_out;
        data_len = c->pdata_out_len;
    }

    NDK_CONNECTOR *cn = c->cn;
    NDK_SOCKADDR from = cl->side.addr, to = cl->dst;
    uint64_t t0 = tc_now_us();
    NTSTATUS st = cn->Dispatch->NdkConnect(cn, c->qp, &from.sa, tc_sockaddr_len(&from), &to.sa,
                                           tc_sockaddr_len(&to), opt.ird, opt.ord, data, data_len,
                                           tc_on_request, &c->k[K_CONNECT]);
    uint64_t t_ret = tc_now_us();
    st = tc_comp_finish(&c->k[K_CONNECT], st, connect_wait_ms());
    note_step(c, K_CONNECT, st);
    uint64_t t_connect = tc_comp_elapsed(&c->k[K_CONNECT], t0, t_ret);
    if (st == STATUS_CONNECTION_REFUSED) {
        if ((ok = client_refused(cl, c, dst)))
            stats_add(&cl->connect_stats, t_connect);
        goto out;
    }
    if (st != STATUS_SUCCESS) {
        if (st == STATUS_INVALID_BUFFER_SIZE)
            complain(role,
                     "connect to %s failed: %s (private data %" PRIu32
                     " bytes%s, MaxCallerData %" PRIu32 ")",
                     dst, tc_status_name(st), data_len,
                     opt.data_phase ? " with the NUL and the 16-byte buffer advertisement" : "",
                     cl->side.info.MaxCallerData);
        else
            complain(role, "connect to %s failed: %s", dst, tc_status_name(st));
        goto out;
    }
    if (opt.mode == MODE_LOOPBACK && opt.reject) {
        complain(role, "[%u] connect to %s succeeded although the server rejects", num, dst);
        goto out;
    }

    NDK_SOCKADDR local;
    memset(&local, 0, sizeof local);
    ULONG alen = sizeof local;
    st = cn->Dispatch->NdkGetLocalAddress(cn, &local.sa, &alen);
    if (st == STATUS_SUCCESS)
        tc_format_addr(&local, true, src, sizeof src);
    else
        snprintf(src, sizeof src, "? (NdkGetLocalAddress: %s)", ndk_status_name(st));

    ULONG ird = 0, ord = 0, pd_len = 0;
    st = get_connection_data(c, cn, &ird, &ord, &pd, &pd_len);
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] NdkGetConnectionData after the connect failed: %s", num,
                 ndk_status_name(st));
        goto out;
    }
    ULONG text_len = 0;
    const uint8_t *adv_bytes = NULL;
    bool well_formed = pdata_split(pd, pd_len, &text_len, &adv_bytes);
    say(LVL_NORMAL, role,
        "[%u] %s -> %s: effective IRD %" PRIu32 " ORD %" PRIu32 ", server private data %s", num,
        src, dst, ird, ord, fmt_pdata_adv(pd, text_len, adv_bytes, p, sizeof p));
    bool reply_ok = client_check(cl, ird, ord, pd, text_len, adv_bytes);
    if (!well_formed) {
        complain(role,
                 "[%u] the server's private data has a NUL not followed by a %u-byte buffer "
                 "advertisement",
                 num, ADV_LEN);
        reply_ok = false;
    } else if (opt.data_phase && !adv_bytes) {
        complain(role,
                 "[%u] the server advertises no buffer for the data phase (does it run with "
                 "--no-data?)",
                 num);
        reply_ok = false;
    } else if (!opt.data_phase && adv_bytes) {
        complain(role,
                 "[%u] the server advertises a buffer for a data phase, but this client runs "
                 "with --no-data",
                 num);
        reply_ok = false;
    } else if (opt.data_phase && ord == 0) {
        complain(role, "[%u] the data phase's RDMA Read needs an effective ORD of 1 or more", num);
        reply_ok = false;
    }
    struct adv peer_adv = {0};
    if (adv_bytes)
        adv_decode(adv_bytes, &peer_adv);

    uint64_t t1 = tc_now_us();
    st = cn->Dispatch->NdkCompleteConnect(cn, on_disconnect_event, c, tc_on_request,
                                          &c->k[K_COMPLETE_CONNECT]);
    t_ret = tc_now_us();
    st = tc_comp_finish(&c->k[K_COMPLETE_CONNECT], st, step_wait_ms());
    note_step(c, K_COMPLETE_CONNECT, st);
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] NdkCompleteConnect to %s failed: %s", num, dst, tc_status_name(st));
        goto out;
    }
    uint64_t t_complete = tc_comp_elapsed(&c->k[K_COMPLETE_CONNECT], t1, t_ret);

    /* A failed data phase still ends with the disconnect below. */
    bool data_ok = !opt.data_phase || (reply_ok && client_data(cl, c, &peer_adv));

    uint64_t t2 = tc_now_us();
    st = cn->Dispatch->NdkDisconnect(cn, tc_on_request, &c->k[K_DISCONNECT]);
    t_ret = tc_now_us();
    st = tc_comp_finish(&c->k[K_DISCONNECT], st, step_wait_ms());
    note_step(c, K_DISCONNECT, st);
    if (st != STATUS_SUCCESS) {
        complain(role, "[%u] disconnect from %s failed: %s", num, dst, tc_status_name(st));
        goto out;
    }
    uint64_t t_disc = tc_comp_elapsed(&c->k[K_DISCONNECT], t2, t_ret);
    uint64_t t_end = c->k[K_DISCONNECT].pending ? c->k[K_DISCONNECT].t_callback : t_ret;
    /* The peer may also have disconnected meanwhile; the event is allowed
     * to race with our own NdkDisconnect (reference 7.6, point 5). */
    if (tc_comp_fired(&c->k[K_DISCONNECT_EVENT]))
        say(LVL_VERBOSE, role, "[%u] disconnect event (raced with our NdkDisconnect)", num);
    if (reply_ok)
        stats_add(&cl->connect_stats, t_connect);
    say(LVL_NORMAL, role,
        "[%u] connect (request -> reply) %" PRIu64 " us, complete (CompleteConnect) %" PRIu64
        " us, disconnect %" PRIu64 " us, total %" PRIu64 " us",
        num, t_connect, t_complete, t_disc, t_end > t0 ? t_end - t0 : 0);
    ok = reply_ok && data_ok;

out:
    free(pd);
    if (!conn_teardown(c))
        ok = false;
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Adapters: choosing, closing                                              */
/* ------------------------------------------------------------------------ */

struct closer {
    NDK_ADAPTER *ad;
    struct tc_completion done;
};

static void *closer_main(void *arg)
{
    struct closer *cl = arg;
    ndk_close_adapter(cl->ad);
    tc_comp_signal(&cl->done, STATUS_SUCCESS, NULL, 0);
    return NULL;
}

/*
 * ndk_close_adapter blocks until every callback of the adapter has returned.
 * It runs on a helper thread so that ndkping's wait stays bounded: if it
 * does not return, that is reported and ndkping exits at once.
 */
static void side_close(struct side *s)
{
    if (s->ad) {
        struct closer *cl = calloc(1, sizeof *cl);
        pthread_t t;
        if (!cl) {
            ndk_close_adapter(s->ad);
        } else {
            cl->ad = s->ad;
            tc_comp_init(&cl->done, "ndk_close_adapter");
            if (pthread_create(&t, NULL, closer_main, cl) != 0) {
                ndk_close_adapter(s->ad);
            } else if (!tc_comp_wait(&cl->done, step_wait_ms())) {
                library_problem(s->role, "ndk_close_adapter did not return within %u ms",
                                step_wait_ms());
                fflush(NULL);
                _exit(1);
            } else {
                pthread_join(t, NULL);
            }
            tc_comp_destroy(&cl->done);
            free(cl);
        }
        s->ad = NULL;
    }
    /* The adapter is closed: no callback can run any more. */
    for (struct conn *c = s->graveyard, *next; c; c = next) {
        next = c->next;
        conn_free(c);
    }
    s->graveyard = NULL;
}

/* The adapter list entry for spec, or NULL. *list must be freed. */
static const NDK_ADAPTER_DESCRIPTION *describe(const char *spec, NDK_ADAPTER_DESCRIPTION **list)
{
    ULONG n = 0;
    if (tc_list_adapters(list, &n) != STATUS_SUCCESS)
        return NULL;
    int i = tc_find_adapter(*list, n, spec);
    return i >= 0 ? &(*list)[i] : NULL;
}

/*
 * Opens the adapter; *desc is its entry in *list (NULL if not listed).
 * spec is what the user gave with -d, opened as given so that the
 * provider's own answer shows; otherwise the adapter is derived from an
 * address and opened by the interface name found for it, because
 * ndk_open_adapter only knows the listed addresses while every 127.0.0.0/8
 * address belongs to the loopback adapter (ndk.h).
 */
static bool side_setup(struct side *s, const char *role, const char *spec, bool user_given,
                       ULONG flags, NDK_ADAPTER_DESCRIPTION **list,
                       const NDK_ADAPTER_DESCRIPTION **desc)
{
    *desc = describe(spec, list);
    const char *name = *desc ? (*desc)->Name : spec;
    return side_open(s, role, user_given ? spec : name, name, flags);
}

static bool resolve(const char *text, NDK_SOCKADDR *out, bool numeric_only)
{
    if (tc_parse_addr(text, opt.ipv6 ? AF_INET6 : AF_UNSPEC, numeric_only, out))
        return true;
    complain(NULL, "cannot resolve address '%s'%s", text, opt.ipv6 ? " as IPv6" : "");
    return false;
}

/* ------------------------------------------------------------------------ */
/* Modes                                                                    */
/* ------------------------------------------------------------------------ */

static int run_client(void)
{
    struct client cl;
    memset(&cl, 0, sizeof cl);
    if (!resolve(opt.address, &cl.dst, false))
        return 1;
    tc_sockaddr_set_port(&cl.dst, opt.port);

    /* Default adapter: the one the route to the server leaves from, which
     * is the adapter owning -a when -a is local; "lo" when there is none. */
    char spec_buf[ADDR_BUF];
    const char *spec = opt.adapter;
    NDK_SOCKADDR routed;
    bool have_route = tc_route_source(&cl.dst, &routed);
    if (!spec)
        spec = have_route ? tc_format_addr(&routed, false, spec_buf, sizeof spec_buf) : "lo";

    NDK_ADAPTER_DESCRIPTION *list = NULL;
    const NDK_ADAPTER_DESCRIPTION *d;
    int rc = 1;
    ULONG flags =
        (opt.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0) | (opt.no_p2p ? NDK_OPEN_FLAG_NO_P2P : 0);
    if (!side_setup(&cl.side, "client", spec, opt.adapter != NULL, flags, &list, &d))
        goto out;

    /* Source address: the routed one if this adapter owns it, else the
     * adapter's first address of the server's family. */
    if (have_route && d && tc_desc_owns(d, &routed)) {
        cl.side.addr = routed;
    } else {
        const NDK_SOCKADDR *a =
            d ? tc_desc_pick_addr(d, cl.dst.sa.sa_family, tc_is_link_local(&cl.dst)) : NULL;
        if (!a) {
            complain(NULL, "adapter %s has no %s address to connect from", cl.side.name,
                     cl.dst.sa.sa_family == AF_INET6 ? "IPv6" : "IPv4");
            goto out;
        }
        cl.side.addr = *a;
    }
    tc_sockaddr_set_port(&cl.side.addr, 0);
    print_adapter_summary(&cl.side, d, "");

    unsigned long count = opt.count ? opt.count : 1;
    for (unsigned long i = 1; i <= count; i++) {
        if (!client_once(&cl, (unsigned)i))
            break;
        cl.ok++;
    }
    stats_print("client", "connection", "", "connect", &cl.connect_stats, count);
    client_data_summary(&cl, count);
    rc = cl.ok == count && !atomic_load(&library_problems) ? 0 : 1;
out:
    side_close(&cl.side);
    free(list);
    return rc;
}

/* SIGINT/SIGTERM stop a standalone server between connections; a second
 * one exits at once. They are taken synchronously by this thread (all
 * threads, the provider's included, block them), so nothing runs in a
 * signal handler. SIGUSR1 is ndkping's own "quit" for this thread. */
static void *signal_main(void *arg)
{
    struct server *s = arg;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0 || sig == SIGUSR1)
            return NULL;
        pthread_mutex_lock(&s->lock);
        bool again = s->stop;
        s->stop = true;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->lock);
        if (again) {
            fprintf(stderr, "%s: interrupted again, exiting\n", prog);
            _exit(130);
        }
        say(LVL_NORMAL, "server", "interrupted, stopping after the current connection");
    }
}

static int run_server(void)
{
    struct server s;
    server_init(&s);
    s.limit = opt.count;
    int rc = 1;

    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    const char *spec = opt.adapter;
    if (opt.address) {
        if (!resolve(opt.address, &addr, false)) {
            server_destroy(&s);
            return 1;
        }
    } else {
        /* No -a: listen on every address, as rping does. */
        addr.sa.sa_family = opt.ipv6 ? AF_INET6 : AF_INET;
    }
    tc_sockaddr_set_port(&addr, opt.port);
    char spec_buf[ADDR_BUF];
    /* A wildcard -a (0.0.0.0, ::) names no adapter: take lo, as without -a. */
    bool wildcard = addr.sa.sa_family == AF_INET6
                        ? IN6_IS_ADDR_UNSPECIFIED(&addr.in6.sin6_addr)
                        : addr.in4.sin_addr.s_addr == htonl(INADDR_ANY);
    if (!spec)
        spec = wildcard ? "lo" : tc_format_addr(&addr, false, spec_buf, sizeof spec_buf);

    /* Before any thread exists, so every thread (the provider's too)
     * inherits the blocked set and only signal_main takes them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t sig_thread;
    bool have_sig_thread = pthread_create(&sig_thread, NULL, signal_main, &s) == 0;

    NDK_ADAPTER_DESCRIPTION *list = NULL;
    const NDK_ADAPTER_DESCRIPTION *d;
    if (!side_setup(&s.side, "server", spec, opt.adapter != NULL,
                    opt.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0, &list, &d))
        goto out;
    s.side.addr = addr;
    print_adapter_summary(&s.side, d, "");
    if (!server_start(&s))
        goto out;
    server_serve(&s);
    server_finish(&s);
    server_summary(&s, s.handled);
    rc = !s.failed && !atomic_load(&library_problems) ? 0 : 1;
out:
    server_finish(&s);
    side_close(&s.side);
    if (have_sig_thread) {
        pthread_kill(sig_thread, SIGUSR1);
        pthread_join(sig_thread, NULL);
    }
    free(list);
    server_destroy(&s);
    return rc;
}

static int run_loopback(void)
{
    struct server s;
    struct client cl;
    server_init(&s);
    memset(&cl, 0, sizeof cl);
    int family = opt.ipv6 ? AF_INET6 : AF_INET;
    unsigned long count = opt.count ? opt.count : 1;
    int rc = 1;
    bool server_running = false;
    pthread_t server_tid;
    NDK_ADAPTER_DESCRIPTION *list = NULL, *list2 = NULL;
    const NDK_ADAPTER_DESCRIPTION *d = NULL, *d2 = NULL;

    /* The address both ends use: -a, else the adapter's (-d) first address
     * of the family, else the loopback address. */
    NDK_SOCKADDR addr;
    memset(&addr, 0, sizeof addr);
    if (opt.address) {
        if (!resolve(opt.address, &addr, false))
            goto out;
    } else if (opt.adapter) {
        d = describe(opt.adapter, &list);
        const NDK_SOCKADDR *a = d ? tc_desc_pick_addr(d, family, false) : NULL;
        if (!a) {
            complain(NULL, "adapter '%s' has no %s address", opt.adapter,
                     opt.ipv6 ? "IPv6" : "IPv4");
            tc_print_available(stderr);
            goto out;
        }
        addr = *a;
        free(list);
        list = NULL;
    } else if (!tc_parse_addr(opt.ipv6 ? "::1" : "127.0.0.1", family, true, &addr)) {
        complain(NULL, "cannot make the loopback address");
        goto out;
    }
    char spec_buf[ADDR_BUF];
    const char *spec =
        opt.adapter ? opt.adapter : tc_format_addr(&addr, false, spec_buf, sizeof spec_buf);

    /* Two instances of the adapter, as two hosts would have. */
    ULONG crc = opt.crc ? NDK_OPEN_FLAG_REQUEST_CRC : 0;
    if (!side_setup(&s.side, "server", spec, opt.adapter != NULL, crc, &list, &d))
        goto out;
    if (!side_setup(&cl.side, "client", spec, opt.adapter != NULL,
                    crc | (opt.no_p2p ? NDK_OPEN_FLAG_NO_P2P : 0), &list2, &d2))
        goto out;
    if (memcmp(&s.side.info, &cl.side.info, sizeof s.side.info) != 0)
        library_problem(NULL, "two instances of adapter %s report different NDK_ADAPTER_INFO",
                        s.side.name);
    print_adapter_summary(&s.side, d, ", opened twice (server and client)");
    s.peer = &cl.side;
    cl.peer = &s.side;

    s.side.addr = addr;
    tc_sockaddr_set_port(&s.side.addr, opt.port_given ? opt.port : 0);
    if (!server_start(&s))
        goto out;
    s.limit = count;
    s.bounded_wait = true;
    if (pthread_create(&server_tid, NULL, server_thread, &s) != 0) {
        complain(NULL, "cannot start the server thread");
        goto out;
    }
    server_running = true;

    cl.side.addr = addr;
    tc_sockaddr_set_port(&cl.side.addr, 0);
    cl.dst = s.bound;
    for (unsigned long i = 1; i <= count; i++) {
        if (!client_once(&cl, (unsigned)i))
            break;
        cl.ok++;
    }
    /* If the client stopped early, the server must not wait for requests
     * that will not come. */
    server_wake(&s);
    pthread_join(server_tid, NULL);
    server_running = false;

    stats_print("client", "connection", opt.reject ? " refused" : "", "connect", &cl.connect_stats,
                count);
    client_data_summary(&cl, count);
    server_summary(&s, count);
    unsigned problems = atomic_load(&library_problems);
    if (cl.ok == count && s.ok == count && !s.failed && !problems) {
        say(LVL_SUMMARY, NULL, "%s: %lu/%lu connection%s %s%s", prog, count, count,
            count == 1 ? "" : "s",
            opt.reject ? "rejected as asked; reject private data byte-exact"
                       : "ok; private data byte-exact and IRD/ORD consistent on both sides",
            opt.reject || !opt.data_phase ? ""
                                          : "; RDMA Write, RDMA Read and Send/Receive moved every "
                                            "byte intact");
        rc = 0;
    } else {
        say(LVL_SUMMARY, NULL,
            "%s: FAILED: client %u/%lu ok, server %u/%lu ok, %u library problem%s", prog, cl.ok,
            count, s.ok, count, problems, problems == 1 ? "" : "s");
    }
out:
    if (server_running) {
        server_wake(&s);
        pthread_join(server_tid, NULL);
    }
    server_finish(&s);
    side_close(&cl.side);
    side_close(&s.side);
    free(list);
    free(list2);
    server_destroy(&s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Options                                                                  */
/* ------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage:\n"
        "  %1$s -s [-a ADDRESS] [-p PORT] [-d ADAPTER] [options]   server (listener)\n"
        "  %1$s -c -a ADDRESS [-p PORT] [-d ADAPTER] [options]     client\n"
        "  %1$s --loopback [options]                               both ends in this process\n"
        "  %1$s --rping -s|-c [rping's options]                    rdma-core's rping protocol\n"
        "                                                          (see --rping --help)\n"
        "\n"
        "rping over NDK: the client connects with private data and its IRD/ORD; the\n"
        "server reads them and accepts with its own; both print what they received and\n"
        "the time of each leg. Then the data phase: each side has advertised a registered\n"
        "buffer in its private data; the client RDMA-writes a pattern into the server's\n"
        "buffer, RDMA-reads it back, and sends a message into the server's posted\n"
        "receive; the server checks it and its buffer, and answers with a Send. Last the\n"
        "client disconnects, the server answers; everything is closed.\n"
        "\n"
        "Roles and addresses:\n"
        "  -s, --server           listen for connections\n"
        "  -c, --client           connect to a server\n"
        "      --loopback         server and client in one process, each on its own\n"
        "                         instance of the adapter, on 127.0.0.1 (::1 with --ipv6)\n"
        "                         and a port the provider picks (-p to choose one); exits 0\n"
        "                         only if every connection worked and each side got the\n"
        "                         other's private data byte-exact and consistent IRD/ORD\n"
        "  -a, --address=ADDRESS  client: the server's address or host name (required);\n"
        "                         server: the address to listen on (default: any)\n"
        "  -p, --port=PORT        the server's port (default %2$u, as rping)\n"
        "  -d, --adapter=ADAPTER  interface name or address of the adapter to use (default:\n"
        "                         server: the adapter owning -a, else lo; client: the\n"
        "                         adapter the route to -a leaves from)\n"
        "  -C, --count=N          connections, one after the other (default: client 1;\n"
        "                         server: until interrupted). With --loopback, -c N means\n"
        "                         the same (there is no client role to pick there).\n"
        "\n"
        "Connection parameters:\n"
        "      --ird=N, --ord=N   requested inbound / outbound RDMA read limits (default %3$u)\n"
        "      --data=STRING      the client's private data (default \"ndkping client PID\")\n"
        "      --reply=STRING     the server's accept or reject private data\n"
        "                         (default \"ndkping server PID\")\n"
        "      --reject           server: reject each request, with its private data;\n"
        "                         --loopback then succeeds if every connect is refused\n"
        "                         and carries that data\n"
        "      --crc              ask for MPA CRC32c (NDK_OPEN_FLAG_REQUEST_CRC)\n"
        "      --no-p2p           client: client/server MPA, no RTR leg, as siw\n"
        "                         (NDK_OPEN_FLAG_NO_P2P)\n"
        "      --ipv6             IPv6: ::1 with --loopback, -a resolved as IPv6, the\n"
        "                         server listens on :: without -a\n"
        "      --timeout=MS       limit for each step (default %4$u): the provider's TCP\n"
        "                         connect, MPA Reply, RTR and disconnect timeouts; ndkping\n"
        "                         itself waits up to MS + %5$u for any completion\n"
        "\n"
        "Data phase:\n"
        "      --no-data          no data phase (both sides must agree: a server with the\n"
        "                         data phase rejects a client without, and the reverse)\n"
        "  -S, --size=N           this side's buffer, 1 to %6$u bytes (default %7$u); the\n"
        "                         RDMA Write and Read move the smaller of the two sides'\n"
        "                         buffers; the Send/Receive messages are %8$u bytes\n"
        "      --verify           check every byte: the pattern read back, the server's\n"
        "                         buffer after the Send, both messages (always on with\n"
        "                         --loopback)\n"
        "  Each step prints its size, time and rate (MB/s = 10^6 bytes/s); Send/Receive\n"
        "  is the round trip from the client's Send to the server's reply, less the time\n"
        "  the server spent checking (it says how long in the reply), and its rate counts\n"
        "  both messages. The private data is the text (--data, --reply), then a\n"
        "  NUL byte and the 16-byte advertisement: address (8), remote token (4) and size\n"
        "  (4), big-endian, as rping's message.\n"
        "\n"
        "Output:\n"
        "  -v, --verbose          every NDK call, and whether it completed inline or pended\n"
        "  -q, --quiet            only the summary lines and errors\n"
        "  -h, --help             this text\n"
        "\n"
        "Exit status: 0 success, 1 failure, 2 usage error.\n",
        prog, DEFAULT_PORT, DEFAULT_READ_LIMIT, DEFAULT_TIMEOUT_MS, GRACE_MS, MAX_SIZE,
        DEFAULT_SIZE, MSG_SIZE);
}

static bool parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    if (!s || !isdigit((unsigned char)s[0]))
        return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return false;
    *out = v;
    return true;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry '%s --help'.\n", prog);
    va_end(ap);
    return 2;
}

enum {
    OPT_LOOPBACK = 0x100,
    OPT_IRD,
    OPT_ORD,
    OPT_DATA,
    OPT_REPLY,
    OPT_REJECT,
    OPT_CRC,
    OPT_NO_P2P,
    OPT_IPV6,
    OPT_TIMEOUT,
    OPT_NO_DATA,
    OPT_VERIFY,
};

/* Returns -1 to go on, else the exit status. */
static int parse_options(int argc, char **argv, char *default_data, char *default_reply)
{
    static const struct option longopts[] = {
        {"server", no_argument, NULL, 's'},
        {"client", no_argument, NULL, 'c'},
        {"loopback", no_argument, NULL, OPT_LOOPBACK},
        {"address", required_argument, NULL, 'a'},
        {"port", required_argument, NULL, 'p'},
        {"adapter", required_argument, NULL, 'd'},
        {"count", required_argument, NULL, 'C'},
        {"ird", required_argument, NULL, OPT_IRD},
        {"ord", required_argument, NULL, OPT_ORD},
        {"data", required_argument, NULL, OPT_DATA},
        {"reply", required_argument, NULL, OPT_REPLY},
        {"reject", no_argument, NULL, OPT_REJECT},
        {"crc", no_argument, NULL, OPT_CRC},
        {"no-p2p", no_argument, NULL, OPT_NO_P2P},
        {"ipv6", no_argument, NULL, OPT_IPV6},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"no-data", no_argument, NULL, OPT_NO_DATA},
        {"size", required_argument, NULL, 'S'},
        {"verify", no_argument, NULL, OPT_VERIFY},
        {"verbose", no_argument, NULL, 'v'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool server = false, client = false, loopback = false, size_given = false;
    const char *c_count = NULL; /* "-c N": a count, valid with --loopback only */
    unsigned long v;
    int ch;

    opt.port = DEFAULT_PORT;
    opt.ird = opt.ord = DEFAULT_READ_LIMIT;
    opt.timeout_ms = DEFAULT_TIMEOUT_MS;
    opt.verbosity = LVL_NORMAL;
    opt.data = default_data;
    opt.reply = default_reply;
    opt.data_phase = true;
    opt.size = DEFAULT_SIZE;

    /* "+": stop at the first non-option, so that a stray argument is
     * reported instead of being moved past the options. */
    while ((ch = getopt_long(argc, argv, "+sc::a:p:d:C:S:vqh", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            server = true;
            break;
        case 'c':
            client = true;
            /* The count may follow as "-cN" or as the next argument. */
            if (optarg)
                c_count = optarg;
            else if (optind < argc && isdigit((unsigned char)argv[optind][0]))
                c_count = argv[optind++];
            break;
        case OPT_LOOPBACK:
            loopback = true;
            break;
        case 'a':
            opt.address = optarg;
            break;
        case 'p':
            if (!parse_ulong(optarg, 0, 65535, &v))
                return usage_error("invalid port '%s'", optarg);
            opt.port = (unsigned)v;
            opt.port_given = true;
            break;
        case 'd':
            opt.adapter = optarg;
            break;
        case 'C':
            if (!parse_ulong(optarg, 1, UINT32_MAX, &v))
                return usage_error("invalid count '%s' (1 or more)", optarg);
            if (opt.count && opt.count != v)
                return usage_error("the count is given twice");
            opt.count = v;
            break;
        case OPT_IRD:
        case OPT_ORD:
            if (!parse_ulong(optarg, 0, UINT32_MAX, &v))
                return usage_error("invalid %s '%s'", ch == OPT_IRD ? "--ird" : "--ord", optarg);
            *(ch == OPT_IRD ? &opt.ird : &opt.ord) = (ULONG)v;
            break;
        case OPT_DATA:
            opt.data = optarg;
            break;
        case OPT_REPLY:
            opt.reply = optarg;
            break;
        case OPT_REJECT:
            opt.reject = true;
            break;
        case OPT_CRC:
            opt.crc = true;
            break;
        case OPT_NO_P2P:
            opt.no_p2p = true;
            break;
        case OPT_IPV6:
            opt.ipv6 = true;
            break;
        case OPT_TIMEOUT:
            if (!parse_ulong(optarg, 1, 3600000, &v))
                return usage_error("invalid timeout '%s' (1 to 3600000 ms)", optarg);
            opt.timeout_ms = (unsigned)v;
            break;
        case OPT_NO_DATA:
            opt.data_phase = false;
            break;
        case 'S':
            if (!parse_ulong(optarg, 1, MAX_SIZE, &v))
                return usage_error("invalid size '%s' (1 to %u bytes)", optarg, MAX_SIZE);
            opt.size = (ULONG)v;
            size_given = true;
            break;
        case OPT_VERIFY:
            opt.verify = true;
            break;
        case 'v':
            opt.verbosity = LVL_VERBOSE;
            break;
        case 'q':
            opt.verbosity = LVL_SUMMARY;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            fprintf(stderr, "Try '%s --help'.\n", prog);
            return 2;
        }
    }
    if (optind < argc) {
        if (isdigit((unsigned char)argv[optind][0]))
            return usage_error("unexpected argument '%s' (the count is -C N)", argv[optind]);
        return usage_error("unexpected argument '%s'", argv[optind]);
    }

    if (loopback + server + (client && !loopback) > 1)
        return usage_error("choose one of -s, -c and --loopback");
    if (c_count) {
        if (!loopback)
            return usage_error("-c takes no count except with --loopback; the count is -C N");
        if (!parse_ulong(c_count, 1, UINT32_MAX, &v))
            return usage_error("invalid count '%s' (1 or more)", c_count);
        if (opt.count && opt.count != v)
            return usage_error("the count is given twice");
        opt.count = v;
    }
    opt.mode = loopback ? MODE_LOOPBACK : server ? MODE_SERVER : client ? MODE_CLIENT : MODE_UNSET;
    if (opt.mode == MODE_UNSET)
        return usage_error("choose -s (server), -c (client) or --loopback");
    if (opt.mode == MODE_CLIENT && !opt.address)
        return usage_error("the client needs the server's address (-a)");
    if (opt.mode == MODE_CLIENT && opt.port == 0)
        return usage_error("the client needs the server's port (-p)");
    if (opt.mode == MODE_CLIENT && opt.reject)
        return usage_error("--reject is a server option");
    if (!opt.data_phase && (size_given || opt.verify))
        return usage_error("%s belongs to the data phase, which --no-data turns off",
                           size_given ? "-S" : "--verify");
    if (opt.mode == MODE_LOOPBACK)
        opt.verify = true;
    opt.data_len = strlen(opt.data);
    opt.reply_len = strlen(opt.reply);
    return -1;
}

int main(int argc, char **argv)
{
    /* rping's protocol and command line are a mode of their own
     * (ndkping_rping.c): its -d, -C, -S and -v mean what they mean to rping. */
    if (ndkping_rping_requested(argc, argv))
        return ndkping_rping_main(argc, argv);
    char default_data[64], default_reply[64];
    snprintf(default_data, sizeof default_data, "ndkping client %ld", (long)getpid());
    snprintf(default_reply, sizeof default_reply, "ndkping server %ld", (long)getpid());
    int rc = parse_options(argc, argv, default_data, default_reply);
    if (rc >= 0)
        return rc;
    /* Whole lines in order even when stdout is a pipe (CTest, tee): the two
     * sides of --loopback and stderr interleave readably. */
    setvbuf(stdout, NULL, _IOLBF, 0);

    switch (opt.mode) {
    case MODE_SERVER:
        return run_server();
    case MODE_CLIENT:
        return run_client();
    case MODE_LOOPBACK:
        return run_loopback();
    default:
        return 2;
    }
}
