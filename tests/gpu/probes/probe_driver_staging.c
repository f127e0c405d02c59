/* probe_driver_staging.c - how many asynchronous pageable H2D copies of one
 * size the driver takes without waiting while its stream is busy: for each
 * size and burst length, ~BUSY_MS of memsets are queued, then the burst's
 * copies (from malloc'd memory, each from its own offset), and the time
 * until the last returns is taken.  Well under BUSY_MS: the driver staged
 * them all; about BUSY_MS or more: one of them waited for the stream.
 * With `slices`, one cuMemcpy3DAsync a time instead, of 1 to 32 slices of
 * 24 rows of 4 KiB, the host rows 64 bytes apart beyond the row, then one
 * cuMemcpy2DAsync of 8 to 512 such rows, into device memory and into a
 * CUDA array, the same rows as one cuMemcpy3DBatchAsync op, and their
 * bytes end to end as one copy of a cuMemcpyBatchAsync: whether the
 * driver takes such a copy without waiting, and whether each lands what
 * its source held at the call (overwritten right after it).  Run it plain
 * (it measures the driver), or under pinfast: its buffer is copied whole
 * three times first, which registers it, so that pinfast takes these
 * copies over its registration.  One JSON line per size and burst (or copy): the median
 * return time in ms over REPS (and the rows that landed wrong).
 * With `small`, bursts of copies of 4 bytes to 64 KiB (the ones the driver
 * stages in its own pages) of 512 KiB to 4 MiB, each copy counted as at least 256
 * bytes as pinfast counts them (engine/engine.h), behind ~SMALL_BUSY_MS of
 * memsets, long enough that the largest burst's calls end well before the
 * work does: how many bytes of such copies the driver holds without
 * waiting (`small N`: copies of N bytes only).
 * With `streams`, 1 to 4 streams each behind ~SMALL_BUSY_MS of memsets,
 * then on each in turn a burst of 16 KiB copies: whether the driver's
 * staging for such copies is a stream's or the context's (the return time
 * after each stream's burst).  With `turns`, 2 to 4 streams behind the
 * same memsets and then copies of 16 KiB to each stream in turn, one at a
 * time, 2 to 3.5 MiB a stream: whether copies alternating between busy
 * streams wait (the time until the last returns).  With `threads`, 1 to 4
 * threads, each with a burst of 16 KiB copies of 1 to 2 MiB onto one
 * stream behind the memsets, started together: the time until the last
 * thread's calls return.
 *   probe_driver_staging [slices | small [N] | streams | turns | threads] */
#include <cuda.h>
#include "../probe.h"

#include <pthread.h>
#include <unistd.h>

#define REPS 7
#define BUSY_MS 5.0
#define SMALL_BUSY_MS 60.0

/* How pitched_return_ms copies: a 3D copy of n slices, a 2D copy into
 * device memory or into an array, a 3D batch op of one slice, or (linear,
 * not pitched) one copy of a linear batch of the same bytes; the batches'
 * source is read in the call (ORDER=any in the environment: at the
 * driver's choice). */
enum way { WAY_3D, WAY_2D, WAY_ARRAY, WAY_BATCH, WAY_LINEAR_BATCH };

/* One copy behind `memsets` memsets on st, from h (rows of 4 KiB `pitch`
 * apart) to d (or the array a): `rows` rows a slice, n slices for WAY_3D.
 * Each time, h is overwritten right after the call and what landed is read
 * back: *wrong counts the rows that are not what h held at the call.  The
 * median time the call took, ms. */
