/* loop_unlocked_barrier (net/loop.h), on which the shared-memory
 * transport's detach relies before it frees a connection its engine's loop
 * watches (docs/shm.md, Liveness and lifetimes): a watch served only by its
 * unlocked handler is deleted without the loop's lock, and the barrier
 * returns only once a handler already running for it has returned; on a
 * loop asleep in epoll_wait it wakes the loop instead of waiting forever;
 * between iterations it returns at once. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net/loop.h"
#include "testlib.h"

#define WAIT_MS 5000
#define QUIET_MS 100 /* "the barrier has not returned": short, never zero */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct loop g_loop;
static tl_event g_entered, g_release, g_polled, g_passed;
static int g_handler_done; /* atomic */
static int g_done_at_barrier;

/* One iteration of the loop, with at most wait_ms of waiting. */
static void *poll_once(void *arg)
{
    int wait_ms = (int)(intptr_t)arg;
    pthread_mutex_lock(&g_lock);
    loop_poll(&g_loop, &g_lock, wait_ms);
    pthread_mutex_unlock(&g_lock);
    tl_event_signal(&g_polled);
    return NULL;
}

static bool slow_handler(struct loop_watch *w, uint32_t events)
{
    (void)w, (void)events;
    tl_event_signal(&g_entered);
    tl_event_wait(&g_release, 1, WAIT_MS);
    __atomic_store_n(&g_handler_done, 1, __ATOMIC_SEQ_CST);
    return true;
}

static void never_locked(struct loop_watch *w, uint32_t events)
{
    (void)w, (void)events;
    CHECK(!"an event an unlocked handler took reached the locked dispatch");
}

static void *barrier_then_look(void *arg)
{
    (void)arg;
    loop_unlocked_barrier(&g_loop);
    g_done_at_barrier = __atomic_load_n(&g_handler_done, __ATOMIC_SEQ_CST);
    tl_event_signal(&g_passed);
    return NULL;
}

static void events_init(void)
{
    tl_event_init(&g_entered);
    tl_event_init(&g_release);
    tl_event_init(&g_polled);
    tl_event_init(&g_passed);
    g_handler_done = 0;
    g_done_at_barrier = -1;
}

static void events_destroy(void)
{
    tl_event_destroy(&g_entered);
    tl_event_destroy(&g_release);
    tl_event_destroy(&g_polled);
    tl_event_destroy(&g_passed);
}

/* A handler inside its work when its watch is deleted: the barrier waits
 * for it to return, and what it did is seen after the barrier. */
static void t_barrier_waits_for_running_handler(void)
{
    events_init();
    REQUIRE(loop_init(&g_loop) == 0);
    int p[2];
    REQUIRE(pipe(p) == 0);
    CHECK_EQ(write(p[1], "x", 1), 1);
    struct loop_watch w = {0};
    loop_watch_allow_unlocked(&w);
    loop_watch_set_unlocked(&w, slow_handler);
    /* Served only unlocked: added and deleted without the loop's lock. */
    CHECK_EQ(loop_watch_add(&g_loop, &w, p[0], EPOLLIN, never_locked), 0);
    pthread_t t, b;
    REQUIRE(pthread_create(&t, NULL, poll_once, (void *)(intptr_t)WAIT_MS) == 0);
    REQUIRE(tl_event_wait(&g_entered, 1, WAIT_MS));
    loop_watch_del(&g_loop, &w);
    REQUIRE(pthread_create(&b, NULL, barrier_then_look, NULL) == 0);
    CHECK(!tl_event_wait(&g_passed, 1, QUIET_MS));
    tl_event_signal(&g_release);
    CHECK(tl_event_wait(&g_passed, 1, WAIT_MS));
    CHECK_EQ(g_done_at_barrier, 1);
    CHECK(tl_event_wait(&g_polled, 1, WAIT_MS));
    pthread_join(b, NULL);
    pthread_join(t, NULL);
    close(p[0]);
    close(p[1]);
    loop_fini(&g_loop);
    events_destroy();
}

/* A loop asleep in epoll_wait with no timeout and nothing to deliver: the
 * barrier wakes it, and returns once that iteration's unlocked part is
 * over. Between iterations it returns at once. */
static void t_barrier_wakes_sleeping_loop(void)
{
    events_init();
    REQUIRE(loop_init(&g_loop) == 0);
    loop_unlocked_barrier(&g_loop); /* no iteration ever ran */
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, poll_once, (void *)(intptr_t)-1) == 0);
    /* Inside the iteration (before or in epoll_wait): fetch_gen is odd. */
    uint64_t end = tl_now_ns() + (uint64_t)WAIT_MS * 1000000;
    while (!(__atomic_load_n(&g_loop.fetch_gen, __ATOMIC_SEQ_CST) & 1) && tl_now_ns() < end)
        sched_yield();
    REQUIRE(__atomic_load_n(&g_loop.fetch_gen, __ATOMIC_SEQ_CST) & 1);
    loop_unlocked_barrier(&g_loop);
    CHECK(!(__atomic_load_n(&g_loop.fetch_gen, __ATOMIC_SEQ_CST) & 1));
    CHECK(tl_event_wait(&g_polled, 1, WAIT_MS));
    pthread_join(t, NULL);
    loop_unlocked_barrier(&g_loop); /* between iterations again */
    loop_fini(&g_loop);
    events_destroy();
}

int main(void)
{
    RUN(t_barrier_waits_for_running_handler);
    RUN(t_barrier_wakes_sleeping_loop);
    return tl_finish();
}
