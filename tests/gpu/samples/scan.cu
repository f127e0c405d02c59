// scan: inclusive prefix sum of 2^18 - 5 (or N < 2^18: scan N) random 32-bit integers (wrapping),
// in three passes (scan each block, scan the block totals, add them back);
// exact against the CPU.
#include "check.h"

#define B 512

// inclusive scan of each block of B elements; its total into sums[block]
__global__ void scan_blocks(unsigned *x, int n, unsigned *sums)
{
    __shared__ unsigned t[B];
    int i = blockIdx.x * B + threadIdx.x;
    t[threadIdx.x] = i < n ? x[i] : 0;
    __syncthreads();
    for (int off = 1; off < B; off *= 2) { // Hillis-Steele
        unsigned v = threadIdx.x >= off ? t[threadIdx.x - off] : 0;
        __syncthreads();
        t[threadIdx.x] += v;
        __syncthreads();
    }
    if (i < n)
        x[i] = t[threadIdx.x];
    if (sums && threadIdx.x == B - 1)
        sums[blockIdx.x] = t[B - 1];
}

__global__ void add_back(unsigned *x, int n, const unsigned *sums)
{
    int i = blockIdx.x * B + threadIdx.x;
    if (blockIdx.x > 0 && i < n)
        x[i] += sums[blockIdx.x - 1];
}

int main(int argc, char **argv)
{
    int n = argc > 1 && atoi(argv[1]) < B * B ? atoi(argv[1]) : (1 << 18) - 5;
    const int nb = (n + B - 1) / B; // nb <= B: one block scans the totals
    size_t bytes = n * sizeof(unsigned);
    unsigned *h = (unsigned *)malloc(bytes), *out = (unsigned *)malloc(bytes);
    uint64_t s = 14;
    rng_fill(&s, h, bytes);
    memset(out, 0, bytes);
    unsigned *d, *sums;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMalloc(&sums, nb * sizeof(unsigned)));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    scan_blocks<<<nb, B>>>(d, n, sums);
    scan_blocks<<<1, B>>>(sums, nb, NULL);
    add_back<<<nb, B>>>(d, n, sums);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out, d, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    unsigned acc = 0;
    for (int i = 0; i < n; i++) {
        acc += h[i];
        bad += out[i] != acc;
    }
    CK(cudaFree(d));
    CK(cudaFree(sums));
    return verdict("scan", n, bad);
}
