/*
 * impair - an impaired path in userspace: forwards Ethernet frames between
 * two interfaces (AF_PACKET raw sockets), delaying (with jitter), losing,
 * reordering and duplicating them. The netns tests run it in a router
 * namespace between the veth pairs of two hosts (test_impaired_paths.c,
 * tests/soak/impaired_paths.sh), because the kernel's netem qdisc is not
 * available everywhere (CONFIG_NET_SCH_NETEM is unset on some kernels, the
 * one this was written on among them), and because nftables/iptables can
 * drop at random but cannot delay or reorder.
 *
 *   impair --a IF --b IF [--seed N] [--delay MS] [--jitter MS] [--loss PCT]
 *          [--dup PCT] [--reorder PCT] [--reorder-by MS] [--outage MS] [--until-eof]
 *   impair --offloads-off IF...
 *
 * Every frame arriving on one interface leaves on the other after
 * delay +- jitter ms (uniform; frames whose delays differ overtake each
 * other, as on a real path with jitter), unless it is lost (loss PCT), with
 * a second copy (dup PCT), and held reorder-by ms more (reorder PCT), so
 * that frames behind it overtake it. Percentages may have decimals. Each
 * direction draws from its own PRNG stream seeded from --seed, so the
 * decisions for the n-th frame of a direction are a function of the seed.
 * SIGUSR1 toggles a blackhole (every frame dropped: a dead path), SIGUSR2
 * starts one that ends by itself after --outage ms (default 700); SIGTERM
 * or SIGINT ends the run, and so does the end of standard input with
 * --until-eof (a test gives it a pipe, so it never outlives the test). "ready"
 * on stdout says it forwards. On exit one line per direction on stdout
 * gives the counts: frames in, forwarded, lost, duplicated, held back (--reorder),
 * sent out of order (after a frame that arrived later: held back or
 * overtaken through jitter), dropped in the blackhole, dropped for lack of
 * room or by the socket.
 *
 * The frames must be real Ethernet frames of at most the MTU with
 * complete checksums: --offloads-off turns transmit checksumming,
 * segmentation offloads and GRO off on interfaces (of the calling
 * namespace), which the hosts' ends need.
 *
 * Needs CAP_NET_RAW (and CAP_NET_ADMIN for --offloads-off).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FRAME_MAX 2048u   /* an MTU-sized frame with room to spare */
#define QUEUE_MAX 8192u   /* frames in flight, both directions together */

struct frame {
    uint64_t due_ns;
    uint64_t seq;     /* ties keep arrival order */
    uint64_t dir_seq; /* arrival order within its direction */
    int out;          /* socket it leaves by */
    int dir;
    uint16_t len;
    uint8_t data[FRAME_MAX];
};

struct dir_stats {
    unsigned long in, fwd, lost, dup, reordered, out_of_order, blackholed, overflow, send_err;
    uint64_t arrived, newest_sent; /* dir_seq of the next arrival, of the newest frame sent + 1 */
};

struct config {
    double loss, dup, reorder; /* probabilities, 0..1 */
    uint64_t delay_ns, jitter_ns, reorder_by_ns, outage_ns;
};

static uint64_t g_outage_end_ns; /* a SIGUSR2 outage lasts until then */

static volatile sig_atomic_t g_stop, g_blackhole, g_outage_asked;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void on_toggle(int sig)
{
    (void)sig;
    g_blackhole = !g_blackhole;
}

