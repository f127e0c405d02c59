/* capture_modes: what the real driver answers, and what becomes of a capture,
 * when a thread calls each of the driver functions pinfast uses internally
 * while a capture is under way.  For every capture mode (global, thread-local,
 * relaxed) and every caller (the capturing thread itself, another thread in
 * its default mode, another thread switched to relaxed with
 * cuThreadExchangeStreamCaptureMode), one line: the call's result and the
 * end-capture result.  tests/fake encodes these answers (fake_stream.c).
 * Plain driver only; no pinfast. */
#include <cuda.h>
#include <pthread.h>

#include "../probe.h"


enum call { EVENT_QUERY, EVENT_RECORD_OTHER, STREAM_SYNC_OTHER, STREAM_SYNC_LEGACY, EVENT_SYNC,
            HOST_ALLOC, FREE_HOST, CTX_SYNC, HTOD_SYNC, DTOH_SYNC, HTOD_ASYNC_OTHER,
            DTOH_ASYNC_OTHER, EVENT_CREATE, STREAM_GET_CTX, IS_CAPTURING_OTHER, NCALLS };
static const char *names[NCALLS] = {
    "cuEventQuery", "cuEventRecord(other)", "cuStreamSynchronize(other)",
    "cuStreamSynchronize(legacy)", "cuEventSynchronize", "cuMemHostAlloc", "cuMemFreeHost",
    "cuCtxSynchronize", "cuMemcpyHtoD(pageable)", "cuMemcpyDtoH(pageable)",
    "cuMemcpyHtoDAsync(other,pageable)", "cuMemcpyDtoHAsync(other,pageable)", "cuEventCreate",
    "cuStreamGetCtx(other)", "cuStreamIsCapturing(other)"};

static CUcontext ctx;
static CUstream cap, other;
static CUevent ev;
static CUdeviceptr dev;
static char *host;
static void *pinned;

