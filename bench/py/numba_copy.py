"""numba_copy: Numba's cuda.to_device and copy_to_host, into an existing
array and into a fresh one (what copy_to_host() returns). Measurements
`to_device`, `to_host_existing`, `to_host_fresh` in GB/s; every byte is
checked. --pinned: the host arrays from cuda.pinned_array."""
import numpy as np

from pyworkload import Report, copy_args, mismatch, skip

try:
    from numba import cuda
except ImportError:
    skip("numba_copy", "no numba")


def main():
    a = copy_args()
    if not cuda.is_available():
        skip("numba_copy", "numba sees no CUDA device")
    n = a.bytes
    host = cuda.pinned_array(n, dtype=np.uint8) if a.pinned else np.empty(n, dtype=np.uint8)
    host[:] = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    out = cuda.pinned_array(n, dtype=np.uint8) if a.pinned else np.zeros(n, dtype=np.uint8)
    dev = cuda.device_array(n, dtype=np.uint8)
    r = Report("numba_copy", a.pinned, {"bytes": n, "reps": a.reps})
    sync = cuda.synchronize
    r.time_copy("to_device", "H2D", n, a.reps, lambda: dev.copy_to_device(host), sync)
    r.time_copy("to_host_existing", "D2H", n, a.reps, lambda: dev.copy_to_host(out), sync)
    if not np.array_equal(out, host):
        mismatch("numba_copy: copy_to_host into an existing array differs")
    if a.pinned:
        fresh = r.time_copy("to_host_fresh", "D2H", n, a.reps,
                            lambda: dev.copy_to_host(cuda.pinned_array(n, dtype=np.uint8)), sync)
    else:
        fresh = r.time_copy("to_host_fresh", "D2H", n, a.reps, lambda: dev.copy_to_host(), sync)
    if not np.array_equal(fresh, host):
        mismatch("numba_copy: copy_to_host into a fresh array differs")
    r.print()


if __name__ == "__main__":
    main()
