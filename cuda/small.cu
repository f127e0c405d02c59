// small: many tiny copies (4 B .. 4 KiB), where staging can only add cost.
// For each size and direction it times --count back-to-back cudaMemcpy calls
// (plus cudaMemcpyAsync + stream sync) and reports seconds per copy and
// copies/s. pinfast must not slow these down. Pageable by default,
// cudaMallocHost with --pinned.
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    std::vector<uint64_t> sizes = a.get_sizes("--sizes", {4, 64, 512, 4096});
    int count = (int)a.get_int("--count", 2000);
    int reps = (int)a.get_int("--reps", 5);
    a.done();

    init_device();
    Report r("small", pinned);
    r.params().integer("count", count).integer("reps", reps);
    uint64_t max = *std::max_element(sizes.begin(), sizes.end());
    // Each copy goes to its own slot so that a copy landing in the wrong
    // place, or not at all, shows up in the check.
    HostBuf src(max * count, pinned), dst(max * count, pinned);
    DevBuf dev(max * count);
    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    for (uint64_t n : sizes) {
        for (int async = 0; async < 2; async++) {
            uint64_t seed = fresh_seed();
            fill_pattern(src.p, n * count, seed);
            auto h2d = [&] {
                for (int i = 0; i < count; i++) {
                    if (async) CK(cudaMemcpyAsync(dev.p + i * n, src.p + i * n, n, cudaMemcpyHostToDevice, st));
                    else CK(cudaMemcpy(dev.p + i * n, src.p + i * n, n, cudaMemcpyHostToDevice));
                }
                CK(cudaDeviceSynchronize());
            };
            // Async copies are synchronised once per batch of `count`, the
            // way a program issues many small async copies.
            auto d2h = [&] {
                for (int i = 0; i < count; i++) {
                    if (async) CK(cudaMemcpyAsync(dst.p + i * n, dev.p + i * n, n, cudaMemcpyDeviceToHost, st));
                    else CK(cudaMemcpy(dst.p + i * n, dev.p + i * n, n, cudaMemcpyDeviceToHost));
                }
                CK(cudaStreamSynchronize(st));
            };
            const char* tag = async ? "async" : "sync";
            std::string hn = std::string("h2d_") + tag, dn = std::string("d2h_") + tag;

            // Timed passes first, then one more pass into poisoned memory
            // that is checked (the timed passes rewrite the same bytes).
            Stats s = time_reps(1, reps, h2d);
            CK(cudaMemset(dev.p, POISON, n * count));
            CK(cudaDeviceSynchronize());  // `st` is non-blocking: no implicit order
            h2d();
            check_device_equals(dev.p, src.p, n * count, hn.c_str());
            Stats per = s;  // per-copy times
            per.median /= count, per.min /= count, per.max /= count;
            r.add(hn.c_str(), "H2D", n, per, 1, "copies");

            s = time_reps(1, reps, d2h);
            memset(dst.p, POISON, n * count);
            d2h();
            check_pattern(dst.p, n * count, seed, 0, dn.c_str());
            per = s;
            per.median /= count, per.min /= count, per.max /= count;
            r.add(dn.c_str(), "D2H", n, per, 1, "copies");
        }
    }
    CK(cudaStreamDestroy(st));
    r.print();
    return 0;
}
