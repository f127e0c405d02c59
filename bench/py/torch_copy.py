"""torch_copy: PyTorch x.to('cuda') and y.cpu() of a large pageable tensor
(1 GiB by default). .cpu() allocates a new, never-touched tensor every time,
so first-touch page faults are part of what is measured, as in real code.
--pinned: the source is x.pin_memory() and the readback goes into a pinned
tensor with copy_() (the by-hand fix a user would write)."""
from pyworkload import Report, copy_args, mismatch, skip

try:
    import torch
except ImportError:
    skip("torch_copy", "no torch")


def main(name="torch_copy"):
    a = copy_args()
    if not torch.cuda.is_available():
        skip(name, "torch has no CUDA device")

    torch.manual_seed(1234)
    x = torch.randint(0, 256, (a.bytes,), dtype=torch.uint8)
    if a.pinned:
        x = x.pin_memory()
    sync = torch.cuda.synchronize
    rep = Report(name, a.pinned, {"bytes": a.bytes, "reps": a.reps, "torch": torch.__version__})

    y = rep.time_copy("to_cuda", "H2D", a.bytes, a.reps, lambda: x.to("cuda"), sync)
    # Check on the device: a sum and a strided sample (the sample's own copy
    # is tiny and goes through the same path as everything else).
    if y.sum(dtype=torch.int64).item() != x.sum(dtype=torch.int64).item() or \
            not torch.equal(y[::4099].cpu(), x[::4099]):
        mismatch(name + ": x.to('cuda') differs from x")

    if a.pinned:
        out = torch.empty(x.shape, dtype=x.dtype, pin_memory=True)
        z = rep.time_copy("cpu", "D2H", a.bytes, a.reps, lambda: out.copy_(y), sync)
    else:
        z = rep.time_copy("cpu", "D2H", a.bytes, a.reps, lambda: y.cpu(), sync)
    if not torch.equal(z, x):
        mismatch(name + ": y.cpu() differs from x")
    rep.print()


if __name__ == "__main__":
    main()
