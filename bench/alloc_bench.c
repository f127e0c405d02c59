/* What malloc and free cost with pinfast preloaded against without: a storm
 * of small blocks (16 B - 4 KiB, the real allocator's) and of large ones
 * (1 - 64 MiB, pinfast's heap, reused), on 1 and 8 threads; each block is
 * touched once, as a program would.  Prints one JSON line per case with the
 * median of 5 runs; run it plain and under LD_PRELOAD=libpinfast.so. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job { int large; long ops; };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *storm(void *v) {
    const struct job *j = v;
    uint64_t x = (uint64_t)(uintptr_t)&x | 1;
    void *held[64] = {0};
    for (long i = 0; i < j->ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t n = j->large ? ((size_t)1 << 20) << (x % 7) : 16u << (x % 9);
        int k = (int)((x >> 16) % 64);
        free(held[k]);
        held[k] = malloc(n);
        ((volatile char *)held[k])[0] = 1;
    }
    for (int k = 0; k < 64; k++)
        free(held[k]);
    return NULL;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    for (int large = 0; large < 2; large++)
        for (int threads = 1; threads <= 8; threads *= 8) {
            struct job j = {large, large ? 20000 : 4000000 / threads};
            double t[5];
            for (int r = 0; r < 5; r++) {
                pthread_t th[8];
                double t0 = now();
                for (int i = 0; i < threads; i++)
                    pthread_create(&th[i], NULL, storm, &j);
                for (int i = 0; i < threads; i++)
                    pthread_join(th[i], NULL);
                t[r] = now() - t0;
            }
            qsort(t, 5, sizeof t[0], cmp);
            printf("{\"blocks\":\"%s\",\"threads\":%d,\"ops\":%ld,\"median_s\":%.4f,\"ns_per_op\":%.1f}\n",
                   large ? "large" : "small", threads, j.ops * threads, t[2], t[2] * 1e9 / ((double)j.ops * threads));
        }
    return 0;
}
