/* probe_regfresh.c - what registering a fresh destination would cost: per
 * size, memory mapped new, advised MADV_HUGEPAGE (or not), faulted in by
 * the main thread, then cuMemHostRegister, a DtoH straight into it and
 * cuMemHostUnregister, each timed; the medians of five.
 *   probe_regfresh */
#include <cuda.h>
#include "../probe.h"

#include <stdint.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

int main(void) {
    probe_context();
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, (size_t)1 << 30));
    CK(cuMemsetD8(dev, 0x5a, (size_t)1 << 30));
    size_t sizes[] = {64u << 20, 256u << 20, (size_t)1 << 30};
    for (int huge = 1; huge >= 0; huge--)
        for (int si = 0; si < 3; si++) {
            size_t n = sizes[si];
            double pop[5], reg[5], dma[5], unreg[5];
            for (int r = 0; r < 5; r++) {
                char *m = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m == MAP_FAILED)
                    return perror("mmap"), 2;
                char *d = (char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1));
                if (huge)
                    madvise(d, n, MADV_HUGEPAGE);
                double t0 = probe_now();
                madvise(d, n, MADV_POPULATE_WRITE);
                double t1 = probe_now();
                CK(cuMemHostRegister(d, n, CU_MEMHOSTREGISTER_PORTABLE));
                double t2 = probe_now();
                CK(cuMemcpyDtoH(d, dev, n));
                double t3 = probe_now();
                CK(cuMemHostUnregister(d));
                double t4 = probe_now();
                if (d[0] != 0x5a || d[n - 1] != 0x5a)
                    return fprintf(stderr, "wrong bytes\n"), 1;
                pop[r] = (t1 - t0) * 1e3, reg[r] = (t2 - t1) * 1e3, dma[r] = (t3 - t2) * 1e3, unreg[r] = (t4 - t3) * 1e3;
                munmap(m, n + HUGE);
            }
            printf("%s %5zu MiB: ms populate %.2f register %.2f dma %.2f unregister %.2f  (register %.1f GB/s)\n",
                   huge ? "huge" : "4KiB", n >> 20, probe_median(pop, 5), probe_median(reg, 5), probe_median(dma, 5),
                   probe_median(unreg, 5), n / probe_median(reg, 5) / 1e6);
        }
    return 0;
}
