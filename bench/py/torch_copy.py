"""torch_copy: PyTorch x.to('cuda') and y.cpu() of a large pageable tensor
(1 GiB by default). .cpu() allocates a new, never-touched tensor every time,
so first-touch page faults are part of what is measured, as in real code.
--pinned: the source is x.pin_memory() and the readback goes into a pinned
tensor with copy_() (the by-hand fix a user would write)."""
import argparse

from pyworkload import Report, mismatch, parse_size, skip, time_reps

try:
    import torch
except ImportError:
    skip("torch_copy", "no torch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bytes", default="1G", type=parse_size)
    ap.add_argument("--reps", default=3, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("torch_copy", "torch has no CUDA device")

    torch.manual_seed(1234)
    x = torch.randint(0, 256, (a.bytes,), dtype=torch.uint8)
    if a.pinned:
        x = x.pin_memory()
    sync = torch.cuda.synchronize
    rep = Report("torch_copy", a.pinned, {"bytes": a.bytes, "reps": a.reps, "torch": torch.__version__})

    holder = {}
    t = time_reps(1, a.reps, lambda: holder.update(y=x.to("cuda")), sync)
    y = holder["y"]
    # Check on the device: a sum and a strided sample (the sample's own copy
    # is tiny and goes through the same path as everything else).
    if y.sum(dtype=torch.int64).item() != x.sum(dtype=torch.int64).item() or \
            not torch.equal(y[::4099].cpu(), x[::4099]):
        mismatch("torch_copy: x.to('cuda') differs from x")
    rep.add("to_cuda", "H2D", a.bytes, t)

    if a.pinned:
        out = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
        t = time_reps(1, a.reps, lambda: holder.update(z=out.copy_(y)), sync)
    else:
        t = time_reps(1, a.reps, lambda: holder.update(z=y.cpu()), sync)
    if not torch.equal(holder["z"], x):
        mismatch("torch_copy: y.cpu() differs from x")
    rep.add("cpu", "D2H", a.bytes, t)
    rep.print()


if __name__ == "__main__":
    main()