static void on_outage(int sig)
{
    (void)sig;
    g_outage_asked = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* splitmix64: one stream per direction, the same for the same seed. */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- the queue: a binary min-heap on (due, seq) ---- */

static struct frame *g_heap[QUEUE_MAX];
static unsigned g_nheap;
static struct frame *g_free[QUEUE_MAX];
static unsigned g_nfree;

static bool before(const struct frame *a, const struct frame *b)
{
    return a->due_ns != b->due_ns ? a->due_ns < b->due_ns : a->seq < b->seq;
}

static void heap_push(struct frame *f)
{
    unsigned i = g_nheap++;
    while (i > 0 && before(f, g_heap[(i - 1) / 2])) {
        g_heap[i] = g_heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    g_heap[i] = f;
}

static struct frame *heap_pop(void)
{
    struct frame *top = g_heap[0], *last = g_heap[--g_nheap];
    unsigned i = 0;
    for (;;) {
        unsigned c = 2 * i + 1;
        if (c >= g_nheap)
            break;
        if (c + 1 < g_nheap && before(g_heap[c + 1], g_heap[c]))
            c++;
        if (!before(g_heap[c], last))
            break;
        g_heap[i] = g_heap[c];
        i = c;
    }
    if (g_nheap)
        g_heap[i] = last;
    return top;
}

/* ---- interfaces ---- */

static int open_port(const char *ifname)
{
    unsigned idx = if_nametoindex(ifname);
    if (!idx) {
        fprintf(stderr, "impair: no interface %s: %s\n", ifname, strerror(errno));
        return -1;
    }
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, htons(ETH_P_ALL));
    if (fd < 0) {
        fprintf(stderr, "impair: packet socket: %s\n", strerror(errno));
        return -1;
    }
    struct sockaddr_ll sll = {.sll_family = AF_PACKET, .sll_protocol = htons(ETH_P_ALL), .sll_ifindex = (int)idx};
    int one = 1;
    /* Frames we send out of this interface must not come back to us. */
    if (bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0 ||
        setsockopt(fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof one) != 0) {
        fprintf(stderr, "impair: %s: %s\n", ifname, strerror(errno));
        close(fd);
        return -1;
    }
    /* The hosts must reach each other through us only, and we must see
     * frames addressed to either host. */
    struct packet_mreq mr = {.mr_ifindex = (int)idx, .mr_type = PACKET_MR_PROMISC};
    if (setsockopt(fd, SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mr, sizeof mr) != 0) {
        fprintf(stderr, "impair: promiscuous %s: %s\n", ifname, strerror(errno));
        close(fd);
        return -1;
    }
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    return fd;
}

/* Transmit checksumming, TSO/GSO and GRO off (SIOCETHTOOL, as `ethtool -K
 * IF tx off tso off gso off gro off` does): frames then leave the host
 * whole, at most the MTU, with their checksums filled in. */
static bool offloads_off(const char *ifname)
{
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    static const uint32_t cmds[] = {ETHTOOL_STSO, ETHTOOL_SGSO, ETHTOOL_SGRO, ETHTOOL_STXCSUM};
    bool ok = true;
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        struct ethtool_value ev = {.cmd = cmds[i], .data = 0};
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "%s", ifname);
        ifr.ifr_data = (char *)&ev;
        if (ioctl(fd, SIOCETHTOOL, &ifr) != 0) {
            fprintf(stderr, "impair: offloads of %s (ethtool command 0x%x): %s\n", ifname, cmds[i], strerror(errno));
            ok = false;
        }
    }
    close(fd);
    return ok;
}

/* ---- forwarding ---- */

static struct dir_stats g_stats[2];
static uint64_t g_rng[2];
static uint64_t g_seq;

static void enqueue(const struct config *c, int dir, int out, const uint8_t *data, size_t len, uint64_t t)
{
    struct dir_stats *st = &g_stats[dir];
    uint64_t *rng = &g_rng[dir];
    uint64_t dir_seq = st->arrived++;
    st->in++;
    /* Every decision draws its numbers whatever the outcome, so the n-th
     * frame's fate depends on the seed and n alone. */
    double u_loss = rng_unit(rng), u_dup = rng_unit(rng), u_reorder = rng_unit(rng);
    double u_jit[2] = {rng_unit(rng), rng_unit(rng)};
    if (g_blackhole || t < g_outage_end_ns) {
        st->blackholed++;
        return;
    }
    if (u_loss < c->loss) {
        st->lost++;
        return;
    }
    int copies = u_dup < c->dup ? 2 : 1;
    bool held = u_reorder < c->reorder;
    if (copies == 2)
        st->dup++;
    if (held)
        st->reordered++;
    for (int k = 0; k < copies; k++) {
        if (!g_nfree) {
            st->overflow++;
            continue;
        }
        struct frame *f = g_free[--g_nfree];
        int64_t jitter = c->jitter_ns ? (int64_t)(u_jit[k] * (double)(2 * c->jitter_ns)) - (int64_t)c->jitter_ns : 0;
        int64_t delay = (int64_t)c->delay_ns + jitter;
        if (delay < 0)
            delay = 0;
        f->due_ns = t + (uint64_t)delay + (held ? c->reorder_by_ns : 0);
        f->seq = g_seq++;
        f->dir_seq = dir_seq;
        f->out = out;
        f->dir = dir;
        f->len = (uint16_t)len;
        memcpy(f->data, data, len);
        heap_push(f);
    }
}

static void release_due(uint64_t t)
{
    while (g_nheap && g_heap[0]->due_ns <= t) {
        struct frame *f = heap_pop();
        struct dir_stats *st = &g_stats[f->dir];
        if (send(f->out, f->data, f->len, 0) != (ssize_t)f->len) {
            st->send_err++;
        } else {
            st->fwd++;
            if (f->dir_seq + 1 < st->newest_sent)
                st->out_of_order++;
            else if (f->dir_seq + 1 > st->newest_sent)
                st->newest_sent = f->dir_seq + 1;
        }
        g_free[g_nfree++] = f;
    }
}

/* A number from 0 to max, and nothing after it. */
static bool parse_upto(const char *s, double max, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return !*end && *v >= 0 && *v <= max;
}

static bool parse_pct(const char *s, double *p)
{
    double v;
    if (!parse_upto(s, 100, &v))
        return false;
    *p = v / 100.0;
    return true;
}

static bool parse_ms(const char *s, uint64_t *ns)
{
    double v;
    if (!parse_upto(s, 60000, &v))
        return false;
    *ns = (uint64_t)(v * 1e6);
    return true;
}

