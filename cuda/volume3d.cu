// volume3d: a 3D volume up and down with cudaMemcpy3D (texture and volume
// uploads, medical and simulation grids): the host volume's rows lie --pad
// bytes apart beyond the row and its slices --pad-rows rows apart beyond the
// volume's height (a sub-volume of a larger grid); the device volume is
// cudaMalloc3D memory.  Each measurement moves --volumes volumes of
// --width x --height x --depth 4-byte cells, one cudaMemcpy3D each.
//   upload     pageable (or pinned) host volume -> device;
//   download   device -> a second host volume, whose padding must stay
//              untouched.
// Checked after the timed repetitions: every row brought back equals the
// source, and no padding byte was written.
#include "common.cuh"

int main(int argc, char** argv) {
    Args a(argc, argv);
    bool pinned = a.flag("--pinned");
    uint64_t width = a.get_size("--width", 1024), height = a.get_size("--height", 256);
    uint64_t depth = a.get_size("--depth", 64), pad = a.get_size("--pad", 256, true);
    uint64_t pad_rows = a.get_size("--pad-rows", 4, true);
    int volumes = (int)a.get_int("--volumes", 4);
    int reps = (int)a.get_int("--reps", 7);
    a.done();
    if (volumes < 1 || reps < 1 || !width || !height || !depth) die_usage("need sizes, --volumes and --reps >= 1");

    init_device();
    Report r("volume3d", pinned);
    uint64_t row = width * 4, hpitch = row + pad, hheight = height + pad_rows;
    uint64_t hvolume = hpitch * hheight * depth;
    r.params().integer("width", (long long)width).integer("height", (long long)height)
        .integer("depth", (long long)depth).integer("pad", (long long)pad)
        .integer("pad_rows", (long long)pad_rows).integer("volumes", volumes).integer("reps", reps);

    cudaExtent extent = make_cudaExtent(row, height, depth);
    cudaPitchedPtr dev;
    CK(cudaMalloc3D(&dev, make_cudaExtent(row, height, depth * volumes)));
    HostBuf src(hvolume * volumes, pinned), dst(hvolume * volumes, pinned);
    uint64_t seed = fresh_seed();
    fill_pattern(src.p, hvolume * volumes, seed);

    auto copy = [&](int v, bool up) {
        cudaMemcpy3DParms p = {};
        cudaPitchedPtr host = make_cudaPitchedPtr((up ? src.p : dst.p) + v * hvolume, hpitch, row, hheight);
        cudaPitchedPtr d = dev;
        d.ptr = (char*)dev.ptr + (uint64_t)v * depth * height * dev.pitch;
        p.srcPtr = up ? host : d;
        p.dstPtr = up ? d : host;
        p.extent = extent;
        p.kind = up ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
        CK(cudaMemcpy3D(&p));
    };
    auto upload = [&] { for (int v = 0; v < volumes; v++) copy(v, true); };
    auto download = [&] { for (int v = 0; v < volumes; v++) copy(v, false); };
    uint64_t moved = row * height * depth * volumes;
    r.add("upload", "H2D", moved, time_reps(1, reps, upload));
    r.add("download", "D2H", moved, time_reps(1, reps, download));

    // the volumes brought back once more into a poisoned host volume
    memset(dst.p, POISON, hvolume * volumes);
    download();
    for (uint64_t z = 0; z < depth * volumes; z++)
        for (uint64_t y = 0; y < hheight; y++) {
            uint64_t at = z * hheight * hpitch + y * hpitch;
            uint64_t data = y < height ? row : 0;
            if (data)
                check_pattern(dst.p + at, row, seed, at, "download");
            for (uint64_t x = data; x < hpitch; x++)
                if (dst.p[at + x] != POISON)
                    die_mismatch("download: padding byte %" PRIu64 " of row %" PRIu64 " of slice %" PRIu64 " written", x, y, z);
        }
    CK(cudaFree(dev.ptr));
    r.print();
    return 0;
}
