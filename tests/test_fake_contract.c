/* test_fake_contract: the fake driver answers like the real one where the
 * real one was measured (H100, driver 580, 2026-11-24:
 * capture_modes.log in docs/results/2026-11-24-h100-contract/logs.log): capture modes and
 * the calls they prohibit, cuStreamGetCtx, work on streams of another context,
 * the life of primary and created contexts, mapped pinned and managed memory;
 * and (H200, driver 580, 2026-12-01) a 3D batch op's wait by source order.
 * The fake's own exports are called directly (a -lcuda program). */
#define _GNU_SOURCE
#include "t.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N 4096

static CUstream CAP, OTHER;     /* non-blocking streams of T_CTX */
static CUevent EV;              /* recorded on OTHER before each capture */
static CUdeviceptr DEV;         /* 2 * N bytes */
static unsigned char *HOST;     /* N pageable bytes */

static int setup(void **s)
{
    if (t_setup(s) || cuStreamCreate(&CAP, CU_STREAM_NON_BLOCKING) ||
        cuStreamCreate(&OTHER, CU_STREAM_NON_BLOCKING) ||
        cuEventCreate(&EV, CU_EVENT_DISABLE_TIMING) || cuMemAlloc(&DEV, 2 * N))
        return -1;
    HOST = calloc(1, N);
    return HOST ? 0 : -1;
}

/* an export of the fake, by name (for those the test's cuda.h maps to others) */
static void *fake_sym(const char *name)
{
    void *p = dlsym(drv_libcuda(), name);
    assert_non_null(p);
    return p;
}

/* pop the context cuCtxCreate pushed: T_CTX is current again */
static void pop_to_t_ctx(void)
{
    CUcontext c;
    CK(cuCtxPopCurrent(&c));
    CK(cuCtxGetCurrent(&c));
    assert_ptr_equal(c, T_CTX);
}

/* ---- capture modes ----------------------------------------------------------------- */
static void *read_mode(void *arg)
{
    CUstreamCaptureMode *m = arg;
    if (cuThreadExchangeStreamCaptureMode(m))
        *m = (CUstreamCaptureMode)-1;
    return NULL;
}

