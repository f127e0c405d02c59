/* probe_poll: does the way a staged copy watches its DMAs, or what the other
 * CPUs do meanwhile, slow the DMAs down?  A 4 MiB copy between device memory
 * and pinned memory goes out as 8 DMAs of 512 KiB on one stream, each
 * followed by an event record and a 32-bit flag write (cuStreamWriteValue32
 * into pinned memory).  The calling thread then watches the chunks land:
 *   whole    (reference) one DMA of 4 MiB, cuEventSynchronize;
 *   evsync   cuEventSynchronize on the last chunk only;
 *   query    cuEventQuery of the next chunk in a tight loop;
 *   query32  the same with 32 pauses between questions (the engine's loop);
 *   flag     a load of the next chunk's flag, 32 pauses between loads;
 * while 12 other threads are idle, spin on pause reading a shared word (the
 * engine's polling workers), or copy in 32 KiB pieces (its copying workers):
 * within 4 MiB of their own (cache-resident), or from 4 MiB of pinned memory
 * into 256 MiB of malloc'd memory with memcpy or with streaming stores
 * (missing the caches, as a staged D2H's copy-out does).  Per cell: the
 * median time from the first DMA's issue to the last chunk seen landed, in
 * GB/s, and when the first chunk was seen; per load, what the 12 threads
 * copy in all.
 *   cc -O2 -pthread -o probe_poll probe_poll.c -lcuda */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <stdint.h>

#include "../probe.h"

#define ROUNDS 31
#define CHUNKS 8
#define CHUNK (512u << 10)
#define LOADERS 12

enum { IDLE, SPIN, WARM, COLD, COLD_NT, NLOADS, PREPPING = NLOADS };
static const char *load_name[] = {"idle", "spin", "warm", "cold", "cold-nt"};
enum { WHOLE, EVSYNC, QUERY, QUERY32, FLAG, NWAITS };
static const char *wait_name[] = {"whole", "evsync", "query", "query32", "flag"};

static volatile int load_kind = IDLE, stop;
static volatile unsigned shared_word;

#define PIECE (32u << 10)
#define COLD_BYTES (256u << 20)
static char *pinned_src; /* 4 MiB, shared by the loaders: a staging slot */
static volatile unsigned long long copied;

/* Part 2: what the CPUs did to a slot's lines before its DMA, each of the
 * loaders on its twelfth of the slot (as the workers copy a chunk). */
enum { P_NONE, P_READ, P_READ_FLUSH, P_READ_NTA, P_WRITE, P_WRITE_NT, NPREPS };
static const char *prep_name[] = {"none", "read", "read+flush", "read-nta", "write", "write-nt"};
static char *slot;
static size_t slot_bytes;
static volatile int prep_kind, prep_gen, prep_done;

#if defined(__x86_64__)
#define FLUSH(p) __builtin_ia32_clflushopt(p)
#define FENCE() __builtin_ia32_sfence()
__attribute__((target("clflushopt")))
#else
#define FLUSH(p) ((void)(p))
#define FENCE() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#endif
static void prep_part(int id, char *scratch) {
    size_t each = slot_bytes / LOADERS & ~(size_t)63, n = each; /* lines, 16-aligned for copy_nt */
    char *part = slot + (size_t)id * each;
    switch (prep_kind) {
    case P_READ:
    case P_READ_FLUSH:
        memcpy(scratch, part, n);
        if (prep_kind == P_READ_FLUSH) {
            for (size_t i = 0; i < n; i += 64)
                FLUSH(part + i);
            FENCE();
        }
        break;
    case P_READ_NTA:
        for (size_t i = 0; i < n; i += 64) {
            __builtin_prefetch(part + i + 1024, 0, 0);
            memcpy(scratch + i, part + i, 64);
        }
        break;
    case P_WRITE:
        memcpy(part, scratch, n);
        break;
    case P_WRITE_NT:
        probe_copy_nt(part, scratch, n);
        break;
    }
}

