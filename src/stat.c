/* The process's adapter list and the snapshot ndkstat reads (stat.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mem_internal.h"
#include "net/stat_server.h"
#include "objects.h"

/* lifecycle_lock (outer) orders starting and stopping the channel;
 * list_lock (inner, before any engine or device lock) guards the list. */
static pthread_mutex_t lifecycle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ndk_adapter_impl *adapters;
static unsigned nadapters;
static struct ndk_stat_server *server;

void ndk_stat_adapter_opened(struct ndk_adapter_impl *ad)
{
    pthread_mutex_lock(&lifecycle_lock);
    pthread_mutex_lock(&list_lock);
    ad->stat_next = adapters;
    adapters = ad;
    bool first = nadapters++ == 0;
    pthread_mutex_unlock(&list_lock);
    if (first)
        server = ndk_stat_server_start(ndk_stat_snapshot);
    pthread_mutex_unlock(&lifecycle_lock);
}

void ndk_stat_adapter_closing(struct ndk_adapter_impl *ad)
{
    pthread_mutex_lock(&lifecycle_lock);
    pthread_mutex_lock(&list_lock);
    for (struct ndk_adapter_impl **p = &adapters; *p; p = &(*p)->stat_next) {
        if (*p == ad) {
            *p = ad->stat_next;
            nadapters--;
            break;
        }
    }
    bool last = nadapters == 0;
    pthread_mutex_unlock(&list_lock);
    if (last && server) {
        ndk_stat_server_stop(server); /* its thread may be waiting for list_lock: not held */
        server = NULL;
    }
    pthread_mutex_unlock(&lifecycle_lock);
}

static void dp_stats_add(struct ndk_dp_stats *to, const struct ndk_dp_stats *from)
{
    for (int i = 0; i < NDK_STAT_OPS; i++) {
        to->tx_fpdus[i] += NDK_STAT_GET(from->tx_fpdus[i]);
        to->tx_bytes[i] += NDK_STAT_GET(from->tx_bytes[i]);
        to->rx_fpdus[i] += NDK_STAT_GET(from->rx_fpdus[i]);
        to->rx_bytes[i] += NDK_STAT_GET(from->rx_bytes[i]);
    }
    to->cqe_success += NDK_STAT_GET(from->cqe_success);
    to->cqe_cancelled += NDK_STAT_GET(from->cqe_cancelled);
    to->cqe_error += NDK_STAT_GET(from->cqe_error);
    to->nudges += NDK_STAT_GET(from->nudges);
}

void ndk_stat_qp_retire(struct ndk_qp_impl *qp)
{
    struct ndk_adapter_stats *st = &qp->obj.ad->st;
    dp_stats_add(&st->closed, &qp->dp.st);
    st->term_tx += NDK_STAT_GET(qp->dp.st.term_tx) != 0;
    st->term_rx += NDK_STAT_GET(qp->dp.st.term_rx) != 0;
}

static const char *const op_names[NDK_STAT_OPS] = {
    "write", "read_req", "read_resp", "send", "send_inv", "send_se", "send_se_inv", "terminate",
};

static void put_dp(FILE *f, const struct ndk_dp_stats *s)
{
    for (int i = 0; i < NDK_STAT_OPS; i++)
        fprintf(f, " fpdus_out_%s=%llu bytes_out_%s=%llu fpdus_in_%s=%llu bytes_in_%s=%llu",
                op_names[i], (unsigned long long)NDK_STAT_GET(s->tx_fpdus[i]), op_names[i],
                (unsigned long long)NDK_STAT_GET(s->tx_bytes[i]), op_names[i],
                (unsigned long long)NDK_STAT_GET(s->rx_fpdus[i]), op_names[i],
                (unsigned long long)NDK_STAT_GET(s->rx_bytes[i]));
}

static void put_term(FILE *f, const char *key, uint32_t t)
{
    if (t)
        fprintf(f, " %s=%u/%u/0x%02x", key, (t >> 16) & 0xff, (t >> 8) & 0xff, t & 0xff);
    else
        fprintf(f, " %s=none", key);
}

