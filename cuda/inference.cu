// inference: a frame-serving loop (seed 002). For every batch the CPU prepares
// the input (fills --batch frames of 3x224x224 uint8 pixels), the GPU
// normalises it to floats and runs a "model", and the per-frame outputs
// (1000 float logits) come back to the host.
//
// The model is a per-element loop of --small-iters / --large-iters dependent
// FMAs followed by a strided sum per logit: a small model leaves the loop
// transfer-bound (where pinfast should help), a large one compute-bound
// (where it must not hurt). Two schedules:
//   sync     cudaMemcpy in, kernels, cudaMemcpy out, one batch at a time;
//   overlap  two slots on two streams: the CPU fills batch b+1 while the GPU
//            works on batch b (cudaMemcpyAsync both ways).
// One frame of every batch is kept aside and checked against a CPU reference
// after the timed loop; output buffers are poisoned before each pass.
#include "common.cuh"

#include <cmath>

static const int C = 3, H = 224, W = 224, PIXELS = C * H * W, CLASSES = 1000;

__host__ __device__ static inline float normalise(uint8_t v, int channel) {
    const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
    return ((float)v / 255.0f - mean[channel]) / stdv[channel];
}

__host__ __device__ static inline float activation(float x, int iters) {
    for (int i = 0; i < iters; i++) x = x * 0.99f + 0.01f;
    return x;
}

// Logit c of a frame sums activation() over pixels c, c+CLASSES, ... in that
// order, the same order as the CPU reference, so results agree closely.
__host__ __device__ static inline float logit(const float* frame, int c, int iters) {
    float s = 0;
    for (int p = c; p < PIXELS; p += CLASSES) s += activation(frame[p], iters);
    return s;
}

__global__ static void normalise_kernel(const uint8_t* in, float* out, uint64_t n) {
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = normalise(in[i], (int)((i % PIXELS) / (H * W)));
}

__global__ static void model_kernel(const float* x, float* logits, int frames, int iters) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= frames * CLASSES) return;
    int f = t / CLASSES, c = t % CLASSES;
    logits[t] = logit(x + (uint64_t)f * PIXELS, c, iters);
}

