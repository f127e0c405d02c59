"""offload: a model whose weights live on the CPU and are brought to the GPU
layer by layer at every forward pass, by accelerate's cpu_offload (as for
models larger than the GPU). --layers linear layers of --dim x --dim
floats (64 MiB each by default). Measurement `forward` (seconds per forward
pass, median); the output's sum is compared between variants. --pinned:
the CPU weights handed to cpu_offload pinned by hand."""
import argparse
import time

from pyworkload import Report, skip

try:
    import torch
    from torch import nn
    from accelerate import cpu_offload
except ImportError:
    skip("offload", "no torch or accelerate")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", default=16, type=int)
    ap.add_argument("--dim", default=4096, type=int)
    ap.add_argument("--batch", default=64, type=int)
    ap.add_argument("--reps", default=5, type=int)
    ap.add_argument("--pinned", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        skip("offload", "torch has no CUDA device")
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(a.dim, a.dim, bias=False) for _ in range(a.layers)])
    for m in model:
        nn.init.normal_(m.weight, std=a.dim ** -0.5)
    sd = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if a.pinned:
        sd = {k: v.pin_memory() for k, v in sd.items()}
    cpu_offload(model, execution_device=torch.device("cuda"), state_dict=sd)
    x = torch.randn(a.batch, a.dim, generator=torch.Generator().manual_seed(1)).cuda()
    sums, secs = [], []
    with torch.no_grad():
        for rep in range(a.reps + 1):  # the first warms up
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y = model(x)
            s = y.double().sum().item()  # synchronises
            if rep:
                secs.append(time.perf_counter() - t0)
            sums.append(s)
    r = Report("offload", a.pinned, vars(a) | {"torch": torch.__version__})
    r.add("forward", "H2D", a.layers * a.dim * a.dim * 4, secs, losses=sums)
    r.print()


if __name__ == "__main__":
    main()
