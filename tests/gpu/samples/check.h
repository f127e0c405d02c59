/* What the GPU safety programs (tests/gpu/checks/equiv.cu, errors_gpu.cu, procs.cu,
 * samples/) share: checked calls that name the failing line, a seeded
 * generator, random fills and a 64-bit hash.  C and CUDA C++. */
#ifndef PINFAST_GPU_CHECK_H
#define PINFAST_GPU_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* a failed CUDA call is never a result: print it and exit 3 */
#define CU(x) chk_cu((int)(x), #x, __FILE__, __LINE__)
#ifdef __CUDACC__
#define CK(x) chk_rt((x), #x, __FILE__, __LINE__)
#endif

static inline void chk_cu(int r, const char *what, const char *file, int line)
{
    if (r) {
        printf("FAIL %s:%d: %s returned %d\n", file, line, what, r);
        fflush(stdout);
        exit(3);
    }
}

#ifdef __CUDACC__
static inline void chk_rt(cudaError_t r, const char *what, const char *file, int line)
{
    if (r != cudaSuccess) {
        printf("FAIL %s:%d: %s returned %s\n", file, line, what, cudaGetErrorName(r));
        fflush(stdout);
        exit(3);
    }
}
#endif

/* splitmix64: one state per user, so threads never share one */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* a number in [lo, hi] */
static inline size_t rng_range(uint64_t *s, size_t lo, size_t hi)
{
    return lo + (size_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static inline void rng_fill(uint64_t *s, void *dst, size_t n)
{
    unsigned char *p = (unsigned char *)dst;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = rng_next(s);
        memcpy(p + i, &v, 8);
    }
    for (uint64_t v = rng_next(s); i < n; i++, v >>= 8)
        p[i] = (unsigned char)v;
}

static inline uint64_t hash_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* h folded with n bytes at p; the length counts, so a shorter buffer differs */
static inline uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    h = hash_mix(h ^ n);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, b + i, 8);
        h = hash_mix(h ^ v) + i;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return hash_mix(h);
}

/* the one verdict line each self-checking program ends with; its exit code */
static inline int verdict(const char *name, long cases, long bad)
{
    printf("%s %s: %ld cases, %ld wrong\n", bad ? "FAIL" : "PASS", name, cases, bad);
    return bad ? 1 : 0;
}

#endif
