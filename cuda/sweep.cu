// sweep: host<->device bandwidth against size.
//
// For each size (powers of 4 from --min-size to --max-size) it times
//   h2d_sync   cudaMemcpy H2D
//   h2d_async  cudaMemcpyAsync H2D on a stream + cudaStreamSynchronize
//   d2h_sync   cudaMemcpy D2H
//   d2h_async  cudaMemcpyAsync D2H on a stream + cudaStreamSynchronize
//   d2h_fresh  cudaMemcpy D2H into memory mapped right before and never
//              touched (what PyTorch's .cpu() does: page faults on the
//              destination are part of the cost); pageable mode only.
// Host buffers are pageable (malloc) by default, pinned with --pinned.
// After the timed repetitions of each kind one more copy goes into a poisoned
// destination and is checked (pattern for D2H, device checksum for H2D).
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t min_size = a.get_size("--min-size", 4096);
    uint64_t max_size = a.get_size("--max-size", 1ull << 30);
    int step = (int)a.get_int("--step", 4);  // size multiplier between points
    // Each size gets about --budget bytes of timed copies per kind, clamped.
    uint64_t budget = a.get_size("--budget", 512ull << 20);
    int min_reps = (int)a.get_int("--min-reps", 3);
    int max_reps = (int)a.get_int("--max-reps", 100);
    a.done();
    if (step < 2) die_usage("--step must be >= 2");

    init_device();
    Report r("sweep", pinned);
    r.params().integer("min_size", (long long)min_size).integer("max_size", (long long)max_size)
        .integer("step", step).integer("budget", (long long)budget)
        .integer("min_reps", min_reps).integer("max_reps", max_reps);

    cudaStream_t st;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    HostBuf src(max_size, pinned), dst(max_size, pinned);
    DevBuf dev(max_size);

    for (uint64_t n = min_size; n <= max_size; n *= step) {
        int reps = reps_for(n, budget, min_reps, max_reps);
        uint64_t seed = fresh_seed();
        fill_pattern(src.p, n, seed);

        for (int async = 0; async < 2; async++) {
            Stats s = time_reps(1, reps, [&] {
                if (async) {
                    CK(cudaMemcpyAsync(dev.p, src.p, n, cudaMemcpyHostToDevice, st));
                    CK(cudaStreamSynchronize(st));
                } else {
                    CK(cudaMemcpy(dev.p, src.p, n, cudaMemcpyHostToDevice));
                    CK(cudaDeviceSynchronize());
                }
            });
            r.add(async ? "h2d_async" : "h2d_sync", "H2D", n, s);
            CK(cudaMemset(dev.p, POISON, n));
            CK(cudaDeviceSynchronize());
            if (async) {
                CK(cudaMemcpyAsync(dev.p, src.p, n, cudaMemcpyHostToDevice, st));
                CK(cudaStreamSynchronize(st));
            } else {
                CK(cudaMemcpy(dev.p, src.p, n, cudaMemcpyHostToDevice));
            }
            check_device_equals(dev.p, src.p, n, async ? "h2d_async" : "h2d_sync");
        }

        // The device side of D2H gets its own pattern, written by a kernel,
        // so D2H correctness does not depend on the H2D path.
        seed = fresh_seed();
        fill_pattern_device(dev.p, n, seed);
        CK(cudaDeviceSynchronize());
        for (int async = 0; async < 2; async++) {
            auto copy = [&] {
                if (async) {
                    CK(cudaMemcpyAsync(dst.p, dev.p, n, cudaMemcpyDeviceToHost, st));
                    CK(cudaStreamSynchronize(st));
                } else {
                    CK(cudaMemcpy(dst.p, dev.p, n, cudaMemcpyDeviceToHost));
                }
            };
            Stats s = time_reps(1, reps, copy);
            r.add(async ? "d2h_async" : "d2h_sync", "D2H", n, s);
            memset(dst.p, POISON, n);
            copy();
            check_pattern(dst.p, n, seed, 0, async ? "d2h_async" : "d2h_sync");
        }

        if (!pinned) {
            // Fresh destination each time: mapped, never touched, copy,
            // check (outside the clock), unmapped. Every page faults during
            // the copy, as with a new tensor.
            std::vector<double> t;
            for (int i = 0; i < reps; i++) {
                FreshBuf fresh(n);
                double t0 = now_s();
                CK(cudaMemcpy(fresh.p, dev.p, n, cudaMemcpyDeviceToHost));
                t.push_back(now_s() - t0);
                if (i == reps - 1) check_pattern(fresh.p, n, seed, 0, "d2h_fresh");
            }
            r.add("d2h_fresh", "D2H", n, stats_of(t));
        }
        if (n > max_size / step) break;  // avoid overflow past max_size
    }

    CK(cudaStreamDestroy(st));
    r.print();
    return 0;
}
