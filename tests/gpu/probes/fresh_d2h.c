/* fresh_d2h.c - a synchronous D2H into memory mapped just before and never
 * touched, as .cpu(), .numpy() and a checkpoint save write into: per size,
 * at a huge-page aligned address and 16 bytes past one (where glibc's
 * malloc puts a large block), the median GB/s of --reps copies, each into
 * new memory, every copy checked.  `fresh_d2h host T` instead times T
 * threads copying 1 GiB from pinned memory into fresh memory advised
 * MADV_HUGEPAGE: what the host alone allows.
 *   fresh_d2h LABEL [reps]     fresh_d2h host THREADS */
#include <cuda.h>
#include "../probe.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)

static uint64_t word(size_t i) { return (i * 0x9E3779B97F4A7C15ull) ^ 0x5bd1e995u; }

struct share {
    char *dst;
    const char *src;
    size_t len, src_len;
};

static void *copy_share(void *arg) {
    struct share *s = arg;
    for (size_t off = 0; off < s->len; off += s->src_len) {
        size_t n = s->len - off < s->src_len ? s->len - off : s->src_len;
        memcpy(s->dst + off, s->src, n);
    }
    return NULL;
}

static int host_only(int threads) {
    probe_context();
    size_t n = (size_t)1 << 30, src_len = 64u << 20;
    void *src;
    CK(cuMemAllocHost(&src, src_len));
    memset(src, 7, src_len);
    double v[5];
    for (int r = 0; r < 5; r++) {
        char *m = mmap(NULL, n + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            return perror("mmap"), 2;
        char *d = (char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1));
        double t0 = probe_now();
        madvise(d, n, MADV_HUGEPAGE);
        pthread_t t[64];
        struct share s[64];
        size_t per = (n / HUGE + threads - 1) / threads * HUGE;
        int k = 0;
        for (size_t off = 0; off < n && k < 64; off += per, k++) {
            s[k] = (struct share){d + off, src, n - off < per ? n - off : per, src_len};
            pthread_create(&t[k], NULL, copy_share, &s[k]);
        }
        for (int i = 0; i < k; i++)
            pthread_join(t[i], NULL);
        v[r] = n / (probe_now() - t0) / 1e9;
        munmap(m, n + HUGE);
    }
    printf("host %d threads: 1 GiB into fresh memory advised MADV_HUGEPAGE: %.1f GB/s (median of 5)\n", threads,
           probe_median(v, 5));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "host"))
        return host_only(atoi(argv[2]));
    const char *label = argc > 1 ? argv[1] : "run";
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 64)
        reps = 5;
    probe_context();
    size_t most = (size_t)1 << 30;
    uint64_t *pattern = malloc(most);
    if (!pattern)
        return 2;
    for (size_t i = 0; i < most / 8; i++)
        pattern[i] = word(i);
    CUdeviceptr dev;
    CK(cuMemAlloc(&dev, most));
    CK(cuMemcpyHtoD(dev, pattern, most));
    free(pattern);
    size_t sizes[] = {16u << 20, 64u << 20, 256u << 20, (size_t)1 << 30};
    for (int si = 0; si < 4; si++)
        for (int off = 0; off <= 16; off += 16) {
            size_t n = sizes[si];
            double v[64];
            for (int r = 0; r < reps; r++) {
                char *m = mmap(NULL, n + HUGE * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (m == MAP_FAILED)
                    return perror("mmap"), 2;
                char *p = (char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1)) + off;
                double t0 = probe_now();
                CK(cuMemcpyDtoH(p, dev, n));
                v[r] = n / (probe_now() - t0) / 1e9;
                const uint64_t *q = (const uint64_t *)p; /* 16-aligned */
                for (size_t i = 0; i < n / 8; i += 509)
                    if (q[i] != word(i)) {
                        fprintf(stderr, "%s: %zu B +%d: word %zu is %llx, not %llx\n", label, n, off, i,
                                (unsigned long long)q[i], (unsigned long long)word(i));
                        return 1;
                    }
                if (q[n / 8 - 1] != word(n / 8 - 1))
                    return fprintf(stderr, "%s: %zu B +%d: last word wrong\n", label, n, off), 1;
                munmap(m, n + HUGE * 2);
            }
            printf("%s: %5zu MiB +%2d: %.1f GB/s (median of %d)\n", label, n >> 20, off, probe_median(v, reps),
                   reps);
        }
    return 0;
}
