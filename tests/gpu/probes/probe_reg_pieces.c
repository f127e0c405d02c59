/* probe_reg_pieces.c - whether a copy may run across two registrations laid
 * end to end: a block of pinfast's heap whose used part grows is
 * registered again only past its first registration (memory/register.c),
 * so a copy over both must be as right, and as fast, as over one.  A range
 * of 64 MiB (mmap, 2 MiB aligned, written) is registered five ways: whole,
 * as two halves, as its first half only, as its second half only, and not
 * at all; for each, a
 * 32 MiB copy across the middle is timed both ways, synchronous and
 * asynchronous (the time the asynchronous call took to return, and until
 * its stream was done), the bytes checked through pinned memory, and
 * the same span as an asynchronous D2H, as 2D copies both ways (rows of
 * 1 MiB) and as the middle copy of a batch of three both ways (the 12.8
 * ABI: its result, failIdx, and which of the other two H2D it made), and
 * of a 3D batch of pointers (H2D, the same three answers); then
 * what the driver answers for the second half's start, and whether
 * unregistering the first half leaves the second registered.  One JSON
 * line per case, with each copy's result (a refused copy is not made
 * again; its times are then the refusal's).
 *   probe_reg_pieces */
#include <cuda.h>
#include "../probe.h"
#include "../../support/batch_ops.h"

#include <stdint.h>
#include <sys/mman.h>

#define BYTES ((size_t)64 << 20)
#define HALF (BYTES / 2)
#define SPAN ((size_t)32 << 20)
#define AT (HALF - SPAN / 2)
#define REPS 9
#define ROW ((size_t)1 << 20)

enum way { WHOLE, HALVES, FIRST_HALF, SECOND_HALF, NONE, NWAYS };
static const char *ways[NWAYS] = {"whole", "two halves", "first half", "second half", "none"};

static unsigned char *range(void) {
    unsigned char *m = mmap(NULL, BYTES + (2u << 20), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return (unsigned char *)(((uintptr_t)m + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1));
}

/* the span as rows of a 2D copy, host side h, device side d */
static CUresult copy_2d(int h2d, unsigned char *h, CUdeviceptr d) {
    CUDA_MEMCPY2D m = {.WidthInBytes = ROW, .Height = SPAN / ROW, .srcPitch = ROW, .dstPitch = ROW};
    m.srcMemoryType = h2d ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    m.dstMemoryType = h2d ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    if (h2d) {
        m.srcHost = h;
        m.dstDevice = d;
    } else {
        m.srcDevice = d;
        m.dstHost = h;
    }
    return cuMemcpy2D(&m);
}

typedef CUresult (*batch_fn)(CUdeviceptr *, CUdeviceptr *, size_t *, size_t, CUmemcpyAttributes *, size_t *, size_t,
                            size_t *, CUstream);
static batch_fn batch;

/* A bit for each of a batch's other two H2D (pinned to `side`) that moved. */
static int others_made(const unsigned char *pinned, CUdeviceptr side) {
    int made = 0;
    for (int i = 0; i < 3; i += 2) {
        unsigned char got[64];
        CK(cuMemcpyDtoH(got, side + (size_t)i * ROW, sizeof got));
        made |= !memcmp(got, pinned + (size_t)i * ROW, sizeof got) << (i / 2);
    }
    return made;
}

/* The span as the middle copy of a batch of three (stream order), the
 * others 1 MiB from pinned to `side` and back: the result, failIdx (-1 for
 * none) and *made, a bit for each of the other two H2D that moved. */
static CUresult copy_batch(int h2d, unsigned char *h, CUdeviceptr d, unsigned char *pinned, CUdeviceptr side,
                           CUstream st, long long *fail, int *made) {
    CUdeviceptr dst[3], src[3];
    size_t n[3] = {ROW, SPAN, ROW}, ai = 0, fi = 12345;
    CUmemcpyAttributes a = {.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM};
    for (int i = 0; i < 3; i += 2) {
        dst[i] = h2d ? side + (size_t)i * ROW : (CUdeviceptr)(uintptr_t)(pinned + (size_t)i * ROW);
        src[i] = h2d ? (CUdeviceptr)(uintptr_t)(pinned + (size_t)i * ROW) : side + (size_t)i * ROW;
    }
    dst[1] = h2d ? d : (CUdeviceptr)(uintptr_t)h;
    src[1] = h2d ? (CUdeviceptr)(uintptr_t)h : d;
    CUresult r = batch(dst, src, n, 3, &a, &ai, 1, &fi, st);
    CK(cuStreamSynchronize(st));
    *fail = fi == SIZE_MAX ? -1 : (long long)fi;
    *made = h2d ? others_made(pinned, side) : 0;
    return r;
}

typedef CUresult (*batch3d_fn)(size_t, CUDA_MEMCPY3D_BATCH_OP *, size_t *, unsigned long long, CUstream);
static batch3d_fn batch3d;

/* The same as 3D batch operations of pointers (H2D), the span one row. */
static CUresult copy_batch3d(unsigned char *h, CUdeviceptr d, unsigned char *pinned, CUdeviceptr side, CUstream st,
                             long long *fail, int *made) {
    CUDA_MEMCPY3D_BATCH_OP op[3];
    CUdeviceptr dst[3], src[3];
    size_t n[3] = {ROW, SPAN, ROW}, fi = 12345;
    for (int i = 0; i < 3; i++) {
        src[i] = (CUdeviceptr)(uintptr_t)(i == 1 ? h : pinned + (size_t)i * ROW);
        dst[i] = i == 1 ? d : side + (size_t)i * ROW;
    }
    pft_batch_ops(op, dst, src, n, 3);
    CUresult r = batch3d(3, op, &fi, 0, st);
    CK(cuStreamSynchronize(st));
    *fail = fi == SIZE_MAX ? -1 : (long long)fi;
    *made = others_made(pinned, side);
    return r;
}

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 4) {
        unsigned v = (unsigned)(i * 2654435761u) ^ seed;
        memcpy(p + i, &v, 4);
    }
}

