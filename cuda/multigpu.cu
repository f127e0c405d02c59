// multigpu: pageable host<->device bandwidth on every GPU at once.
//
// One worker per GPU (--gpus N, default every visible GPU): a host thread
// each, or with --procs a process each (this program again, exec'd with
// --child, cudaSetDevice to its GPU). Every worker has its own pageable
// (malloc'd; --pinned: cudaMallocHost) source and destination and a device
// buffer. For each size (--sizes, default 1M,64M,1G) and direction it times
//   single   GPU 0 copying alone while the others wait: the reference
//   all      every GPU copying at once
// Every timed repetition starts on all workers together (a barrier: a
// pthread barrier, or a pipe through the parent with --procs) and issues
// max(1, --batch / size) cudaMemcpy calls (H2D followed by a device sync), so
// that the skew of a barrier release is small against the repetition.
// Measurements (seconds per copy, medians over --reps):
//   single      GPU 0 alone, bytes = size
//   gpuK        GPU K during "all", bytes = size
//   all         aggregate, bytes = size x GPUs, time from the first worker's
//               start to the last one's end; "ratio_to_single" = its GB/s
//               over single's (GPUs x single / all time): 2.0 is perfect
//               scaling on two GPUs
//   peer        (threads, 2 GPUs or more) cudaMemcpyPeer of every GPU's
//               buffer to the next GPU at once, aggregate
// Checks, outside the clock: after each direction every worker copies once
// more into a poisoned destination, H2D checked by a device checksum of a
// fresh pattern, D2H byte by byte against a pattern a kernel wrote; the peer
// copies are read back (pageable D2H from the receiving GPU) and checked.
// A mismatch exits 2 (in --procs, the parent exits 2 when a child does).
#include "gpu_workers.cuh"

#include <memory>

namespace {

enum Kind { SINGLE, ALL, PEER };

// One step of the schedule: every worker walks the same list, so that they
// meet at the same barriers.
struct Phase {
    Kind kind;
    cudaMemcpyKind dir;  // SINGLE, ALL
    uint64_t bytes;      // per copy
    int copies;          // per repetition
};

struct Config {
    std::vector<uint64_t> sizes;
    uint64_t batch = 256ull << 20;
    int reps = 5;
    bool pinned = false;
    bool procs = false;
    int gpus = 0;
    uint64_t seed = 0;
    std::vector<Phase> phases;
};

// Start and end (host clock, seconds) of one timed repetition.

std::vector<Phase> schedule(const Config& c) {
    std::vector<Phase> ph;
    for (uint64_t n : c.sizes) {
        // at most 256 copies a repetition: a batch of 1-byte copies would
        // otherwise run for minutes
        int copies = (int)std::min<uint64_t>(256, std::max<uint64_t>(1, c.batch / n));
        for (cudaMemcpyKind d : {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost}) {
            ph.push_back({SINGLE, d, n, copies});
            ph.push_back({ALL, d, n, copies});
        }
        if (!c.procs && c.gpus > 1) ph.push_back({PEER, cudaMemcpyDefault, n, 1});
    }
    return ph;
}

// The seed of the pattern a worker's copy carries (the next worker must
// know it to check a peer copy).
uint64_t seed_of(const Config& c, int worker, uint64_t bytes, int what) {
    return splitmix64(c.seed ^ ((uint64_t)worker << 48) ^ (bytes << 2) ^ (uint64_t)what);
}

// Device buffers other workers copy into (peer step), published before the
// first barrier.
struct Shared {
    std::vector<uint8_t*> peer_in;
    std::vector<int> device;
};

void copy_reps(const Phase& p, uint8_t* host, uint8_t* dev, std::vector<Span>& out, Barrier& b,
               int reps, bool active) {
    for (int r = -1; r < reps; r++) {  // r = -1: the warm-up
        b.wait();
        double t0 = now_s();
        if (active) {
            for (int i = 0; i < p.copies; i++) {
                if (p.dir == cudaMemcpyHostToDevice) CK(cudaMemcpy(dev, host, p.bytes, p.dir));
                else CK(cudaMemcpy(host, dev, p.bytes, p.dir));
            }
            if (p.dir == cudaMemcpyHostToDevice) CK(cudaDeviceSynchronize());
        }
        if (r >= 0) out[r] = {t0, now_s()};
    }
}

// Prepares a direction's data before its first phase: the H2D source, or the
// device side of D2H (written by a kernel, so D2H does not rest on H2D).
void prepare(const Config& c, int k, const Phase& p, uint8_t* src, uint8_t* dev) {
    if (p.dir == cudaMemcpyHostToDevice) {
        fill_pattern(src, p.bytes, seed_of(c, k, p.bytes, 0));
    } else {
        fill_pattern_device(dev, p.bytes, seed_of(c, k, p.bytes, 1));
        CK(cudaDeviceSynchronize());
    }
}

// One more copy into a poisoned destination, checked.
void check(const Config& c, int k, const Phase& p, uint8_t* src, uint8_t* dst, uint8_t* dev) {
    char what[64];
    snprintf(what, sizeof what, "gpu%d %s %" PRIu64 " bytes", k, dir_name(p.dir), p.bytes);
    if (p.dir == cudaMemcpyHostToDevice) {
        CK(cudaMemset(dev, POISON, p.bytes));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(dev, src, p.bytes, p.dir));
        check_device_equals(dev, src, p.bytes, what);
    } else {
        memset(dst, POISON, p.bytes);
        CK(cudaMemcpy(dst, dev, p.bytes, p.dir));
        check_pattern(dst, p.bytes, seed_of(c, k, p.bytes, 1), 0, what);
    }
}

