/* Moving a socket's watch between two engines' loops (net/loop.h,
 * loop_watch_move, used when NdkConnect or NdkAccept places a connection
 * on its QP's engine): the watch is on exactly one loop before and after,
 * and a move epoll refuses leaves it where it was, still delivering. */
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

static void t_refused_move_keeps_watch(void)
{
    struct loop a, b;
    int p[2];
    CHECK_EQ(loop_init(&a), 0);
    CHECK_EQ(loop_init(&b), 0);
    CHECK_EQ(pipe(p), 0);
    CHECK_EQ(write(p[1], "x", 1), 1); /* readable from now on (level-triggered) */

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
    close(p[0]);
    close(p[1]);
    loop_fini(&a);
    loop_fini(&b);
}

int main(void)
{
    RUN(t_refused_move_keeps_watch);
    return tl_finish();
}