static double pitched_return_ms(CUstream st, CUdeviceptr busy, size_t busy_bytes, int memsets, unsigned char *h,
                                CUdeviceptr d, CUarray a, enum way way, size_t n, size_t rows, int *wrong) {
    /* the batches' source order: read in the call, or (ORDER=any) at the
     * driver's choice */
    const char *o = getenv("ORDER");
    CUmemcpySrcAccessOrder order =
        o && !strcmp(o, "any") ? CU_MEMCPY_SRC_ACCESS_ORDER_ANY : CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    const size_t w = 4096, pitch = w + 64, all = (way == WAY_3D ? n : 1) * rows;
    CUDA_MEMCPY3D m = {.WidthInBytes = w,
                       .Height = rows,
                       .Depth = way == WAY_3D ? n : 1,
                       .srcMemoryType = CU_MEMORYTYPE_HOST,
                       .srcHost = h,
                       .srcPitch = pitch,
                       .srcHeight = rows,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                       .dstDevice = d,
                       .dstPitch = w,
                       .dstHeight = rows};
    CUDA_MEMCPY2D m2 = probe_2d_of(&m), from_array = {.WidthInBytes = w,
                                                      .Height = rows,
                                                      .srcMemoryType = CU_MEMORYTYPE_ARRAY,
                                                      .srcArray = a,
                                                      .dstMemoryType = CU_MEMORYTYPE_HOST,
                                                      .dstPitch = w};
    if (way == WAY_ARRAY)
        m2.dstMemoryType = CU_MEMORYTYPE_ARRAY, m2.dstArray = a;
    CUDA_MEMCPY3D_BATCH_OP op = {.src = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                                         .op.ptr = {.ptr = (CUdeviceptr)(uintptr_t)h,
                                                    .rowLength = pitch,
                                                    .layerHeight = rows,
                                                    .locHint = {.type = CU_MEM_LOCATION_TYPE_HOST}}},
                                 .dst = {.type = CU_MEMCPY_OPERAND_TYPE_POINTER,
                                         .op.ptr = {.ptr = d,
                                                    .rowLength = w,
                                                    .layerHeight = rows,
                                                    .locHint = {.type = CU_MEM_LOCATION_TYPE_DEVICE}}},
                                 .extent = {.width = w, .height = rows, .depth = 1},
                                 .srcAccessOrder = order};
    CUdeviceptr lsrc = (CUdeviceptr)(uintptr_t)h;
    size_t lbytes = rows * w, lattr = 0;
    CUmemcpyAttributes lat = {.srcAccessOrder = order,
                              .srcLocHint = {.type = CU_MEM_LOCATION_TYPE_HOST},
                              .dstLocHint = {.type = CU_MEM_LOCATION_TYPE_DEVICE}};
    unsigned char *sent = malloc(all * pitch), *back = malloc(all * w);
    double v[REPS];
    for (int r = 0; r < REPS; r++) {
        for (size_t i = 0; i < all * pitch; i++)
            h[i] = (unsigned char)(i * 131 + (size_t)r * 7 + n);
        memcpy(sent, h, all * pitch);
        for (int k = 0; k < memsets; k++)
            CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
        double t0 = probe_now();
        CK(way == WAY_3D             ? cuMemcpy3DAsync(&m, st)
           : way == WAY_BATCH        ? cuMemcpy3DBatchAsync(1, &op, 0, st)
           : way == WAY_LINEAR_BATCH ? cuMemcpyBatchAsync(&d, &lsrc, &lbytes, 1, &lat, &lattr, 1, st)
                                     : cuMemcpy2DAsync(&m2, st));
        v[r] = (probe_now() - t0) * 1e3;
        memset(h, 0xab, all * pitch);
        CK(cuStreamSynchronize(st));
        from_array.dstHost = back;
        CK(way == WAY_ARRAY ? cuMemcpy2D(&from_array) : cuMemcpyDtoH(back, d, all * w));
        for (size_t row = 0; row < all; row++) /* a linear batch's rows lie end to end */
            *wrong += memcmp(sent + row * (way == WAY_LINEAR_BATCH ? w : pitch), back + row * w, w) != 0;
    }
    free(sent);
    free(back);
    return probe_median(v, REPS);
}

/* The `small` bursts: for each size (or `only`, where not 0), bursts of
 * `charged` bytes counted as pinfast counts them, behind ~SMALL_BUSY_MS of
 * memsets. */
static void small_bursts(CUstream st, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr d, const unsigned char *h,
                         size_t only) {
    static const size_t sizes[] = {4, 256, 1024, 4096, 16 << 10, 64 << 10};
    float one_ms;
    int memsets = probe_busy_memsets(st, busy, busy_bytes, SMALL_BUSY_MS, &one_ms);
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        if (only && sizes[s] != only)
            continue;
        for (size_t charged = 512 << 10; charged <= (size_t)4 << 20; charged += 512 << 10) {
            size_t n = sizes[s], count = charged / (n > 256 ? n : 256);
            double v[REPS];
            for (int r = 0; r < REPS; r++) {
                for (int m = 0; m < memsets; m++)
                    CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
                double t0 = probe_now();
                for (size_t i = 0; i < count; i++)
                    CK(cuMemcpyHtoDAsync(d + i * n, h + i * n, n, st));
                v[r] = (probe_now() - t0) * 1e3;
                CK(cuStreamSynchronize(st));
            }
            printf("{\"probe\":\"driver_staging_small\",\"bytes\":%zu,\"burst\":%zu,\"charged_kib\":%zu,"
                   "\"busy_ms\":%.1f,\"return_ms\":%.3f}\n",
                   n, count, charged >> 10, memsets * one_ms, probe_median(v, REPS));
            fflush(stdout);
        }
    }
}