// Every worker sends its buffer to the next GPU at once; then each reads what
// it received back through a pageable D2H and checks it.
void peer_step(const Config& c, int k, const Phase& p, const Shared& sh, uint8_t* dst, uint8_t* dev,
               std::vector<Span>& out, Barrier& b) {
    int next = (k + 1) % c.gpus, prev = (k + c.gpus - 1) % c.gpus;
    fill_pattern_device(dev, p.bytes, seed_of(c, k, p.bytes, 2));
    CK(cudaMemset(sh.peer_in[k], POISON, p.bytes));
    CK(cudaDeviceSynchronize());
    for (int r = -1; r < c.reps; r++) {
        b.wait();
        double t0 = now_s();
        CK(cudaMemcpyPeer(sh.peer_in[next], sh.device[next], dev, sh.device[k], p.bytes));
        CK(cudaDeviceSynchronize());
        if (r >= 0) out[r] = {t0, now_s()};
    }
    b.wait();  // every GPU's copy into peer_in[k] is complete
    char what[64];
    snprintf(what, sizeof what, "peer gpu%d -> gpu%d %" PRIu64 " bytes", prev, k, p.bytes);
    memset(dst, POISON, p.bytes);
    CK(cudaMemcpy(dst, sh.peer_in[k], p.bytes, cudaMemcpyDeviceToHost));
    check_pattern(dst, p.bytes, seed_of(c, prev, p.bytes, 2), 0, what);
}

// The whole schedule for worker k on device dev; spans[phase][rep] filled.
void worker(const Config& c, int k, int dev, Shared* sh, Barrier& b,
            WorkerSpans& spans) {
    CK(cudaSetDevice(dev));
    CK(cudaFree(0));
    uint64_t max = *std::max_element(c.sizes.begin(), c.sizes.end());
    HostBuf src(max, c.pinned), dst(max, c.pinned);
    DevBuf d(max);
    std::unique_ptr<DevBuf> in;
    if (sh && c.gpus > 1) {
        for (int j = 0; j < c.gpus; j++) {
            int ok = 0;
            if (j != k) CK(cudaDeviceCanAccessPeer(&ok, dev, sh->device[j]));
            if (!ok) continue;  // cudaMemcpyPeer then goes through the host
            cudaError_t e = cudaDeviceEnablePeerAccess(sh->device[j], 0);
            if (e == cudaErrorPeerAccessAlreadyEnabled) (void)cudaGetLastError();  // clear it
            else CK(e);
        }
        in.reset(new DevBuf(max));
        sh->peer_in[k] = in->p;
    }
    spans.assign(c.phases.size(), std::vector<Span>(c.reps));
    for (size_t i = 0; i < c.phases.size(); i++) {
        const Phase& p = c.phases[i];
        if (p.kind == PEER) {
            peer_step(c, k, p, *sh, dst.p, d.p, spans[i], b);
            continue;
        }
        if (p.kind == SINGLE) prepare(c, k, p, src.p, d.p);
        copy_reps(p, p.dir == cudaMemcpyHostToDevice ? src.p : dst.p, d.p, spans[i], b, c.reps,
                  p.kind == ALL || k == 0);
        if (p.kind == ALL) check(c, k, p, src.p, dst.p, d.p);
    }
}

// ------------------------------------------------------------- results ---

std::string sizes_text(const Config& c) {
    std::string t;
    for (uint64_t n : c.sizes) t += (t.empty() ? "" : ",") + std::to_string(n);
    return t;
}

