/*
 * perftest.h - ndkperf --perftest: perftest's own protocol over its
 * rdma_cm exchange (-R), so that ndkperf on libndk and perftest on any
 * verbs device (here Linux siw) run against each other, either side being
 * the server, with the results printed by both.
 *
 * perftest has no documented wire protocol; this one was recorded from
 * perftest 6.06 (Debian bookworm's perftest 4.5+0.17, siw, rdma-core 44)
 * by relaying a guest ib_*_bw/_lat -R client to a guest server through a
 * host TCP relay that decoded MPA/DDP/RDMAP in both directions. All of it
 * is ordinary Sends of small messages on a control connection, plus the
 * test traffic on a second connection:
 *
 *   control connection (rdma_cm, port -p, IRD = ORD = 0, no private data).
 *   Every exchange: the client Sends, the server receives and Sends its
 *   own (perftest's ctx_xchg_data over rdma_cm):
 *     1  version, 16 bytes: "6.06" and NULs
 *     2  cycle buffer (the page size), 4 bytes big-endian: 4096
 *     3  cache line size, 4 bytes big-endian: 64
 *     4  the MTU as an ASCII number of enum ibv_mtu and its NUL: "3" (1024)
 *     5  56 zero bytes (a pingpong_dest not filled in yet): the client then
 *        connects the test connection, which the server accepts on the
 *        same port (the client retries while the server is not listening)
 *   test connection (rdma_cm, same port; IRD = ORD = 128, the outstanding
 *   reads, for read tests, else 0; no private data)
 *     6  56 zero bytes again, once the test connection is up
 *     7  struct pingpong_dest, 56 bytes, every field big-endian:
 *          0 lid, 4 out_reads, 8 qpn, 12 psn, 16 rkey, 20 (padding, not
 *          initialised by perftest), 24 vaddr (8), 32 gid (16), 48 srqn,
 *          52 gid_index
 *        sent K times, the same each time: K = 3 for write_bw and read_bw,
 *        4 for send_bw, send_lat and write_lat, where send_lat's fourth
 *        comes right before the data phase of each size (perftest posts
 *        its receives for the size, then synchronises; with -a, before
 *        every size). rkey/vaddr name the buffer
 *        the peer writes to or reads from; for send_bw the client's is its
 *        credit counter.
 *   data phase on the test connection (below), then on the control one:
 *     write_bw, read_bw: pingpong_dest; the client's results as five
 *        8-byte big-endian fields: size, iterations, BW peak, BW average
 *        (MB/s, doubles), message rate (Mpps, double), answered field by
 *        field with the server's own (uninitialised in perftest, which
 *        then prints the client's numbers); pingpong_dest once more
 *     send_bw, send_lat: pingpong_dest
 *     write_lat: nothing
 *   then both sides disconnect.
 *
 * Data phases, as perftest runs them:
 *   write_bw  the client RDMA-Writes -s bytes to the server's vaddr, up to
 *             -t in flight; the server does nothing.
 *   read_bw   the client RDMA-Reads from the server's vaddr, up to
 *             min(-t, -o, its ORD) in flight; the server does nothing.
 *   send_bw   the client Sends; the server keeps R = -r receives posted
 *             and, because a Send without a receive kills an iWARP
 *             connection, writes its running count of receives (4 bytes,
 *             little-endian: perftest writes a host int) into the client's
 *             credit counter whenever (count % R) % (R / 3) == 0; the
 *             client keeps sent - count < R. (Recorded: -n 20: 6, 12, 18,
 *             20; -n 200: 66, 132, 198, 200. With -D, perftest's own server
 *             once wrote 1020 where the rule says 1022; our server follows
 *             the rule, which only ever credits as early or earlier.)
 *   send_lat  ping-pong of Sends, the client first.
 *   write_lat ping-pong of RDMA Writes, the server first: each side writes
 *             its iteration number into the last byte of the message and
 *             polls the last byte of its own buffer for the peer's.
 *   -a        (latency tests) every size from 2 B to 8 MiB in turn, the
 *             iteration count starting again at each.
 * After the data phase either side may close the test connection at any
 * time: perftest does so right after the closing exchange, and its FIN on
 * the test connection may overtake its last message on the control one.
 * With -n, -t and -r are capped at the iterations, as perftest does; both
 * sides must be given the same -s, -n (or -D) and -r: perftest 6.06 does
 * not exchange them.
 */
#ifndef NDKPERF_PERFTEST_H
#define NDKPERF_PERFTEST_H

#include "ndkperf/ndkperf.h"

#define PT_VERSION "6.06" /* the perftest version whose protocol this is */
#define PT_VERSION_LEN 16
#define PT_DEST_LEN 56
#define PT_CYCLE_BUFFER 4096u
#define PT_CACHE_LINE 64u
#define PT_MTU "3" /* IBV_MTU_1024, what siw reports */
#define PT_REPORT_FIELDS 5

