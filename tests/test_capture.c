/* test_capture: copies on a capturing stream pass through untouched.  The
 * fake counts, per stream, the copy operations queued on or captured from
 * it: a captured pageable copy must reach the driver as exactly one call of
 * the program's own entry point (its flavour) on the capturing stream, not
 * as pinfast's chunk DMAs.  The replayed graph gives the right data, and
 * nothing is copied while capturing.  Run with PINFAST_MIN_SIZE=0, at sizes
 * that would be several chunks if staged. */
#define _GNU_SOURCE
#include "t.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long stream_copies(CUstream s)
{
    static unsigned long (*fn)(CUstream, int);
    if (!fn)
        *(void **)&fn = dlsym(drv_libcuda(), "fakecuda_stream_copies");
    assert_non_null(fn);
    return fn(s, D.ptds);
}

/* calls of an entry point under its legacy and per-thread export names */
static void expect_calls(const char *legacy, const char *per_thread, unsigned long n)
{
    unsigned long l = fake_calls(legacy), p = fake_calls(per_thread);
    unsigned long mine = D.ptds ? p : l, other = D.ptds ? l : p;
    if (mine != n || other != 0)
        fail_msg("%s: %lu calls, %s: %lu calls; expected %lu of %s only", legacy, l, per_thread, p, n,
                 D.ptds ? per_thread : legacy);
}

static void capture_on(CUstream cs, CUstreamCaptureMode mode, const char *what)
{
    size_t n = (8u << 20) + 5;
    unsigned char *h = malloc(n), *o = malloc(n), *o2 = malloc(n);
    CUdeviceptr d, d2;
    CK(D.MemAlloc(&d, n));
    CK(D.MemAlloc(&d2, n));
    t_poison(o, n);
    t_poison(o2, n);
    CK(D.StreamSynchronize(cs));
    fake_reset();
    unsigned long before = stream_copies(cs);
    CK(D.StreamBeginCapture(cs, mode));
    CK(D.MemcpyHtoDAsync(d, h, n, cs));
    CK(D.MemcpyDtoDAsync(d2, d, n, cs));
    CK(D.MemcpyDtoHAsync(o, d2, n, cs));
    CK(D.MemcpyAsync((CUdeviceptr)(uintptr_t)o2, d, n, cs));
    CUgraph g;
    CK(D.StreamEndCapture(cs, &g));
    unsigned long got = stream_copies(cs) - before;
    if (got != 4)
        fail_msg("%s: %lu copy operations reached the capturing stream, expected 4", what, got);
    expect_calls("cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz", 1);
    expect_calls("cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz", 1);
    expect_calls("cuMemcpyAsync", "cuMemcpyAsync_ptsz", 1);
    for (size_t i = 0; i < n; i++)
        if (o[i] != 0xA5 || o2[i] != 0xA5)
            fail_msg("%s: the destination changed while capturing (byte %zu)", what, i);
    CUgraphExec x;
    CK(D.GraphInstantiateWithFlags(&x, g, 0));
    for (int round = 0; round < 3; round++) {
        uint64_t salt = t_rand();
        t_fill(h, n, salt);        /* a graph reads its source when it runs */
        t_poison(o, n);
        t_poison(o2, n);
        CK(D.GraphLaunch(x, cs));
        CK(D.StreamSynchronize(cs));
        size_t bad;
        if (!t_check_fill(o, n, salt, &bad) || !t_check_fill(o2, n, salt, &bad))
            fail_msg("%s: replay %d: wrong byte at %zu", what, round, bad);
    }
    CK(D.GraphExecDestroy(x));
    CK(D.GraphDestroy(g));
    CK(D.MemFree(d));
    CK(D.MemFree(d2));
    free(h);
    free(o);
    free(o2);
}

static void test_user_stream(void **s)
{
    (void)s;
    CUstream cs;
    CK(D.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    capture_on(cs, CU_STREAM_CAPTURE_MODE_RELAXED, "non-blocking stream, relaxed");
    capture_on(cs, CU_STREAM_CAPTURE_MODE_GLOBAL, "non-blocking stream, global");
    CK(D.StreamDestroy(cs));
    CK(D.StreamCreate(&cs, CU_STREAM_DEFAULT));
    capture_on(cs, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, "blocking stream, thread-local");
    CK(D.StreamDestroy(cs));
}

/* the per-thread default stream can capture; 0 names it in that flavour */
static void test_per_thread_stream(void **s)
{
    (void)s;
    capture_on(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED, "CU_STREAM_PER_THREAD");
    if (D.ptds)
        capture_on(NULL, CU_STREAM_CAPTURE_MODE_RELAXED, "stream 0 (per-thread flavour)");
}

/* after the capture, the same copy on the same stream is staged again (and correct) */
static void test_after_capture(void **s)
{
    (void)s;
    CUstream cs;
    CK(D.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    capture_on(cs, CU_STREAM_CAPTURE_MODE_RELAXED, "before");
    size_t n = (8u << 20) + 5;
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(h, n, salt);
    t_poison(o, n);
    fake_reset();
    unsigned long before = stream_copies(cs);
    CK(D.MemcpyHtoDAsync(d, h, n, cs));
    CK(D.MemcpyDtoHAsync(o, d, n, cs));
    CK(D.StreamSynchronize(cs));
    size_t bad;
    if (!t_check_fill(o, n, salt, &bad))
        fail_msg("copy after a capture: wrong byte at %zu", bad);
    unsigned long got = stream_copies(cs) - before;
    printf("[ capture  ] an uncaptured 8 MiB round trip reached the stream as %lu copies\n", got);
    if (t_pinfast() && got <= 2)
        fail_msg("under pinfast with PINFAST_MIN_SIZE=0 the copies were not staged (%lu copies)", got);
    CK(D.MemFree(d));
    CK(D.StreamDestroy(cs));
    free(h);
    free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_user_stream),
        cmocka_unit_test(test_per_thread_stream),
        cmocka_unit_test(test_after_capture),
    };
    return cmocka_run_group_tests(tests, t_setup, NULL);
}
