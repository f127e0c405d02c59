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
#include "common.cuh"

#include <cerrno>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

struct Span {
    double t0 = 0, t1 = 0;
};
// spans[worker][phase][rep]
using Spans = std::vector<std::vector<std::vector<Span>>>;

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

class Barrier {
public:
    virtual ~Barrier() = default;
    virtual void wait() = 0;
};

class ThreadBarrier : public Barrier {
public:
    explicit ThreadBarrier(int n) { pthread_barrier_init(&b_, nullptr, n); }
    ~ThreadBarrier() override { pthread_barrier_destroy(&b_); }
    void wait() override { pthread_barrier_wait(&b_); }

private:
    pthread_barrier_t b_;
};

void write_byte(int fd) {
    char c = 1;
    while (write(fd, &c, 1) != 1)
        if (errno != EINTR) { perror("node: barrier write"); exit(1); }
}

// A child's side of the parent's pipe barrier: one byte up, wait for one down.
class PipeBarrier : public Barrier {
public:
    PipeBarrier(int up, int down) : up_(up), down_(down) {}
    void wait() override {
        write_byte(up_);
        char c;
        ssize_t r;
        while ((r = read(down_, &c, 1)) < 0 && errno == EINTR) {}
        if (r != 1) { fprintf(stderr, "node: parent went away\n"); exit(1); }
    }

private:
    int up_, down_;
};

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
void worker(const Config& c, int k, int dev, Barrier& b, std::vector<std::vector<Span>>& spans) {
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

Stats per_copy(const std::vector<Span>& v, int copies) {
    std::vector<double> t;
    for (const Span& s : v) t.push_back((s.t1 - s.t0) / copies);
    return stats_of(t);
}

// From the first worker's start to the last one's end, per repetition.
Stats aggregate(const Spans& s, size_t phase, int copies) {
    std::vector<Span> agg(s[0][phase].size());
    for (size_t r = 0; r < agg.size(); r++) {
        agg[r] = s[0][phase][r];
        for (const auto& w : s) {
            agg[r].t0 = std::min(agg[r].t0, w[phase][r].t0);
            agg[r].t1 = std::max(agg[r].t1, w[phase][r].t1);
        }
    }
    return per_copy(agg, copies);
}

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

// A child of --procs: worker k with the parent's pipe barrier; its spans go
// to the file the parent opened for it, one "phase rep t0 t1" line each.
int child_main(const Config& c, int k, int up, int down, int spans_fd) {
    PipeBarrier b(up, down);
    std::vector<std::vector<Span>> spans;
    worker(c, k, k, b, spans);
    close(up);
    close(down);
    FILE* f = fdopen(spans_fd, "w");
    if (!f) { perror("node: spans"); return 1; }
    for (size_t i = 0; i < spans.size(); i++)
        for (size_t r = 0; r < spans[i].size(); r++)
            fprintf(f, "%zu %zu %.9f %.9f\n", i, r, spans[i][r].t0, spans[i][r].t1);
    return fclose(f) ? 1 : 0;
}

void read_spans(FILE* f, int k, std::vector<std::vector<Span>>& spans) {
    rewind(f);
    size_t i, r, n = 0, want = spans.size() * spans[0].size();
    double t0, t1;
    while (fscanf(f, "%zu %zu %lf %lf", &i, &r, &t0, &t1) == 4 && i < spans.size() && r < spans[i].size()) {
        spans[i][r] = {t0, t1};
        n++;
    }
    fclose(f);
    if (n != want) {
        fprintf(stderr, "node: gpu%d's process left %zu spans, expected %zu\n", k, n, want);
        exit(1);
    }
}

// Kills the children still running and exits with the status of the one that
// failed (2 for a mismatch, so that it is told apart from an API error).
[[noreturn]] void give_up(const std::vector<pid_t>& pids, int status) {
    for (pid_t p : pids)
        if (p > 0) kill(p, SIGKILL);
    for (pid_t p : pids)
        if (p > 0) waitpid(p, nullptr, 0);
    exit(WIFEXITED(status) && WEXITSTATUS(status) ? WEXITSTATUS(status) : 1);
}

// Reaps child k if it ended (block: wait for it); gives up if it failed.
void reap(std::vector<pid_t>& pids, int k, bool block) {
    int st;
    if (pids[k] <= 0 || waitpid(pids[k], &st, block ? 0 : WNOHANG) != pids[k]) return;
    pids[k] = 0;
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "node: gpu%d's process failed (status 0x%x)\n", k, st);
        give_up(pids, st);
    }
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

// The parent of --procs: starts one process per GPU, releases each barrier
// once every child is in it, then gathers the spans.
int parent_main(const Config& c, const char* argv0) {
    signal(SIGPIPE, SIG_IGN);  // a dead child's pipe: an error, seen by write_byte
    int up[2];
    if (pipe(up)) { perror("pipe"); return 1; }
    std::vector<int> down(c.gpus);
    std::vector<pid_t> pids(c.gpus, 0);
    std::vector<FILE*> spans(c.gpus);
    fflush(nullptr);
    for (int k = 0; k < c.gpus; k++) {
        int d[2];
        if (pipe(d) || !(spans[k] = tmpfile())) { perror("node: pipe, tmpfile"); give_up(pids, 0); }
        // built before fork: the child of a threaded process must not allocate
        std::vector<std::string> args = child_args(c, argv0, k, up[1], d[0], fileno(spans[k]));
        std::vector<char*> av;
        for (std::string& x : args) av.push_back(&x[0]);
        av.push_back(nullptr);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); give_up(pids, 0); }
        if (pid == 0) {
            close(up[0]);
            close(d[1]);
            for (int j = 0; j < k; j++) {  // the other children's ends
                close(down[j]);
                close(fileno(spans[j]));
            }
            for (int fd : {up[1], d[0], fileno(spans[k])}) fcntl(fd, F_SETFD, 0);
            execv("/proc/self/exe", av.data());
            perror("node: execv");
            _exit(127);
        }
        close(d[0]);
        down[k] = d[1];
        pids[k] = pid;
    }
    close(up[1]);
    // The pipe ends (read returns 0) once every child closed its end.
    for (int arrived = 0;;) {
        struct pollfd pf = {up[0], POLLIN, 0};
        int n = poll(&pf, 1, 1000);
        if (n < 0 && errno != EINTR) { perror("poll"); give_up(pids, 0); }
        if (n <= 0) {  // quiet for a second: has a child died?
            for (int k = 0; k < c.gpus; k++) reap(pids, k, false);
            continue;
        }
        char buf[64];
        ssize_t got = read(up[0], buf, sizeof buf);
        if (got == 0) break;
        if (got > 0) arrived += (int)got;
        for (; arrived >= c.gpus; arrived -= c.gpus)
            for (int fd : down) write_byte(fd);
    }
    for (int fd : down) close(fd);
    for (int k = 0; k < c.gpus; k++) reap(pids, k, true);
    Spans s(c.gpus, std::vector<std::vector<Span>>(c.phases.size(), std::vector<Span>(c.reps)));
    for (int k = 0; k < c.gpus; k++) read_spans(spans[k], k, s[k]);
    report(c, s);
    return 0;
}

int threads_main(const Config& c) {
    ThreadBarrier b(c.gpus);
    Spans s(c.gpus);
    std::vector<std::thread> th;
    for (int k = 0; k < c.gpus; k++)
        th.emplace_back([&, k] { worker(c, k, k, b, s[k]); });
    for (auto& t : th) t.join();
    report(c, s);
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
