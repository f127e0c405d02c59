/* probe_rows_dma: how fast the DMA engine moves rows between pinned host
 * memory and a 2D CUDA array (uchar4 texels) or pitched device memory
 * (cuMemAllocPitch), by how the copy is cut, without pinfast: one
 * cuMemcpy2DAsync for the whole, or chunks of rows (what a staged copy
 * issues: packed rows, one DMA a chunk) as cuMemcpy2DAsync or
 * cuMemcpy3DAsync of depth 1, from memory of cuMemHostAlloc or registered
 * with cuMemHostRegister (pinfast's staging slots).  Per target, shape,
 * cut and direction: the GPU time of the copy (events around it, median of
 * 7 after 2 warm-ups) as GB/s.
 * Usage: probe_rows_dma [--pitched] [W:H ...] (texels a row : rows;
 * default 64:65536 1024:4096 3840:2160)
 * Build: cc -O2 -I/usr/local/cuda/include -o probe_rows_dma probe_rows_dma.c -lcuda */
#include <cuda.h>
#include "../probe.h"

enum { WHOLE, CHUNK2D, CHUNK3D, CUTS };
static const char *cut_names[CUTS] = {"whole-2d", "chunks-2d", "chunks-3d"};

/* The device side: an array, or pitched device memory (array NULL). */
struct target {
    CUarray array;
    CUdeviceptr dev;
    size_t pitch;
};

/* One copy between host (rows packed) and the target, rows [y, y + n). */
static void copy_rows(int cut, int h2d, const struct target *t, char *host, size_t row, size_t y, size_t n,
                      CUstream s) {
    CUmemorytype dt = t->array ? CU_MEMORYTYPE_ARRAY : CU_MEMORYTYPE_DEVICE;
    CUDA_MEMCPY3D m = {.WidthInBytes = row, .Height = n, .Depth = 1};
    if (h2d)
        m.srcMemoryType = CU_MEMORYTYPE_HOST, m.srcHost = host, m.srcPitch = row, m.dstMemoryType = dt,
        m.dstArray = t->array, m.dstDevice = t->dev, m.dstPitch = t->pitch, m.dstY = y;
    else
        m.dstMemoryType = CU_MEMORYTYPE_HOST, m.dstHost = host, m.dstPitch = row, m.srcMemoryType = dt,
        m.srcArray = t->array, m.srcDevice = t->dev, m.srcPitch = t->pitch, m.srcY = y;
    if (cut == CHUNK3D) {
        CK(cuMemcpy3DAsync(&m, s));
        return;
    }
    CUDA_MEMCPY2D m2 = probe_2d_of(&m);
    CK(cuMemcpy2DAsync(&m2, s));
}

/* The whole target moved one way, in chunks of `chunk` bytes' worth of
 * rows (the whole in one copy for WHOLE). */
struct rows_copy {
    int cut, h2d;
    const struct target *t;
    char *host;
    size_t row, h, chunk;
};

static void rows_copy(void *arg, CUstream s) {
    const struct rows_copy *c = arg;
    size_t step = c->cut == WHOLE ? c->h : c->chunk / c->row ? c->chunk / c->row : 1;
    for (size_t y = 0; y < c->h; y += step)
        copy_rows(c->cut, c->h2d, c->t, c->host + y * c->row, c->row, y, y + step < c->h ? step : c->h - y, s);
}

/* GB/s of the target moved one way (median of 7 after 2 warm-ups). */
static double rate(struct rows_copy c, int h2d, CUstream s) {
    c.h2d = h2d;
    return (double)(c.row * c.h) / (probe_gpu_ms(s, rows_copy, &c, 2, 7) * 1e-3) / 1e9;
}

int main(int argc, char **argv) {
    static const char *defaults[] = {"64:65536", "1024:4096", "3840:2160"};
    int pitched = argc > 1 && !strcmp(argv[1], "--pitched");
    const char **shapes = argc > 1 + pitched ? (const char **)argv + 1 + pitched : defaults;
    int nshapes = argc > 1 + pitched ? argc - 1 - pitched : 3;
    size_t chunks[] = {(size_t)512 << 10, (size_t)2 << 20, (size_t)8 << 20};
    probe_context();
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int k = 0; k < nshapes; k++) {
        size_t w, h;
        if (sscanf(shapes[k], "%zu:%zu", &w, &h) != 2 || !w || !h) {
            fprintf(stderr, "probe_rows_dma: bad shape '%s' (want W:H)\n", shapes[k]);
            return 64;
        }
        size_t row = w * 4, n = row * h;
        struct target t = {0};
        if (pitched) {
            CK(cuMemAllocPitch(&t.dev, &t.pitch, row, h, 16));
        } else {
            CUDA_ARRAY_DESCRIPTOR d = {.Width = w, .Height = h, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 4};
            CK(cuArrayCreate(&t.array, &d));
        }
        for (int reg = 0; reg < 2; reg++) {
            char *host;
            if (reg) {
                host = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (host == MAP_FAILED)
                    return 2;
                memset(host, 1, n);
                CK(cuMemHostRegister(host, n, CU_MEMHOSTREGISTER_PORTABLE));
            } else {
                CK(cuMemHostAlloc((void **)&host, n, CU_MEMHOSTALLOC_PORTABLE));
                memset(host, 1, n);
            }
            for (int cut = 0; cut < CUTS; cut++)
                for (int c = 0; c < (cut == WHOLE ? 1 : 3); c++) {
                    struct rows_copy rc = {.cut = cut, .t = &t, .host = host, .row = row, .h = h, .chunk = chunks[c]};
                    double up = rate(rc, 1, s), down = rate(rc, 0, s);
                    printf("{\"probe\":\"rows-dma\",\"target\":\"%s\",\"row_bytes\":%zu,\"rows\":%zu,\"host\":\"%s\","
                           "\"cut\":\"%s\",\"chunk\":%zu,\"up_gbps\":%.2f,\"down_gbps\":%.2f}\n",
                           pitched ? "pitched" : "array", row, h, reg ? "registered" : "hostalloc", cut_names[cut],
                           cut == WHOLE ? n : chunks[c], up, down);
                    fflush(stdout);
                }
            if (reg) {
                CK(cuMemHostUnregister(host));
                munmap(host, n);
            } else {
                CK(cuMemFreeHost(host));
            }
        }
        if (pitched)
            CK(cuMemFree(t.dev));
        else
            CK(cuArrayDestroy(t.array));
    }
    return 0;
}