static const char *conn_state_name(enum conn_state s)
{
    static const char *const n[] = {"idle",     "tcp",       "mpa_reply", "replied",       "shm_rendezvous",
                                    "incoming", "accepting", "connected", "disconnecting", "closed"};
    return (unsigned)s < sizeof n / sizeof n[0] ? n[s] : "?";
}

static void put_conn(FILE *f, struct ndk_connector_impl *c)
{
    char la[NDK_LOG_ADDR_LEN], pa[NDK_LOG_ADDR_LEN];
    bool negotiated = c->state >= CONN_REPLIED && c->state != CONN_INCOMING;
    fprintf(f, "conn id=%u adapter=%u engine=%u state=%s role=%s transport=tcp local=%s peer=%s qp=%u",
            c->obj.id, c->obj.ad->obj.id, c->obj.engine->index, conn_state_name(c->state), c->passive ? "passive" : "active",
            ndk_log_addr(&c->local, la), ndk_log_addr(&c->peer, pa), c->qp ? c->qp->obj.id : 0);
    if (negotiated || c->state == CONN_INCOMING)
        fprintf(f, " mpa_rev=%u enhanced=%d crc=%d rtr=%s ird=%lu ord=%lu", c->neg.rev, c->neg.enhanced,
                c->neg.crc, !c->neg.p2p ? "none" : c->neg.rtr == MPA_RTR_WRITE ? "write" : "read",
                (unsigned long)(negotiated ? c->neg.eff_ird : c->neg.want_ird),
                (unsigned long)(negotiated ? c->neg.eff_ord : c->neg.want_ord));
    if (c->qp && c->dp_started) {
        put_dp(f, &c->qp->dp.st);
        fprintf(f, " nudges_out=%llu", (unsigned long long)NDK_STAT_GET(c->qp->dp.st.nudges));
        put_term(f, "terminate_sent", NDK_STAT_GET(c->qp->dp.st.term_tx));
        put_term(f, "terminate_received", NDK_STAT_GET(c->qp->dp.st.term_rx));
    }
    fputc('\n', f);
}

static void put_qp(FILE *f, struct ndk_qp_impl *qp)
{
    struct ndk_qp_dp *dp = &qp->dp;
    static const char *const kinds[] = {"send", "write", "read", "bind", "fast_register", "invalidate"};
    unsigned out[6] = {0};
    pthread_mutex_lock(&dp->sq_lock);
    if (dp->sq)
        for (uint32_t i = 0; i < dp->sq_count; i++) {
            const struct ndk_swqe *w = &dp->sq[qp_sq_idx(qp, dp->sq_head + i)];
            if (w->op < 6)
                out[w->op]++;
        }
    uint32_t reads_out = dp->reads_out, irq = dp->irq_count;
    const char *transport = dp->xp ? dp->xp->name : "none";
    pthread_mutex_unlock(&dp->sq_lock);
    pthread_mutex_lock(&dp->rq_lock);
    uint32_t rq = dp->rq_count;
    pthread_mutex_unlock(&dp->rq_lock);
    static const char *const states[] = {"idle", "rts", "error"};
    enum qp_state st = dp->state; /* an _Atomic field: an atomic load */
    fprintf(f, "qp id=%u adapter=%u engine=%u state=%s conn=%u pd=%u rcq=%u icq=%u srq=%u rq_depth=%lu"
               " iq_depth=%lu rq_posted=%u transport=%s",
            qp->obj.id, qp->obj.ad->obj.id, qp->obj.engine->index, (unsigned)st < 3 ? states[st] : "?",
            qp->conn ? qp->conn->obj.id : 0, qp->pd->obj.id, qp->rcq->obj.id, qp->icq->obj.id,
            dp->srq ? dp->srq->obj.id : 0, (unsigned long)qp->rq_depth, (unsigned long)qp->iq_admit, rq, transport);
    for (int i = 0; i < 6; i++)
        fprintf(f, " out_%s=%u", kinds[i], out[i]);
    fprintf(f, " reads_awaiting_response=%u inbound_reads=%u completions_success=%llu"
               " completions_cancelled=%llu completions_error=%llu\n",
            reads_out, irq, (unsigned long long)NDK_STAT_GET(dp->st.cqe_success),
            (unsigned long long)NDK_STAT_GET(dp->st.cqe_cancelled),
            (unsigned long long)NDK_STAT_GET(dp->st.cqe_error));
}

