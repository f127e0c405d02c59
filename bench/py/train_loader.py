"""train_loader: ResNet-18 trained in bf16, fed by a DataLoader whose
workers do CPU work for every sample (decode-like fill, crop, flip,
normalise), as an image pipeline does; --work light leaves out the
blur, so that the producers keep ahead of the GPU and the copies' stalls
show. pin_memory=False by default, so
each batch and its labels are copied from pageable memory with
.to('cuda'); --pinned: pin_memory=True and non_blocking copies, what a
user would write by hand. Measurement `step` (seconds per step, median of
the timed epochs) with `rate` in samples/s; the mean loss of every epoch is
compared between variants (fixed data, seeds and kernels)."""
import argparse
import time

from pyworkload import Report, skip

try:
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, Dataset
    import torchvision
except ImportError:
    skip("train_loader", "no torch or torchvision")


class Images(Dataset):
    """Sample i is made from seed i alone, so every variant sees the same data."""

    def __init__(self, n, side, blur):
        self.n, self.side, self.blur = n, side, blur

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        big = torch.rand(3, self.side + 16, self.side + 16, generator=g)
        if self.blur:
            big = F.avg_pool2d(big.unsqueeze(0), 3, stride=1, padding=1).squeeze(0)
        y0, x0 = (int(v) for v in torch.randint(0, 17, (2,), generator=g))
        img = big[:, y0:y0 + self.side, x0:x0 + self.side]
        if i % 2:
            img = img.flip(2)
        img = (img - 0.5) / 0.25
        return img.contiguous(), i % 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", default=7680, type=int)
    ap.add_argument("--side", default=112, type=int)
    ap.add_argument("--batch", default=128, type=int)
    ap.add_argument("--workers", default=6, type=int)
    ap.add_argument("--epochs", default=2, type=int)
    ap.add_argument("--work", choices=["blur", "light"], default="blur")
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("train_loader", "torch has no CUDA device")
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    loader = DataLoader(Images(a.samples, a.side, a.work == "blur"), batch_size=a.batch, shuffle=True,
                        num_workers=a.workers, pin_memory=a.pinned, drop_last=True,
                        generator=torch.Generator().manual_seed(1),
                        persistent_workers=a.workers > 0)
    model = torchvision.models.resnet18(num_classes=10).cuda().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    steps = len(loader)
    step_s, losses = [], []
    for epoch in range(a.epochs + 1):  # epoch 0 warms up workers, cuDNN, caches
        total, count = torch.zeros((), device="cuda"), 0
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for xb, yb in loader:
            xb = xb.to("cuda", non_blocking=a.pinned)
            yb = yb.to("cuda", non_blocking=a.pinned)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(xb.to(memory_format=torch.channels_last)), yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.detach().float() * len(yb)
            count += len(yb)
        mean = (total / count).item()  # synchronises
        if epoch:
            step_s.append((time.perf_counter() - t0) / steps)
        losses.append(mean)
    if not all(l == l for l in losses):
        print("MISMATCH: NaN loss", flush=True)
        raise SystemExit(2)
    rep = Report("train_loader", a.pinned, vars(a) | {"torch": torch.__version__})
    rep.add("step", "H2D", a.batch * 3 * a.side * a.side * 4, step_s, items=a.batch,
            unit="samples", losses=losses)
    rep.print()


if __name__ == "__main__":
    main()
