/* probe_h2dload: how fast can a staged H2D copy run on every GPU at once?
 * Staging moves each byte through host memory twice before the DMA reads
 * it: a CPU reads the program's pageable memory and writes a pinned slot,
 * then the GPU's DMA reads the slot.  Here each GPU's DMA reads a pinned
 * buffer (64 MiB copies back to back on one stream) while WRITERS threads
 * per GPU copy from 256 MiB of malloc'd memory into 64 MiB of pinned memory
 * of their own, R GB/s per GPU in all (paced; "max": as fast as they can),
 * with streaming stores ("nt", as pinfast's H2D under 128 MiB) or memcpy
 * (as from 128 MiB).  Per number of GPUs and load: each GPU's DMA GB/s
 * (median of ROUNDS) and what the writers moved.  A staged copy moving R
 * GB/s on each GPU needs its DMA to move R while the writers move R: where
 * the DMA falls below R, no staging schedule reaches R on that many GPUs.
 *   cc -O2 -pthread -o probe_h2dload probe_h2dload.c -lcuda
 *   probe_h2dload [writers per GPU, default 6] */
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "../probe.h"

#define MiB (1u << 20)
#define COPY (64 * MiB)
#define SRC (256 * MiB)
#define PIECE (256u << 10)
#define ROUNDS 9
#define PER_ROUND 4
#define MAX_GPUS 8
#define MAX_WRITERS 32

enum { NT, MEMCPY };

struct gpu {
    CUcontext ctx;
    CUstream st;
    CUdeviceptr dev;
    char *pinned, *slots, *src;
    double gbps[ROUNDS];
};

struct writer {
    char *src, *dst;
    size_t src_len, dst_len;
    double gbps;
};

static volatile int stop, mode;
static double writer_rate; /* bytes/s per writer; 0: unpaced */
static struct gpu gpus[MAX_GPUS];
static pthread_barrier_t round_start;

static void *writer(void *arg) {
    struct writer *w = arg;
    size_t s = 0, d = 0;
    uint64_t done = 0;
    double t0 = probe_now();
    while (!stop) {
        if (mode == NT)
            probe_copy_nt(w->dst + d, w->src + s, PIECE);
        else
            memcpy(w->dst + d, w->src + s, PIECE);
        done += PIECE;
        s = (s + PIECE) % w->src_len;
        d = (d + PIECE) % w->dst_len;
        if (writer_rate > 0)
            while (!stop && probe_now() < t0 + done / writer_rate)
                probe_relax();
    }
    w->gbps = done / (probe_now() - t0) / 1e9;
    return NULL;
}

static void *dma(void *arg) {
    struct gpu *g = arg;
    CK(cuCtxSetCurrent(g->ctx));
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&round_start); /* every GPU's round starts together */
        double t = probe_now();
        for (int i = 0; i < PER_ROUND; i++)
            CK(cuMemcpyHtoDAsync(g->dev, g->pinned, COPY, g->st));
        CK(cuStreamSynchronize(g->st));
        g->gbps[r] = (double)PER_ROUND * COPY / (probe_now() - t) / 1e9;
    }
    return NULL;
}

static void setup(struct gpu *g, int id) {
    CUdevice d;
    CK(cuDeviceGet(&d, id));
    CK(cuDevicePrimaryCtxRetain(&g->ctx, d));
    CK(cuCtxSetCurrent(g->ctx));
    CK(cuStreamCreate(&g->st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&g->dev, COPY));
    CK(cuMemHostAlloc((void **)&g->pinned, COPY, CU_MEMHOSTALLOC_PORTABLE));
    CK(cuMemHostAlloc((void **)&g->slots, COPY, CU_MEMHOSTALLOC_PORTABLE));
    if (!(g->src = aligned_alloc(4096, SRC))) {
        fprintf(stderr, "probe_h2dload: out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < SRC; i++)
        g->src[i] = (char)(i * 2654435761u >> 13);
    memset(g->pinned, 0x5a, COPY);
    memset(g->slots, 0, COPY);
}

/* One case: n GPUs' DMAs under a load of k writers per GPU moving
 * gbps_per_gpu (0: unpaced; k 0: no load). */
static void run_case(int n, int k, int how, double gbps_per_gpu, const char *label) {
    struct writer w[MAX_GPUS * MAX_WRITERS];
    pthread_t wt[MAX_GPUS * MAX_WRITERS], dt[MAX_GPUS];
    stop = 0;
    mode = how;
    writer_rate = k ? gbps_per_gpu * 1e9 / k : 0;
    for (int g = 0; g < n; g++)
        for (int j = 0; j < k; j++) {
            struct writer *x = &w[g * k + j];
            *x = (struct writer){.src = gpus[g].src + (size_t)j * (SRC / k / PIECE * PIECE),
                                 .dst = gpus[g].slots + (size_t)j * (COPY / k / PIECE * PIECE),
                                 .src_len = SRC / k / PIECE * PIECE, .dst_len = COPY / k / PIECE * PIECE};
            if (pthread_create(&wt[g * k + j], NULL, writer, x)) {
                fprintf(stderr, "probe_h2dload: no thread\n");
                exit(2);
            }
        }
    usleep(20000); /* the load settles */
    pthread_barrier_init(&round_start, NULL, (unsigned)n);
    for (int g = 0; g < n; g++)
        if (pthread_create(&dt[g], NULL, dma, &gpus[g])) {
            fprintf(stderr, "probe_h2dload: no thread\n");
            exit(2);
        }
    for (int g = 0; g < n; g++)
        pthread_join(dt[g], NULL);
    stop = 1;
    double moved = 0;
    for (int i = 0; i < n * k; i++) {
        pthread_join(wt[i], NULL);
        moved += w[i].gbps;
    }
    pthread_barrier_destroy(&round_start);
    double sum = 0;
    printf("%d GPU%s  %-14s  DMA GB/s:", n, n > 1 ? "s" : " ", label);
    for (int g = 0; g < n; g++) {
        double m = probe_median(gpus[g].gbps, ROUNDS);
        sum += m;
        printf(" %6.1f", m);
    }
    printf("  (all %6.1f)  writers %6.1f GB/s per GPU\n", sum, n ? moved / n : 0);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int k = argc > 1 ? atoi(argv[1]) : 6, ndev;
    if (k < 1 || k > MAX_WRITERS) {
        fprintf(stderr, "usage: probe_h2dload [writers per GPU, 1-%d]\n", MAX_WRITERS);
        return 2;
    }
    CK(cuInit(0));
    CK(cuDeviceGetCount(&ndev));
    if (ndev > MAX_GPUS)
        ndev = MAX_GPUS;
    for (int g = 0; g < ndev; g++)
        setup(&gpus[g], g);
    printf("# %d GPUs, %d writers per GPU, 64 MiB DMAs from pinned memory, median of %d rounds of %d\n",
           ndev, k, ROUNDS, PER_ROUND);
    run_case(ndev, 0, NT, 0, "warm-up");
    static const double rates[] = {30, 35, 40, 45, 50};
    for (int n = 1; n <= ndev; n += ndev > 1 ? ndev - 1 : 1) {
        run_case(n, 0, NT, 0, "idle");
        char label[32];
        for (unsigned i = 0; i < sizeof rates / sizeof *rates; i++) {
            snprintf(label, sizeof label, "nt %.0f", rates[i]);
            run_case(n, k, NT, rates[i], label);
        }
        run_case(n, k, NT, 0, "nt max");
        run_case(n, k, MEMCPY, 40, "memcpy 40");
        run_case(n, k, MEMCPY, 0, "memcpy max");
    }
    return 0;
}