static void put_cq(FILE *f, struct ndk_cq_impl *cq)
{
    pthread_mutex_lock(&cq->lock);
    unsigned long depth = cq->depth, count = ndk_cq_waiting(cq);
    int armed = cq->armed;
    bool over = cq->overflowed;
    pthread_mutex_unlock(&cq->lock);
    fprintf(f, "cq id=%u adapter=%u engine=%u depth=%lu waiting=%lu armed=%s overflowed=%d\n",
            cq->obj.id, cq->obj.ad->obj.id, cq->obj.engine->index, depth, count,
            armed < 0 ? "no" : armed == NDK_CQ_NOTIFY_SOLICITED ? "solicited" : "any", over);
}

static void put_srq(FILE *f, struct ndk_srq_impl *srq)
{
    pthread_mutex_lock(&srq->lock);
    unsigned long depth = srq->depth, count = srq->count, thr = srq->threshold;
    bool armed = srq->armed;
    pthread_mutex_unlock(&srq->lock);
    fprintf(f, "srq id=%u adapter=%u engine=%u depth=%lu posted=%lu armed=%d threshold=%lu\n",
            srq->obj.id, srq->obj.ad->obj.id, srq->obj.engine->index, depth, count, armed, thr);
}

static void put_listener(FILE *f, struct ndk_listener_impl *l)
{
    char la[NDK_LOG_ADDR_LEN];
    fprintf(f, "listener id=%u adapter=%u engine=%u local=%s listening=%d paused=%d backlog_used=%u"
               " halfopen=%u\n",
            l->obj.id, l->obj.ad->obj.id, l->obj.engine->index, ndk_log_addr(&l->local, la), l->listening, l->paused,
            l->backlog_used, l->halfopen.count);
}

/* The device's progress engines, under each of its views. */
static void put_engines(FILE *f, struct ndk_adapter_impl *ad)
{
    for (unsigned i = 0; i < ad->dev->nengines; i++) {
        struct ndk_engine *e = &ad->dev->engines[i];
        fprintf(f, "engine id=%u adapter=%u cpu=%d pinned=%d tid=%d load=%u callbacks=%llu spin_us=%u\n",
                e->index, ad->obj.id, e->cpu, e->pinned, __atomic_load_n(&e->tid, __ATOMIC_RELAXED), e->load,
                (unsigned long long)__atomic_load_n(&e->callbacks_run, __ATOMIC_RELAXED), e->spin_us);
    }
}

/* Every engine's lock and the device lock held (connectors' and
 * listeners' state is their engines'). One adapter line per view (adapter instance): it lists
 * and sums only the objects created through this view (ad->objects), not
 * those of other views of the same device; the engines (and progress_tid,
 * the first engine's thread) are the device's, shared by its views. */
