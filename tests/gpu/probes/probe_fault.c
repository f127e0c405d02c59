/* probe_fault.c - where the time of a copy into fresh memory goes, on the
 * host alone: T threads take 2 MiB pieces of a fresh mapping in turn from
 * one counter (as the staging workers take tasks), from a pinned source of
 * 64 MiB read round and round (as the slots are), with or without the GPU
 * writing host memory beside them (a DtoH loop into another pinned
 * buffer, the DMA's share of the memory bus).  Per way, the median GB/s of
 * five rounds and what /proc/vmstat says the faults cost.
 *   probe_fault THREADS MiB [dma] */
#include <cuda.h>
#include "../probe.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>

#define HUGE ((size_t)2 << 20)
#define SRC ((size_t)64 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

enum way { AHEAD_NT, AHEAD_MEMCPY, EACH_MEMCPY, EACH_NT, TOUCH_MEMCPY, TOUCH_NT, SMALL_MEMCPY, ZERO_ONLY,
           POKE_ONLY, POKE_AHEAD_NT, COPY_NT, COPY_MEMCPY, NWAYS };
static const char *names[NWAYS] = {
    "all faulted first, then nt copy", "all faulted first, then memcpy", "each piece faulted then memcpy",
    "each piece faulted then nt copy", "memcpy faults", "nt copy faults", "4 KiB pages, memcpy faults",
    "fault only (clearing)", "poke only (lock add 0 a page)", "all poked first, then nt copy",
    "resident, nt copy", "resident, memcpy"};

static char *src, *dst;
static size_t len;
static enum way way;
static int nthreads, phase_wait;
static size_t next_piece, arrived;

/* fault: 1 MADV_POPULATE_WRITE, 2 an atomic add of 0 to a word of each 4 KiB page */
static void take_pieces(int fault, int copy) {
    size_t n = len / HUGE;
    for (size_t i; (i = __atomic_fetch_add(&next_piece, 1, __ATOMIC_RELAXED)) < n;) {
        char *d = dst + i * HUGE;
        const char *s = src + (i * HUGE) % SRC;
        if (fault == 1)
            madvise(d, HUGE, MADV_POPULATE_WRITE);
        else if (fault == 2)
            for (size_t o = 0; o < HUGE; o += 4096)
                __atomic_fetch_add((uint64_t *)(d + o), 0, __ATOMIC_RELAXED);
        if (copy == 1)
            probe_copy_nt(d, s, HUGE);
        else if (copy == 2)
            memcpy(d, s, HUGE);
    }
}

static pthread_barrier_t start, done;
static int stop;

static void one_round(void) {
    switch (way) {
    case AHEAD_NT:
    case AHEAD_MEMCPY:
    case POKE_AHEAD_NT:
        take_pieces(way == POKE_AHEAD_NT ? 2 : 1, 0);
        /* every piece faulted before any copy */
        __atomic_fetch_add(&arrived, 1, __ATOMIC_ACQ_REL);
        while (__atomic_load_n(&arrived, __ATOMIC_ACQUIRE) < (size_t)nthreads)
            probe_relax();
        if (__atomic_fetch_add(&arrived, 1, __ATOMIC_ACQ_REL) == 2 * (size_t)nthreads - 1)
            __atomic_store_n(&next_piece, 0, __ATOMIC_RELEASE), __atomic_store_n(&phase_wait, 0, __ATOMIC_RELEASE);
        while (__atomic_load_n(&phase_wait, __ATOMIC_ACQUIRE))
            probe_relax();
        take_pieces(0, way == AHEAD_MEMCPY ? 2 : 1);
        break;
    case EACH_MEMCPY: take_pieces(1, 2); break;
    case EACH_NT: take_pieces(1, 1); break;
    case TOUCH_MEMCPY: case SMALL_MEMCPY: case COPY_MEMCPY: take_pieces(0, 2); break;
    case TOUCH_NT: case COPY_NT: take_pieces(0, 1); break;
    case ZERO_ONLY: take_pieces(1, 0); break;
    case POKE_ONLY: take_pieces(2, 0); break;
    default: break;
    }
}

/* The threads live through every round: creating them takes the mmap lock
 * for writing (their stacks), which stalls the faults of those running. */
static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        pthread_barrier_wait(&start);
        if (stop)
            return NULL;
        one_round();
        pthread_barrier_wait(&done);
    }
}

static const char *counters[] = {"thp_fault_alloc", "thp_fault_fallback", "compact_stall", "pgfault"};
#define NCOUNT (sizeof counters / sizeof *counters)

