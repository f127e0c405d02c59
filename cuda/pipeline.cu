// pipeline: many batches, each copied in, processed by a kernel and copied
// back (seed 001: H2D -> kernel -> D2H, sequential and overlapped on streams).
//
//   sequential  cudaMemcpy in, kernel on the legacy default stream, cudaMemcpy
//               out, batch after batch;
//   streams     batch b on stream b % N: cudaMemcpyAsync in, kernel,
//               cudaMemcpyAsync out; one device sync at the end. With
//               pageable memory the plain driver serialises most of this,
//               with pinned memory (or pinfast) copies overlap kernels.
// Input: --batches batches of --batch-bytes floats each (pageable by default,
// pinned with --pinned). Output is poisoned before every timed pass and
// compared with a CPU reference after it.
#include "common.cuh"

#include <cmath>

// A few dependent FMAs per element: cheap enough that the pipeline stays
// transfer-bound, enough that the kernel is not empty.
__host__ __device__ static inline float process(float x, int iters) {
    for (int i = 0; i < iters; i++) x = x * 0.999f + 0.5f;
    return x;
}

__global__ static void process_kernel(const float* in, float* out, uint64_t n, int iters) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = process(in[i], iters);
}

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t batch_bytes = a.get_size("--batch-bytes", 8ull << 20);
    int batches = (int)a.get_int("--batches", 32);
    int nstreams = (int)a.get_int("--streams", 4);
    int iters = (int)a.get_int("--kernel-iters", 16);
    int reps = (int)a.get_int("--reps", 3);
    a.done();
    if (batch_bytes % sizeof(float) || batches < 1 || nstreams < 1 || reps < 1)
        die_usage("--batch-bytes must be a multiple of 4; batches, streams, reps >= 1");

    init_device();
    Report r("pipeline", pinned);
    r.params().integer("batch_bytes", (long long)batch_bytes).integer("batches", batches)
        .integer("streams", nstreams).integer("kernel_iters", iters).integer("reps", reps);

    uint64_t n = batch_bytes / sizeof(float), total = batch_bytes * (uint64_t)batches;
    HostBuf in(total, pinned), out(total, pinned);
    float* hin = (float*)in.p;
    float* hout = (float*)out.p;
    std::vector<float> ref(n * batches);
    srand((unsigned)fresh_seed());
    for (uint64_t i = 0; i < n * batches; i++) {
        hin[i] = (float)(rand() % 100000) / 1000.0f;
        ref[i] = process(hin[i], iters);
    }

    // One device in/out pair per stream, reused by the batches of that stream.
    std::vector<cudaStream_t> st(nstreams);
    std::vector<float*> din(nstreams), dout(nstreams);
    for (int s = 0; s < nstreams; s++) {
        CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
        CK(cudaMalloc(&din[s], batch_bytes));
        CK(cudaMalloc(&dout[s], batch_bytes));
    }

    auto verify = [&](const char* what) {
        for (uint64_t i = 0; i < n * batches; i++)
            if (!(fabsf(hout[i] - ref[i]) <= 1e-4f * fabsf(ref[i]) + 1e-6f))
                die_mismatch("%s: element %" PRIu64 " is %g, expected %g", what, i, hout[i], ref[i]);
    };

    auto sequential = [&] {
        for (int b = 0; b < batches; b++) {
            CK(cudaMemcpy(din[0], hin + b * n, batch_bytes, cudaMemcpyHostToDevice));
            process_kernel<<<1024, 256>>>(din[0], dout[0], n, iters);
            CK_LAUNCH();
            CK(cudaMemcpy(hout + b * n, dout[0], batch_bytes, cudaMemcpyDeviceToHost));
        }
        CK(cudaDeviceSynchronize());
    };
    auto streamed = [&] {
        for (int b = 0; b < batches; b++) {
            int s = b % nstreams;
            CK(cudaMemcpyAsync(din[s], hin + b * n, batch_bytes, cudaMemcpyHostToDevice, st[s]));
            process_kernel<<<1024, 256, 0, st[s]>>>(din[s], dout[s], n, iters);
            CK_LAUNCH();
            CK(cudaMemcpyAsync(hout + b * n, dout[s], batch_bytes, cudaMemcpyDeviceToHost, st[s]));
        }
        for (int s = 0; s < nstreams; s++) CK(cudaStreamSynchronize(st[s]));
    };

    // Poison before each timed pass (outside the clock), verify after each.
    auto run = [&](const char* name, auto pass) {
        std::vector<double> t;
        for (int i = 0; i < reps + 1; i++) {  // the first pass is the warm-up
            memset(hout, POISON, total);
            double t0 = now_s();
            pass();
            double dt = now_s() - t0;
            if (i) t.push_back(dt);
            verify(name);
        }
        r.add(name, "both", 2 * total, stats_of(t), batches, "batches");
    };
    run("sequential", sequential);
    run("streams", streamed);

    for (int s = 0; s < nstreams; s++) {
        CK(cudaStreamDestroy(st[s]));
        CK(cudaFree(din[s]));
        CK(cudaFree(dout[s]));
    }
    r.print();
    return 0;
}
