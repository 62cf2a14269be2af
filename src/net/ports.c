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

static uint32_t random_u32(void)
{
    uint32_t v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != sizeof v)
        v = (uint32_t)rand();
    return v;
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
