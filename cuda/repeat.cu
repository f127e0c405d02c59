// repeat: one host buffer copied again and again each way, as a reused input
// or output buffer or offloaded weights are: --copies cudaMemcpy H2D of
// --bytes from it, then --copies D2H into it.  The copies from the third on
// are measured apart from the first two (under pinfast the second registers
// the buffer, docs/design.md), each direction with the process's CPU
// seconds per GiB over them.  The device side holds the source after the
// H2D copies, the host buffer the device's bytes after the D2H copies.
// Then `reuse_free`: --cycles times, a new buffer copied H2D --reuse times
// and freed, the copies and the free timed together: what registering a
// buffer that is not copied again costs (--reuse at pinfast's threshold).
#include "common.cuh"

#include <sys/resource.h>

static double cpu_s() {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t bytes = a.get_size("--bytes", 1ull << 30);
    int copies = (int)a.get_int("--copies", 10);
    int cycles = (int)a.get_int("--cycles", 5);
    int reuse = (int)a.get_int("--reuse", 2);
    a.done();
    if (cycles < 1 || reuse < 1) die_usage("need --cycles >= 1 and --reuse >= 1");
    if (copies < 3) die_usage("need --copies >= 3");

    init_device();
    Report r("repeat", pinned);
    r.params().integer("bytes", (long long)bytes).integer("copies", copies).integer("cycles", cycles).integer("reuse", reuse);
    DevBuf dev(bytes);
    HostBuf host(bytes, pinned);

    auto run = [&](const char* name, cudaMemcpyKind kind, auto copy) {
        std::vector<double> first, rest;
        double cpu0 = 0;
        for (int i = 0; i < copies; i++) {
            if (i == 2) cpu0 = cpu_s();
            double t0 = now_s();
            copy();
            (i < 2 ? first : rest).push_back(now_s() - t0);
        }
        double gib = (double)bytes * (copies - 2) / (1u << 30);
        r.add(name, dir_name(kind), bytes, stats_of(rest)).num("cpu_s_per_gib", (cpu_s() - cpu0) / gib);
        r.add((std::string(name) + "_first").c_str(), dir_name(kind), bytes, stats_of(first));
    };

    uint64_t seed = fresh_seed();
    fill_pattern(host.p, bytes, seed);
    run("h2d", cudaMemcpyHostToDevice, [&] { CK(cudaMemcpy(dev.p, host.p, bytes, cudaMemcpyHostToDevice)); });
    check_device_equals(dev.p, host.p, bytes, "h2d");

    seed = fresh_seed();
    fill_pattern_device(dev.p, bytes, seed);
    CK(cudaDeviceSynchronize());
    memset(host.p, POISON, bytes);
    run("d2h", cudaMemcpyDeviceToHost, [&] { CK(cudaMemcpy(host.p, dev.p, bytes, cudaMemcpyDeviceToHost)); });
    check_pattern(host.p, bytes, seed, 0, "d2h");
    host.release();

    std::vector<double> cycle;
    for (int c = 0; c < cycles; c++) {
        HostBuf buf(bytes, pinned);
        fill_pattern(buf.p, bytes, fresh_seed());
        double t = 0;
        for (int i = 0; i < reuse; i++) {
            CK(cudaMemset(dev.p, POISON, bytes));
            CK(cudaDeviceSynchronize());
            double t0 = now_s();
            CK(cudaMemcpy(dev.p, buf.p, bytes, cudaMemcpyHostToDevice));
            t += now_s() - t0;
            check_device_equals(dev.p, buf.p, bytes, "reuse_free");
        }
        double t0 = now_s();
        buf.release();
        cycle.push_back(t + now_s() - t0);
    }
    r.add("reuse_free", "H2D", bytes * (uint64_t)reuse, stats_of(cycle));
    r.print();
    return 0;
}