void report(const Config& c, const Spans& s) {
    Report r("multigpu", c.pinned);
    bool peer = false;
    r.params().integer("gpus", c.gpus).str("workers", c.procs ? "procs" : "threads")
        .str("sizes", sizes_text(c))
        .integer("batch", (long long)c.batch).integer("reps", c.reps);
    double single = 0;
    for (size_t i = 0; i < c.phases.size(); i++) {
        const Phase& p = c.phases[i];
        if (p.kind == SINGLE) {
            Stats st = per_copy(s[0][i], p.copies);
            single = st.median;
            r.add("single", dir_name(p.dir), p.bytes, st);
        } else if (p.kind == ALL) {
            for (int k = 0; k < c.gpus; k++)
                r.add(("gpu" + std::to_string(k)).c_str(), dir_name(p.dir), p.bytes,
                      per_copy(s[k][i], p.copies));
            Stats st = aggregate(s, i, p.copies);
            r.add("all", dir_name(p.dir), p.bytes * c.gpus, st)
                .num("ratio_to_single", st.median > 0 ? c.gpus * single / st.median : 0);
        } else {
            peer = true;
            r.add("peer", "D2D", p.bytes * c.gpus, aggregate(s, i, 1));
        }
    }
    r.params().boolean("peer", peer);
    r.print();
}

// ----------------------------------------------------------- processes ---

// A child of --procs (gpu_workers.cuh): worker k with the parent's pipe barrier.
int child_main(const Config& c, int k, int up, int down, int spans_fd) {
    return workers_child("multigpu", up, down, spans_fd,
                         [&](Barrier& b, WorkerSpans& spans) { worker(c, k, k, nullptr, b, spans); });
}

// The command line of child k: this program again, the configuration
// spelled out.
std::vector<std::string> child_args(const Config& c, const char* argv0, int k, int up, int down,
                                    int spans) {
    std::vector<std::string> a = {argv0, "--procs", "--child", std::to_string(k),
                                  "--up", std::to_string(up), "--down", std::to_string(down),
                                  "--spans", std::to_string(spans), "--sizes", sizes_text(c),
                                  "--batch", std::to_string(c.batch), "--reps", std::to_string(c.reps),
                                  "--gpus", std::to_string(c.gpus), "--seed", std::to_string(c.seed)};
    if (c.pinned) a.push_back("--pinned");
    return a;
}

// The parent of --procs: a process per GPU (gpu_workers.cuh).
int parent_main(const Config& c, const char* argv0) {
    report(c, workers_procs("multigpu", c.gpus, c.phases.size(), c.reps,
                            [&](int k, int up, int down, int spans) {
                                return child_args(c, argv0, k, up, down, spans);
                            }));
    return 0;
}

// A thread per GPU (gpu_workers.cuh).
int threads_main(const Config& c) {
    Shared sh;
    sh.peer_in.assign(c.gpus, nullptr);
    for (int k = 0; k < c.gpus; k++) sh.device.push_back(k);
    report(c, workers_threads(c.gpus, [&](int k, Barrier& b, WorkerSpans& spans) {
               worker(c, k, k, &sh, b, spans);
           }));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args a(argc, argv);
    Config c;
    c.pinned = a.flag("--pinned");
    c.procs = a.flag("--procs");
    c.sizes = a.get_sizes("--sizes", {1ull << 20, 64ull << 20, 1ull << 30});
    c.batch = a.get_size("--batch", c.batch);
    c.reps = (int)a.get_int("--reps", c.reps);
    c.gpus = (int)a.get_int("--gpus", 0);
    c.seed = (uint64_t)a.get_int("--seed", 0);
    // set by the parent of --procs for its children
    int child = (int)a.get_int("--child", -1);
    int up = (int)a.get_int("--up", -1), down = (int)a.get_int("--down", -1);
    int spans = (int)a.get_int("--spans", -1);
    a.done();
    if (c.reps < 1) die_usage("--reps must be >= 1");
    if (child >= 0) {
        c.phases = schedule(c);
        return child_main(c, child, up, down, spans);
    }
    int n;
    CK(cudaGetDeviceCount(&n));
    if (c.gpus == 0) c.gpus = n;
    if (c.gpus < 1 || c.gpus > n) die_usage("--gpus %d, but %d GPU(s) visible", c.gpus, n);
    if (!c.seed) c.seed = fresh_seed() >> 1;  // --seed is parsed as a signed long
    c.phases = schedule(c);
    // the children exec: they share no CUDA state with this process
    return c.procs ? parent_main(c, argv[0]) : threads_main(c);
}
