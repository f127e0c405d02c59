"""The registration cache under PyTorch and NumPy: CPU tensors and arrays
copied again and again (registered under pinfast), freed and allocated
again in a loop (the allocator hands the same addresses back), each result
compared with its CPU source byte for byte.  Run it without and with
LD_PRELOAD=libpinfast.so: both print "ok" for every case; the exit status
is 1 on any difference.  Usage: python3 register_frameworks.py [rounds] [MiB]"""
import sys

import numpy as np

rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
mib = int(sys.argv[2]) if len(sys.argv) > 2 else 64
n = (mib << 20) // 4  # float32 elements
ok = True


def report(what, good):
    global ok
    ok &= good
    print(f"{what}: {'ok' if good else 'STALE'}", flush=True)


try:
    import torch

    rng = torch.Generator().manual_seed(1)
    # a tensor copied three times, freed, a new one (same size: same address)
    bad = 0
    for r in range(rounds):
        x = torch.rand(n, generator=rng)
        for _ in range(3):
            bad += not torch.equal(x.to("cuda").cpu(), x)
        addr = x.data_ptr()
        del x
        y = torch.rand(n, generator=rng)  # new bytes, most often at addr
        bad += not torch.equal(y.to("cuda").cpu(), y)
        del y
    report(f"torch free and reallocate ({rounds} rounds)", bad == 0)
    # a tensor copied again and again is still pageable to PyTorch
    x = torch.rand(n, generator=rng)
    for _ in range(3):
        x.to("cuda")
    report("torch is_pinned() of a tensor copied three times is False", not x.is_pinned())
    del x
    # offloaded weights: the same CPU tensors brought in at every pass, updated in place
    weights = [torch.rand(n // 8, generator=rng) for _ in range(8)]
    bad = 0
    for step in range(rounds):
        for w in weights:
            before = w.clone()
            g = w.to("cuda", non_blocking=True)
            w.add_(1.0)  # the program reuses the source once the copy returned
            bad += not torch.equal(g.cpu(), before)
    report("torch weights copied every pass, updated in place", bad == 0)
    # D2H into the same CPU buffer again and again, then freed and replaced
    bad = 0
    for r in range(rounds):
        out = torch.empty(n)
        for _ in range(3):
            src = torch.rand(n, device="cuda")
            out.copy_(src, non_blocking=True)  # pageable: lands before returning
            bad += not torch.equal(out, src.cpu())
        del out
    report("torch D2H into reused CPU tensors", bad == 0)
    # NumPy arrays through from_numpy: freed by NumPy's allocator
    bad = 0
    g = np.random.default_rng(2)
    for r in range(rounds):
        a = g.standard_normal(n, dtype=np.float32)
        for _ in range(3):
            bad += not np.array_equal(torch.from_numpy(a).to("cuda").cpu().numpy(), a)
        del a
        b = g.standard_normal(n, dtype=np.float32)
        bad += not np.array_equal(torch.from_numpy(b).to("cuda").cpu().numpy(), b)
        del b
    report(f"numpy free and reallocate ({rounds} rounds)", bad == 0)
except ImportError:
    print("torch: not installed")
sys.exit(0 if ok else 1)
