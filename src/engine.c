/*
 * Progress engines: a device runs one per CPU it may use, each a thread
 * with its own event loop and callback queue, pinned to its CPU only once a
 * consumer's Affinity names it (ndk_engine_place); objects are placed on
 * them (docs/architecture.md, Engines).
 */
#include <stdlib.h>
#include <unistd.h>

#include "net/sys.h"
#include "objects.h"

/* initial-exec: read per poll and per callback; the default model of a
 * shared library makes every read a call to __tls_get_addr. */
static __thread bool on_engine __attribute__((tls_model("initial-exec")));

bool ndk_on_engine_thread(void)
{
    return on_engine;
}

static bool engine_idle(struct ndk_engine *e)
{
    pthread_mutex_lock(&e->cbq_lock);
    bool idle = !e->cbq_head;
    pthread_mutex_unlock(&e->cbq_lock);
    return idle;
}

/* The engine's thread holds its own lock except while it waits in
 * epoll_wait, runs unlocked handlers (loop_poll) or runs callbacks
 * (ndk_drain_callbacks); it takes the device lock only for device-wide
 * bookkeeping (docs/architecture.md, Threads and locks). */
static void *engine_main(void *arg)
{
    struct ndk_engine *e = arg;
    struct ndk_device *dev = e->dev;
    bool chores = e == ndk_dev_engine0(dev);
    uint64_t leases_aged_ms = 0;
    on_engine = true;
    pthread_mutex_lock(&e->lock);
    loop_set_owner(&e->loop);
    loop_set_spin(&e->loop, e->spin_us);
    __atomic_store_n(&e->tid, (int)gettid(), __ATOMIC_RELAXED);
    for (;;) {
        ndk_drain_callbacks(e);
        ndk_free_deferred(e);
        /* A rejecting socket still lingering on this engine (net/linger.h)
         * is waited for: closing it now would put our FIN right behind the
         * reject. */
        if (__atomic_load_n(&dev->stopping, __ATOMIC_ACQUIRE) && engine_idle(e) && !e->lingers.head)
            break;
        /* While busy pollers hold input leases, look at them every
         * millisecond: one that nobody renewed ends (ndk_qp_age_leases). */
        bool leases = chores && __atomic_load_n(&dev->input_leases, __ATOMIC_RELAXED) > 0;
        /* While QPs wait for a receive, look at their deadlines (and SRQs)
         * every 10 ms (dev->check_rx_waits). */
        bool waits = chores && __atomic_load_n(&dev->rx_waits, __ATOMIC_RELAXED) > 0;
        loop_poll(&e->loop, &e->lock, leases ? 1 : waits ? 10 : -1);
        uint64_t now = loop_now_ms();
        if (leases && now != leases_aged_ms) {
            leases_aged_ms = now;
            dev->age_leases(dev);
        }
        if (waits) {
            /* It may hand staged input to any engine's connector
             * (transport.h, input_pending): every engine's lock is held,
             * this one's (the first) already. */
            ndk_engines_lock_from(dev, 1);
            dev->check_rx_waits(dev);
            ndk_engines_unlock_from(dev, 1);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

/* The engines' spin before sleeping (net/loop.h, loop_set_spin): the
 * open's EngineSpinMicroseconds, which NDK_ENGINE_SPIN_US overrides for
 * every device of the process (0: none), so that a benchmark compares
 * with and without it unchanged. */
static unsigned spin_us_of(unsigned opt)
{
    const char *env = getenv("NDK_ENGINE_SPIN_US");
    if (!env || !*env)
        return opt;
    unsigned long v = strtoul(env, NULL, 10);
    return v > NDK_ENGINE_SPIN_MAX_US ? NDK_ENGINE_SPIN_MAX_US : (unsigned)v;
}

bool ndk_engines_start(struct ndk_device *dev, unsigned max, unsigned spin_us)
{
    spin_us = spin_us_of(spin_us);
    int cpus[NDK_MAX_ENGINES];
    int ncpus = ndk_thread_cpus(cpus, (int)NDK_MAX_ENGINES);
    unsigned n = ncpus > 0 ? (unsigned)ncpus : 1;
    /* NDK_MAX_ENGINES caps every device of the process, as MaxEngines
     * caps one: a benchmark compares engine counts without code changes. */
    const char *env = getenv("NDK_MAX_ENGINES");
    unsigned long cap = env ? strtoul(env, NULL, 10) : 0;
    if (cap && (!max || cap < max))
        max = (unsigned)(cap > NDK_MAX_ENGINES ? NDK_MAX_ENGINES : cap);
    if (max && n > max)
        n = max;
    dev->engines = calloc(n, sizeof *dev->engines);
    if (!dev->engines)
        return false;
    for (unsigned i = 0; i < n; i++) {
        struct ndk_engine *e = &dev->engines[i];
        e->dev = dev;
        e->index = i;
        e->cpu = -1;
        e->spin_us = spin_us;
        /* The thread inherits its creator's mask: with one CPU in it, that
         * is the only CPU the engine runs on. */
        e->only_cpu = ncpus == 1 ? cpus[0] : -1;
        pthread_mutex_init(&e->cbq_lock, NULL);
        pthread_mutex_init(&e->lock, NULL);
        if (loop_init(&e->loop) < 0) {
            pthread_mutex_destroy(&e->lock);
            pthread_mutex_destroy(&e->cbq_lock);
            goto fail;
        }
        dev->nengines = i + 1;
    }
    for (unsigned i = 0; i < n; i++) {
        struct ndk_engine *e = &dev->engines[i];
        if (!ndk_thread_start(&e->thread, engine_main, e))
            goto fail;
        e->thread_started = true;
        /* Each of several engines stands for one CPU (a lone engine for
         * none): it is pinned there once a consumer's Affinity names it
         * (ndk_engine_place). */
        if (n > 1)
            e->cpu = cpus[i];
    }
    return true;
fail:
    ndk_engines_stop(dev);
    ndk_engines_free(dev);
    return false;
}

void ndk_engines_stop(struct ndk_device *dev)
{
    pthread_mutex_lock(&dev->lock);
    __atomic_store_n(&dev->stopping, true, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&dev->lock);
    for (unsigned i = 0; i < dev->nengines; i++)
        loop_wake(&dev->engines[i].loop);
    for (unsigned i = 0; i < dev->nengines; i++)
        if (dev->engines[i].thread_started)
            ndk_thread_join(dev->engines[i].thread);
}

void ndk_engines_free(struct ndk_device *dev)
{
    for (unsigned i = 0; i < dev->nengines; i++) {
        struct ndk_engine *e = &dev->engines[i];
        loop_fini(&e->loop);
        pthread_mutex_destroy(&e->lock);
        pthread_mutex_destroy(&e->cbq_lock);
    }
    free(dev->engines);
    dev->engines = NULL;
    dev->nengines = 0;
}

/* Does the consumer's GROUP_AFFINITY name the engine's CPU? A processor
 * group is 64 CPUs; Linux numbers CPUs across groups. */
static bool affinity_names(const GROUP_AFFINITY *a, int cpu)
{
    if (cpu < 0 || (unsigned)cpu / 64u != a->Group)
        return false;
    return (a->Mask >> ((unsigned)cpu % 64u)) & 1u;
}

/* Counts obj's placement on e: the engine's load and its view's share. */
static struct ndk_engine *engine_take(struct ndk_adapter_impl *ad, struct ndk_engine *e)
{
    e->load++;
    ad->engine_load[e->index]++;
    return e;
}

/* Is a a better engine than b for a new object of view ad: fewer of the
 * view's objects, then less load? */
static bool engine_better(const struct ndk_adapter_impl *ad, const struct ndk_engine *a,
                          const struct ndk_engine *b)
{
    if (ad->engine_load[a->index] != ad->engine_load[b->index])
        return ad->engine_load[a->index] < ad->engine_load[b->index];
    return a->load < b->load;
}

/*
 * Without an affinity, a view's objects spread over the engines first,
 * and the device's load decides among engines where the view has as many:
 * one consumer's CQs then use every CPU. Two views of one process that
 * make their CQs in turn, one per connection end (bench/multiqp: a client
 * CQ, then a server CQ), so get both ends of a connection on one engine
 * and the connections spread over the engines; by device load alone, every
 * client CQ landed on one engine and every server CQ on the other, so
 * every message woke the other engine.
 */
struct ndk_engine *ndk_engine_place(struct ndk_adapter_impl *ad, const GROUP_AFFINITY *affinity)
{
    struct ndk_device *dev = ad->dev;
    struct ndk_engine *best = NULL;
    /* Affinity is a preference (NdkCreateCq): when none of its CPUs has an
     * engine, placement falls back to the other engines. */
    bool named = false;
    for (int pass = affinity && affinity->Mask ? 0 : 1; pass < 2 && !best; pass++) {
        for (unsigned i = 0; i < dev->nengines; i++) {
            struct ndk_engine *e = &dev->engines[i];
            if (pass == 0 && !affinity_names(affinity, e->cpu))
                continue;
            if (!best || engine_better(ad, e, best))
                best = e;
        }
        named = pass == 0;
    }
    engine_take(ad, best);
    /*
     * Pinned only on request: a pinned thread cannot move when others
     * load its CPU, and every hand-off to it then waits for that CPU (on a
     * shared 2-CPU machine, a 512 KiB Read over 276-octet segments took
     * more than 2 s pinned, 0.1 s unpinned). A consumer that names CPUs
     * asks for its callbacks there, and gets them there from now on.
     */
    if (named && !best->pinned) {
        best->pinned = ndk_thread_pin(best->thread, best->cpu);
        if (best->pinned)
            __atomic_store_n(&best->only_cpu, best->cpu, __ATOMIC_RELAXED);
    }
    return best;
}

/*
 * A listener's half-open connections move, at NdkAccept, to the engine of
 * the accepting QP's CQ (docs/architecture.md, Engines); a consumer that
 * accepts onto the CQs it created through the listener's view most often
 * finds the connection already there. On the least loaded engine instead,
 * a server with one CQ had every NdkAccept hand its connection to another
 * thread (another CPU): bench/connrate with two engines set up about a
 * third fewer connections per second.
 */
struct ndk_engine *ndk_engine_place_listener(struct ndk_adapter_impl *ad)
{
    if (!ad->cq_engine)
        return ndk_engine_place(ad, NULL);
    return engine_take(ad, ad->cq_engine);
}

void ndk_engine_unplace(struct ndk_obj *obj)
{
    obj->engine->load--;
    obj->ad->engine_load[obj->engine->index]--;
}
