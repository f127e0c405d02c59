/* probe_fresh_advised.c - a synchronous D2H into memory mapped right before
 * and never touched, which the program itself advised MADV_HUGEPAGE: every
 * anonymous mapping is treated so where transparent huge pages are
 * "always", and pinfast gives no advice of its own there.  Run plain and
 * preloaded, in turn; per size, the median of ROUNDS copies, each into a new
 * mapping, its first and last bytes checked, and how much of the mapping
 * ended in huge pages (AnonHugePages of /proc/self/smaps_rollup).
 *   probe_fresh_advised [--no-advice] [MiB ...] */
#include <cuda.h>
#include "../probe.h"

#include <sys/mman.h>

#define ROUNDS 9

/* AnonHugePages of the whole process, in KiB (-1: unknown). */
static long anon_huge_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    int advise = !(argc > 1 && !strcmp(argv[1], "--no-advice"));
    size_t mibs[16] = {4, 8, 16, 64, 256};
    int nm = 5, first = advise ? 1 : 2;
    if (argc > first)
        for (nm = 0; nm < argc - first && nm < 16; nm++)
            mibs[nm] = strtoul(argv[first + nm], NULL, 10);
    probe_context();
    size_t most = 0;
    for (int m = 0; m < nm; m++)
        most = mibs[m] > most ? mibs[m] : most;
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, most << 20));
    CK(cuMemsetD8(dev, 0x5a, most << 20));
    CK(cuCtxSynchronize());
    for (int m = 0; m < nm; m++) {
        size_t n = mibs[m] << 20;
        double s[ROUNDS];
        long huge = 0;
        for (int r = 0; r < ROUNDS; r++) {
            char *d = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (d == MAP_FAILED)
                return perror("mmap"), 2;
            if (advise)
                madvise(d, n, MADV_HUGEPAGE);
            long before = anon_huge_kib();
            double t0 = probe_now();
            CK(cuMemcpyDtoH(d, dev, n));
            s[r] = probe_now() - t0;
            huge = anon_huge_kib() - before;
            if (d[0] != 0x5a || d[n - 1] != 0x5a)
                return fprintf(stderr, "wrong bytes at %zu MiB\n", mibs[m]), 1;
            munmap(d, n);
        }
        double med = probe_median(s, ROUNDS);
        printf("{\"probe\":\"fresh_advised\",\"advised\":%d,\"mib\":%zu,\"median_us\":%.1f,\"gbps\":%.2f,"
               "\"huge_kib\":%ld}\n",
               advise, mibs[m], med * 1e6, (double)n / med / 1e9, huge);
        fflush(stdout);
    }
    return 0;
}