static void *loader(void *arg) {
    int id = (int)(intptr_t)arg, gen = 0;
    char *scratch = malloc(4 << 20);
    memset(scratch, 5, 4 << 20);
    size_t warm = 4 << 20;
    char *a = malloc(warm), *b = malloc(warm), *cold = malloc(COLD_BYTES);
    memset(a, 1, warm);
    memset(b, 2, warm);
    memset(cold, 3, COLD_BYTES);
    size_t at = 0;
    while (!stop) {
        int k = load_kind;
        if (k == WARM || k == COLD || k == COLD_NT) {
            char *dst = k == WARM ? b + at % warm : cold + at % COLD_BYTES;
            const char *src = k == WARM ? a + at % warm : pinned_src + at % warm;
            if (k == COLD_NT)
                probe_copy_nt(dst, src, PIECE);
            else
                memcpy(dst, src, PIECE);
            at += PIECE;
            __atomic_fetch_add(&copied, PIECE, __ATOMIC_RELAXED);
        } else if (k == PREPPING) {
            if (prep_gen != gen) {
                prep_part(id, scratch);
                gen = prep_gen;
                __atomic_fetch_add(&prep_done, 1, __ATOMIC_RELEASE);
            }
            probe_relax();
        } else if (k == SPIN) {
            for (int i = 0; i < 32; i++) {
                probe_relax();
                (void)shared_word;
            }
        } else {
            usleep(200);
        }
    }
    free(a);
    free(b);
    free(cold);
    free(scratch);
    return NULL;
}

