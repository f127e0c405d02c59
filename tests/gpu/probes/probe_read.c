/* probe_read: how fast the CPU copies out of pinned memory that a D2H DMA
 * has just written, against pageable memory, from 1 and 8 threads: the
 * copy-out of a staged D2H.  For each source (pinned from cuMemHostAlloc,
 * pageable from malloc) and size, a round DMAs fresh data into the source
 * (for pageable, the CPU writes it), then memcpy's it into a pageable
 * destination, timed; GB/s is the median of the rounds.
 *   cc -O2 -pthread -o probe_read probe_read.c -lcuda */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "../probe.h"

#define ROUNDS 41
#define MAX_THREADS 8

struct part {
    char *dst;
    const char *src;
    size_t len;
    pthread_barrier_t *go;
    double start, end;
};

static void *copy_part(void *arg) {
    struct part *p = arg;
    pthread_barrier_wait(p->go);
    p->start = probe_now();
    memcpy(p->dst, p->src, p->len);
    p->end = probe_now();
    return NULL;
}

/* Seconds to copy n bytes from src to dst with `threads` threads: from the
 * first thread's start to the last one's end, thread start and join left out. */
static double copy_out(char *dst, const char *src, size_t n, int threads) {
    pthread_t th[MAX_THREADS];
    struct part parts[MAX_THREADS];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    size_t each = n / (size_t)threads;
    for (int i = 0; i < threads; i++) {
        parts[i] = (struct part){dst + i * each, src + i * each, each, &go, 0, 0};
        pthread_create(&th[i], NULL, copy_part, &parts[i]);
    }
    pthread_barrier_wait(&go);
    double first = 1e300, last = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        first = parts[i].start < first ? parts[i].start : first;
        last = parts[i].end > last ? parts[i].end : last;
    }
    pthread_barrier_destroy(&go);
    return last - first;
}

int main(void) {
    probe_context();
    size_t max = 16 << 20;
    char *pinned, *pageable = malloc(max), *dst = malloc(max);
    CK(cuMemHostAlloc((void **)&pinned, max, CU_MEMHOSTALLOC_PORTABLE));
    CUdeviceptr dev;
    CK(cuMemAlloc_v2(&dev, max));
    CK(cuMemsetD8_v2(dev, 0x5a, max));
    memset(pageable, 1, max);
    memset(dst, 2, max);
    memset(pinned, 3, max);
    static const size_t sizes[] = {256 << 10, 1 << 20, 4 << 20, 16 << 20};
    static const int threads[] = {1, 8};
    printf("%-9s %9s %7s %8s\n", "source", "bytes", "threads", "GB/s");
    for (int s = 0; s < 2; s++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (size_t j = 0; j < sizeof threads / sizeof threads[0]; j++) {
                size_t n = sizes[k];
                double t[ROUNDS];
                for (int r = 0; r < ROUNDS; r++) {
                    if (s == 0)
                        CK(cuMemcpyDtoH_v2(pinned, dev, n));
                    else
                        memset(pageable, r, n);
                    t[r] = copy_out(dst, s == 0 ? pinned : pageable, n, threads[j]);
                }
                qsort(t, ROUNDS, sizeof t[0], probe_by_double);
                printf("%-9s %9zu %7d %8.2f\n", s == 0 ? "pinned" : "pageable", n, threads[j],
                       n / t[ROUNDS / 2] / 1e9);
            }
    return 0;
}
