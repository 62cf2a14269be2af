/* An engine's spin before it sleeps (net/loop.h, loop_set_spin): after an
 * iteration that handled socket input, an event that comes within the spin
 * is taken without the thread sleeping; a loop that had no input (only its
 * doorbell), or a poll that may not wait, does not spin; a spin that finds
 * nothing ends, and the loop then sleeps. "Slept" is the thread's count
 * of voluntary context switches (getrusage RUSAGE_THREAD, ru_nvcsw): a
 * thread that blocks in epoll_wait adds one, one that yields does not.
 * An interface's engines spin as the open that started them asked
 * (EngineSpinMicroseconds: default, cap, NDK_OPEN_FLAG_NO_ENGINE_SPIN). */
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <stdlib.h>

#include "net/loop.h"
#include "objects.h"
#include "testlib.h"

/* Long enough that no scheduling delay ends a spin before the writer
 * thread writes; the cases that do not wait for it return long before. */
enum { LONG_SPIN_US = 10 * 1000 * 1000, SHORT_SPIN_US = 20 * 1000 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_fired;

static void on_readable(struct loop_watch *w, uint32_t events)
{
    char c;
    if ((events & EPOLLIN) && read(w->fd, &c, 1) == 1)
        g_fired++;
}

static long sleeps(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_nvcsw;
}

static void poll_once(struct loop *l, int max_wait_ms)
{
    pthread_mutex_lock(&g_lock);
    loop_poll(l, &g_lock, max_wait_ms);
    pthread_mutex_unlock(&g_lock);
}

struct side {
    struct loop l;
    struct loop_watch w;
    int p[2];
};

/* A loop watching a pipe, that has just handled one byte of input. */
static void side_open(struct side *s, unsigned spin_us)
{
    CHECK_EQ(loop_init(&s->l), 0);
    loop_set_spin(&s->l, spin_us);
    CHECK_EQ(pipe(s->p), 0);
    s->w = (struct loop_watch){0};
    CHECK_EQ(loop_watch_add(&s->l, &s->w, s->p[0], EPOLLIN, on_readable), 0);
    CHECK_EQ(write(s->p[1], "x", 1), 1);
    g_fired = 0;
    poll_once(&s->l, 5000);
    CHECK_EQ(g_fired, 1);
}

static void side_close(struct side *s)
{
    loop_watch_del(&s->l, &s->w);
    close(s->p[0]);
    close(s->p[1]);
    loop_fini(&s->l);
}

/* Writes one byte once the loop is inside loop_poll (fetch_gen odd). */
static void *write_when_polling(void *arg)
{
    struct side *s = arg;
    uint64_t end = tl_now_ns() + 5000000000ull;
    while (!(__atomic_load_n(&s->l.fetch_gen, __ATOMIC_SEQ_CST) & 1) && tl_now_ns() < end)
        sched_yield();
    CHECK_EQ(write(s->p[1], "y", 1), 1);
    return NULL;
}

static void t_input_during_spin_takes_no_sleep(void)
{
    struct side s;
    side_open(&s, LONG_SPIN_US);
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, write_when_polling, &s), 0);
    long before = sleeps();
    g_fired = 0;
    poll_once(&s.l, 5000);
    long slept = sleeps() - before;
    pthread_join(t, NULL);
    CHECK_EQ(g_fired, 1);
    CHECK_EQ(slept, 0);
    side_close(&s);
}

static void t_no_input_no_spin(void)
{
    struct side s;
    side_open(&s, LONG_SPIN_US);
    /* An iteration woken by the doorbell alone: the next one sleeps. */
    loop_wake(&s.l);
    poll_once(&s.l, 5000);
    long before = sleeps();
    uint64_t t0 = tl_now_ns();
    g_fired = 0;
    poll_once(&s.l, 20);
    CHECK_EQ(g_fired, 0);
    CHECK(sleeps() - before >= 1);
    CHECK(tl_now_ns() - t0 < 5000000000ull);
    side_close(&s);
}

static void t_no_wait_no_spin(void)
{
    struct side s;
    side_open(&s, LONG_SPIN_US);
    uint64_t t0 = tl_now_ns();
    poll_once(&s.l, 0);
    CHECK(tl_now_ns() - t0 < 5000000000ull);
    side_close(&s);
}

static void t_spin_ends_then_sleeps(void)
{
    struct side s;
    side_open(&s, SHORT_SPIN_US);
    long before = sleeps();
    uint64_t t0 = tl_now_ns();
    poll_once(&s.l, 100);
    uint64_t took = tl_now_ns() - t0;
    CHECK(sleeps() - before >= 1);
    CHECK(took >= (uint64_t)SHORT_SPIN_US * 1000u);
    CHECK(took < 5000000000ull);
    side_close(&s);
}

/* The spin of the engines an open of "lo" with these options starts
 * (the only open of lo: its close stops them again). */
static unsigned engine_spin(ULONG flags, ULONG spin_us)
{
    NDK_OPEN_OPTIONS o = {.Size = sizeof o, .Flags = flags, .MaxEngines = 1, .EngineSpinMicroseconds = spin_us};
    NDK_ADAPTER *ad = NULL;
    NTSTATUS st = ndk_open_adapter("lo", (NDK_VERSION){2, 1}, &o, &ad);
    CHECK_EQ(st, STATUS_SUCCESS);
    if (st != STATUS_SUCCESS)
        return ~0u;
    unsigned us = ((struct ndk_adapter_impl *)ad)->dev->engines[0].spin_us;
    ndk_close_adapter(ad);
    return us;
}

static void t_open_options(void)
{
    unsetenv("NDK_ENGINE_SPIN_US"); /* the cases below set it themselves */
    CHECK_EQ(engine_spin(0, 0), NDK_ENGINE_SPIN_US);
    CHECK_EQ(engine_spin(0, 7), 7);
    CHECK_EQ(engine_spin(0, 5000), NDK_ENGINE_SPIN_MAX_US);
    CHECK_EQ(engine_spin(NDK_OPEN_FLAG_NO_ENGINE_SPIN, 7), 0);
    /* The environment overrides every open. */
    setenv("NDK_ENGINE_SPIN_US", "0", 1);
    CHECK_EQ(engine_spin(0, 7), 0);
    setenv("NDK_ENGINE_SPIN_US", "3", 1);
    CHECK_EQ(engine_spin(NDK_OPEN_FLAG_NO_ENGINE_SPIN, 0), 3);
    unsetenv("NDK_ENGINE_SPIN_US");
}

int main(void)
{
    RUN(t_input_during_spin_takes_no_sleep);
    RUN(t_no_input_no_spin);
    RUN(t_no_wait_no_spin);
    RUN(t_spin_ends_then_sleeps);
    RUN(t_open_options);
    return tl_finish();
}
