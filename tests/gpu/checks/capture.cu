// capture: copies on a capturing stream, and the graphs made of them, on the
// real driver.  Each case captures H2D (pageable or pinned) -> kernel ->
// D2H into a graph, launches it three times with new host data between the
// launches, and checks every byte against a CPU reference; then the same copies
// outside capture right after, on the same stream.  The return code of every
// call is printed, so the plain and the pinfast runs can be diffed line by
// line (tests/gpu/checks/safety.sh): pinfast must pass captured copies through
// untouched, whatever the driver answers for them.
#include <cuda_runtime.h>

#include "../samples/check.h"

__global__ static void axpb(float* x, size_t n, float a, float b)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = x[i] * a + b;
}

static void fill(float* p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (float)(rng_next(&seed) % 1000) / 8.0f;
}

// 0 if out == in * a + b everywhere (exact: the values are multiples of 1/8)
static long wrong(const float* in, const float* out, size_t n, float a, float b)
{
    long bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != in[i] * a + b;
    return bad;
}

static long one_case(const char* name, cudaStreamCaptureMode mode, bool pinned, size_t n, uint64_t seed)
{
    size_t bytes = n * sizeof(float);
    float *in, *out, *d;
    if (pinned) {
        CK(cudaMallocHost(&in, bytes));
        CK(cudaMallocHost(&out, bytes));
    } else {
        in = (float*)malloc(bytes);
        out = (float*)malloc(bytes);
    }
    CK(cudaMalloc(&d, bytes));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    long bad = 0;
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ge = nullptr;
    int rb = cudaStreamBeginCapture(s, mode);
    int rh = cudaMemcpyAsync(d, in, bytes, cudaMemcpyHostToDevice, s);
    axpb<<<256, 256, 0, s>>>(d, n, 3.0f, 0.5f);
    int rk = cudaGetLastError();
    int rd = cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, s);
    int re = cudaStreamEndCapture(s, &g);
    int ri = g ? cudaGraphInstantiate(&ge, g, 0) : -1;
    printf("%s: begin %d, H2D %d, kernel %d, D2H %d, end %d, instantiate %d\n", name, rb, rh, rk, rd, re, ri);
    (void)cudaGetLastError(); // a refused capture leaves its error behind
    for (int launch = 0; ge && launch < 3; launch++) {
        fill(in, n, seed + launch);
        memset(out, 0xA5, bytes);
        CK(cudaGraphLaunch(ge, s));
        CK(cudaStreamSynchronize(s));
        long w = wrong(in, out, n, 3.0f, 0.5f);
        printf("%s: launch %d, %ld wrong\n", name, launch, w);
        bad += w;
    }
    // the same stream, no longer capturing: copies are staged again
    fill(in, n, seed + 7);
    memset(out, 0xA5, bytes);
    CK(cudaMemcpyAsync(d, in, bytes, cudaMemcpyHostToDevice, s));
    axpb<<<256, 256, 0, s>>>(d, n, 3.0f, 0.5f);
    CK(cudaMemcpyAsync(out, d, bytes, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    long w = wrong(in, out, n, 3.0f, 0.5f);
    printf("%s: after capture, %ld wrong\n", name, w);
    bad += w;
    if (ge) CK(cudaGraphExecDestroy(ge));
    if (g) CK(cudaGraphDestroy(g));
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    if (pinned) {
        CK(cudaFreeHost(in));
        CK(cudaFreeHost(out));
    } else {
        free(in);
        free(out);
    }
    return bad;
}

int main(int argc, char** argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], nullptr, 0) : (3u << 20); // 12 MiB of floats
    const struct { const char* name; cudaStreamCaptureMode mode; bool pinned; } cases[] = {
        {"global pageable", cudaStreamCaptureModeGlobal, false},
        {"thread-local pageable", cudaStreamCaptureModeThreadLocal, false},
        {"relaxed pageable", cudaStreamCaptureModeRelaxed, false},
        {"global pinned", cudaStreamCaptureModeGlobal, true},
    };
    long bad = 0, count = 0;
    for (const auto& c : cases) {
        bad += one_case(c.name, c.mode, c.pinned, n, 1000 + (uint64_t)count);
        count++;
    }
    return verdict("capture", count, bad);
}
