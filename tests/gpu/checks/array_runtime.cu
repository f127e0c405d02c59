// array_runtime: the runtime's copies between pageable memory and 2D CUDA
// arrays, in random cases printed so that a plain run and a pinfast run can
// be diffed line by line (tests/gpu/checks/shapes.sh).  The runtime hands
// them to the driver in forms of its own (cudaMemcpy2DToArray: cuMemcpy3D
// of one slice with heights of 0), which the driver-API cases of
// tests/shapes_cases.h only imitate.  Per case: a 2D array of a random
// channel format, filled from pinned memory (never staged); one copy up or
// down with cudaMemcpy2DToArray / FromArray, their Async forms on a stream
// or the legacy one, or cudaMemcpy3D / 3DAsync with the array as one
// side; random widths, offsets and host pitches, and one case in six bad
// (an x off a whole element, a row or rows past the array, a pitch under
// the width).  The line: the return code and a hash of the host buffer and
// of the whole array after it.
// nvcc -O2 -arch=sm_90 -o $B/array_runtime tests/gpu/checks/array_runtime.cu
// Usage: array_runtime <cases> <seed>
#include <cuda_runtime.h>

#include "../samples/check.h"

enum { HOSTSIZE = 24 << 20 };

static uint64_t rs;
static size_t R(size_t lo, size_t hi) { return rng_range(&rs, lo, hi); }

// a format of 1, 2 or 4 channels of 8, 16 or 32 bits: its element's bytes
static cudaChannelFormatDesc format(size_t *elem)
{
    static const int bits[] = {8, 16, 32};
    static const int chans[] = {1, 2, 4};
    int b = bits[R(0, 2)], c = chans[R(0, 2)];
    cudaChannelFormatKind k = b == 32 && R(0, 1) ? cudaChannelFormatKindFloat
                              : R(0, 1)          ? cudaChannelFormatKindSigned
                                                 : cudaChannelFormatKindUnsigned;
    *elem = (size_t)b / 8 * c;
    return cudaCreateChannelDesc(b, c > 1 ? b : 0, c > 2 ? b : 0, c > 2 ? b : 0, k);
}

// every byte of the array, read through pinned memory
static uint64_t array_hash(cudaArray_t a, size_t row, size_t h, unsigned char *pin, uint64_t seed)
{
    CK(cudaMemcpy2DFromArray(pin, row, a, 0, 0, row, h, cudaMemcpyDeviceToHost));
    return hash_bytes(seed, pin, row * h);
}

int main(int argc, char **argv)
{
    int cases = argc > 1 ? atoi(argv[1]) : 200;
    rs = argc > 2 ? strtoull(argv[2], NULL, 0) : 1;
    unsigned char *host = (unsigned char *)malloc(HOSTSIZE), *pin;
    cudaStream_t s;
    if (!host)
        return 2;
    CK(cudaMallocHost((void **)&pin, HOSTSIZE));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < cases; i++) {
        size_t elem;
        cudaChannelFormatDesc fd = format(&elem);
        size_t w = R(1, 4096), h = R(1, 512);
        while (w * elem * h > HOSTSIZE / 2)
            h /= 2;
        size_t row = w * elem;
        cudaArray_t a;
        CK(cudaMallocArray(&a, &fd, w, h));
        uint64_t salt = rng_next(&rs);
        rng_fill(&salt, pin, row * h);
        CK(cudaMemcpy2DToArray(a, 0, 0, pin, row, row, h, cudaMemcpyHostToDevice));
        size_t ex = R(0, w - 1), ey = R(0, h - 1);
        size_t width = elem * R(1, w - ex), rows = R(1, h - ey), x = ex * elem;
        size_t pitch = R(0, 2) ? width + R(1, 300) : width;
        while (pitch * rows > HOSTSIZE)
            rows = rows / 2 + 1;
        int up = (int)R(0, 1), api = (int)R(0, 4), bad = R(0, 5) ? 0 : (int)R(1, 4);
        switch (bad) {
        case 1: x += elem > 1 ? 1 : 0; break;        // off a whole element
        case 2: width += row; break;                  // past the row
        case 3: rows = h - ey + 1; break;             // past the rows
        case 4: pitch = width > 1 ? width - 1 : 0; break; // under the width
        default: break;
        }
        rng_fill(&salt, host, HOSTSIZE);
        cudaMemcpyKind kind = up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
        cudaError_t r;
        if (api < 3) {
            cudaStream_t st = api == 1 ? s : 0;
            if (up)
                r = api ? cudaMemcpy2DToArrayAsync(a, x, ey, host, pitch, width, rows, kind, st)
                        : cudaMemcpy2DToArray(a, x, ey, host, pitch, width, rows, kind);
            else
                r = api ? cudaMemcpy2DFromArrayAsync(host, pitch, a, x, ey, width, rows, kind, st)
                        : cudaMemcpy2DFromArray(host, pitch, a, x, ey, width, rows, kind);
        } else {
            // with an array, the extent and position are in elements
            cudaMemcpy3DParms p = {};
            cudaPitchedPtr hp = make_cudaPitchedPtr(host, pitch, width / elem, rows);
            if (up)
                p.srcPtr = hp, p.dstArray = a, p.dstPos = make_cudaPos(x / elem, ey, 0);
            else
                p.dstPtr = hp, p.srcArray = a, p.srcPos = make_cudaPos(x / elem, ey, 0);
            p.extent = make_cudaExtent(width / elem, rows, 1);
            p.kind = kind;
            r = api == 3 ? cudaMemcpy3D(&p) : cudaMemcpy3DAsync(&p, s);
        }
        cudaGetLastError();
        CK(cudaDeviceSynchronize());
        uint64_t hh = hash_bytes(0, host, HOSTSIZE);
        hh = array_hash(a, row, h, pin, hh);
        printf("%d %s api=%d bad=%d elem=%zu array=%zux%zu x=%zu y=%zu w=%zu rows=%zu pitch=%zu: %d %016llx\n", i,
               up ? "up" : "down", api, bad, elem, w, h, x, ey, width, rows, pitch, (int)r, (unsigned long long)hh);
        fflush(stdout);
        CK(cudaFreeArray(a));
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFreeHost(pin));
    free(host);
    return 0;
}
