/* probe_prepare: does copying a buffer to the device slow the CPU's next
 * writes of it?  The inference loop's shape: the CPU fills a pageable batch
 * (one thread, a hash per 8 bytes, as cuda/inference.cu does), then copies it
 * with cuMemcpyHtoD, again and again.  Under pinfast a dozen worker threads
 * read the batch, so its lines sit in their caches when the CPU writes it
 * next; plain, the driver reads it from the calling thread.  Prints, per
 * size, the median fill and copy times over the rounds; run it plain and
 * under LD_PRELOAD=libpinfast.so and compare.
 *   cc -O2 -pthread -o probe_prepare probe_prepare.c -lcuda */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stdint.h>
#include <string.h>

#include "../probe.h"

#define ROUNDS 41

static uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void fill(char *p, size_t n, uint64_t seed) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t w = splitmix64(seed + i / 8);
        memcpy(p + i, &w, 8);
    }
}

int main(int argc, char **argv) {
    size_t sizes[] = {64 * 150528, 64u << 20}; /* the inference batch, a large one */
    (void)argc;
    probe_context();
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        char *host = malloc(n), *back = malloc(n);
        CUdeviceptr dev;
        if (!host || !back)
            return 2;
        CK(cuMemAlloc_v2(&dev, n));
        double fills[ROUNDS], copies[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = probe_now();
            fill(host, n, (uint64_t)r * n);
            double t1 = probe_now();
            CK(cuMemcpyHtoD_v2(dev, host, n));
            double t2 = probe_now();
            fills[r] = t1 - t0;
            copies[r] = t2 - t1;
        }
        /* the last round's bytes arrived */
        memset(back, 0, n);
        CK(cuMemcpyDtoH_v2(back, dev, n));
        if (memcmp(back, host, n)) {
            fprintf(stderr, "%s: %zu bytes: device copy differs\n", argv[0], n);
            return 1;
        }
        double f = probe_median(fills, ROUNDS), c = probe_median(copies, ROUNDS);
        printf("%10zu bytes: fill %8.1f us (%5.2f GB/s)  copy %8.1f us (%5.2f GB/s)\n", n, f * 1e6,
               n / f / 1e9, c * 1e6, n / c / 1e9);
        CK(cuMemFree_v2(dev));
        free(host);
        free(back);
    }
    return 0;
}
