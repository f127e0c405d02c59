// matrixMul: C = A * B for 384x384 floats (or N x N: matrixMul N) with a shared-memory tiled kernel,
// against a CPU reference in double precision (relative error 1e-4).
#include <math.h>

#include "check.h"

#define TILE 16

__global__ void matmul(const float *A, const float *B, float *C, int n)
{
    __shared__ float as[TILE][TILE], bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0;
    for (int t = 0; t < n; t += TILE) {
        as[threadIdx.y][threadIdx.x] = A[row * n + t + threadIdx.x];
        bs[threadIdx.y][threadIdx.x] = B[(t + threadIdx.y) * n + col];
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    C[row * n + col] = acc;
}

int main(int argc, char **argv)
{
    const int n = argc > 1 ? atoi(argv[1]) / TILE * TILE : 384; // a multiple of TILE
    size_t bytes = (size_t)n * n * sizeof(float);
    float *A = (float *)malloc(bytes), *B = (float *)malloc(bytes), *C = (float *)malloc(bytes);
    uint64_t s = 12;
    for (int i = 0; i < n * n; i++) {
        A[i] = (float)(rng_next(&s) % 2001) / 1000.0f - 1.0f;
        B[i] = (float)(rng_next(&s) % 2001) / 1000.0f - 1.0f;
    }
    memset(C, 0xff, bytes);
    float *dA, *dB, *dC;
    CK(cudaMalloc(&dA, bytes));
    CK(cudaMalloc(&dB, bytes));
    CK(cudaMalloc(&dC, bytes));
    CK(cudaMemcpy(dA, A, bytes, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, B, bytes, cudaMemcpyHostToDevice));
    matmul<<<dim3(n / TILE, n / TILE), dim3(TILE, TILE)>>>(dA, dB, dC, n);
    CK(cudaGetLastError());
    CK(cudaMemcpy(C, dC, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int k = 0; k < n; k++) {
                ref += (double)A[i * n + k] * B[k * n + j];
                mag += fabs((double)A[i * n + k] * B[k * n + j]);
            }
            bad += !(fabs(C[i * n + j] - ref) <= 1e-4 * mag + 1e-6); // NaN fails too
        }
    CK(cudaFree(dA));
    CK(cudaFree(dB));
    CK(cudaFree(dC));
    return verdict("matrixMul", (long)n * n, bad);
}
