"""cupy_copy: CuPy cp.asarray(numpy array) and cp.asnumpy(device array) of a
large array (seed 003). asnumpy allocates a fresh numpy array each time.
--pinned: the numpy array lives in pinned memory (cupyx.empty_pinned) and the
readback goes into a pinned array with .get(out=...)."""
import argparse

from pyworkload import Report, mismatch, parse_size, skip, time_reps

try:
    import cupy as cp
    import numpy as np
except ImportError:
    skip("cupy_copy", "no cupy")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", default="1G", type=parse_size)
    ap.add_argument("--reps", default=3, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
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

    holder = {}
    t = time_reps(1, a.reps, lambda: holder.update(d=cp.asarray(src)), sync)
    d = holder["d"]
    if int(d.sum(dtype=cp.int64)) != int(src.sum(dtype=np.int64)) or \
            not np.array_equal(cp.asnumpy(d[::4099]), src[::4099]):
        mismatch("cupy_copy: asarray differs from the source")
    rep.add("asarray", "H2D", a.bytes, t)

    if a.pinned:
        import cupyx
        out = cupyx.empty_pinned(a.bytes, dtype=np.uint8)
        t = time_reps(1, a.reps, lambda: holder.update(h=d.get(out=out)), sync)
    else:
        t = time_reps(1, a.reps, lambda: holder.update(h=cp.asnumpy(d)), sync)
    if not np.array_equal(holder["h"], src):
        mismatch("cupy_copy: asnumpy differs from the source")
    rep.add("asnumpy", "D2H", a.bytes, t)
    rep.print()


if __name__ == "__main__":
    main()
