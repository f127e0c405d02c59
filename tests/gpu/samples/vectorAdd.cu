// vectorAdd: c = a + b over 2^22 floats in pageable memory, checked element
// by element against the CPU (the same single addition: exact).
#include "check.h"

__global__ void add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

int main()
{
    const int n = 1 << 22;
    size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    uint64_t s = 11;
    for (int i = 0; i < n; i++) {
        a[i] = (float)(rng_next(&s) % 100000) / 7.0f;
        b[i] = (float)(rng_next(&s) % 100000) / 3.0f;
    }
    memset(c, 0xff, bytes); // NaN everywhere until the result lands
    float *da, *db, *dc;
    CK(cudaMalloc(&da, bytes));
    CK(cudaMalloc(&db, bytes));
    CK(cudaMalloc(&dc, bytes));
    CK(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    add<<<(n + 255) / 256, 256>>>(da, db, dc, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; i++)
        bad += c[i] != a[i] + b[i];
    CK(cudaFree(da));
    CK(cudaFree(db));
    CK(cudaFree(dc));
    return verdict("vectorAdd", n, bad);
}