static CUresult do_call(enum call c) {
    CUevent e;
    CUcontext cx;
    CUstreamCaptureStatus st;
    void *p;
    switch (c) {
    case EVENT_QUERY: return cuEventQuery(ev);
    case EVENT_RECORD_OTHER: return cuEventRecord(ev, other);
    case STREAM_SYNC_OTHER: return cuStreamSynchronize(other);
    case STREAM_SYNC_LEGACY: return cuStreamSynchronize(CU_STREAM_LEGACY);
    case EVENT_SYNC: return cuEventSynchronize(ev);
    case HOST_ALLOC: {
        CUresult r = cuMemHostAlloc(&p, 1 << 20, CU_MEMHOSTALLOC_PORTABLE);
        if (r == CUDA_SUCCESS)
            pinned = p;
        return r;
    }
    case FREE_HOST: {
        CUresult r = pinned ? cuMemFreeHost(pinned) : CUDA_ERROR_INVALID_VALUE;
        pinned = NULL;
        return r;
    }
    case CTX_SYNC: return cuCtxSynchronize();
    case HTOD_SYNC: return cuMemcpyHtoD(dev, host, 1 << 20);
    case DTOH_SYNC: return cuMemcpyDtoH(host, dev, 1 << 20);
    case HTOD_ASYNC_OTHER: return cuMemcpyHtoDAsync(dev, host, 1 << 20, other);
    case DTOH_ASYNC_OTHER: return cuMemcpyDtoHAsync(host, dev, 1 << 20, other);
    case EVENT_CREATE: {
        CUresult r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        if (r == CUDA_SUCCESS)
            cuEventDestroy(e);
        return r;
    }
    case STREAM_GET_CTX: return cuStreamGetCtx(other, &cx);
    case IS_CAPTURING_OTHER: return cuStreamIsCapturing(other, &st);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

struct job { enum call c; int relaxed; CUresult r; };

static void *in_thread(void *arg) {
    struct job *j = arg;
    CK(cuCtxSetCurrent(ctx));
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (j->relaxed)
        CK(cuThreadExchangeStreamCaptureMode(&m));
    j->r = do_call(j->c);
    if (j->relaxed)
        CK(cuThreadExchangeStreamCaptureMode(&m));
    return NULL;
}

int main(void) {
    CUdevice d;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, d));
    CK(cuCtxSetCurrent(ctx));
    CK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuMemAlloc(&dev, 2 << 20));
    host = calloc(1, 1 << 20);
    const char *modes[] = {"global", "thread_local", "relaxed"};
    CUstreamCaptureMode mv[] = {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                CU_STREAM_CAPTURE_MODE_RELAXED};
    const char *who[] = {"same-thread", "other-thread", "other-thread-relaxed"};
    for (int m = 0; m < 3; m++)
        for (int w = 0; w < 3; w++)
            for (int c = 0; c < NCALLS; c++) {
                if (c == FREE_HOST && !pinned) { /* something to free */
                    CK(cuMemHostAlloc(&pinned, 1 << 20, 0));
                }
                CK(cuEventRecord(ev, other));
                CK(cuStreamSynchronize(other));
                CK(cuStreamBeginCapture(cap, mv[m]));
                CK(cuMemsetD8Async(dev, 1, 16, cap)); /* something captured */
                struct job j = {.c = (enum call)c, .relaxed = w == 2};
                if (w == 0) {
                    j.r = do_call(j.c);
                } else {
                    pthread_t t;
                    pthread_create(&t, NULL, in_thread, &j);
                    pthread_join(t, NULL);
                }
                CUstreamCaptureStatus st;
                CUresult rs = cuStreamIsCapturing(cap, &st);
                CUgraph g = NULL;
                CUresult re = cuStreamEndCapture(cap, &g);
                printf("%-12s %-20s %-34s -> %3d; then capture status %d (%d), end %3d graph %s\n",
                       modes[m], who[w], names[c], (int)j.r, (int)st, (int)rs, (int)re,
                       g ? "yes" : "no");
                if (g)
                    cuGraphDestroy(g);
                cuCtxSynchronize();
            }
    /* the capture-mode exchange itself: what a thread's mode is by default */
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    printf("default thread mode %d (global %d, thread-local %d, relaxed %d)\n", (int)m,
           CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
           CU_STREAM_CAPTURE_MODE_RELAXED);
    CK(cuThreadExchangeStreamCaptureMode(&m));
    /* a stream of another context, used while the primary context is current */
    CUcontext c2;
    CUstream s2;
    CUdeviceptr d2;
    CK(cuCtxCreate(&c2, NULL, 0, d));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d2, 1 << 20));
    CUevent e2;
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    CK(cuCtxSetCurrent(ctx));
    CUcontext got = NULL;
    CUresult rg = cuStreamGetCtx(s2, &got);
    printf("other context: cuStreamGetCtx %d same %d\n", (int)rg, got == c2);
    printf("other context: HtoDAsync on its stream %d\n", (int)cuMemcpyHtoDAsync(d2, host, 4096, s2));
    printf("other context: record own event on its stream %d\n", (int)cuEventRecord(ev, s2));
    printf("other context: record its event on its stream %d\n", (int)cuEventRecord(e2, s2));
    printf("other context: query its event %d\n", (int)cuEventQuery(e2));
    printf("other context: wait its event on our stream %d\n", (int)cuStreamWaitEvent(other, e2, 0));
    printf("other context: sync its stream %d\n", (int)cuStreamSynchronize(s2));
    CK(cuCtxDestroy(c2));
    unsigned fl;
    int active;
    CK(cuDevicePrimaryCtxGetState(d, &fl, &active));
    printf("primary active %d before release\n", active);
    CK(cuDevicePrimaryCtxRelease(d));
    CK(cuDevicePrimaryCtxGetState(d, &fl, &active));
    printf("primary active %d after the last release\n", active);
    return 0;
}
