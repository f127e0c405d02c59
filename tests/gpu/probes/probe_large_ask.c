/* probe_large_ask.c - what the driver calls pinfast makes before passing an
 * asynchronous pageable H2D over 64 KiB (bounce.c, ask()) cost a burst of
 * such copies on one stream, alone and together: each variant queues
 * batches of BATCH copies of `bytes` back to back, each copy preceded (or
 * followed) by its calls, then synchronises; the variants alternate round
 * by round.  One JSON line per variant: the median ns per copy over ROUNDS
 * batches, the median of its per-round difference from the bare copies,
 * and how many of its questions (an event query, a read of the word the
 * stream writes) found the mark not yet reached.  Without pinfast.
 *   probe_large_ask [bytes] */
#include <cuda.h>
#include "../probe.h"

#define BATCH 32
#define ROUNDS 31

enum {
    BARE,         /* the copy alone */
    CAPTURING,    /* cuStreamIsCapturing */
    MODES,        /* two cuThreadExchangeStreamCaptureMode */
    SQUERY,       /* cuStreamQuery */
    CTX,          /* cuStreamGetCtx, cuCtxGetId */
    EQUERY,       /* cuEventQuery of an event recorded before the batch */
    RECORD,       /* cuEventRecord before the copy */
    QUERY_RECORD, /* cuEventQuery of the last record, then cuEventRecord: the mark */
    RECORD_HALF,  /* the mark, before every other copy only */
    RECORD_AFTER, /* cuEventRecord after the copy */
    ALL,          /* everything ask() makes, in its order */
    QR_BLOCKING,  /* the mark, an event made with CU_EVENT_BLOCKING_SYNC */
    ALL_BLOCKING, /* everything, the mark such an event */
    WRITE_VALUE,  /* cuStreamWriteValue32 to mapped pinned memory, the word read first */
    NVARIANTS
};
static const char *names[NVARIANTS] = {"bare",         "is_capturing", "capture_modes", "stream_query",
                                       "ctx_id",       "event_query",  "event_record",  "query_record",
                                       "mark_every_2", "record_after", "all",          "query_record_blocking",
                                       "all_blocking", "write_value"};

static CUstream st;
static CUevent ev, blocking;
static volatile unsigned *word; /* mapped pinned memory */
static CUdeviceptr word_dev;
static unsigned written;
static long not_over[NVARIANTS];

static void mark(int v, CUevent e) {
    if (cuEventQuery(e) == CUDA_ERROR_NOT_READY)
        not_over[v]++;
    CK(cuEventRecord(e, st));
}

static void before(int v, int i) {
    CUstreamCaptureStatus cs;
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CUcontext ctx;
    unsigned long long id;
    switch (v) {
    case CAPTURING: CK(cuStreamIsCapturing(st, &cs)); break;
    case MODES:
        CK(cuThreadExchangeStreamCaptureMode(&mode));
        CK(cuThreadExchangeStreamCaptureMode(&mode));
        break;
    case SQUERY: (void)cuStreamQuery(st); break;
    case CTX:
        CK(cuStreamGetCtx(st, &ctx));
        CK(cuCtxGetId(ctx, &id));
        break;
    case EQUERY:
        if (cuEventQuery(ev) == CUDA_ERROR_NOT_READY)
            not_over[v]++;
        break;
    case RECORD: CK(cuEventRecord(ev, st)); break;
    case QUERY_RECORD: mark(v, ev); break;
    case QR_BLOCKING: mark(v, blocking); break;
    case RECORD_HALF:
        if (!(i & 1))
            mark(v, ev);
        break;
    case ALL:
    case ALL_BLOCKING:
        CK(cuStreamIsCapturing(st, &cs));
        CK(cuThreadExchangeStreamCaptureMode(&mode));
        (void)cuStreamQuery(st);
        CK(cuStreamGetCtx(st, &ctx));
        CK(cuCtxGetId(ctx, &id));
        mark(v, v == ALL ? ev : blocking);
        CK(cuThreadExchangeStreamCaptureMode(&mode));
        break;
    case WRITE_VALUE:
        if (*word != written)
            not_over[v]++;
        CK(cuStreamWriteValue32(st, word_dev, ++written, CU_STREAM_WRITE_VALUE_DEFAULT));
        break;
    default: break;
    }
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 256 << 10;
    if (bytes < 64 || bytes > (64u << 20)) {
        fprintf(stderr, "probe_large_ask: bytes from 64 to 64 MiB\n");
        return 2;
    }
    probe_context();
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&blocking, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC));
    CK(cuMemHostAlloc((void **)&word, 64, CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostGetDevicePointer(&word_dev, (void *)word, 0));
    CUdeviceptr d;
    CK(cuMemAlloc(&d, bytes * BATCH));
    char *h = malloc(bytes * BATCH);
    for (size_t i = 0; i < bytes * BATCH; i++)
        h[i] = (char)(i * 131 + 7);
    static double ns[NVARIANTS][ROUNDS];
    for (int r = -2; r < ROUNDS; r++) /* two rounds of warm-up */
        for (int k = 0; k < NVARIANTS; k++) {
            int v = (k + (r < 0 ? 0 : r)) % NVARIANTS; /* each variant first in turn */
            CK(cuEventRecord(ev, st));
            CK(cuEventRecord(blocking, st));
            CK(cuStreamSynchronize(st));
            double t0 = probe_now();
            for (int i = 0; i < BATCH; i++) {
                before(v, i);
                CK(cuMemcpyHtoDAsync(d + bytes * i, h + bytes * i, bytes, st));
                if (v == RECORD_AFTER)
                    CK(cuEventRecord(ev, st));
            }
            CK(cuStreamSynchronize(st));
            if (r >= 0)
                ns[v][r] = (probe_now() - t0) / BATCH * 1e9;
            else
                not_over[v] = 0;
        }
    char *back = malloc(bytes * BATCH);
    CK(cuMemcpyDtoH(back, d, bytes * BATCH));
    if (memcmp(back, h, bytes * BATCH)) {
        fprintf(stderr, "probe_large_ask: the copies came back wrong\n");
        return 1;
    }
    for (int v = 0; v < NVARIANTS; v++) {
        double diff[ROUNDS];
        for (int r = 0; r < ROUNDS; r++)
            diff[r] = ns[v][r] - ns[BARE][r];
        double added = probe_median(diff, ROUNDS);
        printf("{\"bytes\":%zu,\"variant\":\"%s\",\"copy_ns\":%.0f,\"added_ns\":%.0f,\"not_over\":%ld,\"copies\":%d}\n",
               bytes, names[v], probe_median(ns[v], ROUNDS), added, not_over[v], ROUNDS * BATCH);
    }
    return 0;
}