int main(void) {
    probe_context();
    CUstream st;
    CUdeviceptr dev, side;
    unsigned char *pinned, *zeros, *scratch;
    CUdriverProcAddressQueryResult q;
    CK(cuGetProcAddress("cuMemcpyBatchAsync", (void **)&batch, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CK(cuGetProcAddress("cuMemcpy3DBatchAsync", (void **)&batch3d, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &q));
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&dev, SPAN));
    CK(cuMemAlloc(&side, 3 * ROW));
    CK(cuMemAllocHost((void **)&pinned, SPAN));
    CK(cuMemAllocHost((void **)&zeros, SPAN));
    CK(cuMemAllocHost((void **)&scratch, 3 * ROW));
    memset(zeros, 0, SPAN);
    unsigned char *p = range();
    for (int w = 0; w < NWAYS; w++) {
        fill(p, BYTES, (unsigned)w);
        if (w == WHOLE)
            CK(cuMemHostRegister(p, BYTES, CU_MEMHOSTREGISTER_PORTABLE));
        if (w == HALVES || w == FIRST_HALF)
            CK(cuMemHostRegister(p, HALF, CU_MEMHOSTREGISTER_PORTABLE));
        if (w == HALVES || w == SECOND_HALF)
            CK(cuMemHostRegister(p + HALF, HALF, CU_MEMHOSTREGISTER_PORTABLE));
        double t[4][REPS];
        int wrong = 0;
        CUresult e[4] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};
        CUresult d2h_async = CUDA_SUCCESS, h2d_2d = CUDA_SUCCESS, d2h_2d = CUDA_SUCCESS;
        CUresult h2d_batch = CUDA_SUCCESS, d2h_batch = CUDA_SUCCESS, h2d_batch3d = CUDA_SUCCESS;
        long long h2d_batch_fail = 0, d2h_batch_fail = 0, h2d_batch3d_fail = 0;
        int h2d_batch_made = 0, h2d_batch3d_made = 0, unused;
        for (int r = 0; r < REPS; r++) {
            double t0 = probe_now();
            e[0] = e[0] ? e[0] : cuMemcpyHtoD(dev, p + AT, SPAN);
            t[0][r] = probe_now() - t0;
            t0 = probe_now();
            e[1] = e[1] ? e[1] : cuMemcpyHtoDAsync(dev, p + AT, SPAN, st);
            t[1][r] = probe_now() - t0;
            CK(cuStreamSynchronize(st));
            t[2][r] = probe_now() - t0;
            CK(cuMemcpyDtoH(pinned, dev, SPAN));
            wrong += memcmp(pinned, p + AT, SPAN) != 0;
            memset(p + AT, 0x5A, SPAN);
            t0 = probe_now();
            e[3] = e[3] ? e[3] : cuMemcpyDtoH(p + AT, dev, SPAN);
            t[3][r] = probe_now() - t0;
            wrong += memcmp(pinned, p + AT, SPAN) != 0;
            if (r == 0) { /* the other forms once: their results, their bytes */
                memset(p + AT, 0x5A, SPAN);
                d2h_async = cuMemcpyDtoHAsync(p + AT, dev, SPAN, st);
                CK(cuStreamSynchronize(st));
                wrong += !d2h_async && memcmp(pinned, p + AT, SPAN) != 0;
                memcpy(p + AT, pinned, SPAN);
                CK(cuMemcpyHtoD(dev, zeros, SPAN));
                h2d_2d = copy_2d(1, p + AT, dev);
                if (h2d_2d) /* refused: the device's bytes back from pinned */
                    CK(cuMemcpyHtoD(dev, pinned, SPAN));
                CK(cuMemcpyDtoH(pinned, dev, SPAN));
                wrong += memcmp(pinned, p + AT, SPAN) != 0;
                memset(p + AT, 0x5A, SPAN);
                d2h_2d = copy_2d(0, p + AT, dev);
                wrong += !d2h_2d && memcmp(pinned, p + AT, SPAN) != 0;
                memcpy(p + AT, pinned, SPAN);
                CK(cuMemcpyHtoD(side, zeros, 3 * ROW));
                CK(cuMemcpyHtoD(dev, zeros, SPAN));
                h2d_batch = copy_batch(1, p + AT, dev, pinned, side, st, &h2d_batch_fail, &h2d_batch_made);
                if (h2d_batch)
                    CK(cuMemcpyHtoD(dev, pinned, SPAN));
                CK(cuMemcpyDtoH(pinned, dev, SPAN));
                wrong += memcmp(pinned, p + AT, SPAN) != 0;
                memset(p + AT, 0x5A, SPAN);
                d2h_batch = copy_batch(0, p + AT, dev, scratch, side, st, &d2h_batch_fail, &unused);
                wrong += !d2h_batch && memcmp(pinned, p + AT, SPAN) != 0;
                memcpy(p + AT, pinned, SPAN);
                CK(cuMemcpyHtoD(side, zeros, 3 * ROW));
                h2d_batch3d = copy_batch3d(p + AT, dev, pinned, side, st, &h2d_batch3d_fail, &h2d_batch3d_made);
            }
            memcpy(p + AT, pinned, SPAN);
        }
        unsigned type = 0;
        CUresult a = cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(p + HALF));
        printf("{\"probe\":\"reg_pieces\",\"way\":\"%s\",\"h2d_sync_gbps\":%.2f,\"h2d_async_return_us\":%.1f,"
               "\"h2d_async_gbps\":%.2f,\"d2h_sync_gbps\":%.2f,\"wrong\":%d,\"second_half_attribute\":%d,"
               "\"second_half_type\":%u,\"h2d_sync_result\":%d,\"h2d_async_result\":%d,\"d2h_sync_result\":%d,"
               "\"d2h_async_result\":%d,\"h2d_2d_result\":%d,\"d2h_2d_result\":%d,\"h2d_batch_result\":%d,"
               "\"h2d_batch_fail_idx\":%lld,\"h2d_batch_others_made\":%d,\"d2h_batch_result\":%d,"
               "\"d2h_batch_fail_idx\":%lld,\"h2d_batch3d_result\":%d,\"h2d_batch3d_fail_idx\":%lld,"
               "\"h2d_batch3d_others_made\":%d",
               ways[w], SPAN / probe_median(t[0], REPS) / 1e9, probe_median(t[1], REPS) * 1e6,
               SPAN / probe_median(t[2], REPS) / 1e9, SPAN / probe_median(t[3], REPS) / 1e9, wrong, (int)a, type,
               (int)e[0], (int)e[1], (int)e[3], (int)d2h_async, (int)h2d_2d, (int)d2h_2d, (int)h2d_batch,
               h2d_batch_fail, h2d_batch_made, (int)d2h_batch, d2h_batch_fail, (int)h2d_batch3d, h2d_batch3d_fail,
               h2d_batch3d_made);
        if (w == HALVES) {
            /* the first half undone: is the second still registered? */
            CUresult u1 = cuMemHostUnregister(p);
            CUresult again = cuMemHostRegister(p + HALF, HALF, CU_MEMHOSTREGISTER_PORTABLE);
            CUresult u2 = cuMemHostUnregister(p + HALF);
            printf(",\"unregister_first\":%d,\"register_second_again\":%d,\"unregister_second\":%d", (int)u1,
                   (int)again, (int)u2);
        } else if (w == SECOND_HALF) {
            printf(",\"unregister_second\":%d", (int)cuMemHostUnregister(p + HALF));
        } else if (w != NONE) {
            printf(",\"unregister_first\":%d", (int)cuMemHostUnregister(p));
        }
        printf("}\n");
    }
    return 0;
}
