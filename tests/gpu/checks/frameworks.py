"""PyTorch, CuPy and JAX under pinfast: results equal to the CPU's, and (with
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
try:
    import jax
    import jax.numpy as jnp
    a = np.random.default_rng(2).standard_normal(n // 2).astype(np.float32)
    good = np.array_equal(np.asarray(jax.device_put(a) * 2), a * 2)
    rng = np.random.default_rng(3)
    for _ in range(16):  # fresh host batches, as a data pipeline feeds them
        batch = rng.integers(0, 256, 8 << 20, dtype=np.uint8)
        good &= int(jnp.sum(jax.device_put(batch), dtype=jnp.uint32)) == int(batch.sum(dtype=np.uint32))
    ok &= good
    print("jax:", "ok" if good else "MISMATCH", "on", jax.devices()[0].platform)
except ImportError:
    print("jax: not installed")
sys.exit(0 if ok else 1)
