// Shared helpers for the bundled workloads: error checks, argument parsing,
// host clock timing with medians, verifiable data patterns and one-line JSON.
//
// Every workload is a plain CUDA program: it must behave the same with and
// without libpinfast.so preloaded, so nothing here knows about pinfast.
// The harness (bench/run) reads the single JSON line each program prints on
// stdout; everything else (errors, notes) goes to stderr.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>

// ---------------------------------------------------------------- errors ---

// Any failed CUDA call ends the program with a message and exit status 1:
// the harness treats a non-zero exit as a failed run, never as a data point.
#define CK(call)                                                              \
    do {                                                                      \
        cudaError_t ck_err_ = (call);                                         \
        if (ck_err_ != cudaSuccess) {                                         \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__,\
                    #call, cudaGetErrorString(ck_err_),                       \
                    cudaGetErrorName(ck_err_));                               \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

// Kernel launches report errors lazily; check both the launch and the run.
#define CK_LAUNCH() CK(cudaGetLastError())

// Wrong results exit with status 2 so that they are told apart from API errors.
static inline void die_mismatch(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("MISMATCH: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static inline void die_usage(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("usage error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(64);
}

// ------------------------------------------------------------- arguments ---

// Tiny "--name value" / "--flag" parser. Every option a program reads must be
// declared through get_*/flag before done() is called; done() rejects the
// rest so that a typo in the harness's argument table fails loudly.
class Args {
public:
    Args(int argc, char** argv) : args_(argv + 1, argv + argc), used_(args_.size(), false) {}

    bool flag(const char* name) {
        for (size_t i = 0; i < args_.size(); i++)
            if (args_[i] == name) { used_[i] = true; return true; }
        return false;
    }
    // Sizes accept K, M, G suffixes (powers of 1024): --max-size 64M.
    // zero_ok: 0 is a size too (padding).
    uint64_t get_size(const char* name, uint64_t def, bool zero_ok = false) {
        const char* v = value(name);
        return v ? parse_size(name, v, zero_ok) : def;
    }
    long get_int(const char* name, long def) {
        const char* v = value(name);
        if (!v) return def;
        char* end;
        long r = strtol(v, &end, 10);
        if (*end || end == v) die_usage("%s wants an integer, got '%s'", name, v);
        return r;
    }
    // Comma-separated sizes: --sizes 4,64,4K.
    std::vector<uint64_t> get_sizes(const char* name, std::vector<uint64_t> def) {
        const char* v = value(name);
        if (!v) return def;
        std::vector<uint64_t> out;
        std::string s(v);
        size_t pos = 0;
        while (pos <= s.size()) {
            size_t comma = s.find(',', pos);
            if (comma == std::string::npos) comma = s.size();
            out.push_back(parse_size(name, s.substr(pos, comma - pos).c_str()));
            pos = comma + 1;
        }
        return out;
    }
    void done() {
        for (size_t i = 0; i < args_.size(); i++)
            if (!used_[i]) die_usage("unknown argument '%s'", args_[i].c_str());
    }

private:
    const char* value(const char* name) {
        for (size_t i = 0; i < args_.size(); i++) {
            if (args_[i] != name) continue;
            if (i + 1 >= args_.size()) die_usage("%s needs a value", name);
            used_[i] = used_[i + 1] = true;
            return args_[i + 1].c_str();
        }
        return nullptr;
    }
    static uint64_t parse_size(const char* name, const char* v, bool zero_ok = false) {
        char* end;
        double x = strtod(v, &end);
        uint64_t mul = 1;
        if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
        else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
        else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
        if (*end || end == v || x < 0 || (x == 0 && !zero_ok)) die_usage("%s wants a size, got '%s'", name, v);
        return (uint64_t)(x * (double)mul);
    }
    std::vector<std::string> args_;
    std::vector<bool> used_;
};

// ---------------------------------------------------------------- timing ---

static inline double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
    double median = 0, min = 0, max = 0;
    int reps = 0;
};

static inline Stats stats_of(std::vector<double> v) {
    Stats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    s.min = v.front();
    s.max = v.back();
    s.reps = (int)n;
    return s;
}

// Runs op() `warmup` times untimed, then `reps` times timed with the host
// clock. op must include its own synchronisation (cudaMemcpy returns when
// done for D2H; async copies are followed by a stream sync) so the clock
// covers the whole transfer as an application sees it.
template <class F>
static Stats time_reps(int warmup, int reps, F op) {
    for (int i = 0; i < warmup; i++) op();
    std::vector<double> t;
    t.reserve(reps);
    for (int i = 0; i < reps; i++) {
        double t0 = now_s();
        op();
        t.push_back(now_s() - t0);
    }
    return stats_of(t);
}

// Fewer repetitions for big sizes so one sweep stays within a time budget, but
// never fewer than `lo` (a median needs several samples).
static inline int reps_for(uint64_t bytes, uint64_t budget_bytes, int lo, int hi) {
    uint64_t r = budget_bytes / (bytes ? bytes : 1);
    return (int)std::max<uint64_t>(lo, std::min<uint64_t>(hi, r));
}

// -------------------------------------------------------- data patterns ---

// Byte i of the pattern for `seed` is byte (i % 8) of splitmix64(seed + i/8).
// Cheap on both sides, position-dependent (catches shifted or swapped chunks)
// and different for every seed (catches stale data from an earlier copy).
__host__ __device__ static inline uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

__host__ __device__ static inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
    return (uint8_t)(splitmix64(seed + i / 8) >> (8 * (i % 8)));
}

