// The report's call sites and NVTX ranges on the real driver (tests/gpu/checks/callsites.sh).
//   callsite_check sites   copies from three functions of known counts, data checked
//   callsite_check small N N synchronous 4-byte H2D copies; prints microseconds per copy
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                              \
    do {                                                                                   \
        cudaError_t e_ = (x);                                                              \
        if (e_ != cudaSuccess) {                                                           \
            std::printf("FAIL %s: %s (%s:%d)\n", #x, cudaGetErrorString(e_), __FILE__, __LINE__); \
            std::exit(1);                                                                  \
        }                                                                                  \
    } while (0)

static volatile int sink; // a store after the calls: no tail call hides a frame

// 3 pageable H2D copies of 64 MiB (staged by pinfast)
extern "C" __attribute__((noinline)) void copy_from_a(void *dev, const unsigned char *host) {
    for (int i = 0; i < 3; i++)
        CK(cudaMemcpy(dev, host, 64 << 20, cudaMemcpyHostToDevice));
    sink = 1;
}

// 10000 pageable H2D copies of 4 KiB (passed through)
extern "C" __attribute__((noinline)) void copy_from_b(void *dev, const unsigned char *host) {
    for (int i = 0; i < 10000; i++)
        CK(cudaMemcpy(static_cast<char *>(dev) + 4096 * (i % 64), host + 4096 * (i % 64), 4096,
                      cudaMemcpyHostToDevice));
    sink = 2;
}

// 5 async D2H copies of 1 MiB into pinned memory
extern "C" __attribute__((noinline)) void copy_from_c(unsigned char *pinned, const void *dev,
                                                      cudaStream_t s) {
    for (int i = 0; i < 5; i++)
        CK(cudaMemcpyAsync(pinned + (1 << 20) * i, static_cast<const char *>(dev) + (1 << 20) * i,
                           1 << 20, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    sink = 3;
}

static int sites() {
    const size_t n = 64 << 20;
    std::vector<unsigned char> host(n), back(n);
    unsigned seed = (unsigned)std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < n; i++)
        host[i] = (unsigned char)((seed += 2654435761u) >> 24);
    void *dev;
    unsigned char *pinned;
    cudaStream_t s;
    CK(cudaMalloc(&dev, n));
    CK(cudaMallocHost(&pinned, 5 << 20));
    CK(cudaStreamCreate(&s));
    copy_from_a(dev, host.data());
    copy_from_b(dev, host.data());
    std::memset(pinned, 0xA5, 5 << 20);
    copy_from_c(pinned, dev, s);
    std::memset(back.data(), 0x5A, n);
    CK(cudaMemcpy(back.data(), dev, n, cudaMemcpyDeviceToHost));
    int bad = std::memcmp(back.data(), host.data(), n) != 0 ||
              std::memcmp(pinned, host.data(), 5 << 20) != 0;
    std::printf("%s sites: data %s after 3 x 64 MiB + 10000 x 4 KiB H2D, 5 x 1 MiB D2H\n",
                bad ? "FAIL" : "PASS", bad ? "differs" : "intact");
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(pinned));
    CK(cudaFree(dev));
    return bad;
}

static int small(long count) {
    void *dev;
    unsigned char host[4] = {1, 2, 3, 4};
    CK(cudaMalloc(&dev, 4));
    for (int i = 0; i < 1000; i++) // warm up
        CK(cudaMemcpy(dev, host, 4, cudaMemcpyHostToDevice));
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < count; i++)
        CK(cudaMemcpy(dev, host, 4, cudaMemcpyHostToDevice));
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("small: %ld copies of 4 B, %.3f us per copy\n", count, s / count * 1e6);
    CK(cudaFree(dev));
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !std::strcmp(argv[1], "sites"))
        return sites();
    if (argc > 2 && !std::strcmp(argv[1], "small"))
        return small(std::atol(argv[2]));
    std::fprintf(stderr, "usage: callsite_check sites | small N\n");
    return 2;
}
