// node: a node of GPUs copying at once, from buffers new at each copy and
// from the same buffer each copy.
//
// One worker per GPU (--gpus N, default every visible GPU): a host thread
// each, or with --procs a process each (this program again, exec'd with
// --child, cudaSetDevice to its GPU), as torchrun or mpirun start a rank per
// GPU. For each size (--sizes, default 1M,256M,1G), direction (H2D, D2H)
// and kind of host buffer (repeated, then new; --no-repeated, --no-new
// leave one out) every worker
// times repetitions that all start together (a barrier: a pthread barrier,
// or a pipe through the parent with --procs), each of max(1, --batch / size)
// cudaMemcpy calls (at most 256; H2D followed by a device sync), copy i to
// or from offset i x size of the worker's device buffer:
//   repeated  one pageable buffer (malloc'd and touched once), the same
//             for every copy: what the registration cache is for
//   new       before each repetition, outside the clock, a malloc'd buffer
//             per copy, touched (written whole; the last repetition's H2D
//             sources with the data checked), freed after it: the program's new
//             arrays, a fresh batch (small sizes may come from the heap's
//             free lists, as a program's do)
// --pinned: cudaMallocHost memory by hand instead, allocated once, for both
// kinds (a program that pins by hand pins once), still touched before each
// repetition for "new". --warmup untimed repetitions come first (default 1;
// --warmup-repeated, default 2, for the same buffer, whose registration
// pinfast makes after its second copy).
// Measurements (seconds per copy, medians over --reps repetitions):
//   <kind>_gpuK  GPU K, bytes = size
//   <kind>_sum   the GPUs' rates added up, each over its own repetition:
//                bytes = size x GPUs, seconds = bytes / summed rate
//   <kind>_all   aggregate, bytes = size x GPUs, from the first worker's
//                start to the last one's end
// Checks, outside the clock, on the last repetition: every H2D copy against
// a device checksum of its host buffer (fresh data each repetition), every
// D2H copy byte by byte against the pattern a kernel wrote. A mismatch exits
// 2 (in --procs, the parent exits 2 when a child does, and kills the others).
#include "gpu_workers.cuh"

namespace {

enum Kind { REPEATED, NEW };
const char* kind_name(Kind k) { return k == NEW ? "new" : "repeated"; }

// One step of the schedule: every worker walks the same list, so that they
// meet at the same barriers.
struct Phase {
    cudaMemcpyKind dir;
    Kind kind;
    uint64_t bytes;  // per copy
    int copies;      // per repetition
    int warmup;      // untimed repetitions first
};

struct Config {
    std::vector<uint64_t> sizes;
    std::vector<Kind> kinds = {REPEATED, NEW};
    uint64_t batch = 256ull << 20;
    int reps = 3, warmup = 1, warmup_repeated = 2;
    bool pinned = false, procs = false;
    int gpus = 0;
    uint64_t seed = 0;
    std::vector<Phase> phases;
};

std::vector<Phase> schedule(const Config& c) {
    std::vector<Phase> ph;
    for (uint64_t n : c.sizes) {
        int copies = (int)std::min<uint64_t>(256, std::max<uint64_t>(1, c.batch / n));
        for (cudaMemcpyKind d : {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost})
            for (Kind k : c.kinds)
                ph.push_back({d, k, n, copies, k == REPEATED ? c.warmup_repeated : c.warmup});
    }
    return ph;
}

// The largest span of host or device memory one repetition uses.
uint64_t largest(const Config& c) {
    uint64_t m = 0;
    for (const Phase& p : c.phases) m = std::max(m, p.bytes * (uint64_t)p.copies);
    return m;
}

// The seed of a worker's data for one phase and repetition.
uint64_t seed_of(const Config& c, int worker, size_t phase, int rep) {
    return splitmix64(c.seed ^ ((uint64_t)worker << 56) ^ ((uint64_t)phase << 24) ^ (uint64_t)(rep + 16));
}

// The host side of one phase's repetition: a buffer per copy.
struct HostSide {
    std::vector<uint8_t*> buf;
    bool owned = false;  // malloc'd for this repetition (new, pageable)

