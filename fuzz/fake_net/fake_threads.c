/* The fake kernel's threads: each pthread_create of src/net/ (a progress
 * engine) becomes a coroutine on the fuzzing thread. It runs only inside
 * fake_net_run, until it waits in epoll_wait with nothing ready
 * (fake_thread_block); the fuzzing thread and the engines never run at the
 * same time, so an input takes the same path every time. ASan is told of
 * every stack switch. */
#include "fake_threads.h"

#include <errno.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>

/* Built without ASan (NDK_FUZZ_ASAN=OFF, fuzz/CMakeLists.txt) there is no
 * shadow stack to tell of a switch and no leak checker to give the stacks
 * to, and the runtime that defines these calls is not linked. */
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define __sanitizer_start_switch_fiber(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define __sanitizer_finish_switch_fiber(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define __lsan_register_root_region(p, size) ((void)(p), (void)(size))
#endif
#endif

/* A switch between coroutines saves the callee-saved registers on the stack
 * it leaves and takes the other stack's. swapcontext did the same with two
 * rt_sigprocmask system calls, and ASan's interceptor of it cleared the
 * whole shadow of the stack switched to: a sixth of the CPU time of
 * fuzz_cm_events and a tenth of fuzz_mpa_reply's (docs/fuzzing.md), which
 * switch a few times per event.
 * x86-64 only (System V ABI: rbx, rbp, r12-r15 are the callee's to keep);
 * elsewhere swapcontext stays. */
#if defined(__x86_64__)
#define FAST_SWITCH 1
/* Saves the registers on the current stack, stores its pointer in *from,
 * and continues on the stack *to was saved from (or that
 * fake_pthread_create prepared). */
void fake_stack_switch(void **from, void *to);
__asm__(".text\n"
        ".globl fake_stack_switch\n"
        ".type fake_stack_switch, @function\n"
        "fake_stack_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size fake_stack_switch, .-fake_stack_switch\n");
#else
#define FAST_SWITCH 0
#endif

#define MAX_THREADS 8
#define STACK_BYTES (128u << 10)
#define MAX_ROUNDS 100000 /* of fake_net_run: more is a livelock */

struct coroutine {
#if FAST_SWITCH
    void *sp; /* where fake_stack_switch left it */
#else
    ucontext_t ctx;
#endif
    void *stack;
    void *(*fn)(void *);
    void *arg;
    bool started, finished;
    bool worked; /* left epoll_wait since it was resumed */
    void *fake_stack; /* ASan's, kept while the coroutine is switched out */
    fake_ready_fn *ready; /* what it waits for in epoll_wait: ready(epfd, until) */
    int epfd;
    uint64_t until;
};

static struct coroutine threads[MAX_THREADS];
static unsigned nthreads;
static struct coroutine *current; /* NULL: the fuzzing thread */
#if FAST_SWITCH
static void *main_sp;
#else
static ucontext_t main_ctx;
#endif
static void *main_fake_stack;
static const void *main_stack_bottom;
static size_t main_stack_size;

/* From the fuzzing thread to c, and from c back. */
static void switch_to(struct coroutine *c)
{
#if FAST_SWITCH
    fake_stack_switch(&main_sp, c->sp);
#else
    swapcontext(&main_ctx, &c->ctx);
#endif
}

static void switch_back(struct coroutine *c)
{
#if FAST_SWITCH
    fake_stack_switch(&c->sp, main_sp);
#else
    swapcontext(&c->ctx, &main_ctx);
#endif
}

static void trampoline(void)
{
    __sanitizer_finish_switch_fiber(NULL, &main_stack_bottom, &main_stack_size);
    current->fn(current->arg);
    current->finished = true;
    /* Back to the scheduler for good: this stack is not used again. */
    __sanitizer_start_switch_fiber(NULL, main_stack_bottom, main_stack_size);
    switch_back(current);
}

int fake_pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    (void)attr;
    if (nthreads == MAX_THREADS)
        return EAGAIN;
    struct coroutine *c = &threads[nthreads];
    c->stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (c->stack == MAP_FAILED)
        return EAGAIN;
    /* An overflow faults on the lowest page instead of writing below. */
    mprotect(c->stack, 4096, PROT_NONE);
    /* LSan looks for pointers on thread stacks, not on this one: what only
     * a suspended engine holds would be reported as leaked. */
    __lsan_register_root_region((char *)c->stack + 4096, STACK_BYTES - 4096);
#if FAST_SWITCH
    /* What fake_stack_switch pops: six registers, then trampoline as its
     * return address, above it a return address for trampoline (which
     * never returns), so that it starts with the stack aligned as after a
     * call. */
    uintptr_t *sp = (uintptr_t *)(void *)((char *)c->stack + STACK_BYTES);
    *--sp = 0;
    *--sp = (uintptr_t)trampoline;
    for (int i = 0; i < 6; i++)
        *--sp = 0;
    c->sp = sp;
#else
    if (getcontext(&c->ctx) != 0) {
        munmap(c->stack, STACK_BYTES);
        return EAGAIN;
    }
    c->ctx.uc_stack.ss_sp = c->stack;
    c->ctx.uc_stack.ss_size = STACK_BYTES;
    c->ctx.uc_link = NULL;
    makecontext(&c->ctx, trampoline, 0);
#endif
    c->fn = fn;
    c->arg = arg;
    *t = (pthread_t)(uintptr_t)(nthreads + 1); /* never a real thread's id */
    nthreads++;
    return 0;
}

static void resume(struct coroutine *c)
{
    current = c;
    c->worked = false;
    __sanitizer_start_switch_fiber(&main_fake_stack, c->stack, STACK_BYTES);
    switch_to(c);
    __sanitizer_finish_switch_fiber(main_fake_stack, NULL, NULL);
    current = NULL;
}

bool fake_thread_block(fake_ready_fn *ready, int epfd, uint64_t until)
{
    struct coroutine *c = current;
    if (!c)
        return false;
    c->ready = ready;
    c->epfd = epfd;
    c->until = until;
    __sanitizer_start_switch_fiber(&c->fake_stack, main_stack_bottom, main_stack_size);
    switch_back(c);
    __sanitizer_finish_switch_fiber(c->fake_stack, &main_stack_bottom, &main_stack_size);
    return true;
}

void fake_thread_worked(void)
{
    if (current)
        current->worked = true;
}

bool fake_net_run(void)
{
    if (current)
        return true; /* a callback on an engine: the engines run already */
    for (unsigned round = 0; round < MAX_ROUNDS; round++) {
        bool any = false;
        for (unsigned i = 0; i < nthreads; i++) {
            struct coroutine *c = &threads[i];
            /* Only one with something to do is switched to: every switch
             * costs ASan a clearing of the stack's shadow. */
            if (c->finished || (c->started && !c->ready(c->epfd, c->until)))
                continue;
            /* A coroutine returns from resume() when it blocks again: it
             * did something if its epoll_wait returned in between. */
            resume(c);
            if (!c->started || c->worked || c->finished)
                any = true;
            c->started = true;
        }
        if (!any)
            return true;
    }
    return false;
}

uint64_t fake_threads_next_deadline(void)
{
    uint64_t next = UINT64_MAX;
    for (unsigned i = 0; i < nthreads; i++)
        if (!threads[i].finished && threads[i].until < next)
            next = threads[i].until;
    return next;
}

int fake_pthread_join(pthread_t t, void **ret)
{
    uintptr_t i = (uintptr_t)t;
    if (i == 0 || i > nthreads)
        return pthread_join(t, ret);
    struct coroutine *c = &threads[i - 1];
    for (unsigned round = 0; !c->finished && round < MAX_ROUNDS; round++)
        fake_net_run();
    if (!c->finished)
        abort(); /* an engine that does not stop when told: a finding */
    if (ret)
        *ret = NULL;
    return 0;
}

pthread_t fake_pthread_self(void)
{
    return current ? (pthread_t)(uintptr_t)(current - threads + 1) : pthread_self();
}

int fake_pthread_setaffinity_np(pthread_t t, size_t size, const cpu_set_t *set)
{
    (void)t, (void)size, (void)set;
    return EINVAL; /* a coroutine has no CPU of its own */
}
