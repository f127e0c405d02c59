"""tensor_batch: a batch of many small tensors moved to the GPU one by one,
as a collate function's outputs, a parameter list or a dictionary of
features are: --count tensors of 4-256 KiB (random sizes, fixed seed),
each .to('cuda'); measurement `to_cuda` in GB/s of the batch. --pinned:
the tensors pinned (pin_memory()) and copied with non_blocking=True, what
a user would write by hand. Every tensor is checked on the way back."""
import argparse

from pyworkload import Report, mismatch, skip

try:
    import torch
except ImportError:
    skip("tensor_batch", "no torch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--count", default=512, type=int)
    ap.add_argument("--reps", default=7, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("tensor_batch", "torch has no CUDA device")
    g = torch.Generator().manual_seed(7)
    sizes = torch.randint(1 << 10, 64 << 10, (a.count,), generator=g).tolist()  # floats: 4-256 KiB
    batch = [torch.randn(n, generator=g) for n in sizes]
    if a.pinned:
        batch = [t.pin_memory() for t in batch]
    total = sum(t.numel() * 4 for t in batch)
    rep = Report("tensor_batch", a.pinned, vars(a) | {"bytes": total, "torch": torch.__version__})
    out = rep.time_copy("to_cuda", "H2D", total, a.reps,
                        lambda: [t.to("cuda", non_blocking=a.pinned) for t in batch],
                        torch.cuda.synchronize)
    for i, (t, d) in enumerate(zip(batch, out)):
        if not torch.equal(d.cpu(), t):
            mismatch("tensor_batch: tensor %d differs on the GPU" % i)
    rep.print()


if __name__ == "__main__":
    main()
