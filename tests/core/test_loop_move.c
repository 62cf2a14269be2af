/* Moving a socket's watch between two engines' loops (net/loop.h,
 * loop_watch_move, used when NdkConnect or NdkAccept places a connection
 * on its QP's engine): the watch is on exactly one loop before and after,
 * and a move epoll refuses leaves it where it was, still delivering. A
 * watch's unlocked handler (loop_watch_set_unlocked, a connection's data
 * path) gets its events without the lock, on either loop, and hands back
 * those it declines. A watch that takes over another's registration
 * (loop_watch_take_over, a listener handing an accepted socket to its
 * connector) gets the descriptor's events from then on, the other none,
 * whether the two are on one loop or two. */
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "net/loop.h"
#include "testlib.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned g_fired;

static void on_readable(struct loop_watch *w, uint32_t events)
{
    (void)w;
    if (events & EPOLLIN)
        g_fired++;
}

/* How many times the watch fired during one bounded poll of l. */
static unsigned fired_on(struct loop *l)
{
    g_fired = 0;
    pthread_mutex_lock(&g_lock);
    loop_poll(l, &g_lock, 50);
    pthread_mutex_unlock(&g_lock);
    return g_fired;
}

/* Two loops and a pipe whose read end is readable from now on
 * (level-triggered: every poll of a loop watching it reports it). */
static void two_loops_up(struct loop *a, struct loop *b, int p[2])
{
    CHECK_EQ(loop_init(a), 0);
    CHECK_EQ(loop_init(b), 0);
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "x", 1), 1);
}

static void two_loops_down(struct loop *a, struct loop *b, int p[2])
{
    close(p[0]);
    close(p[1]);
    loop_fini(a);
    loop_fini(b);
}

static void t_refused_move_keeps_watch(void)
{
    struct loop a, b;
    int p[2];
    two_loops_up(&a, &b, p);

    struct loop_watch w = {0}, squatter = {0};
    CHECK_EQ(loop_watch_add(&a, &w, p[0], EPOLLIN, on_readable), 0);
    /* The same descriptor already in b: epoll refuses a second ADD. */
    CHECK_EQ(loop_watch_add(&b, &squatter, p[0], EPOLLIN, on_readable), 0);
    CHECK(loop_watch_move(&b, &w) < 0);
    CHECK(w.added);
    CHECK(w.loop == &a);
    CHECK(fired_on(&a) >= 1);

    /* With b free, the move succeeds and only b delivers. */
    loop_watch_del(&b, &squatter);
    CHECK_EQ(loop_watch_move(&b, &w), 0);
    CHECK(w.loop == &b);
    CHECK_EQ(fired_on(&a), 0);
    CHECK(fired_on(&b) >= 1);

    loop_watch_del(&b, &w);
    two_loops_down(&a, &b, p);
}

static unsigned g_unlocked_calls;
static bool g_unlocked_takes; /* what the handler returns */
static bool g_lock_was_held;

static bool on_unlocked(struct loop_watch *w, uint32_t events)
{
    (void)w;
    (void)events;
    g_unlocked_calls++;
    if (pthread_mutex_trylock(&g_lock) == 0)
        pthread_mutex_unlock(&g_lock);
    else
        g_lock_was_held = true;
    return g_unlocked_takes;
}

static void t_unlocked_handler(void)
{
    struct loop a, b;
    int p[2];
    two_loops_up(&a, &b, p);

    struct loop_watch w = {0};
    loop_watch_allow_unlocked(&w);
    CHECK_EQ(loop_watch_add(&a, &w, p[0], EPOLLIN, on_readable), 0);
    /* No handler set yet: only fn, under the lock. */
    CHECK(fired_on(&a) >= 1);
    CHECK_EQ(g_unlocked_calls, 0);

    loop_watch_set_unlocked(&w, on_unlocked);
    g_unlocked_takes = true;
    CHECK_EQ(fired_on(&a), 0);
    CHECK(g_unlocked_calls >= 1);
    /* Declined: fn gets the event after all. */
    g_unlocked_takes = false;
    g_unlocked_calls = 0;
    CHECK(fired_on(&a) >= 1);
    CHECK(g_unlocked_calls >= 1);

    /* The handler goes with the watch; a mask change keeps it. */
    g_unlocked_takes = true;
    g_unlocked_calls = 0;
    CHECK_EQ(loop_watch_move(&b, &w), 0);
    CHECK_EQ(loop_watch_mod(&b, &w, EPOLLIN | EPOLLRDHUP), 0);
    CHECK_EQ(fired_on(&b), 0);
    CHECK(g_unlocked_calls >= 1);

    /* Taken back: fn only. */
    loop_watch_set_unlocked(&w, NULL);
    g_unlocked_calls = 0;
    CHECK(fired_on(&b) >= 1);
    CHECK_EQ(g_unlocked_calls, 0);
    CHECK(!g_lock_was_held);

    loop_watch_del(&b, &w);
    two_loops_down(&a, &b, p);
}

static unsigned g_from_fired;

static void on_from(struct loop_watch *w, uint32_t events)
{
    (void)w;
    if (events & EPOLLIN)
        g_from_fired++;
}

static void t_take_over(void)
{
    struct loop a, b;
    int p[2];
    two_loops_up(&a, &b, p);

    /* One loop: the registration changes hands. */
    struct loop_watch from = {0}, w = {0};
    CHECK_EQ(loop_watch_add(&a, &from, p[0], EPOLLIN, on_from), 0);
    g_from_fired = 0;
    CHECK_EQ(fired_on(&a), 0);
    CHECK(g_from_fired >= 1);
    CHECK_EQ(loop_watch_take_over(&a, &from, &w, EPOLLIN, on_readable), 0);
    CHECK(!from.added);
    CHECK(w.added);
    CHECK(w.loop == &a);
    CHECK_EQ(w.fd, p[0]);
    g_from_fired = 0;
    CHECK(fired_on(&a) >= 1);
    CHECK_EQ(g_from_fired, 0);
    /* Only one registration: the watch can leave and come back. */
    loop_watch_del(&a, &w);
    CHECK_EQ(loop_watch_add(&a, &w, p[0], EPOLLIN, on_readable), 0);
    loop_watch_del(&a, &w);

    /* From another loop: removed there, added here. */
    struct loop_watch from_b = {0}, w2 = {0};
    CHECK_EQ(loop_watch_add(&b, &from_b, p[0], EPOLLIN, on_from), 0);
    CHECK_EQ(loop_watch_take_over(&a, &from_b, &w2, EPOLLIN, on_readable), 0);
    CHECK(!from_b.added);
    CHECK(w2.loop == &a);
    g_from_fired = 0;
    CHECK_EQ(fired_on(&b), 0);
    CHECK_EQ(g_from_fired, 0);
    CHECK(fired_on(&a) >= 1);

    loop_watch_del(&a, &w2);
    two_loops_down(&a, &b, p);
}

int main(void)
{
    RUN(t_refused_move_keeps_watch);
    RUN(t_unlocked_handler);
    RUN(t_take_over);
    return tl_finish();
}
