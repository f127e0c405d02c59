#define _GNU_SOURCE
#include "t.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>

struct drv D;
CUcontext T_CTX;

void t_check(CUresult got, CUresult want, const char *expr, const char *file, int line)
{
    if (got == want)
        return;
    const char *gn = NULL, *wn = NULL;
    if (D.GetErrorName) {
        D.GetErrorName(got, &gn);
        D.GetErrorName(want, &wn);
    }
    print_error("%s:%d: %s returned %d (%s), expected %d (%s)\n", file, line, expr, (int)got,
                gn ? gn : "?", (int)want, wn ? wn : "?");
    fail();
}

int t_pinfast(void)
{
    const char *v = getenv("PFT_PINFAST");
    return v && strcmp(v, "1") == 0;
}

static uint64_t seed, state;

double t_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

uint64_t t_seed(void)
{
    if (!seed) {
        const char *v = getenv("PFT_SEED");
        seed = v ? strtoull(v, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
        if (!seed)
            seed = 1;
        state = seed;
        printf("[ seed     ] PFT_SEED=%llu\n", (unsigned long long)seed);
    }
    return seed;
}

uint64_t t_rand(void)
{
    t_seed();
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 2685821657736338717ULL;
}

size_t t_rand_range(size_t lo, size_t hi)
{
    return lo + (size_t)(t_rand() % (uint64_t)(hi - lo + 1));
}

static inline uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

void t_fill(void *p, size_t n, uint64_t salt)
{
    unsigned char *b = p;
    uint64_t k = mix(salt ^ seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix(k + i);
        memcpy(b + i, &v, 8);
    }
    uint64_t v = mix(k + i);
    for (; i < n; i++)
        b[i] = (unsigned char)(v >> (8 * (i & 7)));
}

int t_check_fill(const void *p, size_t n, uint64_t salt, size_t *bad)
{
    const unsigned char *b = p;
    uint64_t k = mix(salt ^ seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = mix(k + i);
        if (memcmp(b + i, &v, 8) != 0) {
            for (size_t j = 0; j < 8; j++)
                if (b[i + j] != (unsigned char)(v >> (8 * j))) {
                    *bad = i + j;
                    return 0;
                }
        }
    }
    uint64_t v = mix(k + i);
    for (; i < n; i++)
        if (b[i] != (unsigned char)(v >> (8 * (i & 7)))) {
            *bad = i;
            return 0;
        }
    return 1;
}

int t_round_trip(unsigned char *h, unsigned char *o, CUdeviceptr d, size_t n)
{
    uint64_t salt = t_rand();
    size_t bad;
    t_fill(h, n, salt);
    t_poison(o, n);
    if (D.MemcpyHtoD(d, h, n) || D.MemcpyDtoH(o, d, n))
        return 32;
    if (!t_check_fill(o, n, salt, &bad)) {
        fprintf(stderr, "wrong byte at %zu\n", bad);
        return 33;
    }
    return 0;
}

int t_copied_again(unsigned char *h, CUdeviceptr d, size_t n)
{
    for (int round = 0; round < 10; round++) {
        t_fill(h, n, (uint64_t)round + 1);
        if (D.MemcpyHtoD(d, h, n))
            return 32;
        usleep(5000); /* the registrar's turn */
    }
    return 0;
}

/* cmocka puts its SIGSEGV handler in around each test (signal()), and the
 * previous one back after it; the fake driver's must stay first, since a
 * write to registered pages the fake is moving waits in it (fake_mem.c),
 * even across a test's start: cmocka's goes behind it then. */
void (*signal(int sig, void (*h)(int)))(int)
{
    static void (*(*real)(int, void (*)(int)))(int);
    static struct sigaction siginfo_kept; /* one the fake had behind it */
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "signal");
    void *fake = sig == SIGSEGV ? dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD) : NULL;
    int (*behind)(const struct sigaction *, struct sigaction *) = NULL;
    if (fake)
        *(void **)&behind = dlsym(fake, "fakecuda_segv_behind");
    struct sigaction act = {.sa_handler = h}, old;
    if ((void *)h == (void *)siginfo_kept.sa_sigaction)
        act = siginfo_kept;
    int kept = behind && behind(&act, &old);
    if (fake)
        dlclose(fake);
    if (!kept)
        return real(sig, h);
    if (old.sa_flags & SA_SIGINFO)
        siginfo_kept = old;
    return (old.sa_flags & SA_SIGINFO) ? (void (*)(int))(void *)old.sa_sigaction : old.sa_handler;
}

int t_await(int (*done)(void *), void *arg)
{
    struct timespec nap = {0, 200 * 1000};
    int ok = done(arg);
    for (int i = 0; i < 25000 && !ok; i++) {
        nanosleep(&nap, NULL);
        ok = done(arg);
    }
    return ok;
}

void t_expect_fill(const void *p, size_t n, uint64_t salt, const char *what)
{
    size_t bad;
    if (!t_check_fill(p, n, salt, &bad))
        fail_msg("%s: wrong byte at offset %zu of %zu", what, bad, n);
}

void t_poison(void *p, size_t n)
{
    memset(p, 0xA5, n);
}

void *t_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void t_unmap(void *p, size_t n)
{
    munmap(p, n);
}

void t_bind_ctx(void)
{
    if (D.CtxSetCurrent(T_CTX) != CUDA_SUCCESS)
        abort();
}

int t_setup(void **state_)
{
    (void)state_;
    t_seed();
    if (t_pinfast()) {
        /* a missing preload is only a warning from ld.so: make it fatal */
        const char *shim = getenv("PFT_SHIM");
        if (!shim || !dlopen(shim, RTLD_NOW | RTLD_NOLOAD)) {
            fprintf(stderr, "t_setup: PFT_PINFAST=1 but %s is not loaded\n", shim ? shim : "(PFT_SHIM unset)");
            return -1;
        }
    }
    if (drv_load_from_env(&D) != 0 || drv_context0(&D, &T_CTX))
        return -1;
    return 0;
}

int t_setup_streams(void **cm_state, CUstream *blocking, CUstream *nonblocking)
{
    if (t_setup(cm_state))
        return -1;
    return D.StreamCreate(blocking, CU_STREAM_DEFAULT) ||
                   D.StreamCreate(nonblocking, CU_STREAM_NON_BLOCKING)
               ? -1
               : 0;
}