// A fresh seed per run: "random input" that a stale buffer cannot match.
static inline uint64_t fresh_seed() {
    return splitmix64((uint64_t)std::chrono::steady_clock::now().time_since_epoch().count());
}

// Fills host memory with the pattern; `first` is the pattern index of p[0],
// so a sub-region can be filled or checked on its own.
static inline void fill_pattern(void* p, uint64_t n, uint64_t seed, uint64_t first = 0) {
    uint8_t* b = (uint8_t*)p;
    uint64_t i = 0;
    for (; i < n && (first + i) % 8; i++) b[i] = pattern_byte(seed, first + i);
    for (; i + 8 <= n; i += 8) {  // whole pattern words: 8 bytes per hash
        uint64_t w = splitmix64(seed + (first + i) / 8);
        memcpy(b + i, &w, 8);
    }
    for (; i < n; i++) b[i] = pattern_byte(seed, first + i);
}

// Exits with a message naming the first wrong byte.
static inline void check_pattern(const void* p, uint64_t n, uint64_t seed, uint64_t first, const char* what) {
    const uint8_t* b = (const uint8_t*)p;
    uint64_t i = 0;
    for (; i < n && (first + i) % 8; i++)
        if (b[i] != pattern_byte(seed, first + i)) goto bad;
    for (; i + 8 <= n; i += 8) {
        uint64_t w = splitmix64(seed + (first + i) / 8), got;
        memcpy(&got, b + i, 8);
        if (got != w) break;  // locate the byte below
    }
    for (; i < n; i++)
        if (b[i] != pattern_byte(seed, first + i)) goto bad;
    return;
bad:
    die_mismatch("%s: byte %" PRIu64 " of %" PRIu64 " is 0x%02x, expected 0x%02x", what, i, n,
                 b[i], pattern_byte(seed, first + i));
}

__global__ static void fill_pattern_kernel(uint8_t* p, uint64_t n, uint64_t seed) {
    uint64_t words = n / 8;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t w = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride)
        ((uint64_t*)p)[w] = splitmix64(seed + w);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (uint64_t i = words * 8; i < n; i++) p[i] = pattern_byte(seed, i);
}

// Fills a device buffer (from cudaMalloc, so 8-byte aligned) with the pattern.
static inline void fill_pattern_device(void* d, uint64_t n, uint64_t seed, cudaStream_t s = 0) {
    fill_pattern_kernel<<<1024, 256, 0, s>>>((uint8_t*)d, n, seed);
    CK_LAUNCH();
}

