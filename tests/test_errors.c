/* test_errors: the same error codes with and without pinfast, against hard
 * expectations (the fake's table in tests/fake/fake_core.c), for small copies
 * (pass-through) and large pageable ones (the staged path).  A failed copy
 * must not have written anything. */
#define _GNU_SOURCE
#include "t.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SMALL 64
#define LARGE (8u << 20)
static const size_t sizes[] = { SMALL, LARGE };

static CUstream S;
static CUdeviceptr DEV;          /* LARGE bytes */
static unsigned char *H;         /* LARGE pageable */

static int setup(void **s)
{
    if (t_setup(s) || D.StreamCreate(&S, 0) || D.MemAlloc(&DEV, LARGE))
        return -1;
    H = malloc(LARGE);
    return H ? 0 : -1;
}

/* device contents are unchanged by a failed copy */
static void fill_dev(uint64_t salt)
{
    t_fill(H, LARGE, salt);
    CK(D.MemcpyHtoD(DEV, H, LARGE));
}

static void expect_dev(uint64_t salt, const char *what)
{
    unsigned char *o = malloc(LARGE);
    CK(D.MemcpyDtoH(o, DEV, LARGE));
    size_t bad;
    if (!t_check_fill(o, LARGE, salt, &bad))
        fail_msg("%s: device memory changed at %zu by a failed copy", what, bad);
    free(o);
}