static int usage(void)
{
    fprintf(stderr, "usage: impair --a IF --b IF [--seed N] [--delay MS] [--jitter MS] [--loss PCT] [--dup PCT]\n"
                    "              [--reorder PCT] [--reorder-by MS] [--outage MS] [--until-eof]\n"
                    "       impair --offloads-off IF...\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--offloads-off") == 0) {
        bool ok = argc > 2;
        for (int i = 2; i < argc; i++)
            ok = offloads_off(argv[i]) && ok;
        return ok ? 0 : 1;
    }
    const char *ifa = NULL, *ifb = NULL;
    uint64_t seed = 1;
    struct config c = {.reorder_by_ns = 5000000, .outage_ns = 700000000};
    bool until_eof = false;
    /* The options with a number: milliseconds (kept in ns) or a percentage
     * (kept as a share). */
    const struct {
        const char *name;
        uint64_t *ns;
        double *share;
    } numbers[] = {
        {"--delay", &c.delay_ns, NULL}, {"--jitter", &c.jitter_ns, NULL}, {"--reorder-by", &c.reorder_by_ns, NULL},
        {"--outage", &c.outage_ns, NULL}, {"--loss", NULL, &c.loss},     {"--dup", NULL, &c.dup},
        {"--reorder", NULL, &c.reorder},
    };
    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(opt, "--until-eof")) {
            until_eof = true;
            continue;
        }
        if (!val)
            return usage();
        i++;
        bool ok = true;
        if (!strcmp(opt, "--a"))
            ifa = val;
        else if (!strcmp(opt, "--b"))
            ifb = val;
        else if (!strcmp(opt, "--seed"))
            seed = strtoull(val, NULL, 0);
        else {
            ok = false;
            for (size_t k = 0; k < sizeof numbers / sizeof numbers[0]; k++)
                if (!strcmp(opt, numbers[k].name))
                    ok = numbers[k].ns ? parse_ms(val, numbers[k].ns) : parse_pct(val, numbers[k].share);
        }
        if (!ok)
            return usage();
    }
    if (!ifa || !ifb)
        return usage();
    int fds[2] = {open_port(ifa), open_port(ifb)};
    if (fds[0] < 0 || fds[1] < 0)
        return 1;
    static struct frame pool[QUEUE_MAX];
    for (unsigned i = 0; i < QUEUE_MAX; i++)
        g_free[g_nfree++] = &pool[i];
    g_rng[0] = seed * 2 + 1;
    g_rng[1] = seed * 2 + 2;

    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = on_toggle;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_outage;
    sigaction(SIGUSR2, &sa, NULL);
    /* Ready: the parent may send traffic now. */
    printf("ready\n");
    fflush(stdout);

    uint8_t buf[FRAME_MAX];
    while (!g_stop) {
        uint64_t t = now_ns();
        release_due(t);
        int timeout = -1;
        if (g_nheap) {
            uint64_t wait_ns = g_heap[0]->due_ns > t ? g_heap[0]->due_ns - t : 0;
            timeout = (int)((wait_ns + 999999u) / 1000000u);
        }
        struct pollfd p[3] = {{.fd = fds[0], .events = POLLIN},
                              {.fd = fds[1], .events = POLLIN},
                              {.fd = until_eof ? STDIN_FILENO : -1, .events = POLLIN}};
        int n = poll(p, 3, timeout);
        if (n < 0 && errno != EINTR) {
            fprintf(stderr, "impair: poll: %s\n", strerror(errno));
            return 1;
        }
        if (p[2].revents) {
            char drop[64];
            if (read(STDIN_FILENO, drop, sizeof drop) <= 0)
                break;
        }
        t = now_ns();
        if (g_outage_asked) {
            g_outage_asked = 0;
            g_outage_end_ns = t + c.outage_ns;
        }
        for (int d = 0; d < 2 && n > 0; d++) {
            if (!(p[d].revents & POLLIN))
                continue;
            /* A bounded batch per wake-up: the other side and the queue get
             * their turn. */
            for (int k = 0; k < 64; k++) {
                ssize_t len = recv(fds[d], buf, sizeof buf, MSG_TRUNC);
                if (len < 0)
                    break;
                if ((size_t)len > sizeof buf) {
                    g_stats[d].in++;
                    g_stats[d].overflow++; /* larger than an MTU: offloads left on */
                    continue;
                }
                enqueue(&c, d, fds[1 - d], buf, (size_t)len, t);
            }
        }
    }
    for (int d = 0; d < 2; d++) {
        const struct dir_stats *s = &g_stats[d];
        printf("%s->%s in %lu fwd %lu lost %lu dup %lu reordered %lu out_of_order %lu blackholed %lu overflow %lu "
               "send_err %lu\n",
               d ? ifb : ifa, d ? ifa : ifb, s->in, s->fwd, s->lost, s->dup, s->reordered, s->out_of_order,
               s->blackholed, s->overflow, s->send_err);
    }
    return 0;
}
