/*
 * perftest_ctl.c - ndkperf --perftest's control connection (perftest.h):
 * bounded waits, the control messages, perftest's pingpong_dest and
 * results exchanges.
 */
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "lib/bytes.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "ndkperf/perftest.h"

/* The pingpong_dest exchanges before the data phase (perftest.h); send_lat
 * has its fourth before each size (run_lat). */
unsigned pt_dests_before(enum test_kind t)
{
    return t == T_WRITE_LAT || t == T_SEND_BW ? 4 : 3;
}

static uint64_t dbl_bits(double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    return v;
}

static double bits_dbl(uint64_t v)
{
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

void pt_dest_put(uint8_t *p, const struct pt_dest *d)
{
    memset(p, 0, PT_DEST_LEN);
    tc_put_be32(p, d->lid);
    tc_put_be32(p + 4, d->out_reads);
    tc_put_be32(p + 8, d->qpn);
    tc_put_be32(p + 12, d->psn);
    tc_put_be32(p + 16, d->rkey);
    tc_put_be64(p + 24, d->vaddr);
    memcpy(p + 32, d->gid, 16);
    tc_put_be32(p + 48, d->srqn);
    tc_put_be32(p + 52, d->gid_index);
}

static void pt_dest_get(const uint8_t *p, struct pt_dest *d)
{
    d->lid = tc_get_be32(p);
    d->out_reads = tc_get_be32(p + 4);
    d->qpn = tc_get_be32(p + 8);
    d->psn = tc_get_be32(p + 12);
    d->rkey = tc_get_be32(p + 16);
    d->vaddr = tc_get_be64(p + 24);
    memcpy(d->gid, p + 32, 16);
    d->srqn = tc_get_be32(p + 48);
    d->gid_index = tc_get_be32(p + 52);
}

void pt_hexdump(const char *role, const char *what, const uint8_t *p, uint32_t len)
{
    char line[3 * CTRL_SLOT + 1];
    size_t n = 0;
    for (uint32_t i = 0; i < len && i < CTRL_SLOT; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%02x", p[i]);
    line[n] = '\0';
    tc_complain(role, "%s: %" PRIu32 " bytes: %s", what, len, line);
}

void pt_bound_start(struct clock_bound *b, uint64_t ms)
{
    b->start = tc_now_ns();
    b->limit_ns = ms * 1000000u;
    b->polls = 0;
    b->peer_left = false;
}

/*
 * The peer's disconnects, seen from a wait. Once the data phase is over
 * the test connection may end at any time (perftest closes it right after
 * the closing exchange, and its FIN may arrive before the last control
 * message): it is answered, and is no failure. A disconnect that ends the
 * wait does so only after one more poll, so that what the peer sent before
 * it left is taken first. True when the wait must end.
 */
static bool peer_gone(struct pt *t, struct clock_bound *b, const char *what)
{
    bool tst_gone = ep_peer_left(&t->tst, 0);
    if (tst_gone && !t->tst_ready)
        ep_disconnect_begin(&t->tst);
    const char *which = t->ctl_ready && ep_peer_left(&t->ctl, 0) ? "control"
                        : t->tst_ready && tst_gone                        ? "test"
                                                                           : NULL;
    if (!which)
        return false;
    if (!b->peer_left) {
        b->peer_left = true;
        return false;
    }
    tc_complain(t->role, "the peer closed the %s connection while this side waited for %s", which, what);
    return true;
}

/* Called once per empty poll: yields, and every POLLS_PER_CLOCK polls
 * looks at the clock and the connections. */
bool pt_bound_ok(struct pt *t, struct clock_bound *b, const char *what)
{
    if (t->o.wait != TC_WAIT_SPIN)
        sched_yield();
    if (++b->polls % POLLS_PER_CLOCK)
        return true;
    if (peer_gone(t, b, what))
        return false;
    if (tc_now_ns() - b->start > b->limit_ns) {
        tc_complain(t->role, "nothing came for %.1f s while waiting for %s", (double)b->limit_ns / 1e9, what);
        return false;
    }
    return true;
}

/* Takes what the control CQ holds: Send completions are counted, received
 * messages queued (and their receives posted again at once). */
bool pt_ctl_poll(struct pt *t)
{
    struct endpoint *e = &t->ctl;
    NDK_RESULT r[CQ_BATCH];
    unsigned n = cq_take(e, r, CQ_BATCH);
    for (unsigned i = 0; i < n; i++) {
        if (r[i].Status != STATUS_SUCCESS) {
            tc_complain(t->role, "a control %s completed with %s", WR_KIND(r[i].RequestContext) == WR_SQ ? "Send" : "receive",
                     ndk_status_name(r[i].Status));
            return false;
        }
        if (WR_KIND(r[i].RequestContext) == WR_SQ) {
            t->ctl_done++;
            continue;
        }
        uint32_t slot = (uint32_t)WR_VAL(r[i].RequestContext);
        if (slot >= CTL_SLOTS || t->in_count == CTL_SLOTS) {
            tc_library_problem(t->role, "a control receive completion ndkperf cannot place (slot %" PRIu32 ")", slot);
            return false;
        }
        struct ctl_msg *m = &t->inbox[(t->in_head + t->in_count++) % CTL_SLOTS];
        m->len = r[i].BytesTransferred < CTRL_SLOT ? r[i].BytesTransferred : CTRL_SLOT;
        memcpy(m->data, e->ctrl_rx + (size_t)slot * CTRL_SLOT, m->len);
        if (t->trace)
            pt_hexdump(t->role, "trace: control message in", m->data, m->len);
        if (!post_ctrl_recv(&t->ctl, slot, CTRL_SLOT))
            return false;
    }
    return true;
}

bool pt_ctl_send(struct pt *t, const void *data, uint32_t len)
{
    struct endpoint *e = &t->ctl;
    /* One Send at a time: the slot is free once the last one completed. */
    struct clock_bound b;
    pt_bound_start(&b, t->o.timeout_ms);
    while (t->ctl_done < t->ctl_sent) {
        if (!pt_ctl_poll(t))
            return false;
        if (t->ctl_done < t->ctl_sent && !pt_bound_ok(t, &b, "the completion of a control Send"))
            return false;
    }
    memcpy(e->ctrl_tx, data, len);
    if (t->trace)
        pt_hexdump(t->role, "trace: control message out", e->ctrl_tx, len);
    NDK_SGE sge = {.VirtualAddress = e->ctrl_tx, .Length = len, .MemoryRegionToken = e->ltoken};
    NTSTATUS st = e->c.qp->Dispatch->NdkSend(e->c.qp, WR_CTX(WR_SQ, t->ctl_sent + 1), &sge, 1, 0);
    if (st != STATUS_SUCCESS) {
        tc_ndk_failed(t->role, "NdkSend", st, "control message of %" PRIu32 " bytes", len);
        return false;
    }
    t->ctl_sent++;
    return true;
}

/* The next control message, waiting at most ms. */
bool pt_ctl_recv(struct pt *t, struct ctl_msg *out, uint64_t ms, const char *what)
{
    struct clock_bound b;
    pt_bound_start(&b, ms);
    while (t->in_count == 0) {
        if (!pt_ctl_poll(t))
            return false;
        if (t->in_count == 0 && !pt_bound_ok(t, &b, what))
            return false;
    }
    *out = t->inbox[t->in_head];
    t->in_head = (t->in_head + 1) % CTL_SLOTS;
    t->in_count--;
    return true;
}

/*
 * One exchange: the client sends `out` and then reads the answer; the
 * server reads first and answers. With echo, the server answers with what
 * it got (the values where perftest takes either side's). The answer must
 * have `want` bytes.
 */
bool pt_xchg(struct pt *t, const uint8_t *out, uint32_t len, bool echo, struct ctl_msg *in, uint32_t want,
                 uint64_t ms, const char *what)
{
    char label[160];
    snprintf(label, sizeof label, "the peer's %s (perftest control message)", what);
    if (!t->p.server && !pt_ctl_send(t, out, len))
        return false;
    if (!pt_ctl_recv(t, in, ms, label))
        return false;
    if (in->len != want) {
        pt_hexdump(t->role, "unexpected control message", in->data, in->len);
        tc_complain(t->role, "expected the peer's %s, %" PRIu32 " bytes: is the peer perftest %s with the same test "
                          "and options?",
                 what, want, PT_VERSION);
        return false;
    }
    if (t->p.server && !pt_ctl_send(t, echo ? in->data : out, echo ? in->len : len))
        return false;
    return true;
}

bool pt_xchg_dest(struct pt *t, const char *what, uint64_t ms)
{
    uint8_t buf[PT_DEST_LEN];
    struct ctl_msg in;
    pt_dest_put(buf, &t->mine);
    if (!pt_xchg(t, buf, sizeof buf, false, &in, PT_DEST_LEN, ms, what))
        return false;
    pt_dest_get(in.data, &t->peer);
    return true;
}

/* The closing exchanges come after the data phase, which perftest's
 * peer may still be in for a while (-D, or a slow link): a longer bound. */
uint64_t pt_after_data_ms(const struct pt *t)
{
    return (uint64_t)t->o.accept_timeout_ms + (uint64_t)t->p.duration_s * 1000u;
}


/* The results exchange of write_bw and read_bw: the client's numbers go
 * to the server, which prints them (it has measured nothing itself). */
bool pt_xchg_report(struct pt *t, const struct tc_bw_result *mine, struct tc_bw_result *peer, uint32_t *peer_size)
{
    uint64_t f[PT_REPORT_FIELDS] = {t->p.size, mine->msgs, dbl_bits(mine->peak), dbl_bits(mine->avg),
                                    dbl_bits(mine->rate)};
    uint64_t g[PT_REPORT_FIELDS];
    static const char *const names[PT_REPORT_FIELDS] = {"report: size", "report: iterations", "report: BW peak",
                                                        "report: BW average", "report: message rate"};
    for (int i = 0; i < PT_REPORT_FIELDS; i++) {
        uint8_t buf[8];
        struct ctl_msg in;
        tc_put_be64(buf, f[i]);
        if (!pt_xchg(t, buf, 8, false, &in, 8, t->o.timeout_ms, names[i]))
            return false;
        g[i] = tc_get_be64(in.data);
    }
    *peer_size = (uint32_t)g[0];
    peer->msgs = g[1];
    peer->peak = bits_dbl(g[2]);
    peer->avg = bits_dbl(g[3]);
    peer->rate = bits_dbl(g[4]);
    return true;
}

/* Control messages 1-5: everything before the test connection. */
bool pt_exchange_setup(struct pt *t)
{
    struct ctl_msg in;
    uint8_t buf[PT_DEST_LEN];

    /* 1-4: version, cycle buffer, cache line, MTU. */
    memset(buf, 0, sizeof buf);
    memcpy(buf, PT_VERSION, strlen(PT_VERSION));
    if (!pt_xchg(t, buf, PT_VERSION_LEN, false, &in, PT_VERSION_LEN, t->o.timeout_ms, "version"))
        return false;
    memcpy(t->peer_version, in.data, PT_VERSION_LEN);
    t->peer_version[PT_VERSION_LEN] = '\0';
    if (strcmp(t->peer_version, PT_VERSION) != 0)
        tc_complain(t->role, "warning: the peer is perftest \"%s\"; this protocol was recorded from %s",
                 t->peer_version, PT_VERSION);
    tc_put_be32(buf, PT_CYCLE_BUFFER);
    if (!pt_xchg(t, buf, 4, true, &in, 4, t->o.timeout_ms, "cycle buffer size"))
        return false;
    tc_put_be32(buf, PT_CACHE_LINE);
    if (!pt_xchg(t, buf, 4, true, &in, 4, t->o.timeout_ms, "cache line size"))
        return false;
    if (!pt_xchg(t, (const uint8_t *)PT_MTU, sizeof PT_MTU, true, &in, sizeof PT_MTU, t->o.timeout_ms, "MTU"))
        return false;
    /* 5: zeros, then the test connection. */
    memset(buf, 0, sizeof buf);
    if (!pt_xchg(t, buf, PT_DEST_LEN, false, &in, PT_DEST_LEN, t->o.timeout_ms, "first synchronisation"))
        return false;
    return true;
}

/*
 * The end of the data phase: from here on the peer may close the test
 * connection (see peer_gone). With
 * NDKPERF_PERFTEST_CLOSE=test-first this side ends the test connection as
 * soon as its data phase is over, and waits for the peer's answer before
 * the closing exchange on the control connection. perftest closes its
 * connections right after that exchange, so its FIN on the test connection
 * and its last control message reach us in either order; this makes the
 * FIN-first order certain, for the tests.
 */
