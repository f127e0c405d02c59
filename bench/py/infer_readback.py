"""infer_readback: an inference loop that uploads a batch and reads back
full-size outputs every step (segmentation- or super-resolution-like:
outputs as large as the inputs), into fresh CPU tensors with .cpu().
Measurement `step` (seconds per step, median) with `rate` in samples/s; the
outputs' checksum is compared between variants. --pinned: inputs pinned,
outputs read into pinned tensors with non_blocking copies."""
import argparse
import time

from pyworkload import Report, skip

try:
    import torch
    from torch import nn
except ImportError:
    skip("infer_readback", "no torch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default=16, type=int)
    ap.add_argument("--side", default=512, type=int)
    ap.add_argument("--steps", default=30, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("infer_readback", "torch has no CUDA device")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                          nn.Conv2d(16, 3, 3, padding=1)).cuda().eval()
    g = torch.Generator().manual_seed(1)
    inputs = [torch.rand(a.batch, 3, a.side, a.side, generator=g) for _ in range(4)]
    if a.pinned:
        inputs = [t.pin_memory() for t in inputs]
    secs, sums = [], []
    with torch.no_grad():
        for step in range(a.steps + 3):  # three warm up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            x = inputs[step % 4].to("cuda", non_blocking=a.pinned)
            y = model(x)
            if a.pinned:
                out = torch.empty(y.shape, dtype=y.dtype, pin_memory=True)
                out.copy_(y, non_blocking=True)
                torch.cuda.synchronize()
            else:
                out = y.cpu()
            if step >= 3:
                secs.append(time.perf_counter() - t0)
            sums.append(float(out[:, :, ::64, ::64].double().sum()))
    r = Report("infer_readback", a.pinned, vars(a) | {"torch": torch.__version__})
    per = a.batch * 3 * a.side * a.side * 4
    r.add("step", "H2D+D2H", 2 * per, secs, items=a.batch, unit="samples", losses=sums)
    r.print()


if __name__ == "__main__":
    main()
