/* probe_regdma: how fast the DMA engine reads and writes host memory by
 * how that memory was pinned, without pinfast: cuMemHostAlloc'd memory
 * (what pin_memory() and cudaHostAlloc give), malloc'd memory registered
 * with cuMemHostRegister (what pinfast's registration cache does), the
 * same advised MADV_HUGEPAGE before it was touched, and the same collapsed
 * into huge pages (MADV_COLLAPSE) after it was touched.  Per size and
 * direction: the GPU time of one copy (events, median of 15 after 3 warm
 * ups) as GB/s, and the share of the range in huge pages (smaps).
 * Build: cc -O2 -I/usr/local/cuda/include -o probe_regdma probe_regdma.c -lcuda */
#include <cuda.h>
#include "../probe.h"

#include <sys/mman.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

enum { PINNED, REGISTERED, ADVISED, COLLAPSED, KINDS };
static const char *names[KINDS] = {"pinned", "registered", "advised-huge", "collapsed"};

/* kB of [p, p + n) in huge pages, from this process's smaps. */
static long huge_kb(const void *p, size_t n) {
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512];
    long kb = 0;
    int in = 0;
    unsigned long lo, hi, a = (unsigned long)p, b = a + n;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = lo < b && hi > a;
        long v;
        if (in && sscanf(line, "AnonHugePages: %ld kB", &v) == 1)
            kb += v;
    }
    if (f)
        fclose(f);
    return kb;
}

static char *make(int kind, size_t n) {
    void *p = NULL;
    if (kind == PINNED) {
        CK(cuMemHostAlloc(&p, n, CU_MEMHOSTALLOC_PORTABLE));
        memset(p, 1, n);
        return p;
    }
    p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        exit(2);
    if (kind == ADVISED)
        madvise(p, n, MADV_HUGEPAGE);
    memset(p, 1, n);
    if (kind == COLLAPSED && madvise(p, n, MADV_COLLAPSE))
        perror("madvise(MADV_COLLAPSE)");
    CK(cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE));
    return p;
}

static void drop(int kind, char *p, size_t n) {
    if (kind == PINNED) {
        CK(cuMemFreeHost(p));
        return;
    }
    CK(cuMemHostUnregister(p));
    munmap(p, n);
}

/* One copy of a size between a host buffer and device memory. */
struct copy {
    CUdeviceptr dev;
    char *host;
    size_t n;
    int h2d;
};

static void one_copy(void *arg, CUstream s) {
    struct copy *c = arg;
    if (c->h2d)
        CK(cuMemcpyHtoDAsync(c->dev, c->host, c->n, s));
    else
        CK(cuMemcpyDtoHAsync(c->host, c->dev, c->n, s));
}

int main(void) {
    probe_context();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    size_t sizes[] = {(size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20, (size_t)1 << 30};
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, (size_t)1 << 30));
    for (int z = 0; z < 5; z++)
        for (int k = 0; k < KINDS; k++) {
            size_t n = sizes[z];
            char *host = make(k, n);
            double gbps[2];
            for (int d = 0; d < 2; d++) {
                struct copy c = {.dev = dev, .host = host, .n = n, .h2d = d == 0};
                gbps[d] = n / (probe_gpu_ms(s, one_copy, &c, 3, 15) * 1e-3) / 1e9;
            }
            printf("%-13s %5zu MiB: H2D %5.1f D2H %5.1f GB/s, %3ld%% in huge pages\n", names[k], n >> 20, gbps[0],
                   gbps[1], k == PINNED ? -1 : huge_kb(host, n) * 100 / (long)(n >> 10));
            fflush(stdout);
            drop(k, host, n);
        }
    return 0;
}