static void test_exchange_mode(void **s)
{
    (void)s;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    assert_int_equal(m, CU_STREAM_CAPTURE_MODE_GLOBAL);      /* the default */
    /* the mode is the thread's: a new thread starts in GLOBAL */
    CUstreamCaptureMode other = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_mode, &other), 0);
    pthread_join(th, NULL);
    assert_int_equal(other, CU_STREAM_CAPTURE_MODE_GLOBAL);
    m = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    assert_int_equal(m, CU_STREAM_CAPTURE_MODE_RELAXED);
    CK_EQ(cuThreadExchangeStreamCaptureMode(NULL), CUDA_ERROR_INVALID_VALUE);
    m = (CUstreamCaptureMode)7;
    CK_EQ(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(cuStreamBeginCapture(CAP, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE);
}

/* The columns of capture_modes.log, then three calls it does not measure
 * that the real driver documents as unsafe too. */
enum call { EVENT_QUERY, EVENT_RECORD_OTHER, STREAM_SYNC_OTHER, STREAM_SYNC_LEGACY, EVENT_SYNC,
            HOST_ALLOC, FREE_HOST, CTX_SYNC, HTOD_SYNC, DTOH_SYNC, HTOD_ASYNC_OTHER,
            DTOH_ASYNC_OTHER, EVENT_CREATE, STREAM_GET_CTX, IS_CAPTURING_OTHER,
            STREAM_QUERY_OTHER, ALLOC_HOST, STREAM_SYNC_PTSZ, NCALLS };
static const char *names[NCALLS] = {
    "cuEventQuery", "cuEventRecord(other)", "cuStreamSynchronize(other)",
    "cuStreamSynchronize(legacy)", "cuEventSynchronize", "cuMemHostAlloc", "cuMemFreeHost",
    "cuCtxSynchronize", "cuMemcpyHtoD(pageable)", "cuMemcpyDtoH(pageable)",
    "cuMemcpyHtoDAsync(other,pageable)", "cuMemcpyDtoHAsync(other,pageable)", "cuEventCreate",
    "cuStreamGetCtx(other)", "cuStreamIsCapturing(other)", "cuStreamQuery(other)",
    "cuMemAllocHost", "cuStreamSynchronize_ptsz(0)",
};

static const CUstreamCaptureMode modes[3] = {
    CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
    CU_STREAM_CAPTURE_MODE_RELAXED };
static const char *mode_names[3] = { "global", "thread_local", "relaxed" };
static const char *who_names[3] = { "same-thread", "other-thread", "other-thread-relaxed" };

/* per capture mode and caller, per call: 'x' prohibited (900, the capture
 * invalidated), '.' allowed.  The first 15 columns are the log's; the last
 * three follow cuEventQuery. */
static const char *expected[3][3] = {
    { "x.xxxxxx.......xxx", "x.xxxxxx.......xxx", ".......x.........." },
    { "x.xxxxxx.......xxx", ".......x..........", ".......x.........." },
    { ".......x..........", ".......x..........", ".......x.........." },
};

static void *pinned;            /* what FREE_HOST frees, or HOST_ALLOC / ALLOC_HOST got */

static CUresult do_call(enum call c)
{
    CUevent e;
    CUcontext cx;
    CUstreamCaptureStatus st;
    void *p = NULL;
    CUresult r;
    switch (c) {
    case EVENT_QUERY: return cuEventQuery(EV);
    case EVENT_RECORD_OTHER: return cuEventRecord(EV, OTHER);
    case STREAM_SYNC_OTHER: return cuStreamSynchronize(OTHER);
    case STREAM_SYNC_LEGACY: return cuStreamSynchronize(CU_STREAM_LEGACY);
    case EVENT_SYNC: return cuEventSynchronize(EV);
    case HOST_ALLOC:
    case ALLOC_HOST:
        r = c == HOST_ALLOC ? cuMemHostAlloc(&p, N, CU_MEMHOSTALLOC_PORTABLE) : cuMemAllocHost(&p, N);
        if (r == CUDA_SUCCESS)
            pinned = p;
        return r;
    case FREE_HOST:
        r = cuMemFreeHost(pinned);
        if (r == CUDA_SUCCESS)
            pinned = NULL;
        return r;
    case CTX_SYNC: return cuCtxSynchronize();
    case HTOD_SYNC: return cuMemcpyHtoD(DEV, HOST, N);
    case DTOH_SYNC: return cuMemcpyDtoH(HOST, DEV, N);
    case HTOD_ASYNC_OTHER: return cuMemcpyHtoDAsync(DEV, HOST, N, OTHER);
    case DTOH_ASYNC_OTHER: return cuMemcpyDtoHAsync(HOST, DEV, N, OTHER);
    case EVENT_CREATE:
        r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        return r ? r : cuEventDestroy(e);
    case STREAM_GET_CTX: return cuStreamGetCtx(OTHER, &cx);
    case IS_CAPTURING_OTHER: return cuStreamIsCapturing(OTHER, &st);
    case STREAM_QUERY_OTHER: return cuStreamQuery(OTHER);
    case STREAM_SYNC_PTSZ: {
        CUresult (*sync_ptsz)(CUstream);
        *(void **)&sync_ptsz = fake_sym("cuStreamSynchronize_ptsz");
        return sync_ptsz(NULL);
    }
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

struct job { enum call c; int relaxed; CUresult r, mode_r[2]; CUstreamCaptureMode restored; };

static void *job_thread(void *arg)
{
    struct job *j = arg;
    t_bind_ctx();
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (j->relaxed)
        j->mode_r[0] = cuThreadExchangeStreamCaptureMode(&m);
    j->r = do_call(j->c);
    if (j->relaxed)
        j->mode_r[1] = cuThreadExchangeStreamCaptureMode(&m);
    j->restored = m;
    return NULL;
}

/* one line of the log: mode m, caller w, call c; 1 (the line printed) when
 * it differs from the expected one */
static int table_cell(int m, int w, enum call c)
{
    const char *what[3] = { mode_names[m], who_names[w], names[c] };
    if (c == FREE_HOST)
        CK(cuMemHostAlloc(&pinned, N, 0));
    CK(cuEventRecord(EV, OTHER));
    CK(cuStreamSynchronize(OTHER));
    CK(cuStreamBeginCapture(CAP, modes[m]));
    CK(cuMemcpyHtoDAsync(DEV + N, HOST, N, CAP));        /* something captured */
    struct job j = { .c = c, .relaxed = w == 2, .restored = CU_STREAM_CAPTURE_MODE_RELAXED };
    if (w == 0) {
        j.r = do_call(c);
    } else {
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, job_thread, &j), 0);
        pthread_join(th, NULL);
        CK(j.mode_r[0]);
        CK(j.mode_r[1]);
        assert_int_equal(j.restored, CU_STREAM_CAPTURE_MODE_RELAXED);
    }
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(CAP, &st));
    CUgraph g = (CUgraph)&g;        /* must be overwritten */
    CUresult re = cuStreamEndCapture(CAP, &g);
    int prohibited = expected[m][w][c] == 'x';
    int wrong = prohibited ? j.r != CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ||
                                 st != CU_STREAM_CAPTURE_STATUS_INVALIDATED ||
                                 re != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED || g != NULL
                           : j.r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_ACTIVE ||
                                 re != CUDA_SUCCESS || g == NULL || g == (CUgraph)&g;
    if (wrong)
        print_error("%s %s %s -> %d; then capture status %d, end %d graph %s; expected %s\n",
                    what[0], what[1], what[2], (int)j.r, (int)st, (int)re, g ? "yes" : "no",
                    prohibited ? "900, status 2, end 901, no graph" : "0, status 1, end 0, a graph");
    if (g == (CUgraph)&g)
        g = NULL;
    if (g)
        CK(cuGraphDestroy(g));
    CK(cuCtxSynchronize());
    if (pinned) {
        /* a prohibited cuMemFreeHost did nothing: the block is still there */
        unsigned fl;
        CK(cuMemHostGetFlags(&fl, pinned));
        CK(cuMemFreeHost(pinned));
        pinned = NULL;
    }
    return wrong;
}

