// image2d: 4K RGBA frames up and down with cudaMemcpy2D (OpenCV's
// GpuMat::upload/download, pitched image buffers): the host image's rows lie
// --pad bytes apart beyond the row (a cropped or aligned image), the device
// frames are cudaMallocPitch memory, or with --array a 2D CUDA array of
// uchar4 each (a texture's storage: cudaMemcpy2DToArray / FromArray).  Each
// measurement moves --frames frames (3840 x 2160 x 4 bytes each by default)
// one copy per frame.
//   upload     pageable (or pinned) host image -> device frames;
//   download   device frames -> a second host image, whose padding bytes
//              must stay untouched.
// Checked after the timed repetitions: every row of every frame brought back
// equals the source, and no padding byte was written.
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned"), array = a.flag("--array");
    uint64_t width = a.get_size("--width", 3840), height = a.get_size("--height", 2160);
    uint64_t pad = a.get_size("--pad", 256, true);
    int frames = (int)a.get_int("--frames", 8);
    int reps = (int)a.get_int("--reps", 7);
    a.done();
    if (frames < 1 || reps < 1) die_usage("need --frames >= 1 and --reps >= 1");

    init_device();
    Report r("image2d", pinned);
    uint64_t row = width * 4, hpitch = row + pad, rows = height * frames;
    r.params().integer("width", (long long)width).integer("height", (long long)height)
        .integer("pad", (long long)pad).integer("frames", frames).integer("reps", reps).integer("array", array);

    uint8_t* dev = nullptr;
    size_t dpitch = 0;
    std::vector<cudaArray_t> arrays(array ? frames : 0);
    cudaChannelFormatDesc texel = cudaCreateChannelDesc<uchar4>();
    if (array)
        for (auto& arr : arrays) CK(cudaMallocArray(&arr, &texel, width, height));
    else
        CK(cudaMallocPitch((void**)&dev, &dpitch, row, rows));
    HostBuf src(hpitch * rows, pinned), dst(hpitch * rows, pinned);
    uint64_t seed = fresh_seed();
    fill_pattern(src.p, hpitch * rows, seed);

    auto upload = [&] {
        for (int f = 0; f < frames; f++)
            if (array)
                CK(cudaMemcpy2DToArray(arrays[f], 0, 0, src.p + f * height * hpitch, hpitch, row, height,
                                       cudaMemcpyHostToDevice));
            else
                CK(cudaMemcpy2D(dev + f * height * dpitch, dpitch, src.p + f * height * hpitch, hpitch, row, height,
                                cudaMemcpyHostToDevice));
    };
    auto download = [&] {
        for (int f = 0; f < frames; f++)
            if (array)
                CK(cudaMemcpy2DFromArray(dst.p + f * height * hpitch, hpitch, arrays[f], 0, 0, row, height,
                                         cudaMemcpyDeviceToHost));
            else
                CK(cudaMemcpy2D(dst.p + f * height * hpitch, hpitch, dev + f * height * dpitch, dpitch, row, height,
                                cudaMemcpyDeviceToHost));
    };
    uint64_t moved = row * rows;
    r.add("upload", "H2D", moved, time_reps(1, reps, upload));
    r.add("download", "D2H", moved, time_reps(1, reps, download));

    // the last upload's frames, brought back once more into a poisoned image
    memset(dst.p, POISON, hpitch * rows);
    download();
    for (uint64_t y = 0; y < rows; y++) {
        check_pattern(dst.p + y * hpitch, row, seed, y * hpitch, "download");
        for (uint64_t x = row; x < hpitch; x++)
            if (dst.p[y * hpitch + x] != POISON) die_mismatch("download: padding byte %" PRIu64 " of row %" PRIu64 " written", x, y);
    }
    for (auto arr : arrays) CK(cudaFreeArray(arr));
    CK(cudaFree(dev));
    r.print();
    return 0;
}
