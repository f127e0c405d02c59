/* probe_stream_rates [streams] [bytes]: whether the rate at which a process
 * makes tiny asynchronous H2D belongs to the process or to its stream.
 * Creates `streams` non-blocking streams (default 8) and, round after
 * round, times a batch of 2000 asynchronous H2D of `bytes` (default 4) from
 * pageable memory on each of them and on the legacy stream, then the same
 * from pinned memory, synchronising after each batch; prints each stream's
 * median ns a copy (the legacy stream last) as one JSON line.
 * cc -O2 -I$CUDA/include probe_stream_rates.c -L$CUDA/lib64/stubs -lcuda */
#include <cuda.h>

#include "../probe.h"

#define ROUNDS 15
#define BATCH 2000
#define MAX_STREAMS 64

int main(int argc, char **argv) {
    int ns = argc > 1 ? atoi(argv[1]) : 8;
    size_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 4;
    if (ns < 1 || ns > MAX_STREAMS || bytes < 1) {
        fprintf(stderr, "usage: probe_stream_rates [streams 1-%d] [bytes]\n", MAX_STREAMS);
        return 2;
    }
    probe_context();
    CUstream st[MAX_STREAMS + 1];
    for (int i = 0; i < ns; i++)
        CK(cuStreamCreate(&st[i], CU_STREAM_NON_BLOCKING));
    st[ns] = 0;
    CUdeviceptr d;
    CK(cuMemAlloc(&d, bytes * BATCH));
    char *h = malloc(bytes * BATCH), *hp;
    CK(cuMemAllocHost((void **)&hp, bytes * BATCH));
    memset(h, 1, bytes * BATCH);
    memset(hp, 1, bytes * BATCH);
    static double t[2][MAX_STREAMS + 1][ROUNDS];
    for (int r = -2; r < ROUNDS; r++) /* two rounds of warm-up */
        for (int pinned = 0; pinned < 2; pinned++)
            for (int k = 0; k <= ns; k++) {
                int i = ((k + r) % (ns + 1) + ns + 1) % (ns + 1); /* each round starts one stream further on */
                const char *src = pinned ? hp : h;
                double t0 = probe_now();
                for (int j = 0; j < BATCH; j++)
                    CK(cuMemcpyHtoDAsync(d + j * bytes, src + j * bytes, bytes, st[i]));
                CK(cuStreamSynchronize(st[i]));
                if (r >= 0)
                    t[pinned][i][r] = (probe_now() - t0) / BATCH * 1e9;
            }
    printf("{\"bytes\":%zu", bytes);
    for (int pinned = 0; pinned < 2; pinned++) {
        printf(",\"%s\":[", pinned ? "pinned" : "pageable");
        for (int i = 0; i <= ns; i++)
            printf("%s%.0f", i ? "," : "", probe_median(t[pinned][i], ROUNDS));
        printf("]");
    }
    printf("}\n");
    return 0;
}
