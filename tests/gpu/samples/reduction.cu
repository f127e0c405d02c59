// reduction: the sum of 2^22 (or N: reduction N) random 32-bit integers (64-bit total), a block
// tree in shared memory then one atomic per block; exact against the CPU.
// The input is read back too, so both directions are staged.
#include "check.h"

__global__ void reduce(const unsigned *in, int n, unsigned long long *out)
{
    __shared__ unsigned long long part[256];
    unsigned long long v = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        v += in[i];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if (threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(out, part[0]);
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) : 1 << 22;
    size_t bytes = n * sizeof(unsigned);
    unsigned *h = (unsigned *)malloc(bytes), *back = (unsigned *)malloc(bytes);
    uint64_t s = 13;
    rng_fill(&s, h, bytes);
    unsigned long long want = 0, got = 0;
    for (int i = 0; i < n; i++)
        want += h[i];
    unsigned *d;
    unsigned long long *dsum;
    CK(cudaMalloc(&d, bytes));
    CK(cudaMalloc(&dsum, sizeof *dsum));
    CK(cudaMemset(dsum, 0, sizeof *dsum));
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    reduce<<<264, 256>>>(d, n, dsum);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&got, dsum, sizeof got, cudaMemcpyDeviceToHost));
    memset(back, 0, bytes);
    CK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    long bad = (got != want) + (memcmp(back, h, bytes) != 0);
    if (got != want)
        printf("sum %llu, want %llu\n", got, want);
    CK(cudaFree(d));
    CK(cudaFree(dsum));
    return verdict("reduction", 2, bad);
}
