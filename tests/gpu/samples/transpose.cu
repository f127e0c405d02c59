// transpose: a 1000x1500 float matrix (or R x 1.5R: transpose R) (not a multiple of the tile) through a
// shared-memory tile with padding against bank conflicts; exact.
#include "check.h"

#define T 32

__global__ void transpose(const float *in, float *out, int rows, int cols)
{
    __shared__ float tile[T][T + 1];
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    for (int j = 0; j < T; j += 8)
        if (x < cols && y + j < rows)
            tile[threadIdx.y + j][threadIdx.x] = in[(size_t)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * T + threadIdx.x, y = blockIdx.x * T + threadIdx.y;
    for (int j = 0; j < T; j += 8)
        if (x < rows && y + j < cols)
            out[(size_t)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

int main(int argc, char **argv)
{
    const int rows = argc > 1 ? atoi(argv[1]) : 1000, cols = rows * 3 / 2;
    size_t bytes = (size_t)rows * cols * sizeof(float);
    float *in = (float *)malloc(bytes), *out = (float *)malloc(bytes);
    uint64_t s = 16;
    for (int i = 0; i < rows * cols; i++)
        in[i] = (float)(rng_next(&s) % 1000003);
    memset(out, 0xff, bytes);
    float *din, *dout;
    CK(cudaMalloc(&din, bytes));
    CK(cudaMalloc(&dout, bytes));
    CK(cudaMemcpy(din, in, bytes, cudaMemcpyHostToDevice));
    transpose<<<dim3((cols + T - 1) / T, (rows + T - 1) / T), dim3(T, 8)>>>(din, dout, rows, cols);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out, dout, bytes, cudaMemcpyDeviceToHost));
    long bad = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            bad += out[(size_t)c * rows + r] != in[(size_t)r * cols + c];
    CK(cudaFree(din));
    CK(cudaFree(dout));
    return verdict("transpose", (long)rows * cols, bad);
}
