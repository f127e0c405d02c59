"""state_dict: a model's weights (--layers tensors of --layer-bytes) moved
to the GPU and back into fresh CPU memory, as a checkpoint load and save do.
Measurements `to_cuda` and `to_cpu` in GB/s; every byte that comes back is
checked against the original. --pinned: the CPU weights pinned
(pin_memory()) and the copies back made into pinned tensors with
non_blocking copies, what a user would write by hand."""
import argparse

from pyworkload import Report, parse_size, skip, mismatch

try:
    import torch
except ImportError:
    skip("state_dict", "no torch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default=24, type=int)
    ap.add_argument("--layer-bytes", default="64M", type=parse_size)
    ap.add_argument("--reps", default=3, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("state_dict", "torch has no CUDA device")
    g = torch.Generator().manual_seed(0)
    n = a.layer_bytes // 4
    sd = {"layer%d.weight" % i: torch.randn(n, generator=g) for i in range(a.layers)}
    if a.pinned:
        sd = {k: v.pin_memory() for k, v in sd.items()}
    total = a.layers * a.layer_bytes
    rep = Report("state_dict", a.pinned, vars(a) | {"torch": torch.__version__})
    sync = torch.cuda.synchronize

    def to_cuda():
        return {k: v.to("cuda", non_blocking=a.pinned) for k, v in sd.items()}

    dev = rep.time_copy("to_cuda", "H2D", total, a.reps, to_cuda, sync)

    def to_cpu():
        if not a.pinned:
            return {k: v.cpu() for k, v in dev.items()}
        out = {k: torch.empty(v.shape, dtype=v.dtype, pin_memory=True) for k, v in dev.items()}
        for k, v in dev.items():
            out[k].copy_(v, non_blocking=True)
        return out

    back = rep.time_copy("to_cpu", "D2H", total, a.reps, to_cpu, sync)
    for k, v in sd.items():
        if not torch.equal(back[k], v):
            mismatch("state_dict: %s differs after the round trip" % k)
    rep.print()


if __name__ == "__main__":
    main()