// Position-weighted checksum of a byte buffer, computed identically on host
// and device: sum over 8-byte little-endian words w_j of w_j * (2j + 1),
// modulo 2^64 (the tail is zero-padded). Lets a program check an H2D copy
// without trusting a D2H copy (which is also under test).
__host__ __device__ static inline uint64_t tail_word(const uint8_t* p, uint64_t n) {
    uint64_t w = 0;
    for (uint64_t i = (n / 8) * 8; i < n; i++) w |= (uint64_t)p[i] << (8 * (i % 8));
    return w;
}

static inline uint64_t checksum_host(const void* p, uint64_t n) {
    const uint8_t* b = (const uint8_t*)p;
    uint64_t s = 0, words = n / 8;
    for (uint64_t j = 0; j < words; j++) {
        uint64_t w;
        memcpy(&w, b + 8 * j, 8);
        s += w * (2 * j + 1);
    }
    if (n % 8) s += tail_word(b, n) * (2 * words + 1);
    return s;
}

__global__ static void checksum_kernel(const uint8_t* p, uint64_t n, unsigned long long* out) {
    uint64_t words = n / 8, s = 0;
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; j < words; j += stride)
        s += ((const uint64_t*)p)[j] * (2 * j + 1);
    if (blockIdx.x == 0 && threadIdx.x == 0 && n % 8) s += tail_word(p, n) * (2 * words + 1);
    atomicAdd(out, (unsigned long long)s);  // addition mod 2^64 is order-free
}

static inline uint64_t checksum_device(const void* d, uint64_t n) {
    unsigned long long* out;
    unsigned long long h = 0;
    CK(cudaMalloc(&out, sizeof *out));
    CK(cudaMemset(out, 0, sizeof *out));
    checksum_kernel<<<1024, 256>>>((const uint8_t*)d, n, out);
    CK_LAUNCH();
    // A device-to-device path would be nicer, but this 8-byte D2H is checked
    // by its own nature: a wrong sum fails the comparison anyway.
    CK(cudaMemcpy(&h, out, sizeof h, cudaMemcpyDeviceToHost));
    CK(cudaFree(out));
    return h;
}

// Checks that device memory holds exactly the host bytes (an H2D result).
static inline void check_device_equals(const void* d, const void* h, uint64_t n, const char* what) {
    uint64_t want = checksum_host(h, n), got = checksum_device(d, n);
    if (want != got)
        die_mismatch("%s: device checksum %016" PRIx64 " != host %016" PRIx64 " (%" PRIu64 " bytes)",
                     what, got, want, n);
}

// Poison fills destinations before a checked copy so that a copy that does
// nothing (or only part of the job) cannot pass on leftover correct data.
static const int POISON = 0xA5;

// ------------------------------------------------------- host buffers ---

// A host buffer that is either pageable (malloc, touched so its pages exist:
// the usual state of an application's data) or pinned (cudaMallocHost, the
// "by hand" reference the harness calls the pinned variant).
struct HostBuf {
    uint8_t* p = nullptr;
    uint64_t n = 0;
    bool pinned = false;

    HostBuf() = default;
    HostBuf(uint64_t bytes, bool pin) { alloc(bytes, pin); }
    HostBuf(const HostBuf&) = delete;
    HostBuf& operator=(const HostBuf&) = delete;
    ~HostBuf() { release(); }

    void alloc(uint64_t bytes, bool pin) {
        release();
        n = bytes;
        pinned = pin;
        if (pin) {
            CK(cudaMallocHost((void**)&p, bytes ? bytes : 1));
        } else {
            p = (uint8_t*)malloc(bytes ? bytes : 1);
            if (!p) { fprintf(stderr, "malloc(%" PRIu64 ") failed\n", bytes); exit(1); }
        }
        memset(p, 0, bytes);  // fault every page in now, not inside a timed copy
    }
    void release() {
        if (!p) return;
        if (pinned) CK(cudaFreeHost(p));
        else free(p);
        p = nullptr;
    }
};

