/* test_async_d2h: PINFAST_ASYNC_D2H=1.  A pageable cuMemcpyDtoHAsync returns
 * while its stream is still held up, and its data lands once the stream gets
 * there; every later copy that touches the same host memory (an H2D reading
 * it, another D2H writing it, from any stream) sees the program order of the
 * plain driver.  The plain variant checks the same data through the plain,
 * synchronous path (it cannot be held up: the plain call would wait). */
#define _GNU_SOURCE
#include "t.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CUstream S1, S2;

static int setup(void **s) { return t_setup_streams(s, &S1, &S2); }

/* a device buffer holding t_fill(salt) */
static CUdeviceptr device_with(size_t n, uint64_t salt)
{
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    t_fill(h, n, salt);
    CK(D.MemcpyHtoD(d, h, n));
    /* a pageable H2D may return before its DMA is over, and S2 does not
     * wait for the legacy stream */
    CK(D.CtxSynchronize());
    free(h);
    return d;
}

/* A stream held up by a host function until `go` is set. */
static int go;

static void hold(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000 && !__atomic_load_n(&go, __ATOMIC_ACQUIRE); i++)
        usleep(500);
}

static void *release_later(void *arg)
{
    usleep((useconds_t)(uintptr_t)arg);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* a stream that holds its work until released (pinfast) or a free one (plain) */
static CUstream held_stream(pthread_t *th, useconds_t after)
{
    __atomic_store_n(&go, 0, __ATOMIC_RELEASE);
    if (t_pinfast()) {
        CK(D.LaunchHostFunc(S2, hold, NULL));
        if (after)
            assert_int_equal(pthread_create(th, NULL, release_later, (void *)(uintptr_t)after), 0);
    }
    return S2;
}

static void release_now(pthread_t *th, useconds_t after)
{
    if (!t_pinfast())
        return;
    if (after)
        pthread_join(*th, NULL);
    else
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
}

/* random sizes, every stream: the data lands, and is there after a sync */
static void test_lands(void **s)
{
    (void)s;
    CUstream streams[] = { S1, S2, NULL };
    for (int i = 0; i < 24; i++) {
        size_t n = t_rand_range(1, 12 << 20), off = t_rand_range(0, 63);
        uint64_t salt = t_rand();
        CUdeviceptr d = device_with(n, salt);
        unsigned char *o = malloc(n + off);
        t_poison(o, n + off);
        CK(D.MemcpyDtoHAsync(o + off, d, n, streams[i % 3]));
        CK(D.StreamSynchronize(streams[i % 3]));
        t_expect_fill(o + off, n, salt, "async D2H after its stream's sync");
        CK(D.MemFree(d));
        free(o);
    }
}

/* the call returns while its stream is held; the data lands afterwards */
static void test_returns_before_landing(void **s)
{
    (void)s;
    if (!t_pinfast())
        skip();
    size_t n = 8 << 20;
    uint64_t salt = t_rand();
    CUdeviceptr d = device_with(n, salt);
    unsigned char *o = malloc(n);
    memset(o, 0xEE, n);
    pthread_t th;
    CUstream st = held_stream(&th, 0);
    CK(D.MemcpyDtoHAsync(o, d, n, st));
    for (size_t i = 0; i < n; i += 4096)
        if (o[i] != 0xEE)
            fail_msg("byte %zu written before the stream reached the copy", i);
    assert_int_equal(D.StreamQuery(st), CUDA_ERROR_NOT_READY);
    release_now(&th, 0);
    CK(D.StreamSynchronize(st));
    t_expect_fill(o, n, salt, "async D2H after the stream was released");
    CK(D.MemFree(d));
    free(o);
}

/* an H2D reading the destination of a pending D2H sees the landed data */
static void test_h2d_reads_after_landing(void **s)
{
    (void)s;
    size_t n = t_rand_range(1 << 20, 10 << 20);
    uint64_t salt = t_rand();
    CUdeviceptr d = device_with(n, salt), d2;
    CK(D.MemAlloc(&d2, n));
    unsigned char *o = malloc(n), *back = malloc(n);
    t_poison(o, n);
    pthread_t th;
    CUstream st = held_stream(&th, 50000);
    CK(D.MemcpyDtoHAsync(o, d, n, st));
    CK(D.MemcpyHtoDAsync(d2, o, n, S1)); /* another stream: ordered only by the host */
    CK(D.StreamSynchronize(S1));
    release_now(&th, 50000);
    CK(D.MemcpyDtoH(back, d2, n));
    t_expect_fill(back, n, salt, "H2D from a pending D2H's destination");
    CK(D.StreamSynchronize(st));
    CK(D.MemFree(d));
    CK(D.MemFree(d2));
    free(o);
    free(back);
}

/* two D2H into the same memory: the later call's data wins, as in the plain
 * driver, where the first is complete before the second starts */
static void test_later_d2h_wins(void **s)
{
    (void)s;
    size_t n = t_rand_range(1 << 20, 10 << 20);
    uint64_t first = t_rand(), second = t_rand();
    CUdeviceptr a = device_with(n, first), b = device_with(n, second);
    unsigned char *o = malloc(n);
    t_poison(o, n);
    pthread_t th;
    CUstream st = held_stream(&th, 50000);
    CK(D.MemcpyDtoHAsync(o, a, n, st));
    CK(D.MemcpyDtoHAsync(o, b, n, S1));
    CK(D.StreamSynchronize(S1));
    release_now(&th, 50000);
    CK(D.StreamSynchronize(st));
    t_expect_fill(o, n, second, "the later of two D2H into the same memory");
    CK(D.MemFree(a));
    CK(D.MemFree(b));
    free(o);
}

/* more pending than the landing slots hold: the rest is staged at once */
static void test_more_than_the_slots(void **s)
{
    (void)s;
    enum { N = 6 };
    size_t n = 24 << 20; /* 6 x 24 MiB > half of the 128 MiB of slots */
    uint64_t salt[N];
    CUdeviceptr d[N];
    unsigned char *o[N];
    pthread_t th;
    CUstream st = held_stream(&th, 50000);
    for (int i = 0; i < N; i++) {
        salt[i] = t_rand();
        d[i] = device_with(n, salt[i]);
        o[i] = malloc(n);
        t_poison(o[i], n);
    }
    for (int i = 0; i < N; i++)
        CK(D.MemcpyDtoHAsync(o[i], d[i], n, st));
    release_now(&th, 50000);
    CK(D.StreamSynchronize(st));
    for (int i = 0; i < N; i++) {
        t_expect_fill(o[i], n, salt[i], "one of many pending D2H");
        CK(D.MemFree(d[i]));
        free(o[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lands),
        cmocka_unit_test(test_returns_before_landing),
        cmocka_unit_test(test_h2d_reads_after_landing),
        cmocka_unit_test(test_later_d2h_wins),
        cmocka_unit_test(test_more_than_the_slots),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
