/* The staging engine against the real driver: every byte right for odd sizes
 * and offsets, each stream kind, then bandwidth per size.  Linked with
 * -lcuda, so under LD_PRELOAD it reaches pinfast's exported wrappers.
 *   engine_check check            correctness, exit 1 on any difference
 *   engine_check bench [min] [max] [reps]  "dir size GB/s" lines, medians */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../probe.h"


static uint64_t rng = 88172645463325252ull;
static void fill(unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        p[i] = (unsigned char)rng;
    }
}

static int cmp(const char *what, size_t n, size_t off, const void *a, const void *b) {
    if (!memcmp(a, b, n))
        return 0;
    size_t i = 0;
    while (((const unsigned char *)a)[i] == ((const unsigned char *)b)[i])
        i++;
    printf("MISMATCH %s size=%zu off=%zu first bad byte %zu\n", what, n, off, i);
    return 1;
}

static int check(void) {
    static const size_t sizes[] = {1, 4095, 65536 + 3, 262144, 1 << 20, (4 << 20) + 1,
                                   (16 << 20) - 5, (64 << 20) + 7, 256 << 20};
    size_t max = (256 << 20) + 64;
    unsigned char *src = malloc(max), *dst = malloc(max), *pin;
    CK(cuMemHostAlloc((void **)&pin, max, 0));
    CUdeviceptr dev;
    CK(cuMemAlloc_v2(&dev, max));
    CUstream s, nb;
    CK(cuStreamCreate(&s, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    int bad = 0, cases = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int mode = 0; mode < 5; mode++) {
            size_t n = sizes[i], off = (i * 7 + mode * 13) % 61;
            CUstream st = mode == 2 ? s : mode == 3 ? nb : CU_STREAM_PER_THREAD;
            fill(src + off, n);
            /* H2D from pageable, checked through a pinned read-back */
            if (mode == 0) CK(cuMemcpyHtoD_v2(dev + off, src + off, n));
            else if (mode == 1) CK(cuMemcpyHtoD_v2_ptds(dev + off, src + off, n));
            else if (mode == 4) CK(cuMemcpy(dev + off, (CUdeviceptr)(src + off), n));
            else CK(cuMemcpyHtoDAsync_v2(dev + off, src + off, n, st));
            unsigned char orig[64];
            size_t head = n < 64 ? n : 64;
            memcpy(orig, src + off, head);
            if (mode >= 2 && mode <= 3) /* the source may be reused at once */
                memset(src + off, 0x5a, head);
            CK(cuCtxSynchronize());
            memset(pin, 0xee, n + off);
            CK(cuMemcpyDtoH_v2(pin + off, dev + off, n));
            memcpy(src + off, orig, head); /* what was sent */
            bad += cmp("H2D", n, off, src + off, pin + off);
            /* D2H into poisoned pageable memory */
            fill(pin + off, n);
            CK(cuMemcpyHtoD_v2(dev + off, pin + off, n));
            memset(dst, 0xee, n + off);
            if (mode == 0) CK(cuMemcpyDtoH_v2(dst + off, dev + off, n));
            else if (mode == 1) CK(cuMemcpyDtoH_v2_ptds(dst + off, dev + off, n));
            else if (mode == 4) CK(cuMemcpy((CUdeviceptr)(dst + off), dev + off, n));
            else CK(cuMemcpyDtoHAsync_v2(dst + off, dev + off, n, st));
            /* pageable D2H returns with the data in place: no sync here */
            bad += cmp("D2H", n, off, pin + off, dst + off);
            cases += 2;
        }
    /* chained on one stream: H2D then D2H of the same region, no sync between */
    for (int k = 0; k < 4; k++) {
        size_t n = (size_t)(32 << 20) + (size_t)k * 4099;
        fill(src, n);
        memset(dst, 0, n);
        CK(cuMemcpyHtoDAsync_v2(dev, src, n, s));
        CK(cuMemcpyDtoHAsync_v2(dst, dev, n, s));
        bad += cmp("chain", n, 0, src, dst);
        cases++;
    }
    printf("engine_check: %d cases, %d mismatches\n", cases, bad);
    return bad != 0;
}

static void bench(size_t min, size_t max, int reps) {
    unsigned char *h = malloc(max), *pin;
    CK(cuMemHostAlloc((void **)&pin, max, 0));
    fill(h, max);
    memcpy(pin, h, max);
    CUdeviceptr dev;
    CK(cuMemAlloc_v2(&dev, max));
    for (size_t n = min; n <= max; n *= (n < (1u << 20) ? 2 : 4)) {
        int r = n >= (256u << 20) ? (reps + 1) / 2 : reps;
        double t[4][64];
        for (int i = 0; i < r + 2; i++) { /* two warm-ups */
            double a = probe_now();
            CK(cuMemcpyHtoD_v2(dev, h, n));
            CK(cuCtxSynchronize());
            double b = probe_now();
            CK(cuMemcpyDtoH_v2(h, dev, n));
            double c = probe_now();
            unsigned char *fresh = malloc(n);
            double d = probe_now();
            CK(cuMemcpyDtoH_v2(fresh, dev, n));
            double e = probe_now();
            CK(cuMemcpyHtoD_v2(dev, pin, n));
            CK(cuCtxSynchronize());
            double f = probe_now();
            free(fresh);
            if (i >= 2) {
                t[0][i - 2] = b - a, t[1][i - 2] = c - b, t[2][i - 2] = e - d, t[3][i - 2] = f - e;
            }
        }
        const char *names[4] = {"H2D", "D2H", "D2H-fresh", "H2D-pinned"};
        for (int k = 0; k < 4; k++) {
            double m = probe_median(t[k], r);
            printf("%-10s %11zu %8.2f GB/s  %9.1f us\n", names[k], n, n / m / 1e9, m * 1e6);
        }
    }
}

/* How fast the copy engine moves pinned memory cut into chunks: one copy,
 * chunks on one stream, chunks with an event after each, chunks over two
 * streams; the gaps between chunks are what staging adds to the DMA. */
static void dma(size_t total, size_t chunk) {
    unsigned char *pin;
    CK(cuMemHostAlloc((void **)&pin, total, 0));
    memset(pin, 3, total);
    CUdeviceptr dev;
    CK(cuMemAlloc_v2(&dev, total));
    CUstream s[2];
    CUevent ev[64];
    CK(cuStreamCreate(&s[0], CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s[1], CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 64; i++)
        CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));
    const char *names[4] = {"one-copy", "chunks", "chunks+events", "chunks/2-streams"};
    for (int mode = 0; mode < 4; mode++) {
        double t[9];
        for (int r = 0; r < 9; r++) {
            double a = probe_now();
            if (mode == 0)
                CK(cuMemcpyHtoDAsync_v2(dev, pin, total, s[0]));
            else
                for (size_t off = 0, k = 0; off < total; off += chunk, k++) {
                    CUstream st = mode == 3 ? s[k & 1] : s[0];
                    CK(cuMemcpyHtoDAsync_v2(dev + off, pin + off, chunk, st));
                    if (mode >= 2)
                        CK(cuEventRecord(ev[k % 64], st));
                }
            CK(cuStreamSynchronize(s[0]));
            CK(cuStreamSynchronize(s[1]));
            t[r] = probe_now() - a;
        }
        printf("dma %-17s total %zu chunk %zu: %.2f GB/s\n", names[mode], total, chunk,
               total / probe_median(t, 9) / 1e9);
    }
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    probe_context();
    if (argc > 1 && !strcmp(argv[1], "dma")) {
        for (size_t c = 256 << 10; c <= (8u << 20); c *= 2)
            dma(64u << 20, c);
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "bench")) {
        bench(argc > 2 ? strtoull(argv[2], NULL, 0) : 4096, argc > 3 ? strtoull(argv[3], NULL, 0) : (1u << 30),
              argc > 4 ? atoi(argv[4]) : 9);
        return 0;
    }
    return check();
}
