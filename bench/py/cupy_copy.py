"""cupy_copy: CuPy cp.asarray(numpy array) and cp.asnumpy(device array) of a
large array (seed 003). asnumpy allocates a fresh numpy array each time.
--pinned: the numpy array lives in pinned memory (cupyx.empty_pinned) and the
readback goes into a pinned array with .get(out=...)."""
from pyworkload import Report, copy_args, mismatch, skip

try:
    import cupy as cp
    import numpy as np
except ImportError:
    skip("cupy_copy", "no cupy")


def main():
    a = copy_args()
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # no driver / no device
        skip("cupy_copy", "cupy has no CUDA device: %s" % e)

    rng = np.random.default_rng()
    src = rng.integers(0, 256, a.bytes, dtype=np.uint8)
    if a.pinned:
        import cupyx
        pinned = cupyx.empty_pinned(a.bytes, dtype=np.uint8)
        pinned[...] = src
        src = pinned
    sync = cp.cuda.Device().synchronize
    rep = Report("cupy_copy", a.pinned, {"bytes": a.bytes, "reps": a.reps, "cupy": cp.__version__})

    d = rep.time_copy("asarray", "H2D", a.bytes, a.reps, lambda: cp.asarray(src), sync)
    if int(d.sum(dtype=cp.int64)) != int(src.sum(dtype=np.int64)) or \
            not np.array_equal(cp.asnumpy(d[::4099]), src[::4099]):
        mismatch("cupy_copy: asarray differs from the source")

    if a.pinned:
        import cupyx
        out = cupyx.empty_pinned(a.bytes, dtype=np.uint8)
        h = rep.time_copy("asnumpy", "D2H", a.bytes, a.reps, lambda: d.get(out=out), sync)
    else:
        h = rep.time_copy("asnumpy", "D2H", a.bytes, a.reps, lambda: cp.asnumpy(d), sync)
    if not np.array_equal(h, src):
        mismatch("cupy_copy: asnumpy differs from the source")
    rep.print()


if __name__ == "__main__":
    main()
