// loader: what a DataLoader-fed training loop does, in C++: --producers
// threads each build batches (CPU work on every element) into a ring of
// host buffers, and the main thread copies each ready batch to the GPU with
// its labels (--batch-bytes of floats and a 1 KiB label block: two
// cudaMemcpyAsync on one stream, as .to('cuda') twice), runs a kernel on it
// and hands the buffer back once the stream has read it. Pageable buffers by
// default, pinned (cudaMallocHost) with --pinned.
// Measurement `batch` (seconds per batch, median of --reps passes over
// --batches) with `rate` in batches/s. The kernel folds every batch into a
// per-batch checksum on the device, checked against the producers' own.
#include "common.cuh"

#include <condition_variable>
#include <mutex>
#include <thread>

static const uint64_t LABEL_BYTES = 1024;

__host__ __device__ static inline float make(uint64_t seed, uint64_t i) {
    float x = (float)(splitmix64(seed + i) % 1000) / 1000.0f;
    for (int k = 0; k < 8; k++) x = x * 0.75f + 0.125f;  // the per-sample work
    return x;
}

// Sums the batch (floats and labels) into sums[b], exactly: values are
// rounded to multiples of 1/1024 first.
__global__ static void fold(const float* x, uint64_t n, const uint32_t* labels, unsigned long long* sums, int b) {
    unsigned long long s = 0;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        s += (unsigned long long)(x[i] * 1024.0f);
    if (blockIdx.x == 0 && threadIdx.x < LABEL_BYTES / 4) s += labels[threadIdx.x];
    atomicAdd(&sums[b], s);
}

struct Slot {
    HostBuf data, labels;
    int batch = -1;          // the batch it holds, -1: free
    unsigned long long sum = 0;
    cudaEvent_t read;        // the stream has read it (pinned: the copies are asynchronous)
};

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t batch_bytes = a.get_size("--batch-bytes", 4ull << 20);
    int batches = (int)a.get_int("--batches", 400);
    int producers = (int)a.get_int("--producers", 6);
    int ring = (int)a.get_int("--ring", 8);
    int reps = (int)a.get_int("--reps", 3);
    a.done();
    if (batch_bytes % 4 || batches < 1 || producers < 1 || ring < 2 || reps < 1)
        die_usage("--batch-bytes a multiple of 4; batches, producers, reps >= 1; ring >= 2");
    init_device();
    Report r("loader", pinned);
    r.params().integer("batch_bytes", (long long)batch_bytes).integer("batches", batches)
        .integer("producers", producers).integer("ring", ring).integer("reps", reps);
    uint64_t n = batch_bytes / 4;
    std::vector<Slot> slots(ring);
    for (auto& s : slots) {
        s.data.alloc(batch_bytes, pinned);
        s.labels.alloc(LABEL_BYTES, pinned);
        CK(cudaEventCreateWithFlags(&s.read, cudaEventDisableTiming));
    }
    DevBuf dx(batch_bytes), dl(LABEL_BYTES), dsums(sizeof(unsigned long long) * batches);
    std::vector<unsigned long long> want(batches), got(batches);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint64_t seed = fresh_seed();

    auto pass = [&]() {
        std::mutex m;
        std::condition_variable cv;
        int next = 0;  // the next batch a producer builds
        for (auto& s : slots) s.batch = -1;
        CK(cudaMemsetAsync(dsums.p, 0, dsums.n, st));
        auto produce = [&]() {
            for (;;) {
                std::unique_lock<std::mutex> l(m);
                Slot* s = nullptr;
                cv.wait(l, [&] {
                    if (next >= batches) return true;
                    for (auto& c : slots)
                        if (c.batch == -1) { s = &c; return true; }
                    return false;
                });
                if (next >= batches) return;
                int b = next++;
                s->batch = -2 - b;  // being built
                l.unlock();
                float* x = (float*)s->data.p;
                unsigned long long sum = 0;
                for (uint64_t i = 0; i < n; i++) {
                    x[i] = make(seed + (uint64_t)b * n, i);
                    sum += (unsigned long long)(x[i] * 1024.0f);
                }
                uint32_t* lab = (uint32_t*)s->labels.p;
                for (uint64_t i = 0; i < LABEL_BYTES / 4; i++) sum += lab[i] = (uint32_t)((b + i) % 10);
                l.lock();
                s->sum = sum;
                s->batch = b;
                cv.notify_all();
            }
        };
        std::vector<std::thread> ps;
        for (int i = 0; i < producers; i++) ps.emplace_back(produce);
        for (int b = 0; b < batches; b++) {
            Slot* s = nullptr;
            {
                std::unique_lock<std::mutex> l(m);
                cv.wait(l, [&] {
                    for (auto& c : slots)
                        if (c.batch == b) { s = &c; return true; }
                    return false;
                });
            }
            want[b] = s->sum;
            CK(cudaMemcpyAsync(dx.p, s->data.p, batch_bytes, cudaMemcpyHostToDevice, st));
            CK(cudaMemcpyAsync(dl.p, s->labels.p, LABEL_BYTES, cudaMemcpyHostToDevice, st));
            fold<<<264, 256, 0, st>>>((const float*)dx.p, n, (const uint32_t*)dl.p, (unsigned long long*)dsums.p, b);
            CK(cudaGetLastError());
            CK(cudaEventRecord(s->read, st));
            CK(cudaEventSynchronize(s->read));  // the buffer goes back once read
            std::lock_guard<std::mutex> l(m);
            s->batch = -1;
            cv.notify_all();
        }
        for (auto& t : ps) t.join();
        CK(cudaStreamSynchronize(st));
    };
    Stats s = time_reps(1, reps, [&] {
        pass();
        CK(cudaMemcpy(got.data(), dsums.p, dsums.n, cudaMemcpyDeviceToHost));
        for (int b = 0; b < batches; b++)
            if (got[b] != want[b]) {
                fprintf(stderr, "MISMATCH: batch %d: device sum %llu, host %llu\n", b, got[b], want[b]);
                exit(2);
            }
    });
    Stats per = s;
    per.median /= batches, per.min /= batches, per.max /= batches;
    r.add("batch", "H2D", batch_bytes + LABEL_BYTES, per, 1, "batches");
    r.print();
    for (auto& sl : slots) CK(cudaEventDestroy(sl.read));
    CK(cudaStreamDestroy(st));
    return 0;
}
