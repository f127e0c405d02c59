// compute: a kernel-heavy program with few copies. It uploads --bytes of
// floats once, runs --launches launches of an FMA-heavy kernel over them and
// reads the result back once. Transfers are a small part of the time, so
// pinfast should change nothing; this workload catches overhead the shim
// might add to unrelated calls (kernel launches, syncs, context work).
#include "common.cuh"

#include <cmath>

__host__ __device__ static inline float step(float x, int iters) {
    for (int i = 0; i < iters; i++) x = x * 0.9999f + 0.0001f;
    return x;
}

__global__ static void step_kernel(float* x, uint64_t n, int iters) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        x[i] = step(x[i], iters);
}

int main(int argc, char** argv) {
    Args a(argc, argv);
    uint64_t bytes = a.get_size("--bytes", 64ull << 20);
    int launches = (int)a.get_int("--launches", 200);
    int iters = (int)a.get_int("--kernel-iters", 64);
    int reps = (int)a.get_int("--reps", 3);
    a.done();
    if (bytes % 4 || launches < 1 || reps < 1) die_usage("--bytes multiple of 4; launches, reps >= 1");

    init_device();
    Report r("compute", false);
    r.params().integer("bytes", (long long)bytes).integer("launches", launches)
        .integer("kernel_iters", iters).integer("reps", reps);

    uint64_t n = bytes / 4;
    HostBuf in(bytes, false), out(bytes, false);
    float* x = (float*)in.p;
    srand((unsigned)fresh_seed());
    for (uint64_t i = 0; i < n; i++) x[i] = (float)(rand() % 1000);
    DevBuf dev(bytes);

    auto pass = [&] {
        CK(cudaMemcpy(dev.p, in.p, bytes, cudaMemcpyHostToDevice));
        for (int l = 0; l < launches; l++) {
            step_kernel<<<1024, 256>>>((float*)dev.p, n, iters);
            CK_LAUNCH();
        }
        CK(cudaMemcpy(out.p, dev.p, bytes, cudaMemcpyDeviceToHost));
    };
    Stats s = time_reps(1, reps, pass);
    memset(out.p, POISON, bytes);
    pass();
    // Check a sample against the CPU (all of it would take minutes).
    const float* y = (const float*)out.p;
    for (uint64_t i = 0; i < n; i += 997) {
        float want = x[i];
        for (int l = 0; l < launches; l++) want = step(want, iters);
        if (!(fabsf(y[i] - want) <= 1e-3f * fabsf(want) + 1e-3f))
            die_mismatch("compute: element %" PRIu64 " is %g, expected %g", i, y[i], want);
    }
    r.add("pass", "both", 2 * bytes, s, launches, "launches");
    r.print();
    return 0;
}
