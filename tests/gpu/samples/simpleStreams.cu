// simpleStreams: pageable input split over 4 non-blocking streams, each
// chunk copied in with cudaMemcpyAsync, incremented by a kernel and copied
// out asynchronously; an event per stream tells the host when its chunk is
// back (asyncAPI style), checked against the input.  Repeated 3 times with
// the host buffers reused, so stale data would show.
#include "check.h"

__global__ void inc(unsigned *x, int n, unsigned by)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] += by;
}

int main()
{
    const int ns = 4, n = (4 << 20) + 8; // 16 MiB: 4 MiB per stream
    const int chunk = n / ns;            // n is a multiple of ns
    size_t bytes = n * sizeof(unsigned);
    unsigned *in = (unsigned *)malloc(bytes), *out = (unsigned *)malloc(bytes), *d;
    CK(cudaMalloc(&d, bytes));
    cudaStream_t st[ns];
    cudaEvent_t done[ns];
    for (int i = 0; i < ns; i++) {
        CK(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    }
    uint64_t s = 17;
    long bad = 0;
    for (int round = 0; round < 3; round++) {
        rng_fill(&s, in, bytes);
        memset(out, 0, bytes);
        for (int i = 0; i < ns; i++) {
            size_t off = (size_t)i * chunk;
            CK(cudaMemcpyAsync(d + off, in + off, chunk * sizeof(unsigned), cudaMemcpyHostToDevice, st[i]));
            inc<<<64, 256, 0, st[i]>>>(d + off, chunk, round + 1);
            CK(cudaMemcpyAsync(out + off, d + off, chunk * sizeof(unsigned), cudaMemcpyDeviceToHost, st[i]));
            CK(cudaEventRecord(done[i], st[i]));
        }
        CK(cudaGetLastError());
        for (int i = 0; i < ns; i++) {
            CK(cudaEventSynchronize(done[i]));
            for (int k = i * chunk; k < (i + 1) * chunk; k++)
                bad += out[k] != in[k] + round + 1;
        }
    }
    for (int i = 0; i < ns; i++) {
        CK(cudaStreamDestroy(st[i]));
        CK(cudaEventDestroy(done[i]));
    }
    CK(cudaFree(d));
    return verdict("simpleStreams", 3L * n, bad);
}
