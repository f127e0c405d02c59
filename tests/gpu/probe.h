/* probe.h - what the single-file GPU probes (engine_check, passcost, the
 * probe_*.c) share: the monotonic clock in seconds, a qsort comparison of
 * doubles and a median, a pause and a streaming-store copy, a written
 * range on huge pages and its check, and, with
 * cuda.h included first, a checked driver call, a GPU time between events
 * and the primary context of device 0 made current. */
#ifndef PINFAST_PROBE_H
#define PINFAST_PROBE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static inline double probe_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static inline int probe_by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n), which it sorts. */
static inline double probe_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, probe_by_double);
    return v[n / 2];
}

/* The first line of a file (a /sys setting) into buf, without its newline;
 * "?" when it cannot be read. */
static inline const char *probe_first_line(const char *path, char *buf, int n) {
    FILE *f = fopen(path, "r");
    snprintf(buf, (size_t)n, "?");
    if (f) {
        if (!fgets(buf, n, f))
            buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

/* A pause in a polling loop. */
static inline void probe_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* memcpy with streaming stores; n a multiple of 64, both 16-aligned */
static inline void probe_copy_nt(char *dst, const char *src, size_t n) {
#if defined(__x86_64__)
    for (size_t i = 0; i < n; i += 64)
        for (int k = 0; k < 4; k++)
            __builtin_ia32_movntdq((__attribute__((vector_size(16))) long long *)(dst + i + 16 * k),
                                   *(const __attribute__((vector_size(16))) long long *)(src + i + 16 * k));
    __builtin_ia32_sfence();
#else
    memcpy(dst, src, n);
#endif
}

/* bytes (a multiple of 2 MiB) on a 2 MiB boundary, huge pages advised,
 * written with a pattern that probe_written_intact checks. */
static inline char *probe_written_range(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    char *m = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    char *p = (char *)(((uintptr_t)m + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise(p, bytes, MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i++)
        p[i] = (char)(i * 7);
    return p;
}

static inline int probe_written_intact(const char *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i += 4093)
        if (p[i] != (char)(i * 7))
            return 0;
    return 1;
}

#ifdef CUDA_VERSION
#define CK(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_) {                                                              \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_);   \
            exit(2);                                                           \
        }                                                                      \
    } while (0)

/* How many memsets of `bytes` at busy keep st busy for `ms` (one is timed
 * between events; *one_ms its time). */
static inline int probe_busy_memsets(CUstream st, CUdeviceptr busy, size_t bytes, double ms, float *one_ms) {
    CUevent b0, b1;
    CK(cuEventCreate(&b0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&b1, CU_EVENT_DEFAULT));
    CK(cuEventRecord(b0, st));
    CK(cuMemsetD32Async(busy, 1, bytes / 4, st));
    CK(cuEventRecord(b1, st));
    CK(cuStreamSynchronize(st));
    CK(cuEventElapsedTime(one_ms, b0, b1));
    CK(cuEventDestroy(b0));
    CK(cuEventDestroy(b1));
    return (int)(ms / (*one_ms > 0.01f ? *one_ms : 0.01f)) + 1;
}

/* The 2D copy of a 3D descriptor's first slice: the same sides, pitches
 * and offsets, through the 2D entry point. */
static inline CUDA_MEMCPY2D probe_2d_of(const CUDA_MEMCPY3D *m) {
    CUDA_MEMCPY2D r = {.srcXInBytes = m->srcXInBytes,
                       .srcY = m->srcY,
                       .srcMemoryType = m->srcMemoryType,
                       .srcHost = m->srcHost,
                       .srcDevice = m->srcDevice,
                       .srcArray = m->srcArray,
                       .srcPitch = m->srcPitch,
                       .dstXInBytes = m->dstXInBytes,
                       .dstY = m->dstY,
                       .dstMemoryType = m->dstMemoryType,
                       .dstHost = m->dstHost,
                       .dstDevice = m->dstDevice,
                       .dstArray = m->dstArray,
                       .dstPitch = m->dstPitch,
                       .WidthInBytes = m->WidthInBytes,
                       .Height = m->Height};
    return r;
}

/* The median GPU time in ms of `reps` (at most 64) runs of op(arg) queued
 * on st, each between two events, after `warm` runs not kept. */
static inline double probe_gpu_ms(CUstream st, void (*op)(void *arg, CUstream st), void *arg, int warm, int reps) {
    CUevent e0, e1;
    double ms[64];
    CK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    for (int i = -warm; i < reps && i < 64; i++) {
        float t;
        CK(cuEventRecord(e0, st));
        op(arg, st);
        CK(cuEventRecord(e1, st));
        CK(cuStreamSynchronize(st));
        CK(cuEventElapsedTime(&t, e0, e1));
        if (i >= 0)
            ms[i] = t;
    }
    CK(cuEventDestroy(e0));
    CK(cuEventDestroy(e1));
    return probe_median(ms, reps < 64 ? reps : 64);
}

static inline CUcontext probe_context(void) {
    CUdevice d;
    CUcontext c;
    CK(cuInit(0));
    CK(cuDeviceGet(&d, 0));
    CK(cuDevicePrimaryCtxRetain(&c, d));
    CK(cuCtxSetCurrent(c));
    return c;
}
#endif

#endif