#define CTL_SLOTS 8 /* control receives posted; one message is in flight at a time */
#define LAT_RECVS 8
/* perftest's server listens again for the test connection once the control
 * exchange is done: usually within 100 ms, but a server in an emulated guest
 * (the interop tests' siw runs under QEMU's TCG) was seen to take more than
 * 5 s, so the client tries for 30 s. */
#define CONNECT_TRIES 300
#define CONNECT_RETRY_MS 100
#define POLLS_PER_CLOCK 64
#define LINGER_MS 1000 /* the client lets perftest's server disconnect first */

struct pt_params {
    enum test_kind test;
    bool server;
    const char *address;
    uint32_t size, iters, duration_s;
    uint32_t tx_depth, rx_depth, outs;
    bool all_sizes; /* -a: the latency tests over every size */
};

/* perftest's struct pingpong_dest, as it travels. */
struct pt_dest {
    uint32_t lid, out_reads, qpn, psn, rkey;
    uint64_t vaddr;
    uint8_t gid[16];
    uint32_t srqn, gid_index;
};

/* One queued control message. */
struct ctl_msg {
    uint32_t len;
    uint8_t data[CTRL_SLOT];
};

struct pt {
    struct options o;
    bool trace; /* NDKPERF_PERFTEST_TRACE=1: every control message on stderr */
    bool close_test_first; /* NDKPERF_PERFTEST_CLOSE=test-first, see data_phase_over() */
    struct pt_params p;
    const char *role;
    struct endpoint ctl, tst;
    bool inited;               /* both endpoints initialised: ep_close them */
    bool ctl_ready; /* connected: a disconnect ends any wait */
    bool tst_ready; /* in the data phase: a disconnect ends any wait */

    /* Control channel: messages received and not yet read (one at a time
     * in practice), and the Sends in flight. */
    struct ctl_msg inbox[CTL_SLOTS];
    unsigned in_head, in_count;
    uint64_t ctl_sent, ctl_done;

    struct pt_dest mine, peer;
    char peer_version[PT_VERSION_LEN + 1];

    /* Test connection: initiator requests by sequence number; a signaled
     * completion of n means all up to n are done. */
    uint64_t posted, done;
    uint32_t signal_every;
    uint64_t recvs; /* receives completed */
    uint64_t t_last_recv;
    struct tc_bw_samples *samples; /* fed by completions, when set */
};

/* argv[0] is "--perftest"; returns the exit status. */
int perftest_main(int argc, char **argv);

/* perftest_ctl.c: waiting, the control channel, perftest's messages */
struct clock_bound {
    uint64_t start, limit_ns;
    unsigned polls;
    bool peer_left; /* a disconnect was seen: one more poll, then fail */
};
void pt_bound_start(struct clock_bound *b, uint64_t ms);
/* Called once per empty poll: yields, and every few polls looks at the
 * clock and the connections; false (after saying why) when the wait must end. */
bool pt_bound_ok(struct pt *t, struct clock_bound *b, const char *what);
unsigned pt_dests_before(enum test_kind t);
void pt_dest_put(uint8_t *p, const struct pt_dest *d);
void pt_hexdump(const char *role, const char *what, const uint8_t *p, uint32_t len);
bool pt_ctl_poll(struct pt *t);
bool pt_ctl_send(struct pt *t, const void *data, uint32_t len);
/* The next control message, waiting at most ms. */
bool pt_ctl_recv(struct pt *t, struct ctl_msg *out, uint64_t ms, const char *what);
/* One exchange: the client sends `out` and reads the answer; the server
 * reads first and answers (with what it got, echo). The answer must have
 * `want` bytes. */
bool pt_xchg(struct pt *t, const uint8_t *out, uint32_t len, bool echo, struct ctl_msg *in, uint32_t want,
             uint64_t ms, const char *what);
/* pingpong_dest both ways, waiting at most ms for the peer's. */
bool pt_xchg_dest(struct pt *t, const char *what, uint64_t ms);
/* The results exchange of write_bw and read_bw. */
bool pt_xchg_report(struct pt *t, const struct tc_bw_result *mine, struct tc_bw_result *peer, uint32_t *peer_size);
/* Control messages 1-5: everything before the test connection. */
bool pt_exchange_setup(struct pt *t);
/* The bound of the closing exchanges, after a data phase perftest may
 * still be in for a while. */
uint64_t pt_after_data_ms(const struct pt *t);

/* perftest_data.c: the test connection's data phases */
/* Waits until at most `left` initiator requests are unfinished. */
bool pt_sq_wait(struct pt *t, uint64_t left, const char *what);
bool pt_client_bw(struct pt *t, struct tc_bw_samples *bw);
bool pt_server_send_bw(struct pt *t, struct tc_bw_samples *bw);
bool pt_pingpong_send(struct pt *t, struct tc_lat_samples *lat);
bool pt_pingpong_write(struct pt *t, struct tc_lat_samples *lat);

/* perftest_run.c: the whole sequence, each role */
int pt_client(struct pt *t);
int pt_server(struct pt *t);

#endif
