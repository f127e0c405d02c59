/* test_contract: programs the driver runs correctly must run the same under
 * pinfast (docs/design.md, the contract): managed and mapped destinations
 * read by the host the moment a copy returns, a synchronous copy complete on
 * return, copies while another thread captures in any mode, copies on a
 * stream of a context that is not current, no copy waiting for another
 * stream's work, no core spent polling while only the device can progress,
 * and contexts made and destroyed without end.  Each case runs against the
 * fake alone (.plain) and under pinfast (.pinfast) with the same
 * expectations; tests/gpu/checks/contract.cu runs the same cases on the GPU.
 * Registered with PINFAST_MIN_SIZE=0 and four 1 MiB slots per context, so
 * that a few copies use every slot. */
#define _GNU_SOURCE
#include "t.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static CUstream blocking, nonblocking;

static int setup(void **state) { return t_setup_streams(state, &blocking, &nonblocking); }

/* A driver function the test table lacks, through the driver's handle:
 * under pinfast, dlsym hands out its wrapper, as to any program. */
static void *fn(const char *name)
{
    void *f = dlsym(drv_libcuda(), name);
    if (!f)
        fail_msg("the driver has no %s", name);
    return f;
}

static double cpu_seconds(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/* A copy of several chunks was staged (its DMAs reached the driver as the
 * asynchronous H2D entry point) rather than passed through. */
static int staged_h2d(void) { return fake_calls("cuMemcpyHtoDAsync_v2") > 0; }

/* ---- destinations the host reads at once ---------------------------------- */
static void test_managed_and_mapped(void **s)
{
    (void)s;
    for (int round = 0; round < 6; round++) {
        size_t n = t_rand_range(3 * MiB, 6 * MiB);
        unsigned char *h = malloc(n), *back = malloc(n);
        CUdeviceptr dst;
        void *mapped = NULL;
        if (round % 2) {
            CK(D.MemAllocManaged(&dst, n, CU_MEM_ATTACH_GLOBAL));
        } else {
            CK(D.MemHostAlloc(&mapped, n, CU_MEMHOSTALLOC_DEVICEMAP));
            CK(D.MemHostGetDevicePointer(&dst, mapped, 0));
        }
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        CK(D.MemcpyHtoD(dst, h, n));
        t_expect_fill((void *)(uintptr_t)(mapped ? (uintptr_t)mapped : dst), n, salt,
                      round % 2 ? "managed memory right after the H2D" : "mapped memory right after the H2D");
        t_poison(back, n);
        CK(D.MemcpyDtoH(back, dst, n));
        t_expect_fill(back, n, salt, "pageable memory after a D2H from it");
        if (mapped)
            CK(D.MemFreeHost(mapped));
        else
            CK(D.MemFree(dst));
        free(h);
        free(back);
    }
}

/* A synchronous H2D is over when it returns: another stream reads its tail. */
static void test_sync_copy_complete(void **s)
{
    (void)s;
    unsigned char *tail;
    CK(D.MemAllocHost((void **)&tail, 4096));
    for (int round = 0; round < 8; round++) {
        size_t n = t_rand_range(3 * MiB, 8 * MiB), k = t_rand_range(1, 4096);
        unsigned char *h = malloc(n);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        t_poison(tail, 4096);
        CK(D.MemcpyHtoD(d, h, n));
        CK(D.MemcpyDtoHAsync(tail, d + n - k, k, nonblocking));
        CK(D.StreamSynchronize(nonblocking));
        if (memcmp(tail, h + n - k, k))
            fail_msg("round %d: the last %zu bytes of a %zu-byte H2D were not there when it returned", round, k, n);
        CK(D.MemFree(d));
        free(h);
    }
    CK(D.MemFreeHost(tail));
}

/* ---- captures elsewhere ------------------------------------------------------ */
struct job {
    int d2h, fresh;
    size_t n;
    CUresult rh, rd;
    int staged_after;
};

static void round_trip(struct job *j, CUresult *rh, CUresult *rd)
{
    unsigned char *h = t_map(j->n), *o = t_map(j->n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, j->n));
    uint64_t salt = t_rand();
    t_fill(h, j->n, salt);
    t_poison(o, j->n);
    *rh = D.MemcpyHtoD(d, h, j->n);
    *rd = D.MemcpyDtoH(o, d, j->n);
    if (*rh == CUDA_SUCCESS && *rd == CUDA_SUCCESS)
        t_expect_fill(o, j->n, salt, "a round trip made while another thread captures");
    CK(D.MemFree(d));
    t_unmap(h, j->n);
    t_unmap(o, j->n);
}