// Never-touched host memory, as a program gets for a new large array (a
// fresh tensor from .cpu(), a new numpy array). Anonymous mmap rather than
// malloc: glibc's adaptive mmap threshold would hand back already-faulted heap
// memory for mid sizes after the first free, hiding the first-touch cost.
struct FreshBuf {
    uint8_t* p = nullptr;
    uint64_t n = 0;
    explicit FreshBuf(uint64_t bytes) : n(bytes ? bytes : 1) {
        void* m = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { perror("mmap"); exit(1); }
        p = (uint8_t*)m;
    }
    FreshBuf(const FreshBuf&) = delete;
    FreshBuf& operator=(const FreshBuf&) = delete;
    ~FreshBuf() { munmap(p, n); }
};

struct DevBuf {
    uint8_t* p = nullptr;
    uint64_t n = 0;
    explicit DevBuf(uint64_t bytes) : n(bytes) { CK(cudaMalloc((void**)&p, bytes ? bytes : 1)); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    ~DevBuf() { cudaFree(p); }
};

// ------------------------------------------------------------------ JSON ---

// Builds one JSON object as text. Only what the workloads need: strings
// without control characters, numbers, booleans and nested raw JSON.
class Json {
public:
    Json& str(const char* k, const std::string& v) {
        key(k);
        s_ += '"';
        for (char c : v) {
            if (c == '"' || c == '\\') s_ += '\\';
            s_ += c;
        }
        s_ += '"';
        return *this;
    }
    Json& num(const char* k, double v) {
        char b[64];
        snprintf(b, sizeof b, "%.9g", v);
        key(k);
        s_ += b;
        return *this;
    }
    Json& integer(const char* k, long long v) {
        key(k);
        s_ += std::to_string(v);
        return *this;
    }
    Json& boolean(const char* k, bool v) {
        key(k);
        s_ += v ? "true" : "false";
        return *this;
    }
    Json& raw(const char* k, const std::string& json) {
        key(k);
        s_ += json;
        return *this;
    }
    std::string text() const { return "{" + s_ + "}"; }

private:
    void key(const char* k) {
        if (!s_.empty()) s_ += ',';
        s_ += '"';
        s_ += k;
        s_ += "\":";
    }
    std::string s_;
};

// The output of a workload: its name, parameters and a list of measurements.
// Each measurement is one timed quantity; the harness keys them by
// (name, direction, bytes) and compares variants key by key.
class Report {
public:
    Report(const char* workload, bool pinned) : workload_(workload), pinned_(pinned) {}

    Json& params() { return params_; }

    // bytes: bytes moved by one timed operation (0 if not a transfer);
    // items/unit: what one operation processes, for rates such as copies/s.
    Json& add(const char* name, const char* direction, uint64_t bytes, const Stats& st,
              double items = 0, const char* unit = nullptr) {
        Json m;
        m.str("name", name);
        if (direction) m.str("direction", direction);
        m.integer("bytes", (long long)bytes);
        m.num("seconds", st.median).num("min_s", st.min).num("max_s", st.max).integer("reps", st.reps);
        if (bytes && st.median > 0) m.num("gbps", (double)bytes / st.median / 1e9);
        if (unit && st.median > 0) m.str("unit", unit).num("items", items).num("rate", items / st.median);
        meas_.push_back(m);
        return meas_.back();
    }

    void print() const {
        std::string ms = "[";
        for (size_t i = 0; i < meas_.size(); i++) ms += (i ? "," : "") + meas_[i].text();
        ms += "]";
        Json out;
        out.str("workload", workload_).str("mode", pinned_ ? "pinned" : "pageable");
        out.raw("params", params_.text()).raw("measurements", ms).boolean("verified", true);
        printf("%s\n", out.text().c_str());
        fflush(stdout);
    }

private:
    std::string workload_;
    bool pinned_;
    Json params_;
    std::vector<Json> meas_;
};

// Program start-up shared by all workloads: picks device 0 and creates the
// context outside any timed region.
static inline void init_device() {
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
}

static inline const char* dir_name(cudaMemcpyKind k) {
    return k == cudaMemcpyHostToDevice ? "H2D" : "D2H";
}