/* The `streams` bursts: per stream, bursts of `each` bytes of 16 KiB
 * copies, behind every stream's memsets; with `turns`, the copies go to the
 * streams in turn, one at a time, from 2 streams and 2 MiB a stream on. */
static void stream_bursts(CUstream first, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr d, const unsigned char *h,
                          int turns) {
    enum { MAX_STREAMS = 4 };
    const size_t n = 16 << 10;
    CUstream st[MAX_STREAMS] = {first};
    for (int k = 1; k < MAX_STREAMS; k++)
        CK(cuStreamCreate(&st[k], CU_STREAM_NON_BLOCKING));
    float one_ms;
    int memsets = probe_busy_memsets(first, busy, busy_bytes, SMALL_BUSY_MS, &one_ms);
    for (int streams = turns ? 2 : 1; streams <= MAX_STREAMS; streams++)
        for (size_t each = (size_t)(turns ? 2 : 1) << 20; each <= (size_t)(turns ? 7 : 5) << 19; each += 1 << 19) {
            double v[REPS][MAX_STREAMS];
            for (int r = 0; r < REPS; r++) {
                for (int k = 0; k < streams; k++)
                    for (int m = 0; m < memsets; m++)
                        CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st[k]));
                double t0 = probe_now();
                if (turns) {
                    for (size_t i = 0; i < each / n; i++)
                        for (int k = 0; k < streams; k++) {
                            size_t at = (size_t)k * each + i * n;
                            CK(cuMemcpyHtoDAsync(d + at, h + at, n, st[k]));
                        }
                    for (int k = 0; k < streams; k++)
                        v[r][k] = (probe_now() - t0) * 1e3;
                }
                for (int k = 0; k < streams && !turns; k++) {
                    size_t base = (size_t)k * each;
                    for (size_t i = 0; i < each / n; i++)
                        CK(cuMemcpyHtoDAsync(d + base + i * n, h + base + i * n, n, st[k]));
                    v[r][k] = (probe_now() - t0) * 1e3;
                }
                for (int k = 0; k < streams; k++)
                    CK(cuStreamSynchronize(st[k]));
            }
            printf("{\"probe\":\"driver_staging_%s\",\"streams\":%d,\"each_kib\":%zu,\"busy_ms\":%.1f,"
                   "\"after_stream_ms\":[",
                   turns ? "turns" : "streams", streams, each >> 10, memsets * one_ms);
            for (int k = 0; k < streams; k++) {
                double col[REPS];
                for (int r = 0; r < REPS; r++)
                    col[r] = v[r][k];
                printf("%s%.3f", k ? "," : "", probe_median(col, REPS));
            }
            printf("]}\n");
            fflush(stdout);
        }
}

/* One thread of the `threads` bursts. */
struct burster {
    CUcontext ctx;
    CUstream st;
    CUdeviceptr d;
    const unsigned char *h;
    size_t each;
    pthread_barrier_t *go;
    double t0, end; /* when the burst began (the barrier passed) and ended */
};

static void *burster_main(void *arg) {
    struct burster *b = arg;
    const size_t n = 16 << 10;
    CK(cuCtxSetCurrent(b->ctx));
    pthread_barrier_wait(b->go);
    b->t0 = probe_now();
    for (size_t i = 0; i < b->each / n; i++)
        CK(cuMemcpyHtoDAsync(b->d + i * n, b->h + i * n, n, b->st));
    b->end = probe_now();
    return NULL;
}

/* The `threads` bursts: `threads` threads, each `each` bytes of 16 KiB
 * copies onto st behind its memsets, from and to regions of their own. */
static void thread_bursts(CUstream st, CUdeviceptr busy, size_t busy_bytes, CUdeviceptr d, const unsigned char *h) {
    enum { MAX_THREADS = 4 };
    float one_ms;
    int memsets = probe_busy_memsets(st, busy, busy_bytes, SMALL_BUSY_MS, &one_ms);
    CUcontext ctx;
    CK(cuCtxGetCurrent(&ctx));
    for (int threads = 1; threads <= MAX_THREADS; threads++)
        for (size_t each = 1 << 20; each <= (size_t)2 << 20; each += 1 << 19) {
            double v[REPS];
            for (int r = 0; r < REPS; r++) {
                for (int m = 0; m < memsets; m++)
                    CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
                pthread_barrier_t go;
                pthread_barrier_init(&go, NULL, (unsigned)threads);
                struct burster b[MAX_THREADS];
                pthread_t t[MAX_THREADS];
                for (int k = 0; k < threads; k++) {
                    b[k] = (struct burster){ctx, st, d + (size_t)k * each, h + (size_t)k * each, each, &go, 0, 0};
                    pthread_create(&t[k], NULL, burster_main, &b[k]);
                }
                double t0 = 0, end = 0;
                for (int k = 0; k < threads; k++) {
                    pthread_join(t[k], NULL);
                    t0 = k && t0 < b[k].t0 ? t0 : b[k].t0;
                    end = end > b[k].end ? end : b[k].end;
                }
                pthread_barrier_destroy(&go);
                v[r] = (end - t0) * 1e3;
                CK(cuStreamSynchronize(st));
            }
            printf("{\"probe\":\"driver_staging_threads\",\"threads\":%d,\"each_kib\":%zu,\"busy_ms\":%.1f,"
                   "\"return_ms\":%.3f}\n",
                   threads, each >> 10, memsets * one_ms, probe_median(v, REPS));
            fflush(stdout);
        }
}