static void test_capture_modes_table(void **s)
{
    (void)s;
    int wrong = 0;
    for (int m = 0; m < 3; m++)
        for (int w = 0; w < 3; w++)
            for (int c = 0; c < NCALLS; c++)
                wrong += table_cell(m, w, (enum call)c);
    if (wrong)
        fail_msg("%d of %d lines differ from the measured table", wrong, 3 * 3 * NCALLS);
}

/* after invalidation: what is captured is dropped, the capture is still under
 * way (so unsafe calls stay prohibited) until it ends, with no graph */
static void test_invalidated_capture(void **s)
{
    (void)s;
    CUstreamCaptureStatus st;
    cuuint64_t id, id2;
    CUgraph g;
    CK(cuStreamBeginCapture(CAP, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamGetCaptureInfo(CAP, &st, &id, &g, NULL, NULL, NULL));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_non_null(g);
    /* calls on the capturing stream itself keep the fake's older rule: they
     * fail and the capture goes on (the real driver invalidates it) */
    CK_EQ(cuStreamSynchronize(CAP), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK_EQ(cuStreamQuery(CAP), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamIsCapturing(CAP, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);

    CK_EQ(cuEventQuery(EV), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamGetCaptureInfo(CAP, &st, &id2, &g, NULL, NULL, NULL));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_int_equal(id2, id);
    assert_null(g);
    CK(cuMemcpyHtoDAsync(DEV, HOST, N, CAP));             /* dropped */
    CK_EQ(cuEventSynchronize(EV), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    g = (CUgraph)&g;
    CK_EQ(cuStreamEndCapture(CAP, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    CK(cuStreamIsCapturing(CAP, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuEventQuery(EV));
    CK(cuEventSynchronize(EV));
    CK_EQ(cuStreamEndCapture(CAP, &g), CUDA_ERROR_ILLEGAL_STATE);
}

/* cuCtxSynchronize is prohibited by any capture in its context, whatever the
 * modes; a capture in another context does not prohibit it when relaxed */
static void test_ctx_sync_with_capture(void **s)
{
    (void)s;
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    CUcontext c2;
    CUstream s2;
    CUdevice dev;
    CUstreamCaptureStatus st;
    CUgraph g;
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&c2, NULL, 0, dev));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    pop_to_t_ctx();
    CK(cuCtxSynchronize());                               /* T_CTX captures nothing */
    CK(cuStreamIsCapturing(s2, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK_EQ(cuCtxSynchronize_v2(c2), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamIsCapturing(s2, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CK_EQ(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    CK(cuCtxSynchronize_v2(c2));

    CK(cuStreamBeginCapture(CAP, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK_EQ(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK_EQ(cuStreamEndCapture(CAP, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuCtxDestroy(c2));
    CK(cuThreadExchangeStreamCaptureMode(&m));
    assert_int_equal(m, CU_STREAM_CAPTURE_MODE_RELAXED);
}

/* every capture that prohibits a call is invalidated, and only those */
struct tl_capture { CUstream s; pthread_barrier_t *b; CUresult begin, end; CUgraph g; };

static void *thread_local_capture(void *arg)
{
    struct tl_capture *t = arg;
    t_bind_ctx();
    t->begin = cuStreamBeginCapture(t->s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    pthread_barrier_wait(t->b);     /* capture under way */
    pthread_barrier_wait(t->b);     /* the main thread has called */
    t->end = cuStreamEndCapture(t->s, &t->g);
    return NULL;
}

static void test_invalidates_every_prohibiting_capture(void **s)
{
    (void)s;
    CUstream s2, s3;
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s3, CU_STREAM_NON_BLOCKING));
    pthread_barrier_t b;
    assert_int_equal(pthread_barrier_init(&b, NULL, 2), 0);
    struct tl_capture t = { .s = s3, .b = &b };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, thread_local_capture, &t), 0);
    pthread_barrier_wait(&b);
    CK(t.begin);
    CK(cuStreamBeginCapture(CAP, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK_EQ(cuStreamQuery(OTHER), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(CAP, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CK(cuStreamIsCapturing(s2, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CK(cuStreamIsCapturing(s3, &st));     /* another thread's thread-local capture */
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    pthread_barrier_wait(&b);
    pthread_join(th, NULL);
    CK(t.end);
    assert_non_null(t.g);
    CK(cuGraphDestroy(t.g));
    CUgraph g;
    CK_EQ(cuStreamEndCapture(CAP, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK_EQ(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    pthread_barrier_destroy(&b);
    CK(cuStreamDestroy(s2));
    CK(cuStreamDestroy(s3));
}

/* ---- cuStreamGetCtx ----------------------------------------------------------------- */
static void test_stream_get_ctx(void **s)
{
    (void)s;
    CUcontext c = NULL, c2;
    CUgreenCtx green = (CUgreenCtx)&c;
    CUdevice dev;
    CUstream s2, dead;
    CK(cuStreamGetCtx(OTHER, &c));
    assert_ptr_equal(c, T_CTX);
    CUstream current[] = { NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD };
    void *get_ptsz_sym = fake_sym("cuStreamGetCtx_ptsz");
    CUresult (*get_ptsz)(CUstream, CUcontext *);
    *(void **)&get_ptsz = get_ptsz_sym;
    for (int i = 0; i < 3; i++) {
        c = NULL;
        CK(cuStreamGetCtx(current[i], &c));
        assert_ptr_equal(c, T_CTX);
        c = NULL;
        CK(get_ptsz(current[i], &c));
        assert_ptr_equal(c, T_CTX);
    }
    CK(cuStreamGetCtx_v2(OTHER, &c, &green));
    assert_ptr_equal(c, T_CTX);
    assert_null(green);
    CK_EQ(cuStreamGetCtx(OTHER, NULL), CUDA_ERROR_INVALID_VALUE);

    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&c2, NULL, 0, dev));
    CK(cuStreamCreate(&s2, 0));
    pop_to_t_ctx();
    CK(cuStreamGetCtx(s2, &c));
    assert_ptr_equal(c, c2);
    CK(cuCtxDestroy(c2));
    CK_EQ(cuStreamGetCtx(s2, &c), CUDA_ERROR_INVALID_HANDLE);    /* stream of a destroyed context */
    CK(cuStreamCreate(&dead, 0));
    CK(cuStreamDestroy(dead));
    CK_EQ(cuStreamGetCtx(dead, &c), CUDA_ERROR_INVALID_HANDLE);
    long junk[16] = { 0 };
    CK_EQ(cuStreamGetCtx((CUstream)junk, &c), CUDA_ERROR_INVALID_HANDLE);

    /* cuGetProcAddress hands out the 2-argument ABI before CUDA 12.5 */
    if (!t_pinfast()) {
        void *p;
        CUdriverProcAddressQueryResult q;
        CK(cuGetProcAddress("cuStreamGetCtx", &p, 12000, 0, &q));
        assert_ptr_equal(p, fake_sym("cuStreamGetCtx"));
        CK(cuGetProcAddress("cuStreamGetCtx", &p, 13000, 0, &q));
        assert_ptr_equal(p, fake_sym("cuStreamGetCtx_v2"));
        CK(cuGetProcAddress("cuStreamGetCtx", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &q));
        assert_ptr_equal(p, get_ptsz_sym);
        CK(cuGetProcAddress("cuThreadExchangeStreamCaptureMode", &p, 13000, 0, &q));
        assert_ptr_equal(p, fake_sym("cuThreadExchangeStreamCaptureMode"));
    }
}

/* ---- streams and events of another context ------------------------------------------ */
static void test_other_context(void **s)
{
    (void)s;
    unsigned long (*copies)(CUstream, int);
    *(void **)&copies = fake_sym("fakecuda_stream_copies");
    CUdevice dev;
    CUcontext c2, got;
    CUstream s2;
    CUdeviceptr d2;
    CUevent e2;
    unsigned char *o = malloc(N);
    assert_non_null(o);
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&c2, NULL, 0, dev));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d2, N));
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    pop_to_t_ctx();

    CK(cuStreamGetCtx(s2, &got));
    assert_ptr_equal(got, c2);
    uint64_t salt = t_rand();
    t_fill(HOST, N, salt);
    unsigned long before = copies(s2, 0);
    CK(cuMemcpyHtoDAsync(d2, HOST, N, s2));
    CK(cuMemcpyDtoHAsync(o, d2, N, s2));
    assert_int_equal(copies(s2, 0), before + 2);           /* they ran on s2 */
    t_expect_fill(o, N, salt, "copies on a stream of another context");
    CK_EQ(cuEventRecord(EV, s2), CUDA_ERROR_INVALID_HANDLE);   /* T_CTX's event */
    CK(cuEventRecord(e2, s2));
    CK(cuStreamSynchronize(s2));
    CK(cuEventQuery(e2));
    CK(cuEventSynchronize(e2));
    CK(cuStreamWaitEvent(OTHER, e2, 0));
    CK(cuStreamSynchronize(OTHER));
    CK(cuCtxDestroy(c2));
    /* its event went with it */
    CK_EQ(cuEventQuery(e2), CUDA_ERROR_INVALID_HANDLE);
    CK_EQ(cuStreamWaitEvent(OTHER, e2, 0), CUDA_ERROR_INVALID_HANDLE);
    free(o);
}

/* ---- the life of contexts -------------------------------------------------------------- */
/* what a context had, checked invalid once it is gone (T_CTX current) */
struct owned { CUcontext ctx; unsigned long long id; CUstream s; CUevent e; CUdeviceptr d; void *p; };

static void make_owned(CUcontext c, struct owned *o)
{
    o->ctx = c;
    CK(cuCtxPushCurrent(c));
    CK(cuCtxGetId(c, &o->id));
    CK(cuStreamCreate(&o->s, 0));
    CK(cuEventCreate(&o->e, 0));
    CK(cuEventRecord(o->e, o->s));
    CK(cuMemAlloc(&o->d, N));
    CK(cuMemHostAlloc(&o->p, N, CU_MEMHOSTALLOC_PORTABLE));
    memset(o->p, 0, N);
    CK(cuMemcpyHtoDAsync(o->d, o->p, N, o->s));
    CK(cuCtxPopCurrent(&c));
}

static void expect_gone(const struct owned *o)
{
    unsigned long long id;
    CUcontext c;
    unsigned type = 7;
    CK_EQ(cuCtxGetId(o->ctx, &id), CUDA_ERROR_INVALID_CONTEXT);
    CK_EQ(cuStreamGetCtx(o->s, &c), CUDA_ERROR_INVALID_HANDLE);
    CK_EQ(cuStreamSynchronize(o->s), CUDA_ERROR_INVALID_HANDLE);
    CK_EQ(cuEventQuery(o->e), CUDA_ERROR_INVALID_HANDLE);
    CK_EQ(cuMemFree(o->d), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, o->d), CUDA_ERROR_INVALID_VALUE);
    /* the pinned block was released with its context (not dereferenced here) */
    CK_EQ(cuMemFreeHost(o->p), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)o->p),
          CUDA_ERROR_INVALID_VALUE);
}

static int primary_active(CUdevice dev)
{
    unsigned flags = 7;
    int active = -1;
    CK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    assert_int_equal(flags, 0);
    return active;
}

/* device 1's primary context: T_CTX, device 0's, is the tests' context */
static void test_primary_context(void **s)
{
    (void)s;
    CUdevice dev;
    CUcontext c, c2;
    unsigned flags;
    int active;
    CK(cuDeviceGet(&dev, 1));
    CK_EQ(cuDevicePrimaryCtxGetState(dev, NULL, &active), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(cuDevicePrimaryCtxGetState(dev, &flags, NULL), CUDA_ERROR_INVALID_VALUE);
    CK_EQ(cuDevicePrimaryCtxGetState(99, &flags, &active), CUDA_ERROR_INVALID_DEVICE);
    CK_EQ(cuDevicePrimaryCtxReset(99), CUDA_ERROR_INVALID_DEVICE);
    assert_int_equal(primary_active(dev), 0);

    /* retained twice: active until the second release, which destroys it */
    struct owned a;
    CK(cuDevicePrimaryCtxRetain(&c, dev));
    CK(cuDevicePrimaryCtxRetain(&c2, dev));
    assert_ptr_equal(c, c2);
    assert_int_equal(primary_active(dev), 1);
    make_owned(c, &a);
    CK(cuDevicePrimaryCtxRelease(dev));
    assert_int_equal(primary_active(dev), 1);
    CK(cuStreamSynchronize(a.s));
    CK(cuDevicePrimaryCtxRelease(dev));
    assert_int_equal(primary_active(dev), 0);
    expect_gone(&a);
    CK_EQ(cuDevicePrimaryCtxRelease(dev), CUDA_ERROR_INVALID_CONTEXT);

    /* the next retain makes a new context, with a new id; a reset destroys
     * it whatever its retain count */
    struct owned b;
    CK(cuDevicePrimaryCtxRetain(&c, dev));
    assert_int_equal(primary_active(dev), 1);
    make_owned(c, &b);
    assert_true(b.id != a.id);
    CK(cuDevicePrimaryCtxRetain(&c2, dev));
    CK(cuDevicePrimaryCtxReset(dev));
    assert_int_equal(primary_active(dev), 0);
    expect_gone(&b);
    CK(cuDevicePrimaryCtxReset(dev));                    /* nothing to reset */

    /* the _v1 reset export, and its registration in cuGetProcAddress */
    struct owned r;
    CK(cuDevicePrimaryCtxRetain(&c, dev));
    make_owned(c, &r);
    assert_true(r.id != b.id);
    void *reset_v1_sym = fake_sym("cuDevicePrimaryCtxReset");
    CUresult (*reset_v1)(CUdevice);
    *(void **)&reset_v1 = reset_v1_sym;
    CK(reset_v1(dev));
    assert_int_equal(primary_active(dev), 0);
    expect_gone(&r);
    if (!t_pinfast()) {
        void *p;
        CUdriverProcAddressQueryResult q;
        CK(cuGetProcAddress("cuDevicePrimaryCtxReset", &p, 13000, 0, &q));
        assert_ptr_equal(p, fake_sym("cuDevicePrimaryCtxReset_v2"));
        CK(cuGetProcAddress("cuDevicePrimaryCtxReset", &p, 10000, 0, &q));
        assert_ptr_equal(p, reset_v1_sym);
        CK(cuGetProcAddress("cuDevicePrimaryCtxGetState", &p, 13000, 0, &q));
        assert_ptr_equal(p, fake_sym("cuDevicePrimaryCtxGetState"));
    }
    /* T_CTX (device 0) is untouched */
    unsigned long long id;
    CK(cuCtxGetId(T_CTX, &id));
    CK(cuCtxGetId(NULL, &id));
}

static void test_ctx_destroy(void **s)
{
    (void)s;
    CUdevice dev;
    CUcontext c2;
    struct owned o;
    CK(cuDeviceGet(&dev, 0));
    CK(cuCtxCreate(&c2, NULL, 0, dev));
    pop_to_t_ctx();
    make_owned(c2, &o);
    /* a registered range is the application's: forgotten, not freed */
    unsigned char *reg = aligned_alloc(4096, N);
    assert_non_null(reg);
    CK(cuCtxPushCurrent(c2));
    CK(cuMemHostRegister(reg, N, 0));
    CK(cuCtxDestroy(c2));
    /* the destroyed context was popped: T_CTX is current again */
    CUcontext cur;
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, T_CTX);
    expect_gone(&o);
    CK_EQ(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    memset(reg, 1, N);
    free(reg);
    CK_EQ(cuCtxDestroy(c2), CUDA_ERROR_INVALID_CONTEXT);
    CK_EQ(cuCtxPushCurrent(c2), CUDA_ERROR_INVALID_CONTEXT);
}

/* ---- mapped pinned and managed memory ----------------------------------------------------- */
static void test_mapped_and_managed(void **s)
{
    (void)s;
    unsigned char *o = malloc(N);
    assert_non_null(o);
    void *p;
    CUdeviceptr dp, m;
    CK(cuMemHostAlloc(&p, N, CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostGetDevicePointer(&dp, p, 0));
    assert_int_equal(dp, (CUdeviceptr)(uintptr_t)p);        /* unified addressing */
    /* the device pointer is a device operand of copies */
    uint64_t salt = t_rand();
    t_fill(HOST, N, salt);
    CK(cuMemcpyHtoD(dp, HOST, N));
    t_expect_fill(p, N, salt, "H2D into mapped pinned memory");
    CK(cuMemcpyDtoD(DEV, dp, N));
    CK(cuCtxSynchronize());
    t_poison(o, N);
    CK(cuMemcpyDtoHAsync(o, DEV, N, OTHER));
    CK(cuStreamSynchronize(OTHER));
    t_expect_fill(o, N, salt, "D2D from mapped pinned memory");

    CUpointer_attribute at[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_POINTER, CU_POINTER_ATTRIBUTE_HOST_POINTER };
    unsigned type, managed;
    CUdeviceptr adp;
    void *ahp;
    void *data[] = { &type, &managed, &adp, &ahp };
    CK(cuPointerGetAttributes(4, at, data, dp));
    assert_int_equal(type, CU_MEMORYTYPE_HOST);
    assert_int_equal(managed, 0);
    assert_int_equal(adp, dp);
    assert_ptr_equal(ahp, p);
    CK(cuMemFreeHost(p));

    /* managed memory: the host reaches it at its address; a device pointer
     * by memory type, flagged managed */
    CK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    t_fill((void *)(uintptr_t)m, N, salt + 1);
    t_poison(o, N);
    CK(cuMemcpyDtoH(o, m, N));
    t_expect_fill(o, N, salt + 1, "D2H from managed memory");
    CK(cuPointerGetAttributes(4, at, data, m));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    assert_int_equal(managed, 1);
    assert_int_equal(adp, m);
    assert_ptr_equal(ahp, (void *)(uintptr_t)m);
    CK(cuMemFree(m));
    free(o);
}

/* A long "kernel" on the stream. */
static void CUDA_CB hold(void *arg) { usleep((useconds_t)(uintptr_t)arg); }

/* A 3D batch op from pageable memory behind busy work (H200, driver 580,
 * 2026-12-01, probe_driver_staging slices): with its source read in the
 * call (DURING_API_CALL) the call waits for the work; with ANY it
 * returns at once. */
static void test_batch3d_source_orders(void **s)
{
    (void)s;
    enum { HOLD_US = 300000 };
    static const CUmemcpySrcAccessOrder orders[] = { CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL,
                                                     CU_MEMCPY_SRC_ACCESS_ORDER_ANY };
    for (int k = 0; k < 2; k++) {
        CUDA_MEMCPY3D_BATCH_OP op = {
            .src = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                     .op.ptr = { .ptr = (CUdeviceptr)(uintptr_t)HOST, .rowLength = 64, .layerHeight = 32,
                                 .locHint = { .type = CU_MEM_LOCATION_TYPE_HOST } } },
            .dst = { .type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                     .op.ptr = { .ptr = DEV, .rowLength = 64, .layerHeight = 32,
                                 .locHint = { .type = CU_MEM_LOCATION_TYPE_DEVICE } } },
            .extent = { .width = 48, .height = 32, .depth = 1 },
            .srcAccessOrder = orders[k],
        };
        CK(cuLaunchHostFunc(OTHER, hold, (void *)(uintptr_t)HOLD_US));
        double t0 = t_now();
        CK(cuMemcpy3DBatchAsync_v2(1, &op, 0, OTHER));
        double took = t_now() - t0;
        CK(cuStreamSynchronize(OTHER));
        printf("[ batch3d  ] source order %d: returned after %.0f ms behind %d ms\n", (int)orders[k], took * 1e3,
               HOLD_US / 1000);
        if (k == 0 && took < HOLD_US / 2 * 1e-6)
            fail_msg("read in the call: returned before the work ended");
        if (k == 1 && took > HOLD_US / 2 * 1e-6)
            fail_msg("any order: waited for the work");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange_mode),
        cmocka_unit_test(test_capture_modes_table),
        cmocka_unit_test(test_invalidated_capture),
        cmocka_unit_test(test_ctx_sync_with_capture),
        cmocka_unit_test(test_invalidates_every_prohibiting_capture),
        cmocka_unit_test(test_stream_get_ctx),
        cmocka_unit_test(test_other_context),
        cmocka_unit_test(test_primary_context),
        cmocka_unit_test(test_ctx_destroy),
        cmocka_unit_test(test_mapped_and_managed),
        cmocka_unit_test(test_batch3d_source_orders),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
