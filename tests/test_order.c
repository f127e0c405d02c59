/* test_order: a copy is ordered in its stream exactly as without pinfast.
 * Host functions (cuLaunchHostFunc, the stand-in for kernels) read or
 * overwrite the data right after the copy, on the same stream and on another
 * stream behind cuStreamWaitEvent; pageable sources are overwritten right
 * after an async copy returns; the legacy stream waits for blocking streams;
 * several threads copy at once; captured copies replay in graphs. */
#define _GNU_SOURCE
#include "t.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CUstream S1, S2;

static int setup(void **s) { return t_setup_streams(s, &S1, &S2); }

struct check { const unsigned char *p; size_t n; uint64_t salt; int ok; int ran; };

static void host_check(void *arg)
{
    struct check *c = arg;
    size_t bad;
    c->ok = t_check_fill(c->p, c->n, c->salt, &bad);
    c->ran = 1;
}

struct overwrite { unsigned char *p; size_t n; };

static void host_overwrite(void *arg)
{
    struct overwrite *o = arg;
    memset(o->p, 0x5A, o->n);
}

static void host_sleep(void *arg)
{
    usleep((useconds_t)(uintptr_t)arg);
}

static size_t big(void) { return t_rand_range(4 << 20, 12 << 20); }

/* a copy's destination, in pinned or pageable memory */
static unsigned char *dest_alloc(size_t n, int pinned)
{
    unsigned char *o;
    if (pinned)
        CK(D.MemHostAlloc((void **)&o, n, 0));
    else
        o = malloc(n);
    return o;
}

static void dest_free(unsigned char *o, int pinned)
{
    if (pinned)
        CK(D.MemFreeHost(o));
    else
        free(o);
}

/* D2H followed by a host function reading the destination, same stream */
static void test_d2h_then_hostfn(void **s)
{
    (void)s;
    CUstream streams[] = { S1, S2, NULL };
    for (int k = 0; k < 3; k++)
        for (int pinned = 0; pinned < 2; pinned++) {
            size_t n = big();
            unsigned char *h = malloc(n), *o = dest_alloc(n, pinned);
            CUdeviceptr d;
            CK(D.MemAlloc(&d, n));
            uint64_t salt = t_rand();
            t_fill(h, n, salt);
            t_poison(o, n);
            CK(D.MemcpyHtoDAsync(d, h, n, streams[k]));
            CK(D.MemcpyDtoHAsync(o, d, n, streams[k]));
            struct check c = { o, n, salt, 0, 0 };
            CK(D.LaunchHostFunc(streams[k], host_check, &c));
            CK(D.StreamSynchronize(streams[k]));
            assert_true(c.ran);
            if (!c.ok)
                fail_msg("host function after D2HAsync (%s, stream %d) saw incomplete data",
                         pinned ? "pinned" : "pageable", k);
            CK(D.MemFree(d));
            free(h);
            dest_free(o, pinned);
        }
}

/* H2D from pinned memory, then a host function overwrites the source: the
 * copy must have read it before */
static void test_h2d_then_overwrite(void **s)
{
    (void)s;
    size_t n = big();
    unsigned char *p, *o = malloc(n);
    CK(D.MemHostAlloc((void **)&p, n, 0));
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(p, n, salt);
    CK(D.MemcpyHtoDAsync(d, p, n, S1));
    struct overwrite w = { p, n };
    CK(D.LaunchHostFunc(S1, host_overwrite, &w));
    CK(D.MemcpyDtoHAsync(o, d, n, S1));
    CK(D.StreamSynchronize(S1));
    t_expect_fill(o, n, salt, "H2D then host overwrite of the source");
    CK(D.MemFree(d));
    CK(D.MemFreeHost(p));
    free(o);
}

/* async H2D from pageable memory, source overwritten as soon as it returns */
static void test_pageable_source_reuse(void **s)
{
    (void)s;
    CUstream streams[] = { S1, S2, NULL };
    for (int k = 0; k < 3; k++) {
        size_t n = big();
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        /* keep the stream busy so the copy really runs late */
        CK(D.LaunchHostFunc(streams[k], host_sleep, (void *)(uintptr_t)20000));
        CK(D.MemcpyHtoDAsync(d, h, n, streams[k]));
        memset(h, 0x77, n);
        free(h);                       /* the source may even be freed */
        CK(D.MemcpyDtoHAsync(o, d, n, streams[k]));
        CK(D.StreamSynchronize(streams[k]));
        t_expect_fill(o, n, salt, "pageable source reused after HtoDAsync");
        CK(D.MemFree(d));
        free(o);
    }
}