static void *copier(void *arg)
{
    struct job *j = arg;
    CUcontext fresh = NULL;
    if (j->fresh) /* a context whose first copies come during the capture */
        CK(D.CtxCreate(&fresh, 0, 0));
    else
        t_bind_ctx();
    round_trip(j, &j->rh, &j->rd);
    return fresh;
}

static void capture_while(CUstreamCaptureMode mode, int fresh, int same_thread, const char *what)
{
    CUstream cs;
    CK(D.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CK(D.MemAlloc(&d, 4096));
    unsigned char *h = malloc(4096);
    CK(D.StreamBeginCapture(cs, mode));
    CK(D.MemcpyHtoDAsync(d, h, 4096, cs));
    struct job j = {.fresh = fresh, .n = t_rand_range(3 * MiB, 6 * MiB)};
    void *ctx = NULL;
    if (same_thread) {
        round_trip(&j, &j.rh, &j.rd);
    } else {
        pthread_t t;
        pthread_create(&t, NULL, copier, &j);
        pthread_join(t, &ctx);
    }
    CUgraph g = NULL;
    CUresult re = D.StreamEndCapture(cs, &g);
    if (j.rh || j.rd || re || !g)
        fail_msg("%s: copies %d %d, end of capture %d, graph %p", what, j.rh, j.rd, re, (void *)g);
    CK(D.GraphDestroy(g));
    if (fresh) { /* and the fresh context stages once the capture is over */
        CK(D.CtxPushCurrent((CUcontext)ctx));
        fake_reset();
        CUresult rh, rd;
        round_trip(&j, &rh, &rd);
        CK(rh);
        CK(rd);
        if (t_pinfast() && !staged_h2d())
            fail_msg("%s: the context stages nothing after a capture", what);
        CUcontext popped;
        CK(D.CtxPopCurrent(&popped));
        CK(D.CtxDestroy((CUcontext)ctx));
    }
    CK(D.MemFree(d));
    CK(D.StreamDestroy(cs));
    free(h);
}

static void test_capture_global_elsewhere(void **s)
{
    (void)s;
    capture_while(CU_STREAM_CAPTURE_MODE_GLOBAL, 0, 0, "global capture, copies on another thread");
    capture_while(CU_STREAM_CAPTURE_MODE_GLOBAL, 0, 1, "global capture, copies on the capturing thread");
}

static void test_capture_thread_local_elsewhere(void **s)
{
    (void)s;
    capture_while(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 0, 1, "thread-local capture, copies on the capturing thread");
    capture_while(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 0, 0, "thread-local capture, copies on another thread");
}

static void test_capture_fresh_context(void **s)
{
    (void)s;
    capture_while(CU_STREAM_CAPTURE_MODE_GLOBAL, 1, 0, "a fresh context's copies during a capture");
}

/* cuMemFreeHost is allowed in a relaxed capture; a pooled block's free must
 * not synchronise the context, which would invalidate it. */
static void test_free_host_relaxed_capture(void **s)
{
    (void)s;
    size_t n = 1 * MiB;
    void *p;
    CK(D.MemAllocHost(&p, n));
    CK(D.MemFreeHost(p));
    CK(D.MemAllocHost(&p, n)); /* the pool's, under pinfast */
    CUstream cs;
    CK(D.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CK(D.MemAlloc(&d, 4096));
    CK(D.StreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(D.MemcpyHtoDAsync(d, p, 4096, cs));
    CK(D.MemFreeHost(p));
    CUgraph g = NULL;
    CK(D.StreamEndCapture(cs, &g));
    CK(D.GraphDestroy(g));
    CK(D.MemFree(d));
    CK(D.StreamDestroy(cs));
}

/* ---- a stream of another context ---------------------------------------------- */
static void test_other_context_stream(void **s)
{
    (void)s;
    CUcontext other, popped;
    CK(D.CtxCreate(&other, 0, 0)); /* current now */
    CUstream os;
    CK(D.StreamCreate(&os, CU_STREAM_NON_BLOCKING));
    CK(D.CtxSetCurrent(T_CTX));
    for (int round = 0; round < 6; round++) {
        size_t n = t_rand_range(2 * MiB, 6 * MiB);
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        if (round % 2)
            CK(D.CtxPushCurrent(other));
        CK(D.MemAlloc(&d, n));
        if (round % 2)
            CK(D.CtxPopCurrent(&popped));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        t_poison(o, n);
        CK(D.MemcpyHtoDAsync(d, h, n, os));
        CK(D.MemcpyDtoHAsync(o, d, n, os));
        CK(D.StreamSynchronize(os));
        t_expect_fill(o, n, salt, "a round trip on a stream of a context not current");
        CK(D.MemFree(d));
        free(h);
        free(o);
    }
    CK(D.CtxDestroy(other));
    CK(D.CtxSetCurrent(T_CTX));
}

/* ---- no waiting for another stream ---------------------------------------------- */
static volatile int flag, released;

static void CUDA_CB wait_flag(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE))
        usleep(1000);
}

static volatile int s2_done;

static void *watchdog(void *arg)
{
    (void)arg;
    for (int i = 0; i < 500 && !__atomic_load_n(&s2_done, __ATOMIC_ACQUIRE); i++)
        usleep(10000);
    released = !__atomic_load_n(&s2_done, __ATOMIC_ACQUIRE);
    __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
    return NULL;
}

struct s1 {
    CUstream s;
    CUdeviceptr d;
    unsigned char *h;
    size_t n;
};

/* S1 waits for the host, then takes two copies: every slot is fenced on S1
 * (four slots, two a copy).  The plain driver blocks this thread in them. */
static void *s1_copies(void *arg)
{
    struct s1 *j = arg;
    t_bind_ctx();
    CK(D.LaunchHostFunc(j->s, wait_flag, NULL));
    CK(D.MemcpyHtoDAsync(j->d, j->h, j->n, j->s));
    CK(D.MemcpyHtoDAsync(j->d, j->h, j->n, j->s));
    return NULL;
}

static void CUDA_CB sleep_30ms(void *arg)
{
    (void)arg;
    usleep(30000);
}

/* S2's copy while every slot waits on S1: an H2D, a D2H, and an H2D from
 * memory pinfast has registered behind S2's own work (neither staged nor
 * to be passed through: undoing the registration would synchronise the
 * device, S1 included). */
static void test_no_wait_for_other_stream(void **s)
{
    (void)s;
    for (int v = 0; v < 3; v++) {
        int d2h = v == 1, registered = v == 2;
        CUstream s1s, s2;
        CK(D.StreamCreate(&s1s, CU_STREAM_NON_BLOCKING));
        CK(D.StreamCreate(&s2, CU_STREAM_NON_BLOCKING));
        struct s1 j = {.s = s1s, .n = 768 << 10}; /* two chunks: two slots */
        j.h = malloc(j.n);
        t_fill(j.h, j.n, 1);
        CK(D.MemAlloc(&j.d, j.n));
        size_t n2 = 3 * MiB;
        unsigned char *b = malloc(n2), *o = malloc(n2);
        CUdeviceptr d2;
        CK(D.MemAlloc(&d2, n2));
        uint64_t salt = t_rand();
        t_fill(b, n2, salt);
        CK(D.MemcpyHtoD(d2, b, n2));
        for (int i = 0; registered && i < 3; i++)
            CK(D.MemcpyHtoD(d2, b, n2));
        /* the registrar's, soon after: a sanitizer's malloc leaves pinfast
         * registering nothing (test_register.c) */
        if (registered && t_pinfast() && !t_await(fake_registered_at, b))
            print_message("b was not registered: the case runs as a staged one\n");
        flag = released = s2_done = 0;
        pthread_t w, t1;
        pthread_create(&w, NULL, watchdog, NULL);
        pthread_create(&t1, NULL, s1_copies, &j);
        usleep(100000); /* T1 is in its copies (plain) or past them (pinfast) */
        t_poison(o, n2);
        if (registered)
            CK(D.LaunchHostFunc(s2, sleep_30ms, NULL));
        if (d2h)
            CK(D.MemcpyDtoHAsync(o, d2, n2, s2));
        else
            CK(D.MemcpyHtoDAsync(d2, b, n2, s2));
        CK(D.StreamSynchronize(s2));
        __atomic_store_n(&s2_done, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
        pthread_join(t1, NULL);
        pthread_join(w, NULL);
        if (released)
            fail_msg("a%s %s on stream S2 waited for stream S1, which waits for the host",
                     registered ? " registered" : "", d2h ? "D2H" : "H2D");
        CK(D.StreamSynchronize(s1s));
        if (d2h)
            t_expect_fill(o, n2, salt, "the D2H on S2");
        CK(D.MemFree(j.d));
        CK(D.MemFree(d2));
        CK(D.StreamDestroy(s1s));
        CK(D.StreamDestroy(s2));
        free(j.h);
        free(b);
        free(o);
    }
}

/* ---- no polling while the device works -------------------------------------- */
static void CUDA_CB sleep_300ms(void *arg)
{
    (void)arg;
    usleep(300000);
}

static void test_no_spinning_while_waiting(void **s)
{
    (void)s;
    size_t n = 8 * MiB;
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    t_fill(h, n, 3);
    CK(D.MemcpyHtoD(d, h, n)); /* workers started */
    for (int d2h = 0; d2h < 2; d2h++) {
        double c[2], w = 0;
        /* the copy alone, then behind the host function: the difference is
         * what waiting cost (a sanitizer makes the copy's own work heavy) */
        for (int behind = 0; behind < 2; behind++) {
            if (behind)
                CK(D.LaunchHostFunc(blocking, sleep_300ms, NULL));
            double w0 = t_now(), c0 = cpu_seconds();
            if (d2h)
                CK(D.MemcpyDtoHAsync(h, d, n, blocking));
            else
                CK(D.MemcpyHtoD(d, h, n)); /* waits for the stream first (legacy) */
            w = t_now() - w0, c[behind] = cpu_seconds() - c0;
            /* not counted: the driver's own synchronize spins (as the fake's) */
            CK(D.StreamSynchronize(blocking));
        }
        print_message("%s behind a 0.3 s host function: %.3f s, %.3f CPU s (alone: %.3f CPU s)\n",
                      d2h ? "D2H" : "H2D", w, c[1], c[0]);
        /* the copy's own waits, in the driver or pinfast's, must sleep; a
         * copy that waited for nothing (per-thread H2D) is only its work */
        if (w > 0.25 && c[1] > 0.25 * w + 0.05 + c[0])
            fail_msg("%s: %.3f CPU seconds in %.3f s of waiting, %.3f alone", d2h ? "D2H" : "H2D", c[1], w, c[0]);
    }
    CK(D.MemFree(d));
    free(h);
}

/* A checked 3 MiB round trip in the current context, which must stage
 * under pinfast (t_map): a context's records must never run out. */
static void staged_round_trip(const char *what, int round)
{
    size_t n = 3 * MiB;
    unsigned char *h = t_map(2 * n), *o = h + n;
    assert_non_null(h);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(h, n, salt);
    t_poison(o, n);
    fake_reset();
    CK(D.MemcpyHtoD(d, h, n));
    CK(D.MemcpyDtoH(o, d, n));
    t_expect_fill(o, n, salt, what);
    if (t_pinfast() && !staged_h2d())
        fail_msg("%s, round %d: nothing staged", what, round);
    CK(D.MemFree(d));
    t_unmap(h, 2 * n);
}

/* ---- contexts made and destroyed ------------------------------------------------ */
static void test_contexts_come_and_go(void **s)
{
    (void)s;
    for (int round = 0; round < 80; round++) {
        CUcontext c, popped;
        CK(D.CtxCreate(&c, 0, 0));
        staged_round_trip("a round trip in a new context", round);
        CK(D.CtxPopCurrent(&popped));
        CK(D.CtxDestroy(c));
    }
    CK(D.CtxSetCurrent(T_CTX));
}

/* the primary context reset, then made again: new memory, new slots */
static void test_primary_reset(void **s)
{
    (void)s;
    CUresult (*reset)(CUdevice) = (CUresult(*)(CUdevice))fn("cuDevicePrimaryCtxReset_v2");
    for (int round = 0; round < 70; round++) {
        CK(reset(0));
        CUcontext c;
        CK(D.DevicePrimaryCtxRetain(&c, 0));
        CK(D.CtxSetCurrent(c));
        T_CTX = c;
        staged_round_trip("a round trip after a reset", round);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_managed_and_mapped),
        cmocka_unit_test(test_sync_copy_complete),
        cmocka_unit_test(test_capture_global_elsewhere),
        cmocka_unit_test(test_capture_thread_local_elsewhere),
        cmocka_unit_test(test_capture_fresh_context),
        cmocka_unit_test(test_free_host_relaxed_capture),
        cmocka_unit_test(test_other_context_stream),
        cmocka_unit_test(test_no_wait_for_other_stream),
        cmocka_unit_test(test_no_spinning_while_waiting),
        cmocka_unit_test(test_contexts_come_and_go),
        cmocka_unit_test(test_primary_reset),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