static void test_null_host(void **s)
{
    (void)s;
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        CK_EQ(D.MemcpyHtoD(DEV, NULL, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoH(NULL, DEV, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyHtoDAsync(DEV, NULL, n, S), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoHAsync(NULL, DEV, n, S), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.Memcpy(DEV, 0, n), CUDA_ERROR_INVALID_VALUE);
    }
}

static void test_bad_device_pointer(void **s)
{
    (void)s;
    uint64_t salt = t_rand();
    fill_dev(salt);
    unsigned char *h = malloc(LARGE + 16);
    t_fill(h, LARGE + 16, salt + 1);
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        /* a pageable host address is not a device pointer */
        CK_EQ(D.MemcpyHtoD((CUdeviceptr)(uintptr_t)h, H, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoH(h, (CUdeviceptr)(uintptr_t)H, n), CUDA_ERROR_INVALID_VALUE);
        /* one past the end, and a range running past the end */
        CK_EQ(D.MemcpyHtoD(DEV + LARGE, h, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyHtoD(DEV + LARGE - n + 1, h, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyHtoDAsync(DEV + LARGE - n + 1, h, n, S), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoH(h, DEV + LARGE - n + 1, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoHAsync(h, DEV + LARGE - n + 1, n, S), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoD(DEV, DEV + LARGE - n + 1, n), CUDA_ERROR_INVALID_VALUE);
    }
    /* the whole buffer plus one byte: a staged copy must fail up front */
    CK_EQ(D.MemcpyHtoD(DEV, h, LARGE + 1), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyHtoDAsync(DEV, h, LARGE + 1, S), CUDA_ERROR_INVALID_VALUE);
    CK(D.StreamSynchronize(S));
    expect_dev(salt, "H2D past the end");
    /* and the host side of a failed D2H is untouched */
    t_poison(h, LARGE + 16);
    CK_EQ(D.MemcpyDtoH(h, DEV, LARGE + 1), CUDA_ERROR_INVALID_VALUE);
    for (size_t i = 0; i < LARGE + 16; i++)
        if (h[i] != 0xA5)
            fail_msg("failed D2H wrote host byte %zu", i);
    free(h);
}

static void test_freed_memory(void **s)
{
    (void)s;
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        CK(D.MemFree(d));
        CK_EQ(D.MemcpyHtoD(d, H, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyDtoH(H, d, n), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemcpyHtoDAsync(d, H, n, S), CUDA_ERROR_INVALID_VALUE);
        CK_EQ(D.MemFree(d), CUDA_ERROR_INVALID_VALUE);
        CK(D.MemAllocAsync(&d, n, S));
        CK(D.MemFreeAsync(d, S));
        CK_EQ(D.MemFreeAsync(d, S), CUDA_ERROR_INVALID_VALUE);
        CK(D.StreamSynchronize(S));

        void *p;
        CK(D.MemHostAlloc(&p, n, 0));
        CK(D.MemFreeHost(p));
        CK_EQ(D.MemFreeHost(p), CUDA_ERROR_INVALID_VALUE);
        CK(D.MemAllocHost(&p, n));
        CK(D.MemFreeHost(p));
        CK_EQ(D.MemFreeHost(p), CUDA_ERROR_INVALID_VALUE);
    }
    CK_EQ(D.MemFreeHost(H), CUDA_ERROR_INVALID_VALUE);          /* malloc'd */
    CK_EQ(D.MemFree((CUdeviceptr)(uintptr_t)H), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemFree(DEV + 1), CUDA_ERROR_INVALID_VALUE);         /* not the base */
}

static void test_registration(void **s)
{
    (void)s;
    size_t n = 1 << 20;
    unsigned char *p = aligned_alloc(4096, n);
    CK_EQ(D.MemHostUnregister(p), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CK(D.MemHostRegister(p, n, 0));
    CK_EQ(D.MemHostRegister(p, n, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CK_EQ(D.MemHostRegister(p + 4096, 4096, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CK_EQ(D.MemHostUnregister(p + 4096), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CK(D.MemHostUnregister(p));
    CK_EQ(D.MemHostUnregister(p), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CK_EQ(D.MemHostRegister(NULL, n, 0), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemHostRegister(p, 0, 0), CUDA_ERROR_INVALID_VALUE);
    free(p);
    void *q;
    CK_EQ(D.MemHostAlloc(&q, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemHostAlloc(NULL, 64, 0), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemHostAlloc(&q, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr d;
    CK_EQ(D.MemAlloc(&d, 0), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemAllocManaged(&d, 64, 0x80), CUDA_ERROR_INVALID_VALUE);
}

static void test_invalid_streams(void **s)
{
    (void)s;
    CUstream dead;
    CK(D.StreamCreate(&dead, 0));
    CK(D.StreamDestroy(dead));
    int junk[64] = { 0 };
    CUstream bogus = (CUstream)junk;
    unsigned char *o = malloc(LARGE);
    for (int i = 0; i < 2; i++) {
        size_t n = sizes[i];
        CUstream bad[] = { dead, bogus };
        for (int b = 0; b < 2; b++) {
            CK_EQ(D.MemcpyHtoDAsync(DEV, H, n, bad[b]), CUDA_ERROR_INVALID_HANDLE);
            CK_EQ(D.MemcpyDtoHAsync(o, DEV, n, bad[b]), CUDA_ERROR_INVALID_HANDLE);
            CK_EQ(D.MemcpyDtoDAsync(DEV, DEV, n, bad[b]), CUDA_ERROR_INVALID_HANDLE);
            CK_EQ(D.MemcpyAsync(DEV, (CUdeviceptr)(uintptr_t)H, n, bad[b]), CUDA_ERROR_INVALID_HANDLE);
            CK_EQ(D.StreamSynchronize(bad[b]), CUDA_ERROR_INVALID_HANDLE);
        }
    }
    free(o);
}

static void test_zero_size(void **s)
{
    (void)s;
    CK(D.MemcpyHtoD(DEV, NULL, 0));
    CK(D.MemcpyDtoH(NULL, DEV, 0));
    CK(D.MemcpyHtoDAsync(DEV, H, 0, S));
    CK(D.MemcpyDtoHAsync(H, DEV, 0, S));
    CK(D.MemcpyDtoD(DEV, DEV, 0));
    CK(D.Memcpy(DEV, (CUdeviceptr)(uintptr_t)H, 0));
    CK(D.StreamSynchronize(S));
}

struct ctxless { CUresult r[8]; };

static void *no_context_thread(void *arg)
{
    struct ctxless *c = arg;
    CUdeviceptr d;
    void *p;
    unsigned char *o = malloc(LARGE);
    c->r[0] = D.MemcpyHtoD(DEV, H, SMALL);
    c->r[1] = D.MemcpyHtoD(DEV, H, LARGE);
    c->r[2] = D.MemcpyDtoH(o, DEV, LARGE);
    c->r[3] = D.MemcpyHtoDAsync(DEV, H, LARGE, NULL);
    c->r[4] = D.MemcpyDtoHAsync(o, DEV, LARGE, S);
    c->r[5] = D.MemAlloc(&d, 64);
    c->r[6] = D.MemHostAlloc(&p, 64, 0);
    c->r[7] = D.StreamSynchronize(NULL);
    free(o);
    return NULL;
}

static void test_no_context(void **s)
{
    (void)s;
    struct ctxless c;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, no_context_thread, &c), 0);
    pthread_join(th, NULL);
    for (int i = 0; i < 8; i++)
        if (c.r[i] != CUDA_ERROR_INVALID_CONTEXT)
            fail_msg("call %d without a current context returned %d, expected %d", i,
                     (int)c.r[i], (int)CUDA_ERROR_INVALID_CONTEXT);
}

static void test_batch_errors(void **s)
{
    (void)s;
    CUdeviceptr dsts[2] = { DEV, DEV + 64 }, srcs[2] = { (CUdeviceptr)(uintptr_t)H, 0 };
    size_t sz[2] = { 64, 64 }, idx = 0, fi = 7;
    CUmemcpyAttributes attr = { .srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM };
    CK_EQ(D.MemcpyBatchAsync12(dsts, srcs, sz, 2, &attr, &idx, 1, &fi, S), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(fi, 1);
    CK_EQ(D.MemcpyBatchAsync(dsts, srcs, sz, 2, &attr, &idx, 1, S), CUDA_ERROR_INVALID_VALUE);
    srcs[1] = (CUdeviceptr)(uintptr_t)H;
    CK_EQ(D.MemcpyBatchAsync(dsts, srcs, sz, 0, &attr, &idx, 1, S), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(D.MemcpyBatchAsync(dsts, srcs, sz, 2, &attr, &idx, 1, CU_STREAM_LEGACY), CUDA_ERROR_INVALID_VALUE);
    CK(D.MemcpyBatchAsync(dsts, srcs, sz, 2, &attr, &idx, 1, S));
    CK(D.StreamSynchronize(S));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_host),
        cmocka_unit_test(test_bad_device_pointer),
        cmocka_unit_test(test_freed_memory),
        cmocka_unit_test(test_registration),
        cmocka_unit_test(test_invalid_streams),
        cmocka_unit_test(test_zero_size),
        cmocka_unit_test(test_no_context),
        cmocka_unit_test(test_batch_errors),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