static void put_adapter(FILE *f, struct ndk_adapter_impl *ad)
{
    struct ndk_dp_stats sum = {0};
    dp_stats_add(&sum, &ad->st.closed);
    uint64_t term_tx = ad->st.term_tx + NDK_STAT_GET(ad->st.setup_term_tx);
    uint64_t term_rx = ad->st.term_rx + NDK_STAT_GET(ad->st.setup_term_rx);
    uint64_t mrs = 0, mr_bytes = 0;
    unsigned n[NdkObjectTypeMax] = {0};
    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        if (o->destroyed)
            continue;
        if ((unsigned)o->type < NdkObjectTypeMax)
            n[o->type]++;
        if (o->type == NdkObjectTypeQp) {
            struct ndk_qp_impl *qp = container_of(o, struct ndk_qp_impl, obj);
            dp_stats_add(&sum, &qp->dp.st);
            term_tx += NDK_STAT_GET(qp->dp.st.term_tx) != 0;
            term_rx += NDK_STAT_GET(qp->dp.st.term_rx) != 0;
        } else if (o->type == NdkObjectTypeMr) {
            uint64_t len = mem_entry_registered_len(ad->dev->mem, mem_object_entry(&o->pub, NdkObjectTypeMr, NULL));
            mrs += len != 0;
            mr_bytes += len;
        }
    }
    const struct ndk_adapter_stats *s = &ad->st;
    fprintf(f,
            "adapter id=%u name=%s ifindex=%u version=%u.%u engines=%u progress_tid=%d busy_poll=%d"
            " pd_count=%u cq_count=%u qp_count=%u srq_count=%u mr_count=%u mw_count=%u"
            " connector_count=%u listener_count=%u shared_endpoint_count=%u registered_mrs=%llu"
            " registered_bytes=%llu"
            " connect_ok=%llu connect_refused=%llu connect_failed=%llu requests=%llu"
            " requests_refused=%llu accept_ok=%llu accept_failed=%llu rejected=%llu"
            " terminates_sent=%llu terminates_received=%llu",
            ad->obj.id, ad->dev->name, ad->dev->ifindex, ad->version.Major, ad->version.Minor,
            ad->dev->nengines, __atomic_load_n(&ndk_dev_engine0(ad->dev)->tid, __ATOMIC_RELAXED), ad->busy_poll, n[NdkObjectTypePd],
            n[NdkObjectTypeCq], n[NdkObjectTypeQp], n[NdkObjectTypeSrq], n[NdkObjectTypeMr],
            n[NdkObjectTypeMw], n[NdkObjectTypeConnector], n[NdkObjectTypeListener],
            n[NdkObjectTypeSharedEndpoint], (unsigned long long)mrs, (unsigned long long)mr_bytes,
            (unsigned long long)NDK_STAT_GET(s->connect_ok), (unsigned long long)NDK_STAT_GET(s->connect_refused),
            (unsigned long long)NDK_STAT_GET(s->connect_failed), (unsigned long long)NDK_STAT_GET(s->requests),
            (unsigned long long)NDK_STAT_GET(s->requests_refused), (unsigned long long)NDK_STAT_GET(s->accept_ok),
            (unsigned long long)NDK_STAT_GET(s->accept_failed), (unsigned long long)NDK_STAT_GET(s->rejected),
            (unsigned long long)term_tx, (unsigned long long)term_rx);
    put_dp(f, &sum);
    fprintf(f, " completions_success=%llu completions_cancelled=%llu completions_error=%llu\n",
            (unsigned long long)sum.cqe_success, (unsigned long long)sum.cqe_cancelled,
            (unsigned long long)sum.cqe_error);
    put_engines(f, ad);

    for (struct ndk_obj *o = ad->objects; o; o = o->all_next) {
        if (o->destroyed)
            continue;
        switch (o->type) {
        case NdkObjectTypeListener: put_listener(f, container_of(o, struct ndk_listener_impl, obj)); break;
        case NdkObjectTypeConnector: put_conn(f, container_of(o, struct ndk_connector_impl, obj)); break;
        case NdkObjectTypeQp: put_qp(f, container_of(o, struct ndk_qp_impl, obj)); break;
        case NdkObjectTypeCq: put_cq(f, container_of(o, struct ndk_cq_impl, obj)); break;
        case NdkObjectTypeSrq: put_srq(f, container_of(o, struct ndk_srq_impl, obj)); break;
        default: break;
        }
    }
}

char *ndk_stat_snapshot(size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    pthread_mutex_lock(&list_lock);
    fprintf(f, "process pid=%ld uid=%ld adapters=%u\n", (long)getpid(), (long)geteuid(), nadapters);
    for (struct ndk_adapter_impl *ad = adapters; ad; ad = ad->stat_next) {
        ndk_engines_lock_from(ad->dev, 0);
        pthread_mutex_lock(&ad->dev->lock);
        put_adapter(f, ad);
        pthread_mutex_unlock(&ad->dev->lock);
        ndk_engines_unlock_from(ad->dev, 0);
    }
    pthread_mutex_unlock(&list_lock);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}