    void release() {
        if (owned)
            for (uint8_t* p : buf) free(p);
        buf.clear();
        owned = false;
    }
};

// Sets up the host buffers of one repetition of phase p (index i) for
// worker k: the new ones malloc'd, and each touched as the kind says; the
// same buffer is written at the first repetition only, and a D2H
// destination poisoned again before the last (checked) one.
void prepare(const Config& c, int k, size_t i, const Phase& p, int rep, uint8_t* area, HostSide& h) {
    h.release();
    bool fresh = p.kind == NEW && !c.pinned;
    for (int j = 0; j < p.copies; j++) {
        uint8_t* b;
        if (fresh) {
            b = (uint8_t*)malloc(p.bytes);
            if (!b) { fprintf(stderr, "node: malloc(%" PRIu64 ") failed\n", p.bytes); exit(1); }
        } else {
            // pinned: copy j's own part of the area (new) or the area's start
            // (repeated); pageable repeated: the one buffer
            b = p.kind == NEW ? area + (uint64_t)j * p.bytes : area;
        }
        h.buf.push_back(b);
    }
    h.owned = fresh;
    bool last = rep == c.reps - 1;
    if (p.kind == REPEATED && rep > -p.warmup && !(last && p.dir == cudaMemcpyDeviceToHost))
        return;  // touched once, at the first
    uint64_t seed = seed_of(c, k, i, rep);
    for (int j = 0; j < p.copies; j++) {
        if (p.dir == cudaMemcpyHostToDevice && p.kind == NEW && !last) {
            memset(h.buf[j], (int)(seed + (uint64_t)j) & 0xff, p.bytes);  // touched: cheaper than the pattern
        } else if (p.dir == cudaMemcpyHostToDevice) {
            // the checked data: the pattern of copy j's place in the batch
            fill_pattern(h.buf[j], p.bytes, seed, (uint64_t)j * p.bytes);
            if (p.kind == REPEATED) break;  // one buffer
        } else {
            memset(h.buf[j], POISON, p.bytes);
            if (p.kind == REPEATED) break;
        }
    }
}

// The last repetition's copies, checked: H2D against the host data each
// copied, D2H against the device pattern (the same buffer holds the last
// copy only).
void check(const Config& c, int k, size_t i, const Phase& p, const HostSide& h, uint8_t* dev) {
    char what[96];
    for (int j = 0; j < p.copies; j++) {
        snprintf(what, sizeof what, "gpu%d %s %s %" PRIu64 " bytes, copy %d", k, kind_name(p.kind),
                 dir_name(p.dir), p.bytes, j);
        if (p.dir == cudaMemcpyHostToDevice) {
            // a repeated source holds copy 0's data: every copy moved it
            check_device_equals(dev + (uint64_t)j * p.bytes, h.buf[j], p.bytes, what);
        } else if (p.kind == NEW || j == p.copies - 1) {
            check_pattern(h.buf[j], p.bytes, seed_of(c, k, i, -1000), (uint64_t)j * p.bytes, what);
        }
    }
}

// The whole schedule for worker k on device dev; spans[phase][rep] filled.
void worker(const Config& c, int k, int dev, Barrier& b, WorkerSpans& spans) {
    CK(cudaSetDevice(dev));
    CK(cudaFree(0));
    uint64_t most = largest(c);
    DevBuf d(most);
    // repeated (pageable): one buffer of the largest size; pinned: an area
    // holding a repetition's copies
    uint64_t area_bytes = 0;
    for (const Phase& p : c.phases)
        area_bytes = std::max(area_bytes, c.pinned && p.kind == NEW ? p.bytes * p.copies : p.bytes);
    HostBuf area(area_bytes, c.pinned);
    HostSide h;
    spans.assign(c.phases.size(), std::vector<Span>(c.reps));
    for (size_t i = 0; i < c.phases.size(); i++) {
        const Phase& p = c.phases[i];
        if (p.dir == cudaMemcpyDeviceToHost) {  // what D2H brings back, written by a kernel
            fill_pattern_device(d.p, p.bytes * p.copies, seed_of(c, k, i, -1000));
            CK(cudaDeviceSynchronize());
        }
        for (int r = -p.warmup; r < c.reps; r++) {
            prepare(c, k, i, p, r, area.p, h);
            if (p.dir == cudaMemcpyHostToDevice && r == c.reps - 1) {  // no stale data can pass
                CK(cudaMemset(d.p, POISON, p.bytes * p.copies));
                CK(cudaDeviceSynchronize());
            }
            b.wait();
            double t0 = now_s();
            for (int j = 0; j < p.copies; j++) {
                uint8_t* dj = d.p + (uint64_t)j * p.bytes;
                if (p.dir == cudaMemcpyHostToDevice) CK(cudaMemcpy(dj, h.buf[j], p.bytes, p.dir));
                else CK(cudaMemcpy(h.buf[j], dj, p.bytes, p.dir));
            }
            if (p.dir == cudaMemcpyHostToDevice) CK(cudaDeviceSynchronize());
            double t1 = now_s();
            if (r >= 0) spans[i][r] = {t0, t1};
            if (r == c.reps - 1) check(c, k, i, p, h, d.p);
        }
        h.release();
    }
}

// ------------------------------------------------------------- results ---

// The GPUs' rates added up, each over its own span, per repetition; as the
// seconds per copy of size x GPUs bytes at that rate.
Stats summed(const Spans& s, size_t phase, const Phase& p) {
    std::vector<double> t;
    for (size_t r = 0; r < s[0][phase].size(); r++) {
        double rate = 0;  // bytes per second
        for (const auto& w : s) {
            double dt = w[phase][r].t1 - w[phase][r].t0;
            rate += dt > 0 ? (double)p.bytes * p.copies / dt : 0;
        }
        t.push_back(rate > 0 ? (double)p.bytes * s.size() / rate : 0);
    }
    return stats_of(t);
}

std::string sizes_text(const Config& c) {
    std::string t;
    for (uint64_t n : c.sizes) t += (t.empty() ? "" : ",") + std::to_string(n);
    return t;
}

std::string kinds_text(const Config& c) {
    std::string t;
    for (Kind k : c.kinds) t += std::string(t.empty() ? "" : ",") + kind_name(k);
    return t;
}

void report(const Config& c, const Spans& s) {
    Report r("node", c.pinned);
    r.params().integer("gpus", c.gpus).str("workers", c.procs ? "procs" : "threads")
        .str("sizes", sizes_text(c)).str("buffers", kinds_text(c))
        .integer("batch", (long long)c.batch).integer("reps", c.reps)
        .integer("warmup", c.warmup).integer("warmup_repeated", c.warmup_repeated);
    for (size_t i = 0; i < c.phases.size(); i++) {
        const Phase& p = c.phases[i];
        std::string kind = kind_name(p.kind);
        for (int k = 0; k < c.gpus; k++)
            r.add((kind + "_gpu" + std::to_string(k)).c_str(), dir_name(p.dir), p.bytes,
                  per_copy(s[k][i], p.copies));
        r.add((kind + "_sum").c_str(), dir_name(p.dir), p.bytes * c.gpus, summed(s, i, p));
        r.add((kind + "_all").c_str(), dir_name(p.dir), p.bytes * c.gpus, aggregate(s, i, p.copies));
    }
    r.print();
}

// ----------------------------------------------------------- processes ---

// A child of --procs (gpu_workers.cuh): worker k with the parent's pipe barrier.
int child_main(const Config& c, int k, int up, int down, int spans_fd) {
    return workers_child("node", up, down, spans_fd,
                         [&](Barrier& b, WorkerSpans& spans) { worker(c, k, k, b, spans); });
}

// The command line of child k: this program again, the configuration
// spelled out.
std::vector<std::string> child_args(const Config& c, const char* argv0, int k, int up, int down,
                                    int spans) {
    std::vector<std::string> a = {argv0, "--procs", "--child", std::to_string(k),
                                  "--up", std::to_string(up), "--down", std::to_string(down),
                                  "--spans", std::to_string(spans), "--sizes", sizes_text(c),
                                  "--batch", std::to_string(c.batch), "--reps", std::to_string(c.reps),
                                  "--warmup", std::to_string(c.warmup),
                                  "--warmup-repeated", std::to_string(c.warmup_repeated),
                                  "--gpus", std::to_string(c.gpus), "--seed", std::to_string(c.seed)};
    if (c.pinned) a.push_back("--pinned");
    if (std::find(c.kinds.begin(), c.kinds.end(), NEW) == c.kinds.end()) a.push_back("--no-new");
    if (std::find(c.kinds.begin(), c.kinds.end(), REPEATED) == c.kinds.end()) a.push_back("--no-repeated");
    return a;
}

// The parent of --procs: a process per GPU (gpu_workers.cuh).
int parent_main(const Config& c, const char* argv0) {
    report(c, workers_procs("node", c.gpus, c.phases.size(), c.reps,
                            [&](int k, int up, int down, int spans) {
                                return child_args(c, argv0, k, up, down, spans);
                            }));
    return 0;
}

// A thread per GPU (gpu_workers.cuh).
int threads_main(const Config& c) {
    report(c, workers_threads(c.gpus,
                              [&](int k, Barrier& b, WorkerSpans& spans) { worker(c, k, k, b, spans); }));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Args a(argc, argv);
    Config c;
    c.pinned = a.flag("--pinned");
    c.procs = a.flag("--procs");
    c.sizes = a.get_sizes("--sizes", {1ull << 20, 256ull << 20, 1ull << 30});
    c.batch = a.get_size("--batch", c.batch);
    c.reps = (int)a.get_int("--reps", c.reps);
    c.warmup = (int)a.get_int("--warmup", c.warmup);
    c.warmup_repeated = (int)a.get_int("--warmup-repeated", c.warmup_repeated);
    c.gpus = (int)a.get_int("--gpus", 0);
    c.seed = (uint64_t)a.get_int("--seed", 0);
    bool no_new = a.flag("--no-new"), no_repeated = a.flag("--no-repeated");
    c.kinds.clear();
    if (!no_repeated) c.kinds.push_back(REPEATED);
    if (!no_new) c.kinds.push_back(NEW);
    // set by the parent of --procs for its children
    int child = (int)a.get_int("--child", -1);
    int up = (int)a.get_int("--up", -1), down = (int)a.get_int("--down", -1);
    int spans = (int)a.get_int("--spans", -1);
    a.done();
    if (c.reps < 1) die_usage("--reps must be >= 1");
    if (c.warmup < 0 || c.warmup_repeated < 0) die_usage("--warmup must be >= 0");
    if (c.kinds.empty()) die_usage("--no-new and --no-repeated leave nothing to copy");
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
