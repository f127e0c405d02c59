// histogram: 256 bins over 16 MiB + 3 (or N: histogram N) random bytes, per-block shared-memory
// bins merged with atomics; exact against the CPU, and the bins sum to n.
#include "check.h"

__global__ void hist(const unsigned char *x, size_t n, unsigned *bins)
{
    __shared__ unsigned local[256];
    local[threadIdx.x] = 0;
    __syncthreads();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        atomicAdd(&local[x[i]], 1u);
    __syncthreads();
    atomicAdd(&bins[threadIdx.x], local[threadIdx.x]);
}

int main(int argc, char **argv)
{
    const size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (16 << 20) + 3;
    unsigned char *h = (unsigned char *)malloc(n);
    uint64_t s = 15;
    rng_fill(&s, h, n);
    for (size_t i = 0; i < n; i += 3) // skewed, so that the bins differ
        h[i] &= 0x3f;
    unsigned want[256] = {0}, got[256];
    for (size_t i = 0; i < n; i++)
        want[h[i]]++;
    memset(got, 0xff, sizeof got);
    unsigned char *d;
    unsigned *bins;
    CK(cudaMalloc(&d, n));
    CK(cudaMalloc(&bins, sizeof got));
    CK(cudaMemset(bins, 0, sizeof got));
    CK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
    hist<<<264, 256>>>(d, n, bins);
    CK(cudaGetLastError());
    CK(cudaMemcpy(got, bins, sizeof got, cudaMemcpyDeviceToHost));
    long bad = 0;
    size_t total = 0;
    for (int b = 0; b < 256; b++) {
        bad += got[b] != want[b];
        total += got[b];
    }
    bad += total != n;
    CK(cudaFree(d));
    CK(cudaFree(bins));
    return verdict("histogram", 257, bad);
}
