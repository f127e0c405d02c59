#!/usr/bin/env python3
"""A copy then a small kernel, 16 times a round, as an offloaded model's
forward pass does layer by layer: 16 CPU tensors of 64 MiB, each `.to('cuda')`
then multiplied, the whole round and each copy call timed (medians over
rounds 5-10).  `pinned`: the tensors pinned by hand; `pageable`: as they
are (run it under LD_PRELOAD=libpinfast.so to time pinfast's registered
copies); `thp`: pageable, with huge pages advised before they are filled.
Usage: copy_then_compute.py pinned|pageable|thp"""
import ctypes
import statistics
import sys
import time

import torch

MADV_HUGEPAGE = 14


def make(mode, libc):
    t = torch.empty(4096, 4096)
    if mode == "thp":
        p = t.data_ptr()
        lo, hi = (p + 4095) & ~4095, (p + t.numel() * 4) & ~4095
        if libc.madvise(ctypes.c_void_p(lo), ctypes.c_size_t(hi - lo), MADV_HUGEPAGE):
            sys.exit("madvise failed")
    return t.normal_()


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("pinned", "pageable", "thp"):
        sys.exit(__doc__)
    libc = ctypes.CDLL(None, use_errno=True)
    ts = [make(mode, libc) for _ in range(16)]
    if mode == "pinned":
        ts = [t.pin_memory() for t in ts]
    w = torch.randn(64, 4096, device="cuda")
    res = []
    for rep in range(10):
        torch.cuda.synchronize()
        t0, per = time.perf_counter(), []
        for t in ts:
            a = time.perf_counter()
            g = t.to("cuda")
            per.append(time.perf_counter() - a)
            w @ g
        torch.cuda.synchronize()
        if rep >= 4:
            res.append(((time.perf_counter() - t0) * 1e3, statistics.median(per) * 1e3))
    print("%-8s total %.2f ms, copy call %.3f ms (medians of 6)"
          % (mode, statistics.median(r[0] for r in res), statistics.median(r[1] for r in res)))


if __name__ == "__main__":
    main()
