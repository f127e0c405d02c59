// churn: pinned allocation churn. Every iteration does cudaMallocHost of
// --bytes (64 MiB), writes it, copies it to the device, checks the copy and
// cudaFreeHost's it; the time per iteration (alloc + copy + free, not the
// fill or the check) is the measurement. Plain CUDA pays the pinning cost
// every time (~36 ms per 64 MiB on the H100); a caching pool should not.
// There is no pinned variant: the program already uses pinned memory.
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    uint64_t bytes = a.get_size("--bytes", 64ull << 20);
    int iters = (int)a.get_int("--iters", 30);
    a.done();
    if (iters < 2) die_usage("--iters must be >= 2");

    init_device();
    Report r("churn", false);
    r.params().integer("bytes", (long long)bytes).integer("iters", iters);
    DevBuf dev(bytes);

    std::vector<double> t_alloc, t_copy, t_free, t_total;
    for (int i = 0; i < iters + 1; i++) {  // iteration 0 is the warm-up
        uint64_t seed = fresh_seed();
        double t0 = now_s();
        uint8_t* h;
        CK(cudaMallocHost((void**)&h, bytes));
        double t1 = now_s();
        fill_pattern(h, bytes, seed);  // not timed: the application's own work
        CK(cudaMemset(dev.p, POISON, bytes));
        CK(cudaDeviceSynchronize());
        double t2 = now_s();
        CK(cudaMemcpy(dev.p, h, bytes, cudaMemcpyHostToDevice));
        CK(cudaDeviceSynchronize());
        double t3 = now_s();
        check_device_equals(dev.p, h, bytes, "churn h2d");
        double t4 = now_s();
        CK(cudaFreeHost(h));
        double t5 = now_s();
        if (i == 0) continue;
        t_alloc.push_back(t1 - t0);
        t_copy.push_back(t3 - t2);
        t_free.push_back(t5 - t4);
        t_total.push_back((t1 - t0) + (t3 - t2) + (t5 - t4));
    }
    r.add("iteration", "H2D", bytes, stats_of(t_total), 1, "iterations");
    r.add("alloc", nullptr, 0, stats_of(t_alloc));
    r.add("copy", "H2D", bytes, stats_of(t_copy));
    r.add("free", nullptr, 0, stats_of(t_free));
    r.print();
    return 0;
}