/* sync D2H returns with every byte in place, after earlier queued work */
static void test_sync_d2h_in_place(void **s)
{
    (void)s;
    size_t n = big();
    unsigned char *h = malloc(n), *o = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(h, n, salt);
    CK(D.LaunchHostFunc(NULL, host_sleep, (void *)(uintptr_t)20000));
    CK(D.MemcpyHtoDAsync(d, h, n, NULL));
    t_poison(o, n);
    CK(D.MemcpyDtoH(o, d, n));
    t_expect_fill(o, n, salt, "sync D2H after queued H2D");
    CK(D.MemFree(d));
    free(h);
    free(o);
}

/* stream 1 copies, an event orders stream 2 behind it, stream 2 copies back
 * and checks in a host function */
static void test_cross_stream_event(void **s)
{
    (void)s;
    for (int pinned = 0; pinned < 2; pinned++) {
        size_t n = big();
        unsigned char *h = malloc(n), *o = dest_alloc(n, pinned);
        CUdeviceptr d;
        CK(D.MemAlloc(&d, n));
        CUevent e;
        CK(D.EventCreate(&e, CU_EVENT_DISABLE_TIMING));
        uint64_t salt = t_rand();
        t_fill(h, n, salt);
        t_poison(o, n);
        CK(D.LaunchHostFunc(S1, host_sleep, (void *)(uintptr_t)20000));
        CK(D.MemcpyHtoDAsync(d, h, n, S1));
        CK(D.EventRecord(e, S1));
        CK(D.StreamWaitEvent(S2, e, 0));
        CK(D.MemcpyDtoHAsync(o, d, n, S2));
        struct check c = { o, n, salt, 0, 0 };
        CK(D.LaunchHostFunc(S2, host_check, &c));
        CK(D.StreamSynchronize(S2));
        assert_true(c.ran && c.ok);
        CK(D.EventDestroy(e));
        CK(D.MemFree(d));
        free(h);
        dest_free(o, pinned);
    }
}

/* legacy flavour: work on the legacy stream waits for earlier work on a
 * blocking stream (and the reverse) */
static void test_legacy_implicit_sync(void **s)
{
    (void)s;
    if (D.ptds)
        skip();
    size_t n = big();
    unsigned char *p, *o = malloc(n);
    CK(D.MemHostAlloc((void **)&p, n, 0));
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    uint64_t salt = t_rand();
    t_fill(p, n, salt);
    CK(D.LaunchHostFunc(S1, host_sleep, (void *)(uintptr_t)30000));
    CK(D.MemcpyHtoDAsync(d, p, n, S1));
    t_poison(o, n);
    CK(D.MemcpyDtoH(o, d, n));                /* legacy stream: waits for S1 */
    t_expect_fill(o, n, salt, "legacy D2H after blocking-stream H2D");

    /* and the reverse: pageable H2D on the legacy stream, D2H on S1 */
    unsigned char *h = malloc(n);
    t_fill(h, n, salt + 1);
    CK(D.LaunchHostFunc(NULL, host_sleep, (void *)(uintptr_t)30000));
    CK(D.MemcpyHtoDAsync(d, h, n, NULL));
    t_poison(o, n);
    CK(D.MemcpyDtoHAsync(o, d, n, S1));
    CK(D.StreamSynchronize(S1));
    t_expect_fill(o, n, salt + 1, "blocking-stream D2H after legacy H2D");
    CK(D.MemFree(d));
    CK(D.MemFreeHost(p));
    free(h);
    free(o);
}

struct worker { int id; int failures; };

