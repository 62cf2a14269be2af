#include "net/ports.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "net/tcp.h"

struct port_res {
    NDK_SOCKADDR addr;
    enum port_kind kind;
    unsigned refs;
    struct port_res *next;
};

static pthread_mutex_t ports_lock = PTHREAD_MUTEX_INITIALIZER;
static struct port_res *ports_head;

static bool conflicts(const NDK_SOCKADDR *a, const NDK_SOCKADDR *b)
{
    if (a->sa.sa_family != b->sa.sa_family || ndk_sockaddr_port(a) != ndk_sockaddr_port(b))
        return false;
    /* A wildcard reservation covers every address of its family. */
    return ndk_sockaddr_is_any(a) || ndk_sockaddr_is_any(b) || ndk_sockaddr_same_ip(a, b);
}

static bool reserved(const NDK_SOCKADDR *a)
{
    for (struct port_res *r = ports_head; r; r = r->next)
        if (conflicts(&r->addr, a))
            return true;
    return false;
}

/* Where the search for a free port starts. Seeded once from the kernel,
 * then a xorshift64* step per port: spreading the ports needs no fresh
 * entropy per connection (a getrandom call each), and the sequence does
 * not protect the connection, TCP's initial sequence numbers do. Called
 * under ports_lock. A forked child seeds its own: the same sequence in
 * two processes would pick the same ports towards the same peer. */
static uint64_t port_rng;
static pthread_once_t port_rng_once = PTHREAD_ONCE_INIT;

static void port_rng_forget(void)
{
    port_rng = 0;
}

static void port_rng_register(void)
{
    pthread_atfork(NULL, NULL, port_rng_forget);
}

static uint16_t next_start; /* ports_start_next_search_at; 0: random */

void ports_start_next_search_at(uint16_t port)
{
    pthread_mutex_lock(&ports_lock);
    next_start = port;
    pthread_mutex_unlock(&ports_lock);
}

static uint32_t random_u32(void)
{
    pthread_once(&port_rng_once, port_rng_register);
    if (!port_rng) {
        uint64_t seed = 0;
        if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
            seed = ((uint64_t)rand() << 32) ^ (uint64_t)rand();
        port_rng = seed | 1; /* xorshift's state must not be 0 */
    }
    port_rng ^= port_rng >> 12;
    port_rng ^= port_rng << 25;
    port_rng ^= port_rng >> 27;
    return (uint32_t)((port_rng * 0x2545F4914F6CDD1DULL) >> 32);
}

NTSTATUS ports_reserve(NDK_SOCKADDR *addr, enum port_kind kind, int fd, bool reuse,
                       struct port_res **out)
{
    struct port_res *r = calloc(1, sizeof *r);
    if (!r)
        return STATUS_INSUFFICIENT_RESOURCES;
    if (reuse) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    NTSTATUS st = STATUS_SUCCESS;
    pthread_mutex_lock(&ports_lock);
    if (ndk_sockaddr_port(addr) != 0) {
        if (reserved(addr)) {
            st = STATUS_SHARING_VIOLATION;
        } else if (bind(fd, &addr->sa, ndk_sockaddr_len(addr)) < 0) {
            st = ndk_status_from_errno(errno, NDK_PHASE_BIND);
        }
    } else {
        const unsigned span = NDK_EPHEMERAL_LAST - NDK_EPHEMERAL_FIRST + 1;
        unsigned start = random_u32() % span;
        if (next_start >= NDK_EPHEMERAL_FIRST) {
            start = next_start - NDK_EPHEMERAL_FIRST;
            next_start = 0;
        }
        st = STATUS_TOO_MANY_ADDRESSES;
        for (unsigned i = 0; i < span; i++) {
            ndk_sockaddr_set_port(addr, (uint16_t)(NDK_EPHEMERAL_FIRST + (start + i) % span));
            if (reserved(addr))
                continue;
            if (bind(fd, &addr->sa, ndk_sockaddr_len(addr)) == 0) {
                st = STATUS_SUCCESS;
                break;
            }
            if (errno != EADDRINUSE) {
                st = ndk_status_from_errno(errno, NDK_PHASE_BIND);
                break;
            }
        }
        if (st != STATUS_SUCCESS)
            ndk_sockaddr_set_port(addr, 0);
    }
    if (st == STATUS_SUCCESS) {
        r->addr = *addr;
        r->kind = kind;
        r->refs = 1;
        r->next = ports_head;
        ports_head = r;
        *out = r;
    }
    pthread_mutex_unlock(&ports_lock);
    if (st != STATUS_SUCCESS)
        free(r);
    return st;
}

void ports_ref(struct port_res *r)
{
    pthread_mutex_lock(&ports_lock);
    r->refs++;
    pthread_mutex_unlock(&ports_lock);
}

void ports_unref(struct port_res *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&ports_lock);
    if (--r->refs == 0) {
        struct port_res **pp = &ports_head;
        while (*pp != r)
            pp = &(*pp)->next;
        *pp = r->next;
        free(r);
    }
    pthread_mutex_unlock(&ports_lock);
}