int main(void) {
    probe_context();
    size_t n = (size_t)CHUNKS * CHUNK;
    char *host;
    volatile uint32_t *flags;
    CUdeviceptr dev, dflags;
    CUstream st;
    CUevent ev[CHUNKS];
    CK(cuMemHostAlloc((void **)&host, n, CU_MEMHOSTALLOC_PORTABLE));
    CK(cuMemHostAlloc((void **)&flags, 4096, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP));
    CK(cuMemHostGetDevicePointer_v2(&dflags, (void *)flags, 0));
    CK(cuMemAlloc_v2(&dev, n));
    CK(cuMemsetD8_v2(dev, 0x5a, n));
    memset(host, 1, n);
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < CHUNKS; i++)
        CK(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING));

    /* what one question costs when the answer is yes */
    CK(cuEventRecord(ev[0], st));
    CK(cuStreamSynchronize(st));
    double q0 = probe_now();
    for (int i = 0; i < 10000; i++)
        CK(cuEventQuery(ev[0]));
    printf("# cuEventQuery of a completed event: %.0f ns\n", (probe_now() - q0) / 10000 * 1e9);

    CK(cuMemHostAlloc((void **)&pinned_src, 4 << 20, CU_MEMHOSTALLOC_PORTABLE));
    memset(pinned_src, 4, 4 << 20);
    pthread_t th[LOADERS];
    for (int i = 0; i < LOADERS; i++)
        pthread_create(&th[i], NULL, loader, (void *)(intptr_t)i);
    double load_gbps[NLOADS];
    for (int l = 0; l < NLOADS; l++) { /* the loaders alone */
        load_kind = l;
        usleep(20000);
        unsigned long long b0 = copied;
        double t0 = probe_now();
        usleep(100000);
        load_gbps[l] = (copied - b0) / (probe_now() - t0) / 1e9;
    }
    uint32_t seq = 0;
    static double total[2][NLOADS][NWAITS][ROUNDS], first[2][NLOADS][NWAITS][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int dir = 0; dir < 2; dir++)
            for (int l = 0; l < NLOADS; l++) {
                load_kind = l;
                usleep(2000); /* the loaders settle into it */
                for (int w = 0; w < NWAITS; w++) {
                    CK(cuStreamSynchronize(st));
                    uint32_t base = seq;
                    double t0 = probe_now(), t1 = 0;
                    if (w == WHOLE) {
                        CK(dir ? cuMemcpyDtoHAsync_v2(host, dev, n, st) : cuMemcpyHtoDAsync_v2(dev, host, n, st));
                        CK(cuEventRecord(ev[CHUNKS - 1], st));
                    }
                    for (int c = 0; c < CHUNKS && w != WHOLE; c++) {
                        char *h = host + (size_t)c * CHUNK;
                        CUdeviceptr d = dev + (size_t)c * CHUNK;
                        CK(dir ? cuMemcpyDtoHAsync_v2(h, d, CHUNK, st) : cuMemcpyHtoDAsync_v2(d, h, CHUNK, st));
                        CK(cuEventRecord(ev[c], st));
                        CK(cuStreamWriteValue32_v2(st, dflags + 4 * (size_t)c, base + c + 1, 0));
                    }
                    seq = base + CHUNKS;
                    if (w == EVSYNC || w == WHOLE) {
                        CK(cuEventSynchronize(ev[CHUNKS - 1]));
                        t1 = probe_now();
                    }
                    for (int c = 0; c < CHUNKS && w > EVSYNC; c++) {
                        for (;;) {
                            if (w == FLAG) {
                                if (flags[c] == base + c + 1)
                                    break;
                            } else {
                                CUresult q = cuEventQuery(ev[c]);
                                if (q == CUDA_SUCCESS)
                                    break;
                                if (q != CUDA_ERROR_NOT_READY)
                                    CK(q);
                            }
                            if (w != QUERY)
                                for (int k = 0; k < 32; k++)
                                    probe_relax();
                        }
                        if (c == 0)
                            t1 = probe_now();
                    }
                    double t2 = probe_now();
                    total[dir][l][w][r] = (w <= EVSYNC ? t1 : t2) - t0;
                    first[dir][l][w][r] = t1 - t0;
                }
            }
    /* part 2: one 4 MiB DMA (whole) and 8 chunks watched as the engine does
     * (query32), after the loaders did `prep` to the slot */
    slot = host, slot_bytes = n;
    load_kind = PREPPING;
    static double t2s[2][NPREPS][2][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int dir = 0; dir < 2; dir++)
            for (int pk = 0; pk < NPREPS; pk++)
                for (int w = 0; w < 2; w++) {
                    CK(cuStreamSynchronize(st));
                    prep_kind = pk;
                    prep_done = 0;
                    __atomic_fetch_add(&prep_gen, 1, __ATOMIC_RELEASE);
                    while (__atomic_load_n(&prep_done, __ATOMIC_ACQUIRE) < LOADERS)
                        probe_relax();
                    double t0 = probe_now();
                    size_t each = w ? CHUNK : n;
                    for (size_t off = 0; off < n; off += each) {
                        CK(dir ? cuMemcpyDtoHAsync_v2(host + off, dev + off, each, st)
                               : cuMemcpyHtoDAsync_v2(dev + off, host + off, each, st));
                        CK(cuEventRecord(ev[off / CHUNK], st));
                    }
                    for (size_t off = 0; off < n; off += each) {
                        CUresult q;
                        while ((q = cuEventQuery(ev[off / CHUNK])) == CUDA_ERROR_NOT_READY)
                            for (int k = 0; k < 32; k++)
                                probe_relax();
                        CK(q);
                    }
                    t2s[dir][pk][w][r] = probe_now() - t0;
                }
    printf("# part 2: the slot's lines before the DMA (the loaders' twelfths), medians of %d\n", ROUNDS);
    printf("%-4s %-11s %13s %13s\n", "dir", "prep", "whole GB/s", "8x512K GB/s");
    for (int dir = 0; dir < 2; dir++)
        for (int pk = 0; pk < NPREPS; pk++) {
            double m[2];
            for (int w = 0; w < 2; w++)
                m[w] = n / probe_median(t2s[dir][pk][w], ROUNDS) / 1e9;
            printf("%-4s %-11s %13.2f %13.2f\n", dir ? "D2H" : "H2D", prep_name[pk], m[0], m[1]);
        }

    stop = 1;
    for (int i = 0; i < LOADERS; i++)
        pthread_join(th[i], NULL);
    CK(cuStreamSynchronize(st));
    printf("# %d rounds, %d chunks of %u KiB, %d loader threads; medians\n", ROUNDS, CHUNKS, CHUNK >> 10, LOADERS);
    for (int l = 0; l < NLOADS; l++)
        printf("# load %-7s: the %d threads copy %.1f GB/s\n", load_name[l], LOADERS, load_gbps[l]);
    printf("%-4s %-7s %-8s %9s %10s %12s\n", "dir", "load", "wait", "GB/s", "total us", "first us");
    for (int dir = 0; dir < 2; dir++)
        for (int l = 0; l < NLOADS; l++)
            for (int w = 0; w < NWAITS; w++) {
                double t = probe_median(total[dir][l][w], ROUNDS);
                printf("%-4s %-7s %-8s %9.2f %10.1f %12.1f\n", dir ? "D2H" : "H2D", load_name[l], wait_name[w],
                       n / t / 1e9, t * 1e6, probe_median(first[dir][l][w], ROUNDS) * 1e6);
            }
    return 0;
}