static void *thread_main(void *arg)
{
    struct worker *w = arg;
    t_bind_ctx();
    CUstream st;
    if (D.StreamCreate(&st, w->id & 1 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT))
        abort();
    for (int it = 0; it < 12; it++) {
        size_t n = 1 + (size_t)((unsigned)(w->id * 7919 + it * 104729) % (6u << 20));
        unsigned char *h = malloc(n), *o = malloc(n);
        CUdeviceptr d;
        if (D.MemAlloc(&d, n))
            abort();
        uint64_t salt = (uint64_t)w->id << 32 | (uint64_t)it;
        t_fill(h, n, salt);
        memset(o, 0xA5, n);
        CUstream use = it % 3 == 0 ? NULL : st;
        CUresult r;
        if (it & 1) {
            r = D.MemcpyHtoD(d, h, n);
            if (!r)
                r = D.MemcpyDtoH(o, d, n);
        } else {
            r = D.MemcpyHtoDAsync(d, h, n, use);
            if (!r)
                r = D.MemcpyDtoHAsync(o, d, n, use);
            if (!r)
                r = D.StreamSynchronize(use);
        }
        size_t bad;
        if (r || !t_check_fill(o, n, salt, &bad)) {
            fprintf(stderr, "thread %d iteration %d (%zu bytes): r=%d\n", w->id, it, n, (int)r);
            w->failures++;
        }
        D.MemFree(d);
        free(h);
        free(o);
    }
    D.StreamDestroy(st);
    return NULL;
}

static void test_threads(void **s)
{
    (void)s;
    enum { N = 6 };
    pthread_t th[N];
    struct worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (struct worker){ i, 0 };
        assert_int_equal(pthread_create(&th[i], NULL, thread_main, &w[i]), 0);
    }
    int failures = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        failures += w[i].failures;
    }
    assert_int_equal(failures, 0);
}

static void count_fn(void *arg)
{
    (*(int *)arg)++;
}

/* a captured H2D + host function + D2H replays in stream order */
static void test_capture(void **s)
{
    (void)s;
    size_t n = t_rand_range(1, 4 << 20);
    unsigned char *p, *o;
    CK(D.MemHostAlloc((void **)&p, n, 0));
    CK(D.MemHostAlloc((void **)&o, n, 0));
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    CUstream cs;
    CK(D.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    int count = 0;
    CK(D.StreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUstreamCaptureStatus st;
    CK(D.StreamIsCapturing(cs, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(D.MemcpyHtoDAsync(d, p, n, cs));
    CK(D.LaunchHostFunc(cs, count_fn, &count));
    CK(D.MemcpyDtoHAsync(o, d, n, cs));
    CUgraph g;
    CK(D.StreamEndCapture(cs, &g));
    assert_int_equal(count, 0);       /* nothing ran while capturing */
    CUgraphExec x;
    CK(D.GraphInstantiateWithFlags(&x, g, 0));
    for (int round = 0; round < 3; round++) {
        uint64_t salt = t_rand();
        t_fill(p, n, salt);
        t_poison(o, n);
        CK(D.GraphLaunch(x, cs));
        CK(D.StreamSynchronize(cs));
        t_expect_fill(o, n, salt, "graph replay");
        assert_int_equal(count, round + 1);
    }
    CK(D.GraphExecDestroy(x));
    CK(D.GraphDestroy(g));
    CK(D.StreamDestroy(cs));
    CK(D.MemFree(d));
    CK(D.MemFreeHost(p));
    CK(D.MemFreeHost(o));
}

/* events: query/synchronize/elapsed around copies */
static void test_events(void **s)
{
    (void)s;
    size_t n = big();
    unsigned char *h = malloc(n);
    CUdeviceptr d;
    CK(D.MemAlloc(&d, n));
    t_fill(h, n, 1);
    CUevent a, b;
    CK(D.EventCreate(&a, 0));
    CK(D.EventCreate(&b, 0));
    CK(D.EventRecord(a, S1));
    CK(D.LaunchHostFunc(S1, host_sleep, (void *)(uintptr_t)20000));
    CK(D.MemcpyHtoDAsync(d, h, n, S1));
    CK(D.EventRecordWithFlags(b, S1, 0));
    CUresult q = D.EventQuery(b);
    assert_true(q == CUDA_SUCCESS || q == CUDA_ERROR_NOT_READY);
    CK(D.EventSynchronize(b));
    CK(D.EventQuery(b));
    float ms = -1;
    CK(D.EventElapsedTime(&ms, a, b));
    assert_true(ms >= 0);
    CK(D.EventDestroy(a));
    CK(D.EventDestroy(b));
    CK(D.MemFree(d));
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_d2h_then_hostfn),
        cmocka_unit_test(test_h2d_then_overwrite),
        cmocka_unit_test(test_pageable_source_reuse),
        cmocka_unit_test(test_sync_d2h_in_place),
        cmocka_unit_test(test_cross_stream_event),
        cmocka_unit_test(test_legacy_implicit_sync),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_capture),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