struct Slot {
    HostBuf in, out;
    uint8_t *din;
    float *dnorm, *dout;
    cudaStream_t st;
};

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    int batch = (int)a.get_int("--batch", 64);
    int batches = (int)a.get_int("--batches", 20);
    int reps = (int)a.get_int("--reps", 3);
    int small_iters = (int)a.get_int("--small-iters", 1);
    int large_iters = (int)a.get_int("--large-iters", 256);
    a.done();
    if (batch < 1 || batches < 1 || reps < 1) die_usage("batch, batches, reps must be >= 1");

    init_device();
    Report r("inference", pinned);
    r.params().integer("batch", batch).integer("batches", batches).integer("reps", reps)
        .integer("small_iters", small_iters).integer("large_iters", large_iters)
        .integer("frame_bytes", PIXELS);

    uint64_t in_bytes = (uint64_t)batch * PIXELS, out_bytes = (uint64_t)batch * CLASSES * sizeof(float);
    Slot slot[2];
    for (Slot& s : slot) {
        s.in.alloc(in_bytes, pinned);
        s.out.alloc(out_bytes, pinned);
        CK(cudaMalloc(&s.din, in_bytes));
        CK(cudaMalloc(&s.dnorm, in_bytes * sizeof(float)));
        CK(cudaMalloc(&s.dout, out_bytes));
        CK(cudaStreamCreateWithFlags(&s.st, cudaStreamNonBlocking));
    }
    // Per batch: one input frame and its logits, kept for the check.
    std::vector<uint8_t> kept_in((uint64_t)batches * PIXELS);
    std::vector<float> kept_out((uint64_t)batches * CLASSES);
    uint64_t seed = fresh_seed();

    // "Preprocessing": the CPU writes every byte of the batch, as a decoder
    // or augmentation step would.
    // The CPU's share of a pass, timed apart: no copy path can speed a loop
    // past pass / (pass - copies), and a copy path must not slow this part.
    double prepare_s = 0;
    auto prepare = [&](Slot& s, int b) {
        double t0 = now_s();
        fill_pattern(s.in.p, in_bytes, seed + (uint64_t)b * in_bytes);
        prepare_s += now_s() - t0;
    };
    auto launch = [&](Slot& s, cudaStream_t st) {
        normalise_kernel<<<1024, 256, 0, st>>>(s.din, s.dnorm, in_bytes);
        CK_LAUNCH();
    };
    auto keep = [&](Slot& s, int b) {
        int f = b % batch;  // a different frame of each batch
        memcpy(&kept_in[(uint64_t)b * PIXELS], s.in.p + (uint64_t)f * PIXELS, PIXELS);
        memcpy(&kept_out[(uint64_t)b * CLASSES], s.out.p + (uint64_t)f * CLASSES * sizeof(float),
               CLASSES * sizeof(float));
    };
    auto model = [&](Slot& s, cudaStream_t st, int iters) {
        launch(s, st);
        model_kernel<<<(batch * CLASSES + 255) / 256, 256, 0, st>>>(s.dnorm, s.dout, batch, iters);
        CK_LAUNCH();
    };

    auto sync_pass = [&](int iters) {
        for (int b = 0; b < batches; b++) {
            Slot& s = slot[0];
            prepare(s, b);
            CK(cudaMemcpy(s.din, s.in.p, in_bytes, cudaMemcpyHostToDevice));
            model(s, 0, iters);
            CK(cudaMemcpy(s.out.p, s.dout, out_bytes, cudaMemcpyDeviceToHost));
            keep(s, b);
        }
    };
    auto overlap_pass = [&](int iters) {
        for (int b = 0; b < batches + 1; b++) {
            // Finish batch b-1 (its slot) while batch b is being prepared.
            if (b < batches) {
                Slot& s = slot[b % 2];
                prepare(s, b);
                CK(cudaMemcpyAsync(s.din, s.in.p, in_bytes, cudaMemcpyHostToDevice, s.st));
                model(s, s.st, iters);
                CK(cudaMemcpyAsync(s.out.p, s.dout, out_bytes, cudaMemcpyDeviceToHost, s.st));
            }
            if (b > 0) {
                Slot& p = slot[(b - 1) % 2];
                CK(cudaStreamSynchronize(p.st));
                keep(p, b - 1);
            }
        }
    };

    auto verify = [&](const char* what, int iters) {
        std::vector<float> norm(PIXELS);
        for (int b = 0; b < batches; b++) {
            for (int p = 0; p < PIXELS; p++) norm[p] = normalise(kept_in[(uint64_t)b * PIXELS + p], p / (H * W));
            // A large model costs the CPU too much to check every logit.
            int stride = iters > 16 ? 8 : 1;
            for (int c = b % stride; c < CLASSES; c += stride) {
                float want = logit(norm.data(), c, iters), got = kept_out[(uint64_t)b * CLASSES + c];
                if (!(fabsf(got - want) <= 1e-3f * fabsf(want) + 1e-2f))
                    die_mismatch("%s: batch %d logit %d is %g, expected %g", what, b, c, got, want);
            }
        }
    };

    struct Case { const char* name; bool overlap; int iters; };
    const Case cases[] = {{"small_sync", false, small_iters}, {"small_overlap", true, small_iters},
                          {"large_sync", false, large_iters}, {"large_overlap", true, large_iters}};
    for (const Case& k : cases) {
        std::vector<double> t, tp;
        for (int i = 0; i < reps + 1; i++) {  // pass 0 is the warm-up
            for (Slot& s : slot) memset(s.out.p, POISON, out_bytes);
            std::fill(kept_out.begin(), kept_out.end(), NAN);
            prepare_s = 0;
            double t0 = now_s();
            if (k.overlap) overlap_pass(k.iters);
            else sync_pass(k.iters);
            CK(cudaDeviceSynchronize());
            if (i) {
                t.push_back(now_s() - t0);
                tp.push_back(prepare_s);
            }
            verify(k.name, k.iters);
        }
        // bytes: what one pass moves (inputs in, logits out).
        r.add(k.name, "both", (in_bytes + out_bytes) * batches, stats_of(t), (double)batch * batches, "frames");
        // the same pass's CPU preparation alone: bytes filled, frames prepared
        r.add((std::string(k.name) + "_prepare").c_str(), "cpu", in_bytes * batches, stats_of(tp),
              (double)batch * batches, "frames");
    }

    for (Slot& s : slot) {
        CK(cudaFree(s.din));
        CK(cudaFree(s.dnorm));
        CK(cudaFree(s.dout));
        CK(cudaStreamDestroy(s.st));
    }
    r.print();
    return 0;
}
