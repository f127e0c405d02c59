// The pinned pool on the real driver: a block that comes back from the pool
// answers cudaHostGetFlags / cudaHostGetDevicePointer as a fresh one, and a
// kernel reading it as mapped memory right after a reuse sees the new data.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    printf("%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)

__global__ void sum(const unsigned *p, size_t n, unsigned long long *out) {
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += p[i];
    atomicAdd(out, s);
}

int main() {
    const size_t n = 16 << 20; // 64 MiB of unsigned
    unsigned long long *dsum;
    CK(cudaMalloc(&dsum, sizeof *dsum));
    int bad = 0;
    for (int it = 0; it < 20; it++) {
        unsigned *h;
        unsigned flags = it % 2 ? cudaHostAllocMapped : cudaHostAllocMapped | cudaHostAllocPortable;
        CK(cudaHostAlloc(&h, n * sizeof *h, flags));
        unsigned got = 0;
        CK(cudaHostGetFlags(&got, h));
        void *dp;
        CK(cudaHostGetDevicePointer(&dp, h, 0));
        unsigned long long want = 0;
        for (size_t i = 0; i < n; i++) { h[i] = (unsigned)(i * 2654435761u + it); want += h[i]; }
        CK(cudaMemset(dsum, 0, sizeof *dsum));
        sum<<<264, 256>>>((const unsigned *)dp, n, dsum);
        CK(cudaGetLastError());
        unsigned long long s = 0;
        CK(cudaMemcpy(&s, dsum, sizeof s, cudaMemcpyDeviceToHost));
        if (s != want || (got & flags) != flags) {
            printf("iteration %d: sum %llu want %llu flags %#x asked %#x\n", it, s, want, got, flags);
            bad++;
        }
        CK(cudaFreeHost(h));
    }
    unsigned *x;
    CK(cudaMallocHost(&x, 4096));
    CK(cudaFreeHost(x));
    cudaError_t twice = cudaFreeHost(x);
    printf("pool_check: 20 iterations, %d bad; double free -> %s\n", bad, cudaGetErrorName(twice));
    return bad != 0;
}
