#!/usr/bin/env python3
"""What Python object churn costs with pinfast preloaded against without:
lists, dicts and strings (the interpreter's small-object allocator), bytes
and bytearrays from 64 KiB to 8 MiB and NumPy arrays from 1 KiB to 64 MiB
(glibc's malloc, and pinfast's heap from PINFAST_REGISTER_MIN on), made,
touched once and dropped in a loop.  No CUDA call: the heap serves the
large blocks all the same.  Prints one JSON line per case, the median of
`--reps` timings.  Run it plain and under LD_PRELOAD=libpinfast.so."""
import argparse
import json
import statistics
import time

import numpy as np


def objects(n):
    for i in range(n):
        d = {"a": [i, i + 1, i + 2], "b": str(i) * 3, "c": (i, float(i))}
        d["d"] = [x * 2 for x in d["a"]]
        del d


def buffers(n):
    sizes = [64 << 10, 256 << 10, 1 << 20, 2 << 20, 8 << 20]
    for i in range(n):
        b = bytearray(sizes[i % len(sizes)])
        b[-1] = 1
        del b


def arrays(n):
    sizes = [1 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
    for i in range(n):
        a = np.empty(sizes[i % len(sizes)] // 4, dtype=np.float32)
        a[::1024] = 1.0
        z = np.zeros(sizes[(i + 3) % len(sizes)] // 4, dtype=np.float32)
        del a, z


CASES = {"objects": (objects, 200000), "buffers": (buffers, 4000), "arrays": (arrays, 600)}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    for name, (fn, n) in CASES.items():
        fn(n // 10)  # warm-up
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            fn(n)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"case": name, "ops": n, "median_s": round(statistics.median(times), 5),
                          "runs_s": [round(t, 5) for t in times]}), flush=True)


if __name__ == "__main__":
    main()
