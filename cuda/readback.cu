// readback: a large device array read back to the host (seed 003: CuPy's
// asnumpy of a big result), whole and in sub-regions.
//   whole        one cudaMemcpy D2H of --bytes into a preallocated buffer;
//   whole_fresh  the same into never-touched memory mapped just before
//                (pageable only);
//   slices       --slices equal consecutive cudaMemcpy's covering the array;
//   strided      every other slice, at an odd byte offset (unaligned
//                sub-regions, as a program reading a window would);
// The device array is filled by a kernel with a per-run pattern; every
// destination is poisoned and checked after the timed repetitions.
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t bytes = a.get_size("--bytes", 1ull << 30);
    int slices = (int)a.get_int("--slices", 64);
    int reps = (int)a.get_int("--reps", 7); // 3 left 1 GiB medians at the mercy of one slow repetition
    a.done();
    if (slices < 2 || bytes / slices < 16) die_usage("need --slices >= 2 and slices of >= 16 bytes");

    init_device();
    Report r("readback", pinned);
    r.params().integer("bytes", (long long)bytes).integer("slices", slices).integer("reps", reps);

    DevBuf dev(bytes);
    HostBuf host(bytes, pinned);
    uint64_t seed = fresh_seed();
    fill_pattern_device(dev.p, bytes, seed);
    CK(cudaDeviceSynchronize());

    auto measure = [&](const char* name, uint64_t moved, auto copy, auto check) {
        Stats s = time_reps(1, reps, copy);
        memset(host.p, POISON, bytes);
        copy();
        check();
        r.add(name, "D2H", moved, s);
    };

    measure("whole", bytes,
            [&] { CK(cudaMemcpy(host.p, dev.p, bytes, cudaMemcpyDeviceToHost)); },
            [&] { check_pattern(host.p, bytes, seed, 0, "whole"); });

    uint64_t slice = bytes / slices;
    measure("slices", slice * slices,
            [&] {
                for (int i = 0; i < slices; i++)
                    CK(cudaMemcpy(host.p + i * slice, dev.p + i * slice, slice, cudaMemcpyDeviceToHost));
            },
            [&] { check_pattern(host.p, slice * slices, seed, 0, "slices"); });

    // Odd offsets on both sides and a length that is not a multiple of 8.
    uint64_t win = slice - 9;
    auto off = [&](int i) { return (uint64_t)i * slice + 3; };
    measure("strided", win * ((slices + 1) / 2),
            [&] {
                for (int i = 0; i < slices; i += 2)
                    CK(cudaMemcpy(host.p + off(i), dev.p + off(i), win, cudaMemcpyDeviceToHost));
            },
            [&] {
                for (int i = 0; i < slices; i += 2) {
                    check_pattern(host.p + off(i), win, seed, off(i), "strided");
                    // The bytes between windows must stay untouched.
                    uint64_t gap_end = i + 2 < slices ? off(i + 2) : bytes;
                    for (uint64_t j = off(i) + win; j < gap_end; j++)
                        if (host.p[j] != POISON) die_mismatch("strided: byte %" PRIu64 " outside the windows was written", j);
                }
            });

    if (!pinned) {
        std::vector<double> t;
        for (int i = 0; i < reps; i++) {
            FreshBuf fresh(bytes);
            double t0 = now_s();
            CK(cudaMemcpy(fresh.p, dev.p, bytes, cudaMemcpyDeviceToHost));
            t.push_back(now_s() - t0);
            check_pattern(fresh.p, bytes, seed, 0, "whole_fresh");
        }
        r.add("whole_fresh", "D2H", bytes, stats_of(t));
    }
    r.print();
    return 0;
}