int main(int argc, char **argv) {
    static const size_t sizes[] = {16 << 10, 64 << 10, 96 << 10, 128 << 10, 256 << 10, 512 << 10};
    static const int bursts[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64};
    const size_t most = (size_t)64 << 20, busy_bytes = (size_t)1 << 30;
    probe_context();
    CUstream st;
    CUdeviceptr d, busy;
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&d, most));
    CK(cuMemAlloc(&busy, busy_bytes));
    unsigned char *h = malloc(most);
    for (size_t i = 0; i < most; i++)
        h[i] = (unsigned char)(i * 131 + 7);
    float one_ms;
    int memsets = probe_busy_memsets(st, busy, busy_bytes, BUSY_MS, &one_ms);
    if (argc > 1 && !strcmp(argv[1], "small")) {
        small_bursts(st, busy, busy_bytes, d, h, argc > 2 ? strtoull(argv[2], NULL, 0) : 0);
        return 0;
    }
    if (argc > 1 && (!strcmp(argv[1], "streams") || !strcmp(argv[1], "turns"))) {
        stream_bursts(st, busy, busy_bytes, d, h, !strcmp(argv[1], "turns"));
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "threads")) {
        thread_bursts(st, busy, busy_bytes, d, h);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "slices")) {
        for (int i = 0; i < 3; i++)
            CK(cuMemcpyHtoD(d, h, most));
        usleep(50000); /* under pinfast, its registrar's turn */
        for (size_t n = 1; n <= 32; n *= 2) {
            int wrong = 0;
            double ms = pitched_return_ms(st, busy, busy_bytes, memsets, h, d, NULL, WAY_3D, n, 24, &wrong);
            printf("{\"probe\":\"driver_staging_slices\",\"slices\":%zu,\"slice_bytes\":%d,\"busy_ms\":%.1f,"
                   "\"return_ms\":%.3f,\"wrong_rows\":%d}\n",
                   n, 24 * 4096, memsets * one_ms, ms, wrong);
        }
        CUDA_ARRAY_DESCRIPTOR ad = {
            .Width = 1024, .Height = 512, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
        CUarray a;
        CK(cuArrayCreate(&a, &ad));
        static const char *const to[] = {"", "device", "array", "batch", "linear batch"};
        for (enum way way = WAY_2D; way <= WAY_LINEAR_BATCH; way++)
            for (size_t rows = 8; rows <= 512; rows *= 2) {
                int wrong = 0;
                double ms = pitched_return_ms(st, busy, busy_bytes, memsets, h, d, a, way, 0, rows, &wrong);
                printf("{\"probe\":\"driver_staging_2d\",\"to\":\"%s\",\"rows\":%zu,\"bytes\":%zu,\"busy_ms\":%.1f,"
                       "\"return_ms\":%.3f,\"wrong_rows\":%d}\n",
                       to[way], rows, rows * 4096, memsets * one_ms, ms, wrong);
            }
        return 0;
    }
    for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (unsigned k = 0; k < sizeof bursts / sizeof bursts[0]; k++) {
            size_t n = sizes[s];
            double v[REPS];
            for (int r = 0; r < REPS; r++) {
                for (int m = 0; m < memsets; m++)
                    CK(cuMemsetD32Async(busy, (unsigned)r, busy_bytes / 4, st));
                double t0 = probe_now();
                for (int i = 0; i < bursts[k]; i++)
                    CK(cuMemcpyHtoDAsync(d + (size_t)i * n, h + (size_t)i * n, n, st));
                v[r] = (probe_now() - t0) * 1e3;
                CK(cuStreamSynchronize(st));
            }
            printf("{\"probe\":\"driver_staging\",\"bytes\":%zu,\"burst\":%d,\"burst_kib\":%zu,\"busy_ms\":%.1f,"
                   "\"return_ms\":%.3f}\n",
                   n, bursts[k], n * (size_t)bursts[k] >> 10, memsets * one_ms, probe_median(v, REPS));
            fflush(stdout);
        }
    return 0;
}