static void vmstat(unsigned long long *v) {
    char name[64];
    unsigned long long x;
    FILE *f = fopen("/proc/vmstat", "r");
    memset(v, 0, NCOUNT * sizeof *v);
    if (!f)
        return;
    while (fscanf(f, "%63s %llu", name, &x) == 2)
        for (size_t i = 0; i < NCOUNT; i++)
            if (!strcmp(name, counters[i]))
                v[i] = x;
    fclose(f);
}

static volatile int dma_stop;
static void *dma_loop(void *arg) {
    CUcontext c = arg;
    CUdeviceptr d;
    void *h;
    CUstream s;
    CK(cuCtxSetCurrent(c));
    CK(cuMemAlloc(&d, 256u << 20));
    CK(cuMemAllocHost(&h, 256u << 20));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    while (!dma_stop) {
        CK(cuMemcpyDtoHAsync(h, d, 256u << 20, s));
        CK(cuStreamSynchronize(s));
    }
    return NULL;
}

static void show(const char *file) {
    char buf[256] = {0};
    FILE *f = fopen(file, "r");
    if (f && fgets(buf, sizeof buf, f))
        printf("# %s: %s", file, buf);
    if (f)
        fclose(f);
}

int main(int argc, char **argv) {
    nthreads = argc > 1 ? atoi(argv[1]) : 12;
    len = (argc > 2 ? (size_t)atoi(argv[2]) : 1024) << 20;
    int dma = argc > 3 && !strcmp(argv[3], "dma");
    if (nthreads < 1 || nthreads > 64 || len < HUGE)
        return fprintf(stderr, "usage: probe_fault THREADS MiB [dma]\n"), 2;
    show("/sys/kernel/mm/transparent_hugepage/enabled");
    show("/sys/kernel/mm/transparent_hugepage/defrag");
    CUcontext c = probe_context();
    void *h;
    CK(cuMemAllocHost(&h, SRC));
    src = h;
    for (size_t i = 0; i < SRC; i += 8)
        *(uint64_t *)(src + i) = i * 0x9E3779B97F4A7C15ull;
    pthread_t dt;
    if (dma)
        pthread_create(&dt, NULL, dma_loop, c);
    pthread_t t[64];
    pthread_barrier_init(&start, NULL, nthreads + 1);
    pthread_barrier_init(&done, NULL, nthreads + 1);
    for (int k = 0; k < nthreads; k++)
        pthread_create(&t[k], NULL, worker, NULL);
    printf("# %d threads, %zu MiB%s\n", nthreads, len >> 20, dma ? ", the GPU writing host memory beside" : "");
    for (way = 0; way < NWAYS; way++) {
        double v[5], fb = 0, alloc = 0, stall = 0, faults = 0;
        for (int r = 0; r < 5; r++) {
            char *m = mmap(NULL, len + HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m == MAP_FAILED)
                return perror("mmap"), 2;
            dst = (char *)(((uintptr_t)m + HUGE - 1) & ~(HUGE - 1));
            if (way != SMALL_MEMCPY)
                madvise(dst, len, MADV_HUGEPAGE);
            if (way == COPY_NT || way == COPY_MEMCPY)
                madvise(dst, len, MADV_POPULATE_WRITE);
            next_piece = arrived = 0;
            phase_wait = 1;
            unsigned long long a[NCOUNT], b[NCOUNT];
            vmstat(a);
            double t0 = probe_now();
            pthread_barrier_wait(&start);
            pthread_barrier_wait(&done);
            v[r] = len / (probe_now() - t0) / 1e9;
            vmstat(b);
            alloc += b[0] - a[0], fb += b[1] - a[1], stall += b[2] - a[2], faults += b[3] - a[3];
            if (way != ZERO_ONLY && way != POKE_ONLY)
                for (size_t i = 0; i < len; i += 4096 * 7 + 64)
                    if (*(uint64_t *)(dst + (i & ~(size_t)7)) != ((i & ~(size_t)7) % SRC) * 0x9E3779B97F4A7C15ull)
                        return fprintf(stderr, "%s: byte %zu wrong\n", names[way], i), 1;
            munmap(m, len + HUGE);
        }
        printf("%-34s %6.1f GB/s  (rounds %.1f..%.1f; per round: %.0f huge pages, %.0f fallbacks, %.0f compaction stalls, %.0f faults)\n",
               names[way], probe_median(v, 5), v[0], v[4], alloc / 5, fb / 5, stall / 5, faults / 5);
        fflush(stdout);
    }
    stop = 1;
    pthread_barrier_wait(&start);
    for (int k = 0; k < nthreads; k++)
        pthread_join(t[k], NULL);
    if (dma) {
        dma_stop = 1;
        pthread_join(dt, NULL);
    }
    return 0;
}
