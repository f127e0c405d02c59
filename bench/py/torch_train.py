"""torch_train: a small training loop fed by a DataLoader with
pin_memory=False (the default), so every batch is copied from pageable
memory with .to('cuda'). Reports the time per epoch and the mean loss of
every epoch; the harness compares those losses between variants (the data
and the seeds are fixed, so they must agree: pinfast may change speed, never
results). --pinned: pin_memory=True in the DataLoader."""
import argparse
import time

from pyworkload import Report, skip

try:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset
except ImportError:
    skip("torch_train", "no torch")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", default=2048, type=int)
    ap.add_argument("--side", default=128, type=int, help="images are 3 x side x side floats")
    ap.add_argument("--batch", default=64, type=int)
    ap.add_argument("--epochs", default=4, type=int)
    ap.add_argument("--workers", default=2, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("torch_train", "torch has no CUDA device")

    # Determinism: same data, same init, same order, deterministic kernels.
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    x = torch.randn(a.samples, 3, a.side, a.side)
    labels = torch.randint(0, 10, (a.samples,))
    loader = DataLoader(TensorDataset(x, labels), batch_size=a.batch, shuffle=True,
                        num_workers=a.workers, pin_memory=a.pinned,
                        generator=torch.Generator().manual_seed(1), persistent_workers=a.workers > 0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(32 * 16, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    epoch_s, losses = [], []
    for _ in range(a.epochs + 1):  # epoch 0 warms up workers, cuDNN, caches
        t0 = time.perf_counter()
        total, count = torch.zeros((), device="cuda"), 0
        for xb, yb in loader:
            xb = xb.to("cuda", non_blocking=a.pinned)
            yb = yb.to("cuda", non_blocking=a.pinned)
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.detach() * len(yb)
            count += len(yb)
        mean = (total / count).item()  # also synchronises
        epoch_s.append(time.perf_counter() - t0)
        losses.append(mean)
    if not all(l == l for l in losses):  # NaN check
        print("MISMATCH: NaN loss", flush=True)
        raise SystemExit(2)

    rep = Report("torch_train", a.pinned, vars(a) | {"torch": torch.__version__})
    rep.add("epoch", "H2D", x.numel() * 4, epoch_s[1:], items=a.samples, unit="samples",
            losses=losses)
    rep.print()


if __name__ == "__main__":
    main()
