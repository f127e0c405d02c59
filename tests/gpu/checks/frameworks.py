"""PyTorch and CuPy under pinfast: results equal to the CPU's, and (with
PINFAST_STATS=json) an exit report naming their transfers."""
import sys

import numpy as np

n = 64 << 20  # floats: 256 MiB
ok = True
try:
    import torch
    x = torch.randn(n)
    y = x.to("cuda")
    z = y.cpu()
    ok &= torch.equal(x, z)
    p = torch.empty(n, pin_memory=True)
    p.copy_(x)
    w = p.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    ok &= torch.equal(w.cpu(), x)
    q = x.pin_memory()
    ok &= torch.equal(q.to("cuda").cpu(), x)
    print("torch:", "ok" if ok else "MISMATCH")
except ImportError:
    print("torch: not installed")
try:
    import cupy as cp
    a = np.random.default_rng(1).standard_normal(n // 2).astype(np.float32)
    d = cp.asarray(a)
    b = cp.asnumpy(d * 2)
    good = np.array_equal(b, a * 2)
    ok &= good
    print("cupy:", "ok" if good else "MISMATCH")
except ImportError:
    print("cupy: not installed")
sys.exit(0 if ok else 1)
